//! Workspace end to end: the built `quartet` binary against the dev API server and the
//! sandbox's workspace service, driven with the real `kubectl`; the service is read over HTTP.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::workspaces::ORG;
use support::*;

const WAIT: Duration = Duration::from_secs(60);

fn ready_env(resync: &str) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_workspaces();
    let op = Operator::start(&sb, resync);
    (sb, op)
}

fn wait_ready(sb: &Sandbox, name: &str) -> Value {
    wait_for(&format!("{name} Ready"), WAIT, || {
        sb.get_json("workspace", name).filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    })
}

fn tag_names(sb: &Sandbox, id: &str) -> Vec<String> {
    let mut t: Vec<String> = sb
        .ws_list(&format!("/workspaces/{id}/relationships/tags"))
        .iter()
        .map(|t| t["attributes"]["name"].as_str().unwrap().to_string())
        .collect();
    t.sort();
    t
}

fn writes_since(sb: &Sandbox, since: u64) -> Vec<(String, String, u16)> {
    sb.requests("workspaces", since)
        .0
        .into_iter()
        .filter(|(m, p, _)| m != "GET" && p.starts_with("/api/v2"))
        .collect()
}

const FULL: &str = r#"apiVersion: v1
kind: Secret
metadata: {name: app-vars, namespace: default}
stringData: {password: s3cret-one}
---
apiVersion: workspaces.quartet.dev/v1alpha1
kind: Workspace
metadata: {name: app, namespace: default}
spec:
  description: the app
  autoApply: true
  executionMode: remote
  workingDirectory: infra
  tags: [prod, team-a]
  tagBindings: {env: prod, owner: platform}
  variables:
    - {key: region, value: eu-west-1}
    - key: password
      sensitive: true
      valueFrom: {secretKeyRef: {name: app-vars, key: password}}
"#;

