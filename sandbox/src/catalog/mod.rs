//! The emulated catalog (≈ Consul) ACL API of spec C §4.3, with the header `X-Catalog-Token`.
//!
//! Endpoints (base `/v1`): `PUT /acl/bootstrap`, `GET /acl/replication`, `POST /acl/login`,
//! `POST /acl/logout`, `POST /acl/oidc/auth-url`, `POST /acl/oidc/callback` (enterprise only),
//! plus what real clients call around them: `GET /acl/token/self`, `GET /acl/tokens`, `GET
//! /acl/policies`, `PUT /acl/token`, `GET|PUT|DELETE /acl/token/:accessor` (these need `acl:read` /
//! `acl:write`). A token is taken from `?token=`, then `X-Catalog-Token`, then `Authorization:
//! Bearer`, in the real service's order. Lists and reads answer `X-Catalog-Index` (the renamed
//! `X-Consul-Index`, also sent under its original name).
//!
//! The listener is an agent of the primary datacenter `dc1`; the admin API can add a secondary
//! datacenter, reached with `?dc=NAME` as the real service forwards requests. Errors are plain
//! text with the real codes and texts: `Permission denied: ACL bootstrap no longer allowed
//! (reset index: N)` (403), `ACL not found` (403), `Permission denied: token with AccessorID
//! '...' lacks permission 'acl:read'` (403), `No path to datacenter` (500).
//!
//! Corrections against the real agent's sources (`agent/acl_endpoint.go`,
//! `agent/consul/acl_replication.go`, `agent/consul/rpc.go` `blockingQuery`, issue 22):
//! * the ACL list and read endpoints (`GET /acl/tokens`, `/acl/policies`, `/acl/token/:id`,
//!   `/acl/policy/:id`, `/acl/policy/name/:name`) are blocking queries: `?index=N&wait=D`
//!   holds the request until the index moves past N or the wait passes (default 5 minutes,
//!   capped at 10, plus up to 1/16 jitter); `/acl/replication` and `/acl/bootstrap` do not block;
//! * a bootstrap 403 answered by a follower carries the forwarding prefix (`Permission denied:
//!   rpc error making call: ACL bootstrap no longer allowed (reset index: N)`), offered by the
//!   admin switch `BootstrapFromFollower`;
//! * replication status never clears `LastError`/`LastErrorMessage` after recovery; health is
//!   `LastError` later than `LastSuccess`, not an empty message.
//!
//! Choices where the spec says "not shown", following the real service: RPC errors without a
//! code are 500 (e.g. an invalid service-account JWT: `lookup failed: service account jwt not
//! valid`; OIDC provider errors `Provider login failed: ...`); the OIDC endpoints do not exist
//! in the community edition (404); a client nonce that does not match on callback is
//! `Provider login failed: Invalid client nonce.` (the enterprise text is not public).
//!
//! Kubernetes auth methods validate the service-account JWT locally with a key given in the
//! method's `Config.ValidationKey` (HMAC secret or PEM public key) instead of a TokenReview.

mod admin_api;
pub mod auth;
mod crud;
pub mod model;
mod oidc;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use chrono::SubsecRound;
use serde_json::{json, Map, Value};

use crate::{Edition, SandboxOptions};
use model::{Token, ANONYMOUS_ACCESSOR, PRIMARY_DC};

/// An error answered as the real service does: status and a plain-text body.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{msg}")]
pub struct ApiError {
    pub status: u16,
    pub msg: String,
}

