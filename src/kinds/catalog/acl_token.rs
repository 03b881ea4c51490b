//! CatalogAclToken ↔ `POST /v1/acl/login`, `POST /v1/acl/logout`, `GET /v1/acl/token/self`
//! (spec C §4.3), on the [`Operated`] shape.
//!
//! The owned Secret is the record: `token`, `accessorId`, and during a rotation
//! `previousToken`. Each pass, in order: a `previousToken` left by a rotation is logged out and
//! dropped from the Secret (the new token was written first, so a crash between the two steps
//! leaks nothing); a token that is missing, refused by the catalog or older than
//! `rotationInterval` is replaced by a new login, the old one kept as `previousToken` until the
//! next pass logs it out. On delete with `Delete`, the token is logged out. Whether the catalog
//! accepts the token is asked at every pass but the echo of this process's own write of a token
//! it has just got ([`ISSUED`]).
//!
//! Every login carries the marker `quartet.dev/resource: <uid>` in its `Meta` (the catalog copies
//! it into the token's `Description`): after each login and on delete, tokens of the auth method
//! with this resource's marker other than the ones it holds are deleted, so a login whose answer
//! was lost (or retried by the client) leaves no token behind. That needs `acl:read` and
//! `acl:write` on the Connection's token; without them the strays expire by themselves. After a
//! login the search is made once per auth method and process, and again only for a resource the
//! last one showed a token of that it does not hold, or whose login had an unknown outcome
//! ([`crate::reconcile::lost`]): not a listing of every token of the auth method after each of
//! N logins. On delete the same rule holds (N resources deleted at once list the tokens once at
//! most, not N times), with one more case: a token the status records but the Secret no longer
//! holds (the Secret deleted or overwritten by hand) is held by nobody, so its resource
//! searches, after its next login and on delete.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

use crate::api::catalog::CatalogAclToken;
use crate::api::scheduler::parse_duration;
use crate::api::Service;
use crate::clients::catalog::CatalogClient;
use crate::clients::http::SecretString;
use crate::reconcile::owned_secret::QuartetSecret;
use crate::reconcile::{lost, managed_fields, Context, Error, Managed, Operated, Result, Step};

const DEFAULT_ROTATION: Duration = Duration::from_secs(24 * 3600);
const PREVIOUS: &str = "previousToken";

impl Managed for CatalogAclToken {
    const SERVICE: Service = Service::Catalog;
    managed_fields!();
    fn secret_refs(&self) -> Vec<String> {
        let mut v = vec![self.secret_name()];
        if let Some(r) = &self.spec.bearer_token_secret_ref {
            v.push(r.name.clone());
        }
        v
    }
    const WATCHES_SECRETS: bool = true;
}

/// What the owned Secret holds.
#[derive(Default)]
struct Stored {
    token: Option<String>,
    accessor: Option<String>,
    previous: Option<String>,
    /// Whether the Secret as read has a `previousToken` key at all (a write without a previous
    /// token then removes it; without the key there is nothing to remove).
    previous_key: bool,
    /// The Secret's resourceVersion as read.
    rv: Option<String>,
}

/// Tokens this process got from a login, by resource uid: the owned Secret's resourceVersion
/// once the token was written to it, and when the login was. A pass that finds the Secret
/// still at that version, less than half a resync after the login, keeps the token without
/// asking the catalog (`token/self`): the catalog has just issued it, and the pass is the
/// echo of this process's own write. A Secret changed by anyone else has another version and
/// is checked; so is every token at its resync (the check is what finds one revoked behind
/// this resource's back). Lost on restart, when every token is checked again.
static ISSUED: std::sync::Mutex<Logins> = std::sync::Mutex::new(Logins {
    by_uid: None,
    prune_at: 64,
});

struct Issued {
    rv: String,
    at: std::time::Instant,
}

struct Logins {
    by_uid: Option<HashMap<String, Issued>>,
    /// Entries past half a resync are dropped when the map reaches this size (then twice
    /// what is left): a resource that never has another pass here (deleted with `Retain`,
    /// moved to another shard) leaves nothing behind for long.
    prune_at: usize,
}

impl Logins {
    fn get_mut(&mut self, uid: &str) -> Option<&mut Issued> {
        self.by_uid.as_mut()?.get_mut(uid)
    }

