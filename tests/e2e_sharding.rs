//! Sharding with the built `quartet` binary on the dev API server: two shards (`--shard a`,
//! `--shard b`) and the default instance, each a process of its own with leader election. Each
//! serves only its own resources (the sandbox's request log, the resources' finalizers and
//! status) and leads on its own Lease; moving a resource's label from one shard to the other
//! under load hands it over with no write made twice, no cleanup, the finalizer in place
//! throughout, and the resource Ready again within a reconcile (figure printed). A pass or an
//! operation's step under way at the move stops before its next write.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const POLICIES: &str = "secretspolicy";
const FINALIZER: &str = "secrets.quartet.dev/cleanup";

/// A SecretsPolicy in `shard` (no label: the default instance's), granting `caps` on its path.
fn policy(name: &str, shard: Option<&str>, caps: &str) -> String {
    let labels = shard
        .map(|s| format!(", labels: {{quartet.dev/shard: {s}}}"))
        .unwrap_or_default();
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: {name}, namespace: default{labels}}}\nspec:\n  type: acl\n  policy: |\n    path \"secret/{name}\" {{ capabilities = [{caps}] }}\n"
    )
}

fn ready_at(obj: &Value, generation: Option<i64>) -> bool {
    condition_is(obj, "Ready", "True")
        && generation.is_none_or(|g| obj["status"]["observedGeneration"].as_i64() == Some(g))
}

fn wait_ready(sb: &Sandbox, name: &str) -> Value {
    wait_for(&format!("SecretsPolicy {name} Ready"), WAIT, || {
        sb.get_json(POLICIES, name).filter(|o| ready_at(o, None))
    })
}

fn has_finalizer(obj: &Value) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// The requests other than reads the service saw for policy `name`.
fn writes_of(sb: &Sandbox, name: &str, since: u64) -> Vec<(String, String, u16)> {
    let path = format!("/v1/sys/policies/acl/{name}");
    sb.requests("secrets", since)
        .0
        .into_iter()
        .filter(|(m, p, _)| p == &path && m != "GET")
        .collect()
}

/// Start an instance (`--shard NAME` when given) with leader election; wait until it leads.
fn instance(sb: &Sandbox, shard: Option<&str>) -> Operator {
    let mut args = vec!["--leader-elect"];
    if let Some(s) = shard {
        args.extend(["--shard", s]);
    }
    let op = Operator::start_with(sb, "30s", &args);
    wait_for("the instance leading", WAIT, || {
        op.log().contains("became leader").then_some(())
    });
    op
}

/// Neither a finalizer nor a status: no instance has touched the resource.
fn untouched(sb: &Sandbox, name: &str) -> bool {
    let o = sb.get_json(POLICIES, name).expect("the resource");
    !has_finalizer(&o) && o.get("status").is_none_or(Value::is_null)
}

