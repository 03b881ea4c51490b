//! Quartet: a Kubernetes operator for four infrastructure services. See README.md.

pub mod api;
pub mod cli;
pub mod clients;
pub mod controllers;
pub mod crdgen;
pub mod dev;
pub mod kinds;
pub mod lease;
pub mod leases;
pub mod reconcile;
pub mod run;
pub mod server;
