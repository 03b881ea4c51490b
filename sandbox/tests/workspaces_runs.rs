//! Conformance of runs (spec B §2.4, §3.1, §4.4): creation rules, the backend's state machine,
//! the actions and their 202/403/409 rules, list filters.

use crate::workspaces_support;

use reqwest::Method;
use serde_json::{json, Value};
use workspaces_support::*;

fn run_body(ws: &str, attrs: Value) -> Value {
    json!({"data": {"type": "runs", "attributes": attrs,
        "relationships": {"workspace": {"data": {"type": "workspaces", "id": ws}}}}})
}

async fn action(ws: &Ws, token: &str, run: &str, name: &str, body: Option<Value>) -> u16 {
    ws.call(
        Method::POST,
        &format!("/api/v2/runs/{run}/actions/{name}"),
        Some(token),
        body,
    )
    .await
    .status
}

async fn script(ws: &Ws, workspace: &str, s: Value) {
    let mut s = s;
    s["workspace"] = json!(workspace);
    ws.admin(Method::POST, "/scripts", s).await;
}

#[tokio::test]
async fn create_run_returns_201_pending_run_document() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("r1", json!({})).await;
    let r = ws
        .post("/api/v2/runs", run_body(&w, json!({"message": "hello"})))
        .await;
    assert_eq!(r.status, 201);
    let d = &r.body["data"];
    assert!(d["id"].as_str().unwrap().starts_with("run-"));
    assert_eq!(d["type"], "runs");
    let a = &d["attributes"];
    assert_eq!(a["status"], "pending");
    assert_eq!(a["message"], "hello");
    assert_eq!(a["is-destroy"], false);
    assert_eq!(a["refresh"], true);
    assert_eq!(a["refresh-only"], false);
    assert_eq!(a["plan-only"], false);
    assert_eq!(a["auto-apply"], false);
    assert!(a.get("force_cancel_available_at").is_none());
    for k in [
        "is-cancelable",
        "is-confirmable",
        "is-discardable",
        "is-force-cancelable",
    ] {
        assert!(a["actions"].get(k).is_some(), "{k}");
    }
    for k in [
        "can-apply",
        "can-cancel",
        "can-comment",
        "can-discard",
        "can-force-execute",
        "can-force-cancel",
        "can-override-policy-check",
    ] {
        assert_eq!(a["permissions"][k], true, "{k}");
    }
    let rel = &d["relationships"];
    assert_eq!(rel["workspace"]["data"]["id"], w);
    assert!(rel["configuration-version"]["data"]["id"]
        .as_str()
        .unwrap()
        .starts_with("cv-"));
    for k in [
        "apply",
        "comments",
        "cost-estimate",
        "created-by",
        "input-state-version",
        "plan",
        "run-events",
        "policy-checks",
        "task-stages",
        "workspace-run-alerts",
    ] {
        assert!(rel.get(k).is_some(), "{k}");
    }
}

#[tokio::test]
async fn default_message_and_workspace_auto_apply_are_used() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws_with_config("r-def", json!({"auto-apply": true}))
        .await;
    let r = ws.post("/api/v2/runs", run_body(&w, json!({}))).await;
    assert!(!r.body["data"]["attributes"]["message"]
        .as_str()
        .unwrap()
        .is_empty());
    assert_eq!(r.body["data"]["attributes"]["auto-apply"], true);
}

