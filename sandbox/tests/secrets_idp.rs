//! Conformance of the identity-provider auth method (spec A §2.2–2.4, §4.2), `sys/auth`,
//! tokens and ACL enforcement for non-root tokens.

use crate::secrets_support;

use reqwest::Method;
use secrets_support::*;
use serde_json::{json, Value};

async fn configured() -> S {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "auth/idp/config",
            Some(json!({"org_name": "acme"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    s
}

async fn provider_user(s: &S, name: &str, body: Value) -> Value {
    let r = s
        .admin(Method::PUT, &format!("idp/users/{name}"), Some(body))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body
}

async fn login(s: &S, user: &str, body: Value) -> R {
    s.call(
        Method::POST,
        &format!("auth/idp/login/{user}"),
        None,
        Some(body),
    )
    .await
}

/// A token carrying only the given policies.
async fn token_with(s: &S, policies: &[&str]) -> String {
    let r = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": policies})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["auth"]["client_token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn idp_config_write_then_read_returns_every_field_but_api_token() {
    let s = start().await;
    let body = json!({
        "org_name": "acme", "api_token": "secret-api-token", "base_url": "example.com",
        "bypass_idp_mfa": true, "token_ttl": "1h", "token_max_ttl": 7200, "token_policies": "a,b",
        "token_bound_cidrs": ["127.0.0.0/8"], "token_explicit_max_ttl": "3h", "token_no_default_policy": true,
        "token_num_uses": 3, "token_period": 0, "token_type": "service"
    });
    // With MFA bypass on, the write answers 200 with the real method's warning.
    let r = s.root(Method::POST, "auth/idp/config", Some(body)).await;
    assert_eq!(r.status, 200);
    assert!(r.body["warnings"][0]
        .as_str()
        .unwrap()
        .contains("MFA bypass"));
    let r = s.root(Method::GET, "auth/idp/config", None).await;
    assert_eq!(r.status, 200);
    let d = &r.body["data"];
    assert_eq!(d["org_name"], "acme");
    assert_eq!(d["base_url"], "example.com");
    assert_eq!(d["bypass_idp_mfa"], true);
    assert_eq!(d["token_ttl"], 3600);
    assert_eq!(d["token_max_ttl"], 7200);
    assert_eq!(d["token_explicit_max_ttl"], 10800);
    assert_eq!(d["token_policies"], json!(["a", "b"]));
    assert_eq!(d["token_bound_cidrs"], json!(["127.0.0.0/8"]));
    assert_eq!(d["token_no_default_policy"], true);
    assert_eq!(d["token_num_uses"], 3);
    assert_eq!(d["token_period"], 0);
    assert_eq!(d["token_type"], "service");
    assert!(d.get("api_token").is_none(), "api_token is write-only");
    assert!(!r.body.to_string().contains("secret-api-token"));
    // OpenBao 2.7 sends no `mount_type` in the envelope.
    assert!(r.body.get("mount_type").is_none());
}

#[tokio::test]
async fn idp_config_read_defaults_token_type_to_default() {
    let s = configured().await;
    let d = s.root(Method::GET, "auth/idp/config", None).await.body["data"].clone();
    assert_eq!(d["token_type"], "default");
    assert_eq!(d["token_policies"], json!([]));
    assert_eq!(d["token_ttl"], 0);
    // `base_url`, `ttl` and `max_ttl` are read back only when set.
    assert!(d.get("base_url").is_none());
    assert!(d.get("ttl").is_none() && d.get("max_ttl").is_none());
    assert!(d.get("policies").is_none());
    assert_eq!(d["bypass_idp_mfa"], false);
}

#[tokio::test]
async fn idp_config_requires_org_name() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "auth/idp/config",
            Some(json!({"api_token": "x"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(!r.body["errors"][0].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn idp_config_absent_is_404() {
    let s = start().await;
    assert_eq!(
        s.root(Method::GET, "auth/idp/config", None).await.status,
        404
    );
}

#[tokio::test]
async fn idp_config_rejects_bad_token_fields() {
    let s = start().await;
    for body in [
        json!({"org_name": "a", "token_type": "weird"}),
        json!({"org_name": "a", "token_ttl": "forever"}),
        json!({"org_name": "a", "token_ttl": 100, "token_max_ttl": 10}),
        json!({"org_name": "a", "token_bound_cidrs": "not-a-cidr"}),
        json!({"org_name": "a", "token_num_uses": -1}),
    ] {
        let r = s
            .root(Method::POST, "auth/idp/config", Some(body.clone()))
            .await;
        assert_eq!(r.status, 400, "{body}");
    }
}

#[tokio::test]
async fn idp_config_update_keeps_unspecified_fields() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "acme", "token_ttl": 60})),
    )
    .await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"token_max_ttl": "2m"})),
    )
    .await;
    let d = s.root(Method::GET, "auth/idp/config", None).await.body["data"].clone();
    assert_eq!(d["org_name"], "acme");
    assert_eq!(d["token_ttl"], 60);
    assert_eq!(d["token_max_ttl"], 120);
}

