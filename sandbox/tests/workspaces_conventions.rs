//! Conformance of the workspace service's conventions: discovery, ping, tokens, JSON:API
//! documents and errors, pagination, organizations, projects and teams (spec B §2, §5, §7, §8).

use crate::workspaces_support;

use reqwest::Method;
use serde_json::{json, Value};
use workspaces_support::*;

#[tokio::test]
async fn well_known_discovery_document_points_tfe_v2_at_api_v2() {
    let ws = Ws::start().await;
    let r = ws
        .call(Method::GET, "/.well-known/terraform.json", None, None)
        .await;
    assert_eq!(r.status, 200);
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    assert_eq!(r.body["tfe.v2"], "/api/v2/");
    assert_eq!(r.body["tfe.v2.1"], "/api/v2/");
    assert_eq!(r.body["tfe.v2.2"], "/api/v2/");
}

#[tokio::test]
async fn ping_answers_with_the_api_version_header() {
    let ws = Ws::start().await;
    let r = ws.get("/api/v2/ping").await;
    assert!(r.status == 204 || r.status == 200);
    assert!(r.headers.get("tfp-api-version").is_some());
    assert!(r.headers.get("x-ratelimit-limit").is_some());
}

#[tokio::test]
async fn every_api_response_carries_tfp_api_version() {
    let ws = Ws::start().await;
    let r = ws.get("/api/v2/organizations/quartet").await;
    assert_eq!(r.headers["tfp-api-version"], "2.6");
    let r = ws.get("/api/v2/workspaces/ws-absent").await;
    assert!(r.headers.get("tfp-api-version").is_some());
}

#[tokio::test]
async fn missing_or_unknown_token_is_401() {
    let ws = Ws::start().await;
    let r = ws
        .call(Method::GET, "/api/v2/organizations/quartet", None, None)
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body["errors"][0]["status"], "401");
    let r = ws
        .call(
            Method::GET,
            "/api/v2/organizations/quartet",
            Some("nope"),
            None,
        )
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn absent_resource_is_jsonapi_404_not_found() {
    let ws = Ws::start().await;
    let r = ws.get("/api/v2/workspaces/ws-doesnotexist").await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.body,
        json!({"errors": [{"status": "404", "title": "not found"}]})
    );
    assert_eq!(r.headers["content-type"], "application/vnd.api+json");
}

#[tokio::test]
async fn unknown_api_path_is_jsonapi_404() {
    let ws = Ws::start().await;
    let r = ws.get("/api/v2/no-such-thing").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["errors"][0]["title"], "not found");
}

#[tokio::test]
async fn documents_use_the_jsonapi_media_type() {
    let ws = Ws::start().await;
    let r = ws.get("/api/v2/organizations/quartet").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/vnd.api+json");
}

#[tokio::test]
async fn root_token_is_an_owners_team_user_of_the_ready_made_organization() {
    let ws = Ws::start().await;
    let r = ws.get("/api/v2/account/details").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["type"], "users");
    assert!(r.body["data"]["id"].as_str().unwrap().starts_with("user-"));
    let teams = ws.get("/api/v2/organizations/quartet/teams").await;
    let owners = teams.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["attributes"]["name"] == "owners")
        .cloned()
        .unwrap();
    assert!(owners["id"].as_str().unwrap().starts_with("team-"));
    assert_eq!(
        owners["relationships"]["users"]["data"][0]["id"],
        r.body["data"]["id"]
    );
}

#[tokio::test]
async fn organization_is_identified_by_its_name_with_an_org_external_id() {
    let ws = Ws::start().await;
    let r = ws.get("/api/v2/organizations/quartet").await;
    assert_eq!(r.body["data"]["id"], "quartet");
    assert_eq!(r.body["data"]["type"], "organizations");
    assert!(r.body["data"]["attributes"]["external-id"]
        .as_str()
        .unwrap()
        .starts_with("org-"));
    assert_eq!(
        r.body["data"]["attributes"]["permissions"]["can-create-workspace"],
        true
    );
    let list = ws.get("/api/v2/organizations").await;
    assert_eq!(list.body["data"][0]["id"], "quartet");
}

