//! The directory secrets engine (spec C §2.2, §4.2): `AdEngine` (the engine's config),
//! `AdRole` (a managed service account), `AdLibrarySet` (a set of accounts lent by check-out)
//! and `AdCheckout` (one account borrowed for as long as the resource exists).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus, SecretKeyRef};

fn default_mount() -> String {
    "ad".into()
}

/// A duration: whole seconds (`3600`) or Go-style units (`1h`, `30m`, `1h30m`, `45s`).
pub const DURATION_PATTERN: &str = r"^([0-9]+|([0-9]+[hms])+)$";

// ---------------------------------------------------------------------------------------------
// AdEngine

/// The directory engine's configuration (`<mount>/config`): how the service binds to the
/// directory and how it generates passwords. The bind password comes from a Secret and is sent
/// only when that Secret changes, so a root rotation done by the service is never undone.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "AdEngine",
    plural = "adengines",
    doc = "The directory secrets engine's configuration (bind account, URL, password rules).",
    cel,
    namespaced,
    status = "AdEngineStatus",
    shortname = "adengine",
    category = "quartet",
    printcolumn(name = "Mount", type_ = "string", json_path = ".spec.mount"),
    printcolumn(name = "Bind DN", type_ = "string", json_path = ".spec.binddn"),
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
    validation = Rule::new("!has(self.passwordPolicy) || (!has(self.length) && !has(self.formatter))").message("passwordPolicy is mutually exclusive with the deprecated length and formatter"),
    validation = Rule::new("!has(self.rotateRoot) || self.rotateRoot.policy != 'Interval' || has(self.rotateRoot.interval)").message("rotateRoot.interval is required when rotateRoot.policy is Interval")
)]
#[serde(rename_all = "camelCase")]
pub struct AdEngineSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path the directory engine is mounted at (default `ad`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 128))]
    pub mount: String,
    /// Distinguished name of the account the service binds as (use the full DN: it must
    /// identify exactly one entity for root rotation to work).
    #[schemars(length(min = 1, max = 1024))]
    pub binddn: String,
    /// The Secret key holding the bind password. Write-only: sent on the first write and again
    /// only when the Secret's content changes (compared by keyed hash), never on other edits,
    /// so a password rotated by the service (`rotateRoot`) stays in force.
    pub bindpass_secret_ref: SecretKeyRef,
    /// LDAP URL(s) of the directory, comma-separated and tried in order (service default
    /// `ldap://127.0.0.1`). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub url: Option<String>,
    /// Base DN under which to search for users. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub userdn: Option<String>,
    /// Domain used to build a user principal name `binddn@upndomain`. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub upndomain: Option<String>,
    /// CA certificate (x509 PEM) to verify the directory's TLS certificate. Managed only when
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.contains('-----BEGIN CERTIFICATE-----')").message("certificate must be an x509 PEM certificate"))]
    pub certificate: Option<String>,
    /// Issue StartTLS after connecting without encryption. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starttls: Option<bool>,
    /// Skip verification of the directory's TLS certificate. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_tls: Option<bool>,
    /// Default password lifetime (e.g. `24h`); unset or `0` takes the service's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub ttl: Option<String>,
    /// Longest lifetime a role may set (e.g. `720h`); unset or `0` takes the service's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub max_ttl: Option<String>,
    /// Per-URL connection timeout (service default `30s`). Write-only in the service (it is not
    /// returned by a read): sent only when this field changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub connection_timeout: Option<String>,
    /// Request timeout (service default `90s`). Write-only in the service: sent only when this
    /// field changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub request_timeout: Option<String>,
    /// How much later than the service's own rotation a password-last-set time in the
    /// directory may be before the service treats it as changed outside and rotates it again
    /// (service default `5s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub last_rotation_tolerance: Option<String>,
    /// Name of a password policy of the service used to generate passwords. Mutually exclusive
    /// with `length` and `formatter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub password_policy: Option<String>,
    /// Deprecated: length of generated passwords (at least 14; service default 64). Mutually
    /// exclusive with `passwordPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 14").message("length must be at least 14"))]
    pub length: Option<i64>,
    /// Deprecated: text the generated password is put into, containing `{{PASSWORD}}` exactly
    /// once (e.g. `corp-{{PASSWORD}}`). Mutually exclusive with `passwordPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = Rule::new("self.matches('[{][{]PASSWORD[}][}]') && !self.matches('(?s)[{][{]PASSWORD[}][}].*[{][{]PASSWORD[}][}]')").message("formatter must contain {{PASSWORD}} exactly once")
    )]
    #[schemars(length(max = 256))]
    pub formatter: Option<String>,
    /// When the service rotates the bind password (after which only the service knows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate_root: Option<RotateRoot>,
    /// Any new value rotates the bind password once (GitOps-safe: the value handled is kept in
    /// `status.handledRotateRootRequest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub rotate_root_request: Option<String>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the engine's config when this resource is deleted; `Retain`
    /// leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Root (bind password) rotation schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotateRoot {
    /// `Never` (default), `OnCreate` (once, right after the first config write) or `Interval`
    /// (after the first write, then every `interval`).
    #[serde(default)]
    pub policy: RotateRootPolicy,
    /// Time between rotations for `Interval` (e.g. `720h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub interval: Option<String>,
}

