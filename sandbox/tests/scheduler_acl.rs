//! Capability checks of the emulated scheduler (spec C §4.4, §5): `namespace:read-job` for reads,
//! `namespace:submit-job` for controls, with tokens and policies set up through the admin API.

use quartet_sandbox::{start, Sandbox, SandboxOptions};
use serde_json::{json, Value};

struct T {
    sandbox: Sandbox,
    http: reqwest::Client,
}

impl T {
    async fn new() -> Self {
        let sandbox = start(SandboxOptions::ephemeral())
            .await
            .expect("sandbox starts");
        Self {
            sandbox,
            http: reqwest::Client::new(),
        }
    }
    fn url(&self, path: &str) -> String {
        format!("{}{}", self.sandbox.scheduler_url, path)
    }
    async fn admin(&self, path: &str, body: Value) -> Value {
        let r = self
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
        let text = r.text().await.unwrap();
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }
    async fn token(&self, policies: &[&str]) -> String {
        self.admin(
            "/_sandbox/scheduler/acl/tokens",
            json!({"Name": "t", "Type": "client", "Policies": policies}),
        )
        .await["SecretID"]
            .as_str()
            .unwrap()
            .to_string()
    }
    async fn deployment(&self) -> String {
        self.admin(
            "/_sandbox/scheduler/jobs",
            json!({"ID": "web", "TaskGroups": [{"Name": "g", "Count": 1}]}),
        )
        .await["DeploymentID"]
            .as_str()
            .unwrap()
            .to_string()
    }
    async fn policies(&self) {
        self.admin(
            "/_sandbox/scheduler/acl/policies",
            json!({"Name": "reader", "Namespaces": {"default": {"Policy": "read"}}}),
        )
        .await;
        self.admin(
            "/_sandbox/scheduler/acl/policies",
            json!({"Name": "writer", "Namespaces": {"default": {"Policy": "write"}}}),
        )
        .await;
        self.admin(
            "/_sandbox/scheduler/acl/policies",
            json!({"Name": "caps", "Namespaces": {"default": {"Capabilities": ["read-job", "submit-job"]}}}),
        )
        .await;
        self.admin(
            "/_sandbox/scheduler/acl/policies",
            json!({"Name": "other-ns", "Namespaces": {"prod": {"Policy": "write"}}}),
        )
        .await;
    }
    async fn status(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, String) {
        let mut rb = self.http.request(method, self.url(path));
        if let Some(t) = token {
            rb = rb.header("X-Nomad-Token", t);
        }
        if let Some(b) = body {
            rb = rb.body(b.to_string());
        }
        let r = rb.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

#[tokio::test]
async fn reads_without_a_token_are_permission_denied() {
    let t = T::new().await;
    let id = t.deployment().await;
    for path in [
        "/v1/deployments".to_string(),
        format!("/v1/deployment/{id}"),
        format!("/v1/deployment/allocations/{id}"),
    ] {
        assert_eq!(
            t.status(reqwest::Method::GET, &path, None, None).await,
            (403, "Permission denied".to_string()),
            "{path}"
        );
    }
}

#[tokio::test]
async fn unknown_token_is_permission_denied() {
    let t = T::new().await;
    let fake = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        t.status(reqwest::Method::GET, "/v1/deployments", Some(&fake), None)
            .await
            .0,
        403
    );
}

#[tokio::test]
async fn read_job_capability_allows_reads() {
    let t = T::new().await;
    t.policies().await;
    let id = t.deployment().await;
    let tok = t.token(&["reader"]).await;
    for path in [
        "/v1/deployments".to_string(),
        format!("/v1/deployment/{id}"),
        format!("/v1/deployment/allocations/{id}"),
    ] {
        assert_eq!(
            t.status(reqwest::Method::GET, &path, Some(&tok), None)
                .await
                .0,
            200,
            "{path}"
        );
    }
}

#[tokio::test]
async fn read_job_on_another_namespace_does_not_allow_reads() {
    let t = T::new().await;
    t.policies().await;
    let _ = t.deployment().await;
    let tok = t.token(&["other-ns"]).await;
    assert_eq!(
        t.status(reqwest::Method::GET, "/v1/deployments", Some(&tok), None)
            .await
            .0,
        403
    );
}

#[tokio::test]
async fn controls_need_submit_job() {
    let t = T::new().await;
    t.policies().await;
    let id = t.deployment().await;
    let reader = t.token(&["reader"]).await;
    let (s, body) = t
        .status(
            reqwest::Method::POST,
            &format!("/v1/deployment/fail/{id}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!((s, body.as_str()), (403, "Permission denied"));
    let body = json!({"DeploymentID": id, "Pause": true});
    let (s, _) = t
        .status(
            reqwest::Method::POST,
            &format!("/v1/deployment/pause/{id}"),
            Some(&reader),
            Some(body.clone()),
        )
        .await;
    assert_eq!(s, 403);
    let writer = t.token(&["writer"]).await;
    let (s, _) = t
        .status(
            reqwest::Method::POST,
            &format!("/v1/deployment/pause/{id}"),
            Some(&writer),
            Some(body),
        )
        .await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn explicit_capabilities_grant_read_and_submit() {
    let t = T::new().await;
    t.policies().await;
    let id = t.deployment().await;
    let tok = t.token(&["caps"]).await;
    assert_eq!(
        t.status(
            reqwest::Method::GET,
            &format!("/v1/deployment/{id}"),
            Some(&tok),
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        t.status(
            reqwest::Method::POST,
            &format!("/v1/deployment/fail/{id}"),
            Some(&tok),
            None
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn bearer_authorization_header_is_accepted() {
    let t = T::new().await;
    let r = t
        .http
        .get(t.url("/v1/deployments"))
        .header("Authorization", "Bearer root")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn management_token_from_the_admin_api_is_allowed_everything() {
    let t = T::new().await;
    let id = t.deployment().await;
    let mgmt = t
        .admin(
            "/_sandbox/scheduler/acl/tokens",
            json!({"Name": "m", "Type": "management"}),
        )
        .await["SecretID"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        t.status(
            reqwest::Method::POST,
            &format!("/v1/deployment/fail/{id}"),
            Some(&mgmt),
            None
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn anonymous_policy_applies_to_requests_without_a_token() {
    let t = T::new().await;
    t.policies().await;
    let r = t
        .http
        .put(t.url("/_sandbox/scheduler/acl/anonymous"))
        .body(json!({"Policies": ["reader"]}).to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(
        t.status(reqwest::Method::GET, "/v1/deployments", None, None)
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn token_self_reads_the_callers_token() {
    let t = T::new().await;
    t.policies().await;
    let tok = t.token(&["reader"]).await;
    let (s, body) = t
        .status(reqwest::Method::GET, "/v1/acl/token/self", Some(&tok), None)
        .await;
    assert_eq!(s, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["SecretID"], tok);
    assert_eq!(v["Policies"], json!(["reader"]));
    let fake = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        t.status(
            reqwest::Method::GET,
            "/v1/acl/token/self",
            Some(&fake),
            None
        )
        .await,
        (403, "Permission denied".to_string())
    );
    let (s, body) = t
        .status(reqwest::Method::GET, "/v1/acl/token/self", None, None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["Name"],
        "Anonymous Token"
    );
}

#[tokio::test]
async fn status_leader_answers_with_the_query_headers_clients_parse() {
    let t = T::new().await;
    let r = t.http.get(t.url("/v1/status/leader")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    for h in [
        "x-nomad-index",
        "x-nomad-lastcontact",
        "x-nomad-knownleader",
    ] {
        assert!(r.headers().contains_key(h), "{h}");
    }
}
