//! Short text of a field's values for `quartet plan` (`old → new`), shared by the kinds'
//! [`crate::reconcile::Reconciled::shown`]: one way to print an unset value, a set, a number.
//!
//! Only for values the kind reads back from its service or takes from its spec; a write-only
//! value (from a Secret) never goes through here.

use serde_json::Value;

/// What an unset value shows as.
pub const UNSET: &str = "(unset)";

/// Longer values (a PEM certificate, a policy document) are cut to this many characters.
const MAX: usize = 80;

/// A value, or [`UNSET`] when it is empty; cut after `MAX` characters.
pub fn text(v: impl std::fmt::Display) -> String {
    let s = v.to_string();
    if s.is_empty() {
        return UNSET.into();
    }
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// The snake_case key of a camelCase field name (`maxTtl` → `max_ttl`).
pub fn snake(field: &str) -> String {
    let mut out = String::with_capacity(field.len() + 4);
    for c in field.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// An optional value, [`UNSET`] when absent.
pub fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map(text).unwrap_or_else(|| UNSET.into())
}

/// A list compared as a set: sorted, without repeats, comma-separated.
pub fn set(v: &[String]) -> String {
    let mut v: Vec<&str> = v.iter().map(String::as_str).collect();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        "[]".into()
    } else {
        v.join(", ")
    }
}

/// A JSON value: strings bare, anything else as JSON; [`UNSET`] for null or absent.
pub fn json(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => UNSET.into(),
        Some(Value::String(s)) => text(s),
        Some(other) => text(other),
    }
}

/// The pair `(old, new)` from the observed and desired values.
pub fn pair(old: impl Into<String>, new: impl Into<String>) -> Option<(String, String)> {
    Some((old.into(), new.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_absent_values_show_as_unset_and_sets_are_sorted() {
        assert_eq!(text(""), UNSET);
        assert_eq!(opt::<i64>(&None), UNSET);
        assert_eq!(opt(&Some(3)), "3");
        assert_eq!(set(&["b".into(), "a".into(), "b".into()]), "a, b");
        assert_eq!(set(&[]), "[]");
        assert_eq!(json(Some(&serde_json::json!(true))), "true");
        assert_eq!(json(Some(&serde_json::json!("x"))), "x");
        assert_eq!(json(None), UNSET);
        assert_eq!(snake("lastRotationTolerance"), "last_rotation_tolerance");
        assert_eq!(text("x".repeat(100)).chars().count(), 81);
    }
}
