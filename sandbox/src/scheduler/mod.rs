//! The emulated scheduler (≈ Nomad): the deployments API of spec C §4.4.
//!
//! Endpoints (base `/v1`): `GET /deployments` (prefix rule, namespace filter), `GET
//! /deployment/:id`, `GET /deployment/allocations/:id` (blocking queries on all three), and the
//! controls `PUT|POST /deployment/{fail,pause,promote,allocation-health,unblock}/:id`. Reads need
//! `namespace:read-job`, controls `namespace:submit-job` (or the matching fine-grained
//! deployment capability the real scheduler also accepts). Also `GET /v1/job/:id/deployments`,
//! `GET /v1/job/:id/deployment`, `GET /v1/job/:id` (the latest version, with each group's
//! `Update` block, where clients read `HealthCheck`), `GET /v1/acl/token/self` and `GET /v1/status/leader`, which
//! real clients call around them. Tokens come in `X-Nomad-Token`
//! (also the renamed `X-Scheduler-Token`) or `Authorization: Bearer`; `--root-token` is a
//! management token. Responses carry `X-Nomad-Index` (and the renamed `X-Scheduler-Index`).
//!
//! Choices where the spec says "not shown", following the real service:
//! * errors are plain text; RPC errors without a code are 500 (e.g. `deployment not found` on
//!   controls, `deployment lookup failed: index error: UUID must be 36 characters` for a short
//!   ID, `index error: Input (without hyphens) must be even length` for an odd prefix); a
//!   missing deployment on read is 404 `deployment not found`;
//! * unblock and the other body-taking controls need a body with `DeploymentID` matching the
//!   path (400 `Request body is empty`, `DeploymentID must be specified`, `Deployment ID does
//!   not match`), as the real HTTP handlers do; fail takes no body;
//!
//! Corrections against the real server's sources (`nomad/state/state_store.go`
//! `UpdateDeploymentPromotion`, `nomad/deploymentwatcher/deployment_watcher.go`,
//! `client/allocrunner` `getClientStatus`, `nomad/rpc.go` `blockingRPC`, issue 22):
//! * promote checks, per selected group with desired canaries, that the group's healthy count
//!   reaches `DesiredCanaries` (500 `Task group "<g>" has <h>/<n> healthy allocations`); groups
//!   without canaries are skipped, unknown names ignored, and a deployment without canaries
//!   promotes (200 with an evaluation; there is no `no canaries to promote`). Promotion clears
//!   `DeploymentStatus.Canary` on the promoted allocations (new modify index, allocations
//!   index moves) and restarts the progress deadline;
//! * pause and resume restart every group's `RequireProgressBy`; resume sets `Deployment is
//!   running`;
//! * allocations are placed `pending` with `TaskStates: null`; the admin API drives task states
//!   (`pending` → `running`, `dead` with `Failed`, restarts) and the client status follows;
//! * allocation-health is accepted for allocations of any group (the server has no manual
//!   health-check restriction; a controller must apply it itself); a client-reported unhealthy
//!   allocation fails the deployment at once only when its group has no progress deadline,
//!   otherwise a replacement is placed and the deadline decides;
//! * unblock with `--edition community` is a no-op answering 200 (multiregion is enterprise);
//! * blocking queries wait at most 300 s (the default too), plus up to 1/16 of the wait as
//!   jitter.
//!
//! Jobs, deployments and allocations are driven by the admin API in [`admin_api`].

pub mod acl;
mod acl_api;
mod admin_api;
mod allocs;
pub mod evals;
pub mod model;
pub mod wire;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde_json::Value;
use tokio::sync::watch;

use crate::SandboxOptions;
use model::ControlResult;
use wire::{
    blocking_opts, decode_object, get_bool, get_string, get_string_list, json_response,
    parse_query, query_get, request_token, ApiError, BlockingOpts,
};

/// A read's query pairs, blocking-query options and the caller's ACL.
type ReadRequest = (Vec<(String, String)>, BlockingOpts, acl::Acl);

