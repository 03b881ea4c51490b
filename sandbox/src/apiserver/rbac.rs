//! Authorization as kube-apiserver does it with `--authorization-mode=RBAC`: who a request is
//! ([`UserInfo`], after impersonation), what it asks ([`Attributes`], derived from the URL as
//! `k8s.io/apiserver`'s RequestInfo does), and whether the Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings stored in this server allow it.
//!
//! Semantics kept from the real authorizer:
//! * verbs `get list watch create update patch delete deletecollection` (and any other word a
//!   rule names, e.g. `impersonate`), `*` for every verb, API group, resource or URL;
//! * a subresource is its own resource (`secretspolicies/status`, `serviceaccounts/token`),
//!   matched by `resource/sub` or `*/sub`; `resourceNames` restrict by object name (a list or
//!   watch names one object only through a `metadata.name=` field selector);
//! * a RoleBinding grants in its namespace only, a ClusterRoleBinding everywhere, so a list or
//!   watch across all namespaces needs a ClusterRoleBinding;
//! * `nonResourceURLs` ending in `*` as a prefix (every trailing `*` trimmed, as kube does);
//! * the members of `system:masters` may do everything (the admin token is one, as a
//!   cluster-admin kubeconfig is on a real cluster) without any rule;
//! * the bootstrap policy every cluster starts with ([`bootstrap`]): `cluster-admin`,
//!   `system:discovery`, `system:basic-user`, `system:public-info-viewer` and
//!   `system:service-account-issuer-discovery` with their bindings, stored as objects;
//! * a denial names the request as `forbiddenMessage` of k8s.io/apiserver does, plus the
//!   reasons bindings could not be resolved (`RBAC: clusterrole... "x" not found`);
//! * impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-*`) is itself authorized with
//!   the `impersonate` verb on `users`, `groups`, `serviceaccounts`, `uids` and `userextras`.
//!
//! Not implemented: `aggregationRule` (an aggregated ClusterRole has only its own rules), the
//! escalation check on writing Roles and bindings (the admin writes them), and the `admin`,
//! `edit`, `view` and controller roles of the bootstrap policy.

use std::collections::{BTreeMap, HashMap};

use axum::http::HeaderMap;
use serde_json::{json, Value};

use super::error::ApiError;
use super::selector::FieldSelector;
use super::store::State;

/// Members may do everything, with or without rules.
pub const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const ANONYMOUS: &str = "system:anonymous";
const SA_PREFIX: &str = "system:serviceaccount:";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// An authenticated (or impersonated) user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// Whoever holds the server's admin token.
    pub fn admin() -> Self {
        Self {
            name: "kubernetes-admin".into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            ..Self::default()
        }
    }

    /// A request without credentials, as kube-apiserver's anonymous authenticator (on by
    /// default) names it.
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..Self::default()
        }
    }

    /// A ServiceAccount, with the groups the token authenticator gives it.
    pub fn service_account(ns: &str, name: &str, uid: &str) -> Self {
        Self {
            name: format!("{SA_PREFIX}{ns}:{name}"),
            uid: uid.into(),
            groups: service_account_groups(ns),
            extra: BTreeMap::new(),
        }
    }

    fn privileged(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// The `UserInfo` of the authentication API (`username`, `uid`, `groups`, `extra`).
    pub fn to_json(&self) -> Value {
        let mut u = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            u["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            u["extra"] = json!(self.extra);
        }
        u
    }
}

fn service_account_groups(ns: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{ns}"),
        AUTHENTICATED.into(),
    ]
}

/// `system:serviceaccount:NS:NAME` → `(NS, NAME)`.
pub fn split_service_account(username: &str) -> Option<(&str, &str)> {
    let (ns, name) = username.strip_prefix(SA_PREFIX)?.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The path's segments as kube's `splitPath` cuts them: slashes trimmed at both ends, empty
/// segments inside kept.
fn split_path(path: &str) -> Vec<&str> {
    path.trim_matches('/').split('/').collect()
}

/// The segments after `/api` or `/apis/{group}` (version first) of a resource request, `None`
/// for a non-resource path.
fn api_parts<'a, 'b>(parts: &'a [&'b str]) -> Option<&'a [&'b str]> {
    match parts {
        ["api", rest @ ..] if rest.len() >= 2 => Some(rest),
        ["apis", _, rest @ ..] if rest.len() >= 2 => Some(rest),
        _ => None,
    }
}

