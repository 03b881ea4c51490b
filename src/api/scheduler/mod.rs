//! Kinds of the scheduler's deployments API (spec C §2.4, §4.4): `DeploymentGate`.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConnectionRef, ManagedStatus};

/// Durations are Go-style: `30s`, `5m`, `1h30m`, `1.5h`.
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$";

/// Watches the deployments of one job and drives them by policy: promotes canaries once healthy,
/// fails a deployment past its deadline (rolling back by the service's rule), marks allocation
/// health from task states, pauses and resumes, unblocks. It owns no remote object.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "scheduler.quartet.dev",
    version = "v1alpha1",
    kind = "DeploymentGate",
    plural = "deploymentgates",
    doc = "Drives the deployments of one scheduler job by policy (promotion, progress deadline, manual health, pause, unblock).",
    cel,
    namespaced,
    status = "DeploymentGateStatus",
    shortname = "dgate",
    category = "quartet",
    printcolumn(name = "Job", type_ = "string", json_path = ".spec.jobId"),
    printcolumn(
        name = "Deployment",
        type_ = "string",
        json_path = ".status.deploymentStatus"
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
    validation = Rule::new("self.jobId == oldSelf.jobId").message("jobId is immutable: create another DeploymentGate")
)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentGateSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// ID of the scheduler job whose deployments this gate drives. Immutable.
    #[schemars(length(min = 1, max = 128))]
    pub job_id: String,
    /// Scheduler namespace of the job; defaults to `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub namespace: Option<String>,
    /// Canary promotion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promote: Option<PromoteSpec>,
    /// A deployment not successful this long after it started (time spent paused does not
    /// count) is failed (`POST /v1/deployment/fail`), which rolls back when the service's rule
    /// allows; `status.revertedJobVersion` records the version. Go duration, e.g. `10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[schemars(length(max = 64))]
    pub progress_deadline: Option<String>,
    /// Allocation health for groups whose update uses manual health checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_health: Option<ManualHealthSpec>,
    /// Pause (true) or resume (false) the active deployment.
    #[serde(default)]
    pub paused: bool,
    /// A new value unblocks the job's multiregion deployment when it is blocked waiting for its
    /// peer regions, once; `status.handledUnblockRequest` records the value handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub unblock_request: Option<String>,
    /// A new value fails the job's active deployment once, now rather than at
    /// `progressDeadline` (`POST /v1/deployment/fail`); the service rolls back by its rule and
    /// `status.revertedJobVersion` records the version. `status.handledFailRequest` records the
    /// value handled. A value set while no deployment is active is recorded without failing
    /// anything, so it never fails a later deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub fail_request: Option<String>,
    /// The Connection to the scheduler; defaults to the Connection named `scheduler` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind. Its token needs `read-job`, and `submit-job` (or the fine-grained
    /// deployment capabilities) for the controls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
}

/// Canary promotion policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromoteSpec {
    /// `Auto` (default): promote once the canaries are healthy; `Manual`: never promote (a
    /// person does).
    #[serde(default)]
    pub policy: PromotePolicy,
    /// Task groups to promote; empty means every group with canaries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(inner(length(max = 256)))]
    pub groups: Vec<String>,
    /// How long the canaries must have been healthy before promotion. Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[schemars(length(max = 64))]
    pub healthy_for: Option<String>,
}

/// Who promotes canaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PromotePolicy {
    /// The gate promotes once the canaries are healthy.
    #[default]
    Auto,
    /// The gate never promotes.
    Manual,
}

/// Manual health policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManualHealthSpec {
    /// `FromTaskStates`: an allocation is healthy once all its tasks have run without failure
    /// for `healthyFor`, unhealthy when a task failed. Pending allocations get no verdict.
    #[serde(default)]
    pub policy: ManualHealthPolicy,
    /// How long every task must have been running (since its start or last restart). Go
    /// duration; default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[schemars(length(max = 64))]
    pub healthy_for: Option<String>,
}

/// How manual health is decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ManualHealthPolicy {
    /// From the tasks' states reported by the client.
    #[default]
    FromTaskStates,
}

/// Counts of one task group of the deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskGroupStatus {
    /// Whether the group's canaries were promoted.
    #[serde(default)]
    pub promoted: bool,
    /// Canaries the group asks for.
    #[serde(default)]
    pub desired_canaries: u64,
    /// Allocations the group asks for.
    #[serde(default)]
    pub desired_total: u64,
    /// Allocations placed.
    #[serde(default)]
    pub placed: u64,
    /// Allocations healthy.
    #[serde(default)]
    pub healthy: u64,
    /// Allocations unhealthy.
    #[serde(default)]
    pub unhealthy: u64,
}

/// The last control the gate sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastAction {
    /// `promote`, `fail`, `pause`, `resume`, `allocationHealth` or `unblock`.
    #[serde(rename = "type")]
    pub type_: String,
    /// When it was sent (RFC 3339).
    pub at: String,
    /// The evaluation the service created for it (empty when none).
    #[serde(default)]
    pub eval_id: String,
    /// The deployment it was sent for.
    #[serde(default)]
    pub deployment_id: String,
}

/// Observed state of a DeploymentGate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentGateStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// ID of the job's latest deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    /// Its status: `running`, `paused`, `successful`, `failed`, `cancelled`, `blocked`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_status: Option<String>,
    /// Its status description, as the service words it (informational only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_description: Option<String>,
    /// Counts per task group.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_groups: BTreeMap<String, TaskGroupStatus>,
    /// The last control sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action: Option<LastAction>,
    /// The job version a fail rolled back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_job_version: Option<u64>,
    /// The `spec.unblockRequest` value last handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_unblock_request: Option<String>,
    /// The `spec.failRequest` value last handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_fail_request: Option<String>,
    /// When the gate's progress deadline for the current deployment passes (RFC 3339); the
    /// clock stops while the deployment is paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_at: Option<String>,
    /// Seconds left on the progress deadline while the deployment is paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_remaining_seconds: Option<f64>,
    /// The `spec.progressDeadline`, in seconds, the clock above runs with: a new value moves
    /// the clock of the deployment under way by the difference (a longer deadline gives it
    /// more time at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<u64>,
}

/// Parse a Go duration (`1h30m`, `1.5s`, `300ms`).
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let mut total = 0f64;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * mult;
        rest = &rest[unit_end..];
    }
    Some(std::time::Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_duration("1h30m").unwrap().as_secs(), 5400);
        assert_eq!(parse_duration("1.5s").unwrap().as_millis(), 1500);
        assert_eq!(parse_duration("300ms").unwrap().as_millis(), 300);
        assert!(parse_duration("5 minutes").is_none());
        assert!(parse_duration("").is_none());
    }

    #[test]
    fn job_id_is_immutable() {
        let g = |job: &str| -> DeploymentGate {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "scheduler.quartet.dev/v1alpha1", "kind": "DeploymentGate",
                "metadata": {"name": "g"}, "spec": {"jobId": job}
            }))
            .expect("valid shape")
        };
        assert!(g("b").validate_cel_update(&g("a")).is_err());
        assert!(g("a").validate_cel_update(&g("a")).is_ok());
    }
}