#[tokio::test]
async fn idp_config_honours_create_versus_update_capability() {
    let s = start().await;
    let upd = r#"path "auth/idp/config" { capabilities = ["update", "read"] }"#;
    let cre = r#"path "auth/idp/config" { capabilities = ["create", "read"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/upd",
        Some(json!({"policy": upd})),
    )
    .await;
    s.root(
        Method::PUT,
        "sys/policies/acl/cre",
        Some(json!({"policy": cre})),
    )
    .await;
    let t_upd = token_with(&s, &["upd"]).await;
    let t_cre = token_with(&s, &["cre"]).await;
    // No config yet: writing is a create.
    let r = s
        .call(
            Method::POST,
            "auth/idp/config",
            Some(&t_upd),
            Some(json!({"org_name": "a"})),
        )
        .await;
    assert_eq!(r.status, 403);
    let r = s
        .call(
            Method::POST,
            "auth/idp/config",
            Some(&t_cre),
            Some(json!({"org_name": "a"})),
        )
        .await;
    assert_eq!(r.status, 204);
    // Config exists: writing is an update.
    let r = s
        .call(
            Method::POST,
            "auth/idp/config",
            Some(&t_cre),
            Some(json!({"org_name": "b"})),
        )
        .await;
    assert_eq!(r.status, 403);
    let r = s
        .call(
            Method::POST,
            "auth/idp/config",
            Some(&t_upd),
            Some(json!({"org_name": "b"})),
        )
        .await;
    assert_eq!(r.status, 204);
}

