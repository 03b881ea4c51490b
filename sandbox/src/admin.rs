//! The sandbox admin API shared by every listener, under `/_sandbox/` (no real endpoint uses it).
//!
//! * `GET /_sandbox/requests[?service=secrets&since=N]` — the log of requests received:
//!   `{"requests": [{"seq", "service", "method", "path", "status"}], "next": N}`. Never bodies,
//!   never headers (they carry tokens). Query strings are dropped from `path` for the same reason.
//! * `DELETE /_sandbox/requests` — clear the log.
//! * `POST /_sandbox/faults` — inject a fault: `{"method": "PUT" (optional), "path": "/v1/sys/policies/*"
//!   (exact, or a prefix when it ends in `*`), "service": "secrets" (optional), "status": 503,
//!   "retry_after": 2 (seconds, optional), "delay_ms": 0, "drop": false, "count": 1}`. The next
//!   `count` matching calls get the fault instead of reaching the service (`count` 0 = forever).
//!   With `"probability": 0.2`, each matching call gets the fault with that probability (and only
//!   those calls use up `count`); the others go on to the next fault or the service. Such
//!   chaos on every call is what real networks and loaded services do to a client now and then;
//!   `"seed": 7` on any fault reseeds the draws so a run can be repeated.
//!   With `drop`, the connection is closed without a response. With only `delay_ms`, the call is
//!   delayed and then served normally.
//! * `GET /_sandbox/faults`, `DELETE /_sandbox/faults` — list or clear faults.
//! * `PUT /_sandbox/faults` — replace every fault at once with `{"faults": [...]}`: a test that
//!   swaps one fault for another leaves no moment in which the service answers normally.
//!
//! Service-specific setup endpoints (identity provider users, directory accounts, organizations,
//! jobs...) are also under `/_sandbox/` and are documented in their service module.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

const MAX_LOG: usize = 200_000;

pub struct Admin {
    log: Mutex<Log>,
    faults: Mutex<Vec<Fault>>,
    draws: Mutex<rand::rngs::StdRng>,
}

impl Default for Admin {
    fn default() -> Self {
        use rand::SeedableRng;
        Admin {
            log: Mutex::default(),
            faults: Mutex::default(),
            draws: Mutex::new(rand::rngs::StdRng::from_os_rng()),
        }
    }
}

#[derive(Default)]
struct Log {
    next_seq: u64,
    entries: std::collections::VecDeque<LoggedRequest>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LoggedRequest {
    pub seq: u64,
    pub service: String,
    pub method: String,
    pub path: String,
    pub status: u16,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fault {
    #[serde(default)]
    pub method: Option<String>,
    pub path: String,
    #[serde(default)]
    pub service: Option<String>,
    #[serde(default = "default_fault_status")]
    pub status: u16,
    #[serde(default)]
    pub retry_after: Option<u64>,
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(default)]
    pub drop: bool,
    /// Let the service process the request, then drop the connection without the response (the
    /// case that makes clients create duplicates: the write happened, the caller cannot know).
    #[serde(default)]
    pub after: bool,
    #[serde(default = "one")]
    pub count: u32,
    /// The error body to send (a JSON string is sent as plain text); defaults to a body in the
    /// service's own error format.
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    /// The chance (0–1) that a matching call gets the fault; absent = every matching call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// Reseed the draws of probabilistic faults when this fault is added (repeatable runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// `status` left out: resolved when the fault is added ([`Fault::resolved`]).
const STATUS_UNSET: u16 = u16::MAX;

fn default_fault_status() -> u16 {
    STATUS_UNSET
}
fn one() -> u32 {
    1
}

impl Fault {
    /// The fault with its status chosen when the caller gave none: a `delay_ms` alone (no
    /// `drop`, no `after`) delays and then serves normally (as 200 says here); any other fault
    /// answers 503.
    fn resolved(mut self) -> Self {
        if self.status == STATUS_UNSET {
            self.status = if self.delay_ms > 0 && !self.drop && !self.after {
                200
            } else {
                503
            };
        }
        self
    }

    fn matches(&self, service: &str, method: &Method, path: &str) -> bool {
        if let Some(s) = &self.service {
            if s != service {
                return false;
            }
        }
        if let Some(m) = &self.method {
            if !m.eq_ignore_ascii_case(method.as_str()) {
                return false;
            }
        }
        match self.path.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == self.path,
        }
    }
}

impl Admin {
    pub fn record(&self, service: &str, method: &str, path: &str, status: u16) {
        let mut log = self.log.lock().unwrap();
        let seq = log.next_seq;
        log.next_seq += 1;
        if log.entries.len() >= MAX_LOG {
            log.entries.pop_front();
        }
        log.entries.push_back(LoggedRequest {
            seq,
            service: service.to_string(),
            method: method.to_string(),
            path: path.to_string(),
            status,
        });
    }

