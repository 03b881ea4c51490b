//! The Quartet sandbox: strict, stateful emulations of the four services Quartet manages, and a
//! development Kubernetes API server.
//!
//! It implements the service specs from the server side and shares no code with the operator's
//! clients, so each checks the other. It is a development and test tool, never a production
//! server: state lives in memory (optionally snapshotted to `--state-dir`).
//!
//! Every listener also serves the sandbox admin API under `/_sandbox/` (a prefix no real endpoint
//! uses): the request log and fault injection of [`admin`], plus per-service setup endpoints.

pub mod admin;
pub mod apiserver;
pub mod catalog;
pub mod scheduler;
pub mod secrets;
pub mod workspaces;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Which licence the emulated secrets service pretends to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Edition {
    Community,
    Enterprise,
    #[default]
    Premium,
}

impl std::str::FromStr for Edition {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "community" => Ok(Self::Community),
            "enterprise" => Ok(Self::Enterprise),
            "premium" => Ok(Self::Premium),
            other => Err(format!(
                "unknown edition {other:?} (community, enterprise or premium)"
            )),
        }
    }
}

/// How to start the emulated services. Port 0 picks an ephemeral port (tests do this).
#[derive(Clone, Debug)]
pub struct SandboxOptions {
    pub secrets_addr: SocketAddr,
    pub workspaces_addr: SocketAddr,
    pub catalog_addr: SocketAddr,
    pub scheduler_addr: SocketAddr,
    /// Root token of the secrets service, owners-team user token of the workspace service,
    /// management token of the catalog when configured, management token of the scheduler.
    pub root_token: String,
    pub edition: Edition,
    /// Number of secrets clusters (for DR replication); cluster i listens on port secrets+i.
    pub secrets_clusters: u16,
    /// Organization created ready to use in the workspace service.
    pub organization: String,
    /// Where state is persisted across restarts; `None` keeps it in memory only.
    pub state_dir: Option<PathBuf>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        Self {
            secrets_addr: ([127, 0, 0, 1], 8200).into(),
            workspaces_addr: ([127, 0, 0, 1], 8800).into(),
            catalog_addr: ([127, 0, 0, 1], 8500).into(),
            scheduler_addr: ([127, 0, 0, 1], 4646).into(),
            root_token: "root".into(),
            edition: Edition::Premium,
            secrets_clusters: 1,
            organization: "quartet".into(),
            state_dir: None,
        }
    }
}

impl SandboxOptions {
    /// All listeners on ephemeral loopback ports: what tests use.
    pub fn ephemeral() -> Self {
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        Self {
            secrets_addr: any,
            workspaces_addr: any,
            catalog_addr: any,
            scheduler_addr: any,
            ..Self::default()
        }
    }
}

/// A running sandbox. Dropping it does not stop the listeners; call [`Sandbox::shutdown`].
pub struct Sandbox {
    /// Base URLs (`http://127.0.0.1:port`) of the secrets clusters, the first is cluster 0.
    pub secrets_urls: Vec<String>,
    pub workspaces_url: String,
    pub catalog_url: String,
    pub scheduler_url: String,
    pub admin: Arc<admin::Admin>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sandbox {
    pub fn secrets_url(&self) -> &str {
        &self.secrets_urls[0]
    }

    pub fn shutdown(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

/// Start every emulated service.
pub async fn start(opts: SandboxOptions) -> anyhow::Result<Sandbox> {
    let admin = Arc::new(admin::Admin::default());
    let mut tasks = Vec::new();

    let mut secrets_urls = Vec::new();
    for (i, router) in secrets::routers(&opts)?.into_iter().enumerate() {
        let mut addr = opts.secrets_addr;
        if addr.port() != 0 {
            addr.set_port(addr.port() + i as u16);
        }
        let (url, task) = listen("secrets", addr, router, &admin).await?;
        secrets_urls.push(url);
        tasks.push(task);
    }
    let (workspaces_url, t) = listen(
        "workspaces",
        opts.workspaces_addr,
        workspaces::router(&opts)?,
        &admin,
    )
    .await?;
    tasks.push(t);
    let (catalog_url, t) = listen(
        "catalog",
        opts.catalog_addr,
        catalog::router(&opts)?,
        &admin,
    )
    .await?;
    tasks.push(t);
    let (scheduler_url, t) = listen(
        "scheduler",
        opts.scheduler_addr,
        scheduler::router(&opts)?,
        &admin,
    )
    .await?;
    tasks.push(t);

    Ok(Sandbox {
        secrets_urls,
        workspaces_url,
        catalog_url,
        scheduler_url,
        admin,
        tasks,
    })
}

/// Bind `addr` and serve `router` behind the admin layer (request log, faults, `/_sandbox/`).
pub async fn listen(
    service: &'static str,
    addr: SocketAddr,
    router: Router,
    admin: &Arc<admin::Admin>,
) -> anyhow::Result<(String, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("{service}: cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr()?;
    let app = admin::wrap(service, router, admin.clone());
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app.into_make_service()).await {
            tracing::error!(service, error = %e, "sandbox listener stopped");
        }
    });
    Ok((format!("http://{local}"), task))
}
