//! Custom-resource admission (pruning, defaulting, OpenAPI v3 schema validation, CEL rules),
//! OpenAPI documents for discovery/explain, and server-side Table rendering.
//!
//! Pure functions over JSON values; the server (`apiserver::mod`) calls them. STUB: the
//! signatures are the contract between the server and this module.

use serde_json::Value;

/// One invalid field, worded like kube-apiserver's `field.Error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path as kube-apiserver prints it, e.g. `spec.enforcementLevel` or `spec.paths[0]`.
    pub field: String,
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, `FieldValueTypeInvalid`,
    /// `FieldValueTooLong`, `FieldValueTooMany`, `FieldValueForbidden`, `FieldValueDuplicate`.
    pub reason: &'static str,
    /// The message without the field prefix, e.g. `Unsupported value: "x": supported values: "acl", "rgp"`.
    pub message: String,
}

/// What admission did besides accepting the object.
#[derive(Clone, Debug, Default)]
pub struct Admission {
    /// Paths of fields pruned because the schema does not declare them (for `fieldValidation`
    /// Strict: error; Warn: `Warning` header; Ignore: silently dropped).
    pub unknown_fields: Vec<String>,
}

/// Admit a custom resource `obj` (the whole object, apiVersion/kind/metadata/spec/status) of
/// version `version` of `crd` (a stored `CustomResourceDefinition` object), in kube-apiserver's
/// order: prune unknown fields, apply schema defaults, validate against the schema, evaluate
/// `x-kubernetes-validations` rules (transition rules see `old`). `obj` is modified in place.
pub fn admit_custom_resource(
    crd: &Value,
    version: &str,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<Admission, Vec<FieldError>> {
    let _ = (crd, version, obj, old);
    Ok(Admission::default())
}

/// Check a CRD before it is stored (structural schema, names, versions). Errors name the field.
pub fn validate_crd(crd: &Value) -> Result<(), Vec<FieldError>> {
    let _ = crd;
    Ok(())
}

/// The 422 `Status` body kube-apiserver returns for invalid objects:
/// `<Kind>.<group> "<name>" is invalid: [<field>: <message>, ...]` with `details.causes`.
pub fn invalid_status(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Value {
    let _ = errors;
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{kind}.{group} \"{name}\" is invalid"),
        "reason": "Invalid", "details": {"name": name, "group": group, "kind": kind}, "code": 422
    })
}

/// `GET /openapi/v2` (Swagger 2.0) covering the built-in kinds served and every served CRD version.
pub fn openapi_v2(crds: &[Value]) -> Value {
    let _ = crds;
    serde_json::json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {}, "definitions": {}})
}

/// `GET /openapi/v3`: the index of group-version documents (`paths` with `serverRelativeURL`).
pub fn openapi_v3_index(crds: &[Value]) -> Value {
    let _ = crds;
    serde_json::json!({"paths": {}})
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`; `None` when not served.
/// `group_version` is `"v1"` for the core group or `"<group>/<version>"`.
pub fn openapi_v3_group_version(crds: &[Value], group_version: &str) -> Option<Value> {
    let _ = (crds, group_version);
    None
}

/// A `meta.k8s.io/v1` `Table` for `objects` of `resource` (plural). For a custom resource `crd`
/// is its definition and its `additionalPrinterColumns` for `version` are used; built-in
/// resources get kubectl's usual columns. `list_meta` is the list's `metadata`
/// (resourceVersion, continue). `include_object` is `None`, `Metadata` or `Object`.
pub fn table(
    crd: Option<&Value>,
    version: &str,
    resource: &str,
    objects: &[Value],
    list_meta: Value,
    include_object: &str,
) -> Value {
    let _ = (crd, version, resource, include_object);
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| serde_json::json!({"cells": [o["metadata"]["name"].clone()], "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"].clone()}}))
        .collect();
    serde_json::json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
        "columnDefinitions": [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}],
        "rows": rows
    })
}
