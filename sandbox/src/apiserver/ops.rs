//! The verbs on stored objects: create, update, patch (merge, JSON, strategic, apply), delete,
//! list, with the per-kind strategies (status subresource, generation, secrets' stringData,
//! namespaces, CRD status) and custom-resource admission through [`super::schema`].

use std::collections::HashMap;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::fields::{self, Scope, Shape, Writer};
use super::patch::{self, PatchType};
use super::registry::ResourceInfo;
use super::schema;
use super::selector::{allowed_fields, FieldSelector, LabelSelector};
use super::store::{crd_key, name_of, ns_of, rv_of, State};

/// `fieldValidation` query parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

/// Everything a verb needs to know about the request besides the body.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub info: ResourceInfo,
    pub version: String,
    /// Empty for cluster-scoped resources (and all-namespace lists).
    pub ns: String,
    pub sub: Option<String>,
    pub manager: String,
    pub dry_run: bool,
    pub validation: FieldValidation,
    pub query: HashMap<String, String>,
    /// Server-side apply (strict errors are worded as structured-merge-diff's).
    pub apply: bool,
}

/// A successful write: HTTP code, the object to return, `Warning` headers.
#[derive(Debug)]
pub struct Outcome {
    pub code: u16,
    pub obj: Value,
    pub warnings: Vec<String>,
}

pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl Ctx {
    fn api_version(&self) -> String {
        self.info.api_version(&self.version)
    }

    fn key(&self) -> (String, String) {
        self.info.key()
    }

    fn crd<'a>(&self, st: &'a State) -> Option<&'a Value> {
        self.info.crd.as_ref().and_then(|n| st.crd(n))
    }

    fn shape<'a>(&self, st: &'a State) -> Shape<'a> {
        let root = self.crd(st).and_then(|crd| {
            crd["spec"]["versions"]
                .as_array()?
                .iter()
                .find(|v| v["name"] == self.version.as_str())
                .map(|v| &v["schema"]["openAPIV3Schema"])
        });
        Shape::new(root)
    }

    fn scope(&self) -> Scope {
        if self.sub.as_deref() == Some("status") {
            Scope::Status
        } else if self.info.status_subresource {
            Scope::Main
        } else {
            Scope::All
        }
    }

    fn writer<'a>(&'a self, api_version: &'a str, now: &'a str) -> Writer<'a> {
        Writer {
            manager: &self.manager,
            subresource: self.sub.as_deref().unwrap_or_default(),
            api_version,
            now,
            scope: self.scope(),
        }
    }

    fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.info.plural, &self.info.group, name)
    }

    fn invalid(&self, name: &str, field: &str, reason: &str, msg: &str) -> ApiError {
        ApiError::invalid(&self.info.kind, &self.info.group, name, field, reason, msg)
    }
}

/// A stored object as a read (GET, LIST, WATCH) returns it: [`output`] plus, for custom
/// resources, the schema defaults (kube-apiserver defaults on read from storage).
pub fn read(info: &ResourceInfo, version: &str, crd: Option<&Value>, obj: &Value) -> Value {
    let mut o = output(info, version, obj);
    if let Some(crd) = crd {
        schema::default_custom_resource(crd, version, &mut o);
    }
    o
}

/// The object as served at `version`: apiVersion and kind set.
pub fn output(info: &ResourceInfo, version: &str, obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), json!(info.api_version(version)));
        m.insert("kind".into(), json!(info.kind));
    }
    if info.is_new_event() {
        return super::events::from_core(&o);
    }
    o
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(m) => m,
        None => unreachable!("metadata was just made an object"),
    }
}

fn check_type(ctx: &Ctx, obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(format!(
            "Object '{}' is invalid: the request body must be an object",
            ctx.info.kind
        )));
    }
    let av = ctx.api_version();
    if let Some(got) = obj["apiVersion"].as_str() {
        if got != av {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({got}) does not match the expected API version ({av})"
            )));
        }
    }
    if let Some(got) = obj["kind"].as_str() {
        if got != ctx.info.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({got}) does not match the expected kind ({})",
                ctx.info.kind
            )));
        }
    }
    Ok(())
}

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// `IsDNS1123Label`, or with `dns1035` `IsDNS1035Label` (the first character a letter).
fn dns_label_errors(s: &str, dns1035: bool) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let first_ok = |c: char| c.is_ascii_lowercase() || (!dns1035 && c.is_ascii_digit());
    let ok = s.chars().next().is_some_and(first_ok)
        && s.chars()
            .last()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        errs.push(
            if dns1035 {
                DNS1035_LABEL_MSG
            } else {
                DNS1123_LABEL_MSG
            }
            .to_string(),
        );
    }
    errs
}

/// The name check of each kind's `ValidateObjectMeta`: a DNS label for Namespaces, a DNS-1035
/// label for Services, a path segment for the RBAC kinds, a DNS subdomain for the others.
fn name_errors(ctx: &Ctx, name: &str) -> Vec<schema::FieldError> {
    let msgs = match (ctx.info.group.as_str(), ctx.info.plural.as_str()) {
        ("", "namespaces") => dns_label_errors(name, false),
        ("", "services") => dns_label_errors(name, true),
        (super::rbac_objects::GROUP, _) => super::rbac_objects::name_errors(name),
        _ => schema::dns1123_subdomain_errors(name),
    };
    msgs.iter()
        .map(|m| schema::FieldError::invalid("metadata.name", &json!(name), m))
        .collect()
}

