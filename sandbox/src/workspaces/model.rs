//! The stored state of the emulated workspace service. Everything is plain data (serde) so the
//! whole state can be snapshotted to `--state-dir` and loaded back.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub type Time = DateTime<Utc>;

/// A random identifier with the service's prefix, e.g. `ws-` followed by 16 characters.
pub fn new_id(prefix: &str) -> String {
    const CHARS: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789";
    let mut rng = rand::rng();
    let tail: String = (0..16)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect();
    format!("{prefix}{tail}")
}

/// A token string shaped like the real service's (`<14 chars>.atlasv1.<64 chars>`).
pub fn new_token_secret() -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let mut part = |n: usize| -> String {
        (0..n)
            .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
            .collect()
    };
    let a = part(14);
    let b = part(64);
    format!("{a}.atlasv1.{b}")
}

/// Workspace access levels, ordered: each level includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    None,
    Read,
    Plan,
    Write,
    Admin,
}

impl Access {
    /// Workspace access levels of the real service (`read`, `plan`, `write`, `admin`) and the
    /// project levels (`read`, `write`, `maintain`, `admin`; maintain and admin give workspace
    /// admin on the project's workspaces).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "read" => Some(Self::Read),
            "plan" => Some(Self::Plan),
            "write" => Some(Self::Write),
            "admin" | "maintain" => Some(Self::Admin),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Organization {
    pub name: String,
    pub external_id: String,
    pub email: String,
    pub created_at: Time,
    pub owners_team: String,
    pub default_project: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub username: String,
    pub email: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Team {
    pub id: String,
    pub organization: String,
    pub name: String,
    pub owners: bool,
    /// Organization-level "Manage Workspaces": admin on every workspace, may create workspaces
    /// and replace remote state consumers.
    pub manage_workspaces: bool,
    pub manage_projects: bool,
    pub members: Vec<String>,
    pub workspace_access: BTreeMap<String, Access>,
    pub project_access: BTreeMap<String, Access>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Principal {
    User { user: String },
    Team { team: String },
    Organization { organization: String },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Token {
    pub id: String,
    pub principal: Principal,
    pub created_at: Time,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub expired_at: Option<Time>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Project {
    pub id: String,
    pub organization: String,
    pub name: String,
    pub created_at: Time,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VcsRepo {
    pub oauth_token_id: String,
    pub identifier: String,
    pub branch: String,
    pub ingress_submodules: bool,
    pub tags_regex: Option<String>,
    /// A GitHub App installation (`ghain-…`), the alternative to `oauth-token-id`.
    #[serde(default)]
    pub github_app_installation_id: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Var {
    pub id: String,
    pub key: String,
    pub value: String,
    pub description: String,
    pub category: String,
    pub hcl: bool,
    pub sensitive: bool,
}

/// Where a workspace created from a no-code module came from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NoCodeOrigin {
    pub no_code_module: String,
    /// The workspace's `source-module-id`: `private/<org>/<name>/<provider>/<version>` (the
    /// form the real service shows; kept current on upgrade by the no-code handlers).
    pub registry_module: String,
    /// Module version the workspace is provisioned with.
    pub version: String,
    pub version_id: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Workspace {
    pub id: String,
    pub organization: String,
    pub project: String,
    pub name: String,
    pub description: Option<String>,
    pub agent_pool_id: Option<String>,
    pub allow_destroy_plan: bool,
    pub auto_apply: bool,
    pub execution_mode: String,
    pub file_triggers_enabled: bool,
    pub global_remote_state: bool,
    pub queue_all_runs: bool,
    pub source_name: Option<String>,
    pub source_url: Option<String>,
    pub speculative_enabled: bool,
    pub engine_version: String,
    pub trigger_prefixes: Vec<String>,
    pub trigger_patterns: Vec<String>,
    pub vcs_repo: Option<VcsRepo>,
    pub working_directory: String,
    pub drift_detection: bool,
    pub structured_run_output_enabled: bool,
    pub created_at: Time,
    pub updated_at: Time,
    pub latest_change_at: Time,
    /// Manually locked by a user or team (locks by runs are derived from the runs).
    pub manual_lock: Option<String>,
    pub remote_state_consumers: Vec<String>,
    pub tags: Vec<String>,
    pub vars: Vec<Var>,
    pub current_configuration_version: Option<String>,
    pub no_code: Option<NoCodeOrigin>,
    pub no_code_upgrade_available: bool,
    pub resource_count: u64,
    /// Attributes added by the issue-22 corrections (kept together; older snapshots load them
    /// with their defaults).
    #[serde(default)]
    pub extra: WorkspaceExtra,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tag {
    pub id: String,
    pub organization: String,
    pub name: String,
    pub created_at: Time,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigurationVersion {
    pub id: String,
    pub workspace: String,
    pub source: String,
    pub speculative: bool,
    pub auto_queue_runs: bool,
    pub status: String,
    pub created_at: Time,
}

/// What the admin API scripted for the next runs of a workspace.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Script {
    /// `changes` (default), `no-changes` or `errored`.
    #[serde(default)]
    pub plan: Option<String>,
    /// `ok` (default) or `errored`.
    #[serde(default)]
    pub apply: Option<String>,
    /// `ok` (default) or `ignore`: the run does not react to a non-forceful cancel.
    #[serde(default)]
    pub cancel: Option<String>,
    /// How many runs this applies to; 0 means every later run.
    #[serde(default = "one")]
    pub count: u32,
}

fn one() -> u32 {
    1
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunVariable {
    pub key: String,
    pub value: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    pub id: String,
    pub workspace: String,
    pub configuration_version: String,
    pub plan_id: String,
    pub apply_id: String,
    pub created_by: Option<String>,
    pub status: String,
    pub status_timestamps: BTreeMap<String, Time>,
    pub created_at: Time,
    /// When the backend may move the run to its next state.
    pub next_step_at: Time,
    pub auto_apply: bool,
    pub is_destroy: bool,
    pub message: String,
    pub refresh: bool,
    pub refresh_only: bool,
    pub replace_addrs: Vec<String>,
    pub target_addrs: Vec<String>,
    pub variables: Vec<RunVariable>,
    pub plan_only: bool,
    pub engine_version: String,
    pub allow_empty_apply: bool,
    pub source: String,
    pub trigger_reason: String,
    pub has_changes: bool,
    pub script: Script,
    pub canceled_at: Option<Time>,
    pub cancel_requested_at: Option<Time>,
    pub force_cancel_available_at: Option<Time>,
    /// Set on no-code upgrade runs: the module version to record once applied.
    pub upgrade_to: Option<(String, String)>,
    /// Set once a no-code upgrade plan was confirmed.
    #[serde(default)]
    pub upgrade_applied: bool,
    /// The phases after the plan this run goes through (taken from the admin switches when
    /// the run is created).
    #[serde(default)]
    pub phases: RunPhases,
    pub comments: Vec<String>,
}

impl Run {
    pub fn is_final(&self) -> bool {
        is_final_status(&self.status)
    }
}

pub fn is_final_status(s: &str) -> bool {
    matches!(
        s,
        "planned_and_finished"
            | "applied"
            | "discarded"
            | "errored"
            | "canceled"
            | "force_canceled"
            | "policy_soft_failed"
    )
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModuleVariable {
    pub name: String,
    #[serde(rename = "type", default = "string_type")]
    pub var_type: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub default: Option<Value>,
    #[serde(default)]
    pub description: String,
}

fn string_type() -> String {
    "string".into()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModuleVersion {
    pub version: String,
    #[serde(default)]
    pub variables: Vec<ModuleVariable>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RegistryModule {
    pub id: String,
    pub organization: String,
    pub namespace: String,
    pub name: String,
    pub provider: String,
    pub no_code_ready: bool,
    pub versions: Vec<ModuleVersion>,
    pub created_at: Time,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariableOptions {
    pub id: String,
    pub variable_name: String,
    pub variable_type: String,
    pub options: Vec<Value>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NoCodeModule {
    pub id: String,
    pub organization: String,
    pub registry_module: String,
    pub enabled: bool,
    pub version_pin: String,
    pub variable_options: Vec<VariableOptions>,
    /// `nocodever-` identifiers of the module versions workspaces were provisioned with.
    #[serde(default)]
    pub version_ids: BTreeMap<String, String>,
}

/// Phases a run passes through after its plan, switched on per workspace or per organization
/// through the admin API (`/_sandbox/workspaces/run-phases`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPhases {
    /// `cost_estimating` → `cost_estimated`.
    #[serde(default)]
    pub cost_estimation: bool,
    /// `policy_checking` → `policy_checked`.
    #[serde(default)]
    pub policy_check: bool,
    /// `post_plan_running` → `post_plan_completed`.
    #[serde(default)]
    pub post_plan: bool,
}

/// Timing of the run backend, set through the admin API.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// Time a run spends in each state before the backend moves it on.
    pub step_ms: u64,
    /// Cool-off after a non-forceful cancel before force-cancel is allowed.
    pub force_cancel_cooloff_ms: u64,
    /// Engine releases the service offers; the newest is the default.
    pub engine_versions: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            step_ms: 200,
            force_cancel_cooloff_ms: 1000,
            engine_versions: [
                "1.5.7", "1.6.6", "1.7.5", "1.8.5", "1.9.8", "1.10.5", "1.11.4",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub organizations: BTreeMap<String, Organization>,
    pub users: BTreeMap<String, User>,
    pub teams: BTreeMap<String, Team>,
    /// Keyed by the token secret.
    pub tokens: BTreeMap<String, Token>,
    pub projects: BTreeMap<String, Project>,
    pub workspaces: BTreeMap<String, Workspace>,
    pub tags: BTreeMap<String, Tag>,
    pub configuration_versions: BTreeMap<String, ConfigurationVersion>,
    pub runs: BTreeMap<String, Run>,
    /// Per workspace, the scripts for its next runs.
    pub scripts: BTreeMap<String, Vec<Script>>,
    pub agent_pools: BTreeMap<String, String>,
    pub oauth_tokens: BTreeMap<String, String>,
    pub registry_modules: BTreeMap<String, RegistryModule>,
    pub no_code_modules: BTreeMap<String, NoCodeModule>,
    pub settings: Settings,
    /// Identifiers of team access grants, keyed `team-…|ws-…` (`tws-…`) and `team-…|prj-…`
    /// (`tprj-…`).
    #[serde(default)]
    pub access_ids: BTreeMap<String, String>,
    /// Creation order counter: lists are ordered by it where the real service orders by age.
    pub seq: u64,
    /// Run phases switched on, keyed by workspace id (`ws-…`) or organization name; a
    /// workspace's own entry wins over its organization's.
    #[serde(default)]
    pub run_phases: BTreeMap<String, RunPhases>,
    /// Per organization, the defaults workspaces inherit (`default-execution-mode`,
    /// `default-agent-pool`); absent means `remote` and no pool.
    #[serde(default)]
    pub org_defaults: BTreeMap<String, OrgDefaults>,
}

/// What an organization's workspaces inherit unless their `setting-overwrites` say otherwise.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OrgDefaults {
    /// `remote` (when empty), `local` or `agent`.
    #[serde(default)]
    pub execution_mode: String,
    #[serde(default)]
    pub agent_pool_id: Option<String>,
}

/// Workspace attributes the real service stores beyond the spec's table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkspaceExtra {
    /// `setting-overwrites.execution-mode`: the workspace sets its own execution mode (false:
    /// it follows the organization's default).
    #[serde(default = "yes")]
    pub overwrites_execution_mode: bool,
    /// `setting-overwrites.agent-pool`.
    #[serde(default = "yes")]
    pub overwrites_agent_pool: bool,
    #[serde(default)]
    pub auto_apply_run_trigger: bool,
    #[serde(default)]
    pub auto_destroy_at: Option<String>,
    #[serde(default)]
    pub auto_destroy_activity_duration: Option<String>,
    #[serde(default)]
    pub project_remote_state: bool,
    #[serde(default = "yes")]
    pub inherits_project_auto_destroy: bool,
    /// Key/value tags (`tag-bindings`), in insertion order.
    #[serde(default)]
    pub tag_bindings: Vec<(String, String)>,
    /// Identifiers of the tag bindings (`tb-…`), by key.
    #[serde(default)]
    pub tag_binding_ids: BTreeMap<String, String>,
    /// Reason given when the workspace was locked by hand.
    #[serde(default)]
    pub locked_reason: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for WorkspaceExtra {
    fn default() -> Self {
        Self {
            overwrites_execution_mode: true,
            overwrites_agent_pool: true,
            auto_apply_run_trigger: false,
            auto_destroy_at: None,
            auto_destroy_activity_duration: None,
            project_remote_state: false,
            inherits_project_auto_destroy: true,
            tag_bindings: Vec::new(),
            tag_binding_ids: BTreeMap::new(),
            locked_reason: None,
        }
    }
}