#[tokio::test]
async fn is_destroy_and_refresh_only_are_mutually_exclusive() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("r2", json!({})).await;
    let r = ws
        .post(
            "/api/v2/runs",
            run_body(&w, json!({"is-destroy": true, "refresh-only": true})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn engine_version_is_only_for_plan_only_runs_and_must_be_available() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("r3", json!({})).await;
    let r = ws
        .post(
            "/api/v2/runs",
            run_body(&w, json!({"engine-version": "1.6.6"})),
        )
        .await;
    assert_eq!(r.status, 422);
    let r = ws
        .post(
            "/api/v2/runs",
            run_body(&w, json!({"plan-only": true, "engine-version": "9.9.9"})),
        )
        .await;
    assert_eq!(r.status, 422);
    let r = ws
        .post(
            "/api/v2/runs",
            run_body(&w, json!({"plan-only": true, "engine-version": "1.6.6"})),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["data"]["attributes"]["engine-version"], "1.6.6");
}

#[tokio::test]
async fn run_variables_are_kept_as_key_value_strings() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("r4", json!({})).await;
    let vars = json!([{"key": "replicas", "value": "3"}, {"key": "name", "value": "\"web\""}]);
    let r = ws
        .post("/api/v2/runs", run_body(&w, json!({"variables": vars, "target-addrs": ["aws_instance.a"], "replace-addrs": ["aws_instance.b"]})))
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["data"]["attributes"]["variables"], vars);
    assert_eq!(
        r.body["data"]["attributes"]["target-addrs"],
        json!(["aws_instance.a"])
    );
    assert_eq!(
        r.body["data"]["attributes"]["replace-addrs"],
        json!(["aws_instance.b"])
    );
    let r = ws
        .post(
            "/api/v2/runs",
            run_body(&w, json!({"variables": [{"key": "x", "value": 3}]})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn run_without_workspace_is_422_and_with_absent_workspace_404() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/runs",
            json!({"data": {"type": "runs", "attributes": {}}}),
        )
        .await;
    assert_eq!(r.status, 422);
    let r = ws
        .post("/api/v2/runs", run_body("ws-absent", json!({})))
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn organization_token_cannot_create_runs_or_act_on_them() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("r5", json!({})).await;
    let org = ws.org_token().await;
    let r = ws
        .post_as(&org, "/api/v2/runs", run_body(&w, json!({})))
        .await;
    assert_eq!(r.status, 404);
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planned").await;
    assert_eq!(action(&ws, &org, &run, "apply", None).await, 404);
    assert_eq!(action(&ws, &org, &run, "discard", None).await, 404);
    // but it can read them
    assert_eq!(
        ws.get_as(&org, &format!("/api/v2/runs/{run}")).await.status,
        200
    );
}

#[tokio::test]
async fn creating_a_run_needs_plan_permission() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("r6", json!({})).await;
    let (_, reader) = ws
        .team_user(json!({"workspace_access": {w.clone(): "read"}}))
        .await;
    assert_eq!(
        ws.post_as(&reader, "/api/v2/runs", run_body(&w, json!({})))
            .await
            .status,
        404
    );
    let (_, planner) = ws
        .team_user(json!({"workspace_access": {w.clone(): "plan"}}))
        .await;
    assert_eq!(
        ws.post_as(&planner, "/api/v2/runs", run_body(&w, json!({})))
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn run_moves_through_plan_states_and_waits_for_confirmation() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("flow", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let body = ws.wait_status(&run, "planned").await;
    let a = &body["data"]["attributes"];
    assert_eq!(a["has-changes"], true);
    assert_eq!(a["actions"]["is-confirmable"], true);
    assert_eq!(a["actions"]["is-discardable"], true);
    for k in [
        "plan-queueable-at",
        "plan-queued-at",
        "planning-at",
        "planned-at",
    ] {
        assert!(a["status-timestamps"][k].is_string(), "{k}");
    }
    // stays planned
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(ws.run_status(&run).await, "planned");
    assert_eq!(
        action(&ws, ROOT, &run, "apply", Some(json!({"comment": "go"}))).await,
        202
    );
    let body = ws.wait_status(&run, "applied").await;
    for k in [
        "confirmed-at",
        "apply-queued-at",
        "applying-at",
        "applied-at",
    ] {
        assert!(
            body["data"]["attributes"]["status-timestamps"][k].is_string(),
            "{k}"
        );
    }
}

#[tokio::test]
async fn apply_action_returns_202_with_no_body() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("nobody", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planned").await;
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/runs/{run}/actions/apply"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(r.body, Value::Null);
}

#[tokio::test]
async fn auto_apply_runs_apply_without_confirmation() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws_with_config("auto", json!({"auto-apply": true}))
        .await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "applied").await;
    let w2 = ws.create_ws_with_config("auto2", json!({})).await;
    let run = ws.create_run(&w2, json!({"auto-apply": true})).await;
    ws.wait_status(&run, "applied").await;
}

