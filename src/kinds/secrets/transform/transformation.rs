//! Transformation ↔ `/v1/<mount>/transformations/<type>/:name` (writes, the type-specific
//! endpoints: never the deprecated generic one) and `/v1/<mount>/transformation/:name` (read,
//! delete) (spec C §4.1).
//!
//! Key import (bring your own key): the operator reads the engine's RSA wrapping key, wraps an
//! ephemeral AES-256 key with RSA-OAEP under it, wraps the key material with AES-KWP (RFC 5649)
//! under the ephemeral key, and sends base64(both) to `.../import` on create. A later change of
//! the key Secret: fpe → refused (FPE keys are imported only on create); tokenization → sent
//! once as a new key version through `.../import_version`. The keyed hash of the key is kept in
//! status; the key itself never reaches a log, Event, status or error.

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::{Api, ResourceExt};
use serde_json::{json, Map, Value};

use super::{delete_err, err, missing, same_set, spec_seconds, strings, text, value_seconds};
use crate::api::secrets::transform::{HashFunction, KeyImport, Transformation, TransformationType};
use crate::api::{DeletionPolicy, Service};
use crate::clients::secrets::transform::{encode_segment, TransformClient};
use crate::reconcile::hash::keyed_hash;
use crate::reconcile::{managed_fields, Context, Created, Error, Managed, Reconciled, Result};

/// The key to import: never printed (no `Debug`), never in a message.
pub struct ImportKey {
    bytes: Vec<u8>,
    hash_function: HashFunction,
    allow_rotation: Option<bool>,
}

impl Drop for ImportKey {
    fn drop(&mut self) {
        self.bytes.iter_mut().for_each(|b| *b = 0);
    }
}

/// What a transformation should be; `None` fields are not managed.
pub struct Desired {
    /// Its name in the service.
    pub name: String,
    /// `fpe`, `masking` or `tokenization`.
    pub kind: TransformationType,
    /// The template it applies (fpe, masking).
    pub template: Option<String>,
    /// Where the FPE tweak comes from.
    pub tweak_source: Option<String>,
    /// The character masking replaces matched characters with.
    pub masking_character: Option<String>,
    /// Roles that may use it.
    pub allowed_roles: Option<Vec<String>>,
    /// Whether the service lets it be deleted.
    pub deletion_allowed: Option<bool>,
    /// Tokenization mapping mode.
    pub mapping_mode: Option<String>,
    /// Whether tokenization gives the same token for the same value.
    pub convergent: Option<bool>,
    /// Longest lifetime of a token, in seconds.
    pub max_ttl: Option<i64>,
    /// Stores that hold the tokens.
    pub stores: Option<Vec<String>>,
    /// The key to import (fpe on create; tokenization as a new key version).
    pub key: Option<ImportKey>,
}

/// What the service holds (from `data` of the read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remote {
    /// Its name in the service.
    pub name: String,
    /// `fpe`, `masking` or `tokenization`.
    pub kind: String,
    /// The templates it applies.
    pub templates: Vec<String>,
    /// Where the FPE tweak comes from.
    pub tweak_source: String,
    /// The masking character.
    pub masking_character: String,
    /// Roles that may use it.
    pub allowed_roles: Vec<String>,
    /// Whether the service lets it be deleted.
    pub deletion_allowed: bool,
    /// Tokenization mapping mode.
    pub mapping_mode: String,
    /// Whether tokenization gives the same token for the same value.
    pub convergent: bool,
    /// Longest lifetime of a token, in seconds.
    pub max_ttl: i64,
    /// Stores that hold the tokens.
    pub stores: Vec<String>,
}

/// A transformation as read, with what is missing for it to work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The transformation as the service reads it back.
    pub remote: Remote,
    /// Templates and stores the spec names that the service does not have (yet).
    pub missing: Vec<String>,
}

impl Managed for Transformation {
    const SERVICE: Service = Service::Secrets;
    managed_fields!(connection_ref, managed_status);
    const WATCHES_SECRETS: bool = true;
    /// Deleting an fpe or tokenization transformation deletes its key: only when the spec says
    /// `deletionAllowed: true`; otherwise the transformation is left in the service.
    fn deletion_policy(&self) -> DeletionPolicy {
        if self.spec.type_ != TransformationType::Masking
            && self.spec.deletion_allowed != Some(true)
        {
            return DeletionPolicy::Retain;
        }
        self.spec.deletion_policy
    }
    fn retain_note(&self) -> String {
        if self.spec.deletion_policy == DeletionPolicy::Delete {
            "deletionAllowed is not true: deleting the transformation would delete its key and make decoding impossible; set deletionAllowed: true to let it be deleted".into()
        } else {
            "deletionPolicy Retain".into()
        }
    }
    fn secret_refs(&self) -> Vec<String> {
        self.spec
            .key_import
            .iter()
            .map(|k| k.key_secret_ref.name.clone())
            .collect()
    }
}

