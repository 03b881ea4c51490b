//! Conformance of the real API's team, team-access and token endpoints (the ways go-tfe sets up
//! the permission rules of spec §5 without the admin API), and of method handling.

use crate::workspaces_support;

use reqwest::Method;
use serde_json::{json, Value};
use workspaces_support::*;

async fn api_team(ws: &Ws, name: &str, access: Value) -> String {
    let r = ws
        .post(
            "/api/v2/organizations/quartet/teams",
            json!({"data": {"type": "teams", "attributes": {"name": name, "organization-access": access}}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["data"]["id"].as_str().unwrap().to_string()
}

async fn team_token(ws: &Ws, team: &str) -> String {
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/teams/{team}/authentication-token"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["type"], "authentication-tokens");
    assert!(r.body["data"]["id"].as_str().unwrap().starts_with("at-"));
    r.body["data"]["attributes"]["token"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn team_created_through_the_api_with_a_team_token_follows_its_workspace_access() {
    let ws = Ws::start().await;
    let w = ws.create_ws("tw", json!({})).await;
    let team = api_team(&ws, "readers", json!({})).await;
    let token = team_token(&ws, &team).await;
    assert_eq!(
        ws.get_as(&token, &format!("/api/v2/workspaces/{w}"))
            .await
            .status,
        404
    );
    let r = ws
        .post(
            "/api/v2/team-workspaces",
            json!({"data": {"type": "team-workspaces", "attributes": {"access": "read"}, "relationships": {
                "workspace": {"data": {"type": "workspaces", "id": w}},
                "team": {"data": {"type": "teams", "id": team}}}}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let grant = r.body["data"]["id"].as_str().unwrap().to_string();
    assert!(grant.starts_with("tws-"));
    assert_eq!(r.body["data"]["attributes"]["access"], "read");
    assert_eq!(
        ws.get_as(&token, &format!("/api/v2/workspaces/{w}"))
            .await
            .status,
        200
    );
    let list = ws
        .get(&format!(
            "/api/v2/team-workspaces?filter%5Bworkspace%5D%5Bid%5D={w}"
        ))
        .await;
    assert_eq!(list.body["data"][0]["id"], grant);
    let r = ws
        .patch(
            &format!("/api/v2/team-workspaces/{grant}"),
            json!({"data": {"type": "team-workspaces", "attributes": {"access": "admin"}}}),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = ws
        .patch_as(
            &token,
            &format!("/api/v2/workspaces/{w}"),
            ws_body(json!({"description": "team admin"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        ws.delete(&format!("/api/v2/team-workspaces/{grant}"), None)
            .await
            .status,
        204
    );
    assert_eq!(
        ws.get_as(&token, &format!("/api/v2/workspaces/{w}"))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn team_with_manage_workspaces_may_create_workspaces() {
    let ws = Ws::start().await;
    let team = api_team(&ws, "managers", json!({"manage-workspaces": true})).await;
    let token = team_token(&ws, &team).await;
    let r = ws
        .post_as(
            &token,
            "/api/v2/organizations/quartet/workspaces",
            ws_body(json!({"name": "by-team"})),
        )
        .await;
    assert_eq!(r.status, 201);
    let t = ws.get(&format!("/api/v2/teams/{team}")).await;
    assert_eq!(
        t.body["data"]["attributes"]["organization-access"]["manage-workspaces"],
        true
    );
}

#[tokio::test]
async fn team_project_access_maintain_gives_admin_on_the_projects_workspaces() {
    let ws = Ws::start().await;
    let prj = ws
        .post(
            "/api/v2/organizations/quartet/projects",
            json!({"data": {"type": "projects", "attributes": {"name": "proj-x"}}}),
        )
        .await
        .body["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let team = api_team(&ws, "maintainers", json!({})).await;
    let token = team_token(&ws, &team).await;
    let r = ws
        .post(
            "/api/v2/team-projects",
            json!({"data": {"type": "team-projects", "attributes": {"access": "maintain"}, "relationships": {
                "project": {"data": {"type": "projects", "id": prj}},
                "team": {"data": {"type": "teams", "id": team}}}}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body["data"]["id"].as_str().unwrap().starts_with("tprj-"));
    let body = json!({"data": {"type": "workspaces", "attributes": {"name": "in-proj-x"},
        "relationships": {"project": {"data": {"type": "projects", "id": prj}}}}});
    assert_eq!(
        ws.post_as(&token, "/api/v2/organizations/quartet/workspaces", body)
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn organization_token_from_the_api_replaces_the_previous_one() {
    let ws = Ws::start().await;
    let r = ws
        .call(
            Method::POST,
            "/api/v2/organizations/quartet/authentication-token",
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(r.status, 201);
    let first = r.body["data"]["attributes"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        ws.get_as(&first, "/api/v2/organizations/quartet")
            .await
            .status,
        200
    );
    let r = ws
        .call(
            Method::POST,
            "/api/v2/organizations/quartet/authentication-token",
            Some(ROOT),
            None,
        )
        .await;
    let second = r.body["data"]["attributes"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        ws.get_as(&first, "/api/v2/organizations/quartet")
            .await
            .status,
        401
    );
    let w = ws.create_ws("orgtok-run", json!({})).await;
    ws.upload_config(&w).await;
    let r = ws
        .post_as(&second, "/api/v2/runs", json!({"data": {"type": "runs", "relationships": {"workspace": {"data": {"type": "workspaces", "id": w}}}}}))
        .await;
    assert_eq!(r.status, 404, "organization tokens cannot queue runs");
    let read = ws
        .get("/api/v2/organizations/quartet/authentication-token")
        .await;
    assert_eq!(read.body["data"]["attributes"]["token"], Value::Null);
    assert_eq!(
        ws.delete("/api/v2/organizations/quartet/authentication-token", None)
            .await
            .status,
        204
    );
    assert_eq!(
        ws.get_as(&second, "/api/v2/organizations/quartet")
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn user_tokens_are_created_and_revoked_by_their_user_only() {
    let ws = Ws::start().await;
    let me = ws.get("/api/v2/account/details").await.body["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = ws
        .post(
            &format!("/api/v2/users/{me}/authentication-tokens"),
            json!({"data": {"type": "authentication-tokens", "attributes": {"description": "ci"}}}),
        )
        .await;
    assert_eq!(r.status, 201);
    let id = r.body["data"]["id"].as_str().unwrap().to_string();
    let token = r.body["data"]["attributes"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(r.body["data"]["attributes"]["description"], "ci");
    assert_eq!(
        ws.get_as(&token, "/api/v2/account/details").await.body["data"]["id"],
        me
    );
    let (_, other) = ws.team_user(json!({})).await;
    assert_eq!(
        ws.post_as(
            &other,
            &format!("/api/v2/users/{me}/authentication-tokens"),
            json!({})
        )
        .await
        .status,
        404
    );
    assert_eq!(
        ws.delete(&format!("/api/v2/authentication-tokens/{id}"), None)
            .await
            .status,
        204
    );
    assert_eq!(
        ws.get_as(&token, "/api/v2/account/details").await.status,
        401
    );
}

#[tokio::test]
async fn expired_token_is_401() {
    let ws = Ws::start().await;
    let me = ws.get("/api/v2/account/details").await.body["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = ws
        .post(
            &format!("/api/v2/users/{me}/authentication-tokens"),
            json!({"data": {"type": "authentication-tokens", "attributes": {"expired-at": "2000-01-01T00:00:00Z"}}}),
        )
        .await;
    let token = r.body["data"]["attributes"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        ws.get_as(&token, "/api/v2/account/details").await.status,
        401
    );
}

#[tokio::test]
async fn only_owners_manage_teams_and_tokens() {
    let ws = Ws::start().await;
    let (team, token) = ws.team_user(json!({"manage_workspaces": true})).await;
    let r = ws
        .post_as(
            &token,
            "/api/v2/organizations/quartet/teams",
            json!({"data": {"type": "teams", "attributes": {"name": "x"}}}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = ws
        .call(
            Method::POST,
            &format!("/api/v2/teams/{team}/authentication-token"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn owners_team_cannot_be_deleted() {
    let ws = Ws::start().await;
    let teams = ws.get("/api/v2/organizations/quartet/teams").await;
    let owners = teams.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["attributes"]["name"] == "owners")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        ws.delete(&format!("/api/v2/teams/{owners}"), None)
            .await
            .status,
        422
    );
}

#[tokio::test]
async fn put_updates_like_patch() {
    let ws = Ws::start().await;
    let id = ws.create_ws("put-me", json!({})).await;
    let r = ws
        .call(
            Method::PUT,
            &format!("/api/v2/workspaces/{id}"),
            Some(ROOT),
            Some(ws_body(json!({"description": "via put"}))),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["description"], "via put");
}

#[tokio::test]
async fn unserved_method_is_a_jsonapi_404() {
    let ws = Ws::start().await;
    let r = ws
        .call(Method::DELETE, "/api/v2/runs", Some(ROOT), None)
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["errors"][0]["status"], "404");
}

/// The real service shows a team or organization token's synthetic service user (OpenAPI
/// description in go-tfe `v2/openapi/spec.json`; usernames as HashiCorp's token-identity code
/// parses them, e.g. `api-org-mullen-14JAXvyITM`).
#[tokio::test]
async fn account_details_of_team_and_organization_tokens_is_their_service_user() {
    let ws = Ws::start().await;
    let r = ws
        .call(
            Method::POST,
            "/api/v2/organizations/quartet/authentication-token",
            Some(ROOT),
            None,
        )
        .await;
    let org_token = r.body["data"]["attributes"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let me = ws.get_as(&org_token, "/api/v2/account/details").await;
    assert_eq!(me.status, 200, "{}", me.body);
    let user = &me.body["data"];
    assert_eq!(user["type"], "users");
    let name = user["attributes"]["username"].as_str().unwrap();
    let tail = name.strip_prefix("api-org-quartet-").expect(name);
    assert!(!tail.is_empty() && !tail.contains('-'), "{name}");
    assert_eq!(user["attributes"]["is-service-account"], true);
    assert_eq!(
        user["relationships"]["authenticated-resource"]["data"],
        json!({"type": "organizations", "id": "quartet"})
    );

    let team = api_team(&ws, "deployers", json!({})).await;
    let token = team_token(&ws, &team).await;
    let me = ws.get_as(&token, "/api/v2/account/details").await;
    let user = &me.body["data"];
    let name = user["attributes"]["username"].as_str().unwrap();
    assert!(name.starts_with("api-team-deployers-"), "{name}");
    assert_eq!(user["attributes"]["is-service-account"], true);
    assert_eq!(
        user["relationships"]["authenticated-resource"]["data"],
        json!({"type": "teams", "id": team})
    );

    let me = ws.get("/api/v2/account/details").await;
    assert_ne!(me.body["data"]["attributes"]["is-service-account"], true);
    assert!(!me.body["data"]["attributes"]["username"]
        .as_str()
        .unwrap()
        .starts_with("api-"));
}
