//! Prometheus metrics: reconciles, errors by category, durations, and remote calls by
//! service/verb/status. Served as text on `/metrics`.

use std::time::Duration;

use compact_str::CompactString;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::api::Service;

type Labels = Vec<(&'static str, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// The labels of a resource's own `resource_ready` series. There is one such series per
/// resource, so its labels are a struct whose values are kept inline up to 24 bytes: as a
/// [`Labels`] vector they were four allocations per resource (about 1 MB at 10,000 resources).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ResourceLabels {
    kind: CompactString,
    namespace: CompactString,
    name: CompactString,
}

impl ResourceLabels {
    fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl EncodeLabelSet for ResourceLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> std::fmt::Result {
        [
            ("kind", self.kind.as_str()),
            ("namespace", self.namespace.as_str()),
            ("name", self.name.as_str()),
        ]
        .encode(encoder)
    }
}

/// The operator's Prometheus metrics, one registry for the whole process: reconciles, errors,
/// remote and Kubernetes calls, and the gauges some kinds report.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    reconcile_duration: HistogramFamily,
    remote_calls: Family<Labels, Counter>,
    remote_duration: HistogramFamily,
    kube_calls: Family<Labels, Counter>,
    resyncs_deferred: Family<Labels, Counter>,
    acl_replication: Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    dr_wal_lag: Family<Labels, Gauge>,
    dr_heartbeat_age: Family<Labels, Gauge>,
    dr_connected: Family<Labels, Gauge>,
    irrevocable: Family<Labels, Gauge>,
    logins: Family<Labels, Counter>,
    kind_served: Family<Labels, Gauge>,
    resource_ready: Family<ResourceLabels, Gauge>,
    leader: Family<Labels, Gauge>,
    /// The shard this instance serves ([`Metrics::shard_info`]), the `shard` label of
    /// `quartet_leader`.
    shard: std::sync::OnceLock<String>,
    budget_wait: Family<Labels, Counter<f64, std::sync::atomic::AtomicU64>>,
    namespace_calls: Family<Labels, Counter>,
    connection_calls: Family<Labels, Counter>,
    calls_per_reconcile: HistogramFamily,
    shard_info: Family<Labels, Gauge>,
}

