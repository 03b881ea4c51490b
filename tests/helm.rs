//! The Helm chart, driven by the real `helm` (v4): lint, template with default and non-default
//! values, bad values refused by `values.schema.json`, and install / upgrade / uninstall on a
//! bare dev cluster (`quartet sandbox --kubeconfig`: no CRDs, no controllers).
//!
//! helm is found through `QUARTET_HELM_BIN`, then `/opt/quartet-tools/bin/helm` (where `.ci/run`
//! installs it), then `PATH`. A missing helm fails the tests with how to install it.

use crate::support;
use crate::support::helm as helm_support;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use helm_support::helm_bin;
use serde_json::{json, Value};
use support::*;

fn chart() -> String {
    repo_root().join("charts/quartet").display().to_string()
}

/// A helm with private config/cache/data dirs (and a kubeconfig when given).
struct Helm {
    home: tempfile::TempDir,
    kubeconfig: Option<PathBuf>,
}

impl Helm {
    fn new(kubeconfig: Option<PathBuf>) -> Helm {
        Helm {
            home: tempfile::tempdir().expect("tempdir"),
            kubeconfig,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let h = self.home.path();
        let mut cmd = Command::new(helm_bin());
        cmd.args(args)
            .env("HELM_CONFIG_HOME", h.join("config"))
            .env("HELM_CACHE_HOME", h.join("cache"))
            .env("HELM_DATA_HOME", h.join("data"))
            .env("HOME", h)
            .stdin(Stdio::null());
        match &self.kubeconfig {
            Some(k) => cmd.env("KUBECONFIG", k),
            None => cmd.env("KUBECONFIG", h.join("no-cluster")),
        };
        cmd.output().expect("helm runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "helm {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "helm {args:?} succeeded:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).to_string()
    }
}

/// `helm template` output as JSON documents.
fn docs(yaml: &str) -> Vec<Value> {
    yaml.split("\n---")
        .filter_map(|d| serde_yaml::from_str::<Value>(d).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> Option<&'a Value> {
    docs.iter().find(|d| d["kind"] == kind)
}

fn kinds(docs: &[Value]) -> Vec<String> {
    let mut k: Vec<String> = docs
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    k.sort();
    k
}

fn container_args(docs: &[Value]) -> Vec<String> {
    find(docs, "Deployment").expect("a Deployment")["spec"]["template"]["spec"]["containers"][0]
        ["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn helm_lint_strict_passes_with_default_and_non_default_values() {
    let helm = Helm::new(None);
    let out = helm.ok(&["lint", "--strict", &chart()]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let out = helm.ok(&[
        "lint",
        "--strict",
        &chart(),
        "--set",
        "serviceMonitor.enabled=true,networkPolicy.enabled=true,podDisruptionBudget.enabled=false,replicaCount=1,leaderElection=false,watchNamespace=team-a",
    ]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn helm_template_with_default_values_renders_the_operator_and_its_least_privilege_rbac() {
    let helm = Helm::new(None);
    let out = helm.ok(&[
        "template",
        "quartet",
        &chart(),
        "--namespace",
        "quartet-system",
    ]);
    let d = docs(&out);
    let mut want: Vec<String> = [
        "ClusterRole",
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // The chart ships every CRD the operator serves, as templates (Helm upgrades those, never
    // crds/), kept on uninstall.
    want.extend(
        quartet::cmd::crd::crds()
            .iter()
            .map(|_| "CustomResourceDefinition".to_string()),
    );
    want.sort();
    assert_eq!(kinds(&d), want, "{out}");
    for crd in d.iter().filter(|x| x["kind"] == "CustomResourceDefinition") {
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{crd}"
        );
        assert_eq!(
            crd["metadata"]["labels"]["app.kubernetes.io/name"],
            "quartet"
        );
    }
    // Template-like text in a CRD (a rule's `{{username}}`) comes out as written.
    let stores = d
        .iter()
        .find(|x| x["metadata"]["name"] == "transformstores.secrets.quartet.dev")
        .expect("TransformStore CRD");
    assert!(
        stores.to_string().contains("contains('{{username}}')"),
        "{stores}"
    );
    assert!(find(&d, "ServiceMonitor").is_none());
    assert!(find(&d, "NetworkPolicy").is_none());
    let deploy = find(&d, "Deployment").unwrap();
    assert_eq!(deploy["metadata"]["namespace"], "quartet-system");
    assert_eq!(deploy["spec"]["replicas"], 2);
    let args = container_args(&d);
    assert_eq!(
        args,
        [
            "run",
            "--resync-interval=5m",
            "--concurrency=8",
            "--metrics-addr=0.0.0.0:8080",
            "--shutdown-timeout=10s",
            "--leader-elect"
        ]
    );
    // Kubernetes must not kill the operator before it has stopped and released its Lease.
    assert_eq!(
        deploy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        30
    );
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["image"],
        "ghcr.io/quartet-dev/quartet:0.1.0"
    );
    let pdb = find(&d, "PodDisruptionBudget").unwrap();
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        deploy["spec"]["selector"]["matchLabels"]
    );
}

#[test]
fn the_roles_for_people_cover_every_namespaced_kind_and_aggregate_into_view_edit_and_admin() {
    let helm = Helm::new(None);
    let d = docs(&helm.ok(&["template", "quartet", &chart()]));
    let role = |name: &str| {
        d.iter()
            .find(|x| x["kind"] == "ClusterRole" && x["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("ClusterRole {name}"))
            .clone()
    };
    // (group, plural) of every namespaced kind the operator serves.
    let mut namespaced: Vec<(String, String)> = quartet::cmd::crd::crds()
        .iter()
        .filter(|c| c.spec.scope == "Namespaced")
        .map(|c| (c.spec.group.clone(), c.spec.names.plural.clone()))
        .collect();
    namespaced.sort();
    for (name, verbs, aggregates_to) in [
        (
            "quartet-view",
            vec!["get", "list", "watch"],
            vec!["view", "edit", "admin"],
        ),
        (
            "quartet-edit",
            vec!["create", "update", "patch", "delete", "deletecollection"],
            vec!["edit", "admin"],
        ),
    ] {
        let r = role(name);
        let mut granted = Vec::new();
        for rule in r["rules"].as_array().unwrap() {
            assert_eq!(rule["verbs"], json!(verbs), "{name}: {rule}");
            let group = rule["apiGroups"][0].as_str().unwrap().to_string();
            for plural in rule["resources"].as_array().unwrap() {
                granted.push((group.clone(), plural.as_str().unwrap().to_string()));
            }
        }
        granted.sort();
        assert_eq!(
            granted, namespaced,
            "{name}: every namespaced kind, no status, no ClusterConnection"
        );
        let labels = r["metadata"]["labels"].as_object().unwrap();
        let mut got: Vec<&str> = labels
            .keys()
            .filter_map(|k| k.strip_prefix("rbac.authorization.k8s.io/aggregate-to-"))
            .collect();
        got.sort();
        let mut want = aggregates_to.clone();
        want.sort();
        assert_eq!(got, want, "{name}");
    }
    let d = docs(&helm.ok(&[
        "template",
        "quartet",
        &chart(),
        "--set",
        "aggregateClusterRoles=false",
    ]));
    let roles: Vec<&Value> = d.iter().filter(|x| x["kind"] == "ClusterRole").collect();
    assert_eq!(roles.len(), 1, "only the operator's own");
}

#[test]
fn crds_install_false_renders_no_crd_and_crds_keep_false_drops_the_keep_annotation() {
    let helm = Helm::new(None);
    let out = helm.ok(&[
        "template",
        "quartet",
        &chart(),
        "--namespace",
        "quartet-system",
        "--set",
        "crds.install=false",
    ]);
    let d = docs(&out);
    assert!(find(&d, "Deployment").is_some(), "{out}");
    assert!(find(&d, "CustomResourceDefinition").is_none(), "{out}");

    let out = helm.ok(&[
        "template",
        "quartet",
        &chart(),
        "--namespace",
        "quartet-system",
        "--set",
        "crds.keep=false",
    ]);
    let d = docs(&out);
    let crd = find(&d, "CustomResourceDefinition").expect("a CRD");
    assert!(crd["metadata"]["annotations"].is_null(), "{crd}");

    let err = helm.fails(&[
        "template",
        "quartet",
        &chart(),
        "--set",
        "crds.install=maybe",
    ]);
    assert!(err.contains("/crds/install"), "{err}");
}

#[test]
fn helm_template_with_non_default_values_renders_them() {
    let helm = Helm::new(None);
    let values = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        values.path(),
        "image: {repository: registry.example.com/quartet, tag: \"1.2.3\", pullPolicy: Always}\n\
         replicaCount: 1\nleaderElection: false\nwatchNamespace: team-a\nresyncInterval: 30s\n\
         concurrency: 4\nmetrics: {port: 9090}\n\
         shutdownTimeoutSeconds: 20\nterminationGracePeriodSeconds: 45\n\
         podDisruptionBudget: {enabled: false}\n\
         serviceMonitor: {enabled: true, interval: 15s, labels: {release: prometheus}}\n\
         networkPolicy:\n  enabled: true\n  metricsFrom:\n    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}\n",
    )
    .unwrap();
    let out = helm.ok(&[
        "template",
        "ops",
        &chart(),
        "--namespace",
        "platform",
        "-f",
        values.path().to_str().unwrap(),
    ]);
    let d = docs(&out);
    assert!(find(&d, "PodDisruptionBudget").is_none(), "{out}");
    let deploy = find(&d, "Deployment").unwrap();
    assert_eq!(deploy["metadata"]["name"], "ops");
    assert_eq!(deploy["spec"]["replicas"], 1);
    let c = &deploy["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "registry.example.com/quartet:1.2.3");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(
        container_args(&d),
        [
            "run",
            "--resync-interval=30s",
            "--concurrency=4",
            "--metrics-addr=0.0.0.0:9090",
            "--shutdown-timeout=20s",
            "--watch-namespaces=team-a"
        ]
    );
    assert_eq!(
        deploy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        45
    );
    let sm = find(&d, "ServiceMonitor").expect("ServiceMonitor");
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(sm["spec"]["endpoints"][0]["interval"], "15s");
    let svc = find(&d, "Service").unwrap();
    assert_eq!(svc["spec"]["ports"][0]["name"], "metrics");
    assert_eq!(svc["spec"]["ports"][0]["port"], 9090);
    let np = find(&d, "NetworkPolicy").expect("NetworkPolicy");
    assert_eq!(np["spec"]["policyTypes"], serde_json::json!(["Ingress"]));
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["port"], "metrics");
    assert_eq!(
        np["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]
            ["kubernetes.io/metadata.name"],
        "monitoring"
    );
}

#[test]
fn helm_refuses_bad_values_with_a_message_naming_the_value() {
    let helm = Helm::new(None);
    for (set, message) in [
        ("replicaCount=two", "/replicaCount"),
        ("logFormat=xml", "value must be one of 'json', 'text'"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("metrics.port=70000", "/metrics/port"),
        ("concurrency=0", "/concurrency"),
        ("resyncInterval=soon", "/resyncInterval"),
        ("watchNamespace=Team_A", "/watchNamespace"),
        (
            "podDisruptionBudget.maxUnavailable=lots",
            "/podDisruptionBudget/maxUnavailable",
        ),
        ("replicas=3", "additional properties 'replicas' not allowed"),
        ("shutdownTimeoutSeconds=0", "/shutdownTimeoutSeconds"),
        // A real API server would refuse these only halfway through the install.
        ("resources.limits.memory=lots", "/resources/limits/memory"),
        (
            "resources.request.cpu=1",
            "additional properties 'request' not allowed",
        ),
    ] {
        let err = helm.fails(&["template", "quartet", &chart(), "--set", set]);
        assert!(
            err.contains("values don't meet the specifications of the schema")
                && err.contains(message),
            "--set {set}: {err}"
        );
    }
}

#[test]
fn helm_refuses_a_grace_period_not_longer_than_the_shutdown_timeout() {
    let helm = Helm::new(None);
    let err = helm.fails(&[
        "template",
        "quartet",
        &chart(),
        "--set",
        "shutdownTimeoutSeconds=30,terminationGracePeriodSeconds=30",
    ]);
    assert!(
        err.contains(
            "terminationGracePeriodSeconds (30) must be longer than shutdownTimeoutSeconds (30)"
        ),
        "{err}"
    );
}

/// The kinds the chart creates on install, as `kubectl get ... -o name` prints them.
const INSTALLED: [&str; 8] = [
    "deployment.apps/quartet",
    "service/quartet-metrics",
    "serviceaccount/quartet",
    "poddisruptionbudget.policy/quartet",
    "role.rbac.authorization.k8s.io/quartet",
    "rolebinding.rbac.authorization.k8s.io/quartet",
    "clusterrole.rbac.authorization.k8s.io/quartet",
    "clusterrolebinding.rbac.authorization.k8s.io/quartet",
];

fn installed(sandbox: &Sandbox) -> Vec<String> {
    let out = sandbox.kubectl(&[
        "get",
        "-n",
        "quartet-system",
        "deployment,service,serviceaccount,poddisruptionbudget,role,rolebinding,clusterrole,clusterrolebinding",
        "-o",
        "name",
        "--ignore-not-found",
    ]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.ends_with("/quartet") || l.ends_with("/quartet-metrics"))
        .map(String::from)
        .collect()
}

fn get(sandbox: &Sandbox, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&sandbox.kubectl_ok(&a)).expect("kubectl json")
}

#[test]
fn helm_install_upgrade_and_uninstall_on_a_bare_dev_cluster() {
    let sandbox = Sandbox::start(&[]);
    let helm = Helm::new(Some(sandbox.kubeconfig.clone()));
    let out = helm.ok(&[
        "install",
        "quartet",
        &chart(),
        "--namespace",
        "quartet-system",
        "--create-namespace",
    ]);
    assert!(out.contains("STATUS: deployed"), "{out}");
    // NOTES.txt tells the user how to check the operator is up.
    assert!(
        out.contains("kubectl -n quartet-system rollout status deployment/quartet"),
        "{out}"
    );
    assert!(out.contains("/readyz"), "{out}");
    let mut got = installed(&sandbox);
    got.sort();
    let mut want: Vec<String> = INSTALLED.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
    // The CRDs came from the chart's templates and are served.
    sandbox.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd",
        "--all",
    ]);
    let out = sandbox.kubectl_ok(&["api-resources", "--categories=quartet", "-o", "name"]);
    assert!(out.contains("connections.quartet.dev"), "{out}");
    let deploy = get(&sandbox, &["deployment", "quartet", "-n", "quartet-system"]);
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert_eq!(
        deploy["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "quartet"
    );
    let rules = get(&sandbox, &["clusterrole", "quartet"]);
    assert!(
        rules["rules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["resources"][0] == "connections")),
        "{rules}"
    );

    // `kubectl explain` prints each documentation paragraph as whole sentences: a doc comment
    // wrapped over several source lines is one line in the CRD.
    // kubectl wraps the text at its own width; a line break from the source would show as a
    // line the next word would still have fitted on.
    let out = sandbox.kubectl_ok(&["explain", "connection.spec.allowedNamespaces"]);
    let description: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("DESCRIPTION:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        description.join(" "),
        "Namespaces other than the Connection's own whose resources may use it; `*` allows all. Empty (the default) allows only resources in the Connection's namespace. At most 256 namespaces. Each at most 63 characters.",
        "{out}"
    );
    for pair in description.windows(2) {
        let next_word = pair[1].split(' ').next().unwrap_or_default();
        assert!(
            pair[0].len() + 1 + next_word.len() > 70,
            "a line break from the source, not from kubectl's wrapping:\n{out}"
        );
    }

    // Upgrade: non-default values reach the objects; a disabled PDB goes away. Watching one
    // namespace puts the operator's Role there, so the namespace exists first, as it would.
    sandbox.kubectl_ok(&["create", "namespace", "team-a"]);
    let out = helm.ok(&[
        "upgrade",
        "quartet",
        &chart(),
        "--namespace",
        "quartet-system",
        "--reuse-values",
        "--set",
        "replicaCount=3,podDisruptionBudget.enabled=false,watchNamespace=team-a",
    ]);
    assert!(out.contains("REVISION: 2"), "{out}");
    let deploy = get(&sandbox, &["deployment", "quartet", "-n", "quartet-system"]);
    assert_eq!(deploy["spec"]["replicas"], 3);
    assert_eq!(deploy["metadata"]["generation"], 2);
    let args = deploy["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--watch-namespaces=team-a"), "{args}");
    let role = get(&sandbox, &["role", "quartet-watch", "-n", "team-a"]);
    assert!(
        role["rules"].as_array().is_some_and(|r| !r.is_empty()),
        "{role}"
    );
    assert!(!installed(&sandbox).contains(&"poddisruptionbudget.policy/quartet".to_string()));
    let out = helm.ok(&["history", "quartet", "--namespace", "quartet-system"]);
    assert!(out.contains("Upgrade complete"), "{out}");

    // Bad values are refused before anything reaches the cluster.
    let err = helm.fails(&[
        "upgrade",
        "quartet",
        &chart(),
        "--namespace",
        "quartet-system",
        "--reuse-values",
        "--set",
        "replicaCount=-1",
    ]);
    assert!(err.contains("/replicaCount"), "{err}");

    // Upgrade to a chart whose Connection CRD has one more field: Helm upgrades the CRD (it
    // is a template, not crds/), and the new schema is served.
    let changed = tempfile::tempdir().expect("tempdir");
    copy_dir(&repo_root().join("charts/quartet"), changed.path());
    let crd_file = changed
        .path()
        .join("templates/crds/connections.quartet.dev.yaml");
    let text = std::fs::read_to_string(&crd_file).expect("read CRD template");
    let anchor = "          spec:\n            description: How Quartet reaches";
    assert!(text.contains(anchor), "{text}");
    let (head, tail) = text.split_once(anchor).unwrap();
    let (desc, props) = tail.split_once("            properties:\n").unwrap();
    let text = format!(
        "{head}{anchor}{desc}            properties:\n              upgradeProbe:\n                description: A field only the upgraded chart has.\n                maxLength: 32\n                type: string\n{props}"
    );
    std::fs::write(&crd_file, text).expect("write CRD template");
    let out = helm.ok(&[
        "upgrade",
        "quartet",
        &changed.path().display().to_string(),
        "--namespace",
        "quartet-system",
        "--reuse-values",
    ]);
    assert!(out.contains("REVISION: 3"), "{out}");
    let crd = get(&sandbox, &["crd", "connections.quartet.dev"]);
    assert_eq!(
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["upgradeProbe"]["type"],
        "string",
        "the upgraded schema is not served"
    );
    assert_eq!(
        crd["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    let out = sandbox.kubectl_ok(&["explain", "connection.spec.upgradeProbe"]);
    assert!(
        out.contains("A field only the upgraded chart has."),
        "{out}"
    );
    // A custom resource using the new field keeps it (not pruned as unknown).
    sandbox.apply_ok(
        "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {name: secrets, namespace: default}\n\
         spec: {service: secrets, address: \"http://127.0.0.1:1\", tokenSecretRef: {name: t, key: token}, upgradeProbe: kept}\n",
    );
    let conn = get(&sandbox, &["connection", "secrets", "-n", "default"]);
    assert_eq!(conn["spec"]["upgradeProbe"], "kept", "{conn}");

    // Uninstall removes what the release created and its history; the CRDs stay (annotated
    // keep), so custom resources survive an uninstall.
    let out = helm.ok(&["uninstall", "quartet", "--namespace", "quartet-system"]);
    assert!(out.contains("release \"quartet\" uninstalled"), "{out}");
    assert_eq!(installed(&sandbox), Vec::<String>::new());
    let out = sandbox.kubectl_ok(&["get", "secrets", "-n", "quartet-system", "-o", "name"]);
    assert!(!out.contains("sh.helm.release"), "{out}");
    let out = sandbox.kubectl_ok(&["get", "crd", "-o", "name"]);
    assert_eq!(
        out.lines().count(),
        quartet::cmd::crd::crds().len(),
        "every CRD stays: {out}"
    );
    let conn = get(&sandbox, &["connection", "secrets", "-n", "default"]);
    assert_eq!(conn["spec"]["upgradeProbe"], "kept", "{conn}");
    let err = helm.fails(&["status", "quartet", "--namespace", "quartet-system"]);
    assert!(err.contains("not found"), "{err}");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read chart dir") {
        let entry = entry.expect("dir entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).expect("copy chart file");
        }
    }
}

#[test]
fn helm_template_with_two_shards_renders_a_deployment_and_a_budget_per_shard_sharing_the_rbac() {
    let helm = Helm::new(None);
    let out = helm.ok(&[
        "template",
        "quartet",
        &chart(),
        "--namespace",
        "quartet-system",
        "--set",
        "shards={a,b}",
    ]);
    let d = docs(&out);
    let of = |kind: &str| -> Vec<&Value> { d.iter().filter(|x| x["kind"] == kind).collect() };
    let names = |kind: &str| -> Vec<String> {
        of(kind)
            .iter()
            .map(|x| {
                x["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        names("Deployment"),
        ["quartet", "quartet-shard-a", "quartet-shard-b"]
    );
    assert_eq!(
        names("PodDisruptionBudget"),
        ["quartet", "quartet-shard-a", "quartet-shard-b"]
    );
    // One ServiceAccount and one set of RBAC objects for every instance.
    assert_eq!(names("ServiceAccount"), ["quartet"]);
    assert_eq!(
        names("ClusterRole"),
        ["quartet", "quartet-view", "quartet-edit"]
    );
    assert_eq!(names("Role"), ["quartet"]);
    let args = |deploy: &Value| -> Vec<String> {
        deploy["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().unwrap_or_default().to_string())
            .collect()
    };
    let deploys = of("Deployment");
    let default_args = args(deploys[0]);
    assert!(!default_args.iter().any(|a| a.starts_with("--shard=")));
    assert!(default_args.contains(&"--shard-count=3".to_string()));
    for (deploy, shard) in deploys[1..].iter().zip(["a", "b"]) {
        let a = args(deploy);
        for want in [
            format!("--shard={shard}"),
            format!("--lease-name=quartet-leader-{shard}"),
            "--shard-count=3".to_string(),
            "--leader-elect".to_string(),
        ] {
            assert!(a.contains(&want), "{shard}: {a:?}");
        }
        // Each shard's pods are its own Deployment's and its own budget's only.
        let sel = &deploy["spec"]["selector"]["matchLabels"];
        assert_eq!(sel["quartet.dev/shard"], shard);
        assert_eq!(
            deploy["spec"]["template"]["metadata"]["labels"]["quartet.dev/shard"],
            shard
        );
    }
    let pdbs = of("PodDisruptionBudget");
    assert_eq!(
        pdbs[0]["spec"]["selector"]["matchExpressions"][0],
        serde_json::json!({"key": "quartet.dev/shard", "operator": "DoesNotExist"})
    );
    assert_eq!(
        pdbs[1]["spec"]["selector"]["matchLabels"]["quartet.dev/shard"],
        "a"
    );
    // With the ServiceMonitor, every series carries the shard of the pod it was scraped from.
    let out = helm.ok(&[
        "template",
        "quartet",
        &chart(),
        "--set",
        "shards={a,b},serviceMonitor.enabled=true",
    ]);
    let d = docs(&out);
    let sm = find(&d, "ServiceMonitor").expect("ServiceMonitor");
    assert_eq!(
        sm["spec"]["podTargetLabels"],
        serde_json::json!(["quartet.dev/shard"])
    );

    // Without dividing the budget, no instance is told to.
    let out = helm.ok(&[
        "template",
        "quartet",
        &chart(),
        "--set",
        "shards={a},divideConnectionBudget=false",
    ]);
    assert!(!out.contains("- --shard-count="), "{out}");
    // A shard name that is no label value is refused, naming the value.
    let err = helm.fails(&["template", "quartet", &chart(), "--set", "shards={a/b}"]);
    assert!(err.contains("shards"), "{err}");
    // So is a label value that cannot name the shard's Deployment and Lease, which a real API
    // server would refuse halfway through the install.
    for name in ["EU", "eu_west", "eu.-west"] {
        let err = helm.fails(&[
            "template",
            "quartet",
            &chart(),
            "--set",
            &format!("shards={{{name}}}"),
        ]);
        assert!(err.contains("shards"), "{name}: {err}");
    }
    helm.ok(&[
        "template",
        "quartet",
        &chart(),
        "--set",
        "shards={eu-west.2}",
    ]);
}

/// The notes `helm install` prints, rendered without a cluster (`--dry-run=client`).
fn install_notes(helm: &Helm, values: &str) -> String {
    let out = helm.ok(&[
        "install",
        "quartet",
        &chart(),
        "--namespace",
        "quartet-system",
        "--dry-run=client",
        "--set",
        values,
    ]);
    out.split_once("\nNOTES:\n")
        .map(|(_, notes)| notes.to_string())
        .unwrap_or_else(|| panic!("no NOTES in:\n{out}"))
}

#[test]
fn helm_install_notes_name_every_shard_and_the_namespaces_watched() {
    let helm = Helm::new(None);
    let says = |values: &str, lines: &[&str]| -> String {
        let notes = install_notes(&helm, values);
        for line in lines {
            assert!(notes.contains(line), "{values}: no {line:?} in\n{notes}");
        }
        notes
    };
    let default_instance = "kubectl -n quartet-system rollout status deployment/quartet\n";
    says(
        "shards={a,b},watchNamespaces={team-a,team-b}",
        &[
            default_instance,
            "kubectl -n quartet-system get lease quartet-leader ",
            "kubectl -n quartet-system rollout status deployment/quartet-shard-a",
            "kubectl -n quartet-system get lease quartet-leader-a ",
            "Shard a (the resources labelled quartet.dev/shard=a)",
            "kubectl -n quartet-system rollout status deployment/quartet-shard-b",
            "kubectl -n quartet-system get lease quartet-leader-b ",
            "Shard b (the resources labelled quartet.dev/shard=b)",
            "kubectl label secretspolicy NAME quartet.dev/shard=a",
            "kubectl get quartet -A -l 'quartet.dev/shard,quartet.dev/shard notin (a,b)'",
            "The operator watches only these namespaces: team-a, team-b.",
        ],
    );
    // Without shards: one instance, no shard wording; the one-namespace form is named too.
    let notes = says(
        "watchNamespace=team-a",
        &[
            default_instance,
            "The operator watches only these namespaces: team-a.",
        ],
    );
    assert!(!notes.contains("shard"), "{notes}");
    let notes = says(
        "logLevel=info",
        &[
            "The operator watches every namespace.",
            "kubectl create rolebinding team-a-devs --clusterrole=edit --group=team-a -n team-a",
        ],
    );
    assert!(
        notes.contains("ClusterRoles quartet-edit and quartet-view"),
        "{notes}"
    );
    let notes = install_notes(&helm, "aggregateClusterRoles=false");
    assert!(!notes.contains("--clusterrole=edit"), "{notes}");
}
