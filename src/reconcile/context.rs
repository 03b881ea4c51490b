//! What every reconcile shares: the Kubernetes client, settings, metrics, the event recorder,
//! the Connection cache, and per-object failure counts for backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};

use super::error::{Error, Result};
use crate::api::{Connection, ConnectionRef, SecretKeyRef, Service};
use crate::clients::http::{Auth, Http, HttpConfig, SecretString};
use crate::clients::secrets::login::{IdpCredentials, Session};
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::Resource;
use std::collections::BTreeMap;

/// Operator settings (from the command line).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Drift resync interval (jittered ±10%).
    pub resync: Duration,
    /// Reconciles run at once per kind.
    pub concurrency: u16,
    /// Key of the keyed hashes of write-only inputs kept in status.
    pub hash_key: SecretString,
    /// HTTP retries after the first attempt.
    pub max_retries: u32,
    /// Service clients refuse every write (`quartet plan`).
    pub read_only: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            concurrency: 8,
            hash_key: SecretString::new("quartet-default-hash-key"),
            max_retries: 3,
            read_only: false,
        }
    }
}

/// How long a resolved Connection (and its token) is reused before the Secret is read again.
const CONNECTION_TTL: Duration = Duration::from_secs(300);

/// A Connection's login session and the keyed hash of what it logs in with.
type SessionEntry = (String, Arc<Session>);

struct CachedHttp {
    resource_version: Option<String>,
    loaded: Instant,
    http: Arc<Http>,
}

/// The Event recorder, replaced by a fresh one every [`Events::GENERATION`] Events.
///
/// kube's `Recorder` keeps every Event it published for six minutes (to turn a repeat into a
/// series) and scans that cache on every publish: creating 10,000 resources at once held 10,000
/// Events in memory and made each publish O(n). A generation of a bounded number of Events keeps
/// the repeats that matter (the same Warning of one failing resource, minutes apart, in a quiet
/// operator) and bounds both the memory and the scan.
struct Events {
    client: Client,
    reporter: Reporter,
    current: Mutex<(Recorder, usize)>,
}

impl Events {
    const GENERATION: usize = 500;

    fn new(client: Client, reporter: Reporter) -> Self {
        let current = Mutex::new((Recorder::new(client.clone(), reporter.clone()), 0));
        Self {
            client,
            reporter,
            current,
        }
    }

    fn recorder(&self) -> Recorder {
        let mut current = self.current.lock().unwrap();
        if current.1 >= Self::GENERATION {
            *current = (Recorder::new(self.client.clone(), self.reporter.clone()), 0);
        }
        current.1 += 1;
        current.0.clone()
    }
}

pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub metrics: Arc<Metrics>,
    events: Events,
    connections: Store<Connection>,
    http_cache: Mutex<HashMap<(String, String), CachedHttp>>,
    /// The login of each Connection with `spec.auth`, with the keyed hash of what it logs in
    /// with: kept across client rebuilds, replaced (and its token revoked) when that changes.
    sessions: Mutex<HashMap<(String, String), SessionEntry>>,
    failures: Mutex<HashMap<String, u32>>,
    fresh: Mutex<HashMap<String, (String, Instant)>>,
    /// resourceVersion of each object at the end of its last successful pass: a pass that
    /// finds the same one (and was not woken by a Connection or Secret) is a periodic resync.
    settled: Mutex<HashMap<String, String>>,
    /// Objects woken by a change of their Connection or of a Secret they read.
    urgent: Mutex<std::collections::HashSet<String>>,
    /// When an operation kind's last step asked to run again, per object (the watch event of
    /// its own status write, skipped, must not push that run back).
    next_step: Mutex<HashMap<String, Instant>>,
    /// resourceVersion of each operation object's last status write.
    written: Mutex<HashMap<String, u64>>,
    /// When the last "resyncs stretched" line was logged, per kind.
    stretched_logged: Mutex<HashMap<String, Instant>>,
}

impl Context {
    /// The recorder to publish one Event with.
    pub fn recorder(&self) -> Recorder {
        self.events.recorder()
    }

