//! CatalogAclBootstrap ↔ `PUT /v1/acl/bootstrap`, `GET /v1/acl/token/self`,
//! `GET /v1/acl/replication` (spec C §4.3), on the [`Operated`] shape.
//!
//! Each pass: read the Secret. Without a token in it, generate the token's secret (a UUID),
//! write it to the Secret, then bootstrap with it as `BootstrapSecret` (a lost response loses
//! nothing: the next pass finds the token working and records its accessor). With a token,
//! ask the catalog whether it accepts it (`token/self`): yes → Ready (`Bootstrapped`, or
//! `AlreadyBootstrapped` when this resource did not bootstrap); no → bootstrap with it, and a
//! 403 there means the catalog was bootstrapped with another token: `BootstrappedElsewhere`,
//! with the spec's warning and an Event, and no further bootstrap attempt for this generation.
//! Replication status of the listed datacenters is read at every pass.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::{Api, Resource, ResourceExt};
use serde_json::{json, Value};

use crate::api::catalog::{CatalogAclBootstrap, ReplicationStatus, SecretPolicy};
use crate::api::{DeletionPolicy, Service};
use crate::clients::catalog::{reset_index, CatalogClient};
use crate::clients::ClientError;
use crate::reconcile::owned_secret::QuartetSecret;
use crate::reconcile::{managed_fields, Context, Managed, Operated, Result, Step};

const ZERO_TIME: &str = "0001-01-01T00:00:00Z";
/// The `Ready` reason when the catalog was bootstrapped by someone else: its management token is
/// not Quartet's to hold.
pub const BOOTSTRAPPED_ELSEWHERE: &str = "BootstrappedElsewhere";
/// Annotation on the Secret naming the uid of the resource that generated its token.
const GENERATED_BY: &str = "catalog.quartet.dev/generated-by";

/// What the Secret holds.
struct StoredToken {
    token: Option<String>,
    accessor: Option<String>,
    ours: bool,
}

impl Managed for CatalogAclBootstrap {
    const SERVICE: Service = Service::Catalog;
    managed_fields!(connection_ref, managed_status);
    fn deletion_policy(&self) -> DeletionPolicy {
        // Nothing in the catalog is released on delete (the management token stays valid).
        DeletionPolicy::Retain
    }
    fn secret_refs(&self) -> Vec<String> {
        vec![self.secret_name()]
    }
    const WATCHES_SECRETS: bool = true;
}

/// A random UUID v4 (the token's SecretID, generated before the bootstrap call).
fn new_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Whether replication is healthy: the last error (zero time: never) is not later than the
/// last success. RFC 3339 times are compared as instants.
pub fn replication_healthy(last_success: &str, last_error: &str) -> bool {
    let parse = |s: &str| {
        if s.is_empty() || s == ZERO_TIME {
            None
        } else {
            chrono::DateTime::parse_from_rfc3339(s).ok()
        }
    };
    match (parse(last_error), parse(last_success)) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(e), Some(s)) => e <= s,
    }
}

/// The replication status fields of the service's answer for `dc`.
pub fn replication_status(dc: &str, v: &Value) -> ReplicationStatus {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let b = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (last_success, last_error) = (s("LastSuccess"), s("LastError"));
    ReplicationStatus {
        datacenter: dc.to_string(),
        enabled: b("Enabled"),
        running: b("Running"),
        source_datacenter: s("SourceDatacenter"),
        replication_type: s("ReplicationType"),
        replicated_index: n("ReplicatedIndex"),
        replicated_token_index: n("ReplicatedTokenIndex"),
        healthy: replication_healthy(&last_success, &last_error),
        last_success,
        last_error,
        last_error_message: s("LastErrorMessage"),
    }
}

impl CatalogAclBootstrap {
    fn ready_reason(&self) -> Option<String> {
        self.status
            .as_ref()?
            .managed
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .filter(|c| c.generation() == self.meta().generation)
            .map(|c| c.reason.to_string())
    }

