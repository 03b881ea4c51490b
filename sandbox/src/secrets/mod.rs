//! The emulated secrets service (spec A, and spec C §4.1–4.2: transform and directory engines).
//!
//! It behaves like the real service (HashiCorp Vault, with the token header renamed
//! `X-Secrets-Token` and the Okta auth method renamed `idp`) on the wire: `/v1` root, the `LIST`
//! method and `GET ?list=true`, the response envelope (fields in `data` only, no `mount_type`;
//! only the legacy `sys/policy`, `sys/auth`, `sys/mounts` and `sys/capabilities*` also copy them
//! to the top level, as
//! OpenBao 2.7 does), 204 for writes without a result, and `{"errors": [...]}` bodies with the real status codes.
//! `Authorization: Bearer <token>` is accepted as well as the header.
//!
//! All clusters of one sandbox live in one [`World`] behind one lock, which makes DR
//! replication (copying state between clusters) simple; the lock is never held across an await.
//!
//! Not emulated: namespaces other than the root namespace (the `X-Secrets-Namespace` header only
//! matters to root-namespace-only endpoints, which refuse other namespaces), seal/unseal, storage
//! backends, response wrapping of arbitrary responses, Sentinel evaluation (RGP and EGP
//! documents are stored, not executed).

pub mod acl;
mod directory;
mod dr;
pub mod fields;
pub mod http;
mod identity;
mod idp;
mod leases;
mod openapi;
pub mod otp;
mod persist;
mod pgp;
mod policy;
pub mod provider;
pub mod route;
mod sys_auth;
mod sys_password;
mod tokens;
mod totp;
mod transform;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Edition, SandboxOptions};
use http::{ApiError, Op, Resp};
use route::{Licence, Route};

/// One router per secrets cluster (`opts.secrets_clusters`), sharing the DR replication world.
pub fn routers(opts: &SandboxOptions) -> anyhow::Result<Vec<Router>> {
    let n = opts.secrets_clusters.max(1) as usize;
    let mut world = World::new(opts, n);
    if let Some(dir) = &opts.state_dir {
        let file = persist::path(dir);
        persist::load(&mut world, &file, &opts.root_token)?;
        world.state_file = Some(file);
    }
    let world = Arc::new(Mutex::new(world));
    Ok((0..n)
        .map(|idx| {
            Router::new().fallback(dispatch).with_state(ClusterHandle {
                world: world.clone(),
                idx,
            })
        })
        .collect())
}

#[derive(Clone)]
pub struct ClusterHandle {
    world: Arc<Mutex<World>>,
    idx: usize,
}

/// Everything the secrets clusters of one sandbox share.
pub struct World {
    pub root_token: String,
    pub edition: Edition,
    pub clusters: Vec<Cluster>,
    /// The sandbox's identity provider, shared by every cluster.
    pub provider: provider::Provider,
    /// Unseal key shares (hex), used for DR operation-token generation.
    pub key_shares: Vec<String>,
    /// The emulated directory of the directory engine, shared by every cluster.
    pub directory: directory::Directory,
    /// Where the state is saved after every request (`--state-dir`).
    pub state_file: Option<std::path::PathBuf>,
}

/// One secrets cluster.
pub struct Cluster {
    pub store: Store,
    pub dr: dr::DrState,
    /// `host:port` this cluster's listener is reached at (learnt from requests).
    pub host: String,
}