/// `ValidateLabels`, `ValidateAnnotations` and `ValidateFinalizers` for the built-in kinds
/// (custom resources get the same checks from the schema module); a value that is not a
/// string fails decoding first.
fn validate_meta_maps(ctx: &Ctx, obj: &Value) -> Result<Vec<schema::FieldError>, ApiError> {
    for field in ["labels", "annotations"] {
        let Some(m) = obj["metadata"][field].as_object() else {
            continue;
        };
        if let Some(v) = m.values().find(|v| !v.is_string()) {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{ver}\" cannot be handled as a {kind}: json: cannot unmarshal {} into Go struct field ObjectMeta.metadata.{field} of type string",
                if v.is_number() { "number" } else if v.is_boolean() { "bool" } else { "object" },
                kind = ctx.info.kind,
                ver = ctx.version
            )));
        }
    }
    Ok(schema::meta_map_errors(&obj["metadata"]))
}

const GENERATE_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generate_suffix() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..5)
        .map(|_| GENERATE_CHARS[rng.random_range(0..GENERATE_CHARS.len())] as char)
        .collect()
}

/// The namespace must exist and not be terminating before anything is created in it.
fn check_namespace(st: &State, ctx: &Ctx, name: &str) -> Result<(), ApiError> {
    if !ctx.info.namespaced {
        return Ok(());
    }
    match st.get(&(String::new(), "namespaces".into()), "", &ctx.ns) {
        None => Err(ApiError::not_found("namespaces", "", &ctx.ns)),
        Some(ns) if !ns["metadata"]["deletionTimestamp"].is_null() => Err(ApiError::forbidden(
            &ctx.info.plural,
            &ctx.info.group,
            name,
            &format!(
                "unable to create new content in namespace {} because it is being terminated",
                ctx.ns
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// Per-kind preparation of a new or updated object (the registry "strategies").
///
/// `errors` are the metadata errors found so far (a new object's name): like kube's
/// `ValidateObjectMeta`, they are answered in one 422 with the kind's own errors, for the kinds
/// whose validation is here (Secrets, Events, Leases, RBAC); other kinds answer them at once.
fn prepare(
    ctx: &Ctx,
    obj: &mut Value,
    old: Option<&Value>,
    mut errors: Vec<schema::FieldError>,
) -> Result<(), ApiError> {
    if !ctx.info.is_custom() {
        errors.extend(validate_meta_maps(ctx, obj)?);
    }
    let invalid = |obj: &Value, errors: &[schema::FieldError]| {
        ApiError::from_body(
            422,
            schema::invalid_status(&ctx.info.kind, &ctx.info.group, &name_of(obj), errors),
        )
    };
    let validated_here = matches!(
        (ctx.info.group.as_str(), ctx.info.plural.as_str()),
        ("", "secrets" | "events")
            | ("events.k8s.io", "events")
            | ("coordination.k8s.io", "leases")
            | (super::rbac_objects::GROUP, _)
    );
    if !errors.is_empty() && !validated_here {
        return Err(invalid(obj, &errors));
    }
    match (ctx.info.group.as_str(), ctx.info.plural.as_str()) {
        ("", "secrets") => {
            if let Some(Value::Object(sd)) =
                obj.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                if !obj["data"].is_object() {
                    obj["data"] = json!({});
                }
                for (k, v) in sd {
                    let s = v
                        .as_str()
                        .map(String::from)
                        .unwrap_or_else(|| v.to_string());
                    obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
                }
            }
            if obj["type"].is_null() {
                obj["type"] = old.map(|o| o["type"].clone()).unwrap_or(json!("Opaque"));
            }
            if let Some(data) = obj["data"].as_object() {
                for (k, v) in data {
                    let ok = v.as_str().is_some_and(|s| {
                        base64::engine::general_purpose::STANDARD.decode(s).is_ok()
                    });
                    if !ok {
                        return Err(ApiError::bad_request(format!(
                            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 0 (data.{k})"
                        )));
                    }
                }
            }
            if let Some(o) = old {
                if o["type"] != obj["type"] {
                    let t = obj["type"].as_str().unwrap_or_default();
                    return Err(ctx.invalid(
                        &name_of(obj),
                        "type",
                        "FieldValueInvalid",
                        &format!("Invalid value: \"{t}\": field is immutable"),
                    ));
                }
                if o["immutable"] == json!(true)
                    && (o["data"] != obj["data"] || obj["immutable"] != json!(true))
                {
                    return Err(ctx.invalid(
                        &name_of(obj),
                        "data",
                        "FieldValueForbidden",
                        "Forbidden: field is immutable when `immutable` is set",
                    ));
                }
            }
            errors.extend(super::validation::secret_errors(obj));
        }
        ("", "events") | ("events.k8s.io", "events") => {
            errors.extend(super::events::validate(obj, old, ctx.info.is_new_event()));
        }
        (super::rbac_objects::GROUP, plural) => {
            errors.extend(match plural {
                "roles" => super::rbac_objects::role_errors(obj, true),
                "clusterroles" => super::rbac_objects::role_errors(obj, false),
                _ => {
                    super::rbac_objects::default_binding(obj);
                    super::rbac_objects::binding_errors(obj, old, plural == "rolebindings")
                }
            });
        }
        ("coordination.k8s.io", "leases") => {
            errors.extend(super::validation::lease_errors(&obj["spec"]));
        }
        ("", "namespaces") if old.is_none() => {
            if !obj["spec"].is_object() {
                obj["spec"] = json!({});
            }
            if obj["spec"]["finalizers"].is_null() {
                obj["spec"]["finalizers"] = json!(["kubernetes"]);
            }
            obj["status"] = json!({"phase": "Active"});
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            if let Err(errors) = schema::validate_crd_update(obj, old) {
                return Err(ApiError::from_body(
                    422,
                    schema::invalid_status(
                        "CustomResourceDefinition",
                        "apiextensions.k8s.io",
                        &name_of(obj),
                        &errors,
                    ),
                ));
            }
            let spec = &obj["spec"];
            let expected = format!(
                "{}.{}",
                spec["names"]["plural"].as_str().unwrap_or_default(),
                spec["group"].as_str().unwrap_or_default()
            );
            if name_of(obj) != expected {
                return Err(ctx.invalid(
                    &name_of(obj),
                    "metadata.name",
                    "FieldValueInvalid",
                    &format!(
                        "Invalid value: \"{}\": must be spec.names.plural+\".\"+spec.group",
                        name_of(obj)
                    ),
                ));
            }
            if let Some(o) = old {
                if o["spec"]["names"] != obj["spec"]["names"] && obj["status"].is_object() {
                    let mut accepted = obj["spec"]["names"].clone();
                    if accepted["singular"].is_null() {
                        accepted["singular"] =
                            json!(accepted["kind"].as_str().unwrap_or_default().to_lowercase());
                    }
                    if accepted["listKind"].is_null() {
                        accepted["listKind"] = json!(format!(
                            "{}List",
                            accepted["kind"].as_str().unwrap_or_default()
                        ));
                    }
                    obj["status"]["acceptedNames"] = accepted;
                }
                let storage = obj["spec"]["versions"]
                    .as_array()
                    .and_then(|vs| vs.iter().find(|v| v["storage"] == json!(true)))
                    .map(|v| v["name"].clone());
                if let (Some(sv), true) = (storage, obj["status"].is_object()) {
                    if !obj["status"]["storedVersions"].is_array() {
                        obj["status"]["storedVersions"] = json!([]);
                    }
                    if let Some(a) = obj["status"]["storedVersions"].as_array_mut() {
                        if !a.contains(&sv) {
                            a.push(sv);
                        }
                    }
                }
            }
            if old.is_none() {
                let names = obj["spec"]["names"].clone();
                let mut accepted = names.clone();
                if accepted["singular"].is_null() {
                    accepted["singular"] =
                        json!(names["kind"].as_str().unwrap_or_default().to_lowercase());
                }
                if accepted["listKind"].is_null() {
                    accepted["listKind"] = json!(format!(
                        "{}List",
                        names["kind"].as_str().unwrap_or_default()
                    ));
                }
                let t = now();
                let storage: Vec<Value> = obj["spec"]["versions"]
                    .as_array()
                    .map(|vs| {
                        vs.iter()
                            .filter(|v| v["storage"] == json!(true))
                            .map(|v| v["name"].clone())
                            .collect()
                    })
                    .unwrap_or_default();
                obj["status"] = json!({
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "lastTransitionTime": t, "reason": "NoConflicts", "message": "no conflicts found"},
                        {"type": "Established", "status": "True", "lastTransitionTime": t, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
                    ],
                    "acceptedNames": accepted,
                    "storedVersions": storage,
                });
                let fin = meta_mut(obj).entry("finalizers").or_insert(json!([]));
                if let Some(a) = fin.as_array_mut() {
                    let f = json!("customresourcecleanup.apiextensions.k8s.io");
                    if !a.contains(&f) {
                        a.push(f);
                    }
                }
            }
        }
        _ => {}
    }
    if !errors.is_empty() {
        return Err(invalid(obj, &errors));
    }
    Ok(())
}

/// Custom-resource admission: prune, default, validate, CEL; unknown fields per `fieldValidation`.
/// `unrecognized format` warnings of a CRD write (none for other kinds).
fn crd_warnings(ctx: &Ctx, obj: &Value, old: Option<&Value>) -> Vec<String> {
    if (ctx.info.group.as_str(), ctx.info.plural.as_str())
        == ("apiextensions.k8s.io", "customresourcedefinitions")
    {
        schema::crd_warnings(obj, old)
    } else {
        Vec::new()
    }
}

fn admit(
    st: &State,
    ctx: &Ctx,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let Some(crd) = ctx.crd(st) else {
        return Ok(vec![]);
    };
    obj["apiVersion"] = json!(ctx.api_version());
    obj["kind"] = json!(ctx.info.kind);
    match schema::admit_custom_resource(crd, &ctx.version, obj, old) {
        Ok(adm) => unknown_fields(ctx, &adm.unknown_fields),
        Err(errors) => Err(ApiError::from_body(
            422,
            schema::invalid_status(&ctx.info.kind, &ctx.info.group, &name_of(obj), &errors),
        )),
    }
}

/// Strict decoding rejects a custom resource's unknown fields while it decodes the body, i.e.
/// before any validation error and before the strategy drops or restores `status`: a create
/// with `status.bogus` is refused even though the stored object would have no status.
fn strict_unknown_fields(st: &State, ctx: &Ctx, obj: &Value) -> Result<(), ApiError> {
    if ctx.validation != FieldValidation::Strict {
        return Ok(());
    }
    let Some(crd) = ctx.crd(st) else {
        return Ok(());
    };
    unknown_fields(ctx, &schema::unknown_fields(crd, &ctx.version, obj)).map(drop)
}

fn unknown_fields(ctx: &Ctx, unknown: &[String]) -> Result<Vec<String>, ApiError> {
    if unknown.is_empty() {
        return Ok(vec![]);
    }
    let msgs: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    match ctx.validation {
        FieldValidation::Ignore => Ok(vec![]),
        FieldValidation::Warn => Ok(msgs),
        FieldValidation::Strict if ctx.apply => Err(ApiError::bad_request(format!(
            "failed to create typed patch object ({}/{}, Kind={}): {}",
            ctx.info.group,
            ctx.version,
            ctx.info.kind,
            unknown
                .iter()
                .map(|f| format!(".{f}: field not declared in schema"))
                .collect::<Vec<_>>()
                .join("\n")
        ))),
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
            msgs.join(", "),
            kind = ctx.info.kind,
            v = ctx.version
        ))),
    }
}

