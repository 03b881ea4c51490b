//! `quartet plan` end to end: the built binary against `quartet sandbox --kubeconfig` (dev API
//! server and emulated services) with `quartet run` reconciling what `kubectl apply` creates.
//! Every plan is checked to have sent no write to any service (the sandbox's request log) and
//! to have changed nothing in Kubernetes (resourceVersions).

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const WAIT: Duration = Duration::from_secs(60);

const POLICY: &str = r#"apiVersion: secrets.quartet.dev/v1alpha1
kind: SecretsPolicy
metadata: {name: app-read, namespace: default, labels: {plan: e2e}}
spec:
  type: acl
  policy: 'path "secret/app/*" { capabilities = ["read"] }'
"#;

const USER: &str = r#"apiVersion: secrets.quartet.dev/v1alpha1
kind: IdpUser
metadata: {name: alice, namespace: default, labels: {plan: e2e}}
spec: {groups: [ops], policies: [app-read]}
"#;

const WORKSPACE: &str = r#"apiVersion: workspaces.quartet.dev/v1alpha1
kind: Workspace
metadata: {name: app, namespace: default, labels: {plan: e2e}}
spec:
  description: the app
  variables:
    - {key: region, value: eu-west-1}
    - key: password
      sensitive: true
      valueFrom: {secretKeyRef: {name: app-vars, key: password}}
"#;

/// The resources the plans are about: (kubectl resource, name).
const OBJECTS: &[(&str, &str)] = &[
    ("secretspolicy", "app-read"),
    ("idpuser", "alice"),
    ("workspace", "app"),
];

/// `quartet plan` against the sandbox's cluster: exit code, stdout, stderr.
fn plan(sb: &Sandbox, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("plan")
        .arg("--kubeconfig")
        .arg(&sb.kubeconfig)
        .args(args);
    run_plan(cmd)
}

/// Run a `quartet plan` command: exit code, stdout, stderr.
fn run_plan(mut cmd: Command) -> (i32, String, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("run quartet plan");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `quartet plan -f DIR` with `KUBECONFIG` (which its `--kubeconfig` takes) set to
/// `kubeconfig`, a file or a list: exit code, stdout, stderr.
fn plan_in(kubeconfig: &std::ffi::OsStr, dir: &Path) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("plan")
        .arg("-f")
        .arg(dir)
        .env("KUBECONFIG", kubeconfig);
    run_plan(cmd)
}

/// Where each service's request log stands now.
fn marks(sb: &Sandbox) -> Vec<(&'static str, u64)> {
    ["secrets", "workspaces", "catalog", "scheduler"]
        .into_iter()
        .map(|s| (s, sb.requests(s, u64::MAX).1))
        .collect()
}

