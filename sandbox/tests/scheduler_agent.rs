//! The scheduler calls real clients make around the deployments API (agent self, regions,
//! status peers) and the wire types of allocation stubs their typed decoders need, through HTTP.

use quartet_sandbox::{start, Sandbox, SandboxOptions};
use serde_json::{json, Value};

struct T {
    sandbox: Sandbox,
    http: reqwest::Client,
}

impl T {
    async fn new() -> Self {
        Self {
            sandbox: start(SandboxOptions::ephemeral())
                .await
                .expect("sandbox starts"),
            http: reqwest::Client::new(),
        }
    }
    async fn get(
        &self,
        path: &str,
        token: Option<&str>,
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let mut rb = self
            .http
            .get(format!("{}{}", self.sandbox.scheduler_url, path));
        if let Some(t) = token {
            rb = rb.header("X-Nomad-Token", t);
        }
        let r = rb.send().await.unwrap();
        let (s, h) = (r.status().as_u16(), r.headers().clone());
        (s, h, r.text().await.unwrap())
    }
}

#[tokio::test]
async fn agent_self_answers_config_member_and_stats_to_a_management_token() {
    let t = T::new().await;
    let (s, _, body) = t.get("/v1/agent/self", Some("root")).await;
    assert_eq!(s, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["config"]["Region"], "global");
    assert_eq!(v["config"]["Datacenter"], "dc1");
    assert!(v["member"]["Name"].is_string());
    assert!(v["member"]["Port"].is_u64());
    assert!(v["member"]["Status"].is_string());
    assert!(v["stats"]["nomad"].is_object());
}

#[tokio::test]
async fn agent_self_needs_agent_read() {
    let t = T::new().await;
    let (s, _, body) = t.get("/v1/agent/self", None).await;
    assert_eq!((s, body.as_str()), (403, "Permission denied"));
}

#[tokio::test]
async fn regions_and_status_peers_answer_without_a_token() {
    let t = T::new().await;
    let (s, h, body) = t.get("/v1/regions", None).await;
    assert_eq!(s, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!(["global"])
    );
    assert!(h.contains_key("x-nomad-index"));
    let (s, _, body) = t.get("/v1/status/peers", None).await;
    assert_eq!(s, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!(["127.0.0.1:4647"])
    );
}

#[tokio::test]
async fn allocation_task_state_times_are_go_zero_times_not_null() {
    let t = T::new().await;
    let r = t
        .http
        .post(format!(
            "{}/_sandbox/scheduler/jobs",
            t.sandbox.scheduler_url
        ))
        .json(&json!({"ID": "web", "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": ["app"]}]}))
        .send()
        .await
        .unwrap();
    let dep: Value = r.json().await.unwrap();
    let id = dep["DeploymentID"].as_str().unwrap();
    start_tasks(&t, id).await;
    let (_, _, body) = t
        .get(&format!("/v1/deployment/allocations/{id}"), Some("root"))
        .await;
    let allocs: Value = serde_json::from_str(&body).unwrap();
    let state = &allocs[0]["TaskStates"]["app"];
    assert_eq!(state["FinishedAt"], "0001-01-01T00:00:00Z");
    assert_eq!(state["LastRestart"], "0001-01-01T00:00:00Z");
    assert!(state["StartedAt"].is_string());
}

/// The client reports every task of the deployment's allocations running (allocations are
/// placed pending, with no task states).
async fn start_tasks(t: &T, dep: &str) {
    let (_, _, body) = t
        .get(&format!("/v1/deployment/allocations/{dep}"), Some("root"))
        .await;
    let allocs: Value = serde_json::from_str(&body).unwrap();
    for a in allocs.as_array().unwrap() {
        let r = t
            .http
            .post(format!(
                "{}/_sandbox/scheduler/allocations/{}/tasks",
                t.sandbox.scheduler_url,
                a["ID"].as_str().unwrap()
            ))
            .json(&json!({"State": "running"}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }
}

/// A running deployment of a one-group job.
async fn deployment(t: &T) -> String {
    let r = t
        .http
        .post(format!(
            "{}/_sandbox/scheduler/jobs",
            t.sandbox.scheduler_url
        ))
        .json(&json!({"ID": "web", "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": ["app"]}]}))
        .send()
        .await
        .unwrap();
    r.json::<Value>().await.unwrap()["DeploymentID"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn controls_do_not_block_and_answer_typed_fields_with_the_index_header() {
    let t = T::new().await;
    let id = deployment(&t).await;
    let started = std::time::Instant::now();
    let r = t
        .http
        .put(format!(
            "{}/v1/deployment/pause/{id}?index=100000&wait=10s",
            t.sandbox.scheduler_url
        ))
        .header("X-Nomad-Token", "root")
        .body(json!({"DeploymentID": id, "Pause": true}).to_string())
        .send()
        .await
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let index: u64 = r.headers()["x-nomad-index"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert!(v["EvalID"].is_string());
    for k in ["EvalCreateIndex", "DeploymentModifyIndex", "Index"] {
        assert!(v[k].is_u64(), "{k}");
    }
    assert_eq!(v["Index"], index);
    assert!(v["RevertedJobVersion"].is_null());
}

#[tokio::test]
async fn task_event_fields_have_the_types_go_clients_decode() {
    let t = T::new().await;
    let id = deployment(&t).await;
    start_tasks(&t, &id).await;
    let (s, h, body) = t
        .get(&format!("/v1/deployment/allocations/{id}"), Some("root"))
        .await;
    assert_eq!(s, 200);
    assert_eq!(h["content-type"], "application/json");
    let allocs: Value = serde_json::from_str(&body).unwrap();
    let a = &allocs[0];
    for k in [
        "ID",
        "EvalID",
        "Name",
        "NodeID",
        "JobID",
        "TaskGroup",
        "DesiredStatus",
        "DesiredDescription",
        "ClientStatus",
        "ClientDescription",
    ] {
        assert!(a[k].is_string(), "{k}");
    }
    for k in ["CreateIndex", "ModifyIndex"] {
        assert!(a[k].is_u64(), "{k}");
    }
    for k in ["CreateTime", "ModifyTime"] {
        assert!(a[k].is_i64(), "{k}");
    }
    let ev = &a["TaskStates"]["app"]["Events"][0];
    for k in [
        "Type",
        "RestartReason",
        "SetupError",
        "DriverError",
        "Message",
        "KillError",
        "KillReason",
        "DownloadError",
        "ValidationError",
        "FailedSibling",
        "VaultError",
        "TaskSignalReason",
        "TaskSignal",
        "DriverMessage",
    ] {
        assert!(ev[k].is_string(), "{k}");
    }
    for k in [
        "Time",
        "ExitCode",
        "Signal",
        "KillTimeout",
        "StartDelay",
        "DiskLimit",
    ] {
        assert!(ev[k].is_i64(), "{k}");
    }
    assert!(ev["FailsTask"].is_boolean());
}
