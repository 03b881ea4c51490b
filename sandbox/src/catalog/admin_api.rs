//! The catalog's sandbox admin API, under `/_sandbox/catalog/` (JSON, PascalCase keys):
//!
//! * `PUT /_sandbox/catalog/config` `{"Enterprise": bool, "InitialManagementToken": "<secret>",
//!   "UseRootToken": true (the initial-management token is `--root-token`),
//!   "SecondaryDatacenter": "dc2", "TokenReplication": bool, "ReplicationError": "text"}` (each
//!   optional). An initial-management token is created as a management token and, as in the
//!   real service, consumes the bootstrap (later bootstrap calls are 403). A secondary
//!   datacenter is reached with `?dc=dc2`; login there needs token replication.
//!   `ReplicationError` records a replication failure now; an empty string is a recovery (a
//!   successful round now: `LastSuccess` moves past `LastError`, which, with
//!   `LastErrorMessage`, stays as the real status keeps it). `"BootstrapFromFollower": true`
//!   answers later bootstrap calls as a follower agent does, with the forwarded-RPC prefix:
//!   `Permission denied: rpc error making call: ACL bootstrap no longer allowed (reset index:
//!   N)`.
//! * `POST /_sandbox/catalog/policies` `{"Name", "Description", "Rules"}` → `{"ID"}`. Rules use
//!   the real language; the sandbox evaluates `acl = "read"|"write"|"deny"`.
//! * `POST /_sandbox/catalog/roles` `{"Name", "Namespace", "Policies": [names],
//!   "ServiceIdentities": [{"ServiceName"}]}` → `{"ID"}`.
//! * `POST /_sandbox/catalog/auth-methods` `{"Name", "Type": "kubernetes"|"oidc", "Namespace",
//!   "DisplayName", "Description", "MaxTokenTTL": "1h", "TokenLocality": "local"|"global",
//!   "Config": {...}}`. Kubernetes: `Config.ValidationKey` is the key service-account JWTs are
//!   verified with (HMAC secret, or PEM RSA/EC public key), `Config.Issuer` optionally required.
//!   OIDC: `OIDCClientID`, `OIDCClientSecret`, `AllowedRedirectURIs`, `ClaimMappings`,
//!   `ListClaimMappings`, `OIDCScopes`.
//! * `POST /_sandbox/catalog/binding-rules` `{"AuthMethod", "Namespace", "Selector", "BindType":
//!   "service"|"role"|"policy"|"node", "BindName"}` → `{"ID"}` (an identical rule is not added
//!   twice: the existing one's ID is answered).
//! * `POST /_sandbox/catalog/oidc/users` `{"Subject", "Claims": {...}}`: a user of the emulated
//!   OIDC provider (see the `oidc` module).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::model::{AuthMethod, BindingRule, OidcUser, Policy, Role, Secondary};
use super::Catalog;

pub fn routes() -> Router<Catalog> {
    Router::new()
        .route("/_sandbox/catalog/config", put(config).post(config))
        .route("/_sandbox/catalog/policies", post(policy))
        .route("/_sandbox/catalog/roles", post(role))
        .route("/_sandbox/catalog/auth-methods", post(auth_method))
        .route("/_sandbox/catalog/binding-rules", post(binding_rule))
        .route("/_sandbox/catalog/oidc/users", post(oidc_user))
}

fn bad(e: impl std::fmt::Display) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"errors": [e.to_string()]})),
    )
        .into_response()
}

#[allow(clippy::result_large_err)] // the error is the finished response
fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Response> {
    let body = if body.iter().all(|b| b.is_ascii_whitespace()) {
        b"{}".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body).map_err(bad)
}

