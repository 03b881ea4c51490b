//! The transform engine of the secrets service (spec C §2.1, §4.1): `TransformRole`,
//! `Transformation`, `TransformTemplate`, `TransformAlphabet`, `TransformStore`.
//!
//! Every kind has `mount` (the engine's mount path, default `transform`, immutable) and `name`
//! (the object's name in the service, default `metadata.name`, immutable). References between
//! them are by name and are not checked by the service when written: a missing one is reported
//! by the operator as a waiting condition.

// `printcolumn(... type_ = "string" ...)` repeats an argument, not an attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus, SecretKeyRef};

/// The mount of the transform engine when `spec.mount` is not set: `transform`.
pub fn default_mount() -> String {
    "transform".into()
}

fn default_username_key() -> String {
    "username".into()
}

fn default_password_key() -> String {
    "password".into()
}

/// A transform role: the set of transformations a caller of `encode`/`decode` with this role may
/// use. A transformation only works for the role if it lists the role in its `allowedRoles`:
/// when one does not (or does not exist yet), the role is still written, and the condition
/// `TransformationsAllowed=False` names which.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "TransformRole",
    plural = "transformroles",
    doc = "A role of the secrets service's transform engine, kept equal to spec.",
    cel,
    namespaced,
    status = "TransformRoleStatus",
    shortname = "trole",
    category = "quartet",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Synced",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Synced\")].status"
    ),
    printcolumn(
        name = "Allowed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"TransformationsAllowed\")].status"
    ),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)").message("name is immutable: create a new TransformRole instead")
)]
#[serde(rename_all = "camelCase")]
pub struct TransformRoleSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path of the transform engine's mount (default `transform`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 256))]
    pub mount: String,
    /// Name of the role in the service; defaults to `metadata.name`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^/\s]+$"))]
    pub name: Option<String>,
    /// Names of the transformations this role may use (a set; order is not significant).
    #[serde(default)]
    #[schemars(length(max = 256))]
    #[schemars(inner(length(max = 256)))]
    pub transformations: Vec<String>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the role from the service when this resource is deleted;
    /// `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of a TransformRole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransformRoleStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// Transformations of the spec that the service does not have (yet).
    #[serde(default)]
    pub transformations_missing: Vec<String>,
    /// Transformations of the spec that do not list this role in their `allowed_roles`.
    #[serde(default)]
    pub transformations_not_allowing: Vec<String>,
    /// The message of the `TransformationsAllowed` condition, as last computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transformations_allowed_message: Option<String>,
}

/// A transform alphabet: the set of characters format-preserving encryption may use.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "TransformAlphabet",
    plural = "transformalphabets",
    doc = "An alphabet of the secrets service's transform engine, kept equal to spec.",
    cel,
    namespaced,
    status = "TransformAlphabetStatus",
    shortname = "talpha",
    category = "quartet",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Synced",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Synced\")].status"
    ),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)").message("name is immutable: create a new TransformAlphabet instead")
)]
#[serde(rename_all = "camelCase")]
pub struct TransformAlphabetSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path of the transform engine's mount (default `transform`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 256))]
    pub mount: String,
    /// Name of the alphabet in the service; defaults to `metadata.name`. Names starting with
    /// `builtin/` are reserved. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!self.startsWith('builtin/')").message("builtin/ alphabets cannot be managed"))]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^\s]+$"))]
    pub name: Option<String>,
    /// The permitted characters (at least 2, each once).
    #[x_kube(validation = Rule::new("self.size() >= 2").message("alphabet must contain at least 2 characters"))]
    #[schemars(length(min = 2, max = 65536))]
    pub alphabet: String,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the alphabet from the service when this resource is deleted
    /// (refused by the service while a template uses it: retried, shown as `DeletionBlocked`);
    /// `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of a TransformAlphabet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransformAlphabetStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

/// Template type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TemplateType {
    /// A regular expression whose capture groups are the transformed characters.
    #[default]
    Regex,
}

