//! The RBAC objects themselves: what kube-apiserver defaults and validates in a Role,
//! ClusterRole, RoleBinding or ClusterRoleBinding (`pkg/apis/rbac/v1/defaults.go`,
//! `pkg/apis/rbac/validation`), and the ClusterRole aggregation kube-controller-manager runs
//! (`clusterroleaggregation`), so that a chart's roles a real cluster refuses are refused here,
//! and a ClusterRole labelled `rbac.authorization.k8s.io/aggregate-to-edit: "true"` lends its
//! rules to `edit` as it does on a real cluster.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::schema::{label_key_errors, label_value_errors, FieldError};
use super::store::{name_of, State};

pub const GROUP: &str = "rbac.authorization.k8s.io";

fn key(plural: &str) -> (String, String) {
    (GROUP.to_string(), plural.to_string())
}

fn strs(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn count(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

/// `minimalNameRequirements` (`path.IsValidPathSegmentName`): the names of RBAC objects, and a
/// binding's `roleRef.name`, need only be usable as one segment of a URL path, so
/// `system:controller:x` is a valid ClusterRole name where most kinds want a DNS subdomain.
pub fn name_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// `SetDefaults_RoleBinding`, `SetDefaults_ClusterRoleBinding` and `SetDefaults_Subject`: an
/// empty `roleRef.apiGroup` is the RBAC group, and so is a User's or Group's subject's.
pub fn default_binding(obj: &mut Value) {
    if obj["roleRef"].is_object()
        && obj["roleRef"]["apiGroup"]
            .as_str()
            .is_none_or(str::is_empty)
    {
        obj["roleRef"]["apiGroup"] = json!(GROUP);
    }
    if let Some(subjects) = obj["subjects"].as_array_mut() {
        for s in subjects {
            let kind = s["kind"].as_str().unwrap_or_default();
            if matches!(kind, "User" | "Group") && s["apiGroup"].as_str().is_none_or(str::is_empty)
            {
                s["apiGroup"] = json!(GROUP);
            }
        }
    }
}

/// `ValidateRole` / `ValidateClusterRole` (their own fields; the name is checked with the
/// metadata): every rule, and a ClusterRole's `aggregationRule`.
pub fn role_errors(role: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, rule) in role["rules"].as_array().into_iter().flatten().enumerate() {
        errs.extend(rule_errors(rule, namespaced, &format!("rules[{i}]")));
    }
    let aggregation = &role["aggregationRule"];
    if !namespaced && aggregation.is_object() {
        let path = "aggregationRule.clusterRoleSelectors";
        if count(&aggregation["clusterRoleSelectors"]) == 0 {
            errs.push(FieldError::required(
                path,
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        let selectors = aggregation["clusterRoleSelectors"].as_array();
        for (i, selector) in selectors.into_iter().flatten().enumerate() {
            let path = format!("{path}[{i}]");
            let found = selector_errors(selector, &path);
            if !found.is_empty() {
                errs.extend(found);
                // `LabelSelectorAsSelector` fails on what validation refused (the selector it
                // would have returned is nil, printed as null).
                errs.push(FieldError::invalid(
                    &path,
                    &Value::Null,
                    "invalid label selector.",
                ));
            }
        }
    }
    errs
}

/// `ValidatePolicyRule`.
fn rule_errors(rule: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if count(&rule["verbs"]) == 0 {
        errs.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    if count(&rule["nonResourceURLs"]) > 0 {
        let urls = &rule["nonResourceURLs"];
        if namespaced {
            errs.push(FieldError::invalid(
                format!("{path}.nonResourceURLs"),
                urls,
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|f| count(&rule[*f]) > 0)
        {
            errs.push(FieldError::invalid(
                format!("{path}.nonResourceURLs"),
                urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if count(&rule["apiGroups"]) == 0 {
        errs.push(FieldError::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if count(&rule["resources"]) == 0 {
        errs.push(FieldError::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

/// `ValidateLabelSelector` of a `metav1.LabelSelector` (creates: label values in selectors are
/// checked).
fn selector_errors(selector: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let labels_path = format!("{path}.matchLabels");
    for (k, v) in selector["matchLabels"].as_object().into_iter().flatten() {
        for msg in label_key_errors(k) {
            errs.push(FieldError::invalid(&labels_path, &json!(k), &msg));
        }
        for msg in v.as_str().map(label_value_errors).unwrap_or_default() {
            errs.push(FieldError::invalid(&labels_path, v, &msg));
        }
    }
    let exprs = selector["matchExpressions"].as_array();
    for (i, expr) in exprs.into_iter().flatten().enumerate() {
        let path = format!("{path}.matchExpressions[{i}]");
        let values = count(&expr["values"]);
        match expr["operator"].as_str().unwrap_or_default() {
            "In" | "NotIn" if values == 0 => errs.push(FieldError::required(
                format!("{path}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if values > 0 => errs.push(FieldError::forbidden(
                format!("{path}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(
                format!("{path}.operator"),
                &json!(other),
                "not a valid selector operator",
            )),
        }
        let key = expr["key"].as_str().unwrap_or_default();
        for msg in label_key_errors(key) {
            errs.push(FieldError::invalid(
                format!("{path}.key"),
                &json!(key),
                &msg,
            ));
        }
        for (j, value) in strs(&expr["values"]).enumerate() {
            for msg in label_value_errors(value) {
                errs.push(FieldError::invalid(
                    format!("{path}.values[{j}]"),
                    &json!(value),
                    &msg,
                ));
            }
        }
    }
    errs
}

/// `ValidateRoleBinding` / `ValidateClusterRoleBinding` (after defaulting), and on an update
/// the rule that a binding's `roleRef` never changes.
pub fn binding_errors(binding: &Value, old: Option<&Value>, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let role_ref = &binding["roleRef"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let api_group = text(&role_ref["apiGroup"]);
    if api_group != GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            &json!(api_group),
            &[GROUP.to_string()],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = text(&role_ref["kind"]);
    if !kinds.contains(&kind.as_str()) {
        let valid: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
        errs.push(FieldError::not_supported(
            "roleRef.kind",
            &json!(kind),
            &valid,
        ));
    }
    let name = text(&role_ref["name"]);
    if name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    }
    for msg in name_errors(&name) {
        errs.push(FieldError::invalid("roleRef.name", &json!(name), &msg));
    }
    for (i, subject) in binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        errs.extend(subject_errors(
            subject,
            namespaced,
            &format!("subjects[{i}]"),
        ));
    }
    if let Some(old) = old {
        let fields = |r: &Value| {
            ["apiGroup", "kind", "name"].map(|f| r[f].as_str().unwrap_or_default().to_string())
        };
        if fields(&old["roleRef"]) != fields(role_ref) {
            // The internal struct, marshalled without JSON tags.
            let [g, k, n] = fields(role_ref);
            errs.push(FieldError::invalid(
                "roleRef",
                &json!({"APIGroup": g, "Kind": k, "Name": n}),
                "cannot change roleRef",
            ));
        }
    }
    errs
}

/// `ValidateRoleBindingSubject`.
fn subject_errors(subject: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let text = |f: &str| subject[f].as_str().unwrap_or_default().to_string();
    let (kind, name, api_group) = (text("kind"), text("name"), text("apiGroup"));
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    match kind.as_str() {
        "ServiceAccount" => {
            if !name.is_empty() {
                for msg in super::schema::dns1123_subdomain_errors(&name) {
                    errs.push(FieldError::invalid(
                        format!("{path}.name"),
                        &json!(name),
                        &msg,
                    ));
                }
            }
            if !api_group.is_empty() {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    &json!(api_group),
                    &[String::new()],
                ));
            }
            if !namespaced && text("namespace").is_empty() {
                errs.push(FieldError::required(format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if api_group != GROUP {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    &json!(api_group),
                    &[GROUP.to_string()],
                ));
            }
        }
        _ => errs.push(FieldError::not_supported(
            format!("{path}.kind"),
            &json!(kind),
            &["ServiceAccount", "User", "Group"].map(String::from),
        )),
    }
    errs
}

/// Whether a `metav1.LabelSelector` selects these labels (`LabelSelectorAsSelector`: an empty
/// selector selects everything).
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels[k].as_str();
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_exprs = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let have = label(e["key"].as_str().unwrap_or_default());
            let listed = have.is_some_and(|h| strs(&e["values"]).any(|v| v == h));
            match e["operator"].as_str().unwrap_or_default() {
                "In" => listed,
                "NotIn" => !listed,
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        });
    by_labels && by_exprs
}

/// `equality.Semantic.DeepEqual` on two policy rules: an empty list is the same as none.
fn same_rule(a: &Value, b: &Value) -> bool {
    let lists = |r: &Value| {
        [
            "verbs",
            "apiGroups",
            "resources",
            "resourceNames",
            "nonResourceURLs",
        ]
        .map(|f| r[f].as_array().cloned().unwrap_or_default())
    };
    lists(a) == lists(b)
}

/// What kube-controller-manager's ClusterRole aggregation does, run after every write that
/// touched a ClusterRole: each ClusterRole with an `aggregationRule` gets the rules of every
/// other ClusterRole its selectors match (selector by selector, each selector's roles in name
/// order, each rule once), until nothing changes
/// (aggregated roles may feed each other: `view` into `edit` into `admin`).
pub fn aggregate(st: &mut State) {
    if !std::mem::take(&mut st.cluster_roles_changed) {
        return;
    }
    let k = key("clusterroles");
    for _ in 0..16 {
        let roles: BTreeMap<String, Value> = st
            .list(&k, None)
            .into_iter()
            .map(|r| (name_of(r), r.clone()))
            .collect();
        let mut changed = false;
        for (name, role) in &roles {
            let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() else {
                continue;
            };
            // Selector by selector, as the controller lists them: the rules of the roles the
            // first selects come before those of the second's.
            let mut rules: Vec<Value> = Vec::new();
            for selector in selectors {
                for (other, source) in &roles {
                    if other == name || !selects(selector, &source["metadata"]["labels"]) {
                        continue;
                    }
                    for rule in source["rules"].as_array().into_iter().flatten() {
                        if !rules.iter().any(|r| same_rule(r, rule)) {
                            rules.push(rule.clone());
                        }
                    }
                }
            }
            let current = role["rules"].as_array().cloned().unwrap_or_default();
            let unchanged = current.len() == rules.len()
                && current.iter().zip(&rules).all(|(a, b)| same_rule(a, b));
            if !unchanged {
                let mut updated = role.clone();
                updated["rules"] = Value::Array(rules);
                st.put(&k, updated);
                changed = true;
            }
        }
        st.cluster_roles_changed = false;
        if !changed {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn rules_are_refused_as_kube_refuses_them() {
        let role = json!({"rules": [
            {"apiGroups": [""], "resources": ["secrets"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"], "resources": ["pods"]},
            {"verbs": ["get"]},
        ]});
        assert_eq!(
            messages(&role_errors(&role, true)),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs",
                "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: rules cannot apply to both regular resources and non-resource URLs",
                "rules[2].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[2].resources: Required value: resource rules must supply at least one resource",
            ]
        );
        let cluster = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert!(role_errors(&cluster, false).is_empty());
        let aggregated = json!({"aggregationRule": {"clusterRoleSelectors": []}});
        assert_eq!(
            messages(&role_errors(&aggregated, false)),
            ["aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"]
        );
        let bad = json!({"aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]}});
        assert_eq!(
            messages(&role_errors(&bad, false)),
            [
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.",
            ]
        );
    }

    #[test]
    fn bindings_are_defaulted_then_checked_and_their_role_ref_never_changes() {
        let mut b = json!({"roleRef": {"kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "Bad_SA"}]});
        default_binding(&mut b);
        assert_eq!(b["roleRef"]["apiGroup"], GROUP);
        assert_eq!(b["subjects"][0]["apiGroup"], GROUP);
        assert!(b["subjects"][1].get("apiGroup").is_none());
        let errs = messages(&binding_errors(&b, None, false));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with(
                "subjects[1].name: Invalid value: \"Bad_SA\": a lowercase RFC 1123 subdomain"
            ),
            "{errs:?}"
        );
        assert_eq!(errs[1], "subjects[1].namespace: Required value");
        let role = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "a/b"}});
        assert_eq!(
            messages(&binding_errors(&role, None, false)),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
            ]
        );
        let old = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "x"}});
        let new = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "y"}});
        assert_eq!(
            messages(&binding_errors(&new, Some(&old), true)),
            ["roleRef: Invalid value: {\"APIGroup\":\"rbac.authorization.k8s.io\",\"Kind\":\"Role\",\"Name\":\"y\"}: cannot change roleRef"]
        );
    }

    #[test]
    fn rbac_names_need_only_be_a_path_segment() {
        assert!(name_errors("system:controller:x").is_empty());
        assert_eq!(name_errors(".."), ["may not be '..'"]);
        assert_eq!(
            name_errors("a/b%c"),
            ["may not contain '/'", "may not contain '%'"]
        );
    }

    #[test]
    fn an_empty_selector_selects_every_role_and_expressions_are_matched() {
        let labels = json!({"a": "1"});
        assert!(selects(&json!({}), &labels));
        assert!(selects(&json!({"matchLabels": {"a": "1"}}), &labels));
        assert!(!selects(&json!({"matchLabels": {"a": "2"}}), &labels));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]}),
            &labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}),
            &labels
        ));
    }
}
