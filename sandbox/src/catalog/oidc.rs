//! The OIDC flow (enterprise only): auth-url starts a flow with a state and a nonce and points
//! the user at the emulated provider; the provider's authorize endpoint redirects back with a
//! code; callback checks state, client nonce, code and ID-token nonce, then creates a token.
//!
//! Emulated provider (sandbox admin API): `GET /_sandbox/catalog/oidc/authorize?client_id=..&
//! redirect_uri=..&state=..&nonce=..[&subject=alice]` answers `302` to `redirect_uri?code=..&
//! state=..`, logging in `subject` (default: the first user created with `POST
//! /_sandbox/catalog/oidc/users`, else `sandbox-user`). The ID token it issues carries the
//! `nonce` of the authorize request, so altering it in the URL makes the callback fail the
//! nonce check, as with a real provider.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rand::Rng;
use serde_json::{json, Value};

use super::model::{OidcCode, OidcState};
use super::{auth, decode_body, json_response, meta_field, run, str_field, ApiError, Catalog, Ctx};

fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

fn enterprise_only(c: &Catalog) -> Result<(), ApiError> {
    if c.lock().enterprise {
        Ok(())
    } else {
        // The community edition has no such endpoint: its index handler answers an empty 404.
        Err(ApiError::new(404, ""))
    }
}

fn oidc_method(
    st: &super::model::State,
    name: &str,
    ns: &str,
) -> Result<super::model::AuthMethod, ApiError> {
    let m = st
        .auth_methods
        .iter()
        .find(|m| m.name == name && m.namespace == ns)
        .cloned()
        .ok_or_else(|| {
            ApiError::new(
                403,
                format!("ACL not found: auth method {name:?} not found"),
            )
        })?;
    if m.kind != "oidc" {
        return Err(ApiError::internal(format!(
            "auth method {name:?} is not of type \"oidc\""
        )));
    }
    Ok(m)
}

fn config_str(m: &super::model::AuthMethod, key: &str) -> String {
    m.config
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Whether `uri` is an allowed redirect. A loopback URI (`localhost`, `127.0.0.1`, `::1`)
/// matches an allowed one whatever its port, as the real service does (Consul's
/// `internal/go-sso/oidcauth/util.go` `validRedirect`, after RFC 8252 §7.3: a native app's CLI
/// listens on a port the OS picks); any other URI must be listed exactly.
fn valid_redirect(uri: &str, allowed: &[String]) -> bool {
    /// `(scheme, host, path-and-query)` of a loopback URI; `None` for any other.
    fn loopback(u: &str) -> Option<(String, String, String)> {
        let (scheme, rest) = u.split_once("://")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let host = if let Some(v6) = authority.strip_prefix('[') {
            v6.split_once(']')?.0.to_string()
        } else {
            authority.split(':').next()?.to_string()
        };
        ["localhost", "127.0.0.1", "::1"]
            .contains(&host.as_str())
            .then(|| (scheme.to_string(), host, path.to_string()))
    }
    match loopback(uri) {
        None => allowed.iter().any(|a| a == uri),
        Some(want) => allowed.iter().any(|a| loopback(a).as_ref() == Some(&want)),
    }
}

/// POST /v1/acl/oidc/auth-url
pub async fn auth_url(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        enterprise_only(&c)?;
        if method != Method::POST {
            return Err(ApiError::new(405, format!("method {method} not allowed")));
        }
        const WHAT: &str = "Failed to decode request body";
        let obj = decode_body(&body, WHAT)?;
        let name = str_field(&obj, "AuthMethod", WHAT)?;
        let redirect_uri = str_field(&obj, "RedirectURI", WHAT)?;
        let client_nonce = str_field(&obj, "ClientNonce", WHAT)?;
        let body_ns = str_field(&obj, "Namespace", WHAT)?;
        let meta = meta_field(&obj, WHAT)?;
        let host = headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1")
            .to_string();
        let url = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            let ns = ctx.namespace(st, &body_ns)?;
            let m = oidc_method(st, &name, &ns)?;
            if redirect_uri.is_empty() {
                return Err(ApiError::internal("missing redirect_uri"));
            }
            let allowed: Vec<String> = match m.config.get("AllowedRedirectURIs") {
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect(),
                _ => Vec::new(),
            };
            if !valid_redirect(&redirect_uri, &allowed) {
                return Err(ApiError::internal(format!(
                    "unauthorized redirect_uri: {redirect_uri}"
                )));
            }
            let state = random_hex(20);
            let nonce = random_hex(20);
            st.oidc_states
                .retain(|s| chrono::Utc::now() - s.created < chrono::Duration::minutes(10));
            st.oidc_states.push(OidcState {
                state: state.clone(),
                nonce: nonce.clone(),
                auth_method: m.name.clone(),
                namespace: m.namespace.clone(),
                redirect_uri: redirect_uri.clone(),
                client_nonce,
                meta,
                created: chrono::Utc::now(),
            });
            let mut scopes = vec!["openid".to_string()];
            if let Some(Value::Array(s)) = m.config.get("OIDCScopes") {
                scopes.extend(s.iter().filter_map(|v| v.as_str().map(String::from)));
            }
            let query = serde_urlencoded::to_string([
                ("client_id", config_str(&m, "OIDCClientID")),
                ("nonce", nonce),
                ("redirect_uri", redirect_uri.clone()),
                ("response_type", "code".to_string()),
                ("scope", scopes.join(" ")),
                ("state", state),
            ])
            .unwrap_or_default();
            Ok(format!(
                "http://{host}/_sandbox/catalog/oidc/authorize?{query}"
            ))
        })?;
        Ok(json_response(&json!({"AuthURL": url}), None))
    }
    .await)
}

