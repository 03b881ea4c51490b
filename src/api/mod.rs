//! Custom resource types, one file per kind, grouped by service. No IO here: these types are
//! the CRD schemas (their doc comments become `kubectl explain` text).

pub mod catalog;
pub mod connection;
pub mod gitops;
pub mod scheduler;
pub mod secrets;
pub mod workspaces;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use catalog::{CatalogAclBootstrap, CatalogAclToken};
pub use connection::{Connection, ConnectionSpec, ConnectionStatus, Service};
pub use gitops::{DriftPolicy, GitOps, Suspend};
pub use scheduler::DeploymentGate;
pub use secrets::idp::{IdpAuthMethod, IdpGroup, IdpUser};
pub use secrets::policy::{SecretsPolicy, SecretsPolicySpec, SecretsPolicyStatus};
pub use secrets::totp::{TotpEnrollment, TotpMethod};
pub use secrets::transform::{
    TransformAlphabet, TransformRole, TransformStore, TransformTemplate, Transformation,
};
pub use workspaces::nocode::{NoCodeModule, NoCodeWorkspace};
pub use workspaces::run::{WorkspaceRun, WorkspaceRunSpec, WorkspaceRunStatus};
pub use workspaces::workspace::{Workspace, WorkspaceSpec, WorkspaceStatus};

/// A schemars transform bounding the values of a map (`additionalProperties`) to `N`
/// characters: `#[schemars(inner(length(...)))]` reaches list items only.
pub fn values_max_length<const N: u64>(schema: &mut schemars::Schema) {
    if let Some(values) = schema
        .get_mut("additionalProperties")
        .and_then(|v| v.as_object_mut())
    {
        values.insert("maxLength".into(), N.into());
    }
}

/// Which Connection a managed resource uses to reach its service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionRef {
    /// Name of the Connection.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the Connection; defaults to the resource's own namespace. A Connection in
    /// another namespace must list this resource's namespace in its `spec.allowedNamespaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,
}

/// What happens to the remote object when the resource is deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the remote object (an object already gone counts as deleted).
    #[default]
    Delete,
    /// Leave the remote object in place; only the Kubernetes resource goes away.
    Retain,
}

/// A reference to one key of a Kubernetes Secret in the resource's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret (in the same namespace as the resource that refers to it).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key within the Secret's data (at most 253 characters, as Kubernetes allows).
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// A status condition, in the shape `kubectl wait --for=condition=...` understands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type: `Ready`, `Synced`, `DeletionBlocked`, ... At most 316 characters (as
    /// Kubernetes' own conditions).
    #[serde(rename = "type")]
    #[schemars(length(max = 316))]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[schemars(length(max = 16))]
    pub status: String,
    /// One-word CamelCase reason (also the Event reason and metric label for errors). At most
    /// 1024 characters.
    #[schemars(length(max = 1024))]
    pub reason: String,
    /// Human-readable detail; for remote errors, the service's own message. At most 32768
    /// characters (as Kubernetes' own conditions).
    #[serde(default)]
    #[schemars(length(max = 32768))]
    pub message: String,
    /// When `status` last changed (RFC 3339, at most 64 characters).
    #[schemars(length(max = 64))]
    pub last_transition_time: String,
    /// The `metadata.generation` this condition was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Status fields every managed kind carries (flattened into the kind's status).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedStatus {
    /// The `metadata.generation` last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (the remote object matches the spec) and `Synced` (the last reconcile succeeded),
    /// plus kind-specific conditions. At most 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub conditions: Vec<Condition>,
    /// Identifier of the remote object in the service (a name, path or server-assigned id). At
    /// most 1024 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub remote_id: Option<String>,
    /// When Quartet last changed the remote object or the resource's conditions (RFC 3339).
    /// Passes that find everything in sync do not move it, so it never retriggers a reconcile.
    /// At most 64 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub last_sync_time: Option<String>,
    /// Fields found changed in the service (not by a spec change) and set back, at the last
    /// correction of drift.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted_fields: Vec<String>,
    /// Keyed hash (HMAC-SHA256 with an operator-held key) of the write-only inputs last sent,
    /// so a change of a referenced Secret is detected without storing or reading it back.
    /// One or a few such hashes, labelled; at most 4096 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub write_only_hash: Option<String>,
    /// The last value of the annotation `reconcile.quartet.dev/requestedAt` (or Flux's
    /// `reconcile.fluxcd.io/requestedAt`) a pass handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    /// Kind-specific status fields (a workspace's `locked`, a library set's `accounts`), read
    /// from the remote object by [`crate::reconcile::Reconciled::status_fields`] and written
    /// next to the fields above. Not part of this type's schema: each kind declares its own.
    #[serde(skip)]
    #[schemars(skip)]
    pub fields: serde_json::Map<String, serde_json::Value>,
}

impl ManagedStatus {
    /// The JSON keys of the fields every managed kind carries (everything else in a status is
    /// kind-specific).
    pub const KEYS: [&'static str; 7] = [
        "observedGeneration",
        "conditions",
        "remoteId",
        "lastSyncTime",
        "driftedFields",
        "writeOnlyHash",
        "lastHandledReconcileAt",
    ];
}
