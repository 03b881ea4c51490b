//! Differential conformance: every test body runs against the sandbox AND a real OpenBao 2.7.2
//! (`bao server -dev`, one per test binary), with the same assertions. Where the two differed
//! the sandbox was changed to answer as OpenBao does; `README-secrets.md` lists those changes.
//!
//! OpenBao is found through `QUARTET_OPENBAO_BIN` or the default install; without it these
//! tests fail with the install command (see `secrets_support::openbao`).

use crate::secrets_support;

use std::collections::BTreeSet;

use reqwest::Method;
use secrets_support::*;
use serde_json::{json, Value};

/// The keys of a JSON object, sorted.
fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

const ENVELOPE: &[&str] = &[
    "request_id",
    "lease_id",
    "renewable",
    "lease_duration",
    "data",
    "wrap_info",
    "warnings",
    "auth",
];

fn is_rfc3339_nanos(s: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(s).is_ok() && s.contains('.')
}

#[tokio::test]
async fn acl_policies_answer_alike_on_both_backends() {
    for b in backends().await {
        let n = b.name;
        let name = uniq("team/app");
        let doc = "path \"secret/*\" {\n  capabilities = [\"read\"]\n}\n";
        let p = format!("sys/policies/acl/{name}");
        let r = b
            .root(Method::PUT, &p, Some(json!({ "policy": doc })))
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        let r = b.root(Method::GET, &p, None).await;
        assert_eq!(r.status, 200, "{n}");
        // Fields in `data` only: no top-level copy, no `mount_type`.
        assert_eq!(keys(&r.body), set(ENVELOPE), "{n}");
        assert_eq!(
            keys(&r.body["data"]),
            set(&[
                "name",
                "policy",
                "version",
                "modified",
                "cas_required",
                "allow_slashes_in_identity_templates",
                "allow_wildcards_in_identity_templates"
            ]),
            "{n}"
        );
        assert_eq!(r.body["data"]["name"], json!(name), "{n}");
        assert_eq!(r.body["data"]["policy"], json!(doc), "{n}");
        assert_eq!(r.body["data"]["version"], json!(1), "{n}");
        assert_eq!(r.body["data"]["cas_required"], json!(false), "{n}");
        assert!(
            is_rfc3339_nanos(r.body["data"]["modified"].as_str().unwrap()),
            "{n}"
        );
        b.root(Method::PUT, &p, Some(json!({ "policy": doc })))
            .await;
        let r = b.root(Method::GET, &p, None).await;
        assert_eq!(r.body["data"]["version"], json!(2), "{n}");

        let r = b.root(list(), "sys/policies/acl", None).await;
        assert_eq!(r.status, 200, "{n}");
        assert_eq!(keys(&r.body), set(ENVELOPE), "{n}");
        let ks = r.body["data"]["keys"].as_array().unwrap();
        assert!(
            ks.contains(&json!(name)) && ks.contains(&json!("default")),
            "{n}: {ks:?}"
        );

        // The legacy endpoint copies `data` to the top level, and calls the text `rules`.
        let r = b
            .root(Method::GET, &format!("sys/policy/{name}"), None)
            .await;
        assert_eq!(r.status, 200, "{n}");
        assert_eq!(r.body["rules"], json!(doc), "{n}");
        assert_eq!(r.body["data"]["rules"], json!(doc), "{n}");

        let r = b
            .root(Method::PUT, &p, Some(json!({ "policy": "garbage" })))
            .await;
        assert_eq!(r.status, 400, "{n}");
        let msg = r.body["errors"][0].as_str().unwrap();
        assert!(msg.starts_with("failed to parse policy"), "{n}: {msg}");
        let r = b.root(Method::PUT, &p, Some(json!({}))).await;
        assert_eq!(r.status, 400, "{n}");
        assert_eq!(
            r.body["errors"],
            json!(["'policy' parameter not supplied or empty"]),
            "{n}"
        );
        let r = b
            .root(Method::DELETE, "sys/policies/acl/default", None)
            .await;
        assert_eq!(
            r.body["errors"],
            json!(["cannot delete default policy"]),
            "{n}"
        );
        let r = b.root(Method::DELETE, "sys/policies/acl/root", None).await;
        assert_eq!(
            r.body["errors"],
            json!(["cannot delete \"root\" policy"]),
            "{n}"
        );

        assert_eq!(b.root(Method::DELETE, &p, None).await.status, 204, "{n}");
        assert_eq!(b.root(Method::DELETE, &p, None).await.status, 204, "{n}");
        let r = b.root(Method::GET, &p, None).await;
        assert_eq!(
            (r.status, r.body.clone()),
            (404, json!({"errors": []})),
            "{n}"
        );
    }
}

