//! The rest of the ACL API real clients use to set the catalog up before a login: policies,
//! roles, auth methods and binding rules over `/v1` (the same objects the sandbox admin API
//! creates), plus `GET /v1/agent/self` and `GET /v1/status/peers`, which clients call to find
//! the agent's datacenter and check the cluster.
//!
//! Shapes and texts follow the real service (Consul): reads need `acl:read`, writes `acl:write`;
//! an absent object is 403 `ACL not found`; server-side validation errors have no code and are
//! 500 with the real text (`Invalid Policy: no Name is set`, ...); deleting an absent object
//! answers `true`. `MaxTokenTTL` is a Go duration string (`1h0m0s`).
//!
//! Choice (the sandbox cannot call a Kubernetes TokenReview API): a `kubernetes` auth method
//! created over `/v1` with the real configuration (`Host`, `CACert`, `ServiceAccountJWT`) and
//! no sandbox `ValidationKey` accepts any well-formed, unexpired service-account JWT, as a
//! TokenReview of a cluster that issued it would; with `Config.ValidationKey` the signature is
//! verified (see [`super::auth`]).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use serde_json::{json, Map, Value};

use super::model::{AuthMethod, BindingRule, Link, Policy, Role};
use super::{decode_body, field, json_response, run, str_field, ApiError, Catalog, Ctx};

pub fn routes() -> Router<Catalog> {
    Router::new()
        .route("/v1/acl/policy", any(policy_create))
        .route("/v1/acl/policy/name/{name}", any(policy_by_name))
        .route("/v1/acl/policy/{id}", any(policy_by_id))
        .route("/v1/acl/roles", any(role_list))
        .route("/v1/acl/role", any(role_create))
        .route("/v1/acl/role/name/{name}", any(role_by_name))
        .route("/v1/acl/role/{id}", any(role_by_id))
        .route("/v1/acl/auth-methods", any(auth_method_list))
        .route("/v1/acl/auth-method", any(auth_method_create))
        .route("/v1/acl/auth-method/{name}", any(auth_method_by_name))
        .route("/v1/acl/binding-rules", any(binding_rule_list))
        .route("/v1/acl/binding-rule", any(binding_rule_create))
        .route("/v1/acl/binding-rule/{id}", any(binding_rule_by_id))
        .route("/v1/agent/self", any(agent_self))
        .route("/v1/status/peers", any(status_peers))
}

const POLICY_WHAT: &str = "Policy decoding failed";
const ROLE_WHAT: &str = "Role decoding failed";
const METHOD_WHAT: &str = "Failed to decode auth method";
const RULE_WHAT: &str = "BindingRule decoding failed";

fn method_not_allowed(m: &Method) -> ApiError {
    ApiError::new(405, format!("method {m} not allowed"))
}

fn acl_not_found() -> ApiError {
    ApiError::new(403, "ACL not found")
}