/// The requests other than reads each service received since `marks`.
fn writes_since(sb: &Sandbox, marks: &[(&'static str, u64)]) -> Vec<String> {
    let mut out = Vec::new();
    for (service, since) in marks {
        for (m, p, _) in sb.requests(service, *since).0 {
            if !matches!(m.as_str(), "GET" | "HEAD" | "LIST") && !p.starts_with("/_sandbox") {
                out.push(format!("{service}: {m} {p}"));
            }
        }
    }
    out
}

/// The resourceVersion of each of [`OBJECTS`] (`None` when absent).
fn versions(sb: &Sandbox) -> Vec<Option<String>> {
    OBJECTS
        .iter()
        .map(|(r, n)| {
            sb.get_json(r, n)
                .and_then(|o| o["metadata"]["resourceVersion"].as_str().map(String::from))
        })
        .collect()
}

/// A plan that must leave the services and the cluster as they were.
fn read_only_plan(sb: &Sandbox, args: &[&str]) -> (i32, String, String) {
    let before = versions(sb);
    let m = marks(sb);
    let result = plan(sb, args);
    assert_eq!(
        writes_since(sb, &m),
        Vec::<String>::new(),
        "the plan wrote to a service:\n{}",
        result.1
    );
    assert_eq!(versions(sb), before, "the plan changed a resource");
    result
}

fn write_manifests(dir: &Path, files: &[(&str, &str)]) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

fn wait_ready(sb: &Sandbox, resource: &str, name: &str) {
    wait_for(&format!("{resource} {name} Ready"), WAIT, || {
        sb.get_json(resource, name).filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    });
}

#[test]
fn a_plan_shows_creates_no_change_drift_edits_and_prunes_without_ever_writing() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    sb.connect_workspaces();
    let op = Operator::start(&sb, "10m");
    wait_ready(&sb, "connection", "secrets");
    wait_ready(&sb, "connection", "workspaces");
    let password = format!("pw-{}", unique_token());
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: app-vars, namespace: default}}\nstringData: {{password: {password}}}\n"
    ));
    let dir = sb.dir.path().join("manifests");
    let d = dir.to_str().unwrap().to_string();
    write_manifests(
        &dir,
        &[
            ("policy.yaml", POLICY),
            ("user.yaml", USER),
            ("workspace.yaml", WORKSPACE),
        ],
    );

    // A fresh cluster: three creates, the sensitive variable only as "would be sent".
    let (code, out, err) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}\n{err}");
    for line in [
        "+ create SecretsPolicy default/app-read",
        "+ create IdpUser default/alice",
        "+ create Workspace default/app",
        "write-only fields: (sensitive: would be sent)",
        "Plan: 3 to create, 0 to update, 0 to adopt, 0 to delete, 0 unchanged.",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert!(!out.contains(&password) && !err.contains(&password));
    assert_eq!(
        versions(&sb),
        vec![None, None, None],
        "the dry run created something"
    );

    // Applied and Ready: nothing to do, and the sensitive value is known to be unchanged.
    sb.kubectl_ok(&["apply", "-f", &d]);
    for (r, n) in OBJECTS {
        wait_ready(&sb, r, n);
    }
    let (code, out, err) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("= no change Workspace default/app"), "{out}");
    assert!(
        out.contains("write-only fields: (sensitive: unchanged)"),
        "{out}"
    );
    assert!(out.contains("0 to create, 0 to update, 0 to adopt, 0 to delete, 3 unchanged"));
    let (code, json_out, _) = read_only_plan(&sb, &["-f", &d, "-o", "json"]);
    assert_eq!(code, 0);
    let parsed: Value = serde_json::from_str(&json_out).expect("plan -o json is JSON");
    assert_eq!(parsed["summary"]["unchanged"], 3, "{json_out}");
    assert!(parsed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["outcome"] == "no-change" && r["remoteId"].is_string()));

    // A remote edit of the policy: the drifted field, old → new.
    let (status, _) = sb.secrets(
        "PUT",
        "/v1/sys/policies/acl/app-read",
        Some(json!({"policy": "path \"evil/*\" { capabilities = [\"sudo\"] }"})),
    );
    assert!(status < 300);
    let (code, out, err) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        out.contains("~ update SecretsPolicy default/app-read"),
        "{out}"
    );
    assert!(
        out.contains(r#"policy: "path \"evil/*\" { capabilities = [\"sudo\"] }" → "path \"secret/app/*\" { capabilities = [\"read\"] }""#),
        "{out}"
    );

    // An edited manifest: the update, field by field; the same as Markdown.
    write_manifests(
        &dir,
        &[
            ("policy.yaml", POLICY),
            ("user.yaml", &USER.replace("[ops]", "[ops, dev]")),
            (
                "workspace.yaml",
                &WORKSPACE.replace("the app", "the app, edited"),
            ),
        ],
    );
    let (code, out, err) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.contains("~ update Workspace default/app"), "{out}");
    assert!(
        out.contains(r#"description: "the app" → "the app, edited""#),
        "{out}"
    );
    assert!(out.contains(r#"groups: "ops" → "dev, ops""#), "{out}");
    let (code, md, _) = read_only_plan(&sb, &["-f", &d, "-o", "markdown"]);
    assert_eq!(code, 2);
    assert!(
        md.starts_with(
            "**Quartet plan:** 0 to create, 3 to update, 0 to adopt, 0 to delete, 0 unchanged"
        ),
        "{md}"
    );
    assert!(md.contains("<details><summary><code>~</code> update Workspace default/app</summary>"));

    // A rotated Secret: the sensitive variable would be sent, its value never shown. (The
    // operator, which would send it at once, is stopped first.)
    op.stop();
    let rotated = format!("pw-{}", unique_token());
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: app-vars, namespace: default}}\nstringData: {{password: {rotated}}}\n"
    ));
    write_manifests(
        &dir,
        &[("policy.yaml", POLICY), ("workspace.yaml", WORKSPACE)],
    );
    // The user's file is gone: with the selector it is a delete, with its deletionPolicy.
    let (code, out, err) = read_only_plan(&sb, &["-f", &d, "--prune-selector", "plan=e2e"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        out.contains("- delete IdpUser default/alice (deletionPolicy Delete)"),
        "{out}"
    );
    assert!(
        out.contains("write-only fields: (sensitive: would be sent)"),
        "{out}"
    );
    for secret in [&password, &rotated] {
        assert!(!out.contains(secret.as_str()) && !err.contains(secret.as_str()));
    }
    // One resource of the cluster as it stands: the drift its next reconcile would correct.
    let (code, out, err) = read_only_plan(&sb, &["--resource", "secretspolicy/app-read"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        out.contains("~ update SecretsPolicy default/app-read"),
        "{out}"
    );
    assert!(out.contains("Plan: 0 to create, 1 to update"), "{out}");

    // An object that already exists in the service, not yet recorded: adopted.
    let (status, _) = sb.secrets(
        "PUT",
        "/v1/sys/policies/acl/pre",
        Some(json!({"policy": "path \"pre/*\" { capabilities = [\"read\"] }"})),
    );
    assert!(status < 300);
    let pre = sb.dir.path().join("pre.yaml");
    std::fs::write(&pre, POLICY.replace("name: app-read", "name: pre")).unwrap();
    let (code, out, err) = read_only_plan(&sb, &["-f", pre.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.contains("> adopt SecretsPolicy default/pre"), "{out}");
    assert!(out.contains("policy: "), "{out}");

    // Without the selector, nothing is pruned.
    let (_, out, _) = read_only_plan(&sb, &["-f", &d]);
    assert!(!out.contains("delete IdpUser"), "{out}");

    // A reference that does not exist blocks the resource (exit 1), read from stdin; a new
    // WorkspaceRun is a create that starts a run.
    let other = format!(
        "{}---\n{}",
        WORKSPACE
            .replace("name: app,", "name: other,")
            .replace("description: the app", "connectionRef: {name: nowhere}"),
        "apiVersion: workspaces.quartet.dev/v1alpha1\nkind: WorkspaceRun\n\
         metadata: {name: deploy, namespace: default}\n\
         spec: {workspaceRef: {name: app}, message: from the plan test}\n"
    );
    let m = marks(&sb);
    let out = Command::new(BIN)
        .args([
            "plan",
            "--kubeconfig",
            sb.kubeconfig.to_str().unwrap(),
            "-f",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(other.as_bytes())?;
            c.wait_with_output()
        })
        .expect("plan from stdin");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("! blocked Workspace default/other") && text.contains("nowhere"),
        "{text}"
    );
    assert!(
        text.contains("+ create WorkspaceRun default/deploy")
            && text.contains("triggers: would start the WorkspaceRun's operation"),
        "{text}"
    );
    assert_eq!(writes_since(&sb, &m), Vec::<String>::new());
    assert!(sb.get_json("workspacerun", "deploy").is_none());

    // --connection puts every resource on one Connection, whatever its connectionRef.
    let file = sb.dir.path().join("other.yaml");
    std::fs::write(&file, &other).unwrap();
    let (code, out, err) = read_only_plan(
        &sb,
        &[
            "-f",
            file.to_str().unwrap(),
            "--connection",
            "default/workspaces",
        ],
    );
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.contains("+ create Workspace default/other"), "{out}");
}

