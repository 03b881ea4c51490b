//! Typed clients, one module per service, on one shared HTTP layer ([`http`]).

pub mod catalog;
pub mod http;
pub mod scheduler;
pub mod secrets;
pub mod secrets_ad;
pub mod secrets_dr;
pub mod secrets_idp;
pub mod secrets_login;
pub mod secrets_mfa;
pub mod secrets_transform;
pub mod workspaces;

pub use http::{ClientError, Http, HttpConfig, SecretString};
