//! Conformance tests of the emulated scheduler's deployments API (spec C §4.4), through HTTP.

use std::time::{Duration, Instant};

use quartet_sandbox::{start, Sandbox, SandboxOptions};
use serde_json::{json, Value};

const ROOT: &str = "root";

struct T {
    sandbox: Sandbox,
    http: reqwest::Client,
}

impl T {
    async fn new() -> Self {
        Self::with(SandboxOptions::ephemeral()).await
    }
    async fn with(opts: SandboxOptions) -> Self {
        let sandbox = start(opts).await.expect("sandbox starts");
        Self {
            sandbox,
            http: reqwest::Client::new(),
        }
    }
    fn url(&self, path: &str) -> String {
        format!("{}{}", self.sandbox.scheduler_url, path)
    }
    async fn admin(&self, path: &str, body: Value) -> Value {
        let r = self
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert!(status.is_success(), "admin {path}: {status} {text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }
    async fn get(
        &self,
        path: &str,
        token: Option<&str>,
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let mut rb = self.http.get(self.url(path));
        if let Some(t) = token {
            rb = rb.header("X-Nomad-Token", t);
        }
        let r = rb.send().await.unwrap();
        let (s, h) = (r.status().as_u16(), r.headers().clone());
        (s, h, r.text().await.unwrap())
    }
    async fn get_json(&self, path: &str) -> Value {
        let (s, _, body) = self.get(path, Some(ROOT)).await;
        assert_eq!(s, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
    async fn post(&self, path: &str, body: Option<Value>, token: Option<&str>) -> (u16, String) {
        let mut rb = self.http.post(self.url(path));
        if let Some(t) = token {
            rb = rb.header("X-Nomad-Token", t);
        }
        if let Some(b) = body {
            rb = rb.body(b.to_string());
        }
        let r = rb.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
    async fn post_ok(&self, path: &str, body: Option<Value>) -> Value {
        let (s, text) = self.post(path, body, Some(ROOT)).await;
        assert_eq!(s, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }
    async fn deployment(&self, id: &str) -> Value {
        self.get_json(&format!("/v1/deployment/{id}")).await
    }
    async fn allocs(&self, id: &str) -> Vec<Value> {
        self.get_json(&format!("/v1/deployment/allocations/{id}"))
            .await
            .as_array()
            .unwrap()
            .clone()
    }
    /// Register a job and return its deployment ID.
    async fn job(&self, body: Value) -> String {
        self.admin("/_sandbox/scheduler/jobs", body).await["DeploymentID"]
            .as_str()
            .unwrap()
            .to_string()
    }
    async fn all_healthy(&self, dep: &str) {
        self.admin(
            &format!("/_sandbox/scheduler/deployments/{dep}/health"),
            json!({"Healthy": true}),
        )
        .await;
    }
    /// A job with a stable version 0 and a running version 1 whose canaries are placed.
    async fn canary_job(&self, health: &str, auto_revert: bool) -> String {
        let v0 = self.job(web_job(0, 1, health, auto_revert, "v0")).await;
        if health == "manual" {
            for _ in 0..5 {
                let ids: Vec<String> = self
                    .allocs(&v0)
                    .await
                    .iter()
                    .filter(|a| a["DeploymentStatus"]["Healthy"].is_null())
                    .map(|a| a["ID"].as_str().unwrap().to_string())
                    .collect();
                if ids.is_empty() {
                    break;
                }
                self.post_ok(
                    &format!("/v1/deployment/allocation-health/{v0}"),
                    Some(json!({"DeploymentID": v0, "HealthyAllocationIDs": ids})),
                )
                .await;
            }
        } else {
            self.all_healthy(&v0).await;
        }
        assert_eq!(self.deployment(&v0).await["Status"], "successful");
        self.job(web_job(1, 1, health, auto_revert, "v1")).await
    }
}

fn web_job(canary: u32, max_parallel: u32, health: &str, auto_revert: bool, task: &str) -> Value {
    json!({"ID": "web", "TaskGroups": [{
        "Name": "web", "Count": 3, "Canary": canary, "MaxParallel": max_parallel,
        "HealthCheck": health, "AutoRevert": auto_revert, "Tasks": [task]
    }]})
}

fn simple_job(id: &str) -> Value {
    json!({"ID": id, "TaskGroups": [{"Name": "g", "Count": 1}]})
}

#[tokio::test]
async fn list_returns_deployments_with_index_header() {
    let t = T::new().await;
    let d1 = t.job(simple_job("a")).await;
    let d2 = t.job(simple_job("b")).await;
    let (s, h, body) = t.get("/v1/deployments", Some(ROOT)).await;
    assert_eq!(s, 200);
    let list: Vec<Value> = serde_json::from_str(&body).unwrap();
    let ids: Vec<&str> = list.iter().map(|d| d["ID"].as_str().unwrap()).collect();
    assert!(ids.contains(&d1.as_str()) && ids.contains(&d2.as_str()));
    let idx: u64 = h["x-nomad-index"].to_str().unwrap().parse().unwrap();
    assert!(idx >= 2);
    assert_eq!(h["content-type"], "application/json");
}

#[tokio::test]
async fn list_prefix_filters_by_even_length_hex_id_prefix() {
    let t = T::new().await;
    let d1 = t.job(simple_job("a")).await;
    let _ = t.job(simple_job("b")).await;
    let prefix = &d1[..4];
    let list = t
        .get_json(&format!("/v1/deployments?prefix={prefix}"))
        .await;
    let list = list.as_array().unwrap();
    assert!(!list.is_empty());
    assert!(list
        .iter()
        .all(|d| d["ID"].as_str().unwrap().starts_with(prefix)));
}

#[tokio::test]
async fn list_prefix_with_odd_length_is_rejected() {
    let t = T::new().await;
    let (s, _, body) = t.get("/v1/deployments?prefix=abc", Some(ROOT)).await;
    assert_eq!(s, 500);
    assert_eq!(
        body,
        "index error: Input (without hyphens) must be even length"
    );
}

#[tokio::test]
async fn list_prefix_with_non_hex_characters_is_rejected() {
    let t = T::new().await;
    let (s, _, body) = t.get("/v1/deployments?prefix=zz", Some(ROOT)).await;
    assert_eq!(s, 500);
    assert!(body.contains("encoding/hex: invalid byte"), "{body}");
}

#[tokio::test]
async fn read_returns_the_deployment_fields() {
    let t = T::new().await;
    let id = t.job(web_job(0, 0, "checks", false, "v0")).await;
    let (s, h, body) = t.get(&format!("/v1/deployment/{id}"), Some(ROOT)).await;
    assert_eq!(s, 200);
    let d: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(d["ID"], id);
    assert_eq!(d["JobID"], "web");
    assert_eq!(d["JobVersion"], 0);
    assert_eq!(d["Status"], "running");
    assert_eq!(d["StatusDescription"], "Deployment is running");
    for k in [
        "JobModifyIndex",
        "JobSpecModifyIndex",
        "JobCreateIndex",
        "CreateIndex",
        "ModifyIndex",
    ] {
        assert!(d[k].is_u64(), "{k}");
    }
    let g = &d["TaskGroups"]["web"];
    assert_eq!(g["DesiredTotal"], 3);
    assert_eq!(g["PlacedAllocs"], 3);
    assert_eq!(g["HealthyAllocs"], 0);
    assert_eq!(g["UnhealthyAllocs"], 0);
    assert_eq!(g["DesiredCanaries"], 0);
    assert_eq!(g["Promoted"], false);
    assert_eq!(
        h["x-nomad-index"].to_str().unwrap(),
        d["ModifyIndex"].to_string()
    );
}

#[tokio::test]
async fn read_requires_the_full_uuid() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    let (s, _, body) = t
        .get(&format!("/v1/deployment/{}", &id[..8]), Some(ROOT))
        .await;
    assert_eq!(s, 500);
    assert_eq!(
        body,
        "deployment lookup failed: index error: UUID must be 36 characters"
    );
}

#[tokio::test]
async fn read_of_absent_deployment_is_404() {
    let t = T::new().await;
    let (s, _, body) = t
        .get(
            &format!("/v1/deployment/{}", uuid::Uuid::new_v4()),
            Some(ROOT),
        )
        .await;
    assert_eq!(s, 404);
    assert_eq!(body, "deployment not found");
}

#[tokio::test]
async fn allocations_lists_the_allocations_of_the_deployment() {
    let t = T::new().await;
    let id = t.job(web_job(0, 0, "checks", false, "server")).await;
    let _other = t.job(simple_job("other")).await;
    let allocs = t.allocs(&id).await;
    assert_eq!(allocs.len(), 3);
    // Born pending: no task states until the client reports.
    assert_eq!(allocs[0]["ClientStatus"], "pending");
    assert!(allocs[0]["TaskStates"].is_null());
    let first = allocs[0]["ID"].as_str().unwrap().to_string();
    t.admin(
        &format!("/_sandbox/scheduler/allocations/{first}/tasks"),
        json!({"State": "running"}),
    )
    .await;
    let allocs = t.allocs(&id).await;
    let a = &allocs[0];
    assert_eq!(a["JobID"], "web");
    assert_eq!(a["TaskGroup"], "web");
    assert_eq!(a["DesiredStatus"], "run");
    assert_eq!(a["ClientStatus"], "running");
    assert!(a["Name"].as_str().unwrap().starts_with("web.web["));
    assert_eq!(a["TaskStates"]["server"]["State"], "running");
    assert_eq!(a["TaskStates"]["server"]["Failed"], false);
    let ev = &a["TaskStates"]["server"]["Events"][0];
    for k in [
        "Type",
        "Time",
        "FailsTask",
        "ExitCode",
        "DriverMessage",
        "TaskSignal",
    ] {
        assert!(!ev[k].is_null(), "{k}");
    }
    // Not a canary and no health reported yet: no deployment status.
    assert!(a["DeploymentStatus"].is_null());
    assert!(a["CreateTime"].as_i64().unwrap() > 1_000_000_000_000_000_000);
}

#[tokio::test]
async fn allocations_need_the_full_uuid() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    let (s, _, body) = t
        .get(
            &format!("/v1/deployment/allocations/{}", &id[..8]),
            Some(ROOT),
        )
        .await;
    assert_eq!(s, 500);
    assert!(body.contains("UUID must be 36 characters"));
}

#[tokio::test]
async fn blocking_read_waits_for_a_change_and_returns_the_new_index() {
    let t = T::new().await;
    let id = t.job(web_job(0, 0, "checks", false, "v0")).await;
    let (_, h, _) = t.get(&format!("/v1/deployment/{id}"), Some(ROOT)).await;
    let idx: u64 = h["x-nomad-index"].to_str().unwrap().parse().unwrap();
    let url = t.url(&format!("/v1/deployment/{id}?index={idx}&wait=10s"));
    let http = t.http.clone();
    let started = Instant::now();
    let waiter = tokio::spawn(async move {
        http.get(url)
            .header("X-Nomad-Token", ROOT)
            .send()
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the read must block until something changes"
    );
    t.post_ok(
        &format!("/v1/deployment/pause/{id}"),
        Some(json!({"DeploymentID": id, "Pause": true})),
    )
    .await;
    let r = waiter.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let new_idx: u64 = r.headers()["x-nomad-index"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(new_idx > idx);
    let d: Value = r.json().await.unwrap();
    assert_eq!(d["Status"], "paused");
}

#[tokio::test]
async fn blocking_read_returns_after_the_wait_time_without_change() {
    let t = T::new().await;
    let _ = t.job(simple_job("a")).await;
    let (_, h, _) = t.get("/v1/deployments", Some(ROOT)).await;
    let idx = h["x-nomad-index"].to_str().unwrap().to_string();
    let started = Instant::now();
    let (s, h2, _) = t
        .get(&format!("/v1/deployments?index={idx}&wait=1s"), Some(ROOT))
        .await;
    assert_eq!(s, 200);
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(h2["x-nomad-index"].to_str().unwrap(), idx);
}

#[tokio::test]
async fn invalid_wait_or_index_is_400() {
    let t = T::new().await;
    let (s, _, body) = t.get("/v1/deployments?wait=soon", Some(ROOT)).await;
    assert_eq!((s, body.as_str()), (400, "Invalid wait time"));
    let (s, _, body) = t.get("/v1/deployments?index=x", Some(ROOT)).await;
    assert_eq!((s, body.as_str()), (400, "Invalid index"));
}

#[tokio::test]
async fn reads_refuse_other_methods() {
    let t = T::new().await;
    let (s, body) = t.post("/v1/deployments", None, Some(ROOT)).await;
    assert_eq!((s, body.as_str()), (405, "Invalid method"));
}

#[tokio::test]
async fn fail_marks_the_deployment_failed_and_rolls_back_to_the_stable_version() {
    let t = T::new().await;
    let v1 = t.canary_job("checks", true).await;
    let r = t.post_ok(&format!("/v1/deployment/fail/{v1}"), None).await;
    assert_eq!(r["RevertedJobVersion"], 0);
    assert!(!r["EvalID"].as_str().unwrap().is_empty());
    for k in ["EvalCreateIndex", "DeploymentModifyIndex", "Index"] {
        assert!(r[k].as_u64().unwrap() > 0);
    }
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "failed");
    assert_eq!(
        d["StatusDescription"],
        "Deployment marked as failed - rolling back to job version 0"
    );
    // The rollback registered a new job version with version 0's specification.
    let versions = t.get_json("/_sandbox/scheduler/jobs/default/web").await;
    assert_eq!(versions[0]["Version"], 2);
    assert_eq!(versions[0]["TaskGroups"][0]["Tasks"][0], "v0");
    // The reverted version gets its own deployment.
    let list = t.get_json("/v1/deployments").await;
    let latest = list.as_array().unwrap().last().unwrap();
    assert_eq!(latest["JobVersion"], 2);
    assert_eq!(latest["Status"], "running");
}

#[tokio::test]
async fn fail_does_not_roll_back_when_the_stable_version_has_the_same_spec() {
    let t = T::new().await;
    let v0 = t.job(web_job(1, 1, "checks", true, "same")).await;
    t.all_healthy(&v0).await;
    let v1 = t.job(web_job(1, 1, "checks", true, "same")).await;
    let r = t.post_ok(&format!("/v1/deployment/fail/{v1}"), None).await;
    assert!(r["RevertedJobVersion"].is_null());
    let d = t.deployment(&v1).await;
    assert_eq!(
        d["StatusDescription"],
        "Deployment marked as failed - not rolling back to stable job version 0 as current job has same specification"
    );
}

#[tokio::test]
async fn fail_without_auto_revert_does_not_roll_back() {
    let t = T::new().await;
    let v1 = t.canary_job("checks", false).await;
    let r = t.post_ok(&format!("/v1/deployment/fail/{v1}"), None).await;
    assert!(r["RevertedJobVersion"].is_null());
    assert_eq!(
        t.deployment(&v1).await["StatusDescription"],
        "Deployment marked as failed"
    );
}

#[tokio::test]
async fn fail_of_a_terminal_deployment_is_refused() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    t.post_ok(&format!("/v1/deployment/fail/{id}"), None).await;
    let (s, body) = t
        .post(&format!("/v1/deployment/fail/{id}"), None, Some(ROOT))
        .await;
    assert_eq!((s, body.as_str()), (500, "can't fail terminal deployment"));
}

#[tokio::test]
async fn control_of_an_absent_deployment_is_not_found() {
    let t = T::new().await;
    let id = uuid::Uuid::new_v4().to_string();
    let (s, body) = t
        .post(&format!("/v1/deployment/fail/{id}"), None, Some(ROOT))
        .await;
    assert_eq!((s, body.as_str()), (500, "deployment not found"));
}

#[tokio::test]
async fn pause_then_resume_moves_between_paused_and_running() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    let r = t
        .post_ok(
            &format!("/v1/deployment/pause/{id}"),
            Some(json!({"DeploymentID": id, "Pause": true})),
        )
        .await;
    assert_eq!(r["EvalID"], "");
    assert!(r["RevertedJobVersion"].is_null());
    let d = t.deployment(&id).await;
    assert_eq!(
        (d["Status"].as_str(), d["StatusDescription"].as_str()),
        (Some("paused"), Some("Deployment is paused"))
    );
    let r = t
        .post_ok(
            &format!("/v1/deployment/pause/{id}"),
            Some(json!({"DeploymentID": id, "Pause": false})),
        )
        .await;
    assert!(!r["EvalID"].as_str().unwrap().is_empty());
    assert_eq!(t.deployment(&id).await["Status"], "running");
}

#[tokio::test]
async fn paused_deployment_places_no_more_allocations_until_resumed() {
    let t = T::new().await;
    let id = t.job(web_job(0, 1, "checks", false, "v0")).await;
    assert_eq!(t.allocs(&id).await.len(), 1);
    t.post_ok(
        &format!("/v1/deployment/pause/{id}"),
        Some(json!({"DeploymentID": id, "Pause": true})),
    )
    .await;
    let first = t.allocs(&id).await[0]["ID"].as_str().unwrap().to_string();
    t.admin(
        &format!("/_sandbox/scheduler/allocations/{first}/health"),
        json!({"Healthy": true}),
    )
    .await;
    assert_eq!(t.allocs(&id).await.len(), 1);
    t.post_ok(
        &format!("/v1/deployment/pause/{id}"),
        Some(json!({"DeploymentID": id, "Pause": false})),
    )
    .await;
    assert_eq!(t.allocs(&id).await.len(), 2);
}

#[tokio::test]
async fn control_bodies_are_checked_like_the_real_handlers() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    let path = format!("/v1/deployment/pause/{id}");
    assert_eq!(
        t.post(&path, None, Some(ROOT)).await,
        (400, "Request body is empty".to_string())
    );
    assert_eq!(
        t.post(&path, Some(json!({"Pause": true})), Some(ROOT))
            .await,
        (400, "DeploymentID must be specified".to_string())
    );
    let other = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        t.post(
            &path,
            Some(json!({"DeploymentID": other, "Pause": true})),
            Some(ROOT)
        )
        .await,
        (400, "Deployment ID does not match".to_string())
    );
    let (s, body) = t
        .post(
            &path,
            Some(json!({"DeploymentID": id, "Pause": "yes"})),
            Some(ROOT),
        )
        .await;
    assert_eq!(s, 400);
    assert!(body.contains("cannot unmarshal string"), "{body}");
}

#[tokio::test]
async fn controls_accept_keys_in_any_case_extra_keys_and_put() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    let r = t
        .http
        .put(t.url(&format!("/v1/deployment/pause/{id}")))
        .header("X-Nomad-Token", ROOT)
        .body(
            json!({"deploymentid": id, "pause": true, "Region": "global", "SecretID": ""})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers().contains_key("x-nomad-index"));
    assert_eq!(t.deployment(&id).await["Status"], "paused");
}