/// The error kube-apiserver's request-info filter gives before anything else (authentication
/// included) when a `watch` or `proxy` verb names nothing after it (`/api/v1/watch`): a plain
/// text 500 of `InternalError`'s wording. `uri` is the request's path and query as sent.
pub fn request_info_error(path: &str, uri: &str) -> Option<String> {
    let parts = split_path(path);
    let rest = api_parts(&parts)?;
    (matches!(rest[1], "watch" | "proxy") && rest.len() < 3).then(|| {
        let quoted = format!("{uri:?}");
        let text = format!(
            "Internal Server Error: {quoted}: failed to create RequestInfo: unable to determine kind and namespace from url, {uri}"
        );
        // kube's sanitizer.
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    })
}

/// What a request asks, in the authorizer's terms.
#[derive(Clone, Debug, Default)]
pub struct Attributes {
    pub user: UserInfo,
    pub verb: String,
    pub resource_request: bool,
    pub path: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl Attributes {
    /// The attributes of an HTTP request, derived as RequestInfo does: `/api/v1/...` and
    /// `/apis/{g}/{v}/...` are resource requests (verb from the method; a GET without a name is
    /// `list`, or `watch` with `?watch=true`; a DELETE without one `deletecollection`), every
    /// other path a non-resource request with the lower-cased method as its verb.
    pub fn from_request(
        user: UserInfo,
        method: &str,
        path: &str,
        query: &HashMap<String, String>,
    ) -> Self {
        let mut a = Attributes {
            user,
            verb: method.to_ascii_lowercase(),
            path: path.to_string(),
            ..Default::default()
        };
        let parts = split_path(path);
        let Some(mut rest) = api_parts(&parts) else {
            return a;
        };
        if parts[0] == "apis" {
            a.group = parts[1].to_string();
        }
        a.resource_request = true;
        a.version = rest[0].to_string();
        rest = &rest[1..];
        if matches!(rest[0], "watch" | "proxy") {
            a.verb = rest[0].to_string();
            rest = &rest[1..];
        } else {
            a.verb = match method {
                "POST" => "create",
                "GET" | "HEAD" => "get",
                "PUT" => "update",
                "PATCH" => "patch",
                "DELETE" => "delete",
                _ => "",
            }
            .to_string();
        }
        if rest.first() == Some(&"namespaces") {
            if let Some(ns) = rest.get(1) {
                a.namespace = ns.to_string();
                // `namespaces/{ns}/status` and `/finalize` are the namespace's subresources.
                if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                    rest = &rest[2..];
                }
            }
        }
        if rest.len() >= 3 && a.verb != "proxy" {
            a.subresource = rest[2].to_string();
        }
        if rest.len() >= 2 {
            a.name = rest[1].to_string();
        }
        if let Some(r) = rest.first() {
            a.resource = r.to_string();
        }
        if a.name.is_empty() && a.verb == "get" {
            a.verb = if super::ops::watch_requested(query) {
                "watch".into()
            } else {
                "list".into()
            };
            // A query kube cannot decode is authorized without the name.
            if super::ops::list_options_error(query).is_none() {
                if let Some(n) = query
                    .get("fieldSelector")
                    .and_then(|f| FieldSelector::parse_terms(f).ok())
                    .and_then(|f| f.exact_match("metadata.name").map(str::to_string))
                    .filter(|n| n != "." && n != ".." && !n.contains(['/', '%']))
                {
                    a.name = n;
                }
            }
        }
        if a.name.is_empty() && a.verb == "delete" {
            a.verb = "deletecollection".into();
        }
        a
    }

    /// `resource` or `resource/subresource`, as rules name it.
    fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// The authorizer's answer.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    pub allowed: bool,
    /// Which binding allowed, or why bindings could not be resolved.
    pub reason: String,
}

