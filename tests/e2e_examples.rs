//! Every manifest in `examples/` is accepted by the API server with the CRDs installed, and every
//! example written for `quartet dev` becomes Ready there, as a newcomer would try them (and
//! `kubectl wait --for=condition=Ready` agrees on each). The same examples applied with
//! `spec.suspend: true` make no call to any service, every kind, and become Ready when resumed.

use crate::support;

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use support::dev::{examples, start_dev};
use support::*;

/// The examples that describe a Connection to a server of your own (an address and token to
/// fill in, a real OpenBao on a fixed port): accepted, but there is nothing for them to reach
/// under `quartet dev`, which creates its own Connections.
const OWN_SERVER: [&str; 4] = [
    "cluster-connection.yaml",
    "connection.yaml",
    "connection-idp.yaml",
    "connection-openbao.yaml",
];

#[test]
fn every_example_manifest_is_accepted_by_the_api_server() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let mut count = 0;
    for path in examples() {
        count += 1;
        sb.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
    }
    assert!(count >= 2, "no examples found");
    let out = sb.kubectl_ok(&["get", "quartet", "-A", "-o", "name"]);
    assert!(
        out.contains("secretspolicy.secrets.quartet.dev/app-read"),
        "{out}"
    );
    assert!(out.contains("connection.quartet.dev/secrets"), "{out}");
}

