//! AdCheckout: one account borrowed from a library set for as long as the resource exists
//! (spec C §3, §4.2), an operation kind ([`Operated`]).
//!
//! Each pass takes one step from what status records (the lease id in `remoteId`):
//! * no lease: check in what an earlier check-out of the set borrowed without being recorded (a
//!   lost answer or a kill before the status write; [`super::strays`]), then check an account
//!   out, write its name and password to the owned Secret, record the lease; none free (400) →
//!   `Ready=False` `NoAccountAvailable`, tried again with backoff (capped at the resync
//!   interval) until one is checked in;
//! * a lease: look it up; once half of it has run, renew it (`sys/leases/renew`, which gives
//!   the set's current ttl); a lease gone (expired, revoked outside) or a Secret deleted → check
//!   out again and rewrite the Secret;
//! * on delete: check the account in, or with none recorded, the set's strays (`Retain`: leave
//!   it checked out until its lease ends).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use kube::ResourceExt;
use serde_json::json;

use super::{ad_error, now_rfc3339, secret_exists, strays};
use crate::api::secrets::directory::{duration_secs, AdCheckout, AdLibrarySet};
use crate::api::Service;
use crate::clients::secrets::directory::{AdClient, CheckedOut};
use crate::clients::{ClientError, SecretString};
use crate::reconcile::error::jitter;
use crate::reconcile::{lost, managed_fields, Context, Error, Managed, Operated, Result, Step};

impl Managed for AdCheckout {
    const SERVICE: Service = Service::Secrets;
    managed_fields!();
}

/// Consecutive `NoAccountAvailable` answers per resource (uid), for the backoff.
static WAITS: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

fn waits(uid: &str, reset: bool) -> u32 {
    let mut g = WAITS.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if reset {
        map.remove(uid);
        return 0;
    }
    let n = map.entry(uid.to_string()).or_insert(0);
    *n += 1;
    *n
}

/// Wait before asking again for a free account: 2s, 4s, 8s... capped at `resync`.
pub fn no_account_backoff(attempt: u32, resync: Duration) -> Duration {
    let secs = 2u64.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    jitter(Duration::from_secs(secs).min(resync))
}

/// When to look at a lease again and whether to renew it now: renew once half of its duration
/// has run; otherwise wake when it will have.
pub fn renewal(remaining: i64, duration: i64) -> (bool, i64) {
    if duration <= 0 {
        return (false, i64::MAX);
    }
    if remaining * 2 <= duration + 1 {
        (true, 0)
    } else {
        (false, (remaining - duration / 2).max(1))
    }
}

fn refused(e: &ClientError, needles: &[&str]) -> bool {
    matches!(e, ClientError::Status { status: 400, message, .. } if needles.iter().any(|n| message.contains(n)))
}

impl AdCheckout {
    fn secret_name(&self) -> String {
        self.spec
            .secret_name
            .clone()
            .unwrap_or_else(|| self.name_any())
    }

    /// The mount and set name in the service (from the referenced AdLibrarySet, or `setName`).
    async fn set(&self, ctx: &Context) -> Result<(String, String)> {
        let ns = self.namespace().unwrap_or_default();
        match (&self.spec.set_ref, &self.spec.set_name) {
            (Some(r), _) => {
                let set: AdLibrarySet = ctx.referenced(&ns, &r.name).await?;
                Ok((set.spec.mount.clone(), set.set_name()))
            }
            (None, Some(n)) => Ok((self.spec.mount.clone(), n.to_lowercase())),
            (None, None) => Err(Error::InvalidSpec(
                "one of setRef and setName is required".into(),
            )),
        }
    }

