//! The generic reconcile loop: finalizer → (apply | cleanup) → status, events, requeue.
//!
//! Apply is observe → diff → the smallest set of calls, with no write when in sync. Cleanup
//! honours `deletionPolicy` and never blocks on what cannot succeed. Errors become conditions
//! and Events (once per distinct error, not once per retry) and a requeue delay chosen by
//! category, so a 4xx waits for a spec change or the resync instead of looping.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tracing::Instrument;

use super::conditions::{self, DELETION_BLOCKED, READY, SYNCED};
use super::context::{scoped_api, Context};
use super::error::{jitter, Category, Error, Result};
use super::finalize;
use super::gitops::{self, Progress, DRIFTED, DRIFT_REPORTED};
use super::pass::{self, current_status, Start};
use super::tenancy::Wake;
use crate::api::{Condition, DeletionPolicy, ManagedStatus};
use crate::changes;
use crate::clients::Http;

// Kept at its old path too: kinds and commands name it as `driver::Managed`.
pub use super::managed::Managed;

/// Result of a create: the identifier to record in status at once, and whether the object is
/// complete (otherwise the next pass observes it and updates what create could not set).
#[derive(Clone, Debug)]
pub struct Created {
    /// The identifier of the new remote object (shown in `status.remoteId`).
    pub remote_id: String,
    /// Whether create set everything; `false`: the next pass, soon after, updates the rest.
    pub complete: bool,
}

/// How a kind's remote object is observed, compared and changed.
pub trait Reconciled: Managed {
    /// The typed service client.
    type Client: From<Arc<Http>> + Send + Sync;
    /// What the remote object should be (from spec and referenced Secrets).
    type Desired: Send + Sync;
    /// What the service has.
    type Observed: Send + Sync;