#[test]
fn every_example_for_quartet_dev_becomes_ready_under_quartet_dev() {
    let (mut child, dir, _urls) = start_dev("30s");
    let kubeconfig = dir.path().join("kubeconfig");
    for path in examples() {
        let name = path.file_name().unwrap().to_str().unwrap();
        if OWN_SERVER.contains(&name) {
            continue;
        }
        let out = kubectl(&kubeconfig, &["apply", "-f", path.to_str().unwrap()], None);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Every resource the examples made (and the Connections `quartet dev` made) becomes Ready
    // for its current generation.
    let deadline = Instant::now() + Duration::from_secs(180);
    let not_ready = loop {
        let out = kubectl(&kubeconfig, &["get", "quartet", "-A", "-o", "json"], None);
        let list: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let not_ready: Vec<String> = items
            .iter()
            // The Connections are `quartet dev`'s own (the catalog's root token stops working
            // once the catalog example bootstraps its ACLs; DR secondaries refuse most paths).
            .filter(|o| o["kind"] != "Connection" && o["kind"] != "ClusterConnection")
            .filter(|o| {
                !(condition_is(o, "Ready", "True")
                    && o["status"]["observedGeneration"] == o["metadata"]["generation"])
            })
            .map(|o| {
                format!(
                    "{}/{}: {}",
                    o["kind"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap_or(""),
                    condition(o, "Ready").cloned().unwrap_or(Value::Null)
                )
            })
            .collect();
        if (not_ready.is_empty() && items.len() > 20) || Instant::now() > deadline {
            if let Some(dir) = std::env::var_os("QUARTET_CAPTURE_DIR") {
                // Captured statuses for the Argo CD health checks' testdata (argocd/README.md).
                for o in &items {
                    let file = std::path::Path::new(&dir).join(format!(
                        "{}-{}.json",
                        o["kind"].as_str().unwrap_or(""),
                        o["metadata"]["name"].as_str().unwrap_or("")
                    ));
                    std::fs::write(file, serde_json::to_string_pretty(o).unwrap()).unwrap();
                }
            }
            break not_ready;
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    // `kubectl wait --for=condition=Ready` agrees, kind by kind.
    let out = kubectl(&kubeconfig, &["get", "quartet", "-A", "-o", "name"], None);
    let mut waited = Vec::new();
    for name in String::from_utf8_lossy(&out.stdout).lines() {
        if name.starts_with("connection.") || name.starts_with("clusterconnection.") {
            continue;
        }
        let out = kubectl(
            &kubeconfig,
            &["wait", "--for=condition=Ready", "--timeout=20s", name],
            None,
        );
        if !out.status.success() {
            waited.push(format!("{name}: {}", String::from_utf8_lossy(&out.stderr)));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(not_ready.is_empty(), "not Ready:\n{}", not_ready.join("\n"));
    assert!(
        waited.is_empty(),
        "kubectl wait failed:\n{}",
        waited.join("\n")
    );
}

/// The requests every service of `quartet dev` logged since `since`: (method, path), and the
/// next mark.
fn logged(
    urls: &std::collections::HashMap<String, String>,
    since: u64,
) -> (Vec<(String, String)>, u64) {
    let (_, body) = http(
        "GET",
        // One log for every service of the sandbox, served on each listener.
        &format!("{}/_sandbox/requests?since={since}", urls["workspaces"]),
        None,
        None,
    );
    let list = body["requests"].as_array().cloned().unwrap_or_default();
    let items = list
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap_or("").to_string(),
                r["path"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (items, body["next"].as_u64().unwrap_or(since))
}

/// Every Quartet resource (Connections aside) whose `Ready` is not `want` with `reason` (when
/// given) for its current generation.
fn resources_not(
    kubeconfig: &std::path::Path,
    want: &str,
    reason: Option<&str>,
) -> (Vec<String>, Vec<String>) {
    let out = kubectl(kubeconfig, &["get", "quartet", "-A", "-o", "json"], None);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let mut names = Vec::new();
    let mut off = Vec::new();
    for o in list["items"].as_array().cloned().unwrap_or_default() {
        if o["kind"] == "Connection" {
            continue;
        }
        let name = format!(
            "{}.{}/{}",
            o["kind"].as_str().unwrap().to_lowercase(),
            o["apiVersion"].as_str().unwrap().split('/').next().unwrap(),
            o["metadata"]["name"].as_str().unwrap()
        );
        let ok = condition(&o, "Ready").is_some_and(|c| {
            c["status"] == want
                && reason.is_none_or(|r| c["reason"] == r)
                && c["observedGeneration"] == o["metadata"]["generation"]
        });
        if !ok {
            off.push(format!(
                "{name}: {}",
                condition(&o, "Ready").cloned().unwrap_or(Value::Null)
            ));
        }
        names.push(name);
    }
    (names, off)
}

#[test]
fn every_example_applied_suspended_makes_no_call_and_becomes_ready_when_resumed() {
    let (mut child, dir, urls) = start_dev("3s");
    let kubeconfig = dir.path().join("kubeconfig");
    // What the Connections alone ask of the services over a few of their checks.
    let (_, mark) = logged(&urls, 0);
    std::thread::sleep(Duration::from_secs(8));
    let (baseline, _) = logged(&urls, mark);
    let connection_calls: std::collections::BTreeSet<_> = baseline.into_iter().collect();
    assert!(!connection_calls.is_empty(), "the request log is empty");

    let (_, mark) = logged(&urls, 0);
    for path in examples() {
        let name = path.file_name().unwrap().to_str().unwrap();
        if OWN_SERVER.contains(&name) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut docs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut v = Value::deserialize(doc).unwrap();
            if v.is_null() {
                continue;
            }
            if v["apiVersion"]
                .as_str()
                .unwrap_or("")
                .contains("quartet.dev/")
                && v["kind"] != "Connection"
            {
                v["spec"]["suspend"] = Value::Bool(true);
            }
            docs.push(v);
        }
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
        let out = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&list.to_string()));
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let names = loop {
        let (names, off) = resources_not(&kubeconfig, "False", Some("Suspended"));
        if off.is_empty() && names.len() > 20 {
            break names;
        }
        assert!(
            Instant::now() < deadline,
            "not Suspended:\n{}",
            off.join("\n")
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    // A few resync intervals: nothing but the Connections' own checks reached any service.
    std::thread::sleep(Duration::from_secs(8));
    let (calls, _) = logged(&urls, mark);
    let extra: Vec<_> = calls
        .iter()
        .filter(|c| !connection_calls.contains(*c))
        .collect();
    assert!(
        extra.is_empty(),
        "calls while every resource was suspended: {extra:?}"
    );

    let (_, resumed_at) = logged(&urls, 0);
    for name in &names {
        let out = kubectl(
            &kubeconfig,
            &[
                "patch",
                name,
                "--type=merge",
                "-p",
                r#"{"spec":{"suspend":false}}"#,
            ],
            None,
        );
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    let off = loop {
        let (_, off) = resources_not(&kubeconfig, "True", None);
        if off.is_empty() || Instant::now() > deadline {
            break off;
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    let (after, _) = logged(&urls, resumed_at);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        off.is_empty(),
        "not Ready after resuming:\n{}",
        off.join("\n")
    );
    assert!(names.len() >= 25, "{names:?}");
    // Resuming caught up: the writes held back while suspended were made.
    assert!(
        after.iter().filter(|(m, _)| m != "GET").count() >= 20,
        "{after:?}"
    );
}
