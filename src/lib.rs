//! Quartet: a Kubernetes operator for four infrastructure services. See README.md.

pub mod api;
pub mod clients;
pub mod cmd;
pub mod kinds;
pub mod metrics;
pub mod reconcile;
pub mod runtime;
