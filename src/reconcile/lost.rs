//! Searches for what a lost response left behind, at a cost that does not grow with N.
//!
//! A create whose answer never arrived (a timeout, a 5xx after the fact, a dropped
//! connection, a process killed mid-call) can leave an object that no status records: kinds
//! search for it before creating again (a TOTP method by its marker name, a catalog token by
//! its login marker, a borrowed AD account no check-out records). Such a search lists the
//! whole scope (every method of the Connection, every token of the auth method, every
//! AdCheckout): done before each of N creates, it costs N listings of N items.
//!
//! Yet a lost answer can only have happened in two ways: before this process listed the scope
//! (an earlier process, or this one before its first listing), or in a call of this process
//! whose outcome it never learned. So each scope is listed once per process, which records the
//! owners (resource uids) of what it holds; every call that may leave something behind is
//! bracketed by an [`Attempt`] (marked *unsure* from before the call is sent until its outcome
//! is known, so a cancelled or lost call stays unsure). An owner then needs a search only while
//! the scope was never listed, when the listing showed something of its own, or while it is
//! unsure; everyone else creates straight away. This relies on one writer per resource (the
//! leader election): another process's calls are covered by the listing this one makes first.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

#[derive(Default)]
struct Scope {
    /// Owners with something in the scope at the last listing, with the ids of what they had
    /// where the kind told them (empty: not told) (`None`: never listed).
    seen: Option<BTreeMap<String, BTreeSet<String>>>,
    /// Owners with calls under way or of unknown outcome.
    unsure: BTreeMap<String, Unsure>,
}

#[derive(Clone, Copy, Default)]
struct Unsure {
    /// Calls under way.
    in_flight: u32,
    /// When the last call whose outcome is not held ended (`None`: none since the last
    /// listing).
    since: Option<u64>,
}

impl Scope {
    /// A listing started at `generation` shows what `owner`'s calls that ended before it did.
    fn settle(&mut self, owner: &str, generation: u64) {
        if let Some(u) = self.unsure.get_mut(owner) {
            if u.since.is_some_and(|g| g < generation) {
                u.since = None;
            }
            if u.in_flight == 0 && u.since.is_none() {
                self.unsure.remove(owner);
            }
        }
    }
}

#[derive(Default)]
struct State {
    generation: u64,
    scopes: BTreeMap<String, Scope>,
}

static STATE: Mutex<State> = Mutex::new(State {
    generation: 0,
    scopes: BTreeMap::new(),
});

fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    f(&mut STATE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Whether `owner` must search `scope` before creating: the scope was never listed by this
/// process, its last listing held something of `owner`, or a call of `owner` ended with an
/// unknown outcome since.
pub fn must_search(scope: &str, owner: &str) -> bool {
    must_search_holding(scope, owner, &[])
}

/// [`must_search`] for an owner that holds the objects `held` (ids, as given to
/// [`Listing::done_with_ids`]): what the last listing showed of it counts only where it is not
/// one of those. An owner whose record is intact then needs no search when the listing merely
/// showed what it holds.
pub fn must_search_holding(scope: &str, owner: &str, held: &[&str]) -> bool {
    with(|s| match s.scopes.get(scope) {
        Some(sc) => {
            sc.unsure.get(owner).is_some_and(|u| u.since.is_some())
                || sc.seen.as_ref().is_none_or(|seen| {
                    seen.get(owner).is_some_and(|ids| {
                        ids.is_empty() || ids.iter().any(|id| !held.contains(&id.as_str()))
                    })
                })
        }
        None => true,
    })
}

/// Whether a search of `scope` for what no owner records is needed: never listed, or some
/// call in it ended with an unknown outcome (calls still under way are the caller's to track).
pub fn must_search_any(scope: &str) -> bool {
    with(|s| match s.scopes.get(scope) {
        Some(sc) => sc.seen.is_none() || sc.unsure.values().any(|u| u.since.is_some()),
        None => true,
    })
}

/// `owner`'s status records what its calls made: nothing of its own is lost any more.
pub fn recorded(scope: &str, owner: &str) {
    with(|s| {
        if let Some(sc) = s.scopes.get_mut(scope) {
            let g = s.generation + 1;
            sc.settle(owner, g);
        }
    })
}

/// Something of `owner`'s may be in `scope` that no status records any more, lost another way
/// than a call's answer (its record deleted by hand): its next search looks, as after a lost
/// answer, until a listing that starts later settles it.
pub fn unrecorded(scope: &str, owner: &str) {
    with(|s| {
        s.generation += 1;
        let now = s.generation;
        let sc = s.scopes.entry(scope.to_string()).or_default();
        sc.unsure.entry(owner.to_string()).or_default().since = Some(now);
    })
}

/// A listing of a scope about to be made; [`Listing::done`] records what it found.
pub struct Listing {
    scope: String,
    generation: u64,
}

/// Start a listing of `scope` (before its first call is sent): calls that end later are not
/// settled by it.
pub fn listing(scope: &str) -> Listing {
    with(|s| {
        s.generation += 1;
        Listing {
            scope: scope.to_string(),
            generation: s.generation,
        }
    })
}

impl Listing {
    /// The whole scope was listed and held something of the owners in `left`: calls that
    /// ended before the listing are settled. Only the first listing of a process adds owners
    /// to search: after it, whatever appears in the scope comes from this process's own calls,
    /// which [`Attempt`] tracks (adding them would make every owner whose call another
    /// owner's listing saw search in turn).
    pub fn done(self, left: impl IntoIterator<Item = String>) {
        self.record(left.into_iter().map(|o| (o, BTreeSet::new())).collect())
    }

    /// [`Listing::done`] with the ids of what each owner had (owner, id): an owner that holds
    /// all of its own then needs no search ([`must_search_holding`]).
    pub fn done_with_ids(self, left: impl IntoIterator<Item = (String, String)>) {
        let mut by_owner: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (owner, id) in left {
            by_owner.entry(owner).or_default().insert(id);
        }
        self.record(by_owner)
    }

    fn record(self, left: BTreeMap<String, BTreeSet<String>>) {
        with(|s| {
            let sc = s.scopes.entry(self.scope).or_default();
            let owners: Vec<String> = sc.unsure.keys().cloned().collect();
            for owner in owners {
                sc.settle(&owner, self.generation);
            }
            sc.seen = Some(match sc.seen.take() {
                None => left,
                // What is gone since stays gone; what is new came from this process's calls.
                Some(seen) => seen
                    .into_iter()
                    .filter_map(|(owner, ids)| {
                        let now = left.get(&owner)?;
                        if ids.is_empty() {
                            return Some((owner, ids));
                        }
                        let still: BTreeSet<String> = ids.intersection(now).cloned().collect();
                        (!still.is_empty()).then_some((owner, still))
                    })
                    .collect(),
            });
        })
    }

    /// Only `owner`'s part of the scope was taken care of (its own search): it has nothing
    /// left in the scope but what its status records.
    pub fn done_for(self, owner: &str) {
        with(|s| {
            let sc = s.scopes.entry(self.scope).or_default();
            sc.settle(owner, self.generation);
            if let Some(seen) = sc.seen.as_mut() {
                seen.remove(owner);
            }
        })
    }
}

/// A call of `owner` in `scope` that may leave something behind if its answer is lost: under
/// way until [`Attempt::known`]; dropped without it (an error of unknown outcome, a cancelled
/// future), the owner is unsure and its next create searches, until a listing that started
/// after the drop settles it (or [`recorded`]).
pub struct Attempt {
    scope: String,
    owner: String,
    over: bool,
}

/// Mark a call of `owner` in `scope` under way, before sending a call whose answer may be lost.
pub fn attempt(scope: &str, owner: &str) -> Attempt {
    with(|s| {
        s.scopes
            .entry(scope.to_string())
            .or_default()
            .unsure
            .entry(owner.to_string())
            .or_default()
            .in_flight += 1;
    });
    Attempt {
        scope: scope.to_string(),
        owner: owner.to_string(),
        over: false,
    }
}

impl Attempt {
    /// Answered, but the result is held only once a status records it: the owner is unsure
    /// until [`recorded`] (or a listing) says so.
    pub fn until_recorded(mut self) {
        self.end(false);
    }

    /// The outcome is known (it succeeded and its result is held, or it was refused).
    pub fn known(mut self) {
        self.end(true);
    }

    fn end(&mut self, known: bool) {
        self.over = true;
        with(|s| {
            s.generation += 1;
            let ended = s.generation;
            let Some(sc) = s.scopes.get_mut(&self.scope) else {
                return;
            };
            let Some(u) = sc.unsure.get_mut(&self.owner) else {
                return;
            };
            u.in_flight = u.in_flight.saturating_sub(1);
            if !known {
                u.since = Some(ended);
            }
            if u.in_flight == 0 && u.since.is_none() {
                sc.unsure.remove(&self.owner);
            }
        })
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if self.over {
            return;
        }
        tracing::debug!(scope = %self.scope, "a call's outcome is unknown: the next create searches first");
        self.end(false);
    }
}

/// Whether a failed call may still have been carried out by the service (its answer lost):
/// anything but a refusal.
pub fn outcome_unknown(e: &crate::clients::ClientError) -> bool {
    use crate::clients::ClientError;
    match e {
        ClientError::Unreachable { .. } | ClientError::Decode { .. } => true,
        ClientError::Status { status, .. } => *status >= 500,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_never_listed_needs_a_search_and_a_listing_ends_it_for_owners_it_did_not_show() {
        let scope = "test-scope-listing";
        assert!(must_search(scope, "a"));
        assert!(must_search_any(scope));
        listing(scope).done(["b".to_string()]);
        assert!(!must_search(scope, "a"));
        assert!(must_search(scope, "b"), "b had something in the listing");
        assert!(!must_search_any(scope));
        // Later listings show what this process made: they add no one.
        listing(scope).done(["a".to_string(), "b".to_string()]);
        assert!(!must_search(scope, "a"));
        assert!(must_search(scope, "b"));
        listing(scope).done([]);
        assert!(!must_search(scope, "b"));
    }

    #[test]
    fn a_call_of_unknown_outcome_needs_a_search_until_a_listing_started_after_it_settles_it() {
        let scope = "test-scope-unsure";
        listing(scope).done([]);
        drop(attempt(scope, "a"));
        assert!(must_search(scope, "a"));
        assert!(!must_search(scope, "b"));
        assert!(must_search_any(scope));
        // A call under way while a listing is made may still be lost after it.
        let under_way = attempt(scope, "c");
        listing(scope).done([]);
        assert!(!must_search(scope, "a"));
        assert!(!must_search_any(scope));
        drop(under_way);
        assert!(must_search(scope, "c"), "its outcome is unknown");
        assert!(must_search_any(scope));
        listing(scope).done_for("c");
        assert!(!must_search(scope, "c"));
        assert!(!must_search_any(scope));
    }

    #[test]
    fn a_later_call_that_succeeds_does_not_settle_an_earlier_lost_one() {
        let scope = "test-scope-sticky";
        listing(scope).done([]);
        drop(attempt(scope, "a"));
        attempt(scope, "a").known();
        assert!(must_search(scope, "a"));
    }

    #[test]
    fn an_answer_held_only_once_recorded_needs_a_search_until_then() {
        let scope = "test-scope-recorded";
        listing(scope).done([]);
        attempt(scope, "a").until_recorded();
        assert!(must_search(scope, "a"));
        recorded(scope, "a");
        assert!(!must_search(scope, "a"));
    }

    #[test]
    fn an_owner_holding_all_the_listing_showed_of_it_needs_no_search() {
        let scope = "test-scope-held";
        let pair = |o: &str, id: &str| (o.to_string(), id.to_string());
        listing(scope).done_with_ids([pair("a", "1"), pair("b", "2"), pair("b", "3")]);
        assert!(!must_search_holding(scope, "a", &["1"]));
        assert!(must_search_holding(scope, "a", &[]), "1 is held by no one");
        assert!(must_search_holding(scope, "b", &["2"]), "3 is not held");
        assert!(!must_search_holding(scope, "b", &["2", "3"]));
        assert!(must_search(scope, "a"), "without ids, anything counts");
        // 3 is gone at the next listing: b holding 2 needs no search any more.
        listing(scope).done_with_ids([pair("a", "1"), pair("b", "2"), pair("c", "4")]);
        assert!(!must_search_holding(scope, "b", &["2"]));
        assert!(
            !must_search_holding(scope, "c", &[]),
            "what is new came from this process"
        );
    }

    #[test]
    fn a_record_deleted_by_hand_needs_a_search_until_a_later_listing() {
        let scope = "test-scope-unrecorded";
        listing(scope).done([]);
        let before = listing(scope);
        unrecorded(scope, "a");
        assert!(must_search(scope, "a"));
        assert!(!must_search(scope, "b"));
        before.done([]);
        assert!(
            must_search(scope, "a"),
            "a listing started before cannot tell"
        );
        listing(scope).done([]);
        assert!(!must_search(scope, "a"));
    }

    #[test]
    fn a_call_whose_outcome_is_known_leaves_no_search_behind() {
        let scope = "test-scope-known";
        listing(scope).done([]);
        attempt(scope, "a").known();
        assert!(!must_search(scope, "a"));
        assert!(!must_search_any(scope));
    }
}
