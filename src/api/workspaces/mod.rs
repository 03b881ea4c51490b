//! Custom resources of the workspace service (spec B).

pub mod nocode;
