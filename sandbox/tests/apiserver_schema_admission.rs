//! Custom-resource admission: pruning, defaulting and OpenAPI v3 validation, worded like
//! kube-apiserver v1.35 and v1.36.

use crate::apiserver_schema_fixtures;

use apiserver_schema_fixtures::{cr, crd, crd_with, spec_schema};
use quartet_sandbox::apiserver::schema::{admit_custom_resource, FieldError};
use serde_json::{json, Value};

fn admit(spec: Value) -> Result<Value, Vec<FieldError>> {
    let mut obj = cr(spec);
    admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).map(|_| obj)
}

fn errors(spec: Value) -> Vec<String> {
    match admit(spec) {
        Ok(o) => panic!("expected errors, admitted {o}"),
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn unknown_fields_are_pruned_and_reported_with_their_paths() {
    let mut obj = cr(json!({"policy": "p", "foo": 1, "rules": [{"name": "a", "bogus": true}]}));
    obj["status"] = json!({"unknown": 1});
    obj["topLevel"] = json!("x");
    obj["metadata"]["bogusMeta"] = json!(1);
    let adm = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).unwrap();
    assert_eq!(
        adm.unknown_fields,
        vec![
            "metadata.bogusMeta",
            "spec.foo",
            "spec.rules[0].bogus",
            "status.unknown",
            "topLevel"
        ]
    );
    assert!(obj["spec"].get("foo").is_none());
    assert_eq!(
        obj["spec"]["rules"][0],
        json!({"name": "a", "enabled": true})
    );
    assert!(obj.get("topLevel").is_none());
    assert_eq!(obj["apiVersion"], "secrets.quartet.dev/v1alpha1");
    assert_eq!(obj["metadata"]["namespace"], "default");
}

#[test]
fn preserve_unknown_fields_and_embedded_resources_keep_their_content() {
    let mut obj = cr(json!({
        "policy": "p",
        "extra": {"anything": {"goes": [1, 2]}},
        "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
    }));
    let adm = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).unwrap();
    assert!(adm.unknown_fields.is_empty(), "{:?}", adm.unknown_fields);
    assert_eq!(obj["spec"]["extra"], json!({"anything": {"goes": [1, 2]}}));
    assert_eq!(obj["spec"]["template"]["metadata"]["name"], "x");
    assert_eq!(obj["spec"]["template"]["data"]["a"], "b");
}

#[test]
fn defaults_fill_absent_fields_and_fields_inside_defaulted_objects() {
    let obj = admit(json!({"policy": "p"})).unwrap();
    assert_eq!(obj["spec"]["type"], "acl");
    // `options` defaults to {} and its own `ttl` default then applies.
    assert_eq!(obj["spec"]["options"], json!({"ttl": "1h"}));
}

#[test]
fn defaults_apply_inside_existing_objects_but_do_not_overwrite_values() {
    let obj = admit(json!({"policy": "p", "type": "rgp", "options": {"renew": true}})).unwrap();
    assert_eq!(obj["spec"]["type"], "rgp");
    assert_eq!(obj["spec"]["options"], json!({"ttl": "1h", "renew": true}));
}

#[test]
fn null_in_a_non_nullable_field_is_dropped_or_defaulted_and_kept_when_nullable() {
    let obj = admit(json!({"policy": "p", "type": null, "count": null, "note": null})).unwrap();
    assert_eq!(obj["spec"]["type"], "acl", "null replaced by the default");
    assert!(
        obj["spec"].get("count").is_none(),
        "null without default dropped"
    );
    assert_eq!(obj["spec"]["note"], Value::Null, "nullable keeps null");
}