/// `quartet plan --address` with the token in `QUARTET_TOKEN`: one service, no cluster.
fn plan_direct(address: &str, token: &str, extra: &[&str], file: &Path) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(["plan", "--address", address, "-f", file.to_str().unwrap()])
        .args(extra)
        .env("QUARTET_TOKEN", token)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run quartet plan");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_plan_by_address_reads_one_service_without_a_cluster_and_never_writes() {
    let sb = Sandbox::start(&[]);
    let file = sb.dir.path().join("policy.yaml");
    std::fs::write(&file, POLICY).unwrap();
    let m = marks(&sb);
    let (code, out, err) = plan_direct(sb.url("secrets"), &sb.root_token, &[], &file);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        out.contains("+ create SecretsPolicy default/app-read"),
        "{out}"
    );
    let (status, _) = sb.secrets(
        "PUT",
        "/v1/sys/policies/acl/app-read",
        Some(json!({"policy": "path \"old/*\" { capabilities = [\"read\"] }"})),
    );
    assert!(status < 300);
    let m2 = marks(&sb);
    let (code, out, err) = plan_direct(sb.url("secrets"), &sb.root_token, &[], &file);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        out.contains("> adopt SecretsPolicy default/app-read"),
        "{out}"
    );
    assert!(out.contains(r#"policy: "path \"old/*\""#), "{out}");
    assert_eq!(writes_since(&sb, &m2), Vec::<String>::new());
    assert_eq!(
        writes_since(&sb, &m),
        vec!["secrets: PUT /v1/sys/policies/acl/app-read".to_string()],
        "only the test's own edit"
    );
    assert!(!out.contains(&sb.root_token) && !err.contains(&sb.root_token));

    // Without a token, a sentence and exit 1.
    let out = Command::new(BIN)
        .args([
            "plan",
            "--address",
            sb.url("secrets"),
            "-f",
            file.to_str().unwrap(),
        ])
        .env_remove("QUARTET_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("QUARTET_TOKEN"));
}

#[test]
fn a_plan_by_address_works_against_a_real_openbao() {
    let bao = support::openbao::OpenBao::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, POLICY).unwrap();
    let header = ["--token-header", "X-Vault-Token"];
    let (code, out, err) = plan_direct(&bao.addr, &bao.root_token, &header, &file);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        out.contains("+ create SecretsPolicy default/app-read"),
        "{out}"
    );
    let (status, _) = bao.call(
        "PUT",
        "/v1/sys/policies/acl/app-read",
        Some(json!({"policy": "path \"secret/app/*\" { capabilities = [\"read\"] }"})),
    );
    assert!(status < 300);
    let (code, out, err) = plan_direct(&bao.addr, &bao.root_token, &header, &file);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        out.contains("> adopt SecretsPolicy default/app-read"),
        "{out}"
    );
    assert!(
        !out.contains("policy:"),
        "the same text is no change: {out}"
    );
    let writes: Vec<_> = bao
        .requests()
        .into_iter()
        .filter(|(op, p)| !matches!(op.as_str(), "read" | "list") && p.starts_with("sys/policies"))
        .collect();
    assert_eq!(
        writes,
        vec![(
            "update".to_string(),
            "sys/policies/acl/app-read".to_string()
        )],
        "only the test's own write"
    );
}

