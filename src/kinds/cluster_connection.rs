//! ClusterConnection: the same check as a Connection's (the service answers and accepts the
//! token, read from the ClusterConnection's Secrets' namespace), reported as its `Ready`
//! condition. Which resources may use it is decided where they resolve it
//! ([`crate::reconcile::tenancy`]).

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

use crate::api::ClusterConnection;
use crate::api::ConnectionStatus;
use crate::reconcile::conditions::{self, READY};
use crate::reconcile::driver::{apply_status, object_key, Lifetime};
use crate::reconcile::gitops;
use crate::reconcile::tenancy::as_connection;
use crate::reconcile::{Context, Error, Result};

/// One pass of a ClusterConnection, traced as a Connection's is.
async fn reconcile(cc: Arc<ClusterConnection>, ctx: Arc<Context>) -> Result<Action> {
    let span = crate::traces::reconcile_span(cc.as_ref());
    let result = check_pass(cc, ctx).instrument(span.clone()).await;
    super::connection::traced(&span, &result);
    result.map(|(action, _)| action)
}

async fn check_pass(
    cc: Arc<ClusterConnection>,
    ctx: Arc<Context>,
) -> Result<(Action, Option<String>)> {
    let name = cc.name_any();
    let intent = gitops::Intent::of(
        cc.as_ref(),
        cc.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref()),
    );
    let key = object_key(cc.as_ref());
    if let Some(wait) = ctx.stale_copy(&key, cc.resource_version().as_deref()) {
        // As for a Connection: never check from a copy older than our last status write.
        return Ok((Action::requeue(wait), None));
    }
    if intent.suspend {
        let generation = cc.metadata.generation;
        let before = cc.status.clone().unwrap_or_default();
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
        gitops::set_progress(
            &mut status.conditions,
            gitops::Progress::Suspended,
            generation,
        );
        ctx.metrics
            .resource_ready("ClusterConnection", "", &name, false);
        if status != before {
            write_status(&ctx, &name, &status).await?;
        }
        // Resuming is a spec change, which wakes it.
        return Ok((Action::await_change(), None));
    }
    if cc.spec.auth.is_none() {
        // Switched from a login to a token Secret: the login's token is no longer needed.
        ctx.end_session("", &name).await;
    }
    let conn = as_connection(&cc, &ctx.tenancy().operator_namespace);
    let before = cc.status.clone().unwrap_or_default();
    let (mut status, requeue) = super::connection::check(&conn, cc.as_ref(), &ctx).await;
    if intent.requested_at.is_some() {
        status.last_handled_reconcile_at = intent.requested_at;
    }
    ctx.metrics.resource_ready(
        "ClusterConnection",
        "",
        &name,
        conditions::get(&status.conditions, READY).is_some_and(|c| c.status == "True"),
    );
    if status != before {
        write_status(&ctx, &name, &status).await?;
    }
    Ok((
        Action::requeue(requeue),
        super::connection::check_failure(&status),
    ))
}

/// Server-side apply of a ClusterConnection's status (cluster-scoped: no namespace),
/// remembering its resourceVersion so that a pass over an older copy is recognised.
async fn write_status(ctx: &Context, name: &str, status: &ConnectionStatus) -> Result<()> {
    let updated =
        match apply_status::<ClusterConnection>(&ctx.client, None, name, json!(status)).await {
            Ok(updated) => updated,
            // Deleted during its check: no status left to write.
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => return Err(Error::kube_for::<ClusterConnection>(e)),
        };
    if let Some(rv) = updated.resource_version() {
        ctx.set_written(&object_key(&updated), &rv);
    }
    Ok(())
}

fn error_policy(_cc: Arc<ClusterConnection>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %err, "cluster connection check failed");
    Action::requeue(Duration::from_secs(10))
}

/// Run the ClusterConnection controller (cluster-scoped: the watched namespaces do not apply).
/// Its token Secrets are watched in the operator's namespace, where they are by default; one
/// kept elsewhere is read again at each check.
pub async fn run(ctx: Arc<Context>, _namespace: Option<String>, life: Lifetime) {
    let api: Api<ClusterConnection> = Api::all(ctx.client.clone());
    // Their metadata only, as the Connection controller's.
    let secrets: Api<PartialObjectMeta<Secret>> =
        Api::namespaced(ctx.client.clone(), &ctx.tenancy().operator_namespace);
    let (reader, writer) = reflector::store();
    let controller = Controller::for_stream(
        crate::reconcile::driver::lean_watch(api.clone(), writer, life.clone(), &ctx),
        reader,
    );
    let store = controller.store();
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
                        let conn = as_connection(c, &ns);
                        conn.namespace().as_deref() == Some(ns.as_str())
                            && super::connection::secret_refs(&conn).contains(&name)
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
        _ = revoke_deleted(ctx, api) => {}
    }
}

/// Revoke the login token of each ClusterConnection that is deleted (as for Connections).
async fn revoke_deleted(ctx: Arc<Context>, api: Api<ClusterConnection>) {
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listed = std::collections::HashSet::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Delete(cc)) => {
                ctx.forget(&object_key(&cc));
                ctx.metrics
                    .resource_gone("ClusterConnection", "", &cc.name_any());
                ctx.end_session("", &cc.name_any()).await;
            }
            Ok(watcher::Event::Init) => listed.clear(),
            Ok(watcher::Event::InitApply(cc)) => {
                listed.insert(cc.name_any());
            }
            Ok(watcher::Event::InitDone) => {
                for (ns, name) in ctx.sessions() {
                    if ns.is_empty() && !listed.contains(&name) {
                        ctx.end_session("", &name).await;
                    }
                }
            }
            _ => {}
        }
    }
}
