//! `sys/policies/{acl,rgp,egp}` and the older `sys/policy` endpoints (spec A §4.3).
//!
//! Rules taken from the real service where the spec is silent:
//! * names are lower-cased and may contain `/` (`sys/policies/acl/team/a`, as OpenBao 2.7);
//!   an ACL read carries `version`, `modified`, `cas_required` and the
//!   `allow_*_in_identity_templates` switches, as OpenBao 2.7's; `root` cannot be created, updated or deleted, `default` cannot be
//!   deleted (400 with the real service's messages);
//! * `policy` is tried as base64 first and used decoded when that succeeds;
//! * ACL documents are parsed (HCL or JSON) and rejected with `failed to parse policy: ...`;
//! * RGP and EGP documents are Sentinel and are not parsed: any non-empty text is accepted;
//! * deleting an absent policy succeeds (204); reading one answers 404;
//! * RGP/EGP paths exist only with the premium licence; without it they are not registered
//!   (404 `unsupported path`, as on a server without the Sentinel feature).

use base64::Engine;
use serde_json::{json, Map, Value};

use super::fields;
use super::http::{ApiError, Resp};
use super::route::{Licence, Route};
use super::{acl, Ctx, StoredPolicy};

pub fn routes() -> Vec<Route> {
    let mut r = vec![
        Route::new("policies/acl")
            .list(list_acl)
            .doc("List the configured ACL policies.", ""),
        Route::new("policies/acl/*name")
            .read(|c| read(c, Kind::Acl))
            .write(|c| write(c, Kind::Acl))
            .delete(|c| delete(c, Kind::Acl))
            .doc("Read, create, update or delete an ACL policy.", ""),
        Route::new("policies/rgp")
            .list(|c| list_sentinel(c, Kind::Rgp))
            .licence(Licence::Premium)
            .doc("List the role governing policies.", ""),
        Route::new("policies/rgp/:name")
            .read(|c| read(c, Kind::Rgp))
            .write(|c| write(c, Kind::Rgp))
            .delete(|c| delete(c, Kind::Rgp))
            .licence(Licence::Premium)
            .doc(
                "Read, create, update or delete a role governing policy.",
                "",
            ),
        Route::new("policies/egp")
            .list(|c| list_sentinel(c, Kind::Egp))
            .licence(Licence::Premium)
            .doc("List the endpoint governing policies.", ""),
        Route::new("policies/egp/:name")
            .read(|c| read(c, Kind::Egp))
            .write(|c| write(c, Kind::Egp))
            .delete(|c| delete(c, Kind::Egp))
            .licence(Licence::Premium)
            .doc(
                "Read, create, update or delete an endpoint governing policy.",
                "",
            ),
        // The pre-0.9 endpoints, still served by the real service and used by older clients.
        Route::new("policy")
            .read(list_legacy)
            .list(list_legacy)
            .doc("List the configured ACL policies.", ""),
        Route::new("policy/*name")
            .read(|c| read(c, Kind::Legacy))
            .write(|c| write(c, Kind::Legacy))
            .delete(|c| delete(c, Kind::Legacy))
            .doc("Read, create, update or delete an ACL policy.", ""),
    ];
    for route in &mut r {
        if route.description.is_empty() {
            route.description = "Policies control what a token may do: ACL policies are path rules, RGP \
                                 and EGP policies are Sentinel policies attached to tokens and paths.";
        }
    }
    r
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Acl,
    /// `sys/policy/:name`: an ACL policy, with `rules` as an alias of `policy`.
    Legacy,
    Rgp,
    Egp,
}

fn map<'a>(c: &'a mut Ctx, k: Kind) -> &'a mut std::collections::BTreeMap<String, StoredPolicy> {
    let s = c.store();
    match k {
        Kind::Acl | Kind::Legacy => &mut s.acl_policies,
        Kind::Rgp => &mut s.rgp_policies,
        Kind::Egp => &mut s.egp_policies,
    }
}

fn name(c: &Ctx) -> String {
    c.param("name").trim().to_lowercase()
}

fn acl_keys(c: &mut Ctx) -> Vec<String> {
    let mut keys: Vec<String> = c.store().acl_policies.keys().cloned().collect();
    keys.push("root".into());
    keys
}

fn list_acl(c: &mut Ctx) -> Result<Resp, ApiError> {
    Resp::list(acl_keys(c))
}

fn list_legacy(c: &mut Ctx) -> Result<Resp, ApiError> {
    let keys = acl_keys(c);
    Ok(Resp::data(json!({ "keys": keys, "policies": keys })))
}

/// EGP glob paths as the real service reports them: `prefix/*` is path `prefix/` with glob true.
fn egp_path_entry(p: &str) -> Value {
    match p.strip_suffix('*') {
        Some(prefix) => json!({ "path": prefix, "glob": true }),
        None => json!({ "path": p, "glob": false }),
    }
}

