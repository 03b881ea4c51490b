//! Custom resource types of the secrets service that live in their own module directory (the
//! identity kinds of spec A: TOTP methods and enrollments).

pub mod idp;
pub mod totp;
