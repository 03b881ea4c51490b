//! The OpenAPI documents as the real `kubectl` consumes them: `kubectl explain` against a
//! minimal loopback harness that serves legacy discovery plus this module's `/openapi/v3`.

use crate::apiserver_schema_fixtures;

use std::process::Command;

use apiserver_schema_fixtures::crd;
use axum::extract::Path;
use axum::routing::get;
use axum::{Json, Router};
use quartet_sandbox::apiserver::schema::{openapi_v3_group_version, openapi_v3_index};
use serde_json::{json, Value};

fn resource_list(gv: &str, resources: Value) -> Json<Value> {
    Json(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn verbs() -> Value {
    json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ])
}

async fn harness() -> String {
    let app = Router::new()
        .route("/api", get(|| async { Json(json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})) }))
        .route(
            "/apis",
            get(|| async {
                Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
                    "name": "secrets.quartet.dev",
                    "versions": [{"groupVersion": "secrets.quartet.dev/v1alpha1", "version": "v1alpha1"}],
                    "preferredVersion": {"groupVersion": "secrets.quartet.dev/v1alpha1", "version": "v1alpha1"}
                }]}))
            }),
        )
        .route(
            "/api/v1",
            get(|| async {
                resource_list("v1", json!([
                    {"name": "secrets", "singularName": "secret", "namespaced": true, "kind": "Secret", "verbs": verbs()},
                    {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace", "verbs": verbs(), "shortNames": ["ns"]}
                ]))
            }),
        )
        .route(
            "/apis/secrets.quartet.dev/v1alpha1",
            get(|| async {
                resource_list("secrets.quartet.dev/v1alpha1", json!([
                    {"name": "secretspolicies", "singularName": "secretspolicy", "namespaced": true, "kind": "SecretsPolicy", "verbs": verbs(), "shortNames": ["sp"]}
                ]))
            }),
        )
        .route("/openapi/v3", get(|| async { Json(openapi_v3_index(&[crd()])) }))
        .route(
            "/openapi/v3/{*rest}",
            get(|Path(rest): Path<String>| async move {
                let gv = rest.strip_prefix("api/").or_else(|| rest.strip_prefix("apis/")).unwrap_or(&rest).to_string();
                Json(openapi_v3_group_version(&[crd()], &gv).unwrap_or(Value::Null))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn explain(field: &str) -> String {
    let url = harness().await;
    let dir = std::env::temp_dir().join(format!(
        "schema-kubectl-{}-{}",
        std::process::id(),
        field.replace('.', "_")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: h\n  cluster:\n    server: {url}\ncontexts:\n- name: h\n  context:\n    cluster: h\n    user: h\ncurrent-context: h\nusers:\n- name: h\n  user: {{}}\n"),
    )
    .unwrap();
    let field = field.to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .args(["explain", &field, "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .output()
            .expect("kubectl is installed")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kubectl explain failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_explain_prints_custom_resource_field_docs() {
    let out = explain("secretspolicies.spec").await;
    assert!(out.contains("KIND:       SecretsPolicy"), "{out}");
    assert!(
        out.contains("SecretsPolicySpec defines a policy in the secrets service."),
        "{out}"
    );
    assert!(out.contains("policy\t<string> -required-"), "{out}");
    assert!(out.contains("The policy document (HCL)."), "{out}");
    assert!(out.contains("enum: acl, rgp, egp"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_explain_prints_a_nested_field() {
    let out = explain("sp.spec.policy").await;
    assert!(out.contains("FIELD: policy <string>"), "{out}");
    assert!(out.contains("The policy document (HCL)."), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_explain_prints_builtin_field_docs() {
    let out = explain("secrets.data").await;
    assert!(out.contains("KIND:       Secret"), "{out}");
    assert!(out.contains("Data contains the secret data."), "{out}");
}
