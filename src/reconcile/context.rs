//! What every reconcile shares: the Kubernetes client, settings, metrics, the event recorder,
//! the Connection cache, and per-object failure counts for backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};

use super::error::{Error, Result};
use super::tenancy::{self, Tenancy, Wake};
use crate::api::{Connection, ConnectionRef, SecretKeyRef, Service};
use crate::clients::http::{Auth, Http, HttpConfig, SecretString};
use crate::clients::secrets::login::{IdpCredentials, Session};
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use std::collections::BTreeMap;

/// A namespaced kind the operator watches or reads: what a cache, a watch and
/// [`Context::referenced`] need of it.
pub trait Watched:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<T> Watched for T where
    T: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// The API of `R` in `namespace`, or in every namespace when the instance watches the cluster
/// (`None`).
pub fn scoped_api<R: Watched>(client: &Client, namespace: Option<&str>) -> Api<R> {
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

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
    /// The operator's own namespace: where a ClusterConnection's Secrets are by default.
    pub operator_namespace: String,
    /// Which resources this instance serves, and its share of each Connection's budget.
    pub shard: crate::shard::Shard,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            concurrency: 8,
            hash_key: SecretString::new("quartet-default-hash-key"),
            max_retries: 3,
            read_only: false,
            operator_namespace: "default".into(),
            shard: crate::shard::Shard::default(),
        }
    }
}

/// How long a resolved Connection (and its token) is reused before the Secret is read again.
const CONNECTION_TTL: Duration = Duration::from_secs(300);

/// A namespace's own limit within a ClusterConnection's budget, with the rate it was made for.
type TenantLimiter = (u32, Arc<crate::clients::http::Limiter>);

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
/// operator) and bounds both the memory and the scan. 64 rather than 500: each cached Event is
/// about 1.4 KB with its key and table slot, and a generation of 500 held 1.5–3 MB at the peak of
/// 10,000 creations for repeats that come minutes apart in a quiet operator anyway.
struct Events {
    client: Client,
    reporter: Reporter,
    current: Mutex<(Recorder, usize)>,
}

impl Events {
    const GENERATION: usize = 64;

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

/// What is kept of one object between its passes. One record for both, where each had a map of
/// its own: at 10,000 resources every map is a table and a copy of every key.
#[derive(Debug, Default)]
struct Record {
    /// resourceVersion at the end of the last successful pass: a pass that finds the same one
    /// (and was not woken by a Connection or Secret) is a periodic resync.
    settled: Option<String>,
    /// When the next periodic resync is due (see [`super::resync`]).
    resync_at: Option<Instant>,
}

impl Record {
    fn is_empty(&self) -> bool {
        self.settled.is_none() && self.resync_at.is_none()
    }
}

/// The mark of a pass's own status write ([`Context::take_fresh`]).
struct Fresh {
    resource_version: String,
    at: Instant,
    /// What the copy the pass ran on asked for ([`super::pass::asked`]).
    asked: u64,
}

/// What every reconcile of every kind shares: the Kubernetes client, the settings, the metrics, the
/// Connection caches and the per-object bookkeeping of passes.
pub struct Context {
    /// The Kubernetes client (its calls counted in the metrics).
    pub client: Client,
    /// The operator's settings (from `quartet run`'s flags).
    pub settings: Settings,
    /// The process's Prometheus metrics.
    pub metrics: Arc<Metrics>,
    events: Events,
    /// One Connection cache per watched namespace (or one for all).
    connections: Vec<Store<Connection>>,
    /// ClusterConnections, namespaces' labels and the operator's namespace.
    tenancy: Tenancy,
    /// Changes that may change which Connection resources resolve (see [`Wake`]).
    wakes: tokio::sync::broadcast::Sender<Wake>,
    /// The `requestsPerSecondPerNamespace` limiter of each (ClusterConnection, namespace), with
    /// the rate it was made for.
    tenant_limiters: Mutex<HashMap<(String, String), TenantLimiter>>,
    http_cache: Mutex<HashMap<(String, String), CachedHttp>>,
    /// The login of each Connection with `spec.auth`, with the keyed hash of what it logs in
    /// with: kept across client rebuilds, replaced (and its token revoked) when that changes.
    sessions: Mutex<HashMap<(String, String), SessionEntry>>,
    failures: Mutex<HashMap<String, u32>>,
    fresh: Mutex<HashMap<String, Fresh>>,
    /// What is kept of each object between passes (see [`Record`]).
    records: Mutex<HashMap<String, Record>>,
    /// Where each kind's due resyncs go (see [`super::resync`]).
    resync_senders: Mutex<super::resync::Senders>,
    /// Whether the resync sweep runs.
    sweeping: std::sync::Once,
    /// Objects woken by a change of their Connection or of a Secret they read.
    urgent: Mutex<std::collections::HashSet<String>>,
    /// Objects whose shard label moved away while this instance served them, and when (shared
    /// with the write gate of every pass, [`Context::write_gate`]; kept [`HANDED_OVER_KEPT`]).
    handed_over: Arc<Mutex<HashMap<String, Instant>>>,
    /// When an operation kind's last step asked to run again, per object (the watch event of
    /// its own status write, skipped, must not push that run back).
    next_step: Mutex<HashMap<String, Instant>>,
    /// resourceVersion of each object's last status write, until the cache has it.
    written: super::written::StatusWrites,
    /// When the last "resyncs stretched" line was logged, per kind.
    stretched_logged: Mutex<HashMap<String, Instant>>,
    /// Watched caches of referenced kinds (see [`super::references`]).
    pub(crate) references: super::references::ReferenceCaches,
}

impl Context {
    /// The recorder to publish one Event with.
    pub fn recorder(&self) -> Recorder {
        self.events.recorder()
    }