#[tokio::test]
async fn organization_option_names_the_ready_made_organization() {
    let mut opts = quartet_sandbox::SandboxOptions::ephemeral();
    opts.organization = "acme".into();
    opts.root_token = "sekret".into();
    let ws = Ws::start_with(opts).await;
    let r = ws
        .call(
            Method::GET,
            "/api/v2/organizations/acme",
            Some("sekret"),
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    let r = ws
        .call(
            Method::GET,
            "/api/v2/organizations/quartet",
            Some("sekret"),
            None,
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn entitlement_set_of_the_organization_is_readable() {
    let ws = Ws::start().await;
    let r = ws
        .get("/api/v2/organizations/quartet/entitlement-set")
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["type"], "entitlement-sets");
    assert_eq!(r.body["data"]["attributes"]["operations"], true);
}

#[tokio::test]
async fn organization_of_another_tenant_is_404() {
    let ws = Ws::start().await;
    ws.admin(Method::POST, "/organizations", json!({"name": "other"}))
        .await;
    let r = ws.get("/api/v2/organizations/other").await;
    assert_eq!(r.status, 404);
    let r = ws
        .post(
            "/api/v2/organizations/other/workspaces",
            ws_body(json!({"name": "x"})),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn default_project_exists_and_is_listed() {
    let ws = Ws::start().await;
    let org = ws.get("/api/v2/organizations/quartet").await;
    let prj = org.body["data"]["relationships"]["default-project"]["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prj.starts_with("prj-"));
    let r = ws.get(&format!("/api/v2/projects/{prj}")).await;
    assert_eq!(r.body["data"]["attributes"]["name"], "Default Project");
    let list = ws.get("/api/v2/organizations/quartet/projects").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn project_create_needs_a_unique_name() {
    let ws = Ws::start().await;
    let body = json!({"data": {"type": "projects", "attributes": {"name": "payments"}}});
    let r = ws
        .post("/api/v2/organizations/quartet/projects", body.clone())
        .await;
    assert_eq!(r.status, 201);
    assert!(r.body["data"]["id"].as_str().unwrap().starts_with("prj-"));
    let r = ws
        .post("/api/v2/organizations/quartet/projects", body)
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn admin_api_creates_team_user_and_tokens_of_three_kinds() {
    let ws = Ws::start().await;
    let (team, user_token) = ws.team_user(json!({"manage_workspaces": true})).await;
    assert!(team.starts_with("team-"));
    let team_token = ws
        .admin(
            Method::POST,
            "/tokens",
            json!({"kind": "team", "team": team}),
        )
        .await;
    let org_token = ws.org_token().await;
    for t in [
        user_token.as_str(),
        team_token["token"].as_str().unwrap(),
        org_token.as_str(),
    ] {
        let r = ws.get_as(t, "/api/v2/organizations/quartet").await;
        assert_eq!(r.status, 200, "token kind works");
    }
}

#[tokio::test]
async fn body_without_content_type_is_accepted() {
    let ws = Ws::start().await;
    let resp = ws
        .http
        .post(format!(
            "{}/api/v2/organizations/quartet/workspaces",
            ws.url
        ))
        .header("authorization", "Bearer root")
        .body(ws_body(json!({"name": "no-ctype"})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
}

#[tokio::test]
async fn body_with_application_json_is_accepted() {
    let ws = Ws::start().await;
    let resp = ws
        .http
        .post(format!(
            "{}/api/v2/organizations/quartet/workspaces",
            ws.url
        ))
        .header("authorization", "Bearer root")
        .header("content-type", "application/json")
        .body(ws_body(json!({"name": "json-ctype"})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
}

#[tokio::test]
async fn list_pagination_defaults_to_twenty_with_meta_and_links() {
    let ws = Ws::start().await;
    for i in 0..25 {
        ws.create_ws(&format!("page-{i:02}"), json!({})).await;
    }
    let r = ws.get("/api/v2/organizations/quartet/workspaces").await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 20);
    let p = &r.body["meta"]["pagination"];
    assert_eq!(p["current-page"], 1);
    assert_eq!(p["page-size"], 20);
    assert_eq!(p["prev-page"], json!(null));
    assert_eq!(p["next-page"], 2);
    assert_eq!(p["total-pages"], 2);
    assert_eq!(p["total-count"], 25);
    for k in ["self", "first", "last", "next"] {
        assert!(
            r.body["links"][k]
                .as_str()
                .unwrap()
                .contains("page%5Bnumber%5D"),
            "{k} link"
        );
    }
    assert_eq!(r.body["links"]["prev"], json!(null));
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces?page%5Bnumber%5D=2&page%5Bsize%5D=20")
        .await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 5);
    assert_eq!(r.body["meta"]["pagination"]["prev-page"], 1);
    assert_eq!(r.body["meta"]["pagination"]["next-page"], json!(null));
}

#[tokio::test]
async fn page_size_is_capped_at_one_hundred() {
    let ws = Ws::start().await;
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces?page[size]=500")
        .await;
    assert_eq!(r.body["meta"]["pagination"]["page-size"], 100);
}

#[tokio::test]
async fn malformed_json_body_is_400_jsonapi_error() {
    let ws = Ws::start().await;
    let resp = ws
        .http
        .post(format!(
            "{}/api/v2/organizations/quartet/workspaces",
            ws.url
        ))
        .header("authorization", "Bearer root")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["errors"][0]["status"], "400");
}

#[tokio::test]
async fn faults_of_the_admin_layer_apply_to_the_service() {
    let ws = Ws::start().await;
    ws.http
        .post(format!("{}/_sandbox/faults", ws.url))
        .body(json!({"path": "/api/v2/ping", "status": 503}).to_string())
        .send()
        .await
        .unwrap();
    let r = ws.get("/api/v2/ping").await;
    assert_eq!(r.status, 503);
    assert_eq!(r.body["errors"][0]["status"], "503");
}

/// A fault with only `delay_ms` holds the call and then lets the service answer (the README's
/// promise); with a `status` as well, the delayed answer is that status; a fault with neither
/// answers 503.
#[tokio::test]
async fn a_delay_alone_serves_normally_after_the_delay_and_a_bare_fault_answers_503() {
    let ws = Ws::start().await;
    let fault = |body: serde_json::Value| {
        let ws = &ws;
        async move {
            ws.http
                .post(format!("{}/_sandbox/faults", ws.url))
                .body(body.to_string())
                .send()
                .await
                .unwrap();
        }
    };
    fault(json!({"path": "/api/v2/ping", "delay_ms": 300})).await;
    let started = std::time::Instant::now();
    let r = ws.get("/api/v2/ping").await;
    assert!(r.status == 204 || r.status == 200, "{}", r.status);
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    fault(json!({"path": "/api/v2/ping", "delay_ms": 100, "status": 502})).await;
    assert_eq!(ws.get("/api/v2/ping").await.status, 502);
    fault(json!({"path": "/api/v2/ping"})).await;
    assert_eq!(ws.get("/api/v2/ping").await.status, 503);
}

#[tokio::test]
async fn project_shows_its_workspace_count() {
    let ws = Ws::start().await;
    ws.create_ws("counted", json!({})).await;
    let list = ws.get("/api/v2/organizations/quartet/projects").await;
    assert_eq!(list.body["data"][0]["attributes"]["workspace-count"], 1);
}

/// `"after": true` lets the service process the request and then drops the connection without
/// the response: the write happened, the client cannot know (how operators make duplicates).
#[tokio::test]
async fn a_lost_response_fault_processes_the_request_then_drops_the_connection() {
    let ws = Ws::start().await;
    ws.http
        .post(format!("{}/_sandbox/faults", ws.url))
        .body(json!({"method": "POST", "path": "/api/v2/organizations/quartet/workspaces", "after": true}).to_string())
        .send()
        .await
        .unwrap();
    let sent = ws
        .http
        .post(format!(
            "{}/api/v2/organizations/quartet/workspaces",
            ws.url
        ))
        .bearer_auth(ROOT)
        .header("content-type", "application/vnd.api+json")
        .body(json!({"data": {"type": "workspaces", "attributes": {"name": "lost"}}}).to_string())
        .send()
        .await;
    let failed = match sent {
        Err(_) => true,
        Ok(r) => r.bytes().await.is_err(),
    };
    assert!(failed, "the response must not reach the client");
    let r = ws
        .get("/api/v2/organizations/quartet/workspaces/lost")
        .await;
    assert_eq!(r.status, 200, "the workspace was created: {}", r.body);
    let log = ws
        .http
        .get(format!("{}/_sandbox/requests?service=workspaces", ws.url))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let create = log["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["method"] == "POST")
        .expect("logged");
    assert_eq!(create["status"], 201, "the log shows what the service did");
}

/// `"probability"` makes a fault hit only that share of matching calls (chaos testing), and
/// `"seed"` makes the draws repeatable: two sandboxes seeded alike fail the same calls.
#[tokio::test]
async fn a_probabilistic_fault_hits_about_its_share_of_calls_and_a_seed_repeats_them() {
    async fn outcomes(seed: u64) -> Vec<u16> {
        let ws = Ws::start().await;
        ws.http
            .post(format!("{}/_sandbox/faults", ws.url))
            .body(
                json!({"path": "/api/v2/ping", "status": 503, "count": 0, "probability": 0.2, "seed": seed})
                    .to_string(),
            )
            .send()
            .await
            .unwrap();
        let mut out = Vec::new();
        for _ in 0..400 {
            out.push(ws.get("/api/v2/ping").await.status);
        }
        out
    }
    let a = outcomes(7).await;
    let failed = a.iter().filter(|s| **s == 503).count();
    assert!(
        (40..=120).contains(&failed),
        "{failed} of 400 calls failed with probability 0.2"
    );
    assert!(a.iter().all(|s| *s == 503 || *s == 200 || *s == 204));
    assert_eq!(outcomes(7).await, a, "the same seed fails the same calls");
}
