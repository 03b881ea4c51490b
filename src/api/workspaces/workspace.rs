//! `Workspace`: a workspace of the infrastructure-workspace service (spec B §2.1–2.3, §4.1–4.3)
//! with its settings, tags, tag bindings, remote state consumers and variables.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus, SecretKeyRef};

/// A workspace of the infrastructure-workspace service, kept equal to spec. Only the settings
/// the spec sets are managed: an attribute left out is neither sent nor compared, so values set
/// elsewhere (UI, another tool) stay as they are.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "workspaces.quartet.dev",
    version = "v1alpha1",
    kind = "Workspace",
    plural = "workspaces",
    doc = "A workspace of the infrastructure-workspace service, kept equal to spec.",
    cel,
    namespaced,
    status = "WorkspaceStatus",
    shortname = "ws",
    category = "quartet",
    printcolumn(name = "Workspace", type_ = "string", json_path = ".spec.name"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Synced", type_ = "string", json_path = ".status.conditions[?(@.type==\"Synced\")].status"),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.workspaceId"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    // metadata.name is already a DNS subdomain (lower-case letters, digits, `-`, `.`): of
    // those, only `.` and a length over 90 are not workspace names. A regex over a name the
    // API server prices at 3 MiB would cost six times as much.
    validation = Rule::new("has(self.spec.name) || (self.metadata.name.size() <= 90 && !self.metadata.name.contains('.'))").message("metadata.name is not a valid workspace name (letters, numbers, - and _ only): set spec.name"),
    validation = Rule::new("!has(self.spec.remoteStateConsumers) || self.spec.remoteStateConsumers.all(c, !has(c.name) || c.name != (has(self.spec.name) ? self.spec.name : self.metadata.name))").message("remoteStateConsumers may not include the workspace itself")
)]
#[x_kube(
    validation = Rule::new("!(has(self.executionMode) && has(self.operations))").message("operations is deprecated and may not be set together with executionMode"),
    validation = Rule::new("has(self.executionMode) && self.executionMode == 'agent' ? has(self.agentPoolId) && self.agentPoolId != '' : true").message("agentPoolId is required when executionMode is agent"),
    validation = Rule::new("!has(self.agentPoolId) || self.agentPoolId == '' || (has(self.executionMode) && self.executionMode == 'agent')").message("agentPoolId may only be set when executionMode is agent"),
    validation = Rule::new("!(has(self.triggerPrefixes) && self.triggerPrefixes.size() > 0 && has(self.triggerPatterns) && self.triggerPatterns.size() > 0)").message("triggerPrefixes and triggerPatterns are mutually exclusive"),
    validation = Rule::new("!(has(self.globalRemoteState) && self.globalRemoteState && has(self.remoteStateConsumers) && self.remoteStateConsumers.size() > 0)").message("remoteStateConsumers cannot be managed when globalRemoteState is true (every workspace may read the state)"),
    validation = Rule::new("has(self.sourceUrl) == has(oldSelf.sourceUrl) && (!has(self.sourceUrl) || self.sourceUrl == oldSelf.sourceUrl)").message("sourceUrl is set at creation only (immutable)"),
    validation = Rule::new("has(self.sourceName) == has(oldSelf.sourceName) && (!has(self.sourceName) || self.sourceName == oldSelf.sourceName)").message("sourceName is set at creation only (immutable)"),
    validation = Rule::new("has(self.organization) == has(oldSelf.organization) && (!has(self.organization) || self.organization == oldSelf.organization)").message("organization is immutable")
)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Organization of the workspace; defaults to the Connection's `spec.organization`.
    /// Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub organization: Option<String>,
    /// Name of the workspace (letters, numbers, `-`, `_`); defaults to `metadata.name`.
    /// Changing it renames the workspace (PATCH by id: the id, state and runs are kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 90), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub name: Option<String>,
    /// The workspace settings (spec B §2.1); each one is managed only when set.
    #[serde(flatten)]
    pub settings: WorkspaceSettings,
    /// Tags (lower case: the service lower-cases tag names, so upper case is refused here
    /// rather than re-added on every pass). Managed only when set; see `tagsPolicy`. At most
    /// 100 tags of at most 255 characters each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(t, t == t.lowerAscii())").message("tags must be lower case (the service lower-cases tag names)"))]
    #[schemars(
        length(max = 100),
        inner(regex(pattern = r"^[a-z0-9][a-z0-9:_-]*$"), length(max = 255))
    )]
    pub tags: Option<Vec<String>>,
    /// `Own` (default): the workspace has exactly `tags`. `Merge`: `tags` are added, tags set
    /// elsewhere are never removed.
    #[serde(default)]
    pub tags_policy: ListPolicy,
    /// Key/value tags (tag bindings); managed only when set, and then exactly these. At most
    /// 10; keys ≤ 128 and values ≤ 256 characters; no `hc:`/`hcp:` key prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 10), transform = crate::api::values_max_length::<256>)]
    #[x_kube(validation = Rule::new("self.all(k, k.size() > 0 && k.size() <= 128 && self[k].size() <= 256 && !k.lowerAscii().startsWith('hc:') && !k.lowerAscii().startsWith('hcp:'))").message("tag binding keys are 1-128 characters without an hc: or hcp: prefix; values at most 256 characters"))]
    pub tag_bindings: Option<BTreeMap<String, String>>,
    /// Workspaces of the same organization allowed to read this workspace's state (by `name`
    /// or `id`). Managed only when set, and then exactly these: added and removed one by one
    /// (POST/DELETE, which a workspace admin may call). Not with `globalRemoteState: true`;
    /// never the workspace itself. At most 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 100))]
    pub remote_state_consumers: Option<Vec<ConsumerRef>>,
    /// Workspace variables. Variables not listed are removed only with
    /// `variablesPolicy: Own`. At most 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 500))]
    pub variables: Option<Vec<Variable>>,
    /// `Merge` (default): variables not in `variables` are left alone. `Own`: they are
    /// removed.
    #[serde(default = "merge")]
    pub variables_policy: ListPolicy,
    /// `Safe` (default): delete through safe-delete, which the service refuses while the
    /// workspace manages resources (shown as `DeletionBlocked` with the service's message).
    /// `Force`: delete anyway.
    #[serde(default)]
    pub deletion_mode: DeletionMode,
    /// The Connection to the workspace service; defaults to the Connection named `workspaces` in
    /// this namespace, else to the ClusterConnection marked `default: true` for this service that
    /// admits this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the workspace when this resource is deleted; `Retain`
    /// leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

