//! Quartet: a Kubernetes operator for four infrastructure services. See README.md.
//!
//! The modules are layers, lowest first, each using only those before it: [`api`] (the custom
//! resource types), [`metrics`], [`clients`] (one per service), [`reconcile`] (the framework),
//! [`kinds`] (one module per kind), [`runtime`] (the operator process) and [`cmd`] (the
//! command line). Each service has the same module names in `api`, `clients` and `kinds`; see
//! docs/layout.md.

#![deny(missing_docs)]

pub mod api;
pub mod changes;
pub mod clients;
pub mod cmd;
pub mod kinds;
pub mod metrics;
pub mod reconcile;
pub mod runtime;
pub mod shard;
pub mod traces;
