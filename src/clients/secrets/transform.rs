//! Client of the secrets service's transform engine (spec C §4.1), mounted at `/v1/<mount>`.
//!
//! Reads return the envelope's `data` only. A 404 on a read whose message names an unknown
//! path (`unsupported path`, `no handler for route`) means the server has no transform engine at
//! that mount (community edition, OpenBao, or the engine not enabled): [`TransformError::Unsupported`].

use std::sync::Arc;

use serde_json::{json, Value};

use crate::clients::http::{ClientError, Http};

/// Errors of the transform engine's calls.
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// The call failed (see [`ClientError`]).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The server does not serve the transform engine at this mount.
    #[error("the transform engine is not available at mount {mount:?} on this server (it needs the enterprise Advanced Data Protection module and an enabled mount): {message}")]
    Unsupported {
        /// The mount asked for.
        mount: String,
        /// The service's answer.
        message: String,
    },
}

/// Calls of the transform engine at a given mount: read, write and delete its objects.
#[derive(Clone, Debug)]
pub struct TransformClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for TransformClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

pub use crate::clients::http::encode_segment;

/// Whether a 404 says the path itself is unknown (no engine there), not that an object is absent.
fn unknown_path(e: &ClientError) -> Option<String> {
    match e {
        ClientError::Status {
            status: 404,
            message,
            ..
        } if message.contains("unsupported path") || message.contains("no handler for route") => {
            Some(message.clone())
        }
        _ => None,
    }
}

impl TransformClient {
    fn url(mount: &str, rest: &str) -> String {
        format!("/v1/{}/{rest}", mount.trim_matches('/'))
    }

    fn unsupported(mount: &str, e: ClientError) -> TransformError {
        match unknown_path(&e) {
            Some(message) => TransformError::Unsupported {
                mount: mount.to_string(),
                message,
            },
            None => TransformError::Client(e),
        }
    }

    /// `GET /v1/<mount>/<kind>/<name>`: the object's `data`, `None` when absent.
    pub async fn read(
        &self,
        mount: &str,
        kind: &str,
        name: &str,
    ) -> Result<Option<Value>, TransformError> {
        let path = Self::url(mount, &format!("{kind}/{}", encode_segment(name)));
        match self.http.call("GET", &path, None).await {
            Ok(resp) => Ok(Some(
                resp.body
                    .get("data")
                    .filter(|d| d.is_object())
                    .cloned()
                    .unwrap_or_else(|| json!({})),
            )),
            Err(e) if unknown_path(&e).is_some() => Err(Self::unsupported(mount, e)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// `POST /v1/<mount>/<path>` with `body`. A 404 means the engine is not there.
    pub async fn write(&self, mount: &str, path: &str, body: &Value) -> Result<(), TransformError> {
        match self
            .http
            .call("POST", &Self::url(mount, path), Some(body))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Err(TransformError::Unsupported {
                mount: mount.to_string(),
                message: match &e {
                    ClientError::Status { message, .. } => message.clone(),
                    _ => String::new(),
                },
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// `DELETE /v1/<mount>/<kind>/<name>`; an absent object counts as deleted.
    pub async fn delete(&self, mount: &str, kind: &str, name: &str) -> Result<(), TransformError> {
        let path = Self::url(mount, &format!("{kind}/{}", encode_segment(name)));
        match self.http.call("DELETE", &path, None).await {
            Ok(_) => Ok(()),
            Err(e) if unknown_path(&e).is_some() => Err(Self::unsupported(mount, e)),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// `GET /v1/<mount>/wrapping_key`: the PEM of the RSA public key imports are wrapped with.
    pub async fn wrapping_key(&self, mount: &str) -> Result<String, TransformError> {
        let path = Self::url(mount, "wrapping_key");
        match self.http.call("GET", &path, None).await {
            Ok(resp) => Ok(resp
                .body
                .get("data")
                .and_then(|d| d.get("public_key"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()),
            Err(e) if e.status() == Some(404) => Err(TransformError::Unsupported {
                mount: mount.to_string(),
                message: "no wrapping key".into(),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_encoded_as_one_segment() {
        assert_eq!(encode_segment("ccn fpe/x"), "ccn%20fpe%2Fx");
        assert_eq!(
            TransformClient::url("/transform/", "role/a"),
            "/v1/transform/role/a"
        );
    }
}
