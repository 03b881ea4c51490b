//! Conformance of the workspace attributes, tag bindings and response details corrected after
//! the audit against the real service (issue 22, "Workspace service"): each test pins one
//! behaviour of the real API (go-tfe and its tests against the live service, the production
//! Terraform provider).

use crate::workspaces_support;

use reqwest::Method;
use serde_json::{json, Value};
use workspaces_support::*;

async fn pool(ws: &Ws) -> String {
    ws.admin(Method::POST, "/agent-pools", json!({"organization": ORG}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn attrs(ws: &Ws, id: &str) -> Value {
    let r = ws.get(&format!("/api/v2/workspaces/{id}")).await;
    assert_eq!(r.status, 200);
    r.body["data"]["attributes"].clone()
}

#[tokio::test]
async fn a_workspace_created_without_execution_mode_follows_the_organization_default() {
    let ws = Ws::start().await;
    let id = ws.create_ws("inherits", json!({})).await;
    let a = attrs(&ws, &id).await;
    assert_eq!(
        a["setting-overwrites"],
        json!({"execution-mode": false, "agent-pool": false})
    );
    assert_eq!(a["execution-mode"], "remote");
    let explicit = ws
        .create_ws("explicit", json!({"execution-mode": "remote"}))
        .await;
    assert_eq!(
        attrs(&ws, &explicit).await["setting-overwrites"],
        json!({"execution-mode": true, "agent-pool": true})
    );
    // The organization default changes: only the inheriting workspace follows.
    let r = ws
        .patch(
            &format!("/api/v2/organizations/{ORG}"),
            json!({"data": {"type": "organizations", "attributes": {"default-execution-mode": "local"}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["data"]["attributes"]["default-execution-mode"],
        "local"
    );
    assert_eq!(attrs(&ws, &id).await["execution-mode"], "local");
    assert_eq!(attrs(&ws, &explicit).await["execution-mode"], "remote");
}

#[tokio::test]
async fn setting_overwrites_false_reverts_to_the_organization_default() {
    let ws = Ws::start().await;
    let p = pool(&ws).await;
    let id = ws
        .create_ws(
            "agentic",
            json!({"execution-mode": "agent", "agent-pool-id": p}),
        )
        .await;
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"setting-overwrites": {"execution-mode": false, "agent-pool": false}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let a = &r.body["data"]["attributes"];
    assert_eq!(a["execution-mode"], "remote");
    assert_eq!(
        a["setting-overwrites"],
        json!({"execution-mode": false, "agent-pool": false})
    );
    assert_eq!(
        r.body["data"]["relationships"]["agent-pool"]["data"],
        json!(null)
    );
}

#[tokio::test]
async fn stored_attributes_are_echoed_back() {
    let ws = Ws::start().await;
    let id = ws
        .create_ws(
            "echo",
            json!({
                "auto-apply-run-trigger": true,
                "auto-destroy-at": "2030-01-02T03:04:05Z",
                "auto-destroy-activity-duration": "14d",
                "project-remote-state": true,
                "inherits-project-auto-destroy": false,
            }),
        )
        .await;
    let a = attrs(&ws, &id).await;
    assert_eq!(a["auto-apply-run-trigger"], true);
    assert_eq!(a["auto-destroy-at"], "2030-01-02T03:04:05Z");
    assert_eq!(a["auto-destroy-activity-duration"], "14d");
    assert_eq!(a["project-remote-state"], true);
    assert_eq!(a["inherits-project-auto-destroy"], false);
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"auto-destroy-at": null, "auto-destroy-activity-duration": "2h", "project-remote-state": false})),
        )
        .await;
    assert_eq!(r.status, 200);
    let a = &r.body["data"]["attributes"];
    assert_eq!(a["auto-destroy-at"], json!(null));
    assert_eq!(a["auto-destroy-activity-duration"], "2h");
    assert_eq!(a["project-remote-state"], false);
    assert_eq!(a["auto-apply-run-trigger"], true);
}

#[tokio::test]
async fn an_empty_agent_pool_id_means_no_pool() {
    let ws = Ws::start().await;
    for (name, mode) in [("e1", "remote"), ("e2", "local")] {
        let r = ws
            .post(
                &format!("/api/v2/organizations/{ORG}/workspaces"),
                ws_body(json!({"name": name, "execution-mode": mode, "agent-pool-id": ""})),
            )
            .await;
        assert_eq!(r.status, 201, "{mode}: {}", r.body);
        assert_eq!(r.body["data"]["attributes"]["execution-mode"], mode);
    }
    let r = ws
        .post(
            &format!("/api/v2/organizations/{ORG}/workspaces"),
            ws_body(json!({"name": "e3", "execution-mode": "agent", "agent-pool-id": ""})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn a_patch_with_only_trigger_patterns_replaces_existing_prefixes() {
    let ws = Ws::start().await;
    let id = ws
        .create_ws("trig", json!({"trigger-prefixes": ["modules/"]}))
        .await;
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"trigger-patterns": ["**/*.tf"]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["data"]["attributes"]["trigger-patterns"],
        json!(["**/*.tf"])
    );
    assert_eq!(r.body["data"]["attributes"]["trigger-prefixes"], json!([]));
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"trigger-patterns": ["a/**"], "trigger-prefixes": ["b/"]})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn a_github_app_installation_replaces_the_oauth_token() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            &format!("/api/v2/organizations/{ORG}/workspaces"),
            ws_body(json!({"name": "gha", "vcs-repo": {
                "github-app-installation-id": "ghain-abc123", "identifier": "acme/infra"}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let v = &r.body["data"]["attributes"]["vcs-repo"];
    assert_eq!(v["github-app-installation-id"], "ghain-abc123");
    assert_eq!(v["oauth-token-id"], json!(null));
    assert_eq!(v["identifier"], "acme/infra");
}

#[tokio::test]
async fn organization_names_in_paths_are_case_insensitive() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/QUARTET/workspaces",
            ws_body(json!({"name": "casey"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = ws
        .get("/api/v2/organizations/Quartet/workspaces/casey")
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["data"]["relationships"]["organization"]["data"]["id"],
        ORG
    );
    assert_eq!(ws.get("/api/v2/organizations/QuArTeT").await.status, 200);
}

#[tokio::test]
async fn tag_bindings_are_added_replaced_listed_and_set_on_create() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            &format!("/api/v2/organizations/{ORG}/workspaces"),
            json!({"data": {"type": "workspaces", "attributes": {"name": "tb"},
                "relationships": {"tag-bindings": {"data": [
                    {"type": "tag-bindings", "attributes": {"key": "env", "value": "prod"}}]}}}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["data"]["id"].as_str().unwrap().to_string();
    let pairs = |b: &Value| -> Vec<(String, String)> {
        b["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["attributes"]["key"].as_str().unwrap().to_string(),
                    t["attributes"]["value"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let list = ws
        .get(&format!("/api/v2/workspaces/{id}/tag-bindings"))
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(pairs(&list.body), vec![("env".into(), "prod".into())]);
    assert!(list.body["data"][0]["id"]
        .as_str()
        .unwrap()
        .starts_with("tb-"));
    // go-tfe AddTagBindings: PATCH /workspaces/:id/tag-bindings adds or modifies by key.
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}/tag-bindings"),
            json!({"data": [{"type": "tag-bindings", "attributes": {"key": "env", "value": "dev"}},
                            {"type": "tag-bindings", "attributes": {"key": "team", "value": "core"}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let rel = format!("/api/v2/workspaces/{id}/relationships/tag-bindings");
    assert_eq!(
        pairs(&ws.get(&rel).await.body),
        vec![("env".into(), "dev".into()), ("team".into(), "core".into())]
    );
    // PATCH on the relationship replaces the set.
    let r = ws
        .patch(
            &rel,
            json!({"data": [{"type": "tag-bindings", "attributes": {"key": "team", "value": "core"}}]}),
        )
        .await;
    assert_eq!(r.status, 200);
    let eff = ws
        .get(&format!("/api/v2/workspaces/{id}/effective-tag-bindings"))
        .await;
    assert_eq!(pairs(&eff.body), vec![("team".into(), "core".into())]);
    // relationships.tag-bindings on update replaces too.
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            json!({"data": {"type": "workspaces", "relationships": {"tag-bindings": {"data": []}}}}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(pairs(&ws.get(&rel).await.body).is_empty());
}

#[tokio::test]
async fn tag_bindings_enforce_the_service_limits() {
    let ws = Ws::start().await;
    let id = ws.create_ws("tblimits", json!({})).await;
    let path = format!("/api/v2/workspaces/{id}/tag-bindings");
    let one =
        |k: &str, v: &str| json!({"type": "tag-bindings", "attributes": {"key": k, "value": v}});
    let eleven: Vec<Value> = (0..11).map(|i| one(&format!("k{i}"), "v")).collect();
    assert_eq!(ws.patch(&path, json!({"data": eleven})).await.status, 422);
    let ten: Vec<Value> = (0..10).map(|i| one(&format!("k{i}"), "v")).collect();
    assert_eq!(ws.patch(&path, json!({"data": ten})).await.status, 200);
    let id2 = ws.create_ws("tblimits2", json!({})).await;
    let path2 = format!("/api/v2/workspaces/{id2}/tag-bindings");
    for bad in [
        one(&"k".repeat(129), "v"),
        one("v", &"x".repeat(257)),
        one("hc:owner", "x"),
        one("hcp:owner", "x"),
    ] {
        assert_eq!(ws.patch(&path2, json!({"data": [bad]})).await.status, 422);
    }
    assert_eq!(
        ws.patch(
            &path2,
            json!({"data": [one(&"k".repeat(128), &"x".repeat(256))]})
        )
        .await
        .status,
        200
    );
}

#[tokio::test]
async fn pagination_links_are_absolute_urls() {
    let ws = Ws::start().await;
    ws.create_ws("pl1", json!({})).await;
    let r = ws
        .get(&format!(
            "/api/v2/organizations/{ORG}/workspaces?page%5Bsize%5D=1"
        ))
        .await;
    for k in ["self", "first", "last"] {
        let l = r.body["links"][k].as_str().unwrap();
        assert!(l.starts_with("http://"), "{k}: {l}");
        assert!(
            l.contains("/api/v2/organizations/quartet/workspaces?"),
            "{l}"
        );
    }
}

#[tokio::test]
async fn unset_working_directory_is_null_and_upgrade_flag_only_on_no_code_workspaces() {
    let ws = Ws::start().await;
    let id = ws.create_ws("plain", json!({})).await;
    let a = attrs(&ws, &id).await;
    assert_eq!(a["working-directory"], json!(null));
    assert!(a.get("no-code-upgrade-available").is_none());
    let id = ws
        .create_ws("wd", json!({"working-directory": "infra"}))
        .await;
    assert_eq!(attrs(&ws, &id).await["working-directory"], "infra");
}

#[tokio::test]
async fn locked_reason_is_present_and_carries_the_lock_reason() {
    let ws = Ws::start().await;
    let id = ws.create_ws("lr", json!({})).await;
    assert_eq!(attrs(&ws, &id).await["locked-reason"], "");
    let r = ws
        .post(
            &format!("/api/v2/workspaces/{id}/actions/lock"),
            json!({"reason": "maintenance"}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["locked-reason"], "maintenance");
}