/// A transform template: which part of a value is transformed (a regular expression whose
/// capture groups are transformed), with which alphabet, and how results are formatted.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "TransformTemplate",
    plural = "transformtemplates",
    doc = "A template of the secrets service's transform engine, kept equal to spec.",
    cel,
    namespaced,
    status = "TransformTemplateStatus",
    shortname = "ttmpl",
    category = "quartet",
    printcolumn(name = "Alphabet", type_ = "string", json_path = ".spec.alphabet"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Synced",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Synced\")].status"
    ),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)").message("name is immutable: create a new TransformTemplate instead")
)]
#[serde(rename_all = "camelCase")]
pub struct TransformTemplateSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path of the transform engine's mount (default `transform`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 256))]
    pub mount: String,
    /// Name of the template in the service; defaults to `metadata.name`. Names starting with
    /// `builtin/` are reserved. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!self.startsWith('builtin/')").message("builtin/ templates cannot be managed"))]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^\s]+$"))]
    pub name: Option<String>,
    /// Template type: only `regex`.
    #[serde(rename = "type", default)]
    pub type_: TemplateType,
    /// The regular expression; its capture groups are the characters transformed, matches
    /// outside groups are kept.
    #[schemars(length(min = 1, max = 4096))]
    pub pattern: String,
    /// Name of the alphabet (a TransformAlphabet's name in the service, or a `builtin/` one)
    /// used by format-preserving encryption. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alphabet: Option<String>,
    /// Output format of encode (FPE only; empty keeps the input format). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub encode_format: Option<String>,
    /// Named decode formats (name → format, FPE only). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_formats: Option<BTreeMap<String, String>>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the template from the service when this resource is deleted
    /// (refused by the service while a transformation uses it: retried, shown as
    /// `DeletionBlocked`); `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of a TransformTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransformTemplateStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

/// Transformation type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TransformationType {
    /// Format-preserving encryption (FF3-1), reversible with the key.
    Fpe,
    /// Masking: replaces matched characters, irreversible, no key.
    Masking,
    /// Tokenization: a random token mapped to the value in a store.
    Tokenization,
}

impl TransformationType {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            TransformationType::Fpe => "fpe",
            TransformationType::Masking => "masking",
            TransformationType::Tokenization => "tokenization",
        }
    }
}

// Where the FPE tweak comes from. (A `//` comment: on an optional field schemars would show
// the type's doc instead of the field's in `kubectl explain`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)] // a doc comment would replace the field's in `kubectl explain`
pub enum TweakSource {
    /// The caller supplies the tweak on each encode and decode.
    Supplied,
    /// The service generates a tweak on encode and returns it.
    Generated,
    /// The service uses one internal tweak per transformation.
    Internal,
}

impl TweakSource {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            TweakSource::Supplied => "supplied",
            TweakSource::Generated => "generated",
            TweakSource::Internal => "internal",
        }
    }
}

// Tokenization mapping mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)] // a doc comment would replace the field's in `kubectl explain`
pub enum MappingMode {
    /// Tokens cannot be decoded in bulk.
    Default,
    /// Permits emergency decoding of all plaintexts through the export-decoded endpoint.
    Exportable,
}

impl MappingMode {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            MappingMode::Default => "default",
            MappingMode::Exportable => "exportable",
        }
    }
}

// Hash function of the RSA-OAEP step of a key import.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[allow(missing_docs)] // a doc comment would replace the field's in `kubectl explain`
pub enum HashFunction {
    /// RSA-OAEP with SHA-1.
    SHA1,
    /// RSA-OAEP with SHA-224.
    SHA224,
    /// RSA-OAEP with SHA-256 (the service's default).
    #[default]
    SHA256,
    /// RSA-OAEP with SHA-384.
    SHA384,
    /// RSA-OAEP with SHA-512.
    SHA512,
}

impl HashFunction {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            HashFunction::SHA1 => "SHA1",
            HashFunction::SHA224 => "SHA224",
            HashFunction::SHA256 => "SHA256",
            HashFunction::SHA384 => "SHA384",
            HashFunction::SHA512 => "SHA512",
        }
    }
}

/// Bring your own key: the transformation is created through the import endpoint with this key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyImport {
    /// The Secret key holding the 256-bit AES key: 32 raw bytes, or their base64. The operator
    /// wraps it itself (RSA-OAEP under the engine's wrapping key, then AES-KWP); the key never
    /// reaches a log, Event, status or error. A change: `fpe` → `Ready=False` `KeyImmutable`
    /// (FPE keys are only imported on create); `tokenization` → sent once as a new key version.
    pub key_secret_ref: SecretKeyRef,
    /// Hash function of the RSA-OAEP step (default `SHA256`).
    #[serde(default)]
    pub hash_function: HashFunction,
    /// Whether the service may later rotate the imported key itself (tokenization only; after
    /// such a rotation the service no longer accepts new key versions). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_rotation: Option<bool>,
}

