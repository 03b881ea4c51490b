//! Conformance of workspace create, read, update, delete and list (spec B §2.1, §2.2, §4.1, §5).

use crate::workspaces_support;

use reqwest::Method;
use serde_json::json;
use workspaces_support::*;

#[tokio::test]
async fn create_applies_every_default_of_the_attribute_table() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "defaults"})),
        )
        .await;
    assert_eq!(r.status, 201);
    let d = &r.body["data"];
    assert!(d["id"].as_str().unwrap().starts_with("ws-"));
    assert_eq!(d["type"], "workspaces");
    let a = &d["attributes"];
    assert_eq!(a["name"], "defaults");
    assert_eq!(a["allow-destroy-plan"], true);
    assert_eq!(a["auto-apply"], false);
    assert_eq!(a["description"], json!(null));
    assert_eq!(a["execution-mode"], "remote");
    assert_eq!(a["file-triggers-enabled"], true);
    assert_eq!(a["global-remote-state"], false);
    assert_eq!(a["operations"], true);
    assert_eq!(a["queue-all-runs"], false);
    assert_eq!(a["speculative-enabled"], true);
    assert_eq!(a["trigger-prefixes"], json!([]));
    assert_eq!(a["trigger-patterns"], json!([]));
    assert_eq!(a["vcs-repo"], json!(null));
    assert_eq!(a["working-directory"], json!(null));
    assert_eq!(a["drift-detection"], false);
    assert_eq!(a["locked"], false);
    // latest released engine version
    assert_eq!(a["engine-version"], "1.11.4");
    assert_eq!(a["terraform-version"], "1.11.4");
    assert_eq!(d["relationships"]["agent-pool"]["data"], json!(null));
    assert_eq!(
        d["relationships"]["organization"]["data"],
        json!({"id": "quartet", "type": "organizations"})
    );
    assert_eq!(
        d["links"]["self"],
        "/api/v2/organizations/quartet/workspaces/defaults"
    );
}

#[tokio::test]
async fn response_carries_the_documented_attributes_permissions_and_relationships() {
    let ws = Ws::start().await;
    let id = ws.create_ws("shape", json!({})).await;
    let r = ws.get(&format!("/api/v2/workspaces/{id}")).await;
    let a = &r.body["data"]["attributes"];
    for k in [
        "actions",
        "allow-destroy-plan",
        "apply-duration-average",
        "auto-apply",
        "auto-destroy-at",
        "created-at",
        "description",
        "environment",
        "execution-mode",
        "file-triggers-enabled",
        "global-remote-state",
        "latest-change-at",
        "last-assessment-result-at",
        "locked",
        "name",
        "operations",
        "permissions",
        "plan-duration-average",
        "policy-check-failures",
        "queue-all-runs",
        "resource-count",
        "run-failures",
        "source",
        "source-name",
        "source-url",
        "speculative-enabled",
        "structured-run-output-enabled",
        "engine-version",
        "trigger-prefixes",
        "updated-at",
        "vcs-repo",
        "vcs-repo-identifier",
        "working-directory",
        "workspace-kpis-runs-count",
        "drift-detection",
    ] {
        assert!(a.get(k).is_some(), "attribute {k} missing");
    }
    assert_eq!(a["actions"]["is-destroyable"], true);
    for p in [
        "can-create-state-versions",
        "can-destroy",
        "can-force-unlock",
        "can-lock",
        "can-manage-run-tasks",
        "can-manage-tags",
        "can-queue-apply",
        "can-queue-destroy",
        "can-queue-run",
        "can-read-settings",
        "can-read-state-versions",
        "can-read-variable",
        "can-unlock",
        "can-update",
        "can-update-variable",
        "can-read-assessment-result",
    ] {
        assert_eq!(a["permissions"][p], true, "owner permission {p}");
    }
    let rels = &r.body["data"]["relationships"];
    for k in [
        "agent-pool",
        "current-configuration-version",
        "current-run",
        "current-state-version",
        "current-assessment-result",
        "latest-run",
        "organization",
        "outputs",
        "readme",
        "remote-state-consumers",
        "project",
    ] {
        assert!(rels.get(k).is_some(), "relationship {k} missing");
    }
    assert!(rels["current-configuration-version"]["links"]["related"].is_string());
    assert_eq!(
        rels["remote-state-consumers"]["links"]["related"],
        format!("/api/v2/workspaces/{id}/relationships/remote-state-consumers")
    );
    assert!(rels.get("ssh-key").is_none(), "ssh-key only when set");
}