#[tokio::test]
async fn token_renewal_without_increment_renews_to_the_tokens_own_ttl() {
    for b in backends().await {
        let n = b.name;
        let r = b
            .root(
                Method::POST,
                "auth/token/create",
                Some(json!({"ttl": "1h"})),
            )
            .await;
        assert_eq!(r.status, 200, "{n}: {:?}", r.body);
        let auth = &r.body["auth"];
        assert_eq!(
            keys(auth),
            set(&[
                "client_token",
                "accessor",
                "policies",
                "token_policies",
                "metadata",
                "lease_duration",
                "renewable",
                "entity_id",
                "token_type",
                "orphan",
                "mfa_requirement",
                "num_uses"
            ]),
            "{n}"
        );
        assert_eq!(auth["lease_duration"], json!(3600), "{n}");
        let t = auth["client_token"].as_str().unwrap().to_string();

        let r = b
            .call(Method::GET, "auth/token/lookup-self", Some(&t), None)
            .await;
        assert_eq!(r.status, 200, "{n}");
        // No `period` on a token without one; no renewal yet.
        assert_eq!(
            keys(&r.body["data"]),
            set(&[
                "accessor",
                "creation_time",
                "creation_ttl",
                "display_name",
                "entity_id",
                "expire_time",
                "explicit_max_ttl",
                "id",
                "issue_time",
                "meta",
                "num_uses",
                "orphan",
                "path",
                "policies",
                "renewable",
                "ttl",
                "type"
            ]),
            "{n}"
        );
        assert_eq!(r.body["data"]["creation_ttl"], json!(3600), "{n}");
        assert!(
            is_rfc3339_nanos(r.body["data"]["issue_time"].as_str().unwrap()),
            "{n}"
        );

        let r = b
            .call(
                Method::POST,
                "auth/token/renew-self",
                Some(&t),
                Some(json!({})),
            )
            .await;
        assert_eq!(r.status, 200, "{n}: {:?}", r.body);
        assert_eq!(r.body["auth"]["lease_duration"], json!(3600), "{n}");
        let r = b
            .call(
                Method::POST,
                "auth/token/renew-self",
                Some(&t),
                Some(json!({"increment": "2h"})),
            )
            .await;
        assert_eq!(r.body["auth"]["lease_duration"], json!(7200), "{n}");
        let r = b
            .call(Method::GET, "auth/token/lookup-self", Some(&t), None)
            .await;
        assert!(
            is_rfc3339_nanos(r.body["data"]["last_renewal"].as_str().unwrap()),
            "{n}"
        );
        assert!(r.body["data"]["last_renewal_time"].is_i64(), "{n}");

        // A periodic token shows its period.
        let r = b
            .root(
                Method::POST,
                "auth/token/create",
                Some(json!({"period": "1h"})),
            )
            .await;
        let pt = r.body["auth"]["client_token"].as_str().unwrap().to_string();
        let r = b
            .call(Method::GET, "auth/token/lookup-self", Some(&pt), None)
            .await;
        assert_eq!(r.body["data"]["period"], json!(3600), "{n}");

        // The root token is an orphan.
        let r = b.root(Method::GET, "auth/token/lookup-self", None).await;
        assert_eq!(r.body["data"]["orphan"], json!(true), "{n}");
        assert_eq!(r.body["data"]["policies"], json!(["root"]), "{n}");
        assert_eq!(r.body["data"]["ttl"], json!(0), "{n}");
    }
}

/// Logs a user in and returns (token, login path, lease id).
async fn leased_login(b: &Backend, user: &str) -> (String, String, String) {
    let (tok, login) = b.login(user, &["default"], "1h").await;
    let r = b
        .root(list(), &format!("sys/leases/lookup/{login}/"), None)
        .await;
    assert_eq!(r.status, 200, "{}: {:?}", b.name, r.body);
    assert_eq!(keys(&r.body["data"]), set(&["keys"]), "{}", b.name);
    let key = r.body["data"]["keys"][0].as_str().unwrap().to_string();
    (tok, login.clone(), format!("{login}/{key}"))
}

