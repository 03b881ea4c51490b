//! Validation of `CustomResourceDefinition` objects before they are stored
//! (`apiextensions/validation.ValidateCustomResourceDefinition`, main rules): names, group,
//! scope, versions (served/storage), structural schemas, CEL rules that must compile, and
//! printer columns.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use super::errors::go_quote;
use super::metadata::dns1123_subdomain_errors;
use super::FieldError;

const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

fn dns1035_label_errors(value: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re =
        RE.get_or_init(|| Regex::new(&format!("^{DNS1035_LABEL_FMT}$")).expect("static regex"));
    let mut out = Vec::new();
    if value.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    if !re.is_match(value) {
        out.push(format!(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL_FMT}')"
        ));
    }
    out
}

fn s(v: &Value) -> Option<&str> {
    v.as_str()
}

/// `old` is the stored CRD on update (per-rule CEL cost limits are not applied to a schema the
/// update leaves unchanged).
pub(crate) fn validate(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &crd["spec"];
    let group = s(&spec["group"]).unwrap_or("");
    let names = &spec["names"];
    let plural = s(&names["plural"]).unwrap_or("");
    let name = s(&crd["metadata"]["name"]).unwrap_or("");

    // metadata.name == <plural>.<group>
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            &Value::String(name.into()),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }

    // group
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        for msg in dns1123_subdomain_errors(group) {
            errs.push(FieldError::invalid(
                "spec.group",
                &Value::String(group.into()),
                &msg,
            ));
        }
        if group.split('.').count() < 2 {
            errs.push(FieldError::invalid(
                "spec.group",
                &Value::String(group.into()),
                "should be a domain with at least one dot",
            ));
        }
    }

    // scope
    match s(&spec["scope"]) {
        None | Some("") => errs.push(FieldError::required("spec.scope", "")),
        Some("Cluster") | Some("Namespaced") => {}
        Some(other) => errs.push(FieldError::not_supported(
            "spec.scope",
            &Value::String(other.into()),
            &["Cluster".into(), "Namespaced".into()],
        )),
    }

    validate_names(names, &mut errs);
    validate_versions(spec, &mut errs);
    validate_schemas(crd, old, &mut errs);
    validate_hoisted_printer_columns(spec, &mut errs);
    errs
}

/// Printer columns shared by every version, validated once as `spec.additionalPrinterColumns`
/// (where the conversion to the internal version puts them), after the schema as in kube.
fn validate_hoisted_printer_columns(spec: &Value, errs: &mut Vec<FieldError>) {
    let versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let Some(first) = versions.first() else {
        return;
    };
    if versions
        .iter()
        .all(|v| v.get("additionalPrinterColumns") == first.get("additionalPrinterColumns"))
    {
        validate_printer_columns(&first["additionalPrinterColumns"], "spec", errs);
    }
}