impl ApiError {
    pub fn new(status: u16, msg: impl Into<String>) -> Self {
        Self {
            status,
            msg: msg.into(),
        }
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(500, msg)
    }
    fn acl_not_found() -> Self {
        Self::new(403, "ACL not found")
    }
    fn method_not_allowed(method: &Method) -> Self {
        Self::new(405, format!("method {method} not allowed"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, self.msg).into_response();
        resp.headers_mut().insert(
            "content-type",
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        resp
    }
}

fn json_response(value: &Value, index: Option<u64>) -> Response {
    let mut resp = (
        StatusCode::OK,
        serde_json::to_vec(value).unwrap_or_default(),
    )
        .into_response();
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    if let Some(i) = index {
        let i = i.max(1);
        for name in ["x-catalog-index", "x-consul-index"] {
            h.insert(name, HeaderValue::from(i));
        }
        for name in ["x-catalog-knownleader", "x-consul-knownleader"] {
            h.insert(name, HeaderValue::from_static("true"));
        }
        for name in ["x-catalog-lastcontact", "x-consul-lastcontact"] {
            h.insert(name, HeaderValue::from_static("0"));
        }
    }
    resp
}

/// Shared catalog state, persisted to `state_dir/catalog.json` when set.
#[derive(Clone)]
pub struct Catalog {
    state: Arc<Mutex<model::State>>,
    state_file: Option<Arc<PathBuf>>,
    /// `--root-token`, usable as the initial-management token through the admin API.
    root_token: Arc<String>,
    /// Bumped on every write; blocking queries wait on it.
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Catalog {
    fn new(opts: &SandboxOptions) -> anyhow::Result<Self> {
        let state_file = opts
            .state_dir
            .as_ref()
            .map(|d| Arc::new(d.join("catalog.json")));
        let state = match state_file.as_deref() {
            Some(f) if f.exists() => serde_json::from_slice(&std::fs::read(f)?)
                .map_err(|e| anyhow::anyhow!("catalog: cannot load {}: {e}", f.display()))?,
            _ => model::State::new(opts.edition != Edition::Community),
        };
        Ok(Self {
            state: Arc::new(Mutex::new(state)),
            state_file,
            root_token: Arc::new(opts.root_token.clone()),
            changes: Arc::new(tokio::sync::watch::channel(0).0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, model::State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run a mutation and persist the result.
    fn mutate<T>(&self, f: impl FnOnce(&mut model::State) -> T) -> T {
        let (out, snapshot) = {
            let mut st = self.lock();
            let out = f(&mut st);
            (
                out,
                self.state_file
                    .as_ref()
                    .map(|_| serde_json::to_vec(&*st).unwrap_or_default()),
            )
        };
        if let (Some(file), Some(bytes)) = (&self.state_file, snapshot) {
            if let Some(dir) = file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let tmp = file.with_extension("json.tmp");
            if std::fs::write(&tmp, bytes)
                .and_then(|_| std::fs::rename(&tmp, file.as_ref()))
                .is_err()
            {
                tracing::warn!(file = %file.display(), "catalog: cannot persist state");
            }
        }
        self.changes.send_modify(|v| *v += 1);
        out
    }

    /// A blocking read (the real agent's `blockingQuery`): with `?index=N`, hold the request
    /// until the result's index is above N or `?wait` passes (default 5 minutes, at most 10,
    /// plus up to 1/16 of it as jitter), then answer the current result. `f` answers the
    /// result and its index.
    pub(crate) async fn blocking<F>(&self, raw: Option<&str>, f: F) -> Result<Response, ApiError>
    where
        F: Fn(&model::State) -> Result<(Value, u64), ApiError>,
    {
        let query: Vec<(String, String)> = raw
            .and_then(|q| serde_urlencoded::from_str(q).ok())
            .unwrap_or_default();
        let get = |n: &str| {
            query
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        const DEFAULT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);
        const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(600);
        let mut wait = DEFAULT_WAIT;
        if let Some(w) = get("wait") {
            let d = crate::scheduler::wire::parse_go_duration(w)
                .ok_or_else(|| ApiError::new(400, "Invalid wait time"))?;
            wait = if d.is_zero() {
                DEFAULT_WAIT
            } else {
                d.min(MAX_WAIT)
            };
        }
        let min_index: u64 = match get("index") {
            Some(i) => i.parse().map_err(|_| ApiError::new(400, "Invalid index"))?,
            None => 0,
        };
        let jitter = (wait / 16).as_nanos() as u64;
        if jitter > 0 {
            wait += std::time::Duration::from_nanos(rand::random_range(0..jitter));
        }
        let deadline = tokio::time::Instant::now() + wait;
        let mut rx = self.changes.subscribe();
        loop {
            rx.borrow_and_update();
            let (value, index) = f(&self.lock())?;
            if min_index == 0 || index > min_index {
                return Ok(json_response(&value, Some(index)));
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                let (value, index) = f(&self.lock())?;
                return Ok(json_response(&value, Some(index)));
            }
        }
    }
}

pub fn router(opts: &SandboxOptions) -> anyhow::Result<Router> {
    let catalog = Catalog::new(opts)?;
    Ok(Router::new()
        .route("/v1/acl/bootstrap", any(bootstrap))
        .route("/v1/acl/replication", any(replication))
        .route("/v1/acl/login", any(login))
        .route("/v1/acl/logout", any(logout))
        .route("/v1/acl/oidc/auth-url", any(oidc::auth_url))
        .route("/v1/acl/oidc/callback", any(oidc::callback))
        .route("/v1/acl/token/self", any(token_self))
        .route("/v1/acl/tokens", any(token_list))
        .route("/v1/acl/policies", any(policy_list))
        .route("/v1/acl/token", any(token_create))
        .route("/v1/acl/token/{id}", any(token_by_accessor))
        .route("/v1/acl/token/{id}/clone", any(token_clone))
        .route("/v1/status/leader", get(status_leader))
        .merge(crud::routes())
        .merge(admin_api::routes())
        .merge(oidc::provider_routes())
        .with_state(catalog))
}

/// What every request carries: query, datacenter and token.
pub(crate) struct Ctx {
    query: Vec<(String, String)>,
    dc: String,
    token: Option<String>,
    headers: HeaderMap,
}

impl Ctx {
    fn new(st: &model::State, raw: Option<&str>, headers: &HeaderMap) -> Result<Self, ApiError> {
        let query: Vec<(String, String)> = raw
            .and_then(|q| serde_urlencoded::from_str(q).ok())
            .unwrap_or_default();
        let dc = query
            .iter()
            .find(|(k, _)| k == "dc")
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| PRIMARY_DC.to_string());
        if !st.datacenter_known(&dc) {
            return Err(ApiError::internal("No path to datacenter"));
        }
        let token = query
            .iter()
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
            .or_else(|| {
                headers
                    .get("x-catalog-token")
                    .and_then(|v| v.to_str().ok())
                    .filter(|v| !v.is_empty())
                    .map(String::from)
            })
            .or_else(|| {
                let auth = headers.get("authorization")?.to_str().ok()?;
                let (scheme, rest) = auth.split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| rest.trim().to_string())
                    .filter(|t| !t.is_empty())
            });
        Ok(Self {
            query,
            dc,
            token,
            headers: headers.clone(),
        })
    }

    /// `?stale` and `?consistent` (the mode the replication check supports) are exclusive.
    fn consistency(&self) -> Result<(), ApiError> {
        let has = |n: &str| self.query.iter().any(|(k, _)| k == n);
        if has("stale") && has("consistent") {
            return Err(ApiError::new(
                400,
                "Cannot specify ?stale with ?consistent, conflicting semantics.",
            ));
        }
        Ok(())
    }

    fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The request's namespace by the precedence of spec C §4.3: body `Namespace`, `ns` query
    /// parameter, `X-Catalog-Namespace` header, the namespace of the request's token,
    /// `default`. The community edition refuses namespaces as the real one does.
    fn namespace(&self, st: &model::State, body_ns: &str) -> Result<String, ApiError> {
        let query_ns = self.query("ns").unwrap_or("");
        let header_ns = self
            .headers
            .get("x-catalog-namespace")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !st.enterprise {
            if !query_ns.is_empty() {
                return Err(ApiError::new(
                    400,
                    "Invalid query parameter: \"ns\" - Namespaces are a Consul Enterprise feature",
                ));
            }
            if !header_ns.is_empty() {
                return Err(ApiError::new(
                    400,
                    "Invalid header: \"X-Catalog-Namespace\" - Namespaces are a Consul Enterprise feature",
                ));
            }
            if !body_ns.is_empty() && body_ns != "default" {
                return Err(ApiError::new(
                    400,
                    "\"Namespace\" field is a Consul Enterprise feature",
                ));
            }
            return Ok("default".into());
        }
        for ns in [body_ns, query_ns, header_ns] {
            if !ns.is_empty() {
                return Ok(ns.to_string());
            }
        }
        if let Some(t) = self
            .token
            .as_deref()
            .and_then(|t| st.token_by_secret(t, &self.dc))
        {
            return Ok(t.namespace.clone());
        }
        Ok("default".into())
    }

    /// Resolve the token for an ACL-protected endpoint and check `acl:<level>`.
    fn authorize(&self, st: &model::State, level: &str) -> Result<(), ApiError> {
        let accessor = match self.token.as_deref() {
            None => ANONYMOUS_ACCESSOR.to_string(),
            Some(secret) => {
                let t = st
                    .token_by_secret(secret, &self.dc)
                    .ok_or_else(ApiError::acl_not_found)?;
                let granted = st.acl_level(t);
                let ok = matches!(
                    (granted, level),
                    (Some("write"), _) | (Some("read"), "read")
                );
                if ok {
                    return Ok(());
                }
                t.accessor_id.clone()
            }
        };
        // The anonymous token is named by its accessor too (acl.PermissionDeniedError).
        Err(ApiError::new(
            403,
            format!("Permission denied: token with AccessorID '{accessor}' lacks permission 'acl:{level}'"),
        ))
    }
}

/// Decode a JSON body the way Go does (case-insensitive keys, extra keys ignored, no
/// Content-Type needed). An empty body is an empty object.
pub(crate) fn decode_body(body: &[u8], what: &str) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(ApiError::new(
            400,
            format!(
                "{what}: json: cannot unmarshal {} into Go value",
                crate::scheduler::wire::go_kind(&other)
            ),
        )),
        Err(e) => Err(ApiError::new(400, format!("{what}: {e}"))),
    }
}

pub(crate) fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    crate::scheduler::wire::field(obj, name)
}

pub(crate) fn str_field(
    obj: &Map<String, Value>,
    name: &str,
    what: &str,
) -> Result<String, ApiError> {
    match field(obj, name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(ApiError::new(
            400,
            format!(
                "{what}: json: cannot unmarshal {} into Go struct field .{name} of type string",
                crate::scheduler::wire::go_kind(v)
            ),
        )),
    }
}

pub(crate) fn meta_field(
    obj: &Map<String, Value>,
    what: &str,
) -> Result<BTreeMap<String, String>, ApiError> {
    match field(obj, "Meta") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(ApiError::new(
                    400,
                    format!("{what}: json: cannot unmarshal {} into Go struct field .Meta of type string", crate::scheduler::wire::go_kind(other)),
                )),
            })
            .collect(),
        Some(v) => Err(ApiError::new(
            400,
            format!("{what}: json: cannot unmarshal {} into Go struct field .Meta of type map[string]string", crate::scheduler::wire::go_kind(v)),
        )),
    }
}