    fn remove(&mut self, uid: &str) {
        if let Some(m) = self.by_uid.as_mut() {
            m.remove(uid);
        }
    }

    fn insert(&mut self, uid: String, rv: String, resync: Duration) {
        let m = self.by_uid.get_or_insert_with(HashMap::new);
        m.insert(
            uid,
            Issued {
                rv,
                at: std::time::Instant::now(),
            },
        );
        if m.len() >= self.prune_at {
            m.retain(|_, i| i.at.elapsed() < resync / 2);
            self.prune_at = (2 * m.len()).max(64);
        }
    }
}

fn issued() -> std::sync::MutexGuard<'static, Logins> {
    ISSUED.lock().unwrap_or_else(|e| e.into_inner())
}

impl CatalogAclToken {
    fn rotation(&self) -> Duration {
        self.spec
            .rotation_interval
            .as_deref()
            .and_then(parse_duration)
            .unwrap_or(DEFAULT_ROTATION)
    }

    fn last_login(&self) -> Option<DateTime<Utc>> {
        let s = self.status.as_ref()?.last_login_time.as_deref()?;
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    async fn read(&self, ctx: &Context) -> Result<Stored> {
        let ns = self.namespace().unwrap_or_default();
        let Some(secret) = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&self.secret_name())
            .await?
        else {
            return Ok(Stored::default());
        };
        // A Secret of that name that is not ours holds no token of ours: a pass stops before
        // any login (it could not keep the token), a deletion has nothing of it to log out.
        if let Err(e) = crate::reconcile::owned_secret::ensure_ours(self, &secret.metadata) {
            return if self.metadata.deletion_timestamp.is_some() {
                Ok(Stored::default())
            } else {
                Err(e)
            };
        }
        let key = |k: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .and_then(|ByteString(b)| String::from_utf8(b.clone()).ok())
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        Ok(Stored {
            token: key("token"),
            accessor: key("accessorId"),
            previous: key(PREVIOUS),
            previous_key: secret
                .data
                .as_ref()
                .is_some_and(|d| d.contains_key(PREVIOUS)),
            rv: secret.metadata.resource_version.clone(),
        })
    }