fn validate_names(names: &Value, errs: &mut Vec<FieldError>) {
    let plural = s(&names["plural"]).unwrap_or("");
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    } else {
        for msg in dns1035_label_errors(plural) {
            errs.push(FieldError::invalid(
                "spec.names.plural",
                &Value::String(plural.into()),
                &msg,
            ));
        }
    }
    if let Some(singular) = s(&names["singular"]).filter(|v| !v.is_empty()) {
        for msg in dns1035_label_errors(singular) {
            errs.push(FieldError::invalid(
                "spec.names.singular",
                &Value::String(singular.into()),
                &msg,
            ));
        }
    }
    for (field, required) in [("kind", true), ("listKind", false)] {
        let path = format!("spec.names.{field}");
        match s(&names[field]).filter(|v| !v.is_empty()) {
            None if required => errs.push(FieldError::required(path, "")),
            None => {}
            Some(kind) if !dns1035_label_errors(&kind.to_lowercase()).is_empty() => {
                errs.push(FieldError::invalid(
                    path,
                    &Value::String(kind.into()),
                    &format!(
                        "may have mixed case, but should otherwise match: {DNS1035_LABEL_FMT}"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    if let (Some(kind), Some(list_kind)) = (s(&names["kind"]), s(&names["listKind"])) {
        if !kind.is_empty() && kind == list_kind {
            errs.push(FieldError::invalid(
                "spec.names.listKind",
                &Value::String(list_kind.into()),
                "kind and listKind may not be the same",
            ));
        }
    }
    if let Some(shorts) = names["shortNames"].as_array() {
        for (i, short) in shorts.iter().enumerate() {
            let v = s(short).unwrap_or("");
            for msg in dns1035_label_errors(v) {
                errs.push(FieldError::invalid(
                    format!("spec.names.shortNames[{i}]"),
                    &Value::String(v.into()),
                    &msg,
                ));
            }
        }
    }
}

fn validate_versions(spec: &Value, errs: &mut Vec<FieldError>) {
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(
            "spec.versions",
            "must have at least one version",
        ));
        return;
    }
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            &spec["versions"],
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions.iter().any(|v| v["served"].as_bool() == Some(true)) {
        errs.push(FieldError::invalid(
            "spec.versions",
            &spec["versions"],
            "must have at least one version marked as served",
        ));
    }
    // Identical per-version printer columns are moved to `spec.additionalPrinterColumns` by
    // the v1 → internal conversion, and kube names their errors there.
    let printer_columns_hoisted = versions
        .iter()
        .all(|v| v.get("additionalPrinterColumns") == versions[0].get("additionalPrinterColumns"));
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let base = format!("spec.versions[{i}]");
        let name = s(&v["name"]).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{base}.name"), ""));
        } else {
            for msg in dns1035_label_errors(name) {
                errs.push(FieldError::invalid(
                    format!("{base}.name"),
                    &Value::String(name.into()),
                    &msg,
                ));
            }
            if seen.contains(&name) {
                errs.push(FieldError::invalid(
                    format!("{base}.name"),
                    &Value::String(name.into()),
                    "must be unique",
                ));
            }
            seen.push(name);
        }
        if !v["schema"]["openAPIV3Schema"].is_object() {
            errs.push(FieldError::required(
                format!("{base}.schema.openAPIV3Schema"),
                "schemas are required",
            ));
        }
        if !printer_columns_hoisted {
            validate_printer_columns(&v["additionalPrinterColumns"], &base, errs);
        }
    }
}

/// The schemas, named as kube-apiserver names them (`spec.validation.openAPIV3Schema` when all
/// versions share one): structure, CEL rules that must compile and, when both hold, the rules'
/// estimated cost against Kubernetes' budgets.
fn validate_schemas(crd: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    for (path, version, schema) in super::cel_cost::crd_schemas(crd) {
        let mut schema_errs = Vec::new();
        structural(schema, &path, Position::Root, &mut schema_errs);
        let structural_ok = schema_errs.is_empty();
        cel_rules(schema, &path, &mut schema_errs);
        errs.extend(schema_errs);
        if structural_ok {
            let unchanged = old.is_some_and(|o| {
                super::version_schema(o, &version) == super::version_schema(crd, &version)
            });
            let costs = super::cel_cost::schema_costs(schema, &path);
            errs.extend(super::cel_cost::cost_errors(&costs, unchanged));
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Position {
    Root,
    Property,
    Items,
    AdditionalProperties,
}

/// The structural-schema rules (`structuralschema.ValidateStructural`) that matter in practice.
fn structural(schema: &Value, path: &str, pos: Position, errs: &mut Vec<FieldError>) {
    let flag = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let int_or_string = flag("x-kubernetes-int-or-string");
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    if ty.is_empty() && !int_or_string && !preserve {
        let detail = match pos {
            Position::Root => "must not be empty at the root",
            Position::Property => "must not be empty for specified object fields",
            Position::Items => "must not be empty for specified array items",
            Position::AdditionalProperties => {
                "must not be empty for specified additionalProperties"
            }
        };
        errs.push(FieldError::required(format!("{path}.type"), detail));
    }
    if pos == Position::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            &Value::String(ty.into()),
            "must be object at the root",
        ));
    }
    if !ty.is_empty()
        && !["object", "array", "string", "integer", "number", "boolean"].contains(&ty)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            &Value::String(ty.into()),
            &["array", "boolean", "integer", "number", "object", "string"].map(String::from),
        ));
    }
    if ty == "array" && !schema.get("items").is_some_and(Value::is_object) {
        errs.push(FieldError::required(
            format!("{path}.items"),
            "must be specified",
        ));
    }
    if schema.get("properties").is_some()
        && schema
            .get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(false))
    {
        errs.push(FieldError::forbidden(
            format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        if let Err(e) = Regex::new(p) {
            errs.push(FieldError::invalid(
                format!("{path}.pattern"),
                &Value::String(p.into()),
                &format!(
                    "must be a valid regular expression, but isn't: {}",
                    e.to_string().lines().last().unwrap_or("")
                ),
            ));
        }
    }
    if let Some(default) = schema.get("default").filter(|d| !d.is_null()) {
        // Defaults must themselves be valid (kube validates them with the node's schema) and
        // must not carry fields pruning would drop.
        let default_path = format!("{path}.default");
        let mut copy = default.clone();
        let mut pruned = Vec::new();
        super::structural::prune(schema, &mut copy, &default_path, false, &mut pruned);
        for p in pruned {
            errs.push(FieldError::invalid(
                p,
                &Value::String(String::new()),
                "must not have unknown fields",
            ));
        }
        super::structural::apply_defaults(schema, &mut copy);
        super::structural::validate(schema, &copy, &default_path, errs);
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            let sub_path = format!("{path}.properties[{k}]");
            if pos == Position::Root && k == "metadata" {
                let allowed = sub.as_object().is_some_and(|m| {
                    m.keys()
                        .all(|key| ["type", "properties", "description"].contains(&key.as_str()))
                        && m.get("properties")
                            .and_then(Value::as_object)
                            .is_none_or(|p| p.keys().all(|pk| pk == "name" || pk == "generateName"))
                });
                if !allowed {
                    errs.push(FieldError::forbidden(
                        sub_path.clone(),
                        "must not specify anything other than name and generateName, but metadata is implicitly specified",
                    ));
                }
            }
            structural(sub, &sub_path, Position::Property, errs);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        structural(items, &format!("{path}.items"), Position::Items, errs);
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        structural(
            ap,
            &format!("{path}.additionalProperties"),
            Position::AdditionalProperties,
            errs,
        );
    }
    if ty == "array" && schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map")
    {
        let keys = schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array);
        if keys.is_none_or(|k| k.is_empty()) {
            errs.push(FieldError::required(
                format!("{path}.x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
    }
}

/// Go's `%#v` of an `apiextensions.ValidationRule`, as kube prints it in CEL compile errors.
fn go_rule(rule: &Value) -> String {
    let str_field = |k: &str| go_quote(rule.get(k).and_then(Value::as_str).unwrap_or(""));
    let reason = match rule.get("reason").and_then(Value::as_str) {
        Some(r) => format!("(*apiextensions.FieldValueErrorReason)({})", go_quote(r)),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".into(),
    };
    let optional = match rule.get("optionalOldSelf").and_then(Value::as_bool) {
        Some(b) => format!("(*bool)({b})"),
        None => "(*bool)(nil)".into(),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        str_field("rule"),
        str_field("message"),
        str_field("messageExpression"),
        str_field("fieldPath"),
    )
}

/// Every `x-kubernetes-validations` rule must compile (parsed by kube-cel's CEL parser).
fn cel_rules(schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for (i, rule) in rules.iter().enumerate() {
            let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
            let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
            if text.trim().is_empty() {
                errs.push(FieldError::required(format!("{rule_path}.rule"), ""));
                continue;
            }
            let one = serde_json::json!({"x-kubernetes-validations": [rule]});
            let mut problems = super::cel::compile_errors(&one);
            if problems.is_empty() {
                // Only `self` and `oldSelf` are declared in CRD rules, besides the variables
                // that macros bind (`self.all(s, ...)`): kube-cel reports those as undeclared,
                // while the real API server's CEL environment accepts them.
                let bound = macro_variables(text);
                problems.extend(
                    kube_cel::check_rule_scope(text, kube_cel::ScopeContext::CrdValidation)
                        .into_iter()
                        .filter(|w| w.kind == kube_cel::WarningKind::WrongScope)
                        .filter(|w| {
                            w.message
                                .split('\'')
                                .nth(1)
                                .is_none_or(|var| !bound.iter().any(|b| b == var))
                        })
                        .map(|w| w.message),
                );
            }
            for e in problems {
                let field = if e.contains("messageExpression") {
                    format!("{rule_path}.messageExpression")
                } else {
                    format!("{rule_path}.rule")
                };
                errs.push(FieldError {
                    field,
                    reason: super::errors::INVALID,
                    message: format!("Invalid value: {}: compilation failed: {e}", go_rule(rule)),
                });
            }
            if let Some(fp) = rule.get("fieldPath").and_then(Value::as_str) {
                if !fp.is_empty() && !fp.starts_with('.') {
                    errs.push(FieldError::invalid(
                        format!("{rule_path}.fieldPath"),
                        &Value::String(fp.into()),
                        "fieldPath must be a valid path: expected [ or . at 0",
                    ));
                }
            }
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            cel_rules(sub, &format!("{path}.properties[{k}]"), errs);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        cel_rules(items, &format!("{path}.items"), errs);
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        cel_rules(ap, &format!("{path}.additionalProperties"), errs);
    }
}

fn validate_printer_columns(columns: &Value, base: &str, errs: &mut Vec<FieldError>) {
    let Some(columns) = columns.as_array() else {
        return;
    };
    for (i, col) in columns.iter().enumerate() {
        let path = format!("{base}.additionalPrinterColumns[{i}]");
        if col["name"].as_str().is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        }
        match col["type"].as_str() {
            None | Some("") => errs.push(FieldError::required(format!("{path}.type"), "")),
            Some("integer" | "number" | "string" | "boolean" | "date") => {}
            Some(other) => errs.push(FieldError::not_supported(
                format!("{path}.type"),
                &Value::String(other.into()),
                &["boolean", "date", "integer", "number", "string"].map(String::from),
            )),
        }
        if let Some(f) = col["format"].as_str().filter(|f| !f.is_empty()) {
            let ok = [
                "int32",
                "int64",
                "float",
                "double",
                "byte",
                "date",
                "date-time",
                "password",
            ];
            if !ok.contains(&f) {
                errs.push(FieldError::not_supported(
                    format!("{path}.format"),
                    &Value::String(f.into()),
                    &ok.map(String::from),
                ));
            }
        }
        match col["jsonPath"].as_str() {
            None | Some("") => errs.push(FieldError::required(format!("{path}.jsonPath"), "")),
            Some(jp) => {
                if super::jsonpath::parse(jp).is_err() {
                    errs.push(FieldError::invalid(
                        format!("{path}.jsonPath"),
                        &Value::String(jp.into()),
                        "must be a simple json path",
                    ));
                }
            }
        }
    }
}

/// Names that CEL macros bind in `rule`: the iteration variables of `all`, `exists`,
/// `exists_one`, `map`, `filter` (one- and two-variable forms) and `cel.bind`.
fn macro_variables(rule: &str) -> Vec<String> {
    static MACRO: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = MACRO.get_or_init(|| {
        regex::Regex::new(
            r"(?:\.(?:all|exists|exists_one|map|filter|transformList|transformMap)|cel\.bind)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,(?:\s*([A-Za-z_][A-Za-z0-9_]*)\s*,)?",
        )
        .expect("macro regex")
    });
    re.captures_iter(rule)
        .flat_map(|c| {
            [c.get(1), c.get(2)]
                .into_iter()
                .flatten()
                .map(|m| m.as_str().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod macro_tests {
    use super::macro_variables;

    #[test]
    fn macro_iteration_variables_are_found() {
        assert_eq!(
            macro_variables("self.all(s, self.exists_one(t, t.id == s.id))"),
            vec!["s", "t"]
        );
        assert_eq!(macro_variables("self.map(k, v, v > 0)"), vec!["k", "v"]);
        assert!(macro_variables("self.size() > 0").is_empty());
    }
}