    pub fn new(
        client: Client,
        settings: Settings,
        metrics: Arc<Metrics>,
        connections: Store<Connection>,
    ) -> Self {
        let reporter = Reporter {
            controller: "quartet".into(),
            instance: std::env::var("POD_NAME")
                .ok()
                .or_else(|| std::env::var("HOSTNAME").ok()),
        };
        Self {
            events: Events::new(client.clone(), reporter),
            client,
            settings,
            metrics,
            connections,
            http_cache: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            fresh: Mutex::new(HashMap::new()),
            settled: Mutex::new(HashMap::new()),
            urgent: Mutex::new(std::collections::HashSet::new()),
            stretched_logged: Mutex::new(HashMap::new()),
            next_step: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
        }
    }

    /// Record a failure of `key`; returns the count of consecutive failures.
    pub fn failed(&self, key: &str) -> u32 {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = f.entry(key.to_string()).or_insert(0);
        *n += 1;
        *n
    }

    /// Remember that `key` was just reconciled and its status written at `resource_version`.
    pub fn mark_fresh(&self, key: &str, resource_version: String) {
        let mut f = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        f.insert(key.to_string(), (resource_version, Instant::now()));
    }

    /// Whether this pass was triggered only by our own status write (same resourceVersion,
    /// moments later). Consumes the mark, so a scheduled resync always does its work.
    /// A copy older than that write (the watch event of the finalizer patch earlier in the same
    /// pass, dispatched before the write's own event arrived) is skipped too, keeping the mark.
    pub fn take_fresh(&self, key: &str, resource_version: Option<&str>) -> bool {
        let mut f = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        let Some((rv, at)) = f.get(key) else {
            return false;
        };
        if at.elapsed() >= Duration::from_secs(5) {
            f.remove(key);
            return false;
        }
        if Some(rv.as_str()) == resource_version {
            f.remove(key);
            return true;
        }
        let older = match (
            resource_version.and_then(|r| r.parse::<u64>().ok()),
            rv.parse::<u64>(),
        ) {
            (Some(this), Ok(written)) => this < written,
            _ => false,
        };
        if !older {
            f.remove(key);
        }
        older
    }

