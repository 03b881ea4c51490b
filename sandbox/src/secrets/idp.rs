//! The identity-provider auth method (the real service's Okta method, renamed `idp`; spec A
//! §2.2–2.4, §4.2), mounted at `auth/idp/` by default and at any path enabled through
//! `sys/auth/:path` with type `idp`.
//!
//! Behaviour copied from the real method where the spec is silent:
//! * `config` has an existence check, so creating it needs the `create` capability and changing
//!   it needs `update`; `org_name` (or its old alias `organization`) is required on create;
//!   `api_token` (old alias `token`) is write-only; reading an absent config answers 404; with
//!   `bypass_idp_mfa` (alias `bypass_okta_mfa`, the field real clients send) on, config writes
//!   and reads carry the real method's bypass warning;
//! * users and groups have no existence check (writing them needs `update`) and every write
//!   replaces the entry; group names are stored lower-cased and looked up case-insensitively,
//!   group policies are lower-cased and sorted, user policies are kept as given;
//! * login answers 400 with an error for bad credentials or failed MFA
//!   (`idp auth failed`, `multi-factor authentication denied`, ...); MFA providers are `OKTA`
//!   and `GOOGLE` (case-insensitive), push is only offered by `OKTA`, a TOTP passcode is
//!   preferred over push when given;
//! * tokens get the config's `token_policies`, the policies of the user's groups (local groups
//!   of the user, plus the provider's groups when `api_token` is set) and the user's policies;
//!   `auth.metadata.policies` lists the user and group policies, sorted, joined by commas;
//! * `token_bound_cidrs` is validated and stored; every sandbox client is on loopback, so it is
//!   checked against `127.0.0.1`.
//! * config `token_policies` and the other `token_*` lists are kept as given, only trimmed;
//!   the read has `ttl`/`max_ttl` and `base_url` only when set, and no `policies` alias;
//!   `token_type: batch` with `token_period` or `token_num_uses` is refused with tokenutil's
//!   messages (`... when set to generate periodic tokens`, `... with limited use count`);
//! * renewing a login token re-authenticates the user (a changed password fails with `idp
//!   auth failed`), refuses changed policies (`policies have changed, not renewing`) and
//!   re-reads `token_ttl`, `token_max_ttl` and `token_period`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::fields;
use super::http::{ApiError, PushWait, Resp};
use super::provider::ChallengeState;
use super::route::Route;
use super::tokens::{self, TokenSpec};
use super::{identity, otp, Ctx, Mount, Store, World};

/// State of one mount of the method.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IdpMount {
    pub config: Option<IdpConfig>,
    pub users: BTreeMap<String, Entry>,
    pub groups: BTreeMap<String, Entry>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IdpConfig {
    pub org_name: String,
    pub api_token: String,
    pub base_url: String,
    pub bypass_idp_mfa: bool,
    pub token_ttl: i64,
    pub token_max_ttl: i64,
    pub token_policies: Vec<String>,
    pub token_bound_cidrs: Vec<String>,
    pub token_explicit_max_ttl: i64,
    pub token_no_default_policy: bool,
    pub token_num_uses: i64,
    pub token_period: i64,
    pub token_type: String,
    /// The deprecated `ttl`/`max_ttl`, kept apart and read back only when set.
    #[serde(default)]
    pub ttl: i64,
    #[serde(default)]
    pub max_ttl: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Entry {
    pub groups: Vec<String>,
    pub policies: Vec<String>,
}

pub const PROVIDERS: &[&str] = &["OKTA", "GOOGLE"];

pub fn routes() -> Vec<Route> {
    vec![
        Route::new("config")
            .read(read_config)
            .write(write_config)
            .exists(|c| mount_state(c).config.is_some())
            .doc(
                "Configure the identity-provider organization and token defaults.",
                "",
            ),
        Route::new("users")
            .list(|c| list(c, false))
            .doc("List users with local policies or groups.", ""),
        Route::new("users/:name")
            .read(|c| read_entry(c, false))
            .write(|c| write_entry(c, false))
            .delete(|c| delete_entry(c, false))
            .doc("Manage a user's local groups and policies.", ""),
        Route::new("groups")
            .list(|c| list(c, true))
            .doc("List groups with local policies.", ""),
        Route::new("groups/:name")
            .read(|c| read_entry(c, true))
            .write(|c| write_entry(c, true))
            .delete(|c| delete_entry(c, true))
            .doc("Manage a group's policies.", ""),
        Route::new("login/:username")
            .write(login)
            .unauth()
            .doc("Log in with a username and password.", ""),
        Route::new("verify/:nonce")
            .read(verify)
            .unauth()
            .doc("Read the number challenge of a push verification.", ""),
    ]
}

fn mount_state<'a>(c: &'a mut Ctx) -> &'a mut IdpMount {
    let path = c.mount.path.clone();
    c.store().idp.entry(path).or_default()
}

