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
use serde_json::Value;
use tracing::Instrument;

use super::context::Context;
use super::driver::{
    change_pass, finalizer_name, object_key, publish_changes, status_fields, Lifetime,
};
use super::error::{Error, Result};
use super::finalize::with_finalizer;
use super::gitops::Intent;
use super::managed::Managed;
use crate::api::ManagedStatus;
use crate::changes::Trigger;
use crate::clients::ClientError;

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
    // The span of the whole pass: the finalizer's patch and the `Changed` Event are its writes
    // too.
    let span = crate::traces::reconcile_span(obj.as_ref());
    let obj = match with_finalizer(&api, obj).instrument(span.clone()).await {
        Ok(obj) => obj,
        Err(e) => {
            crate::traces::reconciled(&span, Some(e.category().reason()));
            return Err(e);
        }
    };
    let deleting = obj.meta().deletion_timestamp.is_some();
    let (namespace, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    let pass = change_pass(
        obj.as_ref(),
        steady,
        ctx.write_gate(object_key(obj.as_ref())),
    );
    let target = obj.clone();
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
        .or_else(|e| match e {
            // Removed already: the object is gone, which is what the removal was for.
            finalizer::Error::RemoveFinalizer(kube::Error::Api(s)) if s.code == 404 => {
                Ok(Action::await_change())
            }
            e => Err(e),
        })
        .map_err(|e| match e {
            finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
            finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => {
                Error::Kube(e)
            }
            other => Error::Finalizer(other.to_string()),
        });
    if deleting && result.is_ok() {
        if let Some(uid) = target.uid() {
            ctx.finalized(&uid);
        }
    }
    // A deletion pass that let go of a resource moved to another shard ends in an error (the
    // finalizer must stay), but failed at nothing.
    let failed = result
        .as_ref()
        .err()
        .filter(|e| !matches!(e, Error::HandedOver(_)));
    // A failure recorded in status ends the pass without an error (its retry is chosen there).
    let failure = failed
        .map(|e| e.category().reason())
        .or_else(|| pass.failure());
    crate::traces::reconciled(&span, failure);
    let kind = K::kind(&());
    ctx.metrics.reconciled(
        &kind,
        if failure.is_none() { "ok" } else { "error" },
        started.elapsed(),
    );
    if let Some(e) = failed {
        ctx.metrics.error(&kind, e.category().reason());
    } else if deleting {
        ctx.metrics.resource_gone(&kind, &namespace, &name);
    }
    publish_changes(ctx, target.as_ref(), &pass)
        .instrument(span)
        .await;
    result
}

/// The answer to a copy that needs no pass, given before anything a pass does first (the
/// finalizer, the change log's trigger, the trace, the status as read: each reads or copies
/// the whole object, and most copies a watch brings are of this kind: 1.5 of the 2.5 passes
/// per resource while converging). `None`: the copy gets its pass.
///
/// - A copy older than this instance's last status write (a wake or a requeue dispatched it
///   before the write's watch event came) waits for the cache to catch up: deciding from it
///   would undo what that pass recorded (a write-only value's hash, `Ready` at this
///   generation, a new remote id). A wake stays marked for the pass over the current copy.
/// - The watch event of that write itself ([`Context::take_fresh`], asked only when `own`
///   says the copy may be one) gets `echo`'s action: what the writing pass asked for next.
///
/// A deleting copy gets its pass (its cleanup decides from what the deletion asks), unless this
/// instance already removed the object's finalizer: the copy is then older than that removal,
/// and a second cleanup would call the service again for nothing.
///
/// The metrics count a needless copy as a pass with no call, as they did when it went through
/// [`run`], so that rates and `quartet_calls_per_reconcile` keep their meaning.
pub(crate) fn needless<K: Managed>(
    obj: &K,
    ctx: &Context,
    own: bool,
    echo: impl FnOnce(&str) -> Action,
) -> Option<Action> {
    let started = Instant::now();
    let action = if obj.meta().deletion_timestamp.is_some() {
        if !obj.uid().is_some_and(|uid| ctx.was_finalized(&uid)) {
            return None;
        }
        Action::await_change()
    } else {
        let key = object_key(obj);
        let version = obj.resource_version();
        match ctx.stale_copy(&key, version.as_deref()) {
            Some(wait) => Action::requeue(wait),
            None if own && ctx.take_fresh(&key, version.as_deref(), asked(obj)) => echo(&key),
            None => return None,
        }
    };
    let kind = K::kind(&());
    ctx.metrics.reconciled(&kind, "ok", started.elapsed());
    ctx.metrics
        .calls_per_reconcile(&kind, K::SERVICE.as_str(), &[]);
    Some(action)
}

/// The delay before the next pass after a failed one: by the error's category and the number of
/// failures in a row (see [`Error::requeue_after`]).
pub(crate) fn error_policy<K: Managed>(obj: Arc<K>, err: &Error, ctx: Arc<Context>) -> Action {
    if let Error::HandedOver(why) = err {
        // A deletion pass that let go (see [`moved_away`]): not a failure, and not this
        // shard's to retry.
        return let_go(&ctx, &object_key(obj.as_ref()), why);
    }
    let failures = ctx.failed(&object_key(obj.as_ref()));
    let wait = err.requeue_after(failures, ctx.settings.resync);
    tracing::warn!(kind = %K::kind(&()), name = %obj.name_any(), error = %err, retry_in_s = wait.as_secs(), "reconcile failed");
    Action::requeue(wait)
}

