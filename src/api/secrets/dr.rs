//! `DrReplication`: the desired topology of one DR replication set of the secrets service
//! (spec A §2.8, §2.9, §3, §4.6), with a guarded failover.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, ManagedStatus, SecretKeyRef};

/// The desired topology of one DR replication set: which cluster is the primary and which
/// clusters follow it. Each cluster is reached through its own Connection. Deleting the
/// resource never changes the clusters: tearing DR down is done by hand.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "DrReplication",
    plural = "drreplications",
    doc = "The desired topology of one DR replication set of the secrets service, with a guarded failover.",
    cel,
    namespaced,
    status = "DrReplicationStatus",
    shortname = "drrep",
    category = "quartet",
    printcolumn(name = "Primary", type_ = "string", json_path = ".status.primary"),
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
    validation = Rule::new("!has(self.failover) || self.failover.promote == self.primary.id || self.secondaries.exists(s, s.id == self.failover.promote)").message("failover.promote must name the primary's id or one of the secondaries' ids"),
    validation = Rule::new("self.secondaries.all(s, s.id != self.primary.id)").message("a secondary's id must differ from the primary's id"),
    validation = Rule::new("!has(self.failover) || has(self.keySharesSecretRef)").message("failover needs keySharesSecretRef: promoting a secondary takes a DR operation token made from the unseal key shares"),
    validation = Rule::new("!self.secondaries.exists(s, has(s.reindexRequest) || has(s.merkleCheckRequest)) || has(self.keySharesSecretRef)").message("reindexRequest and merkleCheckRequest need keySharesSecretRef: they take a DR operation token made from the unseal key shares")
)]
#[serde(rename_all = "camelCase")]
pub struct DrReplicationSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// The cluster that is the DR primary (until a failover promotes another).
    pub primary: DrPrimary,
    /// The clusters that follow the primary. Each id is the activation token id the primary
    /// knows the secondary by. A secondary removed from this list is revoked on the primary
    /// (`revoke-secondary`).
    #[serde(default)]
    #[x_kube(validation = Rule::new("self.all(s, self.exists_one(t, t.id == s.id))").message("secondary ids must be unique"))]
    #[schemars(length(max = 32))]
    pub secondaries: Vec<DrSecondary>,
    /// Enabling a cluster as a DR secondary WIPES ALL OF ITS DATA. Quartet does it only when
    /// this is true; otherwise the resource reports `Ready=False`, reason `WipeNotAllowed`,
    /// naming the cluster.
    #[serde(default)]
    pub allow_secondary_wipe: bool,
    /// Failover: promote the named cluster (a secondary's `id`, or the primary's `id` to fail
    /// back) to primary. Quartet generates a DR operation token on it from the unseal key shares
    /// (the operation-token ceremony), promotes it, demotes the old primary when it answers (it
    /// keeps its cluster id and becomes a secondary of the new primary), points every other
    /// secondary at the new primary, and deletes the operation tokens. Every step is recorded in
    /// status, so a restart resumes the ceremony instead of starting a second one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<DrFailover>,
    /// A Secret whose every data value is one unseal key share (hex or base64), e.g. keys
    /// `share-1` … `share-5`. Needed for a failover and for reindex and Merkle-check requests.
    /// The shares never reach status, logs or Events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_shares_secret_ref: Option<SecretName>,
    /// A PGP public key (base64, one key of a Secret) to encrypt the operation token to instead
    /// of a one-time password. Quartet cannot decrypt such a token itself: with this set, put
    /// the decrypted operation token in the same Secret under the key `operation-token-<id>`
    /// when the resource asks for it (condition `Ready=False`, reason `OperationTokenNeeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgp_key_secret_ref: Option<SecretKeyRef>,
}

/// The primary cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrPrimary {
    /// Name of this cluster within the replication set (the activation token id it gets when it
    /// is a secondary after a failover). Default `primary`.
    #[serde(default = "default_primary_id")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9._-]+$"))]
    pub id: String,
    /// The secrets Connection that reaches this cluster.
    pub connection_ref: ConnectionRef,
    /// Cluster address given to secondaries when the real one is not reachable from them
    /// (`primary_cluster_addr` of `primary/enable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub primary_cluster_addr: Option<String>,
}

