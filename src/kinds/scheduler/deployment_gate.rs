//! DeploymentGate ↔ the scheduler's deployments API (spec C §4.4), on the [`Operated`] shape.
//!
//! Each pass reads the job's latest deployment (a blocking query on the deployment while it is
//! active, so the gate reacts within a second without polling hot), records its counts, decides
//! at most one control and sends it once:
//! 1. `paused` differs from the deployment (running ↔ paused): pause or resume;
//! 2. the gate's own progress deadline passed (its clock stops while the deployment is paused):
//!    fail, recording `revertedJobVersion`;
//! 3. manual health from task states, only for groups whose update uses manual health checks
//!    (the server accepts any group, so the gate must check): healthy once every task has run
//!    without failure for `healthyFor`, unhealthy when a task failed; a pending allocation (no
//!    task states yet) gets no verdict;
//! 4. promotion (`Auto`): from `DesiredCanaries`, `Promoted` and the healthy counts (never the
//!    description), once the canaries have been healthy for `healthyFor`;
//! 5. a new `unblockRequest` on a blocked deployment: unblock.
//!
//! A control refused with 403 (a token without `submit-job`) is `Ready=False`, reason
//! `Forbidden`, with the service's message, and is not sent again before the resync interval.

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::{Resource, ResourceExt};
use serde_json::{Map, Value};

use crate::api::scheduler::{
    parse_duration, DeploymentGate, DeploymentGateStatus, LastAction, ManualHealthPolicy,
    PromotePolicy, TaskGroupStatus,
};
use crate::api::{DeletionPolicy, ManagedStatus, Service};
use crate::clients::scheduler::SchedulerClient;
use crate::clients::ClientError;
use crate::reconcile::{managed_fields, Context, Error, Managed, Operated, Result, Step};

/// How long a pass waits on the deployment (blocking query) when nothing is due.
const BLOCK_WAIT: Duration = Duration::from_secs(2);
/// Next pass after a pass on an active deployment (the blocking read paces it).
const ACTIVE_AGAIN: Duration = Duration::from_millis(200);
/// Polling for a new deployment once the latest one is terminal, or before there is one.
const IDLE_AGAIN: Duration = Duration::from_secs(5);
const DEFAULT_MANUAL_HEALTHY_FOR: Duration = Duration::from_secs(10);

/// The last modify index seen per gate (namespace/name), for blocking reads.
static LAST_INDEX: LazyLock<Mutex<HashMap<String, u64>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl Managed for DeploymentGate {
    const SERVICE: Service = Service::Scheduler;
    managed_fields!(connection_ref, managed_status);
    fn deletion_policy(&self) -> DeletionPolicy {
        // It owns nothing in the scheduler.
        DeletionPolicy::Retain
    }
}