    /// A context for unit tests whose client is never called (nothing listens at its address).
    /// Needs a Tokio runtime: the client's buffer starts a task.
    #[cfg(test)]
    pub(crate) fn offline() -> Arc<Context> {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let (store, _writer) = kube::runtime::reflector::store();
        Arc::new(Context::new(
            client,
            Settings::default(),
            Arc::new(crate::metrics::Metrics::default()),
            store,
        ))
    }

    /// A context reading Connections from one cache, `connections`, with empty tenancy caches
    /// (see [`Context::with_tenancy`]).
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
        let tenancy = Tenancy::empty(&settings.operator_namespace);
        Self {
            events: Events::new(client.clone(), reporter),
            client,
            settings,
            metrics,
            connections: vec![connections],
            tenancy,
            wakes: tokio::sync::broadcast::channel(1024).0,
            tenant_limiters: Mutex::new(HashMap::new()),
            http_cache: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            fresh: Mutex::new(HashMap::new()),
            records: Mutex::new(HashMap::new()),
            resync_senders: Mutex::new(HashMap::new()),
            sweeping: std::sync::Once::new(),
            urgent: Mutex::new(std::collections::HashSet::new()),
            handed_over: Arc::default(),
            stretched_logged: Mutex::new(HashMap::new()),
            next_step: Mutex::new(HashMap::new()),
            written: Default::default(),
            references: super::references::ReferenceCaches::default(),
        }
    }

    /// Resolve ClusterConnections and namespaces' labels from `tenancy`.
    pub fn with_tenancy(mut self, tenancy: Tenancy) -> Self {
        self.tenancy = tenancy;
        self
    }

    /// Also look Connections up in `stores` (one per further watched namespace).
    pub fn with_connection_stores(mut self, stores: Vec<Store<Connection>>) -> Self {
        self.connections.extend(stores);
        self
    }

    /// What resolution reads besides Connections.
    pub fn tenancy(&self) -> &Tenancy {
        &self.tenancy
    }

    /// Tell every controller that `wake` may change which Connection its resources resolve.
    pub fn send_wake(&self, wake: Wake) {
        let _ = self.wakes.send(wake);
    }