#[tokio::test]
async fn idp_users_write_read_list_delete() {
    let s = configured().await;
    let r = s
        .root(
            Method::POST,
            "auth/idp/users/alice",
            Some(json!({"groups": "eng, ops", "policies": "P1,p2"})),
        )
        .await;
    assert_eq!(r.status, 204);
    let r = s.root(Method::GET, "auth/idp/users/alice", None).await;
    assert_eq!(r.body["data"]["groups"], json!(["eng", "ops"]));
    // User policies are stored as given (the token store lower-cases them at login).
    assert_eq!(r.body["data"]["policies"], json!(["P1", "p2"]));
    s.root(
        Method::POST,
        "auth/idp/users/bob",
        Some(json!({"policies": ["x"]})),
    )
    .await;
    let r = s.root(list(), "auth/idp/users", None).await;
    assert_eq!(r.body["data"]["keys"], json!(["alice", "bob"]));
    assert_eq!(
        s.root(Method::DELETE, "auth/idp/users/alice", None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "auth/idp/users/alice", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn idp_groups_write_read_list_delete() {
    let s = configured().await;
    assert_eq!(
        s.root(
            Method::POST,
            "auth/idp/groups/eng",
            Some(json!({"policies": "a,b"}))
        )
        .await
        .status,
        204
    );
    let r = s.root(Method::GET, "auth/idp/groups/eng", None).await;
    assert_eq!(r.body["data"], json!({"policies": ["a", "b"]}));
    assert_eq!(
        s.root(list(), "auth/idp/groups", None).await.body["data"]["keys"],
        json!(["eng"])
    );
    assert_eq!(
        s.root(Method::DELETE, "auth/idp/groups/eng", None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "auth/idp/groups/eng", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn empty_user_and_group_lists_are_404() {
    let s = configured().await;
    assert_eq!(s.root(list(), "auth/idp/users", None).await.status, 404);
    assert_eq!(s.root(list(), "auth/idp/groups", None).await.status, 404);
}

#[tokio::test]
async fn login_returns_auth_with_policies_from_config_user_and_groups() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "acme", "token_policies": "base", "token_ttl": "1h"})),
    )
    .await;
    s.root(
        Method::POST,
        "auth/idp/users/alice",
        Some(json!({"groups": "eng", "policies": "own"})),
    )
    .await;
    s.root(
        Method::POST,
        "auth/idp/groups/eng",
        Some(json!({"policies": "team"})),
    )
    .await;
    provider_user(&s, "alice", json!({"password": "pw"})).await;
    let r = login(&s, "alice", json!({"password": "pw"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"], Value::Null);
    let auth = &r.body["auth"];
    assert!(auth["client_token"].as_str().unwrap().len() > 10);
    assert!(!auth["accessor"].as_str().unwrap().is_empty());
    assert_eq!(auth["policies"], json!(["base", "default", "own", "team"]));
    assert_eq!(auth["metadata"]["username"], "alice");
    assert_eq!(auth["metadata"]["policies"], "own,team");
    assert_eq!(auth["lease_duration"], 3600);
    assert_eq!(auth["renewable"], true);
}

#[tokio::test]
async fn login_token_can_look_itself_up() {
    let s = configured().await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = login(&s, "u", json!({"password": "pw"})).await;
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    let r = s
        .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["id"], tok.as_str());
    assert_eq!(r.body["data"]["path"], "auth/idp/login/u");
    assert_eq!(r.body["data"]["policies"], json!(["default"]));
    assert!(r.body["data"]["ttl"].as_i64().unwrap() > 0);
}

#[tokio::test]
async fn login_with_wrong_password_is_400() {
    let s = configured().await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = login(&s, "u", json!({"password": "nope"})).await;
    assert_eq!(r.status, 400);
    assert!(r.body["errors"][0]
        .as_str()
        .unwrap()
        .contains("auth failed"));
    let r = login(&s, "ghost", json!({"password": "pw"})).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn login_before_config_fails() {
    let s = start().await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(login(&s, "u", json!({"password": "pw"})).await.status, 400);
}

#[tokio::test]
async fn login_with_unknown_provider_is_400() {
    let s = configured().await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = login(&s, "u", json!({"password": "pw", "provider": "duo"})).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn provider_groups_are_used_only_with_api_token() {
    let s = configured().await;
    s.root(
        Method::POST,
        "auth/idp/groups/remote",
        Some(json!({"policies": "rp"})),
    )
    .await;
    provider_user(&s, "u", json!({"password": "pw", "groups": ["remote"]})).await;
    let r = login(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(r.body["auth"]["policies"], json!(["default"]));
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"api_token": "t"})),
    )
    .await;
    let r = login(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(r.body["auth"]["policies"], json!(["default", "rp"]));
}

#[tokio::test]
async fn token_no_default_policy_leaves_out_default() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a", "token_no_default_policy": true, "token_policies": ["x"]})),
    )
    .await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = login(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(r.body["auth"]["policies"], json!(["x"]));
}

#[tokio::test]
async fn login_with_totp_passcode_succeeds_and_wrong_passcode_fails() {
    let s = configured().await;
    provider_user(
        &s,
        "u",
        json!({"password": "pw", "totp": {"provider": "GOOGLE"}}),
    )
    .await;
    let code = s.admin(Method::GET, "idp/users/u/totp", None).await.body["code"]
        .as_str()
        .unwrap()
        .to_string();
    let r = login(
        &s,
        "u",
        json!({"password": "pw", "totp": code, "provider": "google"}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let r = login(&s, "u", json!({"password": "pw", "totp": wrong})).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn mfa_enrolled_user_without_a_usable_factor_fails() {
    let s = configured().await;
    provider_user(
        &s,
        "u",
        json!({"password": "pw", "totp": {"provider": "OKTA"}}),
    )
    .await;
    // A TOTP factor without a passcode: the real method asks for the passcode.
    let r = login(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"][0],
        "'totp' passcode parameter is required to perform MFA"
    );
    // Only factors of another provider than the preferred one: no usable factor.
    let r = login(
        &s,
        "u",
        json!({"password": "pw", "provider": "GOOGLE", "totp": "123456"}),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body["errors"][0]
        .as_str()
        .unwrap()
        .contains("required in order to perform MFA"));
}

#[tokio::test]
async fn unsupported_provider_is_named_with_the_supported_ones() {
    let s = configured().await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = login(&s, "u", json!({"password": "pw", "provider": "duo"})).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"][0],
        "provider DUO is not among the supported ones [GOOGLE OKTA]"
    );
}

#[tokio::test]
async fn bypass_idp_mfa_skips_the_factor() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a", "bypass_idp_mfa": true})),
    )
    .await;
    provider_user(
        &s,
        "u",
        json!({"password": "pw", "totp": {}, "status": "PASSWORD_EXPIRED"}),
    )
    .await;
    assert_eq!(login(&s, "u", json!({"password": "pw"})).await.status, 200);
}

#[tokio::test]
async fn push_login_waits_for_approval_and_verify_returns_the_number() {
    let s = configured().await;
    provider_user(
        &s,
        "u",
        json!({"password": "pw", "push": {"response": "manual", "correct_answer": 42}}),
    )
    .await;
    let url = s.url.clone();
    let handle = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{url}/v1/auth/idp/login/u"))
            .json(&json!({"password": "pw", "nonce": "n-123"}))
            .send()
            .await
            .unwrap()
    });
    // While the login waits, the number challenge is readable through verify/:nonce.
    let mut answer = Value::Null;
    for _ in 0..100 {
        let r = s
            .call(Method::GET, "auth/idp/verify/n-123", None, None)
            .await;
        if r.status == 200 {
            answer = r.body["data"]["correct_answer"].clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(answer, json!(42));
    assert_eq!(
        s.admin(Method::POST, "idp/push/u", Some(json!({"answer": 42})))
            .await
            .status,
        204
    );
    let resp = handle.await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert!(v["auth"]["client_token"].is_string());
    // The nonce is forgotten after the login.
    assert_eq!(
        s.call(Method::GET, "auth/idp/verify/n-123", None, None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn rejected_push_fails_the_login() {
    let s = configured().await;
    provider_user(
        &s,
        "u",
        json!({"password": "pw", "push": {"response": "reject", "delay_ms": 50}}),
    )
    .await;
    let r = login(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!(["multi-factor authentication denied"])
    );
}

#[tokio::test]
async fn verify_of_unknown_nonce_is_404() {
    let s = configured().await;
    assert_eq!(
        s.call(Method::GET, "auth/idp/verify/nothing", None, None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn sys_auth_enables_lists_and_disables_idp_mounts() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "sys/auth/corp",
            Some(json!({"type": "idp", "description": "corp"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s.root(Method::GET, "sys/auth", None).await;
    assert_eq!(r.body["data"]["corp/"]["type"], "idp");
    assert_eq!(r.body["data"]["idp/"]["type"], "idp");
    assert_eq!(r.body["data"]["token/"]["type"], "token");
    // The new mount works end to end.
    s.root(
        Method::POST,
        "auth/corp/config",
        Some(json!({"org_name": "c"})),
    )
    .await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = s
        .call(
            Method::POST,
            "auth/corp/login/u",
            None,
            Some(json!({"password": "pw"})),
        )
        .await;
    assert_eq!(r.status, 200);
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    // Enabling twice is refused; other types are unknown.
    assert_eq!(
        s.root(Method::POST, "sys/auth/corp", Some(json!({"type": "idp"})))
            .await
            .status,
        400
    );
    assert_eq!(
        s.root(Method::POST, "sys/auth/x", Some(json!({"type": "nope"})))
            .await
            .status,
        400
    );
    assert_eq!(
        s.root(Method::POST, "sys/auth/x", Some(json!({})))
            .await
            .status,
        400
    );
    // Disabling removes it and revokes its tokens.
    assert_eq!(
        s.root(Method::DELETE, "sys/auth/corp", None).await.status,
        204
    );
    assert!(s.root(Method::GET, "sys/auth", None).await.body["data"]
        .get("corp/")
        .is_none());
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn sys_auth_enable_needs_sudo() {
    let s = start().await;
    let p = r#"path "sys/auth/*" { capabilities = ["create", "update", "read", "delete"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/nosudo",
        Some(json!({"policy": p})),
    )
    .await;
    let t = token_with(&s, &["nosudo"]).await;
    let r = s
        .call(
            Method::POST,
            "sys/auth/x",
            Some(&t),
            Some(json!({"type": "idp"})),
        )
        .await;
    assert_eq!(r.status, 403);
    let p = r#"path "sys/auth/*" { capabilities = ["create", "update", "sudo"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/sudo",
        Some(json!({"policy": p})),
    )
    .await;
    let t = token_with(&s, &["sudo"]).await;
    let r = s
        .call(
            Method::POST,
            "sys/auth/x",
            Some(&t),
            Some(json!({"type": "idp"})),
        )
        .await;
    assert_eq!(r.status, 204);
}

#[tokio::test]
async fn acl_rules_are_enforced_for_non_root_tokens() {
    let s = start().await;
    let p = r#"path "sys/policies/acl/*" { capabilities = ["read", "list"] }
               path "sys/policies/acl/secret" { capabilities = ["deny"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/reader",
        Some(json!({"policy": p})),
    )
    .await;
    s.root(
        Method::PUT,
        "sys/policies/acl/secret",
        Some(json!({"policy": p})),
    )
    .await;
    let t = token_with(&s, &["reader"]).await;
    assert_eq!(
        s.call(Method::GET, "sys/policies/acl/reader", Some(&t), None)
            .await
            .status,
        200
    );
    assert_eq!(
        s.call(list(), "sys/policies/acl", Some(&t), None)
            .await
            .status,
        200
    );
    assert_eq!(
        s.call(Method::GET, "sys/policies/acl/secret", Some(&t), None)
            .await
            .status,
        403
    );
    let r = s
        .call(
            Method::PUT,
            "sys/policies/acl/new",
            Some(&t),
            Some(json!({"policy": p})),
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body, json!({"errors": ["permission denied"]}));
}

#[tokio::test]
async fn segment_wildcard_rules_are_enforced() {
    let s = configured().await;
    let p = r#"path "auth/+/users/*" { capabilities = ["read"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/w",
        Some(json!({"policy": p})),
    )
    .await;
    s.root(
        Method::POST,
        "auth/idp/users/x",
        Some(json!({"policies": "a"})),
    )
    .await;
    let t = token_with(&s, &["w"]).await;
    assert_eq!(
        s.call(Method::GET, "auth/idp/users/x", Some(&t), None)
            .await
            .status,
        200
    );
    assert_eq!(
        s.call(Method::GET, "auth/idp/groups/x", Some(&t), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn updated_policy_takes_effect_immediately() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/p",
        Some(json!({"policy": "path \"sys/policies/acl/*\" { capabilities = [\"read\"] }"})),
    )
    .await;
    let t = token_with(&s, &["p"]).await;
    assert_eq!(
        s.call(Method::GET, "sys/policies/acl/p", Some(&t), None)
            .await
            .status,
        200
    );
    s.root(
        Method::PUT,
        "sys/policies/acl/p",
        Some(json!({"policy": "path \"nothing\" { capabilities = [\"read\"] }"})),
    )
    .await;
    assert_eq!(
        s.call(Method::GET, "sys/policies/acl/p", Some(&t), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn deleted_policy_on_a_token_acts_as_empty() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/p",
        Some(json!({"policy": "path \"sys/policies/acl/*\" { capabilities = [\"read\"] }"})),
    )
    .await;
    let t = token_with(&s, &["p"]).await;
    s.root(Method::DELETE, "sys/policies/acl/p", None).await;
    assert_eq!(
        s.call(Method::GET, "sys/policies/acl/default", Some(&t), None)
            .await
            .status,
        403
    );
    // The token itself still works for what the default policy allows.
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&t), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn child_token_policies_must_be_a_subset_of_the_parent() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/maker",
        Some(json!({"policy": "path \"auth/token/create\" { capabilities = [\"update\"] }"})),
    )
    .await;
    let t = token_with(&s, &["maker"]).await;
    let r = s
        .call(
            Method::POST,
            "auth/token/create",
            Some(&t),
            Some(json!({"policies": ["admin"]})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .call(
            Method::POST,
            "auth/token/create",
            Some(&t),
            Some(json!({"policies": ["maker"]})),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn limited_use_token_is_revoked_after_its_last_use() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"num_uses": 2})),
        )
        .await;
    let t = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&t), None)
            .await
            .status,
        200
    );
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&t), None)
            .await
            .status,
        200
    );
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&t), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn token_accessor_list_needs_sudo() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/l",
        Some(json!({"policy": "path \"auth/token/accessors/*\" { capabilities = [\"list\"] }"})),
    )
    .await;
    let t = token_with(&s, &["l"]).await;
    assert_eq!(
        s.call(list(), "auth/token/accessors", Some(&t), None)
            .await
            .status,
        403
    );
    assert_eq!(
        s.root(list(), "auth/token/accessors", None).await.status,
        200
    );
}

