//! Operation kinds woken by another kind: [`run_operation_related`] runs an [`Operated`] kind's
//! controller like [`super::run_operation`], and also wakes the resources that `map` names when
//! an object of kind `R` changes (a NoCodeWorkspace when the NoCodeModule it names moves its
//! version), instead of leaving them to their resync.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::context::Context;
use super::driver::{controller_for, Lifetime};
use super::operation::{error_policy, reconcile, Operated};

/// Run the controller of `K`, also woken when an `R` changes: `map` names the `K`s (from the
/// controller's cache) that depend on it.
pub async fn run_operation_related<K, R, F>(
    ctx: Arc<Context>,
    namespace: Option<String>,
    life: Lifetime,
    map: F,
) where
    K: Operated,
    R: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
    F: Fn(&R, &[Arc<K>]) -> Vec<Arc<K>> + Send + Sync + 'static,
{
    let kind = K::kind(&()).to_string();
    tracing::info!(%kind, "controller started");
    let related: Api<R> = match namespace.as_deref() {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let c = controller_for::<K>(&ctx, namespace.as_deref(), &life);
    let store: Store<K> = c.store();
    c.watches(related, watcher::Config::default(), move |r: R| {
        map(&r, &store.state())
            .iter()
            .map(|o| ObjectRef::from_obj(o.as_ref()))
            .collect::<Vec<_>>()
    })
    .with_config(controller::Config::default().concurrency(ctx.settings.concurrency))
    .graceful_shutdown_on(life.stopped())
    .run(reconcile::<K>, error_policy::<K>, ctx)
    .for_each(|res| async move {
        if let Err(e) = res {
            tracing::debug!(error = %e, "reconcile failed");
        }
    })
    .await;
    tracing::info!(%kind, "controller stopped");
}