/// hashicorp/go-uuid's ParseUUID checks and texts.
fn parse_uuid(s: &str) -> Result<(), String> {
    if s.len() != 36 {
        return Err("uuid string is wrong length".into());
    }
    let b = s.as_bytes();
    if b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return Err("uuid is improperly formatted".into());
    }
    if let Some(c) = s
        .chars()
        .filter(|c| *c != '-')
        .find(|c| !c.is_ascii_hexdigit())
    {
        return Err(format!(
            "encoding/hex: invalid byte: U+{:04X} '{c}'",
            c as u32
        ));
    }
    Ok(())
}

fn run(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

/// PUT /v1/acl/bootstrap: the first management token, once. Later calls (and any call once an
/// initial-management token is configured) are 403 with the reset index.
async fn bootstrap(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        if method != Method::PUT {
            return Err(ApiError::method_not_allowed(&method));
        }
        // The real handler always bootstraps the agent's own datacenter (no `dc`).
        let _ = (&raw, &headers);
        let st_enterprise = c.lock().enterprise;
        let obj = decode_body(&body, "Request decoding failed")?;
        let secret = str_field(&obj, "BootstrapSecret", "Request decoding failed")?;
        let token = c.mutate(|st| {
            if let Some(reset) = st.bootstrap_index {
                // Through a follower the leader's error comes back wrapped by the RPC
                // forwarding ("rpc error making call: "), so a reset-index parse must not be
                // anchored at the start of the message.
                let via = if st.bootstrap_from_follower {
                    "rpc error making call: "
                } else {
                    ""
                };
                return Err(ApiError::new(
                    403,
                    format!(
                        "Permission denied: {via}ACL bootstrap no longer allowed (reset index: {reset})"
                    ),
                ));
            }
            let secret = if secret.is_empty() {
                uuid::Uuid::new_v4().to_string()
            } else {
                parse_uuid(&secret).map_err(ApiError::internal)?;
                if st.tokens.iter().any(|t| t.secret_id == secret) {
                    return Err(ApiError::internal("Token with SecretID already exists"));
                }
                secret
            };
            let token = st.management_token(secret, "Bootstrap Token (Global Management)");
            st.bootstrap_index = Some(token.create_index);
            Ok(token)
        })?;
        let mut v = token.to_api(st_enterprise);
        let mut out = Map::new();
        out.insert("ID".into(), json!(token.secret_id));
        if let Some(m) = v.as_object_mut() {
            out.extend(std::mem::take(m));
        }
        Ok(json_response(&Value::Object(out), None))
    }
    .await)
}

