//! `x-kubernetes-validations` through the `kube-cel` crate, with errors reworded as
//! apiextensions-apiserver's CEL validator words them: a failed rule on a scalar shows its
//! value (`spec.digits: Invalid value: 7: <message>`), on an object or a list no value
//! (`spec: Invalid value: <message>`), a rule that could not run the node's type (`Invalid
//! value: "object": ... evaluating rule: ...`); `reason` picks Forbidden/Required/Duplicate.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::Value;

use super::FieldError;

thread_local! {
    /// Registering every Kubernetes CEL function is not free; one validator per thread.
    static VALIDATOR: kube_cel::Validator = kube_cel::Validator::new();
    /// The rules of each stored CRD version, compiled once (see [`Rules::of`]). Per thread, as
    /// the validator: cel's programs are not `Send`.
    static COMPILED: RefCell<HashMap<String, Rc<Option<Rules>>>> = RefCell::new(HashMap::new());
}

/// Compiled entries kept per thread before the cache starts over (each CRD update is a new
/// entry; the old ones are never asked for again).
const COMPILED_CAP: usize = 512;

/// A schema's `x-kubernetes-validations`, ready to evaluate: the rules parsed once, as
/// kube-apiserver compiles them when a CRD is stored, instead of on every write (parsing them
/// per request was a fifth of the sandbox's CPU under the converge benchmark).
pub(crate) struct Rules {
    /// Rule text -> declaring node's type and the rule's `fieldPath` ([`rule_index`]).
    index: HashMap<String, (String, Option<String>)>,
    /// The schema without its `optionalOldSelf` rules ([`without_optional_rules`]), compiled.
    compiled: kube_cel::CompiledSchema,
}

impl Rules {
    /// The rules of `schema`, `None` when it declares none. `key` names the stored CRD version
    /// the schema comes from (uid, resourceVersion, version): with one, the compiled rules are
    /// reused until the CRD changes; without (a schema that is not stored), compiled now.
    pub(crate) fn of(schema: &Value, key: Option<&str>) -> Rc<Option<Rules>> {
        let Some(key) = key else {
            return Rc::new(Self::compile(schema));
        };
        COMPILED.with(|cache| {
            if let Some(rules) = cache.borrow().get(key) {
                return rules.clone();
            }
            let rules = Rc::new(Self::compile(schema));
            let mut cache = cache.borrow_mut();
            if cache.len() >= COMPILED_CAP {
                cache.clear();
            }
            cache.insert(key.to_string(), rules.clone());
            rules
        })
    }

    fn compile(schema: &Value) -> Option<Rules> {
        let mut index = HashMap::new();
        rule_index(schema, &mut index);
        if index.is_empty() {
            return None;
        }
        Some(Rules {
            index,
            compiled: kube_cel::compile_schema(&without_optional_rules(schema)),
        })
    }
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

/// What the error of a rule shows as its value (`fieldErrorForReason`'s `value`).
enum Shown<'a> {
    /// A rule that ran and failed: since Kubernetes 1.35 the value of the node it sits on, or
    /// nothing for an object or a list (`field.OmitValueType`).
    Node(Option<&'a Value>),
    /// A rule that could not run: the node's type (`sts.Type`), e.g. `"object"`.
    Type,
}

/// `fieldErrorForReason`: the rule's `reason` picks the error type.
fn rule_error(
    field: String,
    ty: &str,
    shown: Shown,
    reason: Option<&str>,
    message: &str,
) -> FieldError {
    // kube's root path is nil, printed `<nil>`.
    let field = if field.is_empty() {
        "<nil>".to_string()
    } else {
        field
    };
    let type_value = Value::String(ty.to_string());
    let value = match shown {
        Shown::Node(_) if ty == "object" || ty == "array" => None,
        Shown::Node(Some(v)) => Some(v),
        Shown::Node(None) | Shown::Type => Some(&type_value),
    };
    match (reason, value) {
        (Some("FieldValueForbidden"), _) => FieldError::forbidden(field, message),
        (Some("FieldValueRequired"), _) => FieldError::required(field, message),
        (Some("FieldValueDuplicate"), Some(v)) => FieldError::duplicate(field, v),
        (Some("FieldValueDuplicate"), None) => FieldError::duplicate_omitted(field),
        (_, Some(v)) => FieldError::invalid(field, v, message),
        (_, None) => FieldError::invalid_omitted(field, message),
    }
}

/// The value at a kube-cel error path (`spec.items[2].name`, map keys joined with dots).
fn value_at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut node = obj;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, indices) = part.split_once('[').unwrap_or((part, ""));
        node = node.get(name)?;
        for i in indices.split(['[', ']']).filter(|i| !i.is_empty()) {
            node = node.get(i.parse::<usize>().ok()?)?;
        }
    }
    Some(node)
}