/// A Go `time.Duration` rendered the way `Duration.String()` does for whole seconds.
pub(crate) fn go_duration_string(secs: u64) -> String {
    if secs == 0 {
        return "0s".into();
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

fn ns_fields(m: &mut Map<String, Value>, enterprise: bool, ns: &str) {
    if enterprise {
        m.insert("Namespace".into(), json!(ns));
        m.insert("Partition".into(), json!("default"));
    }
}

// ---- policies ----

fn policy_api(p: &Policy) -> Value {
    let mut v = p.to_api();
    if let Some(m) = v.as_object_mut() {
        m.insert("Datacenters".into(), Value::Null);
    }
    v
}

/// Validate and store a policy write (create when `id` is empty).
fn policy_write(
    st: &mut super::model::State,
    id: Option<&str>,
    obj: &Map<String, Value>,
) -> Result<Policy, ApiError> {
    let body_id = str_field(obj, "ID", POLICY_WHAT)?;
    let name = str_field(obj, "Name", POLICY_WHAT)?;
    let description = str_field(obj, "Description", POLICY_WHAT)?;
    let rules = str_field(obj, "Rules", POLICY_WHAT)?;
    let id = match id {
        None if !body_id.is_empty() => {
            return Err(ApiError::new(
                400,
                "Cannot specify the ID when creating a new policy",
            ))
        }
        None => None,
        Some(id) if !body_id.is_empty() && body_id != id => {
            return Err(ApiError::new(
                400,
                "Policy ID in URL and payload do not match",
            ))
        }
        Some(id) => Some(id.to_string()),
    };
    if name.is_empty() {
        return Err(ApiError::internal("Invalid Policy: no Name is set"));
    }
    if st
        .policies
        .iter()
        .any(|p| p.name == name && Some(&p.id) != id.as_ref())
    {
        return Err(ApiError::internal(format!(
            "Invalid Policy: A Policy with Name {name:?} already exists"
        )));
    }
    let index = st.bump();
    let p = match id {
        Some(id) => {
            if id == super::model::GLOBAL_MANAGEMENT_ID && name != "global-management" {
                return Err(ApiError::internal(
                    "Changing the name of the builtin global-management policy is not permitted",
                ));
            }
            let p = st
                .policies
                .iter_mut()
                .find(|p| p.id == id)
                .ok_or_else(|| ApiError::internal(format!("Cannot find policy {id:?}")))?;
            p.name = name;
            p.description = description;
            if p.id != super::model::GLOBAL_MANAGEMENT_ID {
                p.rules = rules;
            }
            p.modify_index = index;
            p.clone()
        }
        None => {
            let p = Policy {
                id: uuid::Uuid::new_v4().to_string(),
                name,
                description,
                rules,
                create_index: index,
                modify_index: index,
            };
            st.policies.push(p.clone());
            p
        }
    };
    // Token links carry the policy name: keep them current after a rename.
    for t in st.tokens.iter_mut() {
        for l in t.policies.iter_mut().filter(|l| l.id == p.id) {
            l.name = p.name.clone();
        }
    }
    st.policies_index = index;
    Ok(p)
}

/// PUT /v1/acl/policy (acl:write).
async fn policy_create(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        if method != Method::PUT {
            return Err(method_not_allowed(&method));
        }
        let obj = decode_body(&body, POLICY_WHAT)?;
        let p = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "write")?;
            policy_write(st, None, &obj)
        })?;
        Ok(json_response(&policy_api(&p), None))
    }
    .await)
}

/// GET /v1/acl/policy/name/:name (acl:read).
async fn policy_by_name(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(name): Path<String>,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(method_not_allowed(&method));
        }
        c.blocking(raw.as_deref(), |st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "read")?;
            let p = st
                .policies
                .iter()
                .find(|p| p.name == name)
                .ok_or_else(acl_not_found)?;
            Ok((policy_api(p), p.modify_index))
        })
        .await
    }
    .await)
}

/// GET (acl:read), PUT, DELETE (acl:write) /v1/acl/policy/:id.
async fn policy_by_id(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    run(async {
        match method {
            Method::GET => {
                c.blocking(raw.as_deref(), |st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "read")?;
                    let p = st
                        .policies
                        .iter()
                        .find(|p| p.id == id)
                        .ok_or_else(acl_not_found)?;
                    Ok((policy_api(p), p.modify_index))
                })
                .await
            }
            Method::PUT => {
                let obj = decode_body(&body, POLICY_WHAT)?;
                let p = c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    policy_write(st, Some(&id), &obj)
                })?;
                Ok(json_response(&policy_api(&p), None))
            }
            Method::DELETE => {
                c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    if id == super::model::GLOBAL_MANAGEMENT_ID {
                        return Err(ApiError::internal(
                            "Delete operation not permitted on the builtin global-management policy",
                        ));
                    }
                    if st.policies.iter().any(|p| p.id == id) {
                        st.policies.retain(|p| p.id != id);
                        for t in st.tokens.iter_mut() {
                            t.policies.retain(|l| l.id != id);
                        }
                        st.policies_index = st.bump();
                    }
                    Ok(())
                })?;
                Ok(json_response(&json!(true), None))
            }
            other => Err(method_not_allowed(&other)),
        }
    }
    .await)
}

// ---- roles ----

