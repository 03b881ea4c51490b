//! The resourceVersion of each object's last status write, so that a pass never decides from a
//! cached copy older than what this instance wrote (every kind, Connections and
//! ClusterConnections; see [`super::Context::stale_copy`]); and the objects whose finalizer it
//! removed, the last write of all, by uid ([`StatusWrites::was_finalized`]).
//!
//! A copy is older than the write until the write's watch event reaches the cache:
//! milliseconds, seconds when the API server is busy. Meanwhile a pass can still start from it:
//! a wake (a changed Secret or Connection) or a requeue dispatches whatever the cache holds. Such
//! a pass would decide from a status without its own last write: a write-only value sent again
//! for want of its hash, a repaired drift taken for a spec change, a remote id not yet known.
//!
//! Resource versions are opaque to clients, but every API server in use hands out increasing
//! integers, so an older copy has a smaller one. Once a copy at or past the write is seen, the
//! cache has caught up and every later copy is newer still: the mark is dropped then, so marks
//! are only kept for writes whose event is still on its way (a few, not one per object). When
//! the API server keeps answering with an older version for longer, the versions went backwards
//! (etcd restored from a backup without `--bump-revision`): the server's copy is then the truth,
//! and waiting for the write would wait forever. So a mark is trusted for [`TRUST`] only.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a copy older than our write is taken for a cache that has not caught up yet.
pub const TRUST: Duration = Duration::from_secs(60);

/// Waits before the next look at a stale copy: the write's event usually arrives within
/// milliseconds; a cache behind for longer is looked at once a second, not 20 times.
const SOON: Duration = Duration::from_millis(50);
const LATER: Duration = Duration::from_secs(1);

/// The marks, per object key.
#[derive(Default)]
pub struct StatusWrites {
    marks: Mutex<HashMap<String, Mark>>,
    finalized: Mutex<Finalized>,
}

/// Objects (by uid) whose finalizer this instance removed, and when: that removal is their last
/// write, so a deleting copy the cache still holds afterwards (a wake by a dependent the garbage
/// collector removes, a requeue) is older than it. Its pass would clean up a second time: a
/// second delete call to the service, and the finalizer's removal answered 404.
#[derive(Default)]
struct Finalized {
    at: HashMap<String, Instant>,
    /// The size at which marks older than [`TRUST`] are next dropped (so that N deletions in a
    /// minute cost N, not N² / 2).
    prune_at: usize,
}

struct Mark {
    resource_version: u64,
    at: Instant,
}

/// What a pass does with its copy.
#[derive(Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Not older than our last write (or no write to compare with): go on.
    Current,
    /// Older than our last write: look again after this long.
    Stale(Duration),
    /// Older than our last write for longer than [`TRUST`]: the versions went backwards, so
    /// the mark is dropped and the pass goes on from this copy.
    WentBackwards {
        /// The resourceVersion of our last write.
        written: u64,
        /// The copy's, lower.
        copy: u64,
    },
}

impl StatusWrites {
    /// Remember that `key`'s status was written at `resource_version`.
    pub fn record(&self, key: &str, resource_version: &str) {
        self.record_at(key, resource_version, Instant::now());
    }

    fn record_at(&self, key: &str, resource_version: &str, at: Instant) {
        // A version that is not an integer is never compared (see the module docs).
        if let Ok(resource_version) = resource_version.parse::<u64>() {
            self.lock().insert(
                key.to_string(),
                Mark {
                    resource_version,
                    at,
                },
            );
        }
    }

    /// Whether `key`'s copy at `resource_version` is older than our last write of it.
    pub fn copy(&self, key: &str, resource_version: Option<&str>) -> Freshness {
        self.copy_at(key, resource_version, Instant::now())
    }

    fn copy_at(&self, key: &str, resource_version: Option<&str>, now: Instant) -> Freshness {
        let Some(copy) = resource_version.and_then(|r| r.parse::<u64>().ok()) else {
            return Freshness::Current;
        };
        let mut marks = self.lock();
        let Some(mark) = marks.get(key) else {
            return Freshness::Current;
        };
        if copy >= mark.resource_version {
            // The cache has caught up with the write.
            marks.remove(key);
            return Freshness::Current;
        }
        let waited = now.saturating_duration_since(mark.at);
        if waited < TRUST {
            return Freshness::Stale(if waited < Duration::from_secs(1) {
                SOON
            } else {
                LATER
            });
        }
        let written = mark.resource_version;
        marks.remove(key);
        Freshness::WentBackwards { written, copy }
    }

    /// `uid`'s finalizer was removed by this instance.
    pub fn finalized(&self, uid: &str) {
        self.finalized_at(uid, Instant::now());
    }