const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// GET /v1/acl/replication: the queried datacenter's status. The primary does not replicate
/// (everything zero); a secondary replicates policies and roles, and tokens when token
/// replication is on.
async fn replication(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(ApiError::method_not_allowed(&method));
        }
        let st = c.lock();
        let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
        ctx.consistency()?;
        let v = if ctx.dc == PRIMARY_DC {
            json!({
                "Enabled": false, "Running": false, "SourceDatacenter": "", "ReplicationType": "",
                "ReplicatedIndex": 0, "ReplicatedRoleIndex": 0, "ReplicatedTokenIndex": 0,
                "LastSuccess": ZERO_TIME, "LastError": ZERO_TIME, "LastErrorMessage": "",
            })
        } else {
            let tokens = st.secondary.as_ref().map(|s| s.token_replication).unwrap_or(false);
            let (last_error, message) = match &st.replication_fault {
                Some(f) => (f.at.round_subsecs(0).to_rfc3339_opts(chrono::SecondsFormat::Secs, true), f.message.clone()),
                None => (ZERO_TIME.to_string(), String::new()),
            };
            let [policies, roles, token_index] = st.replicated_indexes();
            json!({
                "Enabled": true, "Running": true, "SourceDatacenter": PRIMARY_DC,
                "ReplicationType": if tokens { "tokens" } else { "policies" },
                "ReplicatedIndex": policies,
                "ReplicatedRoleIndex": roles,
                "ReplicatedTokenIndex": if tokens { token_index } else { 0 },
                "LastSuccess": st.last_replication.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                "LastError": last_error, "LastErrorMessage": message,
            })
        };
        Ok(json_response(&v, None))
    }
    .await)
}

