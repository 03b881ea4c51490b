//! Wire helpers shared by the scheduler's handlers: Go-style JSON decoding, plain-text errors,
//! index headers and blocking-query parameters, all as the real scheduler (Nomad) does them.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// An error answered the way the real service does: a status code and a plain-text body.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{msg}")]
pub struct ApiError {
    pub status: u16,
    pub msg: String,
}

impl ApiError {
    pub fn new(status: u16, msg: impl Into<String>) -> Self {
        Self {
            status,
            msg: msg.into(),
        }
    }
    /// Errors the real server returns from its RPC layer without a code: 500.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(500, msg)
    }
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, msg)
    }
    pub fn permission_denied() -> Self {
        Self::new(403, "Permission denied")
    }
    pub fn invalid_method() -> Self {
        Self::new(405, "Invalid method")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, self.msg).into_response();
        resp.headers_mut().insert(
            "content-type",
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        resp
    }
}

/// A JSON response with the scheduler's index headers. `query_meta` adds the headers a read
/// (blocking query) answers with: known leader and last contact.
/// A read of one object: 404 `<what> not found` when there is none (as the real server
/// words it), else the object with its index headers.
pub fn found(value: &Value, index: u64, what: &str) -> Result<Response, ApiError> {
    if value.is_null() {
        return Err(ApiError::new(404, format!("{what} not found")));
    }
    Ok(json_response(value, Some(index), true))
}

pub fn json_response(value: &Value, index: Option<u64>, query_meta: bool) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    if let Some(i) = index {
        // The real server never reports index 0 (it would make clients busy-loop).
        let i = i.max(1);
        h.insert("x-nomad-index", HeaderValue::from(i));
        h.insert("x-scheduler-index", HeaderValue::from(i));
    }
    if query_meta {
        h.insert("x-nomad-knownleader", HeaderValue::from_static("true"));
        h.insert("x-nomad-lastcontact", HeaderValue::from_static("0"));
    }
    resp
}

/// The token of a request. The real scheduler reads `X-Nomad-Token`, then `Authorization:
/// Bearer`; the sandbox also takes the renamed `X-Scheduler-Token` (spec C §5 leaves the
/// presentation "not shown", so both names are accepted).
pub fn request_token(headers: &HeaderMap) -> Option<String> {
    for name in ["x-nomad-token", "x-scheduler-token"] {
        if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok()) {
            if !v.is_empty() {
                return Some(v.to_string());
            }
        }
    }
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok())?;
    let (scheme, rest) = auth.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") && !rest.trim().is_empty() {
        return Some(rest.trim().to_string());
    }
    None
}

/// Decode a request body the way Go's `encoding/json` does into a struct: an object whose keys
/// match field names case-insensitively. An empty body is "Request body is empty" (Nomad's
/// `decodeBody`).
pub fn decode_object(body: &[u8], go_type: &str) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::bad_request("Request body is empty"));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(go_json_syntax_error(&e)))?;
    match value {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        other => Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type {go_type}",
            go_kind(&other)
        ))),
    }
}

fn go_json_syntax_error(e: &serde_json::Error) -> String {
    if e.is_eof() {
        "unexpected EOF".to_string()
    } else {
        format!("invalid character in JSON input: {e}")
    }
}

pub fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A field looked up the way Go does: exact name first, then case-insensitively.
pub fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

fn type_error(go_struct: &str, name: &str, v: &Value, go_type: &str) -> ApiError {
    ApiError::bad_request(format!(
        "json: cannot unmarshal {} into Go struct field {go_struct}.{name} of type {go_type}",
        go_kind(v)
    ))
}

pub fn get_string(
    obj: &Map<String, Value>,
    go_struct: &str,
    name: &str,
) -> Result<String, ApiError> {
    match field(obj, name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(type_error(go_struct, name, v, "string")),
    }
}

pub fn get_bool(obj: &Map<String, Value>, go_struct: &str, name: &str) -> Result<bool, ApiError> {
    match field(obj, name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(type_error(go_struct, name, v, "bool")),
    }
}

pub fn get_string_list(
    obj: &Map<String, Value>,
    go_struct: &str,
    name: &str,
) -> Result<Vec<String>, ApiError> {
    match field(obj, name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                Value::Null => Ok(String::new()),
                v => Err(type_error(go_struct, name, v, "string")),
            })
            .collect(),
        Some(v) => Err(type_error(go_struct, name, v, "[]string")),
    }
}