    /// What the remote object should be, from the spec and the Secrets it references (read
    /// here, so a missing one is a `ReferenceMissing` failure before any call to the service).
    fn desired(&self, ctx: &Context) -> impl Future<Output = Result<Self::Desired>> + Send;
    /// One read of the remote object, keyed by the id in status when the service assigns ids,
    /// otherwise by name (which also finds an object whose create response was lost).
    fn observe(
        &self,
        client: &Self::Client,
        desired: &Self::Desired,
        remote_id: Option<&str>,
    ) -> impl Future<Output = Result<Option<Self::Observed>>> + Send;
    /// Names of the managed fields that differ (pure; empty when in sync).
    fn diff(desired: &Self::Desired, observed: &Self::Observed) -> Vec<&'static str>;
    /// Create the remote object (`desired` was not found by [`Reconciled::observe`]).
    fn create(
        &self,
        client: &Self::Client,
        desired: &Self::Desired,
    ) -> impl Future<Output = Result<Created>> + Send;
    /// Change the fields named in `changed` (what [`Reconciled::diff`] returned) so the remote
    /// object matches `desired`.
    fn update(
        &self,
        client: &Self::Client,
        desired: &Self::Desired,
        observed: &Self::Observed,
        changed: &[&'static str],
    ) -> impl Future<Output = Result<()>> + Send;
    /// Delete the remote object; an absent object counts as deleted.
    fn delete(
        &self,
        client: &Self::Client,
        remote_id: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The identifier of an observed remote object (recorded in `status.remoteId`).
    fn remote_id(observed: &Self::Observed) -> String;
    /// On deletion with no id in status: the id of a remote object this resource may have
    /// created without recording it (a lost create response, a crash before the status write),
    /// found without changing anything. Defaults to [`Reconciled::observe`] without an id; kinds
    /// whose observe does more than read (a due rotation) override it with a plain read.
    fn find_unrecorded(
        &self,
        client: &Self::Client,
        desired: &Self::Desired,
    ) -> impl Future<Output = Result<Option<String>>> + Send {
        async move {
            Ok(self
                .observe(client, desired, None)
                .await?
                .map(|o| Self::remote_id(&o)))
        }
    }
    /// Whether the service assigns the identifier (a UUID, a `ws-` id). Such an id is written to
    /// status the moment create returns, before anything else can fail, so a later failure can
    /// never lead to a second object. Name-keyed objects are found again by name instead.
    const SERVER_ASSIGNED_ID: bool = false;
    /// A long-running operation the remote object is still going through (a run applying, an
    /// upgrade planning, a promotion): `Some(message)` keeps `Ready=False` with reason
    /// `InProgress` and polls again after [`Reconciled::POLL`] instead of the resync interval.
    fn pending(_observed: &Self::Observed) -> Option<String> {
        None
    }
    /// The `Ready` reason while [`Reconciled::pending`] says something: `InProgress` for an
    /// operation, `Waiting` for a kind that waits for objects it names to appear.
    const PENDING_REASON: &'static str = "InProgress";
    /// Observe again after this long although the object is in sync (something the kind reports
    /// from other objects it cannot watch, such as a role's `TransformationsAllowed`).
    fn recheck(_observed: &Self::Observed) -> Option<Duration> {
        None
    }
    /// How often an operation in progress is polled.
    const POLL: Duration = Duration::from_secs(5);
    /// Keyed hash of write-only inputs (compared with status, never read back from the service).
    fn write_only_hash(_desired: &Self::Desired, _ctx: &Context) -> Option<String> {
        None
    }
    /// The old and new value of one changed field (a name [`Reconciled::diff`] returned), as
    /// short text for `quartet plan`; `None` shows the field as changed without values. Never
    /// returns a write-only value (those are compared by [`Reconciled::write_only_hash`]).
    fn shown(
        _desired: &Self::Desired,
        _observed: &Self::Observed,
        _field: &str,
    ) -> Option<(String, String)> {
        None
    }
    /// Kind-specific status fields read from the remote object (camelCase keys, declared in the
    /// kind's status type so the CRD schema keeps them), written next to the managed fields
    /// only when they change. An empty map leaves the fields as they are.
    fn status_fields(&self, _observed: &Self::Observed) -> serde_json::Map<String, Value> {
        serde_json::Map::new()
    }
}

/// The kind-specific fields of `obj`'s current status (everything but [`ManagedStatus::KEYS`]),
/// so a pass that does not read them again (an error, a create) writes them back unchanged.
/// `obj` is the object's JSON form (a pass makes it once for this and [`gitops::Intent::read`]).
pub(crate) fn status_fields(obj: &Value) -> serde_json::Map<String, Value> {
    match obj.get("status").and_then(Value::as_object) {
        Some(st) => st
            .iter()
            .filter(|(k, _)| !ManagedStatus::KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        None => serde_json::Map::new(),
    }
}

/// The finalizer that keeps a resource of kind `K` until its cleanup has run.
pub fn finalizer_name<K: Resource<DynamicType = ()>>() -> String {
    format!("{}/cleanup", K::group(&()))
}

/// The server-side apply field manager of kind `K`'s status writes.
pub fn field_manager<K: Resource<DynamicType = ()>>() -> String {
    format!("quartet/{}", K::kind(&()).to_lowercase())
}

/// Run the controller of kind `K` until `life` says stop.
pub async fn run<K: Reconciled>(ctx: Arc<Context>, namespace: Option<String>, life: Lifetime) {
    let controller = controller_for::<K>(&ctx, namespace.as_deref(), &life);
    pass::drive(controller, ctx, &life, reconcile::<K>).await
}

/// How the supervisor (`controllers::run`) runs one kind's controller: the token that stops it
/// (gracefully: no new reconcile starts, those under way may finish), and what to call once its
/// cache is filled (`/readyz` waits for that).
#[derive(Clone)]
pub struct Lifetime {
    stop: tokio_util::sync::CancellationToken,
    synced: Arc<dyn Fn() + Send + Sync>,
    listed: Arc<std::sync::atomic::AtomicBool>,
}

impl Lifetime {
    /// A lifetime ended by `stop`; `synced` is called once the controller's cache is filled.
    pub fn new(
        stop: tokio_util::sync::CancellationToken,
        synced: impl Fn() + Send + Sync + 'static,
    ) -> Self {
        Self {
            stop,
            synced: Arc::new(synced),
            listed: Default::default(),
        }
    }

    /// Whether the controller's cache has had a first complete list. Until then no reconcile
    /// has started, and kube's controller, once told to stop, would wait for that list forever
    /// (it stops polling the watch that would bring it): a stopping supervisor drops it at once.
    pub fn has_listed(&self) -> bool {
        self.listed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves when the controller is to stop (for `Controller::graceful_shutdown_on`).
    pub fn stopped(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.stop.clone().cancelled_owned()
    }

    /// The stop token itself (a child of the process's shutdown token).
    pub fn token(&self) -> &tokio_util::sync::CancellationToken {
        &self.stop
    }

    /// Say that there is nothing to cache yet (the kind has no resource here): `/readyz` counts
    /// the kind as synced, though no controller has listed ([`Lifetime::has_listed`] stays
    /// false).
    pub fn nothing_yet(&self) {
        (self.synced)()
    }

    /// Say that the controller's cache has its first complete list.
    pub fn synced(&self) {
        self.listed.store(true, std::sync::atomic::Ordering::SeqCst);
        (self.synced)()
    }
}

/// The controller of kind `K`, also woken by a change of the Connection a resource uses (fixed
/// token, new address, Ready again) and, for kinds that read Secrets, of such a Secret. Both
/// come from watches shared by every kind ([`Context::send_wake`]): one per watched namespace of
/// Connections and of Secrets, where each controller had its own (24 Connection and 10 Secret
/// watches, each Secret watch carrying every Secret of the cluster).
pub fn controller_for<K: Managed>(
    ctx: &Arc<Context>,
    namespace: Option<&str>,
    life: &Lifetime,
) -> Controller<K> {
    let api: Api<K> = scoped_api(&ctx.client, namespace);
    let (reader, writer) = reflector::store();
    // No generation predicate: it would swallow finalizer-add and deletion events.
    let controller = Controller::for_stream(lean_watch(api, writer, life.clone(), ctx), reader);
    // A Connection or ClusterConnection that changes, a namespace whose labels change, or a
    // Secret a resource reads wakes the resources it concerns, instead of leaving them to their
    // backoff or resync (a namespace admitted by label converges at once).
    let wakes = tenancy_wakes::<K>(ctx, controller.store());
    // Periodic resyncs come from one sweep, not from a timer per resource in kube's scheduler.
    let resyncs = super::resync::due::<K>(ctx, controller.store(), namespace);
    controller.reconcile_on(wakes).reconcile_on(resyncs)
}

/// The resources of `store` each change sent with [`Context::send_wake`] may concern.
fn tenancy_wakes<K: Managed>(
    ctx: &Arc<Context>,
    store: reflector::Store<K>,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    let ctx = ctx.clone();
    let rx = ctx.wakes();
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(w) => return Some((w, rx)),
                // Missed wakes are caught up by the resources' own retries and resyncs.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .flat_map(move |wake| {
        if matches!(wake, Wake::Secret { .. }) && !K::WATCHES_SECRETS {
            return futures::stream::iter(Vec::new());
        }
        let refs: Vec<ObjectRef<K>> = store
            .state()
            .into_iter()
            .filter(|o| match &wake {
                Wake::Secret { namespace, name } => {
                    o.namespace().as_deref() == Some(namespace.as_str())
                        && o.secret_refs().contains(name)
                }
                wake => wake.concerns(
                    K::SERVICE,
                    &o.namespace().unwrap_or_default(),
                    o.connection_ref(),
                ),
            })
            .map(|o| {
                ctx.wake(object_key(o.as_ref()));
                ObjectRef::from_obj(o.as_ref())
            })
            .collect();
        futures::stream::iter(refs)
    })
}

/// The annotations a pass reads from a resource ([`super::gitops::Intent`], and the trace a
/// reconcile links to): a cached copy keeps these and no other.
const READ_ANNOTATIONS: [&str; 4] = [
    super::gitops::REQUESTED_AT,
    super::gitops::FLUX_REQUESTED_AT,
    crate::traces::TRACEPARENT,
    crate::traces::TRACESTATE,
];

/// The watch of a kind's own objects, feeding the controller's cache without `managedFields`,
/// labels, nor the annotations no pass reads (`kubectl apply`'s last-applied manifest, GitOps
/// tools' tracking ids, Helm's release names): nothing here reads them once the watch event is
/// handled, and at 10,000 objects they were the largest part of the cache (the server keeps
/// them; server-side apply does not need the client's copy, and every write here is a patch of
/// `status` or `finalizers`, never a whole object). Each complete list is reported to
/// `life` (kube's `Store::wait_until_ready` wakes only one waiter, the controller's own, so
/// readiness is read from the stream instead).
///
/// Only this instance's shard is watched (see [`crate::shard`]). A resource relabelled to
/// another shard arrives as a deletion: its labels (read before they are dropped) say so, the
/// reflector drops it and `applied_objects` never hands a deletion to the controller, so no pass
/// (and no cleanup) runs for it here.
pub(crate) fn lean_watch<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    life: Lifetime,
    ctx: &Arc<Context>,
) -> impl futures::Stream<Item = std::result::Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let shard = ctx.settings.shard.clone();
    let (handed, taken) = (ctx.clone(), ctx.clone());
    let mut failures = super::watch_failures::WatchFailures::default();
    watcher(api, shard.watcher_config())
        .default_backoff()
        .inspect(move |ev| {
            // A kind whose resources cannot be listed (a refused RBAC rule) says so at once.
            if let Some(error) = failures.note(ev) {
                let kind = K::kind(&());
                tracing::warn!(%kind, %error, "watching {kind} failed; retrying");
            }
            if let Ok(watcher::Event::Delete(obj)) = ev {
                if !shard.serves(obj.labels()) {
                    hand_over(&handed, obj);
                }
            }
        })
        .modify(|obj| lean_meta(obj.meta_mut()))
        .reflect(writer)
        .inspect(move |ev| match ev {
            Ok(watcher::Event::InitDone) => life.synced(),
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                taken.take_back(|| object_key(obj));
            }
            _ => {}
        })
        .applied_objects()
}