/// Shared scheduler state: the model behind a mutex, a change counter for blocking queries
/// and where to persist.
#[derive(Clone)]
pub struct Scheduler {
    pub(crate) state: Arc<Mutex<model::State>>,
    changes: Arc<watch::Sender<u64>>,
    root_token: Arc<String>,
    state_file: Option<Arc<PathBuf>>,
    /// `--edition community`: unblock is a no-op (multiregion is enterprise).
    community: bool,
}

impl Scheduler {
    fn new(opts: &SandboxOptions) -> anyhow::Result<Self> {
        let state_file = opts
            .state_dir
            .as_ref()
            .map(|d| Arc::new(d.join("scheduler.json")));
        let state = match state_file.as_deref() {
            Some(f) if f.exists() => serde_json::from_slice(&std::fs::read(f)?)
                .map_err(|e| anyhow::anyhow!("scheduler: cannot load {}: {e}", f.display()))?,
            _ => model::State::new(),
        };
        let (tx, _rx) = watch::channel(0);
        Ok(Self {
            state: Arc::new(Mutex::new(state)),
            changes: Arc::new(tx),
            root_token: Arc::new(opts.root_token.clone()),
            state_file,
            community: opts.edition == crate::Edition::Community,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, model::State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run a mutation, then persist and wake blocking queries.
    pub(crate) fn mutate<T>(&self, f: impl FnOnce(&mut model::State) -> T) -> T {
        let (out, snapshot) = {
            let mut st = self.lock();
            let out = f(&mut st);
            let snapshot = self
                .state_file
                .as_ref()
                .map(|_| serde_json::to_vec(&*st).unwrap_or_default());
            (out, snapshot)
        };
        if let (Some(file), Some(bytes)) = (&self.state_file, snapshot) {
            let tmp = file.with_extension("json.tmp");
            if let Some(dir) = file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if std::fs::write(&tmp, bytes)
                .and_then(|_| std::fs::rename(&tmp, file.as_ref()))
                .is_err()
            {
                tracing::warn!(file = %file.display(), "scheduler: cannot persist state");
            }
        }
        self.changes.send_modify(|v| *v += 1);
        out
    }

    /// Like `mutate`, but persists and wakes blocking queries only when `f` reports a change.
    fn mutate_if(&self, f: impl FnOnce(&mut model::State) -> bool) {
        let changed = f(&mut self.lock());
        if changed {
            self.mutate(|_| ());
        }
    }

    fn acl(&self, headers: &HeaderMap) -> Result<acl::Acl, ApiError> {
        let token = request_token(headers);
        self.lock().acl.resolve(token.as_deref(), &self.root_token)
    }

    /// What every read starts with, in the real server's order: GET only, the query, its
    /// blocking-query options, the region check, then the caller's ACL.
    fn read_request(
        &self,
        method: &Method,
        headers: &HeaderMap,
        raw: Option<&str>,
    ) -> Result<ReadRequest, ApiError> {
        if method != Method::GET {
            return Err(ApiError::invalid_method());
        }
        let query = parse_query(raw);
        let opts = blocking_opts(&query)?;
        check_region(&query)?;
        let acl = self.acl(headers)?;
        Ok((query, opts, acl))
    }

    /// A blocking query: evaluate `f` (result and its index); while the index is not above
    /// `opts.min_index`, wait for a change or the deadline, then evaluate again.
    async fn blocking<F>(&self, opts: BlockingOpts, f: F) -> Result<(Value, u64), ApiError>
    where
        F: Fn(&model::State) -> Result<(Value, u64), ApiError>,
    {
        let deadline = tokio::time::Instant::now() + opts.wait;
        let mut rx = self.changes.subscribe();
        loop {
            rx.borrow_and_update();
            let (value, index) = f(&self.lock())?;
            if opts.min_index == 0 || index > opts.min_index {
                return Ok((value, index));
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return f(&self.lock()),
            }
        }
    }
}

/// Watch progress deadlines in the background while the scheduler is alive (the task ends
/// once the router, the only strong owner of the state, is dropped).
fn spawn_deadline_watcher(sched: &Scheduler) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let state = Arc::downgrade(&sched.state);
    let changes = Arc::downgrade(&sched.changes);
    let (root_token, state_file) = (sched.root_token.clone(), sched.state_file.clone());
    let community = sched.community;
    handle.spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
        loop {
            tick.tick().await;
            let (Some(state), Some(changes)) = (state.upgrade(), changes.upgrade()) else {
                return;
            };
            let s = Scheduler {
                state,
                changes,
                root_token: root_token.clone(),
                state_file: state_file.clone(),
                community,
            };
            let due = {
                let st = s.lock();
                st.deployments.values().any(|d| {
                    d.status == model::RUNNING
                        && d.groups.values().any(|g| {
                            g.require_progress_by
                                .is_some_and(|t| t <= chrono::Utc::now())
                        })
                })
            };
            if due {
                s.mutate_if(|st| st.check_deadlines());
            }
        }
    });
}

