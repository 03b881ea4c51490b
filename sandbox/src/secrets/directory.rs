//! The directory secrets engine (`ad/`, spec C §2.2, §3, §4.2, §7, §8) against an emulated
//! directory whose accounts are set up through the sandbox admin API.
//!
//! The directory (shared by every cluster of the sandbox) holds accounts identified by their
//! user principal name (`svc@example.com`), with a distinguished name, a password and a
//! password-last-set time. The engine binds as `binddn`/`bindpass` for every operation, as the
//! real engine does over LDAP: a wrong `bindpass` makes rotations fail (500, `LDAP Result Code 49
//! "Invalid Credentials"`). The configured `url` is stored but the emulated directory is always
//! used; TLS settings are stored only.
//!
//! Behaviour where the spec is silent, following the real engine:
//! * config writes merge the connection fields and take the password settings (ttl, max_ttl
//!   — 0 means the 768h system default —, length, formatter, password_policy,
//!   last_rotation_tolerance, use_pre111_group_cn_behavior) from each request; invalid settings
//!   are plain errors in the real engine and answer 500 with its messages (ldaputil's
//!   `cannot derive UserBindDN` when neither binddn+bindpass, userdn nor upndomain is given);
//! * role writes replace the role (ttl 0 takes the config's ttl, above max_ttl is refused);
//!   their failures are plain errors (500) as in the real engine;
//! * roles identify accounts by `service_account_name` (a UPN); `creds` answers `username`
//!   without the domain; the first `creds` read and any read after the role's ttl rotate the
//!   password (`last_password` keeps the previous one); a password changed in the directory
//!   outside the service (later than the last rotation plus `last_rotation_tolerance`) is
//!   rotated on the next read;
//! * library accounts are rotated when a set is created and on every check-in; an account can
//!   be in one set only; a set with checked-out accounts cannot be deleted and checked-out
//!   accounts cannot be removed from it (400);
//! * check-out answers 400 `No service accounts available for check-out.` when none is free;
//!   check-in of an account not checked out by the caller's entity or token answers 400 unless
//!   `disable_check_in_enforcement`; `library/manage/:set/check-in` skips that check; without
//!   names, the caller's single checked-out account is checked in (none: `check_ins` is empty;
//!   several: 400); set names are lower-cased; an unknown set answers 400 `"<set>" doesn't
//!   exist`; status shows the borrower's entity and a SHA-1 of its client token, when known;
//! * every check-out has a lease (`ad/library/<set>/check-out/<id>`, renewable up to the set's
//!   `max_ttl`); revoking or expiring it checks the account in; a check-out ttl of 0 (set ttl 0)
//!   lends without limit (lease_duration 0);
//! * `rotate-root` and `rotate-role` answer 204, or 200 with a warning (`Root password rotation
//!   is already in progress.` for root) while a rotation runs (simulated through the admin API);
//! * renewing a check-out's lease without increment gives the set's current `ttl`.
//!
//! Sandbox admin API (under `/_sandbox/secrets/ad/`):
//! * `PUT accounts/:upn` `{"dn": "CN=svc,OU=Svc,DC=example,DC=com", "password": "...",
//!   "sam": "svc"}` creates or replaces an account; `GET accounts` lists them (no passwords);
//!   `GET accounts/:upn` shows one with its password; `DELETE accounts/:upn`;
//!   `POST accounts/:upn/password` `{"password": "..."}` changes it as an administrator would
//!   outside the service;
//! * `POST rotation-in-progress` `{"target": "root" | "<role name>", "mount": "ad/",
//!   "in_progress": true}` marks a rotation as running.

use std::collections::{BTreeMap, BTreeSet};

use rand::distr::Alphanumeric;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::fields;
use super::http::{ApiError, Resp};
use super::leases::{self, Lease, LeaseKind};
use super::route::Route;
use super::{now, Ctx, Store, World};