#[test]
fn enum_violation_is_unsupported_value_listing_supported_values() {
    assert_eq!(
        errors(json!({"policy": "p", "type": "foo"})),
        vec![r#"spec.type: Unsupported value: "foo": supported values: "acl", "rgp", "egp""#]
    );
}

#[test]
fn missing_required_field_is_required_value() {
    assert_eq!(errors(json!({})), vec!["spec.policy: Required value"]);
}

#[test]
fn wrong_type_is_invalid_value_naming_the_json_type() {
    assert_eq!(
        errors(json!({"policy": "p", "count": "string"})),
        vec![
            r#"spec.count: Invalid value: "string": spec.count in body must be of type integer: "string""#
        ]
    );
}

#[test]
fn number_is_not_an_integer_but_integral_float_is() {
    assert_eq!(
        errors(json!({"policy": "p", "count": 1.5})),
        vec![
            r#"spec.count: Invalid value: "number": spec.count in body must be of type integer: "number""#
        ]
    );
    assert!(admit(json!({"policy": "p", "count": 2.0, "ratio": 3})).is_ok());
}

#[test]
fn type_errors_carry_the_field_value_type_invalid_reason() {
    let e = admit(json!({"policy": 5})).unwrap_err();
    assert_eq!(e[0].reason, "FieldValueTypeInvalid");
    assert_eq!(e[0].field, "spec.policy");
}

#[test]
fn int_or_string_accepts_both_and_rejects_others() {
    assert!(admit(json!({"policy": "p", "port": 80})).is_ok());
    assert!(admit(json!({"policy": "p", "port": "http"})).is_ok());
    assert_eq!(
        errors(json!({"policy": "p", "port": true})),
        vec![
            r#"<nil>: Invalid value: "": "spec.port" must validate at least one schema (anyOf)"#,
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer: "boolean""#
        ]
    );
}

#[test]
fn max_length_is_too_long_in_bytes() {
    let long = "a".repeat(65);
    assert_eq!(
        errors(json!({"policy": "p", "name": long})),
        vec!["spec.name: Too long: may not be more than 64 bytes"]
    );
}

#[test]
fn a_string_reports_only_the_first_of_its_length_and_pattern_errors() {
    // kube-openapi's string validator stops at the first failure: maxLength, minLength, pattern.
    assert_eq!(
        errors(json!({"policy": "p", "name": ""})),
        vec![r#"spec.name: Invalid value: "": spec.name in body should be at least 1 chars long"#]
    );
    assert_eq!(
        errors(json!({"policy": "p", "name": "A".repeat(65)})),
        vec!["spec.name: Too long: may not be more than 64 bytes"]
    );
    assert_eq!(
        errors(json!({"policy": "p", "name": "Bad"})),
        vec![
            r#"spec.name: Invalid value: "Bad": spec.name in body should match '^[a-z][a-z0-9-]*$'"#
        ]
    );
}

#[test]
fn minimum_and_maximum_name_the_bound() {
    assert_eq!(
        errors(json!({"policy": "p", "count": -1})),
        vec!["spec.count: Invalid value: -1: spec.count in body should be greater than or equal to 0"]
    );
    assert_eq!(
        errors(json!({"policy": "p", "count": 11})),
        vec![
            "spec.count: Invalid value: 11: spec.count in body should be less than or equal to 10"
        ]
    );
}

#[test]
fn exclusive_minimum_rejects_the_bound_itself() {
    assert_eq!(
        errors(json!({"policy": "p", "ratio": 0})),
        vec!["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]
    );
    assert!(admit(json!({"policy": "p", "ratio": 0.5})).is_ok());
}

#[test]
fn min_items_is_invalid_and_max_items_is_too_many() {
    assert_eq!(
        errors(json!({"policy": "p", "paths": []})),
        vec!["spec.paths: Invalid value: 0: spec.paths in body should have at least 1 items"]
    );
    assert_eq!(
        errors(json!({"policy": "p", "paths": ["a", "b", "c", "d"]})),
        vec!["spec.paths: Too many: 4: must have at most 3 items"]
    );
}

#[test]
fn min_and_max_properties() {
    assert_eq!(
        errors(json!({"policy": "p", "labels": {}})),
        vec![
            "spec.labels: Invalid value: 0: spec.labels in body should have at least 1 properties"
        ]
    );
    assert_eq!(
        errors(json!({"policy": "p", "labels": {"a": "1", "b": "2", "c": "3"}})),
        vec!["spec.labels: Too many: 3: must have at most 2 items"]
    );
}

#[test]
fn additional_properties_values_are_validated_with_dotted_paths() {
    assert_eq!(
        errors(json!({"policy": "p", "labels": {"a": 1}})),
        vec![
            r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#
        ]
    );
}

#[test]
fn list_type_set_rejects_duplicates() {
    assert_eq!(
        errors(json!({"policy": "p", "paths": ["a", "a"]})),
        vec![r#"spec.paths[1]: Duplicate value: "a""#]
    );
}

#[test]
fn a_value_repeated_many_times_is_reported_once_where_it_first_repeats() {
    assert_eq!(
        errors(json!({"policy": "p", "paths": ["a", "a", "a"]})),
        vec![r#"spec.paths[1]: Duplicate value: "a""#]
    );
    assert_eq!(
        errors(json!({"policy": "p", "paths": ["b", "a", "b"]})),
        vec![r#"spec.paths[2]: Duplicate value: "b""#]
    );
}

#[test]
fn list_type_map_reports_a_key_repeated_many_times_once() {
    assert_eq!(
        errors(json!({"policy": "p", "rules": [{"name": "x"}, {"name": "x"}, {"name": "x"}]})),
        vec![r#"spec.rules[1]: Duplicate value: {"name":"x"}"#]
    );
}

#[test]
fn labels_annotations_and_finalizers_of_a_custom_resource_are_checked_like_any_object() {
    let mut obj = cr(json!({"policy": "p"}));
    obj["metadata"]["labels"] = json!({"Bad Key": "v", "ok": "x".repeat(64)});
    obj["metadata"]["annotations"] = json!({"a/b/c": "v"});
    obj["metadata"]["finalizers"] = json!(["example.com/ok", "-bad"]);
    let errs: Vec<String> = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None)
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    let name_part = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    assert_eq!(
        errs,
        vec![
            format!(r#"metadata.labels: Invalid value: "Bad Key": name part {name_part}"#),
            "metadata.labels: Invalid value: \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": must be no more than 63 bytes".to_string(),
            format!(r#"metadata.annotations: Invalid value: "a/b/c": a valid label key {name_part} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"#),
            format!(r#"metadata.finalizers: Invalid value: "-bad": name part {name_part}"#),
        ]
    );
}

#[test]
fn annotations_over_256_kib_in_all_are_too_long() {
    let mut obj = cr(json!({"policy": "p"}));
    obj["metadata"]["annotations"] = json!({"a": "x".repeat(256 * 1024)});
    let errs: Vec<String> = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None)
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs[0],
        "metadata.annotations: Too long: may not be more than 262144 bytes"
    );
}

#[test]
fn list_type_map_rejects_duplicate_keys() {
    assert_eq!(
        errors(json!({"policy": "p", "rules": [{"name": "x"}, {"name": "x", "enabled": false}]})),
        vec![r#"spec.rules[1]: Duplicate value: {"name":"x"}"#]
    );
}

#[test]
fn errors_inside_list_items_use_bracket_indices() {
    assert_eq!(
        errors(json!({"policy": "p", "rules": [{"enabled": true}]})),
        vec!["spec.rules[0].name: Required value"]
    );
}

#[test]
fn format_uuid_and_date_time_are_enforced() {
    assert_eq!(
        errors(json!({"policy": "p", "uid": "nope"})),
        vec![r#"spec.uid: Invalid value: "nope": spec.uid in body must be of type uuid: "nope""#]
    );
    assert_eq!(
        errors(json!({"policy": "p", "when": "yesterday"})),
        vec![
            r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#
        ]
    );
    assert!(admit(json!({"policy": "p", "uid": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "when": "2024-01-02T03:04:05Z"})).is_ok());
}

#[test]
fn metadata_name_must_be_a_dns_subdomain() {
    let mut obj = cr(json!({"policy": "p"}));
    obj["metadata"]["name"] = json!("Bad_Name");
    let e = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).unwrap_err();
    assert_eq!(
        e[0].to_string(),
        r#"metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#
    );
}

#[test]
fn metadata_name_obeys_the_crd_schema_constraints() {
    let crd = crd_with(
        spec_schema(),
        json!({"properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}},
            "spec": spec_schema()
        }}),
    );
    let mut obj = cr(json!({"policy": "p"}));
    obj["metadata"]["name"] = json!("toolong");
    let e = admit_custom_resource(&crd, "v1alpha1", &mut obj, None).unwrap_err();
    assert_eq!(
        e.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        vec!["metadata.name: Too long: may not be more than 5 bytes"]
    );
}

#[test]
fn missing_name_and_generate_name_is_required() {
    let mut obj = cr(json!({"policy": "p"}));
    obj["metadata"] = json!({"namespace": "default"});
    let e = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).unwrap_err();
    assert_eq!(
        e[0].to_string(),
        "metadata.name: Required value: name or generateName is required"
    );
}

#[test]
fn kind_and_api_version_must_match_the_crd() {
    let mut obj = cr(json!({"policy": "p"}));
    obj["kind"] = json!("Other");
    obj["spec"]["type"] = json!("invalid-but-not-reported");
    let e = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).unwrap_err();
    assert_eq!(
        e.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        vec![r#"kind: Invalid value: "Other": must be SecretsPolicy"#]
    );
}

#[test]
fn several_errors_are_all_reported() {
    let e = errors(json!({"type": "x", "count": 99}));
    assert_eq!(
        e,
        vec![
            "spec.count: Invalid value: 99: spec.count in body should be less than or equal to 10",
            r#"spec.type: Unsupported value: "x": supported values: "acl", "rgp", "egp""#,
            "spec.policy: Required value",
        ]
    );
}

#[test]
fn unknown_fields_can_be_listed_before_validation_without_pruning() {
    use quartet_sandbox::apiserver::schema::unknown_fields;
    let obj = cr(json!({"policy": "p", "type": "invalid", "bogus": 1}));
    assert_eq!(unknown_fields(&crd(), "v1alpha1", &obj), vec!["spec.bogus"]);
    assert_eq!(obj["spec"]["bogus"], 1);
}

#[test]
fn embedded_resources_need_api_version_and_kind() {
    assert_eq!(
        errors(json!({"policy": "p", "template": {"metadata": {"name": "x"}}})),
        vec![
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty"
        ]
    );
}

fn update(spec: Value, old_spec: Value) -> Result<Value, Vec<String>> {
    let mut obj = cr(spec);
    let old = cr(old_spec);
    admit_custom_resource(&crd(), "v1alpha1", &mut obj, Some(&old))
        .map(|_| obj)
        .map_err(|e| e.iter().map(|e| e.to_string()).collect())
}

#[test]
fn ratcheting_lets_unchanged_invalid_values_through_on_update() {
    // Stored objects are defaulted; `count: 99` (and the missing `policy`) were accepted by an
    // older schema.
    let stored = json!({"count": 99, "type": "acl", "options": {"ttl": "1h"}});
    assert!(
        update(stored.clone(), stored.clone()).is_ok(),
        "nothing under spec changed"
    );
    let with_policy = json!({"policy": "p", "count": 99, "type": "acl", "options": {"ttl": "1h"}});
    assert!(
        update(
            json!({"policy": "p", "count": 99, "type": "rgp"}),
            with_policy
        )
        .is_ok(),
        "count unchanged"
    );
    assert_eq!(
        update(json!({"count": 98}), stored).unwrap_err(),
        vec![
            "spec.count: Invalid value: 98: spec.count in body should be less than or equal to 10",
            "spec.policy: Required value"
        ]
    );
}

#[test]
fn ratcheting_correlates_map_list_items_by_key_only() {
    let old =
        json!({"policy": "p", "rules": [{"name": "a", "enabled": "yes"}], "paths": ["a", "a"]});
    // The map-list item `a` is unchanged even though another item was added before it.
    assert!(update(json!({"policy": "p", "rules": [{"name": "b"}, {"name": "a", "enabled": "yes"}], "paths": ["a", "a"]}), old.clone()).is_ok());
    // A set list that changed is not correlated item by item.
    assert_eq!(
        update(json!({"policy": "p", "rules": [{"name": "a", "enabled": "yes"}], "paths": ["a", "a", "b"]}), old).unwrap_err(),
        vec![r#"spec.paths[1]: Duplicate value: "a""#]
    );
}

#[test]
fn one_of_requires_exactly_one_matching_branch() {
    let mut spec = apiserver_schema_fixtures::spec_schema();
    spec["oneOf"] = json!([{"required": ["name"]}, {"required": ["count"]}]);
    let crd = crd_with(spec, json!({}));
    let run = |s: Value| {
        let mut obj = cr(s);
        admit_custom_resource(&crd, "v1alpha1", &mut obj, None)
            .map_err(|e| e.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    };
    assert!(run(json!({"policy": "p", "name": "a"})).is_ok());
    assert_eq!(
        run(json!({"policy": "p"})).unwrap_err(),
        vec![
            r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found none valid"#,
            "spec.name: Required value"
        ]
    );
    assert_eq!(
        run(json!({"policy": "p", "name": "a", "count": 1})).unwrap_err(),
        vec![
            r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ]
    );
}

#[test]
fn every_enforced_format_accepts_good_and_rejects_bad_values() {
    let cases = [
        ("uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "x"),
        (
            "uuid4",
            "f47ac10b-58cc-4372-a567-0e02b2c3d479",
            "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        ),
        ("ipv4", "10.0.0.1", "10.0.0"),
        ("ipv6", "::1", "zz::1"),
        ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
        ("hostname", "example.com", "-bad-"),
        ("email", "a@example.com", "nope"),
        ("mac", "00:11:22:33:44:55", "00:11"),
        ("byte", "aGVsbG8=", "***"),
        ("date", "2024-02-29", "2023-02-29"),
        ("date-time", "2024-01-02T03:04:05Z", "2024-01-02"),
        ("datetime", "2024-01-02T03:04:05+01:00", "noon"),
        ("duration", "1h30m", "forever"),
        ("hexcolor", "#ffaa00", "ffaa00"),
        ("bsonobjectid", "507f1f77bcf86cd799439011", "507f"),
        ("uri", "https://example.com/x", "no scheme"),
    ];
    for (format, good, bad) in cases {
        let mut spec = apiserver_schema_fixtures::spec_schema();
        spec["properties"]["f"] = json!({"type": "string", "format": format});
        let crd = crd_with(spec, json!({}));
        let mut ok = cr(json!({"policy": "p", "f": good}));
        assert!(
            admit_custom_resource(&crd, "v1alpha1", &mut ok, None).is_ok(),
            "{format} rejected {good}"
        );
        let mut ko = cr(json!({"policy": "p", "f": bad}));
        let e = admit_custom_resource(&crd, "v1alpha1", &mut ko, None).expect_err(format);
        assert_eq!(
            e[0].to_string(),
            format!(
                "spec.f: Invalid value: {bad:?}: spec.f in body must be of type {format}: {bad:?}"
            )
        );
    }
    // Formats kube does not enforce are accepted as-is.
    let mut spec = apiserver_schema_fixtures::spec_schema();
    spec["properties"]["f"] = json!({"type": "string", "format": "k8s-short-name"});
    let crd = crd_with(spec, json!({}));
    assert!(admit_custom_resource(
        &crd,
        "v1alpha1",
        &mut cr(json!({"policy": "p", "f": "Whatever!"})),
        None
    )
    .is_ok());
}

#[test]
fn generate_name_may_end_with_a_dash_but_must_otherwise_be_a_subdomain() {
    let mut obj = cr(json!({"policy": "p"}));
    obj["metadata"] = json!({"generateName": "policy-", "namespace": "default"});
    assert!(admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).is_ok());
    obj["metadata"] = json!({"generateName": "Policy-", "namespace": "default"});
    let e = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).unwrap_err();
    assert!(
        e[0].to_string().starts_with(
            r#"metadata.generateName: Invalid value: "Policy-": a lowercase RFC 1123 subdomain"#
        ),
        "{e:?}"
    );
}

#[test]
fn stored_objects_get_defaults_added_to_the_schema_later() {
    use quartet_sandbox::apiserver::schema::default_custom_resource;
    let mut stored = cr(json!({"policy": "p"}));
    default_custom_resource(&crd(), "v1alpha1", &mut stored);
    assert_eq!(stored["spec"]["type"], "acl");
    assert_eq!(stored["spec"]["options"]["ttl"], "1h");
}

#[test]
fn admission_errors_render_as_the_kube_422_message() {
    use quartet_sandbox::apiserver::schema::invalid_status;
    let mut obj = cr(json!({"type": "x"}));
    let errs = admit_custom_resource(&crd(), "v1alpha1", &mut obj, None).unwrap_err();
    let status = invalid_status("SecretsPolicy", "secrets.quartet.dev", "p1", &errs);
    assert_eq!(
        status["message"],
        r#"SecretsPolicy.secrets.quartet.dev "p1" is invalid: [spec.type: Unsupported value: "x": supported values: "acl", "rgp", "egp", spec.policy: Required value]"#
    );
    assert_eq!(status["code"], 422);
    assert_eq!(
        status["details"]["causes"][1],
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.policy"})
    );
}
