//! What kube-apiserver's registry validates in the own fields of the built-in kinds an operator
//! writes (`pkg/apis/core/validation`'s `ValidateSecret`, `pkg/apis/coordination/validation`'s
//! `ValidateLeaseSpec`), with the real field paths and messages, so a Secret or Lease a real
//! cluster refuses is refused here first.

use base64::Engine;
use serde_json::{json, Value};

use super::schema::FieldError;

/// `core.MaxSecretSize`: the data's decoded bytes together.
const MAX_SECRET_SIZE: i64 = 1024 * 1024;

/// apimachinery's `IsConfigMapKey`: the key of a Secret's or ConfigMap's data.
pub fn config_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let charset = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if key.is_empty() || !key.chars().all(charset) {
        errs.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string());
    }
    match key {
        "." => errs.push("must not be '.'".to_string()),
        ".." => errs.push("must not be '..'".to_string()),
        k if k.starts_with("..") => errs.push("must not start with '..'".to_string()),
        _ => {}
    }
    errs
}

/// `ValidateSecret` on a Secret whose `stringData` is already folded into `data`: every key a
/// config key, at most 1 MiB of data, and what each well-known type requires. (A malformed
/// docker config is refused as on a real server, but with serde's words for what is wrong where
/// Go's JSON decoder has its own.)
pub fn secret_errors(secret: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = serde_json::Map::new();
    let data = secret["data"].as_object().unwrap_or(&empty);
    let decoded = |k: &str| {
        data.get(k)
            .and_then(Value::as_str)
            .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
    };
    let mut size = 0;
    for key in data.keys() {
        for msg in config_key_errors(key) {
            errs.push(FieldError::invalid(
                format!("data[{key}]"),
                &json!(key),
                &msg,
            ));
        }
        size += decoded(key).map_or(0, |v| v.len() as i64);
    }
    if size > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long("data", MAX_SECRET_SIZE));
    }
    let required = |path: &str| FieldError::required(path, "");
    match secret["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let name = &secret["metadata"]["annotations"]["kubernetes.io/service-account.name"];
            if name.as_str().is_none_or(str::is_empty) {
                errs.push(required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                ));
            }
        }
        t @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let key = if t == "kubernetes.io/dockercfg" {
                ".dockercfg"
            } else {
                ".dockerconfigjson"
            };
            match decoded(key) {
                None if !data.contains_key(key) => errs.push(required(&format!("data[{key}]"))),
                bytes => {
                    let parsed = serde_json::from_slice::<serde_json::Map<String, Value>>(
                        &bytes.unwrap_or_default(),
                    );
                    if let Err(e) = parsed {
                        errs.push(FieldError::invalid(
                            format!("data[{key}]"),
                            &json!("<secret contents redacted>"),
                            &e.to_string(),
                        ));
                    }
                }
            }
        }
        // kube builds these two paths from the literal "data[%s]".
        "kubernetes.io/basic-auth"
            if !data.contains_key("username") && !data.contains_key("password") =>
        {
            errs.push(required("data[%s][username]"));
            errs.push(required("data[%s][password]"));
        }
        "kubernetes.io/ssh-auth" if decoded("ssh-privatekey").is_none_or(|v| v.is_empty()) => {
            errs.push(required("data[%s][ssh-privatekey]"));
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !data.contains_key(key) {
                    errs.push(required(&format!("data[{key}]")));
                }
            }
        }
        _ => {}
    }
    errs
}

/// `ValidateLeaseSpec` (a leader election's writes): a positive duration, no negative
/// transition count, a known strategy (a `prefix/name` one is taken as written), and a
/// preferred holder only with a strategy.
pub fn lease_errors(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(d) = spec["leaseDurationSeconds"].as_i64().filter(|d| *d <= 0) {
        errs.push(FieldError::invalid(
            "spec.leaseDurationSeconds",
            &json!(d),
            "must be greater than 0",
        ));
    }
    if let Some(t) = spec["leaseTransitions"].as_i64().filter(|t| *t < 0) {
        errs.push(FieldError::invalid(
            "spec.leaseTransitions",
            &json!(t),
            "must be greater than or equal to 0",
        ));
    }
    let strategy = spec["strategy"].as_str();
    if let Some(s) = strategy.filter(|s| !s.contains('/') && *s != "OldestEmulationVersion") {
        errs.push(FieldError::not_supported(
            "spec.strategy",
            &json!(s),
            &["OldestEmulationVersion".to_string()],
        ));
    }
    if spec["preferredHolder"]
        .as_str()
        .is_some_and(|h| !h.is_empty())
        && strategy.is_none_or(str::is_empty)
    {
        errs.push(FieldError::forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keys_are_checked_as_apimachinery_checks_them() {
        assert!(config_key_errors("tls.crt").is_empty());
        assert!(config_key_errors("KEY_name-1").is_empty());
        assert_eq!(config_key_errors("a b").len(), 1);
        assert_eq!(
            config_key_errors(".."),
            vec!["must not be '..'".to_string()]
        );
        assert_eq!(config_key_errors("..a").len(), 1);
        assert_eq!(config_key_errors(&"k".repeat(254)).len(), 1);
        assert_eq!(config_key_errors("").len(), 1);
    }
}
