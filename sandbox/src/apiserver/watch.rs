//! Watches: a stream of `{"type": ..., "object": ...}` JSON lines, starting from a
//! resourceVersion (410 Gone `Expired` as an ERROR event when it is older than the kept
//! history), with BOOKMARK events, `sendInitialEvents`, and `timeoutSeconds`; and, for tests,
//! watches of a resource that lag behind its writes ([`Lags`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::error::ApiError;
use super::ops::{read, Ctx, Filter};
use super::store::{Event, State};

/// How often a watch with `allowWatchBookmarks` gets a BOOKMARK when nothing happens.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// How late the live events of each resource's watches are delivered, by plural name (none by
/// default). kube-apiserver's watch cache is behind etcd for a while under load, and an informer
/// is behind the writes it made itself until their events arrive: a client's cached copy can
/// then be older than what its own last write returned. This makes that moment last as long as
/// a test needs. A lagging watch keeps its events in order and sends no BOOKMARK past one it
/// still holds; the reads, lists and writes of the resource are not delayed.
#[derive(Default)]
pub struct Lags(Mutex<HashMap<String, Duration>>);

impl Lags {
    /// Deliver the watch events of `plural` `lag` after their write (zero: at once again).
    pub fn set(&self, plural: &str, lag: Duration) {
        let mut lags = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lag.is_zero() {
            lags.remove(plural);
        } else {
            lags.insert(plural.to_string(), lag);
        }
    }

    fn of(&self, plural: &str) -> Duration {
        let lags = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lags.get(plural).copied().unwrap_or_default()
    }
}

/// How watch events are rendered (plain objects, or Table rows for `kubectl get -w`).
pub type Render = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

fn line(etype: &str, obj: Value) -> bytes::Bytes {
    let mut v = serde_json::to_vec(&json!({"type": etype, "object": obj})).unwrap_or_default();
    v.push(b'\n');
    bytes::Bytes::from(v)
}

fn bookmark(ctx: &Ctx, rv: u64, initial_end: bool) -> bytes::Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        json!({"kind": ctx.info.kind, "apiVersion": ctx.info.api_version(&ctx.version), "metadata": meta}),
    )
}

/// The event as this watch sees it: selector transitions turn into ADDED/DELETED.
fn project(
    ctx: &Ctx,
    crd: Option<&Value>,
    filter: &Filter,
    ev: &Event,
) -> Option<(&'static str, Value)> {
    if ev.key != ctx.info.key() || (!ctx.ns.is_empty() && ev.ns != ctx.ns) {
        return None;
    }
    let now = filter.matches(&ev.obj);
    let before = ev.old.as_ref().map(|o| filter.matches(o));
    let etype = match (ev.etype, now, before) {
        ("DELETED", true, _) => "DELETED",
        ("DELETED", false, _) => return None,
        ("ADDED", true, _) => "ADDED",
        ("MODIFIED", true, Some(true)) => "MODIFIED",
        ("MODIFIED", true, _) => "ADDED",
        ("MODIFIED", false, Some(true)) => "DELETED",
        _ => return None,
    };
    Some((etype, read(&ctx.info, &ctx.version, crd, &ev.obj)))
}

/// The cluster's resourceVersion when this watch has received every event of its resource up
/// to it, else 0. A watch hears only its own resource's writes, yet its BOOKMARKs carry the
/// cluster's revision as kube-apiserver's do (its watch cache follows etcd's progress
/// notifications), so a client resuming after a quiet hour does not fall behind the compacted
/// history because other resources were written. Writes send under the state lock, so an empty
/// channel read under that lock means nothing of this resource up to `rv` is still unseen.
fn quiet_rv(state: &Mutex<State>, live: &broadcast::Receiver<Arc<Event>>) -> u64 {
    let st = state.lock().unwrap_or_else(|e| e.into_inner());
    if live.is_empty() {
        st.rv
    } else {
        0
    }
}