#[tokio::test]
async fn promote_is_refused_while_canaries_are_unhealthy() {
    let t = T::new().await;
    let v1 = t.canary_job("checks", false).await;
    let d = t.deployment(&v1).await;
    assert_eq!(
        d["StatusDescription"],
        "Deployment is running but requires manual promotion"
    );
    assert_eq!(d["TaskGroups"]["web"]["DesiredCanaries"], 1);
    let canary = d["TaskGroups"]["web"]["PlacedCanaries"][0]
        .as_str()
        .unwrap()
        .to_string();
    let (s, body) = t
        .post(
            &format!("/v1/deployment/promote/{v1}"),
            Some(json!({"DeploymentID": v1, "All": true})),
            Some(ROOT),
        )
        .await;
    assert_eq!(s, 500);
    // The real state store checks the group's healthy count against DesiredCanaries.
    let _ = canary;
    assert_eq!(body, "Task group \"web\" has 0/1 healthy allocations");
    assert_eq!(
        t.deployment(&v1).await["TaskGroups"]["web"]["Promoted"],
        false
    );
}

#[tokio::test]
async fn promote_all_after_healthy_canaries_rolls_out_the_rest() {
    let t = T::new().await;
    let v1 = t.canary_job("checks", false).await;
    assert_eq!(t.allocs(&v1).await.len(), 1);
    t.all_healthy(&v1).await;
    assert_eq!(t.allocs(&v1).await.len(), 1, "no rollout before promotion");
    let r = t
        .post_ok(
            &format!("/v1/deployment/promote/{v1}"),
            Some(json!({"DeploymentID": v1, "All": true})),
        )
        .await;
    assert!(!r["EvalID"].as_str().unwrap().is_empty());
    let d = t.deployment(&v1).await;
    assert_eq!(d["TaskGroups"]["web"]["Promoted"], true);
    assert_eq!(d["StatusDescription"], "Deployment is running");
    assert_eq!(
        t.allocs(&v1).await.len(),
        2,
        "rolling upgrade continues after promotion"
    );
    t.all_healthy(&v1).await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "successful");
    assert_eq!(d["TaskGroups"]["web"]["HealthyAllocs"], 3);
}

