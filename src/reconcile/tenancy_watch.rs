//! The caches resolution reads besides Connections: ClusterConnections and the namespaces'
//! labels. Each runs while the ClusterConnection CRD is served (without it nothing resolves
//! through them), and each change that may change a resource's resolution is sent to every
//! controller ([`Context::send_wake`]), which wakes the resources it concerns at once.
//! Also the one watch of Secrets that wakes the resources reading a changed Secret.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, CustomResourceExt, ResourceExt};
use tokio::sync::watch;

use super::context::scoped_api;
use super::tenancy::{concerns_dependents, Wake};
use super::watch_failures::WatchFailures;
use super::Context;
use crate::api::ClusterConnection;

type Served = Option<std::collections::BTreeSet<String>>;

fn cc_served(s: &Served) -> bool {
    s.as_ref()
        .is_some_and(|s| s.contains(ClusterConnection::crd_name()))
}

/// The ClusterConnection cache: a created, changed or deleted ClusterConnection wakes the
/// resources that name it, and those of its service without a connectionRef.
pub async fn cluster_connections(
    ctx: Arc<Context>,
    mut writer: reflector::store::Writer<ClusterConnection>,
    mut served: watch::Receiver<Served>,
    listed: watch::Sender<bool>,
) {
    let api: Api<ClusterConnection> = Api::all(ctx.client.clone());
    loop {
        if served.wait_for(cc_served).await.is_err() {
            return;
        }
        let stream = watcher(api.clone(), watcher::Config::default()).default_backoff();
        let mut stream = std::pin::pin!(stream);
        let mut failures = WatchFailures::default();
        let gone = served.wait_for(|s| !cc_served(s));
        let mut gone = std::pin::pin!(gone);
        loop {
            let ev = tokio::select! {
                _ = &mut gone => break,
                ev = stream.next() => ev,
            };
            if let Some(error) = ev.as_ref().and_then(|ev| failures.note(ev)) {
                tracing::warn!(%error, "watching ClusterConnections failed (the resources using one wait); retrying");
            }
            match ev {
                Some(Ok(ev)) => {
                    let changed = match &ev {
                        watcher::Event::Apply(cc) => {
                            let old = ctx
                                .tenancy()
                                .cluster_connections
                                .get(&ObjectRef::from_obj(cc));
                            old.is_none_or(|o| {
                                o.spec != cc.spec
                                    || concerns_dependents(o.status.as_ref(), cc.status.as_ref())
                            })
                            .then(|| cc.clone())
                        }
                        watcher::Event::Delete(cc) => Some(cc.clone()),
                        _ => None,
                    };
                    writer.apply_watcher_event(&ev);
                    if let watcher::Event::InitDone = ev {
                        listed.send_replace(true);
                    }
                    if let Some(cc) = changed {
                        ctx.send_wake(Wake::ClusterConnection {
                            name: cc.name_any(),
                            service: cc.spec.service,
                        });
                    }
                }
                Some(Err(_)) => {}
                None => break,
            }
        }
    }
}

/// The namespaces' labels: a namespace whose labels change wakes its resources that may
/// resolve a ClusterConnection (one now admitted converges without waiting for a retry).
pub async fn namespaces(
    ctx: Arc<Context>,
    mut writer: reflector::store::Writer<Namespace>,
    mut served: watch::Receiver<Served>,
    listed: watch::Sender<bool>,
) {
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let mut failures = WatchFailures::default();
    loop {
        if served.wait_for(cc_served).await.is_err() {
            return;
        }
        let stream = watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .modify(|n| {
                // Only the labels are read: keep the cache small.
                n.managed_fields_mut().clear();
                n.spec = None;
            });
        let mut stream = std::pin::pin!(stream);
        let gone = served.wait_for(|s| !cc_served(s));
        let mut gone = std::pin::pin!(gone);
        loop {
            let ev = tokio::select! {
                _ = &mut gone => break,
                ev = stream.next() => ev,
            };
            if let Some(error) = ev.as_ref().and_then(|ev| failures.note(ev)) {
                tracing::warn!(%error, "watching namespaces failed (ClusterConnections' namespaceSelector cannot be evaluated; grant list and watch on namespaces); retrying");
            }
            match ev {
                Some(Ok(ev)) => {
                    let relabelled = match &ev {
                        watcher::Event::Apply(n) => {
                            let old = ctx.tenancy().namespaces.get(&ObjectRef::from_obj(n));
                            old.is_none_or(|o| o.labels() != n.labels())
                                .then(|| n.name_any())
                        }
                        _ => None,
                    };
                    writer.apply_watcher_event(&ev);
                    if let watcher::Event::InitDone = ev {
                        listed.send_replace(true);
                    }
                    if let Some(name) = relabelled {
                        ctx.send_wake(Wake::Namespace(name));
                    }
                }
                Some(Err(_)) => {}
                None => break,
            }
        }
    }
}

/// The Secrets of `namespace` (`None`: every namespace), watched once for every kind that reads
/// Secrets: one created, changed or deleted after the first list wakes the resources that read
/// it (a rotated password is sent at once). Metadata only: which Secret changed is all this
/// reads; a woken resource reads the values itself. A change made while the watch was down
/// (it lists again, and wakes nothing) is caught by the resources' resync.
pub async fn secrets(ctx: Arc<Context>, namespace: Option<String>) {
    let api: Api<PartialObjectMeta<Secret>> = scoped_api(&ctx.client, namespace.as_deref());
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let (mut listed, mut failures) = (false, WatchFailures::default());
    while let Some(ev) = stream.next().await {
        if let Some(error) = failures.note(&ev) {
            tracing::warn!(%error, "watching Secrets failed (a changed Secret then waits for the resync of the resources that read it; grant list and watch on secrets); retrying");
        }
        let changed = match ev {
            Ok(watcher::Event::InitDone) => {
                listed = true;
                None
            }
            Ok(watcher::Event::Apply(s) | watcher::Event::Delete(s)) if listed => Some(s),
            Ok(_) | Err(_) => None,
        };
        if let Some(s) = changed {
            ctx.send_wake(Wake::Secret {
                namespace: s.namespace().unwrap_or_default(),
                name: s.name_any(),
            });
        }
    }
}
