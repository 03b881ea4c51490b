//! DR replication endpoints of the secrets service (`/v1/sys/replication/dr/...`, spec A §4.6).
//!
//! Results are read from the envelope's `data` only. On a DR secondary the `secondary/`
//! endpoints authorize with `dr_operation_token` in the body, not with the token header (which
//! is sent anyway and ignored).

use std::sync::Arc;

use serde_json::{json, Value};

use crate::clients::http::{ClientError, Http};

const DR: &str = "/v1/sys/replication/dr";

/// Calls of DR replication (`/v1/sys/replication/dr/...`) on one cluster.
#[derive(Clone, Debug)]
pub struct DrClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for DrClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

/// An operation-token generation attempt (spec A §2.9).
#[derive(Clone, Debug, Default)]
pub struct Attempt {
    /// `true` while an attempt is in progress.
    pub started: bool,
    /// The attempt's nonce, which every key share sent must carry.
    pub nonce: String,
    /// Key shares received so far.
    pub progress: u32,
    /// Key shares needed to complete.
    pub required: u32,
    /// `true` once enough shares arrived and the token was generated.
    pub complete: bool,
    /// The generated token, encoded (XORed with the OTP or encrypted to the PGP key).
    pub encoded_token: String,
    /// Only in the answer that started the attempt without a PGP key.
    pub otp: String,
}

impl Attempt {
    fn from(data: &Value) -> Self {
        let s = |k: &str| data[k].as_str().unwrap_or_default().to_string();
        let n = |k: &str| data[k].as_u64().unwrap_or(0) as u32;
        Self {
            started: data["started"].as_bool().unwrap_or(false),
            nonce: s("nonce"),
            progress: n("progress"),
            required: n("required"),
            complete: data["complete"].as_bool().unwrap_or(false),
            encoded_token: s("encoded_token"),
            otp: s("otp"),
        }
    }
}

impl DrClient {
    async fn write(&self, path: &str, body: Value) -> Result<Value, ClientError> {
        let r = self
            .http
            .call("POST", &format!("{DR}/{path}"), Some(&body))
            .await?;
        Ok(r.body)
    }

    /// The unauthenticated DR status of this cluster (`data`).
    pub async fn status(&self) -> Result<Value, ClientError> {
        let r = self.http.call("GET", &format!("{DR}/status"), None).await?;
        Ok(r.body["data"].clone())
    }

    /// Makes this cluster the DR primary, advertising `cluster_addr` when given.
    pub async fn primary_enable(&self, cluster_addr: Option<&str>) -> Result<(), ClientError> {
        let mut body = json!({});
        if let Some(a) = cluster_addr {
            body["primary_cluster_addr"] = json!(a);
        }
        self.write("primary/enable", body).await.map(|_| ())
    }

    /// Demotes this primary to a secondary that no longer replicates.
    pub async fn primary_demote(&self) -> Result<(), ClientError> {
        self.write("primary/demote", json!({})).await.map(|_| ())
    }

    /// A wrapped activation token for secondary `id` (default TTL).
    pub async fn secondary_token(&self, id: &str) -> Result<String, ClientError> {
        let body = self
            .write("primary/secondary-token", json!({ "id": id }))
            .await?;
        body["wrap_info"]["token"]
            .as_str()
            .or_else(|| body["data"]["token"].as_str())
            .map(str::to_string)
            .ok_or_else(|| ClientError::Decode {
                service: crate::api::Service::Secrets,
                detail: "secondary-token answered without a token".into(),
            })
    }

    /// Revokes secondary `id`'s activation: it stops replicating from this primary.
    pub async fn revoke_secondary(&self, id: &str) -> Result<(), ClientError> {
        self.write("primary/revoke-secondary", json!({ "id": id }))
            .await
            .map(|_| ())
    }

    /// Makes this cluster a DR secondary with the activation `token` from the primary.
    pub async fn secondary_enable(
        &self,
        token: &str,
        primary_api_addr: Option<&str>,
        ca_pem: Option<&str>,
    ) -> Result<(), ClientError> {
        let mut body = json!({ "token": token });
        if let Some(a) = primary_api_addr {
            body["primary_api_addr"] = json!(a);
        }
        if let Some(ca) = ca_pem {
            body["ca_file"] = json!(ca);
        }
        self.write("secondary/enable", body).await.map(|_| ())
    }

