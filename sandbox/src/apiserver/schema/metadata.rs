//! `ObjectMeta` checks kube-apiserver makes on every object (`ValidateObjectMetaAccessor` with
//! `NameIsDNSSubdomain`: name, labels, annotations, finalizers), plus the CRD schema's own
//! constraints on `metadata.name` / `metadata.generateName`. Messages as Kubernetes 1.35 and
//! 1.36 word them (`k8s.io/apimachinery/pkg/api/validate/content`).

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

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

fn label_key_regex_msg() -> String {
    format!("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{LABEL_KEY_FMT}')")
}

fn is_label_key_name(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `content.IsDNS1123Subdomain` (lengths in bytes, unlike the older wording names still use).
fn content_subdomain_errors(value: &str) -> Vec<String> {
    let mut out = dns1123_subdomain_errors(value);
    if value.len() > 253 {
        out[0] = "must be no more than 253 bytes".to_string();
    }
    out
}

/// `IsLabelKey` (`IsQualifiedName`): an optional DNS subdomain prefix and `/`, then a name
/// part of at most 63 characters.
pub fn label_key_errors(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut errs = Vec::new();
    let name = match parts[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    content_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                label_key_regex_msg()
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_string());
    }
    if !is_label_key_name(name) {
        errs.push(format!("name part {}", label_key_regex_msg()));
    }
    errs
}

/// `IsLabelValue`: empty, or a label key's name part.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 bytes".to_string());
    }
    if !value.is_empty() && !is_label_key_name(value) {
        errs.push(format!("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({LABEL_KEY_FMT})?')"));
    }
    errs
}

/// `TotalAnnotationSizeLimitB`: keys and values together.
const ANNOTATIONS_LIMIT: i64 = 256 * 1024;

/// `ValidateLabels`, `ValidateAnnotations` and `ValidateFinalizers` of `metadata`; values that
/// are not strings are left to the decoder.
pub fn meta_map_errors(meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = meta["labels"].as_object() {
        for (k, v) in labels {
            for msg in label_key_errors(k) {
                errs.push(FieldError::invalid(
                    "metadata.labels",
                    &Value::String(k.clone()),
                    &msg,
                ));
            }
            for msg in v.as_str().map(label_value_errors).unwrap_or_default() {
                errs.push(FieldError::invalid("metadata.labels", v, &msg));
            }
        }
    }
    if let Some(annotations) = meta["annotations"].as_object() {
        let mut size = 0i64;
        for (k, v) in annotations {
            // Case does not matter in annotation keys.
            for msg in label_key_errors(&k.to_lowercase()) {
                errs.push(FieldError::invalid(
                    "metadata.annotations",
                    &Value::String(k.clone()),
                    &msg,
                ));
            }
            size += (k.len() + v.as_str().map_or(0, str::len)) as i64;
        }
        if size > ANNOTATIONS_LIMIT {
            errs.push(FieldError::too_long(
                "metadata.annotations",
                ANNOTATIONS_LIMIT,
            ));
        }
    }
    if let Some(finalizers) = meta["finalizers"].as_array() {
        let names: Vec<&str> = finalizers.iter().filter_map(Value::as_str).collect();
        for f in &names {
            for msg in label_key_errors(f) {
                errs.push(FieldError::invalid(
                    "metadata.finalizers",
                    &Value::String(f.to_string()),
                    &msg,
                ));
            }
        }
        if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
            errs.push(FieldError::invalid(
                "metadata.finalizers",
                &meta["finalizers"],
                "finalizer orphan and foregroundDeletion cannot be both set",
            ));
        }
    }
    errs
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
    errs.extend(meta_map_errors(meta));
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