/// The current `token_ttl`/`token_max_ttl`/`token_period` of the method that issued a token
/// (read at renewal, as the real method's renew does).
pub fn current_token_ttls(store: &Store, mount_path: &str) -> Option<(i64, i64, i64)> {
    let cfg = store.idp.get(mount_path)?.config.as_ref()?;
    Some((cfg.token_ttl, cfg.token_max_ttl, cfg.token_period))
}

fn digest(password: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(password.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Renewing a login token re-authenticates its user with the provider, as the real method's
/// renew does: a changed password (or a locked-out user) fails the renewal (400 `idp auth
/// failed`), and so do changed policies (500 `policies have changed, not renewing`). Tokens
/// of other methods pass.
pub fn reauthenticate(world: &mut World, cluster: usize, token: &str) -> Result<(), ApiError> {
    let Some(t) = world.clusters[cluster].store.tokens.get(token).cloned() else {
        return Ok(());
    };
    let Some(want) = t.login_digest.clone() else {
        return Ok(());
    };
    let username = t.meta.get("username").cloned().unwrap_or_default();
    let ok = world
        .provider
        .users
        .get(&username)
        .is_some_and(|u| digest(&u.password) == want && u.status != "LOCKED_OUT");
    if !ok {
        return Err(fail("idp auth failed"));
    }
    let store = &world.clusters[cluster].store;
    let Some(cfg) = store.idp.get(&t.mount_path).and_then(|m| m.config.clone()) else {
        return Err(fail("idp auth method not configured"));
    };
    let provider_groups = world
        .provider
        .users
        .get(&username)
        .map(|u| u.groups.clone())
        .unwrap_or_default();
    let m = store.idp.get(&t.mount_path).cloned().unwrap_or_default();
    let (_, mut now) = login_policies(&m, &cfg, &username, provider_groups);
    now.extend(cfg.token_policies.clone());
    let norm = |p: &[String]| -> std::collections::BTreeSet<String> {
        tokens::sanitize_policies(p.to_vec(), false)
            .into_iter()
            .filter(|x| x != "default")
            .collect()
    };
    if norm(&now) != norm(&t.policies) {
        return Err(ApiError::internal(super::http::multi(
            "policies have changed, not renewing",
        )));
    }
    Ok(())
}

/// The user's and groups' policies of a login (sorted), and the warnings of the login.
fn login_policies(
    m: &IdpMount,
    cfg: &IdpConfig,
    username: &str,
    provider_groups: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    let mut all_groups: Vec<String> = Vec::new();
    let mut warnings = Vec::new();
    if !cfg.api_token.is_empty() {
        if provider_groups.is_empty() {
            warnings.push(
                "no IdP groups found; only policies from locally-defined groups available"
                    .to_string(),
            );
        }
        all_groups.extend(provider_groups);
    }
    let user = m.users.get(username).cloned();
    if let Some(u) = &user {
        all_groups.extend(u.groups.iter().cloned());
    }
    let mut policies: Vec<String> = Vec::new();
    for g in &all_groups {
        let entry = m.groups.get(g).or_else(|| {
            m.groups
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(g))
                .map(|(_, v)| v)
        });
        if let Some(e) = entry {
            policies.extend(e.policies.iter().cloned());
        }
    }
    if let Some(u) = &user {
        policies.extend(u.policies.iter().cloned());
    }
    // The real method sorts the user and group policies before joining them.
    policies.sort();
    (warnings, policies)
}

fn read_config(c: &mut Ctx) -> Result<Resp, ApiError> {
    let Some(cfg) = mount_state(c).config.clone() else {
        return Err(ApiError::not_found());
    };
    // As the real method reads it: `base_url` only when set, `ttl`/`max_ttl` only when set,
    // no `policies` alias.
    let mut resp = Resp::data(json!({
        "org_name": cfg.org_name,
        "organization": cfg.org_name,
        "bypass_idp_mfa": cfg.bypass_idp_mfa,
        "bypass_okta_mfa": cfg.bypass_idp_mfa,
        "token_bound_cidrs": cfg.token_bound_cidrs,
        "token_explicit_max_ttl": cfg.token_explicit_max_ttl,
        "token_max_ttl": cfg.token_max_ttl,
        "token_no_default_policy": cfg.token_no_default_policy,
        "token_num_uses": cfg.token_num_uses,
        "token_period": cfg.token_period,
        "token_policies": cfg.token_policies,
        "token_ttl": cfg.token_ttl,
        "token_type": if cfg.token_type.is_empty() { "default".to_string() } else { cfg.token_type.clone() },
    }));
    if let Some(Value::Object(d)) = &mut resp.data {
        if !cfg.base_url.is_empty() {
            d.insert("base_url".into(), json!(cfg.base_url));
        }
        if cfg.ttl > 0 {
            d.insert("ttl".into(), json!(cfg.ttl));
        }
        if cfg.max_ttl > 0 {
            d.insert("max_ttl".into(), json!(cfg.max_ttl));
        }
    }
    if cfg.bypass_idp_mfa {
        resp = resp.warn(BYPASS_WARNING);
    }
    Ok(resp)
}

/// The real method's warning when MFA bypass is on (answered on config write and read).
const BYPASS_WARNING: &str = "IdP MFA bypass is configured. In addition to ignoring IdP MFA requests, certain other account statuses will not be seen, such as PASSWORD_EXPIRED. Authentication will succeed in these cases.";

fn valid_cidr(s: &str) -> bool {
    let (ip, bits) = match s.split_once('/') {
        Some((ip, b)) => (ip, Some(b)),
        None => (s, None),
    };
    let Ok(addr) = ip.parse::<std::net::IpAddr>() else {
        return false;
    };
    match bits {
        None => true,
        Some(b) => b
            .parse::<u8>()
            .is_ok_and(|b| b <= if addr.is_ipv4() { 32 } else { 128 }),
    }
}

fn cidr_contains(cidr: &str, ip: std::net::Ipv4Addr) -> bool {
    let (net, bits) = match cidr.split_once('/') {
        Some((n, b)) => (n, b.parse::<u32>().unwrap_or(32)),
        None => (cidr, 32),
    };
    let Ok(net) = net.parse::<std::net::Ipv4Addr>() else {
        return false;
    };
    if bits == 0 {
        return true;
    }
    let mask = u32::MAX << (32 - bits.min(32));
    (u32::from(net) & mask) == (u32::from(ip) & mask)
}

fn write_config(c: &mut Ctx) -> Result<Resp, ApiError> {
    let creating = c.op == super::http::Op::Create;
    let d = c.data.clone();
    let mut cfg = mount_state(c).config.clone().unwrap_or_default();
    if let Some(o) = fields::string(&d, "org_name")?.filter(|s| !s.is_empty()) {
        cfg.org_name = o;
    } else if let Some(o) = fields::string(&d, "organization")?.filter(|s| !s.is_empty()) {
        cfg.org_name = o;
    }
    if cfg.org_name.is_empty() {
        return Err(ApiError::bad_request("org_name is missing"));
    }
    let _ = creating;
    if let Some(t) = fields::string(&d, "api_token")? {
        cfg.api_token = t;
    } else if let Some(t) = fields::string(&d, "token")? {
        cfg.api_token = t;
    }
    if let Some(b) = fields::string(&d, "base_url")? {
        if b.contains(char::is_whitespace) {
            return Err(ApiError::bad_request(format!(
                "Error parsing given base_url: invalid base_url {b:?}"
            )));
        }
        cfg.base_url = b;
    }
    // hvac and other real clients send the original field name.
    if let Some(b) =
        fields::boolean(&d, "bypass_idp_mfa")?.or(fields::boolean(&d, "bypass_okta_mfa")?)
    {
        cfg.bypass_idp_mfa = b;
    }
    // Token fields (the real service's tokenutil): lists are kept as given, only trimmed (not
    // lower-cased, sorted or de-duplicated); there is no `policies` alias. The deprecated
    // `ttl`/`max_ttl` are kept apart and fill `token_ttl`/`token_max_ttl` when those are not
    // given.
    if let Some(p) = fields::comma_list(&d, "token_policies")? {
        cfg.token_policies = p
            .into_iter()
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect();
    }
    let old_ttl = fields::duration(&d, "ttl")?;
    let old_max = fields::duration(&d, "max_ttl")?;
    if let Some(v) = old_ttl {
        cfg.ttl = v;
    }
    if let Some(v) = old_max {
        cfg.max_ttl = v;
    }
    if let Some(v) = fields::duration(&d, "token_ttl")?.or(old_ttl) {
        cfg.token_ttl = v;
    }
    if let Some(v) = fields::duration(&d, "token_max_ttl")?.or(old_max) {
        cfg.token_max_ttl = v;
    }
    if let Some(v) = fields::duration(&d, "token_explicit_max_ttl")? {
        cfg.token_explicit_max_ttl = v;
    }
    if let Some(v) = fields::duration(&d, "token_period")? {
        cfg.token_period = v;
    }
    if let Some(v) = fields::int(&d, "token_num_uses")? {
        cfg.token_num_uses = v;
    }
    if let Some(v) = fields::boolean(&d, "token_no_default_policy")? {
        cfg.token_no_default_policy = v;
    }
    if let Some(v) = fields::comma_list(&d, "token_bound_cidrs")? {
        if let Some(bad) = v.iter().find(|x| !valid_cidr(x)) {
            return Err(ApiError::bad_request(format!(
                "error parsing token_bound_cidrs: invalid CIDR address: {bad}"
            )));
        }
        cfg.token_bound_cidrs = v.into_iter().map(|x| x.trim().to_string()).collect();
    }
    if let Some(v) = fields::string(&d, "token_type")? {
        match v.as_str() {
            "" | "default" => cfg.token_type = "default".into(),
            "service" | "batch" => cfg.token_type = v,
            "default-service" | "default-batch" => {
                return Err(ApiError::bad_request(format!(
                    "invalid 'token_type' value {v:?}"
                )))
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "invalid 'token_type' value {other:?}"
                )))
            }
        }
    }
    for (k, v) in [
        ("token_ttl", cfg.token_ttl),
        ("token_max_ttl", cfg.token_max_ttl),
        ("token_explicit_max_ttl", cfg.token_explicit_max_ttl),
        ("token_period", cfg.token_period),
    ] {
        if v < 0 {
            return Err(ApiError::bad_request(format!("'{k}' cannot be negative")));
        }
    }
    if cfg.token_num_uses < 0 {
        return Err(ApiError::bad_request("'token_num_uses' cannot be negative"));
    }
    if cfg.token_max_ttl > 0 && cfg.token_ttl > cfg.token_max_ttl {
        return Err(ApiError::bad_request(
            "'token_ttl' cannot be greater than 'token_max_ttl'",
        ));
    }
    // tokenutil's messages: the period is checked before the use count.
    if cfg.token_type == "batch" && cfg.token_period > 0 {
        return Err(ApiError::bad_request(
            "'token_type' cannot be 'batch' or 'default_batch' when set to generate periodic tokens",
        ));
    }
    if cfg.token_type == "batch" && cfg.token_num_uses > 0 {
        return Err(ApiError::bad_request(
            "'token_type' cannot be 'batch' or 'default_batch' when set to generate tokens with limited use count",
        ));
    }
    let bypass = cfg.bypass_idp_mfa;
    mount_state(c).config = Some(cfg);
    Ok(if bypass {
        Resp::no_content().warn(BYPASS_WARNING)
    } else {
        Resp::no_content()
    })
}

