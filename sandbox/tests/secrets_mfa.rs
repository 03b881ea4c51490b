//! Conformance of the TOTP MFA methods (spec A §2.7, §4.5, §8) and login enforcements.

use crate::secrets_support;

use base64::Engine;
use reqwest::Method;
use secrets_support::*;
use serde_json::{json, Value};

async fn method(s: &S, body: Value) -> String {
    let r = s
        .root(Method::POST, "identity/mfa/method/totp", Some(body))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["data"]["method_id"].as_str().unwrap().to_string()
}

async fn entity(s: &S, name: &str) -> String {
    let r = s
        .root(Method::POST, "identity/entity", Some(json!({"name": name})))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["data"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn totp_method_create_returns_id_and_read_returns_defaults() {
    let s = start().await;
    let id = method(&s, json!({"issuer": "Acme"})).await;
    assert_eq!(id.len(), 36);
    let r = s
        .root(Method::GET, &format!("identity/mfa/method/totp/{id}"), None)
        .await;
    assert_eq!(r.status, 200);
    let d = &r.body["data"];
    assert_eq!(d["id"], id.as_str());
    assert_eq!(d["issuer"], "Acme");
    assert_eq!(d["period"], 30);
    assert_eq!(d["key_size"], 20);
    assert_eq!(d["qr_size"], 200);
    assert_eq!(d["algorithm"], "SHA1");
    assert_eq!(d["digits"], 6);
    assert_eq!(d["skew"], 1);
    assert_eq!(d["max_validation_attempts"], 5);
    assert_eq!(d["type"], "totp");
    assert!(d.get("namespace").is_some() || d.get("namespace_id").is_some());
}

#[tokio::test]
async fn totp_method_requires_issuer() {
    let s = start().await;
    let r = s
        .root(Method::POST, "identity/mfa/method/totp", Some(json!({})))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"], json!(["issuer must be set"]));
}

#[tokio::test]
async fn totp_method_bounds_are_enforced() {
    let s = start().await;
    for (field, value) in [
        ("digits", json!(7)),
        ("skew", json!(2)),
        ("algorithm", json!("MD5")),
        ("period", json!(0)),
        ("key_size", json!(0)),
        ("max_validation_attempts", json!(-1)),
    ] {
        let mut b = json!({"issuer": "Acme"});
        b[field] = value.clone();
        let r = s
            .root(Method::POST, "identity/mfa/method/totp", Some(b))
            .await;
        assert_eq!(r.status, 400, "{field}={value}");
    }
    for (field, value) in [
        ("digits", json!(8)),
        ("skew", json!(0)),
        ("algorithm", json!("SHA512")),
        ("algorithm", json!("SHA256")),
    ] {
        let mut b = json!({"issuer": "Acme"});
        b[field] = value.clone();
        let r = s
            .root(Method::POST, "identity/mfa/method/totp", Some(b))
            .await;
        assert_eq!(r.status, 200, "{field}={value}");
    }
}

#[tokio::test]
async fn totp_method_period_accepts_duration_strings() {
    let s = start().await;
    let id = method(&s, json!({"issuer": "A", "period": "1m"})).await;
    let r = s
        .root(Method::GET, &format!("identity/mfa/method/totp/{id}"), None)
        .await;
    assert_eq!(r.body["data"]["period"], 60);
}

#[tokio::test]
async fn totp_method_update_by_path_id_while_a_body_id_creates_a_new_method() {
    let s = start().await;
    let id = method(&s, json!({"issuer": "A"})).await;
    let r = s
        .root(
            Method::POST,
            &format!("identity/mfa/method/totp/{id}"),
            Some(json!({"issuer": "B", "digits": 8})),
        )
        .await;
    assert_eq!(r.status, 204);
    let d = s
        .root(Method::GET, &format!("identity/mfa/method/totp/{id}"), None)
        .await
        .body["data"]
        .clone();
    assert_eq!(d["issuer"], "B");
    assert_eq!(d["digits"], 8);
    // A `method_id` in the body of `POST .../totp` is ignored (OpenBao 2.7): a new method.
    let r = s
        .root(
            Method::POST,
            "identity/mfa/method/totp",
            Some(json!({"method_id": id, "issuer": "X"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_ne!(r.body["data"]["method_id"], json!(id));
    assert_eq!(
        r.body["warnings"],
        json!(["Endpoint replaced the value of these parameters with the values captured from the endpoint's path: [method_id]"])
    );
    // An update replaces every setting: what is not given takes its default again.
    let r = s
        .root(
            Method::POST,
            &format!("identity/mfa/method/totp/{id}"),
            Some(json!({"issuer": "C"})),
        )
        .await;
    assert_eq!(r.status, 204);
    let d = s
        .root(Method::GET, &format!("identity/mfa/method/totp/{id}"), None)
        .await
        .body["data"]
        .clone();
    assert_eq!(d["issuer"], "C");
    assert_eq!(d["digits"], 6);
    // issuer is required on every write.
    let r = s
        .root(
            Method::POST,
            &format!("identity/mfa/method/totp/{id}"),
            Some(json!({"digits": 8})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s.root(list(), "identity/mfa/method/totp", None).await;
    let keys = r.body["data"]["keys"].as_array().unwrap().clone();
    assert_eq!(
        keys.len(),
        2,
        "the method and the one the body-ID write created"
    );
    assert!(keys.contains(&json!(id)));
}

#[tokio::test]
async fn totp_method_update_of_an_unknown_id_changes_nothing() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/00000000-0000-0000-0000-000000000000",
            Some(json!({"issuer": "X"})),
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(
        s.root(list(), "identity/mfa/method/totp", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn totp_method_names_are_unique() {
    let s = start().await;
    method(&s, json!({"issuer": "A", "method_name": "corp"})).await;
    let other = method(&s, json!({"issuer": "B"})).await;
    let r = s
        .root(
            Method::POST,
            &format!("identity/mfa/method/totp/{other}"),
            Some(json!({"issuer": "B", "method_name": "corp"})),
        )
        .await;
    assert_eq!(r.status, 500);
}

#[tokio::test]
async fn totp_method_list_and_delete() {
    let s = start().await;
    assert_eq!(
        s.root(list(), "identity/mfa/method/totp", None)
            .await
            .status,
        404
    );
    let a = method(&s, json!({"issuer": "A"})).await;
    let b = method(&s, json!({"issuer": "B"})).await;
    let r = s.root(list(), "identity/mfa/method/totp", None).await;
    let mut keys: Vec<String> = serde_json::from_value(r.body["data"]["keys"].clone()).unwrap();
    keys.sort();
    let mut want = vec![a.clone(), b];
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(
        s.root(
            Method::DELETE,
            &format!("identity/mfa/method/totp/{a}"),
            None
        )
        .await
        .status,
        204
    );
    assert_eq!(
        s.root(Method::GET, &format!("identity/mfa/method/totp/{a}"), None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn admin_generate_returns_otpauth_url_and_png_barcode() {
    let s = start().await;
    let id = method(
        &s,
        json!({"issuer": "Acme", "qr_size": 150, "digits": 8, "algorithm": "SHA256", "period": 60}),
    )
    .await;
    let e = entity(&s, "bob").await;
    let r = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/admin-generate",
            Some(json!({"method_id": id, "entity_id": e})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let url = r.body["data"]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("otpauth://totp/Acme:{e}?")),
        "{url}"
    );
    for part in [
        "algorithm=SHA256",
        "digits=8",
        "issuer=Acme",
        "period=60",
        "secret=",
    ] {
        assert!(url.contains(part), "{url} lacks {part}");
    }
    let png = base64::engine::general_purpose::STANDARD
        .decode(r.body["data"]["barcode"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    assert_eq!(width, 150);
    // It is a real image: it decodes, and it has dark modules on a light background.
    let decoder = png::Decoder::new(std::io::Cursor::new(png.clone()));
    let mut reader = decoder.read_info().expect("valid PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader.next_frame(&mut buf).expect("frame decodes");
    assert_eq!((info.width, info.height), (150, 150));
    let pixels = &buf[..info.buffer_size()];
    assert!(pixels.contains(&0) && pixels.contains(&255));
    // The secret in the URL is the one stored on the entity, and it yields valid codes.
    let stored = s.admin(Method::GET, &format!("mfa/{e}/{id}"), None).await;
    assert!(url.ends_with(&format!(
        "secret={}",
        stored.body["secret"].as_str().unwrap()
    )));
    assert_eq!(stored.body["code"].as_str().unwrap().len(), 8);
}

#[tokio::test]
async fn a_secret_must_be_destroyed_before_it_is_regenerated() {
    let s = start().await;
    let id = method(&s, json!({"issuer": "Acme"})).await;
    let e = entity(&s, "bob").await;
    let body = json!({"method_id": id, "entity_id": e});
    let first = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/admin-generate",
            Some(body.clone()),
        )
        .await;
    assert_eq!(first.status, 200);
    let again = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/admin-generate",
            Some(body.clone()),
        )
        .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body["data"], Value::Null);
    assert!(again.body["warnings"][0]
        .as_str()
        .unwrap()
        .contains("already has a secret"));
    assert_eq!(
        s.root(
            Method::POST,
            "identity/mfa/method/totp/admin-destroy",
            Some(body.clone())
        )
        .await
        .status,
        204
    );
    let third = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/admin-generate",
            Some(body),
        )
        .await;
    assert!(third.body["data"]["url"].is_string());
    assert_ne!(third.body["data"]["url"], first.body["data"]["url"]);
}

#[tokio::test]
async fn generate_stores_the_secret_on_the_calling_tokens_entity() {
    let s = start().await;
    s.root(
        Method::POST,
        "auth/idp/config",
        Some(json!({"org_name": "a"})),
    )
    .await;
    s.admin(Method::PUT, "idp/users/u", Some(json!({"password": "pw"})))
        .await;
    s.root(Method::PUT, "sys/policies/acl/gen", Some(json!({"policy": "path \"identity/mfa/method/totp/generate\" { capabilities = [\"update\"] }"}))).await;
    s.root(
        Method::POST,
        "auth/idp/users/u",
        Some(json!({"policies": "gen"})),
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
    let ent = login.body["auth"]["entity_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!ent.is_empty());
    let id = method(&s, json!({"issuer": "Acme"})).await;
    let r = s
        .call(
            Method::POST,
            "identity/mfa/method/totp/generate",
            Some(&tok),
            Some(json!({"method_id": id})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        s.admin(Method::GET, &format!("mfa/{ent}/{id}"), None)
            .await
            .status,
        200
    );
    let r = s
        .call(
            Method::POST,
            "identity/mfa/method/totp/generate",
            Some(&tok),
            Some(json!({"method_id": id})),
        )
        .await;
    assert!(r.body["warnings"][0]
        .as_str()
        .unwrap()
        .contains("already has a secret"));
}

#[tokio::test]
async fn generate_requires_an_existing_method_and_entity() {
    let s = start().await;
    let id = method(&s, json!({"issuer": "Acme"})).await;
    // The root token has no entity.
    let r = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/generate",
            Some(json!({"method_id": id})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/admin-generate",
            Some(json!({"method_id": id, "entity_id": "nope"})),
        )
        .await;
    assert_eq!(r.status, 400);
    let e = entity(&s, "x").await;
    let r = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/admin-generate",
            Some(json!({"method_id": "00000000-0000-0000-0000-000000000000", "entity_id": e})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .root(
            Method::POST,
            "identity/mfa/method/totp/admin-generate",
            Some(json!({"entity_id": e})),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn method_in_use_by_a_login_enforcement_cannot_be_deleted() {
    let s = start().await;
    let id = method(&s, json!({"issuer": "Acme"})).await;
    let r = s
        .root(
            Method::POST,
            "identity/mfa/login-enforcement/e1",
            Some(json!({"mfa_method_ids": [id], "auth_method_types": ["idp"]})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s
        .root(
            Method::DELETE,
            &format!("identity/mfa/method/totp/{id}"),
            None,
        )
        .await;
    // A plain 500 naming the enforcement's ID (OpenBao 2.7).
    assert_eq!(r.status, 500);
    let enf = s
        .root(Method::GET, "identity/mfa/login-enforcement/e1", None)
        .await
        .body["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        r.body["errors"],
        json!([format!(
            "1 error occurred:\n\t* methodID is still used by an enforcement configuration with ID: {enf}\n\n"
        )])
    );
    assert_eq!(
        s.root(Method::GET, &format!("identity/mfa/method/totp/{id}"), None)
            .await
            .status,
        200
    );
    assert_eq!(
        s.root(Method::DELETE, "identity/mfa/login-enforcement/e1", None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(
            Method::DELETE,
            &format!("identity/mfa/method/totp/{id}"),
            None
        )
        .await
        .status,
        204
    );
}

#[tokio::test]
async fn login_enforcement_needs_a_target_and_known_methods() {
    let s = start().await;
    let id = method(&s, json!({"issuer": "Acme"})).await;
    let r = s
        .root(
            Method::POST,
            "identity/mfa/login-enforcement/e",
            Some(json!({"mfa_method_ids": [id]})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .root(
            Method::POST,
            "identity/mfa/login-enforcement/e",
            Some(json!({"mfa_method_ids": ["x"], "auth_method_types": ["idp"]})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .root(
            Method::POST,
            "identity/mfa/login-enforcement/e",
            Some(json!({"mfa_method_ids": [id], "auth_method_types": "idp"})),
        )
        .await;
    assert_eq!(r.status, 204);
    let r = s
        .root(Method::GET, "identity/mfa/login-enforcement/e", None)
        .await;
    assert_eq!(r.body["data"]["mfa_method_ids"], json!([id]));
    assert_eq!(
        s.root(list(), "identity/mfa/login-enforcement", None)
            .await
            .body["data"]["keys"],
        json!(["e"])
    );
}
