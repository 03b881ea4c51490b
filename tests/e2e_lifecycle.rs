//! Starting and stopping like a production process, with the built `quartet` binary on the dev
//! API server: only some CRDs installed (the missing kinds are reported, a CRD installed later is
//! served without a restart, a removed one stops its controller; a kind without resources runs
//! no controller until its first), SIGTERM ends the process within
//! the bound in every state (figures printed), and a leader that stops hands its Lease to the
//! standby at once (figure printed) without any write made twice.
//!
//! A subset of the CRDs is installed with kubectl from the files in `crds/` (what `quartet crd
//! --out DIR` writes, one file per CRD).

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

const WAIT: Duration = Duration::from_secs(30);
/// The default `--shutdown-timeout` is 10 s; the assertions allow twice that for a loaded machine.
const EXIT_BOUND: Duration = Duration::from_secs(20);

const CONNECTIONS: &str = "connections.quartet.dev";
const POLICIES: &str = "secretspolicies.secrets.quartet.dev";
const TOTP_METHODS: &str = "totpmethods.secrets.quartet.dev";

fn policy(name: &str) -> String {
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  type: acl\n  policy: |\n    path \"secret/{name}\" {{ capabilities = [\"read\"] }}\n"
    )
}

fn wait_ready(sb: &Sandbox, resource: &str, name: &str) {
    wait_for(&format!("{resource} {name} Ready"), WAIT, || {
        sb.get_json(resource, name)
            .filter(|o| condition_is(o, "Ready", "True"))
    });
}

/// The body of an HTTP GET and its status, as text.
fn get_text(url: &str) -> (u16, String) {
    let resp = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(url)
        .send()
        .expect("http get");
    (resp.status().as_u16(), resp.text().unwrap_or_default())
}

/// `quartet_kind_served{kind}` as the operator's `/metrics` says.
fn kinds_served(addr: &str) -> BTreeMap<String, u8> {
    let (_, text) = get_text(&format!("http://{addr}/metrics"));
    text.lines()
        .filter_map(|l| l.strip_prefix("quartet_kind_served{kind=\""))
        .filter_map(|l| {
            let (kind, rest) = l.split_once("\"} ")?;
            Some((kind.to_string(), rest.trim().parse().ok()?))
        })
        .collect()
}

fn wait_served(addr: &str, kind: &str, value: u8) {
    wait_for(
        &format!("quartet_kind_served{{kind=\"{kind}\"}} {value}"),
        WAIT,
        || (kinds_served(addr).get(kind) == Some(&value)).then_some(()),
    );
}

/// The time stamp of the first log line containing `needle`.
fn logged_at(log: &str, needle: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    let line = log.lines().find(|l| l.contains(needle))?;
    line.split_whitespace().next()?.parse().ok()
}

/// SIGTERM `op`, require an exit within [`EXIT_BOUND`], print the figure; returns the log.
fn stop_within_bound(op: Operator, state: &str) -> String {
    let (took, log) = op.terminate(EXIT_BOUND + Duration::from_secs(5));
    let took = took.unwrap_or_else(|| panic!("{state}: still running after SIGTERM\n{log}"));
    eprintln!(
        "FIGURE exit after SIGTERM ({state}): {:.2} s",
        took.as_secs_f64()
    );
    assert!(
        took < EXIT_BOUND,
        "{state}: exit took {took:?} after SIGTERM\n{log}"
    );
    assert!(log.contains("shutting down"), "{log}");
    log
}

