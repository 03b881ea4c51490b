//! The reconcile framework shared by every kind: finalizer, deletion policy, observe → diff →
//! apply, status conditions, events, drift resync, backoff and metrics. A kind implements
//! [`Reconciled`] (what its remote object is and which calls to make) or, when it drives an
//! operation rather than owning an object, [`Operated`] (one step at a time) and is registered in
//! [`crate::runtime::controllers`]; everything else lives here.

pub mod conditions;
pub mod context;
pub mod driver;
pub mod error;
pub mod features;
pub mod finalize;
pub mod gitops;
pub mod hash;
pub mod lost;
pub mod managed;
pub mod operation;
pub mod owned_secret;
pub mod pass;
pub mod references;
pub mod related;
pub mod resync;
pub mod show;
pub mod tenancy;
pub mod tenancy_watch;
pub mod watch_failures;
pub mod written;

pub use context::{Context, Settings};
pub use driver::{Created, Reconciled};
pub use error::{Category, Error, Result};
pub(crate) use managed::managed_fields;
pub use managed::Managed;
pub use operation::{run_operation, Operated, Step};
