//! Auth methods: validating a Kubernetes service-account JWT (signature checked for real with a
//! key configured through the admin API, standing in for the TokenReview call the real service
//! makes), binding-rule selectors and bind names, and building the token login creates.

use std::collections::BTreeMap;

use chrono::Utc;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::model::{AuthMethod, BindingRule, Link, State, Token};
use super::ApiError;

/// The verified identity: selectable fields for binding-rule selectors (flattened names such as
/// `serviceaccount.name`, `value.email`) and list fields (`list.groups`) for `in` selectors.
#[derive(Debug, Default, Clone)]
pub struct Identity {
    pub fields: BTreeMap<String, String>,
    pub lists: BTreeMap<String, Vec<String>>,
}

fn lookup_failed() -> ApiError {
    ApiError::internal("lookup failed: service account jwt not valid")
}

/// The key of an auth method: `Config.ValidationKey` (sandbox extension), a PEM public key
/// (RSA or EC) or an HMAC secret.
pub fn decoding_key(method: &AuthMethod) -> Option<(DecodingKey, Vec<Algorithm>)> {
    let key = method.config.get("ValidationKey").and_then(Value::as_str)?;
    if key.contains("BEGIN") {
        if let Ok(k) = DecodingKey::from_rsa_pem(key.as_bytes()) {
            return Some((
                k,
                vec![Algorithm::RS256, Algorithm::RS384, Algorithm::RS512],
            ));
        }
        if let Ok(k) = DecodingKey::from_ec_pem(key.as_bytes()) {
            return Some((k, vec![Algorithm::ES256, Algorithm::ES384]));
        }
        return None;
    }
    Some((
        DecodingKey::from_secret(key.as_bytes()),
        vec![Algorithm::HS256, Algorithm::HS384, Algorithm::HS512],
    ))
}

/// The claims of a JWT for a method configured the real way (`Host`, `CACert`,
/// `ServiceAccountJWT`, no sandbox `ValidationKey`): the sandbox cannot ask that cluster's
/// TokenReview API, so it accepts a well-formed JWT that has not expired, as a review of a
/// token the cluster issued would.
fn unverified_claims(jwt: &str) -> Result<serde_json::Map<String, Value>, ApiError> {
    use base64::Engine;
    let payload = jwt.split('.').nth(1).unwrap_or("");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| lookup_failed())?;
    let claims: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes).map_err(|_| lookup_failed())?;
    if let Some(exp) = claims.get("exp").and_then(Value::as_i64) {
        if exp <= Utc::now().timestamp() {
            return Err(lookup_failed());
        }
    }
    Ok(claims)
}

/// Validate a bearer JWT's signature and expiry with the method's key; return its claims.
fn verified_claims(
    method: &AuthMethod,
    jwt: &str,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    // The real validator parses the JWT before asking Kubernetes to review it.
    if jwt.split('.').count() != 3 {
        return Err(ApiError::internal(
            "failed to parse and validate JWT: go-jose/go-jose: compact JWS format must have three parts",
        ));
    }
    let header = decode_header(jwt).map_err(|e| {
        ApiError::internal(format!(
            "failed to parse and validate JWT: go-jose/go-jose: {e}"
        ))
    })?;
    if !method.config.contains_key("ValidationKey") {
        return unverified_claims(jwt);
    }
    let (key, algs) = decoding_key(method).ok_or_else(lookup_failed)?;
    if !algs.contains(&header.alg) {
        return Err(lookup_failed());
    }
    let mut v = Validation::new(header.alg);
    v.algorithms = algs;
    v.required_spec_claims = Default::default();
    v.validate_exp = true;
    v.validate_aud = false;
    if let Some(iss) = method.config.get("Issuer").and_then(Value::as_str) {
        v.set_issuer(&[iss]);
    }
    let data =
        decode::<serde_json::Map<String, Value>>(jwt, &key, &v).map_err(|_| lookup_failed())?;
    Ok(data.claims)
}

