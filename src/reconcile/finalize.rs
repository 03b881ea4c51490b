//! Deletion, the same for both shapes of kind: the finalizer added at the first pass, the cases
//! where the service is not called (the resource is suspended, or `deletionPolicy: Retain`),
//! and a cleanup that failed: either nothing can reach the service again (the namespace is
//! going away) and the remote object is left, or the finalizer stays with `DeletionBlocked`
//! saying why, until a retry succeeds.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::conditions::{self, DELETION_BLOCKED};
use super::context::Context;
use super::driver::{finalizer_name, publish, write_status};
use super::error::{Category, Error, Result};
use super::gitops::{Intent, SUSPENDED};
use super::managed::Managed;
use super::pass::current_status;
use crate::api::DeletionPolicy;

/// `obj` with this kind's finalizer: added now (when missing and not being deleted), and the
/// pass goes on with the object the patch returned. kube's `finalizer` helper instead ends the
/// pass after adding it and waits for the patch's watch event, which costs every new object a
/// second trip through the queue (behind every object created since) before anything is done.
pub(crate) async fn with_finalizer<K>(api: &Api<K>, obj: Arc<K>) -> Result<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    let name = finalizer_name::<K>();
    if obj.meta().deletion_timestamp.is_some() || obj.finalizers().contains(&name) {
        return Ok(obj);
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(name);
    // The resourceVersion makes it a precondition (409 when someone else changed the object
    // meanwhile, as the JSON patch `test` of kube's helper does): never drop another finalizer.
    let patch = json!({
        "metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}
    });
    let patched = api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(Arc::new(patched))
}

/// The end of a cleanup that leaves the remote object as it is: for now while the resource is
/// suspended with `Delete` (the finalizer waits for `suspend: false`, which a spec change
/// brings, or `deletionPolicy: Retain`), for good with `Retain` (the `Retained` Event's note is
/// `retained`). `None`: the cleanup goes on to call the service.
pub(crate) async fn kept<K: Managed>(
    obj: &K,
    ctx: &Context,
    retained: String,
) -> Option<Result<Action>> {
    if obj.deletion_policy() == DeletionPolicy::Delete && Intent::of(obj, None).suspend {
        return Some(suspended(obj, ctx).await);
    }
    if obj.deletion_policy() == DeletionPolicy::Retain {
        publish(ctx, obj, EventType::Normal, "Retained", "Delete", retained).await;
        return Some(Ok(Action::await_change()));
    }
    None
}

/// What a failed cleanup says, in the shape's own words.
pub(crate) struct Failed<'a> {
    /// The `DeletionBlocked` condition's reason (and the Event's).
    pub reason: &'a str,
    /// The `DeletionBlocked` message: the error and what keeps the finalizer.
    pub blocked: String,
    /// The `RemoteObjectOrphaned` Event's note, when the namespace is going away.
    pub orphaned: String,
}

/// A cleanup whose call to the service failed with `err`. A missing Connection or reference in
/// a namespace being deleted can never be fixed (the namespace takes them with it): the remote
/// object is left, said in a `RemoteObjectOrphaned` Event, and the finalizer goes, so the
/// namespace is not held hostage. Otherwise `DeletionBlocked=True` (the Event once, when it
/// becomes true), the Connection forgotten when its token was refused, and `err` back for a
/// retry with backoff.
pub(crate) async fn failed<K: Managed>(
    obj: &K,
    ctx: &Context,
    err: Error,
    says: Failed<'_>,
) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    if matches!(err, Error::Connection(_) | Error::MissingReference(_))
        && namespace_terminating(ctx, &ns).await
    {
        publish(
            ctx,
            obj,
            EventType::Warning,
            "RemoteObjectOrphaned",
            "Delete",
            says.orphaned,
        )
        .await;
        return Ok(Action::await_change());
    }
    if err.category() == Category::Unauthorized {
        ctx.forget_connection(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE);
    }
    blocked(obj, ctx, says.reason, &says.blocked).await?;
    Err(err)
}

/// Deleting a suspended resource whose policy would call the service: the finalizer stays,
/// `DeletionBlocked` says why, and the pass ends as refused (no retry until a change).
async fn suspended<K: Managed>(obj: &K, ctx: &Context) -> Result<Action> {
    let message = "spec.suspend is true: the remote object is not deleted while suspended; set suspend: false to delete it, or deletionPolicy: Retain to keep it".to_string();
    blocked(obj, ctx, SUSPENDED, &message).await?;
    tracing::info!(name = %obj.name_any(), "deletion waits: the resource is suspended");
    Err(Error::Refused {
        reason: SUSPENDED,
        message,
    })
}

/// `DeletionBlocked=True` with `reason` and `message` in status, and a Warning Event when it
/// becomes true (not again at each retry).
async fn blocked<K: Managed>(obj: &K, ctx: &Context, reason: &str, message: &str) -> Result<()> {
    let before = current_status(obj);
    let mut status = before.clone();
    let newly = conditions::set(
        &mut status.conditions,
        DELETION_BLOCKED,
        true,
        reason,
        message,
        obj.meta().generation,
    );
    let mut written = before;
    write_status(obj, ctx, &status, &mut written).await?;
    if newly {
        publish(
            ctx,
            obj,
            EventType::Warning,
            "DeletionBlocked",
            "Delete",
            message.to_string(),
        )
        .await;
    }
    Ok(())
}

/// Whether namespace `ns` is being deleted (or already gone); `false` when it cannot be read.
pub(crate) async fn namespace_terminating(ctx: &Context, ns: &str) -> bool {
    match Api::<Namespace>::all(ctx.client.clone()).get_opt(ns).await {
        Ok(Some(n)) => n.metadata.deletion_timestamp.is_some(),
        Ok(None) => true,
        Err(_) => false,
    }
}