#[test]
fn workspace_is_created_edited_restored_after_drift_recreated_and_deleted() {
    let (sb, op) = ready_env("5m");
    sb.apply_ok(FULL);
    let obj = wait_ready(&sb, "app");
    assert!(
        obj["status"]["workspaceId"].is_string(),
        "workspaceId at create"
    );
    let obj = wait_for("status fields", WAIT, || {
        sb.get_json("workspace", "app")
            .filter(|o| o["status"]["url"].is_string())
    });
    let id = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    assert!(id.starts_with("ws-"));
    assert_eq!(obj["status"]["remoteId"], json!(id));
    assert_eq!(obj["status"]["locked"], false);
    assert_eq!(obj["status"]["resourceCount"], 0);
    assert!(obj["status"]["url"].as_str().unwrap().starts_with("http"));

    // The service holds the spec.
    let ws = sb.remote_workspace("app").expect("workspace exists");
    assert_eq!(ws["id"], json!(id));
    let a = &ws["attributes"];
    assert_eq!(a["description"], "the app");
    assert_eq!(a["auto-apply"], true);
    assert_eq!(a["working-directory"], "infra");
    assert_eq!(tag_names(&sb, &id), vec!["prod", "team-a"]);
    let bindings = sb.ws_list(&format!("/workspaces/{id}/tag-bindings"));
    assert_eq!(bindings.len(), 2);
    let vars = sb.ws_list(&format!("/workspaces/{id}/vars"));
    let region = vars
        .iter()
        .find(|v| v["attributes"]["key"] == "region")
        .unwrap();
    assert_eq!(region["attributes"]["value"], "eu-west-1");
    let pw = vars
        .iter()
        .find(|v| v["attributes"]["key"] == "password")
        .unwrap();
    assert_eq!(pw["attributes"]["sensitive"], true);
    let status = serde_json::to_string(&obj["status"]).unwrap();
    assert!(!status.contains("s3cret-one"), "secret in status");

    // Edit: a new description and one tag fewer.
    sb.apply_ok(
        &FULL
            .replace("description: the app", "description: the app, edited")
            .replace("[prod, team-a]", "[prod]"),
    );
    wait_for("edit applied", WAIT, || {
        let ws = sb.remote_workspace("app")?;
        (ws["attributes"]["description"] == "the app, edited"
            && tag_names(&sb, &id) == vec!["prod"])
        .then_some(())
    });
    wait_ready(&sb, "app");

    // A changed Secret is sent at once (the sensitive variable is updated).
    let since = sb.requests("workspaces", 0).1;
    sb.apply_ok("apiVersion: v1\nkind: Secret\nmetadata: {name: app-vars, namespace: default}\nstringData: {password: s3cret-two}\n");
    wait_for("sensitive variable resent", WAIT, || {
        writes_since(&sb, since)
            .iter()
            .any(|(m, p, s)| m == "PATCH" && p.contains("/vars/") && *s == 200)
            .then_some(())
    });

    // Remote edit → restored, with driftedFields.
    let (s, _) = sb.ws_api(
        "PATCH",
        &format!("/workspaces/{id}"),
        Some(json!({"data": {"type": "workspaces", "attributes": {"auto-apply": false}}})),
    );
    assert_eq!(s, 200);
    sb.kubectl_ok(&["annotate", "workspace", "app", "poke=1", "--overwrite"]);
    let obj = wait_for("drift restored", WAIT, || {
        let o = sb.get_json("workspace", "app")?;
        let ws = sb.remote_workspace("app")?;
        (ws["attributes"]["auto-apply"] == true
            && o["status"]["driftedFields"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "autoApply")))
        .then_some(o)
    });
    assert!(condition_is(&obj, "Ready", "True"));

    // Remote delete → recreated (a new id).
    let (s, _) = sb.ws_api("DELETE", &format!("/workspaces/{id}"), None);
    assert_eq!(s, 204);
    sb.kubectl_ok(&["annotate", "workspace", "app", "poke=2", "--overwrite"]);
    let new_id = wait_for("recreated", WAIT, || {
        let ws = sb.remote_workspace("app")?;
        let nid = ws["id"].as_str()?.to_string();
        (nid != id).then_some(nid)
    });
    // Status fields are read again on the next pass after the re-creation.
    std::thread::sleep(Duration::from_secs(1));
    sb.kubectl_ok(&["annotate", "workspace", "app", "poke=3", "--overwrite"]);
    wait_for("status follows the new id", WAIT, || {
        let o = sb.get_json("workspace", "app")?;
        (o["status"]["workspaceId"] == json!(new_id)).then_some(())
    });

    // No secret (variable values, the token) in the log, Events or status.
    let events = sb.kubectl_ok(&["get", "events", "-o", "json"]);
    let status = sb.kubectl_ok(&["get", "workspace", "app", "-o", "json"]);
    let log = op.log();
    for secret in ["s3cret-one", "s3cret-two", sb.root_token.as_str()] {
        assert!(!events.contains(secret), "secret in events");
        assert!(!status.contains(secret), "secret in the resource");
        assert!(!log.contains(secret), "secret in the operator log");
    }

    // Delete → gone.
    sb.kubectl_ok(&["delete", "workspace", "app", "--wait=false"]);
    wait_for("deleted remotely and locally", WAIT, || {
        (sb.remote_workspace("app").is_none() && sb.get_json("workspace", "app").is_none())
            .then_some(())
    });
}

#[test]
fn existing_workspace_is_adopted_renamed_by_id_and_retained() {
    let (sb, _op) = ready_env("5m");
    let id = sb.create_remote_workspace("legacy", json!({"description": "before"}));
    sb.apply_ok("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: legacy, namespace: default}\nspec: {description: adopted, deletionPolicy: Retain}\n");
    let obj = wait_ready(&sb, "legacy");
    assert_eq!(obj["status"]["workspaceId"], json!(id));
    sb.wait_events(&["Adopted"]);
    assert_eq!(
        sb.remote_workspace("legacy").unwrap()["attributes"]["description"],
        "adopted"
    );
    // Rename: PATCH by id keeps the id.
    sb.apply_ok("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: legacy, namespace: default}\nspec: {name: renamed, description: adopted, deletionPolicy: Retain}\n");
    wait_for("renamed", WAIT, || {
        let ws = sb.remote_workspace("renamed")?;
        (ws["id"] == json!(id)).then_some(())
    });
    assert!(sb.remote_workspace("legacy").is_none());
    // Retain: the workspace stays.
    sb.kubectl_ok(&["delete", "workspace", "legacy", "--timeout=60s"]);
    assert!(sb.remote_workspace("renamed").is_some());
}