/// The state of one cluster that the real service keeps in its storage (and replicates).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Store {
    pub acl_policies: BTreeMap<String, StoredPolicy>,
    pub rgp_policies: BTreeMap<String, StoredPolicy>,
    pub egp_policies: BTreeMap<String, StoredPolicy>,
    pub tokens: HashMap<String, TokenEntry>,
    pub mounts: Vec<Mount>,
    /// State of each identity-provider auth mount, keyed by mount path.
    #[serde(default)]
    pub idp: BTreeMap<String, idp::IdpMount>,
    #[serde(default)]
    pub entities: BTreeMap<String, identity::Entity>,
    #[serde(default)]
    pub mfa_methods: BTreeMap<String, totp::TotpMethod>,
    #[serde(default)]
    pub login_enforcements: BTreeMap<String, totp::LoginEnforcement>,
    #[serde(default)]
    pub leases: BTreeMap<String, leases::Lease>,
    /// State of each transform mount, keyed by mount path.
    #[serde(default)]
    pub transform: BTreeMap<String, transform::TransformMount>,
    /// State of each directory mount, keyed by mount path.
    #[serde(default)]
    pub ad: BTreeMap<String, directory::AdMount>,
    #[serde(default)]
    pub password_policies: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StoredPolicy {
    pub name: String,
    pub raw: String,
    #[serde(default)]
    pub enforcement_level: Option<String>,
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// Write count of an ACL policy (OpenBao's check-and-set version, from 1).
    #[serde(default)]
    pub version: u64,
    /// Time of the last write (RFC 3339 with nanoseconds).
    #[serde(default)]
    pub modified: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TokenEntry {
    pub id: String,
    pub accessor: String,
    pub policies: Vec<String>,
    pub path: String,
    pub display_name: String,
    pub meta: BTreeMap<String, String>,
    pub entity_id: String,
    pub creation_time: i64,
    /// Seconds; 0 means no expiry.
    pub ttl: i64,
    pub explicit_max_ttl: i64,
    pub period: i64,
    pub num_uses: i64,
    pub token_type: String,
    pub renewable: bool,
    pub expire_time: Option<i64>,
    /// Auth mount that issued the token (`auth/idp/`, `auth/token/`).
    #[serde(default)]
    pub mount_path: String,
    #[serde(default)]
    pub orphan: bool,
    #[serde(default)]
    pub parent: String,
    #[serde(default)]
    pub max_ttl: i64,
    /// Time of the last renewal, if any (lookup shows `last_renewal`/`last_renewal_time`).
    #[serde(default)]
    pub last_renewal: Option<i64>,
    /// For identity-provider logins: a digest of the password the user logged in with, so
    /// that a renewal re-authenticates the user (the real method keeps the password in the
    /// token's internal data for the same purpose).
    #[serde(default)]
    pub login_digest: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Backend {
    System,
    Token,
    Identity,
    Idp,
    Transform,
    Ad,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Mount {
    /// With trailing slash, e.g. `sys/`, `auth/idp/`.
    pub path: String,
    pub backend: Backend,
    pub type_name: String,
    pub accessor: String,
    pub description: String,
    #[serde(default)]
    pub uuid: String,
    /// Seconds; 0 means the system default.
    #[serde(default)]
    pub default_lease_ttl: i64,
    #[serde(default)]
    pub max_lease_ttl: i64,
}

impl Mount {
    pub fn new(path: &str, backend: Backend, type_name: &str, description: &str) -> Self {
        let kind = if path.starts_with("auth/") {
            format!("auth_{type_name}")
        } else {
            type_name.to_string()
        };
        Self {
            path: path.to_string(),
            backend,
            type_name: type_name.to_string(),
            accessor: accessor_for(&kind),
            description: description.to_string(),
            uuid: uuid::Uuid::new_v4().to_string(),
            default_lease_ttl: 0,
            max_lease_ttl: 0,
        }
    }
}

impl World {
    fn new(opts: &SandboxOptions, n: usize) -> Self {
        let clusters = (0..n)
            .map(|_| Cluster {
                store: Store::initial_for(&opts.root_token, opts.edition),
                dr: Default::default(),
                host: String::new(),
            })
            .collect();
        Self {
            root_token: opts.root_token.clone(),
            edition: opts.edition,
            clusters,
            provider: Default::default(),
            key_shares: dr::new_key_shares(),
            directory: Default::default(),
            state_file: None,
        }
    }
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn accessor_for(kind: &str) -> String {
    format!("{kind}_{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

impl Store {
    /// The mounts every cluster starts with.
    fn builtin_mounts() -> Vec<Mount> {
        vec![
            Mount::new(
                "sys/",
                Backend::System,
                "system",
                "system endpoints used for control, policy and debugging",
            ),
            Mount::new("identity/", Backend::Identity, "identity", "identity store"),
            Mount::new(
                "auth/token/",
                Backend::Token,
                "token",
                "token based credentials",
            ),
            Mount::new(
                "auth/idp/",
                Backend::Idp,
                "idp",
                "identity-provider auth method",
            ),
            Mount::new(
                "transform/",
                Backend::Transform,
                "transform",
                "transform secrets engine",
            ),
            Mount::new("ad/", Backend::Ad, "ad", "directory secrets engine"),
        ]
    }

    /// A fresh cluster of an edition: the community server (like OpenBao 2.7) has no transform
    /// engine mounted, so its paths answer 404 `no handler for route`.
    pub fn initial_for(root_token: &str, edition: Edition) -> Self {
        let mut s = Self::initial(root_token);
        if edition == Edition::Community {
            s.mounts.retain(|m| m.backend != Backend::Transform);
        }
        s
    }

    /// A freshly initialised cluster: built-in mounts, the `default` policy and the root token.
    pub fn initial(root_token: &str) -> Self {
        let mut s = Store {
            mounts: Self::builtin_mounts(),
            ..Store::default()
        };
        s.acl_policies.insert(
            "default".into(),
            StoredPolicy {
                name: "default".into(),
                raw: acl::DEFAULT_POLICY.trim_start().into(),
                version: 1,
                modified: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
                ..Default::default()
            },
        );
        s.tokens.insert(
            root_token.to_string(),
            TokenEntry {
                id: root_token.to_string(),
                accessor: uuid::Uuid::new_v4().to_string(),
                policies: vec!["root".into()],
                path: "auth/token/root".into(),
                display_name: "root".into(),
                creation_time: now(),
                token_type: "service".into(),
                // The real root token has no parent.
                orphan: true,
                ..Default::default()
            },
        );
        s
    }

    /// The token, if it exists and has not expired.
    pub fn token(&self, id: &str) -> Option<&TokenEntry> {
        self.tokens
            .get(id)
            .filter(|t| t.expire_time.is_none_or(|e| e > now()))
    }

    /// The ACL of a token: its policies as they are stored now (an updated policy applies at
    /// once; a deleted one acts as an empty policy).
    pub fn acl_for(&self, t: &TokenEntry) -> acl::Acl {
        if t.policies.iter().any(|p| p == "root") {
            return acl::Acl::root();
        }
        let parsed: Vec<acl::ParsedPolicy> = t
            .policies
            .iter()
            .filter_map(|p| self.acl_policies.get(p))
            .filter_map(|p| acl::parse(&p.raw).ok())
            .collect();
        let entity = (!t.entity_id.is_empty()).then_some(t.entity_id.as_str());
        acl::Acl::new(parsed.iter(), entity)
    }
}

/// What a handler sees of the request.
pub struct Ctx<'a> {
    pub world: &'a mut World,
    pub cluster: usize,
    pub op: Op,
    /// Request path relative to `/v1`, without leading slash (LIST paths end with `/`).
    pub path: String,
    pub mount: Mount,
    pub params: HashMap<String, String>,
    pub data: Map<String, Value>,
    pub token: Option<TokenEntry>,
    pub namespace: String,
}

impl Ctx<'_> {
    pub fn store(&mut self) -> &mut Store {
        &mut self.world.clusters[self.cluster].store
    }
    pub fn param(&self, k: &str) -> String {
        self.params.get(k).cloned().unwrap_or_default()
    }
    pub fn edition(&self) -> Edition {
        self.world.edition
    }
}

fn backend_routes(b: Backend) -> &'static [Route] {
    static SYS: OnceLock<Vec<Route>> = OnceLock::new();
    static TOKEN: OnceLock<Vec<Route>> = OnceLock::new();
    static IDENTITY: OnceLock<Vec<Route>> = OnceLock::new();
    static IDP: OnceLock<Vec<Route>> = OnceLock::new();
    static TRANSFORM: OnceLock<Vec<Route>> = OnceLock::new();
    static AD: OnceLock<Vec<Route>> = OnceLock::new();
    match b {
        Backend::System => SYS.get_or_init(|| {
            let mut r = policy::routes();
            r.extend(sys_auth::routes());
            r.extend(sys_auth::status_routes());
            r.extend(leases::routes());
            r.extend(openapi::routes());
            r.extend(dr::routes());
            r.extend(sys_password::routes());
            r
        }),
        Backend::Token => TOKEN.get_or_init(tokens::routes),
        Backend::Identity => IDENTITY.get_or_init(identity::routes),
        Backend::Idp => IDP.get_or_init(idp::routes),
        Backend::Transform => TRANSFORM.get_or_init(transform::routes),
        Backend::Ad => AD.get_or_init(directory::routes),
    }
}

fn licensed(edition: Edition, l: Licence) -> bool {
    match l {
        Licence::None => true,
        Licence::Enterprise => edition != Edition::Community,
        Licence::Premium => edition == Edition::Premium,
    }
}

/// The token of a request: `X-Secrets-Token`, or `Authorization: Bearer`.
fn request_token(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers.get("x-secrets-token").and_then(|v| v.to_str().ok()) {
        if !v.is_empty() {
            return Some(v.to_string());
        }
    }
    let auth = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, tok) = auth.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !tok.trim().is_empty())
        .then(|| tok.trim().to_string())
}

/// Go's `strconv.ParseBool`.
fn go_parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    let Some(q) = q else { return vec![] };
    q.split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (pct_decode(k), pct_decode(v))
        })
        .collect()
}

