//! Regression tests for what the real catalog clients send, found by running py-consul against
//! the sandbox (`sandbox/clients/consul_client.py`).

use quartet_sandbox::{start, SandboxOptions};
use serde_json::{json, Value};

/// py-consul's `acl.policy.create(name, rules={"acl": "read"})` sends its rules through
/// `json.dumps`: JSON rules, which Consul's HCL parser reads like `acl = "read"`.
#[tokio::test]
async fn policy_rules_in_json_form_grant_like_their_hcl_form() {
    let sb = start(SandboxOptions::ephemeral()).await.unwrap();
    let http = reqwest::Client::new();
    let url = &sb.catalog_url;
    let boot: Value = http
        .put(format!("{url}/v1/acl/bootstrap"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mgmt = boot["SecretID"].as_str().unwrap();
    let put = |path: &str, body: Value| {
        http.put(format!("{url}{path}"))
            .header("X-Catalog-Token", mgmt)
            .body(body.to_string())
            .send()
    };
    let r = put(
        "/v1/acl/policy",
        json!({"name": "readers", "rules": "{\"acl\": \"read\"}"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let tok: Value = put("/v1/acl/token", json!({"Policies": [{"Name": "readers"}]}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let reader = tok["SecretID"].as_str().unwrap();
    let list = http
        .get(format!("{url}/v1/acl/tokens"))
        .header("X-Catalog-Token", reader)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
    let write = http
        .put(format!("{url}/v1/acl/policy"))
        .header("X-Catalog-Token", reader)
        .body(json!({"Name": "nope"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(write.status(), 403);
    sb.shutdown();
}
