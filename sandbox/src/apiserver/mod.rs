//! A development Kubernetes API server, in the spirit of controller-runtime's envtest.
//!
//! **It is a development and test server, never a production one**: a throwaway self-signed
//! CA, one admin bearer token (plus the ServiceAccount tokens it issues, authorized by RBAC), no
//! admission or conversion webhooks, state in memory (optionally snapshotted to a directory). It exists so Quartet's controllers and manifests
//! can be tested the way they run, with the real `kubectl` and kube-rs.
//!
//! # What is implemented
//! * HTTPS on loopback with bearer-token auth (401 `Status` when a bearer token is not valid,
//!   whatever the path; a request without one is `system:anonymous` in
//!   `system:unauthenticated`, as with kube-apiserver's default anonymous authentication, so
//!   RBAC gives it `get` on `/version`, `/healthz`, `/livez` and `/readyz` only). The
//!   admin token is a member of `system:masters` and may do everything; a ServiceAccount token
//!   from TokenRequest (`kubectl create token`) is that ServiceAccount
//!   (`system:serviceaccount:NS:NAME`, groups `system:serviceaccounts`,
//!   `system:serviceaccounts:NS`, `system:authenticated`) and is authorized by the stored Roles,
//!   ClusterRoles, RoleBindings and ClusterRoleBindings with the real semantics, including
//!   `create` for an apply that creates, and the bootstrap policy (discovery, `/version`,
//!   `/openapi`, self-reviews); a denial is the real 403 (see `rbac.rs`). `Impersonate-*` headers,
//!   SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview,
//!   SelfSubjectRulesReview and SelfSubjectReview are served, so `kubectl auth can-i --as
//!   system:serviceaccount:NS:NAME ...` and `kubectl auth whoami` answer. HTTPS
//!   because kubectl (client-go) never sends a token over plain HTTP; the CA is generated at
//!   start and embedded in the kubeconfig ([`ApiServer::ca_pem`] for other clients).
//! * Discovery: `/version` (v1.33, so Google's kubectl dispatcher picks kubectl 1.33), `/api`,
//!   `/api/v1`, `/apis`, `/apis/{g}`, `/apis/{g}/{v}` (verbs, namespaced, kind, singularName,
//!   shortNames, categories, status subresources), and aggregated discovery
//!   (`apidiscovery.k8s.io/v2` and `v2beta1`) when the Accept header asks for it, as kubectl
//!   1.30+ does. `/openapi/v2`, `/openapi/v3` and `/openapi/v3/{api/v1,apis/g/v}`,
//!   custom-resource admission (pruning, defaulting, schema validation, CEL rules; defaults
//!   also applied on reads, and with `fieldValidation=Strict` unknown fields are rejected
//!   before any validation error, as kube decodes first) and Table rendering
//!   (`Accept: ...;as=Table;g=meta.k8s.io`) come from [`schema`]. The OpenAPI documents are
//!   built once per set of CRDs and served with kube-openapi's caching headers (`ETag` and
//!   `304`, immutable `?hash=` URLs, `301` for a stale hash; see `openapi_docs.rs`).
//! * CRD validation at create and update, including the estimated cost of every
//!   `x-kubernetes-validations` rule priced as kube-apiserver 1.36 prices it (a rule over
//!   10,000,000 or a schema over 100,000,000 is refused with the real 422 causes, e.g.
//!   `estimated rule cost exceeds budget by factor of 42.8x`), and the `Warning:
//!   unrecognized format "uint64"` header for formats Kubernetes does not know.
//! * Built-in kinds: namespaces (`default`, `kube-system`, `kube-public`, `kube-node-lease`
//!   exist at start; each namespace gets a `default` ServiceAccount), secrets (`stringData`
//!   folded into `data`, `type` defaults to `Opaque`; validated as kube's `ValidateSecret`
//!   does: config keys, at most 1 MiB, each well-known type's required keys; see
//!   [`validation`]), configmaps, events (core/v1 and
//!   events.k8s.io/v1 share storage and are converted, so events recorded with kube-rs'
//!   `Recorder` show in `kubectl describe`; validated as kube-apiserver validates them: a note
//!   of at most 1,024 bytes, reportingController, reportingInstance, action and reason required
//!   and bounded, and through events.k8s.io/v1 eventTime required and the report immutable but
//!   for its series), serviceaccounts, leases (their spec validated as kube's
//!   `ValidateLeaseSpec` does: a positive duration, no negative transitions, a preferred holder
//!   only with a strategy), customresourcedefinitions, and the kinds an operator's Helm chart
//!   creates, stored and
//!   served with discovery and OpenAPI but with no controller behind them: services,
//!   apps/v1 deployments, rbac.authorization.k8s.io/v1 roles, rolebindings, clusterroles and
//!   clusterrolebindings, policy/v1 poddisruptionbudgets. Empty `labels`, `annotations`,
//!   `finalizers` and `ownerReferences` are omitted from what is stored and returned, as with
//!   kube's `omitempty` ObjectMeta. A CRD is served as soon as it is created (its status gets the
//!   `NamesAccepted` and `Established` conditions); deleting it deletes its objects (waiting
//!   for their finalizers), then stops serving the kind.
//! * Verbs: get; list with `labelSelector` (kube's grammar, including `>` and `<`; see
//!   [`label_selector`]), `fieldSelector` (escapes as kube's; metadata.name,
//!   metadata.namespace and the per-kind fields of the real server, e.g. secrets' `type`,
//!   events' `involvedObject.*`), `limit`/`continue` (a query kube cannot decode is its 400);
//!   watch (`?watch=` anything but `0`/`false`, and `/watch/` paths, the only way to watch one
//!   object by name) with
//!   `resourceVersion`, `allowWatchBookmarks`, `timeoutSeconds`, `sendInitialEvents`, selector
//!   transitions (an object leaving the selector is DELETED), and a 410 `Expired` ERROR event
//!   for a resourceVersion older than the kept history; create (generateName, uid,
//!   creationTimestamp, generation, resourceVersion); update with 409 on a stale
//!   resourceVersion; patch: merge, JSON patch, strategic merge (built-ins only; custom
//!   resources answer 415 as on a real server) and server-side apply (`managedFields` per
//!   manager and subresource, conflicts unless `force=true`, fields a manager stops applying are
//!   removed); delete with finalizers (`deletionTimestamp`, no new finalizers while deleting),
//!   preconditions, `propagationPolicy` (Background, Foreground, Orphan) and garbage collection
//!   through ownerReferences; deletecollection; `dryRun=All`; `fieldValidation`
//!   (Strict/Warn/Ignore) for unknown fields; protobuf request bodies for the built-in kinds
//!   (kubectl's typed clients send them: `kubectl create secret generic ...`).
//! * Service-account tokens: the `serviceaccounts/token` subresource (TokenRequest, what
//!   `kubectl create token` calls), TokenReview, and the issuer discovery documents
//!   (`/.well-known/openid-configuration`, `/openid/v1/jwks`); see [`tokens`]. The review APIs
//!   are in discovery with the one verb `create`, as on a real server.
//! * Status subresource semantics: writes to the main resource ignore `status`, writes to
//!   `/status` change only `status`; `metadata.generation` is bumped only by changes outside
//!   metadata and status. No-op writes do not bump the resourceVersion.
//! * Persistence: with `state_dir`, a snapshot (`apiserver.json`) is written within 300 ms of a
//!   change and on [`ApiServer::shutdown`], and loaded at start; resourceVersions continue from
//!   the snapshot (watches from before the restart get 410 and relist).
//!
//! # What differs from a real kube-apiserver
//! * One resourceVersion counter for everything and a kept history of 20 000 events; list
//!   `continue` tokens resume after the last key with current data (no snapshot reads);
//!   `resourceVersionMatch` is ignored; watches without `timeoutSeconds` last 30 minutes.
//! * Garbage collection, namespace termination and CRD instance cleanup run synchronously
//!   after each write instead of in a controller manager, so tests see a settled state.
//! * Structured merge for server-side apply follows the CRD schema's list and map types; the
//!   built-in kinds know only the metadata list types (`ownerReferences` keyed by uid,
//!   `finalizers` a set) and their string maps; other built-in lists are atomic. Strategic
//!   merge patch knows the merge keys of our built-in kinds only.
//! * CEL rule costs come from a Rust re-implementation of Kubernetes 1.36's estimator (sizes
//!   from the schema, cel-go's `checker/cost.go`, the Kubernetes library's function costs):
//!   the figures are Kubernetes' for what CRD rules use (pinned by tests, e.g. the 42.8x a
//!   real server gave for the old workspaces CRD), but the type checker is only as deep as
//!   the estimator needs, and a function it does not know is priced at cel-go's default (1
//!   plus its arguments) where Kubernetes may know better.
//! * Custom-resource admission (schema, CEL, list types, metadata) was checked against
//!   apiextensions-apiserver's own validation code of Kubernetes 1.35 and 1.36, run outside
//!   this repository on Quartet's CRDs and about 8,700 valid and invalid variants of the
//!   examples' manifests (creates and updates): the same verdicts and the same messages (the
//!   order of errors aside: kube lists a map's errors in Go's random map order). Every rule
//!   cost of the CRDs matched too, and so did the verdicts and messages on 1,386 variants of
//!   the CRDs with one `maxLength`, `maxItems` or `maxProperties` removed or raised 1000-fold.
//! * RBAC without the escalation check on writing Roles and bindings, and with only the
//!   bootstrap roles `cluster-admin`, `system:discovery`, `system:basic-user`,
//!   `system:public-info-viewer`, `system:service-account-issuer-discovery` and the aggregated
//!   `admin`, `edit` and `view` (fed only by ClusterRoles labelled for them: Kubernetes' own
//!   `system:aggregate-to-*` rules and the controller roles are not here). Roles and bindings
//!   are defaulted and validated as kube's `pkg/apis/rbac` does it (compared on 586 creates
//!   and updates of the four kinds with that validation, transcribed onto the v1 types, run
//!   with apimachinery 1.35's own metadata, selector and error code: the same answers, the
//!   metadata's errors and the kind's in one 422), and aggregation runs after every write that
//!   touches a ClusterRole, as kube-controller-manager's would; only the admin token and
//!   ServiceAccount tokens
//!   authenticate, besides anonymous requests (no client certificates). The attributes a
//!   request is authorized with (verb, resource, subresource, namespace, name, the name a
//!   list's field selector pins) and the 403 and request-info 500 answers were checked
//!   against apiserver's own `RequestInfoFactory` and `ParameterCodec` of Kubernetes 1.35 on
//!   about 15,500 requests (every method over resource and non-resource paths, special verbs,
//!   odd segments, `watch` spellings, selectors, undecodable parameters), for a
//!   ServiceAccount and for anonymous requests: the same answers; label and field selectors
//!   against apimachinery's parsers and matchers on about 7,200 selectors: the same verdicts,
//!   messages and matches; and the options of a write (`dryRun`, `fieldValidation`,
//!   `fieldManager`, `force`) against apimachinery's `Validate*Options` on 11,760 queries of
//!   creates, updates and the four patch types: the same 422s (see [`write_options`]). No pods
//!   or other kinds, no
//!   controllers (Deployments get no Pods and no status), no protobuf or CBOR responses
//!   (JSON only, except `/openapi/v2` which kubectl reads as protobuf), no HTTP/2, no `/scale`.
//!
//! # Using it from a test
//! ```no_run
//! # async fn t() -> anyhow::Result<()> {
//! use quartet_sandbox::apiserver::{ApiServer, ApiServerOptions};
//! let server = ApiServer::start(ApiServerOptions::default()).await?; // ephemeral port
//! let client: kube::Client = server.client().await?;
//! let dir = std::env::temp_dir().join("kc");
//! std::fs::create_dir_all(&dir)?;
//! server.write_kubeconfig(&dir.join("config"))?; // for `kubectl --kubeconfig ...`
//! server.expire_watches(); // compaction: every watcher re-watches, gets 410 Gone, relists
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//! Give each kubectl invocation its own `--cache-dir` (ports get reused between tests and
//! kubectl caches discovery per host:port). The listener also serves the sandbox admin API
//! (`/_sandbox/requests`, `/_sandbox/faults`, see [`crate::admin`]) without a token, and
//! `POST /_sandbox/expire-watches`, which does what [`ApiServer::expire_watches`] does for a
//! test that runs the server in another process, and `POST /_sandbox/watch-lag`
//! (`{"resource": "secretspolicies", "ms": 3000}`), what [`ApiServer::lag_watches`] does.

