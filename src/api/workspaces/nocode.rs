//! `NoCodeModule` and `NoCodeWorkspace`: no-code provisioning of the workspace service (spec B
//! §2.5, §3.1, §4.5).

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus, SecretKeyRef};

/// A private-registry module enabled for no-code provisioning. The service offers no delete
/// endpoint in its documentation, so deleting the resource with `deletionPolicy: Delete`
/// disables provisioning (`enabled: false`) and `Retain` leaves the module as it is.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "workspaces.quartet.dev",
    version = "v1alpha1",
    kind = "NoCodeModule",
    plural = "nocodemodules",
    doc = "A registry module enabled for no-code provisioning, kept equal to spec.",
    cel,
    namespaced,
    status = "NoCodeModuleStatus",
    shortname = "ncmod",
    category = "quartet",
    printcolumn(
        name = "Module",
        type_ = "string",
        json_path = ".spec.registryModuleId"
    ),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.versionPin"),
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
    validation = Rule::new("self.registryModuleId == oldSelf.registryModuleId").message("registryModuleId is immutable: create a new NoCodeModule instead"),
    validation = Rule::new("has(self.organization) == has(oldSelf.organization) && (!has(self.organization) || self.organization == oldSelf.organization)").message("organization is immutable"))]
#[serde(rename_all = "camelCase")]
pub struct NoCodeModuleSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// Organization of the module; defaults to the Connection's `spec.organization`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub organization: Option<String>,
    /// The private-registry module to provision from (`mod-…`). Immutable.
    #[schemars(regex(pattern = r"^mod-[A-Za-z0-9]+$"))]
    #[schemars(length(max = 64))]
    pub registry_module_id: String,
    /// Whether workspaces may be provisioned from the module (default true: declaring the
    /// resource means provisioning from it). Always sent explicitly, as real services default it
    /// differently.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Module version new workspaces are provisioned with. Empty or absent: floating, the
    /// module's latest version (shown in `status.versionPin`), and workspaces are offered an
    /// upgrade when a newer version is published. `latest` is accepted too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub version_pin: Option<String>,
    /// Allowed values of module variables, one entry per variable name. Managed only when set:
    /// each set is replaced in place by its id (kept in `status.variableOptionIds`), so an edit
    /// never piles up duplicate sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub variable_options: Option<Vec<VariableOption>>,
    /// Adopt this existing no-code module (`nocode-…`) instead of enabling a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^nocode-[A-Za-z0-9]+$"))]
    #[schemars(length(max = 64))]
    pub no_code_module_id: Option<String>,
    /// The Connection to the workspace service; defaults to the Connection named `workspaces` in
    /// this namespace, else to the ClusterConnection marked `default: true` for this service that
    /// admits this namespace and kind. Its token must be a user or team token (organization tokens
    /// cannot manage no-code modules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) disables provisioning from the module when this resource is deleted
    /// (the API documentation lists no delete endpoint; go-tfe calls an undocumented
    /// `DELETE /no-code-modules/:id`, which Quartet does not rely on); `Retain` leaves it
    /// enabled.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

fn yes() -> bool {
    true
}

/// The allowed values of one module variable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VariableOption {
    /// Name of the module variable.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Its type (any type the engine supports, e.g. `string`, `number`).
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 256))]
    pub type_: String,
    /// The values a no-code workspace may choose from.
    #[serde(default)]
    #[schemars(inner(length(max = 1024)))]
    pub options: Vec<String>,
}

/// Observed state of a NoCodeModule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NoCodeModuleStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// The service's id of the no-code module (`nocode-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub no_code_module_id: Option<String>,
    /// Organization of the module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// The module version workspaces are provisioned with (the pin, or the latest version when
    /// the module floats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_pin: Option<String>,
    /// Ids of the variable-options sets, by variable name (`ncvaropt-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variable_option_ids: Option<BTreeMap<String, String>>,
}