pub fn router(opts: &SandboxOptions) -> anyhow::Result<Router> {
    let sched = Scheduler::new(opts)?;
    spawn_deadline_watcher(&sched);
    Ok(Router::new()
        .route("/v1/deployments", any(list_deployments))
        .route("/v1/deployment/", any(deployment_root))
        .route("/v1/deployment/{*rest}", any(deployment_specific))
        .route("/v1/job/{job_id}", any(read_job))
        .route("/v1/job/{job_id}/deployments", any(job_deployments))
        .route("/v1/job/{job_id}/deployment", any(job_latest_deployment))
        .route("/v1/acl/token/self", any(token_self))
        .merge(acl_api::routes())
        .merge(allocs::routes())
        .merge(evals::routes())
        .route("/v1/status/leader", any(status_leader))
        .route("/v1/status/peers", any(status_peers))
        .route("/v1/regions", any(regions))
        .route("/v1/agent/self", any(agent_self))
        .merge(admin_api::routes())
        .with_state(sched))
}

/// The real server answers `region` for a region it does not know with this error.
fn check_region(query: &[(String, String)]) -> Result<(), ApiError> {
    match query_get(query, "region") {
        None | Some("") | Some("global") => Ok(()),
        Some(_) => Err(ApiError::internal("No path to region")),
    }
}

/// The query's namespace, in which the caller must be allowed `read-job`; with `any`, `*`
/// (every namespace) passes here and the objects are filtered one by one.
fn job_namespace(
    query: &[(String, String)],
    acl: &acl::Acl,
    any: bool,
) -> Result<String, ApiError> {
    let ns = namespace_of(query);
    if (any && ns == "*") || acl.allow(&ns, &["read-job"]) {
        Ok(ns)
    } else {
        Err(ApiError::permission_denied())
    }
}

fn namespace_of(query: &[(String, String)]) -> String {
    match query_get(query, "namespace") {
        None | Some("") => "default".to_string(),
        Some(ns) => ns.to_string(),
    }
}

