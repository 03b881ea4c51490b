//! Conformance tests for spec B rules that the other workspace test files did not pin down
//! (found while mapping every row of §2–§8 to a test, see README-workspaces.md "Conformance").

use crate::workspaces_support;

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use workspaces_support::*;

async fn action(ws: &Ws, run: &str, name: &str) -> u16 {
    ws.call(
        Method::POST,
        &format!("/api/v2/runs/{run}/actions/{name}"),
        Some(ROOT),
        None,
    )
    .await
    .status
}

async fn locked(ws: &Ws, w: &str) -> Value {
    ws.get(&format!("/api/v2/workspaces/{w}")).await.body["data"]["attributes"]["locked"].clone()
}

#[tokio::test]
async fn run_list_pages_twenty_by_default_and_a_commit_search_matches_no_uncommitted_run() {
    let ws = Ws::start().await;
    // Slow backend: the runs stay queued while they are listed.
    ws.admin(Method::PUT, "/settings", json!({"step_ms": 60000}))
        .await;
    let w = ws.create_ws("many-runs", json!({})).await;
    for _ in 0..21 {
        ws.create_run(&w, json!({})).await;
    }
    let r = ws.get(&format!("/api/v2/workspaces/{w}/runs")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"].as_array().map(Vec::len), Some(20));
    let p = &r.body["meta"]["pagination"];
    assert_eq!(p["page-size"], 20);
    assert_eq!(p["total-count"], 21);
    assert_eq!(p["total-pages"], 2);
    assert_eq!(p["next-page"], 2);
    let page2 = ws
        .get(&format!("/api/v2/workspaces/{w}/runs?page%5Bnumber%5D=2"))
        .await;
    assert_eq!(page2.body["data"].as_array().map(Vec::len), Some(1));
    let commit = ws
        .get(&format!(
            "/api/v2/workspaces/{w}/runs?search%5Bcommit%5D=0123abcd"
        ))
        .await;
    assert_eq!(commit.status, 200);
    assert_eq!(commit.body["data"], json!([]));
    assert_eq!(commit.body["meta"]["pagination"]["total-count"], 0);
}

#[tokio::test]
async fn cancel_while_applying_cancels_the_run_and_the_next_run_proceeds() {
    let ws = Ws::start().await;
    ws.admin(Method::PUT, "/settings", json!({"step_ms": 300}))
        .await;
    let w = ws.create_ws("cancel-apply", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let next = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planned").await;
    assert_eq!(
        ws.run_status(&next).await,
        "pending",
        "one active run per workspace"
    );
    assert_eq!(action(&ws, &run, "apply").await, 202);
    ws.wait_status(&run, "applying").await;
    assert_eq!(action(&ws, &run, "cancel").await, 202);
    let body = ws.wait_status(&run, "canceled").await;
    assert!(body["data"]["attributes"]["canceled-at"].is_string());
    ws.wait_status(&next, "planned").await;
}

#[tokio::test]
async fn discarding_a_run_awaiting_confirmation_lets_later_runs_proceed() {
    let ws = Ws::start().await;
    let w = ws.create_ws("discard-planned", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let next = ws.create_run(&w, json!({})).await;
    let planned = ws.wait_status(&run, "planned").await;
    assert_eq!(
        planned["data"]["attributes"]["actions"]["is-discardable"],
        true
    );
    assert_eq!(ws.run_status(&next).await, "pending");
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/runs/{run}/actions/discard"),
            Some(ROOT),
            Some(json!({"comment": "not now"})),
        )
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(r.body, Value::Null, "action endpoints return no body");
    let d = ws.wait_status(&run, "discarded").await;
    assert!(d["data"]["attributes"]["status-timestamps"]["discarded-at"].is_string());
    ws.wait_status(&next, "planned").await;
    // a discarded run is final
    assert_eq!(action(&ws, &run, "apply").await, 409);
    assert_eq!(action(&ws, &run, "discard").await, 409);
}

#[tokio::test]
async fn force_cancel_unlocks_the_workspace_immediately() {
    let ws = Ws::start().await;
    ws.admin(
        Method::PUT,
        "/settings",
        json!({"step_ms": 300, "force_cancel_cooloff_ms": 200}),
    )
    .await;
    let w = ws.create_ws("force-unlock", json!({})).await;
    ws.admin(
        Method::POST,
        "/scripts",
        json!({"workspace": w, "cancel": "ignore"}),
    )
    .await;
    let run = ws.create_run(&w, json!({})).await;
    let next = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planning").await;
    assert_eq!(
        locked(&ws, &w).await,
        true,
        "the active run locks the workspace"
    );
    let before = ws.get(&format!("/api/v2/runs/{run}")).await.body;
    assert!(
        before["data"]["attributes"]
            .get("force_cancel_available_at")
            .is_none()
            || before["data"]["attributes"]["force_cancel_available_at"].is_null(),
        "force_cancel_available_at appears only after a first cancel"
    );
    assert_eq!(action(&ws, &run, "cancel").await, 202);
    let start = Instant::now();
    loop {
        let r = ws.get(&format!("/api/v2/runs/{run}")).await.body;
        if r["data"]["attributes"]["actions"]["is-force-cancelable"] == true {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never force-cancelable"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(action(&ws, &run, "force-cancel").await, 202);
    // the live service ends a force-canceled run `canceled`, stamped `force-canceled-at`
    let body = ws.get(&format!("/api/v2/runs/{run}")).await.body;
    assert_eq!(body["data"]["attributes"]["status"], "canceled");
    assert!(body["data"]["attributes"]["status-timestamps"]["force-canceled-at"].is_string());
    // the next run takes the workspace over right away
    ws.wait_status(&next, "planning").await;
}

#[tokio::test]
async fn workspace_create_in_an_absent_organization_is_404() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/no-such-org/workspaces",
            ws_body(json!({"name": "x"})),
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["errors"][0]["status"], "404");
}

#[tokio::test]
async fn consumer_payload_that_is_not_a_data_array_is_422() {
    let ws = Ws::start().await;
    let w = ws.create_ws("rsc-bad", json!({})).await;
    let c = ws.create_ws("rsc-bad-c", json!({})).await;
    let path = format!("/api/v2/workspaces/{w}/relationships/remote-state-consumers");
    for bad in [
        json!({"data": {"type": "workspaces", "id": c}}),
        json!({}),
        json!({"data": [{"type": "workspaces"}]}),
    ] {
        assert_eq!(ws.post(&path, bad.clone()).await.status, 422, "POST {bad}");
        assert_eq!(
            ws.patch(&path, bad.clone()).await.status,
            422,
            "PATCH {bad}"
        );
        assert_eq!(
            ws.delete(&path, Some(bad.clone())).await.status,
            422,
            "DELETE {bad}"
        );
    }
}

#[tokio::test]
async fn tags_payload_that_is_not_a_data_array_is_422_and_tags_need_a_token() {
    let ws = Ws::start().await;
    let w = ws.create_ws("tags-bad", json!({})).await;
    let path = format!("/api/v2/workspaces/{w}/relationships/tags");
    let r = ws
        .post(
            &path,
            json!({"data": {"type": "tags", "attributes": {"name": "x"}}}),
        )
        .await;
    assert_eq!(r.status, 422);
    let anon = ws.call(Method::GET, &path, None, None).await;
    assert_eq!(anon.status, 401);
}

#[tokio::test]
async fn no_code_enable_without_a_registry_module_or_with_a_malformed_body_is_422() {
    let ws = Ws::start().await;
    let path = format!("/api/v2/organizations/{ORG}/no-code-modules");
    let r = ws
        .post(
            &path,
            json!({"data": {"type": "no-code-modules", "attributes": {"enabled": true}}}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    let r = ws.post(&path, json!({"data": []})).await;
    assert_eq!(r.status, 422, "{}", r.body);
}

#[tokio::test]
async fn run_create_with_a_malformed_body_is_422() {
    let ws = Ws::start().await;
    let w = ws.create_ws("run-bad", json!({})).await;
    ws.upload_config(&w).await;
    for bad in [
        json!({"data": []}),
        json!({"data": {"type": "runs", "attributes": {"message": 5},
            "relationships": {"workspace": {"data": {"type": "workspaces", "id": w}}}}}),
        json!({"data": {"type": "runs", "attributes": {"target-addrs": "a.b"},
            "relationships": {"workspace": {"data": {"type": "workspaces", "id": w}}}}}),
    ] {
        let r = ws.post("/api/v2/runs", bad.clone()).await;
        assert_eq!(r.status, 422, "{bad}: {}", r.body);
    }
}

#[tokio::test]
async fn engine_version_is_unchanged_by_an_update_without_it() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws("tv-keep", json!({"engine-version": "~> 1.9.0"}))
        .await;
    let before = ws.get(&format!("/api/v2/workspaces/{w}")).await.body["data"]["attributes"]
        ["engine-version"]
        .clone();
    assert_eq!(before, "~> 1.9.0", "the constraint is kept as given");
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{w}"),
            ws_body(json!({"description": "x"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["engine-version"], before);
}