fn strs(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

/// Whether one PolicyRule allows the request.
fn rule_allows(a: &Attributes, rule: &Value) -> bool {
    let verb = strs(&rule["verbs"]).any(|v| v == "*" || v == a.verb);
    if !verb {
        return false;
    }
    if !a.resource_request {
        return strs(&rule["nonResourceURLs"]).any(|u| {
            // kube trims every trailing `*` (`strings.TrimRight`), not just one.
            u == "*"
                || u == a.path
                || (u.ends_with('*') && a.path.starts_with(u.trim_end_matches('*')))
        });
    }
    let combined = a.combined_resource();
    let group = strs(&rule["apiGroups"]).any(|g| g == "*" || g == a.group);
    let resource = strs(&rule["resources"]).any(|r| {
        r == "*"
            || r == combined
            || (!a.subresource.is_empty() && r.strip_prefix("*/") == Some(a.subresource.as_str()))
    });
    let names: Vec<&str> = strs(&rule["resourceNames"]).collect();
    let name = names.is_empty() || names.contains(&a.name.as_str());
    group && resource && name
}

fn applies_to(user: &UserInfo, subject: &Value, binding_ns: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            !ns.is_empty() && user.name == format!("{SA_PREFIX}{ns}:{name}")
        }
        _ => false,
    }
}

fn describe_subject(s: &Value, binding_ns: &str) -> String {
    let kind = s["kind"].as_str().unwrap_or_default();
    let name = s["name"].as_str().unwrap_or_default();
    if kind == "ServiceAccount" {
        let ns = s["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_ns);
        format!("{kind} \"{name}/{ns}\"")
    } else {
        format!("{kind} \"{name}\"")
    }
}

fn rbac_key(plural: &str) -> (String, String) {
    (RBAC_GROUP.to_string(), plural.to_string())
}

/// The rules a binding's roleRef names, or why they cannot be had.
fn role_rules(st: &State, role_ref: &Value, binding_ns: &str) -> Result<Vec<Value>, String> {
    let name = role_ref["name"].as_str().unwrap_or_default();
    let (plural, ns, singular) = match role_ref["kind"].as_str() {
        Some("Role") => ("roles", binding_ns, "role"),
        Some("ClusterRole") => ("clusterroles", "", "clusterrole"),
        other => {
            return Err(format!(
                "unsupported role reference kind: \"{}\"",
                other.unwrap_or_default()
            ))
        }
    };
    st.get(&rbac_key(plural), ns, name)
        .map(|r| r["rules"].as_array().cloned().unwrap_or_default())
        .ok_or_else(|| format!("{singular}.{RBAC_GROUP} \"{name}\" not found"))
}

/// Every rule that applies to `user` in `namespace` ("" for cluster scope), with the binding
/// that grants it, in the order the real resolver visits them (ClusterRoleBindings, then the
/// namespace's RoleBindings); `errors` collects bindings whose role is missing.
fn visit_rules(
    st: &State,
    user: &UserInfo,
    namespace: &str,
    errors: &mut Vec<String>,
) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    for b in st.list(&rbac_key("clusterrolebindings"), None) {
        let Some(subject) = strs_subjects(b).find(|s| applies_to(user, s, "")) else {
            continue;
        };
        match role_rules(st, &b["roleRef"], "") {
            Ok(rules) => out.push((
                format!(
                    "ClusterRoleBinding \"{}\" of {} \"{}\" to {}",
                    b["metadata"]["name"].as_str().unwrap_or_default(),
                    b["roleRef"]["kind"].as_str().unwrap_or_default(),
                    b["roleRef"]["name"].as_str().unwrap_or_default(),
                    describe_subject(subject, "")
                ),
                rules,
            )),
            Err(e) => errors.push(e),
        }
    }
    if namespace.is_empty() {
        return out;
    }
    for b in st.list(&rbac_key("rolebindings"), Some(namespace)) {
        let Some(subject) = strs_subjects(b).find(|s| applies_to(user, s, namespace)) else {
            continue;
        };
        match role_rules(st, &b["roleRef"], namespace) {
            Ok(rules) => out.push((
                format!(
                    "RoleBinding \"{}/{namespace}\" of {} \"{}\" to {}",
                    b["metadata"]["name"].as_str().unwrap_or_default(),
                    b["roleRef"]["kind"].as_str().unwrap_or_default(),
                    b["roleRef"]["name"].as_str().unwrap_or_default(),
                    describe_subject(subject, namespace)
                ),
                rules,
            )),
            Err(e) => errors.push(e),
        }
    }
    out
}

fn strs_subjects(binding: &Value) -> impl Iterator<Item = &Value> {
    binding["subjects"].as_array().into_iter().flatten()
}

/// `RBAC: e` for one error, `RBAC: [e1, e2]` for several (an aggregate error's text).
fn errors_reason(errors: &[String]) -> String {
    match errors {
        [] => String::new(),
        [one] => format!("RBAC: {one}"),
        many => format!("RBAC: [{}]", many.join(", ")),
    }
}