fn role_api(st: &super::model::State, r: &Role, enterprise: bool) -> Value {
    let mut m = Map::new();
    m.insert("ID".into(), json!(r.id));
    m.insert("Name".into(), json!(r.name));
    m.insert("Description".into(), json!(r.description));
    let links: Vec<Value> = r
        .policies
        .iter()
        .filter_map(|n| st.policies.iter().find(|p| &p.name == n))
        .map(|p| json!({"ID": p.id, "Name": p.name}))
        .collect();
    if !links.is_empty() {
        m.insert("Policies".into(), Value::Array(links));
    }
    if !r.service_identities.is_empty() {
        m.insert(
            "ServiceIdentities".into(),
            json!(r
                .service_identities
                .iter()
                .map(|s| json!({"ServiceName": s}))
                .collect::<Vec<_>>()),
        );
    }
    use base64::Engine;
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(r.name.as_bytes());
    h.update(r.description.as_bytes());
    for p in &r.policies {
        h.update(p.as_bytes());
    }
    m.insert(
        "Hash".into(),
        json!(base64::engine::general_purpose::STANDARD.encode(h.finalize())),
    );
    ns_fields(&mut m, enterprise, &r.namespace);
    m.insert("CreateIndex".into(), json!(r.create_index));
    m.insert("ModifyIndex".into(), json!(r.modify_index));
    Value::Object(m)
}

/// Policy links `[{ID}|{Name}]` of a role or token body, as policy names.
fn policy_names(
    st: &super::model::State,
    obj: &Map<String, Value>,
    what: &str,
    kind: &str,
) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::new();
    if let Some(Value::Array(links)) = field(obj, "Policies") {
        for l in links.iter().filter_map(Value::as_object) {
            let id = str_field(l, "ID", what)?;
            let name = str_field(l, "Name", what)?;
            let p = st
                .policies
                .iter()
                .find(|p| (!id.is_empty() && p.id == id) || (id.is_empty() && p.name == name))
                .ok_or_else(|| {
                    ApiError::internal(format!(
                        "Invalid {kind}: cannot find policy {}",
                        if id.is_empty() { &name } else { &id }
                    ))
                })?;
            out.push(p.name.clone());
        }
    }
    Ok(out)
}

/// Role links `[{ID}|{Name}]` of a token body, resolved in namespace `ns`.
pub(crate) fn role_links(
    st: &super::model::State,
    obj: &Map<String, Value>,
    ns: &str,
) -> Result<Vec<Link>, ApiError> {
    const WHAT: &str = "Token decoding failed";
    let mut out = Vec::new();
    if let Some(Value::Array(links)) = field(obj, "Roles") {
        for l in links.iter().filter_map(Value::as_object) {
            let id = str_field(l, "ID", WHAT)?;
            let name = str_field(l, "Name", WHAT)?;
            let r = st
                .roles
                .iter()
                .find(|r| {
                    (!id.is_empty() && r.id == id)
                        || (id.is_empty() && r.name == name && r.namespace == ns)
                })
                .ok_or_else(|| {
                    ApiError::new(
                        400,
                        format!(
                            "Invalid Role: cannot find role {}",
                            if id.is_empty() { &name } else { &id }
                        ),
                    )
                })?;
            out.push(Link {
                id: r.id.clone(),
                name: r.name.clone(),
            });
        }
    }
    Ok(out)
}

fn role_write(
    st: &mut super::model::State,
    ctx: &Ctx,
    id: Option<&str>,
    obj: &Map<String, Value>,
) -> Result<Role, ApiError> {
    let body_id = str_field(obj, "ID", ROLE_WHAT)?;
    let id = match id {
        None if !body_id.is_empty() => {
            return Err(ApiError::new(
                400,
                "Cannot specify the ID when creating a new role",
            ))
        }
        None => None,
        Some(id) if !body_id.is_empty() && body_id != id => {
            return Err(ApiError::new(
                400,
                "Role ID in URL and payload do not match",
            ))
        }
        Some(id) => Some(id.to_string()),
    };
    let ns = ctx.namespace(st, &str_field(obj, "Namespace", ROLE_WHAT)?)?;
    let name = str_field(obj, "Name", ROLE_WHAT)?;
    if name.is_empty() {
        return Err(ApiError::internal("Invalid Role: no Name is set"));
    }
    if st
        .roles
        .iter()
        .any(|r| r.name == name && r.namespace == ns && Some(&r.id) != id.as_ref())
    {
        return Err(ApiError::internal(format!(
            "Invalid Role: A Role with Name {name:?} already exists"
        )));
    }
    let policies = policy_names(st, obj, ROLE_WHAT, "Role")?;
    let mut services = Vec::new();
    if let Some(Value::Array(ids)) = field(obj, "ServiceIdentities") {
        for s in ids.iter().filter_map(Value::as_object) {
            services.push(str_field(s, "ServiceName", ROLE_WHAT)?);
        }
    }
    let description = str_field(obj, "Description", ROLE_WHAT)?;
    let index = st.bump();
    let role = match id {
        Some(id) => {
            let r = st
                .roles
                .iter_mut()
                .find(|r| r.id == id)
                .ok_or_else(|| ApiError::internal(format!("Cannot find role {id:?}")))?;
            r.name = name;
            r.description = description;
            r.policies = policies;
            r.service_identities = services;
            r.modify_index = index;
            r.clone()
        }
        None => {
            let r = Role {
                id: uuid::Uuid::new_v4().to_string(),
                name,
                namespace: ns,
                policies,
                service_identities: services,
                description,
                create_index: index,
                modify_index: index,
            };
            st.roles.push(r.clone());
            r
        }
    };
    for t in st.tokens.iter_mut() {
        for l in t.roles.iter_mut().filter(|l| l.id == role.id) {
            l.name = role.name.clone();
        }
    }
    st.roles_index = index;
    Ok(role)
}

