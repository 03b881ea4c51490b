//! Operation kinds woken by another kind: [`run_operation_related`] runs an [`Operated`] kind's
//! controller like [`super::run_operation`], and also wakes the resources that `map` names when
//! an object of kind `R` changes (a NoCodeWorkspace when the NoCodeModule it names moves its
//! version), instead of leaving them to their resync.

use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::Api;

use super::context::{scoped_api, Context, Watched};
use super::driver::{controller_for, Lifetime};
use super::operation::{reconcile, Operated};
use super::pass;

/// Run the controller of `K`, also woken when an `R` changes: `map` names the `K`s (from the
/// controller's cache) that depend on it.
pub async fn run_operation_related<K, R, F>(
    ctx: Arc<Context>,
    namespace: Option<String>,
    life: Lifetime,
    map: F,
) where
    K: Operated,
    R: Watched,
    F: Fn(&R, &[Arc<K>]) -> Vec<Arc<K>> + Send + Sync + 'static,
{
    let related: Api<R> = scoped_api(&ctx.client, namespace.as_deref());
    let c = controller_for::<K>(&ctx, namespace.as_deref(), &life);
    let store: Store<K> = c.store();
    let c = c.watches(related, watcher::Config::default(), move |r: R| {
        map(&r, &store.state())
            .iter()
            .map(|o| ObjectRef::from_obj(o.as_ref()))
            .collect::<Vec<_>>()
    });
    pass::drive(c, ctx, &life, reconcile::<K>).await
}