async fn list_deployments(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let r: Result<Response, ApiError> = async {
        let (query, opts, acl) = s.read_request(&method, &headers, raw.as_deref())?;
        let ns = job_namespace(&query, &acl, true)?;
        let prefix = query_get(&query, "prefix").unwrap_or("").to_string();
        // Current releases order by create index (ID for prefix lookups), `reverse=true`
        // reverses; the older `ascending` parameter is accepted and ignored.
        let reverse = query_get(&query, "reverse") == Some("true");
        // An unparsable per_page is ignored, as the real server does.
        let per_page: usize = query_get(&query, "per_page")
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let next_token = query_get(&query, "next_token").unwrap_or("").to_string();
        let (value, index) = s
            .blocking(opts, |st| {
                if !prefix.is_empty() {
                    wire::check_uuid_index(&prefix, false)
                        .map_err(|e| ApiError::internal(format!("index error: {e}")))?;
                }
                let mut items: Vec<&model::Deployment> = st
                    .deployments
                    .values()
                    .filter(|d| d.id.starts_with(&prefix.to_ascii_lowercase()))
                    .filter(|d| {
                        (ns == "*" || d.namespace == ns) && acl.allow(&d.namespace, &["read-job"])
                    })
                    .collect();
                if prefix.is_empty() {
                    items.sort_by_key(|d| (d.create_index, d.id.clone()));
                } else {
                    items.sort_by(|a, b| a.id.cmp(&b.id));
                }
                if reverse {
                    items.reverse();
                }
                // Pagination: the token of an item is its ID for prefix lookups, else
                // "<CreateIndex>.<ID>"; a page starts at the item whose token is next_token.
                let token = |d: &model::Deployment| {
                    if prefix.is_empty() {
                        format!("{}.{}", d.create_index, d.id)
                    } else {
                        d.id.clone()
                    }
                };
                if !next_token.is_empty() {
                    if let Some(pos) = items.iter().position(|d| token(d) == next_token) {
                        items.drain(..pos);
                    } else {
                        items.clear();
                    }
                }
                let mut next = String::new();
                if per_page > 0 && items.len() > per_page {
                    next = token(items[per_page]);
                    items.truncate(per_page);
                }
                let v = Value::Array(items.iter().map(|d| d.to_api()).collect());
                Ok((
                    serde_json::json!({"items": v, "next": next}),
                    st.deployment_table_index,
                ))
            })
            .await?;
        let mut resp = json_response(&value["items"], Some(index), true);
        if let Some(next) = value["next"].as_str().filter(|n| !n.is_empty()) {
            if let Ok(v) = axum::http::HeaderValue::from_str(next) {
                resp.headers_mut().insert("x-nomad-nexttoken", v);
            }
        }
        Ok(resp)
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn deployment_root(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    dispatch(s, method, headers, raw, String::new(), body).await
}

async fn deployment_specific(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(rest): Path<String>,
    body: Bytes,
) -> Response {
    dispatch(s, method, headers, raw, rest, body).await
}

async fn dispatch(
    s: Scheduler,
    method: Method,
    headers: HeaderMap,
    raw: Option<String>,
    rest: String,
    body: Bytes,
) -> Response {
    let query = parse_query(raw.as_deref());
    let r = if let Some(id) = rest.strip_prefix("allocations/") {
        read_allocations(&s, &method, &headers, &query, id).await
    } else if let Some(id) = rest.strip_prefix("fail/") {
        control(&s, &method, &headers, &query, id, &body, Control::Fail).await
    } else if let Some(id) = rest.strip_prefix("pause/") {
        control(&s, &method, &headers, &query, id, &body, Control::Pause).await
    } else if let Some(id) = rest.strip_prefix("promote/") {
        control(&s, &method, &headers, &query, id, &body, Control::Promote).await
    } else if let Some(id) = rest.strip_prefix("allocation-health/") {
        control(
            &s,
            &method,
            &headers,
            &query,
            id,
            &body,
            Control::AllocHealth,
        )
        .await
    } else if let Some(id) = rest.strip_prefix("unblock/") {
        control(&s, &method, &headers, &query, id, &body, Control::Unblock).await
    } else {
        read_deployment(&s, &method, &headers, &query, &rest).await
    };
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn read_deployment(
    s: &Scheduler,
    method: &Method,
    headers: &HeaderMap,
    query: &[(String, String)],
    id: &str,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::invalid_method());
    }
    let opts = blocking_opts(query)?;
    check_region(query)?;
    let ns = namespace_of(query);
    let acl = s.acl(headers)?;
    if !acl.allow(&ns, &["read-job"]) {
        return Err(ApiError::permission_denied());
    }
    let id = id.to_string();
    let (value, index) = s
        .blocking(opts, |st| {
            if id.is_empty() {
                return Err(ApiError::internal("missing deployment ID"));
            }
            // A deployment in a namespace the caller cannot read is hidden.
            let d = st
                .lookup(&id)?
                .filter(|d| acl.allow(&d.namespace, &["read-job"]));
            Ok(match d {
                Some(d) => (d.to_api(), d.modify_index),
                None => (Value::Null, st.deployment_table_index),
            })
        })
        .await?;
    wire::found(&value, index, "deployment")
}

async fn read_allocations(
    s: &Scheduler,
    method: &Method,
    headers: &HeaderMap,
    query: &[(String, String)],
    id: &str,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::invalid_method());
    }
    let opts = blocking_opts(query)?;
    check_region(query)?;
    let ns = namespace_of(query);
    let acl = s.acl(headers)?;
    if !acl.allow(&ns, &["read-job"]) {
        return Err(ApiError::permission_denied());
    }
    let id = id.to_string();
    let (value, index) = s
        .blocking(opts, |st| {
            if id.is_empty() {
                return Err(ApiError::internal("missing deployment ID"));
            }
            let visible = st
                .lookup(&id)?
                .map(|d| acl.allow(&d.namespace, &["read-job"]))
                .unwrap_or(false);
            let mut allocs: Vec<&model::Alloc> = if visible {
                st.allocs
                    .values()
                    .filter(|a| a.deployment_id == id.to_ascii_lowercase())
                    .collect()
            } else {
                Vec::new()
            };
            allocs.sort_by_key(|a| (a.create_index, a.name.clone()));
            Ok((
                Value::Array(allocs.iter().map(|a| a.to_api()).collect()),
                st.alloc_table_index,
            ))
        })
        .await?;
    Ok(json_response(&value, Some(index), true))
}

