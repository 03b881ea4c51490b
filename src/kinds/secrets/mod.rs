//! Kinds of the secrets service that live in their own module directory.

pub mod idp;
pub mod idp_auth;
pub mod totp_enrollment;
pub mod totp_method;