/// POST /v1/acl/oidc/callback
pub async fn callback(
    State(c): State<Catalog>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    run(async {
        enterprise_only(&c)?;
        if method != Method::POST {
            return Err(ApiError::new(405, format!("method {method} not allowed")));
        }
        const WHAT: &str = "Failed to decode request body";
        let obj = decode_body(&body, WHAT)?;
        let name = str_field(&obj, "AuthMethod", WHAT)?;
        let state_id = str_field(&obj, "State", WHAT)?;
        let code = str_field(&obj, "Code", WHAT)?;
        let client_nonce = str_field(&obj, "ClientNonce", WHAT)?;
        let body_ns = str_field(&obj, "Namespace", WHAT)?;
        let token = c.mutate(|st| {
            let ctx = Ctx::new(st, raw.as_deref(), &headers)?;
            let ns = ctx.namespace(st, &body_ns)?;
            super::require_local_tokens(st, &ctx.dc)?;
            let m = oidc_method(st, &name, &ns)?;
            if code.is_empty() {
                return Err(ApiError::internal("Provider login failed: OAuth code parameter not provided"));
            }
            // A state belongs to the auth method (and namespace) that issued it, and is used once.
            let pos = st
                .oidc_states
                .iter()
                .position(|s| s.state == state_id && s.auth_method == m.name && s.namespace == m.namespace)
                .ok_or_else(|| ApiError::internal("Provider login failed: Expired or missing OAuth state."))?;
            let state = st.oidc_states.remove(pos);
            if chrono::Utc::now() - state.created > chrono::Duration::minutes(10) {
                return Err(ApiError::internal("Provider login failed: Expired or missing OAuth state."));
            }
            if state.client_nonce != client_nonce {
                return Err(ApiError::internal("Provider login failed: Invalid client nonce."));
            }
            let issued = st.oidc_codes.remove(&code);
            let issued = match issued {
                Some(i) if i.client_id == config_str(&m, "OIDCClientID") && i.redirect_uri == state.redirect_uri => i,
                _ => {
                    return Err(ApiError::internal(
                        "Provider login failed: Error exchanging oidc code: oauth2: \"invalid_grant\" \"unknown or used authorization code\"",
                    ))
                }
            };
            if issued.nonce != state.nonce {
                return Err(ApiError::internal("Token verification failed: Invalid ID token nonce."));
            }
            let mut claims = st
                .oidc_users
                .get(&issued.subject)
                .map(|u| u.claims.clone())
                .unwrap_or_default();
            claims.insert("sub".into(), json!(issued.subject));
            let identity = auth::oidc_identity(&m, &claims);
            auth::login_token(st, &m, &identity, &state.meta, &ctx.dc, "token created via login")
        })?;
        let enterprise = c.lock().enterprise;
        Ok(json_response(&token.to_api(enterprise), None))
    }
    .await)
}

pub fn provider_routes() -> Router<Catalog> {
    Router::new().route("/_sandbox/catalog/oidc/authorize", get(authorize))
}

/// The emulated provider's authorization endpoint: logs the subject in and redirects back with
/// a one-time code bound to the client, redirect URI and nonce.
async fn authorize(State(c): State<Catalog>, RawQuery(raw): RawQuery) -> Response {
    let q: BTreeMap<String, String> = raw
        .as_deref()
        .and_then(|r| serde_urlencoded::from_str(r).ok())
        .unwrap_or_default();
    let (Some(redirect), Some(state)) = (q.get("redirect_uri"), q.get("state")) else {
        return (
            StatusCode::BAD_REQUEST,
            "invalid_request: redirect_uri and state are required",
        )
            .into_response();
    };
    let code = random_hex(16);
    c.mutate(|st| {
        let subject = q
            .get("subject")
            .cloned()
            .or_else(|| st.oidc_users.keys().next().cloned())
            .unwrap_or_else(|| "sandbox-user".to_string());
        st.oidc_codes.insert(
            code.clone(),
            OidcCode {
                client_id: q.get("client_id").cloned().unwrap_or_default(),
                redirect_uri: redirect.clone(),
                nonce: q.get("nonce").cloned().unwrap_or_default(),
                subject,
            },
        );
    });
    let sep = if redirect.contains('?') { '&' } else { '?' };
    let back = serde_urlencoded::to_string([("code", code.as_str()), ("state", state.as_str())])
        .unwrap_or_default();
    let mut resp = StatusCode::FOUND.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("{redirect}{sep}{back}")) {
        resp.headers_mut().insert("location", v);
    }
    resp
}
