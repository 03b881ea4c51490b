//! [`Managed`]: what every kind exposes to the framework, whichever its shape, and
//! `managed_fields!`, which writes the part of it every kind answers the same way from the
//! fields all specs and statuses share, so that a kind's `impl Managed` holds only what is
//! particular to it (its service, the Secrets it reads, its deletion rules).

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::{CustomResourceExt, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus, Service};

/// What every managed kind exposes to the framework.
pub trait Managed:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + CustomResourceExt
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The service the kind's resources are reconciled against (which Connection a resource
    /// uses by default, which client it gets).
    const SERVICE: Service;
    /// The Connection or ClusterConnection the resource names (`spec.connectionRef`); `None`:
    /// the Connection named after [`Managed::SERVICE`] in the resource's namespace.
    fn connection_ref(&self) -> Option<&ConnectionRef>;
    /// What deletion does to the remote object (`spec.deletionPolicy`, or what the kind
    /// allows).
    fn deletion_policy(&self) -> DeletionPolicy;
    /// The part of the status every kind shares (conditions, remote id, generations), if the
    /// resource has a status yet.
    fn managed_status(&self) -> Option<&ManagedStatus>;
    /// Names of the Secrets (in the resource's namespace) whose contents the resource reads:
    /// a change of one wakes the resource at once (a rotated password is sent now, not at the
    /// next resync). Kinds that return any must set [`Managed::WATCHES_SECRETS`].
    fn secret_refs(&self) -> Vec<String> {
        Vec::new()
    }
    /// Why the remote object is kept when the resource is deleted with
    /// [`Managed::deletion_policy`] `Retain` (the `Retained` Event says it).
    fn retain_note(&self) -> String {
        "deletionPolicy Retain".into()
    }
    /// Whether the controller watches Secrets for [`Managed::secret_refs`] (needs list/watch on
    /// Secrets, so only kinds that read Secrets turn it on).
    const WATCHES_SECRETS: bool = false;
    /// The whole `status` object for `managed` (kinds with extra status fields add them here).
    fn status_json(&self, managed: &ManagedStatus) -> Value {
        serde_json::to_value(managed).unwrap_or(Value::Null)
    }
}

/// Writes, inside an `impl Managed for X`, the [`Managed`] methods answered from the fields
/// every kind has: `connection_ref` from `spec.connectionRef`, `deletion_policy` from
/// `spec.deletionPolicy`, `managed_status` from the status's flattened `managed` part.
/// `managed_fields!()` writes all three; `managed_fields!(connection_ref, managed_status)` only
/// those named, for a kind that answers the others itself (a fixed deletion policy, a
/// Connection named elsewhere in its spec).
///
/// ```ignore
/// impl Managed for SecretsPolicy {
///     const SERVICE: Service = Service::Secrets;
///     managed_fields!();
/// }
/// ```
macro_rules! managed_fields {
    () => {
        $crate::reconcile::managed_fields!(connection_ref, deletion_policy, managed_status);
    };
    (@ connection_ref) => {
        fn connection_ref(&self) -> Option<&$crate::api::ConnectionRef> {
            self.spec.connection_ref.as_deref()
        }
    };
    (@ deletion_policy) => {
        fn deletion_policy(&self) -> $crate::api::DeletionPolicy {
            self.spec.deletion_policy
        }
    };
    (@ managed_status) => {
        fn managed_status(&self) -> Option<&$crate::api::ManagedStatus> {
            self.status.as_ref().map(|s| &s.managed)
        }
    };
    ($($method:ident),+ $(,)?) => {
        $($crate::reconcile::managed_fields!(@ $method);)+
    };
}
pub(crate) use managed_fields;
