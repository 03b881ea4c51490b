//! Custom resources of the infrastructure-workspace service (spec B), group
//! `workspaces.quartet.dev`.

pub mod run;
pub mod workspace;
