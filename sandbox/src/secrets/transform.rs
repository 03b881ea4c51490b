//! The transform secrets engine (spec C §2.1, §4.1), mounted at `transform/` by default and at
//! any path enabled through `sys/mounts/:path` with type `transform`.
//!
//! Implemented: roles (with the `filter` glob on list), the deprecated generic and the
//! type-specific transformation endpoints (type immutable, convergent immutable, deletion
//! refused unless `deletion_allowed` for keyed transformations), templates (type `regex` only,
//! the pattern must compile and have at least one capture group, alphabet must exist), alphabets
//! (at least two distinct characters), SQL stores (drivers, defaults; username and password are
//! never read back), the schema endpoint, the 4096-bit RSA wrapping key, and BYOK import that
//! really unwraps the key: base64 ciphertext = RSA-OAEP(hash_function) of an ephemeral 256-bit
//! AES key (first 512 bytes) followed by the target key wrapped with AES-KWP (RFC 5649) under it;
//! the target must be a 256-bit key. Also `tokenization/keys/:name/rotate`, so that the
//! "rotated imported key refuses import_version" rule can be exercised.
//!
//! References are not checked when written (a role may name a transformation, a transformation a
//! template or store, a template an alphabet that does not exist yet), while deleting what is in
//! use is refused, following the real engine's "Deletion Behavior" and its setup walkthrough.
//! The engine is an enterprise feature: the community edition does not serve its paths.
//!
//! Not emulated: encode/decode/export (the spec's material stops before them), connecting to the
//! SQL databases (stores are validated and stored only).
//!
//! The wrapping key is generated once per process (lazily, in a background thread started with
//! the sandbox) and shared by every transform mount of the sandbox.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use base64::Engine;
use rsa::pkcs8::{EncodePublicKey, LineEnding};
use rsa::{Oaep, RsaPrivateKey};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::fields;
use super::http::{ApiError, Resp};
use super::route::{Licence, Route};
use super::Ctx;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TransformMount {
    pub roles: BTreeMap<String, Vec<String>>,
    pub transformations: BTreeMap<String, Transformation>,
    pub templates: BTreeMap<String, Template>,
    pub alphabets: BTreeMap<String, String>,
    pub stores: BTreeMap<String, Store>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Transformation {
    pub kind: String,
    pub templates: Vec<String>,
    pub tweak_source: String,
    pub masking_character: String,
    pub allowed_roles: Vec<String>,
    pub deletion_allowed: bool,
    pub mapping_mode: String,
    pub convergent: bool,
    pub max_ttl: i64,
    pub stores: Vec<String>,
    pub imported: bool,
    pub allow_rotation: bool,
    pub rotated_internally: bool,
    /// Key versions (never returned).
    #[serde(default)]
    pub keys: Vec<Vec<u8>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Template {
    pub kind: String,
    pub pattern: String,
    pub alphabet: String,
    pub encode_format: String,
    pub decode_formats: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Store {
    pub kind: String,
    pub driver: String,
    pub connection_string: String,
    pub username: String,
    pub password: String,
    pub supported_transformations: Vec<String>,
    pub schema: String,
    pub max_open_connections: i64,
    pub max_idle_connections: i64,
    pub max_connection_lifetime: i64,
}

static WRAPPING_KEY: OnceLock<RsaPrivateKey> = OnceLock::new();

/// The process-wide 4096-bit RSA wrapping key.
pub fn wrapping_key() -> &'static RsaPrivateKey {
    WRAPPING_KEY.get_or_init(|| {
        let mut rng = rand08::thread_rng();
        RsaPrivateKey::new(&mut rng, 4096).expect("RSA key generation does not fail for 4096 bits")
    })
}

/// Installs a saved wrapping key (from `--state-dir`), unless one is already in use.
pub fn restore_wrapping_key(pem: &str) {
    use rsa::pkcs8::DecodePrivateKey;
    if let Ok(k) = RsaPrivateKey::from_pkcs8_pem(pem) {
        let _ = WRAPPING_KEY.set(k);
    }
}

/// The wrapping key as PKCS#8 PEM, if it has been generated.
pub fn wrapping_key_pem() -> Option<String> {
    use rsa::pkcs8::EncodePrivateKey;
    WRAPPING_KEY
        .get()
        .and_then(|k| k.to_pkcs8_pem(LineEnding::LF).ok())
        .map(|z| z.to_string())
}

/// Starts generating the wrapping key in the background, once, so it is ready when a client
/// first reads it.
///
/// Called when a transform mount first serves a request, not when the server starts: a 4096-bit
/// key costs seconds of CPU, and a server whose transform engine is never used should not pay
/// it (the test suite starts hundreds of servers on two cores). The key exists from the
/// engine's first use on and is kept with the server's state (`--state-dir`).
pub fn warm_up() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        if WRAPPING_KEY.get().is_none() {
            std::thread::spawn(|| {
                wrapping_key();
            });
        }
    });
}

