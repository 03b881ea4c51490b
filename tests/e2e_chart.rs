//! Quartet as production runs it: the chart installed by the real helm, the operator running as
//! the chart's ServiceAccount with exactly the rights the chart's RBAC gives it (a TokenRequest
//! token in its kubeconfig, no admin credentials; the dev API server enforces RBAC for it), and
//! every example manifest applied with kubectl until one resource of every kind is Ready.
//!
//! The cluster is `quartet sandbox --kubeconfig` with three secrets clusters (for the
//! DrReplication example), seeded as `quartet dev` seeds it (Connections, the directory accounts,
//! the no-code module, the catalog's `kubernetes` auth method trusting this API server's
//! service-account keys, the scheduler job `web`) plus the identity entity the TotpEnrollment
//! example names. The chart's Deployment gets no Pods (the dev API server runs none); the test
//! starts the operator process itself, as that Deployment would.

use crate::support;
use crate::support::helm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use rsa::pkcs8::EncodePublicKey;
use serde_json::{json, Value};
use support::*;

const RELEASE_NS: &str = "quartet-system";
const OPERATOR_USER: &str = "system:serviceaccount:quartet-system:quartet";
const ORGANIZATION: &str = "quartet";
const WAIT: Duration = Duration::from_secs(90);

/// The operator process; killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn b64url(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .expect("base64url")
}

fn post(url: &str, body: Value) -> Value {
    let (s, b) = http("POST", url, None, Some(body));
    assert!((200..300).contains(&s), "POST {url}: {s} {b}");
    b
}

