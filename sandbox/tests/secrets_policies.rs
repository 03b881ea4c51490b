//! Conformance of `sys/policies/{acl,rgp,egp}` (spec A §4.3) and the wire conventions they
//! share with every endpoint.

use crate::secrets_support;

use quartet_sandbox::{Edition, SandboxOptions};
use reqwest::Method;
use secrets_support::*;
use serde_json::json;

const DOC: &str = "path \"secret/*\" {\n  capabilities = [\"read\", \"list\"]\n}\n";

#[tokio::test]
async fn acl_policy_put_then_get_returns_document() {
    let s = start().await;
    let r = s
        .root(
            Method::PUT,
            "sys/policies/acl/reader",
            Some(json!({"policy": DOC})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s.root(Method::GET, "sys/policies/acl/reader", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["name"], "reader");
    assert_eq!(r.body["data"]["policy"], DOC);
}

#[tokio::test]
async fn acl_policy_post_works_like_put() {
    let s = start().await;
    let r = s
        .root(
            Method::POST,
            "sys/policies/acl/p",
            Some(json!({"policy": DOC})),
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(
        s.root(Method::GET, "sys/policies/acl/p", None).await.status,
        200
    );
}

#[tokio::test]
async fn acl_policy_list_returns_keys_with_default_and_root() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/b",
        Some(json!({"policy": DOC})),
    )
    .await;
    s.root(
        Method::PUT,
        "sys/policies/acl/a",
        Some(json!({"policy": DOC})),
    )
    .await;
    let r = s.root(list(), "sys/policies/acl", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["keys"], json!(["a", "b", "default", "root"]));
    // `sys/` fields are in `data` only (OpenBao 2.7); only legacy endpoints copy them.
    assert!(r.body.get("keys").is_none());
}

#[tokio::test]
async fn list_with_get_and_list_true_query_is_a_list() {
    let s = start().await;
    let r = s
        .root(Method::GET, "sys/policies/acl?list=true", None)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["keys"], json!(["default", "root"]));
}

#[tokio::test]
async fn response_envelope_has_every_field() {
    let s = start().await;
    let r = s.root(Method::GET, "sys/policies/acl/default", None).await;
    for k in [
        "request_id",
        "lease_id",
        "renewable",
        "lease_duration",
        "data",
        "wrap_info",
        "warnings",
        "auth",
    ] {
        assert!(r.body.get(k).is_some(), "missing {k}: {}", r.body);
    }
    assert_eq!(r.body["lease_id"], "");
    assert_eq!(r.body["renewable"], false);
    assert_eq!(r.body["lease_duration"], 0);
    // No `mount_type` (OpenBao 2.7 sends none).
    assert!(r.body.get("mount_type").is_none());
}

#[tokio::test]
async fn acl_policy_names_are_lower_cased() {
    let s = start().await;
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/policies/acl/MyPolicy",
            Some(json!({"policy": DOC}))
        )
        .await
        .status,
        204
    );
    let r = s.root(Method::GET, "sys/policies/acl/mypolicy", None).await;
    assert_eq!(r.body["data"]["name"], "mypolicy");
    let r = s.root(Method::GET, "sys/policies/acl/MYPOLICY", None).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn acl_policy_accepts_base64_encoded_policy() {
    use base64::Engine;
    let s = start().await;
    let b64 = base64::engine::general_purpose::STANDARD.encode(DOC);
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/policies/acl/b64",
            Some(json!({"policy": b64}))
        )
        .await
        .status,
        204
    );
    let r = s.root(Method::GET, "sys/policies/acl/b64", None).await;
    assert_eq!(r.body["data"]["policy"], DOC);
}