#[test]
fn missing_crds_are_reported_and_a_crd_installed_later_is_served_without_a_restart() {
    let sb = Sandbox::start(&[]);
    sb.install_crds_named(&[CONNECTIONS, POLICIES]);
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, "30s");
    let addr = op.metrics_addr();

    // Each missing kind: one warning naming the kind and its CRD, and 0 in the metric.
    wait_for("the missing kinds reported", WAIT, || {
        op.log()
            .contains("kind WorkspaceRun is not served")
            .then_some(())
    });
    wait_served(&addr, "SecretsPolicy", 1);
    let served = kinds_served(&addr);
    assert_eq!(
        served.len(),
        quartet::runtime::controllers::registry().len(),
        "{served:?}"
    );
    for (kind, v) in &served {
        let want = u8::from(kind == "Connection" || kind == "SecretsPolicy");
        assert_eq!(
            *v, want,
            "quartet_kind_served{{kind=\"{kind}\"}}: {served:?}"
        );
    }
    let log = op.log();
    for (kind, crd) in [
        ("Workspace", "workspaces.workspaces.quartet.dev"),
        ("TotpMethod", TOTP_METHODS),
        ("AdEngine", "adengines.secrets.quartet.dev"),
    ] {
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains(&format!("kind {kind} is not served")))
            .collect();
        assert_eq!(lines.len(), 1, "one warning for {kind}:\n{log}");
        assert!(lines[0].contains(crd), "{}", lines[0]);
    }
    assert!(
        !log.contains("controller started kind=Workspace"),
        "no controller for a missing kind:\n{log}"
    );

    // `/readyz`: ready, with the served and missing kinds.
    let mut last = String::new();
    let body = wait_for("/readyz ready", WAIT, || {
        let (code, body) = get_text(&format!("http://{addr}/readyz"));
        if code != 200 && body != last {
            eprintln!("/readyz {code}: {body}");
            last = body.clone();
        }
        (code == 200).then_some(body)
    });
    assert!(body.contains("served: Connection, SecretsPolicy"), "{body}");
    assert!(
        body.contains("Workspace (workspaces.workspaces.quartet.dev)"),
        "{body}"
    );

    // The served kind works.
    sb.apply_ok(&policy("before"));
    wait_ready(&sb, "secretspolicy", "before");

    // A CRD installed now is served without a restart.
    sb.install_crds_named(&[TOTP_METHODS]);
    wait_served(&addr, "TotpMethod", 1);
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpMethod\nmetadata: {name: corp, namespace: default}\nspec: {issuer: Acme}\n",
    );
    wait_ready(&sb, "totpmethod", "corp");
    assert!(
        op.log()
            .contains("CustomResourceDefinition totpmethods.secrets.quartet.dev is installed"),
        "{}",
        op.log()
    );

    // A CRD removed: its resources are cleaned up by the controller (their finalizers), then
    // the controller stops, the metric says 0 and a warning says why.
    sb.kubectl_ok(&["delete", "crd", TOTP_METHODS, "--timeout=30s"]);
    wait_served(&addr, "TotpMethod", 0);
    wait_for("the TotpMethod controller stopped", WAIT, || {
        let log = op.log();
        (log.contains("kind TotpMethod is no longer served")
            && log.contains("controller stopped kind=TotpMethod"))
        .then_some(())
    });
    sb.apply_ok(&policy("after"));
    wait_ready(&sb, "secretspolicy", "after");

    let log = stop_within_bound(op, "with missing CRDs");
    // Nothing was under way: every controller stopped by itself, none had to be cut.
    assert!(!log.contains("unfinished reconciles are cut"), "{log}");
}

#[test]
fn a_kind_runs_no_controller_until_its_first_resource_which_then_converges_at_once() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let op = Operator::start(&sb, "30s");
    let addr = op.metrics_addr();

    // Every kind is served, none has a resource: ready, with no controller running.
    wait_for("/readyz ready with no resource", WAIT, || {
        (get_text(&format!("http://{addr}/readyz")).0 == 200).then_some(())
    });
    // The log is read from the operator's stderr by a thread of the test, which may lag
    // behind /readyz on a busy machine: wait for the lines rather than expect them at once.
    let kinds = ["Connection", "SecretsPolicy", "Workspace", "TotpMethod"];
    let log = wait_for(
        "every kind logged as waiting for its first resource",
        WAIT,
        || {
            let log = op.log();
            kinds
                .iter()
                .all(|kind| log.contains(&format!("no {kind} to serve yet")))
                .then_some(log)
        },
    );
    assert!(
        !log.contains("controller started"),
        "no controller without a resource:\n{log}"
    );

    // The first Connection and the first SecretsPolicy start their controllers, and the policy
    // converges as at any start.
    sb.connect_secrets(&sb.root_token.clone());
    sb.apply_ok(&policy("first"));
    wait_ready(&sb, "secretspolicy", "first");
    wait_ready(&sb, "connection", "secrets");
    let log = op.log();
    for kind in ["Connection", "SecretsPolicy"] {
        assert!(
            log.contains(&format!("the first {kind} to serve is here")),
            "{kind}'s controller started by its first resource:\n{log}"
        );
    }
    assert!(
        log.contains("controller started kind=SecretsPolicy"),
        "{log}"
    );
    // A kind still without a resource still has none.
    assert!(!log.contains("controller started kind=Workspace"), "{log}");

    // The controller runs on once its resources are gone: a policy deleted and another
    // created converge without a second start.
    sb.kubectl_ok(&["delete", "secretspolicy", "first", "--timeout=30s"]);
    sb.apply_ok(&policy("second"));
    wait_ready(&sb, "secretspolicy", "second");
    let log = stop_within_bound(op, "with idle kinds");
    assert_eq!(
        log.matches("controller started kind=SecretsPolicy").count(),
        1,
        "{log}"
    );
    assert!(!log.contains("unfinished reconciles are cut"), "{log}");
}