#[test]
fn invalid_manifests_are_refused_with_the_rule_message() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let cases = [
        ("spec: {tags: [Prod]}", "tags must be lower case"),
        (
            "spec: {executionMode: agent}",
            "agentPoolId is required when executionMode is agent",
        ),
        (
            "spec: {executionMode: remote, agentPoolId: apool-1}",
            "agentPoolId may only be set when executionMode is agent",
        ),
        (
            "spec: {executionMode: remote, operations: true}",
            "operations is deprecated",
        ),
        (
            "spec: {remoteStateConsumers: [{name: bad}]}",
            "remoteStateConsumers may not include the workspace itself",
        ),
        (
            "spec: {tagBindings: {'hc:owner': x}}",
            "without an hc: or hcp: prefix",
        ),
        (
            "spec: {globalRemoteState: true, remoteStateConsumers: [{name: other}]}",
            "remoteStateConsumers cannot be managed when globalRemoteState is true",
        ),
    ];
    for (spec, message) in cases {
        let yaml = format!(
            "apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {{name: bad, namespace: default}}\n{spec}\n"
        );
        let out = sb.apply_yaml(&yaml);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "accepted: {spec}");
        assert!(err.contains(message), "{spec}: {err}");
    }
    // metadata.name stands in for spec.name only when it is a workspace name: no `.`, at most
    // 90 characters.
    let long = "a".repeat(91);
    for name in ["has.dot", long.as_str()] {
        let yaml = format!(
            "apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {{name: {name}, namespace: default}}\nspec: {{}}\n"
        );
        let out = sb.apply_yaml(&yaml);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "accepted: {name}");
        assert!(
            err.contains("metadata.name is not a valid workspace name"),
            "{name}: {err}"
        );
        let yaml = format!(
            "apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {{name: {name}, namespace: default}}\nspec: {{name: fine, deletionPolicy: Retain}}\n"
        );
        sb.apply_ok(&yaml);
    }
}

#[test]
fn a_rejected_request_is_a_condition_with_the_service_message_and_no_hot_loop() {
    let (sb, _op) = ready_env("5m");
    sb.apply_ok("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: badver, namespace: default}\nspec: {engineVersion: 9.9.9}\n");
    let obj = wait_for("rejected", WAIT, || {
        sb.get_json("workspace", "badver").filter(|o| {
            condition_is(o, "Ready", "False")
                && condition(o, "Ready").unwrap()["reason"] == "Rejected"
        })
    });
    let msg = condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("not an available version"), "{msg}");
    let since = sb.requests("workspaces", 0).1;
    std::thread::sleep(Duration::from_secs(8));
    let creates: Vec<_> = writes_since(&sb, since)
        .into_iter()
        .filter(|(m, _, _)| m == "POST")
        .collect();
    assert!(creates.len() <= 1, "hot loop: {creates:?}");
}

#[test]
fn a_lost_create_response_is_found_again_without_a_duplicate() {
    let (sb, _op) = ready_env("5m");
    sb.ws_fault(json!({"method": "POST", "path": format!("/api/v2/organizations/{ORG}/workspaces"), "after": true, "count": 1}));
    sb.apply_ok("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: lost, namespace: default}\nspec: {description: once}\n");
    let obj = wait_ready(&sb, "lost");
    let all = sb.ws_list(&format!(
        "/organizations/{ORG}/workspaces?search%5Bname%5D=lost"
    ));
    assert_eq!(all.len(), 1, "duplicates: {all:?}");
    assert_eq!(obj["status"]["workspaceId"], all[0]["id"]);
    let posts = sb
        .requests("workspaces", 0)
        .0
        .into_iter()
        .filter(|(m, p, s)| {
            m == "POST" && p == &format!("/api/v2/organizations/{ORG}/workspaces") && *s == 201
        })
        .count();
    assert_eq!(posts, 1);
}

