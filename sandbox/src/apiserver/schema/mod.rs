//! Custom-resource admission (pruning, defaulting, OpenAPI v3 schema validation, CEL rules),
//! CRD validation, OpenAPI documents for kubectl, and server-side Table rendering, for the
//! development API server (never a production one).
//!
//! Pure functions over JSON values; the server (`apiserver::mod`) calls them. The signatures
//! are the contract between the server and this module. Wording of errors follows
//! kube-apiserver v1.35 and v1.36 (apimachinery `field.Error`, kube-openapi `validate`,
//! apiextensions-apiserver's CEL validator): a value other than a string, number or boolean is
//! printed as JSON (`null`, `{"name":"x"}`), a failed CEL rule shows the value of a scalar and
//! no value for an object or a list, a string reports only the first of its maxLength,
//! minLength and pattern errors, and a repeated list element only where it first repeats.
//!
//! What is implemented, in kube-apiserver's order, for a custom resource:
//! 1. pruning of fields the structural schema does not declare (kept: root and embedded
//!    `apiVersion`/`kind`/`metadata`, `x-kubernetes-preserve-unknown-fields` subtrees;
//!    `metadata` pruned to `ObjectMeta`), reported as `spec.foo` paths;
//! 2. dropping `null`s of non-nullable fields, then `default`s (also inside defaulted values);
//! 3. `metadata.name`/`generateName` (DNS subdomain, plus the CRD schema's own constraints),
//!    label keys and values, annotation keys and their 256 KiB total, finalizer names,
//!    `apiVersion`/`kind`, OpenAPI validation (type incl. integer/number and int-or-string,
//!    nullable, required, enum, pattern, min/max(+exclusive), multipleOf, min/maxLength,
//!    min/maxItems, uniqueItems, min/maxProperties, allOf/anyOf/oneOf/not, the formats kube
//!    enforces), list-type set/map uniqueness, embedded resources' apiVersion/kind;
//! 4. `x-kubernetes-validations` through kube-cel (message, messageExpression, fieldPath,
//!    reason, transition rules, `optionalOldSelf` with a real CEL `optional`), skipped with
//!    kube's "some validation rules were not checked" error after blocking schema errors;
//! 5. on update, validation ratcheting: errors on values unchanged since the old object are
//!    dropped (transition rules excepted).
//!
//! At CRD create and update ([`validate_crd_update`]): names, versions, structural schemas
//! (named `spec.validation.openAPIV3Schema` when every version shares one schema, as the v1 →
//! internal conversion hoists it, else `spec.versions[i].schema.openAPIV3Schema`), CEL rules
//! that must compile, and each rule's **estimated cost** (`cel_cost`: Kubernetes 1.36's sizes
//! from `maxLength`/`maxItems`/`maxProperties` or the 3 MiB request limit, cel-go's estimator,
//! the Kubernetes library's function costs, times the rule's cardinality) against the
//! per-rule limit of 10,000,000 and the whole-schema limit of 100,000,000, with the real
//! messages; an update that leaves a version's schema unchanged skips the per-rule limit, as
//! kube does. [`crd_warnings`] gives the `unrecognized format "..."` warnings of a CRD write;
//! [`crd_rule_costs`] every rule's cost, for developers.
//!
//! Known differences from kube-apiserver: CEL rules are parsed but not type-checked against
//! the schema at CRD creation (kube-cel has no checker; the cost estimator infers the types it
//! needs from the schema; where an overload depends on a type it cannot infer, `dyn`, it
//! prices every candidate and keeps the dearest, as cel-go does), kube-cel correlates
//! transition rules inside non-map lists by index, and the message of a CEL syntax error is
//! kube-cel's rather than cel-go's.

mod cel;
mod cel_cost;
mod crd;
pub mod errors;
mod formats;
mod jsonpath;
mod metadata;
mod openapi;
mod openapi_pb;
mod ratchet;
mod structural;
pub mod table;

use serde_json::Value;

pub use cel_cost::{
    crd_rule_costs, format_rule_costs, RuleCost, SchemaCosts, PER_RULE_LIMIT, SCHEMA_LIMIT,
};
pub use errors::{go_printable, go_quote, go_value};
pub use metadata::{
    dns1123_subdomain_errors, label_key_errors, label_value_errors, meta_map_errors,
};
pub use table::{human_duration, table_at};

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
    /// Strict: error; Warn: `Warning` header; Ignore: silently dropped), written as kube-apiserver
    /// prints them inside `unknown field "<path>"`: `spec.foo`, `spec.items[0].bar`,
    /// `metadata.foo` (no leading dot).
    pub unknown_fields: Vec<String>,
}