    /// The changes sent with [`Context::send_wake`] from now on.
    pub fn wakes(&self) -> tokio::sync::broadcast::Receiver<Wake> {
        self.wakes.subscribe()
    }

    /// Wake `key` for a change it depends on: the pass runs in full even if the object itself
    /// is unchanged since its last (refused) pass.
    pub fn wake(&self, key: String) {
        self.fresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        self.mark_urgent(key);
    }

    /// Record a failure of `key`; returns the count of consecutive failures.
    pub fn failed(&self, key: &str) -> u32 {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = f.entry(key.to_string()).or_insert(0);
        *n += 1;
        *n
    }

    /// Remember that `key` was just reconciled and its status written at `resource_version`, by
    /// a pass over a copy that `asked` this (`pass::asked`).
    pub fn mark_fresh(&self, key: &str, resource_version: String, asked: u64) {
        let mut f = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        f.insert(
            key.to_string(),
            Fresh {
                resource_version,
                at: Instant::now(),
                asked,
            },
        );
    }

    /// Whether this pass was triggered only by our own status write (same resourceVersion,
    /// moments later). Consumes the mark, so a scheduled resync always does its work.
    /// A copy older than that write (the watch event of the finalizer patch earlier in the same
    /// pass, dispatched before the write's own event arrived) is skipped too, keeping the mark;
    /// both shapes ask [`Context::stale_copy`] first, which holds such a copy back, woken or not.
    ///
    /// `asked`: what the copy asks for (`pass::asked`: its generation, deletion and
    /// reconcile-now annotations). When it differs from what the copy of the pass that wrote
    /// the status asked, our write's copy still gets its pass: the change was made while that
    /// pass ran from a copy without it (the status write came back with the change in it), and
    /// nothing else would handle it before the next retry or resync.
    ///
    /// A wake ([`Context::wake`]) that came while the pass ran is the same case for what the
    /// object depends on (its Connection, a Secret it reads): the pass may have used the old one,
    /// so the copy gets its pass too. The urgent mark is left for [`Context::take_urgent`].
    pub fn take_fresh(&self, key: &str, resource_version: Option<&str>, asked: u64) -> bool {
        if self.is_urgent(key) {
            self.fresh
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(key);
            return false;
        }
        let mut f = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mark) = f.get(key) else {
            return false;
        };
        if mark.at.elapsed() >= Duration::from_secs(5) {
            f.remove(key);
            return false;
        }
        let rv = &mark.resource_version;
        if Some(rv.as_str()) == resource_version {
            let same = mark.asked == asked;
            f.remove(key);
            return same;
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
        self.written.record(key, resource_version);
    }

    /// How long to wait before looking at `key` again when its copy at `resource_version` is
    /// older than our last status write (the cache has not caught up with the write); `None`:
    /// go on with this copy. When the API server keeps serving an older version for a minute,
    /// the versions went backwards (an etcd restore): that is logged, and the pass goes on from
    /// the server's copy instead of waiting forever (see [`super::written`]).
    pub fn stale_copy(&self, key: &str, resource_version: Option<&str>) -> Option<Duration> {
        match self.written.copy(key, resource_version) {
            super::written::Freshness::Current => None,
            super::written::Freshness::Stale(wait) => Some(wait),
            super::written::Freshness::WentBackwards { written, copy } => {
                tracing::warn!(
                    object = key,
                    written,
                    copy,
                    "the cache still holds a copy older than this instance's last status write after a minute: the kind's watch is stuck, or resourceVersions went backwards (etcd restored from a backup?); going on from this copy"
                );
                None
            }
        }
    }

    /// This instance removed the finalizer of the object `uid` (its deletion pass succeeded).
    pub(crate) fn finalized(&self, uid: &str) {
        self.written.finalized(uid);
    }

