//! Conformance of the directory secrets engine (spec C §2.2, §3, §4.2, §7, §8).

use crate::secrets_support;

use reqwest::Method;
use secrets_support::*;
use serde_json::{json, Value};

const ADMIN_DN: &str = "CN=admin,CN=Users,DC=example,DC=com";

async fn account(s: &S, upn: &str, pw: &str) {
    let name = upn.split('@').next().unwrap();
    let r = s
        .admin(
            Method::PUT,
            &format!("ad/accounts/{upn}"),
            Some(json!({"dn": format!("CN={name},OU=Svc,DC=example,DC=com"), "password": pw})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

async fn dir_password(s: &S, upn: &str) -> String {
    s.admin(Method::GET, &format!("ad/accounts/{upn}"), None)
        .await
        .body["password"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A directory with an admin and service accounts, and the engine configured to bind as admin.
async fn setup() -> S {
    let s = start().await;
    let r = s
        .admin(
            Method::PUT,
            "ad/accounts/admin@example.com",
            Some(json!({"dn": ADMIN_DN, "password": "adminpw"})),
        )
        .await;
    assert_eq!(r.status, 204);
    for a in [
        "svc1@example.com",
        "lib1@example.com",
        "lib2@example.com",
        "lib3@example.com",
    ] {
        account(&s, a, "initial").await;
    }
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"binddn": ADMIN_DN, "bindpass": "adminpw", "userdn": "DC=example,DC=com"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    s
}

async fn token_for(s: &S) -> String {
    let r = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": ["lib"]})),
        )
        .await;
    r.body["auth"]["client_token"].as_str().unwrap().to_string()
}

async fn lib_policy(s: &S) {
    let p = r#"path "ad/library/*" { capabilities = ["read", "update", "create"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/lib",
        Some(json!({"policy": p})),
    )
    .await;
}

#[tokio::test]
async fn ad_config_read_has_defaults_and_never_the_bindpass() {
    let s = setup().await;
    let r = s.root(Method::GET, "ad/config", None).await;
    assert_eq!(r.status, 200);
    let d = &r.body["data"];
    assert_eq!(d["binddn"], ADMIN_DN);
    assert_eq!(d["url"], "ldap://127.0.0.1");
    assert_eq!(d["length"], 64);
    assert_eq!(d["userdn"], "DC=example,DC=com");
    for k in [
        "certificate",
        "insecure_tls",
        "max_ttl",
        "starttls",
        "tls_max_version",
        "tls_min_version",
        "ttl",
        "upndomain",
    ] {
        assert!(d.get(k).is_some(), "missing {k}");
    }
    assert!(d.get("bindpass").is_none());
    assert!(!r.body.to_string().contains("adminpw"));
}

#[tokio::test]
async fn ad_config_needs_a_way_to_derive_the_bind_dn() {
    // ldaputil's Validate: binddn+bindpass, userdn or upndomain; a plain error (500) otherwise.
    let s = start().await;
    for body in [json!({"bindpass": "x"}), json!({"binddn": "x"})] {
        let r = s.root(Method::POST, "ad/config", Some(body)).await;
        assert_eq!(r.status, 500);
        assert!(r.body.to_string().contains("cannot derive UserBindDN"));
    }
    assert_eq!(s.root(Method::GET, "ad/config", None).await.status, 404);
}

#[tokio::test]
async fn ad_config_accepts_userdn_without_bindpass() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"binddn": ADMIN_DN, "userdn": "DC=example,DC=com"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

#[tokio::test]
async fn ad_config_read_has_no_timeouts_and_has_the_pre111_flag() {
    let s = setup().await;
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"connection_timeout": "10s", "request_timeout": 20})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let d = s.root(Method::GET, "ad/config", None).await.body["data"].clone();
    assert!(d.get("connection_timeout").is_none(), "{d}");
    assert!(d.get("request_timeout").is_none(), "{d}");
    assert!(d.get("last_bind_password_rotation").is_none(), "{d}");
    assert_eq!(d["use_pre111_group_cn_behavior"], false);
    assert_eq!(d["last_rotation_tolerance"], 5);
}

#[tokio::test]
async fn ad_config_refuses_an_unknown_tls_version() {
    let s = setup().await;
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"tls_min_version": "tls99"})),
        )
        .await;
    assert_eq!(r.status, 500);
    assert!(r.body.to_string().contains("invalid 'tls_min_version'"));
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"tls_min_version": "tls13", "tls_max_version": "tls13"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

