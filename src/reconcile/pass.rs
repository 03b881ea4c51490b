//! What a pass of either shape of kind does around the kind's own work (the observe → diff →
//! apply of [`super::driver`], the one step of [`super::operation`]): the controller loop, the
//! finalizer, the pass's metrics, trace and `Changed` Event, the retry delay after a failure,
//! and the status the pass starts from. Written once so that the two shapes cannot drift apart:
//! a user sees the same conditions, Events and backoff whichever shape a kind has.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::finalizer::{self, finalizer, Event as FinalizerEvent};
use kube::{Api, ResourceExt};
use tracing::Instrument;

use super::context::Context;
use super::driver::{
    change_pass, finalizer_name, kind_status_fields, object_key, publish_changes, Lifetime,
};
use super::error::{Error, Result};
use super::finalize::with_finalizer;
use super::gitops::Intent;
use super::managed::Managed;
use crate::api::ManagedStatus;
use crate::changes::Trigger;

/// Run `controller` (kind `K`'s, with whatever it watches besides) until `life` says stop, with
/// `reconcile` as its pass and [`error_policy`] choosing the delay after a failure.
pub(crate) async fn drive<K, R, F>(
    controller: Controller<K>,
    ctx: Arc<Context>,
    life: &Lifetime,
    reconcile: R,
) where
    K: Managed,
    R: FnMut(Arc<K>, Arc<Context>) -> F,
    F: Future<Output = Result<Action>> + Send + 'static,
{
    let kind = K::kind(&()).to_string();
    tracing::info!(%kind, "controller started");
    controller
        .with_config(controller::Config::default().concurrency(ctx.settings.concurrency))
        .graceful_shutdown_on(life.stopped())
        .run(reconcile, error_policy::<K>, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "reconcile failed");
            }
        })
        .await;
    tracing::info!(%kind, "controller stopped");
}

/// One pass over `obj`: the finalizer added if missing, then `apply`, or `cleanup` once the
/// resource is being deleted (the finalizer goes when it succeeds), recorded in the metrics,
/// the trace and the change log. `steady` is the change-log trigger of a write at an unchanged,
/// synced spec.
pub(crate) async fn run<K, A, FA, C, FC>(
    obj: Arc<K>,
    ctx: &Context,
    steady: Trigger,
    apply: A,
    cleanup: C,
) -> Result<Action>
where
    K: Managed,
    A: FnOnce(Arc<K>) -> FA,
    FA: Future<Output = Result<Action>>,
    C: FnOnce(Arc<K>) -> FC,
    FC: Future<Output = Result<Action>>,
{
    let started = Instant::now();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let obj = with_finalizer(&api, obj).await?;
    let deleting = obj.meta().deletion_timestamp.is_some();
    let (namespace, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    let pass = change_pass(obj.as_ref(), steady);
    let target = obj.clone();
    let span = crate::traces::reconcile_span(obj.as_ref());
    let result = pass
        .scope(finalizer(
            &api,
            &finalizer_name::<K>(),
            obj,
            |event| async {
                match event {
                    FinalizerEvent::Apply(obj) => apply(obj).await,
                    FinalizerEvent::Cleanup(obj) => cleanup(obj).await,
                }
            },
        ))
        .instrument(span.clone())
        .await
        .map_err(|e| match e {
            finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
            finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => {
                Error::Kube(e)
            }
            other => Error::Finalizer(other.to_string()),
        });
    crate::traces::reconciled(&span, result.as_ref().err().map(|e| e.category().reason()));
    let kind = K::kind(&());
    ctx.metrics.reconciled(
        &kind,
        if result.is_ok() { "ok" } else { "error" },
        started.elapsed(),
    );
    if let Err(e) = &result {
        ctx.metrics.error(&kind, e.category().reason());
    } else if deleting {
        ctx.metrics.resource_gone(&kind, &namespace, &name);
    }
    publish_changes(ctx, target.as_ref(), &pass).await;
    result
}

/// The delay before the next pass after a failed one: by the error's category and the number of
/// failures in a row (see [`Error::requeue_after`]).
pub(crate) fn error_policy<K: Managed>(obj: Arc<K>, err: &Error, ctx: Arc<Context>) -> Action {
    let failures = ctx.failed(&object_key(obj.as_ref()));
    let wait = err.requeue_after(failures, ctx.settings.resync);
    tracing::warn!(kind = %K::kind(&()), name = %obj.name_any(), error = %err, retry_in_s = wait.as_secs(), "reconcile failed");
    Action::requeue(wait)
}

/// `obj`'s status as read, the kind's own fields included, so that a pass which does not read
/// them again (an error, a create, a deletion) writes them back unchanged.
pub(crate) fn current_status<K: Managed>(obj: &K) -> ManagedStatus {
    let mut status = obj.managed_status().cloned().unwrap_or_default();
    status.fields = kind_status_fields(obj);
    status
}

/// Where an apply pass starts, the same for both shapes.
pub(crate) struct Start {
    /// The resource's key in [`Context`]'s per-object records.
    pub key: String,
    /// `metadata.generation`, which the conditions this pass sets are computed for.
    pub generation: Option<i64>,
    /// The status as read ([`current_status`]).
    pub before: ManagedStatus,
    /// What the pass will write: `before`, observed at this generation.
    pub status: ManagedStatus,
    /// What is known to be written already: [`super::driver::write_status`] skips a status
    /// equal to it.
    pub written: ManagedStatus,
    /// What the resource asks besides its spec (suspension, drift policy, a reconcile-now).
    pub intent: Intent,
    /// What this copy asks for, as one number ([`asked`]).
    pub asked: u64,
}

/// What a copy of a resource asks of a pass, as one number: its generation (the spec), whether
/// it is being deleted, and its reconcile-now annotations. A pass keeps it with the mark of its
/// own status write: the copy that write returns is skipped as our own only when it asks for
/// the same ([`Context::take_fresh`]). A spec change or a request made while the pass ran is
/// in that copy (the write returns the whole object) and still gets its pass.
pub(crate) fn asked<K: Managed>(obj: &K) -> u64 {
    use std::hash::{Hash, Hasher};
    let meta = obj.meta();
    let annotation = |k: &str| meta.annotations.as_ref().and_then(|a| a.get(k));
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        meta.generation,
        meta.deletion_timestamp.is_some(),
        annotation(super::gitops::REQUESTED_AT),
        annotation(super::gitops::FLUX_REQUESTED_AT),
    )
        .hash(&mut h);
    h.finish()
}

impl Start {
    /// The start of a pass over `obj`. A reconcile-now request is not echoed in `status` yet:
    /// a suspended pass handles none, so each shape echoes it after its suspension check.
    pub(crate) fn of<K: Managed>(obj: &K) -> Self {
        let generation = obj.meta().generation;
        let before = current_status(obj);
        let mut status = before.clone();
        status.observed_generation = generation;
        Start {
            key: object_key(obj),
            generation,
            intent: Intent::of(obj, before.last_handled_reconcile_at.as_deref()),
            asked: asked(obj),
            written: before.clone(),
            status,
            before,
        }
    }
}
