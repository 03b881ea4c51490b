//! The scheduler's sandbox admin API, under `/_sandbox/scheduler/` (JSON in and out, PascalCase
//! keys like the service itself). It stands in for the job submissions, scheduler and clients
//! that move deployments in the real system.
//!
//! * `POST /_sandbox/scheduler/jobs` registers a job version: `{"ID": "web", "Namespace":
//!   "default", "Priority": 50, "Multiregion": false, "Stable": false, "TaskGroups": [{"Name":
//!   "web", "Count": 3, "Canary": 1, "MaxParallel": 1, "AutoRevert": false, "AutoPromote":
//!   false, "HealthCheck": "checks"|"task_states"|"manual", "ProgressDeadline": 600000000000,
//!   "Tasks": ["server"]}]}`. The first version of a job places all its allocations (no
//!   canaries); later versions place their canaries first and wait for promotion. The job's
//!   active deployment is cancelled. Answers `{"JobID", "Namespace", "Version", "DeploymentID"}`.
//! * `GET /_sandbox/scheduler/jobs/{namespace}/{id}` lists the job's versions (newest first)
//!   with `Stable`, to observe rollbacks.
//! * `POST /_sandbox/scheduler/allocations/{id}/health` `{"Healthy": true|false}`: the client
//!   reports the allocation's health (groups not using manual health checks). Healthy lets the
//!   rolling update place more allocations (within MaxParallel) and starts the tasks of an
//!   allocation that had no task states; unhealthy fails the deployment at once (with the
//!   auto-revert rule) only when the group has no progress deadline, else a replacement is
//!   placed and the deployment fails at the deadline.
//! * `POST /_sandbox/scheduler/allocations/{id}/tasks` `{"Task": "server" (optional: every
//!   task), "State": "pending"|"running"|"dead", "Failed": false, "Restart": false}`: the client
//!   reports task states. Allocations are placed `pending` with `TaskStates: null`; the client
//!   status follows the real client's rule (a failed task → `failed`, else running → `running`,
//!   ...). `Restart: true` counts a restart (`Restarts`, `LastRestart`, a `Restarting` event).
//!   A failed task in a group that does not use manual health checks also makes the client
//!   report the allocation unhealthy, as the real client's health watcher does.
//! * `POST /_sandbox/scheduler/deployments/{id}/health` `{"Healthy": true}`: the same for every
//!   allocation of the deployment whose health is not yet set.
//! * `POST /_sandbox/scheduler/acl/policies` `{"Name", "Description", "Namespaces": {"default":
//!   {"Policy": "read"|"write"|"deny"|"scale", "Capabilities": ["read-job", ...]}}}`.
//! * `POST /_sandbox/scheduler/acl/tokens` `{"Name", "Type": "client"|"management", "Policies":
//!   [..]}` answers the token with its `SecretID`.
//! * `PUT /_sandbox/scheduler/acl/anonymous` `{"Policies": [..]}` sets the policies of requests
//!   without a token (none by default).
//!
//! A deployment whose groups are all healthy becomes `successful` (its job version stable), or
//! `blocked` for a multiregion job, waiting for `POST /v1/deployment/unblock`.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::acl::{NamespaceRule, Policy, Token};
use super::model::{GroupSpec, JobRegistration};
use super::wire::ApiError;
use super::Scheduler;

pub fn routes() -> Router<Scheduler> {
    Router::new()
        .route("/_sandbox/scheduler/jobs", post(register_job))
        .route("/_sandbox/scheduler/jobs/{ns}/{id}", get(job_versions))
        .route(
            "/_sandbox/scheduler/allocations/{id}/health",
            post(alloc_health),
        )
        .route(
            "/_sandbox/scheduler/allocations/{id}/tasks",
            post(alloc_tasks),
        )
        .route(
            "/_sandbox/scheduler/deployments/{id}/health",
            post(deployment_health),
        )
        .route("/_sandbox/scheduler/acl/policies", post(create_policy))
        .route("/_sandbox/scheduler/acl/tokens", post(create_token))
        .route("/_sandbox/scheduler/acl/anonymous", put(set_anonymous))
}