/// A transformation: how values are transformed (FPE, masking or tokenization), by which roles.
/// Written through the type-specific endpoints (`transformations/<type>/<name>`).
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "Transformation",
    plural = "transformations",
    doc = "A transformation of the secrets service's transform engine, kept equal to spec.",
    cel,
    namespaced,
    status = "TransformationStatus",
    shortname = "tform",
    category = "quartet",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Synced",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Synced\")].status"
    ),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)").message("name is immutable: create a new Transformation instead"),
    validation = Rule::new("self.type == oldSelf.type").message("type is immutable: create a new Transformation instead"),
    validation = Rule::new("self.type == 'tokenization' ? !has(self.template) : has(self.template)").message("template is required for fpe and masking transformations and not allowed for tokenization"),
    validation = Rule::new("self.type == 'fpe' || !has(self.tweakSource)").message("tweakSource is only allowed for fpe transformations"),
    validation = Rule::new("self.type == 'masking' || !has(self.maskingCharacter)").message("maskingCharacter is only allowed for masking transformations"),
    validation = Rule::new("self.type != 'masking' || !has(self.deletionAllowed)").message("deletionAllowed is only allowed for fpe and tokenization transformations"),
    validation = Rule::new("self.type == 'tokenization' || (!has(self.mappingMode) && !has(self.convergent) && !has(self.maxTtl) && !has(self.stores))").message("mappingMode, convergent, maxTtl and stores are only allowed for tokenization transformations"),
    validation = Rule::new("has(self.convergent) == has(oldSelf.convergent) && (!has(self.convergent) || self.convergent == oldSelf.convergent)").message("convergent is immutable: create a new Transformation instead"),
    validation = Rule::new("self.type != 'masking' || !has(self.keyImport)").message("keyImport is only allowed for fpe and tokenization transformations (masking has no key)"),
    validation = Rule::new("!has(self.keyImport) || !has(self.convergent) || !self.convergent").message("an imported key does not support convergent tokenization"),
    validation = Rule::new("!has(self.keyImport) || !has(self.keyImport.allowRotation) || self.type == 'tokenization'").message("keyImport.allowRotation is only allowed for tokenization transformations"),
    validation = Rule::new("has(self.keyImport) == has(oldSelf.keyImport)").message("keyImport can only be set when the transformation is created")
)]
#[serde(rename_all = "camelCase")]
pub struct TransformationSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path of the transform engine's mount (default `transform`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 256))]
    pub mount: String,
    /// Name of the transformation in the service; defaults to `metadata.name`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^/\s]+$"))]
    pub name: Option<String>,
    /// `fpe`, `masking` or `tokenization`. Immutable.
    #[serde(rename = "type")]
    pub type_: TransformationType,
    /// Name of the template (fpe and masking: required there; not allowed for tokenization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub template: Option<String>,
    /// Source of the FPE tweak: `supplied` (service default), `generated` or `internal` (fpe
    /// only). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tweak_source: Option<TweakSource>,
    /// The character matched characters are replaced with (masking only; exactly one character;
    /// service default `*`). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() == 1").message("maskingCharacter must be exactly one character"))]
    pub masking_character: Option<String>,
    /// Roles allowed to use this transformation (a set). Managed only when set (service default:
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    #[schemars(inner(length(max = 256)))]
    pub allowed_roles: Option<Vec<String>>,
    /// Whether the service may delete this transformation (fpe and tokenization). Deleting it
    /// deletes its key and makes decoding impossible: with `deletionPolicy: Delete` the operator
    /// deletes the transformation only when this is true, and otherwise leaves it in the service
    /// when the resource goes (Event `Retained`). Managed only when set (service default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_allowed: Option<bool>,
    /// `default` or `exportable` (tokenization only). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping_mode: Option<MappingMode>,
    /// Whether the same plaintext always gives the same token (tokenization only; immutable;
    /// service default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convergent: Option<bool>,
    /// Maximum lifetime of tokens: a duration such as `24h`, or a number of seconds
    /// (tokenization only; `0` means no expiration). Managed only when set; compared in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl: Option<IntOrString>,
    /// Stores holding the tokens (tokenization only; a set; service default
    /// `[builtin/internal]`). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[schemars(inner(length(max = 256)))]
    pub stores: Option<Vec<String>>,
    /// Create the transformation with an imported key (fpe or tokenization). Set only on create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_import: Option<KeyImport>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the transformation when this resource is deleted, but only
    /// when `deletionAllowed` is true for fpe and tokenization (their key would be lost);
    /// `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of a Transformation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransformationStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