/// A transformation named `name` from the `data` of its read.
pub fn parse(name: &str, d: &Value) -> Remote {
    Remote {
        name: name.to_string(),
        kind: text(d, "type"),
        templates: strings(d.get("templates")),
        tweak_source: text(d, "tweak_source"),
        masking_character: text(d, "masking_character"),
        allowed_roles: strings(d.get("allowed_roles")),
        deletion_allowed: d
            .get("deletion_allowed")
            .and_then(Value::as_bool)
            .unwrap_or_default(),
        mapping_mode: text(d, "mapping_mode"),
        convergent: d
            .get("convergent")
            .and_then(Value::as_bool)
            .unwrap_or_default(),
        max_ttl: value_seconds(d.get("max_ttl")),
        stores: strings(d.get("stores")),
    }
}

/// Managed fields that differ: only what the spec sets; sets as sets; `maxTtl` in seconds.
pub fn diff(d: &Desired, o: &Remote) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if let Some(t) = &d.template {
        if o.templates.as_slice() != std::slice::from_ref(t) {
            changed.push("template");
        }
    }
    if d.tweak_source
        .as_ref()
        .is_some_and(|v| *v != o.tweak_source)
    {
        changed.push("tweakSource");
    }
    if d.masking_character
        .as_ref()
        .is_some_and(|v| *v != o.masking_character)
    {
        changed.push("maskingCharacter");
    }
    if d.allowed_roles
        .as_ref()
        .is_some_and(|v| !same_set(v, &o.allowed_roles))
    {
        changed.push("allowedRoles");
    }
    if d.deletion_allowed.is_some_and(|v| v != o.deletion_allowed) {
        changed.push("deletionAllowed");
    }
    if d.mapping_mode
        .as_ref()
        .is_some_and(|v| *v != o.mapping_mode)
    {
        changed.push("mappingMode");
    }
    if d.convergent.is_some_and(|v| v != o.convergent) {
        changed.push("convergent");
    }
    if d.max_ttl.is_some_and(|v| v != o.max_ttl) {
        changed.push("maxTtl");
    }
    if d.stores.as_ref().is_some_and(|v| !same_set(v, &o.stores)) {
        changed.push("stores");
    }
    changed
}

/// The request body of a write (and of an import, which takes the same fields).
fn body(d: &Desired) -> Value {
    let mut b = Map::new();
    if let Some(t) = &d.template {
        b.insert("template".into(), json!(t));
    }
    if let Some(v) = &d.tweak_source {
        b.insert("tweak_source".into(), json!(v));
    }
    if let Some(v) = &d.masking_character {
        b.insert("masking_character".into(), json!(v));
    }
    if let Some(v) = &d.allowed_roles {
        b.insert("allowed_roles".into(), json!(v));
    }
    if let Some(v) = d.deletion_allowed {
        b.insert("deletion_allowed".into(), json!(v));
    }
    if let Some(v) = &d.mapping_mode {
        b.insert("mapping_mode".into(), json!(v));
    }
    if let Some(v) = d.convergent {
        b.insert("convergent".into(), json!(v));
    }
    if let Some(v) = d.max_ttl {
        b.insert("max_ttl".into(), json!(v));
    }
    if let Some(v) = &d.stores {
        b.insert("stores".into(), json!(v));
    }
    Value::Object(b)
}