mod error;
mod events;
mod fields;
mod gc;
mod http;
mod label_selector;
mod openapi_docs;
mod ops;
mod patch;
mod protobuf;
mod rbac;
mod rbac_objects;
mod registry;
mod reviews;
pub mod schema;
mod selector;
mod store;
pub mod tls;
mod tokens;
mod validation;
mod watch;
mod write_options;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::admin::Admin;
use http::Shared;
use store::State;

#[derive(Clone, Debug)]
pub struct ApiServerOptions {
    /// Listen address; port 0 picks an ephemeral port.
    pub addr: SocketAddr,
    /// Bearer token clients must present.
    pub token: String,
    /// Directory to snapshot objects to, so a restart keeps them.
    pub state_dir: Option<PathBuf>,
}

impl Default for ApiServerOptions {
    fn default() -> Self {
        Self {
            addr: ([127, 0, 0, 1], 0).into(),
            token: "dev-token".into(),
            state_dir: None,
        }
    }
}

/// A running API server. Call [`ApiServer::shutdown`] to stop it (dropping it leaves it running).
pub struct ApiServer {
    url: String,
    token: String,
    ca_pem: String,
    shared: Arc<Shared>,
    admin: Arc<Admin>,
    tasks: Vec<JoinHandle<()>>,
}

