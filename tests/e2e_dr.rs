//! DrReplication end to end: the built `quartet` binary against three sandbox secrets clusters
//! (`quartet sandbox --secrets-clusters 3`), driven with the real `kubectl`, each cluster's
//! replication state read over HTTP.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const WAIT: Duration = Duration::from_secs(90);

/// Three clusters with a Connection each (`secrets`, `secrets-1`, `secrets-2`), the key shares
/// in a Secret, and the operator.
fn env() -> (Sandbox, Operator) {
    let sb = Sandbox::start(&["--secrets-clusters", "3"]);
    sb.install_crds();
    let mut yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: secrets-token, namespace: default}}\nstringData: {{token: {}}}\n",
        sb.root_token
    );
    for i in 0..3 {
        let name = if i == 0 {
            "secrets".to_string()
        } else {
            format!("secrets-{i}")
        };
        yaml.push_str(&format!(
            "---\napiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: {name}, namespace: default}}\n\
             spec: {{service: secrets, address: \"{}\", tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 5}}\n",
            cluster(&sb, i)
        ));
    }
    let (_, keys) = http(
        "GET",
        &format!("{}/_sandbox/secrets/keys", cluster(&sb, 0)),
        None,
        None,
    );
    yaml.push_str("---\napiVersion: v1\nkind: Secret\nmetadata: {name: key-shares, namespace: default}\nstringData:\n");
    for (i, k) in keys["keys"].as_array().expect("keys").iter().enumerate() {
        yaml.push_str(&format!("  share-{}: \"{}\"\n", i + 1, k.as_str().unwrap()));
    }
    sb.apply_ok(&yaml);
    let op = Operator::start(&sb, "30s");
    (sb, op)
}

fn cluster(sb: &Sandbox, i: usize) -> String {
    sb.url(&format!("secrets[{i}]")).to_string()
}

fn dr_status(sb: &Sandbox, i: usize) -> Value {
    let (status, body) = http(
        "GET",
        &format!("{}/v1/sys/replication/dr/status", cluster(sb, i)),
        None,
        None,
    );
    assert_eq!(status, 200, "{body}");
    body["data"].clone()
}

/// Requests cluster `i` logged: (method, path).
fn requests(sb: &Sandbox, i: usize) -> Vec<(String, String)> {
    let (_, body) = http(
        "GET",
        &format!("{}/_sandbox/requests?service=secrets", cluster(sb, i)),
        None,
        None,
    );
    body["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["method"].as_str().unwrap_or("").to_string(),
                format!("{} {}", r["path"].as_str().unwrap_or(""), r["status"]),
            )
        })
        .collect()
}

fn manifest(wipe: bool, failover: Option<&str>) -> String {
    let mut y = format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: DrReplication\nmetadata: {{name: dr, namespace: default}}\nspec:\n\
         \x20 primary: {{connectionRef: {{name: secrets}}}}\n\
         \x20 secondaries:\n\
         \x20 - {{id: dc2, connectionRef: {{name: secrets-1}}}}\n\
         \x20 - {{id: dc3, connectionRef: {{name: secrets-2}}}}\n\
         \x20 allowSecondaryWipe: {wipe}\n\
         \x20 keySharesSecretRef: {{name: key-shares}}\n"
    );
    if let Some(p) = failover {
        y.push_str(&format!("  failover: {{promote: {p}}}\n"));
    }
    y
}

fn wait_ready(sb: &Sandbox, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    wait_for_ready(sb, what, WAIT, f)
}

fn wait_for_ready(sb: &Sandbox, what: &str, within: Duration, f: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, within, || {
        sb.get_json("drreplication", "dr").filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
                && f(o)
        })
    })
}

fn follows(sb: &Sandbox, secondary: usize, primary: usize) -> bool {
    let s = dr_status(sb, secondary);
    let p = dr_status(sb, primary);
    s["mode"] == "secondary"
        && s["state"] == "stream-wals"
        && s["cluster_id"] == p["cluster_id"]
        && s["last_remote_wal"] == p["last_wal"]
}

