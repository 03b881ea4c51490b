//! Periodic resyncs without a timer per resource. A resource in sync is compared with its
//! service again after the resync interval. Asking kube's controller for that
//! (`Action::requeue`) keeps a timer per resource in its scheduler: a map entry and a
//! delay-queue slot, each with its own copy of the resource's reference (four strings): at
//! 10,000 resources the operator's anonymous memory was 4.6–6.8 MiB larger with them
//! (benches/RESULTS.md). Instead, each resource's next resync is one `Instant`
//! in its record in [`Context`], and one sweep a second sends the resources that are due to
//! their kind's controller (`Context::resyncs_of`). Short waits (a retry, a poll, a step
//! asked for soon) stay with kube's scheduler, which fires them on time.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Resource;
use tokio::sync::mpsc;

use super::Context;

/// How often the sweep looks for due resyncs: a tenth of the resync interval (for short
/// intervals in tests), at most a second. Resyncs are spread by ±10 % of the interval anyway.
pub(crate) fn tick(resync: Duration) -> Duration {
    (resync / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// Runs until `ctx` is dropped: every [`tick`], the records whose resync is due are sent to
/// the controller of their kind (a kind whose controller is not running drops them: its next
/// start lists and reconciles every resource anyway).
pub(crate) async fn sweep(ctx: Weak<Context>, every: Duration) {
    let mut timer = tokio::time::interval(every);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        timer.tick().await;
        let Some(ctx) = ctx.upgrade() else { return };
        let now = Instant::now();
        ctx.send_due_resyncs(now);
        ctx.prune_handed_over(now);
    }
}

/// The stream of kind `K`'s resources in `namespace` (`None`: all) whose resync is due, for
/// `Controller::reconcile_on`.
/// A key whose object is no longer in `store` (deleted, moved to another shard) is forgotten.
pub(crate) fn due<K>(
    ctx: &Arc<Context>,
    store: Store<K>,
    namespace: Option<&str>,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let kind = K::kind(&()).to_string();
    let rx = ctx.resyncs_of(&kind, namespace);
    let ctx = Arc::downgrade(ctx);
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|k| (k, rx)) })
        .filter_map(move |key: String| {
            let found = object_ref::<K>(&kind, &key).filter(|r| store.get(r).is_some());
            if found.is_none() {
                if let Some(ctx) = ctx.upgrade() {
                    ctx.forget(&key);
                }
            }
            futures::future::ready(found)
        })
}

/// The reference of the object of `key` (`Kind/namespace/name`, see
/// [`super::driver::object_key`]; the namespace is empty for a cluster-scoped kind).
fn object_ref<K: Resource<DynamicType = ()>>(kind: &str, key: &str) -> Option<ObjectRef<K>> {
    let rest = key.strip_prefix(kind)?.strip_prefix('/')?;
    let (ns, name) = rest.split_once('/')?;
    let r = ObjectRef::new(name);
    Some(if ns.is_empty() { r } else { r.within(ns) })
}