    fn status_field<'a>(
        &'a self,
        f: impl Fn(&'a crate::api::secrets::directory::AdCheckoutStatus) -> Option<&'a String>,
    ) -> Option<&'a String> {
        self.status.as_ref().and_then(f)
    }

    fn step_for(
        &self,
        set: &str,
        account: &str,
        lease_id: &str,
        duration: i64,
        resync: Duration,
    ) -> Step {
        let expires = chrono::Utc::now() + chrono::Duration::seconds(duration);
        let (_, wake) = renewal(duration, duration);
        let again = Duration::from_secs(wake.clamp(1, resync.as_secs().max(1) as i64) as u64);
        let mut step = Step::ready("CheckedOut", format!("{account} is checked out of {set}"))
            .remote_id(lease_id)
            .field("serviceAccountName", json!(account))
            .field("setName", json!(set))
            .again(again);
        if duration > 0 {
            step = step
                .field(
                    "leaseExpiresAt",
                    json!(expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                )
                .field("leaseDuration", json!(duration));
        }
        step
    }

    async fn check_out(
        &self,
        ctx: &Context,
        client: &AdClient,
        mount: &str,
        set: &str,
        lost: bool,
    ) -> Result<Step> {
        let uid = self.uid().unwrap_or_default();
        // First give back what an earlier check-out borrowed without being recorded (a lost
        // answer): otherwise this resource would hold two accounts.
        if strays::reclaim(ctx, client, mount, set, &uid, false).await? == strays::Reclaim::Busy {
            return Ok(Step::not_ready(
                "CheckingOut",
                format!("another check-out of set {set} is under way"),
            )
            .again(jitter(Duration::from_secs(1))));
        }
        let ttl = self.spec.ttl.as_deref().and_then(duration_secs);
        let call = strays::InFlight::start(mount, set);
        let attempt = lost::attempt(&strays::scope(client, mount, set), &uid);
        let result = client.check_out(mount, set, ttl).await;
        if !matches!(&result, Err(e) if lost::outcome_unknown(e)) {
            // Answered (the registry holds the account until its status does) or refused.
            attempt.known();
        }
        let co: CheckedOut = match result {
            Ok(co) => {
                call.answered(&co.service_account_name, &uid);
                co
            }
            Err(e) if refused(&e, &["No service accounts available"]) => {
                let n = waits(&uid, false);
                let msg = match &e {
                    ClientError::Status { message, .. } => message.clone(),
                    _ => e.to_string(),
                };
                return Ok(Step::not_ready(
                    "NoAccountAvailable",
                    format!("no account of set {set} is free: {msg}; trying again until one is checked in"),
                )
                .again(no_account_backoff(n, ctx.settings.resync)));
            }
            Err(e) if refused(&e, &["doesn't exist"]) => {
                return Err(Error::MissingReference(format!(
                    "library set {set} does not exist in the service (yet)"
                )))
            }
            Err(e) => return Err(ad_error(mount, e)),
        };
        waits(&uid, true);
        let mut data = BTreeMap::new();
        data.insert(
            "serviceAccountName".to_string(),
            SecretString::new(co.service_account_name.clone()),
        );
        data.insert("password".to_string(), co.password);
        if let Err(e) = ctx
            .apply_owned_secret(self, &self.secret_name(), data)
            .await
        {
            // Do not keep an account nobody can use (if this check-in fails too, the account
            // is a stray for the next pass to give back).
            if client
                .check_in(mount, set, &co.service_account_name)
                .await
                .is_err()
            {
                strays::unsure(client, mount, set, &uid);
            }
            strays::settled(mount, set, &co.service_account_name);
            return Err(e);
        }
        let mut step = self.step_for(
            set,
            &co.service_account_name,
            &co.lease_id,
            co.lease_duration,
            ctx.settings.resync,
        );
        step = if lost {
            step.event(
                true,
                "LeaseLost",
                format!(
                    "the previous check-out ended outside Quartet; checked out {} again",
                    co.service_account_name
                ),
            )
        } else {
            step.event(
                false,
                "CheckedOut",
                format!("checked out {} of {set}", co.service_account_name),
            )
        };
        Ok(step)
    }
}

impl Operated for AdCheckout {
    type Client = AdClient;

