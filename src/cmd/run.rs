//! `quartet run`: the controller manager.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::reconcile::Settings;
use crate::runtime::controllers;
use crate::runtime::kube_client::{client_from, hash_key};
use crate::runtime::leader::{lease_name_error, LeaderElector, LeaseConfig};
use crate::runtime::server::{Health, Role};
use crate::shard::Shard;

#[derive(Args, Debug, Clone)]
// The operator's settings that `quartet run` and `quartet dev` share (no doc comment: clap would
// print it in --help).
#[allow(missing_docs)]
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
    /// Also append the change log (one JSON record per write to a service, log target
    /// `quartet::changes`) to this file.
    #[arg(long, env = "QUARTET_CHANGE_LOG")]
    pub change_log: Option<PathBuf>,
    /// Namespace of the operator's own objects (leader Lease, hash-key Secret).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub operator_namespace: String,
    /// HTTP retries after the first attempt, for 429, 5xx and connection failures.
    #[arg(long, default_value_t = 3)]
    pub max_retries: u32,
}

#[derive(Args, Debug)]
// The arguments of `quartet run` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct RunArgs {
    /// Kubeconfig to use; default: $KUBECONFIG (a list such as a:b is merged as kubectl merges
    /// it), ~/.kube/config, or the in-cluster service account.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Watch only this namespace (default: all namespaces). The same as one
    /// `--watch-namespaces`.
    #[arg(long, env = "QUARTET_NAMESPACE")]
    pub namespace: Option<String>,
    /// Watch only these namespaces, comma-separated or repeated (default: all namespaces):
    /// one watch per namespace, so the operator needs rights in these namespaces only.
    #[arg(long, env = "QUARTET_WATCH_NAMESPACES", value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// Elect a leader through a Lease so that only one replica writes.
    #[arg(long, env = "QUARTET_LEADER_ELECT", default_value_t = false)]
    pub leader_elect: bool,
    /// Name of the leader-election Lease (default: `quartet-leader`, or
    /// `quartet-leader-NAME` with `--shard NAME`, so each shard elects its own leader).
    #[arg(long)]
    pub lease_name: Option<String>,
    /// Serve only the resources labelled `quartet.dev/shard=NAME` (without it: only the
    /// resources without that label). Each shard is an instance of its own, with its own leader.
    #[arg(long, env = "QUARTET_SHARD")]
    pub shard: Option<String>,
    /// How many instances (the default one and every shard) share each Connection's
    /// `requestsPerSecond`: this instance uses 1/N of it, so N instances together stay within
    /// the budget. A Connection's own `spec.shards`, when set, wins over it.
    #[arg(long, env = "QUARTET_SHARD_COUNT", default_value_t = 1)]
    pub shard_count: u32,
    /// After SIGTERM or SIGINT the process exits within this long, whatever it was doing:
    /// reconciles under way get most of it to finish (the rest are cut, and resumed by the next
    /// leader), then the leader releases its Lease. Keep it below the pod's
    /// terminationGracePeriodSeconds.
    #[arg(long, env = "QUARTET_SHUTDOWN_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    #[command(flatten)]
    pub operator: OperatorArgs,
}

/// A duration as people write it: `30s`, `5m`, `1h`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 30s, 5m, 1h)"))
}

/// The framework's settings from the command line and the cluster (the hash key).
pub async fn settings(
    client: &Client,
    args: &OperatorArgs,
    shard: Shard,
) -> anyhow::Result<Settings> {
    if let Some(path) = &args.change_log {
        crate::changes::to_file(path)
            .map_err(|e| anyhow::anyhow!("cannot open the change log {}: {e}", path.display()))?;
    }
    Ok(Settings {
        shard,
        resync: args.resync_interval,
        concurrency: args.concurrency.max(1),
        hash_key: hash_key(client, &args.operator_namespace).await?,
        max_retries: args.max_retries,
        read_only: false,
        operator_namespace: args.operator_namespace.clone(),
    })
}

/// How the shutdown bound is shared out: the controllers' reconciles get this part of it, the
/// revocation of Connection logins a third of that, the Lease release what is left, and the
/// process exits at the bound whatever happens.
const CONTROLLERS_SHARE: f64 = 0.6;
const RELEASE_SHARE: f64 = 0.15;