#[tokio::test]
async fn ad_role_names_are_lower_cased() {
    let s = setup().await;
    let r = s
        .root(
            Method::POST,
            "ad/roles/MyRole",
            Some(json!({"service_account_name": "svc1@example.com"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let keys = s.root(Method::GET, "ad/roles", None).await.body["data"]["keys"].clone();
    assert_eq!(keys, json!(["myrole"]));
    assert_eq!(
        s.root(Method::GET, "ad/roles/myrole", None).await.status,
        200
    );
    assert_eq!(
        s.root(Method::GET, "ad/roles/MYROLE", None).await.status,
        200
    );
    assert_eq!(
        s.root(Method::DELETE, "ad/roles/MyRole", None).await.status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "ad/roles/myrole", None).await.status,
        404
    );
}

#[tokio::test]
async fn ad_status_codes_follow_the_real_engine() {
    let s = start().await;
    // No config: plain errors.
    for (m, p) in [
        (Method::POST, "ad/rotate-root"),
        (Method::POST, "ad/rotate-role/x"),
        (Method::POST, "ad/roles/x"),
    ] {
        let r = s
            .root(m, p, Some(json!({"service_account_name": "a@b"})))
            .await;
        assert_eq!(r.status, 500, "{p}");
        assert!(
            r.body.to_string().contains("the config is currently unset"),
            "{p}"
        );
    }
    let s = setup().await;
    assert_eq!(s.root(Method::GET, "ad/creds/nope", None).await.status, 404);
    let r = s.root(Method::POST, "ad/rotate-role/nope", None).await;
    assert_eq!(r.status, 500);
    assert!(r.body.to_string().contains("role nope does not exist"));
    let r = s
        .root(
            Method::POST,
            "ad/library/x",
            Some(json!({"service_account_names": ["ghost@example.com"]})),
        )
        .await;
    assert_eq!(r.status, 500);
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"bindpass": "wrong"})),
    )
    .await;
    let r = s.root(Method::POST, "ad/rotate-root", None).await;
    assert_eq!(r.status, 500);
}

#[tokio::test]
async fn renewing_a_check_out_without_increment_gives_the_sets_current_ttl() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"], "ttl": "1h", "max_ttl": "10h"})),
    )
    .await;
    let r = s
        .root(Method::POST, "ad/library/team/check-out", None)
        .await;
    let lease = r.body["lease_id"].as_str().unwrap().to_string();
    s.root(Method::POST, "ad/library/team", Some(json!({"ttl": "2h"})))
        .await;
    let r = s
        .root(
            Method::PUT,
            "sys/leases/renew",
            Some(json!({"lease_id": lease})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["lease_duration"], 7200);
}

#[tokio::test]
async fn ad_config_password_policy_excludes_length_and_formatter() {
    // The real engine rejects invalid password settings with a plain error (500).
    let s = start().await;
    let b = |extra: Value| {
        let mut v = json!({"binddn": "x", "bindpass": "y", "password_policy": "p"});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let r = s
        .root(Method::POST, "ad/config", Some(b(json!({"length": 20}))))
        .await;
    assert_eq!(r.status, 500);
    assert!(r.body["errors"][0]
        .as_str()
        .unwrap()
        .contains("cannot set password_policy and either length or formatter"));
    assert_eq!(
        s.root(
            Method::POST,
            "ad/config",
            Some(b(json!({"formatter": "a{{PASSWORD}}"})))
        )
        .await
        .status,
        500
    );
    assert_eq!(
        s.root(Method::POST, "ad/config", Some(b(json!({}))))
            .await
            .status,
        204
    );
}

#[tokio::test]
async fn ad_config_length_has_a_minimum_of_14() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"binddn": "x", "bindpass": "y", "length": 13})),
        )
        .await;
    assert_eq!(r.status, 500);
    assert!(r.body["errors"][0]
        .as_str()
        .unwrap()
        .contains("please boost length to 14"));
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"binddn": "x", "bindpass": "y", "length": "14"})),
        )
        .await;
    assert_eq!(r.status, 204);
}

