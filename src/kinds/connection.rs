//! Connection: not a remote object but a check that the service answers and accepts the token.
//! Reported as the `Ready` condition; rechecked at every resync.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::Instrument;

use crate::api::connection::{ConnectionAuthStatus, ConnectionStatus};
use crate::api::{Connection, Service};
use crate::clients::{ClientError, Http};
use crate::reconcile::conditions::{self, READY};
use crate::reconcile::context::scoped_api;
use crate::reconcile::driver::{object_key, patch_status, publish};
use crate::reconcile::error::jitter;
use crate::reconcile::gitops::{self, Progress};
use crate::reconcile::tenancy;
use crate::reconcile::{features, Category, Context, Error, Result};
use kube::runtime::events::EventType;

/// Irrevocable leases of a secrets service, by mount accessor, when the token may count them
/// (the count needs `sys/leases/count`, which many tokens may not read: then `None`, quietly).
async fn irrevocable(http: &Http) -> Option<(i64, Vec<(String, i64)>)> {
    match http
        .call("GET", "/v1/sys/leases/count?type=irrevocable", None)
        .await
    {
        Ok(resp) => {
            let data = &resp.body["data"];
            let mounts = data["counts"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default();
            Some((data["lease_count"].as_i64().unwrap_or(0), mounts))
        }
        Err(e) => {
            tracing::debug!(error = %e, "irrevocable leases cannot be counted with this token");
            None
        }
    }
}

/// What the probe found.
enum Probed {
    /// The service accepted the token; for the secrets service, what the token can reach.
    Accepted(Option<Vec<String>>),
    /// A DR secondary of the secrets service: it refuses every path but the DR ones (the
    /// real service answers `400 path disabled in replication DR secondary mode`, token or
    /// not), so the token cannot be checked until the cluster is promoted. Such a Connection
    /// is what a DrReplication drives the secondary through, so it is not an error.
    DrSecondary,
}

/// A call every valid token may make, per service. For the secrets service, also what the token
/// can reach (`status.features`, from the OpenAPI description; `None` when it cannot be read).
async fn probe(http: &Http) -> Result<Probed> {
    let path = match http.service() {
        Service::Secrets => "/v1/auth/token/lookup-self",
        Service::Workspaces => "/api/v2/account/details",
        Service::Catalog => "/v1/acl/token/self",
        Service::Scheduler => "/v1/acl/token/self",
    };
    if let Err(e) = http.call("GET", path, None).await {
        if http.service() == Service::Secrets && is_dr_secondary(http, &e).await {
            return Ok(Probed::DrSecondary);
        }
        return Err(e.into());
    }
    if http.service() != Service::Secrets {
        return Ok(Probed::Accepted(None));
    }
    match http
        .call("GET", "/v1/sys/internal/specs/openapi", None)
        .await
    {
        Ok(resp) => Ok(Probed::Accepted(Some(features::from_openapi(&resp.body)))),
        Err(e) => {
            tracing::info!(error = %e, "the OpenAPI description could not be read: features unknown");
            Ok(Probed::Accepted(None))
        }
    }
}

/// Whether a refused probe came from a DR secondary: the refusal is a 400 naming the DR
/// secondary mode, and the DR status (which a secondary answers without a token) says
/// `mode: secondary`. Both are asked so that no other 400 is mistaken for one.
async fn is_dr_secondary(http: &Http, refused: &ClientError) -> bool {
    let named = matches!(refused, ClientError::Status { status: 400, message, .. }
        if message.contains("DR secondary mode"));
    if !named {
        return false;
    }
    match http
        .call("GET", "/v1/sys/replication/dr/status", None)
        .await
    {
        Ok(resp) => resp.body["data"]["mode"] == "secondary",
        Err(e) => {
            tracing::debug!(error = %e, "the DR status could not be read");
            false
        }
    }
}

/// One pass of a Connection: checks that the service answers and accepts its token (or its
/// login), and writes the status when it changed. Traced as one reconcile, whose outcome is an
/// error when the check failed (its `Ready` reason is the category).
pub async fn reconcile(conn: Arc<Connection>, ctx: Arc<Context>) -> Result<Action> {
    let span = crate::traces::reconcile_span(conn.as_ref());
    let result = check_pass(conn, ctx).instrument(span.clone()).await;
    traced(&span, &result);
    result.map(|(action, _)| action)
}

/// Record on `span` how a Connection's (or ClusterConnection's) pass ended: the pass's error, or
/// the reason of a `Ready=False` check.
pub(crate) fn traced(span: &tracing::Span, result: &Result<(Action, Option<String>)>) {
    let failure = match result {
        Err(e) => Some(e.category().reason().to_string()),
        Ok((_, failed)) => failed.clone(),
    };
    crate::traces::reconciled(span, failure.as_deref());
}

/// Why `status` says the service cannot be used (its `Ready=False` reason), if it does.
pub(crate) fn check_failure(status: &ConnectionStatus) -> Option<String> {
    conditions::get(&status.conditions, READY)
        .filter(|c| c.status == "False")
        .map(|c| c.reason.to_string())
}

async fn check_pass(conn: Arc<Connection>, ctx: Arc<Context>) -> Result<(Action, Option<String>)> {
    let intent = gitops::Intent::of(
        conn.as_ref(),
        conn.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref()),
    );
    let key = object_key(conn.as_ref());
    if let Some(wait) = ctx.stale_copy(&key, conn.resource_version().as_deref()) {
        // A copy from before our last status write (a Secret's event dispatched before the
        // write reached the cache): a check from it would set its conditions afresh, with new
        // transition times. The write's own event brings the current copy.
        return Ok((Action::requeue(wait), None));
    }
    if intent.suspend {
        return Ok((suspended(&conn, &ctx).await?, None));
    }
    if conn.spec.auth.is_none() {
        // Switched from a login to a token Secret: the login's token is no longer needed.
        ctx.end_session(&conn.namespace().unwrap_or_default(), &conn.name_any())
            .await;
    }
    let before = conn.status.clone().unwrap_or_default();
    let (mut status, requeue) = check(&conn, conn.as_ref(), &ctx).await;
    if intent.requested_at.is_some() {
        status.last_handled_reconcile_at = intent.requested_at;
    }
    ctx.metrics.resource_ready(
        "Connection",
        &conn.namespace().unwrap_or_default(),
        &conn.name_any(),
        conditions::get(&status.conditions, READY).is_some_and(|c| c.status == "True"),
    );
    if status != before {
        write_status(conn.as_ref(), &ctx, &status).await?;
    }
    Ok((Action::requeue(requeue), check_failure(&status)))
}

