//! `quartet plan` kind by kind: the built binary against `quartet sandbox --kubeconfig` with
//! `quartet run` reconciling, over the examples of every kind Quartet owns remotely. One table
//! of edits (a manifest change, the field, its old and new value) drives the update checks;
//! the same manifests give the create, no-change and adopt checks. Every plan is checked to
//! send only reads to the services and to change nothing in Kubernetes.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::*;

const WAIT: Duration = Duration::from_secs(90);

/// The example files holding the owned kinds (and the Secrets they read).
const FILES: &[&str] = &[
    "directory.yaml",
    "idp-auth-method.yaml",
    "idp-group.yaml",
    "idp-user.yaml",
    "secrets-policy.yaml",
    "totp-method.yaml",
    "transform.yaml",
    "workspace.yaml",
];

/// Every owned kind with its example: (kind, kubectl resource, name).
const OWNED: &[(&str, &str, &str)] = &[
    ("AdEngine", "adengine", "ad"),
    ("AdRole", "adrole", "app"),
    ("AdLibrarySet", "adlibraryset", "team"),
    ("IdpAuthMethod", "idpauthmethod", "idp"),
    ("IdpGroup", "idpgroup", "ops"),
    ("IdpUser", "idpuser", "alice"),
    ("SecretsPolicy", "secretspolicy", "app-read"),
    ("TotpMethod", "totpmethod", "corp-totp"),
    ("TransformRole", "transformrole", "payments"),
    ("Transformation", "transformation", "ccn-fpe"),
    ("Transformation", "transformation", "ccn-token"),
    ("TransformTemplate", "transformtemplate", "ccn"),
    ("TransformAlphabet", "transformalphabet", "digits"),
    ("TransformStore", "transformstore", "tokens-db"),
    ("Workspace", "workspace", "example-app"),
];

/// One edit of a manifest and the change the plan must show: (file, from, to, kind, name,
/// field, old, new).
type Edit = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

const EDITS: &[Edit] = &[
    (
        "directory.yaml",
        "url: ldaps://dc1.example.com",
        "url: ldaps://dc2.example.com",
        "AdEngine",
        "ad",
        "url",
        "ldaps://dc1.example.com",
        "ldaps://dc2.example.com",
    ),
    (
        "directory.yaml",
        "serviceAccountName: app@example.com",
        "serviceAccountName: app2@example.com",
        "AdRole",
        "app",
        "serviceAccountName",
        "app@example.com",
        "app2@example.com",
    ),
    (
        "directory.yaml",
        "maxTtl: 8h\n",
        "maxTtl: 4h\n",
        "AdLibrarySet",
        "team",
        "maxTtl",
        "28800",
        "14400",
    ),
    (
        "idp-auth-method.yaml",
        "orgName: example",
        "orgName: example-two",
        "IdpAuthMethod",
        "idp",
        "orgName",
        "example",
        "example-two",
    ),
    (
        "idp-group.yaml",
        "[app-read, deploy]",
        "[app-read]",
        "IdpGroup",
        "ops",
        "policies",
        "app-read, deploy",
        "app-read",
    ),
    (
        "idp-user.yaml",
        "groups: [ops]",
        "groups: [ops, dev]",
        "IdpUser",
        "alice",
        "groups",
        "ops",
        "dev, ops",
    ),
    (
        "secrets-policy.yaml",
        "capabilities = [\"read\", \"list\"]",
        "capabilities = [\"read\"]",
        "SecretsPolicy",
        "app-read",
        "policy",
        "path \"secret/data/app/*\" {\n  capabilities = [\"read\", \"list\"]\n}\n",
        "path \"secret/data/app/*\" {\n  capabilities = [\"read\"]\n}\n",
    ),
    (
        "totp-method.yaml",
        "issuer: Example Corp",
        "issuer: Example Inc",
        "TotpMethod",
        "corp-totp",
        "issuer",
        "Example Corp",
        "Example Inc",
    ),
    (
        "transform.yaml",
        "transformations: [ccn-fpe, ccn-token]",
        "transformations: [ccn-fpe]",
        "TransformRole",
        "payments",
        "transformations",
        "ccn-fpe, ccn-token",
        "ccn-fpe",
    ),
    (
        "transform.yaml",
        "allowedRoles: [payments]\n  deletionAllowed: true      #",
        "allowedRoles: [payments, batch]\n  deletionAllowed: true      #",
        "Transformation",
        "ccn-fpe",
        "allowedRoles",
        "payments",
        "batch, payments",
    ),
    (
        "transform.yaml",
        "maxTtl: 24h",
        "maxTtl: 12h",
        "Transformation",
        "ccn-token",
        "maxTtl",
        "86400",
        "43200",
    ),
    (
        "transform.yaml",
        "encodeFormat: '$1-$2-$3-$4'",
        "encodeFormat: '$1 $2 $3 $4'",
        "TransformTemplate",
        "ccn",
        "encodeFormat",
        "$1-$2-$3-$4",
        "$1 $2 $3 $4",
    ),
    (
        "transform.yaml",
        "alphabet: \"0123456789\"",
        "alphabet: \"0123456789ab\"",
        "TransformAlphabet",
        "digits",
        "alphabet",
        "0123456789",
        "0123456789ab",
    ),
    (
        "transform.yaml",
        "maxOpenConnections: 8",
        "maxOpenConnections: 4",
        "TransformStore",
        "tokens-db",
        "maxOpenConnections",
        "8",
        "4",
    ),
    (
        "workspace.yaml",
        "description: Infrastructure of the example app",
        "description: Infrastructure of the example app, edited",
        "Workspace",
        "example-app",
        "description",
        "Infrastructure of the example app",
        "Infrastructure of the example app, edited",
    ),
];

