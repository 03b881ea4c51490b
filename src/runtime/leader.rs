//! Leader election on a `coordination.k8s.io/v1` Lease, so several replicas run with one writer.
//!
//! No published crate links with kube 5 yet, so this is the client-go algorithm in small:
//! compare-and-swap on the Lease's resourceVersion, renew well before expiry, take over only an
//! expired lease, and vacate on shutdown so a successor does not wait out the lease.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::runtime::server::Health;

/// Which Lease to hold and how.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// This replica's name in `holderIdentity` (the pod name).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub duration: Duration,
    /// How often the holder renews (well under `duration`).
    pub renew_every: Duration,
}

/// Why Kubernetes would refuse `name` as a Lease's name, if it would: like most objects' names, a
/// DNS-1123 subdomain (at most 253 characters, dot-separated parts of lowercase letters, digits
/// and `-`, each beginning and ending with a letter or digit). Checked before the first call, as
/// a refused create would otherwise keep the instance a standby for ever, retrying each second.
pub fn lease_name_error(name: &str) -> Option<&'static str> {
    let part_ok = |p: &str| {
        let alnum =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        alnum(p.chars().next())
            && alnum(p.chars().last())
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if name.len() > 253 {
        return Some("a Lease's name is at most 253 characters");
    }
    if !name.split('.').all(part_ok) {
        return Some(
            "a Lease's name is lowercase letters, digits, '-' and '.', beginning and ending with \
             a letter or digit (a DNS-1123 subdomain)",
        );
    }
    None
}

/// Acquires and renews a leader-election Lease, so only one replica runs the controllers.
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaseConfig,
}

impl LeaderElector {
    /// An elector for the Lease of `cfg`, through `client`.
    pub fn new(client: Client, cfg: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
        }
    }

    /// Wait until this instance holds the lease, telling `health` whether the Lease can be read.
    pub async fn acquire(&self, health: &Health) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.cfg.name, identity = %self.cfg.identity, "became leader");
                    return;
                }
                Ok(false) => health.lease_checked(true),
                Err(e) => {
                    health.lease_checked(false);
                    let error = crate::reconcile::error::kube_sentence(&e);
                    tracing::warn!(%error, "leader election: could not read or write the lease")
                }
            }
            tokio::time::sleep(self.standby_poll()).await;
        }
    }

    /// How often a standby looks at the Lease. A leader that stops releases the Lease, and the
    /// standby must notice within a second or two rather than a renewal period; one small GET a
    /// second is what client-go's retry period (2 s) costs too.
    fn standby_poll(&self) -> Duration {
        (self.cfg.renew_every / 4).clamp(Duration::from_millis(100), Duration::from_secs(1))
    }

    /// Renew until leadership is lost (returns then). The caller must stop writing at once.
    pub async fn keep(&self) {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.cfg.renew_every).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = tokio::time::Instant::now(),
                Ok(false) => {
                    tracing::error!("leader election: lease taken by another instance");
                    return;
                }
                Err(e) => {
                    let error = crate::reconcile::error::kube_sentence(&e);
                    tracing::warn!(%error, "leader election: renewal failed");
                    if last_renewed.elapsed() >= self.cfg.duration {
                        tracing::error!("leader election: lease expired without renewal");
                        return;
                    }
                }
            }
        }
    }

    /// Give the lease up (on graceful shutdown) if this instance holds it.
    pub async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await {
            let spec = lease.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() == Some(self.cfg.identity.as_str()) {
                spec.holder_identity = None;
                spec.acquire_time = None;
                spec.renew_time = None;
                match self
                    .api
                    .replace(&self.cfg.name, &PostParams::default(), &lease)
                    .await
                {
                    Ok(_) => tracing::info!("leader election: lease released"),
                    Err(e) => {
                        let error = crate::reconcile::error::kube_sentence(&e);
                        tracing::warn!(%error, "leader election: could not release the lease")
                    }
                }
            }
        }
    }

    /// One round: `Ok(true)` when this instance holds the lease afterwards.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let duration_s = self.cfg.duration.as_secs() as i32;
        let Some(mut lease) = self.api.get_opt(&self.cfg.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.cfg.identity.clone()),
                    lease_duration_seconds: Some(duration_s),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let mine = spec.holder_identity.as_deref() == Some(self.cfg.identity.as_str());
        if !mine {
            let held = spec
                .holder_identity
                .as_deref()
                .is_some_and(|h| !h.is_empty());
            let expires = spec.renew_time.as_ref().map(|t| t.0).and_then(|t| {
                t.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(
                    spec.lease_duration_seconds.unwrap_or(duration_s) as i64,
                ))
                .ok()
            });
            if held && expires.is_some_and(|e| e > now) {
                return Ok(false);
            }
            spec.holder_identity = Some(self.cfg.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(duration_s);
        // replace() carries the resourceVersion we read: a concurrent writer makes this 409.
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::lease_name_error;

    #[test]
    fn a_lease_name_is_refused_where_kubernetes_refuses_it() {
        for ok in [
            "quartet-leader",
            "quartet-leader-eu-west",
            "quartet-leader-eu.west-2",
            "a",
        ] {
            assert_eq!(lease_name_error(ok), None, "{ok}");
        }
        let long = format!("quartet-leader-{}", "a".repeat(240));
        for bad in [
            "quartet-leader-EU",
            "quartet-leader-eu_west",
            "quartet-leader-eu.-west",
            "quartet-leader-",
            "",
            long.as_str(),
        ] {
            assert!(lease_name_error(bad).is_some(), "{bad}");
        }
    }
}
