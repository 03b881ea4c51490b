//! TOTP MFA methods (`identity/mfa/method/totp`, spec A §2.7, §4.5) and a minimal
//! `identity/mfa/login-enforcement` (create, read, list, delete; stored so that a method in use
//! cannot be deleted; logins do not ask for the MFA validation).
//!
//! Choices where the spec is silent, following the real service:
//! * create answers 200 with `data.method_id`; an update (by ID) answers 204 and replaces every
//!   setting (unset fields take their defaults again; `issuer` is always required); an update of
//!   an unknown ID changes nothing (204);
//! * the otpauth URL is labelled `issuer:entity_id`, as the real service labels it;
//! * bounds: algorithm SHA1/SHA256/SHA512, digits 6 or 8, skew 0 or 1, period > 0,
//!   key_size > 0, max_validation_attempts >= 0 (0 means the default 5); violations answer 400
//!   with the real service's messages; the QR code is at least as large as its modules need;
//! * `generate`/`admin-generate` on an entity that already has a secret for the method answer
//!   200 with the warning `Entity already has a secret for MFA method "<name>"` and no data;
//! * deleting an unknown method ID answers 204; deleting a method used by a login enforcement
//!   answers 500 `methodID is still used by an enforcement configuration with ID: <id>`;
//! * `POST .../totp` always creates (a body `method_id` is ignored with the framework's
//!   "replaced" warning), unknown fields come back as `Endpoint ignored these unrecognized
//!   parameters: [...]` on answers with a body, method IDs in paths are UUIDs (else 404
//!   `unsupported path`), `LIST identity/mfa/method` lists every method type, `qr_size: 0`
//!   gives an empty `barcode` (all as OpenBao 2.7 answers).

use std::collections::BTreeMap;