fn histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.002, 2.0, 14))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("quartet");
        let reconciles = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let reconcile_duration =
            HistogramFamily::new_with_constructor(histogram as fn() -> Histogram);
        let remote_calls = Family::<Labels, Counter>::default();
        let namespace_calls = Family::<Labels, Counter>::default();
        registry.register(
            "remote_calls_by_namespace",
            "HTTP calls to managed services made for resources, by Connection (namespace/name, or the ClusterConnection's name) and the resources' namespace",
            namespace_calls.clone(),
        );
        let remote_duration = HistogramFamily::new_with_constructor(histogram as fn() -> Histogram);
        registry.register(
            "reconciles",
            "Reconciles by kind and result",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconcile errors by kind and category",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration by kind",
            reconcile_duration.clone(),
        );
        registry.register(
            "remote_calls",
            "HTTP calls to managed services by service, verb and status",
            remote_calls.clone(),
        );
        registry.register(
            "remote_call_duration_seconds",
            "HTTP call duration by service and verb",
            remote_duration.clone(),
        );
        let kube_calls = Family::<Labels, Counter>::default();
        registry.register(
            "kube_api_calls",
            "Kubernetes API requests by RBAC verb and resource",
            kube_calls.clone(),
        );
        let resyncs_deferred = Family::<Labels, Counter>::default();
        registry.register(
            "resyncs_deferred",
            "Periodic resyncs put off because resyncs had used their share of the Connection's \
             request budget (the effective resync period is longer than configured)",
            resyncs_deferred.clone(),
        );
        let acl_replication = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "catalog_acl_replication",
            "ACL replication of a catalog datacenter, per CatalogAclBootstrap: healthy (1/0), \
             seconds since the last successful round (-1: never), and index_lag / \
             token_index_lag: the primary's ACL policy / token list index minus the \
             datacenter's ReplicatedIndex / ReplicatedTokenIndex (-1: unknown, e.g. the \
             management token is refused)",
            acl_replication.clone(),
        );
        let dr_wal_lag = Family::<Labels, Gauge>::default();
        registry.register(
            "dr_secondary_wal_lag",
            "WAL entries a DR secondary is behind its primary, by replication set and secondary",
            dr_wal_lag.clone(),
        );
        let dr_heartbeat_age = Family::<Labels, Gauge>::default();
        registry.register(
            "dr_secondary_heartbeat_age_seconds",
            "Seconds since the primary last heard from a DR secondary (-1: never)",
            dr_heartbeat_age.clone(),
        );
        let dr_connected = Family::<Labels, Gauge>::default();
        registry.register(
            "dr_secondary_connected",
            "1 when the primary reports the DR secondary connected, else 0",
            dr_connected.clone(),
        );
        let irrevocable = Family::<Labels, Gauge>::default();
        registry.register(
            "secrets_irrevocable_leases",
            "Irrevocable leases of a secrets service by Connection and mount accessor, at the last Connection check",
            irrevocable.clone(),
        );
        let logins = Family::<Labels, Counter>::default();
        registry.register(
            "logins",
            "Logins of Connections with spec.auth, by Connection and result (ok, error)",
            logins.clone(),
        );
        let kind_served = Family::<Labels, Gauge>::default();
        registry.register(
            "kind_served",
            "1 when the cluster serves the kind's CustomResourceDefinition and its controller runs, \
             0 when the CRD is missing (the kind's resources are not reconciled)",
            kind_served.clone(),
        );
        let resource_ready = Family::<ResourceLabels, Gauge>::default();
        registry.register(
            "resource_ready",
            "1 when the resource's Ready condition is True, else 0, as this replica last wrote \
             its status (the series goes when the resource is deleted)",
            resource_ready.clone(),
        );
        let leader = Family::<Labels, Gauge>::default();
        registry.register(
            "leader",
            "1 while this replica runs the controllers (holds the leader Lease, or runs without \
             leader election), else 0; `shard` is the shard it serves (empty: the default \
             instance), each shard electing its own leader",
            leader.clone(),
        );
        let budget_wait = Family::<Labels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "connection_budget_wait_seconds",
            "Seconds calls waited for their Connection's client-side request budget \
             (spec.requestsPerSecond), by Connection; a rate near 1 means calls queue for it",
            budget_wait.clone(),
        );
        let connection_calls = Family::<Labels, Counter>::default();
        registry.register(
            "connection_calls",
            "Calls through each Connection by what they are spent on: `resync` (passes at an \
             unchanged, synced spec, which compare and repair drift), `change` (passes after a \
             create, a spec change, a retry or a deletion), `other` (logins, lease commands); \
             the share of the Connection's budget (spec.requestsPerSecond) each uses",
            connection_calls.clone(),
        );
        let calls_per_reconcile = HistogramFamily::new_with_constructor(
            (|| Histogram::new(exponential_buckets(1.0, 2.0, 9))) as fn() -> Histogram,
        );
        registry.register(
            "calls_per_reconcile",
            "Calls to a service made by one reconcile pass, by kind and service",
            calls_per_reconcile.clone(),
        );
        let shard_info = Family::<Labels, Gauge>::default();
        registry.register(
            "shard_info",
            "The shard this instance serves (empty: the default instance, serving resources \
             without the quartet.dev/shard label) and its label selector; always 1",
            shard_info.clone(),
        );
        Self {
            registry,
            connection_calls,
            calls_per_reconcile,
            shard_info,
            resource_ready,
            leader,
            shard: std::sync::OnceLock::new(),
            budget_wait,
            kind_served,
            logins,
            irrevocable,
            acl_replication,
            resyncs_deferred,
            dr_wal_lag,
            dr_heartbeat_age,
            dr_connected,
            reconciles,
            errors,
            reconcile_duration,
            remote_calls,
            namespace_calls,
            remote_duration,
            kube_calls,
        }
    }
}