#[test]
fn a_plan_of_every_example_on_a_fresh_cluster_creates_each_kind_without_a_write() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    for (service, extra) in [
        ("secrets", ""),
        ("workspaces", ", organization: quartet"),
        ("catalog", ""),
        ("scheduler", ""),
    ] {
        sb.apply_ok(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {service}-token, namespace: default}}\nstringData: {{token: {}}}\n---\n\
             apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: {service}, namespace: default}}\n\
             spec: {{service: {service}, address: \"{}\", tokenSecretRef: {{name: {service}-token, key: token}}{extra}}}\n",
            sb.root_token,
            sb.url(service)
        ));
    }
    // The examples without their Connections (the cluster's point at the sandbox); the
    // Secrets they reference are in the cluster, as a plan expects them.
    let dir = sb.dir.path().join("examples");
    std::fs::create_dir_all(&dir).unwrap();
    let mut secret_values = Vec::new();
    for e in std::fs::read_dir(repo_root().join("examples")).unwrap() {
        let path = e.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        if file.starts_with("connection") || !file.ends_with(".yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for doc in text.split("\n---") {
            // A Secret's namespace too (the ClusterConnection example's is the operator's).
            if doc
                .lines()
                .any(|l| l.trim_end() == "kind: Secret" || l.trim_end() == "kind: Namespace")
            {
                sb.apply_ok(doc);
                let secret: Value = serde_yaml::from_str(doc).unwrap();
                for v in secret["stringData"]
                    .as_object()
                    .into_iter()
                    .flat_map(|m| m.values())
                {
                    secret_values.push(v.as_str().unwrap().to_string());
                }
            }
        }
        std::fs::copy(&path, dir.join(&file)).unwrap();
    }
    let (code, out, err) = read_only_plan(&sb, &["-f", dir.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 2, "{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    let resources = plan["resources"].as_array().unwrap();
    assert!(resources.iter().all(|r| r["outcome"] == "create"), "{out}");
    let kinds: std::collections::BTreeSet<&str> = resources
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    let listed = sb.kubectl_ok(&["get", "crd", "-o", "jsonpath={.items[*].spec.names.kind}"]);
    for kind in listed.split_whitespace().filter(|k| *k != "Connection") {
        assert!(kinds.contains(kind), "no plan of a {kind} in:\n{out}");
    }
    let dr = resources
        .iter()
        .find(|r| r["kind"] == "DrReplication")
        .unwrap();
    assert!(dr["destructive"][0]
        .as_str()
        .unwrap()
        .starts_with("allowSecondaryWipe"));
    assert_eq!(
        sb.kubectl_ok(&["get", "quartet", "-A", "-o", "name"])
            .trim(),
        [
            "connection.quartet.dev/catalog",
            "connection.quartet.dev/scheduler",
            "connection.quartet.dev/secrets",
            "connection.quartet.dev/workspaces",
        ]
        .join("\n"),
        "the dry runs created something"
    );
}

#[test]
fn a_plan_run_by_an_identity_that_may_not_read_says_in_one_sentence_who_may_not_read_what() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    let dir = sb.dir.path().join("manifests");
    write_manifests(&dir, &[("policy.yaml", POLICY)]);
    // A pull request's job with a token of its own and no role bound yet.
    let ci = sb.service_account_kubeconfig("default", "ci");
    let (code, _, stderr) = plan_in(ci.as_os_str(), &dir);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("forbidden: ")
            && stderr.contains("User \"system:serviceaccount:default:ci\" cannot"),
        "{stderr}"
    );
    for dump in ["ErrorResponse", "Status {", "ApiError", "operator's"] {
        assert!(!stderr.contains(dump), "{dump} in: {stderr}");
    }
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn a_kubeconfig_list_in_kubeconfig_is_merged_as_kubectl_merges_it() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    let dir = sb.dir.path().join("manifests");
    write_manifests(&dir, &[("policy.yaml", POLICY)]);
    // A file that does not exist (skipped), one with another cluster and no current context,
    // then the sandbox's, whose current context is the one used.
    let other = sb.dir.path().join("other.kubeconfig");
    std::fs::write(
        &other,
        "apiVersion: v1\nkind: Config\nclusters: [{name: other, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
         users: [{name: other, user: {token: other}}]\ncontexts: [{name: other, context: {cluster: other, user: other}}]\n",
    )
    .unwrap();
    let missing = sb.dir.path().join("missing.kubeconfig");
    let list = std::env::join_paths([missing.as_path(), other.as_path(), sb.kubeconfig.as_path()])
        .unwrap();
    let (code, stdout, stderr) = plan_in(&list, &dir);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("+ create SecretsPolicy default/app-read"),
        "{stdout}"
    );
}

