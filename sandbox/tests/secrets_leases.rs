//! Conformance of the lease endpoints (spec A §2.6, §4.4, §8).

use crate::secrets_support;

use reqwest::Method;
use secrets_support::*;
use serde_json::{json, Value};

async fn synthetic(s: &S, body: Value) -> Vec<String> {
    let r = s.admin(Method::POST, "leases", Some(body)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    serde_json::from_value(r.body["lease_ids"].clone()).unwrap()
}

/// Logs `user` in through the identity provider; returns (token, lease id of the token).
async fn login_lease(s: &S, user: &str) -> (String, String) {
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a"})),
    )
    .await;
    s.admin(
        Method::PUT,
        &format!("idp/users/{user}"),
        Some(json!({"password": "pw"})),
    )
    .await;
    let r = s
        .call(
            Method::POST,
            &format!("auth/idp/login/{user}"),
            None,
            Some(json!({"password": "pw"})),
        )
        .await;
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    let r = s
        .root(
            list(),
            &format!("sys/leases/lookup/auth/idp/login/{user}/"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let key = r.body["data"]["keys"][0].as_str().unwrap();
    (tok, format!("auth/idp/login/{user}/{key}"))
}

#[tokio::test]
async fn lease_lookup_returns_the_lease_record() {
    let s = start().await;
    let ids = synthetic(&s, json!({"prefix": "ad/library/x/check-out/", "ttl": 600})).await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": ids[0]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let d = &r.body["data"];
    assert_eq!(d["id"], ids[0].as_str());
    assert!(d["issue_time"].as_str().unwrap().ends_with('Z'));
    assert!(d["expire_time"].is_string());
    assert!(d["last_renewal_time"].is_null());
    assert_eq!(d["renewable"], true);
    let ttl = d["ttl"].as_i64().unwrap();
    assert!((598..=600).contains(&ttl), "{ttl}");
}

#[tokio::test]
async fn token_leases_come_from_logins() {
    let s = start().await;
    let (_tok, lease) = login_lease(&s, "alice").await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": lease})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(r.body["data"]["ttl"].as_i64().unwrap() > 0);
}

#[tokio::test]
async fn lease_lookup_needs_a_known_lease_id() {
    let s = start().await;
    let r = s
        .root(Method::PUT, "sys/leases/lookup", Some(json!({})))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"], json!(["lease_id must be specified"]));
    let r = s
        .root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": "nope/1"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"], json!(["invalid lease"]));
}

#[tokio::test]
async fn lease_list_by_prefix_returns_keys_and_sub_prefixes() {
    let s = start().await;
    let ids = synthetic(&s, json!({"prefix": "ad/library/x/check-out/", "count": 2})).await;
    let r = s.root(list(), "sys/leases/lookup/ad/", None).await;
    assert_eq!(r.body["data"]["keys"], json!(["library/"]));
    let r = s
        .root(list(), "sys/leases/lookup/ad/library/x/check-out", None)
        .await;
    let mut keys: Vec<String> = serde_json::from_value(r.body["data"]["keys"].clone()).unwrap();
    keys.sort();
    let mut want: Vec<String> = ids
        .iter()
        .map(|i| i.rsplit('/').next().unwrap().to_string())
        .collect();
    want.sort();
    assert_eq!(keys, want);
}

#[tokio::test]
async fn lease_list_of_an_empty_prefix_is_404() {
    let s = start().await;
    let r = s.root(list(), "sys/leases/lookup/nothing/", None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body, json!({"errors": []}));
}

