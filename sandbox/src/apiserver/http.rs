//! HTTP front: bearer-token authentication, impersonation and RBAC authorization (see
//! [`super::rbac`]), URL routing (discovery, OpenAPI, resource paths), content
//! negotiation (Table, PartialObjectMetadata, aggregated discovery) and response rendering.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

use super::error::{json_response, ApiError};
use super::gc;
use super::ops::{self, Ctx, DeleteOpts, FieldValidation, Outcome};
use super::patch::{self, PatchType};
use super::protobuf;
use super::rbac::{self, Attributes, UserInfo};
use super::registry::ResourceInfo;
use super::schema;
use super::selector::FieldSelector;
use super::store::State;
use super::watch::{self, Render};
use super::write_options::{self, Write};

/// What every request handler shares.
pub struct Shared {
    pub state: Arc<Mutex<State>>,
    pub token: String,
    pub addr: String,
    pub state_dir: Option<PathBuf>,
    /// Bumped to end every open watch.
    pub stop: tokio::sync::watch::Sender<u64>,
    /// Set by shutdown: connections kept alive from before answer 503 and close, so clients
    /// reconnect (to a restarted server on the same port).
    pub stopped: std::sync::atomic::AtomicBool,
    /// Held for a whole snapshot write, so the final one at shutdown waits for a periodic one
    /// still writing (else a restart can read the old file and miss the last objects).
    pub saving: std::sync::Mutex<()>,
    /// The service-account token signing key.
    pub signer: super::tokens::Signer,
    /// The OpenAPI documents, built once per set of CRDs.
    pub openapi: super::openapi_docs::OpenApiDocs,
    /// Watches made to lag behind the writes, for tests ([`watch::Lags`]).
    pub lags: Arc<watch::Lags>,
}

impl Shared {
    /// Simulate etcd compaction: forget the watch history and end every open watch, so clients
    /// re-watch from their last resourceVersion, get 410 Gone, and relist.
    pub fn expire_watches(&self) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .compact();
        self.stop.send_modify(|g| *g += 1);
    }
}

const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// The query's parameters; a repeated one keeps its first value, the one kube's parameter
/// conversions read.
pub fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in q.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let dec = |s: &str| {
            percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .to_string()
        };
        out.entry(dec(k)).or_insert_with(|| dec(v));
    }
    out
}

/// One media range of an Accept header with its parameters.
struct MediaRange {
    params: HashMap<String, String>,
}

fn accept_ranges(headers: &HeaderMap) -> Vec<MediaRange> {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    accept
        .split(',')
        .map(|r| {
            let mut parts = r.split(';');
            let _mime = parts.next();
            let params = parts
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect();
            MediaRange { params }
        })
        .collect()
}

const OPENAPI_V2_PB: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

enum OpenApiV2Media {
    Json,
    Protobuf,
}

/// `/openapi/v2` negotiates its media type as kube-openapi's handler does: the first Accept
/// clause matching JSON or the `com.github.proto-openapi.spec.v2` protobuf (both the
/// `@v1.0+protobuf` spelling client-go sends and `.v1.0+protobuf`) wins; no header means
/// `*/*` (JSON); nothing acceptable is 406 with an empty body.
fn openapi_v2_media(headers: &HeaderMap) -> Option<OpenApiV2Media> {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if accept.trim().is_empty() {
        return Some(OpenApiV2Media::Json);
    }
    accept
        .split(',')
        .find_map(|r| match r.split(';').next().unwrap_or_default().trim() {
            "application/json" | "application/*" | "*/*" => Some(OpenApiV2Media::Json),
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            | "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" => {
                Some(OpenApiV2Media::Protobuf)
            }
            _ => None,
        })
}

fn not_acceptable() -> Response {
    let mut r = StatusCode::NOT_ACCEPTABLE.into_response();
    r.headers_mut()
        .insert("vary", HeaderValue::from_static("Accept"));
    r
}

/// What representation the client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum As {
    Object,
    Table,
    Partial,
}