/// A crash between the create and the status write (or a lost create response followed by the
/// deletion) leaves a resource with the finalizer, no id in status, and a workspace in the
/// service: deleting the resource must find that workspace by name and delete it, not orphan it
/// (found by `cargo bench --bench chaos`).
#[test]
fn a_workspace_created_before_a_crash_that_left_no_id_in_status_is_deleted_with_its_resource() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_workspaces();
    // What the operator leaves behind when killed right after the create: the finalizer on the
    // resource, the workspace in the service, nothing in status.
    sb.apply_ok("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: crashed, namespace: default, finalizers: [workspaces.quartet.dev/cleanup]}\nspec: {description: once}\n");
    let id = sb.create_remote_workspace("crashed", json!({"description": "once"}));
    sb.kubectl_ok(&["delete", "workspace", "crashed", "--wait=false"]);
    let _op = Operator::start(&sb, "5m");
    wait_for("the resource gone", WAIT, || {
        sb.get_json("workspace", "crashed").is_none().then_some(())
    });
    assert!(
        sb.remote_workspace("crashed").is_none(),
        "workspace {id} orphaned in the service"
    );
}

#[test]
fn safe_delete_is_blocked_with_the_service_message_until_force() {
    let (sb, _op) = ready_env("5m");
    sb.apply_ok("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: guarded, namespace: default}\nspec: {description: x}\n");
    let obj = wait_ready(&sb, "guarded");
    let id = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    let (s, _) = sb.ws_api(
        "POST",
        &format!("/workspaces/{id}/actions/lock"),
        Some(json!({"reason": "hold"})),
    );
    assert_eq!(s, 200);
    sb.kubectl_ok(&["delete", "workspace", "guarded", "--wait=false"]);
    let obj = wait_for("DeletionBlocked", WAIT, || {
        sb.get_json("workspace", "guarded")
            .filter(|o| condition_is(o, "DeletionBlocked", "True"))
    });
    let msg = condition(&obj, "DeletionBlocked").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("locked"), "{msg}");
    assert!(sb.remote_workspace("guarded").is_some());
    sb.kubectl_ok(&[
        "patch",
        "workspace",
        "guarded",
        "--type=merge",
        "-p",
        r#"{"spec":{"deletionMode":"Force"}}"#,
    ]);
    wait_for("force-deleted", WAIT, || {
        (sb.remote_workspace("guarded").is_none() && sb.get_json("workspace", "guarded").is_none())
            .then_some(())
    });
}

#[test]
fn twenty_five_remote_state_consumers_converge_with_zero_writes_on_the_next_resync() {
    let (sb, _op) = ready_env("6s");
    let mut consumers = String::new();
    for i in 0..25 {
        sb.create_remote_workspace(&format!("consumer-{i:02}"), json!({}));
        consumers.push_str(&format!("    - name: consumer-{i:02}\n"));
    }
    sb.apply_ok(&format!("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {{name: shared, namespace: default}}\nspec:\n  remoteStateConsumers:\n{consumers}"));
    let obj = wait_ready(&sb, "shared");
    let id = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    let remote = sb.ws_list(&format!(
        "/workspaces/{id}/relationships/remote-state-consumers"
    ));
    assert_eq!(remote.len(), 25);
    let since = sb.requests("workspaces", 0).1;
    // Wait for at least one resync (6 s ± 10 %) to read the consumers again.
    wait_for("a resync read", WAIT, || {
        sb.requests("workspaces", since)
            .0
            .iter()
            .any(|(m, p, _)| m == "GET" && p.ends_with("/remote-state-consumers"))
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    let writes = writes_since(&sb, since);
    assert!(writes.is_empty(), "writes on resync: {writes:?}");
}

#[test]
fn quartet_dev_makes_the_example_workspace_ready() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = std::process::Command::new(BIN)
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
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("dev.log")).unwrap())
        .spawn()
        .unwrap();
    let urls = read_ready(&mut child, "Quartet dev is ready");
    let example = repo_root().join("examples/workspace.yaml");
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
            "--timeout=60s",
            "workspace/example-app",
        ],
        None,
    );
    let ready = out.status.success();
    let (status, body) = http(
        "GET",
        &format!(
            "{}/api/v2/organizations/{ORG}/workspaces/example-app",
            urls["workspaces"]
        ),
        Some(("Authorization", "Bearer root")),
        None,
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "not Ready: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"]["attributes"]["description"],
        "Infrastructure of the example app"
    );
}

