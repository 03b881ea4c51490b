//! Structural-schema processing of a custom resource, in kube-apiserver's order: pruning of
//! unknown fields (`structuralpruning`), dropping non-nullable nulls and defaulting
//! (`structuraldefaulting`), OpenAPI value validation (kube-openapi's `validate` package as
//! wrapped by `apiextensions-apiserver`'s `ValidateCustomResource`), and list-type checks
//! (`structurallisttype`).

use serde_json::{Map, Value};

use super::errors::{go_float, go_json, go_number, go_quote};
use super::formats;
use super::FieldError;

/// Fields of `ObjectMeta`; anything else under a resource's `metadata` is pruned.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// `additionalProperties` when it is a schema (structural schemas never use `true`/`false`
/// there, except `false` which means "no additional properties").
fn additional_properties(schema: &Value) -> Option<&Value> {
    schema.get("additionalProperties").filter(|v| v.is_object())
}

// ------------------------------------------------------------------------------------------
// Pruning
// ------------------------------------------------------------------------------------------

/// Removes fields the schema does not specify, recording their paths (`spec.foo`,
/// `spec.items[0].bar`) as kube's `PruneWithOptions(ReturnPruned)` does. `root` and
/// embedded resources keep `apiVersion`, `kind` and `metadata` (pruned to `ObjectMeta`).
pub(crate) fn prune(
    schema: &Value,
    value: &mut Value,
    path: &str,
    root: bool,
    pruned: &mut Vec<String>,
) {
    let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(map) => {
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let props = properties(schema);
            let additional = additional_properties(schema);
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let key_path = child(path, &key);
                if embedded && (key == "apiVersion" || key == "kind") {
                    continue;
                }
                if embedded && key == "metadata" {
                    if let Some(Value::Object(meta)) = map.get_mut(&key) {
                        let mkeys: Vec<String> = meta.keys().cloned().collect();
                        for mk in mkeys {
                            if !OBJECT_META_FIELDS.contains(&mk.as_str()) {
                                meta.remove(&mk);
                                pruned.push(child(&key_path, &mk));
                            }
                        }
                    }
                    continue;
                }
                if let Some(sub) = props.and_then(|p| p.get(&key)) {
                    if let Some(v) = map.get_mut(&key) {
                        prune(sub, v, &key_path, false, pruned);
                    }
                } else if let Some(sub) = additional {
                    if let Some(v) = map.get_mut(&key) {
                        prune(sub, v, &key_path, false, pruned);
                    }
                } else if !preserve {
                    map.remove(&key);
                    pruned.push(key_path);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item_schema, item, &index(path, i), false, pruned);
                }
            }
        }
        _ => {}
    }
}

// ------------------------------------------------------------------------------------------
// Nulls and defaults
// ------------------------------------------------------------------------------------------

fn has_default(schema: &Value) -> bool {
    schema.get("default").is_some_and(|d| !d.is_null())
}