// Database driver of a SQL store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)] // a doc comment would replace the field's in `kubectl explain`
pub enum StoreDriver {
    /// PostgreSQL.
    Postgres,
    /// MySQL.
    Mysql,
    /// Microsoft SQL Server.
    Mssql,
}

impl StoreDriver {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreDriver::Postgres => "postgres",
            StoreDriver::Mysql => "mysql",
            StoreDriver::Mssql => "mssql",
        }
    }
}

/// Store type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StoreType {
    /// An external SQL database.
    #[default]
    Sql,
}

/// Database credentials in a Secret (write-only: compared by keyed hash, never read back).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreCredentialsRef {
    /// Name of the Secret (in the resource's namespace).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key holding the user name (default `username`).
    #[serde(default = "default_username_key")]
    #[schemars(length(max = 253))]
    pub username_key: String,
    /// Key holding the password (default `password`).
    #[serde(default = "default_password_key")]
    #[schemars(length(max = 253))]
    pub password_key: String,
}

/// One-time creation of the store's schema with a DDL-capable user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaInit {
    /// Credentials of a user allowed to create tables, used for the schema call only. The call
    /// is made once per change of these credentials (recorded by keyed hash in status).
    pub credentials_secret_ref: StoreCredentialsRef,
    /// Transformation type the schema is for (default `tokenization`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub transformation_type: Option<String>,
}

/// An external SQL store for tokenization.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "TransformStore",
    plural = "transformstores",
    doc = "An external token store of the secrets service's transform engine, kept equal to spec.",
    cel,
    namespaced,
    status = "TransformStoreStatus",
    shortname = "tstore",
    category = "quartet",
    printcolumn(name = "Driver", type_ = "string", json_path = ".spec.driver"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Synced",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Synced\")].status"
    ),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)").message("name is immutable: create a new TransformStore instead"),
    validation = Rule::new("self.connectionString.contains('{{username}}') && self.connectionString.contains('{{password}}')").message("connectionString must contain the {{username}} and {{password}} template slots"),
    validation = Rule::new("self.driver != 'mysql' || self.connectionString.contains('parseTime=true')").message("a mysql connectionString must carry parseTime=true (e.g. ...?parseTime=true)")
)]
#[serde(rename_all = "camelCase")]
pub struct TransformStoreSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path of the transform engine's mount (default `transform`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 256))]
    pub mount: String,
    /// Name of the store in the service; defaults to `metadata.name`. `builtin/internal` is
    /// reserved. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!self.startsWith('builtin/')").message("builtin/ stores cannot be managed"))]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^\s]+$"))]
    pub name: Option<String>,
    /// Store type: only `sql`.
    #[serde(rename = "type", default)]
    pub type_: StoreType,
    /// `postgres`, `mysql` or `mssql`.
    pub driver: StoreDriver,
    /// Connection string with the `{{username}}` and `{{password}}` slots (mysql: with
    /// `parseTime=true`).
    #[schemars(length(min = 1, max = 4096))]
    pub connection_string: String,
    /// The Secret holding the store user's credentials (should have only SELECT, INSERT,
    /// UPDATE). Write-only: the service never returns them; a change of the Secret is sent once.
    pub credentials_secret_ref: StoreCredentialsRef,
    /// Transformation types the store supports (a set; service default `[tokenization]`).
    /// Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 64)))]
    pub supported_transformations: Option<Vec<String>>,
    /// Database schema (service default `public`). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub schema: Option<String>,
    /// Maximum open connections (service default 4). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_open_connections: Option<i64>,
    /// Maximum idle connections (service default 4). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_idle_connections: Option<i64>,
    /// Maximum lifetime of a connection: a duration such as `1h`, or a number of seconds (`0`
    /// = no limit, the service default). Managed only when set; compared in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connection_lifetime: Option<IntOrString>,
    /// Create the store's schema once with a DDL-capable user (again whenever those
    /// credentials change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_init: Option<SchemaInit>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the store when this resource is deleted (refused by the
    /// service while a transformation uses it: retried, shown as `DeletionBlocked`); `Retain`
    /// leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of a TransformStore.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransformStoreStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