/// The import ciphertext: base64(RSA-OAEP(hash) of an ephemeral AES-256 key under the wrapping
/// key ‖ AES-KWP of `key` under the ephemeral key). Errors never include key material.
pub fn wrap_key(public_pem: &str, key: &[u8], hash: HashFunction) -> Result<String> {
    use rsa::pkcs8::DecodePublicKey;
    use rsa::{Oaep, RsaPublicKey};
    let pk = RsaPublicKey::from_public_key_pem(public_pem.trim()).map_err(|e| {
        Error::InvalidSpec(format!(
            "the transform engine's wrapping key could not be read: {e}"
        ))
    })?;
    let padding = match hash {
        HashFunction::SHA1 => Oaep::new::<sha1::Sha1>(),
        HashFunction::SHA224 => Oaep::new::<sha2::Sha224>(),
        HashFunction::SHA256 => Oaep::new::<sha2::Sha256>(),
        HashFunction::SHA384 => Oaep::new::<sha2::Sha384>(),
        HashFunction::SHA512 => Oaep::new::<sha2::Sha512>(),
    };
    let mut rng = rand08::rngs::OsRng;
    let mut ephemeral = [0u8; 32];
    rand08::RngCore::fill_bytes(&mut rng, &mut ephemeral);
    let wrapped_aes = pk
        .encrypt(&mut rng, padding, &ephemeral)
        .map_err(|e| Error::InvalidSpec(format!("wrapping the ephemeral key failed: {e}")))?;
    let kek = aes_kw::KekAes256::new(&ephemeral.into());
    let wrapped_key = kek
        .wrap_with_padding_vec(key)
        .map_err(|_| Error::InvalidSpec("wrapping the key material failed".into()))?;
    ephemeral.iter_mut().for_each(|b| *b = 0);
    let mut out = wrapped_aes;
    out.extend(wrapped_key);
    Ok(base64::engine::general_purpose::STANDARD.encode(out))
}

/// A 256-bit AES key from a Secret value: 32 raw bytes, or their base64.
pub fn key_bytes(raw: &[u8]) -> Option<Vec<u8>> {
    if raw.len() == 32 {
        return Some(raw.to_vec());
    }
    let text = std::str::from_utf8(raw).ok()?.trim();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    (decoded.len() == 32).then_some(decoded)
}

impl Transformation {
    fn references(&self) -> (Vec<String>, Vec<String>) {
        (
            self.spec.template.iter().cloned().collect(),
            self.spec.stores.clone().unwrap_or_default(),
        )
    }

    async fn read_key(&self, ctx: &Context, k: &KeyImport) -> Result<ImportKey> {
        let ns = self.namespace().unwrap_or_default();
        let r = &k.key_secret_ref;
        let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&r.name)
            .await?
            .ok_or_else(|| {
                Error::MissingReference(format!(
                    "Secret {ns}/{} (keyImport.keySecretRef) not found",
                    r.name
                ))
            })?;
        let raw = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&r.key))
            .map(|ByteString(b)| b.clone())
            .or_else(|| {
                secret
                    .string_data
                    .as_ref()
                    .and_then(|d| d.get(&r.key))
                    .map(|s| s.clone().into_bytes())
            })
            .ok_or_else(|| {
                Error::MissingReference(format!(
                    "Secret {ns}/{} (keyImport.keySecretRef) has no key {:?}",
                    r.name, r.key
                ))
            })?;
        let bytes = key_bytes(&raw).ok_or_else(|| {
            Error::InvalidSpec(format!(
                "Secret {ns}/{} key {:?} must hold a 256-bit AES key (32 raw bytes or their base64)",
                r.name, r.key
            ))
        })?;
        Ok(ImportKey {
            bytes,
            hash_function: k.hash_function,
            allow_rotation: k.allow_rotation,
        })
    }

    /// Whether this resource has recorded the hash of a key it imported (so a different hash is
    /// a change of the key Secret, not an adoption).
    fn imported_before(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.managed.write_only_hash.as_ref())
            .is_some()
    }

    async fn import(&self, client: &TransformClient, d: &Desired, key: &ImportKey) -> Result<()> {
        let mount = &self.spec.mount;
        let pem = client.wrapping_key(mount).await.map_err(err)?;
        let mut b = body(d);
        b["ciphertext"] = json!(wrap_key(&pem, &key.bytes, key.hash_function)?);
        b["hash_function"] = json!(key.hash_function.as_str());
        if let Some(r) = key.allow_rotation {
            b["allow_rotation"] = json!(r);
        }
        if let Some(o) = b.as_object_mut() {
            // Import does not take convergent (an imported key cannot be convergent).
            o.remove("convergent");
        }
        client
            .write(
                mount,
                &format!(
                    "transformations/{}/{}/import",
                    d.kind.as_str(),
                    encode_segment(&d.name)
                ),
                &b,
            )
            .await
            .map_err(err)
    }
}

impl Reconciled for Transformation {
    type Client = TransformClient;
    type Desired = Desired;
    type Observed = Observed;

    async fn desired(&self, ctx: &Context) -> Result<Desired> {
        let s = &self.spec;
        let key = match &s.key_import {
            Some(k) => Some(self.read_key(ctx, k).await?),
            None => None,
        };
        Ok(Desired {
            name: self.remote_name(),
            kind: s.type_,
            template: s.template.clone(),
            tweak_source: s.tweak_source.map(|t| t.as_str().to_string()),
            masking_character: s.masking_character.clone(),
            allowed_roles: s.allowed_roles.clone(),
            deletion_allowed: s.deletion_allowed,
            mapping_mode: s.mapping_mode.map(|m| m.as_str().to_string()),
            convergent: s.convergent,
            max_ttl: spec_seconds(&s.max_ttl, "maxTtl")?,
            stores: s.stores.clone(),
            key,
        })
    }