    /// Requests logged with `seq >= since`, optionally for one service.
    pub fn requests(&self, service: Option<&str>, since: u64) -> (Vec<LoggedRequest>, u64) {
        let log = self.log.lock().unwrap();
        let items = log
            .entries
            .iter()
            .filter(|r| r.seq >= since && service.is_none_or(|s| r.service == s))
            .cloned()
            .collect();
        (items, log.next_seq)
    }

    pub fn clear_requests(&self) {
        self.log.lock().unwrap().entries.clear();
    }

    pub fn add_fault(&self, fault: Fault) {
        let fault = fault.resolved();
        if let Some(seed) = fault.seed {
            use rand::SeedableRng;
            *self.draws.lock().unwrap() = rand::rngs::StdRng::seed_from_u64(seed);
        }
        self.faults.lock().unwrap().push(fault);
    }

    /// Swap every fault for `faults` under one lock, so no call meets an empty list between.
    pub fn replace_faults(&self, faults: Vec<Fault>) {
        let faults: Vec<Fault> = faults.into_iter().map(Fault::resolved).collect();
        if let Some(seed) = faults.iter().find_map(|f| f.seed) {
            use rand::SeedableRng;
            *self.draws.lock().unwrap() = rand::rngs::StdRng::seed_from_u64(seed);
        }
        *self.faults.lock().unwrap() = faults;
    }

    pub fn clear_faults(&self) {
        self.faults.lock().unwrap().clear();
    }

    fn take_fault(&self, service: &str, method: &Method, path: &str) -> Option<Fault> {
        let mut faults = self.faults.lock().unwrap();
        let mut draws = self.draws.lock().unwrap();
        let i = faults.iter().position(|f| {
            f.matches(service, method, path)
                && f.probability
                    .is_none_or(|p| rand::Rng::random_bool(&mut *draws, p.clamp(0.0, 1.0)))
        })?;
        let f = faults[i].clone();
        if f.count == 1 {
            faults.remove(i);
        } else if f.count > 1 {
            faults[i].count -= 1;
        }
        Some(f)
    }
}

/// Put `router` behind the admin layer and add the `/_sandbox/` admin routes.
pub fn wrap(service: &'static str, router: Router, admin: Arc<Admin>) -> Router {
    let admin_routes = Router::new()
        .route(
            "/_sandbox/requests",
            get(list_requests).delete(clear_requests),
        )
        .route(
            "/_sandbox/faults",
            get(list_faults)
                .post(add_fault)
                .put(replace_faults)
                .delete(clear_faults),
        )
        .with_state(admin.clone());
    router
        .merge(admin_routes)
        .layer(middleware::from_fn_with_state(
            (service, admin),
            log_and_inject,
        ))
}

async fn log_and_inject(
    State((service, admin)): State<(&'static str, Arc<Admin>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if path.starts_with("/_sandbox/") {
        return next.run(req).await;
    }
    if let Some(fault) = admin.take_fault(service, &method, &path) {
        if fault.after {
            if fault.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(fault.delay_ms)).await;
            }
            let resp = next.run(req).await;
            admin.record(service, method.as_str(), &path, resp.status().as_u16());
            return lost_response();
        }
        let answers_itself =
            fault.drop || fault.status == 0 || (fault.delay_ms > 0 && fault.status == 200);
        if !answers_itself {
            // Read the body before answering, or hyper closes the keep-alive connection and the
            // client's next call fails with a dropped connection the fault did not ask for.
            let (parts, body) = req.into_parts();
            let _ = axum::body::to_bytes(body, 64 << 20).await;
            req = Request::from_parts(parts, Body::empty());
        }
        if fault.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(fault.delay_ms)).await;
        }
        if fault.drop {
            admin.record(service, method.as_str(), &path, 0);
            return lost_response();
        }
        if fault.status != 0 && !(fault.delay_ms > 0 && fault.status == 200) {
            let status =
                StatusCode::from_u16(fault.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            let mut resp = match fault.body.clone() {
                Some(serde_json::Value::String(text)) => (status, text).into_response(),
                Some(body) => (status, Json(body)).into_response(),
                None => default_error_response(service, status),
            };
            if let Some(secs) = fault.retry_after {
                resp.headers_mut()
                    .insert("retry-after", HeaderValue::from(secs));
            }
            admin.record(service, method.as_str(), &path, status.as_u16());
            return resp;
        }
    }
    let resp = next.run(req).await;
    admin.record(service, method.as_str(), &path, resp.status().as_u16());
    resp
}

