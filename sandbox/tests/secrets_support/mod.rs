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

pub mod openbao;

/// One backend of the differential conformance tests: the sandbox (token header
/// `X-Secrets-Token`) or a real OpenBao (`X-Vault-Token`), answering the same API.
pub struct Backend {
    pub name: &'static str,
    pub url: String,
    pub header: &'static str,
    pub root: String,
    pub client: reqwest::Client,
    pub sandbox: Option<S>,
}

/// Both backends: a fresh sandbox, and the OpenBao server shared by this test binary.
pub async fn backends() -> Vec<Backend> {
    let s = start().await;
    let bao = openbao::shared();
    vec![
        Backend {
            name: "sandbox",
            url: s.url.clone(),
            header: "X-Secrets-Token",
            root: s.root.clone(),
            client: reqwest::Client::new(),
            sandbox: Some(s),
        },
        Backend {
            name: "openbao",
            url: bao.addr.clone(),
            header: "X-Vault-Token",
            root: bao.root_token.clone(),
            client: reqwest::Client::new(),
            sandbox: None,
        },
    ]
}

/// A name no other test of the shared server uses.
pub fn uniq(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

impl Backend {
    pub fn is_openbao(&self) -> bool {
        self.sandbox.is_none()
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> R {
        let url = format!("{}/v1/{}", self.url, path.trim_start_matches('/'));
        let mut rb = self.client.request(method, url);
        if let Some(t) = token {
            rb = rb.header(self.header, t);
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

    pub async fn root(&self, method: Method, path: &str, body: Option<Value>) -> R {
        self.call(method, path, Some(&self.root.clone()), body)
            .await
    }

    /// Logs a new user in with a password (the sandbox through its identity provider, OpenBao
    /// through `userpass`); returns the token and the login path its lease lives under.
    pub async fn login(&self, user: &str, policies: &[&str], ttl: &str) -> (String, String) {
        let login = match &self.sandbox {
            Some(s) => {
                s.root(
                    Method::POST,
                    "auth/idp/config",
                    Some(serde_json::json!({"org_name": "a", "token_policies": policies, "token_ttl": ttl})),
                )
                .await;
                s.admin(
                    Method::PUT,
                    &format!("idp/users/{user}"),
                    Some(serde_json::json!({"password": "pw"})),
                )
                .await;
                format!("auth/idp/login/{user}")
            }
            None => {
                let r = self
                    .root(
                        Method::POST,
                        &format!("auth/userpass/users/{user}"),
                        Some(serde_json::json!({"password": "pw", "token_policies": policies, "token_ttl": ttl})),
                    )
                    .await;
                assert_eq!(r.status, 204, "{:?}", r.body);
                format!("auth/userpass/login/{user}")
            }
        };
        let r = self
            .call(
                Method::POST,
                &login,
                None,
                Some(serde_json::json!({"password": "pw"})),
            )
            .await;
        assert_eq!(r.status, 200, "{}: {:?}", self.name, r.body);
        let tok = r.body["auth"]["client_token"].as_str().unwrap().to_string();
        (tok, login)
    }
}