#[tokio::test]
async fn lease_list_needs_sudo() {
    let s = start().await;
    synthetic(&s, json!({"prefix": "ad/x/"})).await;
    let p = r#"path "sys/leases/lookup/*" { capabilities = ["list", "update"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/l",
        Some(json!({"policy": p})),
    )
    .await;
    let t = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": ["l"]})),
        )
        .await
        .body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        s.call(list(), "sys/leases/lookup/ad/", Some(&t), None)
            .await
            .status,
        403
    );
    let p = r#"path "sys/leases/lookup/*" { capabilities = ["list", "sudo"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/l",
        Some(json!({"policy": p})),
    )
    .await;
    assert_eq!(
        s.call(list(), "sys/leases/lookup/ad/", Some(&t), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn renew_extends_the_lease_by_the_increment() {
    let s = start().await;
    let ids = synthetic(&s, json!({"prefix": "ad/x/", "ttl": 60})).await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/renew",
            Some(json!({"lease_id": ids[0], "increment": 3600})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["lease_id"], ids[0].as_str());
    assert_eq!(r.body["renewable"], true);
    assert_eq!(r.body["lease_duration"], 3600);
    let r = s
        .root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": ids[0]})),
        )
        .await;
    assert!(r.body["data"]["ttl"].as_i64().unwrap() > 3500);
    // OpenBao 2.7 answers `last_renewal` (no `last_renewal_time`) in RFC 3339 with nanoseconds.
    assert!(r.body["data"]["last_renewal"].is_string());
    assert!(r.body["data"].get("last_renewal_time").is_none());
}

#[tokio::test]
async fn renew_without_increment_uses_the_lease_ttl_and_is_capped_by_max_ttl() {
    let s = start().await;
    let ids = synthetic(&s, json!({"prefix": "ad/x/", "ttl": 60, "max_ttl": 120})).await;
    let r = s
        .root(Method::PUT, &format!("sys/leases/renew/{}", ids[0]), None)
        .await;
    assert_eq!(r.body["lease_duration"], 60);
    let r = s
        .root(
            Method::PUT,
            "sys/leases/renew",
            Some(json!({"lease_id": ids[0], "increment": "1h"})),
        )
        .await;
    let d = r.body["lease_duration"].as_i64().unwrap();
    assert!((118..=120).contains(&d), "{d}");
}

#[tokio::test]
async fn non_renewable_and_token_leases_cannot_be_renewed() {
    let s = start().await;
    let ids = synthetic(&s, json!({"prefix": "ad/x/", "renewable": false})).await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/renew",
            Some(json!({"lease_id": ids[0]})),
        )
        .await;
    assert_eq!(r.status, 400);
    let (_t, lease) = login_lease(&s, "bob").await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/renew",
            Some(json!({"lease_id": lease})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.body["errors"][0].as_str().unwrap().contains("token"));
}

