//! Registration and supervision: every kind's CRD and controller in one list ([`registry`]), and
//! the supervisor ([`run`]) that runs the controllers of the kinds the cluster serves.
//!
//! Which kinds are served is read from the CustomResourceDefinitions (watched, read-only) or,
//! when the operator may not list them, from API discovery every [`DISCOVERY_EVERY`]. A kind
//! whose CRD is missing is reported once (a warning naming the CRD, `quartet_kind_served{kind}`
//! 0, `/readyz`), and its controller starts when the CRD appears, without a restart; a kind whose
//! CRD is removed has its controller stopped. No controller is started for a kind the cluster
//! does not serve: kube's Controller holds its work until its cache has had a first list, and
//! its graceful shutdown waits for that work, so such a controller could never stop (the
//! operator then ignored SIGTERM). A served kind with no resource yet runs no controller either,
//! only a watch of its resources' metadata, until the first appears ([`idle`]).
//!
//! Adding a kind is a file in `api/`, a file in `kinds/`, and one line in [`registry`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, CustomResourceExt, Resource, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::secrets::directory::{AdCheckout, AdEngine, AdLibrarySet, AdRole};
use crate::api::secrets::dr::DrReplication;
use crate::api::{
    CatalogAclBootstrap, CatalogAclToken, ClusterConnection, Connection, DeploymentGate,
    SecretsPolicy,
};
use crate::api::{
    IdpAuthMethod, IdpGroup, IdpUser, TotpEnrollment, TotpMethod, TransformAlphabet, TransformRole,
    TransformStore, TransformTemplate, Transformation,
};
use crate::api::{NoCodeModule, NoCodeWorkspace, Workspace, WorkspaceRun};
use crate::kinds;
use crate::metrics::Metrics;
use crate::reconcile::context::scoped_api;
use crate::reconcile::driver::{self, Lifetime, Reconciled};
use crate::reconcile::operation::{run_operation, Operated};
use crate::reconcile::references::run_operation_referencing;
use crate::reconcile::related::run_operation_related;
use crate::reconcile::tenancy::{concerns_dependents, Tenancy, Wake};
use crate::reconcile::watch_failures::{self, WatchFailures};
use crate::reconcile::{Context, Settings};
use crate::runtime::idle;
use crate::runtime::server::Health;
use k8s_openapi::api::core::v1::Namespace;

/// How a kind's controller is run: context, watched namespace (all when `None`), lifetime.
type Start = fn(Arc<Context>, Option<String>, Lifetime) -> BoxFuture<'static, ()>;

/// One kind: its CRD and how to run its controller.
pub struct Registered {
    /// The kind's name, e.g. `SecretsPolicy`.
    pub kind: String,
    /// The CRD's name, `plural.group`.
    pub crd_name: String,
    /// The version served, e.g. `v1alpha1`.
    pub version: String,
    /// The API group, e.g. `secrets.quartet.dev`.
    pub group: String,
    /// The plural resource name, e.g. `secretspolicies`.
    pub plural: String,
    crd: fn() -> CustomResourceDefinition,
    /// The kind's resources for dynamic API calls: the metadata watch of an idle kind
    /// ([`idle`]), `quartet plan`'s reads.
    pub resource: ApiResource,
    start: Start,
    /// Run once for the cluster, whatever namespaces are watched.
    cluster_scoped: bool,
}

impl Registered {
    fn new<K: Resource<DynamicType = ()> + CustomResourceExt>(start: Start) -> Self {
        Self {
            kind: K::kind(&()).into(),
            crd_name: K::crd_name().into(),
            version: K::version(&()).into(),
            group: K::group(&()).into(),
            plural: K::plural(&()).into(),
            crd: K::crd,
            resource: ApiResource::erase::<K>(&()),
            start,
            cluster_scoped: false,
        }
    }
}

/// A kind that owns one remote object ([`Reconciled`]).
fn owned<K: Reconciled>() -> Registered {
    Registered::new::<K>(|ctx, ns, life| driver::run::<K>(ctx, ns, life).boxed())
}

/// A kind that drives an operation ([`Operated`]).
fn operation<K: Operated>() -> Registered {
    Registered::new::<K>(|ctx, ns, life| run_operation::<K>(ctx, ns, life).boxed())
}