#[tokio::test]
async fn ad_config_formatter_needs_exactly_one_placeholder() {
    let s = start().await;
    for f in ["nothing-at-all-here", "{{PASSWORD}}{{PASSWORD}}"] {
        let r = s
            .root(
                Method::POST,
                "ad/config",
                Some(json!({"binddn": "x", "bindpass": "y", "formatter": f})),
            )
            .await;
        assert_eq!(r.status, 500, "{f}");
        assert!(
            r.body["errors"][0]
                .as_str()
                .unwrap()
                .contains("password replacement field"),
            "{f}"
        );
    }
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"binddn": "x", "bindpass": "y", "formatter": "corp-{{PASSWORD}}"})),
        )
        .await;
    assert_eq!(r.status, 204);
}

#[tokio::test]
async fn ad_config_ttl_cannot_exceed_max_ttl_and_defaults_to_the_system_ttl() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "ad/config",
            Some(json!({"binddn": "x", "bindpass": "y", "ttl": 100, "max_ttl": 10})),
        )
        .await;
    assert_eq!(r.status, 500);
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"binddn": "x", "bindpass": "y"})),
    )
    .await;
    let d = s.root(Method::GET, "ad/config", None).await.body["data"].clone();
    assert_eq!(d["ttl"], 2_764_800);
    assert_eq!(d["max_ttl"], 2_764_800);
    assert_eq!(d["last_rotation_tolerance"], 5);
}

#[tokio::test]
async fn ad_config_delete_removes_it() {
    let s = setup().await;
    assert_eq!(s.root(Method::DELETE, "ad/config", None).await.status, 204);
    assert_eq!(s.root(Method::GET, "ad/config", None).await.status, 404);
}

#[tokio::test]
async fn ad_role_needs_an_account_that_exists_in_the_directory() {
    let s = setup().await;
    let r = s
        .root(
            Method::POST,
            "ad/roles/app",
            Some(json!({"service_account_name": "ghost@example.com"})),
        )
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(
        s.root(Method::POST, "ad/roles/app", Some(json!({})))
            .await
            .status,
        500
    );
    let r = s
        .root(
            Method::POST,
            "ad/roles/app",
            Some(json!({"service_account_name": "svc1@example.com", "ttl": 100})),
        )
        .await;
    assert_eq!(r.status, 204);
    let d = s.root(Method::GET, "ad/roles/app", None).await.body["data"].clone();
    assert_eq!(d["service_account_name"], "svc1@example.com");
    assert_eq!(d["ttl"], 100);
    assert!(d["password_last_set"].is_string());
    assert!(d.get("last_svc_rotation").is_none());
    assert!(d.get("last_vault_rotation").is_none());
}

#[tokio::test]
async fn ad_role_ttl_defaults_to_config_and_cannot_exceed_max_ttl() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"ttl": 60, "max_ttl": 120})),
    )
    .await;
    s.root(
        Method::POST,
        "ad/roles/a",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    assert_eq!(
        s.root(Method::GET, "ad/roles/a", None).await.body["data"]["ttl"],
        60
    );
    let r = s
        .root(
            Method::POST,
            "ad/roles/b",
            Some(json!({"service_account_name": "svc1@example.com", "ttl": 121})),
        )
        .await;
    assert_eq!(r.status, 500);
}

#[tokio::test]
async fn ad_roles_list_by_get_and_list() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/roles/a",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    assert_eq!(
        s.root(Method::GET, "ad/roles", None).await.body["data"]["keys"],
        json!(["a"])
    );
    assert_eq!(
        s.root(list(), "ad/roles", None).await.body["data"]["keys"],
        json!(["a"])
    );
    assert_eq!(s.root(Method::DELETE, "ad/roles/a", None).await.status, 204);
    assert_eq!(s.root(Method::GET, "ad/roles/a", None).await.status, 404);
}

