//! Kinds of the workspace service (spec B).

pub mod nocode_module;
pub mod nocode_workspace;