/// Every kind Quartet serves, in the order `quartet crd` prints their CRDs.
pub fn registry() -> Vec<Registered> {
    vec![
        Registered::new::<Connection>(|c, ns, l| kinds::connection::run(c, ns, l).boxed()),
        Registered {
            cluster_scoped: true,
            ..Registered::new::<ClusterConnection>(|c, ns, l| {
                kinds::cluster_connection::run(c, ns, l).boxed()
            })
        },
        owned::<SecretsPolicy>(),
        operation::<CatalogAclBootstrap>(),
        operation::<CatalogAclToken>(),
        operation::<DeploymentGate>(),
        operation::<NoCodeModule>(),
        Registered::new::<NoCodeWorkspace>(|c, ns, l| {
            run_operation_related::<NoCodeWorkspace, NoCodeModule, _>(
                c,
                ns,
                l,
                kinds::workspaces::nocode::workspace::users_of,
            )
            .boxed()
        }),
        owned::<AdEngine>(),
        owned::<AdRole>(),
        owned::<AdLibrarySet>(),
        Registered::new::<AdCheckout>(|c, ns, l| {
            run_operation_referencing::<AdCheckout, AdLibrarySet>(c, ns, l).boxed()
        }),
        operation::<DrReplication>(),
        owned::<TransformRole>(),
        owned::<Transformation>(),
        owned::<TransformTemplate>(),
        owned::<TransformAlphabet>(),
        owned::<TransformStore>(),
        owned::<TotpMethod>(),
        Registered::new::<TotpEnrollment>(|c, ns, l| {
            run_operation_referencing::<TotpEnrollment, TotpMethod>(c, ns, l).boxed()
        }),
        owned::<IdpUser>(),
        owned::<IdpGroup>(),
        owned::<IdpAuthMethod>(),
        owned::<Workspace>(),
        operation::<WorkspaceRun>(),
    ]
}

/// Every CRD Quartet serves.
pub fn crds() -> Vec<CustomResourceDefinition> {
    registry().iter().map(|r| (r.crd)()).collect()
}

/// How often served kinds are looked up through discovery when CRDs may not be listed.
pub const DISCOVERY_EVERY: Duration = Duration::from_secs(10);

/// How long the other kinds wait for the Connection cache's first list before starting anyway.
const CONNECTIONS_WAIT: Duration = Duration::from_secs(30);

/// The served CRDs' names, once known.
type Served = Option<BTreeSet<String>>;