fn require_local_tokens(st: &model::State, dc: &str) -> Result<(), ApiError> {
    if dc != PRIMARY_DC
        && !st
            .secondary
            .as_ref()
            .map(|s| s.token_replication)
            .unwrap_or(false)
    {
        return Err(ApiError::internal(
            "Token replication is required for auth methods to function",
        ));
    }
    Ok(())
}

/// POST /v1/acl/login: exchange an auth method's bearer token for a local ACL token.
async fn login(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        if method != Method::POST {
            return Err(ApiError::method_not_allowed(&method));
        }
        const WHAT: &str = "Failed to decode request body";
        let obj = decode_body(&body, WHAT)?;
        let auth_method = str_field(&obj, "AuthMethod", WHAT)?;
        let bearer = str_field(&obj, "BearerToken", WHAT)?;
        let body_ns = str_field(&obj, "Namespace", WHAT)?;
        let meta = meta_field(&obj, WHAT)?;
        let token = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            let ns = ctx.namespace(st, &body_ns)?;
            require_local_tokens(st, &ctx.dc)?;
            let m = st
                .auth_methods
                .iter()
                .find(|m| m.name == auth_method && m.namespace == ns)
                .cloned()
                .ok_or_else(|| {
                    ApiError::new(
                        403,
                        format!("ACL not found: auth method {auth_method:?} not found"),
                    )
                })?;
            let identity = match m.kind.as_str() {
                "kubernetes" => auth::kubernetes_identity(&m, &bearer)?,
                other => {
                    return Err(ApiError::internal(format!(
                        "ValidateLogin is incompatible with type {other:?}"
                    )))
                }
            };
            auth::login_token(st, &m, &identity, &meta, &ctx.dc, "token created via login")
        })?;
        let enterprise = c.lock().enterprise;
        Ok(json_response(&token.to_api(enterprise), None))
    }
    .await)
}

/// POST /v1/acl/logout: destroy a token created by login, identified by its secret.
async fn logout(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::POST {
            return Err(ApiError::method_not_allowed(&method));
        }
        c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            let secret = ctx
                .token
                .clone()
                .ok_or_else(|| ApiError::new(401, "Supplied token does not exist"))?;
            require_local_tokens(st, &ctx.dc)?;
            let t = st
                .token_by_secret(&secret, &ctx.dc)
                .ok_or_else(ApiError::acl_not_found)?;
            if t.auth_method.is_empty() {
                return Err(ApiError::new(403, "Permission denied"));
            }
            let accessor = t.accessor_id.clone();
            st.tokens.retain(|t| t.accessor_id != accessor);
            st.tokens_index = st.bump();
            Ok(())
        })?;
        Ok(json_response(&json!(true), None))
    }
    .await)
}

