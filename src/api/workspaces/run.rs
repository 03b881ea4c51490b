//! `WorkspaceRun`: one run of a workspace (spec B §2.4, §3.1, §4.4), followed and steered.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus};

/// One run of a workspace: created once, followed until it reaches a final state, and steered
/// by the GitOps-safe action flags (`confirm`, `discard`, `cancel`, `forceCancel`,
/// `forceExecute`), each sent once and only when the run's `actions` allow it.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "workspaces.quartet.dev",
    version = "v1alpha1",
    kind = "WorkspaceRun",
    plural = "workspaceruns",
    doc = "One run of a workspace, followed to a final state and steered by action flags.",
    cel,
    namespaced,
    status = "WorkspaceRunStatus",
    shortname = "wsrun",
    category = "quartet",
    printcolumn(
        name = "Workspace",
        type_ = "string",
        json_path = ".spec.workspaceRef.name"
    ),
    printcolumn(name = "Run ID", type_ = "string", json_path = ".status.runId"),
    printcolumn(name = "Run Status", type_ = "string", json_path = ".status.runStatus"),
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
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.workspaceRef) != has(self.workspaceId)").message("exactly one of workspaceRef or workspaceId is required"),
    validation = Rule::new("!(has(self.isDestroy) && self.isDestroy && has(self.refreshOnly) && self.refreshOnly)").message("isDestroy and refreshOnly are mutually exclusive"),
    validation = Rule::new("!has(self.engineVersion) || (has(self.planOnly) && self.planOnly)").message("engineVersion is allowed for plan-only runs only"),
    validation = Rule::new("has(self.workspaceRef) == has(oldSelf.workspaceRef) && (!has(self.workspaceRef) || self.workspaceRef == oldSelf.workspaceRef) && has(self.workspaceId) == has(oldSelf.workspaceId) && (!has(self.workspaceId) || self.workspaceId == oldSelf.workspaceId)").message("the workspace of a run is immutable"),
    validation = Rule::new("has(self.message) == has(oldSelf.message) && (!has(self.message) || self.message == oldSelf.message) && has(self.isDestroy) == has(oldSelf.isDestroy) && (!has(self.isDestroy) || self.isDestroy == oldSelf.isDestroy) && has(self.refresh) == has(oldSelf.refresh) && (!has(self.refresh) || self.refresh == oldSelf.refresh) && has(self.refreshOnly) == has(oldSelf.refreshOnly) && (!has(self.refreshOnly) || self.refreshOnly == oldSelf.refreshOnly)").message("run attributes are immutable once created: create a new WorkspaceRun"),
    validation = Rule::new("has(self.replaceAddrs) == has(oldSelf.replaceAddrs) && (!has(self.replaceAddrs) || self.replaceAddrs == oldSelf.replaceAddrs) && has(self.targetAddrs) == has(oldSelf.targetAddrs) && (!has(self.targetAddrs) || self.targetAddrs == oldSelf.targetAddrs) && has(self.variables) == has(oldSelf.variables) && (!has(self.variables) || self.variables == oldSelf.variables) && has(self.planOnly) == has(oldSelf.planOnly) && (!has(self.planOnly) || self.planOnly == oldSelf.planOnly)").message("run attributes are immutable once created: create a new WorkspaceRun"),
    validation = Rule::new("has(self.engineVersion) == has(oldSelf.engineVersion) && (!has(self.engineVersion) || self.engineVersion == oldSelf.engineVersion) && has(self.allowEmptyApply) == has(oldSelf.allowEmptyApply) && (!has(self.allowEmptyApply) || self.allowEmptyApply == oldSelf.allowEmptyApply) && has(self.autoApply) == has(oldSelf.autoApply) && (!has(self.autoApply) || self.autoApply == oldSelf.autoApply) && has(self.configurationVersionId) == has(oldSelf.configurationVersionId) && (!has(self.configurationVersionId) || self.configurationVersionId == oldSelf.configurationVersionId)").message("run attributes are immutable once created: create a new WorkspaceRun")
)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRunSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// A Workspace resource in this namespace; the run waits (condition `Ready=False`, reason
    /// `ReferenceMissing`) until it has a workspace id. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_ref: Option<WorkspaceRef>,
    /// The workspace id (`ws-…`) instead of `workspaceRef`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub workspace_id: Option<String>,
    /// Message of the run. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A destroy run. Not with `refreshOnly`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_destroy: Option<bool>,
    /// Refresh the state before planning (service default true). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<bool>,
    /// Only refresh the state. Not with `isDestroy`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_only: Option<bool>,
    /// Resource addresses to replace. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 1024)))]
    pub replace_addrs: Option<Vec<String>>,
    /// Resource addresses to target. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 1024)))]
    pub target_addrs: Option<Vec<String>>,
    /// Run variables (HCL literals as strings), taking precedence over workspace variables.
    /// Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<Vec<RunVariable>>,
    /// A speculative run that cannot be applied. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_only: Option<bool>,
    /// Engine version (plan-only runs only). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub engine_version: Option<String>,
    /// Apply even when the plan has no changes. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_empty_apply: Option<bool>,
    /// Apply automatically after the plan (default: the workspace's setting). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_apply: Option<bool>,
    /// Configuration version (`cv-…`) to run (default: the latest). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub configuration_version_id: Option<String>,
    /// Apply the run when it waits for confirmation (`actions.is-confirmable`). Sent once.
    #[serde(default)]
    pub confirm: bool,
    /// Discard the run when it is discardable. Sent once.
    #[serde(default)]
    pub discard: bool,
    /// Cancel the run when it is cancelable. Sent once.
    #[serde(default)]
    pub cancel: bool,
    /// Force-cancel the run: cancels it first, then force-cancels once the cool-off has passed
    /// (`actions.is-force-cancelable`). Sent once.
    #[serde(default)]
    pub force_cancel: bool,
    /// Force-execute a pending run (cancels the runs ahead of it). Sent once.
    #[serde(default)]
    pub force_execute: bool,
    /// The Connection to the workspace service; defaults to the Connection named `workspaces` in
    /// this namespace, else to the ClusterConnection marked `default: true` for this service that
    /// admits this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default): deleting the resource cancels a run still active (or discards one
    /// waiting for confirmation). `Retain`: the run is left alone.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// A Workspace resource in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceRef {
    /// Name of the Workspace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A run variable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunVariable {
    /// Variable name.
    #[schemars(length(min = 1, max = 128))]
    pub key: String,
    /// HCL literal, as a string (e.g. `"\"eu\""` or `3`).
    pub value: String,
}

/// Observed state of a WorkspaceRun.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRunStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// The run's id (`run-…`), also in `remoteId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The workspace the run belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub workspace_id: Option<String>,
    /// The run's state as the service names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_status: Option<String>,
    /// When the run reached each state (the service's `status-timestamps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_timestamps: Option<std::collections::BTreeMap<String, String>>,
    /// Whether the plan has changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_changes: Option<bool>,
    /// What the run allows now (`is-confirmable`, `is-cancelable`, `is-discardable`,
    /// `is-force-cancelable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<std::collections::BTreeMap<String, bool>>,
    /// Actions already sent (each is sent once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions_sent: Vec<String>,
}
