//! SecretsPolicy end to end: the built `quartet` binary against the dev API server and the
//! sandbox's secrets service, driven with the real `kubectl`.
//!
//! The scenarios of the definition of done run against both backends with the same code:
//! `<scenario>::sandbox` against the sandbox, `<scenario>::openbao` against a real OpenBao 2.7.2
//! (`bao server -dev`, one per test binary, see `support::openbao`), reached through a
//! Connection with `tokenHeader: X-Vault-Token`.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::openbao::{on_both_backends, Backend};
use support::*;

const WAIT: Duration = Duration::from_secs(30);

fn acl_policy(name: &str, body: &str, extra: &str) -> String {
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  type: acl\n{extra}  policy: |\n    {body}\n"
    )
}

on_both_backends!(
    created_policy_exists_in_the_service_with_exactly_the_spec_content,
    editing_the_spec_updates_the_policy,
    a_policy_changed_in_the_service_is_restored_at_the_next_resync,
    a_policy_deleted_in_the_service_is_recreated_at_the_next_resync,
    deleting_the_resource_removes_the_policy_and_releases_the_finalizer,
    retain_deletion_policy_keeps_the_policy_in_the_service,
    rgp_and_egp_on_a_server_without_them_are_reported_unsupported_without_a_write,
);

/// The kube side (dev API server with CRDs, from the sandbox), the operator, and the secrets
/// server the Connection `secrets` points at.
struct Env {
    sb: Sandbox,
    _op: Operator,
    bao: Option<&'static openbao::OpenBao>,
}

impl Env {
    /// A call to the secrets server with its root token.
    fn secrets(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        match self.bao {
            Some(b) => b.call(method, path, body),
            None => self.sb.secrets(method, path, body),
        }
    }

    /// Writes (create/update/delete) the secrets server has seen on `path_suffix`.
    fn writes_to(&self, path_suffix: &str) -> Vec<String> {
        match self.bao {
            Some(b) => b
                .requests()
                .into_iter()
                .filter(|(op, p)| p.ends_with(path_suffix) && op != "read" && op != "list")
                .map(|(op, p)| format!("{op} {p}"))
                .collect(),
            None => self
                .sb
                .requests("secrets", 0)
                .0
                .into_iter()
                .filter(|(m, p, _)| p.ends_with(path_suffix) && m != "GET" && m != "LIST")
                .map(|(m, p, s)| format!("{m} {p} {s}"))
                .collect(),
        }
    }
}

/// Like [`ready_env`], on `backend`; `sandbox_args` go to the sandbox (e.g. its edition).
fn env_on(backend: Backend, resync: &str, sandbox_args: &[&str]) -> Env {
    let sb = Sandbox::start(sandbox_args);
    sb.install_crds();
    let bao = match backend {
        Backend::Sandbox => {
            sb.connect_secrets(&sb.root_token.clone());
            None
        }
        Backend::OpenBao => {
            let bao = openbao::OpenBao::shared();
            sb.apply_ok(&bao.connection_yaml("secrets", "default"));
            Some(bao)
        }
    };
    let op = Operator::start(&sb, resync);
    Env { sb, _op: op, bao }
}

/// A sandbox with CRDs, a working `secrets` Connection and a running operator.
fn ready_env(resync: &str) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, resync);
    (sb, op)
}

fn remote_policy(sb: &Sandbox, kind: &str, name: &str) -> Option<Value> {
    let (status, body) = sb.secrets("GET", &format!("/v1/sys/policies/{kind}/{name}"), None);
    (status == 200).then(|| body["data"].clone())
}

fn remote(env: &Env, kind: &str, name: &str) -> Option<Value> {
    let (status, body) = env.secrets("GET", &format!("/v1/sys/policies/{kind}/{name}"), None);
    (status == 200).then(|| body["data"].clone())
}