/// `PruneNonNullableNullsWithoutDefaults`: object fields that are `null` although their schema
/// is not `nullable` and has no default are dropped (nulls inside lists are kept and then fail
/// validation).
pub(crate) fn drop_non_nullable_nulls(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let props = properties(schema);
            let additional = additional_properties(schema);
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let Some(sub) = props.and_then(|p| p.get(&key)).or(additional) else {
                    continue;
                };
                let is_null = map.get(&key).is_some_and(Value::is_null);
                if is_null {
                    if !flag(sub, "nullable") && !has_default(sub) {
                        map.remove(&key);
                    }
                } else if let Some(v) = map.get_mut(&key) {
                    drop_non_nullable_nulls(sub, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items.iter_mut() {
                    drop_non_nullable_nulls(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn is_non_nullable_null(value: &Value, schema: &Value) -> bool {
    value.is_null() && !flag(schema, "nullable") && has_default(schema)
}

/// `structuraldefaulting.Default`: absent fields (and non-nullable nulls) of objects that
/// exist get a deep copy of their `default`; defaulted values are then defaulted themselves.
pub(crate) fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = properties(schema) {
                for (key, sub) in props {
                    if !has_default(sub) {
                        continue;
                    }
                    let absent_or_null = match map.get(key) {
                        None => true,
                        Some(v) => is_non_nullable_null(v, sub),
                    };
                    if absent_or_null {
                        map.insert(key.clone(), sub["default"].clone());
                    }
                }
            }
            let props = properties(schema);
            let additional = additional_properties(schema);
            for (key, v) in map.iter_mut() {
                if let Some(sub) = props.and_then(|p| p.get(key)) {
                    apply_defaults(sub, v);
                } else if let Some(sub) = additional {
                    if is_non_nullable_null(v, sub) {
                        *v = sub["default"].clone();
                    }
                    apply_defaults(sub, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items.iter_mut() {
                    if is_non_nullable_null(item, item_schema) {
                        *item = item_schema["default"].clone();
                    }
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

// ------------------------------------------------------------------------------------------
// OpenAPI value validation
// ------------------------------------------------------------------------------------------

/// JSON type name of a value as kube-openapi's `schemaInfoForType` reports it.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The swagger "format" kube-openapi infers from Go data (`int64` / `float64`).
fn data_format(v: &Value) -> &'static str {
    match v {
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        _ => "",
    }
}

fn is_float_int(v: &Value) -> bool {
    matches!(v, Value::Number(n) if n.is_f64() && n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15))
}

/// Numeric-aware JSON equality (an enum `1` matches `1.0`).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Error of kube-openapi mapped to a `field.Error` the way `ValidateCustomResource` maps it:
/// `path` "" means kube's nil root path, printed `<nil>`.
fn field_path(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_string()
    } else {
        path.to_string()
    }
}

/// The declared type of a schema (`type`, or integer/string for `x-kubernetes-int-or-string`).
fn declared_type(schema: &Value) -> Option<&str> {
    schema
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
}

/// Validates `value` against `schema` at `path`, appending errors like kube-openapi does.
pub(crate) fn validate(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    // x-kubernetes-int-or-string without a type is `anyOf: [{type: integer}, {type: string}]`.
    if flag(schema, "x-kubernetes-int-or-string") && declared_type(schema).is_none() {
        let ok = matches!(value, Value::String(_))
            || json_type(value) == "integer"
            || is_float_int(value);
        if !ok {
            errs.push(FieldError::invalid(
                field_path(""),
                &Value::String(String::new()),
                &format!(
                    "{} must validate at least one schema (anyOf)",
                    go_quote(path)
                ),
            ));
            let t = json_type(value);
            errs.push(FieldError::type_invalid(
                field_path(path),
                &Value::String(t.into()),
                &format!("{path} in body must be of type integer: {}", go_quote(t)),
            ));
        }
    }

    if value.is_null() {
        validate_type(schema, value, path, errs);
        validate_enum(schema, value, path, errs);
        return;
    }

    validate_type(schema, value, path, errs);
    validate_composition(schema, value, path, errs);
    match value {
        Value::String(s) => {
            validate_string(schema, s, value, path, errs);
            validate_format(schema, s, value, path, errs);
        }
        Value::Number(_) => validate_number(schema, value, path, errs),
        Value::Array(items) => validate_array(schema, items, path, errs),
        _ => {}
    }
    validate_enum(schema, value, path, errs);
    if let Value::Object(map) = value {
        validate_object(schema, map, path, errs);
    }
}

/// kube-openapi's `typeValidator`, condition for condition (hence the unsimplified booleans).
#[allow(clippy::nonminimal_bool)]
fn validate_type(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let ty = declared_type(schema);
    let format = schema.get("format").and_then(Value::as_str).unwrap_or("");
    if ty.is_none() && format.is_empty() {
        return;
    }
    let ty = ty.unwrap_or("");
    let fail = |errs: &mut Vec<FieldError>, type_name: &str, data: &str| {
        errs.push(FieldError::type_invalid(
            field_path(path),
            &Value::String(data.into()),
            &format!(
                "{path} in body must be of type {type_name}: {}",
                go_quote(data)
            ),
        ));
    };
    if value.is_null() {
        if !ty.is_empty() && ty != "null" && !flag(schema, "nullable") {
            fail(errs, ty, "null");
        }
        return;
    }
    let sch_type = json_type(value);
    let data_fmt = data_format(value);
    let is_string_or_slice = matches!(value, Value::String(_) | Value::Array(_));
    let float_int = sch_type == "number" && is_float_int(value) && ty == "integer";
    let int_float = sch_type == "integer" && ty == "number";
    let lower_int = format == "int64" && data_fmt == "int32";
    if !is_string_or_slice
        && !format.is_empty()
        && !(ty == sch_type || data_fmt == format || float_int || int_float || lower_int)
    {
        fail(errs, format, data_fmt);
        return;
    }
    if !(ty == "number" || ty == "integer") && !format.is_empty() && is_string_or_slice {
        return;
    }
    if ty.is_empty() {
        return;
    }
    if !(ty == sch_type || float_int || int_float) {
        fail(errs, ty, sch_type);
    }
}

/// kube-openapi's string validator reports the first of maxLength, minLength and pattern
/// that fails, not all of them.
fn validate_string(schema: &Value, s: &str, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let len = s.chars().count() as i64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_i64) {
        if len > max {
            errs.push(FieldError::too_long(field_path(path), max));
            return;
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_i64) {
        if len < min {
            errs.push(FieldError::invalid(
                field_path(path),
                value,
                &format!("{path} in body should be at least {min} chars long"),
            ));
            return;
        }
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        // An uncompilable pattern was rejected when the CRD was created; be lenient here.
        if let Ok(re) = regex::Regex::new(pattern) {
            if !re.is_match(s) {
                errs.push(FieldError::invalid(
                    field_path(path),
                    value,
                    &format!("{path} in body should match '{pattern}'"),
                ));
            }
        }
    }
}

fn validate_format(schema: &Value, s: &str, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(format) = schema.get("format").and_then(Value::as_str) else {
        return;
    };
    if let Some(false) = formats::check(format, s) {
        errs.push(FieldError::type_invalid(
            field_path(path),
            value,
            &format!("{path} in body must be of type {format}: {}", go_quote(s)),
        ));
    }
}

fn bound(v: &Value) -> Option<(f64, String)> {
    match v {
        Value::Number(n) => Some((n.as_f64()?, go_number(n))),
        _ => None,
    }
}

fn validate_number(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(x) = value.as_f64() else { return };
    let is_int = json_type(value) == "integer";
    let render = |b: f64, text: String| {
        if is_int && b.fract() == 0.0 {
            go_float(b)
        } else {
            text
        }
    };
    if let Some(m) = schema.get("multipleOf").and_then(bound) {
        if m.0 > 0.0 {
            let q = x / m.0;
            if q.fract().abs() > 1e-9 && (1.0 - q.fract().abs()) > 1e-9 {
                errs.push(FieldError::invalid(
                    field_path(path),
                    value,
                    &format!("{path} in body should be a multiple of {}", m.1),
                ));
            }
        }
    }
    if let Some((max, text)) = schema.get("maximum").and_then(bound) {
        let exclusive = flag(schema, "exclusiveMaximum");
        if (exclusive && x >= max) || (!exclusive && x > max) {
            let op = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            errs.push(FieldError::invalid(
                field_path(path),
                value,
                &format!("{path} in body should be {op} {}", render(max, text)),
            ));
        }
    }
    if let Some((min, text)) = schema.get("minimum").and_then(bound) {
        let exclusive = flag(schema, "exclusiveMinimum");
        if (exclusive && x <= min) || (!exclusive && x < min) {
            let op = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errs.push(FieldError::invalid(
                field_path(path),
                value,
                &format!("{path} in body should be {op} {}", render(min, text)),
            ));
        }
    }
}

fn validate_array(schema: &Value, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, item, &index(path, i), errs);
        }
    }
    let size = items.len() as i64;
    if let Some(min) = schema.get("minItems").and_then(Value::as_i64) {
        if size < min {
            errs.push(FieldError::invalid(
                field_path(path),
                &Value::from(size),
                &format!("{path} in body should have at least {min} items"),
            ));
        }
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_i64) {
        if size > max {
            errs.push(FieldError::too_many(field_path(path), size, max));
        }
    }
    if flag(schema, "uniqueItems") {
        let dup = items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| json_eq(a, b)));
        if dup {
            errs.push(FieldError::invalid(
                field_path(path),
                &Value::String(String::new()),
                &format!("{path} in body shouldn't contain duplicates"),
            ));
        }
    }
}

fn enum_value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn validate_enum(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
        return;
    };
    if allowed.is_empty() || allowed.iter().any(|a| json_eq(a, value)) {
        return;
    }
    let texts: Vec<String> = allowed.iter().map(enum_value_text).collect();
    errs.push(FieldError::not_supported(field_path(path), value, &texts));
}

