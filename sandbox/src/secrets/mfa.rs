//! TOTP MFA methods (`identity/mfa/method/totp`, spec A §2.7, §4.5) and a minimal
//! `identity/mfa/login-enforcement` (create, read, list, delete; stored so that a method in use
//! cannot be deleted; logins do not ask for the MFA validation).
//!
//! Choices where the spec is silent, following the real service:
//! * create answers 200 with `data.method_id`; so does an update;
//! * bounds: algorithm SHA1/SHA256/SHA512, digits 6 or 8, skew 0 or 1, period > 0,
//!   key_size > 0, max_validation_attempts >= 0 (0 means the default 5), qr_size >= 0 (0 gives
//!   no barcode); violations answer 400 with the real service's messages;
//! * `generate`/`admin-generate` on an entity that already has a secret for the method answer
//!   200 with the warning `Entity already has a secret for MFA method "<name>"` and no data;
//! * updating or deleting an unknown method id answers 400 / 204; deleting a method used by a
//!   login enforcement answers 400.

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
        Route::new("mfa/method/totp/:id")
            .read(read)
            .write(update)
            .delete(delete)
            .doc("Read, update or delete a TOTP MFA method.", ""),
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
        "namespace": "root",
        "namespace_path": "",
        "mount_accessor": "",
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
    if m.qr_size < 0 {
        return Err(ApiError::bad_request(
            "qr_size must be greater than or equal to zero",
        ));
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

fn save(c: &mut Ctx, id: Option<String>) -> Result<Resp, ApiError> {
    let d = c.data.clone();
    let mut m = match &id {
        Some(id) => c.store().mfa_methods.get(id).cloned().ok_or_else(|| {
            ApiError::bad_request(format!("configuration for method ID {id:?} not found"))
        })?,
        None => TotpMethod {
            id: uuid::Uuid::new_v4().to_string(),
            ..defaults()
        },
    };
    if let Some(n) = fields::string(&d, "method_name")?.filter(|n| !n.is_empty()) {
        if c.store()
            .mfa_methods
            .values()
            .any(|o| o.name == n && o.id != m.id)
        {
            return Err(ApiError::bad_request(format!(
                "method name {n:?} already exists"
            )));
        }
    }
    apply(&mut m, &d)?;
    let out = json!({ "method_id": m.id });
    c.store().mfa_methods.insert(m.id.clone(), m);
    Ok(Resp::data(out))
}

fn create(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = fields::string(&c.data, "id")?
        .or(fields::string(&c.data, "method_id")?)
        .filter(|s| !s.is_empty());
    save(c, id)
}

fn update(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = c.param("id");
    save(c, Some(id))
}

fn read(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = c.param("id");
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

fn delete(c: &mut Ctx) -> Result<Resp, ApiError> {
    let id = c.param("id");
    let users: Vec<String> = c
        .store()
        .login_enforcements
        .values()
        .filter(|e| e.mfa_method_ids.contains(&id))
        .map(|e| e.name.clone())
        .collect();
    if !users.is_empty() {
        return Err(ApiError::bad_request(format!(
            "unable to delete MFA method as it is in use by login enforcement(s): {}",
            users.join(", ")
        )));
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
        ApiError::bad_request(format!("configuration for method ID {id:?} not found"))
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
    let size = size.max(total as u32);
    let mut pixels = vec![255u8; (size * size) as usize];
    for y in 0..size {
        for x in 0..size {
            let mx = (x as usize * total) / size as usize;
            let my = (y as usize * total) / size as usize;
            if mx >= quiet && my >= quiet && mx < quiet + w && my < quiet + w {
                if colors[(my - quiet) * w + (mx - quiet)] == qrcode::Color::Dark {
                    pixels[(y * size + x) as usize] = 0;
                }
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
        let name = if m.name.is_empty() { &m.id } else { &m.name };
        return Ok(Resp::no_content().warn(format!(
            "Entity already has a secret for MFA method {name:?}"
        )));
    }
    let key: Vec<u8> = (0..m.key_size)
        .map(|_| rand::rng().random::<u8>())
        .collect();
    let secret = otp::base32_encode(&key);
    let account = if entity.name.is_empty() {
        entity.id.clone()
    } else {
        entity.name.clone()
    };
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
    let barcode = if m.qr_size > 0 {
        base64::engine::general_purpose::STANDARD.encode(qr_png(&url, m.qr_size as u32)?)
    } else {
        String::new()
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
        return Err(ApiError::bad_request("no entity attached to the request"));
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
    let e = entity_arg(c)?;
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