/// Unknown top-level fields of the built-in kinds (they have no CRD schema to prune by).
fn builtin_unknown(ctx: &Ctx, obj: &mut Value) -> Result<Vec<String>, ApiError> {
    if ctx.info.is_custom() {
        return Ok(vec![]);
    }
    let known: &[&str] = match (ctx.info.group.as_str(), ctx.info.plural.as_str()) {
        ("", "secrets") => &["data", "stringData", "type", "immutable"],
        ("", "configmaps") => &["data", "binaryData", "immutable"],
        ("", "namespaces") => &["spec", "status"],
        ("", "serviceaccounts") => &[
            "secrets",
            "imagePullSecrets",
            "automountServiceAccountToken",
        ],
        ("coordination.k8s.io", "leases") => &["spec"],
        ("", "services") | ("apps", "deployments") | ("policy", "poddisruptionbudgets") => {
            &["spec", "status"]
        }
        ("rbac.authorization.k8s.io", "roles") => &["rules"],
        ("rbac.authorization.k8s.io", "clusterroles") => &["rules", "aggregationRule"],
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            &["subjects", "roleRef"]
        }
        ("apiextensions.k8s.io", _) => &["spec", "status"],
        ("", "events") => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ],
        ("events.k8s.io", "events") => &[
            "involvedObject",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "reportingComponent",
            "eventTime",
            "series",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
            "regarding",
            "related",
            "note",
            "type",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ],
        _ => return Ok(vec![]),
    };
    let mut unknown = Vec::new();
    if let Some(m) = obj.as_object_mut() {
        let extra: Vec<String> = m
            .keys()
            .filter(|k| {
                !["apiVersion", "kind", "metadata"].contains(&k.as_str())
                    && !known.contains(&k.as_str())
            })
            .cloned()
            .collect();
        for k in extra {
            m.remove(&k);
            unknown.push(k);
        }
    }
    unknown_fields(ctx, &unknown)
}

