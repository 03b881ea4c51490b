//! Kinds of the catalog's ACL system (spec C §2.3, §4.3): `CatalogAclBootstrap`,
//! `CatalogAclToken`.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConnectionRef, DeletionPolicy, ManagedStatus, SecretKeyRef};

/// Bootstraps the catalog's ACL system once and keeps the management token in a Secret.
///
/// The token's secret is generated first and written to the Secret, then sent as the
/// bootstrap's `BootstrapSecret`, so a bootstrap whose response is lost does not lose the only
/// management token. A catalog already bootstrapped with another token ends `Ready=False`,
/// reason `BootstrappedElsewhere`: treat the cluster as potentially compromised.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "catalog.quartet.dev",
    version = "v1alpha1",
    kind = "CatalogAclBootstrap",
    plural = "catalogaclbootstraps",
    doc = "Bootstraps the catalog's ACL system once, keeping the management token in a Secret, and reports ACL replication health.",
    cel,
    namespaced,
    status = "CatalogAclBootstrapStatus",
    shortname = "aclboot",
    category = "quartet",
    printcolumn(name = "Secret", type_ = "string", json_path = ".spec.secretName"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
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
    validation = Rule::new("has(self.secretName) == has(oldSelf.secretName) && (!has(self.secretName) || self.secretName == oldSelf.secretName)").message("secretName is immutable: the management token stays where it was written")
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAclBootstrapSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// Name of the Secret (in this namespace) holding the management token: keys `token` (the
    /// SecretID) and `accessorId`. Defaults to `metadata.name`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub secret_name: Option<String>,
    /// `Retain` (default): the Secret is not owned by this resource, so deleting the resource
    /// keeps the cluster's management token. `Owned`: the Secret is owned by the resource and
    /// garbage-collected with it.
    #[serde(default)]
    pub secret_policy: SecretPolicy,
    /// Datacenters whose ACL replication status is read at every resync
    /// (`GET /v1/acl/replication?dc=...`) into `status.replication`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(inner(length(max = 256)))]
    pub replication_datacenters: Vec<String>,
    /// The Connection to the catalog; defaults to the Connection named `catalog` in this namespace,
    /// else to the ClusterConnection marked `default: true` for this service that admits this
    /// namespace and kind. Its token is not needed for the bootstrap itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
}

/// Who owns the management token's Secret.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SecretPolicy {
    /// The Secret outlives the resource (the management token is not lost with it).
    #[default]
    Retain,
    /// The Secret is owned by the resource and deleted with it.
    Owned,
}

/// ACL replication status of one datacenter, as the catalog reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationStatus {
    /// The datacenter queried.
    pub datacenter: String,
    /// Whether ACL replication is enabled there.
    #[serde(default)]
    pub enabled: bool,
    /// Whether the replication routine is running.
    #[serde(default)]
    pub running: bool,
    /// The datacenter replicated from (the primary).
    #[serde(default)]
    pub source_datacenter: String,
    /// `policies` or `tokens`.
    #[serde(default)]
    pub replication_type: String,
    /// Last replicated policy index.
    #[serde(default)]
    pub replicated_index: u64,
    /// Last replicated token index.
    #[serde(default)]
    pub replicated_token_index: u64,
    /// Time of the last successful replication round (`0001-01-01T00:00:00Z`: never).
    #[serde(default)]
    pub last_success: String,
    /// Time of the last failed round (`0001-01-01T00:00:00Z`: never). Kept after recovery.
    #[serde(default)]
    pub last_error: String,
    /// The last failure's message (kept after recovery).
    #[serde(default)]
    pub last_error_message: String,
    /// False when `lastError` is later than `lastSuccess`.
    #[serde(default)]
    pub healthy: bool,
}

/// Observed state of a CatalogAclBootstrap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAclBootstrapStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// Accessor ID of the management token in the Secret (not secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessor_id: Option<String>,
    /// Replication status of each datacenter of `spec.replicationDatacenters`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replication: Vec<ReplicationStatus>,
}

impl CatalogAclBootstrap {
    /// The Secret holding the management token.
    pub fn secret_name(&self) -> String {
        use kube::ResourceExt;
        self.spec
            .secret_name
            .clone()
            .unwrap_or_else(|| self.name_any())
    }
}

/// Exchanges a Kubernetes identity for a catalog ACL token (`POST /v1/acl/login`) and keeps it
/// in a Secret owned by this resource (keys `token` and `accessorId`). Logs in again when the
/// token is refused or after `rotationInterval`; the old token is logged out once the Secret
/// holds the new one. On delete with `deletionPolicy: Delete` the token is logged out.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "catalog.quartet.dev",
    version = "v1alpha1",
    kind = "CatalogAclToken",
    plural = "catalogacltokens",
    doc = "A catalog ACL token obtained by logging in with a Kubernetes identity, kept in an owned Secret and rotated.",
    cel,
    namespaced,
    status = "CatalogAclTokenStatus",
    shortname = "acltoken",
    category = "quartet",
    printcolumn(name = "Auth Method", type_ = "string", json_path = ".spec.authMethod"),
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
    validation = Rule::new("has(self.serviceAccountName) != has(self.bearerTokenSecretRef)").message("set exactly one of serviceAccountName and bearerTokenSecretRef"),
    validation = Rule::new("!has(self.audience) || has(self.serviceAccountName)").message("audience applies to serviceAccountName only"),
    validation = Rule::new("has(self.secretName) == has(oldSelf.secretName) && (!has(self.secretName) || self.secretName == oldSelf.secretName)").message("secretName is immutable")
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAclTokenSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// Name of the catalog auth method to log in with (a `kubernetes` method).
    #[schemars(length(min = 1, max = 128))]
    pub auth_method: String,
    /// Catalog namespace of the auth method (enterprise only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub namespace: Option<String>,
    /// Metadata attached to the token (`Meta` of the login).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
    /// ServiceAccount (in this namespace) whose short-lived token, requested through the
    /// TokenRequest API, is the login's bearer token. Exclusive with `bearerTokenSecretRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
    /// Audience of the requested ServiceAccount token (default: the API server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub audience: Option<String>,
    /// A Secret key holding the bearer token (a ServiceAccount JWT). Exclusive with
    /// `serviceAccountName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_secret_ref: Option<SecretKeyRef>,
    /// Name of the Secret (owned by this resource) holding the token: keys `token` (the
    /// SecretID) and `accessorId`. Defaults to `metadata.name`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub secret_name: Option<String>,
    /// Log in again after this long (Go duration; default `24h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[schemars(length(max = 64))]
    pub rotation_interval: Option<String>,
    /// The Connection to the catalog; defaults to the Connection named `catalog` in this namespace,
    /// else to the ClusterConnection marked `default: true` for this service that admits this
    /// namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) logs the token out when this resource is deleted; `Retain` leaves it
    /// valid until it expires.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of a CatalogAclToken.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAclTokenStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// Accessor ID of the token in the Secret (not secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessor_id: Option<String>,
    /// When the token was obtained (RFC 3339); the next rotation is `rotationInterval` later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_login_time: Option<String>,
}

impl CatalogAclToken {
    /// The Secret holding the token.
    pub fn secret_name(&self) -> String {
        use kube::ResourceExt;
        self.spec
            .secret_name
            .clone()
            .unwrap_or_else(|| self.name_any())
    }
}