fn ws_with_config(sb: &Sandbox, name: &str) -> String {
    sb.apply_ok(&format!("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {{name: {name}, namespace: default}}\nspec: {{autoApply: false}}\n"));
    let obj = wait_ready(sb, name);
    let id = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    sb.upload_configuration(&id);
    id
}

fn run_yaml(name: &str, ws: &str, extra: &str) -> String {
    format!("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: WorkspaceRun\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  workspaceRef: {{name: {ws}}}\n  message: from quartet\n{extra}")
}

fn wait_run(sb: &Sandbox, name: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, WAIT, || {
        sb.get_json("workspacerun", name).filter(|o| f(o))
    })
}

#[test]
fn a_run_whose_workspace_crd_is_not_installed_says_so_in_a_sentence() {
    // Every CRD but the Workspace's, as when a real API server refused that one.
    let sb = Sandbox::start(&[]);
    let others: Vec<String> = quartet::runtime::controllers::registry()
        .iter()
        .map(|k| k.crd_name.clone())
        .filter(|crd| crd != "workspaces.workspaces.quartet.dev")
        .collect();
    sb.install_crds_named(&others);
    assert!(!sb
        .kubectl(&["get", "crd", "workspaces.workspaces.quartet.dev"])
        .status
        .success());
    sb.connect_workspaces();
    let op = Operator::start(&sb, "5m");
    sb.apply_ok(&run_yaml("orphan", "nowhere", ""));
    let obj = wait_run(&sb, "orphan", "the missing CRD in Ready", |o| {
        condition(o, "Ready").is_some_and(|c| c["reason"] == "KubeNotInstalled")
    });
    let ready = condition(&obj, "Ready").unwrap();
    assert_eq!(ready["status"], "False");
    let message = ready["message"].as_str().unwrap();
    assert_eq!(
        message,
        "the Workspace CRD is not installed in this cluster: install Quartet's chart or apply crds/workspaces.workspaces.quartet.dev.yaml"
    );
    let synced = condition(&obj, "Synced").unwrap();
    assert_eq!(synced["reason"], "KubeNotInstalled");
    assert_eq!(synced["message"], message);
    // The run's own error lines in the operator's log carry the sentence, not a debug dump.
    // The failure is logged after the pass has written the condition, so wait for the line.
    let log = wait_for("the run's failure in the operator log", WAIT, || {
        let log = op.log();
        log.lines()
            .any(|l| l.contains("orphan") && l.contains("the Workspace CRD is not installed"))
            .then_some(log)
    });
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("orphan")).collect();
    for line in lines {
        assert!(!line.contains("Status {"), "{line}");
        assert!(!line.contains("Failed to parse error data"), "{line}");
    }
}

