//! `CustomResourceDefinition` validation before storage.

use crate::apiserver_schema_fixtures;

use apiserver_schema_fixtures::crd;
use quartet_sandbox::apiserver::schema::validate_crd;
use serde_json::json;

fn errs(c: &serde_json::Value) -> Vec<String> {
    validate_crd(c)
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn a_valid_crd_is_accepted() {
    validate_crd(&crd()).unwrap();
}

#[test]
fn metadata_name_must_be_plural_dot_group() {
    let mut c = crd();
    c["metadata"]["name"] = json!("policies.secrets.quartet.dev");
    assert_eq!(
        errs(&c),
        vec![
            r#"metadata.name: Invalid value: "policies.secrets.quartet.dev": must be spec.names.plural+"."+spec.group"#
        ]
    );
}

#[test]
fn group_needs_a_dot() {
    let mut c = crd();
    c["spec"]["group"] = json!("quartet");
    c["metadata"]["name"] = json!("secretspolicies.quartet");
    assert_eq!(
        errs(&c),
        vec![r#"spec.group: Invalid value: "quartet": should be a domain with at least one dot"#]
    );
}

#[test]
fn kind_is_required_and_scope_must_be_known() {
    let mut c = crd();
    c["spec"]["names"].as_object_mut().unwrap().remove("kind");
    c["spec"]["scope"] = json!("Global");
    assert_eq!(
        errs(&c),
        vec![
            r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#,
            "spec.names.kind: Required value",
        ]
    );
}

#[test]
fn exactly_one_storage_version_is_required() {
    let mut c = crd();
    c["spec"]["versions"][0]["storage"] = json!(false);
    let e = errs(&c);
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("spec.versions: Invalid value: "), "{e:?}");
    assert!(
        e[0].ends_with(": must have exactly one version marked as storage version"),
        "{e:?}"
    );
}

#[test]
fn at_least_one_served_version_is_required() {
    let mut c = crd();
    c["spec"]["versions"][0]["served"] = json!(false);
    let e = errs(&c);
    assert!(
        e[0].ends_with(": must have at least one version marked as served"),
        "{e:?}"
    );
}

#[test]
fn schemas_must_be_structural() {
    let mut c = crd();
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["loose"] = json!({});
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["list"] = json!({"type": "array"});
    assert_eq!(
        errs(&c),
        vec![
            "spec.validation.openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified",
            "spec.validation.openAPIV3Schema.properties[spec].properties[loose].type: Required value: must not be empty for specified object fields",
        ]
    );
}

#[test]
fn a_missing_schema_is_required() {
    let mut c = crd();
    c["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    assert_eq!(
        errs(&c),
        vec!["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
    );
}

#[test]
fn cel_rules_that_do_not_compile_are_rejected() {
    let mut c = crd();
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["x-kubernetes-validations"] = json!([{"rule": "self.count >", "message": "m"}]);
    let e = errs(&c);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with(
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self.count >", Message:"m", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: "#
        ),
        "{e:?}"
    );
}

#[test]
fn printer_column_types_are_checked() {
    let mut c = crd();
    c["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = json!("text");
    assert_eq!(
        errs(&c),
        vec![
            r#"spec.additionalPrinterColumns[0].type: Unsupported value: "text": supported values: "boolean", "date", "integer", "number", "string""#
        ]
    );
}

#[test]
fn defaults_must_satisfy_their_schema() {
    let mut c = crd();
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["type"]["default"] = json!("foo");
    assert_eq!(
        errs(&c),
        vec![
            r#"spec.validation.openAPIV3Schema.properties[spec].properties[type].default: Unsupported value: "foo": supported values: "acl", "rgp", "egp""#
        ]
    );
}

#[test]
fn cel_rules_may_only_reference_self_and_old_self() {
    let mut c = crd();
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["x-kubernetes-validations"] = json!([{"rule": "object.spec.count > 0"}]);
    let e = errs(&c);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains(
            "x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{"
        ),
        "{e:?}"
    );
    assert!(e[0].contains("compilation failed: "), "{e:?}");
}