fn list(c: &mut Ctx, groups: bool) -> Result<Resp, ApiError> {
    let m = mount_state(c);
    let keys: Vec<String> = if groups {
        m.groups.keys().cloned().collect()
    } else {
        m.users.keys().cloned().collect()
    };
    Resp::list(keys)
}

/// Groups are looked up case-insensitively (the provider is case-preserving but
/// case-insensitive); new group names are stored lower-cased, as in the real method.
fn group_key(m: &IdpMount, n: &str) -> Option<String> {
    if m.groups.contains_key(n) {
        return Some(n.to_string());
    }
    m.groups.keys().find(|k| k.eq_ignore_ascii_case(n)).cloned()
}

fn read_entry(c: &mut Ctx, group: bool) -> Result<Resp, ApiError> {
    let mut n = c.param("name");
    if group {
        n = group_key(mount_state(c), &n).unwrap_or(n);
    }
    let m = mount_state(c);
    let e = if group {
        m.groups.get(&n)
    } else {
        m.users.get(&n)
    };
    let Some(e) = e.cloned() else {
        return Err(ApiError::not_found());
    };
    if group {
        Ok(Resp::data(json!({ "policies": e.policies })))
    } else {
        Ok(Resp::data(
            json!({ "policies": e.policies, "groups": e.groups }),
        ))
    }
}

