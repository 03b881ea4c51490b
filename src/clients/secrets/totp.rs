//! Client of the secrets service's TOTP MFA methods and identity entities (spec A §2.7, §4.5).
//!
//! Results are read from the envelope's `data` only; fields a server adds (`name`, `type`,
//! `namespace_id`, `namespace_path`, `mount_accessor`) are ignored, and `null` counts as absent.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::clients::http::{ClientError, Http, SecretString};

const TOTP: &str = "/v1/identity/mfa/method/totp";

/// The settings of a TOTP method. `None` means "not given" (desired) or "not reported"
/// (observed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TotpConfig {
    /// The issuer shown in authenticator apps.
    pub issuer: String,
    /// Seconds one code is valid.
    pub period: Option<i64>,
    /// Size of the generated key, in bytes.
    pub key_size: Option<i64>,
    /// Pixel size of the QR code (0: no QR code).
    pub qr_size: Option<i64>,
    /// Hash algorithm of the codes (`SHA1`, `SHA256`, `SHA512`).
    pub algorithm: Option<String>,
    /// Number of digits of a code.
    pub digits: Option<i64>,
    /// Periods before and after the current one whose codes are accepted.
    pub skew: Option<i64>,
    /// Failed validations allowed before the entity is locked out.
    pub max_validation_attempts: Option<i64>,
}

/// A TOTP method as read from the service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TotpMethodInfo {
    /// The method's id, given by the service.
    pub id: String,
    /// The method's `name` (`method_name` on write); empty when unnamed.
    pub name: String,
    /// Its settings.
    pub config: TotpConfig,
}

/// A generated TOTP secret. `url` holds the seed: it is only ever written to a Secret.
pub struct GeneratedSecret {
    /// The `otpauth://` URL, which carries the seed.
    pub url: SecretString,
    /// The base64 PNG of the QR code, as the service sent it (empty when `qr_size` is 0).
    pub barcode: SecretString,
}

/// Calls of TOTP MFA methods and of the identity entities they are enrolled for.
#[derive(Clone, Debug)]
pub struct TotpClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for TotpClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

/// The envelope's `data` object; `Null` when absent.
fn data(body: &Value) -> &Value {
    body.get("data").unwrap_or(&Value::Null)
}

/// An integer field given as a number, a numeric string or a duration string (`30s`, `1m`).
fn int_field(d: &Value, key: &str) -> Option<i64> {
    match d.get(key)? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => s.parse::<i64>().ok().or_else(|| {
            humantime::parse_duration(s)
                .ok()
                .map(|d| d.as_secs() as i64)
        }),
        _ => None,
    }
}