#[tokio::test]
async fn acl_policy_without_policy_is_400_with_message() {
    let s = start().await;
    let r = s
        .root(Method::PUT, "sys/policies/acl/x", Some(json!({})))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!(["'policy' parameter not supplied or empty"])
    );
    let r = s
        .root(
            Method::PUT,
            "sys/policies/acl/x",
            Some(json!({"policy": ""})),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn acl_policy_with_invalid_hcl_is_400_failed_to_parse() {
    let s = start().await;
    let r = s
        .root(
            Method::PUT,
            "sys/policies/acl/x",
            Some(json!({"policy": "path \"a\" {"})),
        )
        .await;
    assert_eq!(r.status, 400);
    let msg = r.body["errors"][0].as_str().unwrap();
    assert!(msg.starts_with("failed to parse policy: "), "{msg}");
}

#[tokio::test]
async fn acl_policy_with_invalid_capability_is_400() {
    let s = start().await;
    let r = s
        .root(
            Method::PUT,
            "sys/policies/acl/x",
            Some(json!({"policy": "path \"a/*\" { capabilities = [\"fly\"] }"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.body["errors"][0]
        .as_str()
        .unwrap()
        .contains("invalid capability"));
    assert_eq!(
        s.root(Method::GET, "sys/policies/acl/x", None).await.status,
        404
    );
}

#[tokio::test]
async fn acl_policy_accepts_json_documents() {
    let s = start().await;
    let doc = r#"{"path": {"secret/*": {"capabilities": ["read"]}}}"#;
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/policies/acl/j",
            Some(json!({"policy": doc}))
        )
        .await
        .status,
        204
    );
}

#[tokio::test]
async fn absent_policy_is_404_with_empty_errors() {
    let s = start().await;
    let r = s.root(Method::GET, "sys/policies/acl/nope", None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body, json!({"errors": []}));
}

#[tokio::test]
async fn acl_policy_delete_then_get_is_404_and_delete_is_idempotent() {
    let s = start().await;
    s.root(
        Method::PUT,
        "sys/policies/acl/gone",
        Some(json!({"policy": DOC})),
    )
    .await;
    assert_eq!(
        s.root(Method::DELETE, "sys/policies/acl/gone", None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "sys/policies/acl/gone", None)
            .await
            .status,
        404
    );
    assert_eq!(
        s.root(Method::DELETE, "sys/policies/acl/gone", None)
            .await
            .status,
        204
    );
}

#[tokio::test]
async fn root_policy_cannot_be_updated_or_deleted() {
    let s = start().await;
    let r = s
        .root(
            Method::PUT,
            "sys/policies/acl/root",
            Some(json!({"policy": DOC})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"], json!(["cannot update \"root\" policy"]));
    let r = s.root(Method::DELETE, "sys/policies/acl/root", None).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"], json!(["cannot delete \"root\" policy"]));
    let r = s.root(Method::GET, "sys/policies/acl/root", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["name"], "root");
}

#[tokio::test]
async fn default_policy_exists_can_be_updated_and_cannot_be_deleted() {
    let s = start().await;
    let r = s.root(Method::GET, "sys/policies/acl/default", None).await;
    assert_eq!(r.status, 200);
    assert!(r.body["data"]["policy"]
        .as_str()
        .unwrap()
        .contains("auth/token/lookup-self"));
    let r = s
        .root(Method::DELETE, "sys/policies/acl/default", None)
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"], json!(["cannot delete default policy"]));
    assert_eq!(
        s.root(
            Method::PUT,
            "sys/policies/acl/default",
            Some(json!({"policy": DOC}))
        )
        .await
        .status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "sys/policies/acl/default", None)
            .await
            .body["data"]["policy"],
        DOC
    );
}

#[tokio::test]
async fn legacy_sys_policy_endpoints_use_rules() {
    let s = start().await;
    assert_eq!(
        s.root(Method::PUT, "sys/policy/old", Some(json!({"policy": DOC})))
            .await
            .status,
        204
    );
    let r = s.root(Method::GET, "sys/policy/old", None).await;
    assert_eq!(r.body["data"]["rules"], DOC);
    assert_eq!(r.body["rules"], DOC);
    let r = s.root(Method::GET, "sys/policy", None).await;
    assert_eq!(r.body["policies"], json!(["default", "old", "root"]));
}