/// The emulated directory.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Directory {
    pub accounts: BTreeMap<String, Account>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Account {
    pub dn: String,
    pub sam: String,
    pub password: String,
    pub pwd_last_set: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AdMount {
    pub config: Option<AdConfig>,
    pub roles: BTreeMap<String, AdRole>,
    pub sets: BTreeMap<String, LibrarySet>,
    /// Account UPN -> its current check-out.
    pub checkouts: BTreeMap<String, Checkout>,
    /// Rotations simulated as running ("root" or a role name).
    #[serde(default)]
    pub rotating: BTreeSet<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AdConfig {
    pub ttl: i64,
    pub max_ttl: i64,
    pub password_policy: String,
    pub length: i64,
    pub formatter: String,
    pub url: String,
    pub connection_timeout: i64,
    pub request_timeout: i64,
    pub starttls: bool,
    pub insecure_tls: bool,
    pub certificate: String,
    pub binddn: String,
    pub bindpass: String,
    pub userdn: String,
    pub upndomain: String,
    pub last_rotation_tolerance: i64,
    pub tls_min_version: String,
    pub tls_max_version: String,
    #[serde(default)]
    pub use_pre111_group_cn_behavior: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AdRole {
    pub service_account_name: String,
    pub ttl: Option<i64>,
    pub last_rotation: Option<i64>,
    /// Nanoseconds of `last_rotation` (the real engine keeps a Go `time.Time`, shown in RFC 3339
    /// with its fraction: two rotations within a second read differently).
    #[serde(default)]
    pub last_rotation_nanos: u32,
    pub password_last_set: i64,
    pub current_password: String,
    pub last_password: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LibrarySet {
    pub service_account_names: Vec<String>,
    pub ttl: i64,
    pub max_ttl: i64,
    pub disable_check_in_enforcement: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Checkout {
    pub set: String,
    pub lease_id: String,
    pub borrower_client_token: String,
    pub borrower_entity_id: String,
}

pub const PREFIX: &str = "?@09AZ";
const DEFAULT_LENGTH: i64 = 64;
const MIN_LENGTH: i64 = 14;
const DEFAULT_TTL: i64 = 768 * 3600;
const LIBRARY_TTL: i64 = 24 * 3600;

pub fn routes() -> Vec<Route> {
    vec![
        Route::new("config")
            .read(read_config)
            .write(write_config)
            .delete(delete_config)
            .doc("Configure the directory connection.", ""),
        Route::new("roles")
            .read(list_roles)
            .list(list_roles)
            .doc("List roles.", ""),
        Route::new("roles/:name")
            .read(read_role)
            .write(write_role)
            .delete(delete_role)
            .doc("Manage a role.", ""),
        Route::new("creds/:name")
            .read(creds)
            .doc("Read a role's credentials.", ""),
        Route::new("library")
            .list(list_sets)
            .doc("List library sets.", ""),
        Route::new("library/manage/:name/check-in")
            .write(|c| check_in(c, true))
            .doc("Force a check-in.", ""),
        Route::new("library/:name/check-out")
            .write(check_out)
            .doc("Check out an account.", ""),
        Route::new("library/:name/check-in")
            .write(|c| check_in(c, false))
            .doc("Check in accounts.", ""),
        Route::new("library/:name/status")
            .read(status)
            .doc("Status of a set's accounts.", ""),
        Route::new("library/:name")
            .read(read_set)
            .write(write_set)
            .delete(delete_set)
            // Sets have an existence check in the real engine: creating needs `create`.
            .exists(|c| {
                let n = set_name(c);
                am(c).sets.contains_key(&n)
            })
            .doc("Manage a library set.", ""),
        Route::new("rotate-root")
            .read(rotate_root)
            .write(rotate_root)
            .doc("Rotate the bind password.", ""),
        Route::new("rotate-role/:name")
            .write(rotate_role)
            .doc("Rotate a role's password.", ""),
    ]
}

fn am<'a>(c: &'a mut Ctx) -> &'a mut AdMount {
    let p = c.mount.path.clone();
    c.store().ad.entry(p).or_default()
}

/// The engine's config; without one every call that needs it fails with the plain error
/// (500) `the config is currently unset`, as the real engine's handlers return
/// `errors.New("the config is currently unset")` (plugin/path_creds.go, path_rotate_creds.go).
fn config(c: &mut Ctx) -> Result<AdConfig, ApiError> {
    am(c)
        .config
        .clone()
        .ok_or_else(|| ApiError::internal("the config is currently unset"))
}

fn random_chars(n: usize) -> String {
    // Capped so an absurd configured length cannot exhaust memory.
    let n = n.min(1 << 16);
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(n)
        .map(char::from)
        .collect()
}

/// Generates a password per the config (password policy, or length/formatter).
fn generate_password(store: &Store, cfg: &AdConfig) -> Result<String, ApiError> {
    if !cfg.password_policy.is_empty() {
        return super::sys_password::generate(store, &cfg.password_policy);
    }
    let length = if cfg.length > 0 {
        cfg.length
    } else {
        DEFAULT_LENGTH
    } as usize;
    if cfg.formatter.is_empty() {
        return Ok(format!(
            "{PREFIX}{}",
            random_chars(length.saturating_sub(PREFIX.len()))
        ));
    }
    let fixed = cfg.formatter.len() - "{{PASSWORD}}".len();
    Ok(cfg.formatter.replace(
        "{{PASSWORD}}",
        &random_chars(length.saturating_sub(fixed).max(1)),
    ))
}

/// Binds as the configured binddn (exactly one entity must match, with the right password).
fn bind(dir: &Directory, cfg: &AdConfig) -> Result<String, ApiError> {
    let matches: Vec<&String> = dir
        .accounts
        .iter()
        .filter(|(upn, a)| {
            a.dn.eq_ignore_ascii_case(&cfg.binddn)
                || upn.eq_ignore_ascii_case(&cfg.binddn)
                || (!a.sam.is_empty() && a.sam == cfg.binddn)
        })
        .map(|(u, _)| u)
        .collect();
    match matches.as_slice() {
        [one] => {
            if dir.accounts[*one].password != cfg.bindpass {
                return Err(ApiError::internal(
                    "LDAP Result Code 49 \"Invalid Credentials\"",
                ));
            }
            Ok((*one).clone())
        }
        [] => Err(ApiError::internal(format!(
            "unable to find an entry for binddn {:?}",
            cfg.binddn
        ))),
        _ => Err(ApiError::internal(format!(
            "binddn {:?} matches more than one entity; use the full distinguished name",
            cfg.binddn
        ))),
    }
}

fn set_password(world: &mut World, upn: &str, pw: &str) -> i64 {
    let n = now();
    if let Some(a) = world.directory.accounts.get_mut(upn) {
        a.password = pw.to_string();
        a.pwd_last_set = n;
    }
    n
}

/// Reads the config with exactly the keys of the real engine's `configReadOperation`
/// (plugin/path_config.go): no bind password, no `connection_timeout`/`request_timeout` (they
/// are write-only), `use_pre111_group_cn_behavior`, and the password settings.
fn read_config(c: &mut Ctx) -> Result<Resp, ApiError> {
    let Some(cfg) = am(c).config.clone() else {
        return Err(ApiError::not_found());
    };
    Ok(Resp::data(json!({
        "binddn": cfg.binddn,
        "certificate": cfg.certificate,
        "insecure_tls": cfg.insecure_tls,
        "length": cfg.length,
        "formatter": cfg.formatter,
        "password_policy": cfg.password_policy,
        "max_ttl": cfg.max_ttl,
        "starttls": cfg.starttls,
        "tls_max_version": cfg.tls_max_version,
        "tls_min_version": cfg.tls_min_version,
        "ttl": cfg.ttl,
        "upndomain": cfg.upndomain,
        "url": cfg.url,
        "userdn": cfg.userdn,
        "last_rotation_tolerance": cfg.last_rotation_tolerance,
        "use_pre111_group_cn_behavior": cfg.use_pre111_group_cn_behavior,
    })))
}

/// Writes the config as the real engine does: the connection (LDAP) fields are merged with the
/// stored ones, the password settings (`ttl`, `max_ttl`, `length`, `formatter`,
/// `password_policy`, `last_rotation_tolerance`) are taken from this request with their
/// defaults. Validation failures are plain errors in the real engine, so they answer 500.
fn write_config(c: &mut Ctx) -> Result<Resp, ApiError> {
    let d = c.data.clone();
    let fail = |m: String| ApiError::internal(super::http::multi(&m));
    let mut cfg = am(c).config.clone().unwrap_or(AdConfig {
        url: "ldap://127.0.0.1".into(),
        connection_timeout: 30,
        request_timeout: 90,
        tls_min_version: "tls12".into(),
        tls_max_version: "tls12".into(),
        ..Default::default()
    });
    for (k, slot) in [
        ("url", &mut cfg.url),
        ("certificate", &mut cfg.certificate),
        ("binddn", &mut cfg.binddn),
        ("bindpass", &mut cfg.bindpass),
        ("userdn", &mut cfg.userdn),
        ("upndomain", &mut cfg.upndomain),
        ("tls_min_version", &mut cfg.tls_min_version),
        ("tls_max_version", &mut cfg.tls_max_version),
    ] {
        if let Some(v) = fields::string(&d, k)? {
            *slot = v;
        }
    }
    for (k, slot) in [
        ("connection_timeout", &mut cfg.connection_timeout),
        ("request_timeout", &mut cfg.request_timeout),
    ] {
        if let Some(v) = fields::duration(&d, k)? {
            *slot = v;
        }
    }
    for (k, slot) in [
        ("starttls", &mut cfg.starttls),
        ("insecure_tls", &mut cfg.insecure_tls),
    ] {
        if let Some(v) = fields::boolean(&d, k)? {
            *slot = v;
        }
    }
    // `use_pre111_group_cn_behavior` is taken from each request, false when absent.
    cfg.use_pre111_group_cn_behavior =
        fields::boolean(&d, "use_pre111_group_cn_behavior")?.unwrap_or(false);
    // ldaputil's `ConfigEntry.Validate` (used by the real engine's config write): plain errors.
    if cfg.url.is_empty() {
        return Err(fail("at least one url must be provided".into()));
    }
    if (cfg.binddn.is_empty() || cfg.bindpass.is_empty())
        && cfg.upndomain.is_empty()
        && cfg.userdn.is_empty()
    {
        return Err(fail("cannot derive UserBindDN".into()));
    }
    const TLS: [&str; 4] = ["tls10", "tls11", "tls12", "tls13"];
    if !TLS.contains(&cfg.tls_min_version.as_str()) {
        return Err(fail("invalid 'tls_min_version' in config".into()));
    }
    if !TLS.contains(&cfg.tls_max_version.as_str()) {
        return Err(fail("invalid 'tls_max_version' in config".into()));
    }
    if cfg.tls_max_version < cfg.tls_min_version {
        return Err(fail(
            "'tls_max_version' must be greater than or equal to 'tls_min_version'".into(),
        ));
    }
    if !cfg.certificate.is_empty() && !cfg.certificate.contains("-----BEGIN CERTIFICATE-----") {
        return Err(fail("failed to decode PEM block in the certificate".into()));
    }
    // Password settings: this request's values, with defaults.
    cfg.password_policy = fields::string_or(&d, "password_policy", "")?;
    cfg.formatter = fields::string_or(&d, "formatter", "")?;
    cfg.length = match fields::int(&d, "length")? {
        Some(l) => l,
        None if cfg.password_policy.is_empty() => DEFAULT_LENGTH,
        None => 0,
    };
    cfg.last_rotation_tolerance = fields::duration(&d, "last_rotation_tolerance")?.unwrap_or(5);
    let mut ttl = fields::duration(&d, "ttl")?.unwrap_or(0);
    let mut max_ttl = fields::duration(&d, "max_ttl")?.unwrap_or(0);
    if ttl == 0 {
        ttl = DEFAULT_TTL;
    }
    if max_ttl == 0 {
        max_ttl = DEFAULT_TTL;
    }
    if ttl > max_ttl {
        return Err(fail("ttl must be smaller than or equal to max_ttl".into()));
    }
    if ttl < 1 {
        return Err(fail("ttl must be positive".into()));
    }
    if max_ttl < 1 {
        return Err(fail("max_ttl must be positive".into()));
    }
    cfg.ttl = ttl;
    cfg.max_ttl = max_ttl;
    if !cfg.password_policy.is_empty() && (cfg.length != 0 || !cfg.formatter.is_empty()) {
        return Err(fail(
            "cannot set password_policy and either length or formatter".into(),
        ));
    }
    if cfg.password_policy.is_empty() {
        const PWD: &str = "{{PASSWORD}}";
        if cfg.formatter.is_empty() {
            if cfg.length < MIN_LENGTH {
                return Err(fail(format!(
                    "it's not possible to generate a _secure_ password of length {}, please boost length to {MIN_LENGTH}, though Vault recommends higher",
                    cfg.length
                )));
            }
        } else {
            let room = cfg.length - (cfg.formatter.len() as i64 - PWD.len() as i64);
            if room < MIN_LENGTH - PREFIX.len() as i64 {
                return Err(fail(format!(
                    "since the desired length is {}, it isn't possible to generate a sufficiently complex password - please increase desired length or remove characters from the formatter",
                    cfg.length
                )));
            }
            match cfg.formatter.matches(PWD).count() {
                0 => {
                    return Err(fail(format!(
                        "{} must contain password replacement field of {PWD}",
                        cfg.formatter
                    )))
                }
                1 => {}
                _ => {
                    return Err(fail(format!(
                        "{} must contain ONE password replacement field of {PWD}",
                        cfg.formatter
                    )))
                }
            }
        }
    }
    am(c).config = Some(cfg);
    Ok(Resp::no_content())
}

fn delete_config(c: &mut Ctx) -> Result<Resp, ApiError> {
    am(c).config = None;
    Ok(Resp::no_content())
}

/// Role names are lower-cased: the real engine's `roles/:name` field is a
/// `TypeLowerCaseString` (plugin/path_roles.go), so `roles/MyRole` is stored as `myrole`.
fn role_name(c: &Ctx) -> String {
    c.param("name").to_lowercase()
}

fn list_roles(c: &mut Ctx) -> Result<Resp, ApiError> {
    let keys: Vec<String> = am(c).roles.keys().cloned().collect();
    if c.op == super::http::Op::Read {
        return Ok(Resp::data(json!({ "keys": keys })));
    }
    Resp::list(keys)
}

/// As Go's `time.RFC3339Nano`: the fraction only when there is one.
fn rfc3339_nanos(t: i64, nanos: u32) -> String {
    chrono::DateTime::from_timestamp(t, nanos)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

fn role_ttl(cfg: &AdConfig, r: &AdRole) -> i64 {
    r.ttl.unwrap_or(cfg.ttl)
}

/// Reads a role as the real engine's `backendRole.Map` (plugin/role.go): `last_vault_rotation`
/// and `password_last_set` only when set, and no `last_svc_rotation`.
fn read_role(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = role_name(c);
    let cfg = am(c).config.clone().unwrap_or_default();
    let Some(r) = am(c).roles.get(&n).cloned() else {
        return Err(ApiError::not_found());
    };
    let mut d = json!({
        "service_account_name": r.service_account_name,
        "ttl": role_ttl(&cfg, &r),
    });
    if let Some(t) = r.last_rotation {
        d["last_vault_rotation"] = json!(rfc3339_nanos(t, r.last_rotation_nanos));
    }
    if r.password_last_set != 0 {
        let nanos = if Some(r.password_last_set) == r.last_rotation {
            r.last_rotation_nanos
        } else {
            0
        };
        d["password_last_set"] = json!(rfc3339_nanos(r.password_last_set, nanos));
    }
    Ok(Resp::data(d))
}

/// Writes a role as the real engine does: every write replaces the role (keeping its rotation
/// state), `ttl` 0 takes the config's ttl, and failures are plain errors (500).
fn write_role(c: &mut Ctx) -> Result<Resp, ApiError> {
    let fail = |m: String| ApiError::internal(super::http::multi(&m));
    let n = role_name(c);
    let Some(cfg) = am(c).config.clone() else {
        return Err(fail("the config is currently unset".into()));
    };
    let d = c.data.clone();
    let name = fields::string_or(&d, "service_account_name", "")?;
    if name.is_empty() {
        return Err(fail("\"service_account_name\" is required".into()));
    }
    let Some(acct) = c.world.directory.accounts.get(&name).cloned() else {
        return Err(fail(format!(
            "unable to find service account named {name} in active directory, searches are case sensitive"
        )));
    };
    let mut ttl = fields::duration(&d, "ttl")?.unwrap_or(0);
    if ttl == 0 {
        ttl = cfg.ttl;
    }
    if ttl > cfg.max_ttl {
        return Err(fail(format!(
            "requested ttl of {ttl} seconds is over the max ttl of {} seconds",
            cfg.max_ttl
        )));
    }
    if ttl < 0 {
        return Err(fail("ttl can't be negative".into()));
    }
    let old = am(c).roles.get(&n).cloned().unwrap_or_default();
    let same_account = old.service_account_name == name;
    let r = AdRole {
        service_account_name: name,
        ttl: Some(ttl),
        last_rotation: if same_account {
            old.last_rotation
        } else {
            None
        },
        last_rotation_nanos: if same_account {
            old.last_rotation_nanos
        } else {
            0
        },
        password_last_set: acct.pwd_last_set,
        current_password: if same_account {
            old.current_password
        } else {
            String::new()
        },
        last_password: if same_account {
            old.last_password
        } else {
            String::new()
        },
    };
    am(c).roles.insert(n, r);
    Ok(Resp::no_content())
}

fn delete_role(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = role_name(c);
    am(c).roles.remove(&n);
    Ok(Resp::no_content())
}

/// Rotates a role's password in the directory.
fn rotate_role_now(c: &mut Ctx, name: &str) -> Result<(), ApiError> {
    let cfg = config(c)?;
    bind(&c.world.directory, &cfg)?;
    let Some(mut r) = am(c).roles.get(name).cloned() else {
        return Err(ApiError::internal(format!("role {name} does not exist")));
    };
    if !c
        .world
        .directory
        .accounts
        .contains_key(&r.service_account_name)
    {
        return Err(ApiError::internal(format!(
            "service account {:?} no longer exists in the directory",
            r.service_account_name
        )));
    }
    let pw = generate_password(&c.world.clusters[c.cluster].store, &cfg)?;
    let t = set_password(c.world, &r.service_account_name, &pw);
    r.last_password = std::mem::take(&mut r.current_password);
    r.current_password = pw;
    r.last_rotation = Some(t);
    r.last_rotation_nanos = chrono::Utc::now().timestamp_subsec_nanos();
    r.password_last_set = t;
    am(c).roles.insert(name.to_string(), r);
    Ok(())
}

/// Reads a role's credentials as the real engine's `credReadOperation` (plugin/path_creds.go):
/// an unknown role is a nil response (404), the config is checked only when a rotation is due,
/// and `last_password` is present only when there was a previous password.
fn creds(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let Some(r) = am(c).roles.get(&n).cloned() else {
        return Err(ApiError::not_found());
    };
    let cfg = config(c)?;
    let dir_last_set = c
        .world
        .directory
        .accounts
        .get(&r.service_account_name)
        .map(|a| a.pwd_last_set)
        .unwrap_or(0);
    let due = match r.last_rotation {
        None => true,
        Some(t) => {
            now() >= t + role_ttl(&cfg, &r) || dir_last_set > t + cfg.last_rotation_tolerance
        }
    };
    if due {
        rotate_role_now(c, &n)?;
    }
    let r = am(c).roles.get(&n).cloned().unwrap_or_default();
    let username = r
        .service_account_name
        .split('@')
        .next()
        .unwrap_or_default()
        .to_string();
    let mut d = json!({
        "current_password": r.current_password,
        "username": username,
    });
    if !r.last_password.is_empty() {
        d["last_password"] = json!(r.last_password);
    }
    Ok(Resp::data(d))
}

fn rotation_busy(c: &mut Ctx, target: &str) -> bool {
    am(c).rotating.contains(target)
}

/// Rotates the bind password as the real engine's rotate-root (plugin/path_rotate_root.go): a
/// rotation already running answers 200 with the warning `Root password rotation is already in
/// progress.`; a missing config or a failing rotation is a plain error (500).
fn rotate_root(c: &mut Ctx) -> Result<Resp, ApiError> {
    if rotation_busy(c, "root") {
        return Ok(Resp::no_content().warn("Root password rotation is already in progress."));
    }
    let mut cfg = config(c)?;
    let who = bind(&c.world.directory, &cfg).map_err(|e| {
        ApiError::internal(format!("failed to rotate root: {}", e.errors.join(", ")))
    })?;
    let pw = generate_password(&c.world.clusters[c.cluster].store, &cfg)?;
    set_password(c.world, &who, &pw);
    cfg.bindpass = pw;
    am(c).config = Some(cfg);
    Ok(Resp::no_content())
}

/// Rotates a role's password as the real engine's rotate-role (plugin/path_rotate_creds.go):
/// without a config `the config is currently unset` and for an unknown role `role <name> does
/// not exist`, both plain errors (500).
fn rotate_role(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    if rotation_busy(c, &n) {
        return Ok(Resp::no_content().warn("rotation already in progress"));
    }
    config(c)?;
    if !am(c).roles.contains_key(&n) {
        return Err(ApiError::internal(format!("role {n} does not exist")));
    }
    rotate_role_now(c, &n)?;
    Ok(Resp::no_content())
}

fn list_sets(c: &mut Ctx) -> Result<Resp, ApiError> {
    Resp::list(am(c).sets.keys().cloned().collect::<Vec<_>>())
}

fn read_set(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = set_name(c);
    am(c)
        .sets
        .get(&n)
        .map(|s| {
            Resp::data(json!({
                "service_account_names": s.service_account_names,
                "ttl": s.ttl,
                "max_ttl": s.max_ttl,
                "disable_check_in_enforcement": s.disable_check_in_enforcement,
            }))
        })
        .ok_or_else(ApiError::not_found)
}

fn write_set(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = set_name(c);
    let cfg = config(c)?;
    let d = c.data.clone();
    let existing = am(c).sets.get(&n).cloned();
    let mut s = existing.clone().unwrap_or(LibrarySet {
        ttl: LIBRARY_TTL,
        max_ttl: LIBRARY_TTL,
        ..Default::default()
    });
    if let Some(v) = fields::comma_list(&d, "service_account_names")? {
        s.service_account_names = v;
    }
    if s.service_account_names.is_empty() {
        return Err(ApiError::bad_request(
            "\"service_account_names\" must be provided",
        ));
    }
    if let Some(v) = fields::duration(&d, "ttl")? {
        s.ttl = v;
    }
    if let Some(v) = fields::duration(&d, "max_ttl")? {
        s.max_ttl = v;
    }
    if let Some(v) = fields::boolean(&d, "disable_check_in_enforcement")? {
        s.disable_check_in_enforcement = v;
    }
    if s.ttl < 0 || s.max_ttl < 0 {
        return Err(ApiError::bad_request("ttl and max_ttl cannot be negative"));
    }
    if s.max_ttl > 0 && s.ttl > s.max_ttl {
        return Err(ApiError::bad_request("ttl cannot be greater than max_ttl"));
    }
    for a in &s.service_account_names {
        // A plain error (500) in the real engine (plugin/path_checkout_sets.go).
        if !c.world.directory.accounts.contains_key(a) {
            return Err(ApiError::internal(format!(
                "unable to find service account named {a:?} in the directory, searches are case sensitive"
            )));
        }
        if let Some((other, _)) = am(c)
            .sets
            .iter()
            .find(|(k, v)| **k != n && v.service_account_names.contains(a))
        {
            return Err(ApiError::bad_request(format!(
                "{a:?} is already managed by set {other:?}"
            )));
        }
    }
    if let Some(old) = &existing {
        for a in &old.service_account_names {
            if !s.service_account_names.contains(a) && am(c).checkouts.contains_key(a) {
                return Err(ApiError::bad_request(format!(
                    "{a:?} can't be removed from the set because it is checked out"
                )));
            }
        }
    }
    // New accounts are taken over: their passwords become known only to the service.
    let new: Vec<String> = s
        .service_account_names
        .iter()
        .filter(|a| {
            existing
                .as_ref()
                .is_none_or(|o| !o.service_account_names.contains(a))
        })
        .cloned()
        .collect();
    if !new.is_empty() {
        bind(&c.world.directory, &cfg)?;
    }
    for a in new {
        let pw = generate_password(&c.world.clusters[c.cluster].store, &cfg)?;
        set_password(c.world, &a, &pw);
    }
    am(c).sets.insert(n, s);
    Ok(Resp::no_content())
}

fn delete_set(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = set_name(c);
    if am(c).checkouts.values().any(|co| co.set == n) {
        return Err(ApiError::bad_request(
            "all service accounts must be checked in before the set can be deleted",
        ));
    }
    am(c).sets.remove(&n);
    Ok(Resp::no_content())
}

fn check_out(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = set_name(c);
    let Some(set) = am(c).sets.get(&n).cloned() else {
        return Err(ApiError::bad_request(format!("{n:?} doesn't exist")));
    };
    let requested = fields::duration(&c.data, "ttl")?;
    let ttl = match requested {
        Some(t) if t < 0 => return Err(ApiError::bad_request("ttl cannot be negative")),
        Some(t) if set.ttl > 0 && (t > set.ttl || t == 0) => set.ttl,
        Some(t) => t,
        None => set.ttl,
    };
    let free = set
        .service_account_names
        .iter()
        .find(|a| !am(c).checkouts.contains_key(*a))
        .cloned();
    let Some(account) = free else {
        return Err(ApiError::bad_request(
            "No service accounts available for check-out.",
        ));
    };
    let Some(password) = c
        .world
        .directory
        .accounts
        .get(&account)
        .map(|a| a.password.clone())
    else {
        return Err(ApiError::internal(format!(
            "service account {account:?} no longer exists in the directory"
        )));
    };
    let token = c.token.clone().unwrap_or_default();
    let lease_id = format!(
        "{}library/{n}/check-out/{}",
        c.mount.path,
        uuid::Uuid::new_v4().simple()
    );
    // A ttl of 0 lends without limit.
    let lease_ttl = if ttl == 0 { 100 * 365 * 86400 } else { ttl };
    let mount = c.mount.path.clone();
    let lease = leases::issue(
        c.store(),
        lease_id.clone(),
        &mount,
        lease_ttl,
        set.max_ttl,
        true,
        &token.id,
        LeaseKind::AdCheckout {
            mount: mount.clone(),
            set: n.clone(),
            accounts: vec![account.clone()],
        },
    );
    am(c).checkouts.insert(
        account.clone(),
        Checkout {
            set: n,
            lease_id: lease.id,
            borrower_client_token: token.id.clone(),
            borrower_entity_id: token.entity_id.clone(),
        },
    );
    Ok(Resp {
        data: Some(json!({ "password": password, "service_account_name": account })),
        lease_id,
        lease_duration: ttl,
        renewable: true,
        ..Resp::default()
    })
}

/// Checks accounts in: rotates their passwords and frees them.
fn do_check_in(
    world: &mut World,
    cluster: usize,
    mount: &str,
    accounts: &[String],
) -> Result<(), String> {
    let m = world.clusters[cluster]
        .store
        .ad
        .get(mount)
        .cloned()
        .unwrap_or_default();
    let cfg = m.config.clone().unwrap_or_default();
    for a in accounts {
        if m.checkouts.contains_key(a) && world.directory.accounts.contains_key(a) {
            let pw = generate_password(&world.clusters[cluster].store, &cfg)
                .map_err(|e| e.errors.join(", "))?;
            set_password(world, a, &pw);
        }
    }
    let store = &mut world.clusters[cluster].store;
    if let Some(m) = store.ad.get_mut(mount) {
        for a in accounts {
            m.checkouts.remove(a);
        }
    }
    Ok(())
}

fn check_in(c: &mut Ctx, manage: bool) -> Result<Resp, ApiError> {
    let n = set_name(c);
    let Some(set) = am(c).sets.get(&n).cloned() else {
        return Err(ApiError::bad_request(format!("{n:?} doesn't exist")));
    };
    let token = c.token.clone().unwrap_or_default();
    let enforce = !manage && !set.disable_check_in_enforcement;
    let mine = |co: &Checkout| {
        (!co.borrower_entity_id.is_empty() && co.borrower_entity_id == token.entity_id)
            || co.borrower_client_token == token.id
    };
    let names = match fields::comma_list(&c.data, "service_account_names")? {
        Some(v) if !v.is_empty() => v,
        _ => {
            let out: Vec<String> = am(c)
                .checkouts
                .iter()
                .filter(|(_, co)| co.set == n && (!enforce || mine(co)))
                .map(|(a, _)| a.clone())
                .collect();
            if out.len() > 1 {
                return Err(ApiError::bad_request(
                    "when multiple service accounts are checked out, the \"service_account_names\" to check in must be provided",
                ));
            }
            out
        }
    };
    let mut done = Vec::new();
    for a in &names {
        if !set.service_account_names.contains(a) {
            return Err(ApiError::bad_request(format!(
                "{a:?} is not a member of the {n:?} set"
            )));
        }
        let Some(co) = am(c).checkouts.get(a).cloned() else {
            continue;
        };
        if enforce && !mine(&co) {
            return Err(ApiError::bad_request(format!(
                "{a:?} can't be checked in because it wasn't checked out by the caller"
            )));
        }
        done.push((a.clone(), co.lease_id));
    }
    let accounts: Vec<String> = done.iter().map(|(a, _)| a.clone()).collect();
    let mount = c.mount.path.clone();
    do_check_in(c.world, c.cluster, &mount, &accounts).map_err(ApiError::internal)?;
    for (_, lease) in &done {
        c.store().leases.remove(lease);
    }
    Ok(Resp::data(json!({ "check_ins": accounts })))
}

fn status(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = set_name(c);
    let Some(set) = am(c).sets.get(&n).cloned() else {
        return Err(ApiError::bad_request(format!("{n:?} doesn't exist")));
    };
    let m = am(c).clone();
    let mut d = serde_json::Map::new();
    for a in &set.service_account_names {
        let v = match m.checkouts.get(a) {
            None => json!({ "available": true }),
            Some(co) => {
                // Only the fields that are set, as the real engine reports them; the client
                // token is shown as a SHA-1 of it (never the token itself).
                let mut v = json!({ "available": false });
                if !co.borrower_client_token.is_empty() {
                    v["borrower_client_token"] = json!(token_digest(&co.borrower_client_token));
                }
                if !co.borrower_entity_id.is_empty() {
                    v["borrower_entity_id"] = json!(co.borrower_entity_id);
                }
                v
            }
        };
        d.insert(a.clone(), v);
    }
    Ok(Resp::data(Value::Object(d)))
}

/// Set names are lower-cased, as the real engine's `TypeLowerCaseString` name field does.
fn set_name(c: &Ctx) -> String {
    c.param("name").to_lowercase()
}

fn token_digest(t: &str) -> String {
    use sha1::Digest;
    sha1::Sha1::digest(t.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks the accounts of a revoked or expired check-out back in. Fails when the set is gone
/// (the lease then becomes irrevocable).
pub fn release(
    store: &mut Store,
    mount: &str,
    set: &str,
    accounts: &[String],
) -> Result<(), String> {
    let Some(m) = store.ad.get_mut(mount) else {
        return Err(format!("mount {mount:?} not found"));
    };
    if !m.sets.contains_key(set) {
        return Err(format!("set {set:?} doesn't exist"));
    }
    for a in accounts {
        m.checkouts.remove(a);
    }
    // The password is rotated by the world-level hook after the lease is revoked.
    PENDING.with(|p| p.borrow_mut().extend(accounts.iter().cloned()));
    Ok(())
}

thread_local! {
    /// Accounts released by lease revocation whose password must be rotated in the directory
    /// (which lives outside the cluster store).
    static PENDING: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Rotates the passwords of accounts released by lease revocations (called by the dispatcher
/// after each request, when the directory is reachable).
pub fn flush_released(world: &mut World) {
    let accounts: Vec<String> = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    for a in accounts {
        let pw = format!(
            "{PREFIX}{}",
            random_chars(DEFAULT_LENGTH as usize - PREFIX.len())
        );
        set_password(world, &a, &pw);
    }
}

/// Keeps the check-out's expiry in step with its renewed lease (nothing to do: the lease holds
/// the expiry).
pub fn note_renewal(_store: &mut Store, _lease: &Lease) {}

/// The lease duration a check-out's renewal without increment gets: the set's current `ttl`,
/// as the real engine's `renewCheckOut` sets `resp.Secret.TTL = set.TTL`
/// (plugin/path_checkouts.go). `None` when the set is gone.
pub fn renewal_ttl(store: &Store, lease: &Lease) -> Option<i64> {
    let LeaseKind::AdCheckout { mount, set, .. } = &lease.kind else {
        return None;
    };
    let s = store.ad.get(mount)?.sets.get(set)?;
    Some(if s.ttl == 0 { 100 * 365 * 86400 } else { s.ttl })
}

/// `/_sandbox/secrets/ad/...`.
pub fn admin(
    world: &mut World,
    cluster: usize,
    method: &str,
    rest: &str,
    body: &Value,
) -> (u16, Value) {
    let parts: Vec<&str> = rest.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("GET", ["accounts"]) => {
            let list: Vec<Value> = world
                .directory
                .accounts
                .iter()
                .map(|(u, a)| json!({"upn": u, "dn": a.dn, "sam": a.sam, "pwd_last_set": a.pwd_last_set}))
                .collect();
            (200, json!({ "accounts": list }))
        }
        ("PUT" | "POST", ["accounts", upn]) => {
            let a = Account {
                dn: body["dn"].as_str().unwrap_or_default().to_string(),
                sam: body["sam"]
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| upn.split('@').next().unwrap_or_default().to_string()),
                password: body["password"].as_str().unwrap_or_default().to_string(),
                pwd_last_set: now(),
            };
            if a.dn.is_empty() {
                return (400, json!({ "errors": ["dn is required"] }));
            }
            world.directory.accounts.insert(upn.to_string(), a);
            (204, Value::Null)
        }
        ("GET", ["accounts", upn]) => match world.directory.accounts.get(*upn) {
            Some(a) => (
                200,
                json!({"upn": upn, "dn": a.dn, "sam": a.sam, "password": a.password, "pwd_last_set": a.pwd_last_set}),
            ),
            None => (404, json!({ "errors": [] })),
        },
        ("DELETE", ["accounts", upn]) => {
            world.directory.accounts.remove(*upn);
            (204, Value::Null)
        }
        ("POST" | "PUT", ["accounts", upn, "password"]) => {
            let Some(pw) = body["password"].as_str() else {
                return (400, json!({ "errors": ["password is required"] }));
            };
            if !world.directory.accounts.contains_key(*upn) {
                return (404, json!({ "errors": [] }));
            }
            set_password(world, upn, pw);
            (204, Value::Null)
        }
        ("POST" | "PUT", ["rotation-in-progress"]) => {
            let target = body["target"].as_str().unwrap_or("root").to_string();
            let mount = body["mount"].as_str().unwrap_or("ad/").to_string();
            let on = body["in_progress"].as_bool().unwrap_or(true);
            let m = world.clusters[cluster].store.ad.entry(mount).or_default();
            if on {
                m.rotating.insert(target);
            } else {
                m.rotating.remove(&target);
            }
            (204, Value::Null)
        }
        _ => (404, json!({ "errors": ["unknown sandbox admin path"] })),
    }
}