/// Every route needs the enterprise licence (the real engine is part of the Advanced Data
/// Protection module): on the community edition the paths are not registered and answer 404
/// `unsupported path`, as a server without the module does.
pub fn routes() -> Vec<Route> {
    let routes = vec![
        Route::new("role").list(list_roles).doc("List roles.", ""),
        Route::new("role/:name")
            .read(read_role)
            .write(write_role)
            .delete(delete_role)
            .doc("Manage a role.", ""),
        Route::new("transformation")
            .list(|c| list_transformations(c, None))
            .doc("List transformations.", ""),
        Route::new("transformation/:name")
            .read(read_transformation)
            .write(write_generic)
            .delete(delete_transformation)
            .doc(
                "Manage a transformation (generic endpoint, deprecated since 1.6).",
                "",
            ),
        Route::new("transformations/fpe")
            .list(|c| list_transformations(c, Some("fpe")))
            .doc("List FPE transformations.", ""),
        Route::new("transformations/fpe/:name/import")
            .write(import_fpe)
            .doc("Import a key into a new FPE transformation.", ""),
        Route::new("transformations/fpe/:name")
            .read(read_transformation)
            .write(|c| write_typed(c, "fpe"))
            .delete(delete_transformation)
            .doc("Manage an FPE transformation.", ""),
        Route::new("transformations/masking")
            .list(|c| list_transformations(c, Some("masking")))
            .doc("List masking transformations.", ""),
        Route::new("transformations/masking/:name")
            .read(read_transformation)
            .write(|c| write_typed(c, "masking"))
            .delete(delete_transformation)
            .doc("Manage a masking transformation.", ""),
        Route::new("transformations/tokenization")
            .list(|c| list_transformations(c, Some("tokenization")))
            .doc("List tokenization transformations.", ""),
        Route::new("transformations/tokenization/:name/import")
            .write(import_tokenization)
            .doc("Import a key into a new tokenization transformation.", ""),
        Route::new("transformations/tokenization/:name/import_version")
            .write(import_version)
            .doc(
                "Import a new key version into an imported tokenization transformation.",
                "",
            ),
        Route::new("transformations/tokenization/:name")
            .read(read_transformation)
            .write(|c| write_typed(c, "tokenization"))
            .delete(delete_transformation)
            .doc("Manage a tokenization transformation.", ""),
        Route::new("tokenization/keys/:name/rotate")
            .write(rotate_key)
            .doc("Rotate a tokenization key.", ""),
        Route::new("wrapping_key")
            .read(read_wrapping_key)
            .doc("Read the RSA wrapping key for key import.", ""),
        Route::new("template")
            .list(list_templates)
            .doc("List templates.", ""),
        Route::new("template/:name")
            .read(read_template)
            .write(write_template)
            .delete(delete_template)
            .doc("Manage a template.", ""),
        Route::new("alphabet")
            .list(list_alphabets)
            .doc("List alphabets.", ""),
        Route::new("alphabet/:name")
            .read(read_alphabet)
            .write(write_alphabet)
            .delete(delete_alphabet)
            .doc("Manage an alphabet.", ""),
        Route::new("stores")
            .list(list_stores)
            .doc("List stores.", ""),
        Route::new("stores/:name/schema")
            .write(store_schema)
            .doc("Create the schema of a SQL store.", ""),
        Route::new("stores/:name")
            .read(read_store)
            .write(write_store)
            .delete(delete_store)
            .doc("Manage a SQL store.", ""),
    ];
    routes
        .into_iter()
        .map(|r| r.licence(Licence::Enterprise))
        .collect()
}

