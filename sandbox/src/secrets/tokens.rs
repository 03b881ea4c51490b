//! The token store (`auth/token/...`): issuing tokens for logins and `create`, lookup, renew and
//! revoke, as the real service does.
//!
//! Defaults of the real service: tokens live 768h (`2764800` s) unless the mount or the auth
//! method's `token_ttl` says otherwise, capped by `token_max_ttl` (or 768h) and
//! `token_explicit_max_ttl`; a periodic token gets its period as TTL on every renewal. The
//! `default` policy is added unless `no_default_policy`. A non-root token may only give a child
//! token a subset of its own policies.

use std::collections::BTreeMap;

use rand::distr::Alphanumeric;
use rand::Rng;
use serde_json::{json, Value};

use super::fields;
use super::http::{ApiError, Resp};
use super::route::Route;
use super::{now, Ctx, Store, TokenEntry};

/// The real service's system default and maximum lease TTL.
pub const SYSTEM_TTL: i64 = 768 * 3600;

pub fn routes() -> Vec<Route> {
    vec![
        Route::new("create")
            .write(create)
            .doc("Create a token.", ""),
        Route::new("create-orphan")
            .write(create)
            .sudo()
            .doc("Create an orphan token.", ""),
        Route::new("lookup-self")
            .read(lookup_self)
            .write(lookup_self)
            .doc("Look up the calling token.", ""),
        Route::new("lookup")
            .read(lookup)
            .write(lookup)
            .doc("Look up a token.", ""),
        Route::new("lookup-accessor")
            .write(lookup_accessor)
            .doc("Look up a token by accessor.", ""),
        Route::new("renew-self")
            .write(renew_self)
            .doc("Renew the calling token.", ""),
        Route::new("renew").write(renew).doc("Renew a token.", ""),
        Route::new("revoke-self")
            .write(revoke_self)
            .doc("Revoke the calling token.", ""),
        Route::new("revoke")
            .write(revoke)
            .doc("Revoke a token and its children.", ""),
        Route::new("revoke-accessor")
            .write(revoke_accessor)
            .doc("Revoke a token by accessor.", ""),
        // hvac's `renew_accessor` and the Go client's `RenewAccessor` call this.
        Route::new("renew-accessor")
            .write(renew_accessor)
            .doc("Renew a token by accessor.", ""),
        // The real service lists `auth/token/revoke-orphan` among its sudo paths; hvac's
        // `revoke_and_orphan_children` calls it.
        Route::new("revoke-orphan")
            .write(revoke_orphan)
            .sudo()
            .doc("Revoke a token, leaving its children as orphans.", ""),
        Route::new("accessors")
            .list(accessors)
            .sudo()
            .doc("List token accessors.", ""),
    ]
}

/// What to issue.
#[derive(Clone, Debug, Default)]
pub struct TokenSpec {
    pub policies: Vec<String>,
    pub no_default_policy: bool,
    pub ttl: i64,
    pub max_ttl: i64,
    pub explicit_max_ttl: i64,
    pub period: i64,
    pub num_uses: i64,
    pub display_name: String,
    pub meta: BTreeMap<String, String>,
    pub path: String,
    pub entity_id: String,
    pub renewable: bool,
    pub token_type: String,
    pub mount_path: String,
    pub orphan: bool,
    pub parent: String,
    /// Policies computed by the auth method, reported in `auth.metadata.policies`.
    pub id: Option<String>,
}

fn random(n: usize) -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(n)
        .map(char::from)
        .collect()
}

/// Effective TTL at issue time.
fn initial_ttl(s: &TokenSpec) -> i64 {
    if s.period > 0 {
        return if s.explicit_max_ttl > 0 {
            s.period.min(s.explicit_max_ttl)
        } else {
            s.period
        };
    }
    let max = if s.max_ttl > 0 { s.max_ttl } else { SYSTEM_TTL };
    let mut ttl = if s.ttl > 0 { s.ttl } else { SYSTEM_TTL };
    ttl = ttl.min(max);
    if s.explicit_max_ttl > 0 {
        ttl = ttl.min(s.explicit_max_ttl);
    }
    ttl
}

pub fn sanitize_policies(mut p: Vec<String>, add_default: bool) -> Vec<String> {
    if add_default && !p.iter().any(|x| x == "root") {
        p.push("default".into());
    }
    fields::policy_list(p)
}