#[tokio::test]
async fn promote_of_named_groups_promotes_only_those() {
    let t = T::new().await;
    let groups = |task: &str| {
        json!({"ID": "two", "TaskGroups": [
            {"Name": "api", "Count": 2, "Canary": 1, "Tasks": [task]},
            {"Name": "db", "Count": 2, "Canary": 1, "Tasks": [task]}
        ]})
    };
    let v0 = t.job(groups("v0")).await;
    t.all_healthy(&v0).await;
    let v1 = t.job(groups("v1")).await;
    t.all_healthy(&v1).await;
    t.post_ok(
        &format!("/v1/deployment/promote/{v1}"),
        Some(json!({"DeploymentID": v1, "Groups": ["api"]})),
    )
    .await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["TaskGroups"]["api"]["Promoted"], true);
    assert_eq!(d["TaskGroups"]["db"]["Promoted"], false);
}

#[tokio::test]
async fn promote_without_canaries_succeeds_with_an_evaluation() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    let (s, body) = t
        .post(
            &format!("/v1/deployment/promote/{id}"),
            Some(json!({"DeploymentID": id, "All": true})),
            Some(ROOT),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(!v["EvalID"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn auto_promote_promotes_once_canaries_are_healthy() {
    let t = T::new().await;
    let job = |task: &str| json!({"ID": "auto", "TaskGroups": [{"Name": "g", "Count": 2, "Canary": 1, "AutoPromote": true, "Tasks": [task]}]});
    let v0 = t.job(job("v0")).await;
    t.all_healthy(&v0).await;
    let v1 = t.job(job("v1")).await;
    assert_eq!(
        t.deployment(&v1).await["StatusDescription"],
        "Deployment is running pending automatic promotion"
    );
    t.all_healthy(&v1).await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["TaskGroups"]["g"]["Promoted"], true);
    assert_eq!(d["Status"], "successful");
}

#[tokio::test]
async fn allocation_health_marks_allocations_healthy_and_lets_the_update_proceed() {
    let t = T::new().await;
    let id = t.job(web_job(0, 1, "manual", false, "v0")).await;
    let allocs = t.allocs(&id).await;
    assert_eq!(allocs.len(), 1);
    let a = allocs[0]["ID"].as_str().unwrap().to_string();
    let r = t
        .post_ok(
            &format!("/v1/deployment/allocation-health/{id}"),
            Some(json!({"DeploymentID": id, "HealthyAllocationIDs": [a]})),
        )
        .await;
    assert!(r["RevertedJobVersion"].is_null());
    let allocs = t.allocs(&id).await;
    assert_eq!(allocs.len(), 2);
    assert_eq!(allocs[0]["DeploymentStatus"]["Healthy"], true);
    assert_eq!(
        t.deployment(&id).await["TaskGroups"]["web"]["HealthyAllocs"],
        1
    );
}

#[tokio::test]
async fn allocation_health_unhealthy_fails_the_deployment_and_rolls_back() {
    let t = T::new().await;
    let v1 = t.canary_job("manual", true).await;
    let canary = t.allocs(&v1).await[0]["ID"].as_str().unwrap().to_string();
    let r = t
        .post_ok(
            &format!("/v1/deployment/allocation-health/{v1}"),
            Some(json!({"DeploymentID": v1, "UnhealthyAllocationIDs": [canary]})),
        )
        .await;
    assert_eq!(r["RevertedJobVersion"], 0);
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "failed");
    assert_eq!(
        d["StatusDescription"],
        "Failed due to unhealthy allocations - rolling back to job version 0"
    );
    assert_eq!(d["TaskGroups"]["web"]["UnhealthyAllocs"], 1);
}

#[tokio::test]
async fn allocation_health_is_accepted_for_groups_without_manual_health_checks() {
    let t = T::new().await;
    let id = t.job(web_job(0, 1, "checks", false, "v0")).await;
    let a = t.allocs(&id).await[0]["ID"].as_str().unwrap().to_string();
    let (s, body) = t
        .post(
            &format!("/v1/deployment/allocation-health/{id}"),
            Some(json!({"DeploymentID": id, "HealthyAllocationIDs": [a]})),
            Some(ROOT),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(t.allocs(&id).await[0]["DeploymentStatus"]["Healthy"], true);
}

#[tokio::test]
async fn allocation_health_needs_allocation_ids_of_the_deployment() {
    let t = T::new().await;
    let id = t.job(web_job(0, 1, "manual", false, "v0")).await;
    let (s, body) = t
        .post(
            &format!("/v1/deployment/allocation-health/{id}"),
            Some(json!({"DeploymentID": id})),
            Some(ROOT),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (
            500,
            "must specify at least one healthy/unhealthy allocation ID"
        )
    );
    let (s, body) = t
        .post(
            &format!("/v1/deployment/allocation-health/{id}"),
            Some(json!({"DeploymentID": id, "HealthyAllocationIDs": ["nope"]})),
            Some(ROOT),
        )
        .await;
    assert_eq!((s, body.as_str()), (500, "unknown alloc \"nope\""));
}

#[tokio::test]
async fn client_reported_unhealthy_allocation_fails_the_deployment_of_a_group_without_progress_deadline(
) {
    let t = T::new().await;
    let job = |task: &str| {
        json!({"ID": "web", "TaskGroups": [{"Name": "web", "Count": 3, "Canary": 1,
               "AutoRevert": true, "ProgressDeadline": 0, "Tasks": [task]}]})
    };
    let v0 = t.job(job("v0")).await;
    t.all_healthy(&v0).await;
    let v1 = t.job(job("v1")).await;
    let canary = t.allocs(&v1).await[0]["ID"].as_str().unwrap().to_string();
    t.admin(
        &format!("/_sandbox/scheduler/allocations/{canary}/health"),
        json!({"Healthy": false}),
    )
    .await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "failed");
    assert_eq!(
        d["StatusDescription"],
        "Failed due to unhealthy allocations - rolling back to job version 0"
    );
}

#[tokio::test]
async fn rolling_update_respects_max_parallel() {
    let t = T::new().await;
    let id = t.job(web_job(0, 2, "checks", false, "v0")).await;
    assert_eq!(t.allocs(&id).await.len(), 2);
    let a = t.allocs(&id).await[0]["ID"].as_str().unwrap().to_string();
    t.admin(
        &format!("/_sandbox/scheduler/allocations/{a}/health"),
        json!({"Healthy": true}),
    )
    .await;
    assert_eq!(t.allocs(&id).await.len(), 3);
    assert_eq!(
        t.deployment(&id).await["TaskGroups"]["web"]["PlacedAllocs"],
        3
    );
}

#[tokio::test]
async fn unblock_completes_a_blocked_multiregion_deployment() {
    let t = T::new().await;
    let id = t
        .job(json!({"ID": "mr", "Multiregion": true, "TaskGroups": [{"Name": "g", "Count": 1}]}))
        .await;
    t.all_healthy(&id).await;
    let d = t.deployment(&id).await;
    assert_eq!(d["Status"], "blocked");
    assert_eq!(
        d["StatusDescription"],
        "Deployment is complete but waiting for peer region"
    );
    assert_eq!(d["IsMultiregion"], true);
    let r = t
        .post_ok(
            &format!("/v1/deployment/unblock/{id}"),
            Some(json!({"DeploymentID": id})),
        )
        .await;
    assert!(r["Index"].as_u64().unwrap() > 0);
    let d = t.deployment(&id).await;
    assert_eq!(d["Status"], "successful");
    assert_eq!(d["StatusDescription"], "Deployment completed successfully");
}

#[tokio::test]
async fn unblock_of_a_running_deployment_is_refused() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    let (s, body) = t
        .post(
            &format!("/v1/deployment/unblock/{id}"),
            Some(json!({"DeploymentID": id})),
            Some(ROOT),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (500, "can't unblock running deployment")
    );
}