fn anonymous_token(enterprise: bool) -> Value {
    let t = Token {
        accessor_id: ANONYMOUS_ACCESSOR.into(),
        secret_id: "anonymous".into(),
        description: "Anonymous Token".into(),
        policies: Vec::new(),
        roles: Vec::new(),
        service_identities: Vec::new(),
        node_identities: Vec::new(),
        local: false,
        datacenter: PRIMARY_DC.into(),
        auth_method: String::new(),
        auth_method_namespace: String::new(),
        namespace: "default".into(),
        expiration_time: None,
        create_time: chrono::DateTime::UNIX_EPOCH,
        create_index: 1,
        modify_index: 1,
    };
    t.to_api(enterprise)
}

/// GET /v1/acl/token/self: the caller's own token (no privilege needed beyond holding it).
async fn token_self(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(ApiError::method_not_allowed(&method));
        }
        let st = c.lock();
        let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
        let v = match ctx.token.as_deref() {
            None => anonymous_token(st.enterprise),
            Some(secret) => st
                .token_by_secret(secret, &ctx.dc)
                .ok_or_else(ApiError::acl_not_found)?
                .to_api(st.enterprise),
        };
        Ok(json_response(&v, Some(st.tokens_index)))
    }
    .await)
}

/// GET /v1/acl/tokens (acl:read): token stubs; its index is comparable with
/// ReplicatedTokenIndex.
async fn token_list(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(ApiError::method_not_allowed(&method));
        }
        c.blocking(raw.as_deref(), |st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "read")?;
            let authmethod = ctx.query("authmethod").unwrap_or("");
            let items: Vec<Value> = st
                .tokens
                .iter()
                .filter(|t| (!t.local || t.datacenter == ctx.dc) && !t.expired())
                .filter(|t| authmethod.is_empty() || t.auth_method == authmethod)
                .map(|t| t.to_stub(st.enterprise))
                .collect();
            Ok((Value::Array(items), st.tokens_index))
        })
        .await
    }
    .await)
}

/// GET /v1/acl/policies (acl:read); its index is comparable with ReplicatedIndex.
async fn policy_list(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(ApiError::method_not_allowed(&method));
        }
        c.blocking(raw.as_deref(), |st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "read")?;
            let items: Vec<Value> = st
                .policies
                .iter()
                .map(|p| {
                    let mut v = p.to_api();
                    if let Some(m) = v.as_object_mut() {
                        m.remove("Rules");
                    }
                    v
                })
                .collect();
            Ok((Value::Array(items), st.policies_index))
        })
        .await
    }
    .await)
}

/// PUT /v1/acl/token (acl:write): create a token with policy links (by ID or Name),
/// service identities and locality.
async fn token_create(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        if method != Method::PUT {
            return Err(ApiError::method_not_allowed(&method));
        }
        const WHAT: &str = "Token decoding failed";
        let obj = decode_body(&body, WHAT)?;
        let token = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "write")?;
            let (policies, services) = token_links(st, &obj)?;
            let expiration_time = token_expiration(&obj)?;
            let local = matches!(field(&obj, "Local"), Some(Value::Bool(true)));
            let namespace = ctx.namespace(st, &str_field(&obj, "Namespace", WHAT)?)?;
            let roles = crud::role_links(st, &obj, &namespace)?;
            let secret = str_field(&obj, "SecretID", WHAT)?;
            let accessor = str_field(&obj, "AccessorID", WHAT)?;
            for (field_name, given) in [("SecretID", &secret), ("AccessorID", &accessor)] {
                if !given.is_empty() {
                    parse_uuid(given).map_err(|_| {
                        ApiError::internal(format!(
                            "Invalid Token: {field_name} is not a valid UUID"
                        ))
                    })?;
                    if st
                        .tokens
                        .iter()
                        .any(|t| &t.secret_id == given || &t.accessor_id == given)
                    {
                        return Err(ApiError::internal(format!(
                            "Invalid Token: {field_name} is already in use"
                        )));
                    }
                }
            }
            let index = st.bump();
            let t = Token {
                accessor_id: if accessor.is_empty() {
                    uuid::Uuid::new_v4().to_string()
                } else {
                    accessor
                },
                secret_id: if secret.is_empty() {
                    uuid::Uuid::new_v4().to_string()
                } else {
                    secret
                },
                description: str_field(&obj, "Description", WHAT)?,
                policies,
                roles,
                service_identities: services,
                node_identities: Vec::new(),
                local,
                datacenter: ctx.dc.clone(),
                auth_method: String::new(),
                auth_method_namespace: String::new(),
                namespace,
                expiration_time,
                create_time: chrono::Utc::now(),
                create_index: index,
                modify_index: index,
            };
            st.tokens.push(t.clone());
            st.tokens_index = index;
            Ok(t)
        })?;
        let enterprise = c.lock().enterprise;
        Ok(json_response(&token.to_api(enterprise), None))
    }
    .await)
}

