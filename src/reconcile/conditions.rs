//! Status conditions: set a condition, keeping `lastTransitionTime` when its status is unchanged.

use crate::api::Condition;

/// The condition that says whether the remote object matches the spec and can be used.
pub const READY: &str = "Ready";
/// The condition that says whether the last pass brought the service to the spec.
pub const SYNCED: &str = "Synced";
/// The condition set while a deletion waits (on a suspend, an object in use, a refused call).
pub const DELETION_BLOCKED: &str = "DeletionBlocked";

/// The current time as conditions record it (RFC 3339, whole seconds, UTC): 20 bytes, kept
/// inline by a `CompactString`.
pub fn now() -> compact_str::CompactString {
    chrono::Utc::now()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        .into()
}

/// Set condition `type_` in `conditions`. Returns whether anything changed.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> bool {
    let status = crate::api::ConditionStatus::from(status);
    let message = bounded(message.into());
    let generation = generation.and_then(std::num::NonZeroI64::new);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let changed = c.status != status
                || c.reason != reason
                || c.message != message
                || c.observed_generation != generation;
            if c.status != status {
                c.last_transition_time = now();
            }
            c.status = status;
            c.reason = reason.into();
            c.message = message.into();
            c.observed_generation = generation;
            changed
        }
        None => {
            conditions.push(Condition {
                type_: type_.into(),
                status,
                reason: reason.into(),
                message: message.into(),
                last_transition_time: now(),
                observed_generation: generation,
            });
            true
        }
    }
}

/// Longest message a condition keeps: the CRDs bound `message` to 32768 characters (as
/// Kubernetes' own conditions), and a longer one would make the API server refuse the whole
/// status write.
pub const MAX_MESSAGE: usize = 32_768;

/// `message` cut to [`MAX_MESSAGE`] characters, marked with `…` when cut.
fn bounded(message: String) -> String {
    if message.chars().nth(MAX_MESSAGE).is_none() {
        return message;
    }
    let mut m: String = message.chars().take(MAX_MESSAGE - 1).collect();
    m.push('…');
    m
}

/// Removes condition `type_`; returns whether it was there.
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    before != conditions.len()
}

/// The condition of type `type_`, if set.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_longer_than_the_crd_allows_is_cut_to_its_bound() {
        let mut conds = Vec::new();
        set(
            &mut conds,
            READY,
            false,
            "Rejected",
            "é".repeat(MAX_MESSAGE),
            None,
        );
        assert_eq!(conds[0].message.chars().count(), MAX_MESSAGE);
        assert!(!conds[0].message.ends_with('…'));
        set(
            &mut conds,
            READY,
            false,
            "Rejected",
            "x".repeat(MAX_MESSAGE + 5),
            None,
        );
        assert_eq!(conds[0].message.chars().count(), MAX_MESSAGE);
        assert!(conds[0].message.ends_with('…'));
    }

    #[test]
    fn transition_time_is_kept_when_status_does_not_change() {
        let mut conds = Vec::new();
        assert!(set(&mut conds, READY, false, "Rejected", "bad", Some(1)));
        conds[0].last_transition_time = "2020-01-01T00:00:00Z".into();
        assert!(set(
            &mut conds,
            READY,
            false,
            "Rejected",
            "still bad",
            Some(2)
        ));
        assert_eq!(conds[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert!(set(&mut conds, READY, true, "Synced", "", Some(2)));
        assert_ne!(conds[0].last_transition_time, "2020-01-01T00:00:00Z");
    }

    #[test]
    fn setting_the_same_condition_twice_reports_no_change() {
        let mut conds = Vec::new();
        set(&mut conds, SYNCED, true, "Synced", "", Some(1));
        assert!(!set(&mut conds, SYNCED, true, "Synced", "", Some(1)));
    }
}
