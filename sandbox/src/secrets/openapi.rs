//! `GET sys/internal/specs/openapi` (spec A §4.1): an OpenAPI 3 document built from the
//! sandbox's own route table and mount table, so path names follow the mounts actually in use.
//!
//! Visibility follows the real service: the call needs no token; without one only the
//! unauthenticated paths are described; with one, every path of each mount the token can reach
//! (some ACL rule grants a capability on or under the mount) plus the unauthenticated paths;
//! the root token sees everything. Vendor extensions are set on the path items:
//! `x-svc-sudo`, `x-svc-unauthenticated`, `x-svc-create-supported`. `sys/` paths carry
//! detailed documentation (a description per path and per operation); other paths basic
//! documentation (summary only). A path that supports listing gets a second item with a
//! trailing `/` whose `get` takes the `list=true` query parameter, as in the real document.

use serde_json::{json, Map, Value};

use super::http::{ApiError, Op, Resp};
use super::route::Route;
use super::{backend_routes, licensed, Backend, Ctx};

pub fn routes() -> Vec<Route> {
    vec![Route::new("internal/specs/openapi")
        .read(openapi)
        .unauth()
        .doc(
        "Generate an OpenAPI 3 document of all mounted paths.",
        "Describes the paths of the mounts visible to the calling token (all for a root token, \
             only unauthenticated paths without a token), with the vendor extensions x-svc-sudo, \
             x-svc-unauthenticated and x-svc-create-supported.",
    )]
}

fn openapi_path(mount: &str, pattern: &str) -> (String, Vec<String>) {
    let mut params = Vec::new();
    let parts: Vec<String> = pattern
        .split('/')
        .filter(|p| !p.is_empty())
        .map(|p| {
            if let Some(n) = p.strip_prefix(':').or_else(|| p.strip_prefix('*')) {
                params.push(n.to_string());
                format!("{{{n}}}")
            } else {
                p.to_string()
            }
        })
        .collect();
    (format!("/{}{}", mount, parts.join("/")), params)
}

#[allow(unreachable_patterns)]
fn tag(b: Backend) -> &'static str {
    match b {
        Backend::System => "system",
        Backend::Identity => "identity",
        Backend::Token | Backend::Idp => "auth",
        _ => "secrets",
    }
}

fn op_object(r: &Route, op: Op, b: Backend, detailed: bool, op_id: &str) -> Value {
    let summary = if r.summary.is_empty() {
        "Undocumented operation."
    } else {
        r.summary
    };
    let mut o = json!({
        "summary": summary,
        "operationId": op_id,
        "tags": [tag(b)],
        "responses": match op {
            Op::Delete => json!({"204": {"description": "empty body"}}),
            Op::Create | Op::Update => json!({"200": {"description": "OK"}, "204": {"description": "empty body"}}),
            _ => json!({"200": {"description": "OK"}}),
        },
    });
    if detailed {
        o["description"] = json!(if r.description.is_empty() {
            summary
        } else {
            r.description
        });
    }
    if matches!(op, Op::Create | Op::Update) {
        o["requestBody"] = json!({"content": {"application/json": {"schema": {"type": "object"}}}});
    }
    o
}

fn openapi(c: &mut Ctx) -> Result<Resp, ApiError> {
    let token = c.token.clone();
    let store = c.store().clone();
    let acl = token.as_ref().map(|t| store.acl_for(t));
    let mut paths = Map::new();
    for m in &store.mounts {
        let visible = acl.as_ref().is_some_and(|a| a.any_under(&m.path));
        let detailed = m.backend == Backend::System;
        for r in backend_routes(m.backend)
            .iter()
            .filter(|r| licensed(c.world.edition, r.licence))
        {
            if !visible && !r.unauth {
                continue;
            }
            let (key, params) = openapi_path(&m.path, r.pattern);
            let params_json: Vec<Value> = params
                .iter()
                .map(|p| {
                    json!({"name": p, "description": format!("The {p} path parameter."), "in": "path",
                           "schema": {"type": "string"}, "required": true})
                })
                .collect();
            let op_base = key
                .trim_start_matches('/')
                .replace(['/', '{', '}'], "-")
                .replace("--", "-");
            let mut item = Map::new();
            item.insert(
                "description".into(),
                json!(if detailed && !r.description.is_empty() {
                    r.description
                } else {
                    r.summary
                }),
            );
            if !params_json.is_empty() {
                item.insert("parameters".into(), json!(params_json));
            }
            if r.sudo {
                item.insert("x-svc-sudo".into(), json!(true));
            }
            if r.unauth {
                item.insert("x-svc-unauthenticated".into(), json!(true));
            }
            if r.exists.is_some() && r.handler(Op::Create).is_some() {
                item.insert("x-svc-create-supported".into(), json!(true));
            }
            let mut any = false;
            if r.handler(Op::Read).is_some() {
                item.insert(
                    "get".into(),
                    op_object(r, Op::Read, m.backend, detailed, &format!("read-{op_base}")),
                );
                any = true;
            }
            if r.handler(Op::Update).is_some() || r.handler(Op::Create).is_some() {
                item.insert(
                    "post".into(),
                    op_object(
                        r,
                        Op::Update,
                        m.backend,
                        detailed,
                        &format!("write-{op_base}"),
                    ),
                );
                any = true;
            }
            if r.handler(Op::Delete).is_some() {
                item.insert(
                    "delete".into(),
                    op_object(
                        r,
                        Op::Delete,
                        m.backend,
                        detailed,
                        &format!("delete-{op_base}"),
                    ),
                );
                any = true;
            }
            if any {
                paths.insert(key.clone(), Value::Object(item.clone()));
            }
            if r.handler(Op::List).is_some() {
                let mut li = Map::new();
                li.insert("description".into(), item["description"].clone());
                if let Some(p) = item.get("parameters") {
                    li.insert("parameters".into(), p.clone());
                }
                if r.sudo || r.sudo_list {
                    li.insert("x-svc-sudo".into(), json!(true));
                }
                if r.unauth {
                    li.insert("x-svc-unauthenticated".into(), json!(true));
                }
                let mut get =
                    op_object(r, Op::List, m.backend, detailed, &format!("list-{op_base}"));
                get["parameters"] = json!([{"name": "list", "description": "Must be set to `true`", "in": "query",
                                             "schema": {"type": "string", "enum": ["true"]}, "required": true}]);
                li.insert("get".into(), get);
                // A list-only path is described without the trailing slash, one with other
                // operations too gets a second, slashed entry (as OpenBao 2.7 describes them).
                let list_key = if any { format!("{key}/") } else { key.clone() };
                paths.insert(list_key, Value::Object(li));
            }
        }
    }
    Ok(Resp::raw(
        axum::http::StatusCode::OK,
        json!({
            "openapi": "3.0.2",
            "info": {
                "title": "Secrets Service API",
                "description": "HTTP API that gives you full access to the secrets service. All API routes are prefixed with `/v1/`.",
                "version": env!("CARGO_PKG_VERSION"),
                "license": {"name": "Mozilla Public License 2.0", "url": "https://www.mozilla.org/en-US/MPL/2.0"},
            },
            "paths": paths,
            "components": {"schemas": {}},
        }),
    ))
}