/// The values of the Secrets in the examples: never in a plan's output.
const SECRET_VALUES: &[&str] = &["dev-bind-password", "replace-me", "change-me", "tokens_app"];

fn run_plan(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("plan").args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run quartet plan");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    for v in SECRET_VALUES {
        assert!(
            !stdout.contains(v) && !stderr.contains(v),
            "a Secret value in the plan:\n{stdout}\n{stderr}"
        );
    }
    (out.status.code().unwrap_or(-1), stdout, stderr)
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

/// Every Quartet object and Secret of the cluster with its resourceVersion.
fn cluster(sb: &Sandbox) -> BTreeMap<String, String> {
    let text = sb.kubectl_ok(&["get", "quartet,secrets", "-A", "-o", "json"]);
    let list: Value = serde_json::from_str(&text).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                format!(
                    "{}/{}/{}",
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                ),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// A plan against the sandbox's cluster (`-o json`) that must leave the services and the
/// cluster as they were: exit code, the parsed plan, stdout, stderr.
fn read_only_plan(sb: &Sandbox, args: &[&str]) -> (i32, Value, String) {
    let before = cluster(sb);
    let m = marks(sb);
    let kubeconfig = sb.kubeconfig.to_str().unwrap();
    let mut all = vec!["--kubeconfig", kubeconfig, "-o", "json"];
    all.extend_from_slice(args);
    let (code, out, err) = run_plan(&all, &[]);
    assert_eq!(
        writes_since(sb, &m),
        Vec::<String>::new(),
        "the plan wrote to a service:\n{out}"
    );
    assert_eq!(cluster(sb), before, "the plan changed the cluster");
    let plan = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (code, plan, format!("{out}\n{err}"))
}

fn entry<'a>(plan: &'a Value, kind: &str, name: &str) -> &'a Value {
    plan["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind && r["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {plan:#}"))
}

fn copy_examples(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for f in FILES {
        std::fs::copy(repo_root().join("examples").join(f), dir.join(f)).unwrap();
    }
}

fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{from:?} not in {file}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// A Connection (and its token Secret) to each of `services` of the sandbox.
fn connect(sb: &Sandbox, services: &[&str]) {
    for service in services {
        let extra = if *service == "workspaces" {
            ", organization: quartet"
        } else {
            ""
        };
        sb.apply_ok(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {service}-token, namespace: default}}\nstringData: {{token: {}}}\n---\n\
             apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: {service}, namespace: default}}\n\
             spec: {{service: {service}, address: \"{}\", tokenSecretRef: {{name: {service}-token, key: token}}{extra}}}\n",
            sb.root_token,
            sb.url(service)
        ));
    }
}