#[tokio::test]
async fn name_is_required() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"description": "x"})),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(error_pointer(&r.body), "/data/attributes/name");
}

#[tokio::test]
async fn name_with_characters_other_than_letters_numbers_dash_underscore_is_422() {
    let ws = Ws::start().await;
    for bad in ["has space", "dot.name", "slash/name", "ümlaut"] {
        let r = ws
            .post(
                "/api/v2/organizations/quartet/workspaces",
                ws_body(json!({"name": bad})),
            )
            .await;
        assert_eq!(r.status, 422, "{bad}");
        assert_eq!(r.body["errors"][0]["status"], "422");
        assert_eq!(error_pointer(&r.body), "/data/attributes/name");
    }
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "Ok_name-1"})),
        )
        .await;
    assert_eq!(r.status, 201);
}

#[tokio::test]
async fn name_must_be_unique_in_the_organization() {
    let ws = Ws::start().await;
    ws.create_ws("twice", json!({})).await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "twice"})),
        )
        .await;
    assert_eq!(r.status, 422);
    assert!(error_detail(&r.body).contains("taken"));
}

#[tokio::test]
async fn wrong_data_type_is_refused() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            json!({"data": {"type": "runs", "attributes": {"name": "t"}}}),
        )
        .await;
    assert!(r.status == 409 || r.status == 422);
}

#[tokio::test]
async fn agent_execution_mode_requires_an_agent_pool() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "ag", "execution-mode": "agent"})),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(error_pointer(&r.body), "/data/attributes/agent-pool-id");
    let pool = ws
        .admin(
            Method::POST,
            "/agent-pools",
            json!({"organization": "quartet"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(pool.starts_with("apool-"));
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "ag", "execution-mode": "agent", "agent-pool-id": pool})),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(
        r.body["data"]["relationships"]["agent-pool"]["data"]["id"],
        pool
    );
}

#[tokio::test]
async fn agent_pool_is_refused_with_remote_or_local_mode_or_with_operations() {
    let ws = Ws::start().await;
    let pool = ws
        .admin(
            Method::POST,
            "/agent-pools",
            json!({"organization": "quartet"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    for attrs in [
        json!({"name": "p1", "execution-mode": "remote", "agent-pool-id": pool}),
        json!({"name": "p2", "execution-mode": "local", "agent-pool-id": pool}),
        json!({"name": "p3", "operations": true, "agent-pool-id": pool}),
        json!({"name": "p4", "agent-pool-id": pool}),
    ] {
        let r = ws
            .post(
                "/api/v2/organizations/quartet/workspaces",
                ws_body(attrs.clone()),
            )
            .await;
        assert_eq!(r.status, 422, "{attrs}");
    }
}

#[tokio::test]
async fn operations_and_execution_mode_together_are_refused() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "both", "operations": true, "execution-mode": "remote"})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn operations_false_means_local_execution() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "ops", "operations": false})),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["data"]["attributes"]["execution-mode"], "local");
    assert_eq!(r.body["data"]["attributes"]["operations"], false);
}

