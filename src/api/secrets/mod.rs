//! Custom resource types of the secrets service that live in their own module directory (the
//! identity kinds of spec A: TOTP methods and enrollments).

pub mod directory;
pub mod dr;
pub mod idp;
pub mod policy;
pub mod totp;
pub mod transform;