#[tokio::test]
async fn revoke_is_synchronous_by_default_and_queued_with_sync_false() {
    let s = start().await;
    let ids = synthetic(&s, json!({"prefix": "ad/x/", "count": 2})).await;
    // The real default is `sync=true` (OpenBao 2.7), whatever spec A's table says.
    let r = s
        .root(
            Method::PUT,
            "sys/leases/revoke",
            Some(json!({"lease_id": ids[0]})),
        )
        .await;
    assert_eq!(r.status, 204);
    let r = s
        .root(
            Method::PUT,
            "sys/leases/revoke",
            Some(json!({"lease_id": ids[1], "sync": false})),
        )
        .await;
    assert_eq!(r.status, 202);
    for id in &ids {
        assert_eq!(
            s.root(
                Method::PUT,
                "sys/leases/lookup",
                Some(json!({"lease_id": id}))
            )
            .await
            .status,
            400
        );
    }
    // Unknown leases revoke without error.
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/leases/revoke",
            Some(json!({"lease_id": "x/y", "sync": true}))
        )
        .await
        .status,
        204
    );
    assert_eq!(
        s.root(Method::PUT, "sys/leases/revoke", Some(json!({})))
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn lease_list_needs_sudo_too() {
    let s = start().await;
    let p = r#"path "sys/leases" { capabilities = ["read"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/r",
        Some(json!({"policy": p})),
    )
    .await;
    let t = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": ["r"]})),
        )
        .await
        .body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        s.call(Method::GET, "sys/leases?type=irrevocable", Some(&t), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn tidy_answers_202_with_a_warning() {
    let s = start().await;
    let r = s.root(Method::POST, "sys/leases/tidy", None).await;
    assert_eq!(r.status, 202);
    assert!(r.body["warnings"][0]
        .as_str()
        .unwrap()
        .contains("Tidy operation successfully started"));
}

#[tokio::test]
async fn irrevocable_leases_cannot_be_renewed() {
    let s = start().await;
    let ids = synthetic(&s, json!({"prefix": "ad/x/", "irrevocable": true})).await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/renew",
            Some(json!({"lease_id": ids[0]})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!(["lease is expired and has failed previous revocation attempts"])
    );
}

#[tokio::test]
async fn revoking_a_token_lease_revokes_the_token() {
    let s = start().await;
    let (tok, lease) = login_lease(&s, "carol").await;
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
            .await
            .status,
        200
    );
    s.root(
        Method::PUT,
        "sys/leases/revoke",
        Some(json!({"lease_id": lease, "sync": true})),
    )
    .await;
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn failed_revocation_makes_the_lease_irrevocable_and_revoke_force_removes_it() {
    let s = start().await;
    let ids = synthetic(&s, json!({"prefix": "ad/broken/", "fail_revoke": true})).await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/revoke",
            Some(json!({"lease_id": ids[0], "sync": true})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .root(Method::GET, "sys/leases/count?type=irrevocable", None)
        .await;
    assert_eq!(r.body["data"]["lease_count"], 1);
    // revoke-prefix does not get rid of it; revoke-force does.
    s.root(
        Method::PUT,
        "sys/leases/revoke-prefix/ad/broken",
        Some(json!({"sync": true})),
    )
    .await;
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": ids[0]}))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        s.root(Method::PUT, "sys/leases/revoke-force/ad/broken", None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": ids[0]}))
        )
        .await
        .status,
        400
    );
}

#[tokio::test]
async fn revoke_prefix_revokes_matching_leases_only() {
    let s = start().await;
    let a = synthetic(&s, json!({"prefix": "ad/a/", "count": 2})).await;
    let b = synthetic(&s, json!({"prefix": "ad/b/"})).await;
    let r = s
        .root(Method::PUT, "sys/leases/revoke-prefix/ad/a", None)
        .await;
    assert_eq!(r.status, 204, "synchronous by default");
    for id in &a {
        assert_eq!(
            s.root(
                Method::PUT,
                "sys/leases/lookup",
                Some(json!({"lease_id": id}))
            )
            .await
            .status,
            400
        );
    }
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": b[0]}))
        )
        .await
        .status,
        200
    );
}

#[tokio::test]
async fn revoke_prefix_revokes_tokens_by_path() {
    let s = start().await;
    let (tok, _) = login_lease(&s, "dave").await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/revoke-prefix/auth/idp/login",
            Some(json!({"sync": true})),
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn revoke_prefix_and_revoke_force_need_sudo() {
    let s = start().await;
    let p = r#"path "sys/leases/*" { capabilities = ["update", "create"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/l",
        Some(json!({"policy": p})),
    )
    .await;
    let t = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": ["l"]})),
        )
        .await
        .body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        s.call(Method::PUT, "sys/leases/revoke-prefix/ad", Some(&t), None)
            .await
            .status,
        403
    );
    assert_eq!(
        s.call(Method::PUT, "sys/leases/revoke-force/ad", Some(&t), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn tidy_revokes_leases_whose_token_is_gone() {
    let s = start().await;
    let t = s
        .root(Method::POST, "auth/token/create", Some(json!({})))
        .await
        .body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    let ids = synthetic(&s, json!({"prefix": "ad/x/", "owner": "no-such-token"})).await;
    let kept = synthetic(&s, json!({"prefix": "ad/y/", "owner": t})).await;
    assert_eq!(
        s.root(Method::POST, "sys/leases/tidy", None).await.status,
        202
    );
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": ids[0]}))
        )
        .await
        .status,
        400
    );
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": kept[0]}))
        )
        .await
        .status,
        200
    );
}