#[tokio::test]
async fn unknown_execution_mode_is_422() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "em", "execution-mode": "cloud"})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn vcs_repo_requires_oauth_token_id_and_identifier() {
    let ws = Ws::start().await;
    let ot = ws
        .admin(
            Method::POST,
            "/oauth-tokens",
            json!({"organization": "quartet"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "v1", "vcs-repo": {"identifier": "acme/app"}})),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        error_pointer(&r.body),
        "/data/attributes/vcs-repo/oauth-token-id"
    );
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "v2", "vcs-repo": {"oauth-token-id": ot}})),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        error_pointer(&r.body),
        "/data/attributes/vcs-repo/identifier"
    );
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "v3", "vcs-repo": {"oauth-token-id": ot, "identifier": "acme/app", "tags-regex": "v\\d+"}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let v = &r.body["data"]["attributes"]["vcs-repo"];
    assert_eq!(v["identifier"], "acme/app");
    assert_eq!(v["branch"], "");
    assert_eq!(v["ingress-submodules"], false);
    assert_eq!(v["oauth-token-id"], ot);
    assert_eq!(v["tags-regex"], "v\\d+");
    assert_eq!(
        r.body["data"]["attributes"]["vcs-repo-identifier"],
        "acme/app"
    );
}

#[tokio::test]
async fn vcs_repo_null_on_update_removes_it_and_partial_update_keeps_other_keys() {
    let ws = Ws::start().await;
    let ot = ws
        .admin(
            Method::POST,
            "/oauth-tokens",
            json!({"organization": "quartet"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let id = ws
        .create_ws(
            "vcsu",
            json!({"vcs-repo": {"oauth-token-id": ot, "identifier": "acme/app"}}),
        )
        .await;
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"vcs-repo": {"branch": "dev"}})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["vcs-repo"]["branch"], "dev");
    assert_eq!(
        r.body["data"]["attributes"]["vcs-repo"]["identifier"],
        "acme/app"
    );
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"vcs-repo": null})),
        )
        .await;
    assert_eq!(r.body["data"]["attributes"]["vcs-repo"], json!(null));
    // adding a repository again needs both keys
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"vcs-repo": {"branch": "x"}})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn trigger_prefixes_and_patterns_are_exclusive() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(
                json!({"name": "tp", "trigger-prefixes": ["a/"], "trigger-patterns": ["b/**"]}),
            ),
        )
        .await;
    assert_eq!(r.status, 422);
    let id = ws
        .create_ws(
            "tp2",
            json!({"trigger-patterns": ["modules/**/*.tf"], "file-triggers-enabled": false}),
        )
        .await;
    let r = ws.get(&format!("/api/v2/workspaces/{id}")).await;
    assert_eq!(
        r.body["data"]["attributes"]["trigger-patterns"],
        json!(["modules/**/*.tf"])
    );
    assert_eq!(r.body["data"]["attributes"]["file-triggers-enabled"], false);
}

#[tokio::test]
async fn engine_version_accepts_exact_versions_and_constraints_and_refuses_unknown_ones() {
    let ws = Ws::start().await;
    let id = ws
        .create_ws("ev1", json!({"engine-version": "1.6.6"}))
        .await;
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{id}")).await.body["data"]["attributes"]
            ["engine-version"],
        "1.6.6"
    );
    let id = ws
        .create_ws("ev2", json!({"engine-version": "~> 1.9.0"}))
        .await;
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{id}")).await.body["data"]["attributes"]
            ["engine-version"],
        "~> 1.9.0"
    );
    let id = ws
        .create_ws("ev3", json!({"terraform-version": "1.5.7"}))
        .await;
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{id}")).await.body["data"]["attributes"]
            ["engine-version"],
        "1.5.7"
    );
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "ev4", "engine-version": "0.1.0"})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn source_name_and_url_are_set_on_create_and_ignored_on_update() {
    let ws = Ws::start().await;
    let id = ws
        .create_ws(
            "src",
            json!({"source-name": "quartet", "source-url": "https://quartet.invalid/x"}),
        )
        .await;
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"source-name": "other", "source-url": "https://other"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["source-name"], "quartet");
    assert_eq!(
        r.body["data"]["attributes"]["source-url"],
        "https://quartet.invalid/x"
    );
}

#[tokio::test]
async fn drift_detection_needs_remote_execution() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "dd", "drift_detection": true, "execution-mode": "local"})),
        )
        .await;
    assert_eq!(r.status, 422);
    let id = ws.create_ws("dd2", json!({"drift_detection": true})).await;
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{id}")).await.body["data"]["attributes"]
            ["drift-detection"],
        true
    );
}