fn wanted(headers: &HeaderMap) -> As {
    for r in accept_ranges(headers) {
        match r.params.get("as").map(String::as_str) {
            Some("Table") if r.params.get("g").map(String::as_str) == Some("meta.k8s.io") => {
                return As::Table
            }
            Some("PartialObjectMetadata") | Some("PartialObjectMetadataList") => {
                return As::Partial
            }
            None => return As::Object,
            _ => {}
        }
    }
    As::Object
}

/// `Some("apidiscovery.k8s.io/v2")` when aggregated discovery is acceptable.
fn wants_aggregated(headers: &HeaderMap) -> Option<&'static str> {
    for r in accept_ranges(headers) {
        if r.params.get("as").map(String::as_str) == Some("APIGroupDiscoveryList")
            && r.params.get("g").map(String::as_str) == Some("apidiscovery.k8s.io")
        {
            match r.params.get("v").map(String::as_str) {
                Some("v2") => return Some("v2"),
                Some("v2beta1") => return Some("v2beta1"),
                _ => {}
            }
        } else if !r.params.contains_key("as") {
            return None;
        }
    }
    None
}

fn user_agent_manager(headers: &HeaderMap) -> String {
    let ua = headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let m: String = ua
        .split('/')
        .next()
        .unwrap_or_default()
        .chars()
        .take(128)
        .collect();
    if m.is_empty() {
        "unknown".into()
    } else {
        m
    }
}

