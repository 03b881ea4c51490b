//! Kinds of the infrastructure-workspace service (spec B).

pub mod nocode;
pub mod run;
pub mod settings;
pub mod workspace;