/// A SecretsPolicy of `name` in `ns` reading `path`, with more `spec` fields.
fn policy_in(ns: &str, name: &str, path: &str, spec: &str) -> String {
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec: {{type: acl, policy: 'path \"{path}\" {{ capabilities = [\"read\"] }}'{spec}}}\n"
    )
}

/// A plan says what the reconcile would do, not what a naive diff says: a suspended resource
/// makes no call (plan: no change, suspended), drift under `driftPolicy: Report` is left and
/// reported (no change, the drifted fields named), and the resources of a Namespace the same
/// manifests create are planned (not blocked by a dry run the cluster cannot make yet).
#[test]
fn a_plan_acts_as_the_reconcile_would_for_suspended_and_drift_reporting_resources_and_new_namespaces(
) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    let op = Operator::start(&sb, "5m");
    let reported = policy_in("default", "reported", "a/*", ", driftPolicy: Report");
    let paused = policy_in("default", "paused", "b/*", "");
    sb.apply_ok(&reported);
    sb.apply_ok(&paused);
    wait_ready(&sb, "secretspolicy", "reported");
    wait_ready(&sb, "secretspolicy", "paused");
    let paused = policy_in("default", "paused", "b/*", ", suspend: true");
    sb.apply_ok(&paused);
    wait_for("paused suspended", WAIT, || {
        sb.get_json("secretspolicy", "paused").filter(|o| {
            o["status"]["observedGeneration"] == o["metadata"]["generation"]
                && condition(o, "Ready").is_some_and(|c| c["reason"] == "Suspended")
        })
    });
    for name in ["reported", "paused"] {
        let (status, _) = sb.secrets(
            "PUT",
            &format!("/v1/sys/policies/acl/{name}"),
            Some(json!({"policy": "path \"evil/*\" { capabilities = [\"sudo\"] }"})),
        );
        assert!(status < 300);
    }
    let dir = sb.dir.path().join("manifests");
    write_manifests(
        &dir,
        &[
            ("reported.yaml", &reported),
            ("paused.yaml", &paused),
            (
                "later.yaml",
                &policy_in("default", "later", "c/*", ", suspend: true"),
            ),
            (
                "team.yaml",
                &format!(
                    "apiVersion: v1\nkind: Namespace\nmetadata: {{name: team-new}}\n---\n{}",
                    policy_in("team-new", "team-read", "team/*", "")
                ),
            ),
        ],
    );
    // The new namespace's policy resolves its Connection and token from the manifests.
    std::fs::write(
        dir.join("team-connection.yaml"),
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: secrets-token, namespace: team-new}}\nstringData: {{token: {}}}\n---\n\
             apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: secrets, namespace: team-new}}\n\
             spec: {{service: secrets, address: \"{}\", tokenSecretRef: {{name: secrets-token, key: token}}}}\n",
            sb.root_token,
            sb.url("secrets")
        ),
    )
    .unwrap();
    let (code, out, err) = read_only_plan(&sb, &["-f", dir.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 2, "{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    let entry = |ns: &str, name: &str| {
        plan["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["namespace"] == ns && r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no plan of {ns}/{name}:\n{out}"))
    };
    let r = entry("default", "reported");
    assert_eq!(r["outcome"], "no-change", "{r}");
    let note = r["message"].as_str().unwrap();
    assert!(
        note.contains("drifted in the service: policy") && note.contains("driftPolicy: Report"),
        "{r}"
    );
    for name in ["paused", "later"] {
        let r = entry("default", name);
        assert_eq!(r["outcome"], "no-change", "{r}");
        assert!(r["message"].as_str().unwrap().contains("suspended"), "{r}");
    }
    assert_eq!(entry("team-new", "team-read")["outcome"], "create", "{out}");
    assert!(
        sb.get_json("namespace", "team-new").is_none(),
        "the plan created the namespace"
    );
    op.stop();
}

