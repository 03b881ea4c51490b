//! The review APIs that ask the authorizer and the authenticator, answered as kube-apiserver
//! does (201 with the request's spec and a computed `status`, nothing stored):
//! `authorization.k8s.io/v1` SelfSubjectAccessReview (`kubectl auth can-i`),
//! SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview (`kubectl auth
//! can-i --list`), and `authentication.k8s.io/v1` SelfSubjectReview (`kubectl auth whoami`).
//! TokenReview lives with the tokens ([`super::tokens`]).

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::error::{json_response, ApiError};
use super::rbac::{self, Attributes, UserInfo};
use super::store::State;

const AUTHZ: &str = "authorization.k8s.io";

/// The review endpoints; `None` for every other path.
pub fn route(
    st: &State,
    user: &UserInfo,
    method: &Method,
    segs: &[&str],
    body: &[u8],
) -> Option<Result<Response, ApiError>> {
    let kind = match segs {
        ["apis", AUTHZ, "v1", "selfsubjectaccessreviews"] => "SelfSubjectAccessReview",
        ["apis", AUTHZ, "v1", "subjectaccessreviews"] => "SubjectAccessReview",
        ["apis", AUTHZ, "v1", "namespaces", _, "localsubjectaccessreviews"] => {
            "LocalSubjectAccessReview"
        }
        ["apis", AUTHZ, "v1", "selfsubjectrulesreviews"] => "SelfSubjectRulesReview",
        ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"] => "SelfSubjectReview",
        _ => return None,
    };
    if method != Method::POST {
        return Some(Err(ApiError::method_not_allowed()));
    }
    let ns = match segs {
        [_, _, _, "namespaces", ns, _] => *ns,
        _ => "",
    };
    Some(review(st, user, kind, ns, body))
}

fn parse(body: &[u8]) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice::<Value>(body)
        .or_else(|_| {
            serde_yaml::from_slice::<serde_yaml::Value>(body)
                .map_err(|e| e.to_string())
                .and_then(|y| serde_json::to_value(y).map_err(|e| e.to_string()))
        })
        .map_err(|e| ApiError::bad_request(format!("the object provided is unrecognized: {e}")))
}

fn invalid(kind: &str, field: &str, msg: &str) -> ApiError {
    ApiError::invalid(kind, AUTHZ, "", field, "FieldValueInvalid", msg)
}

fn str_of(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_string()
}

/// The attributes an access review asks about, for `user`.
fn attributes(kind: &str, user: UserInfo, spec: &Value) -> Result<Attributes, ApiError> {
    let (res, non) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    match (res.is_object(), non.is_object()) {
        (true, true) => Err(invalid(
            kind,
            "spec.nonResourceAttributes",
            &format!(
                "Invalid value: {}: cannot be specified in combination with resourceAttributes",
                non
            ),
        )),
        (false, false) => Err(invalid(
            kind,
            "spec.resourceAttributes",
            "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        (true, false) => Ok(Attributes {
            user,
            verb: str_of(res, "verb"),
            resource_request: true,
            group: str_of(res, "group"),
            version: str_of(res, "version"),
            resource: str_of(res, "resource"),
            subresource: str_of(res, "subresource"),
            namespace: str_of(res, "namespace"),
            name: str_of(res, "name"),
            ..Default::default()
        }),
        (false, true) => Ok(Attributes {
            user,
            verb: str_of(non, "verb"),
            path: str_of(non, "path"),
            ..Default::default()
        }),
    }
}

fn review(
    st: &State,
    user: &UserInfo,
    kind: &str,
    ns: &str,
    body: &[u8],
) -> Result<Response, ApiError> {
    let req = parse(body)?;
    let spec = req.get("spec").cloned().unwrap_or_else(|| json!({}));
    let group = if kind == "SelfSubjectReview" {
        "authentication.k8s.io"
    } else {
        AUTHZ
    };
    let status = match kind {
        "SelfSubjectReview" => json!({"userInfo": user.to_json()}),
        "SelfSubjectRulesReview" => {
            let namespace = spec["namespace"].as_str().unwrap_or_default();
            let (res, non, err) = rbac::rules_for(st, user, namespace);
            let mut s = json!({"resourceRules": res, "nonResourceRules": non, "incomplete": false});
            if !err.is_empty() {
                s["evaluationError"] = json!(err);
            }
            s
        }
        _ => {
            let subject = if kind == "SelfSubjectAccessReview" {
                user.clone()
            } else {
                subject_of(kind, &spec)?
            };
            let a = attributes(kind, subject, &spec)?;
            if kind == "LocalSubjectAccessReview" {
                if !spec["nonResourceAttributes"].is_null() {
                    return Err(invalid(
                        kind,
                        "spec.nonResourceAttributes",
                        "Invalid value: {}: disallowed on this kind of request",
                    ));
                }
                if a.namespace != ns {
                    return Err(invalid(
                        kind,
                        "spec.resourceAttributes.namespace",
                        &format!(
                            "Invalid value: \"{}\": must match metadata.namespace",
                            a.namespace
                        ),
                    ));
                }
            }
            let d = rbac::authorize(st, &a);
            let mut s = json!({"allowed": d.allowed});
            if !d.reason.is_empty() {
                s["reason"] = json!(d.reason);
            }
            s
        }
    };
    let mut meta = json!({"creationTimestamp": null});
    if !ns.is_empty() {
        meta["namespace"] = json!(ns);
    }
    let mut out = json!({
        "kind": kind, "apiVersion": format!("{group}/v1"),
        "metadata": meta, "status": status,
    });
    if kind != "SelfSubjectReview" {
        out["spec"] = spec;
    }
    Ok(json_response(StatusCode::CREATED, &out))
}

/// The user a (Local)SubjectAccessReview asks about.
fn subject_of(kind: &str, spec: &Value) -> Result<UserInfo, ApiError> {
    let name = str_of(spec, "user");
    let groups: Vec<String> = spec["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(String::from))
        .collect();
    if name.is_empty() && groups.is_empty() {
        return Err(invalid(
            kind,
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    let extra = spec["extra"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let vs = v
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect();
                    (k.clone(), vs)
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(UserInfo {
        name,
        uid: str_of(spec, "uid"),
        groups,
        extra,
    })
}
