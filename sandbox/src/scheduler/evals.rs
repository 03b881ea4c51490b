//! Evaluations, as far as real clients read them around deployments (python-nomad's
//! `evaluation.get_evaluation`, `evaluation.get_allocations`, `evaluations.get_evaluations`,
//! `job.get_evaluations`; the Go client's `Evaluations().Info/List/Allocations`), answered as
//! the real server's `command/agent/eval_endpoint.go` does:
//!
//! * every evaluation ID the sandbox hands out is readable: the one a control answers
//!   (`EvalID` of promote, pause/resume, fail, allocation-health; `TriggeredBy`
//!   `deployment-watcher`) and the one an allocation was placed by (`EvalID` of an allocation;
//!   `TriggeredBy` `job-register`, or `deployment-watcher` for placements after the first);
//!   the sandbox has no scheduler, so every evaluation is `complete`;
//! * `GET /v1/evaluation/:id` (unknown: 404 `eval not found`), `GET /v1/evaluation/:id/allocations`
//!   (the allocation stubs it placed), `GET /v1/evaluations` (`namespace`, `*`, even-hex
//!   `prefix`), `GET /v1/job/:job_id/evaluations`; `read-job` on the namespace, blocking queries.

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::wire::{self, json_response, query_get, ApiError};
use super::{job_namespace, model, Scheduler};

/// One evaluation (the fields of `structs.Evaluation` clients read).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Eval {
    pub id: String,
    pub namespace: String,
    pub priority: u32,
    pub job_id: String,
    pub deployment_id: String,
    pub triggered_by: String,
    pub create_index: u64,
    pub create_time_ns: i64,
}

impl Eval {
    pub fn to_api(&self) -> Value {
        json!({
            "ID": self.id, "Namespace": self.namespace, "Priority": self.priority,
            "Type": "service", "TriggeredBy": self.triggered_by, "JobID": self.job_id,
            "JobModifyIndex": 0, "NodeID": "", "NodeModifyIndex": 0,
            "DeploymentID": self.deployment_id, "Status": "complete", "StatusDescription": "",
            "Wait": 0, "WaitUntil": "0001-01-01T00:00:00Z", "NextEval": "", "PreviousEval": "",
            "BlockedEval": "", "RelatedEvals": null, "FailedTGAllocs": null,
            "ClassEligibility": null, "QuotaLimitReached": "", "EscapedComputedClass": false,
            "AnnotatePlan": false, "QueuedAllocations": {}, "LeaderACL": "",
            "SnapshotIndex": self.create_index, "CreateIndex": self.create_index,
            "ModifyIndex": self.create_index, "CreateTime": self.create_time_ns,
            "ModifyTime": self.create_time_ns,
        })
    }
}

/// Records evaluation `id` for deployment `dep_id` (nothing for an empty ID or an unknown
/// deployment).
pub fn record(st: &mut model::State, id: &str, dep_id: &str, triggered_by: &str, index: u64) {
    if id.is_empty() || st.evals.contains_key(id) {
        return;
    }
    let Some(d) = st.deployments.get(dep_id) else {
        return;
    };
    let eval = Eval {
        id: id.to_string(),
        namespace: d.namespace.clone(),
        priority: d.priority,
        job_id: d.job_id.clone(),
        deployment_id: dep_id.to_string(),
        triggered_by: triggered_by.to_string(),
        create_index: index,
        create_time_ns: chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default(),
    };
    st.evals.insert(id.to_string(), eval);
}

/// Records the evaluations that placed allocations (once per allocation's `EvalID`); true when
/// it recorded any.
pub fn record_placements(st: &mut model::State) -> bool {
    let first_index: std::collections::BTreeMap<String, u64> = st
        .deployments
        .values()
        .map(|d| (d.id.clone(), d.create_index))
        .collect();
    let missing: Vec<(String, String, u64)> = st
        .allocs
        .values()
        .filter(|a| !st.evals.contains_key(&a.eval_id))
        .map(|a| (a.eval_id.clone(), a.deployment_id.clone(), a.create_index))
        .collect();
    let any = !missing.is_empty();
    for (id, dep, index) in missing {
        let by = if first_index.get(&dep) == Some(&index) {
            "job-register"
        } else {
            "deployment-watcher"
        };
        record(st, &id, &dep, by, index);
    }
    any
}