/// The state lock. A panic while holding it (a bug) must not take the server down for good,
/// so a poisoned lock is recovered: every write leaves the state consistent before it can fail.
fn lock(sh: &Shared) -> Result<std::sync::MutexGuard<'_, State>, ApiError> {
    Ok(sh.state.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The single entry point: every path goes through here.
pub async fn handle(AxState(sh): AxState<Arc<Shared>>, req: Request) -> Response {
    if sh.stopped.load(std::sync::atomic::Ordering::SeqCst) {
        let mut r =
            ApiError::new(503, "ServiceUnavailable", "apiserver is shutting down").into_response();
        r.headers_mut()
            .insert("connection", HeaderValue::from_static("close"));
        return r;
    }
    match handle_inner(&sh, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Who sent the request, as kube-apiserver's authenticators decide: the admin token is
/// `system:masters`; a service-account token this server signed is its ServiceAccount; a
/// request without a bearer token (no `Authorization` header, another scheme, an empty token)
/// is `system:anonymous`, which RBAC then allows only the public paths. `None`: a token that is
/// not valid, refused with 401 whatever the path.
fn authenticate(sh: &Shared, headers: &HeaderMap) -> Option<UserInfo> {
    let anonymous = Some(UserInfo::anonymous());
    let Some(v) = headers.get("authorization") else {
        return anonymous;
    };
    // As the bearer-token authenticator reads it: `Bearer <token>[ ...]`.
    let v = v.to_str().unwrap_or_default().trim();
    let mut parts = v.splitn(3, ' ');
    let (Some(scheme), Some(tok)) = (parts.next(), parts.next()) else {
        return anonymous;
    };
    if !scheme.eq_ignore_ascii_case("bearer") || tok.is_empty() {
        return anonymous;
    }
    if tok == sh.token {
        return Some(UserInfo::admin());
    }
    // Only a JWT can be a service-account token: skip the lock and the signature otherwise.
    if tok.split('.').count() != 3 {
        return None;
    }
    let st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
    super::tokens::authenticate(&sh.signer, &st, tok, &[])
        .ok()
        .map(|(user, _)| user)
}

async fn handle_inner(sh: &Arc<Shared>, req: Request) -> Result<Response, ApiError> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let uri = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| path.clone());
    let raw_query = req.uri().query().map(str::to_string);
    let query = parse_query(raw_query.as_deref());
    let headers = req.headers().clone();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().to_string())
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();

    let decoded_path = percent_decode_str(&path).decode_utf8_lossy().to_string();
    if let Some(text) = rbac::request_info_error(&decoded_path, &uri) {
        return Ok((
            StatusCode::INTERNAL_SERVER_ERROR,
            [
                ("content-type", "text/plain; charset=utf-8"),
                ("x-content-type-options", "nosniff"),
            ],
            format!("{text}\n"),
        )
            .into_response());
    }
    let Some(requester) = authenticate(sh, &headers) else {
        return Err(ApiError::unauthorized());
    };
    let user = rbac::impersonate(&*lock(sh)?, requester, &headers)?;
    let attrs = Attributes::from_request(user, method.as_str(), &decoded_path, &query);
    rbac::check(&*lock(sh)?, &attrs)?;
    // Public info, which the bootstrap policy grants everyone (`system:public-info-viewer`)
    // and ServiceAccounts (`system:service-account-issuer-discovery`).
    match segs.as_slice() {
        ["version"] => return Ok(json_response(StatusCode::OK, &version())),
        ["healthz"] | ["livez"] | ["readyz"] => return Ok((StatusCode::OK, "ok").into_response()),
        _ => {}
    }
    if let Some(r) = super::tokens::public_route(&sh.signer, &sh.addr, &segs) {
        return Ok(r);
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if content_type.contains("cbor") {
        return Err(ApiError::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ));
    }
    let body = axum::body::to_bytes(req.into_body(), BODY_LIMIT)
        .await
        .map_err(|e| ApiError::new(413, "RequestEntityTooLarge", e.to_string()))?;

    match segs.as_slice() {
        ["api"] => {
            if let Some(v) = wants_aggregated(&headers) {
                let doc = lock(sh)?
                    .registry
                    .aggregated(true, &format!("apidiscovery.k8s.io/{v}"));
                return Ok(aggregated_response(&doc, v));
            }
            Ok(json_response(
                StatusCode::OK,
                &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": sh.addr}]}),
            ))
        }
        ["apis"] => {
            let st = lock(sh)?;
            if let Some(v) = wants_aggregated(&headers) {
                let doc = st
                    .registry
                    .aggregated(false, &format!("apidiscovery.k8s.io/{v}"));
                return Ok(aggregated_response(&doc, v));
            }
            Ok(json_response(StatusCode::OK, &st.registry.group_list()))
        }
        ["api", "v1"] => {
            let st = lock(sh)?;
            Ok(json_response(
                StatusCode::OK,
                &st.registry
                    .resource_list("", "v1")
                    .ok_or_else(ApiError::no_route)?,
            ))
        }
        ["apis", g] => {
            let st = lock(sh)?;
            Ok(json_response(
                StatusCode::OK,
                &st.registry.group(g).ok_or_else(ApiError::no_route)?,
            ))
        }
        ["apis", g, v] => {
            let st = lock(sh)?;
            Ok(json_response(
                StatusCode::OK,
                &st.registry
                    .resource_list(g, v)
                    .ok_or_else(ApiError::no_route)?,
            ))
        }
        ["openapi", "v2"] => {
            let st = lock(sh)?;
            match openapi_v2_media(&headers) {
                Some(OpenApiV2Media::Json) => Ok(sh.openapi.v2_json(&st, &headers)),
                Some(OpenApiV2Media::Protobuf) => {
                    let mut r = (StatusCode::OK, sh.openapi.v2_protobuf(&st)).into_response();
                    r.headers_mut()
                        .insert("content-type", HeaderValue::from_static(OPENAPI_V2_PB));
                    r.headers_mut()
                        .insert("vary", HeaderValue::from_static("Accept"));
                    Ok(r)
                }
                None => Ok(not_acceptable()),
            }
        }
        ["openapi", "v3"] => Ok(sh.openapi.v3_index(&*lock(sh)?, &headers)),
        ["openapi", "v3", rest @ ..] => {
            let gv = match rest {
                ["api", v] => v.to_string(),
                ["apis", g, v] => format!("{g}/{v}"),
                _ => return Err(ApiError::no_route()),
            };
            let hash = query.get("hash").map(String::as_str);
            sh.openapi
                .v3_group_version(&*lock(sh)?, &gv, &rest.join("/"), hash, &headers)
        }
        ["api", "v1", rest @ ..] | ["apis", _, _, rest @ ..] => {
            let (g, v) = match segs.as_slice() {
                ["apis", g, v, ..] => (*g, *v),
                _ => ("", "v1"),
            };
            // Typed clients of kubectl send protobuf; decode it to JSON (responses stay JSON).
            let body = if content_type.starts_with("application/vnd.kubernetes.protobuf")
                && !body.is_empty()
            {
                bytes::Bytes::from(
                    serde_json::to_vec(&protobuf::decode(&body)?).unwrap_or_default(),
                )
            } else {
                body
            };
            {
                let st = lock(sh)?;
                if let Some(r) = super::tokens::route(&sh.signer, &st, &method, &segs, &body) {
                    return r;
                }
                if let Some(r) = super::reviews::route(&st, &attrs.user, &method, &segs, &body) {
                    return r;
                }
            }
            let q = (query, raw_query.as_deref());
            resource(sh, &method, g, v, rest, q, &headers, &body, &attrs)
        }
        _ => Err(ApiError::no_route()),
    }
}