/// The senders of each controller's due resyncs, by kind and watched namespace (`None`: all).
pub(crate) type Senders =
    std::collections::HashMap<(String, Option<String>), mpsc::UnboundedSender<String>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SecretsPolicy;
    use k8s_openapi::api::core::v1::Namespace;

    #[test]
    fn a_key_names_its_object_in_its_namespace() {
        let r = object_ref::<SecretsPolicy>("SecretsPolicy", "SecretsPolicy/team-a/readers")
            .expect("a SecretsPolicy key");
        assert_eq!(r.name, "readers");
        assert_eq!(r.namespace.as_deref(), Some("team-a"));
    }

    #[test]
    fn a_cluster_scoped_key_has_no_namespace() {
        let r = object_ref::<Namespace>("Namespace", "Namespace//team-a").expect("a key");
        assert_eq!(r.name, "team-a");
        assert_eq!(r.namespace, None);
    }

    #[test]
    fn a_key_of_another_kind_names_nothing() {
        assert!(object_ref::<SecretsPolicy>("SecretsPolicy", "SecretsPolicyX/a/b").is_none());
        assert!(object_ref::<SecretsPolicy>("SecretsPolicy", "IdpUser/a/b").is_none());
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<String>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[tokio::test]
    async fn a_due_resync_goes_once_to_the_controller_of_its_namespace_else_of_all() {
        let ctx = Context::offline();
        let mut team_a = ctx.resyncs_of("SecretsPolicy", Some("team-a"));
        let mut all = ctx.resyncs_of("SecretsPolicy", None);
        let mut users = ctx.resyncs_of("IdpUser", None);
        ctx.resync_after("SecretsPolicy/team-a/readers", Duration::ZERO);
        ctx.resync_after("SecretsPolicy/team-b/writers", Duration::ZERO);
        ctx.resync_after("IdpUser/team-a/alice", Duration::ZERO);
        ctx.resync_after("SecretsPolicy/team-a/later", Duration::from_secs(3600));
        ctx.send_due_resyncs(Instant::now());
        assert_eq!(drain(&mut team_a), ["SecretsPolicy/team-a/readers"]);
        assert_eq!(drain(&mut all), ["SecretsPolicy/team-b/writers"]);
        assert_eq!(drain(&mut users), ["IdpUser/team-a/alice"]);
        // Each is sent once: the next pass sets the next resync.
        ctx.send_due_resyncs(Instant::now());
        assert!(drain(&mut team_a).is_empty() && drain(&mut all).is_empty());
        ctx.send_due_resyncs(Instant::now() + Duration::from_secs(3601));
        assert_eq!(drain(&mut team_a), ["SecretsPolicy/team-a/later"]);
    }

    #[tokio::test]
    async fn an_own_status_echo_keeps_the_resync_a_new_pass_moves_it_and_a_failure_drops_it() {
        let ctx = Context::offline();
        let mut rx = ctx.resyncs_of("SecretsPolicy", None);
        let key = "SecretsPolicy/default/p";
        let due_at = |after: u64| Instant::now() + Duration::from_secs(after);
        ctx.resync_after(key, Duration::from_secs(10));
        ctx.keep_resync(key, Duration::from_secs(100));
        ctx.send_due_resyncs(due_at(11));
        assert_eq!(drain(&mut rx), [key], "the echo moved the resync");
        assert!(!ctx.has_resync(key));
        ctx.keep_resync(key, Duration::from_secs(100));
        assert!(
            ctx.has_resync(key),
            "a pass with nothing to do must not drop the resync"
        );
        ctx.resync_after(key, Duration::from_secs(10));
        ctx.cancel_resync(key);
        ctx.send_due_resyncs(due_at(200));
        assert!(drain(&mut rx).is_empty(), "a cancelled resync was sent");
    }

    #[tokio::test]
    async fn a_forgotten_object_keeps_nothing_and_its_resync_is_not_sent() {
        let ctx = Context::offline();
        let mut rx = ctx.resyncs_of("SecretsPolicy", None);
        let key = "SecretsPolicy/default/gone";
        ctx.settle(key, Some("41".into()));
        ctx.resync_after(key, Duration::ZERO);
        assert!(ctx.is_resync(key, Some("41")));
        ctx.wake(key.to_string());
        ctx.forget(key);
        assert!(!ctx.take_urgent(key), "a forgotten object kept its wake");
        assert!(!ctx.is_resync(key, Some("41")));
        ctx.send_due_resyncs(Instant::now());
        assert!(drain(&mut rx).is_empty());
    }

    #[tokio::test]
    async fn a_wake_during_a_pass_lets_its_own_writes_copy_through_once() {
        let ctx = Context::offline();
        let key = "SecretsPolicy/default/woken";
        // A pass is under way (it began before the wake) when its Connection changes.
        ctx.wake(key.to_string());
        ctx.mark_fresh(key, "42".into(), 7);
        assert!(
            !ctx.take_fresh(key, Some("42"), 7),
            "the copy of the pass's own write was skipped, though the pass may have used the old Connection"
        );
        assert!(!ctx.is_resync(key, Some("42")), "a woken pass is no resync");
        // That pass writes its status in turn: its own copy is skipped again.
        ctx.mark_fresh(key, "43".into(), 7);
        assert!(ctx.take_fresh(key, Some("43"), 7));
        // The operation shape takes the mark without the resync check.
        ctx.wake(key.to_string());
        assert!(ctx.take_urgent(key));
        assert!(!ctx.take_urgent(key));
    }

    #[test]
    fn the_sweep_looks_ten_times_per_interval_at_most_once_a_second() {
        assert_eq!(tick(Duration::from_secs(300)), Duration::from_secs(1));
        assert_eq!(tick(Duration::from_secs(2)), Duration::from_millis(200));
        assert_eq!(tick(Duration::from_millis(100)), Duration::from_millis(50));
    }
}