#[derive(Clone, Copy, PartialEq)]
enum Control {
    Fail,
    Pause,
    Promote,
    AllocHealth,
    Unblock,
}

impl Control {
    fn go_type(self) -> &'static str {
        match self {
            Control::Fail => "structs.DeploymentFailRequest",
            Control::Pause => "structs.DeploymentPauseRequest",
            Control::Promote => "structs.DeploymentPromoteRequest",
            Control::AllocHealth => "structs.DeploymentAllocHealthRequest",
            Control::Unblock => "structs.DeploymentUnblockRequest",
        }
    }
    /// The fine-grained capability the real scheduler accepts instead of submit-job.
    fn capability(self) -> &'static str {
        match self {
            Control::Fail => "fail-deployment",
            Control::Pause => "pause-deployment",
            Control::Promote => "promote-deployment",
            Control::AllocHealth => "set-alloc-health-deployment",
            Control::Unblock => "unblock-deployment",
        }
    }
}

async fn control(
    s: &Scheduler,
    method: &Method,
    headers: &HeaderMap,
    query: &[(String, String)],
    id: &str,
    body: &[u8],
    kind: Control,
) -> Result<Response, ApiError> {
    if method != Method::PUT && method != Method::POST {
        return Err(ApiError::invalid_method());
    }
    let go_struct = kind.go_type().trim_start_matches("structs.");
    let obj = if kind == Control::Fail {
        Default::default()
    } else {
        decode_object(body, kind.go_type())?
    };
    let (pause, all, groups, healthy, unhealthy) = (
        get_bool(&obj, go_struct, "Pause")?,
        get_bool(&obj, go_struct, "All")?,
        get_string_list(&obj, go_struct, "Groups")?,
        get_string_list(&obj, go_struct, "HealthyAllocationIDs")?,
        get_string_list(&obj, go_struct, "UnhealthyAllocationIDs")?,
    );
    if kind != Control::Fail {
        let body_id = get_string(&obj, go_struct, "DeploymentID")?;
        if body_id.is_empty() {
            return Err(ApiError::bad_request("DeploymentID must be specified"));
        }
        if body_id != id {
            return Err(ApiError::bad_request("Deployment ID does not match"));
        }
    }
    check_region(query)?;
    if id.is_empty() {
        return Err(ApiError::internal("missing deployment ID"));
    }
    let acl = s.acl(headers)?;
    let id = id.to_ascii_lowercase();
    let result: ControlResult = s.mutate(|st| {
        let ns = match st.lookup(&id)? {
            Some(d) => d.namespace.clone(),
            None => return Err(ApiError::internal("deployment not found")),
        };
        if !acl.allow(&ns, &["submit-job", kind.capability()]) {
            return Err(ApiError::permission_denied());
        }
        let r = match kind {
            Control::Fail => st.fail(&id),
            Control::Pause => st.pause(&id, pause),
            Control::Promote => st.promote(&id, all, &groups),
            Control::AllocHealth => st.allocation_health(&id, &healthy, &unhealthy),
            Control::Unblock if s.community => Ok(st.unblock_noop()),
            Control::Unblock => st.unblock(&id),
        }?;
        // The evaluation a control answers is readable (`GET /v1/evaluation/:id`).
        evals::record(st, &r.eval_id, &id, "deployment-watcher", r.index);
        Ok(r)
    })?;
    Ok(json_response(&result.to_api(), Some(result.index), false))
}

