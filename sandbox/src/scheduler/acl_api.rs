//! The scheduler's ACL API as real clients use it to set up the capability checks of spec C §5
//! (`namespace:read-job`, `namespace:submit-job`): policies with HCL rules and tokens, over
//! `/v1` with a management token, as the real scheduler (Nomad) answers them.
//!
//! * `GET /v1/acl/policies`, `GET|PUT|POST|DELETE /v1/acl/policy/:name` (`{"Name",
//!   "Description", "Rules"}`; the rules' `namespace "NAME" { policy = "...", capabilities =
//!   [...] }` blocks are what the sandbox evaluates).
//! * `GET /v1/acl/tokens`, `PUT|POST /v1/acl/token` (`{"Name", "Type", "Policies", "Global"}`),
//!   `GET|DELETE /v1/acl/token/:accessor_id`.
//!
//! All need a management token (403 `Permission denied`). Errors follow the real RPC texts:
//! 400 `Policy name does not match request path`, `policy 0 invalid: …`, `client token missing
//! policies or roles`, `management token cannot be associated with policies or roles`; a
//! missing policy or token on read is 404 `ACL policy not found` / `ACL token not found`.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde_json::{json, Value};

use super::acl::{Acl, NamespaceRule, Policy, Token};
use super::wire::{decode_object, get_bool, get_string, get_string_list, json_response, ApiError};
use super::Scheduler;

pub fn routes() -> Router<Scheduler> {
    Router::new()
        .route("/v1/acl/policies", any(policy_list))
        .route("/v1/acl/policy/{name}", any(policy_by_name))
        .route("/v1/acl/tokens", any(token_list))
        .route("/v1/acl/token", any(token_create))
        .route("/v1/acl/token/{accessor}", any(token_by_accessor))
}

fn management(s: &Scheduler, headers: &HeaderMap) -> Result<(), ApiError> {
    match s.acl(headers)? {
        Acl::Management => Ok(()),
        Acl::Client(_) => Err(ApiError::permission_denied()),
    }
}

/// A write the real server answers with its index header and no body.
fn empty_response(index: u64) -> Response {
    let mut resp = json_response(&Value::Null, Some(index), false);
    *resp.body_mut() = axum::body::Body::empty();
    resp.headers_mut().remove("content-type");
    resp
}