/// What a cached copy keeps of a resource's metadata: no `managedFields`, no labels, and only
/// the annotations a pass reads ([`READ_ANNOTATIONS`]).
fn lean_meta(meta: &mut kube::api::ObjectMeta) {
    meta.managed_fields = None;
    // A label map is a tree node of over 500 bytes even for the one shard label: at 10,000
    // labelled resources, 6-7 MiB of cache (benches/RESULTS.md).
    meta.labels = None;
    // `kubectl apply`'s copy of the whole last-applied manifest alone doubles an applied
    // object's size in the cache.
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| READ_ANNOTATIONS.contains(&k.as_str()));
        // An emptied map keeps its node allocated.
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}

/// `obj` left this instance's shard (its deletion event carries another shard's label): it is
/// the other shard's to serve now.
fn hand_over<K: Resource<DynamicType = ()>>(ctx: &Context, obj: &K) {
    ctx.hand_over(object_key(obj));
    let (kind, ns, name) = (
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any(),
    );
    let to = obj
        .labels()
        .get(crate::shard::LABEL)
        .map(String::as_str)
        .unwrap_or("");
    tracing::info!(%kind, namespace = %ns, %name, to_shard = %to, "{kind} {ns}/{name} moved to another shard ({}={to:?}): handed over, its finalizer and remote object left as they are", crate::shard::LABEL);
    // Its Ready series is the new shard's to report now.
    ctx.metrics.resource_gone(&kind, &ns, &name);
}

/// The key of `obj` in the per-object records of [`Context`] (`Kind/namespace/name`).
pub(crate) fn object_key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

#[tracing::instrument(skip_all, fields(kind = %K::kind(&()), namespace = %obj.namespace().unwrap_or_default(), name = %obj.name_any()))]
async fn reconcile<K: Reconciled>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    // Our own write's copy: the resync the writing pass asked for stays as it is. A copy whose
    // pending create is not settled is never taken for one (`pending_free`).
    let own = obj.managed_status().is_none_or(pending_free::<K>);
    if let Some(action) = pass::needless(obj.as_ref(), &ctx, own, |key| {
        ctx.keep_resync(key, jitter(ctx.settings.resync))
    }) {
        return Ok(action);
    }
    // The spec is the one already applied: a write now restores what changed outside.
    pass::run(
        obj,
        &ctx,
        changes::Trigger::DriftRepair,
        |obj| apply(obj, &ctx),
        |obj| cleanup(obj, &ctx),
    )
    .await
}

