//! Quartet: a Kubernetes operator for four infrastructure services. See README.md.

pub mod api;
pub mod catalog_login;
pub mod cli;
pub mod clients;
pub mod controllers;
pub mod crdgen;
#[cfg(feature = "sandbox")]
pub mod dev;
pub mod kinds;
pub mod lease;
pub mod leases;
pub mod login;
pub mod plan;
pub mod reconcile;
pub mod run;
pub mod server;
pub mod shard;
pub mod traces;
