//! ACL, RGP and EGP policies of the secrets service (spec A §2.5): read, write, delete, list.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::clients::http::{ClientError, Http};

/// One policy as the service stores it (spec A §2.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The policy's name.
    pub name: String,
    /// The policy document (HCL, or Sentinel for RGP and EGP).
    pub policy: String,
    /// The Sentinel enforcement level (RGP and EGP only).
    pub enforcement_level: Option<String>,
    /// The paths an EGP applies to (EGP only).
    pub paths: Option<Vec<String>>,
}

/// The policy calls of the secrets service (`sys/policies/{acl,rgp,egp}`).
#[derive(Clone, Debug)]
pub struct PolicyClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for PolicyClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

/// `acl`, `rgp` or `egp`: the path segment of the policy endpoints.
fn policy_path(kind: &str, name: &str) -> String {
    format!("/v1/sys/policies/{kind}/{}", encode_segment(name))
}

use crate::clients::http::encode_segment;

/// Envelope `data`, falling back to the top level (the service also mirrors some fields there).
fn data(body: &Value) -> &Value {
    match body.get("data") {
        Some(d) if d.is_object() => d,
        _ => body,
    }
}

impl PolicyClient {
    /// Read a policy; `None` when the service has none of that name (404).
    pub async fn read_policy(&self, kind: &str, name: &str) -> Result<Option<Policy>, ClientError> {
        match self.http.call("GET", &policy_path(kind, name), None).await {
            Ok(resp) => {
                let d = data(&resp.body);
                let text = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
                Ok(Some(Policy {
                    name: text("name").unwrap_or_else(|| name.to_string()),
                    policy: text("policy").unwrap_or_default(),
                    enforcement_level: text("enforcement_level"),
                    paths: d.get("paths").and_then(Value::as_array).map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    }),
                }))
            }
            // A 404 naming `unsupported path` is a server without the feature (RGP/EGP on a
            // community server such as OpenBao), not an absent policy: reported, never written.
            Err(e @ ClientError::Status { status: 404, .. }) if matches!(&e, ClientError::Status { message, .. } if message.contains("unsupported path")) => {
                Err(e)
            }
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Create or replace a policy (`PUT`, the service's upsert).
    pub async fn write_policy(&self, kind: &str, p: &Policy) -> Result<(), ClientError> {
        let mut body = json!({ "policy": p.policy });
        if let Some(level) = &p.enforcement_level {
            body["enforcement_level"] = json!(level);
        }
        if let Some(paths) = &p.paths {
            body["paths"] = json!(paths);
        }
        self.http
            .call("PUT", &policy_path(kind, &p.name), Some(&body))
            .await
            .map(|_| ())
    }

    /// Delete a policy; an absent policy counts as deleted.
    pub async fn delete_policy(&self, kind: &str, name: &str) -> Result<(), ClientError> {
        match self
            .http
            .call("DELETE", &policy_path(kind, name), None)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `LIST` the policy names of a kind (404 means none).
    pub async fn list_policies(&self, kind: &str) -> Result<Vec<String>, ClientError> {
        match self
            .http
            .call("LIST", &format!("/v1/sys/policies/{kind}"), None)
            .await
        {
            Ok(resp) => Ok(data(&resp.body)
                .get("keys")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()),
            Err(e) if e.status() == Some(404) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}