#[tokio::test]
async fn revoked_token_is_refused() {
    let s = start().await;
    let t = token_with(&s, &[]).await;
    assert_eq!(
        s.call(Method::POST, "auth/token/revoke-self", Some(&t), None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&t), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn token_renew_self_extends_by_the_increment() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"ttl": "10m"})),
        )
        .await;
    let t = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    let r = s
        .call(
            Method::POST,
            "auth/token/renew-self",
            Some(&t),
            Some(json!({"increment": "1h"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["auth"]["lease_duration"], 3600);
}

#[tokio::test]
async fn capabilities_self_reports_the_acl() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/c",
        Some(json!({"policy": "path \"secret/*\" { capabilities = [\"read\", \"list\"] }"})),
    )
    .await;
    let t = token_with(&s, &["c"]).await;
    let r = s
        .call(
            Method::POST,
            "sys/capabilities-self",
            Some(&t),
            Some(json!({"paths": ["secret/a"]})),
        )
        .await;
    assert_eq!(r.body["data"]["secret/a"], json!(["list", "read"]));
}

#[tokio::test]
async fn idp_user_write_replaces_groups_and_policies() {
    let s = configured().await;
    s.root(
        Method::POST,
        "auth/idp/users/u",
        Some(json!({"groups": "a", "policies": "p"})),
    )
    .await;
    s.root(
        Method::POST,
        "auth/idp/users/u",
        Some(json!({"policies": "q"})),
    )
    .await;
    let r = s.root(Method::GET, "auth/idp/users/u", None).await;
    assert_eq!(r.body["data"], json!({"groups": [], "policies": ["q"]}));
}