    /// The current operation-token generation attempt, started or not.
    pub async fn attempt(&self) -> Result<Attempt, ClientError> {
        let r = self
            .http
            .call(
                "GET",
                &format!("{DR}/secondary/generate-operation-token/attempt"),
                None,
            )
            .await?;
        Ok(Attempt::from(&r.body["data"]))
    }

    /// Start an attempt; with `pgp_key` the token is encrypted to it, otherwise the answer
    /// carries the one-time password.
    pub async fn attempt_start(&self, pgp_key: Option<&str>) -> Result<Attempt, ClientError> {
        let body = match pgp_key {
            Some(k) => json!({ "pgp_key": k }),
            None => json!({}),
        };
        let r = self
            .write("secondary/generate-operation-token/attempt", body)
            .await?;
        Ok(Attempt::from(&r["data"]))
    }

    /// Start an attempt with a one-time password chosen by the caller (kept before the attempt
    /// exists, so a caller that stops right after the start can still decode the token).
    pub async fn attempt_start_with_otp(&self, otp: &str) -> Result<Attempt, ClientError> {
        let r = self
            .write(
                "secondary/generate-operation-token/attempt",
                json!({ "otp": otp }),
            )
            .await?;
        Ok(Attempt::from(&r["data"]))
    }

    /// Cancels the running operation-token generation attempt.
    pub async fn attempt_cancel(&self) -> Result<(), ClientError> {
        self.http
            .call(
                "DELETE",
                &format!("{DR}/secondary/generate-operation-token/attempt"),
                None,
            )
            .await
            .map(|_| ())
    }

    /// Sends one key share (`key`) to the attempt `nonce`; returns the attempt after it.
    pub async fn attempt_update(&self, key: &str, nonce: &str) -> Result<Attempt, ClientError> {
        let r = self
            .write(
                "secondary/generate-operation-token/update",
                json!({ "key": key, "nonce": nonce }),
            )
            .await?;
        Ok(Attempt::from(&r["data"]))
    }

    /// Promotes this secondary to primary with a DR operation token (`force`: even when unsafe).
    pub async fn promote(
        &self,
        op_token: &str,
        force: bool,
        cluster_addr: Option<&str>,
    ) -> Result<(), ClientError> {
        let mut body = json!({ "dr_operation_token": op_token, "force": force });
        if let Some(a) = cluster_addr {
            body["primary_cluster_addr"] = json!(a);
        }
        self.write("secondary/promote", body).await.map(|_| ())
    }

    /// Points this secondary at a new primary with a fresh activation `token`.
    pub async fn update_primary(
        &self,
        op_token: &str,
        token: &str,
        primary_api_addr: Option<&str>,
    ) -> Result<(), ClientError> {
        let mut body = json!({ "dr_operation_token": op_token, "token": token });
        if let Some(a) = primary_api_addr {
            body["primary_api_addr"] = json!(a);
        }
        self.write("secondary/update-primary", body)
            .await
            .map(|_| ())
    }

    /// Revokes a DR operation token.
    pub async fn operation_token_delete(&self, op_token: &str) -> Result<(), ClientError> {
        self.write(
            "secondary/operation-token/delete",
            json!({ "dr_operation_token": op_token }),
        )
        .await
        .map(|_| ())
    }

    /// Starts a reindex of this secondary; returns the service's warnings.
    pub async fn reindex(&self, op_token: &str) -> Result<Vec<String>, ClientError> {
        let body = self
            .write(
                "secondary/reindex",
                json!({ "dr_operation_token": op_token }),
            )
            .await?;
        Ok(body["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect())
    }

    /// The Merkle corruption report (`data.merkle_corruption_report`).
    pub async fn merkle_check(&self, op_token: &str) -> Result<Value, ClientError> {
        let body = self
            .write(
                "secondary/merkle-check",
                json!({ "dr_operation_token": op_token }),
            )
            .await?;
        Ok(body["data"]["merkle_corruption_report"].clone())
    }
}
