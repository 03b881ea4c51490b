//! The GitOps status contract end to end, through the real `quartet` binary, `kubectl` and the
//! sandbox: `Reconciling`/`Stalled`/`Ready` through a create, a transient 503, a rejection and a
//! fix (a SecretsPolicy for the `Reconciled` shape, a TotpEnrollment for the `Operated` one);
//! `kubectl wait --for=condition=Ready` never taking a `Ready` of an older generation; the
//! reconcile-now annotations; `suspend` (no call to the service, deletion waits, resume catches
//! up); `driftPolicy: Report`.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const WAIT: Duration = Duration::from_secs(40);
const POLICY: &str = "/v1/sys/policies/acl";

fn env(resync: &str) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, resync);
    (sb, op)
}

fn policy(name: &str, body: &str, extra: &str) -> String {
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  type: acl\n{extra}  policy: '{body}'\n"
    )
}

/// Wait until `kind/name` has conditions `want` (type → status, and reason when given).
fn wait_conditions(
    sb: &Sandbox,
    kind: &str,
    name: &str,
    want: &[(&str, &str, Option<&str>)],
) -> Value {
    wait_for(&format!("{kind} {name} with {want:?}"), WAIT, || {
        sb.get_json(kind, name).filter(|o| {
            want.iter().all(|(t, s, r)| {
                condition(o, t)
                    .is_some_and(|c| c["status"] == *s && r.is_none_or(|r| c["reason"] == r))
            })
        })
    })
}

/// Every condition carries the object's current generation.
fn assert_generation_observed(obj: &Value) {
    let generation = &obj["metadata"]["generation"];
    for c in obj["status"]["conditions"].as_array().expect("conditions") {
        assert_eq!(&c["observedGeneration"], generation, "{c}");
    }
    assert_eq!(&obj["status"]["observedGeneration"], generation);
}

fn wait_ready(sb: &Sandbox, kind: &str, name: &str) -> Value {
    wait_for(&format!("{kind} {name} Ready"), WAIT, || {
        sb.get_json(kind, name).filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    })
}

/// With `QUARTET_CAPTURE_DIR` set, write `obj` there as `<Kind>-<label>.json`: the statuses the
/// Argo CD health checks are tested on (`argocd/`) are captured from these runs.
fn capture(obj: &Value, label: &str) {
    if let Some(dir) = std::env::var_os("QUARTET_CAPTURE_DIR") {
        let kind = obj["kind"].as_str().unwrap_or("");
        let file = std::path::Path::new(&dir).join(format!("{kind}-{label}.json"));
        std::fs::write(file, serde_json::to_string_pretty(obj).unwrap()).unwrap();
    }
}

/// Ask for a pass now (the reconcile annotation) rather than wait out a retry's backoff.
fn poke(sb: &Sandbox, resource: &str, value: &str) {
    sb.kubectl_ok(&[
        "annotate",
        "--overwrite",
        resource,
        &format!("reconcile.quartet.dev/requestedAt={value}"),
    ]);
}

/// Requests the secrets service logged since `since` whose path starts with `prefix`.
fn calls_to(sb: &Sandbox, since: u64, prefix: &str) -> Vec<(String, String, u16)> {
    sb.requests("secrets", since)
        .0
        .into_iter()
        .filter(|(_, p, _)| p.starts_with(prefix))
        .collect()
}

