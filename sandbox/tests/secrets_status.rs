//! Unauthenticated status endpoints that real clients use to probe the server.

use crate::secrets_support;

use quartet_sandbox::SandboxOptions;
use reqwest::Method;
use secrets_support::*;
use serde_json::json;

#[tokio::test]
async fn health_is_unauthenticated_and_not_enveloped() {
    let s = start().await;
    let r = s.call(Method::GET, "sys/health", None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["initialized"], true);
    assert_eq!(r.body["sealed"], false);
    assert_eq!(r.body["replication_dr_mode"], "disabled");
    assert!(r.body.get("data").is_none());
}

#[tokio::test]
async fn seal_status_reports_an_unsealed_shamir_server() {
    let s = start().await;
    let r = s.call(Method::GET, "sys/seal-status", None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["sealed"], false);
    assert_eq!(r.body["t"], 3);
    assert_eq!(r.body["n"], 5);
}

#[tokio::test]
async fn health_of_a_dr_secondary_is_472() {
    let s = start_with(SandboxOptions {
        secrets_clusters: 2,
        ..SandboxOptions::ephemeral()
    })
    .await;
    let root = s.root.clone();
    s.call_at(
        0,
        Method::POST,
        "sys/replication/dr/primary/enable",
        Some(&root),
        None,
    )
    .await;
    let r = s
        .call_at(
            0,
            Method::POST,
            "sys/replication/dr/primary/secondary-token",
            Some(&root),
            Some(json!({"id": "b"})),
        )
        .await;
    let t = r.body["wrap_info"]["token"].clone();
    s.call_at(
        1,
        Method::POST,
        "sys/replication/dr/secondary/enable",
        Some(&root),
        Some(json!({"token": t})),
    )
    .await;
    let r = s.call_at(1, Method::GET, "sys/health", None, None).await;
    assert_eq!(r.status, 472);
    assert_eq!(r.body["replication_dr_mode"], "secondary");
}

#[tokio::test]
async fn idp_config_accepts_the_original_bypass_field_name() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a", "bypass_okta_mfa": true})),
    )
    .await;
    let r = s.root(Method::GET, "auth/idp/config", None).await;
    assert_eq!(r.body["data"]["bypass_idp_mfa"], true);
}

#[tokio::test]
async fn health_honours_the_requested_status_codes() {
    let s = start().await;
    let r = s
        .call(
            Method::GET,
            "sys/health?activecode=299&drsecondarycode=299",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, 299);
}

#[tokio::test]
async fn head_on_health_answers_the_status_only() {
    let s = start().await;
    let r = s
        .client
        .head(format!("{}/v1/sys/health", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = s
        .client
        .head(format!("{}/v1/sys/policies/acl/default", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
}