#[tokio::test]
async fn creds_rotate_on_first_read_with_the_prefixed_generated_password() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    let r = s.root(Method::GET, "ad/creds/app", None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let d = &r.body["data"];
    assert_eq!(d["username"], "svc1");
    let pw = d["current_password"].as_str().unwrap();
    assert!(pw.starts_with("?@09AZ"), "{pw}");
    assert_eq!(pw.len(), 64);
    assert!(d.get("last_password").is_none(), "{d}");
    assert_eq!(dir_password(&s, "svc1@example.com").await, pw);
    // Within the ttl the same password is returned.
    let again = s.root(Method::GET, "ad/creds/app", None).await;
    assert_eq!(again.body["data"]["current_password"], pw);
    let first = s.root(Method::GET, "ad/roles/app", None).await.body["data"]["last_vault_rotation"]
        .as_str()
        .unwrap()
        .to_string();
    // Kept with its fraction, as the engine's Go time.Time: a rotation within the same second
    // reads differently.
    let r = s.root(Method::POST, "ad/rotate-role/app", None).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let second = s.root(Method::GET, "ad/roles/app", None).await.body["data"]
        ["last_vault_rotation"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(first, second);
    assert!(
        chrono::DateTime::parse_from_rfc3339(&second).is_ok(),
        "{second}"
    );
}

#[tokio::test]
async fn creds_rotate_again_after_the_ttl() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com", "ttl": 1})),
    )
    .await;
    let first =
        s.root(Method::GET, "ad/creds/app", None).await.body["data"]["current_password"].clone();
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let d = s.root(Method::GET, "ad/creds/app", None).await.body["data"].clone();
    assert_ne!(d["current_password"], first);
    assert_eq!(d["last_password"], first);
}

#[tokio::test]
async fn creds_use_the_formatter_without_prefix() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"formatter": "corp-{{PASSWORD}}", "length": 20})),
    )
    .await;
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    let pw = s.root(Method::GET, "ad/creds/app", None).await.body["data"]["current_password"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(pw.starts_with("corp-") && !pw.contains("?@09AZ"), "{pw}");
    assert_eq!(pw.len(), 20);
}

#[tokio::test]
async fn creds_use_the_password_policy() {
    let s = start().await;
    s.admin(
        Method::PUT,
        "ad/accounts/admin@example.com",
        Some(json!({"dn": ADMIN_DN, "password": "adminpw"})),
    )
    .await;
    account(&s, "svc1@example.com", "x").await;
    let pol = "length = 24\nrule \"charset\" {\n  charset = \"abcdef\"\n  min-chars = 1\n}\n";
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/policies/password/ad",
            Some(json!({"policy": pol}))
        )
        .await
        .status,
        204
    );
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"binddn": ADMIN_DN, "bindpass": "adminpw", "password_policy": "ad"})),
    )
    .await;
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    let pw = s.root(Method::GET, "ad/creds/app", None).await.body["data"]["current_password"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(pw.len(), 24);
    assert!(pw.chars().all(|c| "abcdef".contains(c)), "{pw}");
}

#[tokio::test]
async fn a_password_changed_outside_is_rotated_on_the_next_read() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"last_rotation_tolerance": 0})),
    )
    .await;
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    let first =
        s.root(Method::GET, "ad/creds/app", None).await.body["data"]["current_password"].clone();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    s.admin(
        Method::POST,
        "ad/accounts/svc1@example.com/password",
        Some(json!({"password": "changed-by-hand"})),
    )
    .await;
    let d = s.root(Method::GET, "ad/creds/app", None).await.body["data"].clone();
    assert_ne!(d["current_password"], first);
    assert_eq!(
        dir_password(&s, "svc1@example.com").await,
        d["current_password"].as_str().unwrap()
    );
}

