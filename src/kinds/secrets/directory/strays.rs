//! Check-outs whose answer never arrived: finding and checking in the accounts they borrowed.
//!
//! A check-out gives no handle the caller chose, so a lost answer (or an operator killed
//! between the check-out and the status write) leaves an account borrowed by Quartet's token
//! that no AdCheckout knows. Without care the resource checks out a second account, and the
//! first stays borrowed until its lease ends: a duplicate, and a set that cannot be deleted.
//!
//! A *stray* is an account of the set that the service shows borrowed, that no AdCheckout's
//! status records (read fresh from the Kubernetes API, not the cache), and that no check-out of
//! this process is about to record (the registry below: a check-out in flight, or answered and
//! waiting for its status write). Strays are checked in through the plain `check-in`, whose
//! enforcement lets the service confirm the account is Quartet's own: an account a person
//! borrowed with another token answers "wasn't checked out by the caller" and is left alone.
//! A set with `disable_check_in_enforcement` cannot tell borrowers apart, so nothing is
//! reclaimed from it (its strays end with their leases); nor by an operator whose RBAC does not
//! let it list AdCheckouts in every namespace.
//!
//! The search (the set, its status, every AdCheckout) is made once per set and process, and
//! again only after a check-out of unknown outcome, an account this process failed to give
//! back, or for a resource with an answered check-out not yet recorded
//! ([`crate::reconcile::lost`]): not before each of N check-outs, which also lets check-outs
//! of one set run side by side once it was searched.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use kube::api::ListParams;
use kube::Api;

use super::ad_error;
use crate::api::secrets::directory::AdCheckout;
use crate::clients::secrets::directory::AdClient;
use crate::clients::ClientError;
use crate::reconcile::{lost, Context, Result};

type SetKey = (String, String);

#[derive(Default)]
struct Pending {
    /// Check-out calls under way.
    calls: usize,
    /// Accounts checked out by this process and not yet seen recorded: account → resource uid.
    answered: BTreeMap<String, String>,
}

static PENDING: Mutex<BTreeMap<SetKey, Pending>> = Mutex::new(BTreeMap::new());

fn with<T>(mount: &str, set: &str, f: impl FnOnce(&mut Pending) -> T) -> T {
    let mut g = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    let key = (mount.to_string(), set.to_string());
    let out = f(g.entry(key.clone()).or_default());
    if g.get(&key)
        .is_some_and(|p| p.calls == 0 && p.answered.is_empty())
    {
        g.remove(&key);
    }
    out
}

/// A check-out call under way (dropped when the call returns or is cancelled).
pub struct InFlight {
    mount: String,
    set: String,
}

impl InFlight {
    /// Counts a check-out call to set `set` at `mount` as under way until the guard is dropped.
    pub fn start(mount: &str, set: &str) -> Self {
        with(mount, set, |p| p.calls += 1);
        InFlight {
            mount: mount.into(),
            set: set.into(),
        }
    }

    /// The call answered: `account` belongs to resource `uid` until its status records it.
    pub fn answered(self, account: &str, uid: &str) {
        with(&self.mount, &self.set, |p| {
            p.answered.insert(account.into(), uid.into());
        });
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        with(&self.mount, &self.set, |p| {
            p.calls = p.calls.saturating_sub(1)
        });
    }
}

/// `account` is recorded in a status now (or given back): no longer pending.
pub fn settled(mount: &str, set: &str, account: &str) {
    with(mount, set, |p| {
        p.answered.remove(account);
    });
}

/// What looking for strays found.
#[derive(Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// Strays checked in (possibly none).
    Done(Vec<String>),
    /// Another check-out of the set is under way: its account cannot be told from a stray yet.
    Busy,
}

/// The strays of a set (pure): borrowed accounts that no status records and no other
/// resource's check-out of this process is about to record.
pub fn strays(
    borrowed: &BTreeSet<String>,
    recorded: &BTreeSet<String>,
    answered: &BTreeMap<String, String>,
    uid: &str,
) -> Vec<String> {
    borrowed
        .iter()
        .filter(|a| !recorded.contains(*a))
        .filter(|a| answered.get(*a).is_none_or(|owner| owner == uid))
        .cloned()
        .collect()
}

/// The scope of the search of a set's strays.
pub fn scope(client: &AdClient, mount: &str, set: &str) -> String {
    format!("ad-set {} {mount} {set}", client.lost_scope())
}