fn tm<'a>(c: &'a mut Ctx) -> &'a mut TransformMount {
    let p = c.mount.path.clone();
    c.store().transform.entry(p).or_default()
}

fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let mut rest = s;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(p) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            match rest.find(p) {
                Some(ix) => rest = &rest[ix + p.len()..],
                None => return false,
            }
        }
    }
    true
}

fn list_roles(c: &mut Ctx) -> Result<Resp, ApiError> {
    let filter = fields::string_or(&c.data, "filter", "*")?;
    let filter = if filter.is_empty() {
        "*".to_string()
    } else {
        filter
    };
    let keys: Vec<String> = tm(c)
        .roles
        .keys()
        .filter(|k| glob(&filter, k))
        .cloned()
        .collect();
    Resp::list(keys)
}

fn read_role(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    tm(c)
        .roles
        .get(&n)
        .map(|t| Resp::data(json!({ "transformations": t })))
        .ok_or_else(ApiError::not_found)
}

fn write_role(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let t = fields::comma_list(&c.data, "transformations")?.unwrap_or_default();
    tm(c).roles.insert(n, t);
    Ok(Resp::no_content())
}

fn delete_role(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    tm(c).roles.remove(&n);
    Ok(Resp::no_content())
}

fn list_transformations(c: &mut Ctx, kind: Option<&str>) -> Result<Resp, ApiError> {
    let keys: Vec<String> = tm(c)
        .transformations
        .iter()
        .filter(|(_, t)| kind.is_none_or(|k| t.kind == k))
        .map(|(k, _)| k.clone())
        .collect();
    Resp::list(keys)
}

fn transformation_json(t: &Transformation) -> Value {
    let mut d = json!({
        "type": t.kind,
        "allowed_roles": t.allowed_roles,
        "deletion_allowed": t.deletion_allowed,
    });
    match t.kind.as_str() {
        "fpe" => {
            d["templates"] = json!(t.templates);
            d["tweak_source"] = json!(t.tweak_source);
        }
        "masking" => {
            d["templates"] = json!(t.templates);
            d["tweak_source"] = json!("");
            d["masking_character"] = json!(t.masking_character);
        }
        _ => {
            d["templates"] = json!([]);
            d["tweak_source"] = json!("");
            d["mapping_mode"] = json!(t.mapping_mode);
            d["convergent"] = json!(t.convergent);
            d["max_ttl"] = json!(t.max_ttl);
            d["stores"] = json!(t.stores);
        }
    }
    d
}

fn read_transformation(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    tm(c)
        .transformations
        .get(&n)
        .map(|t| Resp::data(transformation_json(t)))
        .ok_or_else(ApiError::not_found)
}

/// Names of the objects in `map` whose `uses` says they refer to `name`, as a list for messages.
fn users<'a, T>(
    map: &'a BTreeMap<String, T>,
    name: &str,
    uses: impl Fn(&T, &str) -> bool,
) -> Vec<&'a str> {
    map.iter()
        .filter(|(_, v)| uses(v, name))
        .map(|(k, _)| k.as_str())
        .collect()
}

/// The refusal of a delete of an object still in use (real engine, "Deletion Behavior": a
/// transformation used by a role, a template or store used by a transformation, an alphabet
/// used by a template cannot be deleted until those references are removed).
fn in_use(what: &str, name: &str, by: &str, users: &[&str]) -> ApiError {
    ApiError::bad_request(format!(
        "unable to delete {what} {name:?}: it is in use by {by} {}; remove the reference first",
        users.join(", ")
    ))
}

