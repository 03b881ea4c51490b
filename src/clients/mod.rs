//! Typed clients, one module per service, on one shared HTTP layer ([`http`]).

pub mod catalog;
pub mod http;
pub mod scheduler;
pub mod secrets;
pub mod workspaces;

pub use http::{ClientError, Http, HttpConfig, SecretString};
