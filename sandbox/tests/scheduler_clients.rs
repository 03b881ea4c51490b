//! Regression tests for the scheduler calls python-nomad makes that the sandbox did not serve,
//! found by running `sandbox/clients/nomad_client.py` against it.

use quartet_sandbox::{start, SandboxOptions};
use serde_json::{json, Value};

/// python-nomad's `allocations.get_allocations()`, `allocation.get_allocation(id)` and
/// `job.get_allocations(job)` read `GET /v1/allocations`, `/v1/allocation/:id` and
/// `/v1/job/:id/allocations`; an unknown allocation is 404 `alloc not found`.
#[tokio::test]
async fn allocations_are_listed_read_by_id_and_listed_per_job() {
    let sb = start(SandboxOptions::ephemeral()).await.unwrap();
    let url = sb.scheduler_url.clone();
    let http = reqwest::Client::new();
    let reg: Value = http
        .post(format!("{url}/_sandbox/scheduler/jobs"))
        .json(&json!({"ID": "web", "TaskGroups": [{"Name": "web", "Count": 2, "MaxParallel": 2, "Tasks": ["server"]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let get = |path: String| {
        http.get(format!("{url}{path}"))
            .header("X-Nomad-Token", "root")
            .send()
    };
    let r = get("/v1/allocations".into()).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("x-nomad-index"));
    let all: Value = r.json().await.unwrap();
    let all = all.as_array().unwrap().clone();
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|a| a["JobID"] == "web"));
    let id = all[0]["ID"].as_str().unwrap();
    let one: Value = get(format!("/v1/allocation/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["ID"], id);
    assert_eq!(one["ClientStatus"], "pending");
    assert_eq!(one["DeploymentID"], reg["DeploymentID"]);
    let by_job: Value = get("/v1/job/web/allocations".into())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(by_job.as_array().unwrap().len(), 2);
    let prefixed: Value = get(format!("/v1/allocations?prefix={}", &id[..4]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(prefixed.as_array().unwrap().iter().any(|a| a["ID"] == id));
    let r = get("/v1/allocation/00000000-0000-0000-0000-000000000000".into())
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.unwrap(), "alloc not found");
    let r = http
        .get(format!("{url}/v1/allocations"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    sb.shutdown();
}

/// python-nomad's `evaluation.get_evaluation(resp["EvalID"])` after a control, and
/// `evaluation.get_allocations(alloc["EvalID"])`, `evaluations.get_evaluations()`,
/// `job.get_evaluations(job)`: every evaluation ID the sandbox hands out is readable.
#[tokio::test]
async fn evaluations_from_controls_and_placements_are_readable() {
    let sb = start(SandboxOptions::ephemeral()).await.unwrap();
    let url = sb.scheduler_url.clone();
    let http = reqwest::Client::new();
    let reg: Value = http
        .post(format!("{url}/_sandbox/scheduler/jobs"))
        .json(
            &json!({"ID": "api", "TaskGroups": [{"Name": "api", "Count": 1, "Tasks": ["server"]}]}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let dep = reg["DeploymentID"].as_str().unwrap().to_string();
    let get = |path: String| {
        http.get(format!("{url}{path}"))
            .header("X-Nomad-Token", "root")
            .send()
    };
    let r: Value = http
        .post(format!("{url}/v1/deployment/pause/{dep}"))
        .header("X-Nomad-Token", "root")
        .json(&json!({"DeploymentID": dep, "Pause": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let eval_id = r["EvalID"].as_str().unwrap().to_string();
    assert!(!eval_id.is_empty(), "{r}");
    let ev: Value = get(format!("/v1/evaluation/{eval_id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ev["ID"], eval_id.as_str());
    assert_eq!(ev["DeploymentID"], dep.as_str());
    assert_eq!(ev["JobID"], "api");
    assert_eq!(ev["Status"], "complete");
    assert_eq!(ev["TriggeredBy"], "deployment-watcher");
    let allocs: Value = get("/v1/job/api/allocations".into())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let placed_by = allocs[0]["EvalID"].as_str().unwrap().to_string();
    let placed: Value = get(format!("/v1/evaluation/{placed_by}/allocations"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(placed[0]["ID"], allocs[0]["ID"]);
    let all: Value = get("/v1/evaluations".into())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ID"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&eval_id.as_str()) && ids.contains(&placed_by.as_str()));
    let by_job: Value = get("/v1/job/api/evaluations".into())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(by_job.as_array().unwrap().len(), 2);
    let r = get("/v1/evaluation/00000000-0000-0000-0000-000000000000".into())
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.unwrap(), "eval not found");
    sb.shutdown();
}
