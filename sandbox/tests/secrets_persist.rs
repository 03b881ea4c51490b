//! `--state-dir`: the secrets service's state survives a restart.

use crate::secrets_support;

use quartet_sandbox::SandboxOptions;
use reqwest::Method;
use secrets_support::*;
use serde_json::json;

fn opts(dir: &std::path::Path) -> SandboxOptions {
    SandboxOptions {
        state_dir: Some(dir.to_path_buf()),
        secrets_clusters: 2,
        ..SandboxOptions::ephemeral()
    }
}

#[tokio::test]
async fn state_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("quartet-secrets-{}", uuid::Uuid::new_v4()));
    let s = start_with(opts(&dir)).await;
    s.root(
        Method::PUT,
        "sys/policies/acl/kept",
        Some(json!({"policy": "path \"a\" { capabilities = [\"read\"] }"})),
    )
    .await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "acme", "api_token": "t"})),
    )
    .await;
    s.admin(Method::PUT, "idp/users/u", Some(json!({"password": "pw"})))
        .await;
    s.admin(
        Method::PUT,
        "ad/accounts/admin@example.com",
        Some(json!({"dn": "CN=admin,DC=example,DC=com", "password": "p"})),
    )
    .await;
    let login = s
        .call(
            Method::POST,
            "auth/idp/login/u",
            None,
            Some(json!({"password": "pw"})),
        )
        .await;
    let tok = login.body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    s.root(Method::POST, "sys/replication/dr/primary/enable", None)
        .await;
    let cluster_id = s
        .root(Method::GET, "sys/replication/dr/status", None)
        .await
        .body["data"]["cluster_id"]
        .clone();
    let key = s
        .root(Method::GET, "transform/wrapping_key", None)
        .await
        .body["data"]["public_key"]
        .clone();
    let keys = s.admin(Method::GET, "keys", None).await.body["keys"].clone();
    s.sb.shutdown();

    let s = start_with(opts(&dir)).await;
    assert_eq!(
        s.root(Method::GET, "sys/policies/acl/kept", None)
            .await
            .status,
        200
    );
    assert_eq!(
        s.root(Method::GET, "auth/idp/config", None).await.body["data"]["org_name"],
        "acme"
    );
    assert_eq!(
        s.call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
            .await
            .status,
        200
    );
    assert_eq!(
        s.call(
            Method::POST,
            "auth/idp/login/u",
            None,
            Some(json!({"password": "pw"}))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        s.admin(Method::GET, "ad/accounts/admin@example.com", None)
            .await
            .status,
        200
    );
    let st = s
        .root(Method::GET, "sys/replication/dr/status", None)
        .await
        .body["data"]
        .clone();
    assert_eq!(st["mode"], "primary");
    assert_eq!(st["cluster_id"], cluster_id);
    assert_eq!(
        s.root(Method::GET, "transform/wrapping_key", None)
            .await
            .body["data"]["public_key"],
        key
    );
    assert_eq!(s.admin(Method::GET, "keys", None).await.body["keys"], keys);
    s.sb.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn without_state_dir_nothing_is_kept() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/gone",
        Some(json!({"policy": "path \"a\" { capabilities = [\"read\"] }"})),
    )
    .await;
    s.sb.shutdown();
    let s = start().await;
    assert_eq!(
        s.root(Method::GET, "sys/policies/acl/gone", None)
            .await
            .status,
        404
    );
}