/// Deleting a transformation is refused while a role lists it, and (fpe, tokenization) unless
/// `deletion_allowed` is true, as the real engine's "Deletion Behavior" describes.
fn delete_transformation(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let m = tm(c);
    let roles = users(&m.roles, &n, |r, n| r.iter().any(|t| t == n));
    if m.transformations.contains_key(&n) && !roles.is_empty() {
        return Err(in_use("transformation", &n, "role(s)", &roles));
    }
    if let Some(t) = m.transformations.get(&n) {
        if t.kind != "masking" && !t.deletion_allowed {
            return Err(ApiError::bad_request(format!(
                "transformation {n:?} cannot be deleted: deletion_allowed is false"
            )));
        }
    }
    m.transformations.remove(&n);
    Ok(Resp::no_content())
}

fn write_generic(c: &mut Ctx) -> Result<Resp, ApiError> {
    let kind = fields::string_or(&c.data, "type", "")?;
    let n = c.param("name");
    let kind = if kind.is_empty() {
        match tm(c).transformations.get(&n) {
            Some(t) => t.kind.clone(),
            None => return Err(ApiError::bad_request("missing type")),
        }
    } else {
        kind
    };
    let r = write_typed(c, &kind)?;
    Ok(r.warn("The /transformation endpoint is deprecated since 1.6; use the type-specific /transformations/<type> endpoints"))
}

fn new_key() -> Vec<u8> {
    use rand::Rng;
    rand::rng().random::<[u8; 32]>().to_vec()
}

/// Applies the type-specific fields to `t`, validating them.
fn apply(c: &mut Ctx, t: &mut Transformation, kind: &str, creating: bool) -> Result<(), ApiError> {
    let d = c.data.clone();
    match kind {
        "fpe" | "masking" => {
            if let Some(tpl) = fields::string(&d, "template")?.filter(|s| !s.is_empty()) {
                t.templates = vec![tpl];
            } else if let Some(tpls) =
                fields::comma_list(&d, "templates")?.filter(|v| !v.is_empty())
            {
                t.templates = tpls;
            }
            if t.templates.is_empty() {
                return Err(ApiError::bad_request("missing template"));
            }
            // References are not checked when written: the real engine's setup walkthrough
            // writes the transformation before the template it names ("Optionally, create a
            // template" comes after "Create a transformation").
        }
        "tokenization" => {}
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid type {other:?}: must be one of fpe, masking, tokenization"
            )))
        }
    }
    if kind == "fpe" {
        if let Some(ts) = fields::string(&d, "tweak_source")? {
            t.tweak_source = ts;
        }
        if t.tweak_source.is_empty() {
            t.tweak_source = "supplied".into();
        }
        if !matches!(
            t.tweak_source.as_str(),
            "supplied" | "generated" | "internal"
        ) {
            return Err(ApiError::bad_request(format!(
                "invalid tweak_source {:?}",
                t.tweak_source
            )));
        }
    }
    if kind == "masking" {
        if let Some(mc) = fields::string(&d, "masking_character")? {
            t.masking_character = mc.chars().next().map(String::from).unwrap_or_default();
        }
        if t.masking_character.is_empty() {
            t.masking_character = "*".into();
        }
    }
    if kind == "tokenization" {
        if let Some(m) = fields::string(&d, "mapping_mode")? {
            t.mapping_mode = m;
        }
        if t.mapping_mode.is_empty() {
            t.mapping_mode = "default".into();
        }
        if !matches!(t.mapping_mode.as_str(), "default" | "exportable") {
            return Err(ApiError::bad_request(format!(
                "invalid mapping_mode {:?}",
                t.mapping_mode
            )));
        }
        if let Some(cv) = fields::boolean(&d, "convergent")? {
            if !creating && cv != t.convergent {
                return Err(ApiError::bad_request(
                    "convergent cannot be changed after creation",
                ));
            }
            t.convergent = cv;
        }
        if let Some(v) = fields::duration(&d, "max_ttl")? {
            if v < 0 {
                return Err(ApiError::bad_request("max_ttl cannot be negative"));
            }
            t.max_ttl = v;
        }
        if let Some(s) = fields::comma_list(&d, "stores")? {
            t.stores = s;
        }
        if t.stores.is_empty() {
            t.stores = vec!["builtin/internal".into()];
        }
        // Stores are not checked when written either (like templates).
    }
    if let Some(r) = fields::comma_list(&d, "allowed_roles")? {
        t.allowed_roles = r;
    }
    if let Some(b) = fields::boolean(&d, "deletion_allowed")? {
        t.deletion_allowed = b;
    }
    t.kind = kind.to_string();
    Ok(())
}