/// The change-log context of a pass over `obj`: the resource, why it is reconciled (`steady`:
/// the trigger of a write at an unchanged, synced spec) and the gate its writes pass.
pub(crate) fn change_pass<K: Managed>(
    obj: &K,
    steady: changes::Trigger,
    gate: changes::Gate,
) -> Arc<changes::Pass> {
    use changes::Trigger;
    let status = obj.managed_status();
    let request = serde_json::to_value(obj)
        .ok()
        .and_then(|v| changes::pending_request(&v));
    let trigger = if obj.meta().deletion_timestamp.is_some() {
        Trigger::Deletion
    } else if request.is_some() {
        Trigger::Request
    } else if status.is_none_or(|s| s.remote_id.is_none()) {
        // Nothing in the service yet (a first pass, or one after waiting or failing): a write
        // creates it.
        Trigger::Create
    } else if status
        .and_then(|s| conditions::get(&s.conditions, SYNCED))
        .is_some_and(|c| c.status == "False")
    {
        Trigger::Retry
    } else if status.and_then(|s| s.observed_generation) != obj.meta().generation {
        Trigger::SpecChange
    } else {
        steady
    };
    changes::Pass::new(
        changes::Resource {
            kind: K::kind(&()).to_string(),
            namespace: obj.namespace().unwrap_or_default(),
            name: obj.name_any(),
            uid: obj.uid().unwrap_or_default(),
            generation: obj.meta().generation,
        },
        trigger,
        request.filter(|_| trigger == Trigger::Request),
        Some(gate),
    )
}

/// The writes of a pass that the service accepted and that no Event of the pass listed (a
/// `Created`, `Updated`, ... Event lists its pass's writes itself), in one `Changed` Event (none
/// when nothing was left: refused writes are in the change log and the error's own Event); and
/// the pass's calls in `quartet_calls_per_reconcile`.
pub(crate) async fn publish_changes<K: Managed>(ctx: &Context, obj: &K, pass: &changes::Pass) {
    let kind = K::kind(&());
    ctx.metrics
        .calls_per_reconcile(&kind, K::SERVICE.as_str(), &pass.calls());
    let Some(note) = changes::summary(&pass.take_unreported()) else {
        return;
    };
    publish(ctx, obj, EventType::Normal, "Changed", "Reconcile", note).await;
}