#[tokio::test]
async fn rgp_policy_put_get_list_delete() {
    let s = start().await;
    let body = json!({"policy": "main = rule { true }", "enforcement_level": "soft-mandatory"});
    assert_eq!(
        s.root(Method::PUT, "sys/policies/rgp/Team", Some(body))
            .await
            .status,
        204
    );
    let r = s.root(Method::GET, "sys/policies/rgp/team", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["name"], "team");
    assert_eq!(r.body["data"]["policy"], "main = rule { true }");
    assert_eq!(r.body["data"]["enforcement_level"], "soft-mandatory");
    let r = s.root(list(), "sys/policies/rgp", None).await;
    assert_eq!(r.body["data"]["keys"], json!(["team"]));
    assert_eq!(
        s.root(Method::DELETE, "sys/policies/rgp/team", None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "sys/policies/rgp/team", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn empty_rgp_and_egp_lists_are_404() {
    let s = start().await;
    let r = s.root(list(), "sys/policies/rgp", None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body, json!({"errors": []}));
    assert_eq!(s.root(list(), "sys/policies/egp", None).await.status, 404);
}

#[tokio::test]
async fn sentinel_enforcement_level_is_required_and_validated() {
    let s = start().await;
    let r = s
        .root(
            Method::PUT,
            "sys/policies/rgp/x",
            Some(json!({"policy": "main = rule { true }"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(!r.body["errors"][0].as_str().unwrap().is_empty());
    let r = s
        .root(
            Method::PUT,
            "sys/policies/rgp/x",
            Some(json!({"policy": "main = rule { true }", "enforcement_level": "strict"})),
        )
        .await;
    assert_eq!(r.status, 400);
    for level in ["advisory", "soft-mandatory", "hard-mandatory"] {
        let b =
            json!({"policy": "main = rule { true }", "enforcement_level": level, "paths": ["a/*"]});
        assert_eq!(
            s.root(Method::PUT, "sys/policies/egp/x", Some(b))
                .await
                .status,
            204,
            "{level}"
        );
    }
}

#[tokio::test]
async fn sentinel_policy_without_text_is_400() {
    let s = start().await;
    let r = s
        .root(
            Method::PUT,
            "sys/policies/rgp/x",
            Some(json!({"enforcement_level": "advisory"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!(["'policy' parameter not supplied or empty"])
    );
}

#[tokio::test]
async fn egp_get_returns_level_name_paths_policy() {
    let s = start().await;
    let b = json!({"policy": "main = rule { true }", "enforcement_level": "hard-mandatory", "paths": ["secret/*", "sys/mounts"]});
    assert_eq!(
        s.root(Method::PUT, "sys/policies/egp/gate", Some(b))
            .await
            .status,
        204
    );
    let r = s.root(Method::GET, "sys/policies/egp/gate", None).await;
    assert_eq!(r.body["data"]["enforcement_level"], "hard-mandatory");
    assert_eq!(r.body["data"]["name"], "gate");
    assert_eq!(r.body["data"]["paths"], json!(["secret/*", "sys/mounts"]));
    assert_eq!(r.body["data"]["policy"], "main = rule { true }");
}

#[tokio::test]
async fn egp_paths_accept_comma_string_and_array() {
    let s = start().await;
    let b = json!({"policy": "main = rule { true }", "enforcement_level": "advisory", "paths": "a/*, b"});
    assert_eq!(
        s.root(Method::PUT, "sys/policies/egp/c", Some(b))
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(Method::GET, "sys/policies/egp/c", None).await.body["data"]["paths"],
        json!(["a/*", "b"])
    );
}

#[tokio::test]
async fn egp_requires_paths() {
    let s = start().await;
    let b = json!({"policy": "main = rule { true }", "enforcement_level": "advisory"});
    assert_eq!(
        s.root(Method::PUT, "sys/policies/egp/c", Some(b))
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn egp_list_includes_name_path_map() {
    let s = start().await;
    let b = json!({"policy": "main = rule { true }", "enforcement_level": "advisory", "paths": ["*", "secret/*", "sys/mounts"]});
    s.root(Method::PUT, "sys/policies/egp/all", Some(b)).await;
    let r = s.root(list(), "sys/policies/egp", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["keys"], json!(["all"]));
    assert_eq!(
        r.body["data"]["name_path_map"]["all"],
        json!([{"path": "", "glob": true}, {"path": "secret/", "glob": true}, {"path": "sys/mounts", "glob": false}])
    );
}

#[tokio::test]
async fn deleting_an_egp_removes_it_from_its_paths() {
    let s = start().await;
    let b = json!({"policy": "main = rule { true }", "enforcement_level": "advisory", "paths": ["x/*"]});
    s.root(Method::PUT, "sys/policies/egp/e", Some(b)).await;
    assert_eq!(
        s.root(Method::DELETE, "sys/policies/egp/e", None)
            .await
            .status,
        204
    );
    assert_eq!(s.root(list(), "sys/policies/egp", None).await.status, 404);
}

#[tokio::test]
async fn rgp_and_egp_are_unsupported_without_premium_licence() {
    for edition in [Edition::Community, Edition::Enterprise] {
        let s = start_with(SandboxOptions {
            edition,
            ..SandboxOptions::ephemeral()
        })
        .await;
        let b = json!({"policy": "main = rule { true }", "enforcement_level": "advisory", "paths": ["x"]});
        for kind in ["rgp", "egp"] {
            let r = s
                .root(
                    Method::PUT,
                    &format!("sys/policies/{kind}/x"),
                    Some(b.clone()),
                )
                .await;
            assert_eq!(r.status, 404, "{edition:?} {kind}");
            assert!(r.body["errors"][0]
                .as_str()
                .unwrap()
                .contains("unsupported path"));
            assert_eq!(
                s.root(list(), &format!("sys/policies/{kind}"), None)
                    .await
                    .status,
                404
            );
        }
        // ACL policies are available on every edition.
        assert_eq!(
            s.root(
                Method::PUT,
                "sys/policies/acl/x",
                Some(json!({"policy": DOC}))
            )
            .await
            .status,
            204
        );
    }
}

#[tokio::test]
async fn missing_token_is_403_permission_denied() {
    let s = start().await;
    let r = s
        .call(Method::GET, "sys/policies/acl/default", None, None)
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body, json!({"errors": ["permission denied"]}));
}

#[tokio::test]
async fn unknown_token_is_403_permission_denied() {
    let s = start().await;
    let r = s
        .call(list(), "sys/policies/acl", Some("not-a-token"), None)
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["errors"], json!(["permission denied"]));
}

#[tokio::test]
async fn bearer_authorization_header_is_accepted() {
    let s = start().await;
    let r = s
        .client
        .get(format!("{}/v1/sys/policies/acl/default", s.url))
        .header("Authorization", format!("Bearer {}", s.root))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn unknown_http_method_is_405() {
    let s = start().await;
    let r = s
        .root(
            Method::from_bytes(b"FROB").unwrap(),
            "sys/policies/acl/default",
            None,
        )
        .await;
    assert_eq!(r.status, 405);
    assert!(r.body["errors"].is_array());
}

#[tokio::test]
async fn unsupported_operation_on_a_known_path_is_405() {
    let s = start().await;
    let r = s.root(Method::DELETE, "sys/policies/acl", None).await;
    assert_eq!(r.status, 405);
}

#[tokio::test]
async fn invalid_json_body_is_400() {
    let s = start().await;
    let r = s
        .client
        .put(format!("{}/v1/sys/policies/acl/x", s.url))
        .header("X-Secrets-Token", &s.root)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(v["errors"][0]
        .as_str()
        .unwrap()
        .starts_with("failed to parse JSON input"));
}

#[tokio::test]
async fn extra_keys_and_bodies_without_content_type_are_accepted() {
    let s = start().await;
    let r = s
        .client
        .put(format!("{}/v1/sys/policies/acl/x", s.url))
        .header("X-Secrets-Token", &s.root)
        .body(serde_json::to_vec(&json!({"policy": DOC, "name": "x", "unexpected": 1})).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    // A body on GET is ignored.
    let r = s
        .root(
            Method::GET,
            "sys/policies/acl/x",
            Some(json!({"anything": true})),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn unknown_route_is_404() {
    let s = start().await;
    let r = s.root(Method::GET, "nowhere/at/all", None).await;
    assert_eq!(r.status, 404);
    let r = s.root(Method::GET, "sys/not-a-sys-path", None).await;
    assert_eq!(r.status, 404);
}