/// Start a watch; the response streams until timeout, client disconnect, or server shutdown.
pub fn watch(
    state: &Arc<Mutex<State>>,
    lags: &Arc<Lags>,
    ctx: Ctx,
    mut stop: tokio::sync::watch::Receiver<u64>,
    render: Render,
) -> Result<Response, ApiError> {
    let filter = Filter::parse(&ctx.info, &ctx.query)?;
    let q = &ctx.query;
    let rv_param = q.get("resourceVersion").cloned().unwrap_or_default();
    let bookmarks = q
        .get("allowWatchBookmarks")
        .is_some_and(|v| v == "true" || v == "1");
    let send_initial = q.get("sendInitialEvents").map(|v| v == "true");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));

    let (tx, rx) = mpsc::channel::<bytes::Bytes>(256);
    let mut initial: Vec<bytes::Bytes> = Vec::new();
    let (mut live, start_rv, crd) = {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        let crd: Option<Value> = ctx.info.crd.as_ref().and_then(|n| st.crd(n)).cloned();
        let from: Option<u64> = if rv_param.is_empty() || rv_param == "0" {
            None
        } else {
            Some(rv_param.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {rv_param}"))
            })?)
        };
        let mut expired = false;
        match (from, send_initial) {
            (_, Some(true)) | (None, _) => {
                let ns = if ctx.ns.is_empty() {
                    None
                } else {
                    Some(ctx.ns.as_str())
                };
                for o in st.list(&ctx.info.key(), ns) {
                    if filter.matches(o) {
                        initial.push(line(
                            "ADDED",
                            render(&read(&ctx.info, &ctx.version, crd.as_ref(), o)),
                        ));
                    }
                }
                if send_initial == Some(true) {
                    initial.push(bookmark(&ctx, st.rv, true));
                }
            }
            (Some(r), _) if r < st.compacted => {
                expired = true;
                st.expired_watches += 1;
                let status =
                    ApiError::gone(format!("too old resource version: {r} ({})", st.compacted))
                        .status();
                initial.push(line("ERROR", status));
            }
            (Some(r), _) => {
                for ev in st.history.iter().filter(|e| e.rv > r) {
                    if let Some((t, o)) = project(&ctx, crd.as_ref(), &filter, ev) {
                        initial.push(line(t, render(&o)));
                    }
                }
            }
        }
        let rx = if expired {
            None
        } else {
            Some(st.subscribe(&ctx.info.key()))
        };
        (rx, st.rv, crd)
    };

    let state = state.clone();
    let lags = lags.clone();
    tokio::spawn(async move {
        for l in initial {
            if tx.send(l).await.is_err() {
                return;
            }
        }
        let Some(live) = live.as_mut() else { return };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut last_rv = start_rv;
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        // Events held back by a lag ([`Lags`]): when each is due, its line (none for an event
        // this watch does not see), and its resourceVersion.
        let mut held: VecDeque<(tokio::time::Instant, Option<bytes::Bytes>, u64)> = VecDeque::new();
        loop {
            let due = held.front().map(|h| h.0);
            // Lazy: without a lag no timer is made.
            let held_due = async move {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        let out = project(&ctx, crd.as_ref(), &filter, &ev).map(|(t, o)| line(t, render(&o)));
                        let lag = lags.of(&ctx.info.plural);
                        if lag.is_zero() && held.is_empty() {
                            last_rv = last_rv.max(ev.rv);
                            if let Some(l) = out {
                                if tx.send(l).await.is_err() {
                                    return;
                                }
                            }
                        } else {
                            held.push_back((tokio::time::Instant::now() + lag, out, ev.rv));
                        }
                    }
                    // Too slow a reader: end the watch, the client re-watches from its last RV.
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = held_due, if due.is_some() => {
                    if let Some((_, out, rv)) = held.pop_front() {
                        last_rv = last_rv.max(rv);
                        if let Some(l) = out {
                            if tx.send(l).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                _ = &mut deadline => return,
                // No BOOKMARK while an event is held: it would tell the client it has seen it.
                _ = tick.tick(), if bookmarks => if held.is_empty() {
                    last_rv = last_rv.max(quiet_rv(&state, live));
                    if tx.send(bookmark(&ctx, last_rv, false)).await.is_err() {
                        return;
                    }
                },
                _ = stop.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });

    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal(e.to_string()))
}
