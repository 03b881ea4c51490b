//! The 422 `Status` body for invalid objects, as `apierrors.NewInvalid` builds it.

use quartet_sandbox::apiserver::schema::{invalid_status, FieldError};
use serde_json::json;

#[test]
fn one_error_is_printed_bare_after_is_invalid() {
    let s = invalid_status(
        "SecretsPolicy",
        "secrets.quartet.dev",
        "p1",
        &[FieldError::required("spec.policy", "")],
    );
    assert_eq!(
        s,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "SecretsPolicy.secrets.quartet.dev \"p1\" is invalid: spec.policy: Required value",
            "reason": "Invalid",
            "details": {"name": "p1", "group": "secrets.quartet.dev", "kind": "SecretsPolicy",
                        "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.policy"}]},
            "code": 422
        })
    );
}

#[test]
fn several_errors_are_a_bracketed_list_and_duplicates_are_dropped_from_the_message() {
    let errs = [
        FieldError::not_supported(
            "spec.type",
            &json!("foo"),
            &["acl".into(), "rgp".into(), "egp".into()],
        ),
        FieldError::required("spec.policy", ""),
        FieldError::required("spec.policy", ""),
    ];
    let s = invalid_status("SecretsPolicy", "secrets.quartet.dev", "p1", &errs);
    assert_eq!(
        s["message"],
        "SecretsPolicy.secrets.quartet.dev \"p1\" is invalid: [spec.type: Unsupported value: \"foo\": supported values: \"acl\", \"rgp\", \"egp\", spec.policy: Required value]"
    );
    assert_eq!(s["details"]["causes"].as_array().unwrap().len(), 3);
    assert_eq!(
        s["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
}

#[test]
fn core_group_kinds_are_not_qualified() {
    let s = invalid_status(
        "Secret",
        "",
        "s",
        &[FieldError::invalid("data[a b]", &json!("a b"), "bad key")],
    );
    assert_eq!(
        s["message"],
        "Secret \"s\" is invalid: data[a b]: Invalid value: \"a b\": bad key"
    );
    assert!(s["details"].get("group").is_none());
}