    /// Whether a deleting copy of `uid` is older than this instance's removal of its finalizer
    /// (see [`super::written`]).
    pub(crate) fn was_finalized(&self, uid: &str) -> bool {
        self.written.was_finalized(uid)
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

    /// Remember that `key` ended a successful pass at `resource_version` (`None`: it did not
    /// settle, more work is under way).
    pub fn settle(&self, key: &str, resource_version: Option<String>) {
        self.update_record(key, |r| r.settled = resource_version);
    }

    /// Resync `key` in `after`, by the sweep of [`super::resync`] rather than a timer of kube's
    /// controller; the action to return from the pass.
    pub fn resync_after(&self, key: &str, after: Duration) -> Action {
        let at = Instant::now() + after;
        self.update_record(key, |r| r.resync_at = Some(at));
        Action::await_change()
    }

    /// Keep `key`'s next resync where it is (a pass with nothing to do, such as the watch
    /// event of our own status write), or set one in `after` if none is set.
    pub fn keep_resync(&self, key: &str, after: Duration) -> Action {
        let at = Instant::now() + after;
        self.update_record(key, |r| {
            r.resync_at.get_or_insert(at);
        });
        Action::await_change()
    }

    /// Whether `key` has a resync set by [`Context::resync_after`].
    pub fn has_resync(&self, key: &str) -> bool {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .is_some_and(|r| r.resync_at.is_some())
    }

    /// Drop `key`'s resync: its next pass comes from kube's scheduler (a retry, a poll).
    pub fn cancel_resync(&self, key: &str) {
        self.update_record(key, |r| r.resync_at = None);
    }

    /// Forget everything kept of `key`: its object is gone from this instance.
    pub fn forget(&self, key: &str) {
        fn remove<V>(map: &Mutex<HashMap<String, V>>, key: &str) {
            map.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        }
        remove(&self.failures, key);
        remove(&self.records, key);
        remove(&self.fresh, key);
        remove(&self.next_step, key);
        self.written.forget(key);
        self.take_urgent(key);
    }

    fn update_record(&self, key: &str, change: impl FnOnce(&mut Record)) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        match records.get_mut(key) {
            Some(r) => {
                change(r);
                if r.is_empty() {
                    records.remove(key);
                }
            }
            None => {
                let mut r = Record::default();
                change(&mut r);
                if !r.is_empty() {
                    records.insert(key.to_string(), r);
                }
            }
        }
    }