fn merge() -> ListPolicy {
    ListPolicy::Merge
}

/// The request attributes of a workspace (spec B §2.1), camelCase. Shared with the kinds that
/// manage a workspace's settings (NoCodeWorkspace). Every field is optional and managed only
/// when set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSettings {
    /// Agent pool (`apool-…`) running the workspace's runs; required with `executionMode:
    /// agent` and refused otherwise. Managed only when set. At most 64 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub agent_pool_id: Option<String>,
    /// Whether destroy plans can be queued (service default true). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_destroy_plan: Option<bool>,
    /// Apply automatically after a successful plan (service default false). Managed only when
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_apply: Option<bool>,
    /// Description. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `remote`, `local` (state storage only) or `agent`; when not set the workspace follows
    /// the organization's default. Not together with `operations`. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["remote", "local", "agent"]))]
    pub execution_mode: Option<String>,
    /// Filter VCS-triggered runs by changed files (service default true). Managed only when
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_triggers_enabled: Option<bool>,
    /// Every workspace of the organization may read this state (service default false). Not
    /// together with `remoteStateConsumers`. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_remote_state: Option<bool>,
    /// Deprecated (use `executionMode`): false means state storage only. Not together with
    /// `executionMode`. Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<bool>,
    /// Queue runs immediately after creation (service default false). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_all_runs: Option<bool>,
    /// Friendly name of the creating client (beta). Sent at creation only; immutable. At most
    /// 255 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub source_name: Option<String>,
    /// URL of the creating client (beta). Sent at creation only; immutable. At most 2048
    /// characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub source_url: Option<String>,
    /// Allow automatic speculative plans (service default true). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_enabled: Option<bool>,
    /// Engine version or constraint (e.g. `1.9.8`, `~> 1.9.0`). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub engine_version: Option<String>,
    /// Paths monitored besides the working directory (a set). Not with `triggerPatterns`.
    /// Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 1024)))]
    pub trigger_prefixes: Option<Vec<String>>,
    /// Glob patterns of monitored files (a set). Not with `triggerPrefixes`. Managed only when
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 1024)))]
    pub trigger_patterns: Option<Vec<String>>,
    /// The VCS repository. Managed only when set; removing it (once managed) removes the
    /// repository from the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcs_repo: Option<VcsRepo>,
    /// Relative path the runs execute in (default: the repository root). Managed only when
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub working_directory: Option<String>,
    /// Drift-detection assessments (remote execution only). Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_detection: Option<bool>,
    /// Project (`prj-…`) of the workspace (default: the organization's default project).
    /// Managed only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub project_id: Option<String>,
}

