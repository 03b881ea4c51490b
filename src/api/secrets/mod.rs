//! Custom resource types of the secrets service (group `secrets.quartet.dev`), one module per
//! engine, named as in [`crate::kinds::secrets`] and [`crate::clients::secrets`].

pub mod directory;
pub mod dr;
pub mod idp;
pub mod policy;
pub mod totp;
pub mod transform;
