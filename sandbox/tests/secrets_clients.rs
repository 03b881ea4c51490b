//! Regression tests for calls real clients (hvac, the Go API client) make that the first
//! version of the sandbox did not serve: token renew by accessor and revoke-orphan,
//! capabilities of another token, entities by name and entity lookup.

use crate::secrets_support;

use reqwest::Method;
use secrets_support::*;
use serde_json::{json, Value};

async fn child_token(s: &S, parent: &str, policies: &[&str]) -> (String, String) {
    let r = s
        .call(
            Method::POST,
            "auth/token/create",
            Some(parent),
            Some(json!({"policies": policies, "ttl": "1h"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    (
        r.body["auth"]["client_token"].as_str().unwrap().to_string(),
        r.body["auth"]["accessor"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn token_renew_accessor_renews_without_revealing_the_token() {
    let s = start().await;
    let (_tok, acc) = child_token(&s, &s.root, &["default"]).await;
    let r = s
        .root(
            Method::POST,
            "auth/token/renew-accessor",
            Some(json!({"accessor": acc, "increment": "10m"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["auth"]["accessor"], acc.as_str());
    assert_eq!(r.body["auth"]["client_token"], "");
    assert_eq!(r.body["auth"]["lease_duration"], 600);
    let r = s
        .root(
            Method::POST,
            "auth/token/renew-accessor",
            Some(json!({"accessor": "nope"})),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn token_revoke_orphan_needs_sudo_and_leaves_children_as_orphans() {
    let s = start().await;
    let r = s
        .root(
            Method::PUT,
            "sys/policies/acl/maker",
            Some(json!({"policy": "path \"auth/token/create\" { capabilities = [\"update\"] }"})),
        )
        .await;
    assert_eq!(r.status, 204);
    let (parent, _) = child_token(&s, &s.root, &["maker"]).await;
    let (child, _) = child_token(&s, &parent, &["maker"]).await;
    // Without sudo: refused.
    let r = s
        .call(
            Method::POST,
            "auth/token/revoke-orphan",
            Some(&parent),
            Some(json!({"token": parent})),
        )
        .await;
    assert_eq!(r.status, 403);
    let r = s
        .root(
            Method::POST,
            "auth/token/revoke-orphan",
            Some(json!({"token": parent})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s
        .root(
            Method::POST,
            "auth/token/lookup",
            Some(json!({"token": parent})),
        )
        .await;
    assert_eq!(r.status, 400, "the parent is gone");
    let r = s
        .root(
            Method::POST,
            "auth/token/lookup",
            Some(json!({"token": child})),
        )
        .await;
    assert_eq!(r.status, 200, "the child survives");
    assert_eq!(r.body["data"]["orphan"], true);
}

#[tokio::test]
async fn capabilities_of_another_token_and_of_an_accessor() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/reader",
        Some(json!({"policy": "path \"transform/*\" { capabilities = [\"read\", \"list\"] }"})),
    )
    .await;
    let (tok, acc) = child_token(&s, &s.root, &["reader"]).await;
    let r = s
        .root(
            Method::POST,
            "sys/capabilities",
            Some(json!({"token": tok, "paths": ["transform/role/x"]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["transform/role/x"], json!(["list", "read"]));
    assert_eq!(r.body["capabilities"], json!(["list", "read"]));
    let r = s
        .root(
            Method::POST,
            "sys/capabilities-accessor",
            Some(json!({"accessor": acc, "paths": "sys/mounts"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["sys/mounts"], json!(["deny"]));
    // Several paths: one key per path, and no backwards-compatible `capabilities` key.
    let r = s
        .root(
            Method::POST,
            "sys/capabilities",
            Some(json!({"token": tok, "paths": ["transform/a", "sys/mounts"]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["transform/a"], json!(["list", "read"]));
    assert!(r.body["data"].get("capabilities").is_none(), "{:?}", r.body);
    let r = s
        .root(
            Method::POST,
            "sys/capabilities",
            Some(json!({"token": "unknown", "paths": ["x"]})),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn entities_can_be_written_read_and_deleted_by_name() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "identity/entity/name/alice",
            Some(json!({"policies": ["default"]})),
        )
        .await;
    assert_eq!(r.status, 200, "creation answers the id: {:?}", r.body);
    let id = r.body["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["data"]["name"], "alice");
    let r = s
        .root(
            Method::POST,
            "identity/entity/name/alice",
            Some(json!({"policies": ["p1"]})),
        )
        .await;
    assert_eq!(r.status, 204, "an update answers 204");
    let r = s
        .root(Method::GET, "identity/entity/name/alice", None)
        .await;
    assert_eq!(r.body["data"]["id"], id.as_str());
    assert_eq!(r.body["data"]["policies"], json!(["p1"]));
    let r = s
        .root(Method::DELETE, "identity/entity/name/alice", None)
        .await;
    assert_eq!(r.status, 204);
    let r = s
        .root(Method::GET, "identity/entity/name/alice", None)
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn entity_lookup_by_name_or_id_answers_204_when_absent() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "identity/entity",
            Some(json!({"name": "bob"})),
        )
        .await;
    let id = r.body["data"]["id"].as_str().unwrap().to_string();
    let r = s
        .root(
            Method::POST,
            "identity/lookup/entity",
            Some(json!({"name": "bob"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["id"], id.as_str());
    let r = s
        .root(
            Method::POST,
            "identity/lookup/entity",
            Some(json!({"id": id})),
        )
        .await;
    assert_eq!(r.body["data"]["name"], "bob");
    let r = s
        .root(
            Method::POST,
            "identity/lookup/entity",
            Some(json!({"name": "nobody"})),
        )
        .await;
    assert_eq!(r.status, 204);
    let r = s
        .root(Method::POST, "identity/lookup/entity", Some(json!({})))
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn queued_revocations_answer_202_with_an_empty_body() {
    let s = start().await;
    let r = s
        .admin(
            Method::POST,
            "leases",
            Some(json!({"prefix": "ad/library/q/check-out/", "count": 2, "ttl": 3600})),
        )
        .await;
    assert!(r.status < 300, "{:?}", r.body);
    let ids: Vec<String> = serde_json::from_value(r.body["lease_ids"].clone()).unwrap();
    for (path, body) in [
        // The real default is `sync=true` (204); a queued revocation is asked for explicitly.
        (
            "sys/leases/revoke",
            json!({"lease_id": ids[0], "sync": false}),
        ),
        (
            "sys/leases/revoke-prefix/ad/library/q",
            json!({"sync": false}),
        ),
    ] {
        let resp = s
            .client
            .put(format!("{}/v1/{path}", s.url))
            .header("X-Secrets-Token", &s.root)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 202, "{path}");
        assert_eq!(
            resp.text().await.unwrap(),
            "",
            "{path}: no body, not `null`"
        );
    }
}

#[tokio::test]
async fn list_query_parameter_is_parsed_like_go_booleans() {
    let s = start().await;
    for v in ["true", "T", "1"] {
        let r = s
            .root(Method::GET, &format!("sys/policies/acl?list={v}"), None)
            .await;
        assert_eq!(r.status, 200, "list={v}");
        assert!(r.body["data"]["keys"].is_array(), "list={v}");
    }
    // `list=false` is a plain read (the collection path has no read handler).
    let r = s
        .root(Method::GET, "sys/policies/acl?list=false", None)
        .await;
    assert_ne!(r.status, 200);
    let r = s.root(Method::GET, "sys/policies/acl?list=yes", None).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body, json!({"errors": []}));
}

/// hvac's `auth.token.renew` of a login token, then `sys.read_lease` of its lease: OpenBao
/// renews the token through its lease, so the lookup shows `last_renewal` (it was `null`).
#[tokio::test]
async fn renewing_a_login_token_sets_its_lease_last_renewal() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "auth/idp/config",
            Some(json!({"org_name": "a", "token_ttl": "1h"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s
        .admin(
            Method::PUT,
            "idp/users/renewer",
            Some(json!({"password": "pw"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = s
        .call(
            Method::POST,
            "auth/idp/login/renewer",
            None,
            Some(json!({"password": "pw"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    let keys = s
        .root(list(), "sys/leases/lookup/auth/idp/login/renewer", None)
        .await;
    let lease = format!(
        "auth/idp/login/renewer/{}",
        keys.body["data"]["keys"][0].as_str().unwrap()
    );
    let before = s
        .root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": lease})),
        )
        .await;
    assert_eq!(before.body["data"]["last_renewal"], Value::Null);
    let r = s
        .root(
            Method::POST,
            "auth/token/renew",
            Some(json!({"token": tok, "increment": "10m"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let after = s
        .root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": lease})),
        )
        .await;
    assert!(
        after.body["data"]["last_renewal"].is_string(),
        "{:?}",
        after.body
    );
}