/// A check-out of `uid` or a check-in of its account may have left a stray.
pub fn unsure(client: &AdClient, mount: &str, set: &str, uid: &str) {
    drop(lost::attempt(&scope(client, mount, set), uid));
}

/// Check in the strays of `mount`/`set`, as resource `uid` (whose own pending check-outs,
/// unrecorded when it asks, are strays too). `always`: search even where no stray can be
/// (a delete).
pub async fn reclaim(
    ctx: &Context,
    client: &AdClient,
    mount: &str,
    set: &str,
    uid: &str,
    always: bool,
) -> Result<Reclaim> {
    let scope = scope(client, mount, set);
    let own_pending = with(mount, set, |p| p.answered.values().any(|o| o == uid));
    if !always && !own_pending && !lost::must_search_any(&scope) {
        return Ok(Reclaim::Done(Vec::new()));
    }
    if with(mount, set, |p| p.calls) > 0 {
        return Ok(Reclaim::Busy);
    }
    let listing = lost::listing(&scope);
    let Some(config) = client
        .read_set(mount, set)
        .await
        .map_err(|e| ad_error(mount, e))?
    else {
        return Ok(Reclaim::Done(Vec::new()));
    };
    if config.disable_check_in_enforcement {
        listing.done([]);
        return Ok(Reclaim::Done(Vec::new()));
    }
    let borrowed: BTreeSet<String> = client
        .set_status(mount, set)
        .await
        .map_err(|e| ad_error(mount, e))?
        .into_iter()
        .filter(|a| !a.available)
        .map(|a| a.name)
        .collect();
    if borrowed.is_empty() {
        listing.done([]);
        return Ok(Reclaim::Done(Vec::new()));
    }
    // Fresh from the API server: a status written a moment ago must count. Every namespace:
    // another namespace's check-out may borrow from the same set with the same token. An
    // operator not allowed to list them all cannot tell strays apart, so it reclaims nothing.
    let all = match Api::<AdCheckout>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list,
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::info!(%set, "cannot list AdCheckouts in all namespaces: lost check-outs are left to their leases");
            return Ok(Reclaim::Done(Vec::new()));
        }
        Err(e) => return Err(e.into()),
    };
    let recorded: BTreeSet<String> = all
        .into_iter()
        .filter(|c| c.spec.mount == mount)
        .filter_map(|c| c.status)
        .filter(|s| s.set_name.as_deref() == Some(set))
        .filter_map(|s| s.service_account_name)
        .collect();
    // A check-out that started while we listed must not be mistaken for a stray.
    let (busy, answered) = with(mount, set, |p| (p.calls > 0, p.answered.clone()));
    if busy {
        return Ok(Reclaim::Busy);
    }
    let mut done = Vec::new();
    for account in strays(&borrowed, &recorded, &answered, uid) {
        match client.check_in(mount, set, &account).await {
            Ok(_) => {
                tracing::info!(%set, %account, "checked in an account whose check-out was never recorded");
                done.push(account.clone());
            }
            // Someone else's check-out: not ours to end.
            Err(ClientError::Status {
                status: 400,
                message,
                ..
            }) if message.contains("wasn't checked out by the caller") => {}
            Err(e) => return Err(ad_error(mount, e)),
        }
        settled(mount, set, &account);
    }
    listing.done([]);
    Ok(Reclaim::Done(done))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_stray_is_borrowed_unrecorded_and_not_about_to_be_recorded_by_another_resource() {
        let borrowed = set(&["a", "b", "c", "d"]);
        let recorded = set(&["a"]);
        let answered: BTreeMap<String, String> =
            [("b".into(), "other".into()), ("c".into(), "me".into())].into();
        assert_eq!(
            strays(&borrowed, &recorded, &answered, "me"),
            vec!["c", "d"]
        );
    }

    #[test]
    fn a_check_out_in_flight_keeps_its_set_busy_until_it_returns() {
        let f = InFlight::start("adx", "s1");
        assert_eq!(with("adx", "s1", |p| p.calls), 1);
        f.answered("acct", "uid-1");
        assert_eq!(with("adx", "s1", |p| p.calls), 0);
        assert_eq!(with("adx", "s1", |p| p.answered.len()), 1);
        settled("adx", "s1", "acct");
        assert!(PENDING
            .lock()
            .unwrap()
            .get(&("adx".into(), "s1".into()))
            .is_none());
    }
}