fn pct_decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_decode(&s)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn dispatch(
    State(h): State<ClusterHandle>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw_path = percent_decode(uri.path());
    if let Some(rest) = raw_path.strip_prefix("/_sandbox/secrets/") {
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let mut world = match h.world.lock() {
            Ok(w) => w,
            Err(p) => p.into_inner(),
        };
        let (status, v) = admin_api(&mut world, h.idx, method.as_str(), rest, &body);
        if let Some(f) = world.state_file.clone() {
            persist::save(&world, &f);
        }
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
        if status == StatusCode::NO_CONTENT {
            return status.into_response();
        }
        return (status, axum::Json(v)).into_response();
    }
    let Some(path) = raw_path.strip_prefix("/v1/") else {
        return ApiError::not_found().into_response();
    };
    let query = parse_query(uri.query());
    // `?list=` is read with Go's `strconv.ParseBool` on GET; a value it rejects is a 400 with
    // an empty `errors` array, as in the real service.
    let mut list_q = false;
    if method == Method::GET {
        if let Some((_, v)) = query.iter().find(|(k, v)| k == "list" && !v.is_empty()) {
            match go_parse_bool(v) {
                Some(b) => list_q = b,
                None => {
                    return ApiError {
                        status: StatusCode::BAD_REQUEST,
                        errors: vec![],
                    }
                    .into_response()
                }
            }
        }
    }
    let op = match method.as_str() {
        "GET" if list_q => Op::List,
        "GET" => Op::Read,
        "LIST" => Op::List,
        "POST" | "PUT" => Op::Update,
        "DELETE" => Op::Delete,
        "PATCH" => Op::Patch,
        // The real service answers HEAD on the health endpoint (status only) for load balancers.
        "HEAD" if path.trim_end_matches('/') == "sys/health" => Op::Read,
        _ => return ApiError::method_not_allowed().into_response(),
    };
    // JSON body, accepted without a Content-Type and on any method, as the real service does.
    let mut data: Map<String, Value> = Map::new();
    if !body.iter().all(|b| b.is_ascii_whitespace()) {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(m)) => data = m,
            Ok(Value::Null) => {}
            Ok(_) => {
                return ApiError::bad_request(
                    "failed to parse JSON input: body must be a JSON object",
                )
                .into_response()
            }
            Err(e) => {
                return ApiError::bad_request(format!("failed to parse JSON input: {e}"))
                    .into_response()
            }
        }
    }
    if matches!(method.as_str(), "GET" | "LIST" | "DELETE") {
        for (k, v) in query {
            if k == "list" {
                continue;
            }
            data.entry(k).or_insert(Value::String(v));
        }
    }
    let token = request_token(&headers);
    let namespace = headers
        .get("x-secrets-namespace")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim_matches('/').to_string())
        .unwrap_or_default();
    let mut path = path.to_string();
    if op == Op::List && !path.ends_with('/') {
        path.push('/');
    }
    let (mut resp, mount_type) = {
        let mut world = match h.world.lock() {
            Ok(w) => w,
            Err(p) => p.into_inner(),
        };
        if world.clusters[h.idx].host.is_empty() {
            if let Some(host) = headers
                .get(axum::http::header::HOST)
                .and_then(|v| v.to_str().ok())
            {
                world.clusters[h.idx].host = host.to_string();
            }
        }
        let out = handle(&mut world, h.idx, op, path, data, token, namespace);
        directory::flush_released(&mut world);
        if let Some(f) = world.state_file.clone() {
            persist::save(&world, &f);
        }
        out
    };
    let wait = match &resp {
        Ok(Resp {
            pending_push: Some(w),
            ..
        }) => Some(w.clone()),
        _ => None,
    };
    if let Some(wait) = wait {
        resp = loop {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let polled = {
                let mut world = match h.world.lock() {
                    Ok(w) => w,
                    Err(p) => p.into_inner(),
                };
                idp::poll_push(&mut world, h.idx, &wait)
            };
            if let Some(r) = polled {
                break r;
            }
        };
    }
    match resp {
        Ok(r) => r.into_response(&mount_type),
        Err(e) => e.into_response(),
    }
}