#[test]
fn without_the_connection_crd_the_operator_says_so_loudly_and_still_stops_at_once() {
    let sb = Sandbox::start(&[]);
    sb.install_crds_named(&[POLICIES]);
    let op = Operator::start(&sb, "30s");
    let addr = op.metrics_addr();
    wait_for("the missing Connection kind reported", WAIT, || {
        op.log()
            .lines()
            .find(|l| l.contains("ERROR") && l.contains("kind Connection is not served"))
            .map(str::to_string)
    });
    wait_served(&addr, "Connection", 0);
    wait_served(&addr, "SecretsPolicy", 1);
    // Watches of Connections fail all along (the kind is unknown): SIGTERM still ends it.
    let log = stop_within_bound(op, "no Connection CRD");
    assert!(!log.contains("unfinished reconciles are cut"), "{log}");
}

/// A sandbox whose secrets service answers each policy write after a minute (the Connection
/// waits that long), and an operator started with `extra` args whose reconcile of the policy
/// `slow` is waiting for that answer.
fn blocked_on_a_slow_service(extra: &[&str]) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds_named(&[CONNECTIONS, POLICIES]);
    sb.connect_secrets(&sb.root_token.clone());
    sb.patch_secrets_connection(serde_json::json!({"timeoutSeconds": 60}));
    let op = Operator::start_with(&sb, "30s", extra);
    sb.fault(
        "secrets",
        json!({"method": "PUT", "path": "/v1/sys/policies/acl/*", "status": 200, "delay_ms": 60000, "count": 50}),
    );
    sb.apply_ok(&policy("slow"));
    wait_for("the policy write under way", WAIT, || {
        let left = sb.faults_left("secrets");
        left.first()
            .is_some_and(|f| f["count"].as_u64() < Some(50))
            .then_some(())
    });
    (sb, op)
}

#[test]
fn sigterm_cuts_a_reconcile_blocked_on_a_slow_service_and_the_next_start_resumes_it() {
    let (sb, op) = blocked_on_a_slow_service(&[]);
    let log = stop_within_bound(op, "a reconcile blocked on a slow service");
    assert!(log.contains("unfinished reconciles are cut"), "{log}");

    // The next operator resumes the policy.
    sb.clear_faults("secrets");
    let _op = Operator::start(&sb, "30s");
    wait_ready(&sb, "secretspolicy", "slow");
}

#[test]
fn a_shorter_shutdown_timeout_is_honoured() {
    let (_sb, op) = blocked_on_a_slow_service(&["--shutdown-timeout", "2s"]);
    let (took, log) = op.terminate(EXIT_BOUND);
    let took = took.unwrap_or_else(|| panic!("still running after SIGTERM\n{log}"));
    eprintln!(
        "FIGURE exit after SIGTERM (blocked, --shutdown-timeout 2s): {:.2} s",
        took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(5), "exit took {took:?}\n{log}");
    assert!(log.contains("controller did not stop within 1.2s"), "{log}");
}

