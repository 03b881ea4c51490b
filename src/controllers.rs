//! Registration: every kind's CRD and controller. Adding a kind is a file in `api/`, a file in
//! `kinds/`, and one line in each list below.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client, CustomResourceExt};
use tokio_util::sync::CancellationToken;

use crate::api::directory::{AdCheckout, AdEngine, AdLibrarySet, AdRole};
use crate::api::dr_replication::DrReplication;
use crate::api::{CatalogAclBootstrap, CatalogAclToken, Connection, DeploymentGate, SecretsPolicy};
use crate::api::{
    IdpAuthMethod, IdpGroup, IdpUser, TotpEnrollment, TotpMethod, TransformAlphabet, TransformRole,
    TransformStore, TransformTemplate, Transformation,
};
use crate::api::{NoCodeModule, NoCodeWorkspace, Workspace, WorkspaceRun};
use crate::kinds;
use crate::reconcile::driver;
use crate::reconcile::metrics::Metrics;
use crate::reconcile::operation::run_operation;
use crate::reconcile::{Context, Settings};

/// Every CRD Quartet serves.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        Connection::crd(),
        SecretsPolicy::crd(),
        CatalogAclBootstrap::crd(),
        CatalogAclToken::crd(),
        DeploymentGate::crd(),
        NoCodeModule::crd(),
        NoCodeWorkspace::crd(),
        AdEngine::crd(),
        AdRole::crd(),
        AdLibrarySet::crd(),
        AdCheckout::crd(),
        DrReplication::crd(),
        TransformRole::crd(),
        Transformation::crd(),
        TransformTemplate::crd(),
        TransformAlphabet::crd(),
        TransformStore::crd(),
        TotpMethod::crd(),
        TotpEnrollment::crd(),
        IdpUser::crd(),
        IdpGroup::crd(),
        IdpAuthMethod::crd(),
        Workspace::crd(),
        WorkspaceRun::crd(),
    ]
}

/// Run every controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    settings: Settings,
    namespace: Option<String>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (connections, writer) = reflector::store::<Connection>();
    let conn_api: Api<Connection> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let reflector_task = tokio::spawn(
        watcher(conn_api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(|_| futures::future::ready(())),
    );
    connections.wait_until_ready().await?;
    let ctx = Arc::new(Context::new(client, settings, metrics, connections));
    let stop = || shutdown.clone().cancelled_owned();
    tokio::join!(
        kinds::connection::run(ctx.clone(), namespace.clone(), stop()),
        driver::run::<SecretsPolicy>(ctx.clone(), namespace.clone(), stop()),
        crate::reconcile::run_operation::<CatalogAclBootstrap>(
            ctx.clone(),
            namespace.clone(),
            stop()
        ),
        crate::reconcile::run_operation::<CatalogAclToken>(ctx.clone(), namespace.clone(), stop()),
        crate::reconcile::run_operation::<DeploymentGate>(ctx.clone(), namespace.clone(), stop()),
        run_operation::<NoCodeModule>(ctx.clone(), namespace.clone(), stop()),
        crate::reconcile::related::run_operation_related::<NoCodeWorkspace, NoCodeModule, _>(
            ctx.clone(),
            namespace.clone(),
            stop(),
            kinds::workspaces::nocode_workspace::users_of,
        ),
        driver::run::<Workspace>(ctx.clone(), namespace.clone(), stop()),
        crate::reconcile::run_operation::<WorkspaceRun>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<AdEngine>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<AdRole>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<AdLibrarySet>(ctx.clone(), namespace.clone(), stop()),
        crate::reconcile::run_operation::<AdCheckout>(ctx.clone(), namespace.clone(), stop()),
        crate::reconcile::run_operation::<DrReplication>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<TransformRole>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<Transformation>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<TransformTemplate>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<TransformAlphabet>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<TransformStore>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<TotpMethod>(ctx.clone(), namespace.clone(), stop()),
        run_operation::<TotpEnrollment>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<IdpUser>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<IdpGroup>(ctx.clone(), namespace.clone(), stop()),
        driver::run::<IdpAuthMethod>(ctx.clone(), namespace.clone(), stop()),
    );
    reflector_task.abort();
    ctx.end_all_sessions().await;
    Ok(())
}

/// Cancel `token` on Ctrl-C or SIGTERM.
pub fn cancel_on_signal(token: CancellationToken) -> impl Future<Output = ()> {
    async move {
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        token.cancel();
    }
}
