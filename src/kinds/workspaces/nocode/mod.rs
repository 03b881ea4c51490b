//! Kinds of the workspace service's no-code provisioning (spec B §2.5, §3.1, §4.5):
//! the module and the workspace made from it.

pub mod module;
pub mod workspace;
