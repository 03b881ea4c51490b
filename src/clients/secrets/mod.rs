//! Client of the secrets service (spec A), `/v1` API with `X-Secrets-Token`: one module per
//! part of the service, named as in [`crate::api::secrets`] and [`crate::kinds::secrets`]
//! (`login` is the Connection's own session).

pub mod directory;
pub mod dr;
pub mod idp;
pub mod login;
pub mod policy;
pub mod totp;
pub mod transform;