fn write_entry(c: &mut Ctx, group: bool) -> Result<Resp, ApiError> {
    let n = c.param("name");
    if n.is_empty() {
        return Err(ApiError::bad_request(if group {
            "'name' must be supplied"
        } else {
            "Error empty name"
        }));
    }
    let d = c.data.clone();
    // Every write replaces the entry: fields not given become empty, as in the real method.
    let policies = fields::comma_list(&d, "policies")?.unwrap_or_default();
    let m = mount_state(c);
    if group {
        let key = group_key(m, &n).unwrap_or_else(|| n.to_lowercase());
        m.groups.insert(
            key,
            Entry {
                groups: vec![],
                policies: fields::policy_list(policies),
            },
        );
    } else {
        let groups = fields::comma_list(&d, "groups")?.unwrap_or_default();
        mount_state(c).users.insert(n, Entry { groups, policies });
    }
    Ok(Resp::no_content())
}

fn delete_entry(c: &mut Ctx, group: bool) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let m = mount_state(c);
    if group {
        if let Some(k) = group_key(m, &n) {
            m.groups.remove(&k);
        }
    } else {
        m.users.remove(&n);
    }
    Ok(Resp::no_content())
}

fn verify(c: &mut Ctx) -> Result<Resp, ApiError> {
    let nonce = c.param("nonce");
    match c.world.provider.verify_cache.get(&nonce) {
        Some(a) => Ok(Resp::data(json!({ "correct_answer": a }))),
        None => Err(ApiError::not_found()),
    }
}