/// Unknown `metadata` fields are pruned for every kind. Empty (or null) `labels`,
/// `annotations`, `finalizers` and `ownerReferences` are dropped, as kube-apiserver stores
/// `ObjectMeta` with `omitempty` maps and lists: after `kubectl apply --server-side`, the
/// `annotations: {}` a client-side `kubectl diff` patch carries leaves no trace.
fn metadata_unknown(ctx: &Ctx, obj: &mut Value) -> Result<Vec<String>, ApiError> {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
            let empty = match m.get(field) {
                Some(Value::Null) => true,
                Some(Value::Object(x)) => x.is_empty(),
                Some(Value::Array(x)) => x.is_empty(),
                _ => false,
            };
            if empty {
                m.remove(field);
            }
        }
    }
    const KNOWN: &[&str] = &[
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
    let mut unknown = Vec::new();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let extra: Vec<String> = m
            .keys()
            .filter(|k| !KNOWN.contains(&k.as_str()))
            .cloned()
            .collect();
        for k in extra {
            m.remove(&k);
            unknown.push(format!("metadata.{k}"));
        }
    }
    unknown_fields(ctx, &unknown)
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// POST: create an object. `managed` is set when server-side apply already computed managedFields.
pub fn create(
    st: &mut State,
    ctx: &Ctx,
    mut obj: Value,
    managed: bool,
) -> Result<Outcome, ApiError> {
    check_type(ctx, &obj)?;
    if ctx.info.is_new_event() {
        obj = super::events::to_core(&obj);
    }
    let mut warnings = Vec::new();
    {
        let meta = meta_mut(&mut obj);
        if ctx.info.namespaced {
            match meta.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != ctx.ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ))
                }
                _ => {
                    meta.insert("namespace".into(), json!(ctx.ns));
                }
            }
        } else {
            meta.remove("namespace");
        }
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            match meta.get("generateName").and_then(Value::as_str) {
                Some(g) if !g.is_empty() => {
                    let n = format!("{g}{}", generate_suffix());
                    meta.insert("name".into(), json!(n));
                }
                _ => {
                    return Err(ctx.invalid(
                        "",
                        "metadata.name",
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                    ))
                }
            }
        }
        if meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
        {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
    }
    let name = name_of(&obj);
    // Custom resources get their metadata errors (all of them) from the schema module; the
    // others' are answered with the kind's own errors, after the namespace is checked (kube's
    // admission comes before validation).
    let name_errs = if ctx.info.is_custom() {
        Vec::new()
    } else {
        name_errors(ctx, &name)
    };
    check_namespace(st, ctx, &name)?;
    if let Some(crd) = ctx.crd(st) {
        if !crd["metadata"]["deletionTimestamp"].is_null() {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
            ));
        }
    }
    if st.get(&ctx.key(), &ctx.ns, &name).is_some() {
        return Err(ApiError::already_exists(
            &ctx.info.plural,
            &ctx.info.group,
            &name,
        ));
    }
    strict_unknown_fields(st, ctx, &obj)?;
    if ctx.info.status_subresource {
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
    }
    warnings.extend(metadata_unknown(ctx, &mut obj)?);
    warnings.extend(builtin_unknown(ctx, &mut obj)?);
    prepare(ctx, &mut obj, None, name_errs)?;
    warnings.extend(crd_warnings(ctx, &obj, None));
    warnings.extend(admit(st, ctx, &mut obj, None)?);
    let t = now();
    {
        let meta = meta_mut(&mut obj);
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(t));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("selfLink");
        if ctx.info.has_generation {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
    }
    if !managed {
        let av = ctx.api_version();
        let mut entries = Vec::new();
        fields::track_update(
            &mut entries,
            &ctx.writer(&av, &t),
            None,
            &obj,
            &ctx.shape(st),
        );
        fields::write_managed(&mut obj, &entries);
    }
    if ctx.dry_run {
        return Ok(Outcome {
            code: 201,
            obj: output(&ctx.info, &ctx.version, &obj),
            warnings,
        });
    }
    obj["apiVersion"] = json!(ctx.info.api_version(&ctx.info.storage_version));
    obj["kind"] = json!(ctx.info.kind);
    let stored = st.put(&ctx.key(), obj);
    if ctx.info.key() == ("".to_string(), "namespaces".to_string()) {
        create_default_service_account(st, &name);
    }
    Ok(Outcome {
        code: 201,
        obj: output(&ctx.info, &ctx.version, &stored),
        warnings,
    })
}

