//! Command line: `quartet run | crd | plan | sandbox | dev | leases | login | catalog`.

pub mod catalog;
pub mod crd;
#[cfg(feature = "sandbox")]
pub mod dev;
pub mod leases;
pub mod login;
pub mod plan;
pub mod run;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "quartet",
    version,
    about = "Kubernetes operator for a secrets service, a workspace service, a catalog and a scheduler"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format: `text` or `json`. Log level comes from RUST_LOG (default `info`).
    #[arg(
        long,
        global = true,
        env = "QUARTET_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: String,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the controllers against a cluster (kubeconfig, or in-cluster config).
    Run(RunArgs),
    /// Print the CustomResourceDefinitions as YAML, or write one file per kind.
    Crd(CrdArgs),
    /// What applying manifests would do to the services, without changing anything: exit 0
    /// when nothing would change, 2 when something would, 1 when a resource is blocked or on
    /// error.
    Plan(crate::cmd::plan::PlanArgs),
    /// Start the emulated services only (and, with --kubeconfig, the dev Kubernetes API server).
    /// For development and tests, never production.
    #[cfg(feature = "sandbox")]
    Sandbox(SandboxArgs),
    /// Everything embedded for a first look: dev Kubernetes API server with the CRDs installed,
    /// the emulated services, Connections to them, and the controllers. Serves until Ctrl-C.
    #[cfg(feature = "sandbox")]
    Dev(DevArgs),
    /// Lease operations of the secrets service: lookup, list, renew, revoke, revoke-prefix,
    /// revoke-force, tidy, count and list irrevocable leases.
    Leases(crate::cmd::leases::LeasesArgs),
    /// Log in to the secrets service (identity-provider auth method) and print the token.
    Login(crate::cmd::login::LoginArgs),
    /// The catalog from the command line: `login --oidc` (interactive OIDC login).
    Catalog(crate::cmd::catalog::CatalogArgs),
    /// Not in this build (built without the `sandbox` feature).
    #[cfg(not(feature = "sandbox"))]
    #[command(hide = true)]
    Sandbox(NotBuilt),
    /// Not in this build (built without the `sandbox` feature).
    #[cfg(not(feature = "sandbox"))]
    #[command(hide = true)]
    Dev(NotBuilt),
}

/// Any arguments of a subcommand this build leaves out.
#[cfg(not(feature = "sandbox"))]
#[derive(Args, Debug)]
pub struct NotBuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}

/// What `quartet sandbox|dev` says in a build without the `sandbox` feature.
#[cfg(not(feature = "sandbox"))]
fn not_built(command: &str) -> anyhow::Result<()> {
    anyhow::bail!(
        "`quartet {command}` is not in this build: it was built without the `sandbox` feature, as \
         production images are (they carry no emulated services and no dev Kubernetes API \
         server). Use a development build, which has it by default: from a checkout of the \
         source, `cargo run --release -- {command}` (or `cargo install --path .` for a \
         `quartet` binary with it)"
    )
}

#[derive(Args, Debug, Clone)]
pub struct OperatorArgs {
    /// Drift resync interval: every resource is compared with its service this often (±10%)
    /// even when nothing changed in Kubernetes. Examples: `30s`, `5m`.
    #[arg(long, env = "QUARTET_RESYNC_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    pub resync_interval: Duration,
    /// Reconciles run at once per kind.
    #[arg(long, env = "QUARTET_CONCURRENCY", default_value_t = 8)]
    pub concurrency: u16,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    #[arg(long, env = "QUARTET_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Namespace of the operator's own objects (leader Lease, hash-key Secret).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub operator_namespace: String,
    /// HTTP retries after the first attempt, for 429, 5xx and connection failures.
    #[arg(long, default_value_t = 3)]
    pub max_retries: u32,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Kubeconfig to use; default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "QUARTET_NAMESPACE")]
    pub namespace: Option<String>,
    /// Elect a leader through a Lease so that only one replica writes.
    #[arg(long, env = "QUARTET_LEADER_ELECT", default_value_t = false)]
    pub leader_elect: bool,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "quartet-leader")]
    pub lease_name: String,
    /// After SIGTERM or SIGINT the process exits within this long, whatever it was doing:
    /// reconciles under way get most of it to finish (the rest are cut, and resumed by the next
    /// leader), then the leader releases its Lease. Keep it below the pod's
    /// terminationGracePeriodSeconds.
    #[arg(long, env = "QUARTET_SHUTDOWN_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    #[command(flatten)]
    pub operator: OperatorArgs,
}

#[derive(Args, Debug)]
pub struct CrdArgs {
    /// Write one file per CRD into this directory instead of printing.
    #[arg(long)]
    pub out: Vec<PathBuf>,
    /// Write one Helm template per CRD into this directory (the chart's `templates/crds`),
    /// installed with `crds.install` and kept on uninstall with `crds.keep`.
    #[arg(long)]
    pub chart: Vec<PathBuf>,
    /// Print each CRD's CEL rule costs as kube-apiserver 1.36 estimates them, against its
    /// limits; fail when a rule is over the per-rule limit or a CRD's rules use half or more
    /// of the whole-schema budget. Needs the `sandbox` feature (the estimator lives there).
    #[arg(long, conflicts_with_all = ["out", "chart"])]
    pub check: bool,
}

#[cfg(feature = "sandbox")]
#[derive(Args, Debug, Clone)]
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
    /// Number of secrets clusters, for DR replication.
    #[arg(long, default_value_t = 1)]
    pub secrets_clusters: u16,
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

#[cfg(feature = "sandbox")]
#[derive(Args, Debug)]
pub struct SandboxArgs {
    #[command(flatten)]
    pub services: ServiceArgs,
    /// Also start the dev Kubernetes API server (bare: no CRDs) and write its kubeconfig here.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

#[cfg(feature = "sandbox")]
#[derive(Args, Debug)]
pub struct DevArgs {
    #[command(flatten)]
    pub services: ServiceArgs,
    /// Where to write the kubeconfig of the dev cluster.
    #[arg(long, default_value = "quartet-dev.kubeconfig")]
    pub kubeconfig: PathBuf,
    #[command(flatten)]
    pub operator: OperatorArgs,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 30s, 5m, 1h)"))
}

fn init_logging(format: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,kube=warn,hyper=warn,tower=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        if let Command::Plan(args) = cli.command {
            return crate::cmd::plan::run(args).await;
        }
        let done = match cli.command {
            Command::Run(args) => crate::cmd::run::run(args).await,
            Command::Crd(args) => crate::cmd::crd::crd(args),
            #[cfg(feature = "sandbox")]
            Command::Sandbox(args) => crate::cmd::dev::sandbox(args).await,
            #[cfg(feature = "sandbox")]
            Command::Dev(args) => crate::cmd::dev::dev(args).await,
            Command::Leases(args) => crate::cmd::leases::run(args).await.map_err(Into::into),
            #[cfg(not(feature = "sandbox"))]
            Command::Sandbox(_) => not_built("sandbox"),
            #[cfg(not(feature = "sandbox"))]
            Command::Dev(_) => not_built("dev"),
            Command::Login(args) => crate::cmd::login::run(args).await.map_err(Into::into),
            Command::Catalog(args) => crate::cmd::catalog::run(args).await.map_err(Into::into),
            Command::Plan(_) => unreachable!("handled above"),
        };
        done.map(|()| ExitCode::SUCCESS)
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
