//! Custom resource types, one file per kind, grouped by service. No IO here: these types are
//! the CRD schemas (their doc comments become `kubectl explain` text).

// Each `#[kube(printcolumn(...))]` of a kind repeats `type_ = "string"` and the like: one
// column each, not an attribute given twice, which is what this lint takes them for.
#![allow(clippy::duplicated_attributes)]

pub mod catalog;
pub mod cluster_connection;
pub mod connection;
pub mod gitops;
pub mod scheduler;
pub mod secrets;
pub mod workspaces;

use compact_str::CompactString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::num::NonZeroI64;

pub use catalog::{CatalogAclBootstrap, CatalogAclToken};
pub use cluster_connection::{ClusterConnection, ClusterConnectionSpec};
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

// Specs hold it as `Option<Box<ConnectionRef>>`: 56 bytes inline in every cached resource, most
// of which name none (the default Connection), would take a SecretsPolicy from jemalloc's 640-byte
// size class to the 768-byte one; boxed, a resource that names one pays 16 bytes more.
/// Which Connection a managed resource uses to reach its service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionRef {
    /// `Connection` (the default) or `ClusterConnection`. A ClusterConnection must admit the
    /// resource's namespace and kind, or the resource is refused (`ConnectionNotAllowed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ConnectionKind>,
    /// Name of the Connection or ClusterConnection.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the Connection; defaults to the resource's own namespace. A Connection in
    /// another namespace must list this resource's namespace in its `spec.allowedNamespaces`.
    /// Not set for a ClusterConnection (it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,
}

impl ConnectionRef {
    /// Whether this names a ClusterConnection.
    pub fn is_cluster(&self) -> bool {
        self.kind == Some(ConnectionKind::ClusterConnection)
    }
}

/// `Connection` (the default) or `ClusterConnection`. A ClusterConnection must admit the
/// resource's namespace and kind, or the resource is refused (`ConnectionNotAllowed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConnectionKind {
    /// A namespaced Connection.
    #[default]
    Connection,
    /// A cluster-scoped ClusterConnection.
    ClusterConnection,
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

// The string fields are `CompactString`s: a string of up to 24 bytes (every type, reason and
// timestamp Quartet writes) lives inside the struct instead of in an allocation of its own.
// `status` is one byte and `observedGeneration` eight (a generation is never 0). Each cached
// resource carries four conditions, so at 10,000 resources that is 160,000 allocations fewer
// and 112 bytes a condition instead of 136: the four fit in jemalloc's 448-byte size class
// instead of its 640-byte one (benches/RESULTS.md).
/// A status condition, in the shape `kubectl wait --for=condition=...` understands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type: `Ready`, `Synced`, `DeletionBlocked`, ... At most 316 characters (as
    /// Kubernetes' own conditions).
    #[serde(rename = "type")]
    #[schemars(length(max = 316), with = "String")]
    pub type_: CompactString,
    /// `True`, `False` or `Unknown`.
    #[schemars(length(max = 16), with = "String")]
    pub status: ConditionStatus,
    /// One-word CamelCase reason (also the Event reason and metric label for errors). At most
    /// 1024 characters.
    #[schemars(length(max = 1024), with = "String")]
    pub reason: CompactString,
    /// Human-readable detail; for remote errors, the service's own message. At most 32768
    /// characters (as Kubernetes' own conditions).
    #[serde(default)]
    #[schemars(length(max = 32768), with = "String")]
    pub message: CompactString,
    /// When `status` last changed (RFC 3339, at most 64 characters).
    #[schemars(length(max = 64), with = "String")]
    pub last_transition_time: CompactString,
    /// The `metadata.generation` this condition was computed for.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "generation"
    )]
    #[schemars(with = "Option<i64>")]
    pub observed_generation: Option<NonZeroI64>,
}

impl Condition {
    /// The `metadata.generation` this condition was computed for, as Kubernetes types it.
    pub fn generation(&self) -> Option<i64> {
        self.observed_generation.map(NonZeroI64::get)
    }
}

/// A generation as written in a status: Kubernetes starts generations at 1, so a 0 (written
/// by hand) reads as none rather than failing the whole watch of the kind.
fn generation<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<NonZeroI64>, D::Error> {
    Ok(Option::<i64>::deserialize(d)?.and_then(NonZeroI64::new))
}

/// A condition's `status`. Kept as one byte in every cached resource; read from and written
/// as the strings Kubernetes uses. Any other string (only a hand-written status holds one)
/// reads as `Unknown` rather than failing the whole watch of the kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known (yet).
    #[default]
    Unknown,
}

impl ConditionStatus {
    /// The string Kubernetes uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b {
            Self::True
        } else {
            Self::False
        }
    }
}

impl PartialEq<&str> for ConditionStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ConditionStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ConditionStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        Ok(match s.as_ref() {
            "True" => Self::True,
            "False" => Self::False,
            _ => Self::Unknown,
        })
    }
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
    #[schemars(length(max = 64), with = "Option<String>")]
    pub last_sync_time: Option<CompactString>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_condition_reads_and_writes_the_strings_kubernetes_uses() {
        let written = json!({
            "type": "Ready", "status": "True", "reason": "InSync", "message": "p matches the spec",
            "lastTransitionTime": "2026-11-26T23:00:00Z", "observedGeneration": 3,
        });
        let c: Condition = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(c.status, ConditionStatus::True);
        assert_eq!(c.generation(), Some(3));
        assert_eq!(serde_json::to_value(&c).unwrap(), written);
    }

    #[test]
    fn a_hand_written_status_or_generation_zero_reads_without_failing_the_watch() {
        let c: Condition = serde_json::from_value(json!({
            "type": "Ready", "status": "Maybe", "reason": "Edited",
            "lastTransitionTime": "2026-11-26T23:00:00Z", "observedGeneration": 0,
        }))
        .unwrap();
        assert_eq!(c.status, ConditionStatus::Unknown);
        assert_eq!(c.generation(), None);
    }

    #[test]
    fn four_conditions_fit_in_448_bytes() {
        // The size class a resource's conditions take in the cache (see `Condition`).
        assert!(4 * std::mem::size_of::<Condition>() <= 448);
    }
}