/// The serviceaccount controller's job: every namespace gets a `default` ServiceAccount.
pub fn create_default_service_account(st: &mut State, ns: &str) {
    let key = (String::new(), "serviceaccounts".to_string());
    if st.get(&key, ns, "default").is_some() {
        return;
    }
    let sa = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now()}
    });
    st.put(&key, sa);
}

/// PUT: replace an object (optimistic concurrency on resourceVersion).
pub fn update(st: &mut State, ctx: &Ctx, name: &str, mut obj: Value) -> Result<Outcome, ApiError> {
    check_type(ctx, &obj)?;
    let body_name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    meta_mut(&mut obj).insert("name".into(), json!(name));
    let old = st
        .get(&ctx.key(), &ctx.ns, name)
        .cloned()
        .ok_or_else(|| ctx.not_found(name))?;
    let rv = obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if rv.is_empty() {
        if ctx.info.is_custom() {
            return Err(ctx.invalid(
                name,
                "metadata.resourceVersion",
                "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update",
            ));
        }
    } else if rv != rv_of(&old).to_string() {
        return Err(ApiError::conflict(&ctx.info.plural, &ctx.info.group, name));
    }
    finish_update(st, ctx, name, &old, obj, false)
}

/// The common tail of update, patch and apply.
fn finish_update(
    st: &mut State,
    ctx: &Ctx,
    name: &str,
    old: &Value,
    mut new: Value,
    managed: bool,
) -> Result<Outcome, ApiError> {
    let mut warnings = Vec::new();
    if !new.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    if ctx.info.is_new_event() {
        new = super::events::to_core(&new);
    }
    // Server-managed metadata comes from the stored object.
    {
        let om = old["metadata"].clone();
        let meta = meta_mut(&mut new);
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
        ] {
            match om.get(k) {
                Some(v) => {
                    meta.insert(k.into(), v.clone());
                }
                None => {
                    meta.remove(k);
                }
            }
        }
        meta.insert("name".into(), json!(name));
        meta.remove("selfLink");
    }
    strict_unknown_fields(st, ctx, &new)?;
    if ctx.sub.as_deref() == Some("status") {
        // Status writes change only status (and managedFields).
        let status = new.get("status").cloned();
        let mf = new["metadata"].get("managedFields").cloned();
        let mut o = old.clone();
        match status {
            Some(s) => o["status"] = s,
            None => {
                if let Some(m) = o.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        match mf {
            Some(mf) => o["metadata"]["managedFields"] = mf,
            None => {
                if let Some(m) = o["metadata"].as_object_mut() {
                    m.remove("managedFields");
                }
            }
        }
        new = o;
    } else if ctx.info.status_subresource {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    warnings.extend(metadata_unknown(ctx, &mut new)?);
    warnings.extend(builtin_unknown(ctx, &mut new)?);
    prepare(ctx, &mut new, Some(old), Vec::new())?;
    warnings.extend(crd_warnings(ctx, &new, Some(old)));
    if !old["metadata"]["deletionTimestamp"].is_null() {
        let before = finalizers(old);
        if let Some(f) = finalizers(&new).into_iter().find(|f| !before.contains(f)) {
            let _ = f;
            return Err(ctx.invalid(
                name,
                "metadata.finalizers",
                "FieldValueForbidden",
                "Forbidden: no new finalizers can be added if the object is being deleted",
            ));
        }
    }
    let old_out = output(&ctx.info, &ctx.version, old);
    warnings.extend(admit(st, ctx, &mut new, Some(&old_out))?);
    if ctx.info.has_generation {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                m.remove("status");
                m.remove("apiVersion");
                m.remove("kind");
            }
            v
        };
        if strip(old) != strip(&new) {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            new["metadata"]["generation"] = json!(g);
        }
    }
    let t = now();
    if !managed {
        let av = ctx.api_version();
        let mut entries = if new["metadata"]
            .get("managedFields")
            .is_some_and(Value::is_array)
        {
            fields::parse_managed(&new)
        } else {
            fields::parse_managed(old)
        };
        fields::track_update(
            &mut entries,
            &ctx.writer(&av, &t),
            Some(&old_out),
            &new,
            &ctx.shape(st),
        );
        fields::write_managed(&mut new, &entries);
    }
    new["apiVersion"] = json!(ctx.info.api_version(&ctx.info.storage_version));
    new["kind"] = json!(ctx.info.kind);
    new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    if unchanged(old, &new) {
        return Ok(Outcome {
            code: 200,
            obj: output(&ctx.info, &ctx.version, old),
            warnings,
        });
    }
    if ctx.dry_run {
        return Ok(Outcome {
            code: 200,
            obj: output(&ctx.info, &ctx.version, &new),
            warnings,
        });
    }
    if !new["metadata"]["deletionTimestamp"].is_null()
        && finalizers(&new).is_empty()
        && !is_namespace(ctx)
    {
        // Last finalizer removed: the object goes away in the same write (watchers see DELETED).
        if let Some(m) = st.objects.get_mut(&ctx.key()) {
            m.insert((ctx.ns.clone(), name.to_string()), new);
        }
        let gone = st.remove(&ctx.key(), &ctx.ns, name).unwrap_or_default();
        return Ok(Outcome {
            code: 200,
            obj: output(&ctx.info, &ctx.version, &gone),
            warnings,
        });
    }
    let stored = st.put(&ctx.key(), new);
    Ok(Outcome {
        code: 200,
        obj: output(&ctx.info, &ctx.version, &stored),
        warnings,
    })
}