#[tokio::test]
async fn plan_only_run_ends_planned_and_finished_and_cannot_be_applied() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws_with_config("po", json!({"auto-apply": true}))
        .await;
    let run = ws.create_run(&w, json!({"plan-only": true})).await;
    let body = ws.wait_status(&run, "planned_and_finished").await;
    assert_eq!(body["data"]["attributes"]["plan-only"], true);
    assert_eq!(
        body["data"]["attributes"]["actions"]["is-confirmable"],
        false
    );
    assert_eq!(action(&ws, ROOT, &run, "apply", None).await, 409);
}

#[tokio::test]
async fn no_change_plan_ends_planned_and_finished() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("nc", json!({})).await;
    script(&ws, &w, json!({"plan": "no-changes"})).await;
    let run = ws.create_run(&w, json!({})).await;
    let body = ws.wait_status(&run, "planned_and_finished").await;
    assert_eq!(body["data"]["attributes"]["has-changes"], false);
}

#[tokio::test]
async fn no_change_plan_with_allow_empty_apply_waits_for_apply() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("nce", json!({})).await;
    script(&ws, &w, json!({"plan": "no-changes"})).await;
    let run = ws.create_run(&w, json!({"allow-empty-apply": true})).await;
    ws.wait_status(&run, "planned").await;
    assert_eq!(action(&ws, ROOT, &run, "apply", None).await, 202);
    ws.wait_status(&run, "applied").await;
}

#[tokio::test]
async fn scripted_failing_plan_ends_errored() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("err", json!({})).await;
    script(&ws, &w, json!({"plan": "errored"})).await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "errored").await;
    // the script was for one run only
    let run2 = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run2, "planned").await;
    let ws_doc = ws.get(&format!("/api/v2/workspaces/{w}")).await;
    assert_eq!(ws_doc.body["data"]["attributes"]["run-failures"], 1);
}

#[tokio::test]
async fn one_active_run_per_workspace_and_the_rest_stay_pending() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("queue", json!({})).await;
    let first = ws.create_run(&w, json!({})).await;
    ws.wait_status(&first, "planned").await;
    let second = ws.create_run(&w, json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    assert_eq!(ws.run_status(&second).await, "pending");
    let doc = ws.get(&format!("/api/v2/workspaces/{w}")).await;
    assert_eq!(doc.body["data"]["attributes"]["locked"], true);
    assert_eq!(
        doc.body["data"]["relationships"]["locked-by"]["data"]["id"],
        first
    );
    assert_eq!(action(&ws, ROOT, &first, "discard", None).await, 202);
    assert_eq!(ws.run_status(&first).await, "discarded");
    ws.wait_status(&second, "planned").await;
}

#[tokio::test]
async fn apply_of_a_run_not_paused_for_confirmation_is_409() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("a409", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/runs/{run}/actions/apply"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["errors"][0]["status"], "409");
}

#[tokio::test]
async fn discard_of_an_applied_run_is_409() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws_with_config("d409", json!({"auto-apply": true}))
        .await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "applied").await;
    assert_eq!(action(&ws, ROOT, &run, "discard", None).await, 409);
}

#[tokio::test]
async fn pending_run_is_cancelable_not_discardable_and_cancel_is_202() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("dp", json!({})).await;
    let first = ws.create_run(&w, json!({})).await;
    ws.wait_status(&first, "planned").await;
    let second = ws.create_run(&w, json!({})).await;
    let body = ws.get(&format!("/api/v2/runs/{second}")).await.body;
    let a = &body["data"]["attributes"];
    assert_eq!(a["status"], "pending");
    assert_eq!(a["actions"]["is-cancelable"], true);
    assert_eq!(a["actions"]["is-discardable"], false);
    assert_eq!(action(&ws, ROOT, &second, "discard", None).await, 409);
    assert_eq!(action(&ws, ROOT, &second, "cancel", None).await, 202);
    let body = ws.get(&format!("/api/v2/runs/{second}")).await.body;
    assert_eq!(body["data"]["attributes"]["status"], "canceled");
    assert!(body["data"]["attributes"]["canceled-at"].is_string());
}