/// A response hyper cannot send: its body stream fails at once, so the connection is aborted and
/// the client sees it dropped without a response.
fn lost_response() -> Response {
    let stream = futures::stream::once(async {
        Err::<bytes::Bytes, std::io::Error>(std::io::Error::other("dropped by fault"))
    });
    Response::new(Body::from_stream(stream))
}

/// An injected fault's response in the error format the service itself uses: JSON for the
/// secrets and workspace services, plain text for the catalog and the scheduler (Go services
/// that answer errors with `http.Error`).
fn default_error_response(service: &str, status: StatusCode) -> Response {
    let text = status.canonical_reason().unwrap_or("error").to_string();
    match service {
        "workspaces" => (
            status,
            Json(serde_json::json!({"errors": [{"status": status.as_str(), "title": text}]})),
        )
            .into_response(),
        "catalog" | "scheduler" => (status, text).into_response(),
        _ => (status, Json(serde_json::json!({"errors": [text]}))).into_response(),
    }
}

#[derive(Deserialize)]
struct RequestsQuery {
    service: Option<String>,
    #[serde(default)]
    since: u64,
}

async fn list_requests(
    State(admin): State<Arc<Admin>>,
    Query(q): Query<RequestsQuery>,
) -> Response {
    let (items, next) = admin.requests(q.service.as_deref(), q.since);
    Json(serde_json::json!({"requests": items, "next": next})).into_response()
}

async fn clear_requests(State(admin): State<Arc<Admin>>) -> StatusCode {
    admin.clear_requests();
    StatusCode::NO_CONTENT
}

async fn list_faults(State(admin): State<Arc<Admin>>) -> Response {
    let faults = admin.faults.lock().unwrap().clone();
    Json(serde_json::json!({"faults": faults})).into_response()
}

async fn add_fault(State(admin): State<Arc<Admin>>, body: bytes::Bytes) -> Response {
    // Accept bodies without a Content-Type, like the services themselves do.
    match serde_json::from_slice::<Fault>(&body) {
        Ok(f) => {
            admin.add_fault(f);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"errors": [e.to_string()]})),
        )
            .into_response(),
    }
}

#[derive(Deserialize)]
struct FaultList {
    faults: Vec<Fault>,
}

async fn replace_faults(State(admin): State<Arc<Admin>>, body: bytes::Bytes) -> Response {
    match serde_json::from_slice::<FaultList>(&body) {
        Ok(list) => {
            admin.replace_faults(list.faults);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"errors": [e.to_string()]})),
        )
            .into_response(),
    }
}

async fn clear_faults(State(admin): State<Arc<Admin>>) -> StatusCode {
    admin.clear_faults();
    StatusCode::NO_CONTENT
}