/// GET /v1/acl/roles (acl:read), in the request's namespace.
async fn role_list(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(method_not_allowed(&method));
        }
        let st = c.lock();
        let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
        ctx.authorize(&st, "read")?;
        let ns = ctx.namespace(&st, "")?;
        let policy = ctx.query("policy").unwrap_or("");
        let items: Vec<Value> = st
            .roles
            .iter()
            .filter(|r| r.namespace == ns)
            .filter(|r| {
                policy.is_empty()
                    || st
                        .policies
                        .iter()
                        .any(|p| p.id == policy && r.policies.contains(&p.name))
            })
            .map(|r| role_api(&st, r, st.enterprise))
            .collect();
        Ok(json_response(&Value::Array(items), Some(st.roles_index)))
    }
    .await)
}

/// PUT /v1/acl/role (acl:write).
async fn role_create(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        if method != Method::PUT {
            return Err(method_not_allowed(&method));
        }
        let obj = decode_body(&body, ROLE_WHAT)?;
        let v = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "write")?;
            let r = role_write(st, &ctx, None, &obj)?;
            Ok::<_, ApiError>(role_api(st, &r, st.enterprise))
        })?;
        Ok(json_response(&v, None))
    }
    .await)
}

/// GET /v1/acl/role/name/:name (acl:read).
async fn role_by_name(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(name): Path<String>,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(method_not_allowed(&method));
        }
        let st = c.lock();
        let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
        ctx.authorize(&st, "read")?;
        let ns = ctx.namespace(&st, "")?;
        let r = st
            .roles
            .iter()
            .find(|r| r.name == name && r.namespace == ns)
            .ok_or_else(acl_not_found)?;
        Ok(json_response(
            &role_api(&st, r, st.enterprise),
            Some(r.modify_index),
        ))
    }
    .await)
}

/// GET (acl:read), PUT, DELETE (acl:write) /v1/acl/role/:id.
async fn role_by_id(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    run(async {
        match method {
            Method::GET => {
                let st = c.lock();
                let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
                ctx.authorize(&st, "read")?;
                let r = st
                    .roles
                    .iter()
                    .find(|r| r.id == id)
                    .ok_or_else(acl_not_found)?;
                Ok(json_response(
                    &role_api(&st, r, st.enterprise),
                    Some(r.modify_index),
                ))
            }
            Method::PUT => {
                let obj = decode_body(&body, ROLE_WHAT)?;
                let v = c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    let r = role_write(st, &ctx, Some(&id), &obj)?;
                    Ok::<_, ApiError>(role_api(st, &r, st.enterprise))
                })?;
                Ok(json_response(&v, None))
            }
            Method::DELETE => {
                c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    if st.roles.iter().any(|r| r.id == id) {
                        st.roles.retain(|r| r.id != id);
                        for t in st.tokens.iter_mut() {
                            t.roles.retain(|l| l.id != id);
                        }
                        st.roles_index = st.bump();
                    }
                    Ok::<_, ApiError>(())
                })?;
                Ok(json_response(&json!(true), None))
            }
            other => Err(method_not_allowed(&other)),
        }
    }
    .await)
}

// ---- auth methods ----

