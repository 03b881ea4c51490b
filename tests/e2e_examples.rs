//! Every manifest in `examples/` is accepted by the API server with the CRDs installed, and every
//! example written for `quartet dev` becomes Ready there, as a newcomer would try them.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

/// The examples that describe a Connection to a server of your own (an address and token to
/// fill in, a real OpenBao on a fixed port): accepted, but there is nothing for them to reach
/// under `quartet dev`, which creates its own Connections.
const OWN_SERVER: [&str; 3] = [
    "connection.yaml",
    "connection-idp.yaml",
    "connection-openbao.yaml",
];

fn examples() -> Vec<std::path::PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(repo_root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
}

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
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(BIN)
        .args([
            "dev",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
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
            "--secrets-clusters",
            "3",
            "--resync-interval",
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("dev.log")).unwrap())
        .spawn()
        .unwrap();
    read_ready(&mut child, "Quartet dev is ready");
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
            .filter(|o| o["kind"] != "Connection")
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
        if name.starts_with("connection.") {
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