fn validate_object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let n = map.len() as i64;
    if let Some(min) = schema.get("minProperties").and_then(Value::as_i64) {
        if n < min {
            errs.push(FieldError::invalid(
                field_path(path),
                &Value::from(n),
                &format!("{path} in body should have at least {min} properties"),
            ));
            return;
        }
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_i64) {
        if n > max {
            errs.push(FieldError::too_many(field_path(path), n, max));
            return;
        }
    }
    let props = properties(schema);
    if let Some(additional) = additional_properties(schema) {
        for (k, v) in map {
            if props.is_some_and(|p| p.contains_key(k)) {
                continue;
            }
            validate(additional, v, &child(path, k), errs);
        }
    }
    if let Some(props) = props {
        for (k, sub) in props {
            if path.is_empty() && k == "metadata" {
                // Root metadata is ObjectMeta, checked by `validate_metadata`.
                continue;
            }
            if let Some(v) = map.get(k) {
                validate(sub, v, &child(path, k), errs);
            }
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                errs.push(FieldError::required(child(path, r), ""));
            }
        }
    }
}

fn composition_error(path: &str, what: &str) -> FieldError {
    FieldError::invalid(
        field_path(""),
        &Value::String(String::new()),
        &format!("{} {what}", go_quote(path)),
    )
}