fn is_namespace(ctx: &Ctx) -> bool {
    ctx.info.key() == ("".to_string(), "namespaces".to_string())
}

/// Equal but for managedFields timestamps: a no-op write stores nothing (no new resourceVersion).
fn unchanged(old: &Value, new: &Value) -> bool {
    let norm = |v: &Value| {
        let mut v = v.clone();
        if let Some(mf) = v["metadata"]
            .get_mut("managedFields")
            .and_then(Value::as_array_mut)
        {
            for e in mf {
                if let Some(m) = e.as_object_mut() {
                    m.remove("time");
                }
            }
        }
        v
    };
    norm(old) == norm(new)
}

/// PATCH with a merge, JSON or strategic merge patch; apply patches go to [`apply`].
pub fn patch(
    st: &mut State,
    ctx: &Ctx,
    name: &str,
    ptype: PatchType,
    body: &[u8],
) -> Result<Outcome, ApiError> {
    if ptype == PatchType::Apply {
        return apply(st, ctx, name, body);
    }
    if ptype == PatchType::Strategic && ctx.info.is_custom() {
        return Err(patch::unsupported(true));
    }
    let p: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let old = st
        .get(&ctx.key(), &ctx.ns, name)
        .cloned()
        .ok_or_else(|| ctx.not_found(name))?;
    let mut new = output(&ctx.info, &ctx.version, &old);
    match ptype {
        PatchType::Merge => {
            if !p.is_object() {
                return Err(ApiError::bad_request("error decoding patch: json: cannot unmarshal into Go value of type map[string]interface {}"));
            }
            patch::merge_patch(&mut new, &p)
        }
        PatchType::Json => patch::json_patch(&mut new, &p)?,
        PatchType::Strategic => patch::strategic_merge(&mut new, &p)?,
        PatchType::Apply => {}
    }
    let rv = new["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !rv.is_empty() && rv != rv_of(&old).to_string() {
        return Err(ApiError::conflict(&ctx.info.plural, &ctx.info.group, name));
    }
    finish_update(st, ctx, name, &old, new, false)
}