    /// Write the owned Secret ([`QuartetSecret`]). A key this kind stops writing
    /// (`previousToken` after the logout) is removed with a merge patch when the Secret as read
    /// (`had`) still has it: one written through `stringData` (by an earlier Quartet, or by
    /// hand) is not tracked by apply, so dropping it from an apply would not remove it. Without
    /// the key, one write: each write is a watch event that wakes this resource again.
    /// Returns the Secret's resourceVersion after the last write.
    async fn write(&self, ctx: &Context, stored: &Stored, had: &Stored) -> Result<Option<String>> {
        let name = self.secret_name();
        let mut secret = QuartetSecret::owned_by(self, &name)?;
        for (k, v) in [
            ("token", &stored.token),
            ("accessorId", &stored.accessor),
            (PREVIOUS, &stored.previous),
        ] {
            if let Some(v) = v {
                secret = secret.value(k, v.as_str());
            }
        }
        let mut written = secret.apply::<Self>(&ctx.client).await?;
        let api =
            Api::<Secret>::namespaced(ctx.client.clone(), &self.namespace().unwrap_or_default());
        if stored.previous.is_none() && had.previous_key {
            written = api
                .patch_metadata(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {PREVIOUS: null}})),
                )
                .await?;
        }
        Ok(written.metadata.resource_version)
    }

    /// Whether the Secret holds the token this process's last login wrote, unchanged since,
    /// that login was less than half a resync ago ([`ISSUED`]), and no reconcile-now request
    /// waits (one asks for the check).
    fn just_issued(&self, stored: &Stored, resync: Duration) -> bool {
        let handled = self
            .managed_status()
            .and_then(|s| s.last_handled_reconcile_at.as_deref());
        if crate::reconcile::gitops::reconcile_requested(self, handled) {
            return false;
        }
        let uid = self.uid().unwrap_or_default();
        let mut issued = issued();
        let Some(i) = issued.get_mut(&uid) else {
            return false;
        };
        if stored.rv.as_deref() == Some(i.rv.as_str()) && i.at.elapsed() < resync / 2 {
            return true;
        }
        issued.remove(&uid);
        false
    }

    /// A catalog client presenting the token in the owned Secret's `key`.
    async fn client_for(&self, ctx: &Context, key: &str) -> Result<CatalogClient> {
        let ns = self.namespace().unwrap_or_default();
        super::client_with_token_in(ctx, &ns, self.connection_ref(), &self.secret_name(), key).await
    }

    /// Whether the catalog accepts the Secret's token (`Some(accessor)`).
    async fn accepted(&self, ctx: &Context) -> Result<Option<String>> {
        match self.client_for(ctx, "token").await?.token_self().await {
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

    /// The login's bearer token: from the referenced Secret, or a short-lived ServiceAccount
    /// token through the TokenRequest API.
    async fn bearer(&self, ctx: &Context) -> Result<SecretString> {
        let ns = self.namespace().unwrap_or_default();
        if let Some(r) = &self.spec.bearer_token_secret_ref {
            return ctx.secret_value(&ns, r, "bearer token of the login").await;
        }
        let Some(sa) = &self.spec.service_account_name else {
            return Err(Error::InvalidSpec(
                "set serviceAccountName or bearerTokenSecretRef".into(),
            ));
        };
        let req = TokenRequest {
            spec: TokenRequestSpec {
                audiences: self.spec.audience.iter().cloned().collect(),
                expiration_seconds: Some(600),
                bound_object_ref: None,
            },
            ..Default::default()
        };
        let tr = Api::<ServiceAccount>::namespaced(ctx.client.clone(), &ns)
            .create_token_request(sa, &PostParams::default(), &req)
            .await
            .map_err(|e| match &e {
                kube::Error::Api(s) if s.code == 404 => Error::MissingReference(format!(
                    "ServiceAccount {ns}/{sa} not found (or the API server has no TokenRequest)"
                )),
                _ => Error::Kube(e),
            })?;
        let token = tr.status.map(|s| s.token).unwrap_or_default();
        if token.is_empty() {
            return Err(Error::MissingReference(format!(
                "the TokenRequest for ServiceAccount {ns}/{sa} returned no token"
            )));
        }
        Ok(SecretString::new(token))
    }

    fn ready(&self, accessor: &str, login: Option<DateTime<Utc>>, resync: Duration) -> Step {
        let mut step = Step::ready(
            "LoggedIn",
            format!(
                "token for auth method {} in Secret {}",
                self.spec.auth_method,
                self.secret_name()
            ),
        )
        .field("accessorId", json!(accessor))
        .remote_id(accessor);
        if let Some(t) = login.or_else(|| self.last_login()) {
            step = step.field(
                "lastLoginTime",
                json!(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
            let due = t + chrono::Duration::from_std(self.rotation()).unwrap_or_default();
            let left = (due - Utc::now()).to_std().unwrap_or_default();
            // Also look again at the resync: a refused token is replaced then.
            step = step.again(left.min(resync).max(Duration::from_secs(1)));
        }
        step
    }
}

/// The `Meta` key that marks each login as this resource's. The catalog copies a login's meta
/// into the token's `Description` (`token created via login: {"k":"v"}`, as Consul's
/// `BuildTokenDescription` does), which the token list returns: that is how a token whose login
/// answer never arrived is found again.
const LOGIN_MARKER: &str = "quartet.dev/resource";

/// The resource uid a token's description carries in its login marker.
fn marker_uid(description: &str) -> Option<&str> {
    let at = description.find(&format!("\"{LOGIN_MARKER}\":\""))? + LOGIN_MARKER.len() + 4;
    description[at..].split('"').next()
}

impl CatalogAclToken {
    /// The user's `meta` plus the marker of this resource (its uid).
    fn login_meta(&self) -> BTreeMap<String, String> {
        let mut meta = self.spec.meta.clone();
        meta.insert(LOGIN_MARKER.into(), self.uid().unwrap_or_default());
        meta
    }

    /// Delete this resource's tokens other than `keep` (accessor ids): the ones a login made
    /// when its answer was lost. Searched for only where one may be ([`lost`]): tokens this
    /// resource held (`held`: kept, or just logged out) do not count. Best effort: without
    /// `acl:read`/`acl:write` on the Connection's token the strays are left to expire, and that
    /// is logged.
    async fn delete_strays(&self, client: &CatalogClient, keep: &[&str], held: &[&str]) {
        let Some(uid) = self.uid() else { return };
        let scope = self.lost_scope(client);
        if !lost::must_search_holding(&scope, &uid, held) {
            return;
        }
        let listing = lost::listing(&scope);
        let stubs = match client.tokens_of(&self.spec.auth_method).await {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(error = %e, "cannot list the auth method's tokens to find ones a lost login left");
                return;
            }
        };
        // Resources with tokens besides the ones they hold, as far as this listing tells.
        let mut left = Vec::new();
        let mut kept = false;
        for stub in stubs {
            let accessor = stub["AccessorID"].as_str().unwrap_or_default();
            let Some(owner) = stub["Description"].as_str().and_then(marker_uid) else {
                continue;
            };
            if owner != uid {
                left.push((owner.to_string(), accessor.to_string()));
                continue;
            }
            if accessor.is_empty() || keep.contains(&accessor) {
                continue;
            }
            match client.delete_token(accessor).await {
                Ok(()) => {
                    tracing::info!(%accessor, "deleted a token left by a login whose answer was lost")
                }
                Err(e) => {
                    kept = true;
                    tracing::info!(%accessor, error = %e, "could not delete a token left by a lost login")
                }
            }
        }
        listing.done_with_ids(left);
        if kept {
            // Still there: search again next time.
            drop(lost::attempt(&scope, &uid));
        }
    }

    /// A token the status records but the Secret does not hold (the Secret deleted, or its
    /// `accessorId` overwritten) is held by nobody: the next search of this resource must find
    /// it ([`lost::unrecorded`]).
    fn note_unheld(&self, stored: &Stored, client: &CatalogClient) {
        let recorded = self.status.as_ref().and_then(|s| s.accessor_id.as_deref());
        if recorded.is_some_and(|a| stored.accessor.as_deref() != Some(a)) {
            lost::unrecorded(&self.lost_scope(client), &self.uid().unwrap_or_default());
        }
    }

    /// Tokens of one auth method of one catalog: the scope of a search.
    fn lost_scope(&self, client: &CatalogClient) -> String {
        format!(
            "catalog-login {} {}",
            client.lost_scope(),
            self.spec.auth_method
        )
    }
}

impl Operated for CatalogAclToken {
    type Client = CatalogClient;

    async fn step(&self, ctx: &Context, client: &CatalogClient) -> Result<Step> {
        let mut stored = self.read(ctx).await?;
        self.note_unheld(&stored, client);
        // 1. Finish a rotation: log the previous token out, then forget it.
        if stored.previous.is_some() {
            let _rotation = crate::changes::rotation();
            match self.client_for(ctx, PREVIOUS).await?.logout().await {
                Ok(()) => {}
                // Already gone (expired, logged out before a crash): nothing to do.
                Err(e) if matches!(e.status(), Some(401 | 403 | 404)) => {}
                Err(e) => return Err(e.into()),
            }
            stored.previous = None;
            let rv = self.write(ctx, &stored, &stored).await?;
            if let (Some(i), Some(rv)) = (issued().get_mut(&self.uid().unwrap_or_default()), rv) {
                // The same token, written again without the previous one.
                i.rv = rv;
            }
            let accessor = stored.accessor.clone().unwrap_or_default();
            return Ok(self.ready(&accessor, None, ctx.settings.resync).event(
                false,
                "Rotated",
                "the previous token was logged out",
            ));
        }
        // 2. Keep a token that works and is not due for rotation.
        let due = self.last_login().is_none_or(|t| {
            Utc::now() - t >= chrono::Duration::from_std(self.rotation()).unwrap_or_default()
        });
        let current = match (&stored.token, &stored.accessor) {
            (Some(_), Some(accessor)) if self.just_issued(&stored, ctx.settings.resync) => {
                Some(accessor.clone())
            }
            (Some(_), _) => self.accepted(ctx).await?,
            (None, _) => None,
        };
        if let (Some(accessor), false) = (&current, due) {
            return Ok(self.ready(accessor, None, ctx.settings.resync));
        }
        // 3. Log in; the new token goes to the Secret before the old one is logged out. A
        // working token replaced is a rotation due by time; one the catalog refused, a repair.
        let _trigger = match (&current, &stored.token) {
            (Some(_), _) => Some(crate::changes::rotation()),
            (None, Some(_)) => Some(crate::changes::repair()),
            (None, None) => None,
        };
        let bearer = self.bearer(ctx).await?;
        // Unsure until the new token is in the Secret: a lost answer or a failed write leaves
        // a token for the next pass's search.
        let attempt = lost::attempt(&self.lost_scope(client), &self.uid().unwrap_or_default());
        let t = match client
            .login(
                &self.spec.auth_method,
                bearer.expose(),
                self.spec.namespace.as_deref(),
                &self.login_meta(),
            )
            .await
        {
            Ok(t) => t,
            Err(e) => {
                if !lost::outcome_unknown(&e) {
                    attempt.known();
                }
                return Err(e.into());
            }
        };
        let secret = t
            .get("SecretID")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let accessor = t
            .get("AccessorID")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let previous = if current.is_some() {
            stored.token.take()
        } else {
            None
        };
        let rotating = previous.is_some();
        let old_accessor = if rotating {
            stored.accessor.clone()
        } else {
            None
        };
        let rv = self
            .write(
                ctx,
                &Stored {
                    token: Some(secret),
                    accessor: Some(accessor.clone()),
                    previous,
                    previous_key: false,
                    rv: None,
                },
                &stored,
            )
            .await?;
        if let Some(rv) = rv {
            let uid = self.uid().unwrap_or_default();
            issued().insert(uid, rv, ctx.settings.resync);
        }
        attempt.known();
        // A login whose answer was lost (or retried by the client) left a token nobody holds.
        let keep: Vec<&str> = [Some(accessor.as_str()), old_accessor.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        self.delete_strays(client, &keep, &keep).await;
        // A token that was there but is refused (revoked, expired, logged out elsewhere) is
        // worth a Warning: someone or something acted on it behind this resource's back.
        let refused = stored.token.is_some() && current.is_none();
        let mut step = self
            .ready(&accessor, Some(Utc::now()), ctx.settings.resync)
            .event(
                refused,
                if refused { "TokenRefused" } else { "LoggedIn" },
                format!(
                    "{}logged in with auth method {}; token in Secret {}",
                    if refused {
                        "the catalog refused the previous token; "
                    } else {
                        ""
                    },
                    self.spec.auth_method,
                    self.secret_name()
                ),
            );
        if rotating {
            step = step.again(Duration::from_millis(200));
        }
        Ok(step)
    }

    async fn finish(&self, ctx: &Context, client: &CatalogClient) -> Result<()> {
        issued().remove(&self.uid().unwrap_or_default());
        let stored = self.read(ctx).await?;
        self.note_unheld(&stored, client);
        for (key, value) in [("token", &stored.token), (PREVIOUS, &stored.previous)] {
            if value.is_none() {
                continue;
            }
            match self.client_for(ctx, key).await?.logout().await {
                Ok(()) => {}
                Err(e) if matches!(e.status(), Some(401 | 403 | 404)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // The token just logged out was this resource's; any other of its own is a stray.
        let logged_out: Vec<&str> = stored.accessor.as_deref().into_iter().collect();
        self.delete_strays(client, &[], &logged_out).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logins_past_half_a_resync_are_pruned_as_the_map_grows_and_recent_ones_stay() {
        let mut logins = Logins {
            by_uid: None,
            prune_at: 64,
        };
        // With a zero resync every login is at once past half of it.
        for i in 0..63 {
            logins.insert(format!("old-{i}"), "1".into(), Duration::ZERO);
        }
        assert_eq!(logins.by_uid.as_ref().map(HashMap::len), Some(63));
        logins.insert("old-63".into(), "1".into(), Duration::ZERO);
        assert_eq!(logins.by_uid.as_ref().map(HashMap::len), Some(0));
        assert_eq!(logins.prune_at, 64);
        // Recent logins stay, and the next pruning waits for twice what is left.
        let hour = Duration::from_secs(3600);
        for i in 0..100 {
            logins.insert(format!("recent-{i}"), "2".into(), hour);
        }
        assert_eq!(logins.by_uid.as_ref().map(HashMap::len), Some(100));
        assert_eq!(logins.prune_at, 128);
        assert_eq!(
            logins.get_mut("recent-7").map(|i| i.rv.clone()),
            Some("2".into())
        );
        logins.remove("recent-7");
        assert!(logins.get_mut("recent-7").is_none());
    }
}
