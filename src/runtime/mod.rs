//! The operator process around the framework: the controllers' registry and supervisor,
//! leader election, and the metrics and health server.

pub mod controllers;
pub mod idle;
pub mod kube_client;
pub mod leader;
pub mod server;