/// How far a secondary datacenter's ACL replication is behind its primary, in raft indexes
/// (`None`: unknown).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplicationLag {
    /// Lag of the replicated index, in raft indexes.
    pub index: Option<u64>,
    /// Lag of the replicated token index, in raft indexes.
    pub token_index: Option<u64>,
}

impl Metrics {
    /// Counts one reconcile of `kind` ending in `result`, and records how long it `took`.
    pub fn reconciled(&self, kind: &str, result: &str, took: Duration) {
        self.reconciles
            .get_or_create(&vec![
                ("kind", kind.to_string()),
                ("result", result.to_string()),
            ])
            .inc();
        self.reconcile_duration
            .get_or_create(&vec![("kind", kind.to_string())])
            .observe(took.as_secs_f64());
    }

    /// Counts one failed reconcile of `kind` in error category `category`.
    pub fn error(&self, kind: &str, category: &str) {
        self.errors
            .get_or_create(&vec![
                ("kind", kind.to_string()),
                ("category", category.to_string()),
            ])
            .inc();
    }

    /// Counts one call to `service` (by verb and status) and records how long it `took`.
    pub fn remote_call(&self, service: Service, verb: &str, status: &str, took: Duration) {
        let verb = verb.to_ascii_uppercase();
        self.remote_calls
            .get_or_create(&vec![
                ("service", service.to_string()),
                ("verb", verb.clone()),
                ("status", status.to_string()),
            ])
            .inc();
        self.remote_duration
            .get_or_create(&vec![("service", service.to_string()), ("verb", verb)])
            .observe(took.as_secs_f64());
    }

    /// Counts one call to the Kubernetes API by RBAC verb and resource.
    pub fn kube_call(&self, verb: &str, resource: &str) {
        self.kube_calls
            .get_or_create(&vec![
                ("verb", verb.to_string()),
                ("resource", resource.to_string()),
            ])
            .inc();
    }

    /// Counts one periodic resync of `kind` put off to keep within its Connection's call budget.
    pub fn resync_deferred(&self, kind: &str, connection: &str) {
        self.resyncs_deferred
            .get_or_create(&vec![
                ("kind", kind.to_string()),
                ("connection", connection.to_string()),
            ])
            .inc();
    }

    /// ACL replication of datacenter `dc` as a CatalogAclBootstrap `resource` (namespace/name)
    /// last read it.
    pub fn acl_replication(
        &self,
        resource: &str,
        dc: &str,
        healthy: bool,
        since_success: Option<f64>,
        lag: ReplicationLag,
    ) {
        let labels = |m: &str| {
            vec![
                ("resource", resource.to_string()),
                ("datacenter", dc.to_string()),
                ("measure", m.to_string()),
            ]
        };
        self.acl_replication
            .get_or_create(&labels("healthy"))
            .set(if healthy { 1.0 } else { 0.0 });
        self.acl_replication
            .get_or_create(&labels("seconds_since_last_success"))
            .set(since_success.unwrap_or(-1.0));
        for (measure, v) in [
            ("index_lag", lag.index),
            ("token_index_lag", lag.token_index),
        ] {
            self.acl_replication
                .get_or_create(&labels(measure))
                .set(v.map(|v| v as f64).unwrap_or(-1.0));
        }
    }

    /// Sets the replication gauges of DR secondary `secondary` in replication set `set`.
    pub fn dr_secondary(
        &self,
        set: &str,
        secondary: &str,
        wal_lag: i64,
        heartbeat_age: i64,
        connected: bool,
    ) {
        let labels = vec![
            ("replication", set.to_string()),
            ("secondary", secondary.to_string()),
        ];
        self.dr_wal_lag.get_or_create(&labels).set(wal_lag);
        self.dr_heartbeat_age
            .get_or_create(&labels)
            .set(heartbeat_age);
        self.dr_connected
            .get_or_create(&labels)
            .set(i64::from(connected));
    }

