//! `quartet leases` against the sandbox's secrets service: every verb, through an address and
//! `QUARTET_TOKEN` and through a Connection in the dev cluster.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};
use support::*;

fn leases(sb: &Sandbox, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .arg("leases")
        .args(["--address", sb.url("secrets")])
        .args(args)
        .env("QUARTET_TOKEN", &sb.root_token)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start quartet leases");
    if let Some(input) = stdin {
        let _ = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes());
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("quartet leases")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "quartet leases failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Synthetic leases through the sandbox admin API; returns their ids.
fn make_leases(sb: &Sandbox, prefix: &str, count: u32, irrevocable: bool) -> Vec<String> {
    let (status, body) = http(
        "POST",
        &format!("{}/_sandbox/secrets/leases", sb.url("secrets")),
        None,
        Some(json!({"prefix": prefix, "count": count, "ttl": 3600, "irrevocable": irrevocable})),
    );
    assert!(status < 300, "admin leases: {status} {body}");
    body["lease_ids"]
        .as_array()
        .expect("lease_ids")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn lookup_status(sb: &Sandbox, id: &str) -> u16 {
    sb.secrets(
        "PUT",
        "/v1/sys/leases/lookup",
        Some(json!({"lease_id": id})),
    )
    .0
}

#[test]
fn lookup_list_and_renew_show_the_services_answers() {
    let sb = Sandbox::start(&[]);
    let ids = make_leases(&sb, "ad/library/team/check-out/", 3, false);
    let out = ok(&leases(&sb, &["-o", "json", "lookup", &ids[0]], None));
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["id"], ids[0]);
    assert!(v["ttl"].as_i64().unwrap() > 0);
    let table = ok(&leases(&sb, &["lookup", &ids[0]], None));
    assert!(table.contains(&ids[0]), "{table}");

    let listed = ok(&leases(&sb, &["list", "ad/library/team/"], None));
    for id in &ids {
        assert!(listed.lines().any(|l| l == id), "{id} not in {listed}");
    }

    let renewed = ok(&leases(
        &sb,
        &["-o", "json", "renew", &ids[1], "--increment", "10m"],
        None,
    ));
    let v: Value = serde_json::from_str(&renewed).expect("json");
    assert_eq!(v["lease_id"], ids[1]);
    assert!(v["lease_duration"].as_i64().unwrap() > 0, "{v}");
}

#[test]
fn revoke_prefix_lists_counts_and_asks_before_revoking() {
    let sb = Sandbox::start(&[]);
    let ids = make_leases(&sb, "ad/library/ops/check-out/", 3, false);
    // Answering no revokes nothing.
    let out = leases(&sb, &["revoke-prefix", "ad/library/ops/"], Some("n\n"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("3 lease(s) under ad/library/ops"), "{err}");
    assert!(err.contains("nothing was revoked"), "{err}");
    assert!(ids.iter().all(|id| lookup_status(&sb, id) == 200));
    // Answering yes revokes them all (the trailing slash of a listed key is dropped, which
    // the real server would refuse).
    ok(&leases(
        &sb,
        &["revoke-prefix", "ad/library/ops/"],
        Some("y\n"),
    ));
    assert!(ids.iter().all(|id| lookup_status(&sb, id) == 400));
}

#[test]
fn revoke_and_revoke_force_remove_leases_and_yes_skips_the_question() {
    let sb = Sandbox::start(&[]);
    let ids = make_leases(&sb, "ad/library/one/check-out/", 2, false);
    ok(&leases(&sb, &["revoke", &ids[0]], None));
    assert_eq!(lookup_status(&sb, &ids[0]), 400);
    ok(&leases(
        &sb,
        &["revoke-force", "ad/library/one", "--yes"],
        None,
    ));
    assert_eq!(lookup_status(&sb, &ids[1]), 400);
}

#[test]
fn prefixes_holding_every_token_are_refused() {
    let sb = Sandbox::start(&[]);
    let out = leases(&sb, &["revoke-prefix", "auth/token/", "--yes"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing"));
}

#[test]
fn irrevocable_leases_are_counted_and_listed_and_tidy_starts() {
    let sb = Sandbox::start(&[]);
    make_leases(&sb, "ad/library/bad/check-out/", 3, true);
    let count = ok(&leases(
        &sb,
        &["-o", "json", "count", "--irrevocable"],
        None,
    ));
    let v: Value = serde_json::from_str(&count).expect("json");
    assert_eq!(v["lease_count"], 3, "{v}");
    let table = ok(&leases(&sb, &["count", "--irrevocable"], None));
    assert!(table.contains("irrevocable leases: 3"), "{table}");
    let listed = ok(&leases(
        &sb,
        &["-o", "json", "irrevocable", "--limit", "2"],
        None,
    ));
    let v: Value = serde_json::from_str(&listed).expect("json");
    assert_eq!(v["leases"].as_array().unwrap().len(), 2, "{v}");
    assert!(
        v["warnings"].as_array().is_some_and(|w| !w.is_empty()),
        "{v}"
    );
    let all = ok(&leases(&sb, &["irrevocable", "--limit", "none"], None));
    assert_eq!(all.lines().count(), 4, "header and three leases: {all}");
    ok(&leases(&sb, &["tidy"], None));
}

#[test]
fn a_connection_in_the_cluster_supplies_address_and_token() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let ids = make_leases(&sb, "ad/library/viaconn/check-out/", 1, false);
    let out = Command::new(BIN)
        .args([
            "leases",
            "--connection",
            "default/secrets",
            "--kubeconfig",
            sb.kubeconfig.to_str().unwrap(),
            "-o",
            "json",
            "lookup",
            &ids[0],
        ])
        .env_remove("QUARTET_TOKEN")
        .output()
        .expect("quartet leases");
    let text = ok(&out);
    let v: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["id"], ids[0]);
    assert!(!text.contains(&sb.root_token));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&sb.root_token));
}

/// The irrevocable-lease count is read at each Connection check: a metric per mount, the
/// Connection's status, and a Warning Event when it grows.
#[test]
fn irrevocable_leases_move_the_metric_and_a_growing_count_is_a_warning_event() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, "2s");
    let addr = op.metrics_addr();
    let total = || -> Option<i64> {
        let text = reqwest::blocking::get(format!("http://{addr}/metrics"))
            .ok()?
            .text()
            .ok()?;
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.starts_with("quartet_secrets_irrevocable_leases{")
                    && l.contains(r#"connection="default/secrets""#)
            })
            .collect();
        (!lines.is_empty()).then(|| {
            lines
                .iter()
                .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
                .sum()
        })
    };
    make_leases(&sb, "ad/library/stuck/check-out/", 2, true);
    wait_for("metric shows 2", std::time::Duration::from_secs(60), || {
        (total() == Some(2)).then_some(())
    });
    make_leases(&sb, "ad/library/stuck/check-out/", 1, true);
    wait_for("metric shows 3", std::time::Duration::from_secs(60), || {
        (total() == Some(3)).then_some(())
    });
    let conn = wait_for("status count", std::time::Duration::from_secs(30), || {
        sb.get_json("connection", "secrets")
            .filter(|c| c["status"]["irrevocableLeases"] == 3)
    });
    assert!(condition_is(&conn, "Ready", "True"));
    let events = sb.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=secrets,reason=IrrevocableLeases",
        "-o",
        "json",
    ]);
    assert!(events.contains("irrevocable lease"), "{events}");
}