/// Decide a request.
pub fn authorize(st: &State, a: &Attributes) -> Decision {
    if a.user.privileged() {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut errors = Vec::new();
    for (source, rules) in visit_rules(st, &a.user, &a.namespace, &mut errors) {
        if rules.iter().any(|r| rule_allows(a, r)) {
            return Decision {
                allowed: true,
                reason: format!("RBAC: allowed by {source}"),
            };
        }
    }
    Decision {
        allowed: false,
        reason: errors_reason(&errors),
    }
}

/// The rules `user` has in `namespace`: `(resourceRules, nonResourceRules, evaluationError)`
/// of a SelfSubjectRulesReview.
pub fn rules_for(st: &State, user: &UserInfo, namespace: &str) -> (Vec<Value>, Vec<Value>, String) {
    if user.privileged() {
        return (
            vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
            vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
            String::new(),
        );
    }
    let mut errors = Vec::new();
    let (mut res, mut non) = (Vec::new(), Vec::new());
    for (_, rules) in visit_rules(st, user, namespace, &mut errors) {
        for r in rules {
            let list = |k: &str| json!(strs(&r[k]).collect::<Vec<_>>());
            if strs(&r["resources"]).next().is_some() {
                let mut rr = json!({"verbs": list("verbs"), "apiGroups": list("apiGroups"), "resources": list("resources")});
                if strs(&r["resourceNames"]).next().is_some() {
                    rr["resourceNames"] = list("resourceNames");
                }
                res.push(rr);
            }
            if strs(&r["nonResourceURLs"]).next().is_some() {
                non.push(
                    json!({"verbs": list("verbs"), "nonResourceURLs": list("nonResourceURLs")}),
                );
            }
        }
    }
    let err = match errors.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    (res, non, err)
}

/// The 403 of a denied request, worded as `ForbiddenStatusError` of k8s.io/apiserver:
/// `secrets "x" is forbidden: User "u" cannot create resource "secrets" in API group "" in the
/// namespace "default"`.
pub fn forbidden(a: &Attributes, reason: &str) -> ApiError {
    let who = &a.user.name;
    let mut msg = if !a.resource_request {
        format!("User \"{who}\" cannot {} path \"{}\"", a.verb, a.path)
    } else if !a.namespace.is_empty() {
        format!(
            "User \"{who}\" cannot {} resource \"{}\" in API group \"{}\" in the namespace \"{}\"",
            a.verb,
            a.combined_resource(),
            a.group,
            a.namespace
        )
    } else {
        format!(
            "User \"{who}\" cannot {} resource \"{}\" in API group \"{}\" at the cluster scope",
            a.verb,
            a.combined_resource(),
            a.group
        )
    };
    // Nothing in an error may look like HTML.
    msg = msg
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    if !reason.is_empty() {
        msg = format!("{msg}: {reason}");
    }
    let mut details = json!({});
    let qualified = if a.group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let message = if !a.resource_request || a.resource.is_empty() {
        format!("forbidden: {msg}")
    } else if a.name.is_empty() {
        format!("{qualified} is forbidden: {msg}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {msg}", a.name)
    };
    if a.resource_request {
        if !a.group.is_empty() {
            details["group"] = json!(a.group);
        }
        if !a.resource.is_empty() {
            details["kind"] = json!(a.resource);
        }
        if !a.name.is_empty() {
            details["name"] = json!(a.name);
        }
    }
    ApiError::new(403, "Forbidden", message).with_details(details)
}

/// Authorize `a` or fail with the 403.
pub fn check(st: &State, a: &Attributes) -> Result<(), ApiError> {
    let d = authorize(st, a);
    if d.allowed {
        Ok(())
    } else {
        Err(forbidden(a, &d.reason))
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// The user a request acts as: the requester, or whom its `Impersonate-*` headers name when
/// the requester may impersonate them.
pub fn impersonate(
    st: &State,
    requester: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let user = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .filter(|u| !u.is_empty());
    let groups: Vec<String> = header_values(headers, "impersonate-group")
        .into_iter()
        .map(String::from)
        .collect();
    let uid = headers
        .get("impersonate-uid")
        .and_then(|v| v.to_str().ok())
        .filter(|u| !u.is_empty());
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-") {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .to_string();
            if let Ok(v) = value.to_str() {
                extra.entry(key).or_default().push(v.to_string());
            }
        }
    }
    let Some(user) = user else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(requester);
        }
        let mut asked: Vec<String> = groups.iter().map(|g| format!("Group {g}")).collect();
        asked.extend(uid.map(|u| format!("UID {u}")));
        asked.extend(extra.keys().map(|k| format!("Extra {k}")));
        return Err(ApiError::bad_request(format!(
            "requested [{}] without impersonating a user",
            asked.join(" ")
        )));
    };
    let ask = |group: &str, resource: &str, ns: &str, name: &str, sub: &str| Attributes {
        user: requester.clone(),
        verb: "impersonate".into(),
        resource_request: true,
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        ..Default::default()
    };
    let mut actual = UserInfo {
        name: user.to_string(),
        uid: uid.unwrap_or_default().to_string(),
        groups: groups.clone(),
        extra: extra.clone(),
    };
    match split_service_account(user) {
        Some((ns, name)) => {
            check(st, &ask("", "serviceaccounts", ns, name, ""))?;
            if groups.is_empty() {
                actual.groups = service_account_groups(ns)
                    .into_iter()
                    .filter(|g| g != AUTHENTICATED)
                    .collect();
            }
        }
        None => check(st, &ask("", "users", "", user, ""))?,
    }
    if let Some(u) = uid {
        check(st, &ask("authentication.k8s.io", "uids", "", u, ""))?;
    }
    for g in &groups {
        check(st, &ask("", "groups", "", g, ""))?;
    }
    for (k, vs) in &extra {
        for v in vs {
            check(st, &ask("authentication.k8s.io", "userextras", "", v, k))?;
        }
    }
    let add = |u: &mut UserInfo, g: &str| {
        if !u.groups.iter().any(|x| x == g) {
            u.groups.push(g.into());
        }
    };
    if actual.name == ANONYMOUS {
        add(&mut actual, UNAUTHENTICATED);
    } else if !actual.groups.iter().any(|g| g == UNAUTHENTICATED) {
        add(&mut actual, AUTHENTICATED);
    }
    Ok(actual)
}