/// Admit a custom resource `obj` (the whole object, apiVersion/kind/metadata/spec/status) of
/// version `version` of `crd` (a stored `CustomResourceDefinition` object), in kube-apiserver's
/// order: prune unknown fields, apply schema defaults, validate against the schema, evaluate
/// `x-kubernetes-validations` rules (transition rules see `old`). `obj` is modified in place.
///
/// On update, errors on values unchanged since `old` are dropped (validation ratcheting, on by
/// default since Kubernetes 1.30), except for transition rules. Difference from kube-apiserver:
/// kube-cel correlates transition rules inside lists by index.
pub fn admit_custom_resource(
    crd: &Value,
    version: &str,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<Admission, Vec<FieldError>> {
    let schema = schema_or_any(crd, version);
    let schema = schema.as_ref();
    let mut admission = Admission::default();
    structural::prune(schema, obj, "", true, &mut admission.unknown_fields);
    structural::drop_non_nullable_nulls(schema, obj);
    structural::apply_defaults(schema, obj);

    // kube stops at apiVersion/kind mismatches (`ValidateTypeMeta`).
    let type_meta = validate_type_meta(crd, version, obj);
    if !type_meta.is_empty() {
        return Err(type_meta);
    }
    let mut errs = metadata::validate(schema, obj);
    let mut schema_errs = Vec::new();
    structural::validate(schema, obj, "", &mut schema_errs);
    structural::validate_list_types(schema, obj, "", &mut schema_errs);
    structural::validate_embedded_resources(schema, obj, "", &mut schema_errs);
    errs.extend(ratchet::schema_errors(schema, obj, old, schema_errs));
    if let Some(rules) = cel::Rules::of(schema, compiled_key(crd, version).as_deref()).as_ref() {
        if let Some(blocking) = blocking_error(&errs) {
            errs.push(blocking);
        } else {
            let cel_errs = cel::evaluate(schema, rules, obj, old);
            errs.extend(ratchet::cel_errors(schema, obj, old, cel_errs));
        }
    }
    if errs.is_empty() {
        Ok(admission)
    } else {
        Err(errs)
    }
}

/// Applies the version's schema defaults to a stored object, as kube-apiserver does when it
/// reads custom resources from storage (so a default added to the CRD later shows up on
/// GET/LIST/WATCH without a write). Drops non-nullable `null`s first, like admission.
pub fn default_custom_resource(crd: &Value, version: &str, obj: &mut Value) {
    if let Some(schema) = version_schema(crd, version) {
        structural::drop_non_nullable_nulls(schema, obj);
        structural::apply_defaults(schema, obj);
    }
}

/// The fields pruning would drop from `obj` (same paths as [`Admission::unknown_fields`]),
/// without changing it. kube-apiserver rejects unknown fields under `fieldValidation=Strict`
/// while decoding, i.e. before any validation error: call this first to keep that order.
pub fn unknown_fields(crd: &Value, version: &str, obj: &Value) -> Vec<String> {
    let mut copy = obj.clone();
    let mut pruned = Vec::new();
    structural::prune(
        schema_or_any(crd, version).as_ref(),
        &mut copy,
        "",
        true,
        &mut pruned,
    );
    pruned
}

/// The version's schema, or one that accepts anything for a version without one.
fn schema_or_any<'a>(crd: &'a Value, version: &str) -> std::borrow::Cow<'a, Value> {
    match version_schema(crd, version) {
        Some(schema) => std::borrow::Cow::Borrowed(schema),
        None => std::borrow::Cow::Owned(
            serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        ),
    }
}

/// Names a stored CRD's version for the compiled-rules cache: its uid and resourceVersion
/// change whenever the CRD does. `None` for a CRD that was not stored (no resourceVersion).
fn compiled_key(crd: &Value, version: &str) -> Option<String> {
    let meta = &crd["metadata"];
    let uid = meta["uid"].as_str()?;
    let rv = meta["resourceVersion"].as_str()?;
    Some(format!("{uid}/{rv}/{version}"))
}

/// `hasBlockingErr`: CEL rules are skipped when the object already has type, required, enum,
/// length or count errors, and this error says so.
fn blocking_error(errs: &[FieldError]) -> Option<FieldError> {
    let blocking = [
        errors::NOT_SUPPORTED,
        errors::REQUIRED,
        errors::TOO_LONG,
        errors::TOO_MANY,
        errors::TYPE_INVALID,
    ];
    errs.iter().any(|e| blocking.contains(&e.reason)).then(|| {
        FieldError::invalid(
            "<nil>",
            &Value::Null,
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        )
    })
}

