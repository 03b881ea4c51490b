//! `/metrics` (Prometheus text), `/healthz` and `/readyz` for the operator.
//!
//! `/healthz` only says the process answers HTTP: a liveness probe must not restart a replica
//! that waits for the Lease or for CRDs. `/readyz` says ready only in a consistent state (a
//! standby whose last look at the Lease succeeded; a leader whose served kinds all have their
//! controller started and cache filled) and its body says which kinds are served and which
//! are missing, so `kubectl get --raw` on the pod answers "why is this kind not reconciled".

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// What this replica is doing, for `/readyz`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// The process is starting; not ready yet.
    #[default]
    Starting,
    /// Waiting for the leader-election Lease.
    Standby,
    /// Running the controllers (the leader, or the only replica without leader election).
    Leader,
    /// SIGTERM or SIGINT received.
    Stopping,
}

#[derive(Debug, Default)]
struct KindHealth {
    crd: String,
    served: bool,
    synced: bool,
}

#[derive(Debug, Default)]
struct HealthState {
    role: Role,
    /// The standby's last read of the Lease succeeded.
    lease_ok: bool,
    /// How served kinds are found, once they are (`None`: not yet known).
    found_by: Option<&'static str>,
    kinds: BTreeMap<String, KindHealth>,
}

/// The replica's state as `/readyz` reports it; shared by the leader election, the controller
/// supervisor and the HTTP server.
#[derive(Debug, Default)]
pub struct Health {
    state: Mutex<HealthState>,
}

impl Health {
    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What this replica is doing now.
    pub fn role(&self) -> Role {
        self.lock().role
    }

    /// Records what this replica is doing; once `Stopping`, it stays so.
    pub fn set_role(&self, role: Role) {
        let mut s = self.lock();
        // Once stopping, nothing makes the replica ready again.
        if s.role != Role::Stopping {
            s.role = role;
        }
    }

    /// The result of the standby's last look at the Lease.
    pub fn lease_checked(&self, ok: bool) {
        self.lock().lease_ok = ok;
    }

    /// The served kinds are known (from the CRD watch or from discovery).
    pub fn kinds_known(&self, found_by: &'static str) {
        self.lock().found_by = Some(found_by);
    }

    /// Whether `kind` (CRD `crd`) is served; its cache counts as not filled until
    /// [`Health::kind_synced`].
    pub fn kind_served(&self, kind: &str, crd: &str, served: bool) {
        let mut s = self.lock();
        let k = s.kinds.entry(kind.to_string()).or_default();
        k.crd = crd.to_string();
        if k.served != served {
            k.synced = false;
        }
        k.served = served;
    }

    /// `kind`'s controller has its first complete list.
    pub fn kind_synced(&self, kind: &str) {
        if let Some(k) = self.lock().kinds.get_mut(kind) {
            k.synced = k.served;
        }
    }

    /// Whether the replica is ready, and the body of `/readyz` saying why (not).
    pub fn report(&self) -> (bool, String) {
        let s = self.lock();
        let served: Vec<&str> = s
            .kinds
            .iter()
            .filter(|(_, k)| k.served)
            .map(|(n, _)| n.as_str())
            .collect();
        let missing: Vec<String> = s
            .kinds
            .iter()
            .filter(|(_, k)| !k.served)
            .map(|(n, k)| format!("{n} ({})", k.crd))
            .collect();
        let syncing: Vec<&str> = s
            .kinds
            .iter()
            .filter(|(_, k)| k.served && !k.synced)
            .map(|(n, _)| n.as_str())
            .collect();
        let (ready, summary) = match s.role {
            Role::Starting => (false, "not ready: starting".to_string()),
            Role::Stopping => (false, "not ready: shutting down".to_string()),
            Role::Standby if s.lease_ok => (true, "ready: standby, waiting for the Lease".into()),
            Role::Standby => (
                false,
                "not ready: standby, the Lease cannot be read (see the log)".into(),
            ),
            Role::Leader if s.found_by.is_none() => (
                false,
                "not ready: finding which kinds the cluster serves".into(),
            ),
            Role::Leader if !syncing.is_empty() => (
                false,
                format!(
                    "not ready: waiting for the first list of {}",
                    syncing.join(", ")
                ),
            ),
            Role::Leader => (
                true,
                format!(
                    "ready: leader, {} of {} kinds served",
                    served.len(),
                    s.kinds.len()
                ),
            ),
        };
        let mut body = summary;
        if let Some(how) = s.found_by {
            body.push_str(&format!("\nserved kinds found by: {how}"));
            body.push_str(&format!("\nserved: {}", list_or_none(&served)));
            body.push_str(&format!("\nmissing: {}", list_or_none(&missing)));
        }
        body.push('\n');
        (ready, body)
    }
}

fn list_or_none<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(|s| s.as_ref())
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

/// Serve until `shutdown`; returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let app = Router::new()
        .route("/metrics", get(render))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(AppState { metrics, health });
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("metrics: cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    Ok(local)
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let (ready, body) = state.health.report();
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, [(CONTENT_TYPE, "text/plain; charset=utf-8")], body)
}

async fn render(State(state): State<AppState>) -> impl IntoResponse {
    // Read at scrape time, so the gauge can never disagree with /readyz.
    state
        .metrics
        .set_leader(state.health.role() == Role::Leader);
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_is_ready_once_every_served_kind_has_its_cache() {
        let h = Health::default();
        h.set_role(Role::Leader);
        assert!(!h.report().0, "served kinds not known yet");
        h.kinds_known("watching CustomResourceDefinitions");
        h.kind_served("Connection", "connections.quartet.dev", true);
        h.kind_served("Workspace", "workspaces.workspaces.quartet.dev", false);
        let (ready, body) = h.report();
        assert!(!ready, "{body}");
        assert!(
            body.contains("waiting for the first list of Connection"),
            "{body}"
        );
        h.kind_synced("Connection");
        let (ready, body) = h.report();
        assert!(ready, "{body}");
        assert!(body.contains("served: Connection"), "{body}");
        assert!(
            body.contains("missing: Workspace (workspaces.workspaces.quartet.dev)"),
            "{body}"
        );
        h.set_role(Role::Stopping);
        h.set_role(Role::Leader);
        assert!(!h.report().0, "a stopping replica never turns ready again");
    }

    #[test]
    fn a_standby_is_ready_while_it_can_read_the_lease() {
        let h = Health::default();
        h.set_role(Role::Standby);
        assert!(!h.report().0);
        h.lease_checked(true);
        assert!(h.report().0);
    }
}