/// `allOf` / `anyOf` / `oneOf` / `not` (kube-openapi's `schemaPropsValidator`): a composite
/// error at the nil root path, followed by the (best) failing branch's errors.
fn validate_composition(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        let mut validated = 0;
        let mut failed = false;
        for s in all {
            let mut sub = Vec::new();
            validate(s, value, path, &mut sub);
            if sub.is_empty() {
                validated += 1;
            } else {
                failed = true;
            }
            errs.extend(sub);
        }
        if failed {
            let none = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            errs.push(composition_error(
                path,
                &format!("must validate all the schemas (allOf){none}"),
            ));
        }
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        let mut best: Option<Vec<FieldError>> = None;
        let mut ok = false;
        for s in any {
            let mut sub = Vec::new();
            validate(s, value, path, &mut sub);
            if sub.is_empty() {
                ok = true;
                break;
            }
            if best.is_none() {
                best = Some(sub);
            }
        }
        if !ok {
            errs.push(composition_error(
                path,
                "must validate at least one schema (anyOf)",
            ));
            errs.extend(best.unwrap_or_default());
        }
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let mut valid = 0;
        let mut best: Option<Vec<FieldError>> = None;
        for s in one {
            let mut sub = Vec::new();
            validate(s, value, path, &mut sub);
            if sub.is_empty() {
                valid += 1;
            } else if best.is_none() {
                best = Some(sub);
            }
        }
        if valid != 1 {
            let found = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errs.push(composition_error(
                path,
                &format!("must validate one and only one schema (oneOf). {found}"),
            ));
            if valid == 0 {
                errs.extend(best.unwrap_or_default());
            }
        }
    }
    if let Some(not) = schema.get("not").filter(|s| s.is_object()) {
        let mut sub = Vec::new();
        validate(not, value, path, &mut sub);
        if sub.is_empty() {
            errs.push(composition_error(
                path,
                "must not validate the schema (not)",
            ));
        }
    }
}

