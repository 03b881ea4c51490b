//! The emulated infrastructure-workspace service (spec B; ≈ the Terraform Cloud/Enterprise API v2,
//! with `terraform-version` spelled `engine-version` — both spellings are accepted and served).
//!
//! Served under `/api/v2` with `Authorization: Bearer <token>`, JSON:API documents
//! (`application/vnd.api+json`; bodies are parsed whatever their Content-Type). Service discovery
//! (`/.well-known/terraform.json`) and `GET /api/v2/ping` are served for go-tfe, which reads the
//! `TFP-API-Version` header every response carries.
//!
//! Setup that the real service does through its UI (organizations, teams, users, tokens, agent
//! pools, VCS connections, registry modules, run scripting and timing) is under
//! `/_sandbox/workspaces/`, see [`admin_api`]. The organization `--organization` is created at
//! start with an owners team whose user holds `--root-token`.
//!
//! Choices where the spec says "not shown" (each follows the real service as far as known):
//! * An organization's JSON:API id is its name (clients address it so); its `external-id` is
//!   `org-…`.
//! * Every permission failure is 404 `not found`, including the organization-token
//!   restrictions (§5 "404 for absent and for unauthorized").
//! * A `data.type` naming another resource is 409 (JSON:API); a missing one is 422. Unknown
//!   `include` values are 400 `Invalid include parameter` (the text go-tfe matches).
//! * `page[size]` is clamped to 100; workspace lists are ordered by name, runs newest first.
//! * Error objects carry `status`, `title`, `detail` and, for attribute errors,
//!   `source.pointer`.
//! * Force-cancel cool-off, run step time and the offered engine releases are admin settings.

mod admin_api;
mod auth;
mod backend;
mod jsonapi;
mod model;
mod nocode;
mod orgs;
mod run;
mod tags;
mod teams;
mod versions;
mod workspace;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::SandboxOptions;
use auth::Caller;
use jsonapi::{ApiResult, QueryParams};
use model::State;

/// The API version the sandbox reports in `TFP-API-Version` (what go-tfe records and compares).
pub const API_VERSION: &str = "2.6";

/// Shared service state: the data behind one mutex (handlers never await while holding it).
pub struct Service {
    state: Mutex<State>,
    state_file: Option<PathBuf>,
}

pub type Svc = Arc<Service>;

impl Service {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Authenticate and run `f` with the locked state.
    pub fn call<F>(&self, headers: &HeaderMap, f: F) -> Response
    where
        F: FnOnce(&mut State, &Caller) -> ApiResult,
    {
        let mut state = self.lock();
        let res = auth::authenticate(&state, headers).and_then(|caller| f(&mut state, &caller));
        match res {
            Ok(r) => r,
            Err(e) => e.into_response(),
        }
    }

    /// Write the state snapshot when `--state-dir` is set.
    pub fn save(&self) {
        let Some(path) = &self.state_file else { return };
        let json = {
            let state = self.lock();
            match serde_json::to_vec(&*state) {
                Ok(j) => j,
                Err(e) => {
                    tracing::error!(error = %e, "workspaces: cannot serialize state");
                    return;
                }
            }
        };
        let tmp = path.with_extension("json.tmp");
        if let Err(e) = std::fs::write(&tmp, json).and_then(|_| std::fs::rename(&tmp, path)) {
            tracing::error!(error = %e, "workspaces: cannot write state snapshot");
        }
    }
}

pub fn router(opts: &SandboxOptions) -> anyhow::Result<Router> {
    let state_file = match &opts.state_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            Some(dir.join("workspaces.json"))
        }
        None => None,
    };
    let mut state = match &state_file {
        Some(f) if f.exists() => serde_json::from_slice::<State>(&std::fs::read(f)?)
            .map_err(|e| anyhow::anyhow!("workspaces: cannot load {}: {e}", f.display()))?,
        _ => State::default(),
    };
    admin_api::ensure_root(&mut state, &opts.organization, &opts.root_token);
    let svc: Svc = Arc::new(Service {
        state: Mutex::new(state),
        state_file,
    });
    svc.save();
    backend::spawn(Arc::downgrade(&svc));

    let routes: Router = Router::new()
        .route("/.well-known/terraform.json", get(well_known))
        .merge(orgs::routes())
        .merge(workspace::routes())
        .merge(tags::routes())
        .merge(tags::binding_routes())
        .merge(teams::routes())
        .merge(run::routes())
        .merge(nocode::routes())
        .merge(admin_api::routes())
        .fallback(fallback)
        .with_state(svc.clone());
    // A method a path does not serve: PUT where only POST is documented is served as the POST
    // (clients of these services send PUT for POST, and the brief requires accepting it);
    // anything else is the JSON:API 404.
    let inner = routes.clone();
    let api = routes
        .method_not_allowed_fallback(move |req: Request<Body>| put_as_post(inner.clone(), req));
    // The middleware wraps the routed service from outside (a router's own layers run after
    // routing), so the organization-name rewrite it does is seen by the routing.
    Ok(Router::new()
        .fallback_service(api)
        .layer(middleware::from_fn_with_state(svc, headers_and_persistence)))
}