fn aggregated_response(doc: &Value, v: &str) -> Response {
    let mut r = json_response(StatusCode::OK, doc);
    if let Ok(ct) = HeaderValue::from_str(&format!(
        "application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"
    )) {
        r.headers_mut().insert("content-type", ct);
    }
    r
}

/// `/version`: a v1.33 server, so Google's kubectl dispatcher picks kubectl 1.33.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "emulationMajor": "1", "emulationMinor": "33",
        "minCompatibilityMajor": "1", "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0-quartet-dev", "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.2",
        "compiler": "gc", "platform": "linux/amd64"
    })
}

/// Parsed resource URL.
struct Target {
    info: ResourceInfo,
    ns: String,
    name: Option<String>,
    sub: Option<String>,
    watch: bool,
}

fn target(st: &State, group: &str, version: &str, rest: &[&str]) -> Result<Target, ApiError> {
    let (watch, rest) = match rest.first() {
        Some(&"watch") => (true, &rest[1..]),
        _ => (false, rest),
    };
    let (ns, resource, name, sub) = match rest {
        ["namespaces", ns, r, tail @ ..]
            if !(group.is_empty() && tail.is_empty() && (*r == "status" || *r == "finalize")) =>
        {
            (
                ns.to_string(),
                *r,
                tail.first().map(|s| s.to_string()),
                tail.get(1).map(|s| s.to_string()),
            )
        }
        [r, tail @ ..] => (
            String::new(),
            *r,
            tail.first().map(|s| s.to_string()),
            tail.get(1).map(|s| s.to_string()),
        ),
        [] => return Err(ApiError::no_route()),
    };
    let too_long = match rest {
        ["namespaces", _, r, tail @ ..] if ns.as_str() != "" && *r == resource => tail.len() > 2,
        [_, tail @ ..] => tail.len() > 2,
        _ => false,
    };
    if too_long {
        return Err(ApiError::no_route());
    }
    let info = st
        .registry
        .get(group, resource)
        .filter(|i| i.versions.iter().any(|v| v == version) && !i.create_only)
        .cloned()
        .ok_or_else(ApiError::no_route)?;
    if !ns.is_empty() && !info.namespaced {
        return Err(ApiError::no_route());
    }
    if let Some(s) = &sub {
        let ok = (s == "status" && info.status_subresource)
            || (s == "finalize" && info.plural == "namespaces" && info.group.is_empty());
        if !ok {
            return Err(ApiError::no_route());
        }
    }
    Ok(Target {
        info,
        ns,
        name,
        sub,
        watch,
    })
}