/// `quartet run`: runs the controllers against the cluster until a signal stops it; fails when the
/// cluster or the settings cannot be used.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let shard = Shard::new(args.shard.clone(), args.shard_count)?;
    let lease_name = args
        .lease_name
        .clone()
        .unwrap_or_else(|| shard.lease_name());
    if let Some(why) = lease_name_error(&lease_name).filter(|_| args.leader_elect) {
        let fix = if args.lease_name.is_some() {
            "give another --lease-name"
        } else {
            "use a lowercase --shard name or give --lease-name"
        };
        anyhow::bail!("leader election cannot use a Lease named {lease_name:?}: {why}; {fix}");
    }
    let metrics = Arc::new(Metrics::default());
    metrics.shard_info(shard.label_value(), &shard.selector());
    let health = Arc::new(Health::default());
    let client = client_from(args.kubeconfig.as_deref(), metrics.clone()).await?;
    let shutdown = CancellationToken::new();
    let within = args.shutdown_timeout;
    {
        let health = health.clone();
        tokio::spawn(controllers::shutdown_on_signal(
            shutdown.clone(),
            within,
            move || health.set_role(Role::Stopping),
        ));
    }
    // Health is served until the process exits, so a probe sees "shutting down", not a refusal.
    let serving = CancellationToken::new();
    let _stop_serving = serving.clone().drop_guard();
    let addr = crate::runtime::server::serve(
        args.operator.metrics_addr,
        metrics.clone(),
        health.clone(),
        serving,
    )
    .await?;
    tracing::info!(%addr, "serving metrics and health");
    if let Some(name) = &shard.name {
        tracing::info!(shard = %name, selector = %shard.selector(), "serving shard {name}: only resources labelled {}", shard.selector());
    }

    let elector = args.leader_elect.then(|| {
        let identity = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| format!("quartet-{}", std::process::id()));
        LeaderElector::new(
            client.clone(),
            LeaseConfig {
                name: lease_name,
                namespace: args.operator.operator_namespace.clone(),
                identity,
                duration: std::time::Duration::from_secs(15),
                renew_every: std::time::Duration::from_secs(4),
            },
        )
    });
    if let Some(e) = &elector {
        health.set_role(Role::Standby);
        tokio::select! {
            _ = e.acquire(&health) => {}
            _ = shutdown.cancelled() => return Ok(()),
        }
    }
    health.set_role(Role::Leader);
    let settings = tokio::select! {
        s = settings(&client, &args.operator, shard.clone()) => s?,
        _ = shutdown.cancelled() => {
            if let Some(e) = &elector {
                release(e, within).await;
            }
            return Ok(());
        }
    };
    let mut namespaces: Vec<String> = args
        .watch_namespaces
        .iter()
        .chain(args.namespace.iter())
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    namespaces.sort();
    namespaces.dedup();
    let controllers = controllers::run(
        client,
        settings,
        namespaces,
        metrics,
        health,
        within.mul_f64(CONTROLLERS_SHARE),
        shutdown.clone(),
    );
    match &elector {
        Some(e) => {
            let lost = tokio::select! {
                r = controllers => { r?; false }
                _ = e.keep() => true,
            };
            if lost {
                // Another replica leads now; exit so that nothing of ours writes any more.
                anyhow::bail!("lost leadership");
            }
            release(e, within).await;
        }
        None => controllers.await?,
    }
    tracing::info!("stopped");
    Ok(())
}

/// Give the Lease up so a standby takes over at once, within a bounded time (if the API server
/// does not answer, the standby waits for the Lease to expire instead).
async fn release(e: &LeaderElector, within: std::time::Duration) {
    let bound = within
        .mul_f64(RELEASE_SHARE)
        .max(std::time::Duration::from_millis(500));
    if tokio::time::timeout(bound, e.release()).await.is_err() {
        tracing::warn!(
            "leader election: the Lease was not released within {:.1}s; a standby takes over when it expires",
            bound.as_secs_f64()
        );
    }
}