fn bad(e: impl std::fmt::Display) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"errors": [e.to_string()]})),
    )
        .into_response()
}

#[allow(clippy::result_large_err)] // the error is the finished response
fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Response> {
    let body = if body.iter().all(|b| b.is_ascii_whitespace()) {
        b"{}".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body).map_err(bad)
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct JobBody {
    #[serde(rename = "ID")]
    id: String,
    #[serde(default = "default_ns")]
    namespace: String,
    #[serde(default = "default_priority")]
    priority: u32,
    #[serde(default)]
    multiregion: bool,
    #[serde(default)]
    stable: bool,
    task_groups: Vec<GroupBody>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GroupBody {
    name: String,
    #[serde(default = "one")]
    count: u32,
    #[serde(default)]
    canary: u32,
    #[serde(default = "one")]
    max_parallel: u32,
    #[serde(default)]
    auto_revert: bool,
    #[serde(default)]
    auto_promote: bool,
    #[serde(default = "default_health")]
    health_check: String,
    #[serde(default = "default_deadline")]
    progress_deadline: i64,
    #[serde(default)]
    tasks: Vec<String>,
}

fn default_ns() -> String {
    "default".into()
}
fn default_priority() -> u32 {
    50
}
fn one() -> u32 {
    1
}
fn default_health() -> String {
    "checks".into()
}
fn default_deadline() -> i64 {
    600_000_000_000
}

async fn register_job(State(s): State<Scheduler>, body: Bytes) -> Response {
    let b: JobBody = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if b.id.is_empty() || b.task_groups.is_empty() {
        return bad("ID and at least one task group are required");
    }
    let mut groups = Vec::new();
    for g in b.task_groups {
        if !["checks", "task_states", "manual"].contains(&g.health_check.as_str()) {
            return bad(format!(
                "HealthCheck must be checks, task_states or manual, not {:?}",
                g.health_check
            ));
        }
        let tasks = if g.tasks.is_empty() {
            vec![g.name.clone()]
        } else {
            g.tasks
        };
        groups.push(GroupSpec {
            name: g.name,
            count: g.count,
            canary: g.canary,
            max_parallel: g.max_parallel,
            auto_revert: g.auto_revert,
            auto_promote: g.auto_promote,
            health_check: g.health_check,
            progress_deadline_ns: g.progress_deadline,
            tasks,
        });
    }
    let reg = JobRegistration {
        namespace: b.namespace.clone(),
        id: b.id.clone(),
        priority: b.priority,
        multiregion: b.multiregion,
        stable: b.stable,
        groups,
    };
    let (version, dep) = s.mutate(|st| st.register_job(reg));
    Json(json!({"JobID": b.id, "Namespace": b.namespace, "Version": version, "DeploymentID": dep}))
        .into_response()
}

async fn job_versions(
    State(s): State<Scheduler>,
    Path((ns, id)): Path<(String, String)>,
) -> Response {
    let versions = s.lock().job_versions(&ns, &id);
    if versions.is_empty() {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"errors": ["job not found"]})),
        )
            .into_response();
    }
    Json(json!(versions)).into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct HealthBody {
    healthy: bool,
}

fn admin_error(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, Json(json!({"errors": [e.msg]}))).into_response()
}