#[tokio::test]
async fn rotate_root_replaces_the_bindpass_with_a_value_only_the_service_knows() {
    let s = setup().await;
    assert_eq!(
        s.root(Method::POST, "ad/rotate-root", None).await.status,
        204
    );
    let pw = dir_password(&s, "admin@example.com").await;
    assert_ne!(pw, "adminpw");
    assert!(pw.starts_with("?@09AZ"));
    assert!(!s
        .root(Method::GET, "ad/config", None)
        .await
        .body
        .to_string()
        .contains(&pw));
    // The engine still binds with the new password.
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    assert_eq!(s.root(Method::GET, "ad/creds/app", None).await.status, 200);
    assert_eq!(
        s.root(Method::GET, "ad/rotate-root", None).await.status,
        204
    );
    assert_ne!(dir_password(&s, "admin@example.com").await, pw);
}

#[tokio::test]
async fn rotate_root_fails_unless_binddn_identifies_exactly_one_entity() {
    let s = setup().await;
    s.admin(
        Method::PUT,
        "ad/accounts/admin@other.com",
        Some(json!({"dn": "CN=admin,DC=other,DC=com", "sam": "admin", "password": "adminpw"})),
    )
    .await;
    s.root(Method::POST, "ad/config", Some(json!({"binddn": "admin"})))
        .await;
    let r = s.root(Method::POST, "ad/rotate-root", None).await;
    assert_eq!(r.status, 500);
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"binddn": "CN=nobody,DC=example,DC=com"})),
    )
    .await;
    assert_eq!(
        s.root(Method::POST, "ad/rotate-root", None).await.status,
        500
    );
}

#[tokio::test]
async fn rotation_already_in_progress_answers_200_with_a_warning() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    s.admin(
        Method::POST,
        "ad/rotation-in-progress",
        Some(json!({"target": "root"})),
    )
    .await;
    s.admin(
        Method::POST,
        "ad/rotation-in-progress",
        Some(json!({"target": "app"})),
    )
    .await;
    let r = s.root(Method::POST, "ad/rotate-root", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["warnings"][0],
        "Root password rotation is already in progress."
    );
    let r = s.root(Method::POST, "ad/rotate-role/app", None).await;
    assert_eq!(r.status, 200);
    assert!(r.body["warnings"][0]
        .as_str()
        .unwrap()
        .contains("already in progress"));
    assert_eq!(dir_password(&s, "admin@example.com").await, "adminpw");
}

#[tokio::test]
async fn rotate_role_answers_204_and_changes_the_password() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    let first =
        s.root(Method::GET, "ad/creds/app", None).await.body["data"]["current_password"].clone();
    assert_eq!(
        s.root(Method::POST, "ad/rotate-role/app", None)
            .await
            .status,
        204
    );
    let d = s.root(Method::GET, "ad/creds/app", None).await.body["data"].clone();
    assert_ne!(d["current_password"], first);
    assert_eq!(d["last_password"], first);
    assert_eq!(
        s.root(Method::POST, "ad/rotate-role/nope", None)
            .await
            .status,
        500
    );
}

#[tokio::test]
async fn rotation_fails_with_a_wrong_bindpass() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/config",
        Some(json!({"bindpass": "wrong"})),
    )
    .await;
    s.root(
        Method::POST,
        "ad/roles/app",
        Some(json!({"service_account_name": "svc1@example.com"})),
    )
    .await;
    let r = s.root(Method::GET, "ad/creds/app", None).await;
    assert!(r.status >= 400);
    assert_eq!(dir_password(&s, "svc1@example.com").await, "initial");
}

