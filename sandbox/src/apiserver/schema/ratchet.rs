//! Validation ratcheting (`CRDValidationRatcheting`, on by default since Kubernetes 1.30):
//! on update, a schema or CEL error on a value that is unchanged from the old object is
//! dropped, so objects made invalid by a later schema change can still be updated elsewhere.
//! Values are correlated with the old object through object fields, map values and the items
//! of `x-kubernetes-list-type: map` lists (by key); items of other lists only correlate when
//! the whole list is unchanged. Transition rules (those using `oldSelf`) are never ratcheted.

use serde_json::Value;

use super::structural::json_eq;
use super::FieldError;

#[derive(Debug, PartialEq)]
enum Seg {
    Name(String),
    Index(usize),
}

/// `spec.rules[0].name` -> [spec, rules, 0, name]; `spec.limits[cpu]` -> [spec, limits, cpu].
fn parse(path: &str) -> Option<Vec<Seg>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (name, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            out.push(Seg::Name(name.to_string()));
        }
        let mut rest = rest;
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            // `[3]` is a list index, `[key]` a map key (kube's `field.Path.Key`).
            let inner = &r[..end];
            out.push(match inner.parse() {
                Ok(i) => Seg::Index(i),
                Err(_) => Seg::Name(inner.to_string()),
            });
            rest = &r[end + 1..];
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(out)
}

/// The old value correlated with the new value at `segs`, walking the schema in parallel.
/// `None` when the value cannot be correlated (or is new).
fn correlate<'a>(
    schema: &Value,
    new: &'a Value,
    old: &'a Value,
    segs: &[Seg],
) -> Option<(&'a Value, &'a Value)> {
    let Some((first, rest)) = segs.split_first() else {
        return Some((new, old));
    };
    match first {
        Seg::Name(n) => {
            let sub = schema
                .get("properties")
                .and_then(|p| p.get(n.as_str()))
                .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
                .unwrap_or(&Value::Null);
            correlate(sub, new.get(n.as_str())?, old.get(n.as_str())?, rest)
        }
        Seg::Index(i) => {
            let item_schema = schema.get("items").unwrap_or(&Value::Null);
            let new_items = new.as_array()?;
            let new_item = new_items.get(*i)?;
            let old_items = old.as_array()?;
            if json_eq(new, old) {
                return correlate(item_schema, new_item, old_items.get(*i)?, rest);
            }
            if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
                return None;
            }
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let old_item = old_items
                .iter()
                .find(|o| keys.iter().all(|k| o.get(*k) == new_item.get(*k)))?;
            correlate(item_schema, new_item, old_item, rest)
        }
    }
}

/// Whether the error is on a value unchanged since `old` (for `Required`, the object that
/// lacks the field).
fn unchanged(schema: &Value, new: &Value, old: &Value, err: &FieldError) -> bool {
    let Some(mut segs) = parse(&err.field) else {
        return false;
    };
    if err.field == "<nil>" || err.field.is_empty() {
        return false;
    }
    if err.reason == super::errors::REQUIRED {
        segs.pop();
    }
    correlate(schema, new, old, &segs).is_some_and(|(n, o)| json_eq(n, o))
}

/// Drops schema errors on unchanged values.
pub(crate) fn schema_errors(
    schema: &Value,
    new: &Value,
    old: Option<&Value>,
    errs: Vec<FieldError>,
) -> Vec<FieldError> {
    let Some(old) = old else { return errs };
    errs.into_iter()
        .filter(|e| !unchanged(schema, new, old, e))
        .collect()
}

/// Drops CEL errors on unchanged values, except for transition rules.
pub(crate) fn cel_errors(
    schema: &Value,
    new: &Value,
    old: Option<&Value>,
    errs: Vec<(FieldError, bool)>,
) -> Vec<FieldError> {
    errs.into_iter()
        .filter(|(e, transition)| *transition || old.is_none_or(|o| !unchanged(schema, new, o, e)))
        .map(|(e, _)| e)
        .collect()
}