/// What `quartet dev` seeds, done from outside: the Connections and their token Secret, the
/// DR unseal key shares, the directory accounts, the no-code module, the catalog's auth method
/// for this cluster's ServiceAccounts and the scheduler job; and the entity `alice`.
fn seed(sb: &Sandbox) {
    let secrets = sb.url("secrets[0]").to_string();
    let mut yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: quartet-sandbox-tokens, namespace: default}}\nstringData: {{token: {}}}\n",
        sb.root_token
    );
    let connections = [
        ("secrets", "secrets", secrets.clone()),
        ("secrets-1", "secrets", sb.url("secrets[1]").to_string()),
        ("secrets-2", "secrets", sb.url("secrets[2]").to_string()),
        ("workspaces", "workspaces", sb.url("workspaces").to_string()),
        ("catalog", "catalog", sb.url("catalog").to_string()),
        ("scheduler", "scheduler", sb.url("scheduler").to_string()),
    ];
    for (name, service, url) in &connections {
        let org = if *service == "workspaces" {
            format!(", organization: {ORGANIZATION}")
        } else {
            String::new()
        };
        yaml.push_str(&format!(
            "---\napiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: {name}, namespace: default}}\n\
             spec: {{service: {service}, address: \"{url}\", tokenSecretRef: {{name: quartet-sandbox-tokens, key: token}}{org}}}\n"
        ));
    }
    // A ClusterConnection (its token Secret read from `default`, which this ServiceAccount may
    // read in the all-namespaces mode).
    yaml.push_str(&format!(
        "---\napiVersion: quartet.dev/v1alpha1\nkind: ClusterConnection\nmetadata: {{name: platform-secrets}}\n\
         spec: {{service: secrets, address: \"{secrets}\", secretNamespace: default, tokenSecretRef: {{name: quartet-sandbox-tokens, key: token}}, namespaces: [default]}}\n"
    ));
    let (_, keys) = http(
        "GET",
        &format!("{secrets}/_sandbox/secrets/keys"),
        None,
        None,
    );
    let shares: BTreeMap<String, Value> = keys["keys"]
        .as_array()
        .expect("unseal keys")
        .iter()
        .enumerate()
        .map(|(i, k)| (format!("share-{}", i + 1), k.clone()))
        .collect();
    yaml.push_str(&format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: dr-key-shares, namespace: default}}\nstringData: {}\n",
        json!(shares)
    ));
    sb.apply_ok(&yaml);

    for (upn, dn, password) in [
        (
            "admin@example.com",
            "CN=admin,CN=Users,DC=example,DC=com",
            "dev-bind-password",
        ),
        (
            "app@example.com",
            "CN=app,OU=Service Accounts,DC=example,DC=com",
            "app-initial",
        ),
        (
            "lib1@example.com",
            "CN=lib1,OU=Service Accounts,DC=example,DC=com",
            "lib1-initial",
        ),
        (
            "lib2@example.com",
            "CN=lib2,OU=Service Accounts,DC=example,DC=com",
            "lib2-initial",
        ),
    ] {
        let (s, b) = http(
            "PUT",
            &format!("{secrets}/_sandbox/secrets/ad/accounts/{upn}"),
            None,
            Some(json!({"dn": dn, "password": password})),
        );
        assert!((200..300).contains(&s), "directory account {upn}: {s} {b}");
    }
    post(
        &format!(
            "{}/_sandbox/workspaces/registry-modules",
            sb.url("workspaces")
        ),
        json!({"id": "mod-quartetexample", "organization": ORGANIZATION, "name": "network", "provider": "aws",
               "versions": [{"version": "1.0.0", "variables": [{"name": "region", "type": "string", "required": true}]}]}),
    );
    // The VCS connection examples/workspace.yaml names: its repository gives the workspace a
    // configuration, so the example run has something to plan.
    post(
        &format!("{}/_sandbox/workspaces/oauth-tokens", sb.url("workspaces")),
        json!({"organization": ORGANIZATION, "id": "ot-quartetexample"}),
    );

    // The catalog verifies the API server's service-account JWTs with its published key.
    let kc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&sb.kubeconfig).unwrap()).unwrap();
    let server = kc["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_string();
    let ca = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(
                kc["clusters"][0]["cluster"]["certificate-authority-data"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap(),
    )
    .unwrap();
    let jwks = sb.kubectl_ok(&["get", "--raw", "/openid/v1/jwks"]);
    let jwks: Value = serde_json::from_str(&jwks).unwrap();
    let key = &jwks["keys"][0];
    let public = rsa::RsaPublicKey::new(
        rsa::BigUint::from_bytes_be(&b64url(key["n"].as_str().unwrap())),
        rsa::BigUint::from_bytes_be(&b64url(key["e"].as_str().unwrap())),
    )
    .unwrap()
    .to_public_key_pem(rsa::pkcs8::LineEnding::LF)
    .unwrap();
    let catalog = sb.url("catalog");
    post(
        &format!("{catalog}/_sandbox/catalog/auth-methods"),
        json!({"Name": "kubernetes", "Type": "kubernetes", "DisplayName": "dev cluster",
               "Config": {"Host": server, "CACert": ca, "ValidationKey": public,
                          "Issuer": "https://kubernetes.default.svc.cluster.local"}}),
    );
    post(
        &format!("{catalog}/_sandbox/catalog/binding-rules"),
        json!({"AuthMethod": "kubernetes", "BindType": "service", "BindName": "${serviceaccount.name}"}),
    );

    let scheduler = format!("{}/_sandbox/scheduler", sb.url("scheduler"));
    let job = post(
        &format!("{scheduler}/jobs"),
        json!({"ID": "web", "TaskGroups": [{"Name": "web", "Count": 2, "Canary": 1}]}),
    );
    let deployment = job["DeploymentID"].as_str().expect("a deployment");
    post(
        &format!("{scheduler}/deployments/{deployment}/health"),
        json!({"Healthy": true}),
    );

    let (s, b) = http(
        "POST",
        &format!("{secrets}/v1/identity/entity"),
        Some(("X-Secrets-Token", &sb.root_token)),
        Some(json!({"name": "alice"})),
    );
    assert!((200..300).contains(&s), "entity alice: {s} {b}");
}

/// `kind/namespace/name` of every Quartet object whose Ready condition is not True, with it.
fn not_ready(sb: &Sandbox) -> (BTreeMap<String, String>, BTreeSet<String>) {
    let out = sb.kubectl_ok(&["get", "quartet", "-A", "-o", "json"]);
    let list: Value = serde_json::from_str(&out).unwrap();
    let mut pending = BTreeMap::new();
    let mut ready_kinds = BTreeSet::new();
    for o in list["items"].as_array().unwrap() {
        let kind = o["kind"].as_str().unwrap_or_default().to_string();
        let id = format!(
            "{kind}/{}/{}",
            o["metadata"]["namespace"].as_str().unwrap_or_default(),
            o["metadata"]["name"].as_str().unwrap_or_default()
        );
        if condition_is(o, "Ready", "True") {
            ready_kinds.insert(kind);
        } else {
            pending.insert(
                id,
                condition(o, "Ready")
                    .map(|c| format!("{}: {}", c["reason"], c["message"]))
                    .unwrap_or_else(|| "no Ready condition".into()),
            );
        }
    }
    (pending, ready_kinds)
}

#[test]
fn the_chart_installed_by_helm_runs_every_kind_to_ready_as_its_service_account() {
    let sb = Sandbox::start(&["--secrets-clusters", "3"]);
    let helm = helm::Helm::new(sb.kubeconfig.clone());
    // One replica that never runs (the dev API server has no kubelet); the operator is started
    // below with the Deployment's arguments.
    helm.install_quartet(RELEASE_NS, &["replicaCount=1"]);
    seed(&sb);

    // The chart's ServiceAccount, as the dev API server authorizes it.
    let can_i = |args: &[&str]| {
        let mut a = vec!["auth", "can-i", "--as", OPERATOR_USER];
        a.extend_from_slice(args);
        String::from_utf8_lossy(&sb.kubectl(&a).stdout)
            .trim()
            .to_string()
    };
    assert_eq!(can_i(&["create", "secrets", "-n", "default"]), "yes");
    assert_eq!(
        can_i(&["list", "secretspolicies", "--all-namespaces"]),
        "yes"
    );
    assert_eq!(can_i(&["delete", "secrets", "-n", "default"]), "no");
    assert_eq!(can_i(&["update", "leases", "-n", RELEASE_NS]), "yes");
    assert_eq!(can_i(&["update", "leases", "-n", "default"]), "no");

    let token = sb.kubectl_ok(&["create", "token", "quartet", "-n", RELEASE_NS]);
    let sa_kubeconfig = sb.kubeconfig_with_token(token.trim(), "operator.kubeconfig");
    let log_path = sb.dir.path().join("operator-sa.log");
    let _op = Running(
        Command::new(BIN)
            .args([
                "run",
                "--kubeconfig",
                sa_kubeconfig.to_str().unwrap(),
                "--resync-interval",
                "10s",
                "--metrics-addr",
                "127.0.0.1:0",
                "--leader-elect",
                "--operator-namespace",
                RELEASE_NS,
            ])
            .env(
                "RUST_LOG",
                "debug,hyper=info,h2=info,rustls=info,tower=info,kube_client=info",
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .expect("start quartet run"),
    );
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let examples = repo_root().join("examples");
    let mut files: Vec<_> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        // The Connection examples point at services elsewhere (a platform team's, OpenBao, an
        // IdP); the Connections above reach the sandbox.
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            !name.starts_with("connection") && !name.starts_with("cluster-connection")
        })
        .collect();
    files.sort();
    for f in &files {
        sb.kubectl_ok(&["apply", "-f", f.to_str().unwrap()]);
    }
    // Once the catalog is bootstrapped, the `catalog` Connection uses the management token
    // the CatalogAclBootstrap kept (the sandbox's root token is no catalog token).
    wait_for("CatalogAclBootstrap Ready", WAIT, || {
        sb.get_json("catalogaclbootstrap", "catalog-acl")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    sb.kubectl_ok(&[
        "patch",
        "connection",
        "catalog",
        "--type=merge",
        "-p",
        r#"{"spec":{"tokenSecretRef":{"name":"catalog-management-token","key":"token"}}}"#,
    ]);

    let deadline = std::time::Instant::now() + WAIT * 3;
    let ready_kinds = loop {
        let (pending, kinds) = not_ready(&sb);
        if pending.is_empty() {
            break kinds;
        }
        if std::time::Instant::now() > deadline {
            let log = log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "not Ready in time: {pending:#?}\noperator log (last lines, newest first):\n{}",
                tail.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let every_kind: BTreeSet<String> = quartet::runtime::controllers::crds()
        .iter()
        .map(|c| c.spec.names.kind.clone())
        .collect();
    assert_eq!(ready_kinds, every_kind, "kinds with a Ready resource");

    // Leader election took its Lease in the release namespace.
    let lease = sb.kubectl_ok(&["get", "leases", "-n", RELEASE_NS, "-o", "json"]);
    let lease: Value = serde_json::from_str(&lease).unwrap();
    assert!(
        lease["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["spec"]["holderIdentity"].is_string()),
        "{lease}"
    );
    let log = log();
    assert!(
        !log.to_lowercase().contains("forbidden"),
        "the operator was refused something: {}",
        log.lines()
            .filter(|l| l.to_lowercase().contains("forbidden"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_team_bound_to_edit_manages_quartet_resources_in_its_namespace_and_view_only_reads_them() {
    let sb = Sandbox::start(&[]);
    let helm = helm::Helm::new(sb.kubeconfig.clone());
    let chart = repo_root().join("charts/quartet");
    helm.install_quartet(RELEASE_NS, &[]);
    sb.kubectl_ok(&["create", "namespace", "team-a"]);
    // What a cluster admin does for a team: Kubernetes' own roles, nothing about Quartet.
    sb.kubectl_ok(&[
        "create",
        "rolebinding",
        "devs",
        "--clusterrole=edit",
        "--serviceaccount=team-a:dev",
        "-n",
        "team-a",
    ]);
    sb.kubectl_ok(&[
        "create",
        "rolebinding",
        "auditors",
        "--clusterrole=view",
        "--serviceaccount=team-a:auditor",
        "-n",
        "team-a",
    ]);
    let dev = sb.service_account_kubeconfig("team-a", "dev");
    let auditor = sb.service_account_kubeconfig("team-a", "auditor");
    let policy = "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\n\
        metadata: {name: team-a-read, namespace: NS}\n\
        spec:\n  type: acl\n  policy: |\n    path \"secret/data/team-a/*\" {\n      capabilities = [\"read\"]\n    }\n";
    let as_user = |kc: &Path, args: &[&str], stdin: Option<&str>| {
        let out = support::kubectl(kc, args, stdin);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let refused = |kc: &Path, args: &[&str], stdin: Option<&str>| {
        let (ok, out) = as_user(kc, args, stdin);
        assert!(
            !ok && out.contains("forbidden"),
            "{args:?} should be forbidden: {out}"
        );
    };

    let (ok, out) = as_user(
        &dev,
        &["apply", "-f", "-"],
        Some(&policy.replace("NS", "team-a")),
    );
    assert!(
        ok,
        "edit may create a SecretsPolicy in its namespace: {out}"
    );
    let (ok, out) = as_user(
        &dev,
        &[
            "delete",
            "secretspolicy",
            "team-a-read",
            "-n",
            "team-a",
            "--wait=false",
        ],
        None,
    );
    assert!(ok, "edit may delete it: {out}");
    let (ok, out) = as_user(
        &dev,
        &["apply", "-f", "-"],
        Some(&policy.replace("NS", "team-a")),
    );
    assert!(ok, "{out}");
    // Not elsewhere, not the status (the operator's), not the platform's ClusterConnections.
    refused(
        &dev,
        &["apply", "-f", "-"],
        Some(&policy.replace("NS", "default")),
    );
    refused(
        &dev,
        &[
            "patch",
            "secretspolicy",
            "team-a-read",
            "-n",
            "team-a",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"remoteId":"x"}}"#,
        ],
        None,
    );
    refused(&dev, &["get", "clusterconnections"], None);

    // view reads every namespaced kind and writes none.
    let (ok, out) = as_user(
        &auditor,
        &[
            "get",
            "secretspolicies,workspaces,connections",
            "-n",
            "team-a",
        ],
        None,
    );
    assert!(ok && out.contains("team-a-read"), "{out}");
    refused(
        &auditor,
        &["delete", "secretspolicy", "team-a-read", "-n", "team-a"],
        None,
    );
    for (verb, resource, want) in [
        ("create", "workspaces.workspaces.quartet.dev", "yes"),
        ("deletecollection", "connections.quartet.dev", "yes"),
        ("update", "deploymentgates.scheduler.quartet.dev", "yes"),
        ("patch", "catalogacltokens.catalog.quartet.dev", "yes"),
    ] {
        let (_, out) = as_user(
            &dev,
            &["auth", "can-i", verb, resource, "-n", "team-a"],
            None,
        );
        assert_eq!(out.trim(), want, "edit: {verb} {resource}");
    }
    let (_, out) = as_user(
        &dev,
        &["auth", "can-i", "create", "clusterconnections.quartet.dev"],
        None,
    );
    // kubectl adds a warning: a cluster-scoped resource asked about in a namespace.
    assert_eq!(
        out.lines().next(),
        Some("no"),
        "edit: create clusterconnections: {out}"
    );
    let (_, out) = as_user(
        &auditor,
        &[
            "auth",
            "can-i",
            "watch",
            "totpenrollments.secrets.quartet.dev",
            "-n",
            "team-a",
        ],
        None,
    );
    assert_eq!(out.trim(), "yes");

    // Without the value, Kubernetes' roles know nothing of Quartet's kinds.
    helm.ok(&[
        "upgrade",
        "quartet",
        chart.to_str().unwrap(),
        "--namespace",
        RELEASE_NS,
        "--reuse-values",
        "--set",
        "aggregateClusterRoles=false",
    ]);
    let (_, out) = as_user(
        &dev,
        &[
            "auth",
            "can-i",
            "create",
            "secretspolicies.secrets.quartet.dev",
            "-n",
            "team-a",
        ],
        None,
    );
    assert_eq!(out.trim(), "no");
}