/// GET /v1/status/leader: clients use it as a liveness probe. It answers the query headers
/// the real client insists on parsing for every read.
async fn status_leader(State(s): State<Scheduler>, method: Method) -> Response {
    if method != Method::GET {
        return ApiError::invalid_method().into_response();
    }
    let index = s.lock().index;
    json_response(&Value::String("127.0.0.1:4647".into()), Some(index), true)
}

/// GET /v1/status/peers: the raft peers (this single server); no ACL, as status endpoints.
async fn status_peers(State(s): State<Scheduler>, method: Method) -> Response {
    if method != Method::GET {
        return ApiError::invalid_method().into_response();
    }
    let index = s.lock().index;
    json_response(&serde_json::json!(["127.0.0.1:4647"]), Some(index), true)
}

/// GET /v1/regions: the known regions (only `global`); no ACL needed.
async fn regions(State(s): State<Scheduler>, method: Method) -> Response {
    if method != Method::GET {
        return ApiError::invalid_method().into_response();
    }
    let index = s.lock().index;
    json_response(&serde_json::json!(["global"]), Some(index), true)
}

/// GET /v1/agent/self: the agent's configuration (`config`), member (`member`) and stats
/// (`stats`), lower-case keys as the real agent answers; clients read `config.Region`,
/// `config.Datacenter` and `member.Name`. It needs `agent:read`, which the sandbox grants to
/// management tokens only (agent rules are not emulated): others get 403 `Permission denied`.
async fn agent_self(State(s): State<Scheduler>, method: Method, headers: HeaderMap) -> Response {
    if method != Method::GET {
        return ApiError::invalid_method().into_response();
    }
    match s.acl(&headers) {
        Ok(acl::Acl::Management) => {}
        Ok(_) => return ApiError::permission_denied().into_response(),
        Err(e) => return e.into_response(),
    }
    let v = serde_json::json!({
        "config": {
            "Region": "global", "Datacenter": "dc1", "NodeName": "sandbox",
            "Version": {"Version": "1.9.0", "VersionPrerelease": "", "VersionMetadata": "", "Revision": "sandbox"},
            "ACL": {"Enabled": true},
            "Server": {"Enabled": true, "AuthoritativeRegion": "global"},
            "Client": {"Enabled": true},
        },
        "member": {
            "Name": "sandbox.global", "Addr": "127.0.0.1", "Port": 4648,
            "Tags": {"region": "global", "dc": "dc1", "role": "nomad", "build": "1.9.0", "port": "4647"},
            "Status": "alive", "ProtocolMin": 1, "ProtocolMax": 5, "ProtocolCur": 2,
            "DelegateMin": 2, "DelegateMax": 5, "DelegateCur": 4,
        },
        "stats": {"nomad": {"leader": "true", "known_regions": "1", "server": "true"}},
    });
    json_response(&v, None, false)
}

