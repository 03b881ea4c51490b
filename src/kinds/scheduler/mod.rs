//! Kinds of the scheduler's deployments API (spec C §4.4).

pub mod deployment_gate;