    /// The keys of kind `kind`'s resources in `namespace` (`None`: all) whose resync is due,
    /// from now on (replacing the receiver of an earlier controller of the kind there). Starts
    /// the sweep on first use.
    pub(crate) fn resyncs_of(
        self: &Arc<Self>,
        kind: &str,
        namespace: Option<&str>,
    ) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.resync_senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((kind.to_string(), namespace.map(str::to_string)), tx);
        self.sweeping.call_once(|| {
            let every = super::resync::tick(self.settings.resync);
            tokio::spawn(super::resync::sweep(Arc::downgrade(self), every));
        });
        rx
    }

    /// Send every resync due at `now` to its kind's controller (see [`super::resync`]).
    pub(crate) fn send_due_resyncs(&self, now: Instant) {
        let due: Vec<String> = {
            let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
            records
                .iter_mut()
                .filter(|(_, r)| r.resync_at.is_some_and(|at| at <= now))
                .map(|(key, r)| {
                    r.resync_at = None;
                    key.clone()
                })
                .collect()
        };
        if due.is_empty() {
            return;
        }
        let senders = self
            .resync_senders
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for key in due {
            let mut parts = key.splitn(3, '/');
            let (kind, ns) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            // The controller of the object's namespace (with --watch-namespaces), else the one
            // of all namespaces.
            let tx = senders
                .get(&(kind.to_string(), Some(ns.to_string())))
                .or_else(|| senders.get(&(kind.to_string(), None)));
            if let Some(tx) = tx {
                let _ = tx.send(key);
            }
        }
    }

    /// Mark `key` as woken by a change it must react to (its Connection, a Secret it reads).
    /// `key` left this instance's shard (its label moved): a pass already under way must not
    /// write for it any more.
    pub fn hand_over(&self, key: String) {
        if let Ok(mut h) = self.handed_over.lock() {
            h.insert(key, Instant::now());
        }
    }

    /// Forget the objects handed over longer than [`HANDED_OVER_KEPT`] ago: no pass of theirs
    /// is under way any more, and while the list is not empty every watch event looks itself up
    /// in it ([`Context::take_back`]).
    pub(crate) fn prune_handed_over(&self, now: Instant) {
        if let Ok(mut h) = self.handed_over.lock() {
            if !h.is_empty() {
                h.retain(|_, at| now.saturating_duration_since(*at) < HANDED_OVER_KEPT);
            }
        }
    }

    /// The object of `key` is this instance's again (its label came back); `key` is only
    /// made when something was handed over, since every watch event comes through here.
    pub fn take_back(&self, key: impl FnOnce() -> String) {
        if let Ok(mut h) = self.handed_over.lock() {
            if !h.is_empty() {
                h.remove(&key());
            }
        }
    }

    /// Fails with [`Error::HandedOver`] when `key` has moved to another shard since the pass
    /// began. Every write of a pass to the service asks first ([`Context::write_gate`]); the
    /// framework asks again before it records the pass's outcome, so the old shard's pass under
    /// way at a move writes neither to the service nor the status, and only the new shard does.
    pub fn still_served(&self, key: &str) -> Result<()> {
        moved_away(&self.handed_over, key).map_err(Error::HandedOver)
    }

    /// The gate of the writes of a pass over `key` (see [`crate::changes::Gate`]): shut once
    /// `key` has moved to another shard.
    pub fn write_gate(&self, key: String) -> crate::changes::Gate {
        let handed_over = self.handed_over.clone();
        Box::new(move || moved_away(&handed_over, &key))
    }

    /// Marks `key` (`namespace/name` of an object) as woken by a change of what it depends on: its
    /// next pass is not a periodic resync.
    pub fn mark_urgent(&self, key: String) {
        self.urgent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key);
    }

    fn is_urgent(&self, key: &str) -> bool {
        self.urgent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }

    /// Whether `key` was woken ([`Context::mark_urgent`]) since the last pass that took the
    /// mark; takes it. A pass takes it once it is past [`Context::take_fresh`], so the watch
    /// event of that pass's own status write is skipped again.
    pub fn take_urgent(&self, key: &str) -> bool {
        self.urgent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
    }

    /// Whether this pass of `key` is a periodic resync: nothing changed on the object since its
    /// last successful pass and nothing it depends on woke it. Takes the urgent mark.
    pub fn is_resync(&self, key: &str, resource_version: Option<&str>) -> bool {
        if self.take_urgent(key) {
            return false;
        }
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        resource_version.is_some()
            && records.get(key).and_then(|r| r.settled.as_deref()) == resource_version
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

    /// Forgets the failures of `key` after a successful pass, so its backoff starts over.
    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// The Connection a resource of `kind` in `ns` uses for `service`, checked for use from
    /// `ns` and for the service (see [`tenancy`] for the order without `cref`). A
    /// ClusterConnection comes as a Connection ([`tenancy::as_connection`]). Kinds read
    /// Connection-level defaults from it (the workspace service's `organization`).
    pub fn connection_for(
        &self,
        kind: &str,
        ns: &str,
        cref: Option<&ConnectionRef>,
        service: Service,
    ) -> Result<Arc<Connection>> {
        if let Some(r) = cref.filter(|r| r.is_cluster()) {
            return self.tenancy.named(kind, ns, r, service);
        }
        let (conn_ns, conn_name) = match cref {
            Some(r) => (
                r.namespace.clone().unwrap_or_else(|| ns.to_string()),
                r.name.clone(),
            ),
            None => (ns.to_string(), service.to_string()),
        };
        let key = ObjectRef::<Connection>::new(&conn_name).within(&conn_ns);
        let found = self.connections.iter().find_map(|s| s.get(&key));
        let conn = match (found, cref) {
            (Some(c), _) => c,
            (None, None) => match self.tenancy.default_for(kind, ns, service) {
                Some(resolved) => return resolved,
                None => {
                    return Err(Error::Connection(format!(
                        "Connection {conn_ns}/{conn_name} not found: create it or set spec.connectionRef"
                    )))
                }
            },
            (None, Some(_)) => {
                return Err(Error::Connection(format!(
                    "Connection {conn_ns}/{conn_name} not found: create it or change spec.connectionRef"
                )))
            }
        };
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

    /// The configured HTTP client for the Connection a resource of `kind` in `ns` uses for
    /// `service` ([`Context::connection_for`]). Its budget (`requestsPerSecond`) is the
    /// Connection's, shared by every namespace using it; its calls are counted per namespace,
    /// and a ClusterConnection's `requestsPerSecondPerNamespace` bounds each namespace's share.
    pub async fn http_for(
        &self,
        kind: &str,
        ns: &str,
        cref: Option<&ConnectionRef>,
        service: Service,
    ) -> Result<Arc<Http>> {
        let conn = self.connection_for(kind, ns, cref, service)?;
        let cache_key = tenancy::identity(&conn);
        let cached = {
            let cache = self.http_cache.lock().unwrap_or_else(|e| e.into_inner());
            cache
                .get(&cache_key)
                .filter(|c| {
                    c.resource_version == conn.resource_version()
                        && c.loaded.elapsed() < CONNECTION_TTL
                })
                .map(|c| c.http.clone())
        };
        let http = match cached {
            Some(h) => h,
            None => {
                let http = Arc::new(self.build_http(&conn).await?);
                self.http_cache
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(
                        cache_key.clone(),
                        CachedHttp {
                            resource_version: conn.resource_version(),
                            loaded: Instant::now(),
                            http: http.clone(),
                        },
                    );
                http
            }
        };
        let limiter = tenancy::per_namespace_rate(&self.tenancy, &conn).map(|rate| {
            let rate = self.settings.shard.share(rate, conn.spec.shards);
            let mut limiters = self
                .tenant_limiters
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let entry = limiters
                .entry((cache_key.1.clone(), ns.to_string()))
                .or_insert_with(|| (rate, crate::clients::http::limiter(rate)));
            if entry.0 != rate {
                *entry = (rate, crate::clients::http::limiter(rate));
            }
            entry.1.clone()
        });
        Ok(Arc::new(http.for_namespace(ns, limiter)))
    }

    /// Forget the cached client of the Connection a resource uses (after the token was
    /// refused, so a rotated token Secret is read again).
    pub fn forget_connection(
        &self,
        kind: &str,
        ns: &str,
        cref: Option<&ConnectionRef>,
        service: Service,
    ) {
        let Ok(conn) = self.connection_for(kind, ns, cref, service) else {
            return;
        };
        self.http_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&tenancy::identity(&conn));
    }

    /// The calls per second this instance makes through `conn`: its share of the
    /// Connection's `requestsPerSecond` (see [`crate::shard::Shard::share`]).
    pub fn requests_per_second(&self, conn: &Connection) -> u32 {
        self.settings
            .shard
            .share(conn.spec.requests_per_second, conn.spec.shards)
    }

    /// Build the HTTP client of a Connection, reading its token (and CA) Secret, or, for a
    /// Connection that logs in (`spec.auth`), its login Secrets: the client then shares the
    /// Connection's one login [`Session`].
    pub async fn build_http(&self, conn: &Connection) -> Result<Http> {
        let ns = conn.namespace().unwrap_or_default();
        let token = match (&conn.spec.token_secret_ref, &conn.spec.auth) {
            (Some(r), _) => Some(
                self.secret_value(&ns, r, &format!("token of {}", tenancy::describe(conn)))
                    .await?,
            ),
            (None, Some(_)) => None,
            (None, None) => {
                return Err(Error::InvalidSpec(format!(
                    "{} has neither tokenSecretRef nor auth",
                    tenancy::describe(conn)
                )))
            }
        };
        let ca_pem = match &conn.spec.ca_secret_ref {
            Some(r) => Some(
                self.secret_value(&ns, r, &format!("CA of {}", tenancy::describe(conn)))
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
            connection: tenancy::label(conn),
            base_url: conn.spec.address.trim_end_matches('/').to_string(),
            auth: Auth::None,
            timeout: Duration::from_secs(conn.spec.timeout_seconds.max(1) as u64),
            requests_per_second: self.requests_per_second(conn),
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
        let password = self
            .secret_value(
                &ns,
                &idp.password_secret_ref,
                &format!("password of {}", tenancy::describe(conn)),
            )
            .await?;
        let totp_seed = match &idp.totp_secret_ref {
            Some(r) => Some(
                self.secret_value(&ns, r, &format!("TOTP seed of {}", tenancy::describe(conn)))
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
        let key = tenancy::identity(conn);
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
            tenancy::label(conn),
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
            tracing::info!(connection = %tenancy::label(conn), "the Connection's login changed: revoking the previous token");
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

    /// Write a result (checked-out credentials) to a Secret owned by `owner`
    /// ([`super::owned_secret::QuartetSecret`]): garbage-collected with it, and a key the kind
    /// stops writing disappears.
    pub async fn apply_owned_secret<K>(
        &self,
        owner: &K,
        name: &str,
        data: BTreeMap<String, SecretString>,
    ) -> Result<()>
    where
        K: Resource<DynamicType = ()>,
    {
        super::owned_secret::QuartetSecret::owned_by(owner, name)?
            .values(data.iter().map(|(k, v)| (k.clone(), v.expose().as_bytes())))
            .apply::<K>(&self.client)
            .await?;
        Ok(())
    }

    /// Another Quartet resource this one refers to (a TransformRole's Transformations, a
    /// NoCodeWorkspace's NoCodeModule). Absent → [`Error::MissingReference`], which the framework
    /// reports as a waiting condition and retries with backoff, not as an error storm. Read from
    /// the watched cache where the kind's controller keeps one ([`super::references`]), else
    /// from the API server.
    pub async fn referenced<R: Watched>(&self, ns: &str, name: &str) -> Result<R> {
        if let Some(cached) = self.references.get::<R>(ns, name) {
            return Ok(cached);
        }
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

/// How long an object handed over to another shard is remembered: longer than any pass that
/// was under way at the move can last (each call times out within `timeoutSeconds`, at most
/// 300 s, and is retried at most `--max-retries` times).
const HANDED_OVER_KEPT: Duration = Duration::from_secs(3600);

/// `Err(why)` when `key` is among the objects handed over to another shard.
fn moved_away(
    handed_over: &Mutex<HashMap<String, Instant>>,
    key: &str,
) -> std::result::Result<(), String> {
    if handed_over.lock().is_ok_and(|h| h.contains_key(key)) {
        return Err(format!(
            "{key} moved to another shard during the pass: the new shard writes it"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pass_gate_shuts_at_a_hand_over_opens_at_a_take_back_and_the_hand_over_is_forgotten_after_the_hour(
    ) {
        let ctx = Context::offline();
        let key = "WorkspaceRun/default/moving";
        let gate = ctx.write_gate(key.to_string());
        let other = ctx.write_gate("WorkspaceRun/default/staying".to_string());
        assert!(gate().is_ok());
        ctx.hand_over(key.to_string());
        let why = gate().expect_err("shut once handed over");
        assert!(
            why.contains("moved to another shard during the pass"),
            "{why}"
        );
        assert!(other().is_ok());
        assert!(matches!(ctx.still_served(key), Err(Error::HandedOver(_))));
        ctx.take_back(|| key.to_string());
        assert!(gate().is_ok() && ctx.still_served(key).is_ok());

        ctx.hand_over(key.to_string());
        ctx.prune_handed_over(Instant::now() + Duration::from_secs(60));
        assert!(gate().is_err(), "remembered while a pass may still run");
        ctx.prune_handed_over(Instant::now() + HANDED_OVER_KEPT);
        assert!(gate().is_ok(), "forgotten after {HANDED_OVER_KEPT:?}");
    }
}