/// Parse an apply body: YAML (JSON is YAML too).
fn parse_yaml(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let y: serde_yaml::Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    serde_json::to_value(y).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// Server-side apply (`application/apply-patch+yaml`); creates the object when absent.
pub fn apply(st: &mut State, ctx: &Ctx, name: &str, body: &[u8]) -> Result<Outcome, ApiError> {
    let applied = parse_yaml(body)?;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the body must be an object",
        ));
    }
    if applied["apiVersion"].as_str().is_none_or(str::is_empty)
        || applied["kind"].as_str().is_none_or(str::is_empty)
    {
        return Err(ApiError::bad_request(
            "apiVersion and kind must be set in an apply configuration",
        ));
    }
    check_type(ctx, &applied)?;
    let body_name = applied["metadata"]["name"].as_str().unwrap_or_default();
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if let Some(ns) = applied["metadata"]["namespace"].as_str() {
        if !ns.is_empty() && ns != ctx.ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let mut actx = ctx.clone();
    actx.apply = true;
    let ctx = &actx;
    let force = flag(&ctx.query, "force");
    let shape = ctx.shape(st);
    let av = ctx.api_version();
    let t = now();
    let writer = ctx.writer(&av, &t);
    let old = st.get(&ctx.key(), &ctx.ns, name).cloned();
    // A resourceVersion in an apply configuration is a precondition, as for updates.
    if let Some(rv) = applied["metadata"]["resourceVersion"]
        .as_str()
        .filter(|r| !r.is_empty())
    {
        let current = old.as_ref().map(rv_of).unwrap_or_default().to_string();
        if rv != current {
            return Err(ApiError::conflict(&ctx.info.plural, &ctx.info.group, name));
        }
    }
    let live = match &old {
        Some(o) => output(&ctx.info, &ctx.version, o),
        None => {
            if ctx.sub.is_some() {
                return Err(ctx.not_found(name));
            }
            let mut m =
                json!({"apiVersion": av, "kind": ctx.info.kind, "metadata": {"name": name}});
            if ctx.info.namespaced {
                m["metadata"]["namespace"] = json!(ctx.ns);
            }
            m
        }
    };
    let merged = fields::apply(&live, &applied, &writer, force, &shape).map_err(|conflicts| {
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.manager), "field": fields::path_string(&c.path)}))
            .collect();
        ApiError::new(409, "Conflict", fields::conflict_message(&conflicts)).with_details(json!({"causes": causes}))
    })?;
    match old {
        None => create(st, ctx, merged, true),
        Some(old) => finish_update(st, ctx, name, &old, merged, true),
    }
}

/// How dependents are treated when their owner is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

/// Parsed `DeleteOptions` (body or query).
#[derive(Clone, Debug)]
pub struct DeleteOpts {
    pub propagation: Propagation,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl DeleteOpts {
    pub fn parse(body: &[u8], query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
        };
        let policy = b["propagationPolicy"]
            .as_str()
            .map(String::from)
            .or_else(|| query.get("propagationPolicy").cloned());
        let orphan = b["orphanDependents"]
            .as_bool()
            .or_else(|| query.get("orphanDependents").map(|v| v == "true"));
        let propagation = match policy.as_deref() {
            Some("Orphan") => Propagation::Orphan,
            Some("Foreground") => Propagation::Foreground,
            Some("Background") => Propagation::Background,
            Some(other) => {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!("DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""),
                ))
            }
            None if orphan == Some(true) => Propagation::Orphan,
            None => Propagation::Background,
        };
        Ok(Self {
            propagation,
            uid: b["preconditions"]["uid"].as_str().map(String::from),
            resource_version: b["preconditions"]["resourceVersion"]
                .as_str()
                .map(String::from),
        })
    }
}

/// Delete one object: with finalizers it is only marked (deletionTimestamp); without, removed.
pub fn delete_object(
    st: &mut State,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    opts: &DeleteOpts,
    dry_run: bool,
) -> Result<Option<Value>, ApiError> {
    let key = info.key();
    let Some(old) = st.get(&key, ns, name).cloned() else {
        return Err(ApiError::not_found(&info.plural, &info.group, name));
    };
    if let Some(uid) = &opts.uid {
        let have = old["metadata"]["uid"].as_str().unwrap_or_default();
        if uid != have {
            return Err(ApiError::conflict_message(
                &info.plural,
                &info.group,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                ),
            ));
        }
    }
    if let Some(rv) = &opts.resource_version {
        let have = rv_of(&old).to_string();
        if *rv != have {
            return Err(ApiError::conflict_message(
                &info.plural,
                &info.group,
                name,
                &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"),
            ));
        }
    }
    if dry_run {
        return Ok(Some(old));
    }
    let mut obj = old.clone();
    let mut fins = finalizers(&obj);
    let extra = match opts.propagation {
        Propagation::Orphan => Some("orphan"),
        Propagation::Foreground => Some("foregroundDeletion"),
        Propagation::Background => None,
    };
    if let Some(f) = extra {
        if !fins.iter().any(|x| x == f) {
            fins.push(f.to_string());
        }
    }
    let namespace = info.key() == ("".to_string(), "namespaces".to_string());
    if fins.is_empty() && !namespace {
        return Ok(st.remove(&key, ns, name));
    }
    let mut changed = false;
    if fins != finalizers(&old) {
        obj["metadata"]["finalizers"] = json!(fins);
        changed = true;
    }
    if obj["metadata"]["deletionTimestamp"].is_null() {
        obj["metadata"]["deletionTimestamp"] = json!(now());
        obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if info.has_generation {
            let g = obj["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            obj["metadata"]["generation"] = json!(g);
        }
        if namespace {
            obj["status"]["phase"] = json!("Terminating");
        }
        if info.key() == crd_key() {
            let t = now();
            if let Some(conds) = obj["status"]["conditions"].as_array_mut() {
                conds.push(json!({"type": "Terminating", "status": "True", "lastTransitionTime": t, "reason": "InstanceDeletionPending", "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"}));
            }
        }
        changed = true;
    }
    if !changed {
        return Ok(Some(old));
    }
    Ok(Some(st.put(&key, obj)))
}