fn default_primary_id() -> String {
    "primary".into()
}

/// A secondary cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrSecondary {
    /// The activation token id the primary knows this secondary by (unique in the set).
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9._-]+$"))]
    pub id: String,
    /// The secrets Connection that reaches this cluster.
    pub connection_ref: ConnectionRef,
    /// API address of the primary as this secondary should reach it (`primary_api_addr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub primary_api_addr: Option<String>,
    /// A Secret key holding the PEM CA of the primary, for this secondary (`ca_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<SecretKeyRef>,
    /// A new value runs a reindex of this secondary once (needs `keySharesSecretRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub reindex_request: Option<String>,
    /// A new value runs a Merkle-tree check of this secondary once (needs
    /// `keySharesSecretRef`); corrupted pages go to status and an Event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub merkle_check_request: Option<String>,
}

/// A failover request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrFailover {
    /// The id of the cluster to make primary (a secondary's `id`, or the primary's `id`).
    #[schemars(length(min = 1, max = 64))]
    pub promote: String,
    /// Promote even while the old primary still answers as primary (the service refuses
    /// otherwise; only one primary should ever exist).
    #[serde(default)]
    pub force: bool,
}

/// The name of a Secret in the resource's namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SecretName {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Observed state of a DrReplication.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrReplicationStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// The id of the cluster that is primary now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// Each cluster's replication state, by id, read from its unauthenticated status endpoint.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub clusters: BTreeMap<String, DrClusterStatus>,
    /// The failover in progress or last done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverProgress>,
    /// The `reindexRequest` / `merkleCheckRequest` values handled, by secondary id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub handled_requests: BTreeMap<String, HandledRequests>,
}

/// One cluster's replication state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrClusterStatus {
    /// `primary`, `secondary` or `disabled`.
    #[serde(default)]
    pub mode: String,
    /// The replication set's cluster id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Secondary: its streaming state (`stream-wals` when following).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Primary: the last WAL index written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_wal: Option<i64>,
    /// Secondary: the last WAL index received from the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_remote_wal: Option<i64>,
    /// Root of the Merkle tree of the replicated storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merkle_root: Option<String>,
    /// Whether the cluster found its Merkle tree corrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupted_merkle_tree: Option<bool>,
    /// The peers: a primary's secondaries, or a secondary's primary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<DrPeer>,
    /// Corrupted pages from the last Merkle check (tree type → details), when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupted_pages: Option<String>,
}

/// A replication peer as a cluster reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrPeer {
    /// The peer's id (a secondary's node id) when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The peer's API address.
    #[serde(default)]
    pub api_address: String,
    /// `connected` or `disconnected`.
    #[serde(default)]
    pub connection_status: String,
    /// Last heartbeat (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<String>,
}

/// Where a failover stands. Secrets (the one-time password, the operation token) are kept in a
/// Secret owned by the resource, never here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailoverProgress {
    /// The cluster being promoted (or, in phase `Maintenance`, the secondary a reindex or Merkle
    /// check needs an operation token from). Absent once a maintenance step is over: the
    /// object may then be left empty, and means no failover.
    #[serde(default)]
    pub target: String,
    /// The cluster that was primary when the failover started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `Ceremony`, `Promoted`, `Rejoining`, `Done`, or `Maintenance` (an operation token for a
    /// reindex or a Merkle check); absent as `target` is.
    #[serde(default)]
    pub phase: String,
    /// Operation-token attempts of ours, by cluster id: the attempt's nonce.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attempts: BTreeMap<String, String>,
    /// Key shares fed to each attempt so far.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shares_fed: BTreeMap<String, u32>,
    /// Clusters that follow the new primary again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejoined: Vec<String>,
}

/// Maintenance requests already handled for one secondary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandledRequests {
    /// The last `reindexRequest` value run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reindex: Option<String>,
    /// The last `merkleCheckRequest` value run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merkle_check: Option<String>,
}