/// A workspace provisioned from a no-code module, then kept as a workspace: its settings are
/// corrected when they drift, it is adopted by name (never created twice), and it is upgraded
/// when the module's version moves (`spec.upgrade`).
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "workspaces.quartet.dev",
    version = "v1alpha1",
    kind = "NoCodeWorkspace",
    plural = "nocodeworkspaces",
    doc = "A workspace provisioned from a no-code module, kept equal to spec and upgraded as the module moves.",
    cel,
    namespaced,
    status = "NoCodeWorkspaceStatus",
    shortname = "ncws",
    category = "quartet",
    printcolumn(name = "Version", type_ = "string", json_path = ".status.moduleVersion"),
    printcolumn(name = "Upgrade", type_ = "string", json_path = ".status.upgrade.status"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Synced", type_ = "string", json_path = ".status.conditions[?(@.type==\"Synced\")].status"),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("self.metadata.name.size() <= 90 || has(self.spec.name)").message("metadata.name is longer than a workspace name may be: set spec.name")
)]
#[x_kube(
    validation = Rule::new("has(self.moduleRef) != has(self.noCodeModuleId)").message("exactly one of moduleRef and noCodeModuleId is required"),
    validation = Rule::new("!has(self.executionMode) || self.executionMode != 'agent' || has(self.agentPoolId)").message("agentPoolId is required when executionMode is agent"),
    validation = Rule::new("!has(self.agentPoolId) || (has(self.executionMode) && self.executionMode == 'agent')").message("agentPoolId is only allowed when executionMode is agent (not with remote execution)"),
    validation = Rule::new("has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)").message("name is immutable: create a new NoCodeWorkspace instead"),
    validation = Rule::new("has(self.sourceName) == has(oldSelf.sourceName) && (!has(self.sourceName) || self.sourceName == oldSelf.sourceName)").message("sourceName is set at creation only (immutable)"),
    validation = Rule::new("has(self.sourceUrl) == has(oldSelf.sourceUrl) && (!has(self.sourceUrl) || self.sourceUrl == oldSelf.sourceUrl)").message("sourceUrl is set at creation only (immutable)"))]
#[serde(rename_all = "camelCase")]
pub struct NoCodeWorkspaceSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// A NoCodeModule in this namespace to provision from (the resource waits until it has an
    /// id). Exactly one of `moduleRef` and `noCodeModuleId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_ref: Option<ModuleRef>,
    /// The no-code module to provision from (`nocode-…`), when it is not managed here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^nocode-[A-Za-z0-9]+$"))]
    #[schemars(length(max = 64))]
    pub no_code_module_id: Option<String>,
    /// Workspace name; defaults to `metadata.name`. Letters, numbers, `-` and `_`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 90), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub name: Option<String>,
    /// Workspace description. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 10000))]
    pub description: Option<String>,
    /// `remote` (the service's default) or `agent` (needs `agentPoolId`). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_mode: Option<NoCodeExecutionMode>,
    /// Agent pool (`apool-…`): required with `agent`, refused with `remote`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^apool-[A-Za-z0-9]+$"))]
    #[schemars(length(max = 64))]
    pub agent_pool_id: Option<String>,
    /// Apply runs automatically after a successful plan. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_apply: Option<bool>,
    /// Project to create the workspace in (`prj-…`); the organization's default when absent.
    /// Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^prj-[A-Za-z0-9]+$"))]
    #[schemars(length(max = 64))]
    pub project_id: Option<String>,
    /// Friendly name of the creating client, shown by the service. Set at creation only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub source_name: Option<String>,
    /// URL of the creating client or a related resource. Set at creation only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub source_url: Option<String>,
    /// Workspace variables (values among the module's allowed options). They are ordinary
    /// workspace variables: sent at creation, then kept like a Workspace's `variables` with
    /// `variablesPolicy: Merge` (variables not listed are left alone). A change (an edit, a
    /// rotated Secret, a value changed in the service) is written at once through the
    /// workspace variables API, except that the pass starting an upgrade sends the whole list
    /// with the upgrade, and a change during an upgrade waits for it to end. Sensitive values
    /// are write-only: compared by a keyed hash of their source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 100))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key", "category"]))]
    pub vars: Option<Vec<NoCodeVar>>,
    /// How upgrades to a new module version are confirmed.
    #[serde(default)]
    pub upgrade: UpgradeSpec,
    /// The Connection to the workspace service; defaults to the Connection named `workspaces` in
    /// this namespace, else to the ClusterConnection marked `default: true` for this service that
    /// admits this namespace and kind. Its token must be a user or team token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) deletes the workspace when this resource is deleted; `Retain` keeps it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// With `Delete`: `Safe` (default) uses safe-delete, which the service refuses while the
    /// workspace manages resources (shown as `DeletionBlocked`); `Force` deletes anyway.
    #[serde(default)]
    pub deletion_mode: DeletionMode,
}

