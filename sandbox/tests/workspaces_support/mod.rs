//! Shared helpers of the workspace-service conformance tests: start the sandbox, call the API
//! and the admin API over HTTP.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use quartet_sandbox::{Sandbox, SandboxOptions};
use reqwest::{header::HeaderMap, Method};
use serde_json::{json, Value};

pub const ROOT: &str = "root";
pub const ORG: &str = "quartet";

pub struct Ws {
    pub sb: Sandbox,
    pub url: String,
    pub http: reqwest::Client,
}

pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub headers: HeaderMap,
}

impl Ws {
    pub async fn start() -> Self {
        Self::start_with(SandboxOptions::ephemeral()).await
    }

    pub async fn start_with(opts: SandboxOptions) -> Self {
        let sb = quartet_sandbox::start(opts).await.expect("sandbox starts");
        let url = sb.workspaces_url.clone();
        let ws = Self {
            sb,
            url,
            http: reqwest::Client::new(),
        };
        // Fast runs for tests.
        ws.admin(
            Method::PUT,
            "/settings",
            json!({"step_ms": 40, "force_cancel_cooloff_ms": 300}),
        )
        .await;
        ws
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let mut req = self.http.request(method, format!("{}{}", self.url, path));
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/vnd.api+json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("request is answered");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Resp {
            status,
            body,
            headers,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, Some(ROOT), None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call(Method::POST, path, Some(ROOT), Some(body)).await
    }
    pub async fn patch(&self, path: &str, body: Value) -> Resp {
        self.call(Method::PATCH, path, Some(ROOT), Some(body)).await
    }
    pub async fn delete(&self, path: &str, body: Option<Value>) -> Resp {
        self.call(Method::DELETE, path, Some(ROOT), body).await
    }
    pub async fn get_as(&self, token: &str, path: &str) -> Resp {
        self.call(Method::GET, path, Some(token), None).await
    }
    pub async fn post_as(&self, token: &str, path: &str, body: Value) -> Resp {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }
    pub async fn patch_as(&self, token: &str, path: &str, body: Value) -> Resp {
        self.call(Method::PATCH, path, Some(token), Some(body))
            .await
    }
    pub async fn delete_as(&self, token: &str, path: &str, body: Value) -> Resp {
        self.call(Method::DELETE, path, Some(token), Some(body))
            .await
    }

    /// Calls the sandbox admin API of the service (`/_sandbox/workspaces<path>`).
    pub async fn admin(&self, method: Method, path: &str, body: Value) -> Value {
        let resp = self
            .http
            .request(method, format!("{}/_sandbox/workspaces{}", self.url, path))
            .body(body.to_string())
            .send()
            .await
            .expect("admin answers");
        assert!(
            resp.status().is_success(),
            "admin call {path} failed: {}",
            resp.status()
        );
        resp.json().await.unwrap_or(Value::Null)
    }

    /// Creates a workspace with extra attributes and returns its id.
    pub async fn create_ws(&self, name: &str, attrs: Value) -> String {
        let mut a = attrs;
        a["name"] = json!(name);
        let r = self
            .post(
                &format!("/api/v2/organizations/{ORG}/workspaces"),
                json!({"data": {"type": "workspaces", "attributes": a}}),
            )
            .await;
        assert_eq!(r.status, 201, "create workspace: {}", r.body);
        r.body["data"]["id"].as_str().unwrap().to_string()
    }

    /// A team with the given settings and a user in it; returns (team id, user token).
    pub async fn team_user(&self, team: Value) -> (String, String) {
        let mut t = team;
        t["organization"] = json!(ORG);
        if t.get("name").is_none() {
            t["name"] = json!(format!("team{}", rand_suffix()));
        }
        let team = self.admin(Method::POST, "/teams", t).await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let user = self
            .admin(
                Method::POST,
                "/users",
                json!({"username": format!("user{}", rand_suffix()), "teams": [team]}),
            )
            .await;
        (team, user["token"].as_str().unwrap().to_string())
    }

    pub async fn org_token(&self) -> String {
        self.admin(
            Method::POST,
            "/tokens",
            json!({"kind": "organization", "organization": ORG}),
        )
        .await["token"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Uploads a configuration version to the workspace (without queueing a run), as a real
    /// client does before its first run; returns its id.
    pub async fn upload_config(&self, ws: &str) -> String {
        let r = self
            .post(
                &format!("/api/v2/workspaces/{ws}/configuration-versions"),
                json!({"data": {"type": "configuration-versions",
                    "attributes": {"auto-queue-runs": false}}}),
            )
            .await;
        assert_eq!(r.status, 201, "create configuration version: {}", r.body);
        let id = r.body["data"]["id"].as_str().unwrap().to_string();
        let url = r.body["data"]["attributes"]["upload-url"]
            .as_str()
            .unwrap()
            .to_string();
        let up = self
            .http
            .put(url)
            .body(vec![0u8; 16])
            .send()
            .await
            .expect("upload answers");
        assert!(up.status().is_success(), "upload: {}", up.status());
        id
    }

    /// Creates a workspace with extra attributes and a configuration version; returns its id.
    pub async fn create_ws_with_config(&self, name: &str, attrs: Value) -> String {
        let id = self.create_ws(name, attrs).await;
        self.upload_config(&id).await;
        id
    }

    /// Creates a run, uploading a configuration version first when the workspace has none.
    pub async fn create_run(&self, ws: &str, attrs: Value) -> String {
        let w = self.get(&format!("/api/v2/workspaces/{ws}")).await;
        if w.body["data"]["relationships"]["current-configuration-version"]["data"].is_null() {
            self.upload_config(ws).await;
        }
        let r = self
            .post(
                "/api/v2/runs",
                json!({"data": {"type": "runs", "attributes": attrs,
                    "relationships": {"workspace": {"data": {"type": "workspaces", "id": ws}}}}}),
            )
            .await;
        assert_eq!(r.status, 201, "create run: {}", r.body);
        r.body["data"]["id"].as_str().unwrap().to_string()
    }

    pub async fn run_status(&self, run: &str) -> String {
        self.get(&format!("/api/v2/runs/{run}")).await.body["data"]["attributes"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Polls the run until it reaches `status` (panics after 10 s).
    pub async fn wait_status(&self, run: &str, status: &str) -> Value {
        let start = Instant::now();
        loop {
            let r = self.get(&format!("/api/v2/runs/{run}")).await;
            if r.body["data"]["attributes"]["status"] == status {
                return r.body;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "run {run} never reached {status}, last {}",
                r.body["data"]["attributes"]["status"]
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}", N.fetch_add(1, Ordering::SeqCst))
}

pub fn ws_body(attrs: Value) -> Value {
    json!({"data": {"type": "workspaces", "attributes": attrs}})
}

pub fn error_detail(body: &Value) -> String {
    body["errors"][0]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub fn error_pointer(body: &Value) -> String {
    body["errors"][0]["source"]["pointer"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
