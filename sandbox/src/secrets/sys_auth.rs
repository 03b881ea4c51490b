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
        Route::new("mounts/*path")
            .read(read_mount)
            .write(enable_mount)
            .delete(disable_mount)
            .doc(
                "Enable, read or disable a secrets engine (types transform and ad).",
                "",
            ),
        Route::new("capabilities-self")
            .write(capabilities_self)
            .doc("Capabilities of the calling token on paths.", ""),
        // hvac's `get_capabilities(paths, token=...)` and `(paths, accessor=...)` call these.
        Route::new("capabilities")
            .write(capabilities_of_token)
            .doc("Capabilities of a given token on paths.", ""),
        Route::new("capabilities-accessor")
            .write(capabilities_of_accessor)
            .doc("Capabilities of the token of an accessor on paths.", ""),
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
    capabilities_for(c, &t)
}

/// `sys/capabilities`: the token is in the body; an unknown one answers 400 like the real
/// service (`invalid token`).
fn capabilities_of_token(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = fields::string(&c.data, "token")?.unwrap_or_default();
    if id.is_empty() {
        return Err(ApiError::bad_request("missing token"));
    }
    let Some(t) = c.store().token(&id).cloned() else {
        return Err(ApiError::bad_request("invalid token"));
    };
    capabilities_for(c, &t)
}

/// `sys/capabilities-accessor`: the token is named by its accessor.
fn capabilities_of_accessor(c: &mut Ctx) -> Result<Resp, ApiError> {
    let acc = fields::string(&c.data, "accessor")?.unwrap_or_default();
    if acc.is_empty() {
        return Err(ApiError::bad_request("missing accessor"));
    }
    let now = super::now();
    let Some(t) = c
        .store()
        .tokens
        .values()
        .find(|t| t.accessor == acc && t.expire_time.is_none_or(|e| e > now))
        .cloned()
    else {
        return Err(ApiError::bad_request("invalid accessor"));
    };
    capabilities_for(c, &t)
}

fn capabilities_for(c: &mut Ctx, t: &super::TokenEntry) -> Result<Resp, ApiError> {
    let mut paths = fields::comma_list(&c.data, "paths")?.unwrap_or_default();
    if let Some(p) = fields::string(&c.data, "path")? {
        paths.push(p);
    }
    if paths.is_empty() {
        return Err(ApiError::bad_request("missing paths"));
    }
    let a = c.store().acl_for(t);
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
    // As in the real service, the backwards-compatible `capabilities` key is only set when
    // exactly one path is asked about (and is that path's list).
    if paths.len() == 1 {
        d.insert("capabilities".into(), json!(all));
    }
    Ok(Resp::data(Value::Object(d)))
}

fn mount_path(c: &Ctx) -> String {
    format!("{}/", c.param("path").trim_matches('/'))
}

fn read_mount(c: &mut Ctx) -> Result<Resp, ApiError> {
    let p = mount_path(c);
    let p = p.strip_suffix("tune/").map(|x| x.to_string()).unwrap_or(p);
    c.store()
        .mounts
        .iter()
        .find(|m| m.path == p)
        .map(|m| Resp::data(mount_info(m)))
        .ok_or_else(|| ApiError::bad_request(format!("No secret engine mount at {p}")))
}

fn enable_mount(c: &mut Ctx) -> Result<Resp, ApiError> {
    let p = mount_path(c);
    let d = c.data.clone();
    if p.ends_with("/tune/") {
        let base = p.trim_end_matches("tune/").to_string();
        let Some(m) = c.store().mounts.iter_mut().find(|m| m.path == base) else {
            return Err(ApiError::bad_request(format!("cannot tune '{base}'")));
        };
        if let Some(v) = fields::duration(&d, "default_lease_ttl")? {
            m.default_lease_ttl = v;
        }
        if let Some(v) = fields::duration(&d, "max_lease_ttl")? {
            m.max_lease_ttl = v;
        }
        return Ok(Resp::no_content());
    }
    let ty = fields::string_or(&d, "type", "")?;
    if ty.is_empty() {
        return Err(ApiError::bad_request(
            "backend type must be specified as a string",
        ));
    }
    if ["sys/", "identity/", "auth/", "cubbyhole/"]
        .iter()
        .any(|r| p.starts_with(r))
    {
        return Err(ApiError::bad_request(format!(
            "cannot mount at reserved path {p:?}"
        )));
    }
    if c.store()
        .mounts
        .iter()
        .any(|m| m.path.starts_with(&p) || p.starts_with(&m.path))
    {
        return Err(ApiError::bad_request(format!(
            "path is already in use at {p}"
        )));
    }
    let backend = match ty.as_str() {
        "transform" => Backend::Transform,
        "ad" => Backend::Ad,
        other => {
            return Err(ApiError::bad_request(format!(
                "plugin not found in the catalog: {other}"
            )))
        }
    };
    let m = Mount::new(&p, backend, &ty, &fields::string_or(&d, "description", "")?);
    c.store().mounts.push(m);
    Ok(Resp::no_content())
}