/// Start an operator with leader election and wait until it is the leader, ready.
fn leader(sb: &Sandbox) -> Operator {
    let op = Operator::start_with(sb, "30s", &["--leader-elect"]);
    let addr = op.metrics_addr();
    let body = wait_for("a ready leader", WAIT, || {
        let (code, body) = get_text(&format!("http://{addr}/readyz"));
        (code == 200).then_some(body)
    });
    assert!(body.starts_with("ready: leader"), "{body}");
    assert!(op.log().contains("became leader"), "{}", op.log());
    op
}

/// Start an operator with leader election and wait until `/readyz` says it is a ready standby.
fn standby(sb: &Sandbox) -> Operator {
    let op = Operator::start_with(sb, "30s", &["--leader-elect"]);
    let addr = op.metrics_addr();
    let body = wait_for("a ready standby", WAIT, || {
        let (code, body) = get_text(&format!("http://{addr}/readyz"));
        (code == 200).then_some(body)
    });
    assert!(body.contains("standby"), "{body}");
    assert!(!op.log().contains("became leader"), "{}", op.log());
    op
}

#[test]
fn sigterm_ends_a_standby_waiting_for_the_lease_within_the_bound() {
    let sb = Sandbox::start(&[]);
    sb.install_crds_named(&[CONNECTIONS, POLICIES]);
    let _leader = leader(&sb);
    let op = standby(&sb);
    stop_within_bound(op, "a standby waiting for the Lease");
}

#[test]
fn a_leader_that_stops_hands_the_lease_to_the_standby_at_once_and_no_write_is_made_twice() {
    let sb = Sandbox::start(&[]);
    sb.install_crds_named(&[CONNECTIONS, POLICIES]);
    sb.connect_secrets(&sb.root_token.clone());
    let a = leader(&sb);
    let b = standby(&sb);
    for i in 0..5 {
        sb.apply_ok(&policy(&format!("p{i}")));
    }
    for i in 0..5 {
        wait_ready(&sb, "secretspolicy", &format!("p{i}"));
    }
    // More work arrives as the leader is told to stop: some of it is done by each replica.
    for i in 5..10 {
        sb.apply_ok(&policy(&format!("p{i}")));
    }
    let sent = Instant::now();
    let a_log = stop_within_bound(a, "the leader");
    wait_for("the standby leading", WAIT, || {
        b.log().contains("became leader").then_some(())
    });
    let since_sigterm = sent.elapsed();
    let released = logged_at(&a_log, "lease released").unwrap_or_else(|| panic!("{a_log}"));
    let taken = logged_at(&b.log(), "became leader").unwrap();
    let handover = taken.duration_since(released).as_secs_f64();
    eprintln!(
        "FIGURE Lease hand-over: {handover:.2} s from the leader's release to the standby leading \
         ({:.2} s from SIGTERM, measured by polling)",
        since_sigterm.as_secs_f64()
    );
    assert!(
        handover < 2.0,
        "the standby took {handover:.2} s to take a released Lease"
    );
    let lease = sb.get_json("lease", "quartet-leader").expect("the Lease");
    assert_eq!(
        lease["spec"]["holderIdentity"],
        format!("quartet-{}", b.pid())
    );

    for i in 0..10 {
        wait_ready(&sb, "secretspolicy", &format!("p{i}"));
    }
    sb.apply_ok(&policy("p10"));
    wait_ready(&sb, "secretspolicy", "p10");
    // Each policy was written to the service exactly once, by one replica or the other.
    let (requests, _) = sb.requests("secrets", 0);
    for i in 0..=10 {
        let path = format!("/v1/sys/policies/acl/p{i}");
        let writes: Vec<_> = requests
            .iter()
            .filter(|(m, p, _)| p == &path && m != "GET")
            .collect();
        assert_eq!(writes.len(), 1, "writes of {path}: {writes:?}");
    }
}

/// Inject a fault into the dev API server (its admin API, over its self-signed HTTPS).
fn kube_fault(sb: &Sandbox, fault: serde_json::Value) {
    sb.kube_admin("POST", "/_sandbox/faults", fault);
}