    /// Remember the resourceVersion of `key`'s last status write.
    pub fn set_written(&self, key: &str, resource_version: &str) {
        if let Ok(rv) = resource_version.parse::<u64>() {
            self.written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.to_string(), rv);
        }
    }

    /// Whether `resource_version` is older than our last status write of `key`: the object
    /// came from a cache the write has not reached yet. (Resource versions are opaque to
    /// clients, but every API server in use hands out increasing integers; anything else is
    /// never called stale.)
    pub fn is_stale(&self, key: &str, resource_version: Option<&str>) -> bool {
        let Some(rv) = resource_version.and_then(|r| r.parse::<u64>().ok()) else {
            return false;
        };
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .is_some_and(|w| rv < *w)
    }

    /// Remember when `key`'s next step is due.
    pub fn set_next_step(&self, key: &str, at: Instant) {
        self.next_step
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), at);
    }

    /// How long until `key`'s next step is due (zero when overdue), if one was asked for.
    pub fn next_step_in(&self, key: &str) -> Option<Duration> {
        self.next_step
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Remember that `key` ended a successful pass at `resource_version`.
    pub fn settle(&self, key: &str, resource_version: Option<String>) {
        let mut s = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        match resource_version {
            Some(rv) => {
                s.insert(key.to_string(), rv);
            }
            None => {
                s.remove(key);
            }
        }
    }

    /// Mark `key` as woken by a change it must react to (its Connection, a Secret it reads).
    pub fn mark_urgent(&self, key: String) {
        self.urgent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key);
    }

    /// Whether this pass of `key` is a periodic resync: nothing changed on the object since its
    /// last successful pass and nothing it depends on woke it. Consumes the urgent mark.
    pub fn is_resync(&self, key: &str, resource_version: Option<&str>) -> bool {
        let urgent = self
            .urgent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        if urgent {
            return false;
        }
        let s = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        resource_version.is_some() && s.get(key).map(String::as_str) == resource_version
    }

    /// Whether to log (again) that resyncs of `kind` are being stretched: at most once a minute.
    pub fn should_log_stretch(&self, kind: &str) -> bool {
        let mut l = self
            .stretched_logged
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match l.get(kind) {
            Some(at) if at.elapsed() < Duration::from_secs(60) => false,
            _ => {
                l.insert(kind.to_string(), Instant::now());
                true
            }
        }
    }

    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// The Connection a resource in `ns` uses for `service` (without `cref`, the one named
    /// after the service in `ns`), checked for use from `ns` and for the service. Kinds read
    /// Connection-level defaults from it (the workspace service's `organization`).
    pub fn connection_for(
        &self,
        ns: &str,
        cref: Option<&ConnectionRef>,
        service: Service,
    ) -> Result<Arc<Connection>> {
        let (conn_ns, conn_name) = match cref {
            Some(r) => (
                r.namespace.clone().unwrap_or_else(|| ns.to_string()),
                r.name.clone(),
            ),
            None => (ns.to_string(), service.to_string()),
        };
        let key = ObjectRef::<Connection>::new(&conn_name).within(&conn_ns);
        let conn = self.connections.get(&key).ok_or_else(|| {
            Error::Connection(format!(
                "Connection {conn_ns}/{conn_name} not found: create it{}",
                if cref.is_none() {
                    " or set spec.connectionRef"
                } else {
                    ""
                }
            ))
        })?;
        if conn_ns != ns
            && !conn
                .spec
                .allowed_namespaces
                .iter()
                .any(|a| a == "*" || a == ns)
        {
            return Err(Error::Connection(format!(
                "Connection {conn_ns}/{conn_name} does not allow use from namespace {ns}: add it to the Connection's spec.allowedNamespaces"
            )));
        }
        if conn.spec.service != service {
            return Err(Error::Connection(format!(
                "Connection {conn_ns}/{conn_name} is for the {} service, not {service}",
                conn.spec.service
            )));
        }
        Ok(conn)
    }

    /// The configured HTTP client for the Connection a resource in `ns` uses for `service`.
    /// Without `cref`, the Connection named after the service in `ns`.
    pub async fn http_for(
        &self,
        ns: &str,
        cref: Option<&ConnectionRef>,
        service: Service,
    ) -> Result<Arc<Http>> {
        let conn = self.connection_for(ns, cref, service)?;
        let conn_ns = conn.namespace().unwrap_or_default();
        let conn_name = conn.name_any();
        let cache_key = (conn_ns.clone(), conn_name.clone());
        {
            let cache = self.http_cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = cache.get(&cache_key) {
                if c.resource_version == conn.resource_version()
                    && c.loaded.elapsed() < CONNECTION_TTL
                {
                    return Ok(c.http.clone());
                }
            }
        }
        let http = Arc::new(self.build_http(&conn).await?);
        self.http_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                cache_key,
                CachedHttp {
                    resource_version: conn.resource_version(),
                    loaded: Instant::now(),
                    http: http.clone(),
                },
            );
        Ok(http)
    }

    /// Forget the cached client of a Connection (after the token was refused, so a rotated
    /// token Secret is read again).
    pub fn forget_connection(&self, ns: &str, cref: Option<&ConnectionRef>, service: Service) {
        let key = match cref {
            Some(r) => (
                r.namespace.clone().unwrap_or_else(|| ns.to_string()),
                r.name.clone(),
            ),
            None => (ns.to_string(), service.to_string()),
        };
        self.http_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// Build the HTTP client of a Connection, reading its token (and CA) Secret, or, for a
    /// Connection that logs in (`spec.auth`), its login Secrets: the client then shares the
    /// Connection's one login [`Session`].
    pub async fn build_http(&self, conn: &Connection) -> Result<Http> {
        let ns = conn.namespace().unwrap_or_default();
        let token = match (&conn.spec.token_secret_ref, &conn.spec.auth) {
            (Some(r), _) => Some(
                self.secret_value(
                    &ns,
                    r,
                    &format!("token of Connection {ns}/{}", conn.name_any()),
                )
                .await?,
            ),
            (None, Some(_)) => None,
            (None, None) => {
                return Err(Error::InvalidSpec(format!(
                    "Connection {ns}/{} has neither tokenSecretRef nor auth",
                    conn.name_any()
                )))
            }
        };
        let ca_pem = match &conn.spec.ca_secret_ref {
            Some(r) => Some(
                self.secret_value(
                    &ns,
                    r,
                    &format!("CA of Connection {ns}/{}", conn.name_any()),
                )
                .await?
                .expose()
                .as_bytes()
                .to_vec(),
            ),
            None => None,
        };
        let service = conn.spec.service;
        let header = |default: &str| {
            conn.spec
                .token_header
                .clone()
                .unwrap_or_else(|| default.to_string())
        };
        let header_name = match service {
            Service::Secrets => header("X-Secrets-Token"),
            Service::Workspaces => String::new(),
            Service::Catalog => header("X-Catalog-Token"),
            Service::Scheduler => header("X-Scheduler-Token"),
        };
        let mut extra_headers = Vec::new();
        if let Some(n) = &conn.spec.service_namespace {
            extra_headers.push(("X-Secrets-Namespace", n.clone()));
        }
        let mut cfg = HttpConfig {
            service,
            connection: format!(
                "{}/{}",
                conn.namespace().unwrap_or_default(),
                conn.name_any()
            ),
            base_url: conn.spec.address.trim_end_matches('/').to_string(),
            auth: Auth::None,
            timeout: Duration::from_secs(conn.spec.timeout_seconds.max(1) as u64),
            requests_per_second: conn.spec.requests_per_second,
            ca_pem,
            extra_headers,
            max_retries: self.settings.max_retries,
            read_only: self.settings.read_only,
        };
        cfg.auth = match (token, &conn.spec.auth) {
            (Some(token), _) => match service {
                Service::Workspaces => Auth::Bearer(token),
                _ => Auth::Header(header_name, token),
            },
            (None, Some(auth)) => {
                if service != Service::Secrets {
                    return Err(Error::InvalidSpec(
                        "spec.auth (a login) is only offered by the secrets service".into(),
                    ));
                }
                let session = self.session(conn, &cfg, header_name, &auth.idp).await?;
                Auth::Login(session.header().to_string(), session)
            }
            (None, None) => unreachable!("checked above"),
        };
        Http::new(cfg, self.metrics.clone()).map_err(Error::Remote)
    }

    /// The login session of a Connection with `spec.auth.idp`: the existing one while the
    /// Connection logs in with the same address, user and Secrets; else a new one, and the
    /// previous one's token is revoked.
    async fn session(
        &self,
        conn: &Connection,
        cfg: &HttpConfig,
        header: String,
        idp: &crate::api::connection::IdpLogin,
    ) -> Result<Arc<Session>> {
        let ns = conn.namespace().unwrap_or_default();
        let name = conn.name_any();
        let password = self
            .secret_value(
                &ns,
                &idp.password_secret_ref,
                &format!("password of Connection {ns}/{name}"),
            )
            .await?;
        let totp_seed = match &idp.totp_secret_ref {
            Some(r) => Some(
                self.secret_value(&ns, r, &format!("TOTP seed of Connection {ns}/{name}"))
                    .await?,
            ),
            None => None,
        };
        let uid = conn.uid().unwrap_or_default();
        let ca = cfg.ca_pem.clone().unwrap_or_default();
        let namespace = conn.spec.service_namespace.clone().unwrap_or_default();
        let seed = totp_seed
            .as_ref()
            .map(|s| s.expose().to_string())
            .unwrap_or_default();
        let provider = idp.provider.clone().unwrap_or_default();
        let fingerprint = super::hash::keyed_hash(
            self.settings.hash_key.expose().as_bytes(),
            &[
                uid.as_bytes(),
                cfg.base_url.as_bytes(),
                &ca,
                namespace.as_bytes(),
                header.as_bytes(),
                idp.mount.as_bytes(),
                idp.username.as_bytes(),
                password.expose().as_bytes(),
                seed.as_bytes(),
                provider.as_bytes(),
            ],
        );
        let key = (ns.clone(), name.clone());
        if let Some((fp, s)) = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            if *fp == fingerprint {
                return Ok(s.clone());
            }
        }
        let mut login_cfg = cfg.clone();
        login_cfg.auth = Auth::None;
        // A push login waits until the push is answered: give it longer than a plain call.
        login_cfg.timeout = login_cfg.timeout.max(Duration::from_secs(90));
        let session = Arc::new(Session::new(
            format!("{ns}/{name}"),
            header,
            IdpCredentials {
                mount: idp.mount.clone(),
                username: idp.username.clone(),
                password,
                totp_seed,
                provider: idp.provider.clone(),
            },
            Http::new(login_cfg, self.metrics.clone()).map_err(Error::Remote)?,
            self.metrics.clone(),
        ));
        let replaced = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            match sessions.get(&key) {
                // Another reconcile built the same one meanwhile: use it.
                Some((fp, s)) if *fp == fingerprint => return Ok(s.clone()),
                _ => sessions
                    .insert(key.clone(), (fingerprint, session.clone()))
                    .map(|(_, s)| s),
            }
        };
        if let Some(old) = replaced {
            tracing::info!(connection = %format!("{ns}/{name}"), "the Connection's login changed: revoking the previous token");
            self.http_cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
            old.close().await;
        }
        Ok(session)
    }

    /// End the login of the Connection `ns/name` (deleted): revoke its token.
    pub async fn end_session(&self, ns: &str, name: &str) {
        let key = (ns.to_string(), name.to_string());
        let ended = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Some((_, s)) = ended {
            self.http_cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
            s.close().await;
        }
    }

    /// The Connections (`namespace`, `name`) that hold a login session.
    pub fn sessions(&self) -> Vec<(String, String)> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// End every login (operator shutdown): revoke their tokens.
    pub async fn end_all_sessions(&self) {
        for (ns, name) in self.sessions() {
            self.end_session(&ns, &name).await;
        }
    }

    /// One key of a Secret in `ns`, as a [`SecretString`]. `what` names the use in errors; the
    /// value itself never appears in one.
    pub async fn secret_value(
        &self,
        ns: &str,
        r: &SecretKeyRef,
        what: &str,
    ) -> Result<SecretString> {
        let secret = Api::<Secret>::namespaced(self.client.clone(), ns)
            .get_opt(&r.name)
            .await?
            .ok_or_else(|| {
                Error::MissingReference(format!("Secret {ns}/{} ({what}) not found", r.name))
            })?;
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&r.key))
            .map(|ByteString(b)| b.clone())
            .or_else(|| {
                secret
                    .string_data
                    .as_ref()
                    .and_then(|d| d.get(&r.key))
                    .map(|s| s.clone().into_bytes())
            })
            .ok_or_else(|| {
                Error::MissingReference(format!(
                    "Secret {ns}/{} ({what}) has no key {:?}",
                    r.name, r.key
                ))
            })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            Error::InvalidSpec(format!(
                "Secret {ns}/{} key {:?} ({what}) is not UTF-8 text",
                r.name, r.key
            ))
        })?;
        Ok(SecretString::new(text.trim_end_matches(['\n', '\r'])))
    }

    /// Write a result (an enrollment's QR code, checked-out credentials, a bootstrap token) to a
    /// Secret owned by `owner`, so it is garbage-collected with it. Server-side apply with the
    /// owner kind's field manager: idempotent, and a key the kind stops writing disappears.
    pub async fn apply_owned_secret<K>(
        &self,
        owner: &K,
        name: &str,
        data: BTreeMap<String, SecretString>,
    ) -> Result<()>
    where
        K: Resource<DynamicType = ()>,
    {
        let ns = owner.namespace().unwrap_or_default();
        let owner_ref = owner
            .controller_owner_ref(&())
            .ok_or_else(|| Error::InvalidSpec("owner has no uid yet".into()))?;
        let string_data: BTreeMap<String, String> = data
            .into_iter()
            .map(|(k, v)| (k, v.expose().to_string()))
            .collect();
        let secret = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {"app.kubernetes.io/managed-by": "quartet"},
                "ownerReferences": [owner_ref],
            },
            "type": "Opaque",
            "stringData": string_data,
        });
        let manager = format!("quartet/{}", K::kind(&()).to_lowercase());
        Api::<Secret>::namespaced(self.client.clone(), &ns)
            .patch(
                name,
                &PatchParams::apply(&manager).force(),
                &Patch::Apply(&secret),
            )
            .await?;
        Ok(())
    }

    /// Another Quartet resource this one refers to (a TransformRole's Transformations, a
    /// NoCodeWorkspace's NoCodeModule). Absent → [`Error::MissingReference`], which the framework
    /// reports as a waiting condition and retries with backoff, not as an error storm.
    pub async fn referenced<R>(&self, ns: &str, name: &str) -> Result<R>
    where
        R: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        Api::<R>::namespaced(self.client.clone(), ns)
            .get_opt(name)
            .await?
            .ok_or_else(|| {
                Error::MissingReference(format!(
                    "{} {ns}/{name} does not exist (yet)",
                    R::kind(&())
                ))
            })
    }

    /// Reference to an object, for Events about a related one.
    pub fn object_ref<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
        obj.object_ref(&())
    }
}