// When the bind password is rotated. (A `//` comment so `kubectl explain` shows the field's doc.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[allow(missing_docs)] // a doc comment would replace the field's in `kubectl explain`
pub enum RotateRootPolicy {
    /// Never rotated by Quartet.
    #[default]
    Never,
    /// Once, right after the first config write.
    OnCreate,
    /// After the first write, then every `interval`.
    Interval,
}

/// Observed state of an AdEngine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdEngineStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// When Quartet last had the service rotate the bind password (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_root_rotation: Option<String>,
    /// The last `spec.rotateRootRequest` value handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_rotate_root_request: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// AdRole

/// A role of the directory engine (`<mount>/roles/<metadata.name>`): a service account whose
/// password the service rotates. Optionally keeps its current credentials in an owned Secret.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "AdRole",
    plural = "adroles",
    doc = "A role of the directory secrets engine: one service account whose password the service manages.",
    cel,
    namespaced,
    status = "AdRoleStatus",
    shortname = "adrole",
    category = "quartet",
    printcolumn(
        name = "Account",
        type_ = "string",
        json_path = ".spec.serviceAccountName"
    ),
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
#[serde(rename_all = "camelCase")]
pub struct AdRoleSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path the directory engine is mounted at (default `ad`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 128))]
    pub mount: String,
    /// The account's user principal name (e.g. `app@example.com`); the service checks that it
    /// exists in the directory.
    #[schemars(length(min = 1, max = 256))]
    pub service_account_name: String,
    /// Password lifetime (e.g. `12h`); unset takes the engine's `ttl`. The service rotates the
    /// password on the first credentials read after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub ttl: Option<String>,
    /// A Secret (owned by this role) to keep the credentials in: `username`, `password` and
    /// `lastPassword`, refreshed whenever the password changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<SecretName>,
    /// Any new value rotates the role's password once (GitOps-safe: the value handled is kept
    /// in `status.handledRotateRequest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub rotate_request: Option<String>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the role when this resource is deleted; `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// The name of a Secret in the resource's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretName {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Observed state of an AdRole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdRoleStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// When the service last rotated the password (absent until it has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_vault_rotation: Option<String>,
    /// When the directory says the password was last set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_last_set: Option<String>,
    /// The last `spec.rotateRequest` value handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_rotate_request: Option<String>,
    /// Keyed hash of the password last written to the credentials Secret (never the password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_hash: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// AdLibrarySet

/// A library set of the directory engine (`<mount>/library/<metadata.name>`): service accounts
/// lent one at a time by check-out. Status lists which accounts are available.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "AdLibrarySet",
    plural = "adlibrarysets",
    doc = "A library set of the directory secrets engine: accounts lent by check-out.",
    cel,
    namespaced,
    status = "AdLibrarySetStatus",
    shortname = "adlib",
    category = "quartet",
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableCount"
    ),
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
#[serde(rename_all = "camelCase")]
pub struct AdLibrarySetSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path the directory engine is mounted at (default `ad`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 128))]
    pub mount: String,
    /// The accounts of the set (user principal names). A set: order does not matter. Each
    /// account must exist in the directory and belong to no other set.
    #[schemars(length(min = 1))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[schemars(inner(length(max = 256)))]
    pub service_account_names: Vec<String>,
    /// How long a check-out lasts (default `24h`; `0` is unlimited). Larger check-out requests
    /// are capped to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub ttl: Option<String>,
    /// The longest a check-out may be renewed to (default `24h`; `0` is unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub max_ttl: Option<String>,
    /// Let any caller check accounts in, not only the borrower (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_check_in_enforcement: Option<bool>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the set when this resource is deleted (the service refuses
    /// while accounts are checked out); `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// One account of a library set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LibraryAccount {
    /// The account's user principal name.
    pub name: String,
    /// Whether it can be checked out now.
    pub available: bool,
    /// The identity entity of the borrower, when checked out by one (the borrower's token is
    /// never shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrower_entity_id: Option<String>,
}

/// Observed state of an AdLibrarySet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdLibrarySetStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// The set's accounts and whether each is available (refreshed at every resync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounts: Option<Vec<LibraryAccount>>,
    /// How many accounts are available for check-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_count: Option<i64>,
}

// ---------------------------------------------------------------------------------------------
// AdCheckout

