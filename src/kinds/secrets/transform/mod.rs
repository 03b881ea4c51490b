//! The transform engine's kinds (spec C §4.1): one file per kind, helpers shared here.

pub mod alphabet;
pub mod role;
pub mod store;
pub mod template;
pub mod transformation;

use serde_json::Value;

use crate::clients::secrets::transform::{TransformClient, TransformError};
use crate::clients::ClientError;
use crate::reconcile::{Error, Result};

/// A client error as a reconcile error: no engine at the mount is terminal (`Unsupported`).
pub fn err(e: TransformError) -> Error {
    match e {
        e @ TransformError::Unsupported { .. } => Error::Unsupported(e.to_string()),
        TransformError::Client(c) => Error::Remote(c),
    }
}

/// A refused delete. The engine refuses to delete what is still in use (a transformation listed
/// by a role, a template or store used by a transformation, an alphabet used by a template):
/// that resolves itself when the users go, so it is retried with backoff ([`Error::InUse`], not
/// a rejection that waits for the resync) and shown as `DeletionBlocked` (reason `InUse`) with
/// the service's message.
pub fn delete_err(e: TransformError) -> Error {
    match e {
        TransformError::Client(ClientError::Status {
            status: 400,
            ref message,
            ..
        }) if message.contains("in use") => Error::InUse(message.clone()),
        e => err(e),
    }
}

/// Sets compare without order or duplicates.
pub fn same_set(a: &[String], b: &[String]) -> bool {
    let mut a: Vec<&String> = a.iter().collect();
    let mut b: Vec<&String> = b.iter().collect();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    a == b
}

/// Strings of a JSON array (absent or `null`: empty).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The string at key `k` of a response's `data`, or empty when absent or not a string.
pub fn text(d: &Value, k: &str) -> String {
    d.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A duration in seconds: Go syntax (`1h30m`, `90s`, `1.5h`) or a bare number of seconds.
pub fn parse_duration(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return Some(0);
    }
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * mult;
        rest = &rest[unit_end..];
    }
    Some(total.round() as i64)
}

/// A duration field of a spec (`24h`, `"3600"` or `3600`) in seconds; `what` names it in the
/// error.
pub fn spec_seconds(
    v: &Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    what: &str,
) -> Result<Option<i64>> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match v {
        None => Ok(None),
        Some(IntOrString::Int(i)) if *i >= 0 => Ok(Some(i64::from(*i))),
        Some(IntOrString::String(s)) if parse_duration(s).is_some_and(|n| n >= 0) => {
            Ok(parse_duration(s))
        }
        Some(other) => Err(Error::InvalidSpec(format!(
            "{what} {other:?} is not a duration (e.g. 24h, 90m, or a number of seconds)"
        ))),
    }
}

/// A duration as the service returns it: a number of seconds, or a duration string.
pub fn value_seconds(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or_default(),
        Some(Value::String(s)) => parse_duration(s).unwrap_or_default(),
        _ => 0,
    }
}

/// The named objects (of `kind`, e.g. `template`) that do not exist in the mount, skipping the
/// service's own `builtin/` ones.
pub async fn missing(
    client: &TransformClient,
    mount: &str,
    kind: &str,
    names: &[String],
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for n in names {
        if n.is_empty() || n.starts_with("builtin/") {
            continue;
        }
        if client.read(mount, kind, n).await.map_err(err)?.is_none() {
            out.push(n.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_normalised_to_seconds() {
        assert_eq!(parse_duration("1h"), Some(3600));
        assert_eq!(parse_duration("3600"), Some(3600));
        assert_eq!(parse_duration("1h30m"), Some(5400));
        assert_eq!(parse_duration("90s"), Some(90));
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration("1.5h"), Some(5400));
        assert_eq!(parse_duration("abc"), None);
    }

    #[test]
    fn spec_durations_are_seconds_or_duration_strings() {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        assert_eq!(
            spec_seconds(&Some(IntOrString::Int(90)), "x").unwrap(),
            Some(90)
        );
        assert_eq!(
            spec_seconds(&Some(IntOrString::String("2h".into())), "x").unwrap(),
            Some(7200)
        );
        assert_eq!(spec_seconds(&None, "x").unwrap(), None);
        assert!(spec_seconds(&Some(IntOrString::String("soon".into())), "x").is_err());
        assert!(spec_seconds(&Some(IntOrString::Int(-1)), "x").is_err());
    }

    #[test]
    fn sets_ignore_order_and_duplicates() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(same_set(&s(&["a", "b"]), &s(&["b", "a", "a"])));
        assert!(!same_set(&s(&["a"]), &s(&["a", "b"])));
    }
}
