//! Leases (`sys/leases/...`, spec A §2.6, §4.4, §8).
//!
//! Leases are issued by real issuers in the sandbox: every login token has one (id
//! `<token path>/<hash>`, e.g. `auth/idp/login/alice/h3f…`), and every directory library
//! check-out has one (`ad/library/<set>/check-out/<id>`). Revoking a lease revokes what it
//! stands for (the token, or the check-out, which checks the accounts back in). A revocation
//! that fails (its backend object is gone) makes the lease irrevocable, as the real service
//! does after its retries; those are what `sys/leases/count` and `sys/leases` report.
//!
//! Choices where the spec is silent, following the real service:
//! * lookup answers `id, issue_time, expire_time, last_renewal, path, renewable, ttl` (times in
//!   RFC 3339 with nanoseconds; lease IDs end in `h` + 64 hex characters); a missing `lease_id` or unknown lease answers 400 (`lease_id must be specified`,
//!   `invalid lease`);
//! * renew answers the envelope with `lease_id`, `renewable`, `lease_duration` and no data;
//!   token leases answer 400 `tokens cannot be renewed through this endpoint`;
//! * revoke of an unknown lease succeeds; without `sync` revoke and revoke-prefix are
//!   synchronous and answer 204 (the real default is `sync=true`, whatever spec A's table says);
//!   with `sync=false` they answer `202 Accepted` (the sandbox revokes before answering);
//! * `revoke-prefix`/`revoke-force` with a trailing `/` answer 400 `cannot write to a path
//!   ending in '/'` and revoke nothing;
//! * tidy answers 202 with the envelope and the real service's "Tidy operation successfully
//!   started" warning; count/list with a `type` other than `irrevocable` answer 404;
//! * count answers `{lease_count, counts}` and list `{lease_count, leases: [{lease_id, mount_id,
//!   error}]}` (sorted by expiry, then ID), keyed by mount accessor as in the real service; the
//!   list needs sudo (the real service lists `leases` among its root-protected paths); a bad
//!   `limit` answers 500 like the real service; the list's warning is included when more
//!   irrevocable leases exist than `limit` (default 10,000) and `limit` is not `none`, and
//!   `lease_count` then counts the leases returned.
//!
//! Sandbox admin API: `POST /_sandbox/secrets/leases` `{"prefix": "ad/library/x/check-out/",
//! "count": 1, "ttl": 3600, "max_ttl": 0, "renewable": true, "irrevocable": false,
//! "fail_revoke": false, "owner": "<token>"}` creates synthetic leases (to test counts and limits without issuing
//! thousands of real secrets); answers `{"lease_ids": [...]}`.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::Digest;

use super::fields;
use super::http::{multi, ApiError, Resp};
use super::route::Route;
use super::{now, tokens, Ctx, Store, TokenEntry};