/// The object's name in the service: `spec.name`, or `metadata.name`.
macro_rules! remote_name {
    ($($t:ty),*) => {$(
        impl $t {
            /// The object's name in the service: `spec.name`, or `metadata.name` when unset.
            pub fn remote_name(&self) -> String {
                use kube::ResourceExt;
                self.spec.name.clone().unwrap_or_else(|| self.name_any())
            }
        }
    )*};
}
remote_name!(
    TransformRole,
    TransformAlphabet,
    TransformTemplate,
    Transformation,
    TransformStore
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tform(spec: serde_json::Value) -> Transformation {
        serde_json::from_value(json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "Transformation",
            "metadata": {"name": "t"}, "spec": spec
        }))
        .expect("valid shape")
    }

    fn store(spec: serde_json::Value) -> TransformStore {
        serde_json::from_value(json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "TransformStore",
            "metadata": {"name": "s"}, "spec": spec
        }))
        .expect("valid shape")
    }

    #[test]
    fn forbidden_type_and_field_combinations_are_refused() {
        for bad in [
            json!({"type": "fpe"}),
            json!({"type": "masking"}),
            json!({"type": "tokenization", "template": "ccn"}),
            json!({"type": "masking", "template": "ccn", "tweakSource": "internal"}),
            json!({"type": "fpe", "template": "ccn", "maskingCharacter": "#"}),
            json!({"type": "masking", "template": "ccn", "deletionAllowed": true}),
            json!({"type": "fpe", "template": "ccn", "stores": ["s"]}),
            json!({"type": "fpe", "template": "ccn", "maxTtl": "1h"}),
            json!({"type": "masking", "template": "ccn", "keyImport": {"keySecretRef": {"name": "k", "key": "k"}}}),
            json!({"type": "tokenization", "convergent": true, "keyImport": {"keySecretRef": {"name": "k", "key": "k"}}}),
            json!({"type": "fpe", "template": "c", "keyImport": {"keySecretRef": {"name": "k", "key": "k"}, "allowRotation": true}}),
        ] {
            assert!(tform(bad.clone()).validate_cel().is_err(), "{bad}");
        }
        for good in [
            json!({"type": "fpe", "template": "ccn", "tweakSource": "internal", "deletionAllowed": true}),
            json!({"type": "masking", "template": "ccn", "maskingCharacter": "#"}),
            json!({"type": "tokenization", "stores": ["s"], "maxTtl": "1h", "convergent": true}),
        ] {
            assert!(tform(good.clone()).validate_cel().is_ok(), "{good}");
        }
    }

    #[test]
    fn type_convergent_and_key_import_cannot_change() {
        let old = tform(json!({"type": "tokenization", "convergent": false}));
        assert!(tform(json!({"type": "tokenization", "convergent": true}))
            .validate_cel_update(&old)
            .is_err());
        assert!(tform(json!({"type": "fpe", "template": "c"}))
            .validate_cel_update(&old)
            .is_err());
        assert!(tform(json!({"type": "tokenization", "convergent": false, "keyImport": {"keySecretRef": {"name": "k", "key": "k"}}}))
            .validate_cel_update(&old)
            .is_err());
        assert!(
            tform(json!({"type": "tokenization", "convergent": false, "maxTtl": "1h"}))
                .validate_cel_update(&old)
                .is_ok()
        );
    }

    #[test]
    fn store_connection_string_rules() {
        let creds = json!({"name": "db"});
        assert!(store(json!({"driver": "postgres", "connectionString": "postgresql://db/x", "credentialsSecretRef": creds})).validate_cel().is_err());
        assert!(store(json!({"driver": "mysql", "connectionString": "{{username}}:{{password}}@tcp(db)/x", "credentialsSecretRef": creds})).validate_cel().is_err());
        assert!(store(json!({"driver": "mysql", "connectionString": "{{username}}:{{password}}@tcp(db)/x?parseTime=true", "credentialsSecretRef": creds})).validate_cel().is_ok());
    }
}
