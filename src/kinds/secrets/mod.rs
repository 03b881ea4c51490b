//! Kinds of the secrets service (spec A, and the engines of spec C §4.1–4.2), one module per
//! engine, named as in [`crate::api::secrets`] and [`crate::clients::secrets`]: ACL/RGP/EGP
//! policies, the identity-provider auth method with its users and groups, TOTP MFA, DR
//! replication, the transform engine and the directory engine.

pub mod directory;
pub mod dr;
pub mod idp;
pub mod policy;
pub mod totp;
pub mod transform;