#[test]
fn a_primary_and_two_secondaries_converge_and_follow_its_wal() {
    let (sb, _op) = env();
    sb.apply_ok(&manifest(true, None));
    let o = wait_ready(&sb, "replication Ready", |_| true);
    assert_eq!(o["status"]["primary"], "primary");
    assert_eq!(dr_status(&sb, 0)["mode"], "primary");
    // A write on the primary reaches both secondaries.
    let (st, _) = http(
        "PUT",
        &format!("{}/v1/sys/policies/acl/replicated", cluster(&sb, 0)),
        Some(("X-Secrets-Token", &sb.root_token)),
        Some(json!({"policy": "path \"x/*\" { capabilities = [\"read\"] }"})),
    );
    assert_eq!(st, 204);
    assert!(follows(&sb, 1, 0) && follows(&sb, 2, 0));
    for id in ["dc2", "dc3"] {
        let c = &o["status"]["clusters"][id];
        assert_eq!(c["mode"], "secondary", "{o}");
        assert_eq!(c["state"], "stream-wals", "{o}");
        assert_eq!(c["peers"][0]["connectionStatus"], "connected", "{o}");
    }
    // A secondary refuses the token lookup a Connection probes with; its Connection says it is
    // a DR secondary instead of failing (asked to check now rather than at the 30 s resync).
    sb.kubectl_ok(&[
        "annotate",
        "connection",
        "secrets-1",
        "--overwrite",
        "reconcile.quartet.dev/requestedAt=after-enable",
    ]);
    let conn = wait_for("the secondary's Connection says DrSecondary", WAIT, || {
        sb.get_json("connection", "secrets-1").filter(|c| {
            c["status"]["lastHandledReconcileAt"] == "after-enable"
                && c["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|x| x["type"] == "Ready" && x["reason"] == "DrSecondary")
        })
    });
    assert!(condition_is(&conn, "Ready", "True"), "{conn}");
    assert!(condition_is(&conn, "Stalled", "False"), "{conn}");
    // Removing a secondary from the spec revokes it on the primary.
    sb.kubectl_ok(&[
        "patch",
        "drreplication",
        "dr",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/secondaries/1"}]"#,
    ]);
    wait_for("dc3 revoked", WAIT, || {
        let known = dr_status(&sb, 0)["known_secondaries"].clone();
        (!known.as_array().unwrap().iter().any(|k| k == "dc3")).then_some(())
    });
    // Deleting the resource leaves replication running.
    sb.kubectl_ok(&[
        "delete",
        "drreplication",
        "dr",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert_eq!(dr_status(&sb, 0)["mode"], "primary");
    assert!(follows(&sb, 1, 0));
}

/// The primary issues a secondary's activation token and the answer is lost, then a secondary's
/// enable is carried out and its answer lost: the set still converges, each secondary known
/// once to the primary and following it.
#[test]
fn lost_answers_to_the_token_and_the_enable_leave_each_secondary_known_once() {
    let (sb, _op) = env();
    for (cluster, path) in [
        (
            "secrets[0]",
            "/v1/sys/replication/dr/primary/secondary-token",
        ),
        ("secrets[1]", "/v1/sys/replication/dr/secondary/enable"),
    ] {
        sb.fault(
            cluster,
            json!({"method": "POST", "path": path, "after": true, "count": 1}),
        );
    }
    sb.apply_ok(&manifest(true, None));
    wait_ready(&sb, "replication Ready", |_| true);
    for cluster in ["secrets[0]", "secrets[1]"] {
        assert!(
            sb.faults_left(cluster).is_empty(),
            "{cluster}: the fault was hit"
        );
    }
    let mut known: Vec<String> = dr_status(&sb, 0)["known_secondaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    known.sort();
    assert_eq!(known, vec!["dc2", "dc3"]);
    assert!(follows(&sb, 1, 0) && follows(&sb, 2, 0));
}

#[test]
fn a_secondary_is_never_wiped_without_allow_secondary_wipe() {
    let (sb, _op) = env();
    sb.apply_ok(&manifest(false, None));
    let o = wait_for("WipeNotAllowed", WAIT, || {
        sb.get_json("drreplication", "dr")
            .filter(|o| condition(o, "Ready").is_some_and(|c| c["reason"] == "WipeNotAllowed"))
    });
    let msg = condition(&o, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("dc2") && msg.contains("wipe"), "{msg}");
    std::thread::sleep(Duration::from_secs(2));
    for i in 1..3 {
        assert!(
            !requests(&sb, i)
                .iter()
                .any(|(_, p)| p.contains("secondary/enable")),
            "cluster {i} was enabled"
        );
        assert_eq!(dr_status(&sb, i)["mode"], "disabled");
    }
}

#[test]
fn a_failover_promotes_the_secondary_and_the_others_follow_it_with_no_operation_token_left() {
    let (sb, op) = env();
    sb.apply_ok(&manifest(true, None));
    wait_ready(&sb, "replication Ready", |_| true);
    // Each key share takes a second, so the poll below sees the ceremony between two shares
    // (three passes of a fast operator can otherwise fit between two polls).
    sb.fault(
        "secrets[1]",
        json!({"path": "/v1/sys/replication/dr/secondary/generate-operation-token/update",
               "status": 200, "delay_ms": 1000, "count": 0}),
    );
    sb.kubectl_ok(&[
        "patch",
        "drreplication",
        "dr",
        "--type=merge",
        "-p",
        r#"{"spec":{"failover":{"promote":"dc2"}}}"#,
    ]);
    // Kill the operator in the middle of the ceremony on dc2, then start it again.
    wait_for("ceremony under way", WAIT, || {
        sb.get_json("drreplication", "dr").filter(|o| {
            o["status"]["failover"]["sharesFed"]["dc2"]
                .as_u64()
                .is_some_and(|n| n >= 1)
        })
    });
    op.kill();
    let _op = Operator::start(&sb, "30s");
    let o = wait_for_ready(&sb, "failover done", Duration::from_secs(180), |o| {
        o["status"]["primary"] == "dc2" && o["status"]["failover"]["phase"] == "Done"
    });
    assert_eq!(dr_status(&sb, 1)["mode"], "primary");
    assert!(
        follows(&sb, 0, 1),
        "old primary follows dc2: {}",
        dr_status(&sb, 0)
    );
    assert!(follows(&sb, 2, 1), "dc3 follows dc2: {}", dr_status(&sb, 2));
    // The old primary kept its cluster id (no wipe): the set's id is the old one.
    assert_eq!(
        dr_status(&sb, 0)["cluster_id"],
        dr_status(&sb, 1)["cluster_id"]
    );
    // Exactly one operation-token attempt per cluster that needed a token (dc2 to promote it,
    // the old primary and dc3 to point them at dc2), despite the restart (the sandbox keeps
    // one request log for all its secrets clusters).
    let starts = requests(&sb, 1)
        .iter()
        .filter(|(m, p)| m == "POST" && p.contains("generate-operation-token/attempt "))
        .count();
    assert_eq!(
        starts,
        3,
        "{:#?}",
        requests(&sb, 1)
            .iter()
            .filter(|(_, p)| p.contains("operation-token") || p.contains("promote"))
            .collect::<Vec<_>>()
    );
    // No operation token left with Quartet, and none in status.
    let (_, secret) = (
        0,
        sb.kubectl_ok(&["get", "secret", "dr-dr-ceremony", "-o", "json"]),
    );
    let secret: Value = serde_json::from_str(&secret).unwrap();
    let keys: Vec<&String> = secret["data"]
        .as_object()
        .map(|d| d.keys().collect())
        .unwrap_or_default();
    assert!(
        keys.iter()
            .all(|k| !k.starts_with("token.") && !k.starts_with("otp.")),
        "{keys:?}"
    );
    assert!(!o.to_string().contains("hvs."));
}

#[test]
fn the_example_is_ready_under_quartet_dev_with_three_clusters() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(BIN)
        .args([
            "dev",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--secrets-clusters",
            "3",
            "--secrets-addr",
            "127.0.0.1:0",
            "--workspaces-addr",
            "127.0.0.1:0",
            "--catalog-addr",
            "127.0.0.1:0",
            "--scheduler-addr",
            "127.0.0.1:0",
            "--kube-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("dev.log")).unwrap())
        .spawn()
        .unwrap();
    let _ = read_ready(&mut child, "Quartet dev is ready");
    let example = repo_root().join("examples/dr-replication.yaml");
    let out = kubectl(
        &kubeconfig,
        &["apply", "-f", example.to_str().unwrap()],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(
        &kubeconfig,
        &[
            "wait",
            "--for=condition=Ready",
            "drreplication/dr",
            "--timeout=60s",
        ],
        None,
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.path().join("dev.log")).unwrap_or_default()
    );
}

#[test]
fn a_server_without_the_dr_licence_is_unsupported_without_a_write() {
    let sb = Sandbox::start(&["--edition", "community"]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let _op = Operator::start(&sb, "30s");
    // The Connection first, so each GET below is a pass of the resource itself: a Connection
    // that becomes Ready later rightly wakes its resources (one more GET), which is no storm.
    wait_for("the Connection Ready", WAIT, || {
        sb.get_json("connection", "secrets")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: DrReplication\nmetadata: {name: dr, namespace: default}\n\
         spec: {primary: {connectionRef: {name: secrets}}}\n",
    );
    let o = wait_for("Unsupported", WAIT, || {
        sb.get_json("drreplication", "dr")
            .filter(|o| condition(o, "Ready").is_some_and(|c| c["reason"] == "Unsupported"))
    });
    assert!(condition(&o, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("licence"));
    std::thread::sleep(Duration::from_secs(2));
    let (reqs, _) = sb.requests("secrets", 0);
    let dr: Vec<_> = reqs
        .iter()
        .filter(|(_, p, _)| p.contains("replication"))
        .collect();
    assert!(dr.iter().all(|(m, _, _)| m == "GET"), "{dr:?}");
    assert!(dr.len() <= 2, "no retry storm: {dr:?}");
}

/// A secondary's `reindexRequest` and `merkleCheckRequest` each run once for a new value: the
/// operation token is made, the step sent once, the value recorded in
/// `status.handledRequests`, and the resource Ready again with no failover record in the way of
/// a later failover (the maintenance record is left out of the status write when the step is
/// done, which must never make that write invalid).
#[test]
fn a_reindex_and_a_merkle_check_request_each_run_once_and_leave_the_failover_record_clear() {
    let (sb, op) = env();
    sb.apply_ok(&manifest(true, None));
    wait_ready(&sb, "converged", |o| {
        o["status"]["clusters"]
            .as_object()
            .is_some_and(|c| c.len() == 3)
    });
    sb.kubectl_ok(&[
        "patch",
        "drreplication",
        "dr",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/spec/secondaries/0/reindexRequest","value":"r1"},
            {"op":"add","path":"/spec/secondaries/1/merkleCheckRequest","value":"m1"}]"#,
    ]);
    let done = wait_ready(&sb, "both requests handled", |o| {
        o["status"]["handledRequests"]["dc2"]["reindex"] == "r1"
            && o["status"]["handledRequests"]["dc3"]["merkleCheck"] == "m1"
    });
    let failover = &done["status"]["failover"];
    assert!(
        failover.is_null() || failover["phase"].as_str().unwrap_or("").is_empty(),
        "a maintenance record left behind: {failover}"
    );
    // Some passes later, still once each.
    std::thread::sleep(Duration::from_secs(3));
    let reindexes = requests(&sb, 1)
        .iter()
        .filter(|(m, p)| m != "GET" && p.contains("reindex"))
        .count();
    let checks = requests(&sb, 2)
        .iter()
        .filter(|(m, p)| m != "GET" && p.contains("merkle-check"))
        .count();
    assert_eq!(
        (reindexes, checks),
        (1, 1),
        "dc2: {:?}\ndc3: {:?}",
        requests(&sb, 1),
        requests(&sb, 2)
    );
    let log = op.stop();
    assert!(
        !log.contains("422 Invalid"),
        "a status write was refused:\n{log}"
    );
}
