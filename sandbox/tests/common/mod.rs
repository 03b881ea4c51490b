//! Shared helpers for the apiserver tests: a server, a kubeconfig in a temp dir, kubectl runs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

use quartet_sandbox::apiserver::{ApiServer, ApiServerOptions};

/// The test CRD: printer columns, status subresource, an enum, a CEL rule, field docs.
pub const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.quartet.dev
spec:
  group: test.quartet.dev
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
    shortNames: [wg]
    categories: [quartet]
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
    selectableFields:
    - jsonPath: .spec.size
    additionalPrinterColumns:
    - name: Size
      type: string
      jsonPath: .spec.size
    - name: Ready
      type: string
      jsonPath: .status.conditions[?(@.type=="Ready")].status
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is a test resource.
        properties:
          spec:
            type: object
            description: Desired state of the widget.
            required: [size]
            x-kubernetes-validations:
            - rule: "self.replicas <= 10 || self.size == 'large'"
              message: small widgets have at most 10 replicas
            properties:
              size:
                type: string
                description: How big the widget is, small or large.
                enum: [small, large]
              replicas:
                type: integer
                description: How many copies to run.
                default: 1
                minimum: 0
              labels:
                type: array
                items:
                  type: string
          status:
            type: object
            properties:
              observedGeneration:
                type: integer
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
                    reason: {type: string}
                    message: {type: string}
                    lastTransitionTime: {type: string}
"#;

pub async fn server() -> ApiServer {
    ApiServer::start(ApiServerOptions::default())
        .await
        .expect("apiserver starts")
}

/// A kubectl bound to one server through a private kubeconfig and discovery cache.
pub struct Kubectl {
    pub dir: PathBuf,
}

pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    pub fn new(server: &ApiServer) -> Self {
        let dir = std::env::temp_dir().join(format!("quartet-kubectl-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        server.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
        Self { dir }
    }

    pub fn write(&self, name: &str, content: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().to_string()
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .env("HOME", &self.dir)
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("kubectl runs");
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        }
    }

    pub fn run(&self, args: &[&str]) -> Out {
        self.run_env(args, &[])
    }

    /// Run and insist on success.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            o.stdout, o.stderr
        );
        o.stdout
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A reqwest client trusting the server's CA, and helpers sending the bearer token.
pub struct Http {
    pub base: String,
    pub token: String,
    pub client: reqwest::Client,
}

impl Http {
    pub fn new(s: &ApiServer) -> Self {
        let ca = reqwest::Certificate::from_pem(s.ca_pem().as_bytes()).unwrap();
        let client = reqwest::Client::builder()
            .add_root_certificate(ca)
            .build()
            .unwrap();
        Self {
            base: s.url().to_string(),
            token: s.token().to_string(),
            client,
        }
    }

    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(&self.token)
    }

    /// Send and return (status, JSON body).
    pub async fn send(&self, rb: reqwest::RequestBuilder) -> (u16, serde_json::Value) {
        let r = rb.send().await.unwrap();
        let code = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            code,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    }

    pub async fn get(&self, path: &str) -> (u16, serde_json::Value) {
        self.send(self.req(reqwest::Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.send(self.req(reqwest::Method::POST, path).json(&body))
            .await
    }

    pub async fn put(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.send(self.req(reqwest::Method::PUT, path).json(&body))
            .await
    }

    pub async fn patch(
        &self,
        path: &str,
        ct: &str,
        body: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        self.send(
            self.req(reqwest::Method::PATCH, path)
                .header("content-type", ct)
                .body(body.to_string()),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> (u16, serde_json::Value) {
        self.send(self.req(reqwest::Method::DELETE, path)).await
    }

    /// Install the Widget CRD.
    pub async fn install_widget_crd(&self) {
        let crd: serde_json::Value = serde_yaml::from_str(WIDGET_CRD).unwrap();
        let (code, body) = self
            .post(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                crd,
            )
            .await;
        assert_eq!(code, 201, "{body}");
    }
}
