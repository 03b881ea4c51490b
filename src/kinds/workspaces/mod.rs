//! Kinds of the infrastructure-workspace service (spec B).

pub mod nocode_module;
pub mod nocode_workspace;
pub mod run;
pub mod settings;
pub mod workspace;
