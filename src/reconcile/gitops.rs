//! The GitOps status contract every kind shares: the kstatus pair `Reconciling`/`Stalled` next to
//! `Ready`/`Synced`, reconcile-now annotations echoed to `status.lastHandledReconcileAt`,
//! `spec.suspend` and `spec.driftPolicy: Report`. Argo CD's health checks (`argocd/`), Flux's
//! kstatus and `kubectl wait` read only these conditions, so their meaning is API: a reason may
//! be added, never renamed.
//!
//! The rules, for both shapes of kind:
//! - `Reconciling=True` while Quartet works towards the spec and will go on by itself: an
//!   operation step in progress, a remote operation being polled, an incomplete create, a retry
//!   after a transient failure (429, 5xx, timeout, Kubernetes API error, an object still in use).
//! - `Stalled=True` when nothing more happens without a change from someone: the service
//!   rejected the request (4xx), the feature is unsupported, the spec is invalid, a referenced
//!   Secret, resource or Connection is missing or not allowed, the token was refused, or an
//!   operation reached a final failure or waits for a decision in the spec.
//! - Both `False` when the pass succeeded and nothing is in progress, and while suspended.
//! - Every condition carries the `observedGeneration` it was computed for; `Ready` keeps the old
//!   one until a pass of the new generation ends, so `kubectl wait --for=condition=Ready` (which
//!   skips a condition whose `observedGeneration` is older than `metadata.generation`) and
//!   kstatus never take an old `Ready` for the new spec.

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::Resource;
use serde::Serialize;
use serde_json::Value;

use super::conditions::{self, READY, SYNCED};
use super::context::Context;
use super::driver::{publish, write_status};
use super::error::{Category, Error, Result};
use super::managed::Managed;
use crate::api::ManagedStatus;

/// The kstatus condition set while a pass is still bringing the service to the spec.
pub const RECONCILING: &str = "Reconciling";
/// The kstatus condition set when the resource cannot progress without a change (a spec error, a
/// refusal).
pub const STALLED: &str = "Stalled";
/// The condition set when `driftPolicy: Report` found the service differing from the spec.
pub const DRIFTED: &str = "Drifted";
/// The `Ready` (and `DeletionBlocked`) reason while `spec.suspend` is true.
pub const SUSPENDED: &str = "Suspended";
/// The `Ready`, `Synced` and `Drifted` reason when `driftPolicy: Report` leaves a change.
pub const DRIFT_REPORTED: &str = "DriftReported";
/// The annotation that asks for a pass now; its value is echoed to
/// `status.lastHandledReconcileAt`.
pub const REQUESTED_AT: &str = "reconcile.quartet.dev/requestedAt";
/// Flux's annotation for the same (`flux reconcile` sets it on the objects it manages).
pub const FLUX_REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// What the resource asks of the framework besides its spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Intent {
    /// `spec.suspend`: make no call to the service.
    pub suspend: bool,
    /// `spec.driftPolicy: Report`: report drift instead of repairing it.
    pub report_drift: bool,
    /// The reconcile-now request to echo once this pass has run.
    pub requested_at: Option<String>,
}

impl Intent {
    /// Read from the resource's `spec.suspend`, `spec.driftPolicy` and annotations. Generic over
    /// every kind through its JSON form (the fields are flattened into each kind's spec).
    pub fn of<K: Serialize + Resource>(obj: &K, handled: Option<&str>) -> Intent {
        Self::read(obj, &serde_json::to_value(obj).unwrap_or_default(), handled)
    }

    /// [`Intent::of`] `obj`, whose JSON form is `json`.
    pub fn read<K: Resource>(obj: &K, json: &Value, handled: Option<&str>) -> Intent {
        let spec = json.get("spec").unwrap_or(&Value::Null);
        let annotations = obj.meta().annotations.as_ref();
        let get = |k: &str| annotations.and_then(|a| a.get(k)).cloned();
        let (ours, flux) = (get(REQUESTED_AT), get(FLUX_REQUESTED_AT));
        // Either annotation may be the one that changed: prefer one not yet handled.
        let requested_at = match (ours, flux) {
            (Some(q), _) if Some(q.as_str()) != handled => Some(q),
            (_, Some(f)) if Some(f.as_str()) != handled => Some(f),
            (q, f) => q.or(f),
        };
        Intent {
            suspend: spec.get("suspend").and_then(Value::as_bool) == Some(true),
            report_drift: spec.get("driftPolicy").and_then(Value::as_str) == Some("Report"),
            requested_at,
        }
    }
}

/// Whether `obj` carries a reconcile-now request its status does not show handled yet: the
/// pass under way answers it, and a kind that would skip a check as unneeded makes it then.
pub fn reconcile_requested<K: Resource>(obj: &K, handled: Option<&str>) -> bool {
    let annotations = obj.meta().annotations.as_ref();
    [REQUESTED_AT, FLUX_REQUESTED_AT]
        .iter()
        .filter_map(|k| annotations.and_then(|a| a.get(*k)))
        .any(|v| Some(v.as_str()) != handled)
}

/// Where a pass left the resource, for the kstatus pair.
#[derive(Clone, Copy, Debug)]
pub enum Progress<'a> {
    /// Nothing in progress, nothing blocked.
    Done,
    /// Working towards the spec and going on by itself: reason, message.
    Working(&'a str, &'a str),
    /// Waiting for someone's change: reason, message.
    Stalled(&'a str, &'a str),
    /// `spec.suspend` is true.
    Suspended,
}