/// What a lease stands for, so that revoking it has its real effect.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum LeaseKind {
    Token {
        token: String,
    },
    AdCheckout {
        mount: String,
        set: String,
        accounts: Vec<String>,
    },
    Synthetic {
        fail_revoke: bool,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Lease {
    pub id: String,
    pub issue_time: i64,
    pub expire_time: i64,
    pub last_renewal: Option<i64>,
    pub renewable: bool,
    /// Lease duration given at issue (used when renewing without increment).
    pub ttl: i64,
    /// Hard end of renewals (max_ttl counted from issue), if any.
    pub max_expire: Option<i64>,
    /// Token the secret was issued to (empty for token leases themselves).
    pub owner: String,
    pub mount: String,
    pub kind: LeaseKind,
    /// Set when revocation failed: the lease is irrevocable.
    pub revoke_error: Option<String>,
}

pub fn routes() -> Vec<Route> {
    vec![
        Route::new("leases/lookup").write(lookup).list(list_prefix).sudo_list().doc(
            "Look up a lease.",
            "Retrieve lease metadata: issue and expire time, renewability and remaining TTL.",
        ),
        Route::new("leases/lookup/*prefix").list(list_prefix).sudo().doc(
            "List lease IDs by prefix.",
            "Returns the lease IDs (and sub-prefixes) under a prefix. Requires sudo.",
        ),
        Route::new("leases/renew").write(renew).doc(
            "Renew a lease.",
            "Renews a secret lease, requesting an increment in seconds. Token leases cannot be renewed here.",
        ),
        Route::new("leases/renew/*lease_id").write(renew).doc("Renew a lease given in the URL.", ""),
        Route::new("leases/revoke").write(revoke).doc(
            "Revoke a lease.",
            "Revokes a lease. The revocation is queued unless sync is true.",
        ),
        Route::new("leases/revoke/*lease_id").write(revoke).doc("Revoke a lease given in the URL.", ""),
        Route::new("leases/revoke-force/*prefix").write(revoke_force).sudo().doc(
            "Revoke leases by prefix, ignoring backend errors.",
            "For emergencies only: removes leases even when the backend cannot revoke them.",
        ),
        Route::new("leases/revoke-prefix/*prefix").write(revoke_prefix).sudo().doc(
            "Revoke leases by prefix.",
            "Revokes every secret whose lease ID starts with the prefix, or tokens by path.",
        ),
        Route::new("leases/tidy").write(tidy).doc(
            "Tidy leases.",
            "Revokes leases whose token no longer exists or has expired.",
        ),
        Route::new("leases/count").read(count).doc(
            "Count irrevocable leases.",
            "Total and per-mount counts of irrevocable leases (type must be irrevocable).",
        ),
        Route::new("leases").read(list_irrevocable).sudo().doc(
            "List irrevocable leases.",
            "Irrevocable leases, at most 10,000 unless limit is a number or none.",
        ),
    ]
}

fn salted(id: &str) -> String {
    let h = sha2::Sha256::digest(id.as_bytes());
    // The real service's lease IDs end in `h` and the 64 hex characters of a SHA-256.
    format!("h{}", hex(&h))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn rfc3339(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// Records the lease of a token issued by a login or `auth/token/create`.
pub fn register_token(store: &mut Store, t: &TokenEntry) {
    let Some(exp) = t.expire_time else { return };
    if t.token_type == "batch" {
        return;
    }
    let id = format!("{}/{}", t.path, salted(&t.id));
    store.leases.insert(
        id.clone(),
        Lease {
            id,
            issue_time: t.creation_time,
            expire_time: exp,
            last_renewal: None,
            renewable: t.renewable,
            ttl: t.ttl,
            max_expire: None,
            owner: String::new(),
            mount: t.mount_path.clone(),
            kind: LeaseKind::Token {
                token: t.id.clone(),
            },
            revoke_error: None,
        },
    );
}

/// Issues a lease for a secret (called by secrets engines).
#[allow(clippy::too_many_arguments)]
pub fn issue(
    store: &mut Store,
    id: String,
    mount: &str,
    ttl: i64,
    max_ttl: i64,
    renewable: bool,
    owner: &str,
    kind: LeaseKind,
) -> Lease {
    let n = now();
    let l = Lease {
        id: id.clone(),
        issue_time: n,
        expire_time: n.saturating_add(ttl),
        last_renewal: None,
        renewable,
        ttl,
        max_expire: (max_ttl > 0).then_some(n.saturating_add(max_ttl)),
        owner: owner.to_string(),
        mount: mount.to_string(),
        kind,
        revoke_error: None,
    };
    store.leases.insert(id, l.clone());
    l
}

/// Revokes the leases owned by a token, and the token's own lease.
pub fn revoke_for_token(store: &mut Store, token: &str) {
    let ids: Vec<String> = store
        .leases
        .values()
        .filter(|l| {
            l.owner == token || matches!(&l.kind, LeaseKind::Token { token: t } if t == token)
        })
        .map(|l| l.id.clone())
        .collect();
    for id in ids {
        let _ = revoke_one(store, &id, false);
    }
}

/// Revokes one lease: performs the backend revocation, or records the failure (the lease
/// becomes irrevocable) unless `force`.
pub fn revoke_one(store: &mut Store, id: &str, force: bool) -> Result<(), String> {
    let Some(l) = store.leases.get(id).cloned() else {
        return Ok(());
    };
    let res = match &l.kind {
        LeaseKind::Token { token } => {
            store.leases.remove(id);
            if store.tokens.contains_key(token) {
                tokens::revoke_tree(store, token);
            }
            Ok(())
        }
        LeaseKind::AdCheckout {
            mount,
            set,
            accounts,
        } => crate::secrets::directory::release(store, mount, set, accounts),
        LeaseKind::Synthetic { fail_revoke } => {
            if *fail_revoke {
                Err("failed to revoke: backend refused the revocation".to_string())
            } else {
                Ok(())
            }
        }
    };
    match res {
        Ok(()) => {
            store.leases.remove(id);
            Ok(())
        }
        Err(_) if force => {
            store.leases.remove(id);
            Ok(())
        }
        Err(e) => {
            if let Some(l) = store.leases.get_mut(id) {
                l.revoke_error = Some(e.clone());
            }
            Err(e)
        }
    }
}

/// Revokes leases that have expired (the real service's expiration manager), and removes
/// expired tokens.
pub fn sweep(store: &mut Store) {
    let n = now();
    let expired: Vec<String> = store
        .leases
        .values()
        .filter(|l| {
            l.revoke_error.is_none()
                && l.expire_time <= n
                && !matches!(l.kind, LeaseKind::Token { .. })
        })
        .map(|l| l.id.clone())
        .collect();
    for id in expired {
        let _ = revoke_one(store, &id, false);
    }
    let dead: Vec<String> = store
        .tokens
        .values()
        .filter(|t| t.expire_time.is_some_and(|e| e <= n))
        .map(|t| t.id.clone())
        .collect();
    for t in dead {
        tokens::revoke_tree(store, &t);
    }
}

/// A lease's view, with token leases following their token's current expiry and renewals: a
/// token renewal (`auth/token/renew*`) is a renewal of its lease in OpenBao's expiration manager
/// (`RenewToken` sets the lease entry's `LastRenewalTime`), so the lookup shows `last_renewal`
/// (found with hvac's `auth.token.renew` then `sys.read_lease`, against OpenBao 2.7.2).
fn view(store: &Store, l: &Lease) -> (i64, bool, Option<i64>) {
    if let LeaseKind::Token { token } = &l.kind {
        if let Some(t) = store.tokens.get(token) {
            return (t.expire_time.unwrap_or(0), t.renewable, t.last_renewal);
        }
    }
    (
        l.expire_time,
        l.renewable && l.revoke_error.is_none(),
        l.last_renewal,
    )
}

fn lease_arg(c: &Ctx) -> Result<String, ApiError> {
    let from_url = c.param("lease_id");
    let id = if from_url.is_empty() {
        fields::string_or(&c.data, "lease_id", "")?
    } else {
        from_url
    };
    if id.is_empty() {
        return Err(ApiError::bad_request("lease_id must be specified"));
    }
    Ok(id)
}

fn lookup(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = lease_arg(c)?;
    let store = c.store();
    let Some(l) = store.leases.get(&id).cloned() else {
        return Err(ApiError::bad_request("invalid lease"));
    };
    let (exp, renewable, last) = view(store, &l);
    let last = last.map(rfc3339);
    // The real lookup (OpenBao 2.7) answers `path` (the lease ID without its last segment) and
    // `last_renewal`, with RFC 3339 timestamps carrying nanoseconds.
    let path =
        l.id.rsplit_once('/')
            .map(|(p, _)| p)
            .unwrap_or("")
            .to_string();
    Ok(Resp::data(json!({
        "id": l.id,
        "issue_time": rfc3339(l.issue_time),
        "expire_time": rfc3339(exp),
        "last_renewal": last,
        "path": path,
        "renewable": renewable,
        "ttl": (exp - now()).max(0),
    })))
}

fn list_prefix(c: &mut Ctx) -> Result<Resp, ApiError> {
    let mut prefix = c.param("prefix");
    if !prefix.is_empty() && !prefix.ends_with('/') {
        prefix.push('/');
    }
    let mut keys = BTreeSet::new();
    for id in c.store().leases.keys() {
        if let Some(rest) = id.strip_prefix(&prefix) {
            match rest.split_once('/') {
                Some((seg, _)) => keys.insert(format!("{seg}/")),
                None => keys.insert(rest.to_string()),
            };
        }
    }
    Resp::list(keys)
}

fn renew(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = lease_arg(c)?;
    let inc = fields::duration(&c.data, "increment")?.unwrap_or(0);
    if inc < 0 {
        return Err(ApiError::bad_request("cannot specify a negative increment"));
    }
    let store = c.store();
    let Some(mut l) = store.leases.get(&id).cloned() else {
        return Err(ApiError::bad_request("lease not found"));
    };
    if matches!(l.kind, LeaseKind::Token { .. }) {
        return Err(ApiError::bad_request(
            "tokens cannot be renewed through this endpoint",
        ));
    }
    if l.revoke_error.is_some() {
        return Err(ApiError::bad_request(
            "lease is expired and has failed previous revocation attempts",
        ));
    }
    if l.expire_time <= now() {
        return Err(ApiError::bad_request("lease expired"));
    }
    if !l.renewable {
        return Err(ApiError::bad_request("lease is not renewable"));
    }
    let n = now();
    // A check-out renewed without increment gets its set's current ttl (see `ad::renewal_ttl`).
    let base = crate::secrets::directory::renewal_ttl(store, &l).unwrap_or(l.ttl);
    let mut ttl = if inc > 0 { inc } else { base };
    if let Some(max) = l.max_expire {
        ttl = ttl.min((max - n).max(0));
    }
    l.expire_time = n + ttl;
    l.last_renewal = Some(n);
    store.leases.insert(id.clone(), l.clone());
    if let LeaseKind::AdCheckout { .. } = &l.kind {
        crate::secrets::directory::note_renewal(store, &l);
    }
    Ok(Resp {
        lease_id: id,
        renewable: true,
        lease_duration: ttl,
        force_body: true,
        ..Resp::default()
    })
}

fn accepted() -> Resp {
    Resp::raw(StatusCode::ACCEPTED, Value::Null)
}

/// Revokes one lease. Without `sync` the revocation is synchronous (204): the real server's
/// default is `sync=true` (OpenBao 2.7), whatever spec A's table says; `sync=false` answers 202.
fn revoke(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = lease_arg(c)?;
    let sync = fields::bool_or(&c.data, "sync", true)?;
    let res = revoke_one(c.store(), &id, false);
    match (res, sync) {
        (Err(e), true) => Err(ApiError::bad_request(format!(
            "failed to revoke lease: {e}"
        ))),
        (_, true) => Ok(Resp::no_content()),
        (_, false) => Ok(accepted()),
    }
}

fn ids_with_prefix(store: &Store, prefix: &str) -> Vec<String> {
    store
        .leases
        .keys()
        .filter(|k| k.starts_with(prefix))
        .cloned()
        .collect()
}

/// The real server refuses writes to a path ending in `/`: `revoke-prefix/<p>/` and
/// `revoke-force/<p>/` are 400 `cannot write to a path ending in '/'` and revoke nothing
/// (OpenBao 2.7; lease-list keys end in `/`, so this is the natural mistake).
fn no_trailing_slash(c: &Ctx) -> Result<(), ApiError> {
    if c.path.ends_with('/') {
        return Err(ApiError::bad_request(
            "cannot write to a path ending in '/'",
        ));
    }
    Ok(())
}

/// Revokes every lease under a prefix; synchronous by default like [`revoke`].
fn revoke_prefix(c: &mut Ctx) -> Result<Resp, ApiError> {
    no_trailing_slash(c)?;
    let prefix = c.param("prefix");
    let sync = fields::bool_or(&c.data, "sync", true)?;
    let ids = ids_with_prefix(c.store(), &prefix);
    let mut failed = Vec::new();
    for id in ids {
        if let Err(e) = revoke_one(c.store(), &id, false) {
            failed.push(e);
        }
    }
    // Tokens by path (those without a lease, e.g. with no TTL).
    let toks: Vec<String> = c
        .store()
        .tokens
        .values()
        .filter(|t| !t.path.is_empty() && t.path.starts_with(&prefix) && t.policies != ["root"])
        .map(|t| t.id.clone())
        .collect();
    for t in toks {
        tokens::revoke_tree(c.store(), &t);
    }
    match (failed.first(), sync) {
        (Some(e), true) => Err(ApiError::bad_request(format!(
            "failed to revoke prefix: {e}"
        ))),
        (_, true) => Ok(Resp::no_content()),
        (_, false) => Ok(accepted()),
    }
}

fn revoke_force(c: &mut Ctx) -> Result<Resp, ApiError> {
    no_trailing_slash(c)?;
    let prefix = c.param("prefix");
    for id in ids_with_prefix(c.store(), &prefix) {
        let _ = revoke_one(c.store(), &id, true);
    }
    Ok(Resp::no_content())
}

fn tidy(c: &mut Ctx) -> Result<Resp, ApiError> {
    let store = c.store();
    let n = now();
    let orphans: Vec<String> = store
        .leases
        .values()
        .filter(|l| !l.owner.is_empty())
        .filter(|l| {
            store
                .tokens
                .get(&l.owner)
                .is_none_or(|t| t.expire_time.is_some_and(|e| e <= n))
        })
        .map(|l| l.id.clone())
        .collect();
    for id in orphans {
        let _ = revoke_one(store, &id, false);
    }
    // The real service answers 202 with the envelope and this warning.
    Ok(Resp {
        raw_status: Some(StatusCode::ACCEPTED),
        ..Resp::no_content().warn(
            "Tidy operation successfully started. Any information from the operation will be printed to Vault's server logs.",
        )
    })
}

fn irrevocable_type(c: &Ctx) -> Result<bool, ApiError> {
    Ok(fields::string_or(&c.data, "type", "")?.eq_ignore_ascii_case("irrevocable"))
}

fn count(c: &mut Ctx) -> Result<Resp, ApiError> {
    if !irrevocable_type(c)? {
        return Err(ApiError::not_found());
    }
    fields::bool_or(&c.data, "include_child_namespaces", false)?;
    let mut counts = serde_json::Map::new();
    let mut total = 0;
    let store = c.store();
    for l in store.leases.values().filter(|l| l.revoke_error.is_some()) {
        total += 1;
        let e = counts
            .entry(mount_accessor(store, &l.mount))
            .or_insert(json!(0));
        *e = json!(e.as_i64().unwrap_or(0) + 1);
    }
    Ok(Resp::data(
        json!({ "lease_count": total, "counts": counts }),
    ))
}

pub const DEFAULT_LIST_LIMIT: usize = 10_000;

fn list_irrevocable(c: &mut Ctx) -> Result<Resp, ApiError> {
    if !irrevocable_type(c)? {
        return Err(ApiError::not_found());
    }
    fields::bool_or(&c.data, "include_child_namespaces", false)?;
    // The real service answers a bad limit with a plain (500) error.
    let limit_s = fields::string_or(&c.data, "limit", "")?;
    let limit = match limit_s.trim() {
        "" => Some(DEFAULT_LIST_LIMIT),
        l if l.eq_ignore_ascii_case("none") => None,
        n => match n.parse::<i64>() {
            Ok(v) if v >= 1 => Some(v as usize),
            Ok(_) => {
                return Err(ApiError::internal(multi(
                    "limit must be 'none' or a positive integer",
                )))
            }
            Err(_) => {
                return Err(ApiError::internal(multi(&format!(
                    "invalid 'limit' provided: strconv.Atoi: parsing {n:?}: invalid syntax"
                ))))
            }
        },
    };
    let store = c.store();
    let mut all: Vec<Lease> = store
        .leases
        .values()
        .filter(|l| l.revoke_error.is_some())
        .cloned()
        .collect();
    // Sorted by expiry, then lease ID, as the real service sorts them.
    all.sort_by(|a, b| a.expire_time.cmp(&b.expire_time).then(a.id.cmp(&b.id)));
    let truncated = limit.is_some_and(|l| all.len() > l);
    let shown: Vec<Value> = all
        .iter()
        .take(limit.unwrap_or(usize::MAX))
        .map(|l| json!({ "lease_id": l.id, "mount_id": mount_accessor(store, &l.mount), "error": l.revoke_error }))
        .collect();
    let mut resp = Resp::data(json!({ "lease_count": shown.len(), "leases": shown }));
    if truncated {
        resp = resp.warn(MAX_WARNING);
    }
    Ok(resp)
}

/// The real service's warning when more irrevocable leases exist than the limit.
pub const MAX_WARNING: &str = "Command halted because many irrevocable leases were found. To emit the entire list, re-run the command with force set true.";

/// Leases are counted and listed by the accessor of their mount, as in the real service.
fn mount_accessor(store: &Store, mount: &str) -> String {
    store
        .mounts
        .iter()
        .find(|m| m.path == mount)
        .map(|m| m.accessor.clone())
        .unwrap_or_else(|| mount.to_string())
}

/// `POST /_sandbox/secrets/leases`: synthetic leases for tests.
pub fn admin_create(store: &mut Store, body: &Value) -> (u16, Value) {
    let prefix = body["prefix"]
        .as_str()
        .unwrap_or("sandbox/synthetic/")
        .to_string();
    let count = body["count"].as_u64().unwrap_or(1);
    let ttl = body["ttl"].as_i64().unwrap_or(3600);
    let max_ttl = body["max_ttl"].as_i64().unwrap_or(0);
    let renewable = body["renewable"].as_bool().unwrap_or(true);
    let irrevocable = body["irrevocable"].as_bool().unwrap_or(false);
    let fail_revoke = body["fail_revoke"].as_bool().unwrap_or(false) || irrevocable;
    let mount = store
        .mounts
        .iter()
        .filter(|m| prefix.starts_with(&m.path))
        .max_by_key(|m| m.path.len())
        .map(|m| m.path.clone())
        .unwrap_or_else(|| {
            prefix
                .split('/')
                .next()
                .map(|s| format!("{s}/"))
                .unwrap_or_default()
        });
    let mut ids = Vec::new();
    for _ in 0..count {
        let id = format!("{prefix}{}", uuid::Uuid::new_v4().simple());
        let owner = body["owner"].as_str().unwrap_or("");
        let mut l = issue(
            store,
            id.clone(),
            &mount,
            ttl,
            max_ttl,
            renewable,
            owner,
            LeaseKind::Synthetic { fail_revoke },
        );
        if irrevocable {
            l.revoke_error = Some("failed to revoke: backend refused the revocation".into());
            store.leases.insert(id.clone(), l);
        }
        if ids.len() < 1000 {
            ids.push(id);
        }
    }
    (200, json!({ "lease_ids": ids }))
}