/// The body of `POST /_sandbox/watch-lag`.
#[derive(serde::Deserialize)]
struct WatchLag {
    /// The resource's plural name.
    resource: String,
    /// How late its watch events arrive, in milliseconds (0: at once).
    ms: u64,
}

/// The namespaces a fresh cluster has.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

impl ApiServer {
    pub async fn start(opts: ApiServerOptions) -> anyhow::Result<Self> {
        let mut state = State::new();
        if let Some(dir) = &opts.state_dir {
            let p = store::snapshot_path(dir);
            if p.exists() {
                let raw = std::fs::read(&p)?;
                let snap: serde_json::Value = serde_json::from_slice(&raw)
                    .map_err(|e| anyhow::anyhow!("apiserver snapshot {}: {e}", p.display()))?;
                state.load(&snap);
            }
        }
        let ns_key = (String::new(), "namespaces".to_string());
        for ns in INITIAL_NAMESPACES {
            if state.get(&ns_key, "", ns).is_none() {
                state.put(
                    &ns_key,
                    json!({
                        "apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": ops::now(),
                                     "labels": {"kubernetes.io/metadata.name": ns}},
                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
                    }),
                );
                ops::create_default_service_account(&mut state, ns);
            }
        }
        rbac::bootstrap(&mut state);