/// Validate a Kubernetes service-account token. The service account comes from `sub`
/// (`system:serviceaccount:NS:NAME`, projected tokens) or the legacy secret-token claims.
pub fn kubernetes_identity(method: &AuthMethod, jwt: &str) -> Result<Identity, ApiError> {
    let claims = verified_claims(method, jwt)?;
    let str_claim = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_string);
    let (ns, name) = if let Some(sub) = str_claim("sub") {
        let parts: Vec<&str> = sub.split(':').collect();
        if parts.len() != 4 {
            return Err(ApiError::internal(
                "lookup failed: unexpected username format",
            ));
        }
        if parts[0] != "system" || parts[1] != "serviceaccount" {
            return Err(ApiError::internal(
                "lookup failed: username returned is not a service account",
            ));
        }
        (parts[2].to_string(), parts[3].to_string())
    } else {
        match (
            str_claim("kubernetes.io/serviceaccount/namespace"),
            str_claim("kubernetes.io/serviceaccount/service-account.name"),
        ) {
            (Some(ns), Some(name)) => (ns, name),
            _ => return Err(lookup_failed()),
        }
    };
    let uid = claims
        .get("kubernetes.io")
        .and_then(|k| k.get("serviceaccount"))
        .and_then(|s| s.get("uid"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| str_claim("kubernetes.io/serviceaccount/service-account.uid"))
        .unwrap_or_default();
    let mut id = Identity::default();
    id.fields.insert("serviceaccount.namespace".into(), ns);
    id.fields.insert("serviceaccount.name".into(), name);
    id.fields.insert("serviceaccount.uid".into(), uid);
    Ok(id)
}

/// The identity of an OIDC user: `ClaimMappings` give `value.<name>`, `ListClaimMappings` give
/// `list.<name>`, as the real service does.
pub fn oidc_identity(method: &AuthMethod, claims: &serde_json::Map<String, Value>) -> Identity {
    let mut id = Identity::default();
    if let Some(Value::Object(maps)) = method.config.get("ClaimMappings") {
        for (claim, var) in maps {
            if let (Some(v), Some(var)) = (claims.get(claim), var.as_str()) {
                let s = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                id.fields.insert(format!("value.{var}"), s);
            }
        }
    }
    if let Some(Value::Object(maps)) = method.config.get("ListClaimMappings") {
        for (claim, var) in maps {
            if let (Some(Value::Array(items)), Some(var)) = (claims.get(claim), var.as_str()) {
                let list = items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect();
                id.lists.insert(format!("list.{var}"), list);
            }
        }
    }
    id
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(s)
        .to_string()
}

/// Evaluate a binding-rule selector (a subset of go-bexpr: `a == "b"`, `a != "b"`,
/// `"b" in list.x`, `"b" not in list.x`, joined by `and`). An empty selector matches.
pub fn selector_matches(selector: &str, id: &Identity) -> bool {
    if selector.trim().is_empty() {
        return true;
    }
    selector.split(" and ").all(|clause| {
        let clause = clause.trim();
        if let Some((l, r)) = clause.split_once("!=") {
            return id
                .fields
                .get(l.trim())
                .map(|v| *v != unquote(r))
                .unwrap_or(true);
        }
        if let Some((l, r)) = clause.split_once("==") {
            return id
                .fields
                .get(l.trim())
                .map(|v| *v == unquote(r))
                .unwrap_or(false);
        }
        if let Some((l, r)) = clause.split_once(" not in ") {
            return !id
                .lists
                .get(r.trim())
                .map(|xs| xs.contains(&unquote(l)))
                .unwrap_or(false);
        }
        if let Some((l, r)) = clause.split_once(" in ") {
            let needle = unquote(l);
            return id
                .lists
                .get(r.trim())
                .map(|xs| xs.contains(&needle))
                .unwrap_or(false)
                || id
                    .fields
                    .get(r.trim())
                    .map(|v| v.contains(&needle))
                    .unwrap_or(false);
        }
        false
    })
}