#[tokio::test]
async fn login_leases_answer_alike_on_both_backends() {
    for b in backends().await {
        let n = b.name;
        let (tok, login, lease) = leased_login(&b, &uniq("alice")).await;
        // Lease IDs end in `h` and 64 hex characters.
        let last = lease.rsplit('/').next().unwrap();
        assert_eq!(last.len(), 65, "{n}: {last}");
        assert!(
            last.starts_with('h') && last[1..].chars().all(|c| c.is_ascii_hexdigit()),
            "{n}"
        );

        let r = b
            .root(
                Method::PUT,
                "sys/leases/lookup",
                Some(json!({"lease_id": lease})),
            )
            .await;
        assert_eq!(r.status, 200, "{n}: {:?}", r.body);
        let d = &r.body["data"];
        assert_eq!(
            keys(d),
            set(&[
                "id",
                "issue_time",
                "expire_time",
                "last_renewal",
                "path",
                "renewable",
                "ttl"
            ]),
            "{n}"
        );
        assert_eq!(d["id"], json!(lease), "{n}");
        assert_eq!(d["path"], json!(login), "{n}");
        assert_eq!(d["renewable"], json!(true), "{n}");
        assert_eq!(d["last_renewal"], Value::Null, "{n}");
        assert!(is_rfc3339_nanos(d["issue_time"].as_str().unwrap()), "{n}");
        assert!(is_rfc3339_nanos(d["expire_time"].as_str().unwrap()), "{n}");
        let ttl = d["ttl"].as_i64().unwrap();
        assert!((3500..=3600).contains(&ttl), "{n}: {ttl}");

        // Token leases are renewed through the token store, not here.
        let r = b
            .root(
                Method::PUT,
                "sys/leases/renew",
                Some(json!({"lease_id": lease})),
            )
            .await;
        assert_eq!(r.status, 400, "{n}");
        assert_eq!(
            r.body["errors"],
            json!(["tokens cannot be renewed through this endpoint"]),
            "{n}"
        );
        let r = b
            .root(
                Method::PUT,
                "sys/leases/renew",
                Some(json!({"lease_id": lease, "increment": "2h"})),
            )
            .await;
        assert_eq!(r.status, 400, "{n}");
        // The login token renews itself to its auth method's TTL.
        let r = b
            .call(
                Method::POST,
                "auth/token/renew-self",
                Some(&tok),
                Some(json!({})),
            )
            .await;
        assert_eq!(
            r.body["auth"]["lease_duration"],
            json!(3600),
            "{n}: {:?}",
            r.body
        );

        let r = b
            .root(
                Method::PUT,
                "sys/leases/lookup",
                Some(json!({"lease_id": "nope"})),
            )
            .await;
        assert_eq!(
            (r.status, r.body.clone()),
            (400, json!({"errors": ["invalid lease"]})),
            "{n}"
        );
        let r = b
            .root(Method::PUT, "sys/leases/lookup", Some(json!({})))
            .await;
        assert_eq!(
            r.body,
            json!({"errors": ["lease_id must be specified"]}),
            "{n}"
        );

        // A trailing '/' is refused and revokes nothing.
        for ep in ["revoke-prefix", "revoke-force"] {
            let r = b
                .root(Method::PUT, &format!("sys/leases/{ep}/{login}/"), None)
                .await;
            assert_eq!(r.status, 400, "{n} {ep}");
            assert_eq!(
                r.body["errors"],
                json!(["cannot write to a path ending in '/'"]),
                "{n}"
            );
        }
        let r = b
            .root(
                Method::PUT,
                "sys/leases/lookup",
                Some(json!({"lease_id": lease})),
            )
            .await;
        assert_eq!(r.status, 200, "{n}: the lease survived");

        // Revoke-prefix without the slash is synchronous: 204, then the lease and token are gone.
        let r = b
            .root(
                Method::PUT,
                &format!("sys/leases/revoke-prefix/{login}"),
                None,
            )
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        let r = b
            .root(
                Method::PUT,
                "sys/leases/lookup",
                Some(json!({"lease_id": lease})),
            )
            .await;
        assert_eq!(r.status, 400, "{n}");
        let r = b
            .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
            .await;
        assert_eq!(r.status, 403, "{n}");
        let r = b
            .root(list(), &format!("sys/leases/lookup/{login}/"), None)
            .await;
        assert_eq!(
            (r.status, r.body.clone()),
            (404, json!({"errors": []})),
            "{n}"
        );
    }
}

#[tokio::test]
async fn lease_revoke_is_synchronous_by_default_and_counts_answer_alike() {
    for b in backends().await {
        let n = b.name;
        let (tok, _login, lease) = leased_login(&b, &uniq("bob")).await;
        let r = b
            .root(
                Method::PUT,
                "sys/leases/revoke",
                Some(json!({"lease_id": lease})),
            )
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        let r = b
            .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
            .await;
        assert_eq!(r.status, 403, "{n}");
        // Revoking an unknown lease succeeds.
        let r = b
            .root(
                Method::PUT,
                "sys/leases/revoke",
                Some(json!({"lease_id": "x/y"})),
            )
            .await;
        assert_eq!(r.status, 204, "{n}");

        let r = b
            .root(Method::GET, "sys/leases/count?type=irrevocable", None)
            .await;
        assert_eq!(r.status, 200, "{n}");
        assert_eq!(
            keys(&r.body["data"]),
            set(&["counts", "lease_count"]),
            "{n}"
        );
        assert!(r.body["data"]["lease_count"].is_i64(), "{n}");
        let r = b
            .root(Method::GET, "sys/leases?type=irrevocable", None)
            .await;
        assert_eq!(
            keys(&r.body["data"]),
            set(&["lease_count", "leases"]),
            "{n}"
        );
        assert!(r.body["data"]["leases"].is_array(), "{n}");
        for p in [
            "sys/leases/count",
            "sys/leases/count?type=bogus",
            "sys/leases?type=bogus",
        ] {
            let r = b.root(Method::GET, p, None).await;
            assert_eq!(
                (r.status, r.body.clone()),
                (404, json!({"errors": []})),
                "{n} {p}"
            );
        }
        let r = b.root(Method::PUT, "sys/leases/tidy", None).await;
        assert_eq!(r.status, 202, "{n}");
        assert_eq!(r.body["data"], Value::Null, "{n}");
        assert!(
            r.body["warnings"][0]
                .as_str()
                .unwrap()
                .starts_with("Tidy operation successfully started"),
            "{n}"
        );
    }
}

