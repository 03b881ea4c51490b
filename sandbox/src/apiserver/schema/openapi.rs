//! OpenAPI documents as kube-apiserver publishes them, for kubectl: `/openapi/v3` (index),
//! `/openapi/v3/{api/v1,apis/<g>/<v>}` (OpenAPI 3.0 per group-version: `paths` carrying
//! `x-kubernetes-group-version-kind` and the `fieldValidation` parameter, `components.schemas`
//! carrying `x-kubernetes-group-version-kind`), and `/openapi/v2` (Swagger 2.0).
//!
//! Built-in kinds' schemas (with their field documentation) come from k8s-openapi's
//! `JsonSchema` impls. Deliberate difference from kube: PATCH operations of built-in kinds do
//! not list `application/strategic-merge-patch+json` in the v3 document, because
//! k8s-openapi's schemas lack the `x-kubernetes-patch-*` directives kubectl would need to
//! compute a strategic merge patch from them; kubectl then falls back to its compiled-in Go
//! types (exact strategic-merge semantics). Custom resources advertise JSON/merge/apply
//! patches only, as in kube.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::rbac::v1 as rbac;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const FIELD_VALIDATION_DOC: &str = "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.";

/// One served resource (a kind in a group-version).
#[derive(Clone, Debug)]
struct Resource {
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
    status: bool,
    builtin: bool,
    /// `components.schemas` / `definitions` key of the kind.
    schema_name: String,
}