fn auth_method_api(m: &AuthMethod, enterprise: bool, with_config: bool) -> Value {
    let mut o = Map::new();
    o.insert("Name".into(), json!(m.name));
    o.insert("Type".into(), json!(m.kind));
    if !m.display_name.is_empty() {
        o.insert("DisplayName".into(), json!(m.display_name));
    }
    if !m.description.is_empty() {
        o.insert("Description".into(), json!(m.description));
    }
    if let Some(s) = m.max_token_ttl_secs.filter(|s| *s > 0) {
        o.insert("MaxTokenTTL".into(), json!(go_duration_string(s)));
    }
    if !m.token_locality.is_empty() {
        o.insert("TokenLocality".into(), json!(m.token_locality));
    }
    if with_config {
        o.insert("Config".into(), json!(m.config));
    }
    ns_fields(&mut o, enterprise, &m.namespace);
    o.insert("CreateIndex".into(), json!(m.create_index));
    o.insert("ModifyIndex".into(), json!(m.modify_index));
    Value::Object(o)
}

fn auth_method_write(
    st: &mut super::model::State,
    ctx: &Ctx,
    path_name: Option<&str>,
    obj: &Map<String, Value>,
) -> Result<AuthMethod, ApiError> {
    let name = str_field(obj, "Name", METHOD_WHAT)?;
    let name = match path_name {
        Some(p) if !name.is_empty() && name != p => {
            return Err(ApiError::new(
                400,
                "Auth Method Name in URL and payload do not match",
            ))
        }
        Some(p) => p.to_string(),
        None => name,
    };
    let ns = ctx.namespace(st, &str_field(obj, "Namespace", METHOD_WHAT)?)?;
    let kind = str_field(obj, "Type", METHOD_WHAT)?;
    if name.is_empty() {
        return Err(ApiError::internal("Invalid Auth Method: no Name is set"));
    }
    if !["kubernetes", "oidc", "jwt"].contains(&kind.as_str()) {
        return Err(ApiError::internal(format!(
            "Invalid Auth Method: Type should be one of: [jwt kubernetes oidc], got {kind:?}"
        )));
    }
    let existing = st
        .auth_methods
        .iter()
        .position(|m| m.name == name && m.namespace == ns);
    match (path_name, existing) {
        (Some(_), None) => {
            return Err(ApiError::internal(format!(
                "Cannot find auth method {name:?}"
            )))
        }
        (None, Some(_)) => {
            return Err(ApiError::internal(format!(
                "Invalid Auth Method: Name {name:?} already in use"
            )))
        }
        (Some(_), Some(i)) if st.auth_methods[i].kind != kind => {
            return Err(ApiError::internal(format!(
                "the Type field is immutable: {} => {kind}",
                st.auth_methods[i].kind
            )))
        }
        _ => {}
    }
    let ttl = match field(obj, "MaxTokenTTL") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(
            crate::scheduler::wire::parse_go_duration(s)
                .ok_or_else(|| {
                    ApiError::new(400, format!("{METHOD_WHAT}: time: invalid duration {s:?}"))
                })?
                .as_secs(),
        ),
        Some(Value::Number(n)) => Some(n.as_u64().unwrap_or(0) / 1_000_000_000),
        Some(v) => {
            return Err(ApiError::new(
                400,
                format!(
                    "{METHOD_WHAT}: json: cannot unmarshal {} into Go struct field .MaxTokenTTL of type string",
                    crate::scheduler::wire::go_kind(v)
                ),
            ))
        }
    };
    if let Some(s) = ttl.filter(|s| *s > 0) {
        if !(60..=86_400).contains(&s) {
            return Err(ApiError::internal(format!(
                "MaxTokenTTL {} cannot be more than 24h0m0s or less than 1m0s",
                go_duration_string(s)
            )));
        }
    }
    let locality = str_field(obj, "TokenLocality", METHOD_WHAT)?;
    if !["", "local", "global"].contains(&locality.as_str()) {
        return Err(ApiError::internal(format!(
            "Invalid Auth Method: invalid TokenLocality {locality:?}"
        )));
    }
    let config: std::collections::BTreeMap<String, Value> = match field(obj, "Config") {
        Some(Value::Object(m)) => m.clone().into_iter().collect(),
        _ => Default::default(),
    };
    if kind == "kubernetes" {
        for key in ["Host", "CACert", "ServiceAccountJWT"] {
            let has = config
                .get(key)
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty());
            if !has && !config.contains_key("ValidationKey") {
                return Err(ApiError::internal(format!(
                    "Invalid Auth Method: Config.{key} is required"
                )));
            }
        }
    }
    let index = st.bump();
    let m = AuthMethod {
        name,
        kind,
        namespace: ns,
        display_name: str_field(obj, "DisplayName", METHOD_WHAT)?,
        description: str_field(obj, "Description", METHOD_WHAT)?,
        max_token_ttl_secs: ttl.filter(|s| *s > 0),
        token_locality: locality,
        config,
        create_index: existing
            .map(|i| st.auth_methods[i].create_index)
            .unwrap_or(index),
        modify_index: index,
    };
    match existing {
        Some(i) => st.auth_methods[i] = m.clone(),
        None => st.auth_methods.push(m.clone()),
    }
    Ok(m)
}

