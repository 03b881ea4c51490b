//! The scheduler's ACL API over `/v1` (policies with HCL rules, tokens), which real clients use
//! to set up the `namespace:read-job` / `namespace:submit-job` checks of spec C §5.

use quartet_sandbox::{start, Sandbox, SandboxOptions};
use serde_json::{json, Value};

struct T {
    sandbox: Sandbox,
    http: reqwest::Client,
}

impl T {
    async fn new() -> Self {
        Self {
            sandbox: start(SandboxOptions::ephemeral())
                .await
                .expect("sandbox starts"),
            http: reqwest::Client::new(),
        }
    }
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, String) {
        let mut rb = self
            .http
            .request(
                method.parse().unwrap(),
                format!("{}{}", self.sandbox.scheduler_url, path),
            )
            .header("X-Nomad-Token", token);
        if let Some(b) = body {
            rb = rb.body(b.to_string());
        }
        let r = rb.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

#[tokio::test]
async fn policies_and_tokens_made_over_v1_grant_read_job() {
    let t = T::new().await;
    let (s, body) = t
        .call(
            "POST",
            "/v1/acl/policy/readers",
            "root",
            Some(json!({"Name": "readers", "Description": "d",
                        "Rules": "namespace \"default\" {\n  policy = \"read\"\n}\n"})),
        )
        .await;
    assert_eq!((s, body.as_str()), (200, ""));
    let (s, body) = t.call("GET", "/v1/acl/policy/readers", "root", None).await;
    assert_eq!(s, 200, "{body}");
    let p: Value = serde_json::from_str(&body).unwrap();
    assert!(p["Rules"].as_str().unwrap().contains("namespace"));
    let (s, body) = t
        .call(
            "POST",
            "/v1/acl/token",
            "root",
            Some(json!({"Name": "r", "Type": "client", "Policies": ["readers"]})),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let tok: Value = serde_json::from_str(&body).unwrap();
    let secret = tok["SecretID"].as_str().unwrap();
    assert_eq!(tok["Policies"], json!(["readers"]));
    let (s, _) = t.call("GET", "/v1/deployments", secret, None).await;
    assert_eq!(s, 200);
    // read is not submit-job: controls stay denied.
    let r = t
        .http
        .post(format!(
            "{}/_sandbox/scheduler/jobs",
            t.sandbox.scheduler_url
        ))
        .json(&json!({"ID": "web", "TaskGroups": [{"Name": "g", "Count": 1}]}))
        .send()
        .await
        .unwrap();
    let dep = r.json::<Value>().await.unwrap()["DeploymentID"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, body) = t
        .call("POST", &format!("/v1/deployment/fail/{dep}"), secret, None)
        .await;
    assert_eq!((s, body.as_str()), (403, "Permission denied"));
    let (s, body) = t
        .call(
            "GET",
            &format!("/v1/acl/token/{}", tok["AccessorID"].as_str().unwrap()),
            "root",
            None,
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let (s, _) = t
        .call(
            "DELETE",
            &format!("/v1/acl/token/{}", tok["AccessorID"].as_str().unwrap()),
            "root",
            None,
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = t.call("GET", "/v1/deployments", secret, None).await;
    assert_eq!(s, 403);
}

#[tokio::test]
async fn acl_writes_need_a_management_token_and_valid_input() {
    let t = T::new().await;
    t.call(
        "POST",
        "/v1/acl/policy/readers",
        "root",
        Some(json!({"Name": "readers", "Rules": "namespace \"default\" { policy = \"read\" }"})),
    )
    .await;
    let (_, body) = t
        .call(
            "POST",
            "/v1/acl/token",
            "root",
            Some(json!({"Type": "client", "Policies": ["readers"]})),
        )
        .await;
    let secret = serde_json::from_str::<Value>(&body).unwrap()["SecretID"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, _) = t.call("GET", "/v1/acl/policies", &secret, None).await;
    assert_eq!(s, 403);
    let (s, body) = t
        .call(
            "POST",
            "/v1/acl/policy/a",
            "root",
            Some(json!({"Name": "b", "Rules": ""})),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (400, "Policy name does not match request path")
    );
    let (s, body) = t
        .call(
            "POST",
            "/v1/acl/token",
            "root",
            Some(json!({"Type": "client"})),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (400, "client token missing policies or roles")
    );
    let (s, body) = t
        .call(
            "POST",
            "/v1/acl/token",
            "root",
            Some(json!({"Type": "management", "Policies": ["readers"]})),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (
            400,
            "management token cannot be associated with policies or roles"
        )
    );
    let (s, body) = t.call("GET", "/v1/acl/policy/absent", "root", None).await;
    assert_eq!((s, body.as_str()), (404, "ACL policy not found"));
}