#[tokio::test]
async fn library_set_write_read_list_delete_with_defaults() {
    let s = setup().await;
    let r = s
        .root(
            Method::POST,
            "ad/library/team",
            Some(json!({"service_account_names": "lib1@example.com, lib2@example.com"})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let d = s.root(Method::GET, "ad/library/team", None).await.body["data"].clone();
    assert_eq!(
        d["service_account_names"],
        json!(["lib1@example.com", "lib2@example.com"])
    );
    assert_eq!(d["ttl"], 86400);
    assert_eq!(d["max_ttl"], 86400);
    assert_eq!(d["disable_check_in_enforcement"], false);
    assert_eq!(
        s.root(list(), "ad/library", None).await.body["data"]["keys"],
        json!(["team"])
    );
    // Taking over the accounts rotates their passwords.
    assert_ne!(dir_password(&s, "lib1@example.com").await, "initial");
    assert_eq!(
        s.root(Method::DELETE, "ad/library/team", None).await.status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "ad/library/team", None).await.status,
        404
    );
}

#[tokio::test]
async fn library_accounts_must_exist_and_belong_to_one_set() {
    let s = setup().await;
    assert_eq!(
        s.root(Method::POST, "ad/library/a", Some(json!({})))
            .await
            .status,
        400
    );
    assert_eq!(
        s.root(
            Method::POST,
            "ad/library/a",
            Some(json!({"service_account_names": ["ghost@example.com"]}))
        )
        .await
        .status,
        500
    );
    assert_eq!(
        s.root(
            Method::POST,
            "ad/library/a",
            Some(json!({"service_account_names": ["lib1@example.com"]}))
        )
        .await
        .status,
        204
    );
    assert_eq!(
        s.root(
            Method::POST,
            "ad/library/b",
            Some(json!({"service_account_names": ["lib1@example.com"]}))
        )
        .await
        .status,
        400
    );
    assert_eq!(
        s.root(
            Method::POST,
            "ad/library/c",
            Some(
                json!({"service_account_names": ["lib2@example.com"], "ttl": "2h", "max_ttl": "1h"})
            )
        )
        .await
        .status,
        400
    );
}

#[tokio::test]
async fn check_out_issues_a_lease_and_answers_400_when_none_is_free() {
    let s = setup().await;
    s.root(Method::POST, "ad/library/team", Some(json!({"service_account_names": ["lib1@example.com", "lib2@example.com"], "ttl": "1h", "max_ttl": "2h"}))).await;
    let r = s
        .root(Method::POST, "ad/library/team/check-out", None)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let lease = r.body["lease_id"].as_str().unwrap().to_string();
    assert!(lease.starts_with("ad/library/team/check-out/"), "{lease}");
    assert_eq!(r.body["renewable"], true);
    assert_eq!(r.body["lease_duration"], 3600);
    let acct = r.body["data"]["service_account_name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        dir_password(&s, &acct).await,
        r.body["data"]["password"].as_str().unwrap()
    );
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/leases/lookup",
            Some(json!({"lease_id": lease}))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        s.root(Method::POST, "ad/library/team/check-out", None)
            .await
            .status,
        200
    );
    let r = s
        .root(Method::POST, "ad/library/team/check-out", None)
        .await;
    assert_eq!(r.status, 400);
    assert!(r.body["errors"][0]
        .as_str()
        .unwrap()
        .contains("No service accounts available"));
}

#[tokio::test]
async fn check_out_ttl_is_capped_to_the_sets_ttl() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"], "ttl": "1h", "max_ttl": "2h"})),
    )
    .await;
    let r = s
        .root(
            Method::POST,
            "ad/library/team/check-out",
            Some(json!({"ttl": "10h"})),
        )
        .await;
    assert_eq!(r.body["lease_duration"], 3600);
    let lease = r.body["lease_id"].as_str().unwrap().to_string();
    // Renewal is capped by max_ttl.
    let r = s
        .root(
            Method::PUT,
            "sys/leases/renew",
            Some(json!({"lease_id": lease, "increment": "5h"})),
        )
        .await;
    let d = r.body["lease_duration"].as_i64().unwrap();
    assert!((7190..=7200).contains(&d), "{d}");
}