    async fn step(&self, ctx: &Context, client: &AdClient) -> Result<Step> {
        let (mount, set) = self.set(ctx).await?;
        let ns = self.namespace().unwrap_or_default();
        let Some(lease_id) = self.status_field(|s| s.managed.remote_id.as_ref()).cloned() else {
            return self.check_out(ctx, client, &mount, &set, false).await;
        };
        let account = self
            .status_field(|s| s.service_account_name.as_ref())
            .cloned()
            .unwrap_or_default();
        let recorded_set = self
            .status_field(|s| s.set_name.as_ref())
            .cloned()
            .unwrap_or_else(|| set.clone());
        // Recorded now: no longer a check-out only this process knows of.
        strays::settled(&mount, &recorded_set, &account);
        let lease = client
            .lookup_lease(&lease_id)
            .await
            .map_err(|e| ad_error(&mount, e))?;
        let Some(info) = lease else {
            // The lease ended outside (revoked, expired): borrowing again repairs that.
            let _repair = crate::changes::repair();
            return self.check_out(ctx, client, &mount, &set, true).await;
        };
        if !secret_exists(&ctx.client, &ns, &self.secret_name()).await? {
            let _repair = crate::changes::repair();
            // The password is gone with the Secret: give the account back and borrow again.
            if let Err(e) = client.check_in(&mount, &recorded_set, &account).await {
                tracing::info!(error = %e, "check-in before a new check-out failed");
                strays::unsure(
                    client,
                    &mount,
                    &recorded_set,
                    &self.uid().unwrap_or_default(),
                );
            }
            return self.check_out(ctx, client, &mount, &set, true).await;
        }
        let duration = self
            .status
            .as_ref()
            .and_then(|s| s.lease_duration)
            .unwrap_or(0);
        let (renew, wake) = renewal(info.ttl, duration);
        if !renew {
            let again = Duration::from_secs(
                wake.clamp(1, ctx.settings.resync.as_secs().max(1) as i64) as u64,
            );
            // Nothing to change: the fields as recorded.
            return Ok(Step::ready(
                "CheckedOut",
                format!("{account} is checked out of {recorded_set}"),
            )
            .again(again));
        }
        // A renewal due by time (half the lease has run): the change log's `rotation`.
        let _rotation = crate::changes::rotation();
        match client
            .renew_lease(&lease_id)
            .await
            .map_err(|e| ad_error(&mount, e))?
        {
            Some(d) => {
                tracing::debug!(lease_duration = d, at = %now_rfc3339(), "check-out lease renewed");
                Ok(self.step_for(&recorded_set, &account, &lease_id, d, ctx.settings.resync))
            }
            None => self.check_out(ctx, client, &mount, &set, true).await,
        }
    }

    async fn finish(&self, ctx: &Context, client: &AdClient) -> Result<()> {
        let Some(account) = self
            .status_field(|s| s.service_account_name.as_ref())
            .cloned()
        else {
            // Nothing recorded, but a check-out may have been made whose answer was lost.
            return match self.set(ctx).await {
                Ok((mount, set)) => {
                    match strays::reclaim(
                        ctx,
                        client,
                        &mount,
                        &set,
                        &self.uid().unwrap_or_default(),
                        true,
                    )
                    .await?
                    {
                        strays::Reclaim::Done(_) => Ok(()),
                        strays::Reclaim::Busy => Err(Error::InUse(format!(
                            "a check-out of set {set} is under way; checking again"
                        ))),
                    }
                }
                Err(_) => Ok(()),
            };
        };
        let (mount, set) = match self.status_field(|s| s.set_name.as_ref()) {
            Some(s) => (self.spec.mount.clone(), s.clone()),
            None => match self.set(ctx).await {
                Ok(v) => v,
                Err(_) => return Ok(()),
            },
        };
        // Only while our lease lives: after it ended the account may be lent to another
        // borrower with the same token, whose check-out must not be ended by ours.
        if let Some(lease_id) = self.status_field(|s| s.managed.remote_id.as_ref()) {
            let lease = client
                .lookup_lease(lease_id)
                .await
                .map_err(|e| ad_error(&mount, e))?;
            if lease.is_none() {
                return Ok(());
            }
        }
        let result = client.check_in(&mount, &set, &account).await;
        strays::settled(&mount, &set, &account);
        match result {
            Ok(_) => Ok(()),
            // Already given back, the set gone, or lent to someone else after our lease ended.
            Err(e)
                if refused(
                    &e,
                    &[
                        "doesn't exist",
                        "wasn't checked out by the caller",
                        "is not a member",
                    ],
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(ad_error(&mount, e)),
        }
    }

    /// An account recorded, or a pass that reached the service (its check-out may have been
    /// made with the answer lost); not a resource that only ever waited for its set or
    /// Connection.
    fn holds_remote(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.service_account_name.is_some()
                || s.managed.conditions.iter().any(|c| {
                    c.type_ == "Ready"
                        && !matches!(
                            c.reason.as_str(),
                            "ReferenceMissing" | "ConnectionUnavailable" | "InvalidSpec"
                        )
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_renewed_once_half_of_it_has_run() {
        assert_eq!(renewal(100, 100), (false, 50));
        assert_eq!(renewal(60, 100), (false, 10));
        assert!(renewal(50, 100).0);
        assert!(renewal(1, 100).0);
        assert!(!renewal(100, 0).0);
    }

    #[test]
    fn waiting_for_an_account_backs_off_up_to_the_resync() {
        let resync = Duration::from_secs(30);
        assert!(no_account_backoff(1, resync) <= Duration::from_millis(2200));
        assert!(no_account_backoff(3, resync) >= Duration::from_millis(7200));
        assert!(no_account_backoff(20, resync) <= Duration::from_secs(33));
    }
}