impl Resource {
    fn gv(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn gvk(&self) -> Value {
        json!({"group": self.group, "kind": self.kind, "version": self.version})
    }

    fn list_schema_name(&self) -> String {
        format!("{}List", self.schema_name)
    }
}

fn builtin_resources() -> Vec<Resource> {
    let r =
        |group: &str, kind: &str, plural: &str, namespaced: bool, status: bool, schema: &str| {
            Resource {
                group: group.into(),
                version: "v1".into(),
                kind: kind.into(),
                plural: plural.into(),
                namespaced,
                status,
                builtin: true,
                schema_name: schema.into(),
            }
        };
    vec![
        r(
            "",
            "Namespace",
            "namespaces",
            false,
            true,
            "io.k8s.api.core.v1.Namespace",
        ),
        r(
            "",
            "Secret",
            "secrets",
            true,
            false,
            "io.k8s.api.core.v1.Secret",
        ),
        r(
            "",
            "ConfigMap",
            "configmaps",
            true,
            false,
            "io.k8s.api.core.v1.ConfigMap",
        ),
        r(
            "",
            "Event",
            "events",
            true,
            false,
            "io.k8s.api.core.v1.Event",
        ),
        r(
            "",
            "ServiceAccount",
            "serviceaccounts",
            true,
            false,
            "io.k8s.api.core.v1.ServiceAccount",
        ),
        r(
            "events.k8s.io",
            "Event",
            "events",
            true,
            false,
            "io.k8s.api.events.v1.Event",
        ),
        r(
            "coordination.k8s.io",
            "Lease",
            "leases",
            true,
            false,
            "io.k8s.api.coordination.v1.Lease",
        ),
        r(
            "",
            "Service",
            "services",
            true,
            true,
            "io.k8s.api.core.v1.Service",
        ),
        r(
            "apps",
            "Deployment",
            "deployments",
            true,
            true,
            "io.k8s.api.apps.v1.Deployment",
        ),
        r(
            "rbac.authorization.k8s.io",
            "Role",
            "roles",
            true,
            false,
            "io.k8s.api.rbac.v1.Role",
        ),
        r(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            "rolebindings",
            true,
            false,
            "io.k8s.api.rbac.v1.RoleBinding",
        ),
        r(
            "rbac.authorization.k8s.io",
            "ClusterRole",
            "clusterroles",
            false,
            false,
            "io.k8s.api.rbac.v1.ClusterRole",
        ),
        r(
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            false,
            "io.k8s.api.rbac.v1.ClusterRoleBinding",
        ),
        r(
            "policy",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
            true,
            "io.k8s.api.policy.v1.PodDisruptionBudget",
        ),
        r(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            true,
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
        ),
    ]
}

/// `secrets.quartet.dev` -> `dev.quartet.secrets` (kube's CRD definition-name prefix).
fn reversed_group(group: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    parts.join(".")
}

/// Served versions of CRDs as resources, with their schemas.
fn crd_resources(crds: &[Value]) -> Vec<(Resource, Value)> {
    let mut out = Vec::new();
    for crd in crds {
        let spec = &crd["spec"];
        let (Some(group), Some(kind), Some(plural)) = (
            spec["group"].as_str(),
            spec["names"]["kind"].as_str(),
            spec["names"]["plural"].as_str(),
        ) else {
            continue;
        };
        let namespaced = spec["scope"].as_str() != Some("Cluster");
        for v in spec["versions"].as_array().into_iter().flatten() {
            if v["served"].as_bool() != Some(true) {
                continue;
            }
            let Some(version) = v["name"].as_str() else {
                continue;
            };
            let res = Resource {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                plural: plural.into(),
                namespaced,
                status: v["subresources"]["status"].is_object(),
                builtin: false,
                schema_name: format!("{}.{version}.{kind}", reversed_group(group)),
            };
            let schema = v["schema"]["openAPIV3Schema"].clone();
            out.push((res, schema));
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// Schemas
// ------------------------------------------------------------------------------------------

fn generator(v3: bool) -> SchemaGenerator {
    let settings = if v3 {
        SchemaSettings::openapi3().with(|s| s.meta_schema = None)
    } else {
        SchemaSettings::draft07().with(|s| {
            s.definitions_path = "/definitions".into();
            s.meta_schema = None;
            s.transforms = Vec::new();
        })
    };
    settings.into_generator()
}

fn add<T: JsonSchema>(g: &mut SchemaGenerator) {
    let _ = g.subschema_for::<T>();
}

/// Schemas of the meta types every group-version document references.
fn meta_definitions(g: &mut SchemaGenerator) {
    add::<meta::ObjectMeta>(g);
    add::<meta::ListMeta>(g);
    add::<meta::Status>(g);
    add::<meta::DeleteOptions>(g);
    add::<meta::Patch>(g);
}

/// Built-in schemas of group-version `gv` (cached: they never change).
fn builtin_definitions(gv: &str, v3: bool) -> Map<String, Value> {
    type Cache = std::sync::Mutex<BTreeMap<(String, bool), Map<String, Value>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Ok(c) = cache.lock() {
        if let Some(m) = c.get(&(gv.to_string(), v3)) {
            return m.clone();
        }
    }
    let mut g = generator(v3);
    meta_definitions(&mut g);
    match gv {
        "v1" => {
            add::<core::Namespace>(&mut g);
            add::<core::Secret>(&mut g);
            add::<core::ConfigMap>(&mut g);
            add::<core::Event>(&mut g);
            add::<core::ServiceAccount>(&mut g);
            add::<core::Service>(&mut g);
        }
        "apps/v1" => add::<apps::Deployment>(&mut g),
        "rbac.authorization.k8s.io/v1" => {
            add::<rbac::Role>(&mut g);
            add::<rbac::RoleBinding>(&mut g);
            add::<rbac::ClusterRole>(&mut g);
            add::<rbac::ClusterRoleBinding>(&mut g);
        }
        "policy/v1" => add::<policy::PodDisruptionBudget>(&mut g),
        "events.k8s.io/v1" => add::<events::Event>(&mut g),
        "coordination.k8s.io/v1" => add::<coordination::Lease>(&mut g),
        "apiextensions.k8s.io/v1" => add::<apiextensions::CustomResourceDefinition>(&mut g),
        _ => {}
    }
    let mut defs = g.take_definitions(true);
    defs.insert(
        WATCH_EVENT.into(),
        json!({
            "description": "Event represents a single event to a watched resource.",
            "type": "object",
            "required": ["type", "object"],
            "properties": {
                "type": {"type": "string", "default": ""},
                "object": {"description": "Object is:\n * If Type is Added or Modified: the new state of the object.\n * If Type is Deleted: the state of the object immediately before deletion.\n * If Type is Error: *Status is recommended; other types may make sense\n   depending on context.", "type": "object"}
            }
        }),
    );
    if let Ok(mut c) = cache.lock() {
        c.insert((gv.to_string(), v3), defs.clone());
    }
    defs
}

fn ref_to(name: &str, v3: bool) -> Value {
    if v3 {
        json!({"$ref": format!("#/components/schemas/{name}")})
    } else {
        json!({"$ref": format!("#/definitions/{name}")})
    }
}

/// `allOf: [{$ref}]` with a description, as kube writes referenced fields in v3.
fn ref_field(name: &str, description: &str, v3: bool) -> Value {
    if v3 {
        json!({"allOf": [ref_to(name, true)], "description": description, "default": {}})
    } else {
        let mut r = ref_to(name, false);
        r["description"] = json!(description);
        r
    }
}

/// Swagger 2.0 cannot carry `nullable`, `anyOf`, `oneOf`, `not`; kube drops them (and the
/// type of nullable fields) when publishing CRD schemas in v2.
fn to_v2_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let nullable = m.get("nullable").and_then(Value::as_bool) == Some(true);
            let mut out = Map::new();
            for (k, x) in m {
                match k.as_str() {
                    "nullable" | "anyOf" | "oneOf" | "not" => {}
                    "type" if nullable => {}
                    "$ref" => {
                        let r = x
                            .as_str()
                            .unwrap_or("")
                            .replace("#/components/schemas/", "#/definitions/");
                        out.insert(k.clone(), Value::String(r));
                    }
                    "properties" | "patternProperties" | "definitions" => {
                        let props = x
                            .as_object()
                            .map(|p| {
                                p.iter()
                                    .map(|(pk, pv)| (pk.clone(), to_v2_schema(pv)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    "items" | "additionalProperties" => {
                        out.insert(k.clone(), to_v2_schema(x));
                    }
                    "allOf" => {
                        let list = x
                            .as_array()
                            .map(|a| a.iter().map(to_v2_schema).collect())
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Array(list));
                    }
                    _ => {
                        out.insert(k.clone(), x.clone());
                    }
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The published schema of a custom resource version: the CRD's schema with standard
/// `apiVersion`/`kind`/`metadata` fields and `x-kubernetes-group-version-kind`.
fn cr_schema(res: &Resource, schema: &Value, v3: bool) -> Value {
    let mut s = if schema.is_object() {
        schema.clone()
    } else {
        json!({"type": "object"})
    };
    let props = s.as_object_mut().and_then(|o| {
        o.entry("properties").or_insert_with(|| json!({}));
        o.get_mut("properties").and_then(Value::as_object_mut)
    });
    if let Some(props) = props {
        for (key, doc) in [("apiVersion", API_VERSION_DOC), ("kind", KIND_DOC)] {
            let entry = props
                .entry(key)
                .or_insert_with(|| json!({"type": "string"}));
            if entry.get("description").is_none() {
                entry["description"] = json!(doc);
            }
        }
        props.insert("metadata".into(), ref_field(OBJECT_META, METADATA_DOC, v3));
    }
    s["x-kubernetes-group-version-kind"] = json!([res.gvk()]);
    if v3 {
        s
    } else {
        to_v2_schema(&s)
    }
}

fn list_schema(res: &Resource, v3: bool) -> Value {
    json!({
        "description": format!("{}List is a list of {}", res.kind, res.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DOC, "type": "string"},
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", res.plural),
                "type": "array",
                "items": ref_to(&res.schema_name, v3)
            },
            "kind": {"description": KIND_DOC, "type": "string"},
            "metadata": ref_field(LIST_META, LIST_METADATA_DOC, v3)
        },
        "x-kubernetes-group-version-kind": [{"group": res.group, "kind": format!("{}List", res.kind), "version": res.version}]
    })
}

// ------------------------------------------------------------------------------------------
// Paths
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Body {
    None,
    Object,
    Patch,
    Delete,
}

struct Op {
    path: String,
    method: &'static str,
    action: &'static str,
    id: String,
    description: String,
    body: Body,
    params: Vec<Value>,
    response: String,
}

fn camel(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// kube's operation-id group part: `core` for the legacy group, `.k8s.io` dropped, dots
/// camel-cased (`secrets.quartet.dev` -> `SecretsQuartetDev`).
fn group_id(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    let g = group.strip_suffix(".k8s.io").unwrap_or(group);
    g.split(['.', '-']).map(camel).collect()
}

fn tag(res: &Resource) -> String {
    let g = group_id(&res.group);
    let mut c = g.chars();
    let lower = match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    };
    format!("{lower}_{}", res.version)
}

fn query(name: &str, description: &str, ty: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": ty}, "uniqueItems": true})
}

fn list_params() -> Vec<Value> {
    vec![
        query("allowWatchBookmarks", "allowWatchBookmarks requests watch events with type \"BOOKMARK\".", "boolean"),
        query("continue", "The continue option should be set when retrieving more results from the server.", "string"),
        query("fieldSelector", "A selector to restrict the list of returned objects by their fields. Defaults to everything.", "string"),
        query("labelSelector", "A selector to restrict the list of returned objects by their labels. Defaults to everything.", "string"),
        query("limit", "limit is a maximum number of responses to return for a list call.", "integer"),
        query("resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from.", "string"),
        query("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied to list calls.", "string"),
        query("sendInitialEvents", "`sendInitialEvents=true` may be set together with `watch=true`.", "boolean"),
        query("timeoutSeconds", "Timeout for the list/watch call.", "integer"),
        query("watch", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.", "boolean"),
    ]
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut p = vec![
        query("dryRun", "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed", "string"),
        query("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes.", "string"),
        query("fieldValidation", FIELD_VALIDATION_DOC, "string"),
    ];
    if patch {
        p.push(query("force", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.", "boolean"));
    }
    p
}

fn delete_params() -> Vec<Value> {
    vec![
        query("dryRun", "When present, indicates that modifications should not be persisted.", "string"),
        query("gracePeriodSeconds", "The duration in seconds before the object should be deleted.", "integer"),
        query("orphanDependents", "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7.", "boolean"),
        query("propagationPolicy", "Whether and how garbage collection will be performed. Acceptable values are: 'Orphan', 'Background', 'Foreground'.", "string"),
    ]
}

fn operations(res: &Resource) -> Vec<Op> {
    let base = if res.group.is_empty() {
        format!("/api/{}", res.version)
    } else {
        format!("/apis/{}/{}", res.group, res.version)
    };
    let gid = format!("{}{}", group_id(&res.group), camel(&res.version));
    let ns = if res.namespaced { "Namespaced" } else { "" };
    let coll = if res.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", res.plural)
    } else {
        format!("{base}/{}", res.plural)
    };
    let item = format!("{coll}/{{name}}");
    let watch_coll = if res.namespaced {
        format!("{base}/watch/namespaces/{{namespace}}/{}", res.plural)
    } else {
        format!("{base}/watch/{}", res.plural)
    };
    let k = &res.kind;
    let list = res.list_schema_name();
    let kind_schema = res.schema_name.clone();
    let op = |path: &str,
              method,
              action,
              id: String,
              description: String,
              body,
              params,
              response: &str| Op {
        path: path.to_string(),
        method,
        action,
        id,
        description,
        body,
        params,
        response: response.to_string(),
    };
    let mut ops = vec![
        op(&coll, "get", "list", format!("list{gid}{ns}{k}"), format!("list or watch objects of kind {k}"), Body::None, list_params(), &list),
        op(&coll, "post", "post", format!("create{gid}{ns}{k}"), format!("create a {k}"), Body::Object, write_params(false), &kind_schema),
        op(&coll, "delete", "deletecollection", format!("delete{gid}Collection{ns}{k}"), format!("delete collection of {k}"), Body::Delete, delete_params(), STATUS),
        op(&item, "get", "get", format!("read{gid}{ns}{k}"), format!("read the specified {k}"), Body::None, vec![], &kind_schema),
        op(&item, "put", "put", format!("replace{gid}{ns}{k}"), format!("replace the specified {k}"), Body::Object, write_params(false), &kind_schema),
        op(&item, "patch", "patch", format!("patch{gid}{ns}{k}"), format!("partially update the specified {k}"), Body::Patch, write_params(true), &kind_schema),
        op(&item, "delete", "delete", format!("delete{gid}{ns}{k}"), format!("delete a {k}"), Body::Delete, delete_params(), STATUS),
        op(&watch_coll, "get", "watchlist", format!("watch{gid}{ns}{k}List"), format!("watch individual changes to a list of {k}. deprecated: use the 'watch' parameter with a list operation instead."), Body::None, list_params(), WATCH_EVENT),
        op(&format!("{watch_coll}/{{name}}"), "get", "watch", format!("watch{gid}{ns}{k}"), format!("watch changes to an object of kind {k}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."), Body::None, list_params(), WATCH_EVENT),
    ];
    if res.namespaced {
        ops.push(op(
            &format!("{base}/{}", res.plural),
            "get",
            "list",
            format!("list{gid}{k}ForAllNamespaces"),
            format!("list or watch objects of kind {k}"),
            Body::None,
            list_params(),
            &list,
        ));
        ops.push(op(&format!("{base}/watch/{}", res.plural), "get", "watchlist", format!("watch{gid}{k}ListForAllNamespaces"), format!("watch individual changes to a list of {k}. deprecated: use the 'watch' parameter with a list operation instead."), Body::None, list_params(), WATCH_EVENT));
    }
    if res.status {
        let st = format!("{item}/status");
        ops.push(op(
            &st,
            "get",
            "get",
            format!("read{gid}{ns}{k}Status"),
            format!("read status of the specified {k}"),
            Body::None,
            vec![],
            &kind_schema,
        ));
        ops.push(op(
            &st,
            "put",
            "put",
            format!("replace{gid}{ns}{k}Status"),
            format!("replace status of the specified {k}"),
            Body::Object,
            write_params(false),
            &kind_schema,
        ));
        ops.push(op(
            &st,
            "patch",
            "patch",
            format!("patch{gid}{ns}{k}Status"),
            format!("partially update status of the specified {k}"),
            Body::Patch,
            write_params(true),
            &kind_schema,
        ));
    }
    ops
}

fn path_params(path: &str) -> Vec<Value> {
    let mut p = Vec::new();
    if path.contains("{name}") {
        p.push(json!({"name": "name", "in": "path", "description": "name of the resource", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
    }
    if path.contains("{namespace}") {
        p.push(json!({"name": "namespace", "in": "path", "description": "object name and auth scope, such as for teams and projects", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
    }
    p.push(json!({"name": "pretty", "in": "query", "description": "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).", "schema": {"type": "string", "uniqueItems": true}}));
    p
}

fn patch_content_types(res: &Resource, v3: bool) -> Vec<&'static str> {
    let mut types = vec![
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    // See the module docs: built-ins advertise strategic merge only in v2.
    if res.builtin && !v3 {
        types.push("application/strategic-merge-patch+json");
    }
    types
}

fn v3_operation(res: &Resource, op: &Op) -> Value {
    let schema = ref_to(&op.response, true);
    let ok = json!({"description": "OK", "content": {
        "application/json": {"schema": schema.clone()},
        "application/yaml": {"schema": schema.clone()},
        "application/vnd.kubernetes.protobuf": {"schema": schema.clone()}
    }});
    let mut responses = Map::new();
    responses.insert("200".into(), ok.clone());
    match op.action {
        "post" => {
            responses.insert(
                "201".into(),
                json!({"description": "Created", "content": ok["content"].clone()}),
            );
            responses.insert(
                "202".into(),
                json!({"description": "Accepted", "content": ok["content"].clone()}),
            );
        }
        "put" => {
            responses.insert(
                "201".into(),
                json!({"description": "Created", "content": ok["content"].clone()}),
            );
        }
        "patch" => {
            responses.insert(
                "201".into(),
                json!({"description": "Created", "content": ok["content"].clone()}),
            );
        }
        "delete" => {
            responses.insert(
                "202".into(),
                json!({"description": "Accepted", "content": ok["content"].clone()}),
            );
        }
        _ => {}
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    let mut o = json!({
        "tags": [tag(res)],
        "description": op.description,
        "operationId": op.id,
        "parameters": op.params,
        "responses": responses,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": res.gvk(),
    });
    match op.body {
        Body::None => {}
        Body::Object => {
            o["requestBody"] = json!({"content": {"*/*": {"schema": ref_to(&res.schema_name, true)}}, "required": true});
        }
        Body::Patch => {
            let content: Map<String, Value> = patch_content_types(res, true)
                .into_iter()
                .map(|t| (t.to_string(), json!({"schema": ref_to(PATCH, true)})))
                .collect();
            o["requestBody"] = json!({"content": content, "required": true});
        }
        Body::Delete => {
            o["requestBody"] =
                json!({"content": {"*/*": {"schema": ref_to(DELETE_OPTIONS, true)}}});
        }
    }
    o
}

fn v2_operation(res: &Resource, op: &Op) -> Value {
    let mut params: Vec<Value> = op
        .params
        .iter()
        .map(|p| {
            json!({"uniqueItems": true, "type": p["schema"]["type"], "description": p["description"], "name": p["name"], "in": "query"})
        })
        .collect();
    match op.body {
        Body::None => {}
        Body::Object => params.insert(0, json!({"name": "body", "in": "body", "required": true, "schema": ref_to(&res.schema_name, false)})),
        Body::Patch => params.insert(0, json!({"name": "body", "in": "body", "required": true, "schema": ref_to(PATCH, false)})),
        Body::Delete => params.insert(0, json!({"name": "body", "in": "body", "schema": ref_to(DELETE_OPTIONS, false)})),
    }
    let consumes: Vec<&str> = match op.body {
        Body::Patch => patch_content_types(res, false),
        _ => vec!["*/*"],
    };
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({"description": "OK", "schema": ref_to(&op.response, false)}),
    );
    if matches!(op.action, "post" | "put" | "patch") {
        responses.insert(
            "201".into(),
            json!({"description": "Created", "schema": ref_to(&op.response, false)}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    json!({
        "description": op.description,
        "consumes": consumes,
        "produces": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
        "schemes": ["https"],
        "tags": [tag(res)],
        "operationId": op.id,
        "parameters": params,
        "responses": responses,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": res.gvk(),
    })
}

fn add_paths(paths: &mut Map<String, Value>, res: &Resource, v3: bool) {
    for op in operations(res) {
        let entry = paths.entry(op.path.clone()).or_insert_with(|| {
            let params: Vec<Value> = if v3 {
                path_params(&op.path)
            } else {
                path_params(&op.path)
                    .into_iter()
                    .map(|p| json!({"uniqueItems": true, "type": "string", "description": p["description"], "name": p["name"], "in": p["in"], "required": p.get("required").cloned().unwrap_or(json!(false))}))
                    .collect()
            };
            json!({"parameters": params})
        });
        let rendered = if v3 {
            v3_operation(res, &op)
        } else {
            v2_operation(res, &op)
        };
        entry[op.method] = rendered;
    }
}

// ------------------------------------------------------------------------------------------
// Documents
// ------------------------------------------------------------------------------------------

fn resources_of(crds: &[Value], gv: &str) -> (Vec<Resource>, Vec<(Resource, Value)>) {
    let builtins: Vec<Resource> = builtin_resources()
        .into_iter()
        .filter(|r| r.gv() == gv)
        .collect();
    let crs: Vec<(Resource, Value)> = crd_resources(crds)
        .into_iter()
        .filter(|(r, _)| r.gv() == gv)
        .collect();
    (builtins, crs)
}

/// Every group-version served, in discovery order.
fn group_versions(crds: &[Value]) -> Vec<String> {
    let mut gvs: Vec<String> = Vec::new();
    for r in builtin_resources()
        .iter()
        .map(Resource::gv)
        .chain(crd_resources(crds).iter().map(|(r, _)| r.gv()))
    {
        if !gvs.contains(&r) {
            gvs.push(r);
        }
    }
    gvs
}

fn definitions_for(
    builtins: &[Resource],
    crs: &[(Resource, Value)],
    gv: &str,
    v3: bool,
) -> Map<String, Value> {
    let mut defs = builtin_definitions(if builtins.is_empty() { "" } else { gv }, v3);
    for r in builtins {
        if let Some(s) = defs.get_mut(&r.schema_name) {
            s["x-kubernetes-group-version-kind"] = json!([r.gvk()]);
        }
        defs.insert(r.list_schema_name(), list_schema(r, v3));
    }
    for (r, schema) in crs {
        defs.insert(r.schema_name.clone(), cr_schema(r, schema, v3));
        defs.insert(r.list_schema_name(), list_schema(r, v3));
    }
    defs
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": "v1.33.0"})
}

/// `GET /openapi/v3/<api/v1|apis/g/v>`.
pub(crate) fn v3_group_version(crds: &[Value], gv: &str) -> Option<Value> {
    let (builtins, crs) = resources_of(crds, gv);
    if builtins.is_empty() && crs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for r in builtins.iter().chain(crs.iter().map(|(r, _)| r)) {
        add_paths(&mut paths, r, true);
    }
    let schemas = definitions_for(&builtins, &crs, gv, true);
    Some(json!({
        "openapi": "3.0.0",
        "info": info(),
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}}
        }
    }))
}

/// A stable content hash (two FNV-1a 64 lanes, upper-case hex) used as `?hash=` so kubectl's
/// cache of a group-version document is invalidated exactly when the document changes.
pub(crate) fn content_hash(v: &Value) -> String {
    let bytes = v.to_string();
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    for byte in bytes.as_bytes() {
        a = (a ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
        b = (b ^ u64::from(*byte))
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(5);
    }
    format!("{a:016X}{b:016X}")
}

fn gv_path(gv: &str) -> String {
    if gv.contains('/') {
        format!("apis/{gv}")
    } else {
        format!("api/{gv}")
    }
}

/// `GET /openapi/v3`.
pub(crate) fn v3_index(crds: &[Value]) -> Value {
    let mut paths = Map::new();
    // Documents of built-in-only group-versions never change: hash them once.
    static BUILTIN_HASHES: OnceLock<std::sync::Mutex<BTreeMap<String, String>>> = OnceLock::new();
    let cache = BUILTIN_HASHES.get_or_init(Default::default);
    for gv in group_versions(crds) {
        let builtin_only = resources_of(crds, &gv).1.is_empty();
        let cached = if builtin_only {
            cache.lock().ok().and_then(|c| c.get(&gv).cloned())
        } else {
            None
        };
        let hash = match cached {
            Some(h) => h,
            None => {
                let Some(doc) = v3_group_version(crds, &gv) else {
                    continue;
                };
                let h = content_hash(&doc);
                if builtin_only {
                    if let Ok(mut c) = cache.lock() {
                        c.insert(gv.clone(), h.clone());
                    }
                }
                h
            }
        };
        let p = gv_path(&gv);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// `GET /openapi/v2`.
pub(crate) fn v2(crds: &[Value]) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for gv in group_versions(crds) {
        let (builtins, crs) = resources_of(crds, &gv);
        for r in builtins.iter().chain(crs.iter().map(|(r, _)| r)) {
            add_paths(&mut paths, r, false);
        }
        definitions.extend(definitions_for(&builtins, &crs, &gv, false));
    }
    json!({
        "swagger": "2.0",
        "info": info(),
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}]
    })
}