const METHOD_FIELDS: &[&str] = &[
    "algorithm",
    "digits",
    "id",
    "issuer",
    "key_size",
    "max_validation_attempts",
    "name",
    "namespace_id",
    "namespace_path",
    "period",
    "qr_size",
    "skew",
    "type",
];

#[tokio::test]
async fn totp_methods_answer_alike_on_both_backends() {
    for b in backends().await {
        let n = b.name;
        let name = uniq("m");
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Quartet", "method_name": name, "method_id": "abc", "bogus": 1})),
            )
            .await;
        assert_eq!(r.status, 200, "{n}: {:?}", r.body);
        let id = r.body["data"]["method_id"].as_str().unwrap().to_string();
        assert_ne!(id, "abc", "{n}");
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{n}");
        assert_eq!(
            r.body["warnings"],
            json!([
                "Endpoint ignored these unrecognized parameters: [bogus]",
                "Endpoint replaced the value of these parameters with the values captured from the endpoint's path: [method_id]"
            ]),
            "{n}"
        );
        let p = format!("identity/mfa/method/totp/{id}");
        let r = b.root(Method::GET, &p, None).await;
        assert_eq!(r.status, 200, "{n}");
        let d = &r.body["data"];
        assert_eq!(keys(d), set(METHOD_FIELDS), "{n}");
        assert_eq!(
            (
                d["algorithm"].clone(),
                d["digits"].clone(),
                d["period"].clone(),
                d["key_size"].clone()
            ),
            (json!("SHA1"), json!(6), json!(30), json!(20)),
            "{n}"
        );
        assert_eq!(
            (
                d["qr_size"].clone(),
                d["skew"].clone(),
                d["max_validation_attempts"].clone()
            ),
            (json!(200), json!(1), json!(5)),
            "{n}"
        );
        assert_eq!(
            (
                d["type"].clone(),
                d["namespace_id"].clone(),
                d["namespace_path"].clone(),
                d["name"].clone()
            ),
            (json!("totp"), json!("root"), json!(""), json!(name)),
            "{n}"
        );

        // An update replaces every setting; unset ones take their defaults again.
        let r = b
            .root(
                Method::POST,
                &p,
                Some(json!({"issuer": "Q2", "method_name": name, "digits": 8, "period": "60s"})),
            )
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        let d = b.root(Method::GET, &p, None).await.body["data"].clone();
        assert_eq!(
            (
                d["issuer"].clone(),
                d["digits"].clone(),
                d["period"].clone()
            ),
            (json!("Q2"), json!(8), json!(60)),
            "{n}"
        );

        for path in ["identity/mfa/method/totp", "identity/mfa/method"] {
            let r = b.root(list(), path, None).await;
            assert_eq!(r.status, 200, "{n} {path}");
            assert!(
                r.body["data"]["keys"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(id)),
                "{n} {path}"
            );
            assert_eq!(
                keys(&r.body["data"]["key_info"][&id]),
                set(METHOD_FIELDS),
                "{n} {path}"
            );
        }
        let r = b
            .root(Method::GET, &format!("identity/mfa/method/{id}"), None)
            .await;
        assert_eq!(r.body["data"]["id"], json!(id), "{n}");

        for (body, msg) in [
            (json!({}), "issuer must be set"),
            (
                json!({"issuer": "q", "digits": 7}),
                "digits can only be 6 or 8",
            ),
            (
                json!({"issuer": "q", "algorithm": "MD5"}),
                "unrecognized algorithm",
            ),
            (json!({"issuer": "q", "skew": 2}), "skew must be 0 or 1"),
            (
                json!({"issuer": "q", "period": 0}),
                "period must be greater than zero",
            ),
            (
                json!({"issuer": "q", "key_size": 0}),
                "key_size must be greater than zero",
            ),
            (
                json!({"issuer": "q", "max_validation_attempts": -1}),
                "max_validation_attempts must be greater than zero",
            ),
        ] {
            let r = b
                .root(Method::POST, "identity/mfa/method/totp", Some(body.clone()))
                .await;
            assert_eq!(
                (r.status, r.body.clone()),
                (400, json!({"errors": [msg]})),
                "{n} {body}"
            );
        }
        let unknown = uuid::Uuid::new_v4().to_string();
        let r = b
            .root(
                Method::GET,
                &format!("identity/mfa/method/totp/{unknown}"),
                None,
            )
            .await;
        assert_eq!(
            (r.status, r.body.clone()),
            (404, json!({"errors": []})),
            "{n}"
        );
        let r = b
            .root(Method::GET, "identity/mfa/method/totp/not-a-uuid", None)
            .await;
        assert_eq!(r.status, 404, "{n}");
        assert_eq!(
            r.body["errors"],
            json!(["1 error occurred:\n\t* unsupported path\n\n"]),
            "{n}"
        );
        let r = b
            .root(
                Method::DELETE,
                &format!("identity/mfa/method/totp/{unknown}"),
                None,
            )
            .await;
        assert_eq!(r.status, 204, "{n}");
        assert_eq!(b.root(Method::DELETE, &p, None).await.status, 204, "{n}");
        assert_eq!(b.root(Method::GET, &p, None).await.status, 404, "{n}");
    }
}