fn fail(msg: &str) -> ApiError {
    ApiError::bad_request(msg)
}

fn login(c: &mut Ctx) -> Result<Resp, ApiError> {
    let username = c.param("username");
    let password = fields::string_or(&c.data, "password", "")?;
    let totp = fields::string_or(&c.data, "totp", "")?;
    let nonce = fields::string_or(&c.data, "nonce", "")?;
    let preferred = fields::string_or(&c.data, "provider", "")?.to_uppercase();
    if !preferred.is_empty() && !PROVIDERS.contains(&preferred.as_str()) {
        return Err(fail(&format!(
            "provider {preferred} is not among the supported ones [GOOGLE OKTA]"
        )));
    }
    if password.is_empty() {
        return Err(fail("password cannot be empty"));
    }
    let Some(cfg) = mount_state(c).config.clone() else {
        return Err(fail("idp auth method not configured"));
    };
    if !cfg.token_bound_cidrs.is_empty()
        && !cfg
            .token_bound_cidrs
            .iter()
            .any(|x| cidr_contains(x, std::net::Ipv4Addr::LOCALHOST))
    {
        return Err(ApiError::permission_denied());
    }
    let result = {
        let provider = &mut c.world.provider;
        let user = provider.users.get(&username).cloned();
        let Some(user) = user.filter(|u| u.password == password && u.status != "LOCKED_OUT") else {
            provider.verify_cache.remove(&nonce);
            return Err(fail("idp auth failed"));
        };
        if user.status == "PASSWORD_EXPIRED" && !cfg.bypass_idp_mfa {
            return Err(fail("idp auth failed: password expired"));
        }
        let has_mfa = user.totp.is_some() || user.push.is_some();
        if has_mfa && !cfg.bypass_idp_mfa {
            // Factor choice as in the real method: a TOTP factor when a passcode is given,
            // else an OKTA push, else a TOTP factor asks for the passcode; factors of another
            // provider than the preferred one are ignored.
            let wants = |p: &str| preferred.is_empty() || preferred == p;
            let totp_factor = user
                .totp
                .as_ref()
                .filter(|t| wants(&t.provider) && PROVIDERS.contains(&t.provider.as_str()));
            let push_factor = user
                .push
                .as_ref()
                .filter(|p| wants(&p.provider) && p.provider == "OKTA");
            match (totp_factor, push_factor) {
                (Some(t), _) if !totp.is_empty() => {
                    let key = otp::base32_decode(&t.secret).unwrap_or_default();
                    if !otp::verify(otp::Algorithm::Sha1, &key, &totp, super::now(), 30, 6, 1) {
                        provider.verify_cache.remove(&nonce);
                        return Err(fail("idp auth failed: invalid passcode"));
                    }
                    None
                }
                (_, Some(p)) => {
                    // The real method fails a number-challenge push without a `nonce`; the
                    // sandbox lets it through (the challenge is just not readable through
                    // verify), because hvac's `okta.login` cannot send a nonce and the
                    // sandbox's push users have the number challenge on by default.
                    let (id, correct) = provider.start_push(&username, p);
                    if let (Some(a), false) = (correct, nonce.is_empty()) {
                        provider.verify_cache.insert(nonce.clone(), a);
                    }
                    Some(id)
                }
                (Some(_), None) => {
                    return Err(fail("'totp' passcode parameter is required to perform MFA"))
                }
                (None, None) => {
                    return Err(fail("idp Verify Push or TOTP or Google TOTP factor is required in order to perform MFA"))
                }
            }
        } else {
            None
        }
    };
    if let Some(challenge) = result {
        return Ok(Resp {
            pending_push: Some(PushWait {
                challenge,
                mount: c.mount.path.clone(),
                username,
                nonce,
            }),
            ..Resp::default()
        });
    }
    c.world.provider.verify_cache.remove(&nonce);
    let mount = c.mount.clone();
    complete_login(c.world, c.cluster, &mount, &username)
}

