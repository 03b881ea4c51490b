//! Kinds of the catalog's ACL system (spec C §4.3).

pub mod acl_bootstrap;