/// Check that the service of `conn` answers and accepts its token (a ClusterConnection's
/// comes as a Connection, see [`crate::reconcile::tenancy::as_connection`]); `target` is the
/// object Events are recorded on. Returns the new status and when to check again.
pub(crate) async fn check<K: kube::Resource<DynamicType = ()>>(
    conn: &Connection,
    target: &K,
    ctx: &Context,
) -> (ConnectionStatus, Duration) {
    let generation = conn.metadata.generation;
    let name = tenancy::label(conn);
    let mut leases = None;
    let mut session = None;
    let result = async {
        let http = ctx.build_http(conn).await?;
        session = http.session().cloned();
        let found = probe(&http).await?;
        if conn.spec.service == Service::Secrets && matches!(found, Probed::Accepted(_)) {
            leases = irrevocable(&http).await;
        }
        Ok::<_, Error>(found)
    }
    .await;
    if let Some((total, mounts)) = &leases {
        for (mount, n) in mounts {
            ctx.metrics.irrevocable_leases(&name, mount, *n);
        }
        let before = conn
            .status
            .as_ref()
            .and_then(|s| s.irrevocable_leases)
            .unwrap_or(0);
        if *total > before {
            publish(
                ctx,
                target,
                EventType::Warning,
                "IrrevocableLeases",
                "Probe",
                format!(
                    "{total} irrevocable lease(s) on {} (was {before}): their revocation failed for good; list them with `quartet leases --connection {name} irrevocable`",
                    conn.spec.address
                ),
            )
            .await;
        }
    }
    let before = conn.status.clone().unwrap_or_default();
    let mut status = before.clone();
    status.observed_generation = generation;
    status.requests_per_second_per_instance = Some(ctx.requests_per_second(conn));
    let key = format!("{}/{name}", K::kind(&()));
    status.auth = session
        .as_ref()
        .and_then(|s| s.state())
        .map(|l| ConnectionAuthStatus {
            method: "idp".into(),
            mount: l.mount,
            username: l.username,
            expires_at: l
                .expires_at
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            renewable: l.renewable,
        });
    let requeue = match &result {
        Ok(found) => {
            ctx.succeeded(&key);
            let (reason, message) = match found {
                Probed::Accepted(features) => {
                    status.features = features.clone();
                    (
                        "Connected",
                        format!("{} answered and accepted the token", conn.spec.address),
                    )
                }
                // The features and lease count of the last check as a primary stay: the
                // secondary cannot be asked, and they hold again once it is promoted.
                Probed::DrSecondary => (
                    "DrSecondary",
                    format!(
                        "{} is a DR secondary: it answers only DR replication requests, so the token is checked once it is promoted",
                        conn.spec.address
                    ),
                ),
            };
            if let Some((total, _)) = &leases {
                status.irrevocable_leases = Some(*total);
            }
            conditions::set(
                &mut status.conditions,
                READY,
                true,
                reason,
                message,
                generation,
            );
            gitops::set_progress(&mut status.conditions, Progress::Done, generation);
            // A login is renewed when due even while no resource calls through it.
            let due = match &session {
                Some(s) => s.next_due().await,
                None => None,
            };
            match due {
                Some(d) if d < ctx.settings.resync => d + Duration::from_millis(100),
                _ => jitter(ctx.settings.resync),
            }
        }
        Err(e @ Error::Remote(ClientError::Login { .. })) => {
            let message = e.to_string();
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                "LoginFailed",
                message.clone(),
                generation,
            );
            gitops::set_progress(
                &mut status.conditions,
                progress(e, "LoginFailed", &message),
                generation,
            );
            // The session itself backs logins off; checking sooner than it allows is free.
            let _ = ctx.failed(&key);
            jitter(Duration::from_secs(10))
        }
        Err(e) => {
            let reason = match e.category() {
                Category::Unauthorized => "Unauthorized",
                Category::Transient => "Unreachable",
                Category::ReferenceMissing => "SecretNotFound",
                Category::InvalidSpec | Category::ConnectionUnavailable => "InvalidSpec",
                other => other.reason(),
            };
            let message = e.to_string();
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                reason,
                message.clone(),
                generation,
            );
            gitops::set_progress(
                &mut status.conditions,
                progress(e, reason, &message),
                generation,
            );
            // A failing Connection is cheap to check (one Secret read, one call) and its fix
            // (usually a token Secret edit) is not watched: check it again soon.
            let _ = ctx.failed(&key);
            jitter(Duration::from_secs(10))
        }
    };
    (status, requeue)
}