#[test]
fn a_run_waiting_for_confirmation_is_applied_by_setting_confirm() {
    let (sb, _op) = ready_env("5m");
    ws_with_config(&sb, "runs-a");
    sb.apply_ok(&run_yaml("deploy", "runs-a", ""));
    let obj = wait_run(&sb, "deploy", "waiting for confirmation", |o| {
        o["status"]["actions"]["is-confirmable"] == true
    });
    assert!(condition_is(&obj, "Ready", "False"));
    assert!(condition_is(&obj, "Completed", "False"));
    let run_id = obj["status"]["runId"].as_str().unwrap().to_string();
    sb.kubectl_ok(&[
        "patch",
        "workspacerun",
        "deploy",
        "--type=merge",
        "-p",
        r#"{"spec":{"confirm":true}}"#,
    ]);
    let obj = wait_run(&sb, "deploy", "applied", |o| {
        condition_is(o, "Ready", "True") && condition_is(o, "Completed", "True")
    });
    assert_eq!(obj["status"]["runStatus"], "applied");
    let (s, run) = sb.ws_api("GET", &format!("/runs/{run_id}"), None);
    assert_eq!(s, 200);
    assert_eq!(run["data"]["attributes"]["status"], "applied");
    assert_eq!(run["data"]["attributes"]["message"], "from quartet");
    // The spec, labels and annotations were never edited by the operator.
    assert!(obj["metadata"]["annotations"]
        .get("quartet.dev/confirmed")
        .is_none());
}

#[test]
fn errored_and_force_canceled_runs_both_end_completed() {
    let (sb, _op) = ready_env("5m");
    let id = ws_with_config(&sb, "runs-b");
    sb.script_run(&id, json!({"plan": "errored"}));
    sb.apply_ok(&run_yaml("broken", "runs-b", ""));
    let obj = wait_run(&sb, "broken", "errored", |o| {
        condition_is(o, "Completed", "True")
    });
    assert_eq!(obj["status"]["runStatus"], "errored");
    assert!(condition_is(&obj, "Ready", "False"));
    assert_eq!(condition(&obj, "Ready").unwrap()["reason"], "errored");

    let id2 = ws_with_config(&sb, "runs-c");
    sb.script_run(&id2, json!({"cancel": "ignore"}));
    // Slow runs: the run is seen while planning (cancel is allowed only then).
    let (s, _) = http(
        "PUT",
        &format!("{}/_sandbox/workspaces/settings", sb.url("workspaces")),
        None,
        Some(json!({"step_ms": 6000})),
    );
    assert!(s < 300);
    sb.apply_ok(&run_yaml("stuck", "runs-c", "  forceCancel: true\n"));
    let obj = wait_run(&sb, "stuck", "force-canceled", |o| {
        condition_is(o, "Completed", "True")
    });
    let state = obj["status"]["runStatus"].as_str().unwrap().to_string();
    assert!(state == "force_canceled" || state == "canceled", "{state}");
    let sent = obj["status"]["actionsSent"].as_array().unwrap();
    assert!(sent.iter().any(|a| a == "cancel"), "{sent:?}");
}

#[test]
fn a_run_whose_create_response_is_lost_is_not_created_twice() {
    let (sb, _op) = ready_env("5m");
    let id = ws_with_config(&sb, "runs-d");
    sb.ws_fault(json!({"method": "POST", "path": "/api/v2/runs", "after": true, "count": 1}));
    sb.apply_ok(&run_yaml("plan", "runs-d", "  planOnly: true\n"));
    let obj = wait_run(&sb, "plan", "planned_and_finished", |o| {
        condition_is(o, "Ready", "True") && condition_is(o, "Completed", "True")
    });
    assert_eq!(obj["status"]["runStatus"], "planned_and_finished");
    let runs = sb.ws_list(&format!("/workspaces/{id}/runs"));
    assert_eq!(runs.len(), 1, "duplicate runs");
}