/// Issues a token and returns the `auth` object of the response.
pub fn issue(store: &mut Store, spec: TokenSpec) -> (TokenEntry, Value) {
    let policies = sanitize_policies(spec.policies.clone(), !spec.no_default_policy);
    let ttl = if policies.iter().any(|p| p == "root") && spec.ttl == 0 && spec.period == 0 {
        0
    } else {
        initial_ttl(&spec)
    };
    let created = now();
    // Batch tokens (`hvb.`) have no accessor, cannot be renewed and hold no lease, as in the
    // real service.
    let batch = spec.token_type == "batch";
    let id = spec.id.clone().unwrap_or_else(|| {
        if batch {
            format!("hvb.{}", random(48))
        } else {
            format!("hvs.{}", random(24))
        }
    });
    let entry = TokenEntry {
        id: id.clone(),
        accessor: if batch { String::new() } else { random(24) },
        policies: policies.clone(),
        path: spec.path.clone(),
        display_name: spec.display_name.clone(),
        meta: spec.meta.clone(),
        entity_id: spec.entity_id.clone(),
        creation_time: created,
        ttl,
        explicit_max_ttl: spec.explicit_max_ttl,
        period: spec.period,
        num_uses: spec.num_uses,
        token_type: if spec.token_type.is_empty() || spec.token_type == "default" {
            "service".into()
        } else {
            spec.token_type.clone()
        },
        renewable: spec.renewable && ttl > 0 && !batch,
        expire_time: (ttl > 0).then_some(created + ttl),
        mount_path: spec.mount_path.clone(),
        orphan: spec.orphan,
        parent: spec.parent.clone(),
        max_ttl: spec.max_ttl,
        last_renewal: None,
        login_digest: None,
    };
    store.tokens.insert(id, entry.clone());
    let auth = auth_json(&entry, &spec.meta);
    (entry, auth)
}

pub fn auth_json(e: &TokenEntry, meta: &BTreeMap<String, String>) -> Value {
    let token_policies: Vec<&String> = e.policies.iter().collect();
    json!({
        "client_token": e.id,
        "accessor": e.accessor,
        "policies": e.policies,
        "token_policies": token_policies,
        "metadata": if meta.is_empty() { Value::Null } else { json!(meta) },
        "lease_duration": e.remaining(),
        "renewable": e.renewable,
        "entity_id": e.entity_id,
        "token_type": e.token_type,
        "orphan": e.orphan,
        "mfa_requirement": Value::Null,
        "num_uses": e.num_uses,
    })
}

impl TokenEntry {
    /// Seconds left; 0 for tokens without expiry.
    pub fn remaining(&self) -> i64 {
        self.expire_time.map(|e| (e - now()).max(0)).unwrap_or(0)
    }
}