#[tokio::test]
async fn totp_admin_generate_and_destroy_answer_alike() {
    for b in backends().await {
        let n = b.name;
        let name = uniq("m");
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Quartet", "method_name": name})),
            )
            .await;
        let id = r.body["data"]["method_id"].as_str().unwrap().to_string();
        let r = b
            .root(
                Method::POST,
                "identity/entity",
                Some(json!({"name": uniq("e")})),
            )
            .await;
        let entity = r.body["data"]["id"].as_str().unwrap().to_string();
        let gen = json!({"method_id": id, "entity_id": entity});
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp/admin-generate",
                Some(gen.clone()),
            )
            .await;
        assert_eq!(r.status, 200, "{n}: {:?}", r.body);
        assert_eq!(keys(&r.body["data"]), set(&["barcode", "url"]), "{n}");
        let url = r.body["data"]["url"].as_str().unwrap();
        let want = format!("otpauth://totp/Quartet:{entity}?algorithm=SHA1&digits=6&issuer=Quartet&period=30&secret=");
        assert!(url.starts_with(&want), "{n}: {url}");
        assert!(
            !r.body["data"]["barcode"].as_str().unwrap().is_empty(),
            "{n}"
        );
        // A second generation warns and returns nothing.
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp/admin-generate",
                Some(gen.clone()),
            )
            .await;
        assert_eq!(r.status, 200, "{n}");
        assert_eq!(r.body["data"], Value::Null, "{n}");
        assert_eq!(
            r.body["warnings"],
            json!([format!(
                "Entity already has a secret for MFA method {name:?}"
            )]),
            "{n}"
        );
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp/admin-destroy",
                Some(gen.clone()),
            )
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp/admin-generate",
                Some(gen.clone()),
            )
            .await;
        assert_eq!(
            r.body["data"]["url"].as_str().map(|u| u.starts_with(&want)),
            Some(true),
            "{n}"
        );

        // `qr_size: 0` gives an empty barcode.
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Q", "qr_size": 0})),
            )
            .await;
        let id0 = r.body["data"]["method_id"].as_str().unwrap().to_string();
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp/admin-generate",
                Some(json!({"method_id": id0, "entity_id": entity})),
            )
            .await;
        assert_eq!(r.body["data"]["barcode"], json!(""), "{n}");
        assert!(
            r.body["data"]["url"]
                .as_str()
                .unwrap()
                .starts_with("otpauth://"),
            "{n}"
        );
    }
}

#[tokio::test]
async fn deleting_a_totp_method_used_by_a_login_enforcement_is_a_500_naming_it() {
    for b in backends().await {
        let n = b.name;
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Q"})),
            )
            .await;
        let id = r.body["data"]["method_id"].as_str().unwrap().to_string();
        let enf = uniq("enf");
        let ep = format!("identity/mfa/login-enforcement/{enf}");
        let r = b
            .root(
                Method::POST,
                &ep,
                Some(json!({"mfa_method_ids": [id], "auth_method_types": ["token"]})),
            )
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        let r = b.root(Method::GET, &ep, None).await;
        assert_eq!(
            keys(&r.body["data"]),
            set(&[
                "auth_method_accessors",
                "auth_method_types",
                "id",
                "identity_entity_ids",
                "identity_group_ids",
                "mfa_method_ids",
                "name",
                "namespace_id",
                "namespace_path"
            ]),
            "{n}"
        );
        let enf_id = r.body["data"]["id"].as_str().unwrap().to_string();
        let mp = format!("identity/mfa/method/totp/{id}");
        let r = b.root(Method::DELETE, &mp, None).await;
        assert_eq!(r.status, 500, "{n}");
        assert_eq!(
            r.body["errors"],
            json!([format!(
                "1 error occurred:\n\t* methodID is still used by an enforcement configuration with ID: {enf_id}\n\n"
            )]),
            "{n}"
        );
        assert_eq!(b.root(Method::GET, &mp, None).await.status, 200, "{n}");
        assert_eq!(b.root(Method::DELETE, &ep, None).await.status, 204, "{n}");
        assert_eq!(b.root(Method::DELETE, &mp, None).await.status, 204, "{n}");
    }
}