/// Why a pass over `key` must end without recording anything, when its resource moved to
/// another shard while it ran: the gate stopped one of its writes (`err`, however the kind
/// wrapped it), or the move came after its last one. The pass then writes no status, no Event,
/// and a deletion pass keeps the finalizer: all of that is the new shard's, whose own pass
/// observes the service afresh. `None`: the resource is still this instance's.
pub(crate) fn moved_away(ctx: &Context, key: &str, err: Option<&Error>) -> Option<String> {
    if let Err(Error::HandedOver(why)) = ctx.still_served(key) {
        return Some(why);
    }
    match err {
        Some(Error::HandedOver(why)) | Some(Error::Remote(ClientError::HandedOver(why))) => {
            Some(why.clone())
        }
        _ => None,
    }
}

/// The end of a pass that [`moved_away`]: logged, the object forgotten, no requeue (the
/// object has left this instance's cache, so nothing would come of one).
pub(crate) fn let_go(ctx: &Context, key: &str, why: &str) -> Action {
    tracing::info!("{why}");
    ctx.forget(key);
    Action::await_change()
}

/// `obj`'s status as read, the kind's own fields included, so that a pass which does not read
/// them again (an error, a create, a deletion) writes them back unchanged.
pub(crate) fn current_status<K: Managed>(obj: &K) -> ManagedStatus {
    status_as_read(obj, &serde_json::to_value(obj).unwrap_or_default())
}

/// [`current_status`] of `obj`, whose JSON form is `json`.
fn status_as_read<K: Managed>(obj: &K, json: &Value) -> ManagedStatus {
    let mut status = obj.managed_status().cloned().unwrap_or_default();
    status.fields = status_fields(json);
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
        // One JSON form of the object for both the kind's status fields and the intent.
        let json = serde_json::to_value(obj).unwrap_or_default();
        let before = status_as_read(obj, &json);
        let mut status = before.clone();
        status.observed_generation = generation;
        Start {
            key: object_key(obj),
            generation,
            intent: Intent::read(obj, &json, before.last_handled_reconcile_at.as_deref()),
            asked: asked(obj),
            written: before.clone(),
            status,
            before,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::api::SecretsPolicy;

    fn policy(resource_version: &str, deleting: bool) -> SecretsPolicy {
        let mut meta = json!({"name": "p", "namespace": "default", "generation": 1,
            "resourceVersion": resource_version});
        if deleting {
            meta["uid"] = json!("uid-p");
            meta["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
            meta["finalizers"] = json!(["secrets.quartet.dev/cleanup"]);
        }
        serde_json::from_value(json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1",
            "kind": "SecretsPolicy",
            "metadata": meta,
            "spec": {"type": "acl", "policy": "x"},
            "status": {"remoteId": "p", "observedGeneration": 1}
        }))
        .unwrap()
    }

    fn passes(ctx: &Context) -> usize {
        ctx.metrics
            .render()
            .lines()
            .filter(|l| l.starts_with("quartet_reconciles_total{"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>() as usize
    }

    /// What the shape answers its own write's copy with, told apart from any other action.
    fn echo(_key: &str) -> Action {
        Action::requeue(Duration::from_secs(77))
    }

    #[tokio::test]
    async fn the_copy_of_our_own_status_write_is_answered_without_a_pass_and_counted_as_one() {
        let ctx = Context::offline();
        let copy = policy("42", false);
        let key = object_key(&copy);
        assert_eq!(needless(&copy, &ctx, true, echo), None, "no write yet");
        ctx.set_written(&key, "42");
        ctx.mark_fresh(&key, "42".into(), asked(&copy));
        assert_eq!(
            needless(&copy, &ctx, false, echo),
            None,
            "taken for our own copy where the shape said it could not be"
        );
        assert_eq!(needless(&copy, &ctx, true, echo), Some(echo("")));
        assert_eq!(
            needless(&copy, &ctx, true, echo),
            None,
            "the mark is taken once: a later copy at this version (a resync) gets its pass"
        );
        assert_eq!(passes(&ctx), 1, "{}", ctx.metrics.render());
    }

    #[tokio::test]
    async fn a_copy_older_than_our_last_write_waits_unless_it_is_being_deleted() {
        let ctx = Context::offline();
        let key = object_key(&policy("41", false));
        ctx.set_written(&key, "42");
        let waited = needless(&policy("41", false), &ctx, true, |_| {
            unreachable!("no echo")
        });
        assert!(
            matches!(&waited, Some(a) if *a != echo("") && *a != Action::await_change()),
            "{waited:?}"
        );
        assert_eq!(
            needless(&policy("41", true), &ctx, true, echo),
            None,
            "a deletion's cleanup decides for itself"
        );
        assert_eq!(needless(&policy("43", false), &ctx, true, echo), None);
    }

    #[tokio::test]
    async fn a_deleting_copy_gets_no_second_cleanup_once_this_instance_removed_its_finalizer() {
        let ctx = Context::offline();
        assert_eq!(needless(&policy("41", true), &ctx, false, echo), None);
        ctx.finalized("uid-p");
        assert_eq!(
            needless(&policy("41", true), &ctx, false, echo),
            Some(Action::await_change()),
            "the cache's copy is older than the removal"
        );
        assert_eq!(passes(&ctx), 1, "counted as a pass with no call");
    }
}