/// A NoCodeModule in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModuleRef {
    /// Name of the NoCodeModule.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

// Execution mode of a no-code workspace. (No doc comment: it would replace the field's
// description, which says more, in `kubectl explain`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)] // a doc comment would replace the field's in `kubectl explain`
pub enum NoCodeExecutionMode {
    /// Runs on the service's workers.
    Remote,
    /// Runs on an agent pool (`agentPoolId`).
    Agent,
}

impl NoCodeExecutionMode {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Remote => "remote",
            Self::Agent => "agent",
        }
    }
}

/// How the workspace is deleted with `deletionPolicy: Delete`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionMode {
    /// Safe-delete: refused by the service while the workspace manages resources.
    #[default]
    Safe,
    /// Delete even if the workspace manages resources (they are left unmanaged).
    Force,
}

/// One workspace variable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.value) != has(self.valueFrom)").message("exactly one of value and valueFrom is required"))]
pub struct NoCodeVar {
    /// Variable name.
    #[schemars(length(min = 1, max = 256))]
    pub key: String,
    /// Literal value (an HCL literal when `hcl`). Exactly one of `value` and `valueFrom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The value from a key of a Secret in this namespace (watched: a change is written at
    /// once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<VarValueFrom>,
    /// `terraform` (default) or `env`.
    #[serde(default)]
    pub category: VarCategory,
    /// Parse the value as HCL (no effect on `env` variables).
    #[serde(default)]
    pub hcl: bool,
    /// Write-only in the service: compared by a keyed hash of its source, never read back.
    #[serde(default)]
    pub sensitive: bool,
    /// Description of the variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub description: Option<String>,
}

/// Where a variable's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VarValueFrom {
    /// A key of a Secret in this namespace.
    pub secret_key_ref: SecretKeyRef,
}

/// Variable category.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VarCategory {
    /// An input variable of the module.
    #[default]
    Terraform,
    /// An environment variable of the runs.
    Env,
}

impl VarCategory {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Terraform => "terraform",
            Self::Env => "env",
        }
    }
}

/// Upgrade settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeSpec {
    /// `Manual` (default): an upgrade's plan waits until `approvedVersion` names the version it
    /// moves to; `Auto`: the plan is confirmed as soon as it can be.
    #[serde(default)]
    pub policy: UpgradePolicy,
    /// With `Manual`, the module version whose upgrade plan may be applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub approved_version: Option<String>,
}

/// Upgrade policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpgradePolicy {
    /// Confirm only the version in `approvedVersion`.
    #[default]
    Manual,
    /// Confirm every upgrade plan.
    Auto,
}

/// Observed state of a NoCodeWorkspace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NoCodeWorkspaceStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// The workspace's id (`ws-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// The no-code module it was provisioned from (`nocode-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub no_code_module_id: Option<String>,
    /// Organization of the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// The module version the workspace runs (from its `source-module-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_version: Option<String>,
    /// Keyed hash (HMAC-SHA256 with an operator-held key) of the sensitive variables' values
    /// last sent: they are write-only, so a rotated Secret is found by this hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vars_hash: Option<String>,
    /// The latest upgrade started by Quartet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeStatus>,
}

/// An upgrade of the workspace to a new module version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStatus {
    /// The upgrade's id (its run, `run-…`).
    #[serde(default)]
    pub id: String,
    /// The run's status (`planned`, `cost_estimated`, `applied`, `planned_and_finished`, ...).
    #[serde(default)]
    pub status: String,
    /// Where to read the upgrade plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_url: Option<String>,
    /// The module version before the upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// The module version the upgrade moves to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_version: Option<String>,
    /// Whether Quartet confirmed the upgrade (sent at most once).
    #[serde(default)]
    pub confirmed: bool,
}
