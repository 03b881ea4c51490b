//! Conformance tests for spec rows that the per-area test files left uncovered (spec A §2.1,
//! §2.5, §4.4, §4.6; spec C §2.2, §4.2, §8). See the "Conformance" table of
//! `sandbox/README-secrets.md`.

use crate::secrets_support;

use quartet_sandbox::SandboxOptions;
use reqwest::Method;
use secrets_support::*;
use serde_json::json;

const DR: &str = "sys/replication/dr";

async fn two_clusters() -> S {
    start_with(SandboxOptions {
        secrets_clusters: 2,
        ..SandboxOptions::ephemeral()
    })
    .await
}

#[tokio::test]
async fn secondary_token_wrap_info_has_token_ttl_creation_time_and_wrapped_accessor() {
    let s = two_clusters().await;
    let r = s
        .root(
            Method::POST,
            &format!("{DR}/primary/enable"),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = s
        .root(
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(json!({"id": "w1", "ttl": "10m"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let w = &r.body["wrap_info"];
    assert!(w["token"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(w["ttl"], 600);
    assert!(w["creation_time"]
        .as_str()
        .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok()));
    assert!(w.get("wrapped_accessor").is_some_and(|a| a.is_string()));
    assert!(r.body["data"].is_null());
}

#[tokio::test]
async fn secondary_token_with_a_public_key_is_returned_in_data_and_activates_the_secondary() {
    let s = two_clusters().await;
    s.root(
        Method::POST,
        &format!("{DR}/primary/enable"),
        Some(json!({})),
    )
    .await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/generate-public-key"),
            Some(&s.root.clone()),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let key = r.body["data"]["secondary_public_key"]
        .as_str()
        .expect("a public key")
        .to_string();
    assert!(!key.is_empty());
    let r = s
        .root(
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(json!({"id": "pk1", "secondary_public_key": key})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(r.body["wrap_info"].is_null(), "not response-wrapped");
    let token = r.body["data"]["token"]
        .as_str()
        .expect("data.token")
        .to_string();
    // primary_api_addr, ca_file and ca_path are accepted with their defaults.
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/enable"),
            Some(&s.root.clone()),
            Some(json!({"token": token, "primary_api_addr": "", "ca_file": "", "ca_path": ""})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = s
        .call_at(1, Method::GET, &format!("{DR}/status"), None, None)
        .await;
    assert_eq!(r.body["data"]["mode"], "secondary");
}

#[tokio::test]
async fn lease_revoke_accepts_the_lease_id_in_the_url() {
    let s = start().await;
    let r = s
        .admin(
            Method::POST,
            "leases",
            Some(json!({"prefix": "ad/library/x/check-out/", "count": 1, "ttl": 3600})),
        )
        .await;
    assert!(r.status < 300, "{:?}", r.body);
    let keys = s
        .root(list(), "sys/leases/lookup/ad/library/x/check-out", None)
        .await;
    let id = format!(
        "ad/library/x/check-out/{}",
        keys.body["data"]["keys"][0].as_str().expect("a lease")
    );
    let r = s
        .root(
            Method::PUT,
            &format!("sys/leases/revoke/{id}"),
            Some(json!({"sync": true})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s
        .root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": id})),
        )
        .await;
    assert_eq!(r.status, 400, "the lease is gone: {:?}", r.body);
}

#[tokio::test]
async fn egp_path_star_applies_to_every_request_and_is_listed_as_a_glob() {
    let s = start().await;
    let r = s
        .root(
            Method::PUT,
            "sys/policies/egp/all",
            Some(json!({"policy": "main = rule { true }", "enforcement_level": "advisory", "paths": "*"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s.root(Method::GET, "sys/policies/egp/all", None).await;
    assert_eq!(r.body["data"]["paths"], json!(["*"]));
    let r = s.root(list(), "sys/policies/egp", None).await;
    assert_eq!(r.body["data"]["name_path_map"]["all"][0]["glob"], true);
    assert_eq!(r.body["data"]["name_path_map"]["all"][0]["path"], "");
}

async fn ad_setup(s: &S) {
    for (upn, dn) in [
        ("admin@example.com", "CN=admin,DC=example,DC=com"),
        ("lib1@example.com", "CN=lib1,DC=example,DC=com"),
    ] {
        let r = s
            .admin(
                Method::PUT,
                &format!("ad/accounts/{upn}"),
                Some(json!({"dn": dn, "password": "pw"})),
            )
            .await;
        assert!(r.status < 300);
    }
}

#[tokio::test]
async fn ad_config_timeouts_default_to_30_and_90_seconds_and_accept_duration_strings() {
    // The timeouts are accepted as seconds or duration strings but are write-only: the real
    // engine's config read (plugin/path_config.go) does not return them.
    let s = start().await;
    ad_setup(&s).await;
    let base = json!({"binddn": "CN=admin,DC=example,DC=com", "bindpass": "pw"});
    let r = s.root(Method::POST, "ad/config", Some(base.clone())).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s.root(Method::GET, "ad/config", None).await;
    assert!(r.body["data"].get("connection_timeout").is_none());
    assert!(r.body["data"].get("request_timeout").is_none());
    assert_eq!(r.body["data"]["url"], "ldap://127.0.0.1");
    let mut body = base;
    body["connection_timeout"] = json!("45s");
    body["request_timeout"] = json!(120);
    let r = s.root(Method::POST, "ad/config", Some(body.clone())).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    body["connection_timeout"] = json!("forty");
    let r = s.root(Method::POST, "ad/config", Some(body)).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
}

#[tokio::test]
async fn library_ttl_zero_lends_without_a_time_limit() {
    let s = start().await;
    ad_setup(&s).await;
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"binddn": "CN=admin,DC=example,DC=com", "bindpass": "pw"})),
    )
    .await;
    let r = s
        .root(
            Method::POST,
            "ad/library/open",
            Some(json!({"service_account_names": "lib1@example.com", "ttl": 0, "max_ttl": 0})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s.root(Method::GET, "ad/library/open", None).await;
    assert_eq!(r.body["data"]["ttl"], 0);
    assert_eq!(r.body["data"]["max_ttl"], 0);
    let r = s
        .root(
            Method::POST,
            "ad/library/open/check-out",
            Some(json!({"ttl": 0})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["lease_duration"], 0);
    let id = r.body["lease_id"].as_str().unwrap().to_string();
    let r = s
        .root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": id})),
        )
        .await;
    assert_eq!(r.status, 200);
    // Longer than the 24h default lending period: the lease does not end the loan.
    assert!(
        r.body["data"]["ttl"].as_i64().is_some_and(|t| t > 86400),
        "{:?}",
        r.body
    );
    let r = s.root(Method::GET, "ad/library/open/status", None).await;
    assert_eq!(r.body["data"]["lib1@example.com"]["available"], false);
}

#[tokio::test]
async fn check_in_without_names_checks_in_the_only_borrowed_account() {
    let s = start().await;
    ad_setup(&s).await;
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"binddn": "CN=admin,DC=example,DC=com", "bindpass": "pw"})),
    )
    .await;
    s.root(
        Method::POST,
        "ad/library/one",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    let r = s.root(Method::POST, "ad/library/one/check-out", None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = s.root(Method::POST, "ad/library/one/check-in", None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["check_ins"], json!(["lib1@example.com"]));
    // A second check-in succeeds but lists nothing (spec C §3).
    let r = s
        .root(
            Method::POST,
            "ad/library/one/check-in",
            Some(json!({"service_account_names": "lib1@example.com"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["check_ins"], json!([]));
}

/// The identity-provider method configured with `extra` config fields and a provider user
/// `alice` (password `pw`); returns the login answer.
async fn idp_login_with(s: &S, extra: serde_json::Value) -> R {
    let mut cfg = json!({"org_name": "acme"});
    if let (Some(c), Some(e)) = (cfg.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            c.insert(k.clone(), v.clone());
        }
    }
    let r = s.root(Method::POST, "auth/idp/config", Some(cfg)).await;
    assert!(r.status < 300, "{:?}", r.body);
    let r = s
        .admin(
            Method::PUT,
            "idp/users/alice",
            Some(json!({"password": "pw"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    s.call(
        Method::POST,
        "auth/idp/login/alice",
        None,
        Some(json!({"password": "pw"})),
    )
    .await
}

#[tokio::test]
async fn idp_token_period_makes_periodic_login_tokens() {
    let s = start().await;
    let r = idp_login_with(&s, json!({"token_period": "10m"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["auth"]["lease_duration"], 600);
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    let r = s
        .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
        .await;
    assert_eq!(r.body["data"]["period"], 600);
}

#[tokio::test]
async fn idp_token_explicit_max_ttl_caps_renewal() {
    let s = start().await;
    let r = idp_login_with(
        &s,
        json!({"token_ttl": 60, "token_max_ttl": "10h", "token_explicit_max_ttl": "2m"}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["auth"]["lease_duration"], 60);
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    let r = s
        .call(
            Method::POST,
            "auth/token/renew-self",
            Some(&tok),
            Some(json!({"increment": "5h"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let d = r.body["auth"]["lease_duration"].as_i64().unwrap();
    assert!(d <= 120, "capped by token_explicit_max_ttl, got {d}");
}

#[tokio::test]
async fn idp_token_num_uses_limits_login_tokens() {
    let s = start().await;
    let r = idp_login_with(&s, json!({"token_num_uses": 2})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    let r = s
        .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["num_uses"], 1, "this call used one");
    let r = s
        .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
        .await;
    assert_eq!(r.status, 200, "the last use still works");
    let r = s
        .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
        .await;
    assert_eq!(r.status, 403, "then the token is gone");
}

#[tokio::test]
async fn idp_token_bound_cidrs_refuse_logins_from_other_addresses() {
    let s = start().await;
    let r = idp_login_with(&s, json!({"token_bound_cidrs": "10.0.0.0/8"})).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    let r = idp_login_with(
        &s,
        json!({"token_bound_cidrs": ["10.0.0.0/8", "127.0.0.0/8"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}
