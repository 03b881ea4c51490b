//! `x-kubernetes-validations` CEL rules during admission (via kube-cel), worded like
//! apiextensions-apiserver.

use crate::apiserver_schema_fixtures;

use apiserver_schema_fixtures::{cr, crd_with};
use quartet_sandbox::apiserver::schema::admit_custom_resource;
use serde_json::{json, Value};

fn crd_with_rules(rules: Value) -> Value {
    crd_with(
        json!({
            "type": "object",
            "x-kubernetes-validations": rules,
            "properties": {
                "min": {"type": "integer"},
                "max": {"type": "integer"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "name": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "name is immutable"}
                ]},
                "tag": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "oldSelf.hasValue() || self.startsWith('t')", "optionalOldSelf": true,
                     "message": "new tags start with t"}
                ]}
            }
        }),
        json!({}),
    )
}

fn run(crd: &Value, spec: Value, old_spec: Option<Value>) -> Result<Value, Vec<String>> {
    let mut obj = cr(spec);
    let old = old_spec.map(cr);
    admit_custom_resource(crd, "v1alpha1", &mut obj, old.as_ref())
        .map(|_| obj)
        .map_err(|e| e.iter().map(|e| e.to_string()).collect())
}

#[test]
fn failing_rule_reports_its_message_on_the_declaring_field() {
    let crd = crd_with_rules(
        json!([{"rule": "self.min <= self.max", "message": "min must not exceed max"}]),
    );
    assert!(run(&crd, json!({"min": 1, "max": 2}), None).is_ok());
    assert_eq!(
        run(&crd, json!({"min": 3, "max": 2}), None).unwrap_err(),
        vec![r#"spec: Invalid value: min must not exceed max"#]
    );
}

#[test]
fn rule_without_message_reports_failed_rule() {
    let crd = crd_with_rules(json!([{"rule": "self.min <= self.max"}]));
    assert_eq!(
        run(&crd, json!({"min": 3, "max": 2}), None).unwrap_err(),
        vec![r#"spec: Invalid value: failed rule: self.min <= self.max"#]
    );
}

#[test]
fn message_expression_builds_the_message() {
    let crd = crd_with_rules(json!([{
        "rule": "self.min <= self.max",
        "messageExpression": "'min ' + string(self.min) + ' exceeds max ' + string(self.max)"
    }]));
    assert_eq!(
        run(&crd, json!({"min": 3, "max": 2}), None).unwrap_err(),
        vec![r#"spec: Invalid value: min 3 exceeds max 2"#]
    );
}

#[test]
fn field_path_and_reason_change_the_reported_field_and_error_type() {
    let crd = crd_with_rules(json!([{
        "rule": "self.min <= self.max", "message": "too big",
        "fieldPath": ".min", "reason": "FieldValueForbidden"
    }]));
    let mut obj = cr(json!({"min": 3, "max": 2}));
    let errs = admit_custom_resource(&crd, "v1alpha1", &mut obj, None).unwrap_err();
    assert_eq!(errs[0].to_string(), "spec.min: Forbidden: too big");
    assert_eq!(errs[0].reason, "FieldValueForbidden");
}

#[test]
fn transition_rules_run_only_on_update_with_an_old_value() {
    let crd = crd_with_rules(json!([]));
    assert!(
        run(&crd, json!({"name": "a"}), None).is_ok(),
        "create: no oldSelf, rule skipped"
    );
    assert!(
        run(&crd, json!({"name": "b"}), Some(json!({}))).is_ok(),
        "no old value for the field"
    );
    assert!(run(&crd, json!({"name": "a"}), Some(json!({"name": "a"}))).is_ok());
    assert_eq!(
        run(&crd, json!({"name": "b"}), Some(json!({"name": "a"}))).unwrap_err(),
        vec![r#"spec.name: Invalid value: "b": name is immutable"#]
    );
}

#[test]
fn optional_old_self_rules_also_run_on_create() {
    let crd = crd_with_rules(json!([]));
    assert_eq!(
        run(&crd, json!({"tag": "x"}), None).unwrap_err(),
        vec![r#"spec.tag: Invalid value: "x": new tags start with t"#]
    );
    assert!(run(&crd, json!({"tag": "tx"}), None).is_ok());
    assert!(run(&crd, json!({"tag": "x"}), Some(json!({"tag": "x"}))).is_ok());
}

#[test]
fn cel_rules_are_skipped_when_schema_errors_block_them() {
    let crd = crd_with_rules(
        json!([{"rule": "self.min <= self.max", "message": "min must not exceed max"}]),
    );
    assert_eq!(
        run(&crd, json!({"min": 3, "max": 2, "mode": "zzz"}), None).unwrap_err(),
        vec![
            r#"spec.mode: Unsupported value: "zzz": supported values: "a", "b""#,
            r#"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#
        ]
    );
}

#[test]
fn rules_see_schema_defaults() {
    let mut crd =
        crd_with_rules(json!([{"rule": "self.mode == 'a'", "message": "mode must be a"}]));
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["mode"]["default"] = json!("a");
    let obj = run(&crd, json!({}), None).unwrap();
    assert_eq!(obj["spec"]["mode"], "a");
}

#[test]
fn rules_on_unchanged_values_are_ratcheted_on_update() {
    let crd = crd_with_rules(
        json!([{"rule": "self.min <= self.max", "message": "min must not exceed max"}]),
    );
    assert!(run(
        &crd,
        json!({"min": 3, "max": 2}),
        Some(json!({"min": 3, "max": 2}))
    )
    .is_ok());
    assert_eq!(
        run(
            &crd,
            json!({"min": 4, "max": 2}),
            Some(json!({"min": 3, "max": 2}))
        )
        .unwrap_err(),
        vec![r#"spec: Invalid value: min must not exceed max"#]
    );
}

#[test]
fn rules_on_map_values_name_the_key_in_brackets() {
    let crd = crd_with(
        json!({"type": "object", "properties": {"limits": {"type": "object", "additionalProperties": {
            "type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0", "message": "must be non-negative"}]
        }}}}),
        json!({}),
    );
    assert_eq!(
        run(&crd, json!({"limits": {"cpu": -1}}), None).unwrap_err(),
        vec![r#"spec.limits[cpu]: Invalid value: -1: must be non-negative"#]
    );
}

#[test]
fn root_rules_can_read_metadata_name() {
    let crd = crd_with(
        json!({"type": "object"}),
        json!({"x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('q')", "message": "names start with q"}]}),
    );
    let mut obj = cr(json!({}));
    let errs = admit_custom_resource(&crd, "v1alpha1", &mut obj, None).unwrap_err();
    assert_eq!(
        errs.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        vec![r#"<nil>: Invalid value: names start with q"#]
    );
    obj["metadata"]["name"] = json!("q1");
    assert!(admit_custom_resource(&crd, "v1alpha1", &mut obj, None).is_ok());
}

#[test]
fn runtime_errors_are_reported_as_evaluating_rule() {
    let crd = crd_with_rules(json!([{"rule": "self.min < self.missing", "message": "unused"}]));
    assert_eq!(
        run(&crd, json!({"min": 1}), None).unwrap_err(),
        vec![
            r#"spec: Invalid value: "object": no such key: missing evaluating rule: self.min < self.missing"#
        ]
    );
}

/// The CRD as the store holds it: a uid and a resourceVersion, so its rules are compiled once.
fn stored(mut crd: Value, resource_version: &str) -> Value {
    crd["metadata"]["uid"] = json!("5e0c7c6c-0000-4000-8000-00000000cel1");
    crd["metadata"]["resourceVersion"] = json!(resource_version);
    crd
}

#[test]
fn a_stored_crd_keeps_its_compiled_rules_until_an_update_changes_them() {
    let v1 = stored(
        crd_with_rules(json!([{"rule": "self.min <= self.max", "message": "min above max"}])),
        "10",
    );
    for _ in 0..3 {
        assert_eq!(
            run(&v1, json!({"min": 3, "max": 2}), None).unwrap_err(),
            vec![r#"spec: Invalid value: min above max"#]
        );
        assert!(run(&v1, json!({"min": 1, "max": 2}), None).is_ok());
    }
    // The same CRD updated (a new resourceVersion): its new rule applies at once.
    let v2 = stored(
        crd_with_rules(json!([{"rule": "self.min < self.max", "message": "min not below max"}])),
        "11",
    );
    assert_eq!(
        run(&v2, json!({"min": 2, "max": 2}), None).unwrap_err(),
        vec![r#"spec: Invalid value: min not below max"#]
    );
    assert!(run(&v1, json!({"min": 2, "max": 2}), None).is_ok());
}

#[test]
fn errors_of_compiled_rules_come_in_the_order_of_the_schema_walk() {
    let crd = stored(
        crd_with(
            json!({"type": "object",
            "x-kubernetes-validations": [{"rule": "false", "message": "spec"}],
            "properties": {
                "b": {"type": "string", "x-kubernetes-validations": [{"rule": "false", "message": "b"}]},
                "a": {"type": "object",
                    "x-kubernetes-validations": [{"rule": "false", "message": "a"}],
                    "properties": {"z": {"type": "string",
                        "x-kubernetes-validations": [{"rule": "false", "message": "a.z"}]}}},
                "a-b": {"type": "string", "x-kubernetes-validations": [{"rule": "false", "message": "a-b"}]},
                "l": {"type": "array", "items": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "false", "message": "item"}]}}
            }}),
            json!({}),
        ),
        "7",
    );
    let items: Vec<String> = (0..11).map(|i| format!("x{i}")).collect();
    let errs = run(
        &crd,
        json!({"b": "x", "a": {"z": "x"}, "a-b": "x", "l": items}),
        None,
    )
    .unwrap_err();
    let fields: Vec<&str> = errs.iter().map(|e| e.split(": ").next().unwrap()).collect();
    let mut expected = vec!["spec", "spec.a", "spec.a.z", "spec.a-b", "spec.b"];
    let list: Vec<String> = (0..11).map(|i| format!("spec.l[{i}]")).collect();
    expected.extend(list.iter().map(String::as_str));
    assert_eq!(fields, expected);
}