fn str_field(d: &Value, key: &str) -> Option<String> {
    d.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

use crate::clients::http::encode_segment;

/// Parse a method read (`data` of `GET .../totp/:id`, or one `key_info` entry).
pub fn parse_method(id: &str, d: &Value) -> TotpMethodInfo {
    TotpMethodInfo {
        id: str_field(d, "id").unwrap_or_else(|| id.to_string()),
        name: str_field(d, "name").unwrap_or_default(),
        config: TotpConfig {
            issuer: str_field(d, "issuer").unwrap_or_default(),
            period: int_field(d, "period"),
            key_size: int_field(d, "key_size"),
            qr_size: int_field(d, "qr_size"),
            algorithm: str_field(d, "algorithm"),
            digits: int_field(d, "digits"),
            skew: int_field(d, "skew"),
            max_validation_attempts: int_field(d, "max_validation_attempts"),
        },
    }
}

/// The write body of a method: every field given, nothing else.
pub fn method_body(c: &TotpConfig) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("issuer".into(), json!(c.issuer));
    let ints = [
        ("period", c.period),
        ("key_size", c.key_size),
        ("qr_size", c.qr_size),
        ("digits", c.digits),
        ("skew", c.skew),
        ("max_validation_attempts", c.max_validation_attempts),
    ];
    for (k, v) in ints {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    if let Some(a) = &c.algorithm {
        m.insert("algorithm".into(), json!(a));
    }
    m
}

impl TotpClient {
    /// The Connection and address a search for lost responses is scoped to
    /// ([`crate::reconcile::lost`]).
    pub fn lost_scope(&self) -> String {
        format!("{} {}", self.http.connection(), self.http.base_url())
    }

    /// Read a TOTP method by id; `None` when the service has none with that id.
    pub async fn read_totp(&self, id: &str) -> Result<Option<TotpMethodInfo>, ClientError> {
        match self
            .http
            .call("GET", &format!("{TOTP}/{}", encode_segment(id)), None)
            .await
        {
            Ok(resp) => {
                let d = data(&resp.body);
                if d.is_null() {
                    return Ok(None);
                }
                Ok(Some(parse_method(id, d)))
            }
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `LIST` the TOTP methods: their ids, with the settings when the server sends `key_info`.
    pub async fn list_totp(&self) -> Result<Vec<(String, Option<TotpMethodInfo>)>, ClientError> {
        match self.http.call("LIST", TOTP, None).await {
            Ok(resp) => {
                let d = data(&resp.body);
                let info = d.get("key_info");
                Ok(d.get("keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(|id| {
                                let parsed = info
                                    .and_then(|i| i.get(id))
                                    .filter(|v| v.is_object())
                                    .map(|v| parse_method(id, v));
                                (id.to_string(), parsed)
                            })
                            .collect()
                    })
                    .unwrap_or_default())
            }
            Err(e) if e.status() == Some(404) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Create a method (`POST .../totp`); returns the id the service assigned. `name` is sent as
    /// `method_name` (unique in the service) when given.
    pub async fn create_totp(
        &self,
        c: &TotpConfig,
        name: Option<&str>,
    ) -> Result<String, ClientError> {
        let mut body = method_body(c);
        if let Some(n) = name {
            body.insert("method_name".into(), json!(n));
        }
        let resp = self
            .http
            .call("POST", TOTP, Some(&Value::Object(body)))
            .await?;
        str_field(data(&resp.body), "method_id")
            .or_else(|| str_field(data(&resp.body), "id"))
            .ok_or_else(|| ClientError::Decode {
                service: self.http.service(),
                detail: "the create response has no data.method_id".into(),
            })
    }

    /// Replace the settings of method `id` (`POST .../totp/:id`; a POST to the collection with
    /// a `method_id` would create a new method on some servers).
    pub async fn update_totp(&self, id: &str, c: &TotpConfig) -> Result<(), ClientError> {
        self.http
            .call(
                "POST",
                &format!("{TOTP}/{}", encode_segment(id)),
                Some(&Value::Object(method_body(c))),
            )
            .await
            .map(|_| ())
    }

    /// Delete method `id`; an absent method counts as deleted.
    pub async fn delete_totp(&self, id: &str) -> Result<(), ClientError> {
        match self
            .http
            .call("DELETE", &format!("{TOTP}/{}", encode_segment(id)), None)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `admin-generate`: a new secret for `entity_id`. `None` when the entity already holds one
    /// for the method (the service then answers with a warning and no data).
    pub async fn admin_generate(
        &self,
        method_id: &str,
        entity_id: &str,
    ) -> Result<Option<GeneratedSecret>, ClientError> {
        let resp = self
            .http
            .call(
                "POST",
                &format!("{TOTP}/admin-generate"),
                Some(&json!({"method_id": method_id, "entity_id": entity_id})),
            )
            .await?;
        let d = data(&resp.body);
        let Some(url) = d
            .get("url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
        else {
            return Ok(None);
        };
        Ok(Some(GeneratedSecret {
            url: SecretString::new(url),
            barcode: SecretString::new(d.get("barcode").and_then(Value::as_str).unwrap_or("")),
        }))
    }

    /// `admin-destroy`: remove the entity's secret for the method (idempotent).
    pub async fn admin_destroy(&self, method_id: &str, entity_id: &str) -> Result<(), ClientError> {
        self.http
            .call(
                "POST",
                &format!("{TOTP}/admin-destroy"),
                Some(&json!({"method_id": method_id, "entity_id": entity_id})),
            )
            .await
            .map(|_| ())
    }

    /// The id of the entity named `name`; `None` when there is none.
    pub async fn entity_id_by_name(&self, name: &str) -> Result<Option<String>, ClientError> {
        match self
            .http
            .call(
                "GET",
                &format!("/v1/identity/entity/name/{}", encode_segment(name)),
                None,
            )
            .await
        {
            Ok(resp) => Ok(str_field(data(&resp.body), "id")),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether entity `id` exists.
    pub async fn entity_exists(&self, id: &str) -> Result<bool, ClientError> {
        match self
            .http
            .call(
                "GET",
                &format!("/v1/identity/entity/id/{}", encode_segment(id)),
                None,
            )
            .await
        {
            Ok(resp) => Ok(!data(&resp.body).is_null()),
            Err(e) if e.status() == Some(404) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_with_extra_server_fields_and_nulls_parses_to_the_settings() {
        let d = json!({
            "id": "abc", "name": "", "type": "totp", "namespace_id": "root", "namespace_path": "",
            "issuer": "Acme", "period": 30, "key_size": 20, "qr_size": 200, "algorithm": "SHA256",
            "digits": 8, "skew": 0, "max_validation_attempts": null
        });
        let m = parse_method("abc", &d);
        assert_eq!(m.config.issuer, "Acme");
        assert_eq!(m.config.algorithm.as_deref(), Some("SHA256"));
        assert_eq!(m.config.digits, Some(8));
        assert_eq!(m.config.skew, Some(0));
        assert_eq!(m.config.max_validation_attempts, None);
        assert_eq!(m.name, "");
    }

    #[test]
    fn a_period_given_as_a_duration_string_is_read_in_seconds() {
        assert_eq!(int_field(&json!({"period": "1m"}), "period"), Some(60));
        assert_eq!(int_field(&json!({"period": "45"}), "period"), Some(45));
    }

    #[test]
    fn the_write_body_carries_only_given_fields() {
        let c = TotpConfig {
            issuer: "Acme".into(),
            digits: Some(8),
            ..Default::default()
        };
        let b = method_body(&c);
        assert_eq!(Value::Object(b), json!({"issuer": "Acme", "digits": 8}));
    }
}