#[tokio::test]
async fn idp_group_names_are_case_insensitive_and_stored_lower_cased() {
    let s = configured().await;
    s.root(
        Method::POST,
        "auth/idp/groups/Admins",
        Some(json!({"policies": "B,a"})),
    )
    .await;
    assert_eq!(
        s.root(list(), "auth/idp/groups", None).await.body["data"]["keys"],
        json!(["admins"])
    );
    let r = s.root(Method::GET, "auth/idp/groups/ADMINS", None).await;
    assert_eq!(r.body["data"]["policies"], json!(["a", "b"]));
    assert_eq!(
        s.root(Method::DELETE, "auth/idp/groups/AdMiNs", None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "auth/idp/groups/admins", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn idp_users_and_groups_are_written_with_the_update_capability() {
    let s = configured().await;
    let p = r#"path "auth/idp/users/*" { capabilities = ["update"] }
               path "auth/idp/groups/*" { capabilities = ["update"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/w",
        Some(json!({"policy": p})),
    )
    .await;
    let t = token_with(&s, &["w"]).await;
    assert_eq!(
        s.call(
            Method::POST,
            "auth/idp/users/new",
            Some(&t),
            Some(json!({"policies": "a"}))
        )
        .await
        .status,
        204
    );
    assert_eq!(
        s.call(
            Method::POST,
            "auth/idp/groups/new",
            Some(&t),
            Some(json!({"policies": "a"}))
        )
        .await
        .status,
        204
    );
}

#[tokio::test]
async fn login_warns_when_the_provider_has_no_groups_for_the_user() {
    let s = configured().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"api_token": "t"})),
    )
    .await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = login(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(r.status, 200);
    assert!(r.body["warnings"][0]
        .as_str()
        .unwrap()
        .contains("no IdP groups found"));
}

#[tokio::test]
async fn renewal_reads_the_current_token_ttl_and_max_ttl() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a", "token_ttl": "1h", "token_max_ttl": "10h"})),
    )
    .await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = login(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(r.body["auth"]["lease_duration"], 3600);
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"token_ttl": "2h", "token_max_ttl": "10h"})),
    )
    .await;
    let r = s
        .call(
            Method::POST,
            "auth/token/renew-self",
            Some(&tok),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["auth"]["lease_duration"], 7200);
    // The max TTL read at renewal caps the increment.
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"token_ttl": "1h", "token_max_ttl": "90m"})),
    )
    .await;
    let r = s
        .call(
            Method::POST,
            "auth/token/renew-self",
            Some(&tok),
            Some(json!({"increment": "5h"})),
        )
        .await;
    let d = r.body["auth"]["lease_duration"].as_i64().unwrap();
    assert!((5390..=5400).contains(&d), "{d}");
}