/// Service discovery document read by go-tfe and terrasnek before any API call. It must be
/// served as `application/json` (the discovery client checks the media type).
async fn well_known() -> Response {
    let body = serde_json::json!({
        "modules.v1": "/api/registry/v1/modules/",
        "motd.v1": "/api/terraform/motd",
        "state.v2": "/api/v2/",
        "tfe.v2": "/api/v2/",
        "tfe.v2.1": "/api/v2/",
        "tfe.v2.2": "/api/v2/",
        "versions.v1": "https://checkpoint-api.hashicorp.com/v1/versions/"
    });
    let mut r = (StatusCode::OK, body.to_string()).into_response();
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

/// PUT on a path that serves POST (and no PUT/PATCH) is answered by the POST handler; any
/// other unserved method is the JSON:API 404.
async fn put_as_post(inner: Router, req: Request<Body>) -> Response {
    use tower::ServiceExt;
    if req.method() == Method::PUT {
        // A fresh request (no extensions): the first routing left its path parameters in the
        // extensions, which would confuse the second routing's `Path` extractors.
        let (parts, body) = req.into_parts();
        let mut fresh = Request::new(body);
        *fresh.method_mut() = Method::POST;
        *fresh.uri_mut() = parts.uri;
        *fresh.version_mut() = parts.version;
        *fresh.headers_mut() = parts.headers;
        let resp = match inner.oneshot(fresh).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        if resp.status() != StatusCode::METHOD_NOT_ALLOWED {
            return resp;
        }
    }
    fallback().await
}

/// Unknown paths and methods a path does not serve: the real service's JSON:API 404 (its
/// router answers an unrouted method like an unknown path). PUT is accepted wherever PATCH
/// updates a resource, as the real (Rails) router maps both to update.
async fn fallback() -> Response {
    jsonapi::ApiError::not_found().into_response()
}

/// Largest request body read (configuration-version uploads included).
const MAX_BODY: usize = 512 * 1024 * 1024;

/// Adds the headers every real response carries (`TFP-API-Version`, rate limit, app name) and
/// snapshots the state after every write.
async fn headers_and_persistence(
    AxState(svc): AxState<Svc>,
    req: Request<Body>,
    next: Next,
) -> Response {
    let write = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    // Read the whole request body before routing. Handlers that ignore a body (lock with a
    // reason, unlock, actions, GET or DELETE with a body) would otherwise leave it unread, and
    // hyper then closes the keep-alive connection after answering: pooled clients (python-tfe's
    // httpx, go-tfe) see "server disconnected" on their next request.
    let (mut parts, body) = req.into_parts();
    // Organization names in paths are case-insensitive (the real service looks them up so).
    let canonical = orgs::canonical_org_uri(&svc.lock(), &parts.uri);
    if let Some(uri) = canonical {
        parts.uri = uri;
    }
    let host = parts
        .headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return jsonapi::ApiError::bad_request("request body could not be read").into_response()
        }
    };
    let req = Request::from_parts(parts, Body::from(bytes));
    let mut resp = jsonapi::BASE_URL
        .scope(format!("http://{host}"), next.run(req))
        .await;
    let h = resp.headers_mut();
    h.insert("tfp-api-version", HeaderValue::from_static(API_VERSION));
    h.insert(
        "tfp-appname",
        HeaderValue::from_static("Terraform Enterprise"),
    );
    h.insert("x-tfe-version", HeaderValue::from_static("v202411-1"));
    h.insert("x-ratelimit-limit", HeaderValue::from_static("1000"));
    if write {
        svc.save();
    }
    resp
}

/// The raw query of a request, parsed.
pub fn query(uri: &axum::http::Uri) -> QueryParams {
    QueryParams::parse(uri.query())
}
