//! Which resources are served: the built-in kinds and one entry per established CRD, plus the
//! discovery documents (legacy and aggregated) built from them.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// One served resource (all its served versions share storage).
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    pub group: String,
    /// Served versions, the preferred one first.
    pub versions: Vec<String>,
    pub storage_version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    /// Name of the defining CRD for custom resources.
    pub crd: Option<String>,
    /// `metadata.generation` is maintained (custom resources, CRDs).
    pub has_generation: bool,
    /// DELETE answers with the object rather than a `Success` Status.
    pub return_deleted_object: bool,
    /// Where objects live when another resource owns the storage (events.k8s.io events are
    /// stored as core/v1 events).
    pub storage: Option<ResKey>,
    /// Extra field-selector paths (a CRD's `selectableFields`, without the leading dot).
    pub selectable: Vec<String>,
    /// A review API (TokenReview, SubjectAccessReview, ...): only `create`, nothing stored.
    pub create_only: bool,
}

/// Storage key of a resource: `(group, plural)`.
pub type ResKey = (String, String);

impl ResourceInfo {
    /// Storage key: where the objects live.
    pub fn key(&self) -> ResKey {
        self.storage.clone().unwrap_or_else(|| self.id())
    }

    /// Identity in the registry: `(group, plural)`.
    pub fn id(&self) -> ResKey {
        (self.group.clone(), self.plural.clone())
    }

    /// events.k8s.io/v1 events (stored as core/v1 events).
    pub fn is_new_event(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }

    pub fn api_version(&self, version: &str) -> String {
        gv(&self.group, version)
    }

    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

pub fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    singular: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    categories: &[&str],
    status: bool,
) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        versions: vec![version.into()],
        storage_version: version.into(),
        plural: plural.into(),
        singular: singular.into(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: categories.iter().map(|s| s.to_string()).collect(),
        status_subresource: status,
        crd: None,
        // kube-apiserver's strategies bump `metadata.generation` for these on spec changes.
        has_generation: matches!(
            kind,
            "CustomResourceDefinition" | "Deployment" | "PodDisruptionBudget"
        ),
        return_deleted_object: matches!(kind, "Namespace" | "CustomResourceDefinition"),
        storage: (group == "events.k8s.io").then(|| (String::new(), "events".to_string())),
        selectable: Vec::new(),
        create_only: false,
    }
}

/// A review API: served in discovery with the one verb `create`, answered by
/// `tokens` and `reviews` without storage.
fn review(group: &str, plural: &str, kind: &str, namespaced: bool) -> ResourceInfo {
    ResourceInfo {
        create_only: true,
        return_deleted_object: false,
        has_generation: false,
        storage: None,
        ..builtin(
            group,
            "v1",
            plural,
            &kind.to_lowercase(),
            kind,
            namespaced,
            &[],
            &[],
            false,
        )
    }
}