#[tokio::test]
async fn check_in_is_enforced_for_the_borrower_unless_disabled() {
    let s = setup().await;
    lib_policy(&s).await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    let alice = token_for(&s).await;
    let bob = token_for(&s).await;
    let r = s
        .call(
            Method::POST,
            "ad/library/team/check-out",
            Some(&alice),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = s
        .call(
            Method::POST,
            "ad/library/team/check-in",
            Some(&bob),
            Some(json!({"service_account_names": ["lib1@example.com"]})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .call(
            Method::POST,
            "ad/library/team/check-in",
            Some(&alice),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["check_ins"], json!(["lib1@example.com"]));
    // Checking in an account that is already in succeeds without listing it.
    let r = s
        .call(
            Method::POST,
            "ad/library/team/check-in",
            Some(&alice),
            Some(json!({"service_account_names": "lib1@example.com"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["check_ins"], json!([]));
    // With enforcement disabled anyone may check in.
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"disable_check_in_enforcement": true})),
    )
    .await;
    s.call(
        Method::POST,
        "ad/library/team/check-out",
        Some(&alice),
        None,
    )
    .await;
    let r = s
        .call(
            Method::POST,
            "ad/library/team/check-in",
            Some(&bob),
            Some(json!({"service_account_names": ["lib1@example.com"]})),
        )
        .await;
    assert_eq!(r.body["data"]["check_ins"], json!(["lib1@example.com"]));
}

#[tokio::test]
async fn manage_check_in_forces_the_check_in() {
    let s = setup().await;
    lib_policy(&s).await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    let alice = token_for(&s).await;
    s.call(
        Method::POST,
        "ad/library/team/check-out",
        Some(&alice),
        None,
    )
    .await;
    let r = s
        .root(
            Method::POST,
            "ad/library/manage/team/check-in",
            Some(json!({"service_account_names": ["lib1@example.com"]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["check_ins"], json!(["lib1@example.com"]));
}

#[tokio::test]
async fn status_shows_availability_and_borrowers() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com", "lib2@example.com"]})),
    )
    .await;
    let r = s
        .root(Method::POST, "ad/library/team/check-out", None)
        .await;
    let out = r.body["data"]["service_account_name"]
        .as_str()
        .unwrap()
        .to_string();
    let st = s
        .root(Method::GET, "ad/library/team/status", None)
        .await
        .body["data"]
        .clone();
    assert_eq!(st[&out]["available"], false);
    assert!(st[&out]["borrower_client_token"].is_string());
    // The root token has no entity: only the (digested) client token is shown.
    assert_eq!(
        st[&out]["borrower_client_token"].as_str().unwrap().len(),
        40
    );
    assert!(st[&out].get("borrower_entity_id").is_none());
    let other = if out == "lib1@example.com" {
        "lib2@example.com"
    } else {
        "lib1@example.com"
    };
    assert_eq!(st[other], json!({"available": true}));
}

#[tokio::test]
async fn check_in_rotates_the_password() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    let r = s
        .root(Method::POST, "ad/library/team/check-out", None)
        .await;
    let lent = r.body["data"]["password"].clone();
    s.root(Method::POST, "ad/library/team/check-in", None).await;
    assert_ne!(json!(dir_password(&s, "lib1@example.com").await), lent);
}

#[tokio::test]
async fn revoking_the_check_out_lease_checks_the_account_in() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    let r = s
        .root(Method::POST, "ad/library/team/check-out", None)
        .await;
    let lease = r.body["lease_id"].clone();
    let lent = r.body["data"]["password"].clone();
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/leases/revoke",
            Some(json!({"lease_id": lease, "sync": true}))
        )
        .await
        .status,
        204
    );
    let st = s
        .root(Method::GET, "ad/library/team/status", None)
        .await
        .body["data"]
        .clone();
    assert_eq!(st["lib1@example.com"]["available"], true);
    assert_ne!(json!(dir_password(&s, "lib1@example.com").await), lent);
}

#[tokio::test]
async fn an_expired_check_out_is_checked_in_automatically() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"], "ttl": 1, "max_ttl": 1})),
    )
    .await;
    assert_eq!(
        s.root(Method::POST, "ad/library/team/check-out", None)
            .await
            .status,
        200
    );
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let st = s
        .root(Method::GET, "ad/library/team/status", None)
        .await
        .body["data"]
        .clone();
    assert_eq!(st["lib1@example.com"]["available"], true);
}