fn list_sentinel(c: &mut Ctx, k: Kind) -> Result<Resp, ApiError> {
    let m = map(c, k).clone();
    if m.is_empty() {
        return Err(ApiError::not_found());
    }
    let keys: Vec<&String> = m.keys().collect();
    if k == Kind::Rgp {
        return Ok(Resp::data(json!({ "keys": keys })));
    }
    let mut npm = Map::new();
    for (n, p) in &m {
        let paths = p.paths.clone().unwrap_or_default();
        npm.insert(
            n.clone(),
            Value::Array(paths.iter().map(|x| egp_path_entry(x)).collect()),
        );
    }
    // The real service also answers `key_info` (name -> its paths) for the list CLI.
    let key_info: Map<String, Value> = m
        .iter()
        .map(|(n, p)| {
            (
                n.clone(),
                json!({ "paths": p.paths.clone().unwrap_or_default() }),
            )
        })
        .collect();
    Ok(Resp::data(
        json!({ "keys": keys, "key_info": key_info, "name_path_map": npm }),
    ))
}

fn read(c: &mut Ctx, k: Kind) -> Result<Resp, ApiError> {
    let n = name(c);
    if matches!(k, Kind::Acl | Kind::Legacy) && n == "root" {
        let field = if k == Kind::Legacy { "rules" } else { "policy" };
        return Ok(Resp::data(json!({ "name": "root", field: "" })));
    }
    let Some(p) = map(c, k).get(&n).cloned() else {
        return Err(ApiError::not_found());
    };
    let mut d = Map::new();
    d.insert("name".into(), json!(p.name));
    d.insert(
        if k == Kind::Legacy { "rules" } else { "policy" }.into(),
        json!(p.raw),
    );
    if matches!(k, Kind::Rgp | Kind::Egp) {
        d.insert(
            "enforcement_level".into(),
            json!(p.enforcement_level.unwrap_or_default()),
        );
    }
    if k == Kind::Egp {
        d.insert("paths".into(), json!(p.paths.unwrap_or_default()));
    }
    if matches!(k, Kind::Acl | Kind::Legacy) {
        // OpenBao 2.7 reads an ACL policy with its check-and-set version, modification time and
        // the identity-template switches.
        d.insert("version".into(), json!(p.version.max(1)));
        d.insert("modified".into(), json!(p.modified));
        d.insert("cas_required".into(), json!(false));
        d.insert("allow_slashes_in_identity_templates".into(), json!(false));
        d.insert("allow_wildcards_in_identity_templates".into(), json!(false));
    }
    Ok(Resp::data(Value::Object(d)))
}

const LEVELS: &[&str] = &["advisory", "soft-mandatory", "hard-mandatory"];

fn write(c: &mut Ctx, k: Kind) -> Result<Resp, ApiError> {
    let n = name(c);
    let mut resp = Resp::no_content();
    let mut raw = fields::string(&c.data, "policy")?.unwrap_or_default();
    if raw.is_empty() && k == Kind::Legacy {
        raw = fields::string(&c.data, "rules")?.unwrap_or_default();
        if !raw.is_empty() {
            resp = resp.warn("'rules' is deprecated, please use 'policy' instead");
        }
    }
    if raw.is_empty() {
        return Err(ApiError::bad_request(
            "'policy' parameter not supplied or empty",
        ));
    }
    if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(raw.as_bytes()) {
        if let Ok(s) = String::from_utf8(bytes) {
            raw = s;
        }
    }
    let mut stored = StoredPolicy {
        name: n.clone(),
        raw,
        ..Default::default()
    };
    match k {
        Kind::Acl | Kind::Legacy => {
            acl::parse(&stored.raw)
                .map_err(|e| ApiError::bad_request(format!("failed to parse policy: {e}")))?;
        }
        Kind::Rgp | Kind::Egp => {
            let level = fields::string(&c.data, "enforcement_level")?.unwrap_or_default();
            if level.is_empty() {
                return Err(ApiError::bad_request("missing enforcement_level"));
            }
            if !LEVELS.contains(&level.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "unknown enforcement level {level:?}"
                )));
            }
            stored.enforcement_level = Some(level);
            if k == Kind::Egp {
                let paths: Vec<String> = fields::comma_list(&c.data, "paths")?
                    .unwrap_or_default()
                    .into_iter()
                    .map(|p| p.trim_start_matches('/').to_string())
                    .filter(|p| !p.is_empty())
                    .collect();
                if paths.is_empty() {
                    return Err(ApiError::bad_request("at least one path must be specified"));
                }
                stored.paths = Some(paths);
            }
        }
    }
    if n == "root" {
        return Err(ApiError::bad_request("cannot update \"root\" policy"));
    }
    if n.is_empty() {
        return Err(ApiError::bad_request("policy name missing"));
    }
    if matches!(k, Kind::Acl | Kind::Legacy) {
        stored.version = map(c, k).get(&n).map(|p| p.version).unwrap_or(0) + 1;
        stored.modified = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    }
    map(c, k).insert(n, stored);
    Ok(resp)
}

fn delete(c: &mut Ctx, k: Kind) -> Result<Resp, ApiError> {
    let n = name(c);
    if n == "root" {
        return Err(ApiError::bad_request("cannot delete \"root\" policy"));
    }
    if matches!(k, Kind::Acl | Kind::Legacy) && n == "default" {
        return Err(ApiError::bad_request("cannot delete default policy"));
    }
    map(c, k).remove(&n);
    Ok(Resp::no_content())
}