#[test]
fn a_policy_is_reconciling_through_a_503_stalled_on_a_rejection_and_ready_after_the_fix() {
    let (sb, _op) = env("10m");
    let path = format!("{POLICY}/kstatus");
    sb.fault("secrets", json!({"path": path, "status": 503, "count": 0}));
    sb.apply_ok(&policy(
        "kstatus",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    let obj = wait_conditions(
        &sb,
        "secretspolicy",
        "kstatus",
        &[
            ("Reconciling", "True", Some("ServiceUnavailable")),
            ("Stalled", "False", None),
            ("Ready", "False", Some("ServiceUnavailable")),
        ],
    );
    assert_generation_observed(&obj);
    capture(&obj, "progressing_serviceUnavailable");

    sb.clear_faults("secrets");
    sb.fault(
        "secrets",
        json!({"path": path, "status": 400, "count": 0, "body": {"errors": ["policy refused by the test"]}}),
    );
    poke(&sb, "secretspolicy/kstatus", "rejected");
    let obj = wait_conditions(
        &sb,
        "secretspolicy",
        "kstatus",
        &[
            ("Stalled", "True", Some("Rejected")),
            ("Reconciling", "False", None),
            ("Ready", "False", Some("Rejected")),
        ],
    );
    let stalled = condition(&obj, "Stalled").unwrap();
    assert!(
        stalled["message"]
            .as_str()
            .unwrap()
            .contains("policy refused by the test"),
        "{stalled}"
    );
    assert_generation_observed(&obj);
    capture(&obj, "degraded_rejected");

    // The fix: the service accepts again and the spec changes (a new generation).
    sb.clear_faults("secrets");
    sb.apply_ok(&policy(
        "kstatus",
        r#"path "b/*" { capabilities = ["read"] }"#,
        "",
    ));
    let obj = wait_conditions(
        &sb,
        "secretspolicy",
        "kstatus",
        &[
            ("Ready", "True", Some("InSync")),
            ("Synced", "True", None),
            ("Reconciling", "False", None),
            ("Stalled", "False", None),
        ],
    );
    assert_eq!(obj["metadata"]["generation"], 2);
    let obj = wait_ready(&sb, "secretspolicy", "kstatus");
    assert_generation_observed(&obj);
    capture(&obj, "healthy_afterFix");
}

#[test]
fn kubectl_wait_for_ready_does_not_take_the_ready_of_an_older_generation() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, "10m");
    sb.apply_ok(&policy(
        "waited",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    sb.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "--timeout=40s",
        "secretspolicy/waited",
    ]);
    // With the operator stopped, a spec change leaves Ready=True of generation 1 in place.
    op.stop();
    sb.apply_ok(&policy(
        "waited",
        r#"path "b/*" { capabilities = ["read"] }"#,
        "",
    ));
    let obj = sb.get_json("secretspolicy", "waited").unwrap();
    assert_eq!(obj["metadata"]["generation"], 2);
    assert_eq!(condition(&obj, "Ready").unwrap()["status"], "True");
    assert_eq!(condition(&obj, "Ready").unwrap()["observedGeneration"], 1);
    capture(&obj, "progressing_generationNotObserved");
    let out = sb.kubectl(&[
        "wait",
        "--for=condition=Ready",
        "--timeout=3s",
        "secretspolicy/waited",
    ]);
    assert!(
        !out.status.success(),
        "kubectl wait returned on the Ready of generation 1: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let _op = Operator::start(&sb, "10m");
    sb.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "--timeout=40s",
        "secretspolicy/waited",
    ]);
    let obj = sb.get_json("secretspolicy", "waited").unwrap();
    assert_generation_observed(&obj);
}

