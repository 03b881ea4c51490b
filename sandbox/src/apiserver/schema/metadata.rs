//! `ObjectMeta` checks kube-apiserver makes on every custom resource
//! (`ValidateObjectMetaAccessor` with `NameIsDNSSubdomain`), plus the CRD schema's own
//! constraints on `metadata.name` / `metadata.generateName`.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use super::structural;
use super::FieldError;

const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// `IsDNS1123Subdomain`: the messages apimachinery returns for an invalid value.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re =
        RE.get_or_init(|| Regex::new(&format!("^{DNS1123_SUBDOMAIN_FMT}$")).expect("static regex"));
    let mut out = Vec::new();
    if value.len() > 253 {
        out.push("must be no more than 253 characters".to_string());
    }
    if !re.is_match(value) {
        out.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')"
        ));
    }
    out
}

/// `metadata` errors for a custom resource whose version schema is `schema`.
pub(crate) fn validate(schema: &Value, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or("");
    let generate_name = meta["generateName"].as_str().unwrap_or("");
    if !generate_name.is_empty() {
        // `maskTrailingDash`: a prefix may end in '-' (kube replaces the last two characters
        // by "a" before checking).
        let masked = if generate_name.len() > 1 && generate_name.ends_with('-') {
            let cut = generate_name
                .char_indices()
                .rev()
                .nth(1)
                .map(|(i, _)| i)
                .unwrap_or(0);
            format!("{}a", &generate_name[..cut])
        } else {
            generate_name.to_string()
        };
        for msg in dns1123_subdomain_errors(&masked) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                &Value::String(generate_name.into()),
                &msg,
            ));
        }
    }
    if name.is_empty() && generate_name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if !name.is_empty() {
        for msg in dns1123_subdomain_errors(name) {
            errs.push(FieldError::invalid(
                "metadata.name",
                &Value::String(name.into()),
                &msg,
            ));
        }
    }
    // The CRD schema may only constrain name and generateName under metadata.
    if let Some(props) = schema["properties"]["metadata"]["properties"].as_object() {
        for key in ["name", "generateName"] {
            if let (Some(sub), Some(v)) = (props.get(key), meta.get(key)) {
                structural::validate(sub, v, &format!("metadata.{key}"), &mut errs);
            }
        }
    }
    errs
}