/// A login enforcement names auth methods mounted now: an unmounted type (`ldap`; on a fresh
/// OpenBao even `userpass`) or an unknown accessor is refused with a 400, while `token` and the
/// token mount's accessor are accepted.
#[tokio::test]
async fn login_enforcements_refuse_auth_methods_that_are_not_mounted() {
    for b in backends().await {
        let n = b.name;
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Q"})),
            )
            .await;
        let id = r.body["data"]["method_id"].as_str().unwrap().to_string();
        let ep = format!("identity/mfa/login-enforcement/{}", uniq("enf"));
        for (body, message) in [
            (
                json!({"mfa_method_ids": [id], "auth_method_types": ["ldap"]}),
                "one of the auth method types provided is invalid",
            ),
            (
                json!({"mfa_method_ids": [id], "auth_method_accessors": ["auth_nope_123"]}),
                "one of the auth method accessors provided is invalid",
            ),
        ] {
            let r = b.root(Method::POST, &ep, Some(body)).await;
            assert_eq!(
                (r.status, r.body["errors"].clone()),
                (400, json!([message])),
                "{n}"
            );
        }
        assert_eq!(b.root(Method::GET, &ep, None).await.status, 404, "{n}");
        let r = b
            .root(
                Method::POST,
                &ep,
                Some(json!({"mfa_method_ids": [id], "auth_method_types": ["token"]})),
            )
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        let r = b.root(Method::GET, "sys/auth", None).await;
        let accessor = r.body["data"]["token/"]["accessor"]
            .as_str()
            .unwrap_or_else(|| panic!("{n}: {:?}", r.body))
            .to_string();
        let r = b
            .root(
                Method::POST,
                &ep,
                Some(json!({"mfa_method_ids": [id], "auth_method_accessors": [accessor]})),
            )
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        assert_eq!(b.root(Method::DELETE, &ep, None).await.status, 204, "{n}");
    }
}

#[tokio::test]
async fn identity_entities_answer_alike_on_both_backends() {
    for b in backends().await {
        let n = b.name;
        let name = uniq("ent");
        let r = b
            .root(
                Method::POST,
                "identity/entity",
                Some(json!({"name": name, "policies": ["b", "a"]})),
            )
            .await;
        assert_eq!(r.status, 200, "{n}");
        assert_eq!(
            keys(&r.body["data"]),
            set(&["aliases", "id", "name"]),
            "{n}"
        );
        assert_eq!(r.body["data"]["aliases"], Value::Null, "{n}");
        let id = r.body["data"]["id"].as_str().unwrap().to_string();
        let r = b
            .root(Method::GET, &format!("identity/entity/name/{name}"), None)
            .await;
        let d = &r.body["data"];
        assert_eq!(
            keys(d),
            set(&[
                "aliases",
                "creation_time",
                "direct_group_ids",
                "disabled",
                "group_ids",
                "id",
                "inherited_group_ids",
                "last_update_time",
                "merged_entity_ids",
                "metadata",
                "name",
                "namespace_id",
                "policies"
            ]),
            "{n}"
        );
        assert_eq!(d["policies"], json!(["a", "b"]), "{n}");
        assert_eq!(d["aliases"], json!([]), "{n}");
        assert_eq!(d["group_ids"], json!([]), "{n}");
        assert_eq!(d["merged_entity_ids"], Value::Null, "{n}");
        assert!(
            is_rfc3339_nanos(d["last_update_time"].as_str().unwrap()),
            "{n}"
        );
        // A write naming an existing entity updates it.
        let r = b
            .root(
                Method::POST,
                "identity/entity",
                Some(json!({"name": name, "policies": ["c"]})),
            )
            .await;
        assert_eq!(r.status, 204, "{n}: {:?}", r.body);
        let r = b
            .root(Method::GET, &format!("identity/entity/id/{id}"), None)
            .await;
        assert_eq!(r.body["data"]["policies"], json!(["c"]), "{n}");
        let r = b.root(list(), "identity/entity/id", None).await;
        assert!(
            r.body["data"]["keys"]
                .as_array()
                .unwrap()
                .contains(&json!(id)),
            "{n}"
        );
        assert_eq!(r.body["data"]["key_info"][&id]["name"], json!(name), "{n}");
        let r = b
            .root(Method::GET, "identity/entity/name/nobody-here", None)
            .await;
        assert_eq!(
            (r.status, r.body.clone()),
            (404, json!({"errors": []})),
            "{n}"
        );
    }
}