fn write_typed(c: &mut Ctx, kind: &str) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let existing = tm(c).transformations.get(&n).cloned();
    if let Some(e) = &existing {
        if e.kind != kind {
            return Err(ApiError::bad_request(format!(
                "transformation {n:?} is of type {:?}; the type cannot be changed",
                e.kind
            )));
        }
    }
    let creating = existing.is_none();
    let mut t = existing.unwrap_or_default();
    apply(c, &mut t, kind, creating)?;
    if creating && kind != "masking" {
        t.keys = vec![new_key()];
    }
    tm(c).transformations.insert(n, t);
    Ok(Resp::no_content())
}

fn read_wrapping_key(_c: &mut Ctx) -> Result<Resp, ApiError> {
    let pem = wrapping_key()
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Resp::data(json!({ "public_key": pem })))
}

/// Unwraps an import ciphertext into the target key (must be 256 bits).
fn unwrap_import(c: &Ctx) -> Result<Vec<u8>, ApiError> {
    let ct = fields::string_or(&c.data, "ciphertext", "")?;
    if ct.is_empty() {
        return Err(ApiError::bad_request("missing ciphertext"));
    }
    let hash = fields::string_or(&c.data, "hash_function", "SHA256")?;
    let padding = match hash.to_uppercase().as_str() {
        "SHA1" => Oaep::new::<sha1::Sha1>(),
        "SHA224" => Oaep::new::<sha2::Sha224>(),
        "SHA256" => Oaep::new::<sha2::Sha256>(),
        "SHA384" => Oaep::new::<sha2::Sha384>(),
        "SHA512" => Oaep::new::<sha2::Sha512>(),
        other => {
            return Err(ApiError::bad_request(format!(
                "unsupported hash function {other:?}"
            )))
        }
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(ct.trim())
        .map_err(|e| ApiError::bad_request(format!("error decoding ciphertext: {e}")))?;
    if raw.len() <= 512 {
        return Err(ApiError::bad_request("ciphertext too short: expected a 512-byte wrapped key followed by the wrapped key material"));
    }
    let (wrapped_aes, wrapped_key) = raw.split_at(512);
    let aes_key = wrapping_key().decrypt(padding, wrapped_aes).map_err(|e| {
        ApiError::bad_request(format!("failed to decrypt the ephemeral AES key: {e}"))
    })?;
    if aes_key.len() != 32 {
        return Err(ApiError::bad_request(
            "the ephemeral AES key must be 256 bits",
        ));
    }
    let mut k = [0u8; 32];
    k.copy_from_slice(&aes_key);
    let kek = aes_kw::KekAes256::new(&k.into());
    let key = kek
        .unwrap_with_padding_vec(wrapped_key)
        .map_err(|e| ApiError::bad_request(format!("failed to unwrap the key material: {e}")))?;
    if key.len() != 32 {
        return Err(ApiError::bad_request(format!(
            "the imported key must be a 256-bit AES key, got {} bits",
            key.len() * 8
        )));
    }
    Ok(key)
}

fn import_fpe(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    if tm(c).transformations.contains_key(&n) {
        return Err(ApiError::bad_request(format!(
            "transformation {n:?} already exists; FPE keys can only be imported into a new transformation"
        )));
    }
    let key = unwrap_import(c)?;
    let mut t = Transformation::default();
    apply(c, &mut t, "fpe", true)?;
    t.imported = true;
    t.keys = vec![key];
    tm(c).transformations.insert(n, t);
    Ok(Resp::no_content())
}

fn import_tokenization(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    if tm(c).transformations.contains_key(&n) {
        return Err(ApiError::bad_request(format!(
            "transformation {n:?} already exists"
        )));
    }
    if fields::bool_or(&c.data, "convergent", false)? {
        return Err(ApiError::bad_request(
            "convergent tokenization is not supported for imported keys",
        ));
    }
    let key = unwrap_import(c)?;
    let mut t = Transformation::default();
    apply(c, &mut t, "tokenization", true)?;
    t.imported = true;
    t.allow_rotation = fields::bool_or(&c.data, "allow_rotation", false)?;
    t.keys = vec![key];
    tm(c).transformations.insert(n, t);
    Ok(Resp::no_content())
}

fn import_version(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let Some(t) = tm(c).transformations.get(&n).cloned() else {
        return Err(ApiError::bad_request(format!(
            "transformation {n:?} not found"
        )));
    };
    if t.kind != "tokenization" || !t.imported {
        return Err(ApiError::bad_request("import_version is only allowed for transformations created through the import endpoint"));
    }
    if t.rotated_internally {
        return Err(ApiError::bad_request(
            "the key of this transformation was rotated inside the service; import_version is no longer allowed",
        ));
    }
    let key = unwrap_import(c)?;
    if let Some(t) = tm(c).transformations.get_mut(&n) {
        t.keys.push(key);
    }
    Ok(Resp::no_content())
}

fn rotate_key(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let Some(t) = tm(c).transformations.get_mut(&n) else {
        return Err(ApiError::bad_request(format!(
            "transformation {n:?} not found"
        )));
    };
    if t.kind != "tokenization" {
        return Err(ApiError::bad_request(
            "only tokenization keys can be rotated here",
        ));
    }
    if t.imported && !t.allow_rotation {
        return Err(ApiError::bad_request(
            "rotation of this imported key is not allowed (allow_rotation is false)",
        ));
    }
    t.keys.push(new_key());
    t.rotated_internally = true;
    Ok(Resp::no_content())
}

fn list_templates(c: &mut Ctx) -> Result<Resp, ApiError> {
    Resp::list(tm(c).templates.keys().cloned().collect::<Vec<_>>())
}

fn read_template(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    tm(c)
        .templates
        .get(&n)
        .map(|t| {
            Resp::data(json!({
                "type": t.kind, "pattern": t.pattern, "alphabet": t.alphabet,
                "encode_format": t.encode_format, "decode_formats": t.decode_formats,
            }))
        })
        .ok_or_else(ApiError::not_found)
}

fn write_template(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    if n.starts_with("builtin/") {
        return Err(ApiError::bad_request("cannot write a builtin template"));
    }
    let d = c.data.clone();
    let mut t = tm(c).templates.get(&n).cloned().unwrap_or_default();
    if let Some(k) = fields::string(&d, "type")? {
        t.kind = k;
    }
    if t.kind.is_empty() {
        return Err(ApiError::bad_request("missing type"));
    }
    if t.kind != "regex" {
        return Err(ApiError::bad_request(format!(
            "invalid type {:?}: only \"regex\" is supported",
            t.kind
        )));
    }
    if let Some(p) = fields::string(&d, "pattern")? {
        t.pattern = p;
    }
    if t.pattern.is_empty() {
        return Err(ApiError::bad_request("missing pattern"));
    }
    let re = regex::Regex::new(&t.pattern)
        .map_err(|e| ApiError::bad_request(format!("error compiling pattern: {e}")))?;
    if re.captures_len() < 2 {
        return Err(ApiError::bad_request(
            "pattern must contain at least one capture group",
        ));
    }
    if let Some(a) = fields::string(&d, "alphabet")? {
        t.alphabet = a;
    }
    // The alphabet is not checked when written: the real engine's setup walkthrough writes the
    // template before the alphabet it names ("Optionally, create an alphabet" comes last).
    if let Some(e) = fields::string(&d, "encode_format")? {
        t.encode_format = e;
    }
    if !t.encode_format.is_empty() {
        regex::Regex::new(&t.encode_format).ok();
    }
    match d.get("decode_formats") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            let mut out = BTreeMap::new();
            for (k, v) in m {
                let Some(s) = v.as_str() else {
                    return Err(ApiError::bad_request(
                        "decode_formats must map names to strings",
                    ));
                };
                out.insert(k.clone(), s.to_string());
            }
            t.decode_formats = out;
        }
        Some(_) => return Err(ApiError::bad_request("decode_formats must be an object")),
    }
    tm(c).templates.insert(n, t);
    Ok(Resp::no_content())
}

