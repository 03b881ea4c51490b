//! `sys/auth` (enable, list, read, tune, disable auth methods), `sys/mounts` (list) and
//! `sys/capabilities-self`, as the real service serves them.
//!
//! Only the `idp` auth method type can be enabled (other types answer 400
//! `plugin not found in the catalog: <type>`, as for an unknown plugin). Enabling, tuning and
//! disabling need `sudo` (the real service lists `auth/*` among its root-protected paths).
//! Disabling a method revokes every token it issued.

use serde_json::{json, Map, Value};

use super::fields;
use super::http::{ApiError, Resp};
use super::route::Route;
use super::{acl, idp, Backend, Ctx, Mount};

pub fn routes() -> Vec<Route> {
    vec![
        Route::new("auth")
            .read(list_auth)
            .doc("List the enabled auth methods.", ""),
        Route::new("auth/*path")
            .read(read_auth)
            .write(enable_auth)
            .delete(disable_auth)
            .sudo()
            .doc("Enable, tune, read or disable an auth method.", ""),
        Route::new("mounts")
            .read(list_mounts)
            .doc("List the mounted secrets engines.", ""),
        Route::new("capabilities-self")
            .write(capabilities_self)
            .doc("Capabilities of the calling token on paths.", ""),
    ]
}

fn mount_info(m: &Mount) -> Value {
    json!({
        "type": m.type_name,
        "description": m.description,
        "accessor": m.accessor,
        "uuid": m.uuid,
        "local": false,
        "seal_wrap": false,
        "external_entropy_access": false,
        "options": Value::Null,
        "plugin_version": "",
        "running_plugin_version": "",
        "running_sha256": "",
        "config": {
            "default_lease_ttl": m.default_lease_ttl,
            "max_lease_ttl": m.max_lease_ttl,
            "force_no_cache": false,
            "token_type": if m.path.starts_with("auth/") { "default-service" } else { "" },
        },
    })
}

fn list_auth(c: &mut Ctx) -> Result<Resp, ApiError> {
    let mut d = Map::new();
    for m in c
        .store()
        .mounts
        .iter()
        .filter(|m| m.path.starts_with("auth/"))
    {
        d.insert(
            m.path.trim_start_matches("auth/").to_string(),
            mount_info(m),
        );
    }
    Ok(Resp::data(Value::Object(d)))
}

fn list_mounts(c: &mut Ctx) -> Result<Resp, ApiError> {
    let mut d = Map::new();
    for m in c
        .store()
        .mounts
        .iter()
        .filter(|m| !m.path.starts_with("auth/"))
    {
        d.insert(m.path.clone(), mount_info(m));
    }
    Ok(Resp::data(Value::Object(d)))
}

fn auth_path(c: &Ctx) -> (String, bool) {
    let p = c.param("path");
    match p.strip_suffix("/tune") {
        Some(base) => (format!("auth/{}/", base.trim_matches('/')), true),
        None => (format!("auth/{}/", p.trim_matches('/')), false),
    }
}

fn read_auth(c: &mut Ctx) -> Result<Resp, ApiError> {
    let (path, tune) = auth_path(c);
    let Some(m) = c.store().mounts.iter().find(|m| m.path == path).cloned() else {
        return Err(ApiError::bad_request(format!(
            "No auth engine at {}",
            path.trim_start_matches("auth/")
        )));
    };
    if tune {
        return Ok(Resp::data(json!({
            "default_lease_ttl": if m.default_lease_ttl > 0 { m.default_lease_ttl } else { super::tokens::SYSTEM_TTL },
            "max_lease_ttl": if m.max_lease_ttl > 0 { m.max_lease_ttl } else { super::tokens::SYSTEM_TTL },
            "force_no_cache": false,
            "description": m.description,
            "token_type": "default-service",
        })));
    }
    Ok(Resp::data(mount_info(&m)))
}

fn enable_auth(c: &mut Ctx) -> Result<Resp, ApiError> {
    let (path, tune) = auth_path(c);
    let d = c.data.clone();
    if tune {
        let Some(m) = c.store().mounts.iter_mut().find(|m| m.path == path) else {
            return Err(ApiError::bad_request(format!("cannot tune '{path}'")));
        };
        if let Some(v) = fields::duration(&d, "default_lease_ttl")? {
            m.default_lease_ttl = v;
        }
        if let Some(v) = fields::duration(&d, "max_lease_ttl")? {
            m.max_lease_ttl = v;
        }
        if let Some(v) = fields::string(&d, "description")? {
            m.description = v;
        }
        return Ok(Resp::no_content());
    }
    let ty = fields::string_or(&d, "type", "")?;
    if ty.is_empty() {
        return Err(ApiError::bad_request(
            "backend type must be specified as a string",
        ));
    }
    if path == "auth/token/" || c.store().mounts.iter().any(|m| m.path == path) {
        return Err(ApiError::bad_request(format!(
            "path is already in use at {}",
            path.trim_start_matches("auth/")
        )));
    }
    if ty != "idp" {
        return Err(ApiError::bad_request(format!(
            "plugin not found in the catalog: {ty}"
        )));
    }
    let mut m = Mount::new(
        &path,
        Backend::Idp,
        "idp",
        &fields::string_or(&d, "description", "")?,
    );
    if let Some(Value::Object(cfg)) = d.get("config") {
        if let Some(v) = fields::duration(cfg, "default_lease_ttl")? {
            m.default_lease_ttl = v;
        }
        if let Some(v) = fields::duration(cfg, "max_lease_ttl")? {
            m.max_lease_ttl = v;
        }
    }
    c.store().mounts.push(m);
    Ok(Resp::no_content())
}

fn disable_auth(c: &mut Ctx) -> Result<Resp, ApiError> {
    let (path, _) = auth_path(c);
    if path == "auth/token/" {
        return Err(ApiError::bad_request(
            "token credential backend cannot be disabled",
        ));
    }
    let store = c.store();
    store.mounts.retain(|m| m.path != path);
    idp::disable(store, &path);
    Ok(Resp::no_content())
}

fn capabilities_self(c: &mut Ctx) -> Result<Resp, ApiError> {
    let Some(t) = c.token.clone() else {
        return Err(ApiError::permission_denied());
    };
    let mut paths = fields::comma_list(&c.data, "paths")?.unwrap_or_default();
    if let Some(p) = fields::string(&c.data, "path")? {
        paths.push(p);
    }
    if paths.is_empty() {
        return Err(ApiError::bad_request("missing paths"));
    }
    let a = c.store().acl_for(&t);
    let mut d = Map::new();
    let mut all: Vec<String> = Vec::new();
    for p in &paths {
        let p = p.trim_start_matches('/');
        let caps = if a.is_root() {
            vec!["root".to_string()]
        } else {
            let names = acl::cap_names(a.caps(p, false));
            if names.is_empty() {
                vec!["deny".to_string()]
            } else {
                names
            }
        };
        all.extend(caps.iter().cloned());
        d.insert(p.to_string(), json!(caps));
    }
    all.sort();
    all.dedup();
    d.insert("capabilities".into(), json!(all));
    Ok(Resp::data(Value::Object(d)))
}