    /// The Secret's `token` and `accessorId`, and whether this resource generated the token
    /// (annotation naming its uid), if the Secret exists.
    async fn read_secret(&self, ctx: &Context) -> Result<Option<StoredToken>> {
        let ns = self.namespace().unwrap_or_default();
        let Some(secret) = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&self.secret_name())
            .await?
        else {
            return Ok(None);
        };
        let key = |k: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .and_then(|ByteString(b)| String::from_utf8(b.clone()).ok())
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        let ours = secret
            .annotations()
            .get(GENERATED_BY)
            .is_some_and(|u| Some(u) == self.uid().as_ref());
        Ok(Some(StoredToken {
            token: key("token"),
            accessor: key("accessorId"),
            ours,
        }))
    }

    /// Write the Secret ([`QuartetSecret`]): the token, the accessor once known, and whether
    /// this resource generated the token. Owned by the resource only with `secretPolicy: Owned`.
    async fn write_secret(
        &self,
        ctx: &Context,
        token: &str,
        accessor: Option<&str>,
        ours: bool,
    ) -> Result<()> {
        let name = self.secret_name();
        let mut secret = if self.spec.secret_policy == SecretPolicy::Owned {
            QuartetSecret::owned_by(self, &name)?
        } else {
            QuartetSecret::new(&self.namespace().unwrap_or_default(), &name)
        };
        if ours {
            secret = secret.annotation(GENERATED_BY, &self.uid().unwrap_or_default());
        }
        secret = secret.value("token", token);
        if let Some(a) = accessor.filter(|a| !a.is_empty()) {
            secret = secret.value("accessorId", a);
        }
        secret.apply::<Self>(&ctx.client).await?;
        Ok(())
    }

    /// Whether the catalog accepts the Secret's token: its accessor ID, or `None` when refused.
    async fn token_accessor(&self, ctx: &Context) -> Result<Option<String>> {
        let ns = self.namespace().unwrap_or_default();
        let client = super::client_with_token_in(
            ctx,
            &ns,
            self.connection_ref(),
            &self.secret_name(),
            "token",
        )
        .await?;
        match client.token_self().await {
            Ok(t) => Ok(Some(
                t.get("AccessorID")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )),
            Err(e) if matches!(e.status(), Some(401 | 403)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn replication(&self, client: &CatalogClient) -> Result<Vec<ReplicationStatus>> {
        let mut out = Vec::new();
        for dc in &self.spec.replication_datacenters {
            let v = client.replication(dc).await?;
            out.push(replication_status(dc, &v));
        }
        Ok(out)
    }

    /// The primary's current ACL policy and token list indexes, read with the management token
    /// (the lists need `acl:read`); unknown when that token is refused or the call fails: the
    /// lag metric is best effort and must not fail the pass.
    async fn primary_acl_indexes(&self, ctx: &Context) -> (Option<u64>, Option<u64>) {
        let ns = self.namespace().unwrap_or_default();
        let Ok(client) = super::client_with_token_in(
            ctx,
            &ns,
            self.connection_ref(),
            &self.secret_name(),
            "token",
        )
        .await
        else {
            return (None, None);
        };
        let policies = client.acl_list_index("policies").await.ok().flatten();
        let tokens = client.acl_list_index("tokens").await.ok().flatten();
        (policies, tokens)
    }

    /// Add the replication fields and condition to a step.
    async fn with_replication(
        &self,
        ctx: &Context,
        client: &CatalogClient,
        step: Step,
    ) -> Result<Step> {
        if self.spec.replication_datacenters.is_empty() {
            return Ok(step.clear_condition("ReplicationHealthy"));
        }
        let rep = self.replication(client).await?;
        let resource = format!(
            "{}/{}",
            self.namespace().unwrap_or_default(),
            self.name_any()
        );
        let primary = self.primary_acl_indexes(ctx).await;
        for r in &rep {
            // A secondary's replicated index can pass the primary's list index (other tables
            // move the raft index too): no lag then.
            let lag = crate::metrics::ReplicationLag {
                index: primary.0.map(|p| p.saturating_sub(r.replicated_index)),
                token_index: primary
                    .1
                    .map(|p| p.saturating_sub(r.replicated_token_index)),
            };
            let since = chrono::DateTime::parse_from_rfc3339(&r.last_success)
                .ok()
                .filter(|_| r.last_success != ZERO_TIME)
                .map(|t| {
                    (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_milliseconds() as f64
                        / 1000.0
                });
            ctx.metrics
                .acl_replication(&resource, &r.datacenter, r.healthy, since, lag);
        }
        let unhealthy: Vec<&str> = rep
            .iter()
            .filter(|r| !r.healthy)
            .map(|r| r.datacenter.as_str())
            .collect();
        let step = if unhealthy.is_empty() {
            step.condition("ReplicationHealthy", true, "Healthy", "")
        } else {
            step.condition(
                "ReplicationHealthy",
                false,
                "ReplicationFailing",
                format!(
                    "ACL replication is failing in {} (lastError later than lastSuccess)",
                    unhealthy.join(", ")
                ),
            )
        };
        Ok(step.field("replication", json!(rep)))
    }

    fn bootstrapped(&self, reason: &str, accessor: &str) -> Step {
        let message = if reason == "Bootstrapped" {
            format!(
                "ACL system bootstrapped; the management token is in Secret {}",
                self.secret_name()
            )
        } else {
            format!(
                "the catalog was already bootstrapped and accepts the token in Secret {}",
                self.secret_name()
            )
        };
        Step::ready(reason, message)
            .field("accessorId", json!(accessor))
            .remote_id(accessor)
    }

    fn elsewhere(&self, message: &str) -> Step {
        let reset = reset_index(message)
            .map(|i| format!(" (reset index: {i})"))
            .unwrap_or_default();
        let text = format!(
            "the catalog's ACL system was already bootstrapped{reset} and does not accept the token in Secret {}: treat the cluster as potentially compromised (someone else holds a management token); to start over, reset the ACL system with the reset index and delete the Secret's token",
            self.secret_name()
        );
        Step::not_ready(BOOTSTRAPPED_ELSEWHERE, text.clone()).event(
            true,
            BOOTSTRAPPED_ELSEWHERE,
            text,
        )
    }

    /// Bootstrap with `secret` (already in the Secret). A 403 is `BootstrappedElsewhere`.
    async fn bootstrap(
        &self,
        ctx: &Context,
        client: &CatalogClient,
        secret: &str,
        ours: bool,
    ) -> Result<Step> {
        match client.bootstrap(secret).await {
            Ok(t) => {
                let accessor = t
                    .get("AccessorID")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                self.write_secret(ctx, secret, Some(&accessor), ours)
                    .await?;
                Ok(self.bootstrapped("Bootstrapped", &accessor).event(
                    false,
                    "Bootstrapped",
                    format!(
                        "ACL system bootstrapped; management token written to Secret {}",
                        self.secret_name()
                    ),
                ))
            }
            Err(ClientError::Status {
                status: 403,
                message,
                ..
            }) => {
                // Already bootstrapped: with this token when a retried call follows a lost
                // response (or someone else used the same Secret), otherwise elsewhere.
                match self.token_accessor(ctx).await? {
                    Some(accessor) => {
                        self.write_secret(ctx, secret, Some(&accessor), ours)
                            .await?;
                        let reason = if ours {
                            "Bootstrapped"
                        } else {
                            "AlreadyBootstrapped"
                        };
                        Ok(self.bootstrapped(reason, &accessor))
                    }
                    None => Ok(self.elsewhere(&message)),
                }
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl Operated for CatalogAclBootstrap {
    type Client = CatalogClient;

    async fn step(&self, ctx: &Context, client: &CatalogClient) -> Result<Step> {
        let stored = self.read_secret(ctx).await?;
        let step = match stored {
            None | Some(StoredToken { token: None, .. }) => {
                // Generate first and keep it before the call: a lost response loses nothing.
                let token = new_uuid();
                self.write_secret(ctx, &token, None, true).await?;
                self.bootstrap(ctx, client, &token, true).await?
            }
            Some(StoredToken {
                token: Some(token),
                accessor: stored_accessor,
                ours,
            }) => match self.token_accessor(ctx).await? {
                Some(accessor) => {
                    if !accessor.is_empty() && stored_accessor.as_deref() != Some(accessor.as_str())
                    {
                        self.write_secret(ctx, &token, Some(&accessor), ours)
                            .await?;
                    }
                    let reason = if ours {
                        "Bootstrapped"
                    } else {
                        "AlreadyBootstrapped"
                    };
                    self.bootstrapped(reason, &accessor)
                }
                None if self.ready_reason().as_deref() == Some(BOOTSTRAPPED_ELSEWHERE) => {
                    // Already reported: no retry loop, only the token check at each resync.
                    let message = self
                        .status
                        .as_ref()
                        .and_then(|s| s.managed.conditions.iter().find(|c| c.type_ == "Ready"))
                        .map(|c| c.message.clone())
                        .unwrap_or_default();
                    Step::not_ready(BOOTSTRAPPED_ELSEWHERE, message)
                }
                None => self.bootstrap(ctx, client, &token, ours).await?,
            },
        };
        self.with_replication(ctx, client, step).await
    }

    async fn finish(&self, _ctx: &Context, _client: &CatalogClient) -> Result<()> {
        Ok(())
    }

    fn holds_remote(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_is_unhealthy_only_when_the_last_error_is_later_than_the_last_success() {
        assert!(replication_healthy("2026-01-01T00:00:10Z", ZERO_TIME));
        assert!(replication_healthy(ZERO_TIME, ZERO_TIME));
        assert!(!replication_healthy(
            "2026-01-01T00:00:10Z",
            "2026-01-01T00:00:11Z"
        ));
        // Recovered: the error message stays, but success is later.
        assert!(replication_healthy(
            "2026-01-01T00:00:12Z",
            "2026-01-01T00:00:11Z"
        ));
        assert!(!replication_healthy(ZERO_TIME, "2026-01-01T00:00:11Z"));
    }

    #[test]
    fn generated_secrets_are_uuid_v4() {
        let u = new_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uuid());
    }

    #[test]
    fn replication_fields_are_read_from_the_service_answer() {
        let v = json!({"Enabled": true, "Running": true, "SourceDatacenter": "dc1",
            "ReplicationType": "tokens", "ReplicatedIndex": 5, "ReplicatedTokenIndex": 7,
            "LastSuccess": "2026-01-01T00:00:10Z", "LastError": "2026-01-01T00:00:11Z",
            "LastErrorMessage": "boom"});
        let r = replication_status("dc2", &v);
        assert_eq!(r.datacenter, "dc2");
        assert_eq!(r.replicated_token_index, 7);
        assert!(!r.healthy);
    }
}