#[tokio::test]
async fn update_by_id_changes_only_given_attributes() {
    let ws = Ws::start().await;
    let id = ws
        .create_ws("upd", json!({"description": "first", "auto-apply": true}))
        .await;
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"description": "second"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["description"], "second");
    assert_eq!(r.body["data"]["attributes"]["auto-apply"], true);
}

#[tokio::test]
async fn update_by_organization_and_name_renames_and_changes_the_url() {
    let ws = Ws::start().await;
    let id = ws.create_ws("old-name", json!({})).await;
    let r = ws
        .patch(
            "/api/v2/organizations/quartet/workspaces/old-name",
            ws_body(json!({"name": "new-name", "auto-apply": true})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["id"], id);
    assert_eq!(
        r.body["data"]["links"]["self"],
        "/api/v2/organizations/quartet/workspaces/new-name"
    );
    assert_eq!(
        ws.get("/api/v2/organizations/quartet/workspaces/old-name")
            .await
            .status,
        404
    );
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces/new-name")
        .await;
    assert_eq!(r.body["data"]["attributes"]["auto-apply"], true);
}

#[tokio::test]
async fn rename_to_a_taken_name_is_422() {
    let ws = Ws::start().await;
    ws.create_ws("a1", json!({})).await;
    let id = ws.create_ws("a2", json!({})).await;
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"name": "a1"})),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn update_of_absent_workspace_is_404() {
    let ws = Ws::start().await;
    let r = ws
        .patch(
            "/api/v2/workspaces/ws-nope",
            ws_body(json!({"description": "x"})),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = ws
        .patch(
            "/api/v2/organizations/quartet/workspaces/nope",
            ws_body(json!({"description": "x"})),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn execution_mode_remote_on_update_clears_the_agent_pool() {
    let ws = Ws::start().await;
    let pool = ws
        .admin(
            Method::POST,
            "/agent-pools",
            json!({"organization": "quartet"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let id = ws
        .create_ws(
            "agx",
            json!({"execution-mode": "agent", "agent-pool-id": pool}),
        )
        .await;
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"execution-mode": "remote"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["data"]["relationships"]["agent-pool"]["data"],
        json!(null)
    );
}

#[tokio::test]
async fn delete_removes_the_workspace() {
    let ws = Ws::start().await;
    let id = ws.create_ws("gone", json!({})).await;
    let r = ws.delete(&format!("/api/v2/workspaces/{id}"), None).await;
    assert_eq!(r.status, 204);
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{id}")).await.status,
        404
    );
    ws.create_ws("gone2", json!({})).await;
    let r = ws
        .delete("/api/v2/organizations/quartet/workspaces/gone2", None)
        .await;
    assert_eq!(r.status, 204);
}

#[tokio::test]
async fn safe_delete_of_an_empty_workspace_succeeds() {
    let ws = Ws::start().await;
    let id = ws.create_ws("safe", json!({})).await;
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/safe-delete"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{id}")).await.status,
        404
    );
}

#[tokio::test]
async fn list_search_name_matches_substrings() {
    let ws = Ws::start().await;
    ws.create_ws("app-prod", json!({})).await;
    ws.create_ws("app-dev", json!({})).await;
    ws.create_ws("db-prod", json!({})).await;
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces?search%5Bname%5D=app")
        .await;
    let names: Vec<&str> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["attributes"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["app-dev", "app-prod"]);
}

#[tokio::test]
async fn list_search_tags_requires_every_tag_and_exclude_tags_drops_matches() {
    let ws = Ws::start().await;
    ws.create_ws("t-a", json!({"tag-names": ["prod", "eu"]}))
        .await;
    ws.create_ws("t-b", json!({"tag-names": ["prod"]})).await;
    ws.create_ws("t-c", json!({"tag-names": ["dev", "eu"]}))
        .await;
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["attributes"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces?search%5Btags%5D=prod,eu")
        .await;
    assert_eq!(names(&r.body), vec!["t-a"]);
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces?search%5Btags%5D=prod")
        .await;
    assert_eq!(names(&r.body), vec!["t-a", "t-b"]);
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces?search%5Bexclude-tags%5D=eu")
        .await;
    assert_eq!(names(&r.body), vec!["t-b"]);
}

#[tokio::test]
async fn include_organization_adds_it_to_included() {
    let ws = Ws::start().await;
    let id = ws.create_ws("inc", json!({})).await;
    let r = ws
        .get(&format!("/api/v2/workspaces/{id}?include=organization"))
        .await;
    assert_eq!(r.body["included"][0]["type"], "organizations");
    assert_eq!(r.body["included"][0]["id"], "quartet");
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces?include=organization")
        .await;
    assert_eq!(r.body["included"][0]["id"], "quartet");
}

#[tokio::test]
async fn unknown_include_is_400() {
    let ws = Ws::start().await;
    let id = ws.create_ws("inc2", json!({})).await;
    let r = ws
        .get(&format!("/api/v2/workspaces/{id}?include=bogus"))
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn team_without_access_gets_404_for_the_workspace() {
    let ws = Ws::start().await;
    let id = ws.create_ws("private", json!({})).await;
    let (_, token) = ws.team_user(json!({})).await;
    assert_eq!(
        ws.get_as(&token, &format!("/api/v2/workspaces/{id}"))
            .await
            .status,
        404
    );
    let list = ws
        .get_as(&token, "/api/v2/organizations/quartet/workspaces")
        .await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn read_access_sees_but_cannot_update_and_permissions_say_so() {
    let ws = Ws::start().await;
    let id = ws.create_ws("readonly", json!({})).await;
    let (_, token) = ws
        .team_user(json!({"workspace_access": {id.clone(): "read"}}))
        .await;
    let r = ws.get_as(&token, &format!("/api/v2/workspaces/{id}")).await;
    assert_eq!(r.status, 200);
    let p = &r.body["data"]["attributes"]["permissions"];
    assert_eq!(p["can-update"], false);
    assert_eq!(p["can-queue-run"], false);
    assert_eq!(p["can-read-settings"], true);
    let r = ws
        .patch_as(
            &token,
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"description": "x"})),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn workspace_admin_may_update_settings() {
    let ws = Ws::start().await;
    let id = ws.create_ws("adm", json!({})).await;
    let (_, token) = ws
        .team_user(json!({"workspace_access": {id.clone(): "admin"}}))
        .await;
    let r = ws
        .patch_as(
            &token,
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"description": "x"})),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn create_needs_owners_manage_workspaces_or_the_organization_token() {
    let ws = Ws::start().await;
    let (_, plain) = ws.team_user(json!({})).await;
    let r = ws
        .post_as(
            &plain,
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "c1"})),
        )
        .await;
    assert_eq!(r.status, 404);
    let (_, manager) = ws.team_user(json!({"manage_workspaces": true})).await;
    let r = ws
        .post_as(
            &manager,
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "c2"})),
        )
        .await;
    assert_eq!(r.status, 201);
    let org = ws.org_token().await;
    let r = ws
        .post_as(
            &org,
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "c3"})),
        )
        .await;
    assert_eq!(r.status, 201);
}

