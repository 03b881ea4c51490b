//! `field.Error` construction and rendering exactly as k8s.io/apimachinery words it
//! (`ErrorBody()`), plus the 422 `Status` built by `apierrors.NewInvalid`.

use serde_json::{json, Value};

use super::FieldError;

/// Reasons (`metav1.CauseType`) of `field.ErrorType`.
pub(crate) const REQUIRED: &str = "FieldValueRequired";
pub(crate) const INVALID: &str = "FieldValueInvalid";
pub(crate) const NOT_SUPPORTED: &str = "FieldValueNotSupported";
pub(crate) const TYPE_INVALID: &str = "FieldValueTypeInvalid";
pub(crate) const TOO_LONG: &str = "FieldValueTooLong";
pub(crate) const TOO_MANY: &str = "FieldValueTooMany";
pub(crate) const FORBIDDEN: &str = "FieldValueForbidden";
pub(crate) const DUPLICATE: &str = "FieldValueDuplicate";

/// Renders a JSON value the way `field.Error.ErrorBody` prints a `BadValue` taken from an
/// unstructured object (Kubernetes 1.31 and later): strings `%q`, numbers and booleans `%v`,
/// anything else (null, maps, slices) as `json.Marshal` writes it, so null is `null` and a map
/// `{"key":"x"}`.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::Null | Value::Array(_) | Value::Object(_) => go_json(v),
    }
}

/// Go's `json.Marshal` of an unstructured value: compact, map keys sorted, `<`, `>` and `&`
/// escaped as `\u003c`, `\u003e`, `\u0026`, floats without a needless exponent.
pub(crate) fn go_json(v: &Value) -> String {
    let mut out = String::new();
    write_go_json(v, &mut out);
    out
}

fn write_go_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_json_number(n)),
        Value::String(s) => write_go_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json_string(k, out);
                out.push(':');
                write_go_json(&map[k], out);
            }
            out.push('}');
        }
    }
}

/// `encoding/json`'s string escaping with HTML escaping on (the default of `json.Marshal`).
fn write_go_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `encoding/json`'s number: integers as they are; a float64 in `'f'` form, or `'e'` form
/// below 1e-6 and from 1e21 on with a one-digit exponent kept short (`1e-7`, `1e+21`).
fn go_json_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{:e}", f);
        if let Some((m, e)) = s.split_once('e') {
            return match e.strip_prefix('-') {
                Some(d) => format!("{m}e-{d}"),
                None => format!("{m}e+{e}"),
            };
        }
        return s;
    }
    if f == f.trunc() {
        return format!("{}", f as i128);
    }
    format!("{}", f)
}

/// Go's `%v` of an int64 / float64 (shortest representation, `e+XX` exponents past 1e21).
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    go_float(f)
}

/// Go's `%v` for float64 (`strconv.FormatFloat(f, 'g', -1, 64)` with %v's exponent threshold).
pub(crate) fn go_float(f: f64) -> String {
    if f == f.trunc() && f.abs() < 1e21 {
        return format!("{}", f as i128);
    }
    let abs = f.abs();
    if !(1e-4..1e21).contains(&abs) {
        let s = format!("{:e}", f);
        // Rust: 1e21 / 1.5e-5 ; Go: 1e+21 / 1.5e-05
        if let Some((m, e)) = s.split_once('e') {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            let digits = if digits.len() < 2 {
                format!("0{digits}")
            } else {
                digits.to_string()
            };
            return format!("{m}e{sign}{digits}");
        }
        return s;
    }
    format!("{}", f)
}

/// Whether Go's `unicode.IsPrint` (and `strconv.IsPrint`) holds: not a control, format or
/// private-use character, and no space but U+0020. Format characters are the category Cf ones
/// that occur in practice (soft hyphen, zero-width and bidirectional marks, word joiners, the
/// byte order mark); Rust's standard library has no category tables to tell the rest.
pub fn go_printable(c: char) -> bool {
    let format =
        matches!(c as u32, 0xAD | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0xFEFF);
    let private = matches!(c as u32, 0xE000..=0xF8FF | 0xF0000..=0x10FFFF);
    !c.is_control() && !format && !private && (c == ' ' || !c.is_whitespace())
}

/// Go's `%q` / `strconv.Quote`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if !go_printable(c) && (c as u32) < 0x10000 => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if !go_printable(c) => out.push_str(&format!("\\U{:08x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn with_detail(mut s: String, detail: &str) -> String {
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(detail);
    }
    s
}