/// Deleting a template is refused while a transformation uses it ("Deletion Behavior").
fn delete_template(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let m = tm(c);
    let used = users(&m.transformations, &n, |t, n| {
        t.templates.iter().any(|x| x == n)
    });
    if m.templates.contains_key(&n) && !used.is_empty() {
        return Err(in_use("template", &n, "transformation(s)", &used));
    }
    m.templates.remove(&n);
    Ok(Resp::no_content())
}

fn list_alphabets(c: &mut Ctx) -> Result<Resp, ApiError> {
    Resp::list(tm(c).alphabets.keys().cloned().collect::<Vec<_>>())
}

fn read_alphabet(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    tm(c)
        .alphabets
        .get(&n)
        .map(|a| Resp::data(json!({ "alphabet": a })))
        .ok_or_else(ApiError::not_found)
}

fn write_alphabet(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    if n.starts_with("builtin/") {
        return Err(ApiError::bad_request("cannot write a builtin alphabet"));
    }
    let a = fields::string_or(&c.data, "alphabet", "")?;
    if a.is_empty() {
        return Err(ApiError::bad_request("missing alphabet"));
    }
    let mut seen = std::collections::HashSet::new();
    if !a.chars().all(|ch| seen.insert(ch)) {
        return Err(ApiError::bad_request(
            "alphabet must not contain duplicate characters",
        ));
    }
    if seen.len() < 2 {
        return Err(ApiError::bad_request(
            "alphabet must contain at least two characters",
        ));
    }
    tm(c).alphabets.insert(n, a);
    Ok(Resp::no_content())
}

