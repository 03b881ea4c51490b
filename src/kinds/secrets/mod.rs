//! Kinds of the secrets service that live in their own module directory.

pub mod directory;
pub mod dr;
pub mod idp;
pub mod policy;
pub mod totp;
pub mod transform;