#[tokio::test]
async fn cancel_while_planning_cancels_and_elsewhere_is_409() {
    let ws = Ws::start().await;
    ws.admin(Method::PUT, "/settings", json!({"step_ms": 400}))
        .await;
    let w = ws.create_ws_with_config("cx", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planning").await;
    assert_eq!(
        action(&ws, ROOT, &run, "cancel", Some(json!({"comment": "stop"}))).await,
        202
    );
    let body = ws.wait_status(&run, "canceled").await;
    assert!(body["data"]["attributes"]["canceled-at"].is_string());
    assert!(body["data"]["attributes"]["force_cancel_available_at"].is_string());
    assert_eq!(
        action(&ws, ROOT, &run, "cancel", None).await,
        409,
        "a canceled run is not cancelable"
    );
}

#[tokio::test]
async fn cancel_of_an_absent_run_is_404() {
    let ws = Ws::start().await;
    assert_eq!(action(&ws, ROOT, "run-absent", "cancel", None).await, 404);
    assert_eq!(ws.get("/api/v2/runs/run-absent").await.status, 404);
}

#[tokio::test]
async fn force_cancel_needs_a_prior_cancel_and_the_cool_off() {
    let ws = Ws::start().await;
    ws.admin(
        Method::PUT,
        "/settings",
        json!({"step_ms": 300, "force_cancel_cooloff_ms": 600}),
    )
    .await;
    let w = ws.create_ws_with_config("fc", json!({})).await;
    script(&ws, &w, json!({"cancel": "ignore"})).await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planning").await;
    assert_eq!(
        action(&ws, ROOT, &run, "force-cancel", None).await,
        409,
        "no cancel yet"
    );
    assert_eq!(action(&ws, ROOT, &run, "cancel", None).await, 202);
    let body = ws.get(&format!("/api/v2/runs/{run}")).await.body;
    let a = &body["data"]["attributes"];
    assert_eq!(a["status"], "planning", "the process ignores the interrupt");
    assert!(a["force_cancel_available_at"].is_string());
    assert_eq!(a["actions"]["is-force-cancelable"], false);
    assert_eq!(
        action(&ws, ROOT, &run, "force-cancel", None).await,
        409,
        "cool-off not passed"
    );
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let body = ws.get(&format!("/api/v2/runs/{run}")).await.body;
    assert_eq!(
        body["data"]["attributes"]["actions"]["is-force-cancelable"],
        true
    );
    assert_eq!(action(&ws, ROOT, &run, "force-cancel", None).await, 202);
    let body = ws.get(&format!("/api/v2/runs/{run}")).await.body;
    let a = &body["data"]["attributes"];
    assert_eq!(
        a["status"], "canceled",
        "the live service has no force_canceled"
    );
    assert!(a["status-timestamps"]["force-canceled-at"].is_string());
    let doc = ws.get(&format!("/api/v2/workspaces/{w}")).await;
    assert_eq!(
        doc.body["data"]["attributes"]["locked"], false,
        "unlocked immediately"
    );
}

#[tokio::test]
async fn force_cancel_needs_workspace_admin() {
    let ws = Ws::start().await;
    ws.admin(
        Method::PUT,
        "/settings",
        json!({"step_ms": 300, "force_cancel_cooloff_ms": 0}),
    )
    .await;
    let w = ws.create_ws_with_config("fca", json!({})).await;
    script(&ws, &w, json!({"cancel": "ignore"})).await;
    let (_, writer) = ws
        .team_user(json!({"workspace_access": {w.clone(): "write"}}))
        .await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planning").await;
    assert_eq!(action(&ws, &writer, &run, "cancel", None).await, 202);
    assert_eq!(action(&ws, &writer, &run, "force-cancel", None).await, 404);
    assert_eq!(action(&ws, ROOT, &run, "force-cancel", None).await, 202);
}

#[tokio::test]
async fn force_execute_discards_the_locking_run_and_starts_the_pending_one() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("fx", json!({})).await;
    let first = ws.create_run(&w, json!({})).await;
    ws.wait_status(&first, "planned").await;
    let second = ws.create_run(&w, json!({})).await;
    assert_eq!(action(&ws, ROOT, &second, "force-execute", None).await, 202);
    assert_eq!(ws.run_status(&first).await, "discarded");
    ws.wait_status(&second, "planned").await;
}