pub fn routes() -> Router<Scheduler> {
    Router::new()
        .route("/v1/evaluations", any(list))
        .route("/v1/evaluation/{id}", any(read))
        .route("/v1/evaluation/{id}/allocations", any(allocations))
        .route("/v1/job/{job_id}/evaluations", any(job_evals))
}

fn sorted(mut v: Vec<&Eval>) -> Vec<&Eval> {
    v.sort_by_key(|e| (e.create_index, e.id.clone()));
    v
}

fn eval_index(st: &model::State) -> u64 {
    st.evals
        .values()
        .map(|e| e.create_index)
        .max()
        .unwrap_or(st.index)
}

async fn list(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let r: Result<Response, ApiError> = async {
        let (query, opts, acl) = s.read_request(&method, &headers, raw.as_deref())?;
        let ns = job_namespace(&query, &acl, true)?;
        let prefix = query_get(&query, "prefix")
            .unwrap_or("")
            .to_ascii_lowercase();
        s.mutate_if(record_placements);
        let (value, index) = s
            .blocking(opts, |st| {
                if !prefix.is_empty() {
                    wire::check_uuid_index(&prefix, false)
                        .map_err(|e| ApiError::internal(format!("index error: {e}")))?;
                }
                let evals = sorted(
                    st.evals
                        .values()
                        .filter(|e| e.id.starts_with(&prefix))
                        .filter(|e| {
                            (ns == "*" || e.namespace == ns)
                                && acl.allow(&e.namespace, &["read-job"])
                        })
                        .collect(),
                );
                Ok((
                    Value::Array(evals.iter().map(|e| e.to_api()).collect()),
                    eval_index(st),
                ))
            })
            .await?;
        Ok(json_response(&value, Some(index), true))
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn read(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(id): Path<String>,
) -> Response {
    one(s, method, headers, raw, id, false).await
}

async fn allocations(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(id): Path<String>,
) -> Response {
    one(s, method, headers, raw, id, true).await
}

/// `GET /v1/evaluation/:id` or, with `allocs`, `.../allocations`.
async fn one(
    s: Scheduler,
    method: Method,
    headers: HeaderMap,
    raw: Option<String>,
    id: String,
    allocs: bool,
) -> Response {
    let r: Result<Response, ApiError> = async {
        let (_, opts, acl) = s.read_request(&method, &headers, raw.as_deref())?;
        let id = id.to_ascii_lowercase();
        s.mutate_if(record_placements);
        let (value, index) = s
            .blocking(opts, |st| {
                let Some(e) = st.evals.get(&id) else {
                    return Ok((Value::Null, eval_index(st)));
                };
                if !acl.allow(&e.namespace, &["read-job"]) {
                    return Err(ApiError::permission_denied());
                }
                if !allocs {
                    return Ok((e.to_api(), e.create_index));
                }
                let mut placed: Vec<&model::Alloc> =
                    st.allocs.values().filter(|a| a.eval_id == id).collect();
                placed.sort_by_key(|a| (a.create_index, a.name.clone()));
                Ok((
                    Value::Array(placed.iter().map(|a| a.to_api()).collect()),
                    st.alloc_table_index,
                ))
            })
            .await?;
        wire::found(&value, index, "eval")
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn job_evals(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(job_id): Path<String>,
) -> Response {
    let r: Result<Response, ApiError> = async {
        let (query, opts, acl) = s.read_request(&method, &headers, raw.as_deref())?;
        let ns = job_namespace(&query, &acl, false)?;
        s.mutate_if(record_placements);
        let (value, index) = s
            .blocking(opts, |st| {
                let evals = sorted(
                    st.evals
                        .values()
                        .filter(|e| e.namespace == ns && e.job_id == job_id)
                        .collect(),
                );
                Ok((
                    Value::Array(evals.iter().map(|e| e.to_api()).collect()),
                    eval_index(st),
                ))
            })
            .await?;
        Ok(json_response(&value, Some(index), true))
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}