    async fn observe(
        &self,
        client: &TransformClient,
        desired: &Desired,
        _remote_id: Option<&str>,
    ) -> Result<Option<Observed>> {
        let mount = &self.spec.mount;
        let Some(d) = client
            .read(mount, "transformation", &desired.name)
            .await
            .map_err(err)?
        else {
            return Ok(None);
        };
        let remote = parse(&desired.name, &d);
        if !remote.kind.is_empty() && remote.kind != desired.kind.as_str() {
            return Err(Error::InvalidSpec(format!(
                "transformation {:?} already exists in the service with type {:?}; the type cannot change: choose another name",
                desired.name, remote.kind
            )));
        }
        let (templates, stores) = self.references();
        let mut missing_refs = missing(client, mount, "template", &templates).await?;
        missing_refs.extend(missing(client, mount, "stores", &stores).await?);
        Ok(Some(Observed {
            remote,
            missing: missing_refs,
        }))
    }

    fn diff(desired: &Desired, observed: &Observed) -> Vec<&'static str> {
        diff(desired, &observed.remote)
    }

    /// Spec fields only: an imported key is write-only (compared by its keyed hash).
    fn shown(d: &Desired, observed: &Observed, field: &str) -> Option<(String, String)> {
        use crate::reconcile::show;
        let o = &observed.remote;
        let list = |v: &Option<Vec<String>>| show::set(v.as_deref().unwrap_or_default());
        match field {
            "template" => show::pair(show::set(&o.templates), show::opt(&d.template)),
            "tweakSource" => show::pair(show::text(&o.tweak_source), show::opt(&d.tweak_source)),
            "maskingCharacter" => show::pair(
                show::text(&o.masking_character),
                show::opt(&d.masking_character),
            ),
            "allowedRoles" => show::pair(show::set(&o.allowed_roles), list(&d.allowed_roles)),
            "deletionAllowed" => show::pair(
                o.deletion_allowed.to_string(),
                show::opt(&d.deletion_allowed),
            ),
            "mappingMode" => show::pair(show::text(&o.mapping_mode), show::opt(&d.mapping_mode)),
            "convergent" => show::pair(o.convergent.to_string(), show::opt(&d.convergent)),
            "maxTtl" => show::pair(o.max_ttl.to_string(), show::opt(&d.max_ttl)),
            "stores" => show::pair(show::set(&o.stores), list(&d.stores)),
            _ => None,
        }
    }

    const PENDING_REASON: &'static str = "Waiting";

    fn pending(observed: &Observed) -> Option<String> {
        (!observed.missing.is_empty()).then(|| {
            format!(
                "waiting for {} (TransformTemplate/TransformStore): not in the service yet",
                observed.missing.join(", ")
            )
        })
    }

    fn write_only_hash(desired: &Desired, ctx: &Context) -> Option<String> {
        desired.key.as_ref().map(|k| {
            keyed_hash(
                ctx.settings.hash_key.expose().as_bytes(),
                &[b"transform-import-key", &k.bytes],
            )
        })
    }

    async fn create(&self, client: &TransformClient, desired: &Desired) -> Result<Created> {
        match &desired.key {
            Some(key) => self.import(client, desired, key).await?,
            None => write(self, client, desired).await?,
        }
        let (templates, stores) = self.references();
        Ok(Created {
            remote_id: desired.name.clone(),
            complete: templates
                .iter()
                .chain(stores.iter())
                .all(|r| r.starts_with("builtin/")),
        })
    }

    async fn update(
        &self,
        client: &TransformClient,
        desired: &Desired,
        _observed: &Observed,
        changed: &[&'static str],
    ) -> Result<()> {
        if changed.iter().any(|c| !c.starts_with('(')) {
            write(self, client, desired).await?;
        }
        let key_changed = changed.contains(&"(write-only fields)");
        if let (true, Some(key)) = (key_changed && self.imported_before(), &desired.key) {
            match desired.kind {
                TransformationType::Tokenization => {
                    let pem = client.wrapping_key(&self.spec.mount).await.map_err(err)?;
                    let b = json!({
                        "ciphertext": wrap_key(&pem, &key.bytes, key.hash_function)?,
                        "hash_function": key.hash_function.as_str(),
                    });
                    client
                        .write(
                            &self.spec.mount,
                            &format!(
                                "transformations/tokenization/{}/import_version",
                                encode_segment(&desired.name)
                            ),
                            &b,
                        )
                        .await
                        .map_err(err)?;
                }
                _ => {
                    return Err(Error::Refused {
                        reason: "KeyImmutable",
                        message: "the key of an fpe transformation can only be imported when it is created, and the key Secret changed: restore the key, or create a new Transformation".into(),
                    })
                }
            }
        }
        Ok(())
    }

    async fn delete(&self, client: &TransformClient, remote_id: &str) -> Result<()> {
        client
            .delete(&self.spec.mount, "transformation", remote_id)
            .await
            .map_err(delete_err)
    }

    fn remote_id(observed: &Observed) -> String {
        observed.remote.name.clone()
    }
}