#[tokio::test]
async fn the_openapi_description_lists_the_shared_endpoints_on_both_backends() {
    for b in backends().await {
        let n = b.name;
        let r = b
            .root(Method::GET, "sys/internal/specs/openapi", None)
            .await;
        assert_eq!(r.status, 200, "{n}");
        assert_eq!(r.body["openapi"], json!("3.0.2"), "{n}");
        let paths = r.body["paths"].as_object().unwrap();
        for p in [
            "/sys/policies/acl",
            "/sys/policies/acl/{name}",
            "/sys/leases/lookup",
            "/sys/leases/lookup/{prefix}",
            "/sys/leases/revoke-prefix/{prefix}",
            "/auth/token/lookup-self",
            "/auth/token/renew-self",
            "/identity/entity/id/{id}",
            "/identity/mfa/method",
            "/identity/mfa/method/totp",
            "/identity/mfa/method/totp/{method_id}",
            "/identity/mfa/method/totp/admin-generate",
            "/identity/mfa/method/totp/admin-destroy",
        ] {
            assert!(paths.contains_key(p), "{n}: {p}");
        }
    }
}

#[tokio::test]
async fn enterprise_and_unmounted_paths_answer_like_the_community_server() {
    // The sandbox as the community edition, against OpenBao (which has none of these).
    let s = start_with(quartet_sandbox::SandboxOptions {
        edition: quartet_sandbox::Edition::Community,
        ..quartet_sandbox::SandboxOptions::ephemeral()
    })
    .await;
    let mut bs = backends().await;
    bs[0].url = s.url.clone();
    bs[0].root = s.root.clone();
    for b in &bs {
        let n = b.name;
        let unsupported = json!({"errors": ["1 error occurred:\n\t* unsupported path\n\n"]});
        for (m, p) in [
            (Method::GET, "sys/policies/rgp/x"),
            (Method::PUT, "sys/policies/egp/x"),
            (Method::GET, "sys/replication/dr/status"),
        ] {
            let r = b.root(m, p, Some(json!({"policy": "x"}))).await;
            assert_eq!(
                (r.status, r.body.clone()),
                (404, unsupported.clone()),
                "{n} {p}"
            );
        }
        let r = b.root(Method::GET, "transform/role/x", None).await;
        assert_eq!(r.status, 404, "{n}");
        assert_eq!(
            r.body["errors"],
            json!(["no handler for route \"transform/role/x\". route entry not found."]),
            "{n}"
        );
        let r = b
            .call(Method::GET, "sys/policies/acl/default", None, None)
            .await;
        assert_eq!(
            (r.status, r.body.clone()),
            (403, json!({"errors": ["permission denied"]})),
            "{n}"
        );
    }
}

// One test per behaviour of the issue "the sandbox as a real OpenBao answers" (each also part of
// the broader tests above).

#[tokio::test]
async fn sys_responses_carry_their_fields_in_data_only_except_legacy_endpoints() {
    for b in backends().await {
        let n = b.name;
        let r = b.root(Method::GET, "sys/policies/acl/default", None).await;
        assert_eq!(
            keys(&r.body),
            set(ENVELOPE),
            "{n}: no top-level copy, no mount_type"
        );
        let r = b.root(Method::GET, "sys/policy/default", None).await;
        assert_eq!(
            r.body["name"],
            json!("default"),
            "{n}: the legacy endpoint copies"
        );
        let r = b
            .root(
                Method::POST,
                "sys/capabilities-self",
                Some(json!({"paths": ["a/b"]})),
            )
            .await;
        assert_eq!(r.body["capabilities"], json!(["root"]), "{n}");
        assert_eq!(r.body["data"]["capabilities"], json!(["root"]), "{n}");
    }
}

#[tokio::test]
async fn acl_policy_names_may_contain_a_slash() {
    for b in backends().await {
        let name = uniq("a/b/c");
        let p = format!("sys/policies/acl/{name}");
        let r = b
            .root(
                Method::PUT,
                &p,
                Some(json!({"policy": "path \"x\" { capabilities = [\"read\"] }"})),
            )
            .await;
        assert_eq!(r.status, 204, "{}: {:?}", b.name, r.body);
        assert_eq!(
            b.root(Method::GET, &p, None).await.body["data"]["name"],
            json!(name),
            "{}",
            b.name
        );
        assert_eq!(
            b.root(Method::DELETE, &p, None).await.status,
            204,
            "{}",
            b.name
        );
    }
}

#[tokio::test]
async fn revoke_prefix_and_revoke_force_with_a_trailing_slash_are_refused_and_revoke_nothing() {
    for b in backends().await {
        let n = b.name;
        let (tok, login, lease) = leased_login(&b, &uniq("carol")).await;
        for ep in ["revoke-prefix", "revoke-force"] {
            let r = b
                .root(Method::PUT, &format!("sys/leases/{ep}/{login}/"), None)
                .await;
            assert_eq!(
                (r.status, r.body.clone()),
                (
                    400,
                    json!({"errors": ["cannot write to a path ending in '/'"]})
                ),
                "{n} {ep}"
            );
        }
        let r = b
            .root(
                Method::PUT,
                "sys/leases/lookup",
                Some(json!({"lease_id": lease})),
            )
            .await;
        assert_eq!(r.status, 200, "{n}");
        let r = b
            .call(Method::GET, "auth/token/lookup-self", Some(&tok), None)
            .await;
        assert_eq!(r.status, 200, "{n}");
    }
}