/// The secrets and workspace services' Connections, and the VCS connection
/// examples/workspace.yaml names (as `quartet dev` seeds it).
fn connect_all(sb: &Sandbox) {
    connect(sb, &["secrets", "workspaces"]);
    let (status, body) = http(
        "POST",
        &format!("{}/_sandbox/workspaces/oauth-tokens", sb.url("workspaces")),
        None,
        Some(serde_json::json!({"organization": "quartet", "id": "ot-quartetexample"})),
    );
    assert!(status < 300, "{status} {body}");
    // The directory accounts examples/directory.yaml names (as `quartet dev` seeds them).
    for (upn, dn, password) in [
        (
            "admin@example.com",
            "CN=admin,CN=Users",
            "dev-bind-password",
        ),
        (
            "app@example.com",
            "CN=app,OU=Service Accounts",
            "app-initial",
        ),
        (
            "lib1@example.com",
            "CN=lib1,OU=Service Accounts",
            "lib1-initial",
        ),
        (
            "lib2@example.com",
            "CN=lib2,OU=Service Accounts",
            "lib2-initial",
        ),
    ] {
        let (status, body) = http(
            "PUT",
            &format!("{}/_sandbox/secrets/ad/accounts/{upn}", sb.url("secrets")),
            None,
            Some(
                serde_json::json!({"dn": format!("{dn},DC=example,DC=com"), "password": password}),
            ),
        );
        assert!(status < 300, "{status} {body}");
    }
}

/// The operator, once every Connection is Ready (so it writes nothing during a plan).
fn operator(sb: &Sandbox) -> Operator {
    let op = Operator::start(sb, "10m");
    for service in ["secrets", "workspaces"] {
        wait_for(&format!("Connection {service} Ready"), WAIT, || {
            sb.get_json("connection", service)
                .filter(|o| condition_is(o, "Ready", "True"))
        });
    }
    op
}