/// The bootstrap ClusterRoles and ClusterRoleBindings of a new cluster, created when missing
/// (a restart from a snapshot keeps what is there, as the real server only adds missing ones).
pub fn bootstrap(st: &mut State) {
    let get = |verbs: &[&str]| json!(verbs);
    let discovery_urls = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ];
    let public_urls = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    let issuer_urls = [
        "/.well-known/openid-configuration",
        "/.well-known/openid-configuration/",
        "/openid/v1/jwks",
        "/openid/v1/jwks/",
    ];
    let roles: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
            vec![MASTERS],
        ),
        (
            "system:discovery",
            json!([{"nonResourceURLs": discovery_urls, "verbs": get(&["get"])}]),
            vec![AUTHENTICATED],
        ),
        (
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
            vec![AUTHENTICATED],
        ),
        (
            "system:public-info-viewer",
            json!([{"nonResourceURLs": public_urls, "verbs": ["get"]}]),
            vec![AUTHENTICATED, UNAUTHENTICATED],
        ),
        (
            "system:service-account-issuer-discovery",
            json!([{"nonResourceURLs": issuer_urls, "verbs": ["get"]}]),
            vec!["system:serviceaccounts"],
        ),
    ];
    let meta = |name: &str| {
        json!({
            "name": name, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": super::ops::now(),
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    for (name, rules, groups) in roles {
        if st.get(&rbac_key("clusterroles"), "", name).is_none() {
            st.put(
                &rbac_key("clusterroles"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": meta(name), "rules": rules}),
            );
        }
        if st.get(&rbac_key("clusterrolebindings"), "", name).is_none() {
            let subjects: Vec<Value> = groups
                .iter()
                .map(|g| json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": g}))
                .collect();
            st.put(
                &rbac_key("clusterrolebindings"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": meta(name), "subjects": subjects,
                       "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name}}),
            );
        }
    }
    // The user-facing roles, bound by cluster admins in namespaces: aggregated from every
    // ClusterRole labelled for them (`view` feeds `edit`, which feeds `admin`), as in kube's
    // bootstrap policy. Kubernetes' own rules for its built-in kinds (the
    // `system:aggregate-to-*` roles) are not here: this server serves few of those kinds.
    let aggregated = [
        ("admin", "aggregate-to-admin", None),
        ("edit", "aggregate-to-edit", Some("aggregate-to-admin")),
        ("view", "aggregate-to-view", Some("aggregate-to-edit")),
    ];
    for (name, selects, feeds) in aggregated {
        if st.get(&rbac_key("clusterroles"), "", name).is_some() {
            continue;
        }
        let mut m = meta(name);
        if let Some(label) = feeds {
            m["labels"][format!("{RBAC_GROUP}/{label}")] = json!("true");
        }
        let selector = json!({"matchLabels": {format!("{RBAC_GROUP}/{selects}"): "true"}});
        st.put(
            &rbac_key("clusterroles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": m, "aggregationRule": {"clusterRoleSelectors": [selector]},
                   "rules": []}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &str, path: &str, query: &[(&str, &str)]) -> Attributes {
        let q = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Attributes::from_request(UserInfo::default(), method, path, &q)
    }

    #[test]
    fn request_attributes_follow_request_info() {
        let a = attrs("GET", "/api/v1/namespaces/default/secrets", &[]);
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.namespace.as_str()),
            ("list", "secrets", "default")
        );
        let a = attrs("GET", "/api/v1/secrets", &[("watch", "1")]);
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("watch", ""));
        let a = attrs(
            "GET",
            "/apis/secrets.quartet.dev/v1alpha1/namespaces/ns/secretspolicies",
            &[("fieldSelector", "metadata.name=p"), ("watch", "true")],
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "p"));
        assert_eq!(a.group, "secrets.quartet.dev");
        let a = attrs(
            "PATCH",
            "/apis/secrets.quartet.dev/v1alpha1/namespaces/ns/secretspolicies/p/status",
            &[],
        );
        assert_eq!(a.combined_resource(), "secretspolicies/status");
        let a = attrs("GET", "/api/v1/namespaces/kube-system", &[]);
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.name.as_str()),
            ("get", "namespaces", "kube-system")
        );
        let a = attrs("PUT", "/api/v1/namespaces/x/finalize", &[]);
        assert_eq!(a.combined_resource(), "namespaces/finalize");
        let a = attrs("DELETE", "/api/v1/namespaces/x/secrets", &[]);
        assert_eq!(a.verb, "deletecollection");
        let a = attrs("GET", "/apis/apps/v1", &[]);
        assert!(!a.resource_request);
        assert_eq!(a.verb, "get");
        let a = attrs("GET", "/apis/apps/v1/watch/namespaces/d/deployments/x", &[]);
        assert_eq!(
            (a.verb.as_str(), a.name.as_str(), a.subresource.as_str()),
            ("watch", "x", "")
        );
    }

    #[test]
    fn rules_match_verbs_groups_subresources_names_and_urls() {
        let mut a = attrs(
            "PATCH",
            "/apis/secrets.quartet.dev/v1alpha1/namespaces/ns/secretspolicies/p/status",
            &[],
        );
        let rule = json!({"apiGroups": ["secrets.quartet.dev"], "resources": ["secretspolicies"], "verbs": ["patch"]});
        assert!(!rule_allows(&a, &rule), "status is its own resource");
        let rule = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        assert!(rule_allows(&a, &rule));
        let rule = json!({"apiGroups": ["secrets.quartet.dev"], "resources": ["secretspolicies/status"], "verbs": ["patch"], "resourceNames": ["q"]});
        assert!(!rule_allows(&a, &rule));
        a.name = "q".into();
        assert!(rule_allows(&a, &rule));
        let a = attrs("GET", "/openapi/v3/apis/apps/v1", &[]);
        let rule = json!({"nonResourceURLs": ["/openapi/*"], "verbs": ["get"]});
        assert!(rule_allows(&a, &rule));
        let rule = json!({"nonResourceURLs": ["/openapi"], "verbs": ["get"]});
        assert!(!rule_allows(&a, &rule));
        let rule = json!({"nonResourceURLs": ["/openapi/v3/apis/apps/v1**"], "verbs": ["get"]});
        assert!(rule_allows(&a, &rule), "every trailing * is a wildcard");
        let rule = json!({"nonResourceURLs": ["/openapi/v3/apis/apps/v**"], "verbs": ["get"]});
        assert!(rule_allows(&a, &rule));
    }

    #[test]
    fn service_account_usernames_split_into_namespace_and_name() {
        assert_eq!(
            split_service_account("system:serviceaccount:ns:sa"),
            Some(("ns", "sa"))
        );
        assert_eq!(split_service_account("system:serviceaccount:ns"), None);
        assert_eq!(split_service_account("alice"), None);
    }
}