fn active(status: &str) -> bool {
    matches!(
        status,
        "running" | "paused" | "blocked" | "unblocking" | "pending" | "initializing"
    )
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn u64_of(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn go_time(v: &Value, k: &str) -> Option<DateTime<Utc>> {
    let s = v.get(k)?.as_str()?;
    if s.starts_with("0001-01-01") {
        return None;
    }
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The task groups' counts of a deployment.
pub fn task_groups(dep: &Value) -> BTreeMap<String, TaskGroupStatus> {
    dep.get("TaskGroups")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(name, g)| {
                    (
                        name.clone(),
                        TaskGroupStatus {
                            promoted: g.get("Promoted").and_then(Value::as_bool).unwrap_or(false),
                            desired_canaries: u64_of(g, "DesiredCanaries"),
                            desired_total: u64_of(g, "DesiredTotal"),
                            placed: u64_of(g, "PlacedAllocs"),
                            healthy: u64_of(g, "HealthyAllocs"),
                            unhealthy: u64_of(g, "UnhealthyAllocs"),
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Groups that still need promotion (`DesiredCanaries > 0 && !Promoted`) among `selected`
/// (empty: all).
pub fn needing_promotion(
    groups: &BTreeMap<String, TaskGroupStatus>,
    selected: &[String],
) -> Vec<String> {
    groups
        .iter()
        .filter(|(name, g)| {
            g.desired_canaries > 0
                && !g.promoted
                && (selected.is_empty() || selected.iter().any(|s| s == *name))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// A manual-health verdict on one allocation from its task states.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// No task states yet, or a task not running: no verdict.
    Pending,
    /// Every task running, but not yet for long enough: look again after this long.
    NotYet(Duration),
    /// Every task has run healthy for long enough.
    Healthy,
    /// A task failed its health checks.
    Unhealthy,
}

/// The verdict on an allocation: unhealthy when a task is dead and failed; healthy once every
/// task has been running (since its start or last restart) for `healthy_for`.
pub fn verdict(alloc: &Value, healthy_for: Duration, now: DateTime<Utc>) -> Verdict {
    let Some(states) = alloc.get("TaskStates").and_then(Value::as_object) else {
        return Verdict::Pending;
    };
    if states.is_empty() {
        return Verdict::Pending;
    }
    if states.values().any(|t| {
        str_of(t, "State") == "dead" && t.get("Failed").and_then(Value::as_bool) == Some(true)
    }) {
        return Verdict::Unhealthy;
    }
    if !states.values().all(|t| str_of(t, "State") == "running") {
        return Verdict::Pending;
    }
    let since = states
        .values()
        .filter_map(|t| {
            [go_time(t, "StartedAt"), go_time(t, "LastRestart")]
                .into_iter()
                .flatten()
                .max()
        })
        .max();
    let Some(since) = since else {
        return Verdict::Pending;
    };
    let ran = (now - since).to_std().unwrap_or_default();
    if ran >= healthy_for {
        Verdict::Healthy
    } else {
        Verdict::NotYet(healthy_for - ran)
    }
}

/// How the gate's progress-deadline clock stands for `dep` (a new deployment restarts it; a
/// pause stops it, keeping what is left; a resume starts it again from there; a changed
/// `deadline` moves it by the difference from the one it ran with).
pub fn deadline_clock(
    prev: &DeploymentGateStatus,
    dep_id: &str,
    dep_status: &str,
    created: DateTime<Utc>,
    deadline: Duration,
    now: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, Option<f64>) {
    let same = prev.deployment_id.as_deref() == Some(dep_id);
    let at = prev
        .progress_deadline_at
        .as_deref()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc));
    let remaining = prev.progress_remaining_seconds;
    let (at, remaining) = if same && (at.is_some() || remaining.is_some()) {
        // The deadline changed since the clock started: move it by the difference.
        let shift = prev
            .progress_deadline_seconds
            .map(|was| deadline.as_secs_f64() - was as f64)
            .unwrap_or(0.0);
        (
            at.map(|t| t + chrono::Duration::milliseconds((shift * 1000.0) as i64)),
            remaining.map(|r| (r + shift).max(0.0)),
        )
    } else {
        let d = chrono::Duration::from_std(deadline).unwrap_or_default();
        (Some(created + d), None)
    };
    match (dep_status, at, remaining) {
        ("paused", Some(at), None) => (
            None,
            Some(((at - now).num_milliseconds().max(0) as f64) / 1000.0),
        ),
        ("paused", _, r) => (None, r),
        (_, _, Some(r)) => (
            Some(now + chrono::Duration::milliseconds((r * 1000.0) as i64)),
            None,
        ),
        (_, at, None) => (at, None),
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The decided control.
enum Control {
    Pause(bool),
    /// From the progress deadline (`None`) or a new `spec.failRequest`.
    Fail(Option<String>),
    Health(Vec<String>, Vec<String>),
    Promote(Vec<String>),
    Unblock(String),
}

impl Control {
    fn name(&self) -> &'static str {
        match self {
            Control::Pause(true) => "pause",
            Control::Pause(false) => "resume",
            Control::Fail(_) => "fail",
            Control::Health(..) => "allocationHealth",
            Control::Promote(_) => "promote",
            Control::Unblock(_) => "unblock",
        }
    }
}

impl DeploymentGate {
    fn sched_ns(&self) -> String {
        self.spec
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into())
    }

    fn key(&self) -> String {
        format!(
            "{}/{}",
            self.namespace().unwrap_or_default(),
            self.name_any()
        )
    }

    /// Whether a control was refused as Forbidden recently (not sent again before the resync).
    fn recently_forbidden(&self, resync: Duration) -> bool {
        let Some(c) = self
            .status
            .as_ref()
            .and_then(|s| s.managed.conditions.iter().find(|c| c.type_ == "Ready"))
        else {
            return false;
        };
        if c.reason != "Forbidden" || c.generation() != self.meta().generation {
            return false;
        }
        DateTime::parse_from_rfc3339(&c.last_transition_time)
            .map(|t| {
                (Utc::now() - t.with_timezone(&Utc))
                    .to_std()
                    .unwrap_or_default()
                    < resync
            })
            .unwrap_or(false)
    }

    /// The job's groups whose update uses manual health checks.
    async fn manual_groups(&self, client: &SchedulerClient, ns: &str) -> Result<Vec<String>> {
        let Some(job) = client.job(&self.spec.job_id, ns).await? else {
            return Ok(Vec::new());
        };
        Ok(job
            .get("TaskGroups")
            .and_then(Value::as_array)
            .map(|gs| {
                gs.iter()
                    .filter(|g| {
                        g.get("Update")
                            .map(|u| str_of(u, "HealthCheck") == "manual")
                            .unwrap_or(false)
                    })
                    .map(|g| str_of(g, "Name").to_string())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Find the deployment to act on: a blocking read of the current one while it is active,
    /// else the job's latest.
    async fn observe(
        &self,
        client: &SchedulerClient,
        ns: &str,
        prev: &DeploymentGateStatus,
    ) -> Result<Option<Value>> {
        let spec_changed = prev.managed.observed_generation != self.meta().generation;
        let known = LAST_INDEX
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&self.key())
            .copied();
        if let (Some(id), Some(status), Some(index), false) = (
            prev.deployment_id.as_deref(),
            prev.deployment_status.as_deref(),
            known,
            spec_changed,
        ) {
            if active(status) {
                if let Some(d) = client.deployment(id, ns, Some((index, BLOCK_WAIT))).await? {
                    if active(str_of(&d, "Status")) {
                        return Ok(Some(d));
                    }
                }
            }
        }
        client
            .latest_deployment(&self.spec.job_id, ns)
            .await
            .map_err(Into::into)
    }

    /// Decide the one control to send (or none, with the step that waits).
    async fn decide(
        &self,
        client: &SchedulerClient,
        ns: &str,
        dep: &Value,
        groups: &BTreeMap<String, TaskGroupStatus>,
        next: &mut DeploymentGateStatus,
        wait: &mut Option<(String, String)>,
    ) -> Result<Option<Control>> {
        let id = str_of(dep, "ID");
        let status = str_of(dep, "Status");
        let now = Utc::now();
        if let Some(req) = self.pending_fail_request(next) {
            return Ok(Some(Control::Fail(Some(req))));
        }
        if status == "running" && self.spec.paused {
            return Ok(Some(Control::Pause(true)));
        }
        if status == "paused" && !self.spec.paused {
            return Ok(Some(Control::Pause(false)));
        }
        if status == "paused" {
            *wait = Some((
                "Paused".into(),
                "the deployment is paused (spec.paused)".into(),
            ));
            return Ok(None);
        }
        if status == "blocked" {
            if let Some(req) = self.spec.unblock_request.as_ref().filter(|r| !r.is_empty()) {
                if next.handled_unblock_request.as_ref() != Some(req) {
                    return Ok(Some(Control::Unblock(req.clone())));
                }
            }
            *wait = Some((
                "Blocked".into(),
                "the deployment is complete in this region and waits for its peer regions (set spec.unblockRequest to unblock)".into(),
            ));
            return Ok(None);
        }
        if status != "running" {
            return Ok(None);
        }
        if let Some(at) = next
            .progress_deadline_at
            .as_deref()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        {
            if now >= at {
                return Ok(Some(Control::Fail(None)));
            }
        }
        // Manual health from task states.
        if let Some(mh) = &self.spec.manual_health {
            let ManualHealthPolicy::FromTaskStates = mh.policy;
            let healthy_for = mh
                .healthy_for
                .as_deref()
                .and_then(parse_duration)
                .unwrap_or(DEFAULT_MANUAL_HEALTHY_FOR);
            let manual = self.manual_groups(client, ns).await?;
            if !manual.is_empty() {
                let allocs = client.allocations(id, ns).await?;
                let (mut healthy, mut unhealthy) = (Vec::new(), Vec::new());
                for a in &allocs {
                    if !manual.iter().any(|g| g == str_of(a, "TaskGroup")) {
                        continue;
                    }
                    let decided = a
                        .get("DeploymentStatus")
                        .and_then(|d| d.get("Healthy"))
                        .is_some_and(|h| !h.is_null());
                    if decided {
                        continue;
                    }
                    match verdict(a, healthy_for, now) {
                        Verdict::Healthy => healthy.push(str_of(a, "ID").to_string()),
                        Verdict::Unhealthy => unhealthy.push(str_of(a, "ID").to_string()),
                        Verdict::NotYet(_) | Verdict::Pending => {}
                    }
                }
                if !healthy.is_empty() || !unhealthy.is_empty() {
                    return Ok(Some(Control::Health(healthy, unhealthy)));
                }
            }
        }
        // Promotion.
        let promote = self.spec.promote.clone().unwrap_or_default();
        let needing = needing_promotion(groups, &promote.groups);
        if !needing.is_empty() {
            if promote.policy == PromotePolicy::Manual {
                *wait = Some((
                    "WaitingForPromotion".into(),
                    format!(
                        "canaries of {} wait for a manual promotion",
                        needing.join(", ")
                    ),
                ));
                return Ok(None);
            }
            let ready: Vec<String> = needing
                .iter()
                .filter(|g| {
                    groups
                        .get(*g)
                        .is_some_and(|s| s.healthy >= s.desired_canaries)
                })
                .cloned()
                .collect();
            let healthy_for = promote
                .healthy_for
                .as_deref()
                .and_then(parse_duration)
                .unwrap_or_default();
            let mut ready_for_long_enough = ready.clone();
            if !ready.is_empty() && !healthy_for.is_zero() {
                // Healthy since: the latest health report among the group's healthy canaries.
                let allocs = client.allocations(id, ns).await?;
                ready_for_long_enough.retain(|g| {
                    let since = dep
                        .get("TaskGroups")
                        .and_then(|t| t.get(g))
                        .and_then(|t| t.get("PlacedCanaries"))
                        .and_then(Value::as_array)
                        .map(|ids| {
                            allocs
                                .iter()
                                .filter(|a| ids.iter().any(|i| i.as_str() == Some(str_of(a, "ID"))))
                                .filter_map(|a| {
                                    let ds = a.get("DeploymentStatus")?;
                                    (ds.get("Healthy").and_then(Value::as_bool) == Some(true))
                                        .then(|| go_time(ds, "Timestamp"))
                                        .flatten()
                                })
                                .max()
                        })
                        .unwrap_or(None);
                    since.is_some_and(|t| (now - t).to_std().unwrap_or_default() >= healthy_for)
                });
            }
            let all_ready = ready_for_long_enough.len() == needing.len();
            if promote.groups.is_empty() {
                if all_ready {
                    return Ok(Some(Control::Promote(Vec::new())));
                }
            } else if !ready_for_long_enough.is_empty() {
                return Ok(Some(Control::Promote(ready_for_long_enough)));
            }
            let waiting: Vec<String> = needing
                .iter()
                .map(|g| {
                    let s = groups.get(g).cloned().unwrap_or_default();
                    format!("{g} {}/{} healthy", s.healthy, s.desired_canaries)
                })
                .collect();
            *wait = Some((
                "WaitingForCanaries".into(),
                format!(
                    "promotion waits for healthy canaries: {}",
                    waiting.join(", ")
                ),
            ));
        }
        Ok(None)
    }

    /// The `spec.failRequest` value not yet handled.
    fn pending_fail_request(&self, next: &DeploymentGateStatus) -> Option<String> {
        self.spec
            .fail_request
            .clone()
            .filter(|r| !r.is_empty() && next.handled_fail_request.as_ref() != Some(r))
    }

    async fn send(
        &self,
        client: &SchedulerClient,
        ns: &str,
        id: &str,
        control: &Control,
    ) -> std::result::Result<Value, ClientError> {
        match control {
            Control::Pause(p) => client.pause(id, ns, *p).await,
            Control::Fail(_) => client.fail(id, ns).await,
            Control::Health(h, u) => client.allocation_health(id, ns, h, u).await,
            Control::Promote(groups) => client.promote(id, ns, groups).await,
            Control::Unblock(_) => client.unblock(id, ns).await,
        }
    }
}

/// The kind-specific status fields of `s` as a JSON map (the managed keys left out).
fn fields(s: &DeploymentGateStatus) -> Map<String, Value> {
    let mut m = match serde_json::to_value(s) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for k in ManagedStatus::KEYS {
        m.remove(k);
    }
    // Cleared fields are left out: server-side apply with the same field manager drops them.
    m
}

fn with_fields(mut step: Step, s: &DeploymentGateStatus) -> Step {
    step.fields = fields(s);
    step
}

impl Operated for DeploymentGate {
    type Client = SchedulerClient;

    async fn step(&self, ctx: &Context, client: &SchedulerClient) -> Result<Step> {
        let ns = self.sched_ns();
        let prev = self.status.clone().unwrap_or_default();
        let Some(dep) = self.observe(client, &ns, &prev).await? else {
            return Ok(Step::not_ready(
                "NoDeployment",
                format!(
                    "job {:?} has no deployment in namespace {ns:?} yet",
                    self.spec.job_id
                ),
            )
            .condition("Progressing", false, "NoDeployment", "")
            .again(IDLE_AGAIN));
        };
        let id = str_of(&dep, "ID").to_string();
        let status = str_of(&dep, "Status").to_string();
        let description = str_of(&dep, "StatusDescription").to_string();
        LAST_INDEX
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.key(), u64_of(&dep, "ModifyIndex"));
        let groups = task_groups(&dep);
        let mut next = DeploymentGateStatus {
            managed: ManagedStatus::default(),
            deployment_id: Some(id.clone()),
            deployment_status: Some(status.clone()),
            status_description: Some(description.clone()),
            task_groups: groups.clone(),
            last_action: prev.last_action.clone(),
            reverted_job_version: prev.reverted_job_version,
            handled_unblock_request: prev.handled_unblock_request.clone(),
            handled_fail_request: prev.handled_fail_request.clone(),
            progress_deadline_at: None,
            progress_remaining_seconds: None,
            progress_deadline_seconds: None,
        };
        let deadline = self
            .spec
            .progress_deadline
            .as_deref()
            .and_then(parse_duration);
        if let (Some(deadline), true) = (deadline, active(&status)) {
            let created = DateTime::<Utc>::from_timestamp_nanos(
                dep.get("CreateTime")
                    .and_then(Value::as_i64)
                    .unwrap_or_default(),
            );
            let (at, remaining) =
                deadline_clock(&prev, &id, &status, created, deadline, Utc::now());
            next.progress_deadline_at = at.map(rfc3339);
            next.progress_remaining_seconds = remaining;
            next.progress_deadline_seconds = Some(deadline.as_secs());
        }

        // Terminal deployments: report and look for a newer one now and then.
        if !active(&status) {
            // Nothing to fail: the request is handled, so it never fails a later deployment.
            if let Some(req) = self.pending_fail_request(&next) {
                next.handled_fail_request = Some(req);
            }
            let step = match status.as_str() {
                "successful" => Step::ready("DeploymentSuccessful", description.clone())
                    .condition("Progressing", false, "Complete", description.clone())
                    .condition("Failed", false, "DeploymentSuccessful", ""),
                "failed" => Step::not_ready("DeploymentFailed", description.clone())
                    .condition(
                        "Progressing",
                        false,
                        "DeploymentFailed",
                        description.clone(),
                    )
                    .condition("Failed", true, "DeploymentFailed", description.clone())
                    .stalls(),
                other => Step::not_ready(
                    "DeploymentCancelled",
                    format!("the latest deployment is {other}: {description}"),
                )
                .condition("Progressing", false, "Cancelled", description.clone())
                // Final: only a new deployment (or a spec change) moves it on.
                .stalls(),
            };
            return Ok(with_fields(step.remote_id(id), &next).again(IDLE_AGAIN));
        }

        let mut wait = None;
        let forbidden = self.recently_forbidden(ctx.settings.resync);
        let control = if forbidden {
            None
        } else {
            self.decide(client, &ns, &dep, &groups, &mut next, &mut wait)
                .await?
        };
        let Some(control) = control else {
            let (reason, message) = if forbidden {
                let msg = self
                    .status
                    .as_ref()
                    .and_then(|s| s.managed.conditions.iter().find(|c| c.type_ == "Ready"))
                    .map(|c| c.message.to_string())
                    .unwrap_or_default();
                ("Forbidden".to_string(), msg)
            } else {
                wait.unwrap_or_else(|| ("Progressing".into(), description.clone()))
            };
            let step = Step::not_ready(reason, message)
                .condition(
                    "Progressing",
                    true,
                    "DeploymentRunning",
                    description.clone(),
                )
                .condition("Failed", false, "DeploymentRunning", "")
                .remote_id(id);
            return Ok(with_fields(step, &next).again(ACTIVE_AGAIN));
        };

        let name = control.name();
        match self.send(client, &ns, &id, &control).await {
            Ok(resp) => {
                next.last_action = Some(LastAction {
                    type_: name.to_string(),
                    at: rfc3339(Utc::now()),
                    eval_id: str_of(&resp, "EvalID").to_string(),
                    deployment_id: id.clone(),
                });
                if let Some(v) = resp.get("RevertedJobVersion").and_then(Value::as_u64) {
                    next.reverted_job_version = Some(v);
                }
                if let Control::Unblock(req) = &control {
                    next.handled_unblock_request = Some(req.clone());
                }
                if let Control::Fail(Some(req)) = &control {
                    next.handled_fail_request = Some(req.clone());
                }
                let note = match &control {
                    Control::Health(h, u) => format!(
                        "allocation health sent for deployment {id}: {} healthy, {} unhealthy",
                        h.len(),
                        u.len()
                    ),
                    Control::Fail(by) => format!(
                        "deployment {id} failed: {}{}",
                        match by {
                            Some(req) => format!("spec.failRequest {req:?}"),
                            None => "not successful within spec.progressDeadline".into(),
                        },
                        next.reverted_job_version
                            .map(|v| format!("; rolled back to job version {v}"))
                            .unwrap_or_default()
                    ),
                    _ => format!("{name} sent for deployment {id}"),
                };
                let reason = match name {
                    "pause" => "Paused",
                    "resume" => "Resumed",
                    "fail" => "DeploymentFailed",
                    "promote" => "Promoted",
                    "unblock" => "Unblocked",
                    _ => "AllocationHealthSet",
                };
                let step = Step::not_ready(reason, note.clone())
                    .condition(
                        "Progressing",
                        true,
                        "DeploymentRunning",
                        description.clone(),
                    )
                    .event(false, reason, note)
                    .remote_id(id);
                Ok(with_fields(step, &next).again(ACTIVE_AGAIN))
            }
            Err(ClientError::Status {
                status: 403,
                message,
                ..
            }) => {
                let text = format!(
                    "the scheduler refused {name} for deployment {id} (the Connection's token needs submit-job on namespace {ns:?}): {message}"
                );
                let step = Step::not_ready("Forbidden", text).remote_id(id);
                Ok(with_fields(step, &next))
            }
            Err(e) => Err(Error::Remote(e)),
        }
    }

    async fn finish(&self, _ctx: &Context, _client: &SchedulerClient) -> Result<()> {
        LAST_INDEX
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key());
        Ok(())
    }

    fn holds_remote(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn pending_allocations_get_no_health_verdict() {
        let now = t("2026-01-01T00:01:00Z");
        assert_eq!(
            verdict(&json!({"TaskStates": null}), Duration::from_secs(5), now),
            Verdict::Pending
        );
        let pending = json!({"TaskStates": {"a": {"State": "pending", "Failed": false}}});
        assert_eq!(
            verdict(&pending, Duration::from_secs(5), now),
            Verdict::Pending
        );
    }

    #[test]
    fn a_failed_task_makes_the_allocation_unhealthy() {
        let a = json!({"TaskStates": {
            "a": {"State": "running", "Failed": false, "StartedAt": "2026-01-01T00:00:00Z"},
            "b": {"State": "dead", "Failed": true}}});
        assert_eq!(
            verdict(&a, Duration::from_secs(5), t("2026-01-01T00:01:00Z")),
            Verdict::Unhealthy
        );
    }

    #[test]
    fn running_tasks_are_healthy_after_healthy_for_counted_from_the_last_restart() {
        let a = json!({"TaskStates": {"a": {"State": "running", "Failed": false,
            "StartedAt": "2026-01-01T00:00:00Z", "LastRestart": "2026-01-01T00:00:50Z"}}});
        assert_eq!(
            verdict(&a, Duration::from_secs(5), t("2026-01-01T00:00:52Z")),
            Verdict::NotYet(Duration::from_secs(3))
        );
        assert_eq!(
            verdict(&a, Duration::from_secs(5), t("2026-01-01T00:00:56Z")),
            Verdict::Healthy
        );
    }

    #[test]
    fn promotion_need_comes_from_desired_canaries_and_promoted() {
        let dep = json!({"TaskGroups": {
            "api": {"Promoted": false, "DesiredCanaries": 1, "HealthyAllocs": 0},
            "db": {"Promoted": false, "DesiredCanaries": 0},
            "web": {"Promoted": true, "DesiredCanaries": 2}}});
        let g = task_groups(&dep);
        assert_eq!(needing_promotion(&g, &[]), vec!["api".to_string()]);
        assert!(needing_promotion(&g, &["db".to_string()]).is_empty());
    }

    #[test]
    fn a_changed_deadline_moves_the_clock_of_the_deployment_under_way_by_the_difference() {
        let created = t("2026-01-01T00:00:00Z");
        let running = DeploymentGateStatus {
            deployment_id: Some("d1".into()),
            progress_deadline_at: Some("2026-01-01T00:00:15Z".into()),
            progress_deadline_seconds: Some(15),
            ..Default::default()
        };
        let (at, _) = deadline_clock(
            &running,
            "d1",
            "running",
            created,
            Duration::from_secs(600),
            t("2026-01-01T00:00:05Z"),
        );
        assert_eq!(at, Some(t("2026-01-01T00:10:00Z")));
        let paused = DeploymentGateStatus {
            deployment_id: Some("d1".into()),
            progress_remaining_seconds: Some(10.0),
            progress_deadline_seconds: Some(15),
            ..Default::default()
        };
        let (at, rem) = deadline_clock(
            &paused,
            "d1",
            "paused",
            created,
            Duration::from_secs(5),
            t("2026-01-01T00:00:05Z"),
        );
        assert_eq!((at, rem), (None, Some(0.0)));
    }

    #[test]
    fn the_deadline_clock_stops_while_paused_and_restarts_from_what_was_left() {
        let created = t("2026-01-01T00:00:00Z");
        let d = Duration::from_secs(60);
        let fresh = DeploymentGateStatus::default();
        let (at, rem) = deadline_clock(
            &fresh,
            "d1",
            "running",
            created,
            d,
            t("2026-01-01T00:00:10Z"),
        );
        assert_eq!(at, Some(t("2026-01-01T00:01:00Z")));
        assert_eq!(rem, None);
        let mut prev = DeploymentGateStatus {
            deployment_id: Some("d1".into()),
            progress_deadline_at: at.map(rfc3339),
            ..Default::default()
        };
        let (at, rem) =
            deadline_clock(&prev, "d1", "paused", created, d, t("2026-01-01T00:00:20Z"));
        assert_eq!((at, rem), (None, Some(40.0)));
        prev.progress_deadline_at = None;
        prev.progress_remaining_seconds = rem;
        let (at, rem) = deadline_clock(
            &prev,
            "d1",
            "running",
            created,
            d,
            t("2026-01-01T00:10:00Z"),
        );
        assert_eq!((at, rem), (Some(t("2026-01-01T00:10:40Z")), None));
        // A new deployment restarts the clock.
        let (at, _) = deadline_clock(
            &prev,
            "d2",
            "running",
            created,
            d,
            t("2026-01-01T00:10:00Z"),
        );
        assert_eq!(at, Some(t("2026-01-01T00:01:00Z")));
    }
}