/// GET /v1/acl/auth-methods (acl:read): list entries without Config.
async fn auth_method_list(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(method_not_allowed(&method));
        }
        let st = c.lock();
        let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
        ctx.authorize(&st, "read")?;
        let ns = ctx.namespace(&st, "")?;
        let items: Vec<Value> = st
            .auth_methods
            .iter()
            .filter(|m| m.namespace == ns)
            .map(|m| auth_method_api(m, st.enterprise, false))
            .collect();
        Ok(json_response(&Value::Array(items), Some(st.index)))
    }
    .await)
}

/// PUT /v1/acl/auth-method (acl:write).
async fn auth_method_create(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        if method != Method::PUT {
            return Err(method_not_allowed(&method));
        }
        let obj = decode_body(&body, METHOD_WHAT)?;
        let v = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "write")?;
            let m = auth_method_write(st, &ctx, None, &obj)?;
            Ok::<_, ApiError>(auth_method_api(&m, st.enterprise, true))
        })?;
        Ok(json_response(&v, None))
    }
    .await)
}

/// GET (acl:read), PUT, DELETE (acl:write) /v1/acl/auth-method/:name. Deleting a method
/// deletes its binding rules and the tokens it issued, as the real service does.
async fn auth_method_by_name(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    run(async {
        match method {
            Method::GET => {
                let st = c.lock();
                let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
                ctx.authorize(&st, "read")?;
                let ns = ctx.namespace(&st, "")?;
                let m = st
                    .auth_methods
                    .iter()
                    .find(|m| m.name == name && m.namespace == ns)
                    .ok_or_else(acl_not_found)?;
                Ok(json_response(
                    &auth_method_api(m, st.enterprise, true),
                    Some(m.modify_index),
                ))
            }
            Method::PUT => {
                let obj = decode_body(&body, METHOD_WHAT)?;
                let v = c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    let m = auth_method_write(st, &ctx, Some(&name), &obj)?;
                    Ok::<_, ApiError>(auth_method_api(&m, st.enterprise, true))
                })?;
                Ok(json_response(&v, None))
            }
            Method::DELETE => {
                c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    let ns = ctx.namespace(st, "")?;
                    if st
                        .auth_methods
                        .iter()
                        .any(|m| m.name == name && m.namespace == ns)
                    {
                        st.auth_methods
                            .retain(|m| !(m.name == name && m.namespace == ns));
                        st.binding_rules
                            .retain(|r| !(r.auth_method == name && r.namespace == ns));
                        st.tokens
                            .retain(|t| !(t.auth_method == name && t.auth_method_namespace == ns));
                        st.tokens_index = st.bump();
                    }
                    Ok::<_, ApiError>(())
                })?;
                Ok(json_response(&json!(true), None))
            }
            other => Err(method_not_allowed(&other)),
        }
    }
    .await)
}

// ---- binding rules ----

fn binding_rule_api(r: &BindingRule, enterprise: bool) -> Value {
    let mut o = Map::new();
    o.insert("ID".into(), json!(r.id));
    o.insert("Description".into(), json!(r.description));
    o.insert("AuthMethod".into(), json!(r.auth_method));
    o.insert("Selector".into(), json!(r.selector));
    o.insert("BindType".into(), json!(r.bind_type));
    o.insert("BindName".into(), json!(r.bind_name));
    ns_fields(&mut o, enterprise, &r.namespace);
    o.insert("CreateIndex".into(), json!(r.create_index));
    o.insert("ModifyIndex".into(), json!(r.modify_index));
    Value::Object(o)
}

