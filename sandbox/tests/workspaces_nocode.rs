//! Conformance of no-code provisioning (spec B §2.5, §4.5): enable, read, update, workspace
//! creation from a module and the upgrade flow.

use crate::workspaces_support;

use reqwest::Method;
use serde_json::{json, Value};
use workspaces_support::*;

async fn module(ws: &Ws, name: &str) -> String {
    ws.admin(
        Method::POST,
        "/registry-modules",
        json!({"organization": ORG, "name": name, "provider": "aws", "versions": [
            {"version": "1.0.0", "variables": [
                {"name": "region", "type": "string", "required": true},
                {"name": "size", "type": "string", "default": "small"}
            ]},
            {"version": "1.1.0", "variables": [
                {"name": "region", "type": "string", "required": true},
                {"name": "size", "type": "string", "default": "small"}
            ]}
        ]}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn enable_body(module: &str, attrs: Value, options: Value) -> Value {
    json!({"data": {"type": "no-code-modules", "attributes": attrs, "relationships": {
        "registry-module": {"data": {"id": module, "type": "registry-module"}},
        "variable-options": {"data": options}
    }}})
}

async fn enabled_module(ws: &Ws, name: &str) -> (String, String) {
    let m = module(ws, name).await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body(&m, json!({"enabled": true, "version-pin": "1.0.0"}), json!([
                {"type": "variable-options", "attributes": {"variable-name": "region", "variable-type": "string", "options": ["eu-west-1", "us-east-1"]}}
            ])),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    (m, r.body["data"]["id"].as_str().unwrap().to_string())
}

async fn move_pin(ws: &Ws, nc: &str, pin: &str) {
    let r = ws
        .patch(
            &format!("/api/v2/no-code-modules/{nc}"),
            json!({"data": {"type": "no-code-modules", "attributes": {"version-pin": pin}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

fn nc_ws_body(name: &str, vars: Value) -> Value {
    json!({"data": {"type": "workspaces", "attributes": {"name": name}, "relationships": {"vars": {"data": vars}}}})
}

fn var(key: &str, value: &str) -> Value {
    json!({"type": "vars", "attributes": {"key": key, "value": value, "category": "terraform"}})
}

#[tokio::test]
async fn enable_returns_the_no_code_module_document_enabled_and_floating_by_default() {
    let ws = Ws::start().await;
    let m = module(&ws, "net").await;
    assert!(m.starts_with("mod-"));
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body(&m, json!({}), json!([{"type": "variable-options", "attributes": {"variable-name": "region", "variable-type": "string", "options": ["a"]}}])),
        )
        .await;
    assert_eq!(r.status, 200);
    let d = &r.body["data"];
    assert!(d["id"].as_str().unwrap().starts_with("nocode-"));
    assert_eq!(d["type"], "no-code-modules");
    assert_eq!(
        d["attributes"]["enabled"], true,
        "a module enabled without `enabled` is enabled (the live service)"
    );
    assert_eq!(
        d["attributes"]["version-pin"], "",
        "an omitted pin stays empty: the module floats"
    );
    assert_eq!(
        d["relationships"]["registry-module"]["data"],
        json!({"id": m, "type": "registry-modules"})
    );
    assert!(d["relationships"]["registry-module"]["links"]["related"].is_string());
    assert_eq!(d["relationships"]["organization"]["data"]["id"], "quartet");
    assert!(d["relationships"]["organization"]["links"]["related"].is_string());
    assert!(d["relationships"]["variable-options"]["data"][0]["id"]
        .as_str()
        .unwrap()
        .starts_with("ncvaropt-"));
}

#[tokio::test]
async fn enable_needs_an_existing_registry_module() {
    let ws = Ws::start().await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body("mod-absent", json!({}), json!([])),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            json!({"data": {"type": "no-code-modules"}}),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn enable_refuses_modules_not_meeting_no_code_requirements() {
    let ws = Ws::start().await;
    let m = ws
        .admin(Method::POST, "/registry-modules", json!({"organization": ORG, "name": "raw", "provider": "aws", "no_code_ready": false, "versions": [{"version": "1.0.0"}]}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body(&m, json!({}), json!([])),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn enable_with_unknown_version_pin_is_422() {
    let ws = Ws::start().await;
    let m = module(&ws, "pin").await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body(&m, json!({"version-pin": "9.9.9"}), json!([])),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn organization_token_cannot_enable_update_or_create_workspaces() {
    let ws = Ws::start().await;
    let m = module(&ws, "orgtok").await;
    let org = ws.org_token().await;
    let r = ws
        .post_as(
            &org,
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body(&m, json!({}), json!([])),
        )
        .await;
    assert_eq!(r.status, 404);
    let (_, nc) = enabled_module(&ws, "orgtok2").await;
    let r = ws
        .patch_as(
            &org,
            &format!("/api/v2/no-code-modules/{nc}"),
            json!({"data": {"type": "no-code-modules", "attributes": {"enabled": false}}}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = ws
        .post_as(
            &org,
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            nc_ws_body("x", json!([var("region", "eu-west-1")])),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn read_includes_variable_options_when_asked() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "rd").await;
    let r = ws.get(&format!("/api/v2/no-code-modules/{nc}")).await;
    assert_eq!(r.status, 200);
    assert!(r.body.get("included").is_none());
    let r = ws
        .get(&format!(
            "/api/v2/no-code-modules/{nc}?include=variable_options"
        ))
        .await;
    let inc = &r.body["included"][0];
    assert_eq!(inc["type"], "variable-options");
    assert_eq!(inc["attributes"]["variable-name"], "region");
    assert_eq!(inc["attributes"]["variable-type"], "string");
    assert_eq!(
        inc["attributes"]["options"],
        json!(["eu-west-1", "us-east-1"])
    );
    assert_eq!(
        inc["relationships"]["no-code-allowed-module"]["data"]["type"],
        "no-code-allowed-modules"
    );
    let r = ws
        .get(&format!(
            "/api/v2/no-code-modules/{nc}?include=variable-options"
        ))
        .await;
    assert_eq!(r.body["included"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn read_with_invalid_include_is_400() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "inv").await;
    assert_eq!(
        ws.get(&format!("/api/v2/no-code-modules/{nc}?include=bogus"))
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn absent_no_code_module_is_404() {
    let ws = Ws::start().await;
    assert_eq!(
        ws.get("/api/v2/no-code-modules/nocode-absent").await.status,
        404
    );
    let r = ws
        .patch(
            "/api/v2/no-code-modules/nocode-absent",
            json!({"data": {"type": "no-code-modules"}}),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn update_keeps_unspecified_settings() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "keep").await;
    let r = ws
        .patch(
            &format!("/api/v2/no-code-modules/{nc}"),
            json!({"data": {"type": "no-code-modules", "attributes": {"enabled": false}}}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["enabled"], false);
    assert_eq!(r.body["data"]["attributes"]["version-pin"], "1.0.0");
    assert_eq!(
        r.body["data"]["relationships"]["variable-options"]["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn update_with_variable_options_id_replaces_that_set() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "repl").await;
    let r = ws.get(&format!("/api/v2/no-code-modules/{nc}")).await;
    let opt = r.body["data"]["relationships"]["variable-options"]["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = ws
        .patch(
            &format!("/api/v2/no-code-modules/{nc}"),
            json!({"data": {"type": "no-code-modules", "relationships": {"variable-options": {"data": [
                {"type": "variable-options", "id": opt, "attributes": {"variable-name": "region", "variable-type": "string", "options": ["ap-south-1"]}}
            ]}}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = ws
        .get(&format!(
            "/api/v2/no-code-modules/{nc}?include=variable_options"
        ))
        .await;
    let inc = r.body["included"].as_array().unwrap();
    assert_eq!(inc.len(), 1);
    assert_eq!(inc[0]["id"], opt);
    assert_eq!(inc[0]["attributes"]["options"], json!(["ap-south-1"]));
}

#[tokio::test]
async fn update_without_variable_options_id_creates_a_new_set() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "newset").await;
    let r = ws
        .patch(
            &format!("/api/v2/no-code-modules/{nc}"),
            json!({"data": {"type": "no-code-modules", "relationships": {"variable-options": {"data": [
                {"type": "variable-options", "attributes": {"variable-name": "size", "variable-type": "string", "options": ["small", "large"]}}
            ]}}}}),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = ws
        .get(&format!(
            "/api/v2/no-code-modules/{nc}?include=variable_options"
        ))
        .await;
    let mut names: Vec<&str> = r.body["included"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["attributes"]["variable-name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["region", "size"]);
}

#[tokio::test]
async fn create_workspace_from_module_validates_vars_against_allowed_options() {
    let ws = Ws::start().await;
    let (m, nc) = enabled_module(&ws, "prov").await;
    let path = format!("/api/v2/no-code-modules/{nc}/workspaces");
    let r = ws
        .post(
            &path,
            nc_ws_body("bad-region", json!([var("region", "mars-1")])),
        )
        .await;
    assert_eq!(r.status, 422);
    let r = ws.post(&path, nc_ws_body("no-region", json!([]))).await;
    assert_eq!(r.status, 422, "required module variable missing");
    let r = ws
        .post(
            &path,
            nc_ws_body("good", json!([var("region", "eu-west-1")])),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let d = &r.body["data"];
    assert!(d["id"].as_str().unwrap().starts_with("ws-"));
    let a = &d["attributes"];
    assert_eq!(a["source"], "tfe-module");
    let _ = m;
    assert_eq!(a["source-module-id"], "private/quartet/prov/aws/1.0.0");
    assert_eq!(a["no-code-upgrade-available"], false);
    assert!(a["tag-names"].is_array());
    assert!(a["setting-overwrites"]["execution-mode"].is_boolean());
    assert!(a.get("auto-destroy-status").is_some());
    assert!(a.get("assessments-enabled").is_some());
    assert!(a["trigger-patterns"].is_array());
    assert!(d["links"]["self-html"].is_string());
    assert!(d["relationships"]["no-code-module-version"]["data"]["id"]
        .as_str()
        .unwrap()
        .starts_with("nocodever-"));
    assert_eq!(
        d["relationships"]["vars"]["data"].as_array().unwrap().len(),
        1
    );
}

#[tokio::test]
async fn create_workspace_needs_an_enabled_module() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "dis").await;
    ws.patch(
        &format!("/api/v2/no-code-modules/{nc}"),
        json!({"data": {"type": "no-code-modules", "attributes": {"enabled": false}}}),
    )
    .await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            nc_ws_body("x", json!([var("region", "eu-west-1")])),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn create_workspace_needs_permission_in_the_project() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "prjperm").await;
    let prj = ws
        .admin(
            Method::POST,
            "/projects",
            json!({"organization": ORG, "name": "nc-prj"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, reader) = ws
        .team_user(json!({"project_access": {prj.clone(): "read"}}))
        .await;
    let (_, maint) = ws
        .team_user(json!({"project_access": {prj.clone(): "admin"}}))
        .await;
    let body = |name: &str| {
        json!({"data": {"type": "workspaces", "attributes": {"name": name}, "relationships": {
        "project": {"data": {"id": prj, "type": "project"}},
        "vars": {"data": [var("region", "us-east-1")]}}}})
    };
    let path = format!("/api/v2/no-code-modules/{nc}/workspaces");
    assert_eq!(ws.post_as(&reader, &path, body("r1")).await.status, 404);
    let r = ws.post_as(&maint, &path, body("r2")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["data"]["relationships"]["project"]["data"]["id"],
        prj
    );
}

#[tokio::test]
async fn create_workspace_agent_mode_requires_a_pool_and_remote_refuses_one() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "agentnc").await;
    let pool = ws
        .admin(Method::POST, "/agent-pools", json!({"organization": ORG}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/v2/no-code-modules/{nc}/workspaces");
    let mk = |attrs: Value| json!({"data": {"type": "workspaces", "attributes": attrs, "relationships": {"vars": {"data": [var("region", "eu-west-1")]}}}});
    assert_eq!(
        ws.post(&path, mk(json!({"name": "a1", "execution-mode": "agent"})))
            .await
            .status,
        422
    );
    assert_eq!(
        ws.post(
            &path,
            mk(json!({"name": "a2", "execution-mode": "remote", "agent-pool-id": pool}))
        )
        .await
        .status,
        422
    );
    assert_eq!(
        ws.post(
            &path,
            mk(json!({"name": "a3", "execution-mode": "agent", "agent-pool-id": pool}))
        )
        .await
        .status,
        200
    );
}

#[tokio::test]
async fn moving_the_version_pin_makes_an_upgrade_available_and_the_upgrade_flow_applies_it() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "upg").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            nc_ws_body("upg-ws", json!([var("region", "eu-west-1")])),
        )
        .await;
    let w = r.body["data"]["id"].as_str().unwrap().to_string();
    let r = ws
        .patch(
            &format!("/api/v2/no-code-modules/{nc}"),
            json!({"data": {"type": "no-code-modules", "attributes": {"version-pin": "1.1.0"}}}),
        )
        .await;
    assert_eq!(r.status, 200);
    let doc = ws.get(&format!("/api/v2/workspaces/{w}")).await;
    assert_eq!(
        doc.body["data"]["attributes"]["no-code-upgrade-available"],
        true
    );

    // the provisioning run applies by itself; one active run per workspace
    let first = doc.body["data"]["relationships"]["latest-run"]["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ws.wait_status(&first, "applied").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade"),
            json!({"data": {"type": "workspaces", "relationships": {"vars": {"data": [var("region", "us-east-1")]}}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"]["type"], "workspace-upgrade");
    let run = r.body["data"]["id"].as_str().unwrap().to_string();
    assert!(run.starts_with("run-"));
    assert!(r.body["data"]["attributes"]["plan-url"].is_string());
    assert_eq!(
        r.body["data"]["relationships"]["workspace"]["data"]["id"],
        w
    );

    let status_path = format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade/{run}");
    let start = std::time::Instant::now();
    loop {
        let s = ws.get(&status_path).await;
        assert_eq!(s.status, 200);
        // the upgrade run is a normal run: it stops for confirmation
        if s.body["data"]["attributes"]["status"] == "planned" {
            break;
        }
        assert!(
            start.elapsed().as_secs() < 10,
            "upgrade plan never finished: {}",
            s.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    let body = ws.wait_status(&run, "planned").await;
    assert_eq!(
        body["data"]["attributes"]["actions"]["is-confirmable"],
        true
    );
    let c = ws.call(Method::POST, &status_path, Some(ROOT), None).await;
    assert_eq!(c.status, 200);
    assert_eq!(c.body, json!("Workspace update completed"));
    // the confirmed upgrade run applies, and the workspace records the version
    ws.wait_status(&run, "applied").await;
    let doc = ws.get(&format!("/api/v2/workspaces/{w}")).await;
    assert_eq!(
        doc.body["data"]["attributes"]["no-code-upgrade-available"],
        false
    );
    assert_eq!(
        doc.body["data"]["attributes"]["source-module-id"],
        "private/quartet/upg/aws/1.1.0"
    );
    // a second confirmation is refused
    assert_eq!(
        ws.call(Method::POST, &status_path, Some(ROOT), None)
            .await
            .status,
        409
    );
}

#[tokio::test]
async fn confirming_an_upgrade_before_its_plan_finished_is_409() {
    let ws = Ws::start().await;
    ws.admin(Method::PUT, "/settings", json!({"step_ms": 2000}))
        .await;
    let (_, nc) = enabled_module(&ws, "early").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            nc_ws_body("early-ws", json!([var("region", "eu-west-1")])),
        )
        .await;
    let w = r.body["data"]["id"].as_str().unwrap().to_string();
    move_pin(&ws, &nc, "1.1.0").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade"),
            json!({"data": {"type": "workspaces"}}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["status"], "pending");
    let run = r.body["data"]["id"].as_str().unwrap();
    let c = ws
        .call(
            Method::POST,
            &format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade/{run}"),
            Some(ROOT),
            None,
        )
        .await;
    assert_eq!(c.status, 409);
}

#[tokio::test]
async fn module_variables_of_a_version_list_names_and_allowed_options() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "mv").await;
    let r = ws
        .get(&format!(
            "/api/v2/no-code-modules/{nc}/versions/1.0.0/module-variables"
        ))
        .await;
    assert_eq!(r.status, 200);
    let vars = r.body["data"].as_array().unwrap();
    assert_eq!(vars.len(), 2);
    let region = vars
        .iter()
        .find(|v| v["attributes"]["name"] == "region")
        .unwrap();
    assert_eq!(region["attributes"]["required"], true);
    assert_eq!(
        region["attributes"]["options"],
        json!(["eu-west-1", "us-east-1"])
    );
    let size = vars
        .iter()
        .find(|v| v["attributes"]["name"] == "size")
        .unwrap();
    assert_eq!(size["attributes"]["default"], "small");
    assert_eq!(
        ws.get(&format!(
            "/api/v2/no-code-modules/{nc}/versions/9.9.9/module-variables"
        ))
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn deleting_a_no_code_module_disables_provisioning() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "del").await;
    assert_eq!(
        ws.delete(&format!("/api/v2/no-code-modules/{nc}"), None)
            .await
            .status,
        204
    );
    assert_eq!(
        ws.get(&format!("/api/v2/no-code-modules/{nc}"))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn go_tfe_type_and_include_spellings_are_accepted() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "gotfe").await;
    let body = json!({"data": {"type": "no-code-module-workspace", "attributes": {"name": "gt", "auto-apply": true},
        "relationships": {"vars": {"data": [var("region", "eu-west-1")]}}}});
    let r = ws
        .post(&format!("/api/v2/no-code-modules/{nc}/workspaces"), body)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"]["attributes"]["auto-apply"], true);
}

#[tokio::test]
async fn upgrade_status_of_an_absent_upgrade_is_404() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "st404").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            nc_ws_body("st-ws", json!([var("region", "eu-west-1")])),
        )
        .await;
    let w = r.body["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        ws.get(&format!(
            "/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade/run-absent"
        ))
        .await
        .status,
        404
    );
    assert_eq!(
        ws.get(&format!(
            "/api/v2/no-code-modules/{nc}/workspaces/ws-absent/upgrade/run-absent"
        ))
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn upgrade_with_a_disallowed_option_is_422() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "up422").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            nc_ws_body("up-ws", json!([var("region", "eu-west-1")])),
        )
        .await;
    let w = r.body["data"]["id"].as_str().unwrap().to_string();
    move_pin(&ws, &nc, "1.1.0").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade"),
            json!({"data": {"type": "workspaces", "relationships": {"vars": {"data": [var("region", "nowhere")]}}}}),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn registry_module_is_readable_through_the_private_registry_path() {
    let ws = Ws::start().await;
    let m = module(&ws, "vpc").await;
    let r = ws
        .get("/api/v2/organizations/quartet/registry-modules/private/quartet/vpc/aws")
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["id"], m);
    assert_eq!(r.body["data"]["type"], "registry-modules");
}

/// A no-code workspace of module `nc` (region eu-west-1) whose provisioning run has applied.
async fn provisioned(ws: &Ws, nc: &str, name: &str) -> String {
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            nc_ws_body(name, json!([var("region", "eu-west-1")])),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let w = r.body["data"]["id"].as_str().unwrap().to_string();
    let first = r.body["data"]["relationships"]["latest-run"]["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ws.wait_status(&first, "applied").await;
    w
}

async fn upgrade_available(ws: &Ws, w: &str) -> Value {
    ws.get(&format!("/api/v2/workspaces/{w}")).await.body["data"]["attributes"]
        ["no-code-upgrade-available"]
        .clone()
}

#[tokio::test]
async fn floating_pin_follows_new_versions_and_turns_upgrade_available() {
    let ws = Ws::start().await;
    let m = module(&ws, "float").await;
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body(&m, json!({}), json!([])),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let nc = r.body["data"]["id"].as_str().unwrap().to_string();
    let w = provisioned(&ws, &nc, "float-ws").await;
    let doc = ws.get(&format!("/api/v2/workspaces/{w}")).await;
    assert_eq!(
        doc.body["data"]["attributes"]["source-module-id"], "private/quartet/float/aws/1.1.0",
        "provisioned with the newest version"
    );
    assert_eq!(upgrade_available(&ws, &w).await, false);
    ws.admin(
        Method::POST,
        &format!("/registry-modules/{m}/versions"),
        json!({"version": "1.2.0", "variables": [{"name": "region", "type": "string", "required": true}]}),
    )
    .await;
    assert_eq!(upgrade_available(&ws, &w).await, true);
    let r = ws.get(&format!("/api/v2/no-code-modules/{nc}")).await;
    assert_eq!(
        r.body["data"]["attributes"]["version-pin"], "",
        "still floating"
    );
}

#[tokio::test]
async fn module_without_versions_can_be_enabled_and_a_bad_pin_gets_the_live_message() {
    let ws = Ws::start().await;
    let m = ws
        .admin(
            Method::POST,
            "/registry-modules",
            json!({"organization": ORG, "name": "empty", "provider": "aws", "versions": []}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body(&m, json!({"version-pin": "2.0.0"}), json!([])),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        error_detail(&r.body),
        "Validation failed: Provided version pin is not equal to latest or provided string does not represent an existing version of the module."
    );
    let r = ws
        .post(
            "/api/v2/organizations/quartet/no-code-modules",
            enable_body(&m, json!({}), json!([])),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"]["attributes"]["enabled"], true);
    assert_eq!(r.body["data"]["attributes"]["version-pin"], "");
}

#[tokio::test]
async fn upgrade_with_nothing_to_upgrade_answers_only_a_message() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "noop").await;
    let w = provisioned(&ws, &nc, "noop-ws").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade"),
            json!({"data": {"type": "workspaces"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let d = &r.body["data"];
    assert!(d.get("id").is_none(), "no run: {d}");
    let attrs = d["attributes"].as_object().unwrap();
    assert_eq!(attrs.len(), 1, "only `message`: {d}");
    assert!(attrs["message"].is_string());
    let runs = ws.get(&format!("/api/v2/workspaces/{w}/runs")).await;
    assert_eq!(
        runs.body["data"].as_array().unwrap().len(),
        1,
        "no run queued"
    );
}

#[tokio::test]
async fn upgrade_run_stops_in_the_last_phase_and_confirm_is_accepted_when_confirmable() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "phased").await;
    let w = provisioned(&ws, &nc, "phased-ws").await;
    ws.admin(
        Method::PUT,
        "/run-phases",
        json!({"workspace": w, "cost_estimation": true}),
    )
    .await;
    move_pin(&ws, &nc, "1.1.0").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade"),
            json!({"data": {"type": "workspaces"}}),
        )
        .await;
    let run = r.body["data"]["id"].as_str().unwrap().to_string();
    let status_path = format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade/{run}");
    let body = ws.wait_status(&run, "cost_estimated").await;
    assert_eq!(
        body["data"]["attributes"]["actions"]["is-confirmable"],
        true
    );
    let s = ws.get(&status_path).await;
    assert_eq!(s.body["data"]["attributes"]["status"], "cost_estimated");
    let c = ws.call(Method::POST, &status_path, Some(ROOT), None).await;
    assert_eq!(c.status, 200);
    ws.wait_status(&run, "applied").await;
    assert_eq!(upgrade_available(&ws, &w).await, false);
    let c = ws.call(Method::POST, &status_path, Some(ROOT), None).await;
    assert_eq!(c.status, 409, "an applied run is not confirmable");
}

#[tokio::test]
async fn upgrade_plan_without_changes_finishes_without_a_confirm() {
    let ws = Ws::start().await;
    let (_, nc) = enabled_module(&ws, "nochg").await;
    let w = provisioned(&ws, &nc, "nochg-ws").await;
    ws.admin(
        Method::POST,
        "/scripts",
        json!({"workspace": w, "plan": "no-changes"}),
    )
    .await;
    move_pin(&ws, &nc, "1.1.0").await;
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade"),
            json!({"data": {"type": "workspaces"}}),
        )
        .await;
    let run = r.body["data"]["id"].as_str().unwrap().to_string();
    let body = ws.wait_status(&run, "planned_and_finished").await;
    assert_eq!(
        body["data"]["attributes"]["actions"]["is-confirmable"],
        false
    );
    assert_eq!(upgrade_available(&ws, &w).await, false);
}