#[test]
fn two_shards_and_the_default_instance_serve_only_their_own_resources_each_on_its_own_lease() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    // One Connection, unlabelled, shared by the resources of every shard.
    sb.connect_secrets(&sb.root_token.clone());
    sb.apply_ok(&policy("in-a", Some("a"), "\"read\""));
    sb.apply_ok(&policy("in-b", Some("b"), "\"read\""));
    sb.apply_ok(&policy("in-default", None, "\"read\""));

    // Started one after another, each instance serves its own resources and none of the others.
    let a = instance(&sb, Some("a"));
    wait_ready(&sb, "in-a");
    std::thread::sleep(Duration::from_secs(2));
    assert!(untouched(&sb, "in-b") && untouched(&sb, "in-default"));
    assert!(writes_of(&sb, "in-b", 0).is_empty() && writes_of(&sb, "in-default", 0).is_empty());

    let b = instance(&sb, Some("b"));
    wait_ready(&sb, "in-b");
    std::thread::sleep(Duration::from_secs(2));
    assert!(untouched(&sb, "in-default"));
    assert!(writes_of(&sb, "in-default", 0).is_empty());

    // A label naming a shard nobody runs: no instance serves it, and the selector the chart's
    // install notes print lists exactly that resource.
    sb.apply_ok(&policy("in-c", Some("c"), "\"read\""));
    let default = instance(&sb, None);
    wait_ready(&sb, "in-default");
    for name in ["in-a", "in-b", "in-default"] {
        assert_eq!(writes_of(&sb, name, 0).len(), 1, "writes of {name}");
    }
    assert!(untouched(&sb, "in-c") && writes_of(&sb, "in-c", 0).is_empty());
    let unserved = sb.kubectl_ok(&[
        "get",
        "quartet",
        "-A",
        "-l",
        "quartet.dev/shard,quartet.dev/shard notin (a,b)",
        "-o",
        "name",
    ]);
    assert_eq!(unserved.trim(), "secretspolicy.secrets.quartet.dev/in-c");

    // Each leads on its own Lease.
    for (lease, op) in [
        ("quartet-leader-a", &a),
        ("quartet-leader-b", &b),
        ("quartet-leader", &default),
    ] {
        let l = sb.get_json("lease", lease).expect("the Lease");
        assert_eq!(
            l["spec"]["holderIdentity"],
            format!("quartet-{}", op.pid()),
            "{lease}"
        );
    }
    // Metrics carry the shard, the leader gauge too (an alert per shard needs it).
    let (_, text) = http_text(&format!("http://{}/metrics", a.metrics_addr()));
    assert!(
        text.contains(r#"quartet_shard_info{shard="a",selector="quartet.dev/shard=a"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"quartet_leader{shard="a"} 1"#), "{text}");
    let (_, text) = http_text(&format!("http://{}/metrics", default.metrics_addr()));
    assert!(text.contains(r#"quartet_leader{shard=""} 1"#), "{text}");
}

#[test]
fn moving_a_resource_between_shards_under_load_hands_it_over_with_no_write_twice_and_the_finalizer_kept(
) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let a = instance(&sb, Some("a"));
    let b = instance(&sb, Some("b"));
    let _default = instance(&sb, None);
    sb.apply_ok(&policy("moving", Some("a"), "\"read\""));
    let before = wait_ready(&sb, "moving");
    let uid = before["metadata"]["uid"].clone();

    // Load: 50 new resources, half in each shard, being reconciled while the label moves.
    let load: String = (0..50)
        .map(|i| policy(&format!("load-{i}"), Some(["a", "b"][i % 2]), "\"read\""))
        .collect::<Vec<_>>()
        .join("---\n");
    let (_, mark) = sb.requests("secrets", 0);
    sb.apply_ok(&load);

    // 1. The label alone moves: b takes it over with a read, nobody writes or cleans up.
    let moved = Instant::now();
    sb.kubectl_ok(&[
        "label",
        POLICIES,
        "moving",
        "quartet.dev/shard=b",
        "--overwrite",
    ]);
    wait_for("shard a letting go", WAIT, || {
        a.log()
            .contains("SecretsPolicy default/moving moved to another shard")
            .then_some(())
    });
    // Time for shard b's first pass (a read) before the request log is read.
    std::thread::sleep(Duration::from_secs(3));
    let o = sb.get_json(POLICIES, "moving").expect("the resource");
    assert!(has_finalizer(&o) && ready_at(&o, None), "{o}");
    assert!(
        writes_of(&sb, "moving", mark).is_empty(),
        "a move alone writes nothing"
    );
    eprintln!(
        "FIGURE shard a let go of a relabelled resource {:.2} s after the label changed",
        moved.elapsed().as_secs_f64()
    );

    // 2. Back to a with a spec change in the same write: exactly one write, by the new owner,
    //    Ready at the new generation within one reconcile; the finalizer never leaves.
    let (_, mark) = sb.requests("secrets", 0);
    let moved = Instant::now();
    sb.apply_ok(&policy("moving", Some("a"), "\"read\", \"list\""));
    let generation = sb.get_json(POLICIES, "moving").unwrap()["metadata"]["generation"].as_i64();
    let took = wait_for("the move back Ready at its new generation", WAIT, || {
        let o = sb.get_json(POLICIES, "moving").expect("the resource");
        assert!(has_finalizer(&o), "the finalizer left during the move: {o}");
        ready_at(&o, generation).then(|| moved.elapsed())
    });
    eprintln!(
        "FIGURE a moved resource with a new spec Ready again {:.2} s after the label changed (50 \
         resources being reconciled)",
        took.as_secs_f64()
    );
    // One reconcile here is well under a second; the bound allows for the shared machine.
    assert!(took < Duration::from_secs(20), "took {took:?}");
    for name in (0..50).map(|i| format!("load-{i}")) {
        wait_ready(&sb, &name);
    }
    let writes = writes_of(&sb, "moving", mark);
    assert_eq!(writes.len(), 1, "writes after the move back: {writes:?}");
    assert_eq!(writes[0].0, "PUT", "{writes:?}");
    let (_, policy_now) = sb.secrets("GET", "/v1/sys/policies/acl/moving", None);
    assert!(
        policy_now.to_string().contains("list"),
        "the service holds the new spec: {policy_now}"
    );
    let o = sb.get_json(POLICIES, "moving").unwrap();
    assert_eq!(o["metadata"]["uid"], uid, "the same resource throughout");
    assert!(
        b.log()
            .contains("SecretsPolicy default/moving moved to another shard"),
        "shard b let go on the way back"
    );
    // Every load resource was written once, by its own shard only.
    let (all, _) = sb.requests("secrets", 0);
    for i in 0..50 {
        let path = format!("/v1/sys/policies/acl/load-{i}");
        let n = all
            .iter()
            .filter(|(m, p, _)| p == &path && m != "GET")
            .count();
        assert_eq!(n, 1, "writes of {path}");
    }
    assert!(!all
        .iter()
        .any(|(m, p, _)| m == "DELETE" && p.contains("/moving")));
}

/// The body of an HTTP GET and its status, as text.
fn http_text(url: &str) -> (u16, String) {
    let resp = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(url)
        .send()
        .expect("http get");
    (resp.status().as_u16(), resp.text().unwrap_or_default())
}

#[test]
fn a_pass_under_way_when_the_label_moves_stops_before_writing_and_only_the_new_shard_writes() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    // The old shard's read is held below for longer than the default 5 s timeout.
    sb.patch_secrets_connection(serde_json::json!({"timeoutSeconds": 60}));
    let a = instance(&sb, Some("a"));
    let _b = instance(&sb, Some("b"));
    sb.apply_ok(&policy("racing", Some("a"), "\"read\""));
    wait_ready(&sb, "racing");

    // Shard a starts a pass for a spec change; its observe is held in the service while the
    // label moves to b, so the pass resumes after the hand-over with a write still to make.
    sb.fault(
        "secrets",
        serde_json::json!({"method": "GET", "path": "/v1/sys/policies/acl/racing", "status": 200, "delay_ms": 20000, "count": 1}),
    );
    let (_, mark) = sb.requests("secrets", 0);
    sb.apply_ok(&policy("racing", Some("a"), "\"read\", \"list\""));
    wait_for("shard a's read held in the service", WAIT, || {
        sb.faults_left("secrets").is_empty().then_some(())
    });
    // Shard b's first read is held longer, so shard a's pass resumes first, with the old
    // remote state in hand: without the guard it would write, and so would b.
    sb.fault(
        "secrets",
        serde_json::json!({"method": "GET", "path": "/v1/sys/policies/acl/racing", "status": 200, "delay_ms": 35000, "count": 1}),
    );
    sb.kubectl_ok(&[
        "label",
        POLICIES,
        "racing",
        "quartet.dev/shard=b",
        "--overwrite",
    ]);
    let generation = sb.get_json(POLICIES, "racing").unwrap()["metadata"]["generation"].as_i64();
    wait_for("Ready at the new generation (by shard b)", WAIT, || {
        sb.get_json(POLICIES, "racing")
            .filter(|o| ready_at(o, generation))
    });
    wait_for("shard a's held pass stopping", WAIT, || {
        a.log()
            .contains("SecretsPolicy/default/racing moved to another shard during the pass")
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    let writes = writes_of(&sb, "racing", mark);
    assert_eq!(writes.len(), 1, "writes after the move: {writes:?}");
    let o = sb.get_json(POLICIES, "racing").unwrap();
    assert!(has_finalizer(&o) && ready_at(&o, generation), "{o}");
}

/// The log lines of `op`'s change records of `POST /api/v2/runs` for WorkspaceRun `name`.
fn run_creates_logged(op: &Operator, name: &str) -> usize {
    op.log()
        .lines()
        .filter(|l| {
            l.contains("POST /api/v2/runs ") && l.contains(&format!("WorkspaceRun default/{name} "))
        })
        .count()
}

#[test]
fn an_operation_step_under_way_when_the_label_moves_writes_nothing_and_only_the_new_shard_creates_the_run(
) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_workspaces();
    // The old shard's lookup is held below for longer than the default 5 s timeout.
    sb.kubectl_ok(&[
        "patch",
        "connection",
        "workspaces",
        "--type=merge",
        "-p",
        r#"{"spec":{"timeoutSeconds":60}}"#,
    ]);
    let a = instance(&sb, Some("a"));
    let b = instance(&sb, Some("b"));
    let ws = sb.create_remote_workspace("moving-run", serde_json::json!({"auto-apply": false}));
    sb.upload_configuration(&ws);
    let runs = format!("/api/v2/workspaces/{ws}/runs");

    // Shard a's step looks for a run it may have created already (a lost response) before it
    // creates one; that lookup is held in the service while the label moves to b. Shard b's
    // lookup is held longer, so a's step resumes first, with "no run yet" in hand: without the
    // gate it would create a run after the move and record it as its own.
    sb.fault(
        "workspaces",
        serde_json::json!({"method": "GET", "path": runs, "status": 200, "delay_ms": 10000, "count": 1}),
    );
    let (_, mark) = sb.requests("workspaces", 0);
    sb.apply_ok(&format!(
        "apiVersion: workspaces.quartet.dev/v1alpha1\nkind: WorkspaceRun\nmetadata: {{name: moving, namespace: default, labels: {{quartet.dev/shard: a}}}}\nspec: {{workspaceId: {ws}, message: moved between shards, planOnly: true}}\n"
    ));
    wait_for("shard a's lookup held in the service", WAIT, || {
        sb.faults_left("workspaces").is_empty().then_some(())
    });
    sb.fault(
        "workspaces",
        serde_json::json!({"method": "GET", "path": runs, "status": 200, "delay_ms": 20000, "count": 1}),
    );
    sb.kubectl_ok(&[
        "label",
        "workspacerun",
        "moving",
        "quartet.dev/shard=b",
        "--overwrite",
    ]);
    let done = wait_for("the run planned and Completed (by shard b)", WAIT, || {
        sb.get_json("workspacerun", "moving")
            .filter(|o| condition_is(o, "Ready", "True") && condition_is(o, "Completed", "True"))
    });
    wait_for("shard a's held step stopping", WAIT, || {
        a.log()
            .contains("WorkspaceRun/default/moving moved to another shard during the pass")
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));

    // One run, created by shard b; shard a sent nothing after the move and wrote no status.
    let creates: Vec<_> = sb
        .requests("workspaces", mark)
        .0
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p == "/api/v2/runs")
        .collect();
    assert_eq!(creates.len(), 1, "run creates: {creates:?}");
    assert_eq!(sb.ws_list(&format!("/workspaces/{ws}/runs")).len(), 1);
    assert_eq!(run_creates_logged(&a, "moving"), 0, "shard a:\n{}", a.log());
    assert_eq!(run_creates_logged(&b, "moving"), 1, "shard b:\n{}", b.log());
    assert_eq!(done["metadata"]["labels"]["quartet.dev/shard"], "b");
    let log = a.log();
    let failures: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("reconcile failed"))
        .collect();
    assert!(failures.is_empty(), "a move is no failure: {failures:?}");
}