async fn write(t: &Transformation, client: &TransformClient, d: &Desired) -> Result<()> {
    client
        .write(
            &t.spec.mount,
            &format!(
                "transformations/{}/{}",
                d.kind.as_str(),
                encode_segment(&d.name)
            ),
            &body(d),
        )
        .await
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::secrets::transform::parse_duration;

    fn desired(kind: TransformationType) -> Desired {
        Desired {
            name: "t".into(),
            kind,
            template: None,
            tweak_source: None,
            masking_character: None,
            allowed_roles: None,
            deletion_allowed: None,
            mapping_mode: None,
            convergent: None,
            max_ttl: None,
            stores: None,
            key: None,
        }
    }

    #[test]
    fn service_defaults_are_not_drift() {
        let remote = parse(
            "t",
            &json!({"type": "tokenization", "templates": [], "tweak_source": "", "allowed_roles": [],
                "deletion_allowed": false, "mapping_mode": "default", "convergent": false, "max_ttl": 0,
                "stores": ["builtin/internal"]}),
        );
        assert!(diff(&desired(TransformationType::Tokenization), &remote).is_empty());
    }

    #[test]
    fn sets_and_durations_are_normalised() {
        let remote = parse(
            "t",
            &json!({"type": "tokenization", "allowed_roles": ["b", "a"], "max_ttl": 3600, "stores": ["s1", "s2"]}),
        );
        let mut d = desired(TransformationType::Tokenization);
        d.allowed_roles = Some(vec!["a".into(), "b".into()]);
        d.max_ttl = parse_duration("1h");
        d.stores = Some(vec!["s2".into(), "s1".into()]);
        assert!(diff(&d, &remote).is_empty());
        d.max_ttl = Some(60);
        d.allowed_roles = Some(vec!["a".into()]);
        assert_eq!(diff(&d, &remote), vec!["allowedRoles", "maxTtl"]);
    }

    #[test]
    fn template_is_compared_with_the_templates_list() {
        let remote = parse(
            "t",
            &json!({"type": "fpe", "templates": ["ccn"], "tweak_source": "supplied"}),
        );
        let mut d = desired(TransformationType::Fpe);
        d.template = Some("ccn".into());
        assert!(diff(&d, &remote).is_empty());
        d.template = Some("other".into());
        d.tweak_source = Some("internal".into());
        assert_eq!(diff(&d, &remote), vec!["template", "tweakSource"]);
    }

    #[test]
    fn keys_are_raw_32_bytes_or_their_base64() {
        assert_eq!(key_bytes(&[1u8; 32]), Some(vec![1u8; 32]));
        let b64 = base64::engine::general_purpose::STANDARD.encode([2u8; 32]);
        assert_eq!(
            key_bytes(format!("{b64}\n").as_bytes()),
            Some(vec![2u8; 32])
        );
        assert_eq!(key_bytes(b"short"), None);
    }

    #[test]
    fn a_wrapped_key_unwraps_to_the_same_bytes() {
        use rsa::pkcs8::{EncodePublicKey, LineEnding};
        use rsa::{Oaep, RsaPrivateKey};
        let mut rng = rand08::thread_rng();
        let sk = RsaPrivateKey::new(&mut rng, 1024).unwrap();
        let pem = sk
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap();
        let key = [9u8; 32];
        let ct = wrap_key(&pem, &key, HashFunction::SHA1).unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(ct)
            .unwrap();
        let (a, b) = raw.split_at(128);
        let aes = sk.decrypt(Oaep::new::<sha1::Sha1>(), a).unwrap();
        let mut k = [0u8; 32];
        k.copy_from_slice(&aes);
        let kek = aes_kw::KekAes256::new(&k.into());
        assert_eq!(kek.unwrap_with_padding_vec(b).unwrap(), key.to_vec());
    }
}