/// What a successful pass did.
enum Done {
    InSync,
    Created,
    Adopted,
    Updated(Vec<&'static str>),
    DriftCorrected(Vec<&'static str>),
    /// `driftPolicy: Report`: these fields differ in the service and were left as they are.
    DriftReported(Vec<&'static str>),
}

async fn apply<K: Reconciled>(obj: Arc<K>, ctx: &Context) -> Result<Action> {
    let Start {
        key,
        generation,
        before,
        mut status,
        mut written,
        intent,
        asked,
    } = Start::of(obj.as_ref());
    if intent.suspend {
        // Before anything that could reach the service (even the resync budget's Connection).
        ctx.cancel_resync(&key);
        let (action, _) = gitops::suspended_pass(obj.as_ref(), ctx, status, written).await?;
        return Ok(action);
    }
    if intent.requested_at.is_some() {
        status.last_handled_reconcile_at = intent.requested_at.clone();
    }
    // A copy older than our last status write, and that write's own copy, never come here
    // (`reconcile` answers them with `pass::needless`).
    if pending_free::<K>(&before)
        && ctx.is_resync(&key, obj.resource_version().as_deref())
        && !resync_slot::<K>(obj.as_ref(), ctx).await
    {
        // Resyncs have used their share of the Connection's budget: put this one off without
        // a call, so new and changed objects never wait behind resyncs of known ones.
        return Ok(ctx.resync_after(&key, spread(ctx.settings.resync)));
    }
    // A wake is answered by this pass (when `is_resync` did not run and take it).
    ctx.take_urgent(&key);

    let synced = sync(
        obj.as_ref(),
        ctx,
        &mut status,
        &mut written,
        intent.report_drift,
    )
    .await;
    if let Some(why) = pass::moved_away(ctx, &key, synced.as_ref().err()) {
        return Ok(pass::let_go(ctx, &key, &why));
    }
    match synced {
        Ok((done, again, pending)) => {
            let id = status.remote_id.clone().unwrap_or_default();
            let changed_remote = !matches!(done, Done::InSync | Done::DriftReported(_));
            let (reason, note) = match &done {
                Done::InSync => (None, String::new()),
                Done::Created => (Some("Created"), format!("created {id}")),
                Done::Adopted => (Some("Adopted"), format!("adopted existing {id}")),
                Done::Updated(f) => (Some("Updated"), format!("updated {id}: {}", f.join(", "))),
                Done::DriftCorrected(f) => {
                    status.drifted_fields = f.iter().map(|s| s.to_string()).collect();
                    (
                        Some("DriftCorrected"),
                        format!(
                            "{id} was changed outside Quartet; restored {}",
                            f.join(", ")
                        ),
                    )
                }
                Done::DriftReported(_) => (None, String::new()),
            };
            if let Done::DriftReported(fields) = &done {
                let (reported, drift_changed) = report_drift(&mut status, &id, fields, generation);
                if drift_changed {
                    publish(
                        ctx,
                        obj.as_ref(),
                        EventType::Warning,
                        "DriftDetected",
                        "Reconcile",
                        reported,
                    )
                    .await;
                }
                if let Some(rv) = write_status(obj.as_ref(), ctx, &status, &mut written).await? {
                    ctx.mark_fresh(&key, rv.clone(), asked);
                    ctx.settle(&key, Some(rv));
                } else {
                    ctx.settle(&key, obj.resource_version());
                }
                return Ok(ctx.resync_after(&key, jitter(ctx.settings.resync)));
            }
            if conditions::remove(&mut status.conditions, DRIFTED) {
                status.drifted_fields.clear();
            }
            let mut conds_changed = match &pending {
                Some(progress) => conditions::set(
                    &mut status.conditions,
                    READY,
                    false,
                    K::PENDING_REASON,
                    progress.clone(),
                    generation,
                ),
                None => conditions::set(
                    &mut status.conditions,
                    READY,
                    true,
                    "InSync",
                    format!("{id} matches the spec"),
                    generation,
                ),
            };
            conds_changed |= conditions::set(
                &mut status.conditions,
                SYNCED,
                true,
                "ReconcileSuccess",
                "",
                generation,
            );
            conds_changed |= conditions::remove(&mut status.conditions, DELETION_BLOCKED);
            let progress = match (&pending, again) {
                (Some(p), _) => Progress::Working(K::PENDING_REASON, p.as_str()),
                (None, Some(_)) => {
                    Progress::Working("Creating", "the create is completed by the next pass")
                }
                (None, None) => Progress::Done,
            };
            conds_changed |= gitops::set_progress(&mut status.conditions, progress, generation);
            if changed_remote || conds_changed {
                status.last_sync_time = Some(conditions::now());
            }
            let rv = write_status(obj.as_ref(), ctx, &status, &mut written).await?;
            // Only now is the pass a success: a refused status write is a failure that backs off
            // like any other, not a 1-second loop.
            ctx.succeeded(&key);
            if let Some(rv) = &rv {
                // Our own status write comes back as a watch event: that pass has nothing to do,
                // unless more work was asked for (an incomplete create observes again at once).
                if again.is_none() {
                    ctx.mark_fresh(&key, rv.clone(), asked);
                }
            }
            ctx.settle(
                &key,
                if pending.is_none() && again.is_none() {
                    rv.or_else(|| obj.resource_version())
                } else {
                    None
                },
            );
            if let Some(reason) = reason {
                publish(
                    ctx,
                    obj.as_ref(),
                    EventType::Normal,
                    reason,
                    "Reconcile",
                    note,
                )
                .await;
            }
            let poll = pending.as_ref().map(|_| K::POLL);
            Ok(match again.or(poll) {
                Some(soon) => {
                    ctx.cancel_resync(&key);
                    Action::requeue(soon)
                }
                None => ctx.resync_after(&key, jitter(ctx.settings.resync)),
            })
        }
        Err(err) => {
            let (action, rv) =
                record_failure(obj.as_ref(), ctx, &key, &err, status, written).await?;
            // A failure that waits for a person (a rejected, unsupported or invalid request):
            // the watch events of this pass's own writes (finalizer, status) must not start
            // another pass that sends the refused call again.
            let waits = matches!(
                err.category(),
                crate::reconcile::error::Category::Rejected
                    | crate::reconcile::error::Category::Unsupported
                    | crate::reconcile::error::Category::InvalidSpec
            );
            if let (true, Some(rv)) = (waits, rv) {
                ctx.mark_fresh(&key, rv, asked);
            }
            Ok(action)
        }
    }
}

/// A failed pass, the same for both shapes of kind: `Synced=False` (and `Ready=False`, unless a
/// transient failure hits an object in sync for this generation) with the error's reason and
/// message, one Event per distinct error, the Connection forgotten when its token was refused,
/// and a requeue chosen by category. Returns the requeue and the new resourceVersion when the
/// status was written.
pub(crate) async fn record_failure<K: Managed>(
    obj: &K,
    ctx: &Context,
    key: &str,
    err: &Error,
    mut status: ManagedStatus,
    mut written: ManagedStatus,
) -> Result<(Action, Option<String>)> {
    let generation = obj.meta().generation;
    let failures = ctx.failed(key);
    // The retry comes from kube's scheduler (below), not from a resync set by an earlier pass.
    ctx.cancel_resync(key);
    let category = err.category();
    if category == Category::Unauthorized {
        ctx.forget_connection(
            &K::kind(&()),
            &obj.namespace().unwrap_or_default(),
            obj.connection_ref(),
            K::SERVICE,
        );
    }
    ctx.metrics.error(&K::kind(&()), category.reason());
    changes::failed(category.reason());
    let message = err.to_string();
    // The condition and Event reason: the category, or a kind's own (`KeyImmutable`).
    let reason = err.reason();
    let newly = conditions::set(
        &mut status.conditions,
        SYNCED,
        false,
        reason,
        &message,
        generation,
    );
    // A transient failure of a resync says nothing new about an object that was in sync for
    // this generation: keep Ready as it was.
    let keep_ready = category == Category::Transient
        && conditions::get(&status.conditions, READY)
            .is_some_and(|c| c.status == "True" && c.generation() == generation);
    if !keep_ready {
        conditions::set(
            &mut status.conditions,
            READY,
            false,
            reason,
            &message,
            generation,
        );
    }
    gitops::set_progress(
        &mut status.conditions,
        gitops::failure_progress(err, &message),
        generation,
    );
    if newly {
        status.last_sync_time = Some(conditions::now());
    }
    let rv = write_status(obj, ctx, &status, &mut written).await?;
    if newly {
        publish(ctx, obj, EventType::Warning, reason, "Reconcile", message).await;
    }
    let wait = err.requeue_after(failures, ctx.settings.resync);
    tracing::info!(error = %err, category = category.reason(), retry_in_s = wait.as_secs(), "reconcile failed");
    Ok((Action::requeue(wait), rv))
}

/// Observe → diff → apply. Records a new remote id in status (and writes it) before anything
/// else can fail. Returns what was done and an earlier requeue when more work remains.
async fn sync<K: Reconciled>(
    obj: &K,
    ctx: &Context,
    status: &mut ManagedStatus,
    written: &mut ManagedStatus,
    report_drift: bool,
) -> Result<(Done, Option<Duration>, Option<String>)> {
    // The spec has not changed since the last successful pass: a difference is an edit in the
    // service, not a spec change.
    let unchanged_spec = unchanged_spec(obj, status);
    let ns = obj.namespace().unwrap_or_default();
    let http = ctx
        .http_for(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE)
        .await?;
    let client = K::Client::from(http);
    let desired = obj.desired(ctx).await?;
    let hash = K::write_only_hash(&desired, ctx);
    let observed = obj
        .observe(&client, &desired, status.remote_id.as_deref())
        .await?;
    let Some(observed) = observed else {
        let existed = status.remote_id.is_some();
        if existed && unchanged_spec && report_drift {
            return Ok((Done::DriftReported(vec![DELETED_REMOTELY]), None, None));
        }
        let created = obj.create(&client, &desired).await?;
        status.remote_id = Some(created.remote_id);
        status.write_only_hash = hash;
        if K::SERVER_ASSIGNED_ID || !created.complete {
            write_status(obj, ctx, status, written).await?;
        }
        let again = (!created.complete).then_some(Duration::from_millis(200));
        let done = if existed {
            Done::DriftCorrected(vec![DELETED_REMOTELY])
        } else {
            Done::Created
        };
        return Ok((done, again, None));
    };
    let adopted = status.remote_id.is_none();
    status.remote_id = Some(K::remote_id(&observed));
    let fields = obj.status_fields(&observed);
    if !fields.is_empty() {
        status.fields = fields;
    }
    let pending = K::pending(&observed);
    let recheck = K::recheck(&observed);
    let mut changed = K::diff(&desired, &observed);
    // A write-only value cannot be read back, so the service cannot be seen to drift in it: a
    // new hash means that a Secret the spec references holds a new value (or that the spec
    // names another), a change to send, never drift to report or to "restore".
    let secret_changed = hash.is_some() && hash != status.write_only_hash;
    if changed.is_empty() && !secret_changed {
        return Ok((
            if adopted { Done::Adopted } else { Done::InSync },
            recheck,
            pending,
        ));
    }
    let drift = !adopted && unchanged_spec && !changed.is_empty();
    if drift && report_drift {
        // The new value waits with the drift: a kind's update may write the drifted fields
        // with it, which is what reporting must not do.
        return Ok((Done::DriftReported(changed), recheck, pending));
    }
    let drifted = changed.clone();
    if secret_changed {
        changed.push(WRITE_ONLY);
    }
    let _trigger = if adopted {
        changes::set_trigger(changes::Trigger::Adoption);
        None
    } else if drift {
        None
    } else {
        Some(changes::secret_change())
    };
    obj.update(&client, &desired, &observed, &changed).await?;
    status.write_only_hash = hash;
    Ok((
        if adopted {
            Done::Adopted
        } else if drift {
            Done::DriftCorrected(drifted)
        } else {
            Done::Updated(changed)
        },
        recheck,
        pending,
    ))
}

/// The field name that stands for a kind's write-only fields (values from Secrets) in a diff.
pub(crate) const WRITE_ONLY: &str = "(write-only fields)";

/// The drift field name of a remote object deleted in the service.
const DELETED_REMOTELY: &str = "(deleted remotely)";

/// Record fields left drifted under `driftPolicy: Report`: `Drifted=True` naming them,
/// `status.driftedFields`, `Synced=False`, and `Ready` kept `True` while the object exists.
/// Returns the report and whether it is new (an Event is due).
fn report_drift(
    status: &mut ManagedStatus,
    id: &str,
    fields: &[&'static str],
    generation: Option<i64>,
) -> (String, bool) {
    let list = fields.join(", ");
    let report = format!("{id} differs from the spec in the service: {list} (driftPolicy Report leaves it; set driftPolicy: Correct to restore the spec)");
    status.drifted_fields = fields.iter().map(|s| s.to_string()).collect();
    let newly = conditions::set(
        &mut status.conditions,
        DRIFTED,
        true,
        DRIFT_REPORTED,
        &report,
        generation,
    );
    conditions::set(
        &mut status.conditions,
        SYNCED,
        false,
        DRIFT_REPORTED,
        &report,
        generation,
    );
    let gone = fields == [DELETED_REMOTELY];
    let ready_msg = if gone {
        report.clone()
    } else {
        format!("{id} exists; {list} drifted in the service (driftPolicy Report)")
    };
    conditions::set(
        &mut status.conditions,
        READY,
        !gone,
        DRIFT_REPORTED,
        ready_msg,
        generation,
    );
    let progress = if gone {
        Progress::Stalled(DRIFT_REPORTED, &report)
    } else {
        Progress::Done
    };
    gitops::set_progress(&mut status.conditions, progress, generation);
    conditions::remove(&mut status.conditions, DELETION_BLOCKED);
    if newly {
        status.last_sync_time = Some(conditions::now());
    }
    (report, newly)
}

/// Whether a periodic resync of `obj` may run now (within the resync share of its Connection's
/// budget). Says so in a metric and, at most once a minute per kind, a log line when not.
async fn resync_slot<K: Managed>(obj: &K, ctx: &Context) -> bool {
    let ns = obj.namespace().unwrap_or_default();
    let Ok(http) = ctx
        .http_for(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE)
        .await
    else {
        // The pass will report the Connection problem itself.
        return true;
    };
    if http.try_resync() {
        return true;
    }
    let kind = K::kind(&()).to_string();
    let connection = ctx
        .connection_for(&kind, &ns, obj.connection_ref(), K::SERVICE)
        .map(|c| super::tenancy::label(&c))
        .unwrap_or_else(|_| format!("{ns}/{}", K::SERVICE));
    ctx.metrics.resync_deferred(&kind, &connection);
    if ctx.should_log_stretch(&kind) {
        tracing::warn!(%kind, %connection, share = crate::clients::http::RESYNC_SHARE, "resyncs need more than their share of the Connection's requestsPerSecond: stretching the resync period (raise requestsPerSecond or --resync-interval)");
    }
    false
}

/// A random delay in [¼, ¾] of the resync interval (at least a second), so put-off resyncs
/// spread out instead of coming back together.
fn spread(resync: Duration) -> Duration {
    use rand::Rng;
    let secs = resync.as_secs_f64().max(4.0);
    Duration::from_secs_f64(rand::rng().random_range(secs * 0.25..secs * 0.75))
}

/// Not following a long-running operation (those poll on their own schedule).
fn pending_free<K: Reconciled>(status: &ManagedStatus) -> bool {
    conditions::get(&status.conditions, READY).is_none_or(|c| c.reason != K::PENDING_REASON)
}

/// Whether `obj`'s spec is the one its last successful pass applied (`Ready` at its
/// generation): a difference in the service is then drift, not a spec change.
pub(crate) fn unchanged_spec<K: Resource>(obj: &K, status: &ManagedStatus) -> bool {
    before_was_ready(status)
        && conditions::get(&status.conditions, READY).and_then(Condition::generation)
            == obj.meta().generation
}

fn before_was_ready(status: &ManagedStatus) -> bool {
    conditions::get(&status.conditions, READY).is_some_and(|c| c.status == "True")
}

/// Write status by server-side apply, only when it differs from what was last written; the
/// write's resourceVersion is remembered ([`Context::set_written`]).
pub async fn write_status<K: Managed>(
    obj: &K,
    ctx: &Context,
    status: &ManagedStatus,
    written: &mut ManagedStatus,
) -> Result<Option<String>> {
    // Every pass comes here, written or not, so the gauge is right after a restart too.
    ctx.metrics.resource_ready(
        &K::kind(&()),
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
        conditions::get(&status.conditions, READY).is_some_and(|c| c.status == "True"),
    );
    if status == written {
        return Ok(None);
    }
    let mut json = obj.status_json(status);
    if let Some(o) = json.as_object_mut() {
        for (k, v) in &status.fields {
            o.insert(k.clone(), v.clone());
        }
    }
    let rv = patch_status(obj, ctx, json).await?;
    *written = status.clone();
    if let Some(rv) = &rv {
        // No later pass decides from a copy without this write ([`Context::stale_copy`]).
        ctx.set_written(&object_key(obj), rv);
    }
    Ok(rv)
}

/// What a write asks back when all it needs is the new resourceVersion: the metadata alone.
/// kube-apiserver transforms the answer of every verb (`transformResponseObject`), so a write
/// answered this way is a write like any other, without the object (its spec, the status just
/// sent) encoded, sent and decoded for nothing.
const METADATA_ONLY: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// Server-side apply of `status` with this kind's field manager; returns the new resourceVersion.
pub async fn patch_status<K>(obj: &K, ctx: &Context, status: Value) -> Result<Option<String>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let ns = obj.namespace().unwrap_or_default();
    let updated = apply_status::<K>(&ctx.client, Some(&ns), &obj.name_any(), status).await?;
    Ok(updated.metadata.resource_version)
}

/// Server-side apply of `status` to the `K` named `name` (in `namespace`, `None` for a
/// cluster-scoped kind) with the kind's field manager, answered with the metadata only.
pub(crate) async fn apply_status<K: Resource<DynamicType = ()>>(
    client: &kube::Client,
    namespace: Option<&str>,
    name: &str,
    status: Value,
) -> std::result::Result<PartialObjectMeta<K>, kube::Error> {
    let patch =
        json!({ "apiVersion": K::api_version(&()), "kind": K::kind(&()), "status": status });
    let mut request = kube::core::Request::new(K::url_path(&(), namespace))
        .patch_subresource(
            "status",
            name,
            &PatchParams::apply(&field_manager::<K>()).force(),
            &Patch::Apply(&patch),
        )
        .map_err(kube::Error::BuildRequest)?;
    request.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static(METADATA_ONLY),
    );
    client.request(request).await
}

/// Publish an Event; failures to record are logged, never fatal. A `Normal` Event published
/// in a reconcile pass also lists the pass's accepted writes not listed yet (the change
/// records), so a write makes one Event, not a second `Changed` one next to it.
pub async fn publish<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let mut note = note;
    if matches!(type_, EventType::Normal) {
        if let Some(writes) = changes::summary(&changes::unreported()) {
            note = format!("{note} ({writes})");
        }
    }
    if note.len() > 1000 {
        let mut cut = 1000;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    // Recorded in the background: an Event is a report, not part of the work, so it must not
    // hold one of the controller's concurrent reconciles for another API round trip.
    // The pass's span goes with it, so that the Event's write is in the pass's trace.
    let recorder = ctx.recorder();
    let reference = obj.object_ref(&());
    tokio::spawn(
        async move {
            if let Err(e) = recorder.publish(&ev, &reference).await {
                tracing::warn!(error = %e, "could not record event");
            }
        }
        .instrument(tracing::Span::current()),
    );
}

async fn cleanup<K: Reconciled>(obj: Arc<K>, ctx: &Context) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let recorded = current_status(obj.as_ref()).remote_id;
    if recorded.is_none() && obj.deletion_policy() == DeletionPolicy::Retain {
        return Ok(Action::await_change());
    }
    // No id in status does not mean nothing was created: a create whose response was lost, or a
    // pass that stopped (a crash, a failed status write) between the create and the status
    // write, leaves an object only a lookup finds. So look it up the way a pass would (by name,
    // or by the kind's marker) and delete what is found; otherwise deleting the resource would
    // orphan it (found by `cargo bench --bench chaos`).
    let mut remote_id = recorded.clone().unwrap_or_default();
    let retained = format!("{remote_id} kept in the service ({})", obj.retain_note());
    if let Some(done) = finalize::kept(obj.as_ref(), ctx, retained).await {
        return done;
    }
    let result: Result<Option<String>> = async {
        let http = ctx
            .http_for(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE)
            .await?;
        let client = K::Client::from(http);
        let id = match &recorded {
            Some(id) => id.clone(),
            None => {
                let desired = obj.desired(ctx).await?;
                match obj.find_unrecorded(&client, &desired).await? {
                    Some(id) => id,
                    None => return Ok(None),
                }
            }
        };
        obj.delete(&client, &id).await?;
        Ok(Some(id))
    }
    .await;
    let key = object_key(obj.as_ref());
    if let Some(why) = pass::moved_away(ctx, &key, result.as_ref().err()) {
        // An error keeps the finalizer: the new shard deletes the remote object and removes it.
        return Err(Error::HandedOver(why));
    }
    let result = match result {
        // Never created remotely: nothing to remove.
        Ok(None) => return Ok(Action::await_change()),
        Ok(Some(id)) => {
            remote_id = id;
            Ok(())
        }
        // Without an id, an error that says the lookup itself cannot be made (no usable
        // Connection, a missing Secret, an unsupported feature, a spec the kind refuses) means
        // this resource never got as far as a create either: removing it orphans nothing.
        // Transient, auth and Kubernetes errors keep the finalizer and are retried.
        Err(err)
            if recorded.is_none()
                && !matches!(
                    err.category(),
                    Category::Transient
                        | Category::Unauthorized
                        | Category::KubeApi
                        | Category::KubeForbidden
                        | Category::KubeNotInstalled
                ) =>
        {
            tracing::debug!(error = %err, "no remote id and no lookup possible: nothing to remove");
            return Ok(Action::await_change());
        }
        Err(err) => {
            if remote_id.is_empty() {
                remote_id = "the remote object".into();
            }
            Err(err)
        }
    };
    match result {
        Ok(()) => {
            // The object goes once its finalizer does: nothing of it is kept.
            ctx.forget(&object_key(obj.as_ref()));
            publish(
                ctx,
                obj.as_ref(),
                EventType::Normal,
                "Deleted",
                "Delete",
                format!("deleted {remote_id}"),
            )
            .await;
            Ok(Action::await_change())
        }
        Err(err) => {
            let says = finalize::Failed {
                reason: err.reason(),
                blocked: format!("{err}; the finalizer is kept until the remote object can be deleted (or set deletionPolicy: Retain)"),
                orphaned: format!("{remote_id} left in the service: {err}"),
            };
            finalize::failed(obj.as_ref(), ctx, err, says).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SecretsPolicy;

    #[tokio::test]
    async fn a_status_write_applies_the_status_and_asks_for_the_metadata_only() {
        let seen = Arc::new(std::sync::Mutex::new(None));
        let service = {
            let seen = seen.clone();
            tower::service_fn(move |req: http::Request<kube::client::Body>| {
                let seen = seen.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body.collect_bytes().await?;
                    *seen.lock().unwrap() = Some((parts, body));
                    let answer = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                        "metadata": {"name": "p", "namespace": "apps", "resourceVersion": "42"}});
                    Ok::<_, kube::Error>(http::Response::new(kube::client::Body::from(
                        answer.to_string().into_bytes(),
                    )))
                }
            })
        };
        let client = kube::Client::new(service, "default");
        let updated = apply_status::<SecretsPolicy>(
            &client,
            Some("apps"),
            "p",
            json!({"observedGeneration": 3}),
        )
        .await
        .unwrap();
        assert_eq!(updated.metadata.resource_version.as_deref(), Some("42"));
        let (parts, body) = seen.lock().unwrap().take().expect("one request");
        assert_eq!(parts.method, http::Method::PATCH);
        assert_eq!(
            parts.uri.path(),
            "/apis/secrets.quartet.dev/v1alpha1/namespaces/apps/secretspolicies/p/status"
        );
        let query = parts.uri.query().unwrap_or_default();
        assert!(
            query.contains("fieldManager=quartet%2Fsecretspolicy") && query.contains("force=true"),
            "{query}"
        );
        assert_eq!(
            parts.headers[http::header::CONTENT_TYPE],
            "application/apply-patch+yaml"
        );
        assert_eq!(parts.headers[http::header::ACCEPT], METADATA_ONLY);
        let sent: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            sent,
            json!({"apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
                "status": {"observedGeneration": 3}})
        );
    }

    #[test]
    fn a_cached_copy_keeps_only_the_annotations_a_pass_reads_and_no_labels() {
        let mut meta: kube::api::ObjectMeta = serde_json::from_value(serde_json::json!({
            "name": "p",
            "labels": {"quartet.dev/shard": "s0", "app.kubernetes.io/instance": "apps"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "argocd.argoproj.io/tracking-id": "apps:secrets.quartet.dev/SecretsPolicy:default/p",
                "reconcile.quartet.dev/requestedAt": "now",
                "reconcile.fluxcd.io/requestedAt": "then",
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "tracestate": "v=1",
            },
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        }))
        .unwrap();
        lean_meta(&mut meta);
        let kept: Vec<&str> = meta
            .annotations
            .as_ref()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            kept,
            [
                "reconcile.fluxcd.io/requestedAt",
                "reconcile.quartet.dev/requestedAt",
                "traceparent",
                "tracestate"
            ]
        );
        assert_eq!(meta.labels, None);
        assert_eq!(meta.managed_fields, None);
        assert_eq!(meta.name.as_deref(), Some("p"));

        let mut applied: kube::api::ObjectMeta = serde_json::from_value(serde_json::json!({
            "name": "q",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        }))
        .unwrap();
        lean_meta(&mut applied);
        assert_eq!(
            applied.annotations, None,
            "an emptied map is dropped, not kept empty"
        );
    }

    #[test]
    fn kind_status_fields_are_everything_but_the_managed_ones() {
        let obj: SecretsPolicy = serde_json::from_value(json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1",
            "kind": "SecretsPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"type": "acl", "policy": "x"},
            "status": {"remoteId": "p", "observedGeneration": 1}
        }))
        .unwrap();
        assert!(status_fields(&serde_json::to_value(&obj).unwrap()).is_empty());
    }
}
