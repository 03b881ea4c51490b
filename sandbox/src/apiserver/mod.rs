//! A development Kubernetes API server (in the spirit of controller-runtime's envtest).
//! NOT a production server. Filled in by issue 2.

pub mod schema;

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct ApiServerOptions {
    /// Listen address; port 0 picks an ephemeral port.
    pub addr: SocketAddr,
    /// Bearer token clients must present.
    pub token: String,
    /// Directory to snapshot objects to, so a restart keeps them.
    pub state_dir: Option<PathBuf>,
}

impl Default for ApiServerOptions {
    fn default() -> Self {
        Self { addr: ([127, 0, 0, 1], 0).into(), token: "dev-token".into(), state_dir: None }
    }
}

/// A running API server.
pub struct ApiServer {
    url: String,
    token: String,
}

impl ApiServer {
    pub async fn start(opts: ApiServerOptions) -> anyhow::Result<Self> {
        let _ = opts;
        anyhow::bail!("dev API server not implemented yet")
    }

    /// `http://127.0.0.1:port`
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// A kubeconfig (YAML) that kubectl and kube::Client accept, context `quartet-dev`.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: quartet-dev\n  cluster:\n    server: {}\ncontexts:\n- name: quartet-dev\n  context:\n    cluster: quartet-dev\n    user: quartet-dev\n    namespace: default\ncurrent-context: quartet-dev\nusers:\n- name: quartet-dev\n  user:\n    token: {}\n",
            self.url, self.token
        )
    }

    pub fn write_kubeconfig(&self, path: &std::path::Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }
}