/// `ExpirationTTL` (a Go duration string, or nanoseconds) or `ExpirationTime` (RFC 3339) of a
/// token create. The TTL must be between 1 minute and 24 hours, as the real service's default
/// limits say.
fn token_expiration(
    obj: &Map<String, Value>,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, ApiError> {
    let ttl = match field(obj, "ExpirationTTL") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some((
            s.clone(),
            crate::scheduler::wire::parse_go_duration(s).ok_or_else(|| {
                ApiError::new(
                    400,
                    format!("Token decoding failed: time: invalid duration {s:?}"),
                )
            })?,
        )),
        Some(Value::Number(n)) => {
            let ns = n.as_u64().unwrap_or(0);
            let d = std::time::Duration::from_nanos(ns);
            (ns > 0).then(|| (format!("{}s", d.as_secs()), d))
        }
        Some(v) => {
            return Err(ApiError::new(
                400,
                format!(
                    "Token decoding failed: cannot decode {} as a duration",
                    crate::scheduler::wire::go_kind(v)
                ),
            ))
        }
    };
    if let Some((text, d)) = ttl {
        if d < std::time::Duration::from_secs(60) || d > std::time::Duration::from_secs(86_400) {
            return Err(ApiError::internal(format!(
                "Token Expiration TTL '{text}' should be between 1m0s and 24h0m0s"
            )));
        }
        return Ok(Some(
            chrono::Utc::now() + chrono::Duration::from_std(d).unwrap_or_default(),
        ));
    }
    match field(obj, "ExpirationTime") {
        Some(Value::String(s)) if !s.is_empty() => chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| Some(t.with_timezone(&chrono::Utc)))
            .map_err(|e| ApiError::new(400, format!("Token decoding failed: {e}"))),
        _ => Ok(None),
    }
}

/// The policy links (by ID or Name) and service identities of a token write body.
fn token_links(
    st: &model::State,
    obj: &Map<String, Value>,
) -> Result<(Vec<model::Link>, Vec<String>), ApiError> {
    const WHAT: &str = "Token decoding failed";
    let mut policies = Vec::new();
    if let Some(Value::Array(links)) = field(obj, "Policies") {
        for l in links.iter().filter_map(Value::as_object) {
            let id = str_field(l, "ID", WHAT)?;
            let name = str_field(l, "Name", WHAT)?;
            let p = st
                .policies
                .iter()
                .find(|p| (!id.is_empty() && p.id == id) || (id.is_empty() && p.name == name))
                .ok_or_else(|| {
                    ApiError::new(
                        400,
                        format!(
                            "Invalid Policy: cannot find policy {}",
                            if id.is_empty() { name } else { id }
                        ),
                    )
                })?;
            policies.push(model::Link {
                id: p.id.clone(),
                name: p.name.clone(),
            });
        }
    }
    let mut services = Vec::new();
    if let Some(Value::Array(ids)) = field(obj, "ServiceIdentities") {
        for s in ids.iter().filter_map(Value::as_object) {
            services.push(str_field(s, "ServiceName", WHAT)?);
        }
    }
    Ok((policies, services))
}

