//! Conformance of the API description endpoint (spec A §4.1).

use crate::secrets_support;

use quartet_sandbox::{Edition, SandboxOptions};
use reqwest::Method;
use secrets_support::*;
use serde_json::{json, Value};

const P: &str = "sys/internal/specs/openapi";

fn paths(doc: &Value) -> &serde_json::Map<String, Value> {
    doc["paths"].as_object().expect("paths object")
}

#[tokio::test]
async fn openapi_document_has_version_info_and_license() {
    let s = start().await;
    let r = s.call(Method::GET, P, None, None).await;
    assert_eq!(r.status, 200);
    assert!(r.body["openapi"].as_str().unwrap().starts_with("3."));
    for k in ["title", "description", "version"] {
        assert!(r.body["info"][k].is_string(), "info.{k}");
    }
    assert!(r.body["info"]["license"]["name"].is_string());
    assert!(r.body["info"]["license"]["url"].is_string());
}

#[tokio::test]
async fn openapi_without_token_describes_only_unauthenticated_paths() {
    let s = start().await;
    let r = s.call(Method::GET, P, None, None).await;
    let p = paths(&r.body);
    assert!(p.contains_key("/auth/idp/login/{username}"));
    assert!(p.contains_key("/auth/idp/verify/{nonce}"));
    assert!(!p.contains_key("/sys/policies/acl/{name}"));
    assert!(!p.contains_key("/auth/idp/config"));
}

#[tokio::test]
async fn openapi_with_root_token_describes_every_mount() {
    let s = start().await;
    let r = s.root(Method::GET, P, None).await;
    let p = paths(&r.body);
    for k in [
        "/sys/policies/acl/{name}",
        // A list-only path is described without a trailing slash (OpenBao 2.7).
        "/sys/policies/acl",
        "/sys/policies/egp/{name}",
        "/sys/leases/lookup",
        "/auth/idp/config",
        "/auth/idp/users/{name}",
        "/auth/token/lookup-self",
        "/identity/mfa/method/totp/{method_id}",
    ] {
        assert!(p.contains_key(k), "missing {k}");
    }
    let op = &p["/sys/policies/acl/{name}"]["get"];
    assert!(op["summary"].is_string());
    assert!(op["tags"].is_array());
    assert!(op["responses"]["200"]["description"].is_string());
    assert!(p["/sys/policies/acl/{name}"]["description"].is_string());
}

#[tokio::test]
async fn openapi_path_names_follow_the_mounts_in_use() {
    let s = start().await;
    s.root(Method::POST, "sys/auth/corp", Some(json!({"type": "idp"})))
        .await;
    let r = s.root(Method::GET, P, None).await;
    assert!(paths(&r.body).contains_key("/auth/corp/config"));
    s.root(Method::DELETE, "sys/auth/corp", None).await;
    let r = s.root(Method::GET, P, None).await;
    assert!(!paths(&r.body).contains_key("/auth/corp/config"));
}

#[tokio::test]
async fn openapi_marks_sudo_unauthenticated_and_create_supported_paths() {
    let s = start().await;
    let r = s.root(Method::GET, P, None).await;
    let p = paths(&r.body);
    assert_eq!(p["/sys/leases/revoke-prefix/{prefix}"]["x-svc-sudo"], true);
    // List-only: no trailing slash (OpenBao 2.7).
    assert_eq!(p["/sys/leases/lookup/{prefix}"]["x-svc-sudo"], true);
    assert_eq!(
        p["/auth/idp/login/{username}"]["x-svc-unauthenticated"],
        true
    );
    assert_eq!(p["/auth/idp/config"]["x-svc-create-supported"], true);
    assert!(p["/sys/policies/acl/{name}"].get("x-svc-sudo").is_none());
}

#[tokio::test]
async fn openapi_sys_paths_are_documented_in_detail_others_basically() {
    let s = start().await;
    let r = s.root(Method::GET, P, None).await;
    let p = paths(&r.body);
    assert!(p["/sys/leases/tidy"]["post"]["description"].is_string());
    assert!(p["/auth/idp/config"]["get"].get("description").is_none());
    assert!(p["/auth/idp/config"]["get"]["summary"].is_string());
}

#[tokio::test]
async fn openapi_is_filtered_by_the_tokens_permissions() {
    let s = start().await;
    let plain = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": []})),
        )
        .await
        .body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s.call(Method::GET, P, Some(&plain), None).await;
    assert!(!paths(&r.body).contains_key("/auth/idp/config"));
    assert!(paths(&r.body).contains_key("/auth/token/lookup-self"));
    s.root(
        Method::PUT,
        "sys/policies/acl/idp",
        Some(json!({"policy": "path \"auth/idp/*\" { capabilities = [\"read\"] }"})),
    )
    .await;
    let t = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": ["idp"]})),
        )
        .await
        .body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s.call(Method::GET, P, Some(&t), None).await;
    assert!(paths(&r.body).contains_key("/auth/idp/config"));
}

#[tokio::test]
async fn openapi_leaves_out_unlicensed_paths() {
    let s = start_with(SandboxOptions {
        edition: Edition::Community,
        ..SandboxOptions::ephemeral()
    })
    .await;
    let r = s.root(Method::GET, P, None).await;
    assert!(!paths(&r.body).contains_key("/sys/policies/egp/{name}"));
    assert!(paths(&r.body).contains_key("/sys/policies/acl/{name}"));
}