/// The kstatus pair for a failed check, under the Connection's own `Ready` reason.
fn progress<'a>(err: &Error, reason: &'a str, message: &'a str) -> Progress<'a> {
    if gitops::stalls(err) {
        Progress::Stalled(reason, message)
    } else {
        Progress::Working(reason, message)
    }
}

/// A suspended Connection: no call to the service, `Ready=False` reason `Suspended`, and no
/// requeue (resuming is a spec change, which wakes it).
async fn suspended(conn: &Connection, ctx: &Context) -> Result<Action> {
    let generation = conn.metadata.generation;
    let before = conn.status.clone().unwrap_or_default();
    let mut status = before.clone();
    status.observed_generation = generation;
    conditions::set(
        &mut status.conditions,
        READY,
        false,
        gitops::SUSPENDED,
        "spec.suspend is true: the service is not checked until it is set back to false",
        generation,
    );
    gitops::set_progress(&mut status.conditions, Progress::Suspended, generation);
    ctx.metrics.resource_ready(
        "Connection",
        &conn.namespace().unwrap_or_default(),
        &conn.name_any(),
        false,
    );
    if status != before {
        write_status(conn, ctx, &status).await?;
    }
    Ok(Action::await_change())
}

/// Write the status, remembering its resourceVersion so that a pass over an older copy is
/// recognised ([`Context::stale_copy`]).
/// A Connection deleted during its check (with its token Secret, whose deletion woke it) has
/// no status left to write: not a failure.
async fn write_status(conn: &Connection, ctx: &Context, status: &ConnectionStatus) -> Result<()> {
    match patch_status(conn, ctx, json!(status)).await {
        Ok(Some(rv)) => ctx.set_written(&object_key(conn), &rv),
        Ok(None) => {}
        Err(Error::Kube(kube::Error::Api(e))) if e.code == 404 => {
            tracing::debug!(connection = %object_key(conn), "deleted during its check");
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

fn error_policy(_conn: Arc<Connection>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %err, "connection check failed");
    Action::requeue(Duration::from_secs(10))
}

/// Runs the Connection controller (in `namespace`, or all) until `life` says stop.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    life: crate::reconcile::driver::Lifetime,
) {
    let api: Api<Connection> = scoped_api(&ctx.client, namespace.as_deref());
    // Their metadata only: which Secret changed is all the mapping reads (the values of every
    // Secret in the scope, Helm's releases among them, would be listed and streamed for nothing).
    let secrets: Api<PartialObjectMeta<Secret>> = scoped_api(&ctx.client, namespace.as_deref());
    let (reader, writer) = reflector::store();
    let controller = Controller::for_stream(
        crate::reconcile::driver::lean_watch(api.clone(), writer, life.clone(), &ctx),
        reader,
    );
    let store = controller.store();
    // A changed token, password or seed Secret is read at once (a new password logs in again).
    let controller = controller
        .watches(
            secrets,
            watcher::Config::default(),
            move |secret: PartialObjectMeta<Secret>| {
                let ns = secret.namespace().unwrap_or_default();
                let name = secret.name_any();
                store
                    .state()
                    .into_iter()
                    .filter(|c| {
                        c.namespace().as_deref() == Some(ns.as_str())
                            && secret_refs(c).contains(&name)
                    })
                    .map(|c| ObjectRef::from_obj(c.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .with_config(controller::Config::default().concurrency(2))
        .graceful_shutdown_on(life.stopped())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    tokio::select! {
        _ = controller => {}
        _ = revoke_deleted(ctx, api, namespace) => {}
    }
}

/// The Secrets a Connection reads.
pub(crate) fn secret_refs(conn: &Connection) -> Vec<String> {
    let spec = &conn.spec;
    let mut refs: Vec<String> = [&spec.token_secret_ref, &spec.ca_secret_ref]
        .into_iter()
        .flatten()
        .map(|r| r.name.clone())
        .collect();
    if let Some(auth) = &spec.auth {
        refs.push(auth.idp.password_secret_ref.name.clone());
        refs.extend(auth.idp.totp_secret_ref.iter().map(|r| r.name.clone()));
    }
    refs
}

/// Revoke the login token of each Connection that is deleted. (The controller never sees a
/// deleted object; a finalizer would hold every Connection's deletion on the operator.) After a
/// re-list, logins of Connections no longer listed are ended too.
async fn revoke_deleted(ctx: Arc<Context>, api: Api<Connection>, namespace: Option<String>) {
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listed = std::collections::HashSet::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Delete(conn)) => {
                let ns = conn.namespace().unwrap_or_default();
                ctx.forget(&object_key(&conn));
                ctx.metrics
                    .resource_gone("Connection", &ns, &conn.name_any());
                ctx.end_session(&ns, &conn.name_any()).await;
            }
            Ok(watcher::Event::Init) => listed.clear(),
            Ok(watcher::Event::InitApply(conn)) => {
                listed.insert((conn.namespace().unwrap_or_default(), conn.name_any()));
            }
            Ok(watcher::Event::InitDone) => {
                // Only this watch's own Connections: not ClusterConnections (`""` namespace),
                // nor those of the other watched namespaces.
                let ours =
                    |ns: &str| !ns.is_empty() && namespace.as_deref().is_none_or(|only| only == ns);
                for key in ctx.sessions() {
                    if ours(&key.0) && !listed.contains(&key) {
                        ctx.end_session(&key.0, &key.1).await;
                    }
                }
            }
            _ => {}
        }
    }
}