use base64::Engine;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::fields;
use super::http::{ApiError, Op, Resp};
use super::route::Route;
use super::{otp, Ctx};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TotpMethod {
    pub id: String,
    pub name: String,
    pub issuer: String,
    pub period: i64,
    pub key_size: i64,
    pub qr_size: i64,
    pub algorithm: String,
    pub digits: i64,
    pub skew: i64,
    pub max_validation_attempts: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LoginEnforcement {
    pub name: String,
    pub id: String,
    pub mfa_method_ids: Vec<String>,
    pub auth_method_accessors: Vec<String>,
    pub auth_method_types: Vec<String>,
    pub identity_group_ids: Vec<String>,
    pub identity_entity_ids: Vec<String>,
}

pub fn routes() -> Vec<Route> {
    vec![
        Route::new("mfa/method/totp")
            .write(create)
            .list(list)
            .doc("Create or list TOTP MFA methods.", ""),
        Route::new("mfa/method/totp/generate")
            .write(generate)
            .doc("Generate a TOTP secret for the calling entity.", ""),
        Route::new("mfa/method/totp/admin-generate")
            .write(admin_generate)
            .doc("Generate a TOTP secret for an entity.", ""),
        Route::new("mfa/method/totp/admin-destroy")
            .write(admin_destroy)
            .doc("Destroy an entity's TOTP secret.", ""),
        Route::new("mfa/method/totp/:method_id")
            .read(read)
            .write(update)
            .delete(delete)
            .doc("Read, update or delete a TOTP MFA method.", ""),
        Route::new("mfa/method")
            .list(list)
            .doc("List the MFA methods of every type.", ""),
        Route::new("mfa/method/:method_id")
            .read(read)
            .doc("Read an MFA method of any type.", ""),
        Route::new("mfa/login-enforcement")
            .list(list_enforcements)
            .doc("List login enforcements.", ""),
        Route::new("mfa/login-enforcement/:name")
            .read(read_enforcement)
            .write(write_enforcement)
            .delete(delete_enforcement)
            .doc("Manage a login enforcement.", ""),
    ]
}

fn method_json(m: &TotpMethod) -> Value {
    json!({
        "id": m.id,
        "name": m.name,
        "issuer": m.issuer,
        "period": m.period,
        "key_size": m.key_size,
        "qr_size": m.qr_size,
        "algorithm": m.algorithm,
        "digits": m.digits,
        "skew": m.skew,
        "max_validation_attempts": m.max_validation_attempts,
        "type": "totp",
        "namespace_id": "root",
        "namespace_path": "",
    })
}

/// Applies the request fields to `m` (defaults already in `m`), validating every bound.
fn apply(m: &mut TotpMethod, d: &fields::Data) -> Result<(), ApiError> {
    if let Some(v) = fields::string(d, "issuer")? {
        m.issuer = v;
    }
    if let Some(v) = fields::string(d, "method_name")? {
        m.name = v;
    }
    if let Some(v) = fields::duration(d, "period")? {
        m.period = v;
    }
    if let Some(v) = fields::int(d, "key_size")? {
        m.key_size = v;
    }
    if let Some(v) = fields::int(d, "qr_size")? {
        m.qr_size = v;
    }
    if let Some(v) = fields::string(d, "algorithm")? {
        m.algorithm = v;
    }
    if let Some(v) = fields::int(d, "digits")? {
        m.digits = v;
    }
    if let Some(v) = fields::int(d, "skew")? {
        m.skew = v;
    }
    if let Some(v) = fields::int(d, "max_validation_attempts")? {
        m.max_validation_attempts = v;
    }
    if otp::Algorithm::parse(&m.algorithm).is_none() {
        return Err(ApiError::bad_request("unrecognized algorithm"));
    }
    if m.digits != 6 && m.digits != 8 {
        return Err(ApiError::bad_request("digits can only be 6 or 8"));
    }
    if m.period <= 0 {
        return Err(ApiError::bad_request("period must be greater than zero"));
    }
    if m.skew != 0 && m.skew != 1 {
        return Err(ApiError::bad_request("skew must be 0 or 1"));
    }
    if m.key_size <= 0 {
        return Err(ApiError::bad_request("key_size must be greater than zero"));
    }
    if m.issuer.is_empty() {
        return Err(ApiError::bad_request("issuer must be set"));
    }
    if m.max_validation_attempts < 0 {
        return Err(ApiError::bad_request(
            "max_validation_attempts must be greater than zero",
        ));
    }
    if m.max_validation_attempts == 0 {
        m.max_validation_attempts = 5;
    }
    Ok(())
}

fn defaults() -> TotpMethod {
    TotpMethod {
        period: 30,
        key_size: 20,
        qr_size: 200,
        algorithm: "SHA1".into(),
        digits: 6,
        skew: 1,
        max_validation_attempts: 5,
        ..Default::default()
    }
}

/// Creates or updates a method as the real service does: every write replaces the TOTP
/// settings (fields not given take their defaults again, so `issuer` is always required); a
/// write naming an unknown method ID changes nothing (204); a `method_name` used by another
/// method is an internal error (500), as in the real service.
fn save(c: &mut Ctx, id: Option<String>) -> Result<Resp, ApiError> {
    let d = c.data.clone();
    let name = fields::string(&d, "method_name")?.unwrap_or_default();
    let existing = match &id {
        Some(id) => match c.store().mfa_methods.get(id).cloned() {
            Some(m) => Some(m),
            None => return Ok(Resp::no_content()),
        },
        None => None,
    };
    let named = (!name.is_empty())
        .then(|| {
            c.store()
                .mfa_methods
                .values()
                .find(|o| o.name == name)
                .cloned()
        })
        .flatten();
    let base = match (existing.clone(), named) {
        (Some(e), Some(n)) if e.id != n.id => {
            return Err(ApiError::internal(super::http::multi(&format!(
                "a login MFA method configuration with the method name {name} already exists"
            ))))
        }
        (Some(e), _) => e,
        (None, Some(n)) => n,
        (None, None) => TotpMethod {
            id: uuid::Uuid::new_v4().to_string(),
            ..Default::default()
        },
    };
    let mut m = TotpMethod {
        id: base.id.clone(),
        name: base.name.clone(),
        ..defaults()
    };
    if !name.is_empty() {
        m.name = name;
    }
    apply(&mut m, &d)?;
    let out = json!({ "method_id": m.id });
    c.store().mfa_methods.insert(m.id.clone(), m);
    Ok(if id.is_none() {
        Resp::data(out)
    } else {
        Resp::no_content()
    })
}

/// The fields of a TOTP method write; others are ignored with a warning.
const METHOD_FIELDS: &[&str] = &[
    "method_name",
    "method_id",
    "issuer",
    "period",
    "key_size",
    "qr_size",
    "algorithm",
    "digits",
    "skew",
    "max_validation_attempts",
];

/// The framework's warnings on a write that answers a body (OpenBao 2.7): unknown fields are
/// ignored (`Endpoint ignored these unrecognized parameters: [a b]`), and a `method_id` in the
/// body is replaced by the path's (`Endpoint replaced the value of these parameters with the
/// values captured from the endpoint's path: [method_id]`).
fn field_warnings(mut r: Resp, d: &fields::Data) -> Resp {
    let mut unknown: Vec<&String> = d
        .keys()
        .filter(|k| !METHOD_FIELDS.contains(&k.as_str()))
        .collect();
    unknown.sort();
    if !unknown.is_empty() && r.data.is_some() {
        let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
        r = r.warn(format!(
            "Endpoint ignored these unrecognized parameters: [{}]",
            names.join(" ")
        ));
    }
    if d.contains_key("method_id") && r.data.is_some() {
        r = r.warn(
            "Endpoint replaced the value of these parameters with the values captured from the endpoint's path: [method_id]",
        );
    }
    r
}

/// `POST identity/mfa/method/totp` always creates a new method: a `method_id` in the body is
/// ignored (and warned about), as OpenBao 2.7 does; updates go to `.../totp/:id`.
fn create(c: &mut Ctx) -> Result<Resp, ApiError> {
    let d = c.data.clone();
    let r = save(c, None)?;
    Ok(field_warnings(r, &d))
}

/// Method IDs in the path are UUIDs; another segment matches no route (404 `unsupported path`),
/// as in OpenBao 2.7.
fn id_param(c: &Ctx) -> Result<String, ApiError> {
    let id = c.param("method_id");
    uuid::Uuid::parse_str(&id)
        .map(|_| id)
        .map_err(|_| ApiError::unsupported_path())
}

fn update(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = id_param(c)?;
    let d = c.data.clone();
    let r = save(c, Some(id))?;
    Ok(field_warnings(r, &d))
}

/// The read has `name`, `type`, `namespace_id` and `namespace_path`, and no `mount_accessor`
/// or `namespace` (OpenBao 2.7).
fn read(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = id_param(c)?;
    c.store()
        .mfa_methods
        .get(&id)
        .map(|m| Resp::data(method_json(m)))
        .ok_or_else(ApiError::not_found)
}

fn list(c: &mut Ctx) -> Result<Resp, ApiError> {
    let methods: Vec<TotpMethod> = c.store().mfa_methods.values().cloned().collect();
    if methods.is_empty() {
        return Err(ApiError::not_found());
    }
    let keys: Vec<&String> = methods.iter().map(|m| &m.id).collect();
    let info: Map<String, Value> = methods
        .iter()
        .map(|m| (m.id.clone(), method_json(m)))
        .collect();
    Ok(Resp::data(json!({ "keys": keys, "key_info": info })))
}

/// Deleting a method a login enforcement uses is a plain error, 500 `methodID is still used by
/// an enforcement configuration with ID: <id>` (OpenBao 2.7); an unknown ID is 204.
fn delete(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = id_param(c)?;
    let user = c
        .store()
        .login_enforcements
        .values()
        .find(|e| e.mfa_method_ids.contains(&id))
        .map(|e| e.id.clone());
    if let Some(enf) = user {
        return Err(ApiError::internal(super::http::multi(&format!(
            "methodID is still used by an enforcement configuration with ID: {enf}"
        ))));
    }
    let store = c.store();
    store.mfa_methods.remove(&id);
    for e in store.entities.values_mut() {
        e.totp_secrets.remove(&id);
    }
    Ok(Resp::no_content())
}

fn method_arg(c: &mut Ctx) -> Result<TotpMethod, ApiError> {
    let id = fields::string_or(&c.data, "method_id", "")?;
    if id.is_empty() {
        return Err(ApiError::bad_request("missing method ID"));
    }
    c.store().mfa_methods.get(&id).cloned().ok_or_else(|| {
        ApiError::bad_request(format!("configuration for method ID {id:?} does not exist"))
    })
}

/// Renders the QR code of `data` as a `size`x`size` grayscale PNG.
fn qr_png(data: &str, size: u32) -> Result<Vec<u8>, ApiError> {
    let code =
        qrcode::QrCode::new(data.as_bytes()).map_err(|e| ApiError::internal(e.to_string()))?;
    let w = code.width();
    let colors = code.to_colors();
    let quiet = 4usize;
    let total = w + 2 * quiet;
    // At least as large as the modules need; capped so a huge qr_size cannot exhaust memory.
    let size = size.max(total as u32).min(4096);
    let mut pixels = vec![255u8; (size * size) as usize];
    for y in 0..size {
        for x in 0..size {
            let mx = (x as usize * total) / size as usize;
            let my = (y as usize * total) / size as usize;
            let inside = mx >= quiet && my >= quiet && mx < quiet + w && my < quiet + w;
            if inside && colors[(my - quiet) * w + (mx - quiet)] == qrcode::Color::Dark {
                pixels[(y * size + x) as usize] = 0;
            }
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, size, size);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc
            .write_header()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        wr.write_image_data(&pixels)
            .map_err(|e| ApiError::internal(e.to_string()))?;
    }
    Ok(out)
}

fn url_escape(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// Generates and stores a secret for `entity_id`, unless one exists.
fn generate_for(c: &mut Ctx, m: &TotpMethod, entity_id: &str) -> Result<Resp, ApiError> {
    let Some(entity) = c.store().entities.get(entity_id).cloned() else {
        return Err(ApiError::bad_request("invalid entity ID"));
    };
    if entity.totp_secrets.contains_key(&m.id) {
        return Ok(Resp::no_content().warn(format!(
            "Entity already has a secret for MFA method {:?}",
            m.name
        )));
    }
    let key: Vec<u8> = (0..m.key_size.min(4096))
        .map(|_| rand::rng().random::<u8>())
        .collect();
    let secret = otp::base32_encode(&key);
    // The real service labels the secret with the entity ID.
    let account = entity.id.clone();
    let url = format!(
        "otpauth://totp/{}:{}?algorithm={}&digits={}&issuer={}&period={}&secret={}",
        url_escape(&m.issuer),
        url_escape(&account),
        m.algorithm,
        m.digits,
        url_escape(&m.issuer),
        m.period,
        secret
    );
    // `qr_size: 0` gives an empty `barcode` (OpenBao 2.7: no QR code is rendered).
    let barcode = if m.qr_size <= 0 {
        String::new()
    } else {
        base64::engine::general_purpose::STANDARD.encode(qr_png(&url, m.qr_size as u32)?)
    };
    if let Some(e) = c.store().entities.get_mut(entity_id) {
        e.totp_secrets.insert(m.id.clone(), secret);
    }
    Ok(Resp::data(json!({ "barcode": barcode, "url": url })))
}

fn generate(c: &mut Ctx) -> Result<Resp, ApiError> {
    let m = method_arg(c)?;
    let entity = c
        .token
        .as_ref()
        .map(|t| t.entity_id.clone())
        .unwrap_or_default();
    if entity.is_empty() {
        return Err(ApiError::bad_request("missing entityID"));
    }
    generate_for(c, &m, &entity)
}

fn entity_arg(c: &Ctx) -> Result<String, ApiError> {
    let e = fields::string_or(&c.data, "entity_id", "")?;
    if e.is_empty() {
        return Err(ApiError::bad_request("missing entity ID"));
    }
    Ok(e)
}

fn admin_generate(c: &mut Ctx) -> Result<Resp, ApiError> {
    let m = method_arg(c)?;
    let e = fields::string_or(&c.data, "entity_id", "")?;
    if e.is_empty() {
        return Err(ApiError::bad_request("missing entityID"));
    }
    generate_for(c, &m, &e)
}

fn admin_destroy(c: &mut Ctx) -> Result<Resp, ApiError> {
    let m = method_arg(c)?;
    let e = entity_arg(c)?;
    let Some(entity) = c.store().entities.get_mut(&e) else {
        return Err(ApiError::bad_request("invalid entity ID"));
    };
    entity.totp_secrets.remove(&m.id);
    Ok(Resp::no_content())
}

/// The TOTP secret stored on an entity (for the admin API and tests).
pub fn entity_secret(store: &super::Store, entity: &str, method: &str) -> Option<String> {
    store
        .entities
        .get(entity)?
        .totp_secrets
        .get(method)
        .cloned()
}

fn enforcement_json(e: &LoginEnforcement) -> Value {
    json!({
        "name": e.name,
        "id": e.id,
        "namespace_id": "root",
        "namespace_path": "",
        "mfa_method_ids": e.mfa_method_ids,
        "auth_method_accessors": e.auth_method_accessors,
        "auth_method_types": e.auth_method_types,
        "identity_group_ids": e.identity_group_ids,
        "identity_entity_ids": e.identity_entity_ids,
    })
}

fn write_enforcement(c: &mut Ctx) -> Result<Resp, ApiError> {
    let name = c.param("name");
    let d = c.data.clone();
    let mut e = c
        .store()
        .login_enforcements
        .get(&name)
        .cloned()
        .unwrap_or_else(|| LoginEnforcement {
            name: name.clone(),
            id: uuid::Uuid::new_v4().to_string(),
            ..Default::default()
        });
    if let Some(v) = fields::comma_list(&d, "mfa_method_ids")? {
        e.mfa_method_ids = v;
    }
    for (k, slot) in [
        ("auth_method_accessors", &mut e.auth_method_accessors),
        ("auth_method_types", &mut e.auth_method_types),
        ("identity_group_ids", &mut e.identity_group_ids),
        ("identity_entity_ids", &mut e.identity_entity_ids),
    ] {
        if let Some(v) = fields::comma_list(&d, k)? {
            *slot = v;
        }
    }
    if e.mfa_method_ids.is_empty() {
        return Err(ApiError::bad_request("missing method ids"));
    }
    if let Some(bad) = e.mfa_method_ids.iter().find(|id| {
        !c.world.clusters[c.cluster]
            .store
            .mfa_methods
            .contains_key(*id)
    }) {
        return Err(ApiError::bad_request(format!(
            "failed to get method with id {bad:?}"
        )));
    }
    // Like OpenBao: accessors and types must name auth methods mounted now (a fresh server
    // has only `token`; `userpass` counts only once enabled).
    let auth_mounts: Vec<&super::Mount> = c
        .store()
        .mounts
        .iter()
        .filter(|m| m.path.starts_with("auth/"))
        .collect();
    if e.auth_method_accessors
        .iter()
        .any(|a| !auth_mounts.iter().any(|m| &m.accessor == a))
    {
        return Err(ApiError::bad_request(
            "one of the auth method accessors provided is invalid",
        ));
    }
    if e.auth_method_types
        .iter()
        .any(|t| !auth_mounts.iter().any(|m| &m.type_name == t))
    {
        return Err(ApiError::bad_request(
            "one of the auth method types provided is invalid",
        ));
    }
    if e.auth_method_accessors.is_empty()
        && e.auth_method_types.is_empty()
        && e.identity_group_ids.is_empty()
        && e.identity_entity_ids.is_empty()
    {
        return Err(ApiError::bad_request(
            "One of auth_method_accessors, auth_method_types, identity_group_ids, identity_entity_ids must be specified",
        ));
    }
    let _ = c.op == Op::Create;
    c.store().login_enforcements.insert(name, e);
    Ok(Resp::no_content())
}

fn read_enforcement(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    c.store()
        .login_enforcements
        .get(&n)
        .map(|e| Resp::data(enforcement_json(e)))
        .ok_or_else(ApiError::not_found)
}

fn list_enforcements(c: &mut Ctx) -> Result<Resp, ApiError> {
    let m: BTreeMap<String, LoginEnforcement> = c.store().login_enforcements.clone();
    if m.is_empty() {
        return Err(ApiError::not_found());
    }
    let info: Map<String, Value> = m
        .iter()
        .map(|(k, e)| (k.clone(), enforcement_json(e)))
        .collect();
    Ok(Resp::data(
        json!({ "keys": m.keys().collect::<Vec<_>>(), "key_info": info }),
    ))
}

fn delete_enforcement(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    c.store().login_enforcements.remove(&n);
    Ok(Resp::no_content())
}
