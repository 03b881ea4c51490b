//! The dev API server driven by the real `kubectl` binary.
//!
//! Tests marked "(schema part)" also depend on the schema module (validation, CEL, OpenAPI,
//! Table rendering) owned by another engineer. Every `kubectl apply`/`create -f` also needs
//! that module's `/openapi/v3` documents: kubectl's default validation looks the kind up
//! there (and falls back to protobuf `/openapi/v2`, which this server does not speak).

mod common;

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