#[allow(clippy::too_many_arguments)]
fn resource(
    sh: &Arc<Shared>,
    method: &Method,
    group: &str,
    version: &str,
    rest: &[&str],
    (query, raw_query): (HashMap<String, String>, Option<&str>),
    headers: &HeaderMap,
    body: &[u8],
    attrs: &Attributes,
) -> Result<Response, ApiError> {
    let mut st = lock(sh)?;
    let t = target(&st, group, version, rest)?;
    let validation = match query.get("fieldValidation").map(String::as_str) {
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        // Anything else is refused by the write's options check; reads ignore it.
        _ => FieldValidation::Warn,
    };
    let ctx = Ctx {
        info: t.info.clone(),
        version: version.to_string(),
        ns: t.ns.clone(),
        sub: t.sub.clone(),
        manager: query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .cloned()
            .unwrap_or_else(|| user_agent_manager(headers)),
        dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
        validation,
        query: query.clone(),
        apply: false,
    };
    let as_ = wanted(headers);
    let crd = ctx.info.crd.as_ref().and_then(|n| st.crd(n)).cloned();
    let info = ctx.info.clone();
    let render_one = {
        let info = info.clone();
        let version = version.to_string();
        let include = query
            .get("includeObject")
            .cloned()
            .unwrap_or_else(|| "Metadata".into());
        let as_ = as_.clone();
        move |o: &Value| -> Value {
            match as_ {
                As::Table => schema::table(
                    crd.as_ref(),
                    &version,
                    &info.plural,
                    std::slice::from_ref(o),
                    json!({}),
                    &include,
                ),
                As::Partial => partial(o),
                As::Object => o.clone(),
            }
        }
    };
    let is_watch = t.watch || ops::watch_requested(&query);

    let out: Result<Response, ApiError> = match (method.as_str(), &t.name) {
        ("GET", None) if is_watch => {
            drop(st);
            let render: Render = Arc::new(render_one);
            return watch::watch(&sh.state, &sh.lags, ctx, sh.stop.subscribe(), render);
        }
        // Only the `/watch/` path watches one object: a named GET with `?watch=true` is a
        // plain get on a real server. Its field selector may only repeat the name.
        ("GET", Some(name)) if t.watch => {
            let mut ctx = ctx;
            let given = ctx
                .query
                .get("fieldSelector")
                .map(|f| FieldSelector::parse_terms(f).map_err(ApiError::bad_request));
            if let Some(given) = given.transpose()?.filter(|f| !f.is_empty()) {
                if given.exact_match("metadata.name") != Some(name.as_str()) {
                    return Err(ApiError::bad_request(
                        "fieldSelector metadata.name doesn't match requested name",
                    ));
                }
            } else {
                ctx.query
                    .insert("fieldSelector".into(), format!("metadata.name={name}"));
            }
            drop(st);
            let render: Render = Arc::new(render_one);
            return watch::watch(&sh.state, &sh.lags, ctx, sh.stop.subscribe(), render);
        }
        ("GET", None) => {
            let (items, meta) = ops::list(&st, &ctx)?;
            let body = match as_ {
                As::Table => {
                    let crd = ctx.info.crd.as_ref().and_then(|n| st.crd(n)).cloned();
                    let include = query
                        .get("includeObject")
                        .cloned()
                        .unwrap_or_else(|| "Metadata".into());
                    schema::table(crd.as_ref(), version, &info.plural, &items, meta, &include)
                }
                As::Partial => json!({
                    "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                    "items": items.iter().map(partial).collect::<Vec<_>>(),
                }),
                As::Object => {
                    json!({"kind": info.list_kind, "apiVersion": info.api_version(version), "metadata": meta, "items": items})
                }
            };
            Ok(json_response(StatusCode::OK, &body))
        }
        ("GET", Some(name)) => {
            let obj = st
                .get(&info.key(), &ctx.ns, name)
                .ok_or_else(|| ApiError::not_found(&info.plural, &info.group, name))?;
            let crd = ctx.info.crd.as_ref().and_then(|n| st.crd(n));
            let obj = ops::read(&info, version, crd, obj);
            let body = match as_ {
                As::Table => {
                    let crd = ctx.info.crd.as_ref().and_then(|n| st.crd(n)).cloned();
                    let include = query
                        .get("includeObject")
                        .cloned()
                        .unwrap_or_else(|| "Metadata".into());
                    let meta =
                        json!({"resourceVersion": obj["metadata"]["resourceVersion"].clone()});
                    schema::table(
                        crd.as_ref(),
                        version,
                        &info.plural,
                        std::slice::from_ref(&obj),
                        meta,
                        &include,
                    )
                }
                As::Partial => partial(&obj),
                As::Object => obj,
            };
            Ok(json_response(StatusCode::OK, &body))
        }
        ("POST", None) => {
            if info.namespaced && ctx.ns.is_empty() {
                return Err(ApiError::no_route());
            }
            write_options::check(Write::Create, raw_query)?;
            let obj = parse_body(body)?;
            let o = ops::create(&mut st, &ctx, obj, false)?;
            gc::sweep(&mut st);
            Ok(outcome(rendered(o, &as_, render_one)))
        }
        ("PUT", Some(name)) => {
            write_options::check(Write::Update, raw_query)?;
            let obj = parse_body(body)?;
            let o = ops::update(&mut st, &ctx, name, obj)?;
            gc::sweep(&mut st);
            Ok(outcome(rendered(o, &as_, render_one)))
        }
        ("PATCH", Some(name)) => {
            let ct = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let ptype = PatchType::from_content_type(ct)
                .ok_or_else(|| patch::unsupported(info.is_custom()))?;
            write_options::check(Write::Patch(ptype), raw_query)?;
            // An apply that creates the object is a create too (the real server authorizes it
            // when the update turns out to be a create): `patch` alone is not enough.
            if ptype == PatchType::Apply
                && ctx.sub.is_none()
                && st.get(&info.key(), &ctx.ns, name).is_none()
            {
                let create = Attributes {
                    verb: "create".into(),
                    ..attrs.clone()
                };
                rbac::check(&st, &create)?;
            }
            let o = ops::patch(&mut st, &ctx, name, ptype, body)?;
            gc::sweep(&mut st);
            Ok(outcome(rendered(o, &as_, render_one)))
        }
        ("DELETE", Some(name)) => {
            if ctx.sub.is_some() {
                return Err(ApiError::method_not_allowed());
            }
            let opts = DeleteOpts::parse(body, &query)?;
            let res = ops::delete_object(&mut st, &info, &ctx.ns, name, &opts, ctx.dry_run)?;
            gc::sweep(&mut st);
            let obj = res.unwrap_or_default();
            let still_there = st.get(&info.key(), &ctx.ns, name).is_some();
            if info.return_deleted_object || still_there {
                Ok(json_response(
                    StatusCode::OK,
                    &ops::output(&info, version, &obj),
                ))
            } else {
                let mut details = json!({"name": name, "kind": info.plural, "uid": obj["metadata"]["uid"].clone()});
                if !info.group.is_empty() {
                    details["group"] = json!(info.group);
                }
                Ok(json_response(
                    StatusCode::OK,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
                ))
            }
        }
        ("DELETE", None) => {
            let opts = DeleteOpts::parse(body, &query)?;
            let (items, meta) = ops::list(&st, &ctx)?;
            let mut deleted = Vec::new();
            for it in items {
                let ns = it["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let name = it["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if let Ok(Some(o)) =
                    ops::delete_object(&mut st, &info, &ns, &name, &opts, ctx.dry_run)
                {
                    deleted.push(ops::output(&info, version, &o));
                }
            }
            gc::sweep(&mut st);
            Ok(json_response(
                StatusCode::OK,
                &json!({"kind": info.list_kind, "apiVersion": info.api_version(version), "metadata": meta, "items": deleted}),
            ))
        }
        _ => Err(ApiError::method_not_allowed()),
    };
    out
}

/// A write's answer in the representation asked for. kube-apiserver transforms what every verb
/// returns (`transformResponseObject`), not only reads: a write asked with
/// `as=PartialObjectMetadata` is answered with the metadata of what it wrote (kube's
/// `patch_metadata`, the operator's status writes).
fn rendered(mut o: Outcome, as_: &As, render: impl Fn(&Value) -> Value) -> Outcome {
    if *as_ != As::Object && o.obj["kind"] != "Status" {
        o.obj = render(&o.obj);
    }
    o
}

fn partial(o: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"].clone()})
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let y: serde_yaml::Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the object provided is unrecognized: {e}")))?;
    serde_json::to_value(y).map_err(|e| ApiError::bad_request(e.to_string()))
}

fn outcome(o: Outcome) -> Response {
    let code = StatusCode::from_u16(o.code).unwrap_or(StatusCode::OK);
    let mut r = json_response(code, &o.obj);
    for w in o.warnings {
        let quoted = serde_json::to_string(&w).unwrap_or_default();
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {quoted}")) {
            r.headers_mut().append("warning", v);
        }
    }
    r
}