fn disable_mount(c: &mut Ctx) -> Result<Resp, ApiError> {
    let p = mount_path(c);
    let store = c.store();
    let Some(m) = store.mounts.iter().find(|m| m.path == p).cloned() else {
        return Ok(Resp::no_content());
    };
    if !matches!(m.backend, Backend::Transform | Backend::Ad) {
        return Err(ApiError::bad_request(format!("cannot unmount {p:?}")));
    }
    store.mounts.retain(|x| x.path != p);
    store.transform.remove(&p);
    store.ad.remove(&p);
    let ids: Vec<String> = store
        .leases
        .keys()
        .filter(|k| k.starts_with(&p))
        .cloned()
        .collect();
    for id in ids {
        let _ = super::leases::revoke_one(store, &id, true);
    }
    Ok(Resp::no_content())
}

/// `sys/health`, `sys/seal-status`, `sys/init`, `sys/leader`: unauthenticated status endpoints
/// that clients use to probe the server (not enveloped, as in the real service). `sys/health`
/// answers 472 on a DR secondary, the real service's default `drsecondarycode`.
pub fn status_routes() -> Vec<Route> {
    vec![
        Route::new("health").read(health).unauth().dr_secondary().doc("Health of the server.", ""),
        Route::new("seal-status").read(seal_status).unauth().dr_secondary().doc("Seal status.", ""),
        Route::new("init").read(|_| Ok(Resp::raw(axum::http::StatusCode::OK, json!({"initialized": true}))))
            .unauth()
            .doc("Initialization status.", ""),
        Route::new("leader").read(|_| Ok(Resp::raw(axum::http::StatusCode::OK, json!({
            "ha_enabled": false, "is_self": false, "active_time": "0001-01-01T00:00:00Z",
            "leader_address": "", "leader_cluster_address": "", "performance_standby": false,
            "performance_standby_last_remote_wal": 0,
        })))).unauth().doc("HA leader.", ""),
    ]
}

fn dr_mode(c: &Ctx) -> &'static str {
    match c.world.clusters[c.cluster].dr.mode {
        super::dr::Mode::Disabled => "disabled",
        super::dr::Mode::Primary => "primary",
        super::dr::Mode::Secondary => "secondary",
    }
}

fn health(c: &mut Ctx) -> Result<Resp, ApiError> {
    let mode = dr_mode(c);
    // Clients choose the codes with `activecode` and `drsecondarycode`, as with the real service.
    let pick = |k: &str, default: i64| -> Result<u16, ApiError> {
        Ok(fields::int(&c.data, k)?.unwrap_or(default).clamp(100, 599) as u16)
    };
    let code = if mode == "secondary" {
        pick("drsecondarycode", 472)?
    } else {
        pick("activecode", 200)?
    };
    let code = axum::http::StatusCode::from_u16(code).unwrap_or(axum::http::StatusCode::OK);
    Ok(Resp::raw(
        code,
        json!({
            "initialized": true,
            "sealed": false,
            "standby": false,
            "performance_standby": false,
            "replication_performance_mode": "disabled",
            "replication_dr_mode": mode,
            "server_time_utc": super::now(),
            "version": "1.17.0+ent",
            "enterprise": true,
            "cluster_name": format!("sandbox-cluster-{}", c.cluster),
            "cluster_id": c.world.clusters[c.cluster].dr.cluster_id,
        }),
    ))
}

fn seal_status(c: &mut Ctx) -> Result<Resp, ApiError> {
    Ok(Resp::raw(
        axum::http::StatusCode::OK,
        json!({
            "type": "shamir", "initialized": true, "sealed": false,
            "t": super::dr::THRESHOLD, "n": super::dr::SHARES, "progress": 0, "nonce": "",
            "version": "1.17.0+ent", "build_date": "", "migration": false,
            "cluster_name": format!("sandbox-cluster-{}", c.cluster),
            "cluster_id": c.world.clusters[c.cluster].dr.cluster_id,
            "recovery_seal": false, "storage_type": "inmem",
        }),
    ))
}