fn run(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

/// The namespace rules of an HCL policy (`namespace "x" { policy = "read" capabilities = [] }`).
pub(crate) fn parse_rules(rules: &str) -> Result<BTreeMap<String, NamespaceRule>, String> {
    let v: Value = hcl::from_str(rules).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    if let Some(Value::Object(nss)) = v.get("namespace") {
        for (name, body) in nss {
            // A repeated label decodes as an array of bodies: the last one wins.
            let body = match body {
                Value::Array(items) => items.last().cloned().unwrap_or(Value::Null),
                b => b.clone(),
            };
            let rule: NamespaceRule =
                serde_json::from_value(body).map_err(|e| format!("namespace {name:?}: {e}"))?;
            if let Some(p) = &rule.policy {
                if !["read", "write", "scale", "deny", "list"].contains(&p.as_str()) {
                    return Err(format!("Invalid namespace policy: {p:?}"));
                }
            }
            out.insert(name.clone(), rule);
        }
    }
    Ok(out)
}

fn policy_stub(p: &Policy) -> Value {
    json!({"Name": p.name, "Description": p.description,
           "CreateIndex": p.create_index, "ModifyIndex": p.modify_index.max(p.create_index)})
}

async fn policy_list(State(s): State<Scheduler>, method: Method, headers: HeaderMap) -> Response {
    run((|| {
        if method != Method::GET {
            return Err(ApiError::invalid_method());
        }
        management(&s, &headers)?;
        let st = s.lock();
        let items: Vec<Value> = st.acl.policies.values().map(policy_stub).collect();
        Ok(json_response(&Value::Array(items), Some(st.index), true))
    })())
}

async fn policy_by_name(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    run((|| {
        management(&s, &headers)?;
        match method {
            Method::GET => {
                let st = s.lock();
                let p = st
                    .acl
                    .policies
                    .get(&name)
                    .ok_or_else(|| ApiError::new(404, "ACL policy not found"))?;
                let mut v = policy_stub(p);
                v["Rules"] = json!(p.rules);
                Ok(json_response(&v, Some(st.index), true))
            }
            Method::PUT | Method::POST => {
                const T: &str = "structs.ACLPolicy";
                let obj = decode_object(&body, T)?;
                let body_name = get_string(&obj, T, "Name")?;
                if body_name != name {
                    return Err(ApiError::bad_request(
                        "Policy name does not match request path",
                    ));
                }
                let valid = !name.is_empty()
                    && name.len() <= 128
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
                if !valid {
                    return Err(ApiError::bad_request(format!(
                        "policy 0 invalid: invalid name '{name}'"
                    )));
                }
                let rules = get_string(&obj, T, "Rules")?;
                let namespaces = parse_rules(&rules).map_err(|e| {
                    ApiError::bad_request(format!("policy 0 invalid: failed to parse rules: {e}"))
                })?;
                let description = get_string(&obj, T, "Description")?;
                let index = s.mutate(|st| {
                    st.index += 1;
                    let idx = st.index;
                    let create_index = st
                        .acl
                        .policies
                        .get(&name)
                        .map(|p| p.create_index)
                        .unwrap_or(idx);
                    st.acl.policies.insert(
                        name.clone(),
                        Policy {
                            name: name.clone(),
                            description,
                            namespaces,
                            create_index,
                            rules,
                            modify_index: idx,
                        },
                    );
                    idx
                });
                Ok(empty_response(index))
            }
            Method::DELETE => {
                let index = s.mutate(|st| {
                    st.index += 1;
                    st.acl.policies.remove(&name);
                    st.index
                });
                Ok(empty_response(index))
            }
            _ => Err(ApiError::invalid_method()),
        }
    })())
}

fn token_api(t: &Token, with_secret: bool) -> Value {
    let mut v = json!({
        "AccessorID": t.accessor_id, "Name": t.name, "Type": t.kind,
        "Policies": if t.policies.is_empty() { Value::Null } else { json!(t.policies) },
        "Roles": null, "Global": false, "CreateTime": t.create_time,
        "CreateIndex": t.create_index, "ModifyIndex": t.create_index,
    });
    if with_secret {
        v["SecretID"] = json!(t.secret_id);
    }
    v
}

async fn token_list(State(s): State<Scheduler>, method: Method, headers: HeaderMap) -> Response {
    run((|| {
        if method != Method::GET {
            return Err(ApiError::invalid_method());
        }
        management(&s, &headers)?;
        let st = s.lock();
        let items: Vec<Value> = st
            .acl
            .tokens
            .values()
            .map(|t| token_api(t, false))
            .collect();
        Ok(json_response(&Value::Array(items), Some(st.index), true))
    })())
}

async fn token_create(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run((|| {
        if method != Method::PUT && method != Method::POST {
            return Err(ApiError::invalid_method());
        }
        management(&s, &headers)?;
        const T: &str = "structs.ACLToken";
        let obj = decode_object(&body, T)?;
        let kind = match get_string(&obj, T, "Type")?.as_str() {
            "" | "client" => "client".to_string(),
            "management" => "management".to_string(),
            other => {
                return Err(ApiError::bad_request(format!(
                    "token type must be client or management, not {other:?}"
                )))
            }
        };
        let policies = get_string_list(&obj, T, "Policies")?;
        let _global = get_bool(&obj, T, "Global")?;
        if kind == "client" && policies.is_empty() {
            return Err(ApiError::bad_request(
                "client token missing policies or roles",
            ));
        }
        if kind == "management" && !policies.is_empty() {
            return Err(ApiError::bad_request(
                "management token cannot be associated with policies or roles",
            ));
        }
        let name = get_string(&obj, T, "Name")?;
        let (tok, index) = s.mutate(|st| {
            st.index += 1;
            let tok = Token {
                accessor_id: uuid::Uuid::new_v4().to_string(),
                secret_id: uuid::Uuid::new_v4().to_string(),
                name,
                kind,
                policies,
                create_index: st.index,
                create_time: chrono::Utc::now(),
            };
            st.acl.tokens.insert(tok.secret_id.clone(), tok.clone());
            (tok, st.index)
        });
        Ok(json_response(&token_api(&tok, true), Some(index), false))
    })())
}

async fn token_by_accessor(
    State(s): State<Scheduler>,
    method: Method,
    headers: HeaderMap,
    Path(accessor): Path<String>,
) -> Response {
    run((|| {
        // `/v1/acl/token/self` is routed separately and needs no management token.
        management(&s, &headers)?;
        match method {
            Method::GET => {
                let st = s.lock();
                let t = st
                    .acl
                    .tokens
                    .values()
                    .find(|t| t.accessor_id == accessor)
                    .ok_or_else(|| ApiError::new(404, "ACL token not found"))?;
                Ok(json_response(&token_api(t, true), Some(st.index), true))
            }
            Method::DELETE => {
                let index = s.mutate(|st| {
                    st.index += 1;
                    st.acl.tokens.retain(|_, t| t.accessor_id != accessor);
                    st.index
                });
                Ok(empty_response(index))
            }
            _ => Err(ApiError::invalid_method()),
        }
    })())
}

#[cfg(test)]
mod tests {
    use super::parse_rules;

    #[test]
    fn hcl_namespace_rules_are_parsed() {
        let r = parse_rules(
            r#"namespace "default" { policy = "read" }
               namespace "prod-*" { capabilities = ["submit-job", "read-job"] }"#,
        )
        .unwrap();
        assert_eq!(r["default"].policy.as_deref(), Some("read"));
        assert_eq!(r["prod-*"].capabilities, vec!["submit-job", "read-job"]);
    }
}
