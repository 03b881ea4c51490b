//! The scheduler's state (jobs with their versions, deployments, allocations) and the rules that
//! move it: placement of a rolling update with canaries, allocation health, fail with rollback,
//! pause/resume, promote and unblock. Texts and descriptions are the real scheduler's (Nomad).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::acl::AclState;
use super::wire::ApiError;

pub const RUNNING: &str = "running";
pub const PAUSED: &str = "paused";
pub const FAILED: &str = "failed";
pub const SUCCESSFUL: &str = "successful";
pub const CANCELLED: &str = "cancelled";
pub const BLOCKED: &str = "blocked";

pub const DESC_RUNNING: &str = "Deployment is running";
pub const DESC_NEEDS_PROMOTION: &str = "Deployment is running but requires manual promotion";
pub const DESC_AUTO_PROMOTION: &str = "Deployment is running pending automatic promotion";
pub const DESC_PAUSED: &str = "Deployment is paused";
pub const DESC_SUCCESSFUL: &str = "Deployment completed successfully";
pub const DESC_NEWER_JOB: &str = "Cancelled due to newer version of job";
pub const DESC_FAILED_ALLOCS: &str = "Failed due to unhealthy allocations";
pub const DESC_FAILED_BY_USER: &str = "Deployment marked as failed";
pub const DESC_PROGRESS_DEADLINE: &str = "Failed due to progress deadline";
pub const DESC_BLOCKED: &str = "Deployment is complete but waiting for peer region";

/// A task group's update policy, as registered through the admin API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupSpec {
    pub name: String,
    pub count: u32,
    pub canary: u32,
    /// 0 means no limit.
    pub max_parallel: u32,
    pub auto_revert: bool,
    pub auto_promote: bool,
    /// `checks`, `task_states` or `manual`.
    pub health_check: String,
    pub progress_deadline_ns: i64,
    pub tasks: Vec<String>,
}

/// One version of a job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub namespace: String,
    pub id: String,
    pub version: u64,
    pub stable: bool,
    pub multiregion: bool,
    pub priority: u32,
    pub groups: Vec<GroupSpec>,
    pub create_index: u64,
    pub modify_index: u64,
    pub spec_modify_index: u64,
    pub submit_time_ns: i64,
}

