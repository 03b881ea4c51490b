//! Tenancy: which Connection or ClusterConnection a resource uses, and whether a
//! ClusterConnection admits it.
//!
//! Resolution, for a resource of kind `K` in namespace `ns` reaching service `S`:
//!
//! 1. `connectionRef: {kind: ClusterConnection, name}`: that ClusterConnection, if it is for `S`
//!    and admits `ns` (by `namespaceSelector` or `namespaces`) and `K` (by `kinds`);
//! 2. `connectionRef: {name[, namespace]}`: that Connection (as before);
//! 3. no `connectionRef`: the Connection named after `S` in `ns`; without one, the
//!    ClusterConnection for `S` marked `default: true` that admits `ns` and `K`.
//!
//! A ClusterConnection is handed to the rest of the framework as a [`Connection`] (same spec,
//! its Secrets' namespace as the namespace, a marker annotation): HTTP clients, logins and
//! metrics tell the two apart by [`identity`]. Refusals are [`Error::Refused`] with reason
//! [`CONNECTION_NOT_ALLOWED`]: `Stalled`, no call to the service, until the namespace's labels
//! or the ClusterConnection change (both wake the resources at once, see [`Wake`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::ResourceExt;

use super::conditions;
use super::error::{Error, Result};
use crate::api::{
    ClusterConnection, Connection, ConnectionRef, ConnectionSpec, ConnectionStatus, Service,
};

/// The condition and Event reason of a resource a ClusterConnection does not admit.
pub const CONNECTION_NOT_ALLOWED: &str = "ConnectionNotAllowed";

/// The annotation that marks a [`Connection`] made from a ClusterConnection (its value is the
/// ClusterConnection's name). Never on a stored object.
pub const CLUSTER_MARK: &str = "quartet.dev/cluster-connection";