/// Interpolate `${field}` references of a bind name.
pub fn interpolate(template: &str, id: &Identity) -> String {
    let mut out = template.to_string();
    for (k, v) in &id.fields {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    out
}

/// Create the token of a login through `method` for `identity` (Consul's tokenSetFromAuthMethod):
/// binding rules give service identities, roles, policies and node identities; no binding is
/// "Permission denied". The token is local to `dc` unless the method's locality is global.
#[allow(clippy::too_many_arguments)]
pub fn login_token(
    st: &mut State,
    method: &AuthMethod,
    identity: &Identity,
    meta: &BTreeMap<String, String>,
    dc: &str,
    description_prefix: &str,
) -> Result<Token, ApiError> {
    let rules: Vec<BindingRule> = st
        .binding_rules
        .iter()
        .filter(|r| r.auth_method == method.name && r.namespace == method.namespace)
        .filter(|r| selector_matches(&r.selector, identity))
        .cloned()
        .collect();
    let mut services = Vec::new();
    let mut roles = Vec::new();
    let mut policies = Vec::new();
    let mut nodes = Vec::new();
    for r in rules {
        let name = interpolate(&r.bind_name, identity);
        match r.bind_type.as_str() {
            "service" => services.push(name),
            "node" => nodes.push((name, dc.to_string())),
            // Roles and policies that do not exist are skipped, as the real service does.
            "role" => {
                if let Some(role) = st
                    .roles
                    .iter()
                    .find(|x| x.name == name && x.namespace == method.namespace)
                {
                    roles.push(Link {
                        id: role.id.clone(),
                        name: role.name.clone(),
                    });
                }
            }
            "policy" => {
                if let Some(p) = st.policies.iter().find(|p| p.name == name) {
                    policies.push(Link {
                        id: p.id.clone(),
                        name: p.name.clone(),
                    });
                }
            }
            _ => {}
        }
    }
    if services.is_empty() && roles.is_empty() && policies.is_empty() && nodes.is_empty() {
        return Err(ApiError::new(403, "Permission denied"));
    }
    let global = method.token_locality == "global";
    if global && dc != super::model::PRIMARY_DC {
        return Err(ApiError::internal(
            "creating global tokens via auth methods is only permitted in the primary datacenter",
        ));
    }
    let mut description = description_prefix.to_string();
    if !meta.is_empty() {
        description.push_str(": ");
        description.push_str(&serde_json::to_string(meta).unwrap_or_default());
    }
    let index = st.bump();
    let now = Utc::now();
    let token = Token {
        accessor_id: uuid::Uuid::new_v4().to_string(),
        secret_id: uuid::Uuid::new_v4().to_string(),
        description,
        policies,
        roles,
        service_identities: services,
        node_identities: nodes,
        local: !global,
        datacenter: dc.to_string(),
        auth_method: method.name.clone(),
        auth_method_namespace: method.namespace.clone(),
        namespace: method.namespace.clone(),
        expiration_time: method
            .max_token_ttl_secs
            .map(|s| now + chrono::Duration::seconds(s as i64)),
        create_time: now,
        create_index: index,
        modify_index: index,
    };
    st.tokens.push(token.clone());
    st.tokens_index = index;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_evaluate() {
        let mut id = Identity::default();
        id.fields
            .insert("serviceaccount.namespace".into(), "default".into());
        id.fields.insert("serviceaccount.name".into(), "web".into());
        id.lists.insert("list.groups".into(), vec!["admins".into()]);
        assert!(selector_matches("", &id));
        assert!(selector_matches("serviceaccount.namespace==default", &id));
        assert!(selector_matches(
            "serviceaccount.namespace == \"default\" and serviceaccount.name != db",
            &id
        ));
        assert!(!selector_matches("serviceaccount.name==db", &id));
        assert!(selector_matches("\"admins\" in list.groups", &id));
        assert!(!selector_matches("\"ops\" in list.groups", &id));
        assert_eq!(interpolate("svc-${serviceaccount.name}", &id), "svc-web");
    }
}