/// A plan's command line: a mistyped flag, a selector the API server refuses and `--address`
/// with kinds of several services are errors (exit 1), never a plan with changes (exit 2) or
/// one that silently prunes nothing.
#[test]
fn a_plan_refuses_a_mistyped_flag_a_bad_prune_selector_and_mixed_services_by_address_with_exit_1() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    let file = sb.dir.path().join("policy.yaml");
    std::fs::write(&file, POLICY).unwrap();
    let f = file.to_str().unwrap();
    let (code, _, err) = plan(&sb, &["-f", f, "--prune-selecter", "plan=e2e"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--prune-selecter"), "{err}");
    let (code, out, err) = plan(&sb, &["-f", f, "--prune-selector", "!!!bad"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("--prune-selector \"!!!bad\" is not a label selector"),
        "{err}"
    );
    let mixed = sb.dir.path().join("mixed.yaml");
    std::fs::write(&mixed, format!("{POLICY}---\n{WORKSPACE}")).unwrap();
    let m = marks(&sb);
    let (code, out, err) = plan_direct(sb.url("secrets"), &sb.root_token, &[], &mixed);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("resources of several: secrets (SecretsPolicy); workspaces (Workspace)"),
        "{err}"
    );
    assert!(
        sb.requests("secrets", m[0].1).0.is_empty(),
        "the plan called the service"
    );
}
