//! Patch formats: RFC 7386 merge patch, RFC 6902 JSON patch (both via the `json-patch` crate),
//! and strategic merge patch for the built-in kinds (merge keys and `$patch` directives for the
//! few lists our built-ins have).

use serde_json::{Map, Value};

use super::error::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// The 415 the real server gives for an unknown or unsupported patch type.
pub fn unsupported(custom: bool) -> ApiError {
    let types = if custom {
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    } else {
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
    };
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: {types}"
    ))
}

pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902, with Go json-patch's leniency that clients rely on: `test` of `null` succeeds on
/// a missing path (kube-rs' finalizer helper sends exactly that before adding the first one).
/// Operations apply in order; any failure leaves the object untouched.
pub fn json_patch(target: &mut Value, patch_body: &Value) -> Result<(), ApiError> {
    let p: json_patch::Patch = serde_json::from_value(patch_body.clone())
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut doc = target.clone();
    for op in p.0 {
        if let json_patch::PatchOperation::Test(t) = &op {
            if t.value.is_null() && doc.pointer(t.path.as_str()).is_none() {
                continue;
            }
        }
        json_patch::patch(&mut doc, &[op])
            .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
    }
    *target = doc;
    Ok(())
}

/// Merge key of a list at `path` (dotted) in the built-in kinds, or `None` for atomic lists.
fn merge_key(path: &str) -> Option<&'static str> {
    match path {
        "metadata.ownerReferences" => Some("uid"),
        "secrets" | "imagePullSecrets" => Some("name"),
        _ => None,
    }
}

/// Primitive lists with `patchStrategy: merge` (union rather than replace).
fn primitive_merge(path: &str) -> bool {
    matches!(path, "metadata.finalizers")
}

pub fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    smp(target, patch, "")
}

fn smp(target: &mut Value, patch: &Value, path: &str) -> Result<(), ApiError> {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut m = p.clone();
        m.remove("$patch");
        *target = Value::Object(m);
        return Ok(());
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else {
        return Ok(());
    };
    for (k, pv) in p {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        let child = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(del)) = (
                t.get_mut(field).and_then(Value::as_array_mut),
                pv.as_array(),
            ) {
                list.retain(|v| !del.contains(v));
            }
            continue;
        }
        match pv {
            Value::Null => {
                t.remove(k);
            }
            Value::Object(o) if o.get("$patch").and_then(Value::as_str) == Some("delete") => {
                t.remove(k);
            }
            Value::Object(_) => {
                let e = t.entry(k.clone()).or_insert(Value::Null);
                smp(e, pv, &child)?;
            }
            Value::Array(items) => {
                if items
                    .iter()
                    .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
                {
                    let kept: Vec<Value> = items
                        .iter()
                        .filter(|i| i.get("$patch").is_none())
                        .cloned()
                        .collect();
                    t.insert(k.clone(), Value::Array(kept));
                } else if let Some(key) = merge_key(&child) {
                    let list = t.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                    if !list.is_array() {
                        *list = Value::Array(vec![]);
                    }
                    let Some(list) = list.as_array_mut() else {
                        continue;
                    };
                    for item in items {
                        let kv = item.get(key).cloned();
                        let pos = list
                            .iter()
                            .position(|l| kv.is_some() && l.get(key) == kv.as_ref());
                        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
                            if let Some(i) = pos {
                                list.remove(i);
                            }
                            continue;
                        }
                        match pos {
                            Some(i) => smp(&mut list[i], item, &child)?,
                            None => {
                                let mut fresh = Value::Null;
                                smp(&mut fresh, item, &child)?;
                                list.push(fresh);
                            }
                        }
                    }
                } else if primitive_merge(&child) {
                    let list = t.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                    if let Some(list) = list.as_array_mut() {
                        for i in items {
                            if !list.contains(i) {
                                list.push(i.clone());
                            }
                        }
                    }
                } else {
                    t.insert(k.clone(), pv.clone());
                }
            }
            _ => {
                t.insert(k.clone(), pv.clone());
            }
        }
    }
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_handles_directives() {
        let mut t = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}}, "data": {"k": "v"}});
        strategic_merge(
            &mut t,
            &json!({"$setElementOrder/metadata": [], "metadata": {"finalizers": ["b"], "labels": {"x": null}}, "data": {"$patch": "replace", "n": "m"}}),
        )
        .unwrap();
        assert_eq!(
            t,
            json!({"metadata": {"finalizers": ["a", "b"], "labels": {"y": "2"}}, "data": {"n": "m"}})
        );
    }
}