/// Run the controllers of the kinds the cluster serves, starting and stopping them as CRDs
/// come and go, until `shutdown` is cancelled. Then each controller gets `stop_within` to finish
/// the reconciles under way; what is left is cut (each step is recorded in status before the
/// next, so the next leader resumes it).
pub async fn run(
    client: Client,
    settings: Settings,
    namespaces: Vec<String>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stop_within: Duration,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let registry = registry();
    // One watch per watched namespace (all namespaces: one watch), so the operator needs no
    // right outside them.
    let scopes: Vec<Option<String>> = if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().cloned().map(Some).collect()
    };
    let mut conn_stores = Vec::new();
    let mut conn_writers = Vec::new();
    for _ in &scopes {
        let (store, writer) = reflector::store::<Connection>();
        conn_stores.push(store);
        conn_writers.push(writer);
    }
    let (cluster_connections, cc_writer) = reflector::store::<ClusterConnection>();
    let (namespace_store, ns_writer) = reflector::store::<Namespace>();
    let tenancy = Tenancy {
        cluster_connections,
        namespaces: namespace_store,
        operator_namespace: settings.operator_namespace.clone(),
    };
    let first_store = conn_stores.remove(0);
    let ctx = Arc::new(
        Context::new(client.clone(), settings, metrics.clone(), first_store)
            .with_connection_stores(conn_stores)
            .with_tenancy(tenancy),
    );
    let (served_tx, mut served_rx) = watch::channel::<Served>(None);
    let wanted: Vec<Wanted> = registry.iter().map(Wanted::of).collect();
    let finder = tokio::spawn(find_served(
        client.clone(),
        wanted,
        served_tx,
        health.clone(),
    ));
    // Whether each Connection cache has had its first list (kube's `Store::wait_until_ready`
    // wakes only one waiter, and every kind waits for it).
    let mut listed = Vec::new();
    let mut caches = Vec::new();
    for (scope, writer) in scopes.iter().zip(conn_writers) {
        let conn_api: Api<Connection> = scoped_api(&client, scope.as_deref());
        let (listed_tx, l) = watch::channel(false);
        listed.push(l);
        caches.push(tokio::spawn(connection_cache(
            ctx.clone(),
            conn_api,
            writer,
            served_rx.clone(),
            listed_tx,
        )));
    }
    // One watch of Secrets per scope, for every kind that reads them.
    for scope in &scopes {
        caches.push(tokio::spawn(crate::reconcile::tenancy_watch::secrets(
            ctx.clone(),
            scope.clone(),
        )));
    }
    // ClusterConnections and the namespaces' labels, which resolution reads; their changes
    // wake the resources they concern.
    let (cc_listed_tx, cc_listed) = watch::channel(false);
    caches.push(tokio::spawn(
        crate::reconcile::tenancy_watch::cluster_connections(
            ctx.clone(),
            cc_writer,
            served_rx.clone(),
            cc_listed_tx,
        ),
    ));
    let (ns_listed_tx, ns_listed) = watch::channel(false);
    caches.push(tokio::spawn(crate::reconcile::tenancy_watch::namespaces(
        ctx.clone(),
        ns_writer,
        served_rx.clone(),
        ns_listed_tx,
    )));

    let conn_crd = Connection::crd_name();
    // The stop token and task of each running controller, by CRD name.
    let mut running: HashMap<String, (CancellationToken, tokio::task::Id)> = HashMap::new();
    let mut tasks: JoinSet<String> = JoinSet::new();
    let mut announced: HashMap<String, bool> = HashMap::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = served_rx.changed() => if changed.is_err() { break },
            Some(ended) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                // A controller ends on its own only when stopped; one that ended otherwise is
                // started again below (its task waited a moment first).
                let id = match &ended {
                    Ok((id, _)) => *id,
                    Err(e) => e.id(),
                };
                running.retain(|_, (stop, task)| *task != id || stop.is_cancelled());
            }
        }
        let Some(served) = served_rx.borrow_and_update().clone() else {
            continue;
        };
        let first = announced.is_empty();
        let conn_served = served.contains(conn_crd);
        let cc_served = served.contains(ClusterConnection::crd_name());
        for r in &registry {
            let is = served.contains(&r.crd_name);
            if announced.get(&r.kind) != Some(&is) {
                announce(r, is, first);
                announced.insert(r.kind.clone(), is);
                metrics.kind_served(&r.kind, is);
                health.kind_served(&r.kind, &r.crd_name, is);
            }
            match (is, running.contains_key(&r.crd_name)) {
                (true, false) => {
                    let stop = shutdown.child_token();
                    let life = {
                        let health = health.clone();
                        let kind = r.kind.clone();
                        Lifetime::new(stop.clone(), move || health.kind_synced(&kind))
                    };
                    // Resources find their Connection in its cache: starting before its first
                    // list would fail each of them with "Connection not found" for a moment.
                    let mut wait_for = Vec::new();
                    if !r.cluster_scoped && r.crd_name != conn_crd {
                        if conn_served {
                            wait_for.extend(listed.iter().cloned());
                        }
                        // Resolving a ClusterConnection reads them and the namespaces' labels.
                        if cc_served {
                            wait_for.push(cc_listed.clone());
                            wait_for.push(ns_listed.clone());
                        }
                    }
                    let kind_scopes = if r.cluster_scoped {
                        vec![None]
                    } else {
                        scopes.clone()
                    };
                    let task = tasks.spawn(supervise(
                        r.resource.clone(),
                        r.start,
                        ctx.clone(),
                        kind_scopes,
                        life,
                        wait_for,
                        stop_within,
                    ));
                    running.insert(r.crd_name.clone(), (stop, task.id()));
                }
                (false, true) => {
                    if let Some((stop, _)) = running.remove(&r.crd_name) {
                        stop.cancel();
                    }
                }
                _ => {}
            }
        }
        if first {
            let n = registry
                .iter()
                .filter(|r| served.contains(&r.crd_name))
                .count();
            tracing::info!(
                served = n,
                missing = registry.len() - n,
                "serving {n} of {} kinds",
                registry.len()
            );
        }
    }
    for (stop, _) in running.values() {
        stop.cancel();
    }
    // Each task ends within `stop_within` of its stop (see `supervise`).
    while tasks.join_next().await.is_some() {}
    finder.abort();
    for cache in caches {
        cache.abort();
    }
    // Revoke the Connections' login tokens; a service that does not answer must not hold the
    // exit past the deadline (the tokens then expire on their own).
    let bound = stop_within / 3;
    if tokio::time::timeout(bound, ctx.end_all_sessions())
        .await
        .is_err()
    {
        tracing::warn!(
            "shutdown: Connection logins not all revoked within {:.1}s; their tokens expire on their own",
            bound.as_secs_f64()
        );
    }
    Ok(())
}