#[tokio::test]
async fn force_execute_of_a_non_pending_run_or_unlocked_workspace_is_403() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("fx403", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planned").await;
    assert_eq!(
        action(&ws, ROOT, &run, "force-execute", None).await,
        403,
        "not pending"
    );
    // a plan-only run stays pending? No: use a workspace with a manual lock and a pending run
    let w2 = ws.create_ws_with_config("fx403b", json!({})).await;
    ws.call(
        Method::POST,
        &format!("/api/v2/workspaces/{w2}/actions/lock"),
        Some(ROOT),
        None,
    )
    .await;
    let pending = ws.create_run(&w2, json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert_eq!(ws.run_status(&pending).await, "pending");
    assert_eq!(
        action(&ws, ROOT, &pending, "force-execute", None).await,
        403,
        "not locked by a run"
    );
}

#[tokio::test]
async fn force_execute_is_409_when_the_locking_run_cannot_be_discarded() {
    let ws = Ws::start().await;
    ws.admin(Method::PUT, "/settings", json!({"step_ms": 2000}))
        .await;
    let w = ws.create_ws_with_config("fx409", json!({})).await;
    let first = ws.create_run(&w, json!({})).await;
    ws.wait_status(&first, "plan_queued").await;
    let second = ws.create_run(&w, json!({})).await;
    assert_eq!(action(&ws, ROOT, &second, "force-execute", None).await, 409);
}

#[tokio::test]
async fn apply_needs_write_permission() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("perm", json!({})).await;
    let (_, planner) = ws
        .team_user(json!({"workspace_access": {w.clone(): "plan"}}))
        .await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "planned").await;
    let r = ws.get_as(&planner, &format!("/api/v2/runs/{run}")).await;
    assert_eq!(
        r.body["data"]["attributes"]["permissions"]["can-apply"],
        false
    );
    assert_eq!(action(&ws, &planner, &run, "apply", None).await, 404);
    assert_eq!(action(&ws, &planner, &run, "discard", None).await, 404);
}

#[tokio::test]
async fn run_of_an_unreadable_workspace_is_404() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("hidden-run", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let (_, token) = ws.team_user(json!({})).await;
    assert_eq!(
        ws.get_as(&token, &format!("/api/v2/runs/{run}"))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn list_runs_newest_first_with_status_and_operation_filters() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("lst", json!({})).await;
    script(&ws, &w, json!({"plan": "errored"})).await;
    let failed = ws.create_run(&w, json!({})).await;
    ws.wait_status(&failed, "errored").await;
    let spec = ws.create_run(&w, json!({"plan-only": true})).await;
    ws.wait_status(&spec, "planned_and_finished").await;
    let r = ws.get(&format!("/api/v2/workspaces/{w}/runs")).await;
    assert_eq!(r.status, 200);
    let ids: Vec<&str> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![spec.as_str(), failed.as_str()]);
    assert_eq!(r.body["meta"]["pagination"]["page-size"], 20);
    let r = ws
        .get(&format!(
            "/api/v2/workspaces/{w}/runs?filter%5Bstatus%5D=errored"
        ))
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["data"][0]["id"], failed);
    let r = ws
        .get(&format!(
            "/api/v2/workspaces/{w}/runs?filter%5Boperation%5D=plan_only"
        ))
        .await;
    assert_eq!(r.body["data"][0]["id"], spec);
    let r = ws
        .get(&format!(
            "/api/v2/workspaces/{w}/runs?filter%5Bsource%5D=tfe-api"
        ))
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 2);
    let r = ws
        .get(&format!(
            "/api/v2/workspaces/{w}/runs?search%5Buser%5D=admin"
        ))
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 2);
    let r = ws
        .get(&format!(
            "/api/v2/workspaces/{w}/runs?search%5Buser%5D=nobody"
        ))
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn run_read_includes_plan_and_created_by() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("incl", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let r = ws
        .get(&format!(
            "/api/v2/runs/{run}?include=plan,created_by,configuration_version"
        ))
        .await;
    assert_eq!(r.status, 200);
    let types: Vec<&str> = r.body["included"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"plans"));
    assert!(types.contains(&"users"));
    assert!(types.contains(&"configuration-versions"));
    let r = ws.get(&format!("/api/v2/runs/{run}?include=bogus")).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn workspace_shows_current_and_latest_run() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("cur", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let r = ws
        .get(&format!("/api/v2/workspaces/{w}?include=current_run"))
        .await;
    assert_eq!(
        r.body["data"]["relationships"]["current-run"]["data"]["id"],
        run
    );
    assert_eq!(
        r.body["data"]["relationships"]["latest-run"]["data"]["id"],
        run
    );
    assert_eq!(r.body["included"][0]["id"], run);
}

