//! Typed clients, one module per service, on one shared HTTP layer ([`http`]).

pub mod http;
pub mod secrets;
pub mod secrets_ad;
pub mod secrets_dr;
pub mod workspaces;

pub use http::{ClientError, Http, HttpConfig, SecretString};
