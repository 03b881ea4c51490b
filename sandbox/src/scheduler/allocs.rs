//! Allocation reads real clients make around deployments (python-nomad's
//! `allocations.get_allocations`, `allocation.get_allocation`, `job.get_allocations`; the Go
//! client's `Allocations().List/Info`, `Jobs().Allocations`), as the real server's
//! `command/agent/alloc_endpoint.go` and `job_endpoint.go` answer them:
//!
//! * `GET /v1/allocations`: allocation stubs; `namespace` (`*` for every readable one), `prefix`
//!   (even-length hex, as for deployments), `reverse`; blocking query on the allocations index.
//! * `GET /v1/allocation/:id`: one allocation, with the `DeploymentID` the list stubs lack (the
//!   full `structs.Allocation` carries it, `AllocListStub` does not); an unknown ID (also a short one: the real read is
//!   by exact ID, prefixes go through the list) is 404 `alloc not found`.
//! * `GET /v1/job/:job_id/allocations`: the job's allocation stubs.
//!
//! All need `read-job` on the allocation's namespace (403 `Permission denied`).

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde_json::Value;

use super::wire::{self, json_response, query_get, ApiError};
use super::{job_namespace, model, Scheduler};

pub fn routes() -> Router<Scheduler> {
    Router::new()
        .route("/v1/allocations", any(list))
        .route("/v1/allocation/{id}", any(read))
        .route("/v1/job/{job_id}/allocations", any(job_allocs))
}

fn sorted(mut v: Vec<&model::Alloc>) -> Vec<&model::Alloc> {
    v.sort_by_key(|a| (a.create_index, a.name.clone()));
    v
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
        let reverse = query_get(&query, "reverse") == Some("true");
        let (value, index) = s
            .blocking(opts, |st| {
                if !prefix.is_empty() {
                    wire::check_uuid_index(&prefix, false)
                        .map_err(|e| ApiError::internal(format!("index error: {e}")))?;
                }
                let mut allocs = sorted(
                    st.allocs
                        .values()
                        .filter(|a| a.id.starts_with(&prefix))
                        .filter(|a| {
                            (ns == "*" || a.namespace == ns)
                                && acl.allow(&a.namespace, &["read-job"])
                        })
                        .collect(),
                );
                if reverse {
                    allocs.reverse();
                }
                Ok((
                    Value::Array(allocs.iter().map(|a| a.to_api()).collect()),
                    st.alloc_table_index,
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
    let r: Result<Response, ApiError> = async {
        let (_, opts, acl) = s.read_request(&method, &headers, raw.as_deref())?;
        let id = id.to_ascii_lowercase();
        let (value, index) = s
            .blocking(opts, |st| {
                Ok(match st.allocs.get(&id) {
                    Some(a) => {
                        if !acl.allow(&a.namespace, &["read-job"]) {
                            return Err(ApiError::permission_denied());
                        }
                        let mut full = a.to_api();
                        full["DeploymentID"] = Value::String(a.deployment_id.clone());
                        (full, a.modify_index)
                    }
                    None => (Value::Null, st.alloc_table_index),
                })
            })
            .await?;
        wire::found(&value, index, "alloc")
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn job_allocs(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(job_id): Path<String>,
) -> Response {
    let r: Result<Response, ApiError> = async {
        let (query, opts, acl) = s.read_request(&method, &headers, raw.as_deref())?;
        let ns = job_namespace(&query, &acl, false)?;
        let (value, index) = s
            .blocking(opts, |st| {
                let allocs = sorted(
                    st.allocs
                        .values()
                        .filter(|a| a.namespace == ns && a.job_id == job_id)
                        .collect(),
                );
                Ok((
                    Value::Array(allocs.iter().map(|a| a.to_api()).collect()),
                    st.alloc_table_index,
                ))
            })
            .await?;
        Ok(json_response(&value, Some(index), true))
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}