#[tokio::test]
async fn successful_deployment_marks_its_job_version_stable() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    t.all_healthy(&id).await;
    assert_eq!(t.deployment(&id).await["Status"], "successful");
    let versions = t.get_json("/_sandbox/scheduler/jobs/default/a").await;
    assert_eq!(versions[0]["Stable"], true);
}

#[tokio::test]
async fn new_job_version_cancels_the_active_deployment() {
    let t = T::new().await;
    let d0 = t.job(simple_job("a")).await;
    let _d1 = t
        .job(json!({"ID": "a", "TaskGroups": [{"Name": "g", "Count": 2}]}))
        .await;
    let d = t.deployment(&d0).await;
    assert_eq!(d["Status"], "cancelled");
    assert_eq!(
        d["StatusDescription"],
        "Cancelled due to newer version of job"
    );
}

#[tokio::test]
async fn state_persists_across_restarts_with_a_state_dir() {
    let dir = std::env::temp_dir().join(format!("quartet-sched-{}", uuid::Uuid::new_v4()));
    let mut opts = SandboxOptions::ephemeral();
    opts.state_dir = Some(dir.clone());
    let t = T::with(opts.clone()).await;
    let id = t.job(simple_job("persisted")).await;
    t.sandbox.shutdown();
    let t2 = T::with(opts).await;
    assert_eq!(t2.deployment(&id).await["JobID"], "persisted");
    t2.sandbox.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn list_filters_by_namespace_and_star_lists_all() {
    let t = T::new().await;
    let d_default = t.job(simple_job("a")).await;
    let d_prod = t
        .job(json!({"ID": "b", "Namespace": "prod", "TaskGroups": [{"Name": "g"}]}))
        .await;
    let ids = |v: Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|d| d["ID"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let default = ids(t.get_json("/v1/deployments").await);
    assert_eq!(default, vec![d_default.clone()]);
    let prod = ids(t.get_json("/v1/deployments?namespace=prod").await);
    assert_eq!(prod, vec![d_prod.clone()]);
    let all = ids(t.get_json("/v1/deployments?namespace=*").await);
    assert!(all.contains(&d_default) && all.contains(&d_prod));
    assert_eq!(t.deployment(&d_prod).await["Namespace"], "prod");
}

#[tokio::test]
async fn unknown_region_has_no_path() {
    let t = T::new().await;
    let (s, _, body) = t.get("/v1/deployments?region=mars", Some(ROOT)).await;
    assert_eq!((s, body.as_str()), (500, "No path to region"));
}

#[tokio::test]
async fn list_is_ordered_by_create_index_and_reverse_reverses_it() {
    let t = T::new().await;
    let d1 = t.job(simple_job("a")).await;
    let d2 = t.job(simple_job("b")).await;
    let ids = |v: Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|d| d["ID"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(t.get_json("/v1/deployments").await),
        vec![d1.clone(), d2.clone()]
    );
    assert_eq!(
        ids(t.get_json("/v1/deployments?reverse=true").await),
        vec![d2, d1]
    );
}

#[tokio::test]
async fn list_paginates_with_per_page_and_next_token() {
    let t = T::new().await;
    let d1 = t.job(simple_job("a")).await;
    let d2 = t.job(simple_job("b")).await;
    let d3 = t.job(simple_job("c")).await;
    let (s, h, body) = t.get("/v1/deployments?per_page=2", Some(ROOT)).await;
    assert_eq!(s, 200);
    let page: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(
        page.iter()
            .map(|d| d["ID"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec![d1.as_str(), d2.as_str()]
    );
    let next = h["x-nomad-nexttoken"].to_str().unwrap().to_string();
    assert!(next.ends_with(&d3));
    let (_, h2, body) = t
        .get(
            &format!("/v1/deployments?per_page=2&next_token={next}"),
            Some(ROOT),
        )
        .await;
    let page: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["ID"], d3);
    assert!(!h2.contains_key("x-nomad-nexttoken"));
}

#[tokio::test]
async fn canary_allocations_carry_a_canary_deployment_status() {
    let t = T::new().await;
    let v1 = t.canary_job("checks", false).await;
    let a = &t.allocs(&v1).await[0];
    assert_eq!(a["DeploymentStatus"]["Canary"], true);
    assert!(a["DeploymentStatus"]["Healthy"].is_null());
    assert_eq!(a["JobVersion"], 1);
}

#[tokio::test]
async fn missed_progress_deadline_fails_the_deployment_and_rolls_back() {
    let t = T::new().await;
    let job = |task: &str| {
        json!({"ID": "slow", "TaskGroups": [{"Name": "g", "Count": 1, "AutoRevert": true,
               "ProgressDeadline": 300_000_000u64, "Tasks": [task]}]})
    };
    let v0 = t.job(job("v0")).await;
    t.all_healthy(&v0).await;
    let v1 = t.job(job("v1")).await;
    let d = t.deployment(&v1).await;
    assert_ne!(
        d["TaskGroups"]["g"]["RequireProgressBy"],
        "0001-01-01T00:00:00Z"
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "failed");
    assert_eq!(
        d["StatusDescription"],
        "Failed due to progress deadline - rolling back to job version 0"
    );
}

#[tokio::test]
async fn progress_deadline_does_not_fail_a_deployment_waiting_for_promotion() {
    let t = T::new().await;
    let job = |task: &str| {
        json!({"ID": "canary", "TaskGroups": [{"Name": "g", "Count": 2, "Canary": 1,
               "ProgressDeadline": 300_000_000u64, "Tasks": [task]}]})
    };
    let v0 = t.job(job("v0")).await;
    t.all_healthy(&v0).await;
    let v1 = t.job(job("v1")).await;
    t.all_healthy(&v1).await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "running");
    assert_eq!(
        d["StatusDescription"],
        "Deployment is running but requires manual promotion"
    );
}

#[tokio::test]
async fn job_deployments_lists_a_jobs_deployments_newest_first() {
    let t = T::new().await;
    let d0 = t.job(simple_job("a")).await;
    let d1 = t
        .job(json!({"ID": "a", "TaskGroups": [{"Name": "g", "Count": 2}]}))
        .await;
    let _other = t.job(simple_job("b")).await;
    let list = t.get_json("/v1/job/a/deployments").await;
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["ID"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![d1.as_str(), d0.as_str()]);
    assert_eq!(t.get_json("/v1/job/a/deployment").await["ID"], d1);
    assert!(t.get_json("/v1/job/none/deployment").await.is_null());
}

#[tokio::test]
async fn controls_on_a_terminal_deployment_are_refused() {
    let t = T::new().await;
    let id = t.job(simple_job("a")).await;
    t.post_ok(&format!("/v1/deployment/fail/{id}"), None).await;
    let cases = [
        (
            "pause",
            json!({"DeploymentID": id, "Pause": true}),
            "can't pause terminal deployment",
        ),
        (
            "pause",
            json!({"DeploymentID": id, "Pause": false}),
            "can't resume terminal deployment",
        ),
        (
            "promote",
            json!({"DeploymentID": id, "All": true}),
            "can't promote terminal deployment",
        ),
        (
            "unblock",
            json!({"DeploymentID": id}),
            "can't unblock terminal deployment",
        ),
        (
            "allocation-health",
            json!({"DeploymentID": id, "HealthyAllocationIDs": ["x"]}),
            "can't set health of allocations for a terminal deployment",
        ),
    ];
    for (op, body, text) in cases {
        let (s, got) = t
            .post(&format!("/v1/deployment/{op}/{id}"), Some(body), Some(ROOT))
            .await;
        assert_eq!((s, got.as_str()), (500, text), "{op}");
    }
}

// ---- corrections against the real scheduler (issue 22) ----

/// A job with a stable version 0 and a running version 1 of two groups: `api` with one canary
/// and `db` without canaries (each `Count: 2`).
async fn mixed_canary_job(t: &T, deadline_ns: u64) -> String {
    let job = |task: &str| {
        json!({"ID": "mixed", "TaskGroups": [
            {"Name": "api", "Count": 2, "Canary": 1, "ProgressDeadline": deadline_ns, "Tasks": [task]},
            {"Name": "db", "Count": 2, "Canary": 0, "ProgressDeadline": deadline_ns, "Tasks": [task]}
        ]})
    };
    let v0 = t.job(job("v0")).await;
    t.all_healthy(&v0).await;
    t.job(job("v1")).await
}

async fn promote(t: &T, id: &str, body: Value) -> (u16, String) {
    t.post(
        &format!("/v1/deployment/promote/{id}"),
        Some(body),
        Some(ROOT),
    )
    .await
}

#[tokio::test]
async fn promote_checks_the_healthy_count_against_desired_canaries_per_group() {
    let t = T::new().await;
    let v1 = mixed_canary_job(&t, 600_000_000_000).await;
    let (s, body) = promote(&t, &v1, json!({"DeploymentID": v1, "All": true})).await;
    assert_eq!(
        (s, body.as_str()),
        (500, "Task group \"api\" has 0/1 healthy allocations")
    );
    // Only the group without canaries (and an unknown name) selected: nothing to check.
    let (s, body) = promote(
        &t,
        &v1,
        json!({"DeploymentID": v1, "Groups": ["db", "nope"]}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let d = t.deployment(&v1).await;
    assert_eq!(d["TaskGroups"]["api"]["Promoted"], false);
}

#[tokio::test]
async fn promotion_clears_the_canary_flag_and_moves_the_allocations_index() {
    let t = T::new().await;
    let v1 = t.canary_job("checks", false).await;
    t.all_healthy(&v1).await;
    let (_, h, _) = t
        .get(&format!("/v1/deployment/allocations/{v1}"), Some(ROOT))
        .await;
    let before: u64 = h["x-nomad-index"].to_str().unwrap().parse().unwrap();
    let canary = t.allocs(&v1).await[0].clone();
    assert_eq!(canary["DeploymentStatus"]["Canary"], true);
    let (s, body) = promote(&t, &v1, json!({"DeploymentID": v1, "All": true})).await;
    assert_eq!(s, 200, "{body}");
    let allocs = t.allocs(&v1).await;
    let after = allocs.iter().find(|a| a["ID"] == canary["ID"]).unwrap();
    assert_eq!(after["DeploymentStatus"]["Canary"], false);
    assert!(after["ModifyIndex"].as_u64() > canary["ModifyIndex"].as_u64());
    let (_, h, _) = t
        .get(&format!("/v1/deployment/allocations/{v1}"), Some(ROOT))
        .await;
    let now: u64 = h["x-nomad-index"].to_str().unwrap().parse().unwrap();
    assert!(now > before);
}

#[tokio::test]
async fn promotion_restarts_the_progress_deadline() {
    let t = T::new().await;
    let v1 = mixed_canary_job(&t, 600_000_000_000).await;
    let canary = t.deployment(&v1).await["TaskGroups"]["api"]["PlacedCanaries"][0]
        .as_str()
        .unwrap()
        .to_string();
    t.admin(
        &format!("/_sandbox/scheduler/allocations/{canary}/health"),
        json!({"Healthy": true}),
    )
    .await;
    let by = t.deployment(&v1).await["TaskGroups"]["api"]["RequireProgressBy"].clone();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (s, body) = promote(&t, &v1, json!({"DeploymentID": v1, "All": true})).await;
    assert_eq!(s, 200, "{body}");
    let d = t.deployment(&v1).await;
    assert!(
        d["TaskGroups"]["api"]["RequireProgressBy"].as_str() > by.as_str(),
        "{d}"
    );
}

#[tokio::test]
async fn a_deployment_paused_past_its_deadline_does_not_fail_on_resume() {
    let t = T::new().await;
    let job = |task: &str| {
        json!({"ID": "slow", "TaskGroups": [{"Name": "g", "Count": 1,
               "ProgressDeadline": 500_000_000u64, "Tasks": [task]}]})
    };
    let v0 = t.job(job("v0")).await;
    t.all_healthy(&v0).await;
    let v1 = t.job(job("v1")).await;
    let by = t.deployment(&v1).await["TaskGroups"]["g"]["RequireProgressBy"].clone();
    tokio::time::sleep(Duration::from_millis(20)).await;
    t.post_ok(
        &format!("/v1/deployment/pause/{v1}"),
        Some(json!({"DeploymentID": v1, "Pause": true})),
    )
    .await;
    let paused = t.deployment(&v1).await;
    assert!(paused["TaskGroups"]["g"]["RequireProgressBy"].as_str() > by.as_str());
    tokio::time::sleep(Duration::from_millis(900)).await;
    t.post_ok(
        &format!("/v1/deployment/pause/{v1}"),
        Some(json!({"DeploymentID": v1, "Pause": false})),
    )
    .await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "running", "{d}");
    assert_eq!(d["StatusDescription"], "Deployment is running");
    assert!(
        d["TaskGroups"]["g"]["RequireProgressBy"].as_str()
            > paused["TaskGroups"]["g"]["RequireProgressBy"].as_str()
    );
}

#[tokio::test]
async fn resume_sets_the_running_description() {
    let t = T::new().await;
    let v1 = t.canary_job("checks", false).await;
    for pause in [true, false] {
        t.post_ok(
            &format!("/v1/deployment/pause/{v1}"),
            Some(json!({"DeploymentID": v1, "Pause": pause})),
        )
        .await;
    }
    assert_eq!(
        t.deployment(&v1).await["StatusDescription"],
        "Deployment is running"
    );
}

#[tokio::test]
async fn allocations_are_born_pending_and_the_client_drives_task_states() {
    let t = T::new().await;
    let id = t
        .job(json!({"ID": "tasks", "TaskGroups": [{"Name": "g", "Count": 1, "HealthCheck": "manual", "Tasks": ["a", "b"]}]}))
        .await;
    let a = t.allocs(&id).await[0].clone();
    assert_eq!(a["ClientStatus"], "pending");
    assert!(a["TaskStates"].is_null());
    let alloc = a["ID"].as_str().unwrap().to_string();
    let tasks = format!("/_sandbox/scheduler/allocations/{alloc}/tasks");
    t.admin(&tasks, json!({"Task": "a", "State": "pending"}))
        .await;
    let a = t.allocs(&id).await[0].clone();
    assert_eq!(a["ClientStatus"], "pending");
    assert_eq!(a["TaskStates"]["a"]["State"], "pending");
    t.admin(&tasks, json!({"State": "running"})).await;
    let a = t.allocs(&id).await[0].clone();
    assert_eq!(a["ClientStatus"], "running");
    assert_eq!(a["TaskStates"]["b"]["State"], "running");
    assert_ne!(a["TaskStates"]["b"]["StartedAt"], "0001-01-01T00:00:00Z");
    // A restarting task.
    t.admin(
        &tasks,
        json!({"Task": "a", "State": "running", "Restart": true}),
    )
    .await;
    let a = t.allocs(&id).await[0].clone();
    assert_eq!(a["TaskStates"]["a"]["Restarts"], 1);
    assert_ne!(a["TaskStates"]["a"]["LastRestart"], "0001-01-01T00:00:00Z");
    // A failed task.
    t.admin(
        &tasks,
        json!({"Task": "b", "State": "dead", "Failed": true}),
    )
    .await;
    let a = t.allocs(&id).await[0].clone();
    assert_eq!(a["ClientStatus"], "failed");
    assert_eq!(a["TaskStates"]["b"]["State"], "dead");
    assert_eq!(a["TaskStates"]["b"]["Failed"], true);
    assert_ne!(a["TaskStates"]["b"]["FinishedAt"], "0001-01-01T00:00:00Z");
}

#[tokio::test]
async fn client_reported_unhealthy_allocation_with_a_progress_deadline_is_replaced_and_fails_at_the_deadline(
) {
    let t = T::new().await;
    let job = |task: &str| {
        json!({"ID": "r", "TaskGroups": [{"Name": "g", "Count": 1, "AutoRevert": true,
               "ProgressDeadline": 700_000_000u64, "Tasks": [task]}]})
    };
    let v0 = t.job(job("v0")).await;
    t.all_healthy(&v0).await;
    let v1 = t.job(job("v1")).await;
    let first = t.allocs(&v1).await[0]["ID"].as_str().unwrap().to_string();
    t.admin(
        &format!("/_sandbox/scheduler/allocations/{first}/tasks"),
        json!({"State": "dead", "Failed": true}),
    )
    .await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "running", "{d}");
    assert_eq!(d["TaskGroups"]["g"]["UnhealthyAllocs"], 1);
    assert_eq!(t.allocs(&v1).await.len(), 2, "a replacement is placed");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let d = t.deployment(&v1).await;
    assert_eq!(d["Status"], "failed");
    assert_eq!(
        d["StatusDescription"],
        "Failed due to progress deadline - rolling back to job version 0"
    );
}

#[tokio::test]
async fn unblock_on_the_community_edition_is_a_no_op_answering_200() {
    let mut opts = SandboxOptions::ephemeral();
    opts.edition = quartet_sandbox::Edition::Community;
    let t = T::with(opts).await;
    let id = t.job(simple_job("a")).await;
    let (s, body) = t
        .post(
            &format!("/v1/deployment/unblock/{id}"),
            Some(json!({"DeploymentID": id})),
            Some(ROOT),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(t.deployment(&id).await["Status"], "running");
}

#[test]
fn blocking_queries_cap_at_300_seconds_plus_up_to_a_sixteenth_of_jitter() {
    use quartet_sandbox::scheduler::wire::blocking_opts;
    for wait in ["20m", "300s", ""] {
        let q = vec![
            ("index".to_string(), "5".to_string()),
            ("wait".to_string(), wait.to_string()),
        ];
        let o = blocking_opts(&q).unwrap();
        assert!(o.wait >= Duration::from_secs(300), "{wait}: {:?}", o.wait);
        assert!(
            o.wait <= Duration::from_secs(300) + Duration::from_secs(300) / 16,
            "{wait}: {:?}",
            o.wait
        );
    }
    let q = vec![("wait".to_string(), "10s".to_string())];
    let o = blocking_opts(&q).unwrap();
    assert!(o.wait >= Duration::from_secs(10) && o.wait <= Duration::from_millis(10_625));
}

#[tokio::test]
async fn job_read_answers_the_latest_version_with_each_groups_update_block() {
    let t = T::new().await;
    t.job(web_job(0, 1, "manual", false, "v0")).await;
    let j = t.get_json("/v1/job/web").await;
    assert_eq!(j["ID"], "web");
    assert_eq!(j["Version"], 0);
    assert_eq!(j["TaskGroups"][0]["Update"]["HealthCheck"], "manual");
    let (s, _, body) = t.get("/v1/job/nope", Some(ROOT)).await;
    assert_eq!((s, body.as_str()), (404, "job not found"));
}