#[tokio::test]
async fn lease_lookup_has_path_and_last_renewal_with_nanosecond_times() {
    for b in backends().await {
        let n = b.name;
        let (_tok, login, lease) = leased_login(&b, &uniq("dave")).await;
        let r = b
            .root(
                Method::PUT,
                "sys/leases/lookup",
                Some(json!({"lease_id": lease})),
            )
            .await;
        // The envelope's `renewable` is the envelope's (false), not the lease's.
        assert_eq!(r.body["renewable"], json!(false), "{n}");
        let d = &r.body["data"];
        assert_eq!(d["renewable"], json!(true), "{n}");
        assert_eq!(d["path"], json!(login), "{n}");
        assert!(
            d.get("last_renewal").is_some() && d.get("last_renewal_time").is_none(),
            "{n}"
        );
        assert!(is_rfc3339_nanos(d["issue_time"].as_str().unwrap()), "{n}");
        let last = lease.rsplit('/').next().unwrap();
        assert_eq!(last.len(), 65, "{n}: `h` and 64 hex characters");
    }
}

#[tokio::test]
async fn lookup_self_omits_period_when_unset() {
    for b in backends().await {
        let r = b
            .root(
                Method::POST,
                "auth/token/create",
                Some(json!({"ttl": "1h"})),
            )
            .await;
        let t = r.body["auth"]["client_token"].as_str().unwrap().to_string();
        let r = b
            .call(Method::GET, "auth/token/lookup-self", Some(&t), None)
            .await;
        assert!(
            r.body["data"].get("period").is_none(),
            "{}: {:?}",
            b.name,
            r.body
        );
    }
}

#[tokio::test]
async fn totp_create_ignores_a_method_id_in_the_body_and_warns() {
    for b in backends().await {
        let n = b.name;
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Q"})),
            )
            .await;
        let first = r.body["data"]["method_id"].as_str().unwrap().to_string();
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Q2", "method_id": first})),
            )
            .await;
        assert_eq!(r.status, 200, "{n}");
        assert_ne!(
            r.body["data"]["method_id"],
            json!(first),
            "{n}: a new method"
        );
        assert_eq!(
            r.body["warnings"],
            json!(["Endpoint replaced the value of these parameters with the values captured from the endpoint's path: [method_id]"]),
            "{n}"
        );
        let r = b
            .root(
                Method::GET,
                &format!("identity/mfa/method/totp/{first}"),
                None,
            )
            .await;
        assert_eq!(
            r.body["data"]["issuer"],
            json!("Q"),
            "{n}: the first one is unchanged"
        );
    }
}

#[tokio::test]
async fn totp_method_read_has_name_type_and_namespace_fields_but_no_mount_accessor() {
    for b in backends().await {
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Q"})),
            )
            .await;
        let id = r.body["data"]["method_id"].as_str().unwrap().to_string();
        let d = b
            .root(Method::GET, &format!("identity/mfa/method/totp/{id}"), None)
            .await
            .body["data"]
            .clone();
        assert_eq!(keys(&d), set(METHOD_FIELDS), "{}", b.name);
        assert!(
            d.get("mount_accessor").is_none() && d.get("namespace").is_none(),
            "{}",
            b.name
        );
    }
}

#[tokio::test]
async fn list_identity_mfa_method_lists_every_method_type() {
    for b in backends().await {
        let r = b
            .root(
                Method::POST,
                "identity/mfa/method/totp",
                Some(json!({"issuer": "Q"})),
            )
            .await;
        let id = r.body["data"]["method_id"].as_str().unwrap().to_string();
        let r = b.root(list(), "identity/mfa/method", None).await;
        assert_eq!(r.status, 200, "{}", b.name);
        assert!(
            r.body["data"]["keys"]
                .as_array()
                .unwrap()
                .contains(&json!(id)),
            "{}",
            b.name
        );
        assert_eq!(
            r.body["data"]["key_info"][&id]["type"],
            json!("totp"),
            "{}",
            b.name
        );
    }
}

#[tokio::test]
async fn list_identity_entity_id_has_key_info() {
    for b in backends().await {
        let name = uniq("e");
        let r = b
            .root(Method::POST, "identity/entity", Some(json!({"name": name})))
            .await;
        let id = r.body["data"]["id"].as_str().unwrap().to_string();
        let r = b.root(list(), "identity/entity/id", None).await;
        assert_eq!(
            r.body["data"]["key_info"][&id]["name"],
            json!(name),
            "{}",
            b.name
        );
    }
}
