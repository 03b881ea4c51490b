//! `x-kubernetes-validations` through the `kube-cel` crate, with errors reworded as
//! apiextensions-apiserver's CEL validator words them (`<path>: Invalid value: "<schema
//! type>": <message>`; `reason` picks Forbidden/Required/Duplicate).

use std::collections::HashMap;

use serde_json::Value;

use super::FieldError;

thread_local! {
    /// Registering every Kubernetes CEL function is not free; one validator per thread.
    static VALIDATOR: kube_cel::Validator = kube_cel::Validator::new();
}

/// Rule text -> (declaring node's `type`, rule's `fieldPath`), so errors can name the type of
/// the node the rule sits on, as kube does (`sts.Type`).
fn rule_index(schema: &Value, out: &mut HashMap<String, (String, Option<String>)>) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(rules) = obj
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        let ty = obj
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        for r in rules {
            if let Some(text) = r.get("rule").and_then(Value::as_str) {
                let fp = r
                    .get("fieldPath")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                out.entry(text.to_string()).or_insert((ty.clone(), fp));
            }
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for p in props.values() {
            rule_index(p, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(s) = obj.get(key) {
            rule_index(s, out);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(list) = obj.get(key).and_then(Value::as_array) {
            for s in list {
                rule_index(s, out);
            }
        }
    }
}

/// Whether the schema declares any rule at all (skip the CEL machinery otherwise).
pub(crate) fn has_rules(schema: &Value) -> bool {
    let mut idx = HashMap::new();
    rule_index(schema, &mut idx);
    !idx.is_empty()
}

/// Evaluates every rule of `schema` against `obj` (and `old` for transition rules).
pub(crate) fn evaluate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut idx = HashMap::new();
    rule_index(schema, &mut idx);
    if idx.is_empty() {
        return Vec::new();
    }
    let result = VALIDATOR.with(|v| v.validate(schema, obj, old));
    let Err(errors) = result else {
        return Vec::new();
    };
    errors
        .into_vec()
        .into_iter()
        .map(|e| {
            let (ty, _) = idx
                .get(&e.rule)
                .cloned()
                .unwrap_or_else(|| ("object".into(), None));
            // kube's root path is nil, printed `<nil>`.
            let field = if e.field_path.is_empty() {
                "<nil>".to_string()
            } else {
                e.field_path.clone()
            };
            let type_value = Value::String(ty);
            match e.reason.as_deref() {
                Some("FieldValueForbidden") => FieldError::forbidden(field, &e.message),
                Some("FieldValueRequired") => FieldError::required(field, &e.message),
                Some("FieldValueDuplicate") => FieldError::duplicate(field, &type_value),
                _ => FieldError::invalid(field, &type_value, &e.message),
            }
        })
        .collect()
}

/// Compilation errors of every rule, for CRD creation: `(rule path, rule index, message)`.
pub(crate) fn compile_errors(schema: &Value) -> Vec<String> {
    let compiled = kube_cel::compile_schema(schema);
    compiled
        .compilation_errors()
        .iter()
        .map(|e| e.to_string())
        .collect()
}