/// Set `Reconciling` and `Stalled` for `progress`. Returns whether anything changed.
pub fn set_progress(
    conds: &mut Vec<crate::api::Condition>,
    progress: Progress<'_>,
    generation: Option<i64>,
) -> bool {
    let (reconciling, stalled) = match progress {
        Progress::Done => (
            (false, "ReconcileSuccess", ""),
            (false, "ReconcileSuccess", ""),
        ),
        Progress::Working(r, m) => ((true, r, m), (false, r, "")),
        Progress::Stalled(r, m) => ((false, r, ""), (true, r, m)),
        Progress::Suspended => (
            (false, SUSPENDED, "spec.suspend is true"),
            (false, SUSPENDED, "spec.suspend is true"),
        ),
    };
    let mut changed = conditions::set(
        conds,
        RECONCILING,
        reconciling.0,
        reconciling.1,
        reconciling.2,
        generation,
    );
    changed |= conditions::set(conds, STALLED, stalled.0, stalled.1, stalled.2, generation);
    changed
}

/// Whether a failure waits for someone's change (`Stalled`) rather than being retried until it
/// goes away by itself (`Reconciling`).
pub fn stalls(err: &Error) -> bool {
    match err {
        Error::InUse(_) => false,
        e => !matches!(e.category(), Category::Transient | Category::KubeApi),
    }
}

/// The progress a failed pass leaves.
pub fn failure_progress<'a>(err: &Error, message: &'a str) -> Progress<'a> {
    if stalls(err) {
        Progress::Stalled(err.reason(), message)
    } else {
        Progress::Working(err.reason(), message)
    }
}

/// A pass of a suspended resource: no call to the service, `Ready=False` reason `Suspended`,
/// and no requeue (resuming is a spec change, which wakes it).
pub(crate) async fn suspended_pass<K: Managed>(
    obj: &K,
    ctx: &Context,
    mut status: ManagedStatus,
    mut written: ManagedStatus,
) -> Result<(Action, Option<String>)> {
    let generation = obj.meta().generation;
    let newly = conditions::set(
        &mut status.conditions,
        READY,
        false,
        SUSPENDED,
        "spec.suspend is true: no call is made to the service until it is set back to false",
        generation,
    );
    // Nothing is compared while suspended: the spec of this generation is not known to be in
    // the service.
    conditions::set(
        &mut status.conditions,
        SYNCED,
        false,
        SUSPENDED,
        "not reconciled while suspended",
        generation,
    );
    set_progress(&mut status.conditions, Progress::Suspended, generation);
    let rv = write_status(obj, ctx, &status, &mut written).await?;
    if newly {
        publish(
            ctx,
            obj,
            EventType::Normal,
            SUSPENDED,
            "Reconcile",
            "reconciliation suspended (spec.suspend)".into(),
        )
        .await;
    }
    Ok((Action::await_change(), rv))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SecretsPolicy;
    use serde_json::json;

    fn policy(spec_extra: Value, annotations: Value) -> SecretsPolicy {
        let mut spec = json!({"type": "acl", "policy": "x"});
        for (k, v) in spec_extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        serde_json::from_value(json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1",
            "kind": "SecretsPolicy",
            "metadata": {"name": "p", "namespace": "default", "annotations": annotations},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn suspend_and_drift_policy_are_read_from_the_flattened_spec_fields() {
        let p = policy(json!({"suspend": true, "driftPolicy": "Report"}), json!({}));
        let i = Intent::of(&p, None);
        assert!(i.suspend && i.report_drift);
        let p = policy(json!({"suspend": false}), json!({}));
        assert_eq!(Intent::of(&p, None), Intent::default());
    }

    #[test]
    fn a_new_value_of_either_annotation_is_the_request_to_handle() {
        let p = policy(
            json!({}),
            json!({REQUESTED_AT: "a", FLUX_REQUESTED_AT: "b"}),
        );
        assert_eq!(Intent::of(&p, None).requested_at.as_deref(), Some("a"));
        assert_eq!(Intent::of(&p, Some("a")).requested_at.as_deref(), Some("b"));
        let p = policy(json!({}), json!({FLUX_REQUESTED_AT: "f"}));
        assert_eq!(Intent::of(&p, Some("f")).requested_at.as_deref(), Some("f"));
    }

    #[test]
    fn rejections_stall_and_transient_failures_keep_reconciling() {
        let rejected = Error::InvalidSpec("bad".into());
        assert!(stalls(&rejected));
        assert!(!stalls(&Error::InUse("in use".into())));
        let mut conds = Vec::new();
        set_progress(&mut conds, failure_progress(&rejected, "bad"), Some(2));
        assert_eq!(conditions::get(&conds, STALLED).unwrap().status, "True");
        assert_eq!(
            conditions::get(&conds, RECONCILING).unwrap().status,
            "False"
        );
        assert_eq!(
            conditions::get(&conds, STALLED).unwrap().generation(),
            Some(2)
        );
        set_progress(&mut conds, Progress::Done, Some(2));
        assert!(conds.iter().all(|c| c.status == "False"));
    }
}