fn rfc3339(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

pub fn lookup_data(e: &TokenEntry, show_id: bool) -> Value {
    let mut v = json!({
        "accessor": e.accessor,
        "creation_time": e.creation_time,
        "creation_ttl": e.ttl,
        "display_name": e.display_name,
        "entity_id": e.entity_id,
        "expire_time": e.expire_time.map(rfc3339),
        "explicit_max_ttl": e.explicit_max_ttl,
        "id": if show_id { e.id.clone() } else { String::new() },
        "issue_time": rfc3339(e.creation_time),
        "meta": if e.meta.is_empty() { Value::Null } else { json!(e.meta) },
        "num_uses": e.num_uses,
        "orphan": e.orphan,
        "path": e.path,
        "policies": e.policies,
        "renewable": e.renewable,
        "ttl": e.remaining(),
        "type": e.token_type,
    });
    // OpenBao 2.7 omits `period` when the token has none, and shows the last renewal once
    // there was one.
    if let Value::Object(m) = &mut v {
        if e.period > 0 {
            m.insert("period".into(), json!(e.period));
        }
        if let Some(t) = e.last_renewal {
            m.insert("last_renewal".into(), json!(rfc3339(t)));
            m.insert("last_renewal_time".into(), json!(t));
        }
    }
    v
}

fn caller(c: &Ctx) -> Result<TokenEntry, ApiError> {
    c.token.clone().ok_or_else(ApiError::permission_denied)
}

fn create(c: &mut Ctx) -> Result<Resp, ApiError> {
    let parent = caller(c)?;
    let is_root = parent.policies.iter().any(|p| p == "root");
    let mut policies =
        fields::policy_list(fields::comma_list(&c.data, "policies")?.unwrap_or_default());
    if policies.is_empty() && !fields::has(&c.data, "policies") {
        policies = parent
            .policies
            .iter()
            .filter(|p| *p != "default")
            .cloned()
            .collect();
    }
    if !is_root {
        let allowed: Vec<&String> = parent.policies.iter().collect();
        if policies
            .iter()
            .any(|p| p != "default" && !allowed.contains(&p))
        {
            return Err(ApiError::bad_request(
                "child policies must be subset of parent",
            ));
        }
    }
    let meta: BTreeMap<String, String> = match c.data.get("meta") {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or(&v.to_string()).to_string()))
            .collect(),
        _ => BTreeMap::new(),
    };
    let num_uses = fields::int(&c.data, "num_uses")?.unwrap_or(0);
    if num_uses < 0 {
        return Err(ApiError::bad_request("number of uses cannot be negative"));
    }
    let token_type = fields::string_or(&c.data, "type", "service")?;
    if !matches!(token_type.as_str(), "service" | "batch" | "default" | "") {
        return Err(ApiError::bad_request(format!(
            "unsupported token type {token_type:?}"
        )));
    }
    let display = fields::string_or(&c.data, "display_name", "")?;
    let orphan = c.path.ends_with("create-orphan") || fields::bool_or(&c.data, "no_parent", false)?;
    let spec = TokenSpec {
        policies,
        no_default_policy: fields::bool_or(&c.data, "no_default_policy", false)?,
        ttl: fields::duration(&c.data, "ttl")?.unwrap_or(0),
        explicit_max_ttl: fields::duration(&c.data, "explicit_max_ttl")?.unwrap_or(0),
        period: fields::duration(&c.data, "period")?.unwrap_or(0),
        num_uses,
        display_name: if display.is_empty() {
            "token".into()
        } else {
            format!("token-{display}")
        },
        meta: meta.clone(),
        path: "auth/token/create".into(),
        entity_id: parent.entity_id.clone(),
        renewable: fields::bool_or(&c.data, "renewable", true)?,
        token_type,
        mount_path: "auth/token/".into(),
        orphan,
        parent: if orphan {
            String::new()
        } else {
            parent.id.clone()
        },
        id: if is_root {
            fields::string(&c.data, "id")?.filter(|s| !s.is_empty())
        } else {
            None
        },
        max_ttl: 0,
    };
    if let Some(id) = &spec.id {
        if c.store().tokens.contains_key(id) {
            return Err(ApiError::bad_request(
                "cannot create a token with a duplicate ID",
            ));
        }
    }
    let (entry, auth) = issue(c.store(), spec);
    super::leases::register_token(c.store(), &entry);
    Ok(Resp {
        auth: Some(auth),
        ..Resp::default()
    })
}

fn lookup_self(c: &mut Ctx) -> Result<Resp, ApiError> {
    let t = caller(c)?;
    let e = c
        .store()
        .token(&t.id)
        .cloned()
        .ok_or_else(ApiError::permission_denied)?;
    Ok(Resp::data(lookup_data(&e, true)))
}

fn token_arg(c: &Ctx) -> Result<String, ApiError> {
    match fields::string(&c.data, "token")? {
        Some(t) if !t.is_empty() => Ok(t),
        _ => Err(ApiError::bad_request("missing token to look up")),
    }
}

fn lookup(c: &mut Ctx) -> Result<Resp, ApiError> {
    let t = token_arg(c)?;
    match c.store().token(&t).cloned() {
        Some(e) => Ok(Resp::data(lookup_data(&e, true))),
        None => Err(ApiError::bad_request("bad token")),
    }
}

fn by_accessor(c: &mut Ctx) -> Result<TokenEntry, ApiError> {
    let a = fields::string(&c.data, "accessor")?.unwrap_or_default();
    if a.is_empty() {
        return Err(ApiError::bad_request("missing accessor"));
    }
    let n = now();
    c.store()
        .tokens
        .values()
        .find(|t| t.accessor == a && t.expire_time.is_none_or(|e| e > n))
        .cloned()
        .ok_or_else(|| ApiError::bad_request("invalid accessor"))
}

fn lookup_accessor(c: &mut Ctx) -> Result<Resp, ApiError> {
    let e = by_accessor(c)?;
    Ok(Resp::data(lookup_data(&e, false)))
}

