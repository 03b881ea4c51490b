//! `quartet sandbox`: the emulated services, and with `--kubeconfig` the dev Kubernetes API
//! server (bare: no CRDs). Development and tests only. `quartet dev` starts the same pieces.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use quartet_sandbox::apiserver::{ApiServer, ApiServerOptions};
use quartet_sandbox::{Sandbox, SandboxOptions};
use tokio_util::sync::CancellationToken;

use crate::runtime::controllers;

#[derive(Args, Debug, Clone)]
// Where the emulated services listen and how they start, shared by `quartet sandbox` and `quartet
// dev` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct ServiceArgs {
    /// Listen address of the secrets service (cluster i of --secrets-clusters listens on port+i).
    #[arg(long, default_value = "127.0.0.1:8200")]
    pub secrets_addr: SocketAddr,
    /// Listen address of the workspace service.
    #[arg(long, default_value = "127.0.0.1:8800")]
    pub workspaces_addr: SocketAddr,
    /// Listen address of the catalog service.
    #[arg(long, default_value = "127.0.0.1:8500")]
    pub catalog_addr: SocketAddr,
    /// Listen address of the scheduler.
    #[arg(long, default_value = "127.0.0.1:4646")]
    pub scheduler_addr: SocketAddr,
    /// Root token of the secrets service (also the workspace owners' token and the scheduler's
    /// management token).
    #[arg(
        long,
        env = "QUARTET_ROOT_TOKEN",
        default_value = "root",
        hide_env_values = true
    )]
    pub root_token: String,
    /// Licence the secrets service pretends to hold: community, enterprise or premium.
    #[arg(long, default_value = "premium")]
    pub edition: quartet_sandbox::Edition,
    /// Number of secrets clusters, for DR replication (cluster i listens on the secrets port +
    /// i). Default: 1 for `quartet sandbox`; 3 for `quartet dev`, so that
    /// `examples/dr-replication.yaml` works as written.
    #[arg(long)]
    pub secrets_clusters: Option<u16>,
    /// Organization created ready to use in the workspace service.
    #[arg(long, default_value = "quartet")]
    pub organization: String,
    /// Persist state here so a restart keeps it (default: memory only).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Listen address of the dev Kubernetes API server (when one is started).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub kube_addr: SocketAddr,
}

#[derive(Args, Debug)]
// The arguments of `quartet sandbox` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct SandboxArgs {
    #[command(flatten)]
    pub services: ServiceArgs,
    /// Also start the dev Kubernetes API server (bare: no CRDs) and write its kubeconfig here.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// The emulated services of `args`, with `clusters` secrets clusters unless `args` says.
pub(super) fn sandbox_options(args: &ServiceArgs, clusters: u16) -> SandboxOptions {
    SandboxOptions {
        secrets_addr: args.secrets_addr,
        workspaces_addr: args.workspaces_addr,
        catalog_addr: args.catalog_addr,
        scheduler_addr: args.scheduler_addr,
        root_token: args.root_token.clone(),
        edition: args.edition,
        secrets_clusters: args.secrets_clusters.unwrap_or(clusters),
        organization: args.organization.clone(),
        state_dir: args.state_dir.as_ref().map(|d| d.join("services")),
    }
}

pub(super) async fn start_apiserver(args: &ServiceArgs) -> anyhow::Result<ApiServer> {
    ApiServer::start(ApiServerOptions {
        addr: args.kube_addr,
        token: random_token(),
        state_dir: args.state_dir.as_ref().map(|d| d.join("kubernetes")),
    })
    .await
}

pub(super) fn random_token() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    hex::encode(bytes)
}

pub(super) fn print_services(sandbox: &Sandbox) {
    for (i, url) in sandbox.secrets_urls.iter().enumerate() {
        let label = if sandbox.secrets_urls.len() > 1 {
            format!("secrets[{i}]")
        } else {
            "secrets".into()
        };
        println!("  {label:<12} {url}");
    }
    println!("  {:<12} {}", "workspaces", sandbox.workspaces_url);
    println!("  {:<12} {}", "catalog", sandbox.catalog_url);
    println!("  {:<12} {}", "scheduler", sandbox.scheduler_url);
}

/// `quartet sandbox`: starts the emulated services (and with `--kubeconfig` the dev API server) and
/// serves until a signal stops them.
pub async fn sandbox(args: SandboxArgs) -> anyhow::Result<()> {
    let sandbox = quartet_sandbox::start(sandbox_options(&args.services, 1)).await?;
    println!("Quartet sandbox (development and tests only; tokens: the value of --root-token)");
    print_services(&sandbox);
    if let Some(path) = &args.kubeconfig {
        let api = start_apiserver(&args.services).await?;
        api.write_kubeconfig(path)?;
        println!("  {:<12} {}", "kubernetes", api.url());
        println!("  {:<12} {}", "kubeconfig", path.display());
        println!("Quartet sandbox is ready");
        wait_for_signal().await;
        drop(api);
    } else {
        println!("Quartet sandbox is ready");
        wait_for_signal().await;
    }
    sandbox.shutdown();
    Ok(())
}

pub(super) async fn wait_for_signal() {
    let token = CancellationToken::new();
    controllers::cancel_on_signal(token.clone()).await;
}