impl Job {
    /// The job as `GET /v1/job/:id` answers it (the fields clients read).
    pub fn to_api(&self) -> Value {
        let groups: Vec<Value> = self
            .groups
            .iter()
            .map(|g| {
                json!({
                    "Name": g.name, "Count": g.count,
                    "Update": {
                        "Stagger": 30_000_000_000u64, "MaxParallel": g.max_parallel,
                        "HealthCheck": g.health_check, "MinHealthyTime": 10_000_000_000u64,
                        "HealthyDeadline": 300_000_000_000u64, "ProgressDeadline": g.progress_deadline_ns,
                        "AutoRevert": g.auto_revert, "AutoPromote": g.auto_promote, "Canary": g.canary,
                    },
                    "Tasks": g.tasks.iter().map(|t| json!({"Name": t, "Driver": "docker"})).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "ID": self.id, "Name": self.id, "Namespace": self.namespace, "Type": "service",
            "Priority": self.priority, "Region": "global", "Datacenters": ["dc1"],
            "Version": self.version, "Stable": self.stable, "Status": "running",
            "Multiregion": if self.multiregion { json!({}) } else { Value::Null },
            "TaskGroups": groups,
            "SubmitTime": self.submit_time_ns,
            "CreateIndex": self.create_index, "ModifyIndex": self.modify_index,
            "JobModifyIndex": self.spec_modify_index,
        })
    }

    /// Whether two versions differ in specification (what the rollback rule compares).
    pub fn spec_differs(&self, other: &Job) -> bool {
        self.groups != other.groups
            || self.multiregion != other.multiregion
            || self.priority != other.priority
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GroupState {
    pub auto_revert: bool,
    pub auto_promote: bool,
    pub progress_deadline_ns: i64,
    pub require_progress_by: Option<DateTime<Utc>>,
    pub promoted: bool,
    pub placed_canaries: Vec<String>,
    pub desired_canaries: u32,
    pub desired_total: u32,
    pub placed_allocs: u32,
    pub healthy_allocs: u32,
    pub unhealthy_allocs: u32,
    pub max_parallel: u32,
    pub health_check: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Deployment {
    pub id: String,
    pub namespace: String,
    pub job_id: String,
    pub job_version: u64,
    pub job_modify_index: u64,
    pub job_spec_modify_index: u64,
    pub job_create_index: u64,
    pub multiregion: bool,
    pub groups: BTreeMap<String, GroupState>,
    pub status: String,
    pub description: String,
    pub priority: u32,
    pub create_index: u64,
    pub modify_index: u64,
    pub create_time_ns: i64,
    pub modify_time_ns: i64,
}

impl Deployment {
    /// Non-terminal statuses (Nomad's `Deployment.Active`).
    pub fn active(&self) -> bool {
        matches!(
            self.status.as_str(),
            RUNNING | PAUSED | BLOCKED | "unblocking" | "pending" | "initializing"
        )
    }

    fn requires_promotion(&self) -> bool {
        self.groups
            .values()
            .any(|g| g.desired_canaries > 0 && !g.promoted)
    }

    fn running_description(&self) -> &'static str {
        let needing: Vec<&GroupState> = self
            .groups
            .values()
            .filter(|g| g.desired_canaries > 0 && !g.promoted)
            .collect();
        if needing.is_empty() {
            DESC_RUNNING
        } else if needing.iter().all(|g| g.auto_promote) {
            DESC_AUTO_PROMOTION
        } else {
            DESC_NEEDS_PROMOTION
        }
    }

    pub fn to_api(&self) -> Value {
        let groups: serde_json::Map<String, Value> = self
            .groups
            .iter()
            .map(|(name, g)| {
                let by = g
                    .require_progress_by
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
                    .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_string());
                (
                    name.clone(),
                    json!({
                        "AutoRevert": g.auto_revert,
                        "AutoPromote": g.auto_promote,
                        "ProgressDeadline": g.progress_deadline_ns,
                        "RequireProgressBy": by,
                        "Promoted": g.promoted,
                        "PlacedCanaries": if g.placed_canaries.is_empty() { Value::Null } else { json!(g.placed_canaries) },
                        "DesiredCanaries": g.desired_canaries,
                        "DesiredTotal": g.desired_total,
                        "PlacedAllocs": g.placed_allocs,
                        "HealthyAllocs": g.healthy_allocs,
                        "UnhealthyAllocs": g.unhealthy_allocs,
                    }),
                )
            })
            .collect();
        json!({
            "ID": self.id,
            "Namespace": self.namespace,
            "JobID": self.job_id,
            "JobVersion": self.job_version,
            "JobModifyIndex": self.job_modify_index,
            "JobSpecModifyIndex": self.job_spec_modify_index,
            "JobCreateIndex": self.job_create_index,
            "IsMultiregion": self.multiregion,
            "TaskGroups": groups,
            "Status": self.status,
            "StatusDescription": self.description,
            "EvalPriority": self.priority,
            "CreateIndex": self.create_index,
            "ModifyIndex": self.modify_index,
            "CreateTime": self.create_time_ns,
            "ModifyTime": self.modify_time_ns,
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Alloc {
    pub id: String,
    pub eval_id: String,
    pub name: String,
    pub namespace: String,
    pub node_id: String,
    pub job_id: String,
    pub job_version: u64,
    pub task_group: String,
    pub deployment_id: String,
    pub canary: bool,
    pub healthy: Option<bool>,
    pub health_time: Option<DateTime<Utc>>,
    pub health_modify_index: u64,
    pub tasks: Vec<String>,
    pub create_index: u64,
    pub modify_index: u64,
    pub create_time_ns: i64,
    pub modify_time_ns: i64,
    /// The client's view: `None` until the client reports task states (the allocation is
    /// `pending` with `TaskStates: null`, as a freshly placed real allocation is).
    #[serde(default)]
    pub task_states: Option<BTreeMap<String, TaskState>>,
}

/// One task's state as the client reports it (`pending`, `running`, `dead`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskState {
    pub state: String,
    pub failed: bool,
    pub restarts: u64,
    pub last_restart: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub events: Vec<(String, i64, String)>,
}

fn go_time(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_string())
}

/// The client status of an allocation from its task states (the real client's
/// `getClientStatus`): any failed task → failed, else any running → running, else any pending
/// → pending, else complete.
pub fn client_status(states: Option<&BTreeMap<String, TaskState>>) -> (&'static str, &'static str) {
    let Some(states) = states else {
        return ("pending", "");
    };
    let has = |st: &str, failed: bool| {
        states
            .values()
            .any(|t| t.state == st && (st != "dead" || t.failed == failed))
    };
    if has("dead", true) {
        ("failed", "Failed tasks")
    } else if has("running", false) {
        ("running", "Tasks are running")
    } else if has("pending", false) {
        ("pending", "No tasks have started")
    } else {
        ("complete", "All tasks have completed")
    }
}

fn task_event(kind: &str, time_ns: i64, message: &str) -> Value {
    json!({
        "Type": kind, "Time": time_ns, "Message": message, "DisplayMessage": message,
        "Details": {}, "FailsTask": false, "RestartReason": "", "SetupError": "",
        "DriverError": "", "ExitCode": 0, "Signal": 0, "KillTimeout": 0, "KillError": "",
        "KillReason": "", "StartDelay": 0, "DownloadError": "", "ValidationError": "",
        "DiskLimit": 0, "FailedSibling": "", "VaultError": "", "TaskSignalReason": "",
        "TaskSignal": "", "DriverMessage": "", "GenericSource": "",
    })
}

impl Alloc {
    /// The allocation list stub of the real scheduler.
    pub fn to_api(&self) -> Value {
        // A placed allocation has `TaskStates: null` until its client reports (real
        // allocations are born `pending`).
        let states: Value = match &self.task_states {
            None => Value::Null,
            Some(states) => Value::Object(
                states
                    .iter()
                    .map(|(name, t)| {
                        (
                            name.clone(),
                            json!({
                                "State": t.state, "Failed": t.failed, "Restarts": t.restarts,
                                // time.Time fields: Go encodes the zero value, never null.
                                "LastRestart": go_time(t.last_restart),
                                "StartedAt": go_time(t.started_at),
                                "FinishedAt": go_time(t.finished_at),
                                "Events": t.events.iter().map(|(k, at, m)| task_event(k, *at, m)).collect::<Vec<_>>(),
                                "TaskHandle": null,
                            }),
                        )
                    })
                    .collect(),
            ),
        };
        let (client_status, client_description) = client_status(self.task_states.as_ref());
        let dstatus = json!({
            "Healthy": self.healthy,
            "Timestamp": self.health_time.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
                .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_string()),
            "Canary": self.canary,
            "ModifyIndex": self.health_modify_index,
        });
        // The scheduler sets a deployment status only on canaries at placement; other
        // allocations get one when their health is first reported.
        let dstatus = if self.canary || self.healthy.is_some() {
            dstatus
        } else {
            Value::Null
        };
        json!({
            "ID": self.id,
            "EvalID": self.eval_id,
            "Name": self.name,
            "Namespace": self.namespace,
            "NodeID": self.node_id,
            "NodeName": "sandbox-node",
            "JobID": self.job_id,
            "JobType": "service",
            "JobVersion": self.job_version,
            "TaskGroup": self.task_group,
            "AllocatedResources": null,
            "DesiredStatus": "run",
            "DesiredDescription": "",
            "ClientStatus": client_status,
            "ClientDescription": client_description,
            "DesiredTransition": {"Migrate": null, "Reschedule": null, "ForceReschedule": null, "NoShutdownDelay": null},
            "TaskStates": states,
            "DeploymentStatus": dstatus,
            "FollowupEvalID": "",
            "NextAllocation": "",
            "RescheduleTracker": null,
            "PreemptedAllocations": null,
            "PreemptedByAllocation": "",
            "CreateIndex": self.create_index,
            "ModifyIndex": self.modify_index,
            "CreateTime": self.create_time_ns,
            "ModifyTime": self.modify_time_ns,
        })
    }
}

/// The result of a control call (Nomad's `DeploymentUpdateResponse`).
#[derive(Debug, Clone, Default)]
pub struct ControlResult {
    pub eval_id: String,
    pub eval_create_index: u64,
    pub deployment_modify_index: u64,
    pub index: u64,
    pub reverted_job_version: Option<u64>,
}

impl ControlResult {
    pub fn to_api(&self) -> Value {
        json!({
            "EvalID": self.eval_id,
            "EvalCreateIndex": self.eval_create_index,
            "DeploymentModifyIndex": self.deployment_modify_index,
            "RevertedJobVersion": self.reverted_job_version,
            "Index": self.index,
        })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub index: u64,
    pub jobs: Vec<Job>,
    pub deployments: BTreeMap<String, Deployment>,
    pub allocs: BTreeMap<String, Alloc>,
    pub deployment_table_index: u64,
    pub alloc_table_index: u64,
    #[serde(default)]
    pub acl: AclState,
    /// A fixed node all allocations are placed on.
    pub node_id: String,
    /// Evaluations handed out (control answers, placements), by ID: see `evals.rs`.
    #[serde(default)]
    pub evals: BTreeMap<String, super::evals::Eval>,
}

fn now_ns() -> i64 {
    Utc::now().timestamp_nanos_opt().unwrap_or_default()
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Registration of a job version through the admin API.
#[derive(Clone, Debug)]
pub struct JobRegistration {
    pub namespace: String,
    pub id: String,
    pub priority: u32,
    pub multiregion: bool,
    pub stable: bool,
    pub groups: Vec<GroupSpec>,
}

impl State {
    pub fn new() -> Self {
        Self {
            node_id: new_id(),
            ..Default::default()
        }
    }

    fn bump(&mut self) -> u64 {
        self.index += 1;
        self.index
    }

    pub fn latest_job(&self, ns: &str, id: &str) -> Option<&Job> {
        self.jobs
            .iter()
            .filter(|j| j.namespace == ns && j.id == id)
            .max_by_key(|j| j.version)
    }

    fn job_version(&self, ns: &str, id: &str, version: u64) -> Option<&Job> {
        self.jobs
            .iter()
            .find(|j| j.namespace == ns && j.id == id && j.version == version)
    }

    fn latest_stable(&self, ns: &str, id: &str) -> Option<&Job> {
        self.jobs
            .iter()
            .filter(|j| j.namespace == ns && j.id == id && j.stable)
            .max_by_key(|j| j.version)
    }

    /// Upsert a job version. Returns the version.
    fn upsert_job(&mut self, reg: &JobRegistration, index: u64) -> u64 {
        let prev = self.latest_job(&reg.namespace, &reg.id).cloned();
        let version = prev.as_ref().map(|p| p.version + 1).unwrap_or(0);
        let create_index = prev.as_ref().map(|p| p.create_index).unwrap_or(index);
        self.jobs.push(Job {
            namespace: reg.namespace.clone(),
            id: reg.id.clone(),
            version,
            stable: reg.stable,
            multiregion: reg.multiregion,
            priority: reg.priority,
            groups: reg.groups.clone(),
            create_index,
            modify_index: index,
            spec_modify_index: index,
            submit_time_ns: now_ns(),
        });
        version
    }

    /// Register a new version of a job: cancels the job's active deployment, creates a
    /// deployment for the new version and places its first allocations (canaries when the
    /// job already had a version and the group asks for them).
    pub fn register_job(&mut self, reg: JobRegistration) -> (u64, String) {
        let index = self.bump();
        self.register_job_at(reg, index)
    }

    /// Register a job version at `index` (also used for the version a rollback submits).
    fn register_job_at(&mut self, reg: JobRegistration, index: u64) -> (u64, String) {
        let had_previous = self.latest_job(&reg.namespace, &reg.id).is_some();
        let version = self.upsert_job(&reg, index);
        let now = now_ns();
        for d in self.deployments.values_mut() {
            if d.namespace == reg.namespace && d.job_id == reg.id && d.active() {
                d.status = CANCELLED.into();
                d.description = DESC_NEWER_JOB.into();
                d.modify_index = index;
                d.modify_time_ns = now;
            }
        }
        let job = self
            .job_version(&reg.namespace, &reg.id, version)
            .cloned()
            .expect("just inserted");
        let mut groups = BTreeMap::new();
        for g in &job.groups {
            groups.insert(
                g.name.clone(),
                GroupState {
                    auto_revert: g.auto_revert,
                    auto_promote: g.auto_promote,
                    progress_deadline_ns: g.progress_deadline_ns,
                    require_progress_by: None,
                    promoted: false,
                    placed_canaries: Vec::new(),
                    desired_canaries: if had_previous { g.canary } else { 0 },
                    desired_total: g.count,
                    placed_allocs: 0,
                    healthy_allocs: 0,
                    unhealthy_allocs: 0,
                    max_parallel: g.max_parallel,
                    health_check: g.health_check.clone(),
                },
            );
        }
        let mut d = Deployment {
            id: new_id(),
            namespace: job.namespace.clone(),
            job_id: job.id.clone(),
            job_version: job.version,
            job_modify_index: job.modify_index,
            job_spec_modify_index: job.spec_modify_index,
            job_create_index: job.create_index,
            multiregion: job.multiregion,
            groups,
            status: RUNNING.into(),
            description: String::new(),
            priority: job.priority,
            create_index: index,
            modify_index: index,
            create_time_ns: now,
            modify_time_ns: now,
        };
        d.description = d.running_description().into();
        let id = d.id.clone();
        self.deployments.insert(id.clone(), d);
        self.deployment_table_index = index;
        self.progress(&id, index);
        (version, id)
    }

    fn place(&mut self, dep_id: &str, group: &str, canary: bool, index: u64) {
        let Some(d) = self.deployments.get(dep_id) else {
            return;
        };
        let Some(job) = self.job_version(&d.namespace, &d.job_id, d.job_version) else {
            return;
        };
        let tasks = job
            .groups
            .iter()
            .find(|g| g.name == group)
            .map(|g| g.tasks.clone())
            .unwrap_or_else(|| vec![group.to_string()]);
        let ordinal = self
            .allocs
            .values()
            .filter(|a| a.deployment_id == dep_id && a.task_group == group)
            .count();
        let now = now_ns();
        let alloc = Alloc {
            id: new_id(),
            eval_id: new_id(),
            name: format!("{}.{}[{}]", d.job_id, group, ordinal),
            namespace: d.namespace.clone(),
            node_id: self.node_id.clone(),
            job_id: d.job_id.clone(),
            job_version: d.job_version,
            task_group: group.to_string(),
            deployment_id: dep_id.to_string(),
            canary,
            healthy: None,
            health_time: None,
            health_modify_index: 0,
            tasks,
            create_index: index,
            modify_index: index,
            create_time_ns: now,
            modify_time_ns: now,
            task_states: None,
        };
        let alloc_id = alloc.id.clone();
        self.allocs.insert(alloc_id.clone(), alloc);
        self.alloc_table_index = index;
        if let Some(d) = self.deployments.get_mut(dep_id) {
            if let Some(g) = d.groups.get_mut(group) {
                g.placed_allocs += 1;
                if canary {
                    g.placed_canaries.push(alloc_id);
                }
                if g.progress_deadline_ns > 0 {
                    g.require_progress_by =
                        Some(Utc::now() + chrono::Duration::nanoseconds(g.progress_deadline_ns));
                }
            }
            d.modify_index = index;
            d.modify_time_ns = now;
        }
    }

    /// Move a running deployment along: place canaries, then (once promoted, or without
    /// canaries) more allocations within max_parallel, auto-promote when allowed, and finish
    /// (successful, or blocked for a multiregion job) when every group is healthy.
    pub fn progress(&mut self, dep_id: &str, index: u64) {
        let Some(d) = self.deployments.get(dep_id).cloned() else {
            return;
        };
        if d.status != RUNNING {
            return;
        }
        for (name, g) in &d.groups {
            if g.desired_canaries > 0 && !g.promoted {
                for _ in g.placed_canaries.len() as u32..g.desired_canaries {
                    self.place(dep_id, name, true, index);
                }
                continue;
            }
            let mut placed = g.placed_allocs;
            let mut in_flight = g
                .placed_allocs
                .saturating_sub(g.healthy_allocs + g.unhealthy_allocs);
            while placed < g.desired_total && (g.max_parallel == 0 || in_flight < g.max_parallel) {
                self.place(dep_id, name, false, index);
                placed += 1;
                in_flight += 1;
            }
        }
        // Automatic promotion: every group with canaries auto-promotes and all are healthy.
        if let Some(d) = self.deployments.get(dep_id).cloned() {
            let canary_groups: Vec<&GroupState> = d
                .groups
                .values()
                .filter(|g| g.desired_canaries > 0)
                .collect();
            if d.requires_promotion()
                && canary_groups
                    .iter()
                    .all(|g| g.auto_promote && g.healthy_allocs >= g.desired_canaries)
            {
                let _ = self.promote_impl(dep_id, true, &[], index);
                return;
            }
        }
        let Some(d) = self.deployments.get_mut(dep_id) else {
            return;
        };
        let done = d.groups.values().all(|g| {
            (g.desired_canaries == 0 || g.promoted) && g.healthy_allocs >= g.desired_total
        });
        if done {
            let (status, desc) = if d.multiregion {
                (BLOCKED, DESC_BLOCKED)
            } else {
                (SUCCESSFUL, DESC_SUCCESSFUL)
            };
            d.status = status.into();
            d.description = desc.into();
            d.modify_index = index;
            d.modify_time_ns = now_ns();
            self.deployment_table_index = index;
            if status == SUCCESSFUL {
                self.mark_stable(dep_id);
            }
        }
    }

    fn mark_stable(&mut self, dep_id: &str) {
        let Some(d) = self.deployments.get(dep_id) else {
            return;
        };
        let (ns, id, v) = (d.namespace.clone(), d.job_id.clone(), d.job_version);
        if let Some(j) = self
            .jobs
            .iter_mut()
            .find(|j| j.namespace == ns && j.id == id && j.version == v)
        {
            j.stable = true;
        }
    }

    /// Look a deployment up by full UUID, with go-memdb's checks and texts.
    pub fn lookup(&self, id: &str) -> Result<Option<&Deployment>, ApiError> {
        super::wire::check_uuid_index(id, true).map_err(|e| {
            ApiError::internal(format!("deployment lookup failed: index error: {e}"))
        })?;
        Ok(self.deployments.get(&id.to_ascii_lowercase()))
    }

    /// Set the health of one allocation (client-reported or through allocation-health) and
    /// update the deployment's counters. Errors use the real state store's texts.
    fn set_alloc_health(
        &mut self,
        dep_id: &str,
        alloc_id: &str,
        healthy: bool,
        index: u64,
    ) -> Result<(), ApiError> {
        let alloc = self
            .allocs
            .get_mut(alloc_id)
            .ok_or_else(|| ApiError::internal(format!("unknown alloc {alloc_id:?}")))?;
        if alloc.deployment_id != dep_id {
            return Err(ApiError::internal(format!(
                "alloc {alloc_id:?} is not part of deployment {dep_id:?}"
            )));
        }
        let before = alloc.healthy;
        alloc.healthy = Some(healthy);
        alloc.health_time = Some(Utc::now());
        alloc.health_modify_index = index;
        alloc.modify_index = index;
        alloc.modify_time_ns = now_ns();
        let group = alloc.task_group.clone();
        self.alloc_table_index = index;
        if let Some(d) = self.deployments.get_mut(dep_id) {
            if let Some(g) = d.groups.get_mut(&group) {
                match before {
                    Some(true) => g.healthy_allocs = g.healthy_allocs.saturating_sub(1),
                    Some(false) => g.unhealthy_allocs = g.unhealthy_allocs.saturating_sub(1),
                    None => {}
                }
                if healthy {
                    g.healthy_allocs += 1;
                    // Progress: the deadline restarts from the healthy allocation.
                    if g.progress_deadline_ns > 0 {
                        g.require_progress_by = Some(
                            Utc::now() + chrono::Duration::nanoseconds(g.progress_deadline_ns),
                        );
                    }
                } else {
                    g.unhealthy_allocs += 1;
                }
            }
            d.modify_index = index;
            d.modify_time_ns = now_ns();
        }
        self.deployment_table_index = index;
        Ok(())
    }

    /// Fail a deployment, rolling back to the latest stable job version when `rollback` and that
    /// version's specification differs from the deployment's job. Returns the reverted version.
    fn fail_impl(
        &mut self,
        dep_id: &str,
        base: &str,
        rollback: bool,
        say_no_target: bool,
        index: u64,
    ) -> Option<u64> {
        let d = self.deployments.get(dep_id)?.clone();
        let mut desc = base.to_string();
        let mut reverted = None;
        let mut rollback_job = None;
        if rollback {
            let current = self
                .job_version(&d.namespace, &d.job_id, d.job_version)
                .cloned();
            match (
                self.latest_stable(&d.namespace, &d.job_id).cloned(),
                current,
            ) {
                (Some(stable), Some(current)) if current.spec_differs(&stable) => {
                    desc = format!("{desc} - rolling back to job version {}", stable.version);
                    let reg = JobRegistration {
                        namespace: stable.namespace.clone(),
                        id: stable.id.clone(),
                        priority: stable.priority,
                        multiregion: stable.multiregion,
                        stable: false,
                        groups: stable.groups.clone(),
                    };
                    rollback_job = Some(reg);
                    reverted = Some(stable.version);
                }
                (Some(stable), _) => {
                    desc = format!(
                        "{desc} - not rolling back to stable job version {} as current job has same specification",
                        stable.version
                    );
                }
                (None, _) if say_no_target => {
                    desc = format!("{desc} - no stable job version to auto revert to")
                }
                (None, _) => {}
            }
        }
        let d = self.deployments.get_mut(dep_id)?;
        d.status = FAILED.into();
        d.description = desc;
        d.modify_index = index;
        d.modify_time_ns = now_ns();
        self.deployment_table_index = index;
        // The reverted version is submitted like any job version: the scheduler starts a new
        // deployment for it.
        if let Some(reg) = rollback_job {
            self.register_job_at(reg, index);
        }
        reverted
    }

    fn eval_result(index: u64, with_eval: bool) -> ControlResult {
        ControlResult {
            eval_id: if with_eval { new_id() } else { String::new() },
            eval_create_index: if with_eval { index } else { 0 },
            deployment_modify_index: index,
            index,
            reverted_job_version: None,
        }
    }

    /// POST fail: any group with auto_revert asks for the rollback rule.
    pub fn fail(&mut self, dep_id: &str) -> Result<ControlResult, ApiError> {
        let d = self.active_deployment(dep_id, "can't fail terminal deployment")?;
        let rollback = d.groups.values().any(|g| g.auto_revert);
        let index = self.bump();
        let reverted = self.fail_impl(dep_id, DESC_FAILED_BY_USER, rollback, true, index);
        let mut r = Self::eval_result(index, true);
        r.reverted_job_version = reverted;
        Ok(r)
    }

    fn active_deployment(&self, dep_id: &str, terminal_msg: &str) -> Result<Deployment, ApiError> {
        let d = self
            .deployments
            .get(dep_id)
            .ok_or_else(|| ApiError::internal("deployment not found"))?;
        if !d.active() {
            return Err(ApiError::internal(terminal_msg));
        }
        Ok(d.clone())
    }

    /// POST pause: running <-> paused. Resuming creates an evaluation and resumes placement.
    pub fn pause(&mut self, dep_id: &str, pause: bool) -> Result<ControlResult, ApiError> {
        let terminal = if pause {
            "can't pause terminal deployment"
        } else {
            "can't resume terminal deployment"
        };
        let d = self.active_deployment(dep_id, terminal)?;
        let index = self.bump();
        let dm = self
            .deployments
            .get_mut(dep_id)
            .ok_or_else(|| ApiError::internal("deployment not found"))?;
        let _ = d;
        if pause {
            dm.status = PAUSED.into();
            dm.description = DESC_PAUSED.into();
        } else {
            // The real watcher sets the running description on resume.
            dm.status = RUNNING.into();
            dm.description = DESC_RUNNING.into();
        }
        // Pause and resume both restart every group's progress deadline (a deployment paused
        // past its deadline does not fail on resume).
        for g in dm.groups.values_mut() {
            if g.progress_deadline_ns > 0 {
                g.require_progress_by =
                    Some(Utc::now() + chrono::Duration::nanoseconds(g.progress_deadline_ns));
            }
        }
        dm.modify_index = index;
        dm.modify_time_ns = now_ns();
        self.deployment_table_index = index;
        if !pause {
            self.progress(dep_id, index);
        }
        Ok(Self::eval_result(index, !pause))
    }

    fn promote_impl(
        &mut self,
        dep_id: &str,
        all: bool,
        groups: &[String],
        index: u64,
    ) -> Result<(), ApiError> {
        let d = self.deployments.get(dep_id).cloned().ok_or_else(|| {
            ApiError::internal(format!(
                "Deployment ID {dep_id:?} couldn't be updated as it does not exist"
            ))
        })?;
        if !d.active() {
            return Err(ApiError::internal(format!(
                "Deployment {:?} has terminal status {:?}:",
                d.id, d.status
            )));
        }
        // The real state store (UpdateDeploymentPromotion): per selected group with desired
        // canaries, the group's healthy count must reach DesiredCanaries; groups without
        // canaries are skipped and unknown group names ignored, so a deployment without
        // canaries promotes successfully.
        let selected = |g: &str| all || groups.iter().any(|x| x == g);
        let mut canaries: Vec<String> = Vec::new();
        for (name, g) in &d.groups {
            if !selected(name) || g.desired_canaries == 0 {
                continue;
            }
            if g.healthy_allocs < g.desired_canaries {
                return Err(ApiError::internal(format!(
                    "Task group {name:?} has {}/{} healthy allocations",
                    g.healthy_allocs, g.desired_canaries
                )));
            }
            canaries.extend(g.placed_canaries.iter().cloned());
        }
        let now = now_ns();
        let dm = self
            .deployments
            .get_mut(dep_id)
            .ok_or_else(|| ApiError::internal("deployment not found"))?;
        for (name, g) in dm.groups.iter_mut() {
            if selected(name) {
                g.promoted = true;
            }
            // Promotion is progress: the deadline restarts.
            if g.progress_deadline_ns > 0 {
                g.require_progress_by =
                    Some(Utc::now() + chrono::Duration::nanoseconds(g.progress_deadline_ns));
            }
        }
        if !dm.requires_promotion() && dm.status == RUNNING {
            dm.description = DESC_RUNNING.into();
        }
        dm.modify_index = index;
        dm.modify_time_ns = now;
        self.deployment_table_index = index;
        // Promoted canaries are no longer canaries (DeploymentStatus.Canary cleared), with a
        // new modify index on each and on the allocations table.
        for id in &canaries {
            if let Some(a) = self.allocs.get_mut(id) {
                a.canary = false;
                a.modify_index = index;
                a.modify_time_ns = now;
                self.alloc_table_index = index;
            }
        }
        self.progress(dep_id, index);
        Ok(())
    }

    /// POST promote: all groups or the named ones; refused while a selected canary is not healthy.
    pub fn promote(
        &mut self,
        dep_id: &str,
        all: bool,
        groups: &[String],
    ) -> Result<ControlResult, ApiError> {
        self.active_deployment(dep_id, "can't promote terminal deployment")?;
        let index = self.index + 1;
        self.promote_impl(dep_id, all, groups, index)?;
        self.index = index;
        Ok(Self::eval_result(index, true))
    }

    /// POST allocation-health: accepted for allocations of any group (the real server does not
    /// check the group's health_check); unhealthy fails the deployment at once (rolling back
    /// when the group auto-reverts).
    pub fn allocation_health(
        &mut self,
        dep_id: &str,
        healthy: &[String],
        unhealthy: &[String],
    ) -> Result<ControlResult, ApiError> {
        if healthy.len() + unhealthy.len() == 0 {
            return Err(ApiError::internal(
                "must specify at least one healthy/unhealthy allocation ID",
            ));
        }
        let d = self.active_deployment(
            dep_id,
            "can't set health of allocations for a terminal deployment",
        )?;
        // Validate everything before changing anything (the real store applies in one transaction).
        for id in healthy.iter().chain(unhealthy) {
            let a = self
                .allocs
                .get(id)
                .ok_or_else(|| ApiError::internal(format!("unknown alloc {id:?}")))?;
            if a.deployment_id != dep_id {
                return Err(ApiError::internal(format!(
                    "alloc {id:?} is not part of deployment {dep_id:?}"
                )));
            }
        }
        let index = self.bump();
        let mut rollback = false;
        for id in healthy {
            self.set_alloc_health(dep_id, id, true, index)?;
        }
        for id in unhealthy {
            self.set_alloc_health(dep_id, id, false, index)?;
            let group = self
                .allocs
                .get(id)
                .map(|a| a.task_group.clone())
                .unwrap_or_default();
            rollback |= d.groups.get(&group).map(|g| g.auto_revert).unwrap_or(false);
        }
        let mut r = Self::eval_result(index, true);
        if !unhealthy.is_empty() {
            r.reverted_job_version =
                self.fail_impl(dep_id, DESC_FAILED_ALLOCS, rollback, false, index);
        } else {
            self.progress(dep_id, index);
        }
        Ok(r)
    }

    /// POST unblock on the community edition: multiregion deployments are an enterprise
    /// feature, and the community server answers 200 without changing anything.
    pub fn unblock_noop(&self) -> ControlResult {
        ControlResult {
            index: self.index,
            ..Default::default()
        }
    }

    /// POST unblock (enterprise): a blocked multiregion deployment completes.
    pub fn unblock(&mut self, dep_id: &str) -> Result<ControlResult, ApiError> {
        let d = self.active_deployment(dep_id, "can't unblock terminal deployment")?;
        if d.status != BLOCKED {
            return Err(ApiError::internal("can't unblock running deployment"));
        }
        let index = self.bump();
        let dm = self
            .deployments
            .get_mut(dep_id)
            .ok_or_else(|| ApiError::internal("deployment not found"))?;
        dm.status = SUCCESSFUL.into();
        dm.description = DESC_SUCCESSFUL.into();
        dm.modify_index = index;
        dm.modify_time_ns = now_ns();
        self.deployment_table_index = index;
        self.mark_stable(dep_id);
        Ok(Self::eval_result(index, true))
    }

    /// Client-reported health (admin API): for groups that do not use manual health checks.
    /// A healthy report on an allocation whose client has not reported yet starts its tasks
    /// (a healthy allocation has running tasks). An unhealthy allocation fails the deployment
    /// at once only when its group has no progress deadline (the real deployment watcher's
    /// rule); otherwise a replacement is placed and the deadline decides.
    pub fn client_health(&mut self, alloc_id: &str, healthy: bool) -> Result<(), ApiError> {
        let a = self
            .allocs
            .get(alloc_id)
            .cloned()
            .ok_or_else(|| ApiError::new(404, "alloc not found"))?;
        let d = self
            .deployments
            .get(&a.deployment_id)
            .cloned()
            .ok_or_else(|| ApiError::new(404, "deployment not found"))?;
        let g = d
            .groups
            .get(&a.task_group)
            .cloned()
            .ok_or_else(|| ApiError::new(404, "group not found"))?;
        if g.health_check == "manual" {
            return Err(ApiError::bad_request(
                "task group uses manual health checks: set health with /v1/deployment/allocation-health",
            ));
        }
        if !d.active() {
            return Err(ApiError::bad_request("deployment is terminal"));
        }
        let index = self.bump();
        if healthy && a.task_states.is_none() {
            let tasks = a.tasks.clone();
            for t in tasks {
                self.set_task_state(alloc_id, Some(&t), "running", false, false, index)?;
            }
        }
        self.set_alloc_health(&d.id, alloc_id, healthy, index)?;
        if healthy {
            self.progress(&d.id, index);
        } else if d.status == RUNNING || d.status == PAUSED {
            if g.progress_deadline_ns == 0 {
                self.fail_impl(&d.id, DESC_FAILED_ALLOCS, g.auto_revert, true, index);
            } else if d.status == RUNNING {
                // Rescheduled: a replacement takes the failed allocation's place.
                self.place(&d.id, &a.task_group, a.canary, index);
            }
        }
        Ok(())
    }

    /// The client reports a task's state (admin API): `pending`, `running` or `dead` (with
    /// `failed`), optionally counting a restart. `task: None` sets every task of the
    /// allocation. Events follow the real client's (`Received`, `Started`, `Restarting`,
    /// `Terminated`, `Not Restarting`).
    pub fn set_task_state(
        &mut self,
        alloc_id: &str,
        task: Option<&str>,
        state: &str,
        failed: bool,
        restart: bool,
        index: u64,
    ) -> Result<(), ApiError> {
        if !["pending", "running", "dead"].contains(&state) {
            return Err(ApiError::bad_request(format!(
                "State must be pending, running or dead, not {state:?}"
            )));
        }
        let a = self
            .allocs
            .get_mut(alloc_id)
            .ok_or_else(|| ApiError::new(404, "alloc not found"))?;
        let names: Vec<String> = match task {
            Some(t) if !a.tasks.iter().any(|x| x == t) => {
                return Err(ApiError::bad_request(format!("unknown task {t:?}")))
            }
            Some(t) => vec![t.to_string()],
            None => a.tasks.clone(),
        };
        let now = Utc::now();
        let now_ns = now.timestamp_nanos_opt().unwrap_or_default();
        let states = a.task_states.get_or_insert_with(BTreeMap::new);
        for name in names {
            let t = states.entry(name).or_insert_with(|| TaskState {
                state: "pending".into(),
                failed: false,
                restarts: 0,
                last_restart: None,
                started_at: None,
                finished_at: None,
                events: vec![("Received".into(), now_ns, "Task received by client".into())],
            });
            if restart {
                t.restarts += 1;
                t.last_restart = Some(now);
                t.events
                    .push(("Restarting".into(), now_ns, "Task restarting".into()));
            }
            match state {
                "running" => {
                    if t.state != "running" {
                        t.started_at = Some(now);
                        t.events
                            .push(("Started".into(), now_ns, "Task started by client".into()));
                    }
                    t.failed = false;
                }
                "dead" => {
                    t.finished_at = Some(now);
                    t.failed = failed;
                    t.events.push((
                        "Terminated".into(),
                        now_ns,
                        if failed {
                            "Exit Code: 1"
                        } else {
                            "Exit Code: 0"
                        }
                        .into(),
                    ));
                    if failed {
                        t.events.push((
                            "Not Restarting".into(),
                            now_ns,
                            "Error was unrecoverable".into(),
                        ));
                    }
                }
                _ => t.failed = false,
            }
            t.state = state.into();
        }
        a.modify_index = index;
        a.modify_time_ns = now_ns;
        self.alloc_table_index = index;
        Ok(())
    }

    /// Running deployments whose progress deadline passed without the needed healthy
    /// allocations fail (Nomad's deployment watcher): a group waiting for manual promotion with
    /// enough healthy canaries does not count; a failing group with auto_revert rolls back.
    /// Returns whether anything changed.
    pub fn check_deadlines(&mut self) -> bool {
        let now = Utc::now();
        let due: Vec<(String, bool)> = self
            .deployments
            .values()
            .filter(|d| d.status == RUNNING)
            .filter_map(|d| {
                let passed = d.groups.values().any(|g| {
                    let done = if g.desired_canaries > 0 && !g.promoted {
                        false
                    } else {
                        g.healthy_allocs >= g.desired_total
                    };
                    !done && g.require_progress_by.is_some_and(|t| t <= now)
                });
                if !passed {
                    return None;
                }
                let mut fail = false;
                let mut rollback = false;
                for g in d.groups.values() {
                    let ok = if g.desired_canaries > 0 && !g.promoted {
                        g.healthy_allocs >= g.desired_canaries
                    } else {
                        g.healthy_allocs >= g.desired_total
                    };
                    if !ok {
                        fail = true;
                        rollback |= g.auto_revert;
                    }
                }
                fail.then(|| (d.id.clone(), rollback))
            })
            .collect();
        if due.is_empty() {
            return false;
        }
        let index = self.bump();
        for (id, rollback) in due {
            self.fail_impl(&id, DESC_PROGRESS_DEADLINE, rollback, true, index);
        }
        true
    }

    /// All versions of a job, for the admin API.
    pub fn job_versions(&self, ns: &str, id: &str) -> Vec<Value> {
        let mut v: Vec<&Job> = self
            .jobs
            .iter()
            .filter(|j| j.namespace == ns && j.id == id)
            .collect();
        v.sort_by_key(|j| std::cmp::Reverse(j.version));
        v.into_iter()
            .map(|j| {
                json!({
                    "ID": j.id, "Namespace": j.namespace, "Version": j.version, "Stable": j.stable,
                    "Multiregion": j.multiregion, "Priority": j.priority,
                    "TaskGroups": j.groups.iter().map(group_spec_api).collect::<Vec<_>>(),
                    "CreateIndex": j.create_index, "ModifyIndex": j.modify_index,
                })
            })
            .collect()
    }
}

pub fn group_spec_api(g: &GroupSpec) -> Value {
    json!({
        "Name": g.name, "Count": g.count, "Canary": g.canary, "MaxParallel": g.max_parallel,
        "AutoRevert": g.auto_revert, "AutoPromote": g.auto_promote, "HealthCheck": g.health_check,
        "ProgressDeadline": g.progress_deadline_ns, "Tasks": g.tasks,
    })
}
