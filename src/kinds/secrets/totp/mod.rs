//! Kinds of the secrets service's TOTP MFA (spec A §2.7, §4.5): the method and the enrollment.

pub mod enrollment;
pub mod method;