/// The built-in kinds this server serves.
pub fn builtins() -> Vec<ResourceInfo> {
    vec![
        builtin(
            "",
            "v1",
            "namespaces",
            "namespace",
            "Namespace",
            false,
            &["ns"],
            &[],
            true,
        ),
        builtin(
            "",
            "v1",
            "secrets",
            "secret",
            "Secret",
            true,
            &[],
            &[],
            false,
        ),
        builtin(
            "",
            "v1",
            "configmaps",
            "configmap",
            "ConfigMap",
            true,
            &["cm"],
            &[],
            false,
        ),
        builtin(
            "",
            "v1",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            &[],
            false,
        ),
        builtin(
            "",
            "v1",
            "serviceaccounts",
            "serviceaccount",
            "ServiceAccount",
            true,
            &["sa"],
            &[],
            false,
        ),
        builtin(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            &[],
            false,
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "leases",
            "lease",
            "Lease",
            true,
            &[],
            &[],
            false,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            &["api-extensions"],
            true,
        ),
        // The kinds a Helm chart of an operator creates: stored and served, no controllers
        // (a Deployment never gets Pods, a Service never gets endpoints).
        builtin(
            "",
            "v1",
            "services",
            "service",
            "Service",
            true,
            &["svc"],
            &["all"],
            true,
        ),
        builtin(
            "apps",
            "v1",
            "deployments",
            "deployment",
            "Deployment",
            true,
            &["deploy"],
            &["all"],
            true,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "roles",
            "role",
            "Role",
            true,
            &[],
            &[],
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "rolebinding",
            "RoleBinding",
            true,
            &[],
            &[],
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "clusterrole",
            "ClusterRole",
            false,
            &[],
            &[],
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "clusterrolebinding",
            "ClusterRoleBinding",
            false,
            &[],
            &[],
            false,
        ),
        builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            "PodDisruptionBudget",
            true,
            &["pdb"],
            &[],
            true,
        ),
        review(
            "authentication.k8s.io",
            "tokenreviews",
            "TokenReview",
            false,
        ),
        review(
            "authentication.k8s.io",
            "selfsubjectreviews",
            "SelfSubjectReview",
            false,
        ),
        review(
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            false,
        ),
        review(
            "authorization.k8s.io",
            "selfsubjectrulesreviews",
            "SelfSubjectRulesReview",
            false,
        ),
        review(
            "authorization.k8s.io",
            "subjectaccessreviews",
            "SubjectAccessReview",
            false,
        ),
        review(
            "authorization.k8s.io",
            "localsubjectaccessreviews",
            "LocalSubjectAccessReview",
            true,
        ),
    ]
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    for (prefix, rank) in [("beta", 2u8), ("alpha", 1u8)] {
        if let Some(n) = tail.strip_prefix(prefix) {
            if let Ok(minor) = n.parse::<u32>() {
                return (rank, major, minor);
            }
        }
    }
    (0, 0, 0)
}

/// The resource a CRD object defines, or `None` if it is malformed or serves no version.
pub fn from_crd(crd: &Value) -> Option<ResourceInfo> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let group = spec["group"].as_str()?.to_string();
    let plural = names["plural"].as_str()?.to_string();
    let kind = names["kind"].as_str()?.to_string();
    let singular = names["singular"]
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = names["listKind"]
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| format!("{kind}List"));
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut versions = Vec::new();
    let mut storage = None;
    let mut status = false;
    let mut selectable = Vec::new();
    for v in spec["versions"].as_array()? {
        for f in v["selectableFields"].as_array().into_iter().flatten() {
            if let Some(p) = f["jsonPath"].as_str() {
                let p = p.trim_start_matches('.').to_string();
                if !selectable.contains(&p) {
                    selectable.push(p);
                }
            }
        }
        let name = v["name"].as_str()?.to_string();
        if v["storage"].as_bool() == Some(true) {
            storage = Some(name.clone());
        }
        if v["served"].as_bool().unwrap_or(false) {
            if v["subresources"]["status"].is_object() {
                status = true;
            }
            versions.push(name);
        }
    }
    if versions.is_empty() {
        return None;
    }
    versions.sort_by(|a, b| version_priority(b).cmp(&version_priority(a)).then(a.cmp(b)));
    let storage_version = storage.unwrap_or_else(|| versions[0].clone());
    Some(ResourceInfo {
        group,
        versions,
        storage_version,
        plural,
        singular,
        kind,
        list_kind,
        namespaced: spec["scope"].as_str() != Some("Cluster"),
        short_names: strs(&names["shortNames"]),
        categories: strs(&names["categories"]),
        status_subresource: status,
        crd: crd["metadata"]["name"].as_str().map(String::from),
        has_generation: true,
        return_deleted_object: true,
        storage: None,
        selectable,
        create_only: false,
    })
}

/// The set of served resources.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    pub resources: BTreeMap<ResKey, ResourceInfo>,
}

impl Registry {
    pub fn new() -> Self {
        let mut r = Self::default();
        for b in builtins() {
            r.resources.insert(b.id(), b);
        }
        r
    }

    pub fn get(&self, group: &str, plural: &str) -> Option<&ResourceInfo> {
        self.resources.get(&(group.to_string(), plural.to_string()))
    }