fn is_optional_old_self(rule: &Value) -> bool {
    rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true)
}

/// A copy of the schema without `optionalOldSelf` rules (kube-cel binds `oldSelf` to `null`
/// for them, where kube binds an `optional`; we evaluate those ourselves).
fn without_optional_rules(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = serde_json::Map::new();
    for (k, v) in map {
        let v = match k.as_str() {
            "x-kubernetes-validations" => Value::Array(
                v.as_array()
                    .map(|a| {
                        a.iter()
                            .filter(|r| !is_optional_old_self(r))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "properties" => Value::Object(
                v.as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(pk, pv)| (pk.clone(), without_optional_rules(pv)))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "items" | "additionalProperties" => without_optional_rules(v),
            "allOf" | "anyOf" | "oneOf" => Value::Array(
                v.as_array()
                    .map(|a| a.iter().map(without_optional_rules).collect())
                    .unwrap_or_default(),
            ),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

/// Evaluates every rule of `schema` against `obj` (and `old` for transition rules).
/// kube words a rule that fails at runtime `<cel error> evaluating rule: <rule>` (cel-go's
/// errors start lower-case, e.g. `no such key: x`).
fn runtime_error_message(kube_cel_message: &str, rule: &str) -> String {
    let Some(err) = kube_cel_message.strip_prefix("rule evaluation error: ") else {
        return kube_cel_message.to_string();
    };
    let mut chars = err.chars();
    let err = match chars.next() {
        Some(c) => c.to_lowercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    };
    format!("{err} evaluating rule: {}", rule.trim())
}

/// kube-cel joins map keys with dots (`spec.labels.a`); kube's CEL validator writes them as
/// `field.Path.Key` (`spec.labels[a]`). Rewrites the path by walking the schema.
fn kube_path(schema: &Value, path: &str) -> String {
    let mut out = String::new();
    let mut node = schema;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if let Some(sub) = node.get("properties").and_then(|p| p.get(name)) {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
            node = sub;
        } else if let Some(sub) = node.get("additionalProperties").filter(|a| a.is_object()) {
            out.push_str(&format!("[{name}]"));
            node = sub;
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
            node = &Value::Null;
        }
        for _ in indices.matches('[') {
            node = node.get("items").unwrap_or(&Value::Null);
        }
        out.push_str(indices);
    }
    out
}

/// kube-cel's error path (`spec.items[2].name`) as a sort key that orders paths as a
/// depth-first walk visits them: a node before its children, names by bytes, indices by number.
fn walk_order(path: &str) -> Vec<(String, Vec<usize>)> {
    path.split('.')
        .filter(|p| !p.is_empty())
        .map(|part| {
            let (name, indices) = part.split_once('[').unwrap_or((part, ""));
            let indices = indices
                .split(['[', ']'])
                .filter_map(|i| i.parse().ok())
                .collect();
            (name.to_string(), indices)
        })
        .collect()
}

/// Each error comes with whether its rule is a transition rule (uses `oldSelf`).
pub(crate) fn evaluate(
    schema: &Value,
    rules: &Rules,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<(FieldError, bool)> {
    let mut out = Vec::new();
    if let Err(errors) = VALIDATOR.with(|v| v.validate_compiled(&rules.compiled, obj, old)) {
        let mut errors = errors.into_vec();
        // The compiled tree keeps properties in a hash map: put the errors back in the order
        // of a walk of the schema (a node's rules, then its properties by name, items by index).
        errors.sort_by_cached_key(|e| walk_order(&e.field_path));
        for e in errors {
            let ty = rules
                .index
                .get(&e.rule)
                .map(|(t, _)| t.as_str())
                .unwrap_or("object");
            let transition = e.rule.contains("oldSelf");
            let field = kube_path(schema, &e.field_path);
            let error = match e.kind {
                kube_cel::ErrorKind::ValidationFailure => rule_error(
                    field,
                    ty,
                    Shown::Node(value_at(obj, &e.field_path)),
                    e.reason.as_deref(),
                    &e.message,
                ),
                _ => rule_error(
                    field,
                    ty,
                    Shown::Type,
                    None,
                    &runtime_error_message(&e.message, &e.rule),
                ),
            };
            out.push((error, transition));
        }
    }
    let mut optional = Vec::new();
    optional_old_self::walk(schema, obj, old, "", &mut optional);
    out.extend(optional.into_iter().map(|e| (e, true)));
    out
}

/// `optionalOldSelf: true` rules: `oldSelf` is `optional.of(old)` on update when the old value
/// exists and `optional.none()` otherwise, and the rule runs in both cases.
mod optional_old_self {
    use std::sync::Arc;

    use kube_cel::cel::objects::OptionalValue;
    use kube_cel::cel::{Context, Program, Value as CelValue};
    use kube_cel::KubeCelExt;
    use serde_json::Value;

    use super::{is_optional_old_self, rule_error, runtime_error_message, Shown};
    use crate::apiserver::schema::FieldError;

    fn join(path: &str, name: &str) -> String {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    }

    fn to_cel(v: &Value) -> CelValue {
        kube_cel::cel::to_value(v).unwrap_or(CelValue::Null)
    }

    enum Outcome {
        Pass,
        Fail(String),
        Error(String),
    }

    fn eval_rule(rule: &Value, value: &Value, old: Option<&Value>) -> Outcome {
        let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
        let program = match Program::compile(text) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(format!("compilation failed: {e}")),
        };
        let mut ctx = Context::default();
        ctx.register_all();
        ctx.add_variable_from_value("self", to_cel(value));
        let opt = match old {
            Some(o) => OptionalValue::of(to_cel(o)),
            None => OptionalValue::none(),
        };
        ctx.add_variable_from_value("oldSelf", CelValue::Opaque(Arc::new(opt)));
        match program.execute(&ctx) {
            Ok(CelValue::Bool(true)) => Outcome::Pass,
            Ok(CelValue::Bool(false)) => {
                if let Some(expr) = rule.get("messageExpression").and_then(Value::as_str) {
                    if let Ok(p) = Program::compile(expr) {
                        if let Ok(CelValue::String(s)) = p.execute(&ctx) {
                            if !s.trim().is_empty() && !s.contains('\n') {
                                return Outcome::Fail(s.to_string());
                            }
                        }
                    }
                }
                Outcome::Fail(message_or_default(rule))
            }
            Ok(_) => Outcome::Error(format!("rule \"{text}\" did not evaluate to bool")),
            Err(e) => Outcome::Error(runtime_error_message(
                &format!("rule evaluation error: {e}"),
                text,
            )),
        }
    }

    /// `ruleMessageOrDefault`.
    fn message_or_default(rule: &Value) -> String {
        match rule
            .get("message")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty())
        {
            Some(m) => m.to_string(),
            None => format!(
                "failed rule: {}",
                rule.get("rule")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .trim()
            ),
        }
    }

    pub(super) fn walk(
        schema: &Value,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        out: &mut Vec<FieldError>,
    ) {
        if let Some(rules) = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
            for rule in rules.iter().filter(|r| is_optional_old_self(r)) {
                let mut field = path.to_string();
                if let Some(fp) = rule.get("fieldPath").and_then(Value::as_str) {
                    field = join(&field, fp.trim_start_matches('.'));
                }
                match eval_rule(rule, value, old) {
                    Outcome::Pass => {}
                    Outcome::Fail(msg) => {
                        let reason = rule.get("reason").and_then(Value::as_str);
                        out.push(rule_error(
                            field,
                            ty,
                            Shown::Node(Some(value)),
                            reason,
                            &msg,
                        ));
                    }
                    Outcome::Error(msg) => out.push(rule_error(field, ty, Shown::Type, None, &msg)),
                }
            }
        }
        match value {
            Value::Object(map) => {
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                for (k, v) in map {
                    let Some(sub) = props.and_then(|p| p.get(k)).or(additional) else {
                        continue;
                    };
                    walk(sub, v, old.and_then(|o| o.get(k)), &join(path, k), out);
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) else {
                    return;
                };
                // Only `map` lists correlate items with the old list (by their keys).
                let keys: Vec<&str> = if schema
                    .get("x-kubernetes-list-type")
                    .and_then(Value::as_str)
                    == Some("map")
                {
                    schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                for (i, item) in items.iter().enumerate() {
                    let old_item = if keys.is_empty() {
                        None
                    } else {
                        old.and_then(Value::as_array).and_then(|olds| {
                            olds.iter()
                                .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
                        })
                    };
                    walk(item_schema, item, old_item, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
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