#[tokio::test]
async fn destroy_run_is_refused_when_destroy_plans_are_not_allowed() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws("nodestroy", json!({"allow-destroy-plan": false}))
        .await;
    let r = ws
        .post("/api/v2/runs", run_body(&w, json!({"is-destroy": true})))
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn backend_speed_is_configurable_through_the_admin_api() {
    let ws = Ws::start().await;
    ws.admin(Method::PUT, "/settings", json!({"step_ms": 5000}))
        .await;
    let w = ws.create_ws_with_config("slow", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(ws.run_status(&run).await, "pending");
    let s = ws.admin(Method::GET, "/settings", json!({})).await;
    assert_eq!(s["step_ms"], 5000);
}

#[tokio::test]
async fn uploading_a_configuration_version_queues_a_run() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("cv", json!({})).await;
    let r = ws
        .post(
            &format!("/api/v2/workspaces/{w}/configuration-versions"),
            json!({"data": {"type": "configuration-versions", "attributes": {}}}),
        )
        .await;
    assert_eq!(r.status, 201);
    let url = r.body["data"]["attributes"]["upload-url"]
        .as_str()
        .unwrap()
        .to_string();
    let up = ws.http.put(url).body(vec![0u8; 10]).send().await.unwrap();
    assert_eq!(up.status().as_u16(), 200);
    let runs = ws.get(&format!("/api/v2/workspaces/{w}/runs")).await;
    assert_eq!(runs.body["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn organization_run_list_spans_the_readable_workspaces() {
    let ws = Ws::start().await;
    let a = ws.create_ws_with_config("org-a", json!({})).await;
    let b = ws.create_ws_with_config("org-b", json!({})).await;
    let ra = ws.create_run(&a, json!({})).await;
    let rb = ws.create_run(&b, json!({"plan-only": true})).await;
    let r = ws.get("/api/v2/organizations/quartet/runs").await;
    assert_eq!(r.status, 200);
    let ids: Vec<&str> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![rb.as_str(), ra.as_str()]);
    let (_, token) = ws
        .team_user(json!({"workspace_access": {a.clone(): "read"}}))
        .await;
    let r = ws
        .get_as(&token, "/api/v2/organizations/quartet/runs")
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["data"][0]["id"], ra);
}

#[tokio::test]
async fn run_list_status_group_filter() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("grp", json!({})).await;
    let done = ws.create_run(&w, json!({"plan-only": true})).await;
    ws.wait_status(&done, "planned_and_finished").await;
    let open = ws.create_run(&w, json!({})).await;
    let r = ws
        .get(&format!(
            "/api/v2/workspaces/{w}/runs?filter%5Bstatus_group%5D=non_final"
        ))
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["data"][0]["id"], open);
    let r = ws
        .get(&format!(
            "/api/v2/workspaces/{w}/runs?filter%5Bstatus_group%5D=final"
        ))
        .await;
    assert_eq!(r.body["data"][0]["id"], done);
}

#[tokio::test]
async fn run_in_a_vcs_workspace_fetches_its_configuration_first() {
    let ws = Ws::start().await;
    let ot = ws
        .admin(Method::POST, "/oauth-tokens", json!({"organization": ORG}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let w = ws
        .create_ws(
            "vcs-run",
            json!({"vcs-repo": {"oauth-token-id": ot, "identifier": "acme/app"}}),
        )
        .await;
    // A VCS-backed workspace has its configuration from the repository: no upload needed.
    let r = ws.post("/api/v2/runs", run_body(&w, json!({}))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let run = r.body["data"]["id"].as_str().unwrap().to_string();
    let body = ws.wait_status(&run, "planned").await;
    assert!(body["data"]["attributes"]["status-timestamps"]["fetching-at"].is_string());
}

#[tokio::test]
async fn scripted_failing_apply_ends_errored_and_count_zero_scripts_every_run() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws_with_config("apply-err", json!({"auto-apply": true}))
        .await;
    script(&ws, &w, json!({"apply": "errored", "count": 0})).await;
    for _ in 0..2 {
        let run = ws.create_run(&w, json!({})).await;
        let body = ws.wait_status(&run, "errored").await;
        assert!(body["data"]["attributes"]["status-timestamps"]["applying-at"].is_string());
    }
}

#[tokio::test]
async fn destroy_run_applied_leaves_no_resources() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws_with_config("destroy", json!({"auto-apply": true}))
        .await;
    let run = ws.create_run(&w, json!({})).await;
    ws.wait_status(&run, "applied").await;
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{w}")).await.body["data"]["attributes"]
            ["resource-count"],
        1
    );
    let run = ws.create_run(&w, json!({"is-destroy": true})).await;
    ws.wait_status(&run, "applied").await;
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{w}")).await.body["data"]["attributes"]
            ["resource-count"],
        0
    );
}