#[tokio::test]
async fn batch_token_type_issues_batch_tokens() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a", "token_type": "batch"})),
    )
    .await;
    provider_user(&s, "u", json!({"password": "pw"})).await;
    let r = login(&s, "u", json!({"password": "pw"})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["auth"]["token_type"], "batch");
    assert_eq!(r.body["auth"]["renewable"], false);
    let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
    assert!(tok.starts_with("hvb."));
    let r = s
        .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
        .await;
    assert_eq!(r.body["data"]["type"], "batch");
}

#[tokio::test]
async fn idp_config_token_lists_are_kept_as_given_only_trimmed() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "auth/idp/config",
            Some(json!({"org_name": "a", "token_policies": " Zeta, alpha ,alpha,B", "policies": "ignored"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let d = s.root(Method::GET, "auth/idp/config", None).await.body["data"].clone();
    assert_eq!(d["token_policies"], json!(["Zeta", "alpha", "alpha", "B"]));
    assert!(d.get("policies").is_none(), "no `policies` alias");
}

#[tokio::test]
async fn idp_config_reads_ttl_max_ttl_and_base_url_only_when_set() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a", "ttl": "1h", "max_ttl": "2h", "base_url": "okta.com"})),
    )
    .await;
    let d = s.root(Method::GET, "auth/idp/config", None).await.body["data"].clone();
    assert_eq!(d["ttl"], 3600);
    assert_eq!(d["max_ttl"], 7200);
    assert_eq!(d["token_ttl"], 3600);
    assert_eq!(d["token_max_ttl"], 7200);
    assert_eq!(d["base_url"], "okta.com");
}