/// The list `metadata.continue` token: where the next page starts.
fn encode_continue(ns: &str, name: &str, rv: u64) -> String {
    base64::engine::general_purpose::STANDARD
        .encode(json!({"ns": ns, "name": name, "rv": rv}).to_string())
}

fn decode_continue(tok: &str) -> Result<(String, String, u64), ApiError> {
    let bad = || {
        ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(tok)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((
        v["ns"].as_str().ok_or_else(bad)?.to_string(),
        v["name"].as_str().ok_or_else(bad)?.to_string(),
        v["rv"].as_u64().ok_or_else(bad)?,
    ))
}

/// Selectors of a list or watch request.
pub struct Filter {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

/// Whether a list asks to watch, as kube decodes the `watch` parameter: its first value, false
/// only when `0` or `false` in any case (so `watch=yes` and a bare `watch=` watch).
pub fn watch_requested(q: &HashMap<String, String>) -> bool {
    flag(q, "watch")
}

/// A boolean query parameter as kube's conversion reads it: present and not `0` or `false` (in
/// any case).
pub fn flag(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key)
        .is_some_and(|w| w != "0" && !w.eq_ignore_ascii_case("false"))
}

/// The first error kube's `ParameterCodec` gives a list or watch's query, in its order: the
/// integers (`timeoutSeconds`, `limit`) as Go's `strconv.ParseInt` words them, then the label
/// and field selectors. A real server answers such a request 400 and authorizes it without a
/// name from its field selector.
pub fn list_options_error(q: &HashMap<String, String>) -> Option<String> {
    for key in ["timeoutSeconds", "limit"] {
        if let Some(Err(e)) = q.get(key).map(|v| v.parse::<i64>().map_err(|e| (v, e))) {
            let why = match e.1.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            return Some(format!("strconv.ParseInt: parsing {:?}: {why}", e.0));
        }
    }
    if let Some(Err(e)) = q.get("labelSelector").map(|s| LabelSelector::parse(s)) {
        return Some(e.message);
    }
    q.get("fieldSelector")
        .and_then(|s| FieldSelector::parse_terms(s).err())
}

impl Filter {
    pub fn parse(info: &ResourceInfo, q: &HashMap<String, String>) -> Result<Self, ApiError> {
        if let Some(e) = list_options_error(q) {
            return Err(ApiError::bad_request(e));
        }
        let labels = LabelSelector::parse(
            q.get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )?;
        let mut allowed: Vec<&str> = allowed_fields(&info.group, &info.plural).to_vec();
        allowed.extend(info.selectable.iter().map(String::as_str));
        let mut fields = FieldSelector::parse(
            q.get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
            &allowed,
        )?;
        if info.is_new_event() {
            fields.rename(super::events::field_to_core);
        }
        Ok(Self { labels, fields })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(&obj["metadata"]["labels"]) && self.fields.matches(obj)
    }
}

/// GET collection: items matching the selectors, paged by `limit`/`continue`.
/// Returns the matching objects (at the request version) and the list metadata.
pub fn list(st: &State, ctx: &Ctx) -> Result<(Vec<Value>, Value), ApiError> {
    let filter = Filter::parse(&ctx.info, &ctx.query)?;
    let start = match ctx.query.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => Some(decode_continue(c)?),
        None => None,
    };
    let limit: usize = ctx
        .query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let ns = if ctx.ns.is_empty() {
        None
    } else {
        Some(ctx.ns.as_str())
    };
    let all: Vec<&Value> = st
        .list(&ctx.key(), ns)
        .into_iter()
        .filter(|o| {
            start
                .as_ref()
                .is_none_or(|(sn, sname, _)| (ns_of(o), name_of(o)) > (sn.clone(), sname.clone()))
        })
        .filter(|o| filter.matches(o))
        .collect();
    // Every page reports the resourceVersion of the first one, like a real server's snapshot:
    // a client that watches from it then replays what changed while it paged (otherwise objects
    // created between pages, before the continue key, would never reach it).
    let snapshot_rv = match &start {
        Some((_, _, rv)) if *rv < st.compacted => {
            return Err(ApiError::gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".to_string(),
            ));
        }
        Some((_, _, rv)) => *rv,
        None => st.rv,
    };
    let mut meta = json!({"resourceVersion": snapshot_rv.to_string()});
    let page: Vec<Value> = all
        .iter()
        .take(limit)
        .map(|o| read(&ctx.info, &ctx.version, ctx.crd(st), o))
        .collect();
    if all.len() > page.len() {
        if let Some(last) = page.last() {
            meta["continue"] = json!(encode_continue(&ns_of(last), &name_of(last), snapshot_rv));
            meta["remainingItemCount"] = json!(all.len() - page.len());
        }
    }
    Ok((page, meta))
}