/// Say once that a kind is served or not (at start, and on each change).
fn announce(r: &Registered, served: bool, first: bool) {
    let (kind, crd) = (&r.kind, &r.crd_name);
    match (served, first) {
        (true, true) => tracing::debug!(%kind, %crd, "kind served"),
        (true, false) => tracing::info!(
            %kind, %crd,
            "CustomResourceDefinition {crd} is installed: kind {kind} is served from now on"
        ),
        (false, _) if r.crd_name == Connection::crd_name() => tracing::error!(
            %kind, %crd,
            "kind Connection is not served: the cluster has no CustomResourceDefinition {crd}, so \
             no resource of any kind can reach its service; install it (`quartet crd`, or the \
             chart's crds/)"
        ),
        (false, true) => tracing::warn!(
            %kind, %crd,
            "kind {kind} is not served: the cluster has no CustomResourceDefinition {crd}; its \
             controller starts when the CRD is installed (`quartet crd`, or the chart's crds/)"
        ),
        (false, false) => tracing::warn!(
            %kind, %crd,
            "kind {kind} is no longer served: the CustomResourceDefinition {crd} was removed; its \
             controller stops"
        ),
    }
}

/// Run one kind's controller until its stop, then give it `stop_within` to finish the
/// reconciles under way and cut what is left. In each scope the controller starts with the
/// kind's first resource there ([`idle`]). Returns the kind.
async fn supervise(
    resource: ApiResource,
    start: Start,
    ctx: Arc<Context>,
    scopes: Vec<Option<String>>,
    life: Lifetime,
    wait_for: Vec<watch::Receiver<bool>>,
    stop_within: Duration,
) -> String {
    let kind = resource.kind.clone();
    let stop = life.token().clone();
    let watching = life.clone();
    let work = async {
        if !wait_for.is_empty() {
            let all = futures::future::join_all(
                wait_for
                    .into_iter()
                    .map(|mut l| async move { l.wait_for(|l| *l).await.map(|_| ()) }),
            );
            tokio::select! {
                _ = all => {}
                _ = tokio::time::sleep(CONNECTIONS_WAIT) => tracing::warn!(
                    %kind, "the Connection caches have no first list after {}s: starting anyway",
                    CONNECTIONS_WAIT.as_secs()
                ),
                _ = stop.cancelled() => return,
            }
        }
        // One controller per watched namespace; the kind is synced once all have listed.
        let n = scopes.len();
        let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(n));
        futures::future::join_all(scopes.into_iter().map(|scope| {
            let once = std::sync::atomic::AtomicBool::new(false);
            let (remaining, whole) = (remaining.clone(), life.clone());
            let part = if n == 1 {
                life.clone()
            } else {
                Lifetime::new(life.token().clone(), move || {
                    if !once.swap(true, std::sync::atomic::Ordering::SeqCst)
                        && remaining.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1
                    {
                        whole.synced();
                    }
                })
            };
            let (ctx, resource) = (ctx.clone(), &resource);
            async move {
                let waited = idle::Waited {
                    resource,
                    namespace: scope.as_deref(),
                    config: ctx.settings.shard.watcher_config(),
                };
                let client = ctx.client.clone();
                if idle::until_first(&client, waited, part.token(), || part.nothing_yet()).await {
                    start(ctx, scope, part).await;
                }
            }
        }))
        .await;
        if !stop.is_cancelled() {
            tracing::error!(%kind, "controller ended without being stopped: starting it again");
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stop.cancelled() => {}
            }
        }
    };
    // Whether the controller was cut with work under way (false: it had none, see
    // `Lifetime::has_listed`).
    let cut = async {
        stop.cancelled().await;
        if !watching.has_listed() {
            return false;
        }
        tokio::time::sleep(stop_within).await;
        true
    };
    tokio::select! {
        _ = work => {}
        under_way = cut => {
            if under_way {
                tracing::warn!(
                    %kind,
                    "controller did not stop within {:.1}s: its unfinished reconciles are cut \
                     (each step is recorded in status before the next, so the next leader \
                     resumes them)",
                    stop_within.as_secs_f64()
                );
            } else {
                tracing::debug!(%kind, "controller stopped before its first list");
            }
        }
    }
    kind
}

