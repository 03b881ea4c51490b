//! A served kind with no resource in this instance's view runs no controller until its first
//! resource appears.
//!
//! An instance serves every kind whose CRD is installed, but a cluster, and a shard even more,
//! uses a few of them. A kind's controller is its own instance of kube's controller, reflector
//! and queues, and its code is resident once run: with a controller each, the 24 kinds an
//! instance with one Connection did not use cost 2.5-3.3 MiB of its 22 (benches/RESULTS.md,
//! "Idle kinds run no controller"), which every shard pays again. Until a kind
//! has a resource, a watch of its resources' metadata stands in for the controller: it lists
//! (one object at most) and watches with the controller's own label selector, and it is one
//! piece of code for every kind (`PartialObjectMeta<DynamicObject>`), so the idle kinds' code is
//! never run. The first resource starts the controller, which lists and reconciles it as at any
//! start; from then on the controller runs until the kind stops being served, resources or not.

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

/// The resources waited for: a kind's in one scope (namespace, or all when `None`), among those
/// matching the instance's shard selector.
pub struct Waited<'a> {
    /// The kind.
    pub resource: &'a ApiResource,
    /// The watched namespace; `None`: all namespaces (or a cluster-scoped kind).
    pub namespace: Option<&'a str>,
    /// The watch configuration of the kind's controller (its label selector).
    pub config: watcher::Config,
}

/// Resolve once a resource of `w` exists, `true`; `false` if `stop` came first. `none` is
/// called each time a complete list shows that there is none (`/readyz` counts the kind as
/// synced then: there is nothing to cache).
pub async fn until_first(
    client: &Client,
    w: Waited<'_>,
    stop: &CancellationToken,
    none: impl Fn(),
) -> bool {
    let api: Api<PartialObjectMeta<DynamicObject>> = match w.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, w.resource),
        None => Api::all_with(client.clone(), w.resource),
    };
    // One object is enough to know: a kind with thousands of resources is not listed twice.
    let config = w.config.page_size(1);
    let stream = watcher(api, config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let kind = &w.resource.kind;
    let mut failures = crate::reconcile::watch_failures::WatchFailures::default();
    // Whether a list has shown none: the controller's start is then worth a line at `info`.
    let mut waited = false;
    loop {
        let ev = tokio::select! {
            _ = stop.cancelled() => return false,
            ev = stream.next() => ev,
        };
        if let Some(error) = ev.as_ref().and_then(|ev| failures.note(ev)) {
            tracing::warn!(%kind, %error, "watching for the first {kind} failed; retrying");
        }
        match ev {
            Some(Ok(watcher::Event::InitApply(_) | watcher::Event::Apply(_))) => {
                if waited {
                    tracing::info!(%kind, "the first {kind} to serve is here: starting its controller");
                }
                return true;
            }
            Some(Ok(watcher::Event::InitDone)) => {
                if !waited {
                    tracing::debug!(%kind, "no {kind} to serve yet: its controller starts with the first one");
                }
                waited = true;
                none();
            }
            // Failures are said above; the watch retries with backoff.
            Some(Ok(_) | Err(_)) => {}
            // The stream retries for ever; should it end, the controller takes over.
            None => return true,
        }
    }
}
