//! Wire conventions of the secrets service: operations, the response envelope, error bodies.
//!
//! These follow the real service (Vault) rather than the spec's summary where the spec is silent:
//! writes without a result answer `204 No Content`; absent objects and empty lists answer
//! `404 {"errors": []}`; bad input answers `400 {"errors": ["..."]}`; a missing or unknown
//! token answers `403 {"errors": ["permission denied"]}`.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

/// A logical operation, derived from the HTTP method (and `?list=true`) as the real service does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    List,
    Create,
    Update,
    Delete,
    Patch,
}

impl Op {
    /// Capability name checked by ACL policies for this operation.
    pub fn capability(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::List => "list",
            Op::Create => "create",
            Op::Update => "update",
            Op::Delete => "delete",
            Op::Patch => "patch",
        }
    }
}

/// A handler's successful result. Turned into the envelope (200) or 204 when there is nothing
/// to return, or sent verbatim when `raw` is set (the API description is not enveloped).
#[derive(Default, Debug)]
pub struct Resp {
    pub data: Option<Value>,
    pub warnings: Vec<String>,
    pub auth: Option<Value>,
    pub wrap_info: Option<Value>,
    pub lease_id: String,
    pub lease_duration: i64,
    pub renewable: bool,
    pub raw: Option<(StatusCode, Value)>,
    /// Forces the envelope (200) even without data, for endpoints the real service always
    /// answers with a body.
    pub force_body: bool,
    /// Extra top-level fields merged into the envelope (a few endpoints do this).
    pub top_level: Map<String, Value>,
    /// Status for the envelope instead of 200 (the real service answers some calls with 202
    /// and an envelope).
    pub raw_status: Option<StatusCode>,
    /// A login waiting for a push verification; the dispatcher polls it without the lock.
    pub pending_push: Option<PushWait>,
}

/// A login waiting on the identity provider's push challenge.
#[derive(Debug, Clone)]
pub struct PushWait {
    pub challenge: u64,
    pub mount: String,
    pub username: String,
    pub nonce: String,
}

impl Resp {
    pub fn no_content() -> Self {
        Self::default()
    }

    pub fn data(v: Value) -> Self {
        Self {
            data: Some(v),
            ..Self::default()
        }
    }

    /// A list result: `data.keys`. Empty lists become 404 as in the real service.
    pub fn list<I: IntoIterator<Item = String>>(keys: I) -> Result<Self, ApiError> {
        let keys: Vec<String> = keys.into_iter().collect();
        if keys.is_empty() {
            return Err(ApiError::not_found());
        }
        Ok(Self::data(json!({ "keys": keys })))
    }

    pub fn warn(mut self, w: impl Into<String>) -> Self {
        self.warnings.push(w.into());
        self
    }

    pub fn raw(status: StatusCode, v: Value) -> Self {
        Self {
            raw: Some((status, v)),
            ..Self::default()
        }
    }

    pub fn into_response(self, mount_type: &str) -> Response {
        if let Some((status, v)) = self.raw {
            // A raw answer without a body (the real service's `RespondWithStatusCode(nil, ..)`,
            // e.g. 202 for a queued revocation) has an empty body, not `null`.
            if v.is_null() {
                return (
                    status,
                    [(
                        axum::http::header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    )],
                )
                    .into_response();
            }
            return (status, json_body(&v)).into_response();
        }
        let empty = self.data.is_none()
            && self.warnings.is_empty()
            && self.auth.is_none()
            && self.wrap_info.is_none()
            && !self.force_body;
        if empty {
            return StatusCode::NO_CONTENT.into_response();
        }
        let mut env = json!({
            "request_id": uuid::Uuid::new_v4().to_string(),
            "lease_id": self.lease_id,
            "renewable": self.renewable,
            "lease_duration": self.lease_duration,
            "data": self.data,
            "wrap_info": self.wrap_info,
            "warnings": if self.warnings.is_empty() { Value::Null } else { json!(self.warnings) },
            "auth": self.auth,
        });
        // The real service (OpenBao 2.7) sends no `mount_type` in the envelope.
        let _ = mount_type;
        if let Value::Object(m) = &mut env {
            for (k, v) in self.top_level {
                m.insert(k, v);
            }
        }
        (self.raw_status.unwrap_or(StatusCode::OK), json_body(&env)).into_response()
    }
}

fn json_body(v: &Value) -> ([(axum::http::HeaderName, HeaderValue); 1], String) {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        serde_json::to_string(v).unwrap_or_else(|_| "{}".into()),
    )
}

/// An error answer: status code and the `errors` array.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status}: {errors:?}")]
pub struct ApiError {
    pub status: StatusCode,
    pub errors: Vec<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, msg: impl Into<String>) -> Self {
        Self {
            status,
            errors: vec![msg.into()],
        }
    }
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, msg)
    }
    /// 403 as the real service sends it for a missing, unknown or insufficient token.
    pub fn permission_denied() -> Self {
        Self::new(StatusCode::FORBIDDEN, "permission denied")
    }
    /// 404 with an empty `errors` array: absent object or empty list.
    pub fn not_found() -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            errors: vec![],
        }
    }
    /// 404 for a path no backend serves (also what an unlicensed server answers for
    /// licence-gated paths, since it does not register them).
    pub fn unsupported_path() -> Self {
        Self::new(StatusCode::NOT_FOUND, multi("unsupported path"))
    }
    pub fn unsupported_operation() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            multi("unsupported operation"),
        )
    }
    pub fn method_not_allowed() -> Self {
        Self {
            status: StatusCode::METHOD_NOT_ALLOWED,
            errors: vec![],
        }
    }
    pub fn conflict(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, msg)
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, msg)
    }
    /// A missing required field, worded like the real service's framework.
    pub fn missing(field: &str) -> Self {
        Self::bad_request(format!("missing {field}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, json_body(&json!({ "errors": self.errors }))).into_response()
    }
}

/// The real service wraps core errors in a multi-error, which shows in the message text.
pub fn multi(msg: &str) -> String {
    format!("1 error occurred:\n\t* {msg}\n\n")
}