/// Parse a Go duration (`300ms`, `5s`, `1m30s`, `1h`), as `time.ParseDuration` does.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let mut rest = s.trim();
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return None;
    }
    rest = rest.strip_prefix('+').unwrap_or(rest);
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let secs = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * secs;
    }
    Some(Duration::from_secs_f64(total))
}

/// Blocking-query options of a read: `index` (wait until the result index is greater) and
/// `wait` (how long at most). As the real server's `blockingRPC`: the wait defaults to and is
/// capped at 300 s (`maxQueryTime`), then up to 1/16 of it is added as jitter
/// (`RandomStagger(wait / JitterFraction)`).
#[derive(Debug, Clone, Copy)]
pub struct BlockingOpts {
    pub min_index: u64,
    pub wait: Duration,
}

pub const DEFAULT_QUERY_TIME: Duration = Duration::from_secs(300);
pub const MAX_QUERY_TIME: Duration = Duration::from_secs(300);
pub const JITTER_FRACTION: u32 = 16;

pub fn blocking_opts(query: &[(String, String)]) -> Result<BlockingOpts, ApiError> {
    let mut opts = BlockingOpts {
        min_index: 0,
        wait: DEFAULT_QUERY_TIME,
    };
    if let Some(w) = query_get(query, "wait").filter(|w| !w.is_empty()) {
        let d = parse_go_duration(w).ok_or_else(|| ApiError::bad_request("Invalid wait time"))?;
        opts.wait = if d.is_zero() {
            DEFAULT_QUERY_TIME
        } else {
            d.min(MAX_QUERY_TIME)
        };
    }
    let max_jitter = opts.wait / JITTER_FRACTION;
    if !max_jitter.is_zero() {
        let j = rand::random_range(0..max_jitter.as_nanos().max(1) as u64);
        opts.wait += Duration::from_nanos(j);
    }
    if let Some(i) = query_get(query, "index").filter(|i| !i.is_empty()) {
        opts.min_index = i
            .parse()
            .map_err(|_| ApiError::bad_request("Invalid index"))?;
    }
    Ok(opts)
}

pub fn query_get<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

pub fn parse_query(raw: Option<&str>) -> Vec<(String, String)> {
    raw.and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .unwrap_or_default()
}

/// Go's `encoding/hex` invalid-byte message (`%#U`).
fn hex_invalid_byte(c: char) -> String {
    format!("encoding/hex: invalid byte: U+{:04X} '{}'", c as u32, c)
}

/// The checks of go-memdb's UUID index on an ID or ID prefix, with its error texts. `full`
/// demands a complete 36-character UUID (lookups by ID); prefixes must have an even number of
/// hex characters because they are decoded to bytes.
pub fn check_uuid_index(s: &str, full: bool) -> Result<(), String> {
    let l = s.chars().count();
    if full && l != 36 {
        return Err("UUID must be 36 characters".into());
    } else if l > 36 {
        return Err(format!(
            "Invalid UUID length. UUID have 36 characters; got {l}"
        ));
    }
    let hyphens = s.matches('-').count();
    if hyphens > 4 {
        return Err(format!(
            "UUID should have maximum of 4 \"-\"; got {hyphens}"
        ));
    }
    let sanitized: String = s.chars().filter(|c| *c != '-').collect();
    if !sanitized.len().is_multiple_of(2) {
        return Err("Input (without hyphens) must be even length".into());
    }
    if let Some(c) = sanitized.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(format!("Invalid UUID: {}", hex_invalid_byte(c)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("5"), None);
        assert_eq!(parse_go_duration("abc"), None);
    }

    #[test]
    fn uuid_prefix_rules() {
        assert!(check_uuid_index("ab", false).is_ok());
        assert_eq!(
            check_uuid_index("abc", false).unwrap_err(),
            "Input (without hyphens) must be even length"
        );
        assert!(check_uuid_index("zz", false)
            .unwrap_err()
            .contains("invalid byte: U+007A 'z'"));
        assert_eq!(
            check_uuid_index("abcd1234", true).unwrap_err(),
            "UUID must be 36 characters"
        );
    }
}