fn binding_rule_write(
    st: &mut super::model::State,
    ctx: &Ctx,
    id: Option<&str>,
    obj: &Map<String, Value>,
) -> Result<BindingRule, ApiError> {
    let body_id = str_field(obj, "ID", RULE_WHAT)?;
    match id {
        None if !body_id.is_empty() => {
            return Err(ApiError::new(
                400,
                "Cannot specify the ID when creating a new binding rule",
            ))
        }
        Some(id) if !body_id.is_empty() && body_id != id => {
            return Err(ApiError::new(
                400,
                "BindingRule ID in URL and payload do not match",
            ))
        }
        _ => {}
    }
    let ns = ctx.namespace(st, &str_field(obj, "Namespace", RULE_WHAT)?)?;
    let method = str_field(obj, "AuthMethod", RULE_WHAT)?;
    let bind_type = str_field(obj, "BindType", RULE_WHAT)?;
    let bind_name = str_field(obj, "BindName", RULE_WHAT)?;
    if method.is_empty() {
        return Err(ApiError::internal(
            "Invalid Binding Rule: no AuthMethod is set",
        ));
    }
    if !st
        .auth_methods
        .iter()
        .any(|m| m.name == method && m.namespace == ns)
    {
        return Err(ApiError::internal(format!(
            "Invalid Binding Rule: unknown auth method {method:?}"
        )));
    }
    if bind_type.is_empty() {
        return Err(ApiError::internal(
            "Invalid Binding Rule: no BindType is set",
        ));
    }
    if !["service", "role", "policy", "node"].contains(&bind_type.as_str()) {
        return Err(ApiError::internal(format!(
            "Invalid Binding Rule: unknown BindType {bind_type:?}"
        )));
    }
    if bind_name.is_empty() {
        return Err(ApiError::internal(
            "Invalid Binding Rule: no BindName is set",
        ));
    }
    let selector = str_field(obj, "Selector", RULE_WHAT)?;
    let description = str_field(obj, "Description", RULE_WHAT)?;
    let index = st.bump();
    match id {
        Some(id) => {
            let r = st
                .binding_rules
                .iter_mut()
                .find(|r| r.id == id)
                .ok_or_else(|| ApiError::internal(format!("Cannot find binding rule {id:?}")))?;
            if r.auth_method != method {
                return Err(ApiError::internal(
                    "Invalid Binding Rule: the AuthMethod field is immutable",
                ));
            }
            r.selector = selector;
            r.bind_type = bind_type;
            r.bind_name = bind_name;
            r.description = description;
            r.modify_index = index;
            Ok(r.clone())
        }
        None => {
            let r = BindingRule {
                id: uuid::Uuid::new_v4().to_string(),
                auth_method: method,
                namespace: ns,
                selector,
                bind_type,
                bind_name,
                description,
                create_index: index,
                modify_index: index,
            };
            st.binding_rules.push(r.clone());
            Ok(r)
        }
    }
}

/// GET /v1/acl/binding-rules[?authmethod=] (acl:read).
async fn binding_rule_list(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(method_not_allowed(&method));
        }
        let st = c.lock();
        let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
        ctx.authorize(&st, "read")?;
        let ns = ctx.namespace(&st, "")?;
        let by = ctx.query("authmethod").unwrap_or("");
        let items: Vec<Value> = st
            .binding_rules
            .iter()
            .filter(|r| r.namespace == ns && (by.is_empty() || r.auth_method == by))
            .map(|r| binding_rule_api(r, st.enterprise))
            .collect();
        Ok(json_response(&Value::Array(items), Some(st.index)))
    }
    .await)
}

/// PUT /v1/acl/binding-rule (acl:write).
async fn binding_rule_create(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        if method != Method::PUT {
            return Err(method_not_allowed(&method));
        }
        let obj = decode_body(&body, RULE_WHAT)?;
        let v = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            ctx.authorize(st, "write")?;
            let r = binding_rule_write(st, &ctx, None, &obj)?;
            Ok::<_, ApiError>(binding_rule_api(&r, st.enterprise))
        })?;
        Ok(json_response(&v, None))
    }
    .await)
}

