//! One file per kind: how its remote object is observed, what it should be, how to diff, and
//! which calls to make. The framework in [`crate::reconcile`] does everything else.

pub mod catalog;
pub mod connection;
pub mod scheduler;
pub mod secrets;
pub mod workspaces;
