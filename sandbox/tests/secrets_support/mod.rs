//! Shared helpers of the secrets-service conformance tests: start a sandbox, send requests.
#![allow(dead_code)]

use quartet_sandbox::{Sandbox, SandboxOptions};
use reqwest::Method;
use serde_json::Value;

pub struct S {
    pub sb: Sandbox,
    pub url: String,
    pub client: reqwest::Client,
    pub root: String,
}

pub async fn start() -> S {
    start_with(SandboxOptions::ephemeral()).await
}

pub async fn start_with(opts: SandboxOptions) -> S {
    let root = opts.root_token.clone();
    let sb = quartet_sandbox::start(opts).await.expect("sandbox starts");
    let url = sb.secrets_url().to_string();
    S {
        sb,
        url,
        client: reqwest::Client::new(),
        root,
    }
}

pub fn list() -> Method {
    Method::from_bytes(b"LIST").unwrap()
}

pub struct R {
    pub status: u16,
    pub body: Value,
}

impl S {
    /// Sends a request to `/v1/{path}` of cluster 0.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> R {
        self.call_at(0, method, path, token, body).await
    }

    pub async fn call_at(
        &self,
        cluster: usize,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> R {
        let url = format!(
            "{}/v1/{}",
            self.sb.secrets_urls[cluster],
            path.trim_start_matches('/')
        );
        let mut rb = self.client.request(method, url);
        if let Some(t) = token {
            rb = rb.header("X-Secrets-Token", t);
        }
        if let Some(b) = body {
            rb = rb.body(serde_json::to_vec(&b).unwrap());
        }
        let resp = rb.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        R { status, body }
    }

    /// A request with the root token.
    pub async fn root(&self, method: Method, path: &str, body: Option<Value>) -> R {
        self.call(method, path, Some(&self.root.clone()), body)
            .await
    }

    pub async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> R {
        let url = format!(
            "{}/_sandbox/secrets/{}",
            self.url,
            path.trim_start_matches('/')
        );
        let mut rb = self.client.request(method, url);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let resp = rb.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        R { status, body }
    }
}