/// PUT /v1/acl/token/:accessor (acl:write): replace a token's description, policies and
/// service identities. The locality cannot change.
fn token_update(
    st: &mut model::State,
    ctx: &Ctx,
    id: &str,
    obj: &Map<String, Value>,
) -> Result<Token, ApiError> {
    const WHAT: &str = "Token decoding failed";
    ctx.authorize(st, "write")?;
    let body_id = str_field(obj, "AccessorID", WHAT)?;
    if !body_id.is_empty() && body_id != id {
        return Err(ApiError::new(
            400,
            "Token Accessor ID in URL and payload do not match",
        ));
    }
    let (policies, services) = token_links(st, obj)?;
    let ns = ctx.namespace(st, &str_field(obj, "Namespace", WHAT)?)?;
    let roles = crud::role_links(st, obj, &ns)?;
    let description = str_field(obj, "Description", WHAT)?;
    let local = field(obj, "Local").and_then(Value::as_bool);
    let index = st.bump();
    let t = st
        .tokens
        .iter_mut()
        .find(|t| t.accessor_id == id && (!t.local || t.datacenter == ctx.dc))
        .ok_or_else(|| ApiError::internal(format!("Cannot find token {id:?}")))?;
    if local.is_some_and(|l| l != t.local) {
        return Err(ApiError::new(
            400,
            format!("Cannot toggle local mode of {id}"),
        ));
    }
    t.description = description;
    t.policies = policies;
    t.roles = roles;
    t.service_identities = services;
    t.modify_index = index;
    let t = t.clone();
    st.tokens_index = index;
    Ok(t)
}

/// PUT /v1/acl/token/:accessor/clone (acl:write): a new token with the same links and
/// locality, and the given description (the original's when none).
async fn token_clone(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    run(async {
        if method != Method::PUT {
            return Err(ApiError::method_not_allowed(&method));
        }
        const WHAT: &str = "Token decoding failed";
        let obj = decode_body(&body, WHAT)?;
        let description = str_field(&obj, "Description", WHAT)?;
        let t = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "write")?;
            let mut t = st
                .tokens
                .iter()
                .find(|t| t.accessor_id == id && (!t.local || t.datacenter == ctx.dc))
                .cloned()
                .ok_or_else(|| ApiError::new(403, "ACL not found"))?;
            let index = st.bump();
            t.accessor_id = uuid::Uuid::new_v4().to_string();
            t.secret_id = uuid::Uuid::new_v4().to_string();
            if !description.is_empty() {
                t.description = description;
            }
            t.auth_method = String::new();
            t.create_time = chrono::Utc::now();
            t.create_index = index;
            t.modify_index = index;
            st.tokens.push(t.clone());
            st.tokens_index = index;
            Ok(t)
        })?;
        let enterprise = c.lock().enterprise;
        Ok(json_response(&t.to_api(enterprise), None))
    }
    .await)
}

/// GET (acl:read), PUT (acl:write) or DELETE (acl:write) /v1/acl/token/:accessor.
async fn token_by_accessor(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    run(async {
        match method {
            Method::GET => {
                c.blocking(raw.as_deref(), |st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "read")?;
                    let t = st
                        .tokens
                        .iter()
                        .find(|t| {
                            t.accessor_id == id
                                && (!t.local || t.datacenter == ctx.dc)
                                && !t.expired()
                        })
                        .ok_or_else(|| {
                            ApiError::new(404, "Requested token does not exist: ACL not found")
                        })?;
                    Ok((t.to_api(st.enterprise), t.modify_index))
                })
                .await
            }
            Method::PUT => {
                let obj = decode_body(&body, "Token decoding failed")?;
                let t = c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    token_update(st, &ctx, &id, &obj)
                })?;
                let enterprise = c.lock().enterprise;
                Ok(json_response(&t.to_api(enterprise), None))
            }
            Method::DELETE => {
                c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    let before = st.tokens.len();
                    st.tokens
                        .retain(|t| !(t.accessor_id == id && (!t.local || t.datacenter == ctx.dc)));
                    if st.tokens.len() == before {
                        return Err(ApiError::new(404, "Cannot find token to delete"));
                    }
                    st.tokens_index = st.bump();
                    Ok(())
                })?;
                Ok(json_response(&json!(true), None))
            }
            other => Err(ApiError::method_not_allowed(&other)),
        }
    }
    .await)
}

/// GET /v1/status/leader: clients use it as a liveness probe.
async fn status_leader() -> Response {
    json_response(&Value::String("127.0.0.1:8300".into()), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_checks_follow_go_uuid() {
        assert!(parse_uuid("0f4b1b4e-8a39-4a6c-9a4c-7d5c2f7b8d11").is_ok());
        assert_eq!(
            parse_uuid("abc").unwrap_err(),
            "uuid string is wrong length"
        );
        assert_eq!(
            parse_uuid("0f4b1b4e08a39-4a6c-9a4c-7d5c2f7b8d11").unwrap_err(),
            "uuid is improperly formatted"
        );
    }
}