/// Deleting an alphabet is refused while a template uses it ("Deletion Behavior").
fn delete_alphabet(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let m = tm(c);
    let used = users(&m.templates, &n, |t, n| t.alphabet == n);
    if m.alphabets.contains_key(&n) && !used.is_empty() {
        return Err(in_use("alphabet", &n, "template(s)", &used));
    }
    m.alphabets.remove(&n);
    Ok(Resp::no_content())
}

fn list_stores(c: &mut Ctx) -> Result<Resp, ApiError> {
    Resp::list(tm(c).stores.keys().cloned().collect::<Vec<_>>())
}

fn read_store(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    tm(c)
        .stores
        .get(&n)
        .map(|s| {
            Resp::data(json!({
                "type": s.kind,
                "driver": s.driver,
                "connection_string": s.connection_string,
                "supported_transformations": s.supported_transformations,
                "schema": s.schema,
                "max_open_connections": s.max_open_connections,
                "max_idle_connections": s.max_idle_connections,
                "max_connection_lifetime": s.max_connection_lifetime,
            }))
        })
        .ok_or_else(ApiError::not_found)
}

fn write_store(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    if n == "builtin/internal" {
        return Err(ApiError::bad_request("cannot write the builtin store"));
    }
    let d = c.data.clone();
    let existing = tm(c).stores.get(&n).cloned();
    let mut s = existing.clone().unwrap_or(Store {
        supported_transformations: vec!["tokenization".into()],
        schema: "public".into(),
        max_open_connections: 4,
        max_idle_connections: 4,
        ..Default::default()
    });
    for (k, slot) in [
        ("type", &mut s.kind),
        ("driver", &mut s.driver),
        ("connection_string", &mut s.connection_string),
        ("username", &mut s.username),
        ("password", &mut s.password),
        ("schema", &mut s.schema),
    ] {
        if let Some(v) = fields::string(&d, k)? {
            *slot = v;
        }
    }
    for (k, v) in [
        ("type", &s.kind),
        ("driver", &s.driver),
        ("connection_string", &s.connection_string),
        ("username", &s.username),
        ("password", &s.password),
    ] {
        if v.is_empty() {
            return Err(ApiError::bad_request(format!("missing {k}")));
        }
    }
    if s.kind != "sql" {
        return Err(ApiError::bad_request(format!(
            "invalid store type {:?}: only \"sql\" is supported",
            s.kind
        )));
    }
    if !matches!(s.driver.as_str(), "postgres" | "mysql" | "mssql") {
        return Err(ApiError::bad_request(format!(
            "invalid driver {:?}: must be postgres, mysql or mssql",
            s.driver
        )));
    }
    if let Some(v) = fields::comma_list(&d, "supported_transformations")? {
        s.supported_transformations = v;
    }
    if let Some(bad) = s
        .supported_transformations
        .iter()
        .find(|t| *t != "tokenization")
    {
        return Err(ApiError::bad_request(format!(
            "unsupported transformation type {bad:?} for a SQL store"
        )));
    }
    if let Some(v) = fields::int(&d, "max_open_connections")? {
        s.max_open_connections = v;
    }
    if let Some(v) = fields::int(&d, "max_idle_connections")? {
        s.max_idle_connections = v;
    }
    if let Some(v) = fields::duration(&d, "max_connection_lifetime")? {
        s.max_connection_lifetime = v;
    }
    if s.max_open_connections < 0 || s.max_idle_connections < 0 || s.max_connection_lifetime < 0 {
        return Err(ApiError::bad_request(
            "connection limits cannot be negative",
        ));
    }
    let mut resp = Resp::no_content();
    if s.driver == "mysql" && !s.connection_string.contains("parseTime=true") {
        resp =
            resp.warn("the mysql driver needs ?parseTime=true appended to the connection string");
    }
    tm(c).stores.insert(n, s);
    Ok(resp)
}