/// The Connection cache shared by every kind. Its watch runs while the Connection CRD is
/// served, and starts afresh (an immediate list) when the CRD appears, instead of waiting out
/// the backoff of a watch that failed while it was missing. A changed Connection wakes the
/// resources using it once the cache holds the change (see [`Wake::Connection`]).
async fn connection_cache(
    ctx: Arc<Context>,
    api: Api<Connection>,
    mut writer: reflector::store::Writer<Connection>,
    mut served: watch::Receiver<Served>,
    listed: watch::Sender<bool>,
) {
    let crd = Connection::crd_name();
    let is_served = |s: &Served| s.as_ref().is_some_and(|s| s.contains(crd));
    loop {
        if served.wait_for(is_served).await.is_err() {
            return;
        }
        let stream = watcher(api.clone(), watcher::Config::default()).default_backoff();
        let mut stream = std::pin::pin!(stream);
        let mut failures = WatchFailures::default();
        let gone = served.wait_for(|s| !is_served(s));
        let mut gone = std::pin::pin!(gone);
        loop {
            let ev = tokio::select! {
                _ = &mut gone => break,
                ev = stream.next() => ev,
            };
            // No kind can use a Connection it does not see: said at once.
            if let Some(error) = ev.as_ref().and_then(|ev| failures.note(ev)) {
                tracing::warn!(%error, "watching Connections failed; retrying");
            }
            match ev {
                Some(Ok(ev)) => {
                    // A relist (the watch was down) compares each Connection with the cache
                    // too: the controllers have no Connection watch of their own.
                    let changed = match &ev {
                        watcher::Event::Apply(c) | watcher::Event::InitApply(c)
                            if matches!(ev, watcher::Event::Apply(_)) || *listed.borrow() =>
                        {
                            let old = writer.as_reader().get(&ObjectRef::from_obj(c));
                            old.is_none_or(|o| {
                                o.spec != c.spec
                                    || concerns_dependents(o.status.as_ref(), c.status.as_ref())
                            })
                            .then(|| c.clone())
                        }
                        watcher::Event::Delete(c) => Some(c.clone()),
                        _ => None,
                    };
                    writer.apply_watcher_event(&ev);
                    if let watcher::Event::InitDone = ev {
                        listed.send_replace(true);
                    }
                    if let Some(c) = changed {
                        ctx.send_wake(Wake::Connection {
                            namespace: c.namespace().unwrap_or_default(),
                            name: c.name_any(),
                        });
                    }
                }
                Some(Err(_)) => {}
                None => break,
            }
        }
    }
}

/// What tells whether a kind is served.
#[derive(Clone, Debug)]
struct Wanted {
    crd: String,
    group: String,
    version: String,
    plural: String,
}

impl Wanted {
    fn of(r: &Registered) -> Self {
        Self {
            crd: r.crd_name.clone(),
            group: r.group.clone(),
            version: r.version.clone(),
            plural: r.plural.clone(),
        }
    }
}