/// The Connection cache lists again after its watch was lost (etcd compaction: 410 Gone). A
/// Connection changed in the meantime came with no watch event, so the relist itself must wake
/// the resources that use it; else they keep the old address until their resync (5 minutes
/// here). The Connection controller may not write the Connection's status meanwhile: that write
/// would be a watch event of its own, waking the resources without the relist.
#[test]
fn a_connection_changed_while_its_watch_was_down_wakes_its_resources_at_the_relist() {
    let sb = Sandbox::start(&["--secrets-clusters", "2"]);
    sb.install_crds_named(&[CONNECTIONS, POLICIES]);
    let cluster = |i: usize| sb.url(&format!("secrets[{i}]")).to_string();
    // The Connection `secrets` to cluster `i` of the secrets service.
    let connect = |i: usize| sb.connect_secrets_at("default", &cluster(i), &sb.root_token);
    connect(0);
    let _op = Operator::start(&sb, "5m");
    sb.apply_ok(&policy("moved"));
    wait_ready(&sb, "secretspolicy", "moved");
    let exists_in = |i: usize| {
        let (status, _) = http(
            "GET",
            &format!("{}/v1/sys/policies/acl/moved", cluster(i)),
            Some(("X-Secrets-Token", &sb.root_token)),
            None,
        );
        status == 200
    };
    assert!(exists_in(0) && !exists_in(1));

    let status_refused = json!({"method": "PATCH", "status": 503, "count": 0,
        "path": "/apis/quartet.dev/v1alpha1/namespaces/default/connections/secrets/status"});
    let watch_refused = json!({"method": "GET", "status": 503, "count": 0,
        "path": "/apis/quartet.dev/v1alpha1/connections"});
    sb.kube_admin(
        "PUT",
        "/_sandbox/faults",
        json!({"faults": [status_refused, watch_refused]}),
    );
    sb.kube_admin("POST", "/_sandbox/expire-watches", json!({}));
    connect(1);
    // Every other watch has listed again by now, the policy's included: that pass still saw
    // the old address, and nothing else may move the policy before the Connections relist.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !exists_in(1),
        "the policy moved before the Connection cache listed again"
    );

    // The Connections may be watched again (the watch gets 410 Gone and lists); their status
    // still may not be written.
    sb.kube_admin(
        "PUT",
        "/_sandbox/faults",
        json!({"faults": [status_refused]}),
    );
    wait_for(
        "the policy written through the changed Connection",
        WAIT,
        || exists_in(1).then_some(()),
    );
    sb.kube_admin("DELETE", "/_sandbox/faults", json!(null));
}

/// What the API server answers a service account without `verb` on CRDs: 403 for every read
/// of a path under the CRDs' collection that starts with `under` ("" for the list and watch,
/// "/" for a read by name).
fn refuse_crd_reads(sb: &Sandbox, under: &str, verb: &str) {
    refuse(
        sb,
        &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions{under}*"),
        verb,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    );
}

/// Every GET of `path` (a glob) answered with the 403 a real API server gives the chart's
/// ServiceAccount for `verb` on `plural` in `group` at the cluster scope.
fn refuse(sb: &Sandbox, path: &str, verb: &str, group: &str, plural: &str) {
    let qualified = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let message = format!(
        "{qualified} is forbidden: User \"system:serviceaccount:quartet-system:quartet\" cannot {verb} resource \"{plural}\" in API group \"{group}\" at the cluster scope"
    );
    kube_fault(
        sb,
        json!({"method": "GET", "path": path, "status": 403, "count": 0,
               "body": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "reason": "Forbidden", "code": 403, "message": message}}),
    );
}

#[test]
fn without_leave_to_list_crds_the_served_kinds_are_found_through_discovery() {
    let sb = Sandbox::start(&[]);
    sb.install_crds_named(&[CONNECTIONS, POLICIES]);
    sb.connect_secrets(&sb.root_token.clone());
    // What the API server answers a service account without the rule for CRDs.
    refuse_crd_reads(&sb, "", "list");
    let op = Operator::start(&sb, "30s");
    let addr = op.metrics_addr();
    wait_for("the fallback to discovery logged", WAIT, || {
        op.log()
            .contains("may not read CustomResourceDefinitions")
            .then_some(())
    });
    wait_served(&addr, "SecretsPolicy", 1);
    wait_served(&addr, "TotpMethod", 0);
    let (_, body) = get_text(&format!("http://{addr}/readyz"));
    assert!(body.contains("found by: API discovery"), "{body}");
    sb.apply_ok(&policy("p"));
    wait_ready(&sb, "secretspolicy", "p");

    // A CRD installed now is found at the next look (every 10 s).
    let file = repo_root()
        .join("crds")
        .join(format!("{TOTP_METHODS}.yaml"));
    sb.kubectl_ok(&["apply", "--server-side", "-f", file.to_str().unwrap()]);
    wait_served(&addr, "TotpMethod", 1);

    stop_within_bound(op, "served kinds found through discovery");
}

