//! Client of the catalog's ACL API (spec C §4.3), `/v1/acl/...` with the Connection's token
//! header (`X-Catalog-Token` by default).

use std::sync::Arc;

use serde_json::{json, Value};

use super::http::{ClientError, Http};

/// Calls of the catalog's ACL API: bootstrap, tokens, login and logout, replication status.
#[derive(Clone, Debug)]
pub struct CatalogClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for CatalogClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

use crate::clients::http::encode_segment as encode;

impl CatalogClient {
    /// The Connection and address a search for lost responses is scoped to
    /// ([`crate::reconcile::lost`]).
    pub fn lost_scope(&self) -> String {
        format!("{} {}", self.http.connection(), self.http.base_url())
    }

    /// `PUT /v1/acl/bootstrap` with the operator-generated `BootstrapSecret`: the management
    /// token (`AccessorID`, `SecretID`). 403 when the ACL system was already bootstrapped.
    pub async fn bootstrap(&self, secret: &str) -> Result<Value, ClientError> {
        Ok(self
            .http
            .call(
                "PUT",
                "/v1/acl/bootstrap",
                Some(&json!({ "BootstrapSecret": secret })),
            )
            .await?
            .body)
    }

    /// `GET /v1/acl/token/self`: the caller's own token; 403 `ACL not found` when the catalog
    /// does not know it.
    pub async fn token_self(&self) -> Result<Value, ClientError> {
        Ok(self
            .http
            .call("GET", "/v1/acl/token/self", None)
            .await?
            .body)
    }

    /// `POST /v1/acl/login`: a token for the auth method's identity (`AccessorID`, `SecretID`).
    pub async fn login(
        &self,
        auth_method: &str,
        bearer: &str,
        namespace: Option<&str>,
        meta: &std::collections::BTreeMap<String, String>,
    ) -> Result<Value, ClientError> {
        let mut body = json!({"AuthMethod": auth_method, "BearerToken": bearer});
        if let Some(ns) = namespace {
            body["Namespace"] = json!(ns);
        }
        if !meta.is_empty() {
            body["Meta"] = json!(meta);
        }
        Ok(self
            .http
            .call("POST", "/v1/acl/login", Some(&body))
            .await?
            .body)
    }

    /// `GET /v1/acl/tokens?authmethod=`: the stubs of the tokens an auth method's logins made
    /// (`AccessorID`, `Description`, ...; never a `SecretID`). Needs `acl:read`.
    pub async fn tokens_of(&self, auth_method: &str) -> Result<Vec<Value>, ClientError> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("authmethod", auth_method)
            .finish();
        let body = self
            .http
            .call("GET", &format!("/v1/acl/tokens?{query}"), None)
            .await?
            .body;
        Ok(body.as_array().cloned().unwrap_or_default())
    }

    /// `DELETE /v1/acl/token/:accessor`: destroy a token by its accessor. Needs `acl:write`.
    pub async fn delete_token(&self, accessor: &str) -> Result<(), ClientError> {
        self.http
            .call("DELETE", &format!("/v1/acl/token/{accessor}"), None)
            .await
            .map(|_| ())
    }

    /// `POST /v1/acl/logout`: destroy the caller's own (login) token.
    pub async fn logout(&self) -> Result<(), ClientError> {
        self.http
            .call("POST", "/v1/acl/logout", None)
            .await
            .map(|_| ())
    }

    /// `GET /v1/acl/replication?dc=...`: the datacenter's ACL replication status.
    /// The index (`X-Consul-Index`) of an ACL list on the agent's datacenter: `policies` (what
    /// `ReplicatedIndex` counts) or `tokens` (`ReplicatedTokenIndex`). Needs `acl:read`.
    pub async fn acl_list_index(&self, list: &str) -> Result<Option<u64>, ClientError> {
        Ok(self
            .http
            .call("GET", &format!("/v1/acl/{list}"), None)
            .await?
            .index)
    }

    /// `GET /v1/acl/replication` of datacenter `dc`: the ACL replication status as the service
    /// sends it.
    pub async fn replication(&self, dc: &str) -> Result<Value, ClientError> {
        Ok(self
            .http
            .call(
                "GET",
                &format!("/v1/acl/replication?dc={}", encode(dc)),
                None,
            )
            .await?
            .body)
    }
}

/// The reset index of a bootstrap 403 (`... ACL bootstrap no longer allowed (reset index: N)`),
/// found anywhere in the message: a follower prefixes the leader's error with `rpc error making
/// call: `.
pub fn reset_index(message: &str) -> Option<u64> {
    let at = message.find("reset index: ")? + "reset index: ".len();
    let digits: String = message[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_index_is_found_with_or_without_the_follower_prefix() {
        assert_eq!(
            reset_index("Permission denied: ACL bootstrap no longer allowed (reset index: 12)"),
            Some(12)
        );
        assert_eq!(
            reset_index("Permission denied: rpc error making call: ACL bootstrap no longer allowed (reset index: 7)"),
            Some(7)
        );
        assert_eq!(reset_index("Permission denied"), None);
    }
}
