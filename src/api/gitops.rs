//! The GitOps fields every managed kind's spec carries (flattened into it): `suspend` on every
//! kind, and `driftPolicy` on the kinds that own one remote object (drift means nothing for a
//! kind that drives an operation).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What Quartet does when the remote object was changed in the service (not by a spec change):
/// `Correct` (default) sets the changed fields back to the spec; `Report` leaves the service as
/// it is and reports them (condition `Drifted`, `status.driftedFields`, an Event), keeping the
/// resource `Ready` but not `Synced`. A spec change is always applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DriftPolicy {
    /// Set the changed fields back to the spec (the default).
    #[default]
    Correct,
    /// Leave the service as it is and report the changed fields: condition `Drifted`,
    /// `status.driftedFields` and an Event. The resource stays `Ready` but not `Synced`.
    Report,
}

/// `suspend` and `driftPolicy`, for kinds that own one remote object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitOps {
    /// `true` stops every call to the service for this resource: no resync, no drift repair,
    /// and no deletion of the remote object (deleting the resource with `deletionPolicy:
    /// Delete` waits, with condition `DeletionBlocked` reason `Suspended`). `Ready` is `False`
    /// with reason `Suspended`. Setting it back to `false` catches up at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// `Correct` (default) sets a field changed in the service back to the spec; `Report`
    /// leaves it and reports it (condition `Drifted`, `status.driftedFields`, an Event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_policy: Option<DriftPolicy>,
}

/// `suspend`, for kinds that drive an operation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Suspend {
    /// `true` stops every call to the service for this resource: the operation takes no step
    /// and nothing is released in the service (deleting the resource with `deletionPolicy:
    /// Delete` waits, with condition `DeletionBlocked` reason `Suspended`). `Ready` is `False`
    /// with reason `Suspended`. Setting it back to `false` resumes where it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}