/// Renews a token: the new TTL is the increment (or the token's configured TTL), re-reading
/// the issuing auth method's current `token_ttl`/`token_max_ttl`, capped by the maximum
/// lifetime counted from creation.
pub fn renew_token(store: &mut Store, id: &str, increment: i64) -> Result<Value, ApiError> {
    let Some(mut e) = store.token(id).cloned() else {
        return Err(ApiError::bad_request("invalid token"));
    };
    if !e.renewable {
        return Err(ApiError::bad_request("lease is not renewable"));
    }
    // A login token renews to its auth method's current `token_ttl`; any other token to its
    // own TTL (a token created with `ttl: 1h` renews to 3600 s, as OpenBao 2.7 does), never
    // to the system maximum.
    let (cfg_ttl, cfg_max, cfg_period) = super::idp::current_token_ttls(store, &e.mount_path)
        .unwrap_or((e.ttl, e.max_ttl, e.period));
    // The method's current `token_period` applies too (re-read at every renewal).
    e.period = cfg_period;
    let n = now();
    let new_ttl = if e.period > 0 {
        e.period
    } else {
        let base = if increment > 0 {
            increment
        } else if cfg_ttl > 0 {
            cfg_ttl
        } else {
            SYSTEM_TTL
        };
        let max = if cfg_max > 0 { cfg_max } else { SYSTEM_TTL };
        base.min((e.creation_time + max - n).max(0))
    };
    let new_ttl = if e.explicit_max_ttl > 0 {
        new_ttl.min((e.creation_time + e.explicit_max_ttl - n).max(0))
    } else {
        new_ttl
    };
    e.expire_time = Some(n + new_ttl);
    e.last_renewal = Some(n);
    store.tokens.insert(e.id.clone(), e.clone());
    Ok(auth_json(&e, &e.meta))
}

fn renew_self(c: &mut Ctx) -> Result<Resp, ApiError> {
    let t = caller(c)?;
    let inc = fields::duration(&c.data, "increment")?.unwrap_or(0);
    super::idp::reauthenticate(c.world, c.cluster, &t.id)?;
    let auth = renew_token(c.store(), &t.id, inc)?;
    Ok(Resp {
        auth: Some(auth),
        ..Resp::default()
    })
}

fn renew(c: &mut Ctx) -> Result<Resp, ApiError> {
    let t = token_arg(c)?;
    let inc = fields::duration(&c.data, "increment")?.unwrap_or(0);
    super::idp::reauthenticate(c.world, c.cluster, &t)?;
    let auth = renew_token(c.store(), &t, inc)?;
    Ok(Resp {
        auth: Some(auth),
        ..Resp::default()
    })
}

/// Revokes a token and its children (and, through [`super::leases`], its leases).
pub fn revoke_tree(store: &mut Store, id: &str) {
    let children: Vec<String> = store
        .tokens
        .values()
        .filter(|t| t.parent == id)
        .map(|t| t.id.clone())
        .collect();
    for ch in children {
        revoke_tree(store, &ch);
    }
    store.tokens.remove(id);
    super::leases::revoke_for_token(store, id);
}

fn revoke_self(c: &mut Ctx) -> Result<Resp, ApiError> {
    let t = caller(c)?;
    revoke_tree(c.store(), &t.id);
    Ok(Resp::no_content())
}

fn revoke(c: &mut Ctx) -> Result<Resp, ApiError> {
    let t = token_arg(c)?;
    revoke_tree(c.store(), &t);
    Ok(Resp::no_content())
}

fn revoke_accessor(c: &mut Ctx) -> Result<Resp, ApiError> {
    let e = by_accessor(c)?;
    revoke_tree(c.store(), &e.id);
    Ok(Resp::no_content())
}

/// Renews the token behind an accessor. As in the real service the answer carries the `auth`
/// block without the token itself (`client_token` is empty).
fn renew_accessor(c: &mut Ctx) -> Result<Resp, ApiError> {
    let e = by_accessor(c)?;
    let inc = fields::duration(&c.data, "increment")?.unwrap_or(0);
    super::idp::reauthenticate(c.world, c.cluster, &e.id)?;
    let mut auth = renew_token(c.store(), &e.id, inc)?;
    if let Some(m) = auth.as_object_mut() {
        m.insert("client_token".into(), Value::String(String::new()));
    }
    Ok(Resp {
        auth: Some(auth),
        ..Resp::default()
    })
}

/// Revokes only the token and its leases; its children become orphans (no parent).
fn revoke_orphan(c: &mut Ctx) -> Result<Resp, ApiError> {
    let t = token_arg(c)?;
    let store = c.store();
    if store.token(&t).is_none() {
        return Ok(Resp::no_content());
    }
    for child in store.tokens.values_mut().filter(|x| x.parent == t) {
        child.parent.clear();
        child.orphan = true;
    }
    store.tokens.remove(&t);
    super::leases::revoke_for_token(store, &t);
    Ok(Resp::no_content())
}

fn accessors(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = now();
    let mut keys: Vec<String> = c
        .store()
        .tokens
        .values()
        .filter(|t| t.expire_time.is_none_or(|e| e > n))
        .map(|t| t.accessor.clone())
        .collect();
    keys.sort();
    Resp::list(keys)
}