#[test]
fn a_connection_shared_by_two_shards_keeps_the_service_within_its_rate_and_zero_shards_is_refused()
{
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());

    // kubectl refuses a Connection shared by no instance.
    let out = sb.kubectl(&[
        "patch",
        "connection",
        "secrets",
        "--type=merge",
        "-p",
        r#"{"spec":{"shards":0}}"#,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("spec.shards"),
        "{err}"
    );

    // 10 calls per second in all, shared by shards a and b (neither told --shard-count); the
    // Connection is labelled for shard a, which writes its status.
    const RATE: f64 = 10.0;
    sb.kubectl_ok(&[
        "patch",
        "connection",
        "secrets",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"quartet.dev/shard":"a"}},"spec":{"requestsPerSecond":10,"shards":2}}"#,
    ]);
    let _a = instance(&sb, Some("a"));
    let _b = instance(&sb, Some("b"));
    wait_for("the Connection's status showing its share", WAIT, || {
        sb.get_json("connection", "secrets")
            .filter(|c| c["status"]["requestsPerSecondPerInstance"] == 5)
    });

    // A burst: 80 new resources, half in each shard, each a read and a write to converge.
    let load: String = (0..80)
        .map(|i| policy(&format!("burst-{i}"), Some(["a", "b"][i % 2]), "\"read\""))
        .collect::<Vec<_>>()
        .join("---\n");
    let (_, mark) = sb.requests("secrets", 0);
    let start = Instant::now();
    sb.apply_ok(&load);
    let applied = start.elapsed().as_secs_f64();
    // (seconds since the apply, requests seen since the mark), sampled until the service
    // has seen nothing new for 3 s.
    let mut samples = vec![(0.0, 0usize)];
    let mut next = mark;
    let mut last_growth = Instant::now();
    while last_growth.elapsed() < Duration::from_secs(3) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the burst never ended"
        );
        std::thread::sleep(Duration::from_millis(200));
        let (new, n) = sb.requests("secrets", next);
        next = n;
        if !new.is_empty() {
            last_growth = Instant::now();
        }
        let total = samples.last().unwrap().1 + new.len();
        samples.push((start.elapsed().as_secs_f64(), total));
    }
    for i in 0..80 {
        wait_ready(&sb, &format!("burst-{i}"));
    }
    let total = samples.last().unwrap().1;
    let end = samples
        .iter()
        .find(|(_, n)| *n == total)
        .map(|(t, _)| *t)
        .unwrap();
    // Each instance may start with a burst of twice its share (5 + 5 per shard); after that
    // the two together keep to 10 per second. Without the share each would use 10. The
    // resources are created one by one while kubectl applies them: the sustained rate is
    // measured from 2 s after they all exist.
    let settle = applied + 2.0;
    let at = |t: f64| samples.iter().rev().find(|(s, _)| *s <= t).unwrap().1;
    let sustained = (total - at(settle)) as f64 / (end - settle);
    let overall = total as f64 / end;
    eprintln!(
        "FIGURE {total} requests in {end:.1} s: {overall:.1}/s overall, {sustained:.1}/s from \
         {settle:.1} s on (shared rate {RATE}/s, 2 shards; kubectl apply took {applied:.1} s)"
    );
    assert!(
        end - settle > 4.0,
        "the burst was too short to measure: {end:.1} s"
    );
    assert!(sustained <= RATE * 1.2, "sustained {sustained:.1}/s");
    assert!(
        total as f64 <= RATE * end + 20.0 + 6.0,
        "{total} requests in {end:.1} s"
    );
}
