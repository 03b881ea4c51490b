//! `quartet dev`: one command gives a newcomer a working cluster, services and controllers.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

#[test]
fn quartet_dev_makes_the_example_policy_ready_in_the_sandbox() {
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
            "--resync-interval",
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("dev.log")).unwrap())
        .spawn()
        .unwrap();
    let urls = read_ready(&mut child, "Quartet dev is ready");
    let example = repo_root().join("examples/secrets-policy.yaml");
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
            "--timeout=30s",
            "secretspolicy/app-read",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "not Ready: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The policy is in the sandbox's secrets service (the first of its three clusters: `quartet
    // dev` starts the DR example's three, listed as `secrets[0]`, `secrets[1]`, `secrets[2]`).
    for i in 0..3 {
        assert!(urls.contains_key(&format!("secrets[{i}]")), "{urls:?}");
    }
    let (status, body) = http(
        "GET",
        &format!("{}/v1/sys/policies/acl/app-read", urls["secrets[0]"]),
        Some(("X-Secrets-Token", "root")),
        None,
    );
    assert_eq!(status, 200);
    assert!(body["data"]["policy"]
        .as_str()
        .unwrap()
        .contains("secret/data/app/*"));
    // Every Connection of the dev setup reports whether its service answers.
    let out = kubectl(&kubeconfig, &["get", "connections", "-o", "name"], None);
    let names = String::from_utf8_lossy(&out.stdout).to_string();
    for svc in ["secrets", "workspaces", "catalog", "scheduler"] {
        assert!(
            names.contains(&format!("connection.quartet.dev/{svc}")),
            "{names}"
        );
    }
    let out = kubectl(&kubeconfig, &["get", "quartet"], None);
    assert!(String::from_utf8_lossy(&out.stdout).contains("app-read"));
    let _ = child.kill();
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(100));
}