impl FieldError {
    /// `field.Required(path, detail)`.
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        Self {
            field: field.into(),
            reason: REQUIRED,
            message: with_detail("Required value".into(), detail),
        }
    }

    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Self {
        Self {
            field: field.into(),
            reason: INVALID,
            message: with_detail(format!("Invalid value: {}", go_value(value)), detail),
        }
    }

    /// `field.Invalid(path, field.OmitValueType{}, detail)`: no value printed (a failed CEL rule
    /// on an object or a list, since Kubernetes 1.35).
    pub fn invalid_omitted(field: impl Into<String>, detail: &str) -> Self {
        Self {
            field: field.into(),
            reason: INVALID,
            message: with_detail("Invalid value".into(), detail),
        }
    }

    /// `field.TypeInvalid(path, value, detail)` (worded "Invalid value" like `Invalid`).
    pub fn type_invalid(field: impl Into<String>, value: &Value, detail: &str) -> Self {
        Self {
            field: field.into(),
            reason: TYPE_INVALID,
            message: with_detail(format!("Invalid value: {}", go_value(value)), detail),
        }
    }

    /// `field.NotSupported(path, value, validValues)`.
    pub fn not_supported(field: impl Into<String>, value: &Value, valid: &[String]) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self {
            field: field.into(),
            reason: NOT_SUPPORTED,
            message: with_detail(format!("Unsupported value: {}", go_value(value)), &detail),
        }
    }

    /// `field.TooLong(path, value, maxLength)`: the value is never printed.
    pub fn too_long(field: impl Into<String>, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "may not be more than {max} {}",
                if max == 1 { "byte" } else { "bytes" }
            )
        } else {
            "value is too long".into()
        };
        Self {
            field: field.into(),
            reason: TOO_LONG,
            message: with_detail("Too long".into(), &detail),
        }
    }

    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(field: impl Into<String>, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "must have at most {max} {}",
                if max == 1 { "item" } else { "items" }
            )
        } else {
            "has too many items".into()
        };
        let head = if actual >= 0 {
            format!("Too many: {actual}")
        } else {
            "Too many".to_string()
        };
        Self {
            field: field.into(),
            reason: TOO_MANY,
            message: with_detail(head, &detail),
        }
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Self {
            field: field.into(),
            reason: FORBIDDEN,
            message: with_detail("Forbidden".into(), detail),
        }
    }

    /// `field.Duplicate(path, value)`.
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        Self {
            field: field.into(),
            reason: DUPLICATE,
            message: format!("Duplicate value: {}", go_value(value)),
        }
    }

    /// `field.Duplicate(path, field.OmitValueType{})`.
    pub fn duplicate_omitted(field: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: DUPLICATE,
            message: "Duplicate value".into(),
        }
    }

    /// `field.Error.Error()`: `<field>: <body>`.
    pub fn to_error_string(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// `utilerrors.NewAggregate(errs.ToAggregate()).Error()`: duplicates dropped, one error
/// printed bare, several as `[a, b]`.
pub fn aggregate_message(errors: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        let s = e.to_error_string();
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// `apierrors.NewInvalid(groupKind, name, errs)` serialized.
pub fn invalid_status(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Value {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let message = if errors.is_empty() {
        format!("{qualified} {} is invalid", go_quote(name))
    } else {
        format!(
            "{qualified} {} is invalid: {}",
            go_quote(name),
            aggregate_message(errors)
        )
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.reason, "message": e.message, "field": e.field}))
        .collect();
    let mut details = serde_json::Map::new();
    if !name.is_empty() {
        details.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        details.insert("group".into(), json!(group));
    }
    details.insert("kind".into(), json!(kind));
    if !causes.is_empty() {
        details.insert("causes".into(), Value::Array(causes));
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Invalid",
        "details": Value::Object(details),
        "code": 422
    })
}

#[cfg(test)]
mod tests {
    use super::{go_quote, go_value};
    use serde_json::json;

    #[test]
    fn a_string_is_quoted_as_go_quotes_it() {
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\u{1}\t\u{7f}"), r#""\x01\t\x7f""#);
        // Printable letters stay; other spaces, format and private-use characters are escaped.
        assert_eq!(
            go_quote("é \u{a0}\u{200b}\u{f0000}"),
            r#""é \u00a0\u200b\U000f0000""#
        );
    }

    #[test]
    fn a_bad_value_that_is_not_a_scalar_prints_as_go_marshals_it() {
        assert_eq!(go_value(&json!(null)), "null");
        assert_eq!(
            go_value(&json!({"b": 1, "a": "<x&y>"})),
            r#"{"a":"\u003cx\u0026y\u003e","b":1}"#
        );
        assert_eq!(go_value(&json!(["a", 1.5, true])), r#"["a",1.5,true]"#);
        assert_eq!(go_value(&json!([1e-7, 1e21, 2.0])), "[1e-7,1e+21,2]");
        assert_eq!(go_value(&json!("tab\there")), r#""tab\there""#);
    }
}
