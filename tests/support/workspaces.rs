//! Helpers for the workspace-service e2e tests: a `workspaces` Connection to the sandbox and
//! calls to the service over HTTP with the root token (owner of the `quartet` organization).

#![allow(dead_code)]

use serde_json::{json, Value};

use super::{http, Sandbox};

/// The organization `quartet sandbox` creates (its `--organization` default).
pub const ORG: &str = "quartet";

impl Sandbox {
    /// The token Secret and a `workspaces` Connection with `spec.organization`.
    pub fn connect_workspaces(&self) {
        let yaml = format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: workspaces-token, namespace: default}}\nstringData: {{token: {}}}\n---\n\
             apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: workspaces, namespace: default}}\n\
             spec: {{service: workspaces, address: \"{}\", organization: {ORG}, tokenSecretRef: {{name: workspaces-token, key: token}}, timeoutSeconds: 5}}\n",
            self.root_token,
            self.url("workspaces")
        );
        self.apply_ok(&yaml);
    }

    /// A call to the workspace service with the root token.
    pub fn ws_api(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let auth = format!("Bearer {}", self.root_token);
        http(
            method,
            &format!("{}/api/v2{path}", self.url("workspaces")),
            Some(("Authorization", &auth)),
            body,
        )
    }

    /// The workspace document (`data`) by name, if it exists.
    pub fn remote_workspace(&self, name: &str) -> Option<Value> {
        let (s, b) = self.ws_api(
            "GET",
            &format!("/organizations/{ORG}/workspaces/{name}"),
            None,
        );
        (s == 200).then(|| b["data"].clone())
    }

    /// Creates a workspace directly in the service; returns its id.
    pub fn create_remote_workspace(&self, name: &str, attrs: Value) -> String {
        let mut a = attrs;
        a["name"] = json!(name);
        let (s, b) = self.ws_api(
            "POST",
            &format!("/organizations/{ORG}/workspaces"),
            Some(json!({"data": {"type": "workspaces", "attributes": a}})),
        );
        assert_eq!(s, 201, "create {name}: {b}");
        b["data"]["id"].as_str().unwrap().to_string()
    }

    /// Every item of a paginated list under `/api/v2`.
    pub fn ws_list(&self, path: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut page = 1;
        loop {
            let sep = if path.contains('?') { '&' } else { '?' };
            let (s, b) = self.ws_api(
                "GET",
                &format!("{path}{sep}page%5Bnumber%5D={page}&page%5Bsize%5D=100"),
                None,
            );
            assert_eq!(s, 200, "list {path}: {b}");
            out.extend(b["data"].as_array().cloned().unwrap_or_default());
            match b["meta"]["pagination"]["next-page"].as_u64() {
                Some(n) => page = n,
                None => return out,
            }
        }
    }

    /// Injects a fault into the workspace service.
    pub fn ws_fault(&self, fault: Value) {
        let (s, b) = http(
            "POST",
            &format!("{}/_sandbox/faults", self.url("workspaces")),
            None,
            Some(fault),
        );
        assert!(s < 300, "fault: {s} {b}");
    }

    /// Uploads a configuration version to the workspace (as a real client does before a run)
    /// without queueing a run; returns its id.
    pub fn upload_configuration(&self, ws_id: &str) -> String {
        let (s, b) = self.ws_api(
            "POST",
            &format!("/workspaces/{ws_id}/configuration-versions"),
            Some(json!({"data": {"type": "configuration-versions", "attributes": {"auto-queue-runs": false}}})),
        );
        assert_eq!(s, 201, "configuration version: {b}");
        let url = b["data"]["attributes"]["upload-url"]
            .as_str()
            .unwrap()
            .to_string();
        let resp = reqwest::blocking::Client::new()
            .put(url)
            .header("content-type", "application/octet-stream")
            .body(vec![
                0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0, 0x03, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ])
            .send()
            .expect("upload");
        assert!(resp.status().is_success(), "upload: {}", resp.status());
        b["data"]["id"].as_str().unwrap().to_string()
    }

    /// Scripts the next run of a workspace (`plan`: changes | no-changes | errored; `cancel`:
    /// ok | ignore).
    pub fn script_run(&self, ws_id: &str, script: Value) {
        let mut body = script;
        body["workspace"] = json!(ws_id);
        let (s, b) = http(
            "POST",
            &format!("{}/_sandbox/workspaces/scripts", self.url("workspaces")),
            None,
            Some(body),
        );
        assert!(s < 300, "script: {s} {b}");
    }
}
