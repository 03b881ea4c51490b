//! The sandbox's integration tests, one module per file of `tests/`, built as one test binary:
//! the helpers are compiled once and the binary linked once. Run one file's tests with its
//! module name: `cargo test -p quartet-sandbox --test integration secrets_policies::`.

mod apiserver_schema_fixtures;
mod common;
mod secrets_support;
mod workspaces_support;

mod apiserver_http;
mod apiserver_kube_rs;
mod apiserver_kubectl;
mod apiserver_rbac;
mod apiserver_schema_admission;
mod apiserver_schema_cel;
mod apiserver_schema_cel_cost;
mod apiserver_schema_crd;
mod apiserver_schema_kubectl;
mod apiserver_schema_openapi;
mod apiserver_schema_status;
mod apiserver_schema_table;
mod apiserver_tokens;
mod catalog_acl;
mod catalog_acl_objects;
mod catalog_clients;
mod catalog_oidc;
mod real_clients;
mod scheduler_acl;
mod scheduler_acl_api;
mod scheduler_agent;
mod scheduler_clients;
mod scheduler_deployments;
mod secrets_ad;
mod secrets_clients;
mod secrets_conformance;
mod secrets_dr;
mod secrets_idp;
mod secrets_leases;
mod secrets_mfa;
mod secrets_openapi;
mod secrets_openbao;
mod secrets_persist;
mod secrets_policies;
mod secrets_robustness;
mod secrets_status;
mod secrets_transform;
mod workspaces_attributes;
mod workspaces_clients;
mod workspaces_consumers_tags;
mod workspaces_conventions;
mod workspaces_crud;
mod workspaces_nocode;
mod workspaces_persistence;
mod workspaces_rules;
mod workspaces_runs;
mod workspaces_teams_tokens;
