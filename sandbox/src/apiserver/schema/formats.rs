//! String `format`s kube-apiserver enforces on custom resources (the `strfmt` registry
//! limited to apiextensions' supported formats). Unknown formats are not checked, as in kube.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use base64::Engine;
use regex::Regex;

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("static regex"))
}

/// `Some(valid)` for a format kube checks, `None` for formats it ignores.
pub(crate) fn check(format: &str, s: &str) -> Option<bool> {
    // strfmt normalizes names: "date-time" == "datetime", case-insensitive.
    let norm: String = format
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .collect::<String>()
        .to_lowercase();
    static UUID: OnceLock<Regex> = OnceLock::new();
    static UUID3: OnceLock<Regex> = OnceLock::new();
    static UUID4: OnceLock<Regex> = OnceLock::new();
    static UUID5: OnceLock<Regex> = OnceLock::new();
    static HOSTNAME: OnceLock<Regex> = OnceLock::new();
    static EMAIL: OnceLock<Regex> = OnceLock::new();
    static DATE: OnceLock<Regex> = OnceLock::new();
    static DURATION: OnceLock<Regex> = OnceLock::new();
    static MAC: OnceLock<Regex> = OnceLock::new();
    static HEXCOLOR: OnceLock<Regex> = OnceLock::new();
    static BSON: OnceLock<Regex> = OnceLock::new();
    let ok = match norm.as_str() {
        "password" => true,
        "uuid" => re(&UUID, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$").is_match(s),
        "uuid3" => re(&UUID3, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$").is_match(s),
        "uuid4" => re(&UUID4, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$").is_match(s),
        "uuid5" => re(&UUID5, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$").is_match(s),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok() || s.parse::<Ipv4Addr>().is_ok(),
        "cidr" => match s.split_once('/') {
            Some((ip, bits)) => match (ip.parse::<IpAddr>(), bits.parse::<u8>()) {
                (Ok(IpAddr::V4(_)), Ok(b)) => b <= 32 && !bits.starts_with('+'),
                (Ok(IpAddr::V6(_)), Ok(b)) => b <= 128 && !bits.starts_with('+'),
                _ => false,
            },
            None => false,
        },
        "hostname" => {
            s.len() <= 255
                && re(&HOSTNAME, r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$").is_match(s)
        }
        "email" => re(&EMAIL, r"^[^@\s<>]+@[^@\s<>]+$").is_match(s),
        "mac" => re(&MAC, r"(?i)^([0-9a-f]{2}[:-]){5}([0-9a-f]{2})$|^([0-9a-f]{2}[:-]){7}([0-9a-f]{2})$|^([0-9a-f]{2}[:-]){19}([0-9a-f]{2})$|^([0-9a-f]{4}\.){2}([0-9a-f]{4})$").is_match(s),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "date" => re(&DATE, r"^\d{4}-\d{2}-\d{2}$").is_match(s) && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "datetime" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "duration" => re(&DURATION, r"^(\s*[-+]?(\d+(\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)\s*)+$").is_match(s),
        "hexcolor" => re(&HEXCOLOR, r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$").is_match(s),
        "bsonobjectid" => re(&BSON, r"^[0-9a-fA-F]{24}$").is_match(s),
        "uri" => s.starts_with('/') || s.split_once(':').is_some_and(|(scheme, _)| !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))),
        _ => return None,
    };
    Some(ok)
}

/// Formats a CRD schema may declare on strings (apiextensions' `supportedVersionedFormats` at
/// Kubernetes 1.34 and later), compared without dashes as go-openapi normalizes names.
const KNOWN_STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

/// `GetUnrecognizedFormats` for one node: strings know the formats above, integers only
/// `int32`/`int64`, numbers `float`/`double`, other types none.
fn unrecognized(ty: &str, format: &str) -> bool {
    match ty {
        "" | "string" => !KNOWN_STRING_FORMATS.contains(&format.replace('-', "").as_str()),
        "integer" => format != "int32" && format != "int64",
        "number" => format != "float" && format != "double",
        _ => true,
    }
}

fn collect_unrecognized(schema: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(format) = obj
        .get("format")
        .and_then(Value::as_str)
        .filter(|f| !f.is_empty())
    {
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        if unrecognized(ty, format) && !out.iter().any(|f| f == format) {
            out.push(format.to_string());
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for p in props.values() {
            collect_unrecognized(p, out);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(s) = obj.get(key) {
            collect_unrecognized(s, out);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for s in obj.get(key).and_then(Value::as_array).into_iter().flatten() {
            collect_unrecognized(s, out);
        }
    }
}

/// The formats of a CRD's schemas Kubernetes does not know, each once.
fn unrecognized_formats(crd: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
        collect_unrecognized(&v["schema"]["openAPIV3Schema"], &mut out);
    }
    out
}

/// The `Warning` texts kube-apiserver sends when a CRD is created (`old` is `None`) or updated:
/// `unrecognized format "uint64"` for each unknown format, on update only those the old CRD
/// did not already have.
pub(crate) fn crd_warnings(
    crd: &serde_json::Value,
    old: Option<&serde_json::Value>,
) -> Vec<String> {
    let before = old.map(unrecognized_formats).unwrap_or_default();
    unrecognized_formats(crd)
        .into_iter()
        .filter(|f| !before.contains(f))
        .map(|f| format!("unrecognized format {}", super::go_quote(&f)))
        .collect()
}