/// GET /v1/acl/token/self: the caller's token, as clients check a token with it. The root
/// token reads as a management token.
async fn token_self(State(s): State<Scheduler>, method: Method, headers: HeaderMap) -> Response {
    if method != Method::GET {
        return ApiError::invalid_method().into_response();
    }
    // Current releases refuse an unknown secret as "Permission denied" (the authenticator
    // turns "ACL token not found" into it); no token reads as the anonymous token.
    let not_found = || ApiError::permission_denied().into_response();
    let st = s.lock();
    let Some(secret) = request_token(&headers) else {
        let v = serde_json::json!({
            "AccessorID": "anonymous", "SecretID": "anonymous", "Name": "Anonymous Token",
            "Type": "client", "Policies": ["anonymous"], "Roles": null, "Global": false,
            "CreateTime": "0001-01-01T00:00:00Z", "ExpirationTime": null,
            "CreateIndex": 0, "ModifyIndex": 0,
        });
        return json_response(&v, Some(st.index), true);
    };
    let v = if secret == *s.root_token {
        serde_json::json!({
            "AccessorID": "00000000-0000-0000-0000-000000000001", "SecretID": secret,
            "Name": "Sandbox root token", "Type": "management", "Policies": null, "Roles": null,
            "Global": true, "CreateTime": "0001-01-01T00:00:00Z", "ExpirationTime": null,
            "CreateIndex": 1, "ModifyIndex": 1,
        })
    } else {
        match st.acl.tokens.get(&secret) {
            Some(t) => serde_json::json!({
                "AccessorID": t.accessor_id, "SecretID": t.secret_id, "Name": t.name, "Type": t.kind,
                "Policies": t.policies, "Roles": null, "Global": false, "CreateTime": t.create_time,
                "ExpirationTime": null, "CreateIndex": t.create_index, "ModifyIndex": t.create_index,
            }),
            None => return not_found(),
        }
    };
    json_response(&v, Some(st.index), true)
}

/// Deployments of one job in the request's namespace, newest first, with the deployment table's
/// index. Shared by `/v1/job/:id/deployments` and `/v1/job/:id/deployment` (the latest, or
/// `null`), which real clients use to find a job's deployment.
async fn job_deployments_impl(
    s: &Scheduler,
    method: &Method,
    headers: &HeaderMap,
    raw: Option<&str>,
    job_id: String,
    latest_only: bool,
) -> Result<Response, ApiError> {
    if method != Method::GET {
        return Err(ApiError::invalid_method());
    }
    let query = parse_query(raw);
    let opts = blocking_opts(&query)?;
    check_region(&query)?;
    let ns = namespace_of(&query);
    let acl = s.acl(headers)?;
    if !acl.allow(&ns, &["read-job"]) {
        return Err(ApiError::permission_denied());
    }
    let (value, index) = s
        .blocking(opts, |st| {
            let mut items: Vec<&model::Deployment> = st
                .deployments
                .values()
                .filter(|d| d.namespace == ns && d.job_id == job_id)
                .collect();
            items.sort_by_key(|d| std::cmp::Reverse(d.create_index));
            let v = if latest_only {
                items.first().map(|d| d.to_api()).unwrap_or(Value::Null)
            } else {
                Value::Array(items.iter().map(|d| d.to_api()).collect())
            };
            Ok((v, st.deployment_table_index))
        })
        .await?;
    Ok(json_response(&value, Some(index), true))
}

/// GET /v1/job/:id: the job's latest version (read-job), 404 `job not found`.
async fn read_job(
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
                Ok(match st.latest_job(&ns, &job_id) {
                    Some(j) => (j.to_api(), j.modify_index),
                    None => (Value::Null, st.index),
                })
            })
            .await?;
        wire::found(&value, index, "job")
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn job_deployments(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(job_id): Path<String>,
) -> Response {
    job_deployments_impl(&s, &method, &headers, raw.as_deref(), job_id, false)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn job_latest_deployment(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(job_id): Path<String>,
) -> Response {
    job_deployments_impl(&s, &method, &headers, raw.as_deref(), job_id, true)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}