    fn finalized_at(&self, uid: &str, now: Instant) {
        let mut f = self.finalized.lock().unwrap_or_else(|e| e.into_inner());
        if f.at.len() >= f.prune_at {
            f.at.retain(|_, at| now.saturating_duration_since(*at) < TRUST);
            f.prune_at = (f.at.len() * 2).max(64);
        }
        f.at.insert(uid.to_string(), now);
    }

    /// Whether this instance removed `uid`'s finalizer, less than [`TRUST`] ago (by then the
    /// cache has long had the deletion).
    pub fn was_finalized(&self, uid: &str) -> bool {
        self.was_finalized_at(uid, Instant::now())
    }

    fn was_finalized_at(&self, uid: &str, now: Instant) -> bool {
        let f = self.finalized.lock().unwrap_or_else(|e| e.into_inner());
        f.at.get(uid)
            .is_some_and(|at| now.saturating_duration_since(*at) < TRUST)
    }

    /// Forget `key` (its object is gone from this instance).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Mark>> {
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_older_than_our_write_waits_and_a_newer_one_goes_on() {
        let w = StatusWrites::default();
        let t0 = Instant::now();
        w.record_at("ns/a", "120", t0);
        assert_eq!(w.copy_at("ns/a", Some("119"), t0), Freshness::Stale(SOON));
        assert_eq!(w.copy_at("ns/a", Some("121"), t0), Freshness::Current);
        assert_eq!(w.copy_at("ns/b", Some("1"), t0), Freshness::Current);
        // Only integer versions are compared.
        w.record_at("ns/a", "120", t0);
        assert_eq!(w.copy_at("ns/a", Some("x7"), t0), Freshness::Current);
        assert_eq!(w.copy_at("ns/a", None, t0), Freshness::Current);
        assert_eq!(w.copy_at("ns/a", Some("119"), t0), Freshness::Stale(SOON));
    }

    #[test]
    fn the_mark_goes_once_the_cache_has_caught_up_with_the_write() {
        let w = StatusWrites::default();
        let t0 = Instant::now();
        w.record_at("ns/a", "120", t0);
        assert_eq!(w.copy_at("ns/a", Some("120"), t0), Freshness::Current);
        assert!(w.lock().is_empty(), "a mark outlived the write's event");
        // A copy the cache can no longer hold (it has 120) is not held back either.
        assert_eq!(w.copy_at("ns/a", Some("119"), t0), Freshness::Current);
    }

    #[test]
    fn a_cache_behind_for_over_a_second_is_looked_at_once_a_second() {
        let w = StatusWrites::default();
        let t0 = Instant::now();
        w.record_at("ns/a", "120", t0);
        let later = t0 + Duration::from_secs(5);
        assert_eq!(
            w.copy_at("ns/a", Some("100"), later),
            Freshness::Stale(LATER)
        );
    }

    #[test]
    fn versions_that_went_backwards_stop_the_wait_after_a_minute() {
        let w = StatusWrites::default();
        let t0 = Instant::now();
        w.record_at("ns/a", "120", t0);
        let after = t0 + TRUST;
        assert_eq!(
            w.copy_at("ns/a", Some("40"), after),
            Freshness::WentBackwards {
                written: 120,
                copy: 40
            }
        );
        // The mark is gone: the restored copy and the ones after it are current.
        assert_eq!(w.copy_at("ns/a", Some("40"), after), Freshness::Current);
    }

    #[test]
    fn an_object_whose_finalizer_went_is_known_by_its_uid_for_a_minute() {
        let w = StatusWrites::default();
        let t0 = Instant::now();
        w.finalized_at("uid-1", t0);
        assert!(w.was_finalized_at("uid-1", t0 + Duration::from_secs(1)));
        assert!(
            !w.was_finalized_at("uid-2", t0),
            "another object, or the name made again"
        );
        assert!(!w.was_finalized_at("uid-1", t0 + TRUST));
    }

    #[test]
    fn old_finalizer_marks_are_dropped_as_more_come() {
        let w = StatusWrites::default();
        let t0 = Instant::now();
        for i in 0..64 {
            w.finalized_at(&format!("old-{i}"), t0);
        }
        let later = t0 + TRUST;
        for i in 0..200 {
            w.finalized_at(&format!("new-{i}"), later);
        }
        let f = w.finalized.lock().unwrap();
        assert_eq!(f.at.len(), 200, "the 64 old marks are gone");
    }

    #[test]
    fn a_forgotten_object_has_no_mark() {
        let w = StatusWrites::default();
        w.record("ns/a", "120");
        w.forget("ns/a");
        assert_eq!(w.copy("ns/a", Some("1")), Freshness::Current);
    }
}