macro_rules! parse_or_return {
    ($body:expr) => {
        match parse($body) {
            Ok(b) => b,
            Err(r) => return r,
        }
    };
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ConfigBody {
    enterprise: Option<bool>,
    initial_management_token: Option<String>,
    /// Use `--root-token` as the initial-management token.
    use_root_token: Option<bool>,
    secondary_datacenter: Option<String>,
    token_replication: Option<bool>,
    replication_error: Option<String>,
    bootstrap_from_follower: Option<bool>,
}

async fn config(State(c): State<Catalog>, body: Bytes) -> Response {
    let b: ConfigBody = parse_or_return!(&body);
    let r: Result<(), String> = c.mutate(|st| {
        if let Some(e) = b.enterprise {
            st.enterprise = e;
        }
        let root = (b.use_root_token == Some(true)).then(|| c.root_token.to_string());
        if let Some(secret) = b
            .initial_management_token
            .filter(|s| !s.is_empty())
            .or(root)
        {
            if !st.tokens.iter().any(|t| t.secret_id == secret) {
                let t = st.management_token(secret, "Initial Management Token");
                if st.bootstrap_index.is_none() {
                    st.bootstrap_index = Some(t.create_index);
                }
            }
        }
        if let Some(dc) = b.secondary_datacenter {
            if dc == super::model::PRIMARY_DC {
                return Err("the secondary datacenter must differ from dc1".into());
            }
            st.secondary = if dc.is_empty() {
                None
            } else {
                Some(Secondary {
                    name: dc,
                    token_replication: b.token_replication.unwrap_or(false),
                })
            };
        } else if let (Some(tr), Some(s)) = (b.token_replication, st.secondary.as_mut()) {
            s.token_replication = tr;
        }
        if let Some(f) = b.bootstrap_from_follower {
            st.bootstrap_from_follower = f;
        }
        match b.replication_error {
            // A failure leaves LastSuccess where it was, so LastError is later: unhealthy.
            Some(msg) if !msg.is_empty() => st.replication_failed(msg),
            // Recovery: LastError and its message stay; LastSuccess moves past them.
            Some(_) => {
                st.replication_failing = false;
                st.replication_succeeded();
            }
            None if !st.replication_failing => st.replication_succeeded(),
            None => {}
        }
        Ok(())
    });
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => bad(e),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PolicyBody {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    rules: String,
}

async fn policy(State(c): State<Catalog>, body: Bytes) -> Response {
    let b: PolicyBody = parse_or_return!(&body);
    let id = c.mutate(|st| {
        let index = st.bump();
        let id = uuid::Uuid::new_v4().to_string();
        st.policies.retain(|p| p.name != b.name);
        st.policies.push(Policy {
            id: id.clone(),
            name: b.name,
            description: b.description,
            rules: b.rules,
            create_index: index,
            modify_index: index,
        });
        st.policies_index = index;
        id
    });
    Json(json!({"ID": id})).into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RoleBody {
    name: String,
    #[serde(default = "default_ns")]
    namespace: String,
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    service_identities: Vec<ServiceIdentity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ServiceIdentity {
    service_name: String,
}

fn default_ns() -> String {
    "default".into()
}

async fn role(State(c): State<Catalog>, body: Bytes) -> Response {
    let b: RoleBody = parse_or_return!(&body);
    let id = c.mutate(|st| {
        let index = st.bump();
        let id = uuid::Uuid::new_v4().to_string();
        st.roles
            .retain(|r| !(r.name == b.name && r.namespace == b.namespace));
        st.roles.push(Role {
            id: id.clone(),
            name: b.name,
            namespace: b.namespace,
            policies: b.policies,
            service_identities: b
                .service_identities
                .into_iter()
                .map(|s| s.service_name)
                .collect(),
            description: String::new(),
            create_index: index,
            modify_index: index,
        });
        st.roles_index = index;
        id
    });
    Json(json!({"ID": id})).into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AuthMethodBody {
    name: String,
    r#type: String,
    #[serde(default = "default_ns")]
    namespace: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    description: String,
    #[serde(default, rename = "MaxTokenTTL")]
    max_token_ttl: String,
    #[serde(default)]
    token_locality: String,
    #[serde(default)]
    config: std::collections::BTreeMap<String, Value>,
}

async fn auth_method(State(c): State<Catalog>, body: Bytes) -> Response {
    let b: AuthMethodBody = parse_or_return!(&body);
    if !["kubernetes", "oidc"].contains(&b.r#type.as_str()) {
        return bad(format!(
            "Type must be kubernetes or oidc, not {:?}",
            b.r#type
        ));
    }
    let ttl = if b.max_token_ttl.is_empty() {
        None
    } else {
        match crate::scheduler::wire::parse_go_duration(&b.max_token_ttl) {
            Some(d) => Some(d.as_secs()),
            None => return bad(format!("invalid MaxTokenTTL {:?}", b.max_token_ttl)),
        }
    };
    if b.r#type == "kubernetes"
        && super::auth::decoding_key(&AuthMethod {
            name: String::new(),
            kind: String::new(),
            namespace: String::new(),
            display_name: String::new(),
            description: String::new(),
            max_token_ttl_secs: None,
            token_locality: String::new(),
            config: b.config.clone(),
            create_index: 0,
            modify_index: 0,
        })
        .is_none()
    {
        return bad(
            "kubernetes auth methods need Config.ValidationKey (HMAC secret or PEM public key)",
        );
    }
    c.mutate(|st| {
        st.auth_methods
            .retain(|m| !(m.name == b.name && m.namespace == b.namespace));
        st.auth_methods.push(AuthMethod {
            name: b.name,
            kind: b.r#type,
            namespace: b.namespace,
            display_name: b.display_name,
            description: b.description,
            max_token_ttl_secs: ttl,
            token_locality: if b.token_locality.is_empty() {
                "local".into()
            } else {
                b.token_locality
            },
            config: b.config,
            create_index: st.index + 1,
            modify_index: st.index + 1,
        });
        st.bump();
    });
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct BindingRuleBody {
    auth_method: String,
    #[serde(default = "default_ns")]
    namespace: String,
    #[serde(default)]
    selector: String,
    bind_type: String,
    bind_name: String,
}

async fn binding_rule(State(c): State<Catalog>, body: Bytes) -> Response {
    let b: BindingRuleBody = parse_or_return!(&body);
    if !["service", "role", "policy", "node"].contains(&b.bind_type.as_str()) {
        return bad(format!(
            "BindType must be service, role, policy or node, not {:?}",
            b.bind_type
        ));
    }
    let id = c.mutate(|st| {
        // Idempotent, so a setup that runs at every start (`quartet dev --state-dir`) does
        // not stack identical rules.
        if let Some(r) = st.binding_rules.iter().find(|r| {
            r.auth_method == b.auth_method
                && r.namespace == b.namespace
                && r.selector == b.selector
                && r.bind_type == b.bind_type
                && r.bind_name == b.bind_name
        }) {
            return r.id.clone();
        }
        let index = st.bump();
        let id = uuid::Uuid::new_v4().to_string();
        st.binding_rules.push(BindingRule {
            description: String::new(),
            create_index: index,
            modify_index: index,
            id: id.clone(),
            auth_method: b.auth_method,
            namespace: b.namespace,
            selector: b.selector,
            bind_type: b.bind_type,
            bind_name: b.bind_name,
        });
        id
    });
    Json(json!({"ID": id})).into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct UserBody {
    subject: String,
    #[serde(default)]
    claims: serde_json::Map<String, Value>,
}

async fn oidc_user(State(c): State<Catalog>, body: Bytes) -> Response {
    let b: UserBody = parse_or_return!(&body);
    c.mutate(|st| {
        st.oidc_users.insert(
            b.subject.clone(),
            OidcUser {
                subject: b.subject,
                claims: b.claims,
            },
        );
    });
    StatusCode::NO_CONTENT.into_response()
}