/// Polls a pending push (called by the dispatcher between sleeps, without holding the lock in
/// between). `None` while waiting.
pub fn poll_push(
    world: &mut World,
    cluster: usize,
    w: &PushWait,
) -> Option<Result<Resp, ApiError>> {
    let state = world.provider.poll(w.challenge);
    let done = |world: &mut World| {
        world.provider.finish(w.challenge);
        world.provider.verify_cache.remove(&w.nonce);
    };
    match state {
        ChallengeState::Waiting => None,
        ChallengeState::Approved => {
            done(world);
            let mount = world.clusters[cluster]
                .store
                .mounts
                .iter()
                .find(|m| m.path == w.mount)
                .cloned();
            Some(match mount {
                Some(m) => complete_login(world, cluster, &m, &w.username),
                None => Err(fail("idp auth method not configured")),
            })
        }
        ChallengeState::Rejected => {
            done(world);
            Some(Err(fail("multi-factor authentication denied")))
        }
        ChallengeState::Timeout => {
            done(world);
            Some(Err(fail("failed to complete multi-factor authentication")))
        }
    }
}

/// Computes the policies of a successful login and issues the token.
fn complete_login(
    world: &mut World,
    cluster: usize,
    mount: &Mount,
    username: &str,
) -> Result<Resp, ApiError> {
    let provider_groups = world
        .provider
        .users
        .get(username)
        .map(|u| u.groups.clone())
        .unwrap_or_default();
    let store = &mut world.clusters[cluster].store;
    let m = store.idp.get(&mount.path).cloned().unwrap_or_default();
    let Some(cfg) = m.config.clone() else {
        return Err(fail("idp auth method not configured"));
    };
    let login_digest = world
        .provider
        .users
        .get(username)
        .map(|u| digest(&u.password));
    let store = &mut world.clusters[cluster].store;
    let (warnings, policies) = login_policies(&m, &cfg, username, provider_groups);
    let mut meta = BTreeMap::new();
    meta.insert("username".to_string(), username.to_string());
    meta.insert("policies".to_string(), policies.join(","));
    let entity_id = identity::entity_for_alias(store, &mount.accessor, username);
    let mut all = cfg.token_policies.clone();
    all.extend(policies);
    let spec = TokenSpec {
        policies: all,
        no_default_policy: cfg.token_no_default_policy,
        ttl: cfg.token_ttl,
        max_ttl: cfg.token_max_ttl,
        explicit_max_ttl: cfg.token_explicit_max_ttl,
        period: cfg.token_period,
        num_uses: cfg.token_num_uses,
        display_name: format!(
            "{}-{}",
            mount
                .path
                .trim_start_matches("auth/")
                .trim_end_matches('/')
                .replace('/', "-"),
            username
        ),
        meta,
        path: format!("{}login/{}", mount.path, username),
        entity_id,
        renewable: true,
        token_type: cfg.token_type.clone(),
        mount_path: mount.path.clone(),
        orphan: true,
        parent: String::new(),
        id: None,
    };
    let (entry, auth) = tokens::issue(store, spec);
    if let Some(t) = store.tokens.get_mut(&entry.id) {
        t.login_digest = login_digest;
    }
    super::leases::register_token(store, &entry);
    Ok(Resp {
        auth: Some(auth),
        warnings,
        ..Resp::default()
    })
}

/// Removes the state of a disabled mount and revokes the tokens it issued.
pub fn disable(store: &mut Store, mount_path: &str) {
    store.idp.remove(mount_path);
    let ids: Vec<String> = store
        .tokens
        .values()
        .filter(|t| t.mount_path == mount_path)
        .map(|t| t.id.clone())
        .collect();
    for id in ids {
        tokens::revoke_tree(store, &id);
    }
}

#[allow(dead_code)]
fn _unused(_: Value) {}
