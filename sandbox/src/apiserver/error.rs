//! API errors as kube-apiserver words them: every failure is a `meta/v1` `Status` body.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// A failed request; rendered as a `Status` object with the same `code`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// A complete body to send instead of the generic one (422s from the schema module).
    pub body: Option<Value>,
}

/// `secrets` for the core group, `foos.example.com` otherwise: how the server names resources.
pub fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(resource: &str, group: &str, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": resource});
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            body: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(resource, group)),
        )
        .with_details(details(resource, group, name))
    }

    /// An unknown URL: the real server's wording for a path no resource serves.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(resource, group)),
        )
        .with_details(details(resource, group, name))
    }

    /// Optimistic-concurrency failure on update/patch/delete.
    pub fn conflict(resource: &str, group: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(resource, group)
            ),
        )
        .with_details(details(resource, group, name))
    }

    pub fn conflict_message(resource: &str, group: &str, name: &str, msg: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {msg}",
                qualified(resource, group)
            ),
        )
        .with_details(details(resource, group, name))
    }

    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg)
    }

    /// 422 with a field path, worded like `field.Error`: `Kind "name" is invalid: field: msg`.
    pub fn invalid(
        kind: &str,
        group: &str,
        name: &str,
        field: &str,
        reason: &str,
        msg: &str,
    ) -> Self {
        let kind_q = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut d = json!({"name": name, "kind": kind, "causes": [{"reason": reason, "message": msg, "field": field}]});
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        Self::new(
            422,
            "Invalid",
            format!("{kind_q} \"{name}\" is invalid: {field}: {msg}"),
        )
        .with_details(d)
    }

    pub fn forbidden(resource: &str, group: &str, name: &str, msg: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: {msg}",
                qualified(resource, group)
            ),
        )
        .with_details(details(resource, group, name))
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn gone(msg: impl Into<String>) -> Self {
        Self::new(410, "Expired", msg)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn unsupported_media_type(msg: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", msg)
    }

    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(500, "InternalError", msg)
    }

    pub fn from_body(code: u16, body: Value) -> Self {
        let reason = match code {
            422 => "Invalid",
            409 => "Conflict",
            400 => "BadRequest",
            _ => "InternalError",
        };
        let message = body["message"].as_str().unwrap_or_default().to_string();
        Self {
            code,
            reason,
            message,
            details: None,
            body: Some(body),
        }
    }

    /// The `Status` object for this error.
    pub fn status(&self) -> Value {
        if let Some(b) = &self.body {
            return b.clone();
        }
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.status())
    }
}

/// A JSON body with `Content-Type: application/json`.
pub fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