/// Something a resource's resolution depends on changed: the resources it may concern are
/// woken at once instead of waiting for their backoff.
#[derive(Clone, Debug)]
pub enum Wake {
    /// A ClusterConnection was created or deleted, or changed as for [`Wake::Connection`].
    ClusterConnection {
        /// Its name.
        name: String,
        /// The service it reaches.
        service: Service,
    },
    /// A namespace's labels changed.
    Namespace(String),
    /// A Connection was created or deleted, or its spec changed or its status in what the
    /// resources using it depend on ([`concerns_dependents`]), as the shared
    /// Connection cache now holds it. This is the only Connection watch: woken from it, a
    /// resource reads the cache after the change (a watch of its own could wake it before the
    /// cache had the change, and it would read the old status, e.g. features not listed yet).
    Connection {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A Secret was created, changed or deleted (one watch of Secrets for every kind that
    /// reads them; the resources are matched by [`crate::reconcile::Managed::secret_refs`]).
    Secret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Wake {
    /// Whether a resource of `service` in `ns` with `cref` may be concerned.
    pub fn concerns(&self, service: Service, ns: &str, cref: Option<&ConnectionRef>) -> bool {
        match (self, cref) {
            (Wake::ClusterConnection { name, .. }, Some(r)) => r.is_cluster() && &r.name == name,
            (Wake::ClusterConnection { service: s, .. }, None) => *s == service,
            (Wake::Namespace(n), Some(r)) => n == ns && r.is_cluster(),
            (Wake::Namespace(n), None) => n == ns,
            (Wake::Connection { namespace, name }, Some(r)) => {
                !r.is_cluster()
                    && &r.name == name
                    && r.namespace.as_deref().unwrap_or(ns) == namespace
            }
            (Wake::Connection { namespace, name }, None) => {
                ns == namespace && service.as_str() == name
            }
            // Matched by the Secrets a resource reads, not by its Connection.
            (Wake::Secret { .. }, _) => false,
        }
    }
}

/// Whether a Connection's (or ClusterConnection's) status changed in what the resources using
/// it depend on: the status and reason of its `Ready` condition (one that becomes Ready again
/// retries their failed passes at once) and its features (a feature listed now lets them
/// write). Not timestamps or messages, not a login's expiry (rewritten at each check after a
/// renewal, every two thirds of the token's lease), the irrevocable lease count or the rate
/// per instance: a wake is a full pass of every resource using the Connection, thousands of
/// calls that would change nothing.
pub fn concerns_dependents(old: Option<&ConnectionStatus>, new: Option<&ConnectionStatus>) -> bool {
    fn seen(s: Option<&ConnectionStatus>) -> (Option<(&'static str, &str)>, Option<&[String]>) {
        let ready = s
            .and_then(|s| conditions::get(&s.conditions, conditions::READY))
            .map(|c| (c.status.as_str(), c.reason.as_str()));
        (ready, s.and_then(|s| s.features.as_deref()))
    }
    seen(old) != seen(new)
}

/// What resolution reads besides the Connection cache: the ClusterConnections, the namespaces'
/// labels, and the operator's namespace (where a ClusterConnection's Secrets are by default).
#[derive(Clone)]
pub struct Tenancy {
    /// Every ClusterConnection, from a watch.
    pub cluster_connections: Store<ClusterConnection>,
    /// Every namespace (for its labels), from a watch.
    pub namespaces: Store<Namespace>,
    /// The namespace the operator runs in, where a ClusterConnection's Secrets are by default.
    pub operator_namespace: String,
}

impl Tenancy {
    /// No ClusterConnections and no namespaces known (a context that never watches them).
    pub fn empty(operator_namespace: &str) -> Self {
        Self {
            cluster_connections: kube::runtime::reflector::store().0,
            namespaces: kube::runtime::reflector::store().0,
            operator_namespace: operator_namespace.to_string(),
        }
    }

    /// The ClusterConnection `name` for a resource of `kind` in `ns`, as a Connection.
    pub fn named(
        &self,
        kind: &str,
        ns: &str,
        r: &ConnectionRef,
        service: Service,
    ) -> Result<Arc<Connection>> {
        if let Some(other) = &r.namespace {
            return Err(Error::InvalidSpec(format!(
                "spec.connectionRef names ClusterConnection {} with namespace {other}: a ClusterConnection has no namespace, remove connectionRef.namespace",
                r.name
            )));
        }
        let cc = self
            .cluster_connections
            .get(&ObjectRef::new(&r.name))
            .ok_or_else(|| {
                Error::Connection(format!(
                    "ClusterConnection {} not found: create it or change spec.connectionRef",
                    r.name
                ))
            })?;
        if cc.spec.service != service {
            return Err(Error::Connection(format!(
                "ClusterConnection {} is for the {} service, not {service}",
                r.name, cc.spec.service
            )));
        }
        admits(&cc, kind, ns, self.labels(ns).as_ref()).map_err(not_allowed)?;
        Ok(Arc::new(as_connection(&cc, &self.operator_namespace)))
    }

    /// The default ClusterConnection of `service` admitting a resource of `kind` in `ns`, for a
    /// resource with no connectionRef and no Connection named after its service. `None` when
    /// there is no default ClusterConnection for the service at all.
    pub fn default_for(
        &self,
        kind: &str,
        ns: &str,
        service: Service,
    ) -> Option<Result<Arc<Connection>>> {
        let mut defaults: Vec<Arc<ClusterConnection>> = self
            .cluster_connections
            .state()
            .into_iter()
            .filter(|c| c.spec.default && c.spec.service == service)
            .collect();
        if defaults.is_empty() {
            return None;
        }
        defaults.sort_by_key(|c| c.name_any());
        let labels = self.labels(ns);
        let (admitting, refusals): (Vec<_>, Vec<_>) = defaults
            .iter()
            .map(|c| (c, admits(c, kind, ns, labels.as_ref())))
            .partition(|(_, r)| r.is_ok());
        Some(match admitting.as_slice() {
            [(one, _)] => Ok(Arc::new(as_connection(one, &self.operator_namespace))),
            [] => Err(not_allowed(format!(
                "no Connection {service} in namespace {ns} and no default ClusterConnection for {service} admits it: {}; set spec.connectionRef or ask the platform team to admit the namespace",
                refusals
                    .into_iter()
                    .filter_map(|(_, r)| r.err())
                    .collect::<Vec<_>>()
                    .join("; ")
            ))),
            many => Err(Error::Connection(format!(
                "no Connection {service} in namespace {ns}, and several default ClusterConnections for {service} admit it ({}): set spec.connectionRef to choose one",
                many.iter()
                    .map(|(c, _)| c.name_any())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        })
    }

    fn labels(&self, ns: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .get(&ObjectRef::new(ns))
            .map(|n| n.labels().clone())
    }
}

fn not_allowed(message: String) -> Error {
    Error::Refused {
        reason: CONNECTION_NOT_ALLOWED,
        message,
    }
}

/// Whether `cc` admits a resource of `kind` in `ns` (whose labels are `labels`, `None` when the
/// namespace is not known). The refusal names the rule that refused.
pub fn admits(
    cc: &ClusterConnection,
    kind: &str,
    ns: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> std::result::Result<(), String> {
    let name = cc.name_any();
    let spec = &cc.spec;
    // An empty kind: a lookup of Connection-level defaults (an organization) by a helper; the
    // resource's own calls are checked with its kind.
    if !kind.is_empty() && !spec.kinds.is_empty() && !spec.kinds.iter().any(|k| k == kind) {
        return Err(format!(
            "ClusterConnection {name} does not allow kind {kind}: its spec.kinds is [{}]",
            spec.kinds.join(", ")
        ));
    }
    if spec.namespaces.iter().any(|n| n == ns) {
        return Ok(());
    }
    let by_selector = match (&spec.namespace_selector, labels) {
        (Some(sel), Some(labels)) => selects(sel, labels),
        _ => false,
    };
    if by_selector {
        return Ok(());
    }
    let selector = match &spec.namespace_selector {
        Some(sel) => format!("spec.namespaceSelector ({})", describe_selector(sel)),
        None => "spec.namespaceSelector (unset: no namespace)".to_string(),
    };
    let listed = if spec.namespaces.is_empty() {
        "spec.namespaces (empty)".to_string()
    } else {
        format!("spec.namespaces [{}]", spec.namespaces.join(", "))
    };
    let unknown = if labels.is_none() {
        " (the namespace's labels are not known to the operator)"
    } else {
        ""
    };
    Err(format!(
        "ClusterConnection {name} does not admit namespace {ns}: it matches neither {selector} nor {listed}{unknown}"
    ))
}

/// Whether `labels` match a Kubernetes label selector (an empty selector matches everything).
pub fn selects(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            // An operator Kubernetes does not know matches nothing.
            _ => false,
        }
    });
    by_labels && by_expressions
}

/// A selector as `kubectl` writes one (`team=a,env in (dev,prod)`); `{}` for the empty one.
fn describe_selector(sel: &LabelSelector) -> String {
    let mut parts: Vec<String> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            op => format!("{} {} ({values})", e.key, op.to_lowercase()),
        });
    }
    if parts.is_empty() {
        "{} matches every namespace".into()
    } else {
        parts.join(",")
    }
}

/// A ClusterConnection as the Connection the framework uses: its spec, its status, and its
/// Secrets' namespace as the namespace.
pub fn as_connection(cc: &ClusterConnection, operator_namespace: &str) -> Connection {
    let s = &cc.spec;
    let name = cc.name_any();
    let mut annotations = BTreeMap::new();
    annotations.insert(CLUSTER_MARK.to_string(), name.clone());
    Connection {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(
                s.secret_namespace
                    .clone()
                    .unwrap_or_else(|| operator_namespace.to_string()),
            ),
            uid: cc.metadata.uid.clone(),
            resource_version: cc.metadata.resource_version.clone(),
            generation: cc.metadata.generation,
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: ConnectionSpec {
            service: s.service,
            address: s.address.clone(),
            token_secret_ref: s.token_secret_ref.clone(),
            auth: s.auth.clone(),
            ca_secret_ref: s.ca_secret_ref.clone(),
            token_header: s.token_header.clone(),
            organization: s.organization.clone(),
            service_namespace: s.service_namespace.clone(),
            timeout_seconds: s.timeout_seconds,
            requests_per_second: s.requests_per_second,
            shards: s.shards,
            allowed_namespaces: Vec::new(),
            gitops: s.gitops.clone(),
        },
        status: cc.status.clone(),
    }
}

/// The ClusterConnection a Connection was made from ([`as_connection`]), if any.
pub fn cluster_name(conn: &Connection) -> Option<&str> {
    conn.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CLUSTER_MARK))
        .map(String::as_str)
}