#[tokio::test]
async fn lease_count_counts_irrevocable_leases_per_mount() {
    let s = start().await;
    synthetic(
        &s,
        json!({"prefix": "ad/x/", "count": 3, "irrevocable": true}),
    )
    .await;
    synthetic(
        &s,
        json!({"prefix": "transform/y/", "count": 2, "irrevocable": true}),
    )
    .await;
    synthetic(&s, json!({"prefix": "ad/z/", "count": 5})).await;
    let r = s
        .root(
            Method::GET,
            "sys/leases/count?type=irrevocable&include_child_namespaces=false",
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["lease_count"], 5);
    let ad = s.root(Method::GET, "sys/mounts", None).await.body["data"]["ad/"]["accessor"]
        .as_str()
        .unwrap()
        .to_string();
    let tr = s.root(Method::GET, "sys/mounts", None).await.body["data"]["transform/"]["accessor"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(r.body["data"]["counts"][&ad], 3);
    assert_eq!(r.body["data"]["counts"][&tr], 2);
}

#[tokio::test]
async fn lease_count_and_list_support_only_type_irrevocable() {
    let s = start().await;
    assert_eq!(
        s.root(Method::GET, "sys/leases/count?type=all", None)
            .await
            .status,
        404
    );
    assert_eq!(
        s.root(Method::GET, "sys/leases/count", None).await.status,
        404
    );
    assert_eq!(
        s.root(Method::GET, "sys/leases?type=active", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn lease_list_defaults_to_10000_with_a_warning() {
    let s = start().await;
    synthetic(
        &s,
        json!({"prefix": "ad/many/", "count": 10_001, "irrevocable": true}),
    )
    .await;
    let r = s
        .root(Method::GET, "sys/leases?type=irrevocable", None)
        .await;
    assert_eq!(r.status, 200);
    // lease_count counts what is returned, as in the real service.
    assert_eq!(r.body["data"]["lease_count"], 10_000);
    assert_eq!(r.body["data"]["leases"].as_array().unwrap().len(), 10_000);
    assert!(r.body["warnings"].as_array().is_some_and(|w| !w.is_empty()));
    let r = s
        .root(Method::GET, "sys/leases?type=irrevocable&limit=none", None)
        .await;
    assert_eq!(r.body["data"]["leases"].as_array().unwrap().len(), 10_001);
    assert_eq!(r.body["data"]["lease_count"], 10_001);
    assert!(r.body["warnings"].is_null());
}

#[tokio::test]
async fn lease_list_honours_a_numeric_limit() {
    let s = start().await;
    synthetic(
        &s,
        json!({"prefix": "ad/x/", "count": 5, "irrevocable": true}),
    )
    .await;
    let r = s
        .root(Method::GET, "sys/leases?type=irrevocable&limit=2", None)
        .await;
    assert_eq!(r.body["data"]["leases"].as_array().unwrap().len(), 2);
    assert!(r.body["warnings"][0].is_string());
    let lease = &r.body["data"]["leases"][0];
    assert!(lease["lease_id"].as_str().unwrap().starts_with("ad/x/"));
    assert!(lease["mount_id"].is_string());
    assert!(lease["error"].is_string());
    let r = s
        .root(Method::GET, "sys/leases?type=irrevocable&limit=5", None)
        .await;
    assert!(r.body["warnings"].is_null());
    assert_eq!(
        s.root(Method::GET, "sys/leases?type=irrevocable&limit=abc", None)
            .await
            .status,
        500
    );
    assert_eq!(
        s.root(Method::GET, "sys/leases?type=irrevocable&limit=0", None)
            .await
            .status,
        500
    );
}
