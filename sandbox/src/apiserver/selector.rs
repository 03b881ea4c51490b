//! Field selectors (`metadata.name=x`, `metadata.namespace!=y`, plus a few per-kind fields),
//! read as kube's `fields.ParseSelector` reads them; label selectors are in
//! [`label_selector`](super::label_selector).

use serde_json::Value;

use super::error::ApiError;

pub use super::label_selector::LabelSelector;

/// A parsed field selector: `(path, negated, value)` terms.
#[derive(Clone, Debug, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Splits at the commas a backslash does not escape, as kube's `splitTerms`.
fn split_field_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
}

/// A field selector value with its `\\`, `\,` and `\=` escapes resolved; any other escape, a
/// lone trailing backslash, or a bare `,` or `=` is an error worded as kube's `UnescapeValue`
/// words it (the character as Go's `%v` prints a rune: its code point).
fn unescape_field_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ))
            }
            _ => out.push(c),
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".into());
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses as kube's `fields.ParseSelector`: terms split at unescaped commas and sorted,
    /// each split at its first operator (`!=`, `==` or `=`, tried in that order at each
    /// position), values unescaped, nothing trimmed, a term without field and value (`=`)
    /// dropped. The error is kube's message.
    pub fn parse_terms(s: &str) -> Result<Self, String> {
        let mut parts = split_field_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let split = part.char_indices().find_map(|(i, _)| {
                ["!=", "==", "="]
                    .into_iter()
                    .find(|op| part[i..].starts_with(op))
                    .map(|op| (&part[..i], op, &part[i + op.len()..]))
            });
            let Some((field, op, value)) = split else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let value = unescape_field_value(value)?;
            // A term with neither field nor value selects everything: kube drops it.
            if !field.is_empty() || !value.is_empty() {
                terms.push((field.to_string(), op == "!=", value));
            }
        }
        Ok(Self(terms))
    }

    /// Parses, then refuses a field the resource cannot be selected by (`allowed` lists the
    /// extra fields this resource supports besides metadata.name/namespace).
    pub fn parse(s: &str, allowed: &[&str]) -> Result<Self, ApiError> {
        let parsed = Self::parse_terms(s).map_err(ApiError::bad_request)?;
        if let Some((k, _, _)) = parsed.0.iter().find(|(k, _, _)| {
            k != "metadata.name" && k != "metadata.namespace" && !allowed.contains(&k.as_str())
        }) {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {k}"
            )));
        }
        Ok(parsed)
    }

    /// Whether the selector has no terms (it selects everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value the selector requires `field` to equal, as `RequiresExactMatch` finds it
    /// (the first `=`/`==` term on it, in the sorted order).
    pub fn exact_match(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, neg, _)| k == field && !neg)
            .map(|(_, _, v)| v.as_str())
    }

    /// Map field paths to where they are stored.
    pub fn rename(&mut self, f: impl Fn(&str) -> String) {
        for t in &mut self.0 {
            t.0 = f(&t.0);
        }
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(path, neg, want)| (selectable_value(obj, path) == *want) != *neg)
    }
}

/// The value a field selector compares: the scalar at the path, except an Event's `source`,
/// which is its `source.component`, or its `reportingComponent` when that is empty (kube's
/// `ToSelectableFields` for events).
fn selectable_value(obj: &Value, path: &str) -> String {
    if path == "source" && obj["kind"] == "Event" {
        let component = obj["source"]["component"].as_str().unwrap_or_default();
        let reporting = obj["reportingComponent"].as_str().unwrap_or_default();
        return if component.is_empty() {
            reporting
        } else {
            component
        }
        .to_string();
    }
    let mut cur = obj;
    for seg in path.split('.') {
        cur = &cur[seg];
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Extra field selectors the real server supports for the built-in kinds we serve.
pub fn allowed_fields(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "source",
            "type",
        ],
        _ => &[],
    }
}