/// What tells Connections apart in the client cache, the logins and metrics: `(namespace,
/// name)` for a Connection, `("", name)` for a ClusterConnection.
pub fn identity(conn: &Connection) -> (String, String) {
    match cluster_name(conn) {
        Some(name) => (String::new(), name.to_string()),
        None => (conn.namespace().unwrap_or_default(), conn.name_any()),
    }
}

/// The Connection's name in metrics, logs and messages: `namespace/name` for a Connection, the
/// bare name for a ClusterConnection (cluster-scoped, so no namespace).
pub fn label(conn: &Connection) -> String {
    match identity(conn) {
        (ns, name) if ns.is_empty() => name,
        (ns, name) => format!("{ns}/{name}"),
    }
}

/// `Connection ns/name` or `ClusterConnection name`, for messages.
pub fn describe(conn: &Connection) -> String {
    match cluster_name(conn) {
        Some(name) => format!("ClusterConnection {name}"),
        None => format!("Connection {}", label(conn)),
    }
}

/// The per-namespace limit of a resolved Connection, when it came from a ClusterConnection
/// with `requestsPerSecondPerNamespace`.
pub fn per_namespace_rate(tenancy: &Tenancy, conn: &Connection) -> Option<u32> {
    let name = cluster_name(conn)?;
    tenancy
        .cluster_connections
        .get(&ObjectRef::new(name))
        .and_then(|c| c.spec.requests_per_second_per_namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cc(spec: serde_json::Value) -> ClusterConnection {
        let mut base = json!({"service": "secrets", "address": "http://s", "tokenSecretRef": {"name": "t", "key": "token"}});
        for (k, v) in spec.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(json!({
            "apiVersion": "quartet.dev/v1alpha1", "kind": "ClusterConnection",
            "metadata": {"name": "platform"}, "spec": base,
        }))
        .unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_namespace_is_admitted_by_its_labels_or_its_name_and_refused_otherwise() {
        let c =
            cc(json!({"namespaceSelector": {"matchLabels": {"team": "a"}}, "namespaces": ["ops"]}));
        let a = labels(&[("team", "a")]);
        let b = labels(&[("team", "b")]);
        assert!(admits(&c, "SecretsPolicy", "team-a", Some(&a)).is_ok());
        assert!(admits(&c, "SecretsPolicy", "ops", Some(&b)).is_ok());
        let refused = admits(&c, "SecretsPolicy", "team-b", Some(&b)).unwrap_err();
        assert_eq!(
            refused,
            "ClusterConnection platform does not admit namespace team-b: it matches neither spec.namespaceSelector (team=a) nor spec.namespaces [ops]"
        );
    }

    #[test]
    fn without_rules_no_namespace_is_admitted_and_an_empty_selector_admits_all() {
        let none = cc(json!({}));
        assert!(admits(&none, "SecretsPolicy", "x", Some(&labels(&[]))).is_err());
        let all = cc(json!({"namespaceSelector": {}}));
        assert!(admits(&all, "SecretsPolicy", "x", Some(&labels(&[]))).is_ok());
    }

    #[test]
    fn kinds_restrict_which_kinds_may_use_it() {
        let c = cc(json!({"namespaceSelector": {}, "kinds": ["SecretsPolicy"]}));
        assert!(admits(&c, "SecretsPolicy", "x", Some(&labels(&[]))).is_ok());
        assert_eq!(
            admits(&c, "IdpUser", "x", Some(&labels(&[]))).unwrap_err(),
            "ClusterConnection platform does not allow kind IdpUser: its spec.kinds is [SecretsPolicy]"
        );
    }

    #[test]
    fn selector_expressions_follow_kubernetes() {
        let sel: LabelSelector = serde_json::from_value(json!({"matchExpressions": [
            {"key": "env", "operator": "In", "values": ["dev", "prod"]},
            {"key": "frozen", "operator": "DoesNotExist"},
        ]}))
        .unwrap();
        assert!(selects(&sel, &labels(&[("env", "dev")])));
        assert!(!selects(&sel, &labels(&[("env", "dev"), ("frozen", "y")])));
        assert!(!selects(&sel, &labels(&[("env", "qa")])));
        assert_eq!(describe_selector(&sel), "env in (dev,prod),!frozen");
    }

    #[test]
    fn a_cluster_connection_is_told_apart_from_a_connection_of_the_same_name() {
        let c = cc(json!({}));
        let conn = as_connection(&c, "quartet-system");
        assert_eq!(conn.namespace().as_deref(), Some("quartet-system"));
        assert_eq!(identity(&conn), (String::new(), "platform".to_string()));
        assert_eq!(label(&conn), "platform");
        let mut plain = conn.clone();
        plain.metadata.annotations = None;
        assert_eq!(
            identity(&plain),
            ("quartet-system".to_string(), "platform".to_string())
        );
    }

    #[test]
    fn wakes_concern_the_resources_that_may_resolve_through_them() {
        let cref: ConnectionRef =
            serde_json::from_value(json!({"kind": "ClusterConnection", "name": "platform"}))
                .unwrap();
        let plain: ConnectionRef = serde_json::from_value(json!({"name": "platform"})).unwrap();
        let w = Wake::ClusterConnection {
            name: "platform".into(),
            service: Service::Secrets,
        };
        assert!(w.concerns(Service::Secrets, "a", Some(&cref)));
        assert!(!w.concerns(Service::Secrets, "a", Some(&plain)));
        assert!(w.concerns(Service::Secrets, "a", None));
        assert!(!w.concerns(Service::Workspaces, "a", None));
        let n = Wake::Namespace("a".into());
        assert!(n.concerns(Service::Secrets, "a", Some(&cref)));
        assert!(!n.concerns(Service::Secrets, "b", None));
    }

    #[test]
    fn only_readiness_and_features_of_a_connection_concern_the_resources_using_it() {
        let status = |ready: bool, reason: &str, features: &[&str]| {
            let mut s: ConnectionStatus =
                serde_json::from_value(json!({"features": features})).unwrap();
            conditions::set(
                &mut s.conditions,
                conditions::READY,
                ready,
                reason,
                "",
                Some(1),
            );
            s
        };
        let now = status(true, "Connected", &["idp"]);
        // A renewed login, another irrevocable lease, a new message: nothing resources use.
        let mut renewed: ConnectionStatus = serde_json::from_value(json!({
            "irrevocableLeases": 3,
            "auth": {"method": "idp", "mount": "idp", "username": "a",
                     "expiresAt": "2026-01-01T00:10:00Z", "renewable": true},
        }))
        .unwrap();
        renewed.features = now.features.clone();
        renewed.conditions = now.conditions.clone();
        renewed.conditions[0].message = "checked again".into();
        assert!(!concerns_dependents(Some(&now), Some(&renewed)));
        let down = status(false, "Unreachable", &["idp"]);
        assert!(concerns_dependents(Some(&now), Some(&down)));
        let more = status(true, "Connected", &["idp", "ad"]);
        assert!(concerns_dependents(Some(&now), Some(&more)));
        assert!(concerns_dependents(None, Some(&now)));
    }
}