/// `customResourceValidator.ValidateTypeMeta`.
fn validate_type_meta(crd: &Value, version: &str, obj: &Value) -> Vec<FieldError> {
    let group = crd["spec"]["group"].as_str().unwrap_or("");
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or("");
    let mut errs = Vec::new();
    let got_kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if got_kind != kind {
        errs.push(FieldError::invalid(
            "kind",
            &Value::String(got_kind.into()),
            &format!("must be {kind}"),
        ));
    }
    let want = format!("{group}/{version}");
    let got = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if got != want {
        errs.push(FieldError::invalid(
            "apiVersion",
            &Value::String(got.into()),
            &format!("must be {want}"),
        ));
    }
    errs
}

/// `spec.versions[name=version].schema.openAPIV3Schema` of a CRD.
pub fn version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"].as_str() == Some(version))
        .and_then(|v| v.get("schema"))
        .and_then(|s| s.get("openAPIV3Schema"))
        .filter(|s| s.is_object())
}

/// Check a CRD before it is stored (structural schema, names, versions). Errors name the field.
pub fn validate_crd(crd: &Value) -> Result<(), Vec<FieldError>> {
    validate_crd_update(crd, None)
}

/// [`validate_crd`] for a create (`old` is `None`) or an update of the stored `old`: as in
/// kube-apiserver, an update that leaves a version's schema unchanged is not refused for a
/// rule over the per-rule cost limit (the whole-schema limit still applies).
pub fn validate_crd_update(crd: &Value, old: Option<&Value>) -> Result<(), Vec<FieldError>> {
    let errs = crd::validate(crd, old);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}

/// The `Warning` header texts kube-apiserver sends for a CRD create (`old` is `None`) or
/// update: `unrecognized format "uint64"` for formats Kubernetes does not know (on update,
/// only formats the old CRD did not have).
pub fn crd_warnings(crd: &Value, old: Option<&Value>) -> Vec<String> {
    formats::crd_warnings(crd, old)
}

/// The 422 `Status` body kube-apiserver returns for invalid objects:
/// `<Kind>.<group> "<name>" is invalid: [<field>: <message>, ...]` with `details.causes`.
pub fn invalid_status(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Value {
    errors::invalid_status(kind, group, name, errors)
}

/// `GET /openapi/v2` (Swagger 2.0) covering the built-in kinds served and every served CRD version.
pub fn openapi_v2(crds: &[Value]) -> Value {
    openapi::v2(crds)
}

/// `GET /openapi/v2` as protobuf (gnostic `openapi.v2.Document`), what kubectl asks for.
pub fn openapi_v2_protobuf(crds: &[Value]) -> Vec<u8> {
    openapi_pb::encode(&openapi::v2(crds), &|name| name.starts_with("io.k8s."))
}

/// `GET /openapi/v3`: the index of group-version documents (`paths` with `serverRelativeURL`
/// carrying a content `hash`, so clients re-fetch exactly when a document changes).
pub fn openapi_v3_index(crds: &[Value]) -> Value {
    openapi::v3_index(crds)
}

/// The content hash of a v3 group-version document: the `?hash=` its index entry links with,
/// and its `ETag`.
pub fn openapi_content_hash(doc: &Value) -> String {
    openapi::content_hash(doc)
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`; `None` when not served.
/// `group_version` is `"v1"` for the core group or `"<group>/<version>"`.
pub fn openapi_v3_group_version(crds: &[Value], group_version: &str) -> Option<Value> {
    openapi::v3_group_version(crds, group_version)
}

/// A `meta.k8s.io/v1` `Table` for `objects` of `resource` (plural). For a custom resource `crd`
/// is its definition and its `additionalPrinterColumns` for `version` are used (kube's default
/// `Age` column when it has none); built-in resources get kube-apiserver's printers:
/// namespaces (Name, Status, Age), secrets (Name, Type, Data, Age), configmaps (Name, Data,
/// Age), serviceaccounts (Name, Secrets, Age), leases (Name, Holder, Age), events (Last Seen,
/// Type, Reason, Object, Message, plus priority-1 columns), anything else such as
/// customresourcedefinitions (Name, Created At). `list_meta` is the list's `metadata`
/// (resourceVersion, continue). `include_object` is `None`, `Metadata` (the default) or `Object`.
pub fn table(
    crd: Option<&Value>,
    version: &str,
    resource: &str,
    objects: &[Value],
    list_meta: Value,
    include_object: &str,
) -> Value {
    table::table_at(
        chrono::Utc::now(),
        crd,
        version,
        resource,
        objects,
        list_meta,
        include_object,
    )
}