#[test]
fn the_reconcile_annotations_make_a_pass_at_once_and_are_echoed_in_status() {
    // A resync interval far longer than the test: only the annotation can cause these reads.
    let (sb, _op) = env("10m");
    sb.apply_ok(&policy(
        "now",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "secretspolicy", "now");
    std::thread::sleep(Duration::from_secs(1));
    let path = format!("{POLICY}/now");
    // Edited in the service: only a pass finds and corrects it.
    sb.secrets(
        "PUT",
        &path,
        Some(json!({"policy": "path \"evil/*\" { capabilities = [\"sudo\"] }"})),
    );
    let (_, since) = sb.requests("secrets", 0);
    for (annotation, value) in [
        ("reconcile.quartet.dev/requestedAt", "2026-01-01T00:00:00Z"),
        ("reconcile.fluxcd.io/requestedAt", "flux-1"),
    ] {
        sb.kubectl_ok(&[
            "annotate",
            "--overwrite",
            "secretspolicy/now",
            &format!("{annotation}={value}"),
        ]);
        let started = std::time::Instant::now();
        wait_for("lastHandledReconcileAt", Duration::from_secs(10), || {
            sb.get_json("secretspolicy", "now")
                .filter(|o| o["status"]["lastHandledReconcileAt"] == value)
        });
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    let reads = calls_to(&sb, since, &path);
    assert!(reads.iter().any(|(m, _, _)| m == "GET"), "{reads:?}");
    let (_, body) = sb.secrets("GET", &path, None);
    assert!(
        body["data"]["policy"].as_str().unwrap().contains("\"a/*\""),
        "{body}"
    );
    // Echoed once: the status stays as it is on later passes.
    let rv = sb.get_json("secretspolicy", "now").unwrap()["metadata"]["resourceVersion"].clone();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        sb.get_json("secretspolicy", "now").unwrap()["metadata"]["resourceVersion"],
        rv
    );
}

/// A request made while a pass is running (its read held by a sandbox delay) lands before that
/// pass writes its status: the pass never saw it, and its status write comes back carrying the
/// annotation. That copy still gets a pass, at once, whether the running pass succeeded or was
/// refused (a refusal's retry is minutes away at this resync; a success waits for the resync).
/// The same for a spec change made during a pass.
#[test]
fn a_reconcile_request_made_while_a_pass_runs_is_handled_right_after_it() {
    let (sb, _op) = env("10m");
    sb.apply_ok(&policy(
        "busy",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "secretspolicy", "busy");
    let path = format!("{POLICY}/busy");
    for (round, status) in [("accepted", 200), ("refused", 400)] {
        // Each read of the policy takes 3 s: time to make a request during the pass.
        sb.fault(
            "secrets",
            json!({"method": "GET", "path": &path, "status": status, "delay_ms": 3000, "count": 0,
                   "body": {"errors": ["refused by the test"]}}),
        );
        poke(&sb, "secretspolicy/busy", &format!("{round}-1"));
        // The pass of the first request is reading (it started within a second of the write).
        std::thread::sleep(Duration::from_millis(1000));
        let second = format!("{round}-2");
        poke(&sb, "secretspolicy/busy", &second);
        wait_for(
            &format!("{round}: the request made during a pass echoed"),
            Duration::from_secs(15),
            || {
                sb.get_json("secretspolicy", "busy")
                    .filter(|o| o["status"]["lastHandledReconcileAt"] == second.as_str())
            },
        );
        sb.clear_faults("secrets");
    }
    let o = sb.get_json("secretspolicy", "busy").unwrap();
    assert!(condition_is(&o, "Stalled", "True"), "{}", o["status"]);

    // The same for a spec change made while a pass runs: the new generation is applied at once.
    sb.fault(
        "secrets",
        json!({"method": "GET", "path": &path, "status": 200, "delay_ms": 3000, "count": 0}),
    );
    poke(&sb, "secretspolicy/busy", "spec-1");
    std::thread::sleep(Duration::from_millis(1000));
    sb.kubectl_ok(&[
        "patch",
        "secretspolicy/busy",
        "--type=merge",
        "-p",
        r#"{"spec":{"policy":"path \"b/*\" { capabilities = [\"read\"] }"}}"#,
    ]);
    let o = wait_for(
        "the generation made during a pass applied",
        Duration::from_secs(15),
        || {
            sb.get_json("secretspolicy", "busy").filter(|o| {
                condition_is(o, "Ready", "True")
                    && o["status"]["observedGeneration"] == o["metadata"]["generation"]
            })
        },
    );
    assert_generation_observed(&o);
    sb.clear_faults("secrets");
    let (_, body) = sb.secrets("GET", &path, None);
    assert!(
        body["data"]["policy"].as_str().unwrap().contains("\"b/*\""),
        "{body}"
    );
}

/// A change of what a resource depends on (here its Connection) made while a pass of it runs
/// is acted on right after that pass, even when the pass was refused: it may have used the old
/// Connection, and its own status write is no reason to skip the pass the change asked for.
#[test]
fn a_connection_change_made_while_a_pass_runs_gets_a_pass_right_after_it() {
    let (sb, _op) = env("10m");
    sb.apply_ok(&policy(
        "woken",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "secretspolicy", "woken");
    let path = format!("{POLICY}/woken");
    // The next read of the policy takes 4 s and is refused: the pass it belongs to is refused
    // after the Connection changed.
    sb.fault(
        "secrets",
        json!({"method": "GET", "path": &path, "status": 400, "delay_ms": 4000, "count": 1,
               "body": {"errors": ["refused by the test"]}}),
    );
    let (_, since) = sb.requests("secrets", 0);
    poke(&sb, "secretspolicy/woken", "before-the-change");
    std::thread::sleep(Duration::from_millis(1000));
    sb.kubectl_ok(&[
        "patch",
        "connection/secrets",
        "--type=merge",
        "-p",
        r#"{"spec":{"timeoutSeconds":6}}"#,
    ]);
    let o = sb.get_json("secretspolicy", "woken").unwrap();
    assert!(
        !condition_is(&o, "Stalled", "True"),
        "the refused pass ended before the Connection changed: {}",
        o["status"]
    );
    // A refusal's retry is minutes away at this resync: only the wake's pass makes it Ready.
    wait_for(
        "the pass the Connection's change asked for",
        Duration::from_secs(15),
        || {
            sb.get_json("secretspolicy", "woken").filter(|o| {
                o["status"]["lastHandledReconcileAt"] == "before-the-change"
                    && condition_is(o, "Ready", "True")
                    && condition_is(o, "Stalled", "False")
            })
        },
    );
    let reads: Vec<u16> = calls_to(&sb, since, &path)
        .into_iter()
        .filter(|(m, _, _)| m == "GET")
        .map(|(_, _, status)| status)
        .collect();
    assert_eq!(
        reads,
        [400, 200],
        "the refused read, then the woken pass's read"
    );
}

#[test]
fn a_suspended_policy_makes_no_call_its_deletion_waits_and_resume_catches_up() {
    let (sb, _op) = env("2s");
    sb.apply_ok(&policy(
        "paused",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "",
    ));
    wait_ready(&sb, "secretspolicy", "paused");
    sb.apply_ok(&policy(
        "paused",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "  suspend: true\n",
    ));
    let obj = wait_conditions(
        &sb,
        "secretspolicy",
        "paused",
        &[("Ready", "False", Some("Suspended"))],
    );
    assert_generation_observed(&obj);
    capture(&obj, "suspended");
    let path = format!("{POLICY}/paused");
    let (_, since) = sb.requests("secrets", 0);
    sb.secrets(
        "PUT",
        &path,
        Some(json!({"policy": "path \"evil/*\" { capabilities = [\"sudo\"] }"})),
    );
    let (_, since_edit) = sb.requests("secrets", 0);
    // Several resync intervals, a reconcile request and a deletion.
    sb.kubectl_ok(&[
        "annotate",
        "secretspolicy/paused",
        "reconcile.quartet.dev/requestedAt=r1",
    ]);
    std::thread::sleep(Duration::from_secs(5));
    sb.kubectl_ok(&["delete", "secretspolicy/paused", "--wait=false"]);
    let obj = wait_conditions(
        &sb,
        "secretspolicy",
        "paused",
        &[("DeletionBlocked", "True", Some("Suspended"))],
    );
    assert!(obj["metadata"]["deletionTimestamp"].is_string());
    std::thread::sleep(Duration::from_secs(3));
    // Only the Connection's own checks (token lookup, features) reach the service.
    let calls = calls_to(&sb, since_edit, "/v1/sys/policies/");
    assert!(calls.is_empty(), "calls while suspended: {calls:?}");
    let (status, body) = sb.secrets("GET", &path, None);
    assert_eq!(status, 200);
    assert!(body["data"]["policy"].as_str().unwrap().contains("evil"));
    assert!(sb.get_json("secretspolicy", "paused").is_some());
    let _ = since;

    // Resume: the pending deletion goes ahead and removes the policy.
    sb.kubectl_ok(&[
        "patch",
        "secretspolicy/paused",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    wait_for("the resource is gone", WAIT, || {
        sb.get_json("secretspolicy", "paused")
            .is_none()
            .then_some(())
    });
    let (status, _) = sb.secrets("GET", &path, None);
    assert_eq!(status, 404);
}

#[test]
fn resuming_a_suspended_policy_corrects_what_changed_meanwhile() {
    let (sb, _op) = env("10m");
    sb.apply_ok(&policy(
        "resumed",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "  suspend: true\n",
    ));
    wait_conditions(
        &sb,
        "secretspolicy",
        "resumed",
        &[("Ready", "False", Some("Suspended"))],
    );
    let path = format!("{POLICY}/resumed");
    let (status, _) = sb.secrets("GET", &path, None);
    assert_eq!(status, 404, "created while suspended");
    sb.apply_ok(&policy(
        "resumed",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "  suspend: false\n",
    ));
    wait_ready(&sb, "secretspolicy", "resumed");
    let (status, _) = sb.secrets("GET", &path, None);
    assert_eq!(status, 200);
}

#[test]
fn drift_policy_report_leaves_a_remote_edit_in_place_and_names_the_fields() {
    let (sb, _op) = env("2s");
    sb.apply_ok(&policy(
        "watched",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "  driftPolicy: Report\n",
    ));
    wait_ready(&sb, "secretspolicy", "watched");
    let path = format!("{POLICY}/watched");
    sb.secrets(
        "PUT",
        &path,
        Some(json!({"policy": "path \"evil/*\" { capabilities = [\"sudo\"] }"})),
    );
    let obj = wait_conditions(
        &sb,
        "secretspolicy",
        "watched",
        &[
            ("Drifted", "True", Some("DriftReported")),
            ("Ready", "True", None),
            ("Synced", "False", Some("DriftReported")),
            ("Stalled", "False", None),
        ],
    );
    assert_eq!(obj["status"]["driftedFields"], json!(["policy"]));
    capture(&obj, "healthy_driftReported");
    assert!(condition(&obj, "Drifted").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("policy"));
    // Several resyncs later, the edit is still there and no write was made.
    let (_, since) = sb.requests("secrets", 0);
    std::thread::sleep(Duration::from_secs(6));
    let writes: Vec<_> = calls_to(&sb, since, &path)
        .into_iter()
        .filter(|(m, _, _)| m != "GET")
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    let (_, body) = sb.secrets("GET", &path, None);
    assert!(body["data"]["policy"].as_str().unwrap().contains("evil"));
    let ev = sb.wait_events(&["DriftDetected"]);
    assert!(!ev.contains("DriftCorrected"));

    // Enforcing: driftPolicy Correct restores the spec and clears the report.
    sb.apply_ok(&policy(
        "watched",
        r#"path "a/*" { capabilities = ["read"] }"#,
        "  driftPolicy: Correct\n",
    ));
    let obj = wait_ready(&sb, "secretspolicy", "watched");
    assert!(condition(&obj, "Drifted").is_none(), "{obj}");
    let (_, body) = sb.secrets("GET", &path, None);
    assert!(body["data"]["policy"].as_str().unwrap().contains("\"a/*\""));
}

// ---------------------------------------------------------------------------------------------
// The `Operated` shape: a TotpEnrollment.

const TOTP: &str = "/v1/identity/mfa/method/totp";

fn totp_setup(sb: &Sandbox) {
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpMethod\nmetadata: {name: otp, namespace: default}\nspec: {issuer: Quartet}\n",
    );
    wait_ready(sb, "totpmethod", "otp");
}

fn enrollment(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpEnrollment\nmetadata: {{name: {name}, namespace: default}}\nspec: {{methodRef: {{name: otp}}, entityName: {name}{extra}}}\n"
    )
}

#[test]
fn an_enrollment_is_stalled_without_its_entity_reconciling_through_a_503_and_ready_after() {
    let (sb, _op) = env("10m");
    totp_setup(&sb);
    sb.apply_ok(&enrollment("bob", ""));
    let obj = wait_conditions(
        &sb,
        "totpenrollment",
        "bob",
        &[
            ("Stalled", "True", Some("ReferenceMissing")),
            ("Reconciling", "False", None),
            ("Ready", "False", Some("ReferenceMissing")),
        ],
    );
    assert_generation_observed(&obj);
    capture(&obj, "degraded_referenceMissing");
    sb.fault(
        "secrets",
        json!({"method": "POST", "path": format!("{TOTP}/admin-generate"), "status": 503, "count": 0}),
    );
    let (s, body) = sb.secrets("POST", "/v1/identity/entity", Some(json!({"name": "bob"})));
    assert!(s < 300, "{body}");
    poke(&sb, "totpenrollment/bob", "entity-created");
    let obj = wait_conditions(
        &sb,
        "totpenrollment",
        "bob",
        &[
            ("Reconciling", "True", None),
            ("Stalled", "False", None),
            ("Ready", "False", None),
        ],
    );
    capture(&obj, "progressing_serviceUnavailable");
    assert_generation_observed(&obj);
    sb.clear_faults("secrets");
    poke(&sb, "totpenrollment/bob", "after-fault");
    let obj = wait_conditions(
        &sb,
        "totpenrollment",
        "bob",
        &[
            ("Ready", "True", Some("Enrolled")),
            ("Reconciling", "False", None),
            ("Stalled", "False", None),
        ],
    );
    assert_generation_observed(&obj);
}

#[test]
fn a_suspended_enrollment_makes_no_call_and_resumes_with_the_annotation_echoed() {
    let (sb, _op) = env("2s");
    totp_setup(&sb);
    let (s, body) = sb.secrets(
        "POST",
        "/v1/identity/entity",
        Some(json!({"name": "carol"})),
    );
    assert!(s < 300, "{body}");
    let (_, since) = sb.requests("secrets", 0);
    sb.apply_ok(&enrollment("carol", ", suspend: true"));
    let obj = wait_conditions(
        &sb,
        "totpenrollment",
        "carol",
        &[("Ready", "False", Some("Suspended"))],
    );
    capture(&obj, "suspended");
    sb.kubectl_ok(&[
        "annotate",
        "totpenrollment/carol",
        "reconcile.fluxcd.io/requestedAt=x",
    ]);
    std::thread::sleep(Duration::from_secs(5));
    let calls: Vec<_> = calls_to(&sb, since, "/v1/identity/")
        .into_iter()
        .filter(|(_, p, _)| !p.starts_with(&format!("{TOTP}/")) || p.contains("admin"))
        .collect();
    assert!(calls.is_empty(), "calls while suspended: {calls:?}");
    let obj = sb.get_json("totpenrollment", "carol").unwrap();
    assert!(
        obj["status"]["lastHandledReconcileAt"].is_null(),
        "echoed while suspended"
    );
    sb.kubectl_ok(&[
        "patch",
        "totpenrollment/carol",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    let obj = wait_ready(&sb, "totpenrollment", "carol");
    assert_eq!(obj["status"]["lastHandledReconcileAt"], "x");
    sb.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "--timeout=5s",
        "totpenrollment/carol",
    ]);
}

#[test]
fn kubectl_explain_shows_the_flattened_gitops_fields_of_every_kind() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let out = sb.kubectl_ok(&["explain", "secretspolicy.spec.suspend"]);
    assert!(out.contains("stops every call to the service"), "{out}");
    let out = sb.kubectl_ok(&["explain", "secretspolicy.spec.driftPolicy"]);
    assert!(out.contains("Report"), "{out}");
    let out = sb.kubectl_ok(&["explain", "workspacerun.spec.suspend"]);
    assert!(out.contains("resumes where it stopped"), "{out}");
    let out = sb.kubectl_ok(&["explain", "secretspolicy.status.lastHandledReconcileAt"]);
    assert!(out.contains("requestedAt"), "{out}");
    // Operations have no driftPolicy.
    assert!(!sb
        .kubectl(&["explain", "workspacerun.spec.driftPolicy"])
        .status
        .success());
}
