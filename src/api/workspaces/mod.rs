//! Custom resources of the infrastructure-workspace service (spec B), group
//! `workspaces.quartet.dev`.

pub mod nocode;
pub mod run;
pub mod workspace;
