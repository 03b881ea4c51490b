//! Hostile request input never crashes the service: it answers, and keeps answering.

use crate::secrets_support;

use reqwest::Method;
use secrets_support::*;
use serde_json::json;

#[tokio::test]
async fn absurd_durations_and_sizes_are_handled() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"ttl": "99999999999999h", "period": 9.9e300})),
        )
        .await;
    assert!(r.status < 500, "{:?}", r.body);
    let r = s.root(Method::POST, "identity/mfa/method/totp", Some(json!({"issuer": "A", "qr_size": 100_000_000, "key_size": 100_000_000, "period": "9999999999999999h"}))).await;
    assert!(r.status < 500, "{:?}", r.body);
    let r = s
        .root(
            Method::POST,
            "sys/policies/password/p",
            Some(json!({"policy": "length = 99999999999\nrule \"charset\" { charset = \"ab\" }"})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .root(Method::POST, "sys/replication/dr/primary/enable", None)
        .await;
    assert_eq!(r.status, 200);
    let r = s
        .root(
            Method::POST,
            "sys/replication/dr/primary/secondary-token",
            Some(json!({"id": "x", "ttl": "99999999999999999h"})),
        )
        .await;
    assert!(r.status < 500, "{:?}", r.body);
    // Still serving.
    assert_eq!(
        s.root(Method::GET, "sys/policies/acl/default", None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn wrongly_typed_fields_are_400_not_crashes() {
    let s = start().await;
    for (path, body) in [
        (
            "auth/idp/config",
            json!({"org_name": ["a"], "token_ttl": {"x": 1}}),
        ),
        (
            "auth/idp/config",
            json!({"org_name": "a", "token_policies": [{"a": 1}]}),
        ),
        (
            "identity/mfa/method/totp",
            json!({"issuer": "a", "digits": "eight"}),
        ),
        ("sys/policies/acl/x", json!({"policy": 42})),
        ("sys/leases/lookup", json!({"lease_id": {"a": 1}})),
        (
            "transform/template/t",
            json!({"type": "regex", "pattern": "(a)", "decode_formats": "nope"}),
        ),
    ] {
        let r = s.root(Method::POST, path, Some(body.clone())).await;
        assert_eq!(r.status, 400, "{path} {body}: {:?}", r.body);
    }
    assert_eq!(
        s.root(Method::GET, "sys/policies/acl/default", None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn odd_paths_answer_cleanly() {
    let s = start().await;
    for p in [
        "",
        "%ff%fe",
        "sys/policies/acl/%2e%2e",
        "auth/idp/users/",
        "sys//policies",
    ] {
        let r = s.root(Method::GET, p, None).await;
        assert!(r.status < 500, "{p}: {}", r.status);
    }
}