// ------------------------------------------------------------------------------------------
// x-kubernetes-list-type
// ------------------------------------------------------------------------------------------

/// `structurallisttype.ValidateListSetsAndMaps`: duplicates in `set` lists and duplicate keys
/// in `map` lists are `Duplicate value` errors on the element that first repeats a value (a
/// third copy is not reported again).
pub(crate) fn validate_list_types(
    schema: &Value,
    value: &Value,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    match value {
        Value::Object(map) => {
            let props = properties(schema);
            let additional = additional_properties(schema);
            for (k, v) in map {
                if path.is_empty() && k == "metadata" {
                    continue;
                }
                if let Some(sub) = props.and_then(|p| p.get(k)).or(additional) {
                    validate_list_types(sub, v, &child(path, k), errs);
                }
            }
        }
        Value::Array(items) => {
            match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => {
                    for i in first_repeats(items) {
                        errs.push(FieldError::duplicate(index(path, i), &items[i]));
                    }
                }
                Some("map") => {
                    let keys: Vec<&str> = schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let key_of = |item: &Value| -> Value {
                        let mut m = Map::new();
                        for k in &keys {
                            if let Some(v) = item.get(*k) {
                                m.insert((*k).to_string(), v.clone());
                            }
                        }
                        Value::Object(m)
                    };
                    let all_keys: Vec<Value> = items.iter().map(key_of).collect();
                    for i in first_repeats(&all_keys) {
                        errs.push(FieldError::duplicate(index(path, i), &all_keys[i]));
                    }
                }
                _ => {}
            }
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter().enumerate() {
                    validate_list_types(item_schema, item, &index(path, i), errs);
                }
            }
        }
        _ => {}
    }
}

/// The indices of the elements that repeat an earlier one for the first time. Like
/// `validateListSet`, values are counted by their JSON encoding (one pass, however long the
/// list) and reported when seen the second time.
fn first_repeats(items: &[Value]) -> Vec<usize> {
    let mut seen: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    (0..items.len())
        .filter(|&i| {
            let times = seen.entry(go_json(&items[i])).or_insert(0);
            *times += 1;
            *times == 2
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// x-kubernetes-embedded-resource
// ------------------------------------------------------------------------------------------

/// `validateEmbeddedResource`: a non-root embedded resource needs `apiVersion` and `kind`.
pub(crate) fn validate_embedded_resources(
    schema: &Value,
    value: &Value,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    match value {
        Value::Object(map) => {
            if !path.is_empty() && flag(schema, "x-kubernetes-embedded-resource") {
                for key in ["apiVersion", "kind"] {
                    match map.get(key) {
                        None => {
                            errs.push(FieldError::required(child(path, key), "must not be empty"))
                        }
                        Some(Value::String(s)) if s.is_empty() => errs.push(FieldError::invalid(
                            child(path, key),
                            &Value::String(String::new()),
                            "must not be empty",
                        )),
                        Some(Value::String(_)) => {}
                        Some(other) => errs.push(FieldError::invalid(
                            child(path, key),
                            other,
                            "must be a string",
                        )),
                    }
                }
            }
            let props = properties(schema);
            let additional = additional_properties(schema);
            for (k, v) in map {
                if path.is_empty() && k == "metadata" {
                    continue;
                }
                if let Some(sub) = props.and_then(|p| p.get(k)).or(additional) {
                    validate_embedded_resources(sub, v, &child(path, k), errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter().enumerate() {
                    validate_embedded_resources(item_schema, item, &index(path, i), errs);
                }
            }
        }
        _ => {}
    }
}