fn wait_ready(sb: &Sandbox, name: &str) -> Value {
    wait_for(&format!("{name} Ready"), WAIT, || {
        sb.get_json("secretspolicy", name).filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    })
}

fn created_policy_exists_in_the_service_with_exactly_the_spec_content(backend: Backend) {
    let env = env_on(backend, "5m", &[]);
    let sb = &env.sb;
    sb.apply_ok(&acl_policy(
        "app-read",
        r#"path "secret/data/app/*" { capabilities = ["read"] }"#,
        "",
    ));
    let obj = wait_ready(sb, "app-read");
    let remote = remote(&env, "acl", "app-read").expect("policy exists remotely");
    assert_eq!(
        remote["policy"],
        "path \"secret/data/app/*\" { capabilities = [\"read\"] }\n"
    );
    assert_eq!(obj["status"]["remoteId"], "app-read");
    assert!(obj["metadata"]["finalizers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f == "secrets.quartet.dev/cleanup"));
    assert!(condition_is(&obj, "Synced", "True"));
    sb.wait_events(&["Created"]);
}

fn editing_the_spec_updates_the_policy(backend: Backend) {
    let env = env_on(backend, "5m", &[]);
    let sb = &env.sb;
    sb.apply_ok(&acl_policy(
        "edit-me",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(sb, "edit-me");
    sb.apply_ok(&acl_policy(
        "edit-me",
        r#"path "b/*" { capabilities = ["list"] }"#,
        "",
    ));
    wait_for("updated policy text", WAIT, || {
        remote(&env, "acl", "edit-me")
            .filter(|p| p["policy"].as_str().unwrap_or("").contains("\"b/*\""))
    });
    let obj = wait_ready(sb, "edit-me");
    assert_eq!(obj["metadata"]["generation"], 2);
}

#[test]
fn egp_policy_is_written_with_paths_and_enforcement_level() {
    let (sb, _op) = ready_env("5m");
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: hours, namespace: default}\n\
         spec: {type: egp, enforcementLevel: soft-mandatory, paths: [\"secret/*\", \"kv/x\"], policy: \"main = rule { true }\"}\n",
    );
    wait_ready(&sb, "hours");
    let remote = remote_policy(&sb, "egp", "hours").expect("egp exists");
    assert_eq!(remote["enforcement_level"], "soft-mandatory");
    let mut paths: Vec<String> = remote["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    paths.sort();
    assert_eq!(paths, vec!["kv/x", "secret/*"]);
}

fn a_policy_changed_in_the_service_is_restored_at_the_next_resync(backend: Backend) {
    let env = env_on(backend, "2s", &[]);
    let sb = &env.sb;
    sb.apply_ok(&acl_policy(
        "drifty",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(sb, "drifty");
    let (status, _) = env.secrets(
        "PUT",
        "/v1/sys/policies/acl/drifty",
        Some(json!({"policy": "path \"evil/*\" { capabilities = [\"sudo\"] }"})),
    );
    assert!(status == 204 || status == 200);
    wait_for("drift corrected", WAIT, || {
        remote(&env, "acl", "drifty")
            .filter(|p| p["policy"].as_str().unwrap_or("").contains("\"a/*\""))
    });
    let obj = wait_for("driftedFields in status", WAIT, || {
        sb.get_json("secretspolicy", "drifty")
            .filter(|o| o["status"]["driftedFields"] == json!(["policy"]))
    });
    assert_eq!(obj["status"]["driftedFields"], json!(["policy"]));
    sb.wait_events(&["DriftCorrected"]);
}

/// A drift repaired while the operator's cache lags behind its last status write is reported
/// as drift. The dev API server's SecretsPolicy watch lags 3 s behind the writes, as a busy
/// server's watch cache does. An edit's pass writes the policy and `Ready` at the new
/// generation; before that status write reaches the cache, the policy is changed in the service
/// and the Connection is edited, which wakes the policy. The cached copy still says `Ready` at
/// the old generation: a pass deciding from it would take the service's difference for the edit
/// (`Updated`, no `driftedFields`), where the current copy shows drift (`DriftCorrected`).
#[test]
fn a_drift_repaired_while_the_cache_lags_behind_the_last_status_write_is_reported_as_drift() {
    let (sb, _op) = ready_env("300s");
    sb.apply_ok(&acl_policy(
        "lagged",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "lagged");
    sb.lag_watches("secretspolicies", Duration::from_secs(3));
    sb.apply_ok(&acl_policy(
        "lagged",
        r#"path "b/*" { capabilities = ["read"] }"#,
        "",
    ));
    let edit_in_force = || {
        remote_policy(&sb, "acl", "lagged")
            .filter(|p| p["policy"].as_str().unwrap_or("").contains("\"b/*\""))
    };
    wait_for("the edit written", WAIT, edit_in_force);
    let (status, _) = sb.secrets(
        "PUT",
        "/v1/sys/policies/acl/lagged",
        Some(json!({"policy": "path \"evil/*\" { capabilities = [\"sudo\"] }"})),
    );
    assert!(status == 204 || status == 200);
    sb.patch_secrets_connection(json!({"timeoutSeconds": 6}));
    wait_for("drift corrected", WAIT, edit_in_force);
    let obj = wait_for("driftedFields in status", WAIT, || {
        sb.get_json("secretspolicy", "lagged")
            .filter(|o| o["status"]["driftedFields"] == json!(["policy"]))
    });
    assert!(condition_is(&obj, "Ready", "True"), "{obj}");
    sb.wait_events(&["DriftCorrected"]);
}

fn a_policy_deleted_in_the_service_is_recreated_at_the_next_resync(backend: Backend) {
    let env = env_on(backend, "2s", &[]);
    let sb = &env.sb;
    sb.apply_ok(&acl_policy(
        "gone",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(sb, "gone");
    let (status, _) = env.secrets("DELETE", "/v1/sys/policies/acl/gone", None);
    assert!(status == 204 || status == 200);
    wait_for("policy recreated", WAIT, || remote(&env, "acl", "gone"));
}

fn deleting_the_resource_removes_the_policy_and_releases_the_finalizer(backend: Backend) {
    let env = env_on(backend, "5m", &[]);
    let sb = &env.sb;
    sb.apply_ok(&acl_policy(
        "short-lived",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(sb, "short-lived");
    sb.kubectl_ok(&[
        "delete",
        "secretspolicy",
        "short-lived",
        "--wait=true",
        "--timeout=30s",
    ]);
    assert!(sb.get_json("secretspolicy", "short-lived").is_none());
    assert!(
        remote(&env, "acl", "short-lived").is_none(),
        "policy still in the service"
    );
}

fn retain_deletion_policy_keeps_the_policy_in_the_service(backend: Backend) {
    let env = env_on(backend, "5m", &[]);
    let sb = &env.sb;
    sb.apply_ok(&acl_policy(
        "kept",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "  deletionPolicy: Retain\n",
    ));
    wait_ready(sb, "kept");
    sb.kubectl_ok(&[
        "delete",
        "secretspolicy",
        "kept",
        "--wait=true",
        "--timeout=30s",
    ]);
    assert!(sb.get_json("secretspolicy", "kept").is_none());
    assert!(
        remote(&env, "acl", "kept").is_some(),
        "retained policy was deleted"
    );
}

#[test]
fn invalid_specs_are_rejected_at_admission_with_the_field_named() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let bad_type = sb.apply_yaml("apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: bad, namespace: default}\nspec: {type: xyz, policy: p}\n");
    assert!(!bad_type.status.success());
    let err = String::from_utf8_lossy(&bad_type.stderr);
    assert!(
        err.contains("spec.type") && err.contains("Unsupported value"),
        "{err}"
    );

    let acl_with_level = sb.apply_yaml("apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: bad, namespace: default}\nspec: {type: acl, policy: p, enforcementLevel: advisory}\n");
    assert!(!acl_with_level.status.success());
    assert!(String::from_utf8_lossy(&acl_with_level.stderr)
        .contains("enforcementLevel is required for rgp and egp policies and not allowed for acl"));

    let egp_without_paths = sb.apply_yaml("apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: bad, namespace: default}\nspec: {type: egp, policy: p, enforcementLevel: advisory}\n");
    assert!(!egp_without_paths.status.success());
    assert!(
        String::from_utf8_lossy(&egp_without_paths.stderr).contains("paths is required for egp")
    );

    let missing_policy = sb.apply_yaml("apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: bad, namespace: default}\nspec: {type: acl}\n");
    assert!(!missing_policy.status.success());
    assert!(String::from_utf8_lossy(&missing_policy.stderr).contains("spec.policy"));
    assert!(
        sb.get_json("secretspolicy", "bad").is_none(),
        "an invalid object was stored"
    );
}

#[test]
fn type_cannot_be_changed_after_creation() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.apply_ok(&acl_policy("fixed", "x", ""));
    let out = sb.apply_yaml("apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: fixed, namespace: default}\nspec: {type: rgp, policy: x, enforcementLevel: advisory}\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("type is immutable"));
}

#[test]
fn a_spec_the_service_rejects_reports_its_message_without_a_retry_loop() {
    let (sb, _op) = ready_env("5m");
    sb.apply_ok(&acl_policy("broken", "path \"a/*\" { capabilities = [", ""));
    let obj = wait_for("Synced=False", WAIT, || {
        sb.get_json("secretspolicy", "broken")
            .filter(|o| condition_is(o, "Synced", "False"))
    });
    let synced = condition(&obj, "Synced").unwrap();
    assert_eq!(synced["reason"], "Rejected");
    let message = synced["message"].as_str().unwrap();
    assert!(
        message.contains("failed to parse policy"),
        "condition does not carry the service's message: {message}"
    );
    assert!(condition_is(&obj, "Ready", "False"));
    // Count the writes over the next few seconds: a rejected spec waits for a change or the resync.
    let (_, since) = sb.requests("secrets", 0);
    std::thread::sleep(Duration::from_secs(4));
    let (reqs, _) = sb.requests("secrets", since);
    let puts = reqs
        .iter()
        .filter(|(m, p, _)| m == "PUT" && p.ends_with("/broken"))
        .count();
    assert!(puts <= 1, "rejected policy was retried {puts} times in 4s");
    // Fixing the spec recovers.
    sb.apply_ok(&acl_policy(
        "broken",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "broken");
}

#[test]
fn a_wrong_token_gives_a_clear_condition_on_the_connection_and_the_policy() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets("not-the-token");
    let _op = Operator::start(&sb, "5m");
    let conn = wait_for("Connection Ready=False", WAIT, || {
        sb.get_json("connection", "secrets")
            .filter(|o| condition_is(o, "Ready", "False"))
    });
    assert_eq!(condition(&conn, "Ready").unwrap()["reason"], "Unauthorized");
    sb.apply_ok(&acl_policy(
        "denied",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    let obj = wait_for("policy Synced=False", WAIT, || {
        sb.get_json("secretspolicy", "denied")
            .filter(|o| condition_is(o, "Synced", "False"))
    });
    let c = condition(&obj, "Synced").unwrap();
    assert_eq!(c["reason"], "Unauthorized");
    assert!(c["message"].as_str().unwrap().contains("403"), "{c}");
    // Fixing the token Secret recovers without touching the policy.
    sb.connect_secrets(&sb.root_token.clone());
    wait_for("recovered after token fix", Duration::from_secs(60), || {
        sb.get_json("secretspolicy", "denied")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
}

#[test]
fn a_missing_connection_is_reported_and_deletion_is_not_blocked_for_never_created_objects() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let _op = Operator::start(&sb, "5m");
    sb.apply_ok(&acl_policy("orphan", "x", ""));
    let obj = wait_for("ConnectionUnavailable", WAIT, || {
        sb.get_json("secretspolicy", "orphan")
            .filter(|o| condition_is(o, "Synced", "False"))
    });
    let c = condition(&obj, "Synced").unwrap();
    assert_eq!(c["reason"], "ConnectionUnavailable");
    assert!(c["message"]
        .as_str()
        .unwrap()
        .contains("Connection default/secrets not found"));
    sb.kubectl_ok(&[
        "delete",
        "secretspolicy",
        "orphan",
        "--wait=true",
        "--timeout=30s",
    ]);
}

#[test]
fn restarting_the_operator_midway_loses_nothing() {
    let (sb, op) = ready_env("3s");
    for i in 0..5 {
        sb.apply_ok(&acl_policy(
            &format!("r{i}"),
            &format!("path \"p{i}/*\" {{ capabilities = [\"read\"] }}"),
            "",
        ));
    }
    wait_ready(&sb, "r0");
    op.kill();
    // While the operator is down: a spec edit, a deletion, a new resource and a remote edit.
    sb.apply_ok(&acl_policy(
        "r1",
        r#"path "changed/*" { capabilities = ["list"] }"#,
        "",
    ));
    sb.kubectl_ok(&["delete", "secretspolicy", "r2", "--wait=false"]);
    sb.apply_ok(&acl_policy(
        "r5",
        r#"path "new/*" { capabilities = ["read"] }"#,
        "",
    ));
    sb.secrets(
        "PUT",
        "/v1/sys/policies/acl/r3",
        Some(json!({"policy": "tampered"})),
    );
    let _op = Operator::start(&sb, "3s");
    for name in ["r0", "r1", "r3", "r4", "r5"] {
        wait_ready(&sb, name);
    }
    wait_for("r1 updated", WAIT, || {
        remote_policy(&sb, "acl", "r1")
            .filter(|p| p["policy"].as_str().unwrap_or("").contains("changed/*"))
    });
    wait_for("r3 restored", WAIT, || {
        remote_policy(&sb, "acl", "r3")
            .filter(|p| p["policy"].as_str().unwrap_or("").contains("p3/*"))
    });
    wait_for("r2 deleted remotely and released", WAIT, || {
        (remote_policy(&sb, "acl", "r2").is_none() && sb.get_json("secretspolicy", "r2").is_none())
            .then_some(())
    });
}

#[test]
fn an_existing_policy_is_adopted_rather_than_failing() {
    let (sb, _op) = ready_env("5m");
    let (status, _) = sb.secrets(
        "PUT",
        "/v1/sys/policies/acl/preexisting",
        Some(json!({"policy": "path \"old/*\" { capabilities = [\"read\"] }"})),
    );
    assert_eq!(status, 204, "could not seed the pre-existing policy");
    sb.apply_ok(&acl_policy(
        "preexisting",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "preexisting");
    assert!(remote_policy(&sb, "acl", "preexisting").unwrap()["policy"]
        .as_str()
        .unwrap()
        .contains("a/*"));
    sb.wait_events(&["Adopted"]);
}

/// With `--watch-namespaces`, each namespace has a controller of its own: the periodic resync
/// (one sweep for the whole process, see `src/reconcile/resync.rs`) must reach every one of
/// them, so drift in the service is restored in each watched namespace.
#[test]
fn resyncs_reach_the_controller_of_each_watched_namespace() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    sb.kubectl_ok(&["create", "namespace", "team-b"]);
    sb.connect_secrets_at("team-b", sb.url("secrets"), &sb.root_token);
    let _op = Operator::start_with(&sb, "2s", &["--watch-namespaces=default,team-b"]);
    let good = r#"path "a/*" { capabilities = ["read"] }"#;
    for (name, ns) in [("drift-a", "default"), ("drift-b", "team-b")] {
        sb.apply_ok(
            &acl_policy(name, good, "").replace("namespace: default", &format!("namespace: {ns}")),
        );
    }
    for (name, ns) in [("drift-a", "default"), ("drift-b", "team-b")] {
        wait_for(&format!("{ns}/{name} Ready"), WAIT, || {
            let out = sb.kubectl_ok(&["get", "secretspolicy", name, "-n", ns, "-o", "json"]);
            let o: Value = serde_json::from_str(&out).ok()?;
            condition_is(&o, "Ready", "True").then_some(())
        });
    }
    // Changed in the service only: no watch event, so only a resync can restore them.
    for name in ["drift-a", "drift-b"] {
        let (status, _) = sb.secrets(
            "PUT",
            &format!("/v1/sys/policies/acl/{name}"),
            Some(json!({"policy": "path \"evil/*\" { capabilities = [\"sudo\"] }"})),
        );
        assert!(status == 204 || status == 200, "{status}");
    }
    for name in ["drift-a", "drift-b"] {
        wait_for(&format!("{name} restored by a resync"), WAIT, || {
            remote_policy(&sb, "acl", name)
                .filter(|p| p["policy"].as_str().unwrap_or("").contains("\"a/*\""))
        });
    }
}

#[test]
fn in_sync_resyncs_make_no_writes() {
    let (sb, _op) = ready_env("1s");
    sb.apply_ok(&acl_policy(
        "quiet",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "quiet");
    std::thread::sleep(Duration::from_secs(1));
    let (_, since) = sb.requests("secrets", 0);
    std::thread::sleep(Duration::from_secs(4));
    let (reqs, _) = sb.requests("secrets", since);
    let mine: Vec<_> = reqs
        .iter()
        .filter(|(_, p, _)| p.ends_with("/quiet"))
        .collect();
    assert!(
        mine.iter().any(|(m, _, _)| m == "GET"),
        "no resync read in 4s with a 1s interval: {mine:?}"
    );
    assert!(
        mine.iter().all(|(m, _, _)| m == "GET"),
        "writes while in sync: {mine:?}"
    );
}

/// The sandbox as the community edition, or OpenBao (which has neither): each resource gets
/// `Ready=False` reason `Unsupported`, and the server sees no write for it.
fn rgp_and_egp_on_a_server_without_them_are_reported_unsupported_without_a_write(backend: Backend) {
    let env = env_on(backend, "5m", &["--edition", "community"]);
    let sb = &env.sb;
    sb.apply_ok("apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: gated, namespace: default}\nspec: {type: rgp, policy: \"main = rule { true }\", enforcementLevel: advisory}\n");
    sb.apply_ok("apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: gated-egp, namespace: default}\nspec: {type: egp, policy: \"main = rule { true }\", enforcementLevel: advisory, paths: [\"secret/*\"]}\n");
    for name in ["gated", "gated-egp"] {
        let obj = wait_for("Unsupported", WAIT, || {
            sb.get_json("secretspolicy", name)
                .filter(|o| condition_is(o, "Ready", "False"))
        });
        assert_eq!(
            condition(&obj, "Ready").unwrap()["reason"],
            "Unsupported",
            "{name}"
        );
    }
    // No retry storm either: a few seconds later, still no write.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(env.writes_to("/rgp/gated"), Vec::<String>::new());
    assert_eq!(env.writes_to("/egp/gated-egp"), Vec::<String>::new());
}

#[test]
fn no_token_or_secret_value_reaches_logs_events_status_or_errors() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    // One Connection with the right token, one with a wrong but equally secret token.
    sb.connect_secrets(&sb.root_token.clone());
    let wrong = unique_token();
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: wrong-token, namespace: default}}\nstringData: {{token: {wrong}}}\n---\n\
         apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: wrong, namespace: default}}\n\
         spec: {{service: secrets, address: \"{}\", tokenSecretRef: {{name: wrong-token, key: token}}}}\n",
        sb.url("secrets")
    ));
    let op = Operator::start(&sb, "2s");
    sb.apply_ok(&acl_policy(
        "fine",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    sb.apply_ok(&acl_policy("rejected", "path {", ""));
    sb.apply_ok(&acl_policy(
        "denied",
        "x",
        "  connectionRef: {name: wrong}\n",
    ));
    wait_ready(&sb, "fine");
    wait_for("denied fails", WAIT, || {
        sb.get_json("secretspolicy", "denied")
            .filter(|o| condition_is(o, "Synced", "False"))
    });
    wait_for("rejected fails", WAIT, || {
        sb.get_json("secretspolicy", "rejected")
            .filter(|o| condition_is(o, "Synced", "False"))
    });
    sb.kubectl_ok(&[
        "delete",
        "secretspolicy",
        "fine",
        "--wait=true",
        "--timeout=30s",
    ]);
    std::thread::sleep(Duration::from_secs(3));
    let log = op.stop();
    assert!(
        log.contains("reconcile"),
        "operator log is unexpectedly empty"
    );
    let everything = [
        log,
        sb.kubectl_ok(&["get", "events", "-A", "-o", "json"]),
        sb.kubectl_ok(&["get", "secretspolicies", "-A", "-o", "json"]),
        sb.kubectl_ok(&["get", "connections", "-A", "-o", "json"]),
    ];
    // The operator's own secret (the key of the keyed hashes) is a value read from a Secret too.
    let key_secret: Value =
        serde_json::from_str(&sb.kubectl_ok(&["get", "secret", "quartet-hash-key", "-o", "json"]))
            .unwrap();
    use base64::Engine;
    let hash_key = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(key_secret["data"]["key"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert!(hash_key.len() >= 32);
    for text in &everything {
        assert!(!text.contains(&sb.root_token), "the root token leaked");
        assert!(!text.contains(&wrong), "the wrong token leaked");
        assert!(!text.contains(&hash_key), "the hash key leaked");
    }
}

#[test]
fn service_unavailable_and_throttling_are_retried_honouring_retry_after() {
    let (sb, _op) = ready_env("5m");
    // The next two writes of this policy fail: 503 then 429, each asking for a 1 s pause.
    let faults = format!("{}/_sandbox/faults", sb.url("secrets"));
    http(
        "POST",
        &faults,
        None,
        Some(
            json!({"method": "PUT", "path": "/v1/sys/policies/acl/flaky", "status": 503, "retry_after": 1, "count": 1}),
        ),
    );
    http(
        "POST",
        &faults,
        None,
        Some(
            json!({"method": "PUT", "path": "/v1/sys/policies/acl/flaky", "status": 429, "retry_after": 1, "count": 1}),
        ),
    );
    let (_, since) = sb.requests("secrets", 0);
    sb.apply_ok(&acl_policy(
        "flaky",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "flaky");
    assert!(remote_policy(&sb, "acl", "flaky").is_some());
    let (reqs, _) = sb.requests("secrets", since);
    let puts: Vec<u16> = reqs
        .iter()
        .filter(|(m, p, _)| m == "PUT" && p.ends_with("/flaky"))
        .map(|(_, _, s)| *s)
        .collect();
    assert_eq!(
        &puts[..2],
        &[503, 429],
        "faults were not hit first: {puts:?}"
    );
    assert!(
        puts[2..].iter().any(|s| *s == 204 || *s == 200),
        "no successful write after the faults: {puts:?}"
    );
}

/// The service writes the policy, then the answer is lost (issue 15's lost-response case): the
/// retry writes the same policy by name, so there is one policy with the spec's content, and
/// deletion removes it.
#[test]
fn a_lost_write_response_leaves_exactly_one_policy_with_the_spec_content() {
    let (sb, _op) = ready_env("5m");
    sb.fault(
        "secrets",
        json!({"method": "PUT", "path": "/v1/sys/policies/acl/lost", "after": true, "count": 1}),
    );
    let (_, since) = sb.requests("secrets", 0);
    let body = r#"path "lost/*" { capabilities = ["read"] }"#;
    sb.apply_ok(&acl_policy("lost", body, ""));
    let obj = wait_ready(&sb, "lost");
    assert_eq!(obj["status"]["remoteId"], "lost");
    assert_eq!(
        remote_policy(&sb, "acl", "lost").unwrap()["policy"]
            .as_str()
            .unwrap()
            .trim(),
        body
    );
    let (_, list) = sb.secrets("LIST", "/v1/sys/policies/acl", None);
    let keys = list["data"]["keys"].as_array().unwrap();
    assert_eq!(keys.iter().filter(|k| *k == "lost").count(), 1);
    // A policy is written by name, so sending the write again is safe: it lands on the same one.
    let (reqs, _) = sb.requests("secrets", since);
    assert!(reqs
        .iter()
        .filter(|(m, _, _)| m == "PUT" || m == "POST")
        .all(|(_, p, _)| p == "/v1/sys/policies/acl/lost"));
    sb.kubectl_ok(&["delete", "secretspolicy", "lost", "--timeout=60s"]);
    assert!(remote_policy(&sb, "acl", "lost").is_none());
}

#[test]
fn a_connection_in_another_namespace_must_allow_the_resource_namespace() {
    let (sb, _op) = ready_env("5m");
    sb.apply_ok("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n");
    let policy = "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: shared, namespace: team-a}\n\
                  spec: {type: acl, policy: \"path \\\"t/*\\\" { capabilities = [\\\"read\\\"] }\", connectionRef: {name: secrets, namespace: default}}\n";
    sb.apply_ok(policy);
    let obj = wait_for("not allowed", WAIT, || {
        let out = sb.kubectl(&[
            "get",
            "secretspolicy",
            "shared",
            "-n",
            "team-a",
            "-o",
            "json",
        ]);
        let o: Value = serde_json::from_slice(&out.stdout).ok()?;
        condition_is(&o, "Synced", "False").then_some(o)
    });
    let c = condition(&obj, "Synced").unwrap();
    assert_eq!(c["reason"], "ConnectionUnavailable");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("does not allow use from namespace team-a"),
        "{c}"
    );
    assert!(remote_policy(&sb, "acl", "shared").is_none());
    // Allowing the namespace on the Connection wakes the policy.
    sb.patch_secrets_connection(json!({"allowedNamespaces": ["team-a"]}));
    wait_for("allowed and written", WAIT, || {
        remote_policy(&sb, "acl", "shared")
    });
}

/// The operator killed after writing a policy but before its status write leaves the finalizer,
/// the policy in the service and no id in status: deleting the resource then must remove the
/// policy (found by name), not orphan it (found by `cargo bench --bench chaos`).
#[test]
fn a_policy_written_before_a_crash_that_left_no_id_in_status_is_deleted_with_its_resource() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: crashed, namespace: default, finalizers: [secrets.quartet.dev/cleanup]}\nspec: {type: acl, policy: 'path \"a/*\" { capabilities = [\"read\"] }'}\n",
    );
    let (status, _) = sb.secrets(
        "PUT",
        "/v1/sys/policies/acl/crashed",
        Some(json!({"policy": "path \"a/*\" { capabilities = [\"read\"] }"})),
    );
    assert!(status < 300, "policy write: {status}");
    sb.kubectl_ok(&["delete", "secretspolicy", "crashed", "--wait=false"]);
    let _op = Operator::start(&sb, "5m");
    wait_for("the resource gone", WAIT, || {
        sb.get_json("secretspolicy", "crashed")
            .is_none()
            .then_some(())
    });
    assert!(
        remote_policy(&sb, "acl", "crashed").is_none(),
        "policy orphaned in the service"
    );
}
