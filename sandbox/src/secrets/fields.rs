//! Request field decoding with the real service's weak typing.
//!
//! The real service decodes fields leniently (Go `mapstructure` weak decoding): strings are
//! accepted for numbers and booleans, numbers for strings, a comma-delimited string for a list,
//! and durations as integer seconds or Go duration strings (`"1h30m"`, `"30s"`, also `"2d"`).
//! Errors are worded `error converting input X for field "Y": ...` and answered with 400.

use serde_json::{Map, Value};

use super::http::ApiError;

pub type Data = Map<String, Value>;

fn conv_err(field: &str, v: &Value, why: impl std::fmt::Display) -> ApiError {
    let shown = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    ApiError::bad_request(format!(
        "error converting input {shown} for field \"{field}\": {why}"
    ))
}

fn present<'a>(d: &'a Data, k: &str) -> Option<&'a Value> {
    match d.get(k) {
        None | Some(Value::Null) => None,
        Some(v) => Some(v),
    }
}

pub fn has(d: &Data, k: &str) -> bool {
    present(d, k).is_some()
}

pub fn string(d: &Data, k: &str) -> Result<Option<String>, ApiError> {
    let Some(v) = present(d, k) else {
        return Ok(None);
    };
    match v {
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(if *b { "1".into() } else { "0".into() })),
        other => Err(conv_err(k, other, "expected type 'string'")),
    }
}

pub fn string_or(d: &Data, k: &str, default: &str) -> Result<String, ApiError> {
    Ok(string(d, k)?.unwrap_or_else(|| default.to_string()))
}

pub fn boolean(d: &Data, k: &str) -> Result<Option<bool>, ApiError> {
    let Some(v) = present(d, k) else {
        return Ok(None);
    };
    match v {
        Value::Bool(b) => Ok(Some(*b)),
        Value::Number(n) => Ok(Some(n.as_f64().unwrap_or(0.0) != 0.0)),
        Value::String(s) => match s.as_str() {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(Some(true)),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(Some(false)),
            "" => Ok(Some(false)),
            _ => Err(conv_err(
                k,
                v,
                format!(
                    "cannot parse '' as bool: strconv.ParseBool: parsing {s:?}: invalid syntax"
                ),
            )),
        },
        other => Err(conv_err(k, other, "expected type 'bool'")),
    }
}

pub fn bool_or(d: &Data, k: &str, default: bool) -> Result<bool, ApiError> {
    Ok(boolean(d, k)?.unwrap_or(default))
}

pub fn int(d: &Data, k: &str) -> Result<Option<i64>, ApiError> {
    let Some(v) = present(d, k) else {
        return Ok(None);
    };
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(Some(i))
            } else if let Some(f) = n.as_f64() {
                Ok(Some(f as i64))
            } else {
                Err(conv_err(k, v, "expected type 'int'"))
            }
        }
        Value::String(s) if s.is_empty() => Ok(Some(0)),
        Value::String(s) => s.trim().parse::<i64>().map(Some).map_err(|_| {
            conv_err(
                k,
                v,
                format!("cannot parse '' as int: strconv.ParseInt: parsing {s:?}: invalid syntax"),
            )
        }),
        Value::Bool(b) => Ok(Some(*b as i64)),
        other => Err(conv_err(k, other, "expected type 'int'")),
    }
}

/// Parses a Go-style duration (`1h30m`, `90s`, `1.5h`, `250ms`, also `d` for days) or plain
/// integer seconds into whole seconds.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(0);
    }
    if let Ok(i) = s.parse::<i64>() {
        return Ok(i);
    }
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0);
    }
    let mut total = 0f64;
    let mut any = false;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return Err(format!("time: invalid duration {s:?}"));
        }
        let num: f64 = rest[..num_end]
            .parse()
            .map_err(|_| format!("time: invalid duration {s:?}"))?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let mult = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            _ => return Err(format!("time: unknown unit {unit:?} in duration {s:?}")),
        };
        total += num * mult;
        any = true;
    }
    if !any {
        return Err(format!("time: invalid duration {s:?}"));
    }
    let secs = total.floor() as i64;
    Ok(if neg { -secs } else { secs })
}

/// A duration field (the real service's `TypeDurationSecond`): integer seconds or a duration
/// string.
pub fn duration(d: &Data, k: &str) -> Result<Option<i64>, ApiError> {
    let Some(v) = present(d, k) else {
        return Ok(None);
    };
    match v {
        Value::Number(n) => Ok(Some(n.as_f64().unwrap_or(0.0) as i64)),
        Value::String(s) => parse_duration(s).map(Some).map_err(|e| conv_err(k, v, e)),
        other => Err(conv_err(k, other, "expected type 'duration'")),
    }
}

/// A list field given as an array or a comma-delimited string (`TypeCommaStringSlice`).
/// Elements are trimmed and empty ones dropped.
pub fn comma_list(d: &Data, k: &str) -> Result<Option<Vec<String>>, ApiError> {
    let Some(v) = present(d, k) else {
        return Ok(None);
    };
    let items: Vec<String> = match v {
        Value::String(s) => s.split(',').map(|x| x.trim().to_string()).collect(),
        Value::Array(a) => {
            let mut out = Vec::new();
            for x in a {
                match x {
                    Value::String(s) => out.push(s.trim().to_string()),
                    Value::Number(n) => out.push(n.to_string()),
                    Value::Bool(b) => out.push(b.to_string()),
                    other => return Err(conv_err(k, other, "expected type 'string'")),
                }
            }
            out
        }
        Value::Number(n) => vec![n.to_string()],
        other => return Err(conv_err(k, other, "expected type '[]string'")),
    };
    Ok(Some(items.into_iter().filter(|x| !x.is_empty()).collect()))
}

/// Like [`comma_list`] but strings are not split (`TypeStringSlice`).
pub fn string_list(d: &Data, k: &str) -> Result<Option<Vec<String>>, ApiError> {
    let Some(v) = present(d, k) else {
        return Ok(None);
    };
    match v {
        Value::String(s) if s.is_empty() => Ok(Some(vec![])),
        Value::String(s) => Ok(Some(vec![s.clone()])),
        _ => comma_list(d, k),
    }
}

/// Policy lists are trimmed, lower-cased, de-duplicated and sorted, as the real service's
/// `policyutil.ParsePolicies` does.
pub fn policy_list(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = items
        .into_iter()
        .map(|p| p.trim().to_lowercase())
        .filter(|p| !p.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("1h30m"), Ok(5400));
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("30s"), Ok(30));
        assert_eq!(parse_duration("2d"), Ok(172800));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("10x").is_err());
    }
}