/// Issue 11's field names, written as a user would, reach the service under its names.
const EVERY_FIELD: &str = r#"apiVersion: workspaces.quartet.dev/v1alpha1
kind: Workspace
metadata: {name: audit-consumer, namespace: default}
spec: {description: reads audit-app's state}
---
apiVersion: workspaces.quartet.dev/v1alpha1
kind: Workspace
metadata: {name: audit-app, namespace: default}
spec:
  organization: quartet
  name: audit-app-ws
  description: every field of the issue
  executionMode: remote
  autoApply: false
  allowDestroyPlan: false
  fileTriggersEnabled: false
  globalRemoteState: false
  queueAllRuns: true
  speculativeEnabled: false
  triggerPatterns: ["modules/**/*"]
  workingDirectory: infra
  sourceName: quartet-audit
  sourceUrl: https://example.com/audit
  tags: [audit, platform]
  tagsPolicy: Merge
  tagBindings: {env: audit}
  remoteStateConsumers:
    - name: audit-consumer
  variables:
    - {key: region, value: eu-west-1, description: where, hcl: false}
    - {key: TF_LOG, category: env, value: INFO}
  variablesPolicy: Own
  deletionMode: Force
"#;

#[test]
fn every_field_of_the_issue_reaches_the_service_under_its_name() {
    let (sb, _op) = ready_env("5m");
    sb.apply_ok(EVERY_FIELD);
    wait_ready(&sb, "audit-consumer");
    let obj = wait_ready(&sb, "audit-app");
    let id = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    let (_, doc) = sb.ws_api("GET", &format!("/workspaces/{id}"), None);
    let a = &doc["data"]["attributes"];
    for (k, v) in [
        ("name", json!("audit-app-ws")),
        ("description", json!("every field of the issue")),
        ("execution-mode", json!("remote")),
        ("auto-apply", json!(false)),
        ("allow-destroy-plan", json!(false)),
        ("file-triggers-enabled", json!(false)),
        ("global-remote-state", json!(false)),
        ("queue-all-runs", json!(true)),
        ("speculative-enabled", json!(false)),
        ("trigger-patterns", json!(["modules/**/*"])),
        ("working-directory", json!("infra")),
        ("source-name", json!("quartet-audit")),
        ("source-url", json!("https://example.com/audit")),
    ] {
        assert_eq!(a[k], v, "{k}");
    }
    assert_eq!(tag_names(&sb, &id), vec!["audit", "platform"]);
    let consumer = wait_ready(&sb, "audit-consumer")["status"]["workspaceId"].clone();
    let consumers: Vec<Value> = sb
        .ws_list(&format!(
            "/workspaces/{id}/relationships/remote-state-consumers"
        ))
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(consumers, vec![consumer]);
    let vars = sb.ws_list(&format!("/workspaces/{id}/vars"));
    let var = |key: &str| {
        vars.iter()
            .find(|v| v["attributes"]["key"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("no {key}: {vars:?}"))
    };
    assert_eq!(var("region")["attributes"]["description"], "where");
    assert_eq!(var("TF_LOG")["attributes"]["category"], "env");

    // Issue 11's run attributes, likewise.
    let cv = sb.upload_configuration(&id);
    sb.apply_ok(&format!(
        "apiVersion: workspaces.quartet.dev/v1alpha1\nkind: WorkspaceRun\nmetadata: {{name: audit-run, namespace: default}}\nspec:\n  \
         workspaceRef: {{name: audit-app}}\n  message: every run field\n  refresh: false\n  targetAddrs: [module.network]\n  \
         replaceAddrs: [module.network.aws_vpc.main]\n  variables:\n  - {{key: region, value: '\"us-east-1\"'}}\n  \
         allowEmptyApply: true\n  autoApply: false\n  configurationVersionId: {cv}\n"
    ));
    let obj = wait_run(&sb, "audit-run", "run created", |o| {
        o["status"]["runId"].is_string()
    });
    let run = obj["status"]["runId"].as_str().unwrap();
    let (_, doc) = sb.ws_api("GET", &format!("/runs/{run}"), None);
    let a = &doc["data"]["attributes"];
    for (k, v) in [
        ("message", json!("every run field")),
        ("refresh", json!(false)),
        ("target-addrs", json!(["module.network"])),
        ("replace-addrs", json!(["module.network.aws_vpc.main"])),
        (
            "variables",
            json!([{"key": "region", "value": "\"us-east-1\""}]),
        ),
        ("allow-empty-apply", json!(true)),
        ("auto-apply", json!(false)),
    ] {
        assert_eq!(a[k], v, "{k}");
    }
    assert_eq!(
        doc["data"]["relationships"]["configuration-version"]["data"]["id"],
        json!(cv)
    );
}