    /// Sets the number of irrevocable leases under `mount` that Connection `connection` found.
    pub fn irrevocable_leases(&self, connection: &str, mount: &str, n: i64) {
        self.irrevocable
            .get_or_create(&vec![
                ("connection", connection.to_string()),
                ("mount", mount.to_string()),
            ])
            .set(n);
    }

    /// One login of the Connection `connection` (`namespace/name`).
    pub fn login(&self, connection: &str, ok: bool) {
        self.logins
            .get_or_create(&vec![
                ("connection", connection.to_string()),
                ("result", if ok { "ok" } else { "error" }.to_string()),
            ])
            .inc();
    }

    /// Whether the kind `kind` is served (its CRD installed and its controller running).
    pub fn kind_served(&self, kind: &str, served: bool) {
        self.kind_served
            .get_or_create(&vec![("kind", kind.to_string())])
            .set(i64::from(served));
    }

    /// The Ready condition of `kind` `namespace/name`, as its status was last written.
    pub fn resource_ready(&self, kind: &str, namespace: &str, name: &str, ready: bool) {
        self.resource_ready
            .get_or_create(&ResourceLabels::new(kind, namespace, name))
            .set(i64::from(ready));
    }

    /// The resource is gone: its Ready series with it (a deleted resource is not "not ready").
    pub fn resource_gone(&self, kind: &str, namespace: &str, name: &str) {
        self.resource_ready
            .remove(&ResourceLabels::new(kind, namespace, name));
    }

    /// Whether this replica runs the controllers.
    pub fn set_leader(&self, leader: bool) {
        let shard = self.shard.get().cloned().unwrap_or_default();
        self.leader
            .get_or_create(&vec![("shard", shard)])
            .set(i64::from(leader));
    }

    /// A call of Connection `connection` (`namespace/name`) waited `waited` for its budget.
    pub fn budget_wait(&self, connection: &str, waited: Duration) {
        self.budget_wait
            .get_or_create(&vec![("connection", connection.to_string())])
            .inc_by(waited.as_secs_f64());
    }

    /// One call through `connection` for a resource in `namespace` (so a platform team sees
    /// which tenant spends a shared ClusterConnection's budget).
    pub fn namespace_call(&self, connection: &str, namespace: &str) {
        self.namespace_calls
            .get_or_create(&vec![
                ("connection", connection.to_string()),
                ("namespace", namespace.to_string()),
            ])
            .inc();
    }

    /// A call through Connection `connection` (`namespace/name`), spent on `cause`.
    pub fn connection_call(&self, connection: &str, cause: &str) {
        self.connection_calls
            .get_or_create(&vec![
                ("connection", connection.to_string()),
                ("cause", cause.to_string()),
            ])
            .inc();
    }

    /// The calls of one reconcile pass over a `kind`, by service (`calls` empty: the pass made
    /// none, counted as 0 for `service`, the kind's own).
    pub fn calls_per_reconcile(&self, kind: &str, service: &str, calls: &[(String, u64)]) {
        let zero = [(service.to_string(), 0)];
        let calls = if calls.is_empty() { &zero[..] } else { calls };
        for (service, n) in calls {
            self.calls_per_reconcile
                .get_or_create(&vec![
                    ("kind", kind.to_string()),
                    ("service", service.clone()),
                ])
                .observe(*n as f64);
        }
    }

    /// Which resources this instance serves (`quartet_shard_info{shard, selector} 1`), so a
    /// dashboard can join any series of the instance with its shard.
    pub fn shard_info(&self, shard: &str, selector: &str) {
        let _ = self.shard.set(shard.to_string());
        self.shard_info
            .get_or_create(&vec![
                ("shard", shard.to_string()),
                ("selector", selector.to_string()),
            ])
            .set(1);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_calls_are_counted_by_service_verb_and_status() {
        let m = Metrics::default();
        m.remote_call(Service::Secrets, "get", "200", Duration::from_millis(3));
        m.remote_call(Service::Secrets, "GET", "200", Duration::from_millis(3));
        let text = m.render();
        assert!(
            text.contains(
                r#"quartet_remote_calls_total{service="secrets",verb="GET",status="200"} 2"#
            ),
            "{text}"
        );
    }
}
