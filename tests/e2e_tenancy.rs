//! Tenancy end to end: a platform team's ClusterConnection, its token in the operator's own
//! namespace, used by the namespaces it admits and refused elsewhere before any call; a
//! namespace labelled later converges at once without a restart; the default ClusterConnection
//! serves resources without a connectionRef; `kinds` restricts a kind; deleting it stalls its
//! resources and their deletion reports `DeletionBlocked`. And the chart with
//! `watchNamespaces: [team-a]`: no ClusterRole over Secrets, the operator runs as the chart's
//! ServiceAccount, serves team-a, and is refused (403) a Secret of team-b.

use crate::support;
use crate::support::helm;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const PLATFORM: &str = "platform";

fn namespaces(sb: &Sandbox, team_b_labels: &str) {
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: team-a, labels: {{tenancy: allowed}}}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: team-b, labels: {{{team_b_labels}}}}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: {PLATFORM}}}\n"
    ));
}

/// The token Secret in the platform namespace and the ClusterConnection `shared` admitting
/// namespaces labelled `tenancy: allowed`, default for the secrets service.
fn cluster_connection(sb: &Sandbox, secret_ns: &str, kinds: &str) {
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: platform-token, namespace: {secret_ns}}}\nstringData: {{token: {}}}\n---\n\
         apiVersion: quartet.dev/v1alpha1\nkind: ClusterConnection\nmetadata: {{name: shared}}\n\
         spec: {{service: secrets, address: \"{}\", secretNamespace: {secret_ns}, tokenSecretRef: {{name: platform-token, key: token}}, \
         default: true, namespaceSelector: {{matchLabels: {{tenancy: allowed}}}}, kinds: [{kinds}], requestsPerSecondPerNamespace: 20}}\n",
        sb.root_token,
        sb.url("secrets")
    ));
}

fn policy(name: &str, ns: &str, cref: bool) -> String {
    let cref = if cref {
        "\n  connectionRef: {kind: ClusterConnection, name: shared}"
    } else {
        ""
    };
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  type: acl\n  policy: 'path \"{name}/*\" {{ capabilities = [\"read\"] }}'{cref}\n"
    )
}

fn get(sb: &Sandbox, kind: &str, ns: &str, name: &str) -> Option<Value> {
    let mut args = vec!["get", kind, name, "-o", "json"];
    if !ns.is_empty() {
        args.extend(["-n", ns]);
    }
    let out = sb.kubectl(&args);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl json"))
}

fn wait_condition(
    sb: &Sandbox,
    kind: &str,
    ns: &str,
    name: &str,
    type_: &str,
    status: &str,
) -> Value {
    wait_for(
        &format!("{kind} {ns}/{name} {type_}={status}"),
        WAIT,
        || get(sb, kind, ns, name).filter(|o| condition_is(o, type_, status)),
    )
}

/// With `QUARTET_CAPTURE_DIR` set, write `obj` there as `ClusterConnection-<label>.json`: the
/// statuses the Argo CD health check's testdata are captured from (argocd/README.md).
fn capture(obj: &Value, label: &str) {
    if let Some(dir) = std::env::var_os("QUARTET_CAPTURE_DIR") {
        let file = Path::new(&dir).join(format!("ClusterConnection-{label}.json"));
        std::fs::write(file, serde_json::to_string_pretty(obj).unwrap()).unwrap();
    }
}

fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn a_cluster_connection_serves_the_namespaces_it_admits_refuses_the_others_without_a_call_and_its_deletion_stalls_them(
) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    namespaces(&sb, "team: b");
    cluster_connection(&sb, PLATFORM, "SecretsPolicy");
    // A long resync: convergence below comes from the namespace watch, not a retry.
    let op = Operator::start_with(&sb, "5m", &["--operator-namespace", PLATFORM]);
    let healthy = wait_condition(&sb, "clusterconnection", "", "shared", "Ready", "True");
    capture(&healthy, "shared");
    // One whose token Secret is missing is not Ready, and says which.
    sb.apply_ok(&format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: ClusterConnection\nmetadata: {{name: broken}}\n\
         spec: {{service: secrets, address: \"{}\", tokenSecretRef: {{name: no-such-token, key: token}}}}\n",
        sb.url("secrets")
    ));
    let broken = wait_condition(&sb, "clusterconnection", "", "broken", "Ready", "False");
    assert_eq!(
        condition(&broken, "Ready").unwrap()["reason"],
        "SecretNotFound",
        "{broken}"
    );
    assert!(
        condition(&broken, "Ready").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains(
                "Secret platform/no-such-token (token of ClusterConnection broken) not found"
            ),
        "{broken}"
    );
    assert!(condition_is(&broken, "Stalled", "True"), "{broken}");
    capture(&broken, "broken");
    // A kind spelt wrong in `kinds` is refused at admission, naming the kinds it may be.
    let typo = sb.apply_yaml(&format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: ClusterConnection\nmetadata: {{name: typo}}\n\
         spec: {{service: secrets, address: \"{}\", tokenSecretRef: {{name: t, key: token}}, kinds: [secretspolicy]}}\n",
        sb.url("secrets")
    ));
    let refused = String::from_utf8_lossy(&typo.stderr);
    assert!(
        !typo.status.success(),
        "a ClusterConnection with kinds [secretspolicy] was accepted"
    );
    assert!(
        refused.contains("spec.kinds[0]")
            && refused.contains("Unsupported value: \"secretspolicy\"")
            && refused.contains("\"SecretsPolicy\""),
        "{refused}"
    );

    // Like a Connection: suspended, it is not checked (Ready=False, Suspended); a reconcile
    // request is echoed once handled; resumed, it is Ready again.
    sb.kubectl_ok(&[
        "patch",
        "clusterconnection",
        "shared",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    let suspended = wait_for("ClusterConnection shared suspended", WAIT, || {
        get(&sb, "clusterconnection", "", "shared").filter(|o| {
            condition(o, "Ready")
                .is_some_and(|c| c["reason"] == "Suspended" && c["status"] == "False")
        })
    });
    capture(&suspended, "suspended");
    sb.kubectl_ok(&[
        "patch",
        "clusterconnection",
        "shared",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    sb.kubectl_ok(&[
        "annotate",
        "--overwrite",
        "clusterconnection",
        "shared",
        "reconcile.quartet.dev/requestedAt=now-1",
    ]);
    wait_for(
        "ClusterConnection shared resumed, the request echoed",
        WAIT,
        || {
            get(&sb, "clusterconnection", "", "shared").filter(|o| {
                condition_is(o, "Ready", "True") && o["status"]["lastHandledReconcileAt"] == "now-1"
            })
        },
    );

    let (_, mark) = sb.requests("secrets", 0);
    sb.apply_ok(&policy("tenant-a-explicit", "team-a", true));
    sb.apply_ok(&policy("tenant-a-default", "team-a", false));
    sb.apply_ok(&policy("tenant-b-policy", "team-b", true));
    sb.apply_ok("apiVersion: secrets.quartet.dev/v1alpha1\nkind: IdpGroup\nmetadata: {name: tenant-a-group, namespace: team-a}\nspec: {policies: [a], connectionRef: {kind: ClusterConnection, name: shared}}\n");

    // Admitted by label, explicitly and as the default for a resource without connectionRef.
    wait_condition(
        &sb,
        "secretspolicy",
        "team-a",
        "tenant-a-explicit",
        "Ready",
        "True",
    );
    wait_condition(
        &sb,
        "secretspolicy",
        "team-a",
        "tenant-a-default",
        "Ready",
        "True",
    );

    // Refused: Ready=False and Stalled=True, reason ConnectionNotAllowed, naming the rule.
    let b = wait_condition(
        &sb,
        "secretspolicy",
        "team-b",
        "tenant-b-policy",
        "Stalled",
        "True",
    );
    let ready = condition(&b, "Ready").expect("Ready");
    assert_eq!(ready["status"], "False", "{b}");
    assert_eq!(ready["reason"], "ConnectionNotAllowed", "{b}");
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains("ClusterConnection shared does not admit namespace team-b")
            && message.contains("spec.namespaceSelector (tenancy=allowed)"),
        "{message}"
    );
    assert_eq!(
        condition(&b, "Stalled").unwrap()["reason"],
        "ConnectionNotAllowed"
    );

    // `kinds` restricts a kind.
    let g = wait_condition(
        &sb,
        "idpgroup",
        "team-a",
        "tenant-a-group",
        "Stalled",
        "True",
    );
    let ready = condition(&g, "Ready").unwrap();
    assert_eq!(ready["reason"], "ConnectionNotAllowed", "{g}");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("does not allow kind IdpGroup: its spec.kinds is [SecretsPolicy]"),
        "{g}"
    );

    // Not one call for the refused resources.
    let (calls, _) = sb.requests("secrets", mark);
    let refused: Vec<_> = calls
        .iter()
        .filter(|(_, p, _)| p.contains("tenant-b-policy") || p.contains("tenant-a-group"))
        .collect();
    assert!(
        refused.is_empty(),
        "calls for refused resources: {refused:?}"
    );
    assert!(
        calls
            .iter()
            .any(|(_, p, _)| p.contains("tenant-a-explicit")),
        "{calls:?}"
    );

    // Labelling team-b admits it: the resource converges at once, without a restart.
    let labelled = std::time::Instant::now();
    sb.kubectl_ok(&["label", "namespace", "team-b", "tenancy=allowed"]);
    wait_condition(
        &sb,
        "secretspolicy",
        "team-b",
        "tenant-b-policy",
        "Ready",
        "True",
    );
    assert!(
        labelled.elapsed() < Duration::from_secs(30),
        "took {:?}",
        labelled.elapsed()
    );

    // The budget is shared; the calls are counted per namespace.
    let text = reqwest::blocking::get(format!("http://{}/metrics", op.metrics_addr()))
        .unwrap()
        .text()
        .unwrap();
    for ns in ["team-a", "team-b"] {
        let n = metric(
            &text,
            &format!(
                "quartet_remote_calls_by_namespace_total{{connection=\"shared\",namespace=\"{ns}\"}}"
            ),
        );
        assert!(n >= 1.0, "no calls counted for {ns}:\n{text}");
    }

    // The token is in no status and no Event.
    let everything = sb.kubectl_ok(&[
        "get",
        "secretspolicies,idpgroups,clusterconnections,events",
        "-A",
        "-o",
        "json",
    ]);
    assert!(!everything.contains(&sb.root_token), "the token leaked");
    assert!(
        !op.log().contains(&sb.root_token),
        "the token is in the log"
    );

    // Deleting the ClusterConnection stalls its resources with a clear reason...
    sb.kubectl_ok(&["delete", "clusterconnection", "shared", "--wait=true"]);
    let a = wait_for(
        "team-a policy stalled on the deleted ClusterConnection",
        WAIT,
        || {
            get(&sb, "secretspolicy", "team-a", "tenant-a-explicit").filter(|o| {
                condition_is(o, "Stalled", "True")
                    && condition(o, "Ready").is_some_and(|c| c["status"] == "False")
            })
        },
    );
    let ready = condition(&a, "Ready").unwrap();
    assert_eq!(ready["reason"], "ConnectionUnavailable", "{a}");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("ClusterConnection shared not found"),
        "{a}"
    );
    // ...and the deletion of one (deletionPolicy Delete) does not hang silently: it is
    // DeletionBlocked, and Retain lets it go.
    sb.kubectl_ok(&[
        "delete",
        "secretspolicy",
        "tenant-a-explicit",
        "-n",
        "team-a",
        "--wait=false",
    ]);
    let blocked = wait_condition(
        &sb,
        "secretspolicy",
        "team-a",
        "tenant-a-explicit",
        "DeletionBlocked",
        "True",
    );
    assert!(
        condition(&blocked, "DeletionBlocked").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("ClusterConnection shared not found"),
        "{blocked}"
    );
    sb.kubectl_ok(&[
        "patch",
        "secretspolicy",
        "tenant-a-explicit",
        "-n",
        "team-a",
        "--type=merge",
        "-p",
        r#"{"spec":{"deletionPolicy":"Retain"}}"#,
    ]);
    wait_for("deleted with Retain", WAIT, || {
        get(&sb, "secretspolicy", "team-a", "tenant-a-explicit")
            .is_none()
            .then_some(())
    });
}

/// The operator process; killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_chart_watching_team_a_grants_no_secret_elsewhere_and_its_operator_is_refused_a_secret_of_team_b(
) {
    const RELEASE_NS: &str = "quartet-system";
    let sb = Sandbox::start(&[]);
    let helm = helm::Helm::new(sb.kubeconfig.clone());
    let chart = repo_root().join("charts/quartet");
    let chart = chart.to_str().unwrap();

    // helm template: no ClusterRole over Secrets; Roles in team-a and the release namespace.
    let rendered = helm.ok(&[
        "template",
        "quartet",
        chart,
        "--namespace",
        RELEASE_NS,
        "--set",
        "watchNamespaces={team-a}",
    ]);
    let mut role_namespaces = Vec::new();
    for doc in rendered.split("\n---") {
        let Ok(v) = serde_yaml::from_str::<Value>(doc) else {
            continue;
        };
        let rules = v["rules"].as_array().cloned().unwrap_or_default();
        let over_secrets = rules.iter().any(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x == "secrets" || x == "*"))
        });
        match v["kind"].as_str() {
            Some("ClusterRole") => assert!(!over_secrets, "a ClusterRole over Secrets:\n{doc}"),
            Some("Role") => {
                role_namespaces.push(v["metadata"]["namespace"].as_str().unwrap().to_string())
            }
            _ => {}
        }
    }
    role_namespaces.sort();
    assert_eq!(role_namespaces, ["quartet-system", "team-a"]);
    assert!(rendered.contains("--watch-namespaces=team-a"), "{rendered}");

    // The tenants' namespaces exist before the chart gives the operator a Role in one.
    namespaces(&sb, "tenancy: allowed");
    helm.install_quartet(RELEASE_NS, &["replicaCount=1", "watchNamespaces={team-a}"]);
    cluster_connection(&sb, RELEASE_NS, "");
    sb.apply_ok("apiVersion: v1\nkind: Secret\nmetadata: {name: team-b-secret, namespace: team-b}\nstringData: {password: hunter2}\n");

    let token = sb.kubectl_ok(&["create", "token", "quartet", "-n", RELEASE_NS]);
    let sa_kubeconfig = sb.kubeconfig_with_token(token.trim(), "operator.kubeconfig");
    // The chart's ServiceAccount may not read a Secret of team-b: 403 from the API server.
    let refused = kubectl(
        &sa_kubeconfig,
        &["get", "secret", "team-b-secret", "-n", "team-b"],
        None,
    );
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("Forbidden") || stderr.contains("forbidden"),
        "{stderr}"
    );
    let allowed = kubectl(
        &sa_kubeconfig,
        &["get", "secret", "platform-token", "-n", RELEASE_NS],
        None,
    );
    assert!(allowed.status.success(), "{allowed:?}");

    // The operator as that ServiceAccount, with the Deployment's arguments.
    let log_path = sb.dir.path().join("operator-sa.log");
    let _op = Running(
        Command::new(BIN)
            .args([
                "run",
                "--kubeconfig",
                sa_kubeconfig.to_str().unwrap(),
                "--resync-interval",
                "30s",
                "--metrics-addr",
                "127.0.0.1:0",
                "--operator-namespace",
                RELEASE_NS,
                "--watch-namespaces=team-a",
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
    sb.apply_ok(&policy("served-a", "team-a", true));
    sb.apply_ok(&policy("ignored-b", "team-b", false));
    wait_condition(&sb, "secretspolicy", "team-a", "served-a", "Ready", "True");
    wait_condition(&sb, "clusterconnection", "", "shared", "Ready", "True");
    // team-b is not watched: its resource is never touched (no finalizer, no status).
    std::thread::sleep(Duration::from_secs(2));
    let b = get(&sb, "secretspolicy", "team-b", "ignored-b").unwrap();
    assert!(b.get("status").is_none(), "{b}");
    assert!(b["metadata"].get("finalizers").is_none(), "{b}");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let forbidden: Vec<&str> = log
        .lines()
        .filter(|l| l.to_lowercase().contains("forbidden"))
        .take(5)
        .collect();
    assert!(
        forbidden.is_empty(),
        "the operator was refused something: {forbidden:#?}"
    );
}
