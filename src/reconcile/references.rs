//! Referenced objects served from a cache: [`run_operation_referencing`] runs an [`Operated`]
//! kind's controller like [`super::run_operation`], and also keeps a watched cache of the kind
//! `R` its resources name (a TotpEnrollment's TotpMethod, an AdCheckout's AdLibrarySet), which
//! [`Context::referenced`] then reads instead of the API server.
//!
//! Why: a resource reads its reference on every pass, resyncs included. At 1,000 enrollments of
//! one TotpMethod that was one API GET per pass for the same object. The cache does not wake the
//! resources when `R` changes (a library set's status moves with each check-out; waking every
//! check-out of the set then would be N passes per change): they read it on their next pass.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource};

use super::context::{scoped_api, Context, Watched};
use super::driver::{controller_for, Lifetime};
use super::operation::{reconcile, Operated};
use super::pass;

/// A cache's kind and watched namespace (`None`: all namespaces).
type CacheKey = (TypeId, Option<String>);

/// A `Store<R>` of some referenced kind `R`.
type AnyStore = Box<dyn Any + Send + Sync>;

/// The caches of referenced kinds, by kind and watched namespace.
#[derive(Default)]
pub struct ReferenceCaches {
    stores: Mutex<HashMap<CacheKey, AnyStore>>,
}

impl ReferenceCaches {
    fn insert<R: Resource<DynamicType = ()> + Send + Sync + 'static>(
        &self,
        namespace: Option<String>,
        store: Store<R>,
    ) {
        self.lock()
            .insert((TypeId::of::<R>(), namespace), Box::new(store));
    }

    fn remove<R: 'static>(&self, namespace: Option<String>) {
        self.lock().remove(&(TypeId::of::<R>(), namespace));
    }

    /// `ns/name` from a cache of `R` that holds it; `None` when no cache of `R` runs or none
    /// holds it yet (the caller then asks the API server: a cache may lag a create).
    pub fn get<R>(&self, ns: &str, name: &str) -> Option<R>
    where
        R: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        let stores = self.lock();
        let key = ObjectRef::<R>::new(name).within(ns);
        [Some(ns.to_string()), None].into_iter().find_map(|scope| {
            stores
                .get(&(TypeId::of::<R>(), scope))?
                .downcast_ref::<Store<R>>()?
                .get(&key)
                .map(|o| (*o).clone())
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CacheKey, AnyStore>> {
        self.stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Run the controller of `K` with a watched cache of `R` (what `K`'s resources reference) for
/// [`Context::referenced`], for as long as the controller runs.
pub async fn run_operation_referencing<K: Operated, R: Watched>(
    ctx: Arc<Context>,
    namespace: Option<String>,
    life: Lifetime,
) {
    let api: Api<R> = scoped_api(&ctx.client, namespace.as_deref());
    let (store, writer) = reflector::store::<R>();
    ctx.references.insert(namespace.clone(), store);
    // References are read whatever shard serves the resource: the cache is not label-selected.
    let cache = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|obj| obj.meta_mut().managed_fields = None)
        .reflect(writer)
        .for_each(|_| futures::future::ready(()));
    let controller = controller_for::<K>(&ctx, namespace.as_deref(), &life);
    let drive = pass::drive(controller, ctx.clone(), &life, reconcile::<K>);
    futures::pin_mut!(cache, drive);
    // The watch runs until the controller stops (the watcher itself retries forever).
    futures::future::select(drive, cache).await;
    ctx.references.remove::<R>(namespace);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::secrets::totp::TotpMethod;

    fn method(ns: &str, name: &str) -> TotpMethod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1",
            "kind": "TotpMethod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"issuer": "quartet"},
        }))
        .expect("a TotpMethod")
    }

    #[test]
    fn a_reference_is_read_from_a_cache_that_holds_it_and_missing_otherwise() {
        let caches = ReferenceCaches::default();
        assert!(
            caches.get::<TotpMethod>("team-a", "m").is_none(),
            "no cache runs"
        );

        let (store, mut writer) = reflector::store::<TotpMethod>();
        writer.apply_watcher_event(&watcher::Event::Apply(method("team-a", "m")));
        caches.insert(Some("team-a".into()), store);
        assert_eq!(
            caches
                .get::<TotpMethod>("team-a", "m")
                .map(|m| m.metadata.name),
            Some(Some("m".to_string()))
        );
        // Not held (not created yet, or another namespace): the caller asks the API server.
        assert!(caches.get::<TotpMethod>("team-a", "other").is_none());
        assert!(caches.get::<TotpMethod>("team-b", "m").is_none());

        // A cache of all namespaces serves every namespace; a stopped controller's is gone.
        let (all, mut writer) = reflector::store::<TotpMethod>();
        writer.apply_watcher_event(&watcher::Event::Apply(method("team-b", "m")));
        caches.insert(None, all);
        assert!(caches.get::<TotpMethod>("team-b", "m").is_some());
        caches.remove::<TotpMethod>(None);
        assert!(caches.get::<TotpMethod>("team-b", "m").is_none());
    }
}