#[test]
fn with_leave_to_list_crds_but_not_to_get_one_the_served_kinds_are_found_through_discovery() {
    // RBAC written for an older Quartet, which listed the CRDs whole: list and watch, no get.
    // The watch of their metadata works; reading one of Quartet's CRDs by name is refused.
    let sb = Sandbox::start(&[]);
    sb.install_crds_named(&[CONNECTIONS, POLICIES]);
    sb.connect_secrets(&sb.root_token.clone());
    refuse_crd_reads(&sb, "/", "get");
    let op = Operator::start(&sb, "30s");
    let addr = op.metrics_addr();
    let line = wait_for("the fallback to discovery logged", WAIT, || {
        op.log()
            .lines()
            .find(|l| l.contains("may not read CustomResourceDefinitions"))
            .map(str::to_string)
    });
    assert!(line.contains("cannot get resource"), "{line}");
    assert!(line.contains("grant get, list and watch"), "{line}");
    wait_served(&addr, "SecretsPolicy", 1);
    wait_served(&addr, "TotpMethod", 0);
    let (_, body) = get_text(&format!("http://{addr}/readyz"));
    assert!(body.contains("found by: API discovery"), "{body}");
    sb.apply_ok(&policy("p"));
    wait_ready(&sb, "secretspolicy", "p");
    stop_within_bound(
        op,
        "served kinds found through discovery after a refused get",
    );
}

/// Lists of `plural` in `group` (served under `path`) refused to the chart's ServiceAccount.
fn refuse_list(sb: &Sandbox, path: &str, group: &str, plural: &str) {
    refuse(sb, &format!("{path}/{plural}*"), "list", group, plural);
}

#[test]
fn a_watch_the_api_server_refuses_is_one_warning_in_a_sentence_not_a_dump_nor_silence() {
    let sb = Sandbox::start(&[]);
    sb.install_crds_named(&[CONNECTIONS, POLICIES]);
    refuse_list(
        &sb,
        "/apis/quartet.dev/v1alpha1",
        "quartet.dev",
        "connections",
    );
    refuse_list(&sb, "/api/v1", "", "secrets");
    refuse_list(
        &sb,
        "/apis/secrets.quartet.dev/v1alpha1",
        "secrets.quartet.dev",
        "secretspolicies",
    );
    // At the chart's log level, where kube's own watcher would repeat each 403 in debug form.
    let op = Operator::start_with_env(&sb, "30s", &[], &[("RUST_LOG", "info")]);
    let sa = "forbidden: the operator's ServiceAccount quartet-system/quartet may not list";
    let expected = [
        (
            "watching Connections failed",
            format!("{sa} connections (API group quartet.dev) at the cluster scope"),
        ),
        (
            "watching Secrets failed",
            format!("{sa} secrets at the cluster scope"),
        ),
        // After the wait for a first list of Connections (30 s), which never comes.
        (
            "SecretsPolicy failed",
            format!("{sa} secretspolicies (API group secrets.quartet.dev) at the cluster scope"),
        ),
    ];
    for (what, sentence) in &expected {
        let line = wait_for(what, WAIT * 2, || {
            op.log()
                .lines()
                .find(|l| l.contains(what))
                .map(str::to_string)
        });
        assert!(line.contains("WARN") && line.contains(sentence), "{line}");
    }
    // The watches go on retrying with backoff: a warning per run of failures, not per retry.
    std::thread::sleep(Duration::from_secs(3));
    let log = stop_within_bound(op, "watches refused");
    for (what, _) in &expected {
        assert_eq!(log.matches(what).count(), 1, "{what}:\n{log}");
    }
    for dump in ["Status {", "ApiError", "ErrorResponse"] {
        assert!(!log.contains(dump), "{dump} in the log:\n{log}");
    }
}