#[tokio::test]
async fn runs_in_a_local_execution_workspace_are_refused() {
    let ws = Ws::start().await;
    let w = ws
        .create_ws("local-ws", json!({"execution-mode": "local"}))
        .await;
    let r = ws.post("/api/v2/runs", run_body(&w, json!({}))).await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn runs_need_a_configuration_version() {
    let ws = Ws::start().await;
    let w = ws.create_ws("no-config", json!({})).await;
    let r = ws.post("/api/v2/runs", run_body(&w, json!({}))).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(error_detail(&r.body), "Configuration version is missing");
    ws.upload_config(&w).await;
    let r = ws.post("/api/v2/runs", run_body(&w, json!({}))).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

async fn phases(ws: &Ws, body: Value) {
    ws.admin(Method::PUT, "/run-phases", body).await;
}

#[tokio::test]
async fn run_passes_cost_estimation_policy_check_and_post_plan_and_waits_in_the_last() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("phases", json!({})).await;
    phases(
        &ws,
        json!({"workspace": w, "cost_estimation": true, "policy_check": true, "post_plan": true}),
    )
    .await;
    let run = ws.create_run(&w, json!({})).await;
    let body = ws.wait_status(&run, "post_plan_completed").await;
    let a = &body["data"]["attributes"];
    assert_eq!(a["actions"]["is-confirmable"], true);
    for k in [
        "planned-at",
        "cost-estimating-at",
        "cost-estimated-at",
        "policy-checking-at",
        "policy-checked-at",
        "post-plan-running-at",
        "post-plan-completed-at",
    ] {
        assert!(a["status-timestamps"][k].is_string(), "{k}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(ws.run_status(&run).await, "post_plan_completed");
    assert_eq!(action(&ws, ROOT, &run, "apply", None).await, 202);
    ws.wait_status(&run, "applied").await;
}

#[tokio::test]
async fn is_confirmable_is_the_only_truth_and_apply_outside_it_is_409() {
    let ws = Ws::start().await;
    ws.admin(Method::PUT, "/settings", json!({"step_ms": 300}))
        .await;
    let w = ws.create_ws_with_config("cost-only", json!({})).await;
    // Switched on for the organization: the workspace follows it.
    phases(&ws, json!({"organization": ORG, "cost_estimation": true})).await;
    let run = ws.create_run(&w, json!({})).await;
    let body = ws.wait_status(&run, "planned").await;
    assert_eq!(
        body["data"]["attributes"]["actions"]["is-confirmable"], false,
        "planned is not the last phase"
    );
    assert_eq!(action(&ws, ROOT, &run, "apply", None).await, 409);
    let body = ws.wait_status(&run, "cost_estimated").await;
    assert_eq!(
        body["data"]["attributes"]["actions"]["is-confirmable"],
        true
    );
    assert_eq!(
        body["data"]["attributes"]["actions"]["is-discardable"],
        true
    );
    assert_eq!(action(&ws, ROOT, &run, "apply", None).await, 202);
    // A workspace's own switch wins over its organization's.
    phases(&ws, json!({"organization": ORG, "cost_estimation": false})).await;
    phases(&ws, json!({"workspace": w, "policy_check": true})).await;
    ws.wait_status(&run, "applied").await;
    let run = ws.create_run(&w, json!({"auto-apply": true})).await;
    let body = ws.wait_status(&run, "applied").await;
    let t = &body["data"]["attributes"]["status-timestamps"];
    assert!(t["policy-checked-at"].is_string());
    assert!(t["cost-estimated-at"].is_null());
}