/// One account checked out of a library set for as long as this resource exists: its name and
/// password go to an owned Secret, the check-out's lease is renewed before it expires, and the
/// account is checked in when the resource is deleted.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "AdCheckout",
    plural = "adcheckouts",
    doc = "An account borrowed from a directory library set while this resource exists.",
    cel,
    namespaced,
    status = "AdCheckoutStatus",
    shortname = "adco",
    category = "quartet",
    printcolumn(
        name = "Account",
        type_ = "string",
        json_path = ".status.serviceAccountName"
    ),
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
    validation = Rule::new("has(self.setRef) != has(self.setName)").message("exactly one of setRef and setName is required"),
    validation = Rule::new("has(self.setRef) == has(oldSelf.setRef) && (!has(self.setRef) || self.setRef == oldSelf.setRef) && has(self.setName) == has(oldSelf.setName) && (!has(self.setName) || self.setName == oldSelf.setName)").message("the set is immutable: create a new AdCheckout instead")
)]
#[serde(rename_all = "camelCase")]
pub struct AdCheckoutSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// Path the directory engine is mounted at (default `ad`). Immutable.
    #[serde(default = "default_mount")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mount is immutable"))]
    #[schemars(length(min = 1, max = 128))]
    pub mount: String,
    /// An AdLibrarySet in this namespace to borrow from (waits until it exists). One of
    /// `setRef` and `setName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_ref: Option<SecretName>,
    /// The name of a library set in the service to borrow from. One of `setRef` and `setName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub set_name: Option<String>,
    /// Requested check-out length (capped by the set's ttl, as the service does); unset takes
    /// the set's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+[hms])+)$"))]
    #[schemars(length(max = 64))]
    pub ttl: Option<String>,
    /// Name of the Secret (owned by this resource) receiving `serviceAccountName` and
    /// `password`; defaults to `metadata.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: Option<String>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) checks the account in when this resource is deleted; `Retain` leaves
    /// it checked out until its lease ends.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of an AdCheckout.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdCheckoutStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// The account checked out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub service_account_name: Option<String>,
    /// The set it was checked out of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub set_name: Option<String>,
    /// When the check-out's lease ends unless renewed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// Seconds the lease was last granted for (it is renewed once half of it has run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration: Option<i64>,
}

/// Seconds of a duration in the [`DURATION_PATTERN`] form; `None` when malformed.
pub fn duration_secs(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    let mut total = 0i64;
    let mut num = String::new();
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            num.push(ch);
            continue;
        }
        let n: i64 = num.parse().ok()?;
        num.clear();
        total += n * match ch {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
    }
    num.is_empty().then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(spec: serde_json::Value) -> AdEngine {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "AdEngine",
            "metadata": {"name": "e"}, "spec": spec
        }))
        .expect("valid shape")
    }

    fn base(extra: serde_json::Value) -> serde_json::Value {
        let mut v =
            serde_json::json!({"binddn": "CN=a", "bindpassSecretRef": {"name": "s", "key": "k"}});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    #[test]
    fn durations_parse_as_seconds() {
        assert_eq!(duration_secs("3600"), Some(3600));
        assert_eq!(duration_secs("1h30m"), Some(5400));
        assert_eq!(duration_secs("45s"), Some(45));
        assert_eq!(duration_secs("0"), Some(0));
        assert_eq!(duration_secs("1x"), None);
        assert_eq!(duration_secs("1h3"), None);
    }

    #[test]
    fn password_policy_excludes_length_and_formatter() {
        assert!(engine(base(
            serde_json::json!({"passwordPolicy": "p", "length": 20})
        ))
        .validate_cel()
        .is_err());
        assert!(engine(base(serde_json::json!({"passwordPolicy": "p"})))
            .validate_cel()
            .is_ok());
    }

    #[test]
    fn length_has_a_minimum_of_14() {
        assert!(engine(base(serde_json::json!({"length": 13})))
            .validate_cel()
            .is_err());
        assert!(engine(base(serde_json::json!({"length": 14})))
            .validate_cel()
            .is_ok());
    }

    #[test]
    fn formatter_needs_the_placeholder_exactly_once() {
        for (f, ok) in [
            ("corp-{{PASSWORD}}", true),
            ("corp", false),
            ("{{PASSWORD}}-{{PASSWORD}}", false),
        ] {
            assert_eq!(
                engine(base(serde_json::json!({ "formatter": f })))
                    .validate_cel()
                    .is_ok(),
                ok,
                "{f}"
            );
        }
    }

    #[test]
    fn mount_is_immutable() {
        let old = engine(base(serde_json::json!({"mount": "ad"})));
        let new = engine(base(serde_json::json!({"mount": "ad2"})));
        assert!(new.validate_cel_update(&old).is_err());
    }
}