#[tokio::test]
async fn project_maintainers_create_workspaces_in_their_project_only() {
    let ws = Ws::start().await;
    let prj = ws
        .admin(
            Method::POST,
            "/projects",
            json!({"organization": "quartet", "name": "team-a"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, token) = ws
        .team_user(json!({"project_access": {prj.clone(): "maintain"}}))
        .await;
    let body = json!({"data": {"type": "workspaces", "attributes": {"name": "in-prj"},
        "relationships": {"project": {"data": {"type": "projects", "id": prj}}}}});
    let r = ws
        .post_as(&token, "/api/v2/organizations/quartet/workspaces", body)
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(
        r.body["data"]["relationships"]["project"]["data"]["id"],
        prj
    );
    let r = ws
        .post_as(
            &token,
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "default-prj"})),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn manual_lock_and_unlock_toggle_locked() {
    let ws = Ws::start().await;
    let id = ws.create_ws("lockme", json!({})).await;
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/lock"),
            Some(ROOT),
            Some(json!({"reason": "x"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["locked"], true);
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/lock"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 409);
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/unlock"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["locked"], false);
}

#[tokio::test]
async fn safe_delete_refuses_a_workspace_managing_resources_or_locked() {
    let ws = Ws::start().await;
    let id = ws.create_ws("busy", json!({"auto-apply": true})).await;
    let run = ws.create_run(&id, json!({})).await;
    ws.wait_status(&run, "applied").await;
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/safe-delete"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 409);
    assert!(!error_detail(&r.body).contains("locked"));
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{id}")).await.body["data"]["attributes"]
            ["resource-count"],
        1
    );
    let id2 = ws.create_ws("locked-del", json!({})).await;
    ws.call(
        Method::POST,
        &format!("/api/v2/workspaces/{id2}/actions/lock"),
        Some(ROOT),
        None,
    )
    .await;
    let r = ws
        .call(
            Method::POST,
            "/api/v2/organizations/quartet/workspaces/locked-del/actions/safe-delete",
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 409);
    assert!(error_detail(&r.body).contains("locked"));
}

#[tokio::test]
async fn unlock_of_a_workspace_held_by_a_run_names_the_run() {
    let ws = Ws::start().await;
    let id = ws.create_ws("runlock", json!({})).await;
    let run = ws.create_run(&id, json!({})).await;
    ws.wait_status(&run, "planned").await;
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/unlock"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 409);
    assert!(error_detail(&r.body).contains("is locked by Run"));
}

#[tokio::test]
async fn unlock_of_another_users_lock_is_409_and_force_unlock_needs_admin() {
    let ws = Ws::start().await;
    let id = ws.create_ws("otherlock", json!({})).await;
    let (_, writer) = ws
        .team_user(json!({"workspace_access": {id.clone(): "write"}}))
        .await;
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/lock"),
            Some(&writer),
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/unlock"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 409);
    assert!(error_detail(&r.body).contains("is locked by User"));
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/force-unlock"),
            Some(&writer),
            None,
        )
        .await;
    assert_eq!(r.status, 404);
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/workspaces/{id}/actions/force-unlock"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["locked"], false);
}

#[tokio::test]
async fn list_filters_by_project_and_current_run_status() {
    let ws = Ws::start().await;
    let prj = ws
        .admin(
            Method::POST,
            "/projects",
            json!({"organization": "quartet", "name": "flt"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let body = json!({"data": {"type": "workspaces", "attributes": {"name": "in-flt"},
        "relationships": {"project": {"data": {"type": "projects", "id": prj}}}}});
    let inp = ws
        .post("/api/v2/organizations/quartet/workspaces", body)
        .await
        .body["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ws.create_ws("out-flt", json!({})).await;
    let r = ws
        .get(&format!(
            "/api/v2/organizations/quartet/workspaces?filter%5Bproject%5D%5Bid%5D={prj}"
        ))
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["data"][0]["id"], inp);
    let run = ws.create_run(&inp, json!({})).await;
    ws.wait_status(&run, "planned").await;
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces?filter%5Bcurrent-run%5D%5Bstatus%5D=planned")
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["data"][0]["id"], inp);
}

#[tokio::test]
async fn workspace_with_vcs_repo_gets_a_current_configuration_version() {
    let ws = Ws::start().await;
    let ot = ws
        .admin(
            Method::POST,
            "/oauth-tokens",
            json!({"organization": "quartet"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let id = ws
        .create_ws(
            "vcs-cv",
            json!({"vcs-repo": {"oauth-token-id": ot, "identifier": "acme/app"}}),
        )
        .await;
    let r = ws
        .get(&format!(
            "/api/v2/workspaces/{id}?include=current_configuration_version"
        ))
        .await;
    let cv = r.body["data"]["relationships"]["current-configuration-version"]["data"]["id"]
        .as_str()
        .unwrap();
    assert!(cv.starts_with("cv-"));
    assert_eq!(r.body["included"][0]["type"], "configuration-versions");
}

#[tokio::test]
async fn vcs_repo_with_unknown_oauth_token_is_422() {
    let ws = Ws::start().await;
    let r = ws
        .post("/api/v2/organizations/quartet/workspaces", ws_body(json!({"name": "badot", "vcs-repo": {"oauth-token-id": "ot-nope", "identifier": "a/b"}})))
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn organization_token_manages_workspace_settings() {
    let ws = Ws::start().await;
    let id = ws.create_ws("orgtok-upd", json!({})).await;
    let org = ws.org_token().await;
    let r = ws
        .patch_as(
            &org,
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"description": "by org token"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["data"]["attributes"]["permissions"]["can-queue-run"],
        false
    );
}

#[tokio::test]
async fn empty_vcs_repo_object_as_python_tfe_sends_it_changes_nothing() {
    let ws = Ws::start().await;
    let body = json!({"data": {"type": "workspaces", "attributes": {
        "name": "pytfe", "type": "workspaces", "vcs-repo": {}, "setting-overwrites": {},
        "trigger-prefixes": [], "trigger-patterns": []}}});
    let r = ws
        .post("/api/v2/organizations/quartet/workspaces", body)
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["attributes"]["vcs-repo"], json!(null));
    let ot = ws
        .admin(
            Method::POST,
            "/oauth-tokens",
            json!({"organization": "quartet"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let id = ws
        .create_ws(
            "pytfe2",
            json!({"vcs-repo": {"oauth-token-id": ot, "identifier": "a/b"}}),
        )
        .await;
    let r = ws
        .patch(
            &format!("/api/v2/workspaces/{id}"),
            ws_body(json!({"vcs-repo": {}, "description": "d"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["data"]["attributes"]["vcs-repo"]["identifier"],
        "a/b"
    );
}

#[tokio::test]
async fn empty_query_parameters_are_ignored() {
    let ws = Ws::start().await;
    ws.create_ws("eq", json!({})).await;
    let r = ws.get("/api/v2/organizations/quartet/workspaces?search%5Bname%5D=&search%5Btags%5D=&page%5Bsize%5D=").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn workspace_variables_are_created_listed_updated_and_deleted() {
    let ws = Ws::start().await;
    let id = ws.create_ws("vars", json!({})).await;
    let path = format!("/api/v2/workspaces/{id}/vars");
    let body = |attrs: serde_json::Value| json!({"data": {"type": "vars", "attributes": attrs}});
    let r = ws
        .post(
            &path,
            body(json!({"key": "region", "value": "eu", "category": "terraform"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let var = r.body["data"]["id"].as_str().unwrap().to_string();
    assert!(var.starts_with("var-"));
    let r = ws
        .post(
            &path,
            body(json!({"key": "region", "value": "us", "category": "terraform"})),
        )
        .await;
    assert_eq!(r.status, 422, "duplicate key in the same category");
    let r = ws
        .post(&path, body(json!({"key": "region", "value": "us"})))
        .await;
    assert_eq!(r.status, 422, "category is required");
    let r = ws
        .post(
            &path,
            body(json!({"key": "TOKEN", "value": "s3cret", "category": "env", "sensitive": true})),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(
        r.body["data"]["attributes"]["value"],
        json!(null),
        "sensitive values are write-only"
    );
    let r = ws
        .patch(&format!("{path}/{var}"), body(json!({"value": "ap"})))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["value"], "ap");
    assert_eq!(
        ws.get(&path).await.body["data"].as_array().unwrap().len(),
        2
    );
    assert_eq!(ws.delete(&format!("{path}/{var}"), None).await.status, 204);
    assert_eq!(
        ws.get(&path).await.body["data"].as_array().unwrap().len(),
        1
    );
    let (_, reader) = ws
        .team_user(json!({"workspace_access": {id.clone(): "read"}}))
        .await;
    let r = ws
        .post_as(
            &reader,
            &path,
            body(json!({"key": "x", "value": "y", "category": "env"})),
        )
        .await;
    assert_eq!(r.status, 404);
}
