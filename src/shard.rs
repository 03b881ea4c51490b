//! Sharding: which resources an instance serves (`quartet run --shard NAME`).
//!
//! An instance with a shard serves the resources labelled `quartet.dev/shard=NAME`; one without
//! serves those without the label. The choice is made by the API server (a label selector on
//! the watch of each kind's own resources), so an instance never caches, reconciles or writes
//! another shard's resources. What a resource only reads is not filtered: the Connection cache
//! (Connections are shared by the resources of every shard) and the Secret and Connection
//! watches that merely wake this instance's own cached resources.
//!
//! A resource whose label moves to another shard leaves this instance's watch as a deletion
//! from its view: the resource drops out of the cache, so no new pass starts for it here and a
//! requeue finds nothing to do. kube's controller reconciles only objects it finds in its cache
//! and never passes a deletion from the view to the reconciler, so the finalizer and the
//! remote object stay as they are: a real deletion is seen through `deletionTimestamp`, never
//! through the watch event. A pass already under way is stopped before its next write to the
//! service by the gate of its change-log context ([`crate::changes::Gate`], shut by
//! [`crate::reconcile::Context::write_gate`]), and records nothing afterwards
//! (`reconcile::pass::moved_away`).

use kube::runtime::watcher;

/// The label that names the shard serving a resource.
pub const LABEL: &str = "quartet.dev/shard";

/// The prefix of each shard's leader Lease (`quartet-leader-NAME`); the default instance keeps
/// `quartet-leader`.
pub const LEASE_PREFIX: &str = "quartet-leader";

/// Errors of the shard settings.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The shard name is not a valid Kubernetes label value.
    #[error(
        "--shard {0:?} is not a valid label value: use at most 63 letters, digits, '-', '_' or \
         '.', beginning and ending with a letter or digit"
    )]
    InvalidName(String),
    /// `--shard-count` is 0.
    #[error("--shard-count must be 1 or more (the number of instances sharing each Connection)")]
    ZeroCount,
}

/// Which resources this instance serves, and its share of each Connection's budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// The shard's name; `None` for the default instance.
    pub name: Option<String>,
    /// How many instances share each Connection's `requestsPerSecond` (1: all of it).
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Self {
            name: None,
            count: 1,
        }
    }
}

impl Shard {
    /// The shard `name` (or the default instance), checked to be a valid label value.
    pub fn new(name: Option<String>, count: u32) -> Result<Self, Error> {
        if let Some(n) = &name {
            if !valid_label_value(n) || n.is_empty() {
                return Err(Error::InvalidName(n.clone()));
            }
        }
        if count == 0 {
            return Err(Error::ZeroCount);
        }
        Ok(Self { name, count })
    }

    /// The label selector of this instance's resources.
    pub fn selector(&self) -> String {
        match &self.name {
            Some(n) => format!("{LABEL}={n}"),
            None => format!("!{LABEL}"),
        }
    }

    /// The watch configuration of a kind's own resources.
    pub fn watcher_config(&self) -> watcher::Config {
        watcher::Config::default().labels(&self.selector())
    }

    /// The leader Lease of this shard (when `--lease-name` is not given).
    pub fn lease_name(&self) -> String {
        match &self.name {
            Some(n) => format!("{LEASE_PREFIX}-{n}"),
            None => LEASE_PREFIX.to_string(),
        }
    }

    /// This instance's share of a Connection's `requestsPerSecond` (or of a ClusterConnection's
    /// `requestsPerSecondPerNamespace`), at least 1. The Connection's own `spec.shards`, when
    /// set, says how many instances use it and wins over `--shard-count`: the Connection's
    /// owner knows which shards use it, an instance only how many instances there are.
    pub fn share(&self, rate: u32, connection_shards: Option<u32>) -> u32 {
        rate.div_ceil(connection_shards.unwrap_or(self.count).max(1))
            .max(1)
    }

    /// Whether an object with these labels is this instance's.
    pub fn serves(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        labels.get(LABEL).map(String::as_str) == self.name.as_deref()
    }

    /// The name shown in metrics and logs: the shard, or empty for the default instance.
    pub fn label_value(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
}

/// A Kubernetes label value: at most 63 characters, alphanumerics, `-`, `_`, `.`, beginning
/// and ending with an alphanumeric.
fn valid_label_value(s: &str) -> bool {
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    s.len() <= 63
        && ends_ok(s.chars().next())
        && ends_ok(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_selects_its_label_and_the_default_instance_selects_resources_without_it() {
        let a = Shard::new(Some("a".into()), 1).unwrap();
        assert_eq!(a.selector(), "quartet.dev/shard=a");
        assert_eq!(a.lease_name(), "quartet-leader-a");
        let default = Shard::new(None, 1).unwrap();
        assert_eq!(default.selector(), "!quartet.dev/shard");
        assert_eq!(default.lease_name(), "quartet-leader");
        let labelled = [(LABEL.to_string(), "a".to_string())].into();
        assert!(a.serves(&labelled) && !default.serves(&labelled));
        assert!(default.serves(&Default::default()) && !a.serves(&Default::default()));
    }

    #[test]
    fn a_shard_name_that_is_not_a_label_value_is_refused() {
        for bad in ["", "-a", "a b", "a/b", &"x".repeat(64)] {
            assert!(Shard::new(Some(bad.into()), 1).is_err(), "{bad:?}");
        }
        assert!(Shard::new(Some("eu-west.1_b".into()), 1).is_ok());
        assert!(Shard::new(None, 0).is_err());
    }

    #[test]
    fn the_budget_is_divided_among_the_instances_rounding_up_and_never_to_zero() {
        let s = |count| Shard::new(None, count).unwrap();
        assert_eq!(s(1).share(50, None), 50);
        assert_eq!(s(3).share(50, None), 17);
        assert_eq!(s(100).share(50, None), 1);
        assert_eq!(s(2).share(0, None), 1);
    }

    #[test]
    fn a_connections_own_shard_count_wins_over_the_instances() {
        let s = |count| Shard::new(None, count).unwrap();
        assert_eq!(s(1).share(50, Some(2)), 25);
        assert_eq!(s(3).share(50, Some(2)), 25);
        assert_eq!(s(3).share(50, Some(1)), 50);
        assert_eq!(s(1).share(3, Some(1000)), 1);
    }
}