#[tokio::test]
async fn idp_config_batch_tokens_refuse_a_use_count_or_a_period_with_tokenutil_messages() {
    let s = start().await;
    for (extra, msg) in [
        (
            json!({"token_num_uses": 3}),
            "'token_type' cannot be 'batch' or 'default_batch' when set to generate tokens with limited use count",
        ),
        (
            json!({"token_period": "1h"}),
            "'token_type' cannot be 'batch' or 'default_batch' when set to generate periodic tokens",
        ),
    ] {
        let mut body = json!({"org_name": "a", "token_type": "batch"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = s.root(Method::POST, "auth/idp/config", Some(body)).await;
        assert_eq!((r.status, r.body.clone()), (400, json!({"errors": [msg]})));
    }
}

async fn idp_login_token(s: &S) -> String {
    provider_user(s, "rene", json!({"password": "pw1"})).await;
    let r = login(s, "rene", json!({"password": "pw1"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["auth"]["client_token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn renewing_an_idp_login_token_re_authenticates_the_user() {
    let s = configured().await;
    let t = idp_login_token(&s).await;
    let r = s
        .call(
            Method::POST,
            "auth/token/renew-self",
            Some(&t),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // The password changes at the provider: the renewal fails.
    provider_user(&s, "rene", json!({"password": "pw2"})).await;
    let r = s
        .call(
            Method::POST,
            "auth/token/renew-self",
            Some(&t),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.clone()),
        (400, json!({"errors": ["idp auth failed"]}))
    );
}

#[tokio::test]
async fn renewing_an_idp_login_token_refuses_changed_policies() {
    let s = configured().await;
    let t = idp_login_token(&s).await;
    s.root(
        Method::POST,
        "auth/idp/users/rene",
        Some(json!({"policies": "extra"})),
    )
    .await;
    let r = s
        .call(
            Method::POST,
            "auth/token/renew-self",
            Some(&t),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, 500, "{:?}", r.body);
    assert!(r.body["errors"][0]
        .as_str()
        .unwrap()
        .contains("policies have changed, not renewing"));
}

#[tokio::test]
async fn renewing_an_idp_login_token_re_reads_the_token_period() {
    let s = configured().await;
    let t = idp_login_token(&s).await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "acme", "token_period": "30m"})),
    )
    .await;
    let r = s
        .call(
            Method::POST,
            "auth/token/renew-self",
            Some(&t),
            Some(json!({"increment": "5h"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["auth"]["lease_duration"], 1800);
    let r = s
        .call(Method::GET, "auth/token/lookup-self", Some(&t), None)
        .await;
    assert_eq!(r.body["data"]["period"], 1800);
}
