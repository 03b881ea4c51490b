//! Kinds of the infrastructure-workspace service (spec B).

pub mod settings;
pub mod workspace;