/// GET (acl:read), PUT, DELETE (acl:write) /v1/acl/binding-rule/:id.
async fn binding_rule_by_id(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    run(async {
        match method {
            Method::GET => {
                let st = c.lock();
                let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
                ctx.authorize(&st, "read")?;
                let r = st
                    .binding_rules
                    .iter()
                    .find(|r| r.id == id)
                    .ok_or_else(acl_not_found)?;
                Ok(json_response(
                    &binding_rule_api(r, st.enterprise),
                    Some(r.modify_index),
                ))
            }
            Method::PUT => {
                let obj = decode_body(&body, RULE_WHAT)?;
                let v = c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    let r = binding_rule_write(st, &ctx, Some(&id), &obj)?;
                    Ok::<_, ApiError>(binding_rule_api(&r, st.enterprise))
                })?;
                Ok(json_response(&v, None))
            }
            Method::DELETE => {
                c.mutate(|st| {
                    let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
                    ctx.authorize(st, "write")?;
                    if st.binding_rules.iter().any(|r| r.id == id) {
                        st.binding_rules.retain(|r| r.id != id);
                        st.bump();
                    }
                    Ok::<_, ApiError>(())
                })?;
                Ok(json_response(&json!(true), None))
            }
            other => Err(method_not_allowed(&other)),
        }
    }
    .await)
}

// ---- agent ----

const NODE_NAME: &str = "sandbox";

/// GET /v1/agent/self: the agent's configuration and member (`agent:read`). Clients read
/// `Config.Datacenter` and `Config.NodeName` from it, often without a token. The sandbox agent
/// is configured as if its `acl.tokens.default` held `agent_prefix "" { policy = "read" }`, so a
/// request without a token may read it (while ACL reads stay denied to it); a given token needs
/// management or a policy with `agent`/`agent_prefix` rules, an unknown one is `ACL not found`.
async fn agent_self(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    run(async {
        if method != Method::GET {
            return Err(method_not_allowed(&method));
        }
        let st = c.lock();
        let ctx = Ctx::new(&st, raw.as_deref(), &headers)?;
        let accessor = match ctx.token.as_deref() {
            None => String::new(),
            Some(secret) => {
                let t = st
                    .token_by_secret(secret, &ctx.dc)
                    .ok_or_else(acl_not_found)?;
                let agent_rules = t.policies.iter().any(|l| {
                    st.policies
                        .iter()
                        .any(|p| p.id == l.id && p.rules.contains("agent"))
                });
                if st.acl_level(t) == Some("write") || agent_rules {
                    String::new()
                } else {
                    t.accessor_id.clone()
                }
            }
        };
        if !accessor.is_empty() {
            return Err(ApiError::new(
                403,
                format!("Permission denied: token with AccessorID '{accessor}' lacks permission 'agent:read' on \"{NODE_NAME}\""),
            ));
        }
        let v = json!({
            "Config": {
                "Datacenter": super::model::PRIMARY_DC,
                "PrimaryDatacenter": super::model::PRIMARY_DC,
                "NodeName": NODE_NAME,
                "NodeID": "5b9a5a7e-0c3c-4c1a-9d53-6a1f3a0e0001",
                "Partition": if st.enterprise { "default" } else { "" },
                "Revision": "sandbox",
                "Server": true,
                "Version": "1.21.0",
                "BuildDate": "2025-01-01T00:00:00Z",
            },
            "DebugConfig": {},
            "Coord": {"Vec": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "Error": 1.5, "Adjustment": 0.0, "Height": 1e-05},
            "Member": {
                "Name": NODE_NAME, "Addr": "127.0.0.1", "Port": 8301,
                "Tags": {"dc": super::model::PRIMARY_DC, "role": "consul", "acls": "1", "build": "1.21.0:sandbox"},
                "Status": 1, "ProtocolMin": 1, "ProtocolMax": 5, "ProtocolCur": 2,
                "DelegateMin": 2, "DelegateMax": 5, "DelegateCur": 4,
            },
            "Stats": {},
            "Meta": {},
            "xDS": {"SupportedProxies": {}, "Port": -1, "Ports": {"Plaintext": -1, "TLS": -1}},
        });
        Ok(json_response(&v, None))
    }
    .await)
}

/// GET /v1/status/peers: the raft peers (this single server).
async fn status_peers(method: Method) -> Response {
    run(async {
        if method != Method::GET {
            return Err(method_not_allowed(&method));
        }
        Ok(json_response(&json!(["127.0.0.1:8300"]), None))
    }
    .await)
}

#[cfg(test)]
mod tests {
    use super::go_duration_string;

    #[test]
    fn durations_render_like_go() {
        assert_eq!(go_duration_string(3600), "1h0m0s");
        assert_eq!(go_duration_string(600), "10m0s");
        assert_eq!(go_duration_string(45), "45s");
    }
}