/// Deleting a store is refused while a transformation uses it ("Deletion Behavior").
fn delete_store(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let m = tm(c);
    let used = users(&m.transformations, &n, |t, n| {
        t.stores.iter().any(|x| x == n)
    });
    if m.stores.contains_key(&n) && !used.is_empty() {
        return Err(in_use("store", &n, "transformation(s)", &used));
    }
    m.stores.remove(&n);
    Ok(Resp::no_content())
}

fn store_schema(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    if !tm(c).stores.contains_key(&n) {
        return Err(ApiError::bad_request(format!("store {n:?} not found")));
    }
    for k in ["username", "password"] {
        if fields::string_or(&c.data, k, "")?.is_empty() {
            return Err(ApiError::bad_request(format!("missing {k}")));
        }
    }
    let tt = fields::string_or(&c.data, "transformation_type", "tokenization")?;
    if tt != "tokenization" {
        return Err(ApiError::bad_request(format!(
            "unsupported transformation_type {tt:?}"
        )));
    }
    Ok(Resp::no_content())
}

/// The sandbox admin API of the engine (`/_sandbox/secrets/transform/...`), for tests:
/// `GET keys/:mount/:name` lists the key versions of a transformation (base64, oldest first),
/// so a test can check that an imported key is the one it wrapped.
pub fn admin(
    transform: &BTreeMap<String, TransformMount>,
    method: &str,
    rest: &str,
) -> (u16, Value) {
    use base64::Engine;
    let not_found = || (404, json!({ "errors": ["no such transformation"] }));
    let (Some(r), "GET") = (rest.strip_prefix("keys/"), method) else {
        return (404, json!({ "errors": ["unknown sandbox admin path"] }));
    };
    let Some((mount, name)) = r.split_once('/') else {
        return not_found();
    };
    let Some(t) = transform
        .get(&format!("{mount}/"))
        .and_then(|m| m.transformations.get(name))
    else {
        return not_found();
    };
    let keys: Vec<String> = t
        .keys
        .iter()
        .map(|k| base64::engine::general_purpose::STANDARD.encode(k))
        .collect();
    (200, json!({ "keys": keys, "imported": t.imported }))
}
