//! What `quartet plan` reads to resolve ClusterConnections as the operator does: the cluster's
//! ClusterConnections (overridden by those in the manifests) and the namespaces' labels; and
//! the plan entry of a ClusterConnection manifest (its spec only, as a Connection's).

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::{reflector, watcher};
use kube::{Api, Client};
use serde_json::Value;

use super::{kind_of, kube_message, name_of, spec_entry, Entry, Env, MANAGER};
use crate::api::ClusterConnection;
use crate::reconcile::tenancy::Tenancy;

/// ClusterConnections and namespaces for resolution. Without a cluster (`direct`) or the right
/// to list them, the lists are empty: resources then resolve Connections only.
pub(super) async fn tenancy(
    client: &Client,
    docs: &[Value],
    operator_ns: &str,
    direct: bool,
) -> Tenancy {
    let (ccs, mut cc_writer) = reflector::store::<ClusterConnection>();
    let (namespaces, mut ns_writer) = reflector::store::<Namespace>();
    if !direct {
        if let Ok(l) = Api::<ClusterConnection>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            for c in l.items {
                cc_writer.apply_watcher_event(&watcher::Event::Apply(c));
            }
        }
        if let Ok(l) = Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            for n in l.items {
                ns_writer.apply_watcher_event(&watcher::Event::Apply(n));
            }
        }
    }
    for d in docs {
        if kind_of(d) == Some(("quartet.dev", "ClusterConnection")) {
            if let Ok(c) = serde_json::from_value::<ClusterConnection>(d.clone()) {
                cc_writer.apply_watcher_event(&watcher::Event::Apply(c));
            }
        }
    }
    Tenancy {
        cluster_connections: ccs,
        namespaces,
        operator_namespace: operator_ns.to_string(),
    }
}

/// A ClusterConnection: no remote object, only its spec (create, or the fields that change).
pub(super) async fn entry(env: &Env, mut d: Value) -> Entry {
    let kind = "ClusterConnection";
    let name = name_of(&d);
    if let Some(o) = d.as_object_mut() {
        o.remove("status");
    }
    if env.direct.is_some() {
        return match serde_json::from_value::<ClusterConnection>(d) {
            Ok(obj) => spec_entry(kind, &obj, None),
            Err(e) => Entry::blocked(kind, "", &name, format!("not a valid {kind}: {e}")),
        };
    }
    let api: Api<ClusterConnection> = Api::all(env.client.clone());
    let live = match api.get_opt(&name).await {
        Ok(l) => l,
        Err(e) => return Entry::blocked(kind, "", &name, kube_message(&e)),
    };
    match api
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force().dry_run(),
            &Patch::Apply(&d),
        )
        .await
    {
        Ok(obj) => spec_entry(kind, &obj, live.as_ref()),
        Err(e) => Entry::blocked(
            kind,
            "",
            &name,
            format!("the API server would refuse it: {}", kube_message(&e)),
        ),
    }
}