#[test]
fn every_owned_kind_plans_create_no_change_each_edited_field_old_to_new_and_adopt_with_only_reads()
{
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    connect_all(&sb);
    let op = operator(&sb);
    let dir = sb.dir.path().join("kinds");
    let d = dir.to_str().unwrap().to_string();
    copy_examples(&dir);

    // A fresh cluster, the Secrets only in the manifests: every owned kind is a create (none
    // blocked for want of a Secret), write-only inputs shown as would be sent.
    let (code, plan, out) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}");
    for (kind, _, name) in OWNED {
        assert_eq!(
            entry(&plan, kind, name)["outcome"],
            "create",
            "{kind} {name}: {out}"
        );
    }
    for (kind, name) in [("AdEngine", "ad"), ("TransformStore", "tokens-db")] {
        assert_eq!(
            entry(&plan, kind, name)["changes"][0]["sensitive"],
            "would be sent",
            "{out}"
        );
    }

    // Applied and Ready: no change for every kind.
    sb.kubectl_ok(&["apply", "-f", &d]);
    for (kind, resource, name) in OWNED {
        wait_for(&format!("{kind} {name} Ready"), WAIT, || {
            sb.get_json(resource, name).filter(|o| {
                condition_is(o, "Ready", "True")
                    && o["status"]["observedGeneration"] == o["metadata"]["generation"]
            })
        });
    }
    // Stopped, so that nothing but the test changes the cluster or the services from here.
    op.stop();
    let (_, plan, out) = read_only_plan(&sb, &["-f", &d]);
    for (kind, _, name) in OWNED {
        let e = entry(&plan, kind, name);
        assert_eq!(e["outcome"], "no-change", "{kind} {name}: {out}");
        assert!(e["remoteId"].is_string(), "{kind} {name}: {out}");
    }

    // The role's credentials Secret gone: the apply would read the credentials again (a read
    // that may rotate them), which the plan reports and does not do.
    sb.kubectl_ok(&["delete", "secret", "app-ad-credentials"]);
    let before = sb.requests("secrets", u64::MAX).1;
    let (code, plan, out) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}");
    let role = entry(&plan, "AdRole", "app");
    assert_eq!(role["outcome"], "update", "{role:#}");
    assert!(
        role["triggers"][0]
            .as_str()
            .unwrap_or_default()
            .starts_with("GET /v1/ad/creds/app"),
        "{role:#}"
    );
    assert!(
        !sb.requests("secrets", before)
            .0
            .iter()
            .any(|(_, p, _)| p.contains("/creds/")),
        "the plan read the credentials"
    );

    // Each edited field, old → new, in one plan of the edited manifests; a changed Secret is
    // would be sent, never shown.
    for (file, from, to, ..) in EDITS {
        edit(&dir, file, from, to);
    }
    edit(
        &dir,
        "transform.yaml",
        "password: change-me",
        "password: rotated-too",
    );
    let (code, plan, out) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}");
    assert!(!out.contains("rotated-too"));
    for (_, _, _, kind, name, field, old, new) in EDITS {
        let e = entry(&plan, kind, name);
        assert_eq!(e["outcome"], "update", "{kind} {name}: {out}");
        let change = e["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["field"] == *field)
            .unwrap_or_else(|| panic!("{kind} {name}: no change of {field} in {e:#}"));
        assert_eq!(
            (change["old"].as_str(), change["new"].as_str()),
            (Some(*old), Some(*new)),
            "{kind} {name} {field}: {e:#}"
        );
    }
    let store = entry(&plan, "TransformStore", "tokens-db");
    assert!(
        store["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["sensitive"] == "would be sent"),
        "{store:#}"
    );

    // The same manifests by address, with no cluster: the objects exist in the service and no
    // status records them, so each is adopted (the Secrets again from the manifests).
    let m = marks(&sb);
    let secrets_files: Vec<String> = FILES
        .iter()
        .filter(|f| **f != "workspace.yaml" && **f != "totp-method.yaml")
        .map(|f| dir.join(f).to_str().unwrap().to_string())
        .collect();
    // A TOTP method is known by its id: adopted through spec.methodId.
    let method_id = sb.get_json("totpmethod", "corp-totp").unwrap()["status"]["remoteId"]
        .as_str()
        .unwrap()
        .to_string();
    let adopt = dir.join("totp-adopt.yaml");
    std::fs::write(
        &adopt,
        format!(
            "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpMethod\n\
             metadata: {{name: corp-totp-adopted, namespace: default}}\n\
             spec: {{issuer: Example Inc, methodId: {method_id}}}\n"
        ),
    )
    .unwrap();
    let mut args = vec!["--address", sb.url("secrets"), "-o", "json"];
    for f in &secrets_files {
        args.extend(["-f", f.as_str()]);
    }
    args.extend(["-f", adopt.to_str().unwrap()]);
    let (_, out, err) = run_plan(&args, &[("QUARTET_TOKEN", sb.root_token.as_str())]);
    assert_eq!(writes_since(&sb, &m), Vec::<String>::new());
    let plan: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    for (kind, _, name) in OWNED {
        if matches!(*kind, "Workspace" | "TotpMethod" | "AdRole") {
            continue;
        }
        let e = entry(&plan, kind, name);
        assert_eq!(e["outcome"], "adopt", "{kind} {name}: {out}");
    }
    // The workspace service by address (the organization in the spec: no Connection names
    // one): the workspace is adopted, its edited description shown.
    edit(
        &dir,
        "workspace.yaml",
        "spec:\n",
        "spec:\n  organization: quartet\n",
    );
    let ws = dir.join("workspace.yaml");
    let (_, ws_out, ws_err) = run_plan(
        &[
            "--address",
            sb.url("workspaces"),
            "-o",
            "json",
            "-f",
            ws.to_str().unwrap(),
        ],
        &[("QUARTET_TOKEN", sb.root_token.as_str())],
    );
    assert_eq!(writes_since(&sb, &m), Vec::<String>::new());
    let ws_plan: Value =
        serde_json::from_str(&ws_out).unwrap_or_else(|e| panic!("{e}: {ws_out}\n{ws_err}"));
    let w = entry(&ws_plan, "Workspace", "example-app");
    assert_eq!(w["outcome"], "adopt", "{w:#}");
    assert!(
        w["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["field"] == "description"),
        "{w:#}"
    );
    let totp = entry(&plan, "TotpMethod", "corp-totp-adopted");
    assert_eq!(totp["outcome"], "adopt", "{totp:#}");
    assert_eq!(totp["remoteId"], method_id.as_str());
    // The edits show on the adopted objects too.
    let e = entry(&plan, "AdEngine", "ad");
    assert!(
        e["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["field"] == "url" && c["new"] == "ldaps://dc2.example.com"),
        "{e:#}"
    );
}

#[test]
fn flagged_outcomes_triggers_a_login_connection_and_admission_refusals_are_planned_without_a_write()
{
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    connect_all(&sb);
    let op = operator(&sb);
    let dir = sb.dir.path().join("flags");
    let d = dir.to_str().unwrap().to_string();
    copy_examples(&dir);
    sb.kubectl_ok(&["apply", "-f", &d]);
    for (kind, resource, name) in [
        ("AdEngine", "adengine", "ad"),
        ("Transformation", "transformation", "ccn-fpe"),
        ("Workspace", "workspace", "example-app"),
    ] {
        wait_for(&format!("{kind} {name} Ready"), WAIT, || {
            sb.get_json(resource, name)
                .filter(|o| condition_is(o, "Ready", "True"))
        });
    }
    op.stop();
    connect(&sb, &["scheduler"]);

    // A root rotation asked for: a trigger, flagged destructive.
    edit(
        &dir,
        "directory.yaml",
        "  ttl: 24h\n",
        "  ttl: 24h\n  rotateRootRequest: \"1\"\n",
    );
    let (code, plan, out) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}");
    let e = entry(&plan, "AdEngine", "ad");
    assert_eq!(e["outcome"], "update", "{e:#}");
    assert!(
        e["triggers"][0]
            .as_str()
            .unwrap_or_default()
            .contains("rotateRootRequest = 1"),
        "{e:#}"
    );
    assert!(
        e["destructive"][0]
            .as_str()
            .unwrap_or_default()
            .starts_with("root rotation"),
        "{e:#}"
    );

    // A DeploymentGate paused: what it would do to the job's deployment; a WorkspaceRun: the
    // run it would start.
    let controls = sb.dir.path().join("controls.yaml");
    std::fs::write(
        &controls,
        "apiVersion: scheduler.quartet.dev/v1alpha1\nkind: DeploymentGate\n\
         metadata: {name: web, namespace: default}\nspec: {jobId: web, paused: true}\n---\n\
         apiVersion: workspaces.quartet.dev/v1alpha1\nkind: WorkspaceRun\n\
         metadata: {name: deploy, namespace: default}\n\
         spec: {workspaceRef: {name: example-app}, message: from the plan}\n",
    )
    .unwrap();
    let (code, plan, out) = read_only_plan(&sb, &["-f", controls.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    let gate = entry(&plan, "DeploymentGate", "web");
    assert!(
        gate["triggers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "paused: would pause the job's active deployment"),
        "{gate:#}"
    );
    let run = entry(&plan, "WorkspaceRun", "deploy");
    assert_eq!(
        run["triggers"][0],
        "would start the WorkspaceRun's operation"
    );

    // Pruned: a transformation (its key deleted) and a workspace deleted with force, each
    // flagged; the plan names only the resources the selector matches.
    sb.kubectl_ok(&["label", "transformation", "ccn-fpe", "plan=prune"]);
    sb.kubectl_ok(&["label", "workspace", "example-app", "plan=prune"]);
    sb.kubectl_ok(&[
        "patch",
        "workspace",
        "example-app",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"deletionMode":"Force"}}"#,
    ]);
    let user = dir.join("idp-user.yaml");
    let (code, plan, out) = read_only_plan(
        &sb,
        &[
            "-f",
            user.to_str().unwrap(),
            "--prune-selector",
            "plan=prune",
        ],
    );
    assert_eq!(code, 2, "{out}");
    assert_eq!(plan["summary"]["delete"], 2, "{out}");
    let t = entry(&plan, "Transformation", "ccn-fpe");
    assert_eq!(t["outcome"], "delete");
    assert!(t["destructive"][0]
        .as_str()
        .unwrap()
        .starts_with("transformation key deletion"));
    let w = entry(&plan, "Workspace", "example-app");
    assert_eq!(w["outcome"], "delete");
    assert!(w["destructive"][0]
        .as_str()
        .unwrap()
        .starts_with("workspace force-delete"));

    // What the API server would refuse at admission is blocked with its reason (exit 1).
    let bad = sb.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\n\
         metadata: {name: bad, namespace: default}\nspec: {type: nonsense, policy: x}\n",
    )
    .unwrap();
    let (code, plan, out) = read_only_plan(&sb, &["-f", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let e = entry(&plan, "SecretsPolicy", "bad");
    assert_eq!(e["outcome"], "blocked");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("the API server would refuse it"),
        "{e:#}"
    );
    assert!(sb.get_json("secretspolicy", "bad").is_none());

    // A Connection that logs in (spec.auth): the plan does not log in (no request at all to
    // the service) and says why the resource is blocked.
    let login = sb.dir.path().join("login.yaml");
    std::fs::write(
        &login,
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: login, namespace: default}}\n\
             stringData: {{password: pw-not-shown}}\n---\n\
             apiVersion: quartet.dev/v1alpha1\nkind: Connection\n\
             metadata: {{name: secrets-idp, namespace: default}}\n\
             spec: {{service: secrets, address: \"{}\", auth: {{idp: {{mount: okta, username: alice, \
             passwordSecretRef: {{name: login, key: password}}}}}}}}\n---\n\
             apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\n\
             metadata: {{name: by-login, namespace: default}}\n\
             spec: {{type: acl, policy: x, connectionRef: {{name: secrets-idp}}}}\n",
            sb.url("secrets")
        ),
    )
    .unwrap();
    let before = sb.requests("secrets", u64::MAX).1;
    let (code, plan, out) = read_only_plan(&sb, &["-f", login.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains("pw-not-shown"));
    let e = entry(&plan, "SecretsPolicy", "by-login");
    assert_eq!(e["outcome"], "blocked", "{e:#}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("logs in (spec.auth), and a plan never logs in"),
        "{e:#}"
    );
    let sent: Vec<_> = sb
        .requests("secrets", before)
        .0
        .into_iter()
        .filter(|(_, p, _)| !p.starts_with("/_sandbox"))
        .collect();
    assert_eq!(sent, vec![], "the plan called the service");
}

/// An edit of an operated kind's manifest (or a Connection's): (file, from, to, kind, name,
/// field, new value or "" when it is not a plain value, what it would trigger or "").
type OperatedEdit = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

const OPERATED_FILES: &[&str] = &[
    "catalog-acl-token.yaml",
    "catalog.yaml",
    "deployment-gate.yaml",
    "dr-replication.yaml",
    "no-code.yaml",
    "totp-enrollment.yaml",
    "workspace-run.yaml",
];

const OPERATED_EDITS: &[OperatedEdit] = &[
    (
        "catalog-acl-token.yaml",
        "rotationInterval: 24h",
        "rotationInterval: 12h",
        "CatalogAclToken",
        "app-catalog-token",
        "rotationInterval",
        "12h",
        "",
    ),
    (
        "catalog.yaml",
        "\n  secretPolicy: Retain",
        "\n  secretPolicy: Owned",
        "CatalogAclBootstrap",
        "catalog-acl",
        "secretPolicy",
        "Owned",
        "",
    ),
    (
        "deployment-gate.yaml",
        "paused: false",
        "paused: true",
        "DeploymentGate",
        "web",
        "paused",
        "true",
        "paused: would pause the job's active deployment",
    ),
    (
        "no-code.yaml",
        "description: Production network",
        "description: Production network, edited",
        "NoCodeWorkspace",
        "network-prod",
        "description",
        "Production network, edited",
        "",
    ),
    (
        "no-code.yaml",
        "options: [eu-west-1, us-east-1]",
        "options: [eu-west-1]",
        "NoCodeModule",
        "network",
        "variableOptions",
        "",
        "",
    ),
    (
        "totp-enrollment.yaml",
        "entityName: alice",
        "entityName: alice\n  regenerate: \"1\"",
        "TotpEnrollment",
        "alice-totp",
        "regenerate",
        "1",
        "regenerate: would replace the TOTP key: codes of the old one stop working",
    ),
    (
        "workspace-run.yaml",
        "planOnly: true",
        "planOnly: true\n  cancel: true",
        "WorkspaceRun",
        "example-app-plan",
        "cancel",
        "true",
        "cancel: would cancel the run",
    ),
    (
        "dr-replication.yaml",
        "allowSecondaryWipe: true",
        "allowSecondaryWipe: true\n  failover: {promote: dc2}",
        "DrReplication",
        "dr",
        "failover",
        "",
        "failover: would make dc2 the primary",
    ),
    (
        "checkout.yaml",
        "secretName: build-account",
        "secretName: build-account\n  ttl: 2h",
        "AdCheckout",
        "build",
        "ttl",
        "2h",
        "",
    ),
    (
        "connection.yaml",
        "timeoutSeconds: 5",
        "timeoutSeconds: 7",
        "Connection",
        "secrets",
        "timeoutSeconds",
        "7",
        "",
    ),
];

#[test]
fn every_operated_kind_and_a_connection_plan_create_no_change_and_each_edit_with_what_it_triggers()
{
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    connect(&sb, &["secrets", "workspaces", "catalog", "scheduler"]);
    let dir = sb.dir.path().join("operated");
    let d = dir.to_str().unwrap().to_string();
    std::fs::create_dir_all(&dir).unwrap();
    for f in OPERATED_FILES {
        std::fs::copy(repo_root().join("examples").join(f), dir.join(f)).unwrap();
    }
    let directory = std::fs::read_to_string(repo_root().join("examples/directory.yaml")).unwrap();
    let checkout = directory
        .split("\n---")
        .find(|doc| doc.contains("kind: AdCheckout"))
        .unwrap();
    std::fs::write(dir.join("checkout.yaml"), checkout).unwrap();

    // Fresh: each a create; a new run would start.
    let (code, plan, out) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}");
    for (_, _, _, kind, name, ..) in OPERATED_EDITS.iter().filter(|e| e.3 != "Connection") {
        assert_eq!(entry(&plan, kind, name)["outcome"], "create", "{out}");
    }
    assert_eq!(
        entry(&plan, "WorkspaceRun", "example-app-plan")["triggers"][0],
        "would start the WorkspaceRun's operation"
    );

    // Applied (nothing reconciles here): no change, the secondary wipe still flagged.
    sb.kubectl_ok(&["apply", "-f", &d]);
    let (code, plan, out) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 0, "{out}");
    assert!(plan["resources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["outcome"] == "no-change"));
    assert!(entry(&plan, "DrReplication", "dr")["destructive"][0]
        .as_str()
        .unwrap()
        .starts_with("allowSecondaryWipe"));

    // Each edit: the field, and what the change would trigger.
    std::fs::write(
        dir.join("connection.yaml"),
        format!(
            "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: secrets, namespace: default}}\n\
             spec: {{service: secrets, address: \"{}\", tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 5}}\n",
            sb.url("secrets")
        ),
    )
    .unwrap();
    for (file, from, to, ..) in OPERATED_EDITS {
        edit(&dir, file, from, to);
    }
    let (code, plan, out) = read_only_plan(&sb, &["-f", &d]);
    assert_eq!(code, 2, "{out}");
    for (_, _, _, kind, name, field, new, trigger) in OPERATED_EDITS {
        let e = entry(&plan, kind, name);
        assert_eq!(e["outcome"], "update", "{kind} {name}: {e:#}");
        let change = e["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["field"] == *field)
            .unwrap_or_else(|| panic!("{kind} {name}: no change of {field} in {e:#}"));
        if !new.is_empty() {
            assert_eq!(change["new"], *new, "{kind} {name}: {e:#}");
        }
        if !trigger.is_empty() {
            assert!(
                e["triggers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t == trigger),
                "{kind} {name}: {e:#}"
            );
        }
    }

    // An immutable field changed: what admission would refuse, with its message.
    let bad = sb.dir.path().join("immutable.yaml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(dir.join("catalog.yaml"))
            .unwrap()
            .replace("catalog-management-token", "another-token"),
    )
    .unwrap();
    let (code, plan, out) = read_only_plan(&sb, &["-f", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let e = entry(&plan, "CatalogAclBootstrap", "catalog-acl");
    assert_eq!(e["outcome"], "blocked");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("secretName is immutable"),
        "{e:#}"
    );
}