fn handle(
    world: &mut World,
    cluster: usize,
    mut op: Op,
    path: String,
    data: Map<String, Value>,
    token: Option<String>,
    namespace: String,
) -> (Result<Resp, ApiError>, String) {
    // Expiry runs on the clusters that serve requests (a DR secondary only mirrors its primary).
    if world.clusters[cluster].dr.mode != dr::Mode::Secondary {
        leases::sweep(&mut world.clusters[cluster].store);
    }
    let store = &world.clusters[cluster].store;
    let mount = store
        .mounts
        .iter()
        .filter(|m| path.starts_with(&m.path) || path == m.path.trim_end_matches('/'))
        .max_by_key(|m| m.path.len())
        .cloned();
    let rel = mount
        .as_ref()
        .map(|m| path.get(m.path.len()..).unwrap_or("").to_string())
        .unwrap_or_default();
    let route = mount.as_ref().and_then(|m| {
        backend_routes(m.backend)
            .iter()
            .filter(|r| licensed(world.edition, r.licence))
            .find_map(|r| r.matches(&rel).map(|p| (r, p)))
    });
    if route.is_some()
        && mount
            .as_ref()
            .is_some_and(|m| m.backend == Backend::Transform)
    {
        transform::warm_up();
    }
    let mount_type = mount
        .as_ref()
        .map(|m| m.type_name.clone())
        .unwrap_or_default();
    let unauth = route.as_ref().is_some_and(|(r, _)| r.unauth);

    // A DR secondary serves only the DR status and its `secondary/` endpoints.
    if world.clusters[cluster].dr.mode == dr::Mode::Secondary
        && !route.as_ref().is_some_and(|(r, _)| r.dr_secondary)
    {
        return (
            Err(ApiError::bad_request(
                "path disabled in replication DR secondary mode",
            )),
            mount_type,
        );
    }
    let store = &world.clusters[cluster].store;

    // Authentication.
    let entry = match token.as_deref().and_then(|t| store.token(t)).cloned() {
        Some(e) => Some(e),
        None if unauth => None,
        None => return (Err(ApiError::permission_denied()), mount_type),
    };

    // Limited-use tokens: this use counts; the last use revokes the token.
    let mut revoke_after = None;
    if let Some(e) = &entry {
        if e.num_uses > 0 {
            let st = &mut world.clusters[cluster].store;
            if e.num_uses == 1 {
                revoke_after = Some(e.id.clone());
            } else if let Some(t) = st.tokens.get_mut(&e.id) {
                t.num_uses -= 1;
            }
        }
    }
    let store = &world.clusters[cluster].store;
    let Some(mount) = mount else {
        let acl = entry.as_ref().map(|e| store.acl_for(e));
        if acl.is_some_and(|a| {
            !a.allows(
                &path,
                acl::cap_bit(op.capability()).unwrap_or(0),
                op == Op::List,
            )
        }) {
            return (Err(ApiError::permission_denied()), mount_type);
        }
        return (
            // A plain message, not a multi-error (OpenBao 2.7).
            Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "no handler for route {:?}. route entry not found.",
                    path.trim_end_matches('/')
                ),
            )),
            mount_type,
        );
    };

    let mut ctx = Ctx {
        world,
        cluster,
        op,
        path: path.clone(),
        mount,
        params: route.as_ref().map(|(_, p)| p.clone()).unwrap_or_default(),
        data,
        token: entry.clone(),
        namespace,
    };

    // Create or update, decided by the route's existence check as in the real service.
    if op == Op::Update {
        if let Some((r, _)) = &route {
            if let Some(exists) = r.exists {
                if !exists(&mut ctx) {
                    op = Op::Create;
                    ctx.op = op;
                }
            }
        }
    }

    // Authorization (unauthenticated paths need none, even when a token is sent).
    if let Some(e) = entry.as_ref().filter(|_| !unauth) {
        let acl = ctx.store().acl_for(e);
        let caps = acl.caps(&path, op == Op::List);
        let need = acl::cap_bit(op.capability()).unwrap_or(0);
        if caps & acl::DENY != 0 || caps & need == 0 {
            return (Err(ApiError::permission_denied()), mount_type);
        }
        let needs_sudo = route
            .as_ref()
            .is_some_and(|(r, _)| r.sudo || (r.sudo_list && op == Op::List));
        if needs_sudo && caps & acl::SUDO == 0 {
            return (Err(ApiError::permission_denied()), mount_type);
        }
    }

    let Some((route, _)) = route else {
        return (Err(ApiError::unsupported_path()), mount_type);
    };
    if route.root_ns && !matches!(ctx.namespace.as_str(), "" | "root") {
        return (
            Err(ApiError::bad_request(format!(
                "operation not allowed in namespace: {:?} is restricted to the root namespace",
                path.trim_end_matches('/')
            ))),
            mount_type,
        );
    }
    let handler = route.handler(op).or_else(|| match op {
        Op::Create => route.handler(Op::Update),
        Op::Update => route.handler(Op::Create),
        _ => None,
    });
    let Some(handler) = handler else {
        return (Err(ApiError::unsupported_operation()), mount_type);
    };
    let mut resp = handler(&mut ctx);
    if let Some(id) = revoke_after {
        tokens::revoke_tree(ctx.store(), &id);
    }
    let wrote = resp.is_ok() && matches!(op, Op::Create | Op::Update | Op::Delete);
    // The real service carries `sys/` fields in `data` only, except on its legacy endpoints
    // (`sys/policy[/:name]`, `sys/auth[/...]`, `sys/mounts[/...]`, `sys/capabilities*`), which
    // also copy them to the top level (OpenBao 2.7 answers exactly so).
    if ctx.mount.backend == Backend::System && legacy_top_level(&path) {
        if let Ok(r) = &mut resp {
            if let Some(Value::Object(d)) = &r.data {
                for (k, v) in d {
                    r.top_level.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }
    if wrote {
        dr::after_write(world, cluster);
    }
    (resp, mount_type)
}

/// The `sys/` endpoints whose answers also carry `data`'s fields at the top level.
fn legacy_top_level(path: &str) -> bool {
    let p = path.trim_end_matches('/');
    let under = |base: &str| p == base || p.starts_with(&format!("{base}/"));
    under("sys/policy")
        || under("sys/auth")
        || under("sys/mounts")
        // Not served by OpenBao (enterprise): kept as the sandbox answered before.
        || under("sys/replication")
        || matches!(
            p,
            "sys/capabilities" | "sys/capabilities-self" | "sys/capabilities-accessor" | "sys/key-status"
        )
}

/// The secrets service's part of the sandbox admin API (`/_sandbox/secrets/...`).
///
/// * `idp/...` — the identity provider, see [`provider`].
fn admin_api(
    world: &mut World,
    cluster: usize,
    method: &str,
    rest: &str,
    body: &Value,
) -> (u16, Value) {
    if let Some(r) = rest.strip_prefix("idp/") {
        return provider::admin(&mut world.provider, method, r, body);
    }
    if let Some(r) = rest.strip_prefix("ad/") {
        return directory::admin(world, cluster, method, r, body);
    }
    if let Some(r) = rest.strip_prefix("transform/") {
        return transform::admin(&world.clusters[cluster].store.transform, method, r);
    }
    if rest.trim_end_matches('/') == "keys" && method == "GET" {
        let b64: Vec<String> = world
            .key_shares
            .iter()
            .map(|k| {
                use base64::Engine;
                let bytes: Vec<u8> = (0..k.len() / 2)
                    .filter_map(|i| u8::from_str_radix(&k[2 * i..2 * i + 2], 16).ok())
                    .collect();
                base64::engine::general_purpose::STANDARD.encode(bytes)
            })
            .collect();
        return (
            200,
            serde_json::json!({ "keys": world.key_shares, "keys_base64": b64,
                                "shares": dr::SHARES, "threshold": dr::THRESHOLD }),
        );
    }
    if rest.trim_end_matches('/') == "dr/corrupt" && method == "POST" {
        world.clusters[cluster].dr.corrupted = true;
        return (204, Value::Null);
    }
    if rest.trim_end_matches('/') == "leases" && method == "POST" {
        return leases::admin_create(&mut world.clusters[cluster].store, body);
    }
    // `GET mfa/:entity_id/:method_id`: the TOTP secret an entity holds for a method, and its
    // current code.
    if let (Some(r), "GET") = (rest.strip_prefix("mfa/"), method) {
        let store = &world.clusters[cluster].store;
        let (entity, mid) = r.split_once('/').unwrap_or((r, ""));
        let (Some(secret), Some(m)) = (
            totp::entity_secret(store, entity, mid),
            store.mfa_methods.get(mid),
        ) else {
            return (404, serde_json::json!({ "errors": [] }));
        };
        let key = otp::base32_decode(&secret).unwrap_or_default();
        let alg = otp::Algorithm::parse(&m.algorithm).unwrap_or(otp::Algorithm::Sha1);
        let code = otp::totp(alg, &key, now(), m.period, m.digits as u32);
        return (200, serde_json::json!({ "secret": secret, "code": code }));
    }
    (
        404,
        serde_json::json!({ "errors": ["unknown sandbox admin path"] }),
    )
}