        let listener = TcpListener::bind(opts.addr)
            .await
            .map_err(|e| anyhow::anyhow!("apiserver: cannot listen on {}: {e}", opts.addr))?;
        let local = listener.local_addr()?;
        let (stop, _) = tokio::sync::watch::channel(0u64);
        let shared = Arc::new(Shared {
            state: Arc::new(Mutex::new(state)),
            token: opts.token.clone(),
            addr: local.to_string(),
            state_dir: opts.state_dir.clone(),
            stop,
            stopped: std::sync::atomic::AtomicBool::new(false),
            saving: std::sync::Mutex::new(()),
            signer: tokens::Signer::new(opts.state_dir.clone()),
            openapi: Default::default(),
            lags: Default::default(),
        });
        let admin = Arc::new(Admin::default());
        let router = axum::Router::new()
            .route(
                "/_sandbox/expire-watches",
                axum::routing::post(
                    |axum::extract::State(sh): axum::extract::State<Arc<Shared>>| async move {
                        sh.expire_watches();
                        axum::http::StatusCode::NO_CONTENT
                    },
                ),
            )
            .route(
                "/_sandbox/watch-lag",
                axum::routing::post(
                    |axum::extract::State(sh): axum::extract::State<Arc<Shared>>,
                     axum::Json(lag): axum::Json<WatchLag>| async move {
                        sh.lags.set(&lag.resource, Duration::from_millis(lag.ms));
                        axum::http::StatusCode::NO_CONTENT
                    },
                ),
            )
            .fallback(http::handle)
            .with_state(shared.clone());
        let app = crate::admin::wrap("apiserver", router, admin.clone());
        let tls = tls::generate(&[
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            local.ip().to_string(),
        ])?;
        let listener = tls::TlsListener::new(listener, tls.config.clone())?;
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app.into_make_service()).await {
                tracing::error!(error = %e, "apiserver listener stopped");
            }
        }));
        if shared.state_dir.is_some() {
            let sh = shared.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    save(&sh);
                }
            }));
        }
        Ok(Self {
            url: format!("https://{local}"),
            ca_pem: tls.ca_pem,
            token: opts.token,
            shared,
            admin,
            tasks,
        })
    }

    /// `https://127.0.0.1:port` (HTTPS because kubectl sends tokens only over TLS; trust
    /// [`ApiServer::ca_pem`]).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// PEM of the throwaway CA that signed the serving certificate (new on every start).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// PEM (SPKI) public key of the service-account token signer: what a verifier of this
    /// server's TokenRequest tokens trusts (also served as `/openid/v1/jwks`).
    pub fn service_account_public_key_pem(&self) -> String {
        self.shared.signer.public_key_pem()
    }

    /// The `iss` of this server's service-account tokens.
    pub fn service_account_issuer(&self) -> &'static str {
        tokens::ISSUER
    }

    /// The request log and fault injection of this listener (`/_sandbox/`).
    pub fn admin(&self) -> &Arc<Admin> {
        &self.admin
    }

    /// A kubeconfig (YAML) that kubectl and kube::Client accept, context `quartet-dev`.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: quartet-dev\n  cluster:\n    server: {}\n    certificate-authority-data: {}\ncontexts:\n- name: quartet-dev\n  context:\n    cluster: quartet-dev\n    user: quartet-dev\n    namespace: default\ncurrent-context: quartet-dev\nusers:\n- name: quartet-dev\n  user:\n    token: {}\n",
            self.url,
            base64::engine::general_purpose::STANDARD.encode(&self.ca_pem),
            self.token
        )
    }

    pub fn write_kubeconfig(&self, path: &std::path::Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    /// A kube-rs client for this server (default namespace `default`).
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kc = kube::config::Kubeconfig::from_yaml(&self.kubeconfig())?;
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?;
        Ok(kube::Client::try_from(cfg)?)
    }

    /// Simulate etcd compaction: forget the watch history and end every open watch, so clients
    /// re-watch from their last resourceVersion, get 410 Gone, and relist.
    pub fn expire_watches(&self) {
        self.shared.expire_watches();
    }

    /// Deliver the watch events of the resource `plural` (`secretspolicies`) `lag` after each
    /// write, so that a client's cache stays behind its own writes that long (zero: at once
    /// again; see `watch::Lags`).
    pub fn lag_watches(&self, plural: &str, lag: Duration) {
        self.shared.lags.set(plural, lag);
    }

    /// How many watch requests were answered with 410 Gone so far.
    pub fn expired_watch_count(&self) -> u64 {
        self.shared
            .state
            .lock()
            .map(|s| s.expired_watches)
            .unwrap_or_default()
    }

    /// The current resourceVersion of the whole store.
    pub fn resource_version(&self) -> u64 {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rv
    }

    /// Stop serving, end watches, and write a final snapshot.
    pub async fn shutdown(self) {
        self.shared
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shared.stop.send_modify(|g| *g += 1);
        for t in &self.tasks {
            t.abort();
        }
        save(&self.shared);
    }
}

/// Write the snapshot if anything changed since the last one.
fn save(sh: &Shared) {
    let Some(dir) = &sh.state_dir else { return };
    let _saving = sh.saving.lock().unwrap_or_else(|e| e.into_inner());
    let snap = {
        let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        if !st.dirty {
            return;
        }
        st.dirty = false;
        st.snapshot()
    };
    if let Err(e) = store::write_snapshot(dir, &snap) {
        tracing::error!(error = %e, dir = %dir.display(), "apiserver snapshot failed");
    }
}
