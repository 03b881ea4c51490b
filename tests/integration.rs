//! The `quartet` crate's integration and end-to-end tests, one module per file of `tests/`,
//! built as one test binary: the harness in `support/` is compiled once and the binary linked
//! once, and the two test threads stay busy across files instead of waiting at the end of
//! each file's binary for its slowest test. Run one file's tests with its module name:
//! `cargo test --test integration e2e_workspace::`.

mod support;

mod argocd;
mod cli;
mod crds;
mod docs;
mod e2e_catalog_login;
mod e2e_catalog_scheduler;
mod e2e_chart;
mod e2e_connection_login;
mod e2e_dev;
mod e2e_directory;
mod e2e_dr;
mod e2e_examples;
mod e2e_gitops;
mod e2e_leases;
mod e2e_lifecycle;
mod e2e_nocode;
mod e2e_plan;
mod e2e_plan_kinds;
mod e2e_secrets_policy;
mod e2e_sharding;
mod e2e_status_contract;
mod e2e_tenancy;
mod e2e_totp;
mod e2e_transform;
mod e2e_workspace;
mod framework;
mod helm;
mod hot_code;
mod layout;
mod observability;
mod rbac;
mod traces;