/// The VCS repository of a workspace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VcsRepo {
    /// VCS connection (`ot-…`). Required.
    #[schemars(length(min = 1, max = 64))]
    pub oauth_token_id: String,
    /// Repository, `:org/:repo`. Required.
    #[schemars(length(min = 1, max = 255), regex(pattern = r"^[^/]+/.+$"))]
    pub identifier: String,
    /// Branch; empty or unset means the repository's default branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub branch: Option<String>,
    /// Fetch submodules when cloning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_submodules: Option<bool>,
    /// Start runs for VCS tags matching this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub tags_regex: Option<String>,
}

/// A workspace allowed to read the state: by `name` or by `id` (exactly one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.name) != has(self.id)").message("a remote state consumer has exactly one of name or id"))]
pub struct ConsumerRef {
    /// Name of a workspace of the same organization (at most 90 characters, like every
    /// workspace name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 90))]
    pub name: Option<String>,
    /// Id (`ws-…`) of a workspace of the same organization. At most 64 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub id: Option<String>,
}

/// A workspace variable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.value) != has(self.valueFrom)").message("a variable has exactly one of value or valueFrom"))]
pub struct Variable {
    /// Name of the variable.
    #[schemars(length(min = 1, max = 128))]
    pub key: String,
    /// The value (for a sensitive value, prefer `valueFrom`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Where the value comes from: a key of a Secret in this namespace (watched: a change is
    /// sent at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<VariableSource>,
    /// `terraform` (default) or `env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["terraform", "env"]))]
    pub category: Option<String>,
    /// The value is HCL (terraform variables only).
    #[serde(default)]
    pub hcl: bool,
    /// Write-only in the service: compared by a keyed hash of its source, never read back.
    #[serde(default)]
    pub sensitive: bool,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Source of a variable's value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VariableSource {
    /// A key of a Secret in the resource's namespace.
    pub secret_key_ref: SecretKeyRef,
}

/// How a list in the spec relates to what the service has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ListPolicy {
    /// Exactly the listed items: others are removed.
    #[default]
    Own,
    /// The listed items are added or updated; others are left alone.
    Merge,
}

/// How the workspace is deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionMode {
    /// Safe-delete: refused by the service while the workspace manages resources.
    #[default]
    Safe,
    /// Delete even when the workspace manages resources.
    Force,
}

/// The latest run of the workspace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatestRun {
    /// Run id (`run-…`).
    pub id: String,
    /// The run's state, as the service names it.
    #[serde(default)]
    pub status: String,
}

/// Observed state of a Workspace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// The workspace's id (`ws-…`), also in `remoteId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// Whether the workspace is locked (by a run or a person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked: Option<bool>,
    /// Resources in the workspace's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_count: Option<u64>,
    /// The latest run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_run: Option<LatestRun>,
    /// Web address of the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether `vcsRepo` was managed (so removing it from the spec removes the repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcs_repo_managed: Option<bool>,
}

impl Workspace {
    /// The workspace's name in the service.
    pub fn workspace_name(&self) -> String {
        use kube::ResourceExt;
        self.spec.name.clone().unwrap_or_else(|| self.name_any())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(spec: serde_json::Value) -> Workspace {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "workspaces.quartet.dev/v1alpha1", "kind": "Workspace",
            "metadata": {"name": "w"}, "spec": spec
        }))
        .expect("valid shape")
    }

    #[test]
    fn mixed_case_tags_are_refused() {
        assert!(ws(serde_json::json!({"tags": ["Prod"]}))
            .validate_cel()
            .is_err());
        assert!(ws(serde_json::json!({"tags": ["prod", "team:a"]}))
            .validate_cel()
            .is_ok());
    }

    #[test]
    fn agent_pool_goes_with_agent_mode_only() {
        assert!(ws(serde_json::json!({"executionMode": "agent"}))
            .validate_cel()
            .is_err());
        assert!(
            ws(serde_json::json!({"executionMode": "remote", "agentPoolId": "apool-1"}))
                .validate_cel()
                .is_err()
        );
        assert!(
            ws(serde_json::json!({"executionMode": "agent", "agentPoolId": "apool-1"}))
                .validate_cel()
                .is_ok()
        );
        assert!(
            ws(serde_json::json!({"executionMode": "remote", "operations": true}))
                .validate_cel()
                .is_err()
        );
    }

    #[test]
    fn consumers_exclude_itself_and_global_remote_state() {
        assert!(
            ws(serde_json::json!({"remoteStateConsumers": [{"name": "w"}]}))
                .validate_cel()
                .is_err()
        );
        assert!(ws(
            serde_json::json!({"globalRemoteState": true, "remoteStateConsumers": [{"name": "x"}]})
        )
        .validate_cel()
        .is_err());
        assert!(
            ws(serde_json::json!({"remoteStateConsumers": [{"name": "x"}, {"id": "ws-1"}]}))
                .validate_cel()
                .is_ok()
        );
    }
}