async fn alloc_health(State(s): State<Scheduler>, Path(id): Path<String>, body: Bytes) -> Response {
    let b: HealthBody = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    match s.mutate(|st| st.client_health(&id, b.healthy)) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => admin_error(e),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TasksBody {
    #[serde(default)]
    task: Option<String>,
    state: String,
    #[serde(default)]
    failed: bool,
    #[serde(default)]
    restart: bool,
}

async fn alloc_tasks(State(s): State<Scheduler>, Path(id): Path<String>, body: Bytes) -> Response {
    let b: TasksBody = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let r = s.mutate(|st| {
        let index = st.index + 1;
        st.set_task_state(&id, b.task.as_deref(), &b.state, b.failed, b.restart, index)?;
        st.index = index;
        // The client's health watcher: a failed task makes a non-manual group's allocation
        // unhealthy.
        let auto = st
            .allocs
            .get(&id)
            .and_then(|a| {
                st.deployments.get(&a.deployment_id).map(|d| {
                    d.active()
                        && a.healthy.is_none()
                        && d.groups
                            .get(&a.task_group)
                            .is_some_and(|g| g.health_check != "manual")
                })
            })
            .unwrap_or(false);
        if b.state == "dead" && b.failed && auto {
            st.client_health(&id, false)?;
        }
        Ok(())
    });
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => admin_error(e),
    }
}

async fn deployment_health(
    State(s): State<Scheduler>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let b: HealthBody = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let r = s.mutate(|st| {
        if !st.deployments.contains_key(&id) {
            return Err(ApiError::new(404, "deployment not found"));
        }
        // Repeat: marking allocations healthy can place more of them (rolling update).
        for _ in 0..1000 {
            let pending: Vec<String> = st
                .allocs
                .values()
                .filter(|a| a.deployment_id == id && a.healthy.is_none())
                .map(|a| a.id.clone())
                .collect();
            let active = st.deployments.get(&id).map(|d| d.active()).unwrap_or(false);
            if pending.is_empty() || !active {
                break;
            }
            for a in pending {
                st.client_health(&a, b.healthy)?;
            }
            if !b.healthy {
                break;
            }
        }
        Ok(())
    });
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => admin_error(e),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PolicyBody {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    namespaces: std::collections::BTreeMap<String, NamespaceRule>,
}

async fn create_policy(State(s): State<Scheduler>, body: Bytes) -> Response {
    let b: PolicyBody = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if b.name.is_empty() {
        return bad("Name is required");
    }
    s.mutate(|st| {
        st.index += 1;
        let idx = st.index;
        st.acl.policies.insert(
            b.name.clone(),
            Policy {
                name: b.name.clone(),
                description: b.description,
                namespaces: b.namespaces,
                create_index: idx,
                rules: String::new(),
                modify_index: idx,
            },
        );
    });
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TokenBody {
    #[serde(default)]
    name: String,
    #[serde(default = "client")]
    r#type: String,
    #[serde(default)]
    policies: Vec<String>,
}

fn client() -> String {
    "client".into()
}

async fn create_token(State(s): State<Scheduler>, body: Bytes) -> Response {
    let b: TokenBody = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if b.r#type != "client" && b.r#type != "management" {
        return bad("Type must be client or management");
    }
    let tok = s.mutate(|st| {
        st.index += 1;
        let tok = Token {
            accessor_id: uuid::Uuid::new_v4().to_string(),
            secret_id: uuid::Uuid::new_v4().to_string(),
            name: b.name,
            kind: b.r#type,
            policies: b.policies,
            create_index: st.index,
            create_time: chrono::Utc::now(),
        };
        st.acl.tokens.insert(tok.secret_id.clone(), tok.clone());
        tok
    });
    Json(json!({
        "AccessorID": tok.accessor_id, "SecretID": tok.secret_id, "Name": tok.name,
        "Type": tok.kind, "Policies": tok.policies, "Global": false,
        "CreateTime": tok.create_time, "CreateIndex": tok.create_index, "ModifyIndex": tok.create_index,
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AnonymousBody {
    #[serde(default)]
    policies: Vec<String>,
}

async fn set_anonymous(State(s): State<Scheduler>, body: Bytes) -> Response {
    let b: AnonymousBody = match parse(&body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    s.mutate(|st| st.acl.anonymous_policies = b.policies);
    StatusCode::NO_CONTENT.into_response()
}