#[tokio::test]
async fn a_set_with_checked_out_accounts_cannot_be_deleted_or_shrunk() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    s.root(Method::POST, "ad/library/team/check-out", None)
        .await;
    assert_eq!(
        s.root(Method::DELETE, "ad/library/team", None).await.status,
        400
    );
    assert_eq!(
        s.root(
            Method::POST,
            "ad/library/team",
            Some(json!({"service_account_names": ["lib2@example.com"]}))
        )
        .await
        .status,
        400
    );
}

#[tokio::test]
async fn revoking_the_borrowers_token_checks_in_its_accounts() {
    let s = setup().await;
    lib_policy(&s).await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    let alice = token_for(&s).await;
    s.call(
        Method::POST,
        "ad/library/team/check-out",
        Some(&alice),
        None,
    )
    .await;
    s.call(Method::POST, "auth/token/revoke-self", Some(&alice), None)
        .await;
    let st = s
        .root(Method::GET, "ad/library/team/status", None)
        .await
        .body["data"]
        .clone();
    assert_eq!(st["lib1@example.com"]["available"], true);
}

#[tokio::test]
async fn check_in_is_allowed_for_the_same_entity_with_another_token() {
    let s = setup().await;
    lib_policy(&s).await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a"})),
    )
    .await;
    s.root(
        Method::POST,
        "auth/idp/users/u",
        Some(json!({"policies": "lib"})),
    )
    .await;
    s.admin(Method::PUT, "idp/users/u", Some(json!({"password": "pw"})))
        .await;
    let login = |s: &S| {
        let c = s.client.clone();
        let url = format!("{}/v1/auth/idp/login/u", s.url);
        async move {
            let v: Value = c
                .post(url)
                .json(&json!({"password": "pw"}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (
                v["auth"]["client_token"].as_str().unwrap().to_string(),
                v["auth"]["entity_id"].as_str().unwrap().to_string(),
            )
        }
    };
    let (t1, entity) = login(&s).await;
    let (t2, _) = login(&s).await;
    assert_eq!(
        s.call(Method::POST, "ad/library/team/check-out", Some(&t1), None)
            .await
            .status,
        200
    );
    let st = s
        .root(Method::GET, "ad/library/team/status", None)
        .await
        .body["data"]
        .clone();
    assert_eq!(
        st["lib1@example.com"]["borrower_entity_id"],
        entity.as_str()
    );
    let r = s
        .call(Method::POST, "ad/library/team/check-in", Some(&t2), None)
        .await;
    assert_eq!(r.body["data"]["check_ins"], json!(["lib1@example.com"]));
}

#[tokio::test]
async fn check_in_without_names_and_nothing_checked_out_checks_in_nothing() {
    let s = setup().await;
    s.root(
        Method::POST,
        "ad/library/team",
        Some(json!({"service_account_names": ["lib1@example.com"]})),
    )
    .await;
    let r = s.root(Method::POST, "ad/library/team/check-in", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["check_ins"], json!([]));
    assert_eq!(
        s.root(Method::GET, "ad/library/nope/status", None)
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn library_sets_honour_create_versus_update_capability() {
    let s = setup().await;
    let p = r#"path "ad/library/*" { capabilities = ["update", "read"] }"#;
    s.root(
        Method::PUT,
        "sys/policies/acl/upd",
        Some(json!({"policy": p})),
    )
    .await;
    let t = s
        .root(
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": ["upd"]})),
        )
        .await
        .body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    let body = json!({"service_account_names": ["lib1@example.com"]});
    assert_eq!(
        s.call(
            Method::POST,
            "ad/library/team",
            Some(&t),
            Some(body.clone())
        )
        .await
        .status,
        403
    );
    s.root(Method::POST, "ad/library/team", Some(body.clone()))
        .await;
    assert_eq!(
        s.call(
            Method::POST,
            "ad/library/team",
            Some(&t),
            Some(json!({"ttl": "1h"}))
        )
        .await
        .status,
        204
    );
}