/// Publish the set of served CRDs on `tx` whenever it changes: from a watch of the CRDs, or from
/// discovery when the operator may not read them.
async fn find_served(
    client: Client,
    wanted: Vec<Wanted>,
    tx: watch::Sender<Served>,
    health: Arc<Health>,
) {
    let api: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(client.clone());
    let full: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut delay = Duration::from_secs(1);
    loop {
        let refused = match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => match watch_crds(&api, &full, &wanted, &tx, &health).await {
                CrdWatchEnd::Forbidden(message) => Some(message),
                CrdWatchEnd::Unreadable => None,
            },
            Err(kube::Error::Api(s)) if s.code == 403 => Some(s.message),
            Err(e) => {
                let error = crate::reconcile::error::kube_sentence(&e);
                tracing::warn!(%error, retry_in_s = delay.as_secs(), "cannot list CustomResourceDefinitions");
                None
            }
        };
        if let Some(message) = refused {
            tracing::warn!(
                "may not read CustomResourceDefinitions ({message}): finding served kinds through \
                 API discovery every {}s instead (grant get, list and watch on \
                 customresourcedefinitions.apiextensions.k8s.io to see a new CRD at once)",
                DISCOVERY_EVERY.as_secs()
            );
            return discover(client, &wanted, &tx, &health).await;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// Whether `crd` serves the kind `w` asks for: established, with `w`'s version served.
fn serves(crd: &CustomResourceDefinition, w: &Wanted) -> bool {
    let established = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    established
        && crd
            .spec
            .versions
            .iter()
            .any(|v| v.name == w.version && v.served)
}

fn publish(tx: &watch::Sender<Served>, seen: &BTreeMap<String, bool>) {
    let set: BTreeSet<String> = seen
        .iter()
        .filter(|(_, s)| **s)
        .map(|(n, _)| n.clone())
        .collect();
    tx.send_if_modified(|cur| {
        if cur.as_ref() == Some(&set) {
            return false;
        }
        *cur = Some(set);
        true
    });
}

/// Why [`watch_crds`] gave up (its watch itself retries for ever).
enum CrdWatchEnd {
    /// One of Quartet's CRDs may not be read (`get`): the RBAC predates the metadata watch.
    Forbidden(String),
    /// One of Quartet's CRDs could not be read for a while: watch again from a fresh list.
    Unreadable,
}

/// Watch the CRDs' metadata, and read Quartet's own CRDs whole (by name) when they appear or
/// change. Metadata only, because a cluster holds the CRDs of every other project too, many of
/// them hundreds of kilobytes of OpenAPI schema: listing them whole made the operator's peak
/// memory at start grow with them (325 CRDs of about 15 KB each: 44 MiB at start against 15 MiB
/// after), and every change to any of them arrived whole.
async fn watch_crds(
    api: &Api<PartialObjectMeta<CustomResourceDefinition>>,
    full: &Api<CustomResourceDefinition>,
    wanted: &[Wanted],
    tx: &watch::Sender<Served>,
    health: &Health,
) -> CrdWatchEnd {
    let by_name: HashMap<&str, &Wanted> = wanted.iter().map(|w| (w.crd.as_str(), w)).collect();
    let mut seen: BTreeMap<String, bool> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, bool>> = None;
    let mut known = false;
    let mut failures = WatchFailures::default();
    let stream = watcher(api.clone(), watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        if let Some(error) = failures.note(&ev) {
            tracing::warn!(%error, "watching CustomResourceDefinitions failed; retrying");
        }
        let Ok(ev) = ev else { continue };
        let changed = match &ev {
            watcher::Event::InitApply(m) | watcher::Event::Apply(m) => {
                let name = m.name_any();
                match by_name.get(name.as_str()) {
                    Some(w) => match read_served(full, &name, w).await {
                        Ok(s) => Some((name, s)),
                        Err(end) => return end,
                    },
                    None => None,
                }
            }
            _ => None,
        };
        match ev {
            watcher::Event::Init => listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(_) => {
                if let (Some(l), Some((name, s))) = (listing.as_mut(), changed) {
                    l.insert(name, s);
                }
            }
            watcher::Event::InitDone => {
                seen = listing.take().unwrap_or_default();
                if !known {
                    known = true;
                    health.kinds_known("watching CustomResourceDefinitions");
                }
            }
            watcher::Event::Apply(_) => {
                if let Some((name, s)) = changed {
                    seen.insert(name, s);
                }
            }
            watcher::Event::Delete(m) => {
                seen.remove(&m.name_any());
            }
        }
        if known && listing.is_none() {
            publish(tx, &seen);
        }
    }
    CrdWatchEnd::Unreadable
}

/// Whether Quartet's CRD `name` (gone: no) serves `w`, read whole. A failed read is tried again
/// for a few seconds before the watch gives up and starts over.
async fn read_served(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    w: &Wanted,
) -> Result<bool, CrdWatchEnd> {
    let mut delay = Duration::from_millis(500);
    for attempt in 1..=5 {
        match api.get_opt(name).await {
            Ok(crd) => return Ok(crd.is_some_and(|crd| serves(&crd, w))),
            Err(kube::Error::Api(s)) if s.code == 403 => {
                return Err(CrdWatchEnd::Forbidden(s.message))
            }
            Err(e) if attempt == 5 => {
                let error = crate::reconcile::error::kube_sentence(&e);
                tracing::warn!(%error, crd = name, "cannot read CustomResourceDefinition; watching them again");
            }
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
    Err(CrdWatchEnd::Unreadable)
}

/// Served kinds from API discovery (`/apis/{group}/{version}`), looked up every
/// [`DISCOVERY_EVERY`]. A group-version that cannot be read keeps what was last known of it.
async fn discover(client: Client, wanted: &[Wanted], tx: &watch::Sender<Served>, health: &Health) {
    let gvs: BTreeSet<(String, String)> = wanted
        .iter()
        .map(|w| (w.group.clone(), w.version.clone()))
        .collect();
    let mut seen: BTreeMap<String, bool> = BTreeMap::new();
    let mut known = false;
    loop {
        for (group, version) in &gvs {
            let of_gv = wanted
                .iter()
                .filter(|w| &w.group == group && &w.version == version);
            match client
                .list_api_group_resources(&format!("{group}/{version}"))
                .await
            {
                Ok(list) => {
                    for w in of_gv {
                        let s = list.resources.iter().any(|r| r.name == w.plural);
                        seen.insert(w.crd.clone(), s);
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    for w in of_gv {
                        seen.insert(w.crd.clone(), false);
                    }
                }
                Err(e) => {
                    let error = crate::reconcile::error::kube_sentence(&e);
                    tracing::warn!(%error, group_version = %format!("{group}/{version}"), "API discovery failed; retrying")
                }
            }
        }
        if wanted.iter().all(|w| seen.contains_key(&w.crd)) {
            if !known {
                known = true;
                health.kinds_known("API discovery (may not list CustomResourceDefinitions)");
            }
            publish(tx, &seen);
        }
        tokio::time::sleep(DISCOVERY_EVERY).await;
    }
}

/// Cancel `token` on Ctrl-C or SIGTERM.
pub async fn cancel_on_signal(token: CancellationToken) {
    stop_signal().await;
    tracing::info!("shutting down");
    watch_failures::process_stopping();
    token.cancel();
}

/// Cancel `token` on SIGTERM or SIGINT (Ctrl-C), and from then on bound the process's life: it
/// exits `within` later whatever is still running (a call that never answers, a watch that
/// never lists), or at once on a second signal. `on_signal` runs first (e.g. `/readyz` says
/// "shutting down").
pub async fn shutdown_on_signal(
    token: CancellationToken,
    within: Duration,
    on_signal: impl FnOnce() + Send + 'static,
) {
    stop_signal().await;
    tracing::info!(
        within_s = within.as_secs_f64(),
        "shutting down (a second signal exits at once)"
    );
    on_signal();
    watch_failures::process_stopping();
    token.cancel();
    // A thread, not a task: it must fire even if the runtime is stuck or shutting down.
    std::thread::spawn(move || {
        std::thread::sleep(within);
        tracing::error!(
            "shutdown took longer than --shutdown-timeout ({:.1}s): exiting now",
            within.as_secs_f64()
        );
        std::process::exit(1);
    });
    stop_signal().await;
    tracing::warn!("second signal: exiting at once");
    std::process::exit(1);
}

/// SIGTERM (what Kubernetes sends) or SIGINT.
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_connections_kinds_admit_exactly_the_kinds_that_use_a_connection() {
        let crd = serde_json::to_value(ClusterConnection::crd()).unwrap();
        let allowed: BTreeSet<String> = crd
            .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/kinds/items/enum")
            .and_then(serde_json::Value::as_array)
            .expect("spec.kinds items are an enum")
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        let using: BTreeSet<String> = registry()
            .into_iter()
            .map(|r| r.kind)
            .filter(|k| k != "Connection" && k != "ClusterConnection")
            .collect();
        assert_eq!(allowed, using);
    }
}