    /// Groups in discovery order (core first, then by name) with their versions, preferred first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in self.resources.values() {
            let e = groups.entry(r.group.clone()).or_default();
            for v in &r.versions {
                if !e.contains(v) {
                    e.push(v.clone());
                }
            }
        }
        groups
            .into_iter()
            .map(|(g, mut vs)| {
                vs.sort_by(|a, b| version_priority(b).cmp(&version_priority(a)).then(a.cmp(b)));
                (g, vs)
            })
            .collect()
    }

    fn resources_in(&self, group: &str, version: &str) -> Vec<&ResourceInfo> {
        self.resources
            .values()
            .filter(|r| r.group == group && r.versions.iter().any(|v| v == version))
            .collect()
    }

    /// `GET /api/v1` or `/apis/{g}/{v}`: an `APIResourceList`; `None` when not served.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let rs = self.resources_in(group, version);
        if rs.is_empty() {
            return None;
        }
        let mut list = Vec::new();
        for r in rs {
            let mut e = json!({
                "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                "kind": r.kind, "verbs": r.verbs(),
            });
            if !r.short_names.is_empty() {
                e["shortNames"] = json!(r.short_names);
            }
            if !r.categories.is_empty() {
                e["categories"] = json!(r.categories);
            }
            if r.plural == "namespaces" && r.group.is_empty() {
                list.push(e);
                list.push(json!({"name": "namespaces/finalize", "singularName": "", "namespaced": false, "kind": "Namespace", "verbs": ["update"]}));
                list.push(json!({"name": "namespaces/status", "singularName": "", "namespaced": false, "kind": "Namespace", "verbs": ["get", "patch", "update"]}));
                continue;
            }
            list.push(e);
            if r.plural == "serviceaccounts" && r.group.is_empty() {
                list.push(json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true, "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}));
            }
            if r.status_subresource {
                list.push(json!({"name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]}));
            }
        }
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv(group, version), "resources": list}),
        )
    }

    fn api_group(&self, group: &str, versions: &[String]) -> Value {
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": gv(group, v), "version": v}))
            .collect();
        json!({"name": group, "versions": vs, "preferredVersion": vs[0]})
    }

    /// `GET /apis`: the `APIGroupList`.
    pub fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .into_iter()
            .filter(|(g, _)| !g.is_empty())
            .map(|(g, vs)| self.api_group(&g, &vs))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `GET /apis/{g}`: the `APIGroup`.
    pub fn group(&self, group: &str) -> Option<Value> {
        let (_, vs) = self
            .groups()
            .into_iter()
            .find(|(g, _)| g == group && !g.is_empty())?;
        let mut v = self.api_group(group, &vs);
        v["kind"] = json!("APIGroup");
        v["apiVersion"] = json!("v1");
        Some(v)
    }

    /// Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) for `/api`
    /// (`core` true) or `/apis`.
    pub fn aggregated(&self, core: bool, api_version: &str) -> Value {
        let mut items = Vec::new();
        for (g, vs) in self.groups() {
            if g.is_empty() != core {
                continue;
            }
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = self
                        .resources_in(&g, v)
                        .into_iter()
                        .map(|r| {
                            let rk = json!({"group": r.group, "version": v, "kind": r.kind});
                            let mut subs = Vec::new();
                            if r.status_subresource {
                                subs.push(json!({"subresource": "status", "responseKind": rk, "verbs": ["get", "patch", "update"]}));
                            }
                            if r.plural == "namespaces" && r.group.is_empty() {
                                subs.push(json!({"subresource": "finalize", "responseKind": rk, "verbs": ["update"]}));
                            }
                            if r.plural == "serviceaccounts" && r.group.is_empty() {
                                subs.push(json!({"subresource": "token", "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}, "verbs": ["create"]}));
                            }
                            let mut e = json!({
                                "resource": r.plural, "responseKind": rk,
                                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": r.singular, "verbs": r.verbs(),
                            });
                            if !r.short_names.is_empty() {
                                e["shortNames"] = json!(r.short_names);
                            }
                            if !r.categories.is_empty() {
                                e["categories"] = json!(r.categories);
                            }
                            if !subs.is_empty() {
                                e["subresources"] = json!(subs);
                            }
                            e
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            items.push(
                json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions}),
            );
        }
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items})
    }
}
