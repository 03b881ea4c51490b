//! Regression tests for the request and response shapes of the real client libraries
//! (go-tfe, python-tfe, terrasnek), each found by driving those clients against the sandbox.

use crate::workspaces_support;

use reqwest::Method;
use serde_json::{json, Value};
use workspaces_support::*;

/// go-tfe marshals whole `Workspace` structs (attributes and null relationships included) as
/// the entries of a remote-state-consumers payload; only `type` and `id` count.
#[tokio::test]
async fn consumer_entries_with_full_go_tfe_workspace_nodes_are_accepted() {
    let ws = Ws::start().await;
    let w = ws.create_ws("gotfe-subject", json!({})).await;
    let c = ws.create_ws("gotfe-consumer", json!({})).await;
    let node = json!({
        "type": "workspaces", "id": c,
        "attributes": {"name": "", "allow-destroy-plan": false, "auto-apply": false,
            "created-at": "0001-01-01T00:00:00Z", "trigger-prefixes": null, "vcs-repo": null},
        "relationships": {"agent-pool": {"data": null}, "organization": {"data": null}}
    });
    let path = format!("/api/v2/workspaces/{w}/relationships/remote-state-consumers");
    assert_eq!(
        ws.post(&path, json!({"data": [node.clone()]})).await.status,
        204
    );
    let list = ws.get(&path).await;
    assert_eq!(list.body["data"][0]["id"], json!(c));
    assert_eq!(list.body["data"][0]["attributes"]["name"], "gotfe-consumer");
    assert_eq!(
        ws.delete(&path, Some(json!({"data": [node]}))).await.status,
        204
    );
    assert_eq!(ws.get(&path).await.body["data"], json!([]));
}

/// terrasnek and python-tfe's transport send brackets in query keys unencoded
/// (`page[size]=2`); they mean the same as the percent-encoded form.
#[tokio::test]
async fn unencoded_brackets_in_query_parameters_are_understood() {
    let ws = Ws::start().await;
    for n in ["br-a", "br-b", "br-c"] {
        ws.create_ws(n, json!({})).await;
    }
    let r = ws
        .get(&format!(
            "/api/v2/organizations/{ORG}/workspaces?page[number]=2&page[size]=2&search[name]=br-"
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(r.body["meta"]["pagination"]["current-page"], 2);
    assert_eq!(r.body["meta"]["pagination"]["page-size"], 2);
    assert_eq!(r.body["meta"]["pagination"]["total-count"], 3);
}

/// go-tfe offers `task_stages` and `tf_policy_evaluations` as run include values; the real
/// service accepts them, so they are not 400.
#[tokio::test]
async fn run_include_values_of_go_tfe_are_accepted() {
    let ws = Ws::start().await;
    let w = ws.create_ws("inc-run", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    for inc in [
        "task_stages",
        "tf_policy_evaluations",
        "workspace",
        "plan,apply,created_by",
    ] {
        let r = ws.get(&format!("/api/v2/runs/{run}?include={inc}")).await;
        assert_eq!(r.status, 200, "include={inc}: {}", r.body);
    }
    let r = ws.get(&format!("/api/v2/runs/{run}?include=bogus")).await;
    assert_eq!(r.status, 400);
}

/// terrasnek's no-code client starts an upgrade with
/// `POST /organizations/:org/no-code-modules/:id/workspaces/:ws`, polls and confirms under
/// `/organizations/:org/no-code-modules/:id/workspaces/:ws/upgrade/:upgrade` and decodes the
/// confirmation as JSON; those aliases behave like the documented paths.
#[tokio::test]
async fn terrasnek_organization_scoped_upgrade_paths_run_the_upgrade_flow() {
    let ws = Ws::start().await;
    let m = ws
        .admin(
            Method::POST,
            "/registry-modules",
            json!({"organization": ORG, "name": "snek", "provider": "aws", "no_code_ready": true,
                "versions": [{"version": "1.0.0", "variables": []}]}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let nc = ws
        .post(
            &format!("/api/v2/organizations/{ORG}/no-code-modules"),
            json!({"data": {"type": "no-code-modules", "attributes": {"enabled": true},
                "relationships": {"registry-module": {"data": {"id": m, "type": "registry-module"}}}}}),
        )
        .await;
    assert_eq!(nc.status, 200, "{}", nc.body);
    let nc = nc.body["data"]["id"].as_str().unwrap().to_string();
    let prj = ws
        .admin(
            Method::POST,
            "/projects",
            json!({"organization": ORG, "name": "snekprj"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let created = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            json!({"data": {"type": "workspaces", "attributes": {"name": "snek-nc"},
                "relationships": {"project": {"data": {"id": prj, "type": "project"}}}}}),
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let w = created.body["data"]["id"].as_str().unwrap().to_string();

    // The module floats: a newly published version is the upgrade's target.
    ws.admin(
        Method::POST,
        &format!("/registry-modules/{m}/versions"),
        json!({"version": "1.1.0", "variables": []}),
    )
    .await;

    // Another organization's name in the alias path is 404.
    let wrong = ws
        .post(
            &format!("/api/v2/organizations/other/no-code-modules/{nc}/workspaces/{w}"),
            json!({"data": {"type": "workspaces"}}),
        )
        .await;
    assert_eq!(wrong.status, 404);

    let up = ws
        .post(
            &format!("/api/v2/organizations/{ORG}/no-code-modules/{nc}/workspaces/{w}"),
            json!({"data": {"type": "workspaces"}}),
        )
        .await;
    assert_eq!(up.status, 200, "{}", up.body);
    assert_eq!(up.body["data"]["type"], "workspace-upgrade");
    let upid = up.body["data"]["id"].as_str().unwrap().to_string();
    let status_path =
        format!("/api/v2/organizations/{ORG}/no-code-modules/{nc}/workspaces/{w}/upgrade/{upid}");
    let start = std::time::Instant::now();
    loop {
        let s = ws.get(&status_path).await;
        assert_eq!(s.status, 200, "{}", s.body);
        // The upgrade run stops for confirmation.
        if s.body["data"]["attributes"]["status"] == "planned" {
            break;
        }
        assert!(
            start.elapsed().as_secs() < 10,
            "upgrade plan never finished"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let confirm = ws.post(&status_path, Value::Null).await;
    assert_eq!(confirm.status, 200);
    assert_eq!(
        confirm.body["data"]["status"], "Workspace update completed",
        "terrasnek decodes the answer as JSON: {}",
        confirm.body
    );
}

/// python-tfe spells run include values with dashes (`created-by`, `configuration-version`,
/// `cost-estimate`, `task-stages`); they select the same records as the underscore spelling.
#[tokio::test]
async fn include_values_spelled_with_dashes_select_the_same_records() {
    let ws = Ws::start().await;
    let w = ws.create_ws("dash-inc", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let dashed = ws
        .get(&format!(
            "/api/v2/runs/{run}?include=created-by,configuration-version,cost-estimate,task-stages,plan"
        ))
        .await;
    assert_eq!(dashed.status, 200, "{}", dashed.body);
    let types = |b: &Value| -> Vec<String> {
        let mut t: Vec<String> = b["included"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|i| i["type"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default();
        t.sort();
        t
    };
    let underscored = ws
        .get(&format!(
            "/api/v2/runs/{run}?include=created_by,configuration_version,cost_estimate,task_stages,plan"
        ))
        .await;
    assert_eq!(types(&dashed.body), types(&underscored.body));
    assert!(types(&dashed.body).contains(&"users".to_string()));
    assert!(types(&dashed.body).contains(&"configuration-versions".to_string()));
    let ws_doc = ws
        .get(&format!(
            "/api/v2/workspaces/{w}?include=current-run,current-state-version"
        ))
        .await;
    assert_eq!(ws_doc.status, 200, "{}", ws_doc.body);
}

/// python-tfe (httpx) and go-tfe reuse keep-alive connections. A body sent to an endpoint that
/// ignores it (a lock reason on an already locked workspace, a comment on a refused action)
/// must not make the server drop the connection: the next request on it is answered.
#[tokio::test]
async fn ignored_request_bodies_keep_the_connection_usable() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ws = Ws::start().await;
    let w = ws.create_ws("keepalive", json!({})).await;
    let lock = format!("/api/v2/workspaces/{w}/actions/lock");
    assert_eq!(ws.post(&lock, json!({"reason": "x"})).await.status, 200);

    let addr = ws.url.trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // A large body that does not arrive in one read, on a request answered 409 without it.
    let body = json!({"reason": "r".repeat(1 << 20)}).to_string();
    let first = format!(
        "POST {lock} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ROOT}\r\n\
         Content-Type: application/vnd.api+json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(first.as_bytes()).await.unwrap();
    conn.write_all(body.as_bytes()).await.unwrap();
    let second = format!(
        "GET /api/v2/workspaces/{w} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ROOT}\r\n\r\n"
    );
    conn.write_all(second.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 65536];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), conn.read(&mut buf))
            .await
            .expect("the server answers")
            .unwrap();
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if text.matches("HTTP/1.1 ").count() >= 2 && text.contains("\"keepalive\"") {
            assert!(
                text.starts_with("HTTP/1.1 409"),
                "{}",
                &text[..80.min(text.len())]
            );
            break;
        }
        assert!(n > 0, "connection closed before the second answer: {text}");
        assert!(std::time::Instant::now() < deadline, "no second answer");
    }
}

/// go-tfe embeds whole resource nodes (attributes, null relationships) in relationship data:
/// the registry module as `registry-modules`, variable options, `vars` with every `Variable`
/// field and the project; the workspace body's type is `no-code-module-workspace`. The no-code
/// enable → create workspace → upgrade flow accepts those shapes.
#[tokio::test]
async fn no_code_flow_accepts_go_tfe_full_node_payloads() {
    let ws = Ws::start().await;
    let m = ws
        .admin(
            Method::POST,
            "/registry-modules",
            json!({"organization": ORG, "name": "gonet", "provider": "aws",
                "versions": [{"version": "1.0.0", "variables": [{"name": "region", "type": "string", "required": true}]}]}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let enable = json!({"data": {"type": "no-code-modules",
        "attributes": {"enabled": true, "version-pin": "1.0.0"},
        "relationships": {
            "registry-module": {"data": {"type": "registry-modules", "id": m,
                "attributes": {"name": "", "provider": "", "namespace": "", "registry-name": "",
                    "status": "", "created-at": "0001-01-01T00:00:00Z"},
                "relationships": {"organization": {"data": null}}}},
            "variable-options": {"data": [{"type": "variable-options",
                "attributes": {"variable-name": "region", "variable-type": "string",
                    "options": ["eu-west-1", "us-east-1"]}}]}}}});
    let r = ws
        .post(
            &format!("/api/v2/organizations/{ORG}/no-code-modules"),
            enable,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let nc = r.body["data"]["id"].as_str().unwrap().to_string();
    let read = ws
        .get(&format!(
            "/api/v2/no-code-modules/{nc}?include=variable_options"
        ))
        .await;
    assert_eq!(read.body["included"][0]["type"], "variable-options");
    assert_eq!(
        read.body["data"]["relationships"]["registry-module"]["data"]["type"],
        "registry-modules"
    );

    let prj = ws
        .get(&format!("/api/v2/organizations/{ORG}/projects"))
        .await
        .body["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let go_var = |value: &str| {
        json!({"type": "vars", "attributes": {"key": "region", "value": value, "description": "",
            "category": "terraform", "hcl": false, "sensitive": false, "version-id": ""},
            "relationships": {"configurable": {"data": null}}})
    };
    let create = json!({"data": {"type": "no-code-module-workspace",
        "attributes": {"name": "go-nc", "auto-apply": false},
        "relationships": {
            "project": {"data": {"type": "projects", "id": prj, "attributes": {"name": ""}}},
            "vars": {"data": [go_var("eu-west-1")]}}}});
    let r = ws
        .post(&format!("/api/v2/no-code-modules/{nc}/workspaces"), create)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let w = r.body["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        r.body["data"]["relationships"]["project"]["data"]["id"],
        json!(prj)
    );

    // A new version and a moved pin give the upgrade something to do.
    ws.admin(
        Method::POST,
        &format!("/registry-modules/{m}/versions"),
        json!({"version": "1.1.0", "variables": [{"name": "region", "type": "string", "required": true}]}),
    )
    .await;
    let r = ws
        .patch(
            &format!("/api/v2/no-code-modules/{nc}"),
            json!({"data": {"type": "no-code-modules", "attributes": {"version-pin": "1.1.0"}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let up = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces/{w}/upgrade"),
            json!({"data": {"type": "no-code-module-workspace",
                "relationships": {"vars": {"data": [go_var("us-east-1")]}}}}),
        )
        .await;
    assert_eq!(up.status, 200, "{}", up.body);
    assert!(up.body["data"]["attributes"]["status"].is_string());
    assert!(up.body["data"]["attributes"]["plan-url"].is_string());
}

/// python-tfe dumps its whole `RunCreateOptions` into `attributes` (so they hold `type` and a
/// `workspace` object next to the documented keys), and go-tfe sends full nodes as the
/// workspace relationship; both create the run with the documented attributes.
#[tokio::test]
async fn run_create_bodies_of_python_tfe_and_go_tfe_are_accepted() {
    let ws = Ws::start().await;
    let w = ws.create_ws("client-runs", json!({})).await;
    ws.upload_config(&w).await;
    let py = json!({"data": {"type": "runs", "attributes": {
            "type": "runs", "message": "py", "refresh": true, "allow-empty-apply": true,
            "target-addrs": ["a.b"], "replace-addrs": ["c.d"],
            "variables": [{"key": "k", "value": "\"v\""}],
            "workspace": {"id": w, "trigger-prefixes": [], "outputs": [], "tags": []}},
        "relationships": {"workspace": {"data": {"type": "workspaces", "id": w}}}}});
    let r = ws.post("/api/v2/runs", py).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let a = &r.body["data"]["attributes"];
    assert_eq!(a["message"], "py");
    assert_eq!(a["target-addrs"], json!(["a.b"]));
    assert_eq!(a["variables"], json!([{"key": "k", "value": "\"v\""}]));
    let go = json!({"data": {"type": "runs", "attributes": {"message": "go", "plan-only": true,
            "terraform-version": "1.9.8", "save-plan": false},
        "relationships": {"workspace": {"data": {"type": "workspaces", "id": w,
            "attributes": {"name": "", "allow-destroy-plan": false, "created-at": "0001-01-01T00:00:00Z"},
            "relationships": {"organization": {"data": null}}}}}}});
    let r = ws.post("/api/v2/runs", go).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["attributes"]["plan-only"], true);
    assert_eq!(r.body["data"]["attributes"]["terraform-version"], "1.9.8");
}

/// Clients send PUT where POST is documented; the real services accept it. PUT on a POST-only
/// path is the POST, PUT on remote-state-consumers replaces like PATCH, and a method a path
/// serves in no form stays the JSON:API 404.
#[tokio::test]
async fn put_where_post_or_patch_is_documented_is_served() {
    let ws = Ws::start().await;
    let w = ws.create_ws("put-post", json!({})).await;
    ws.upload_config(&w).await;
    let c1 = ws.create_ws("put-post-c1", json!({})).await;
    let c2 = ws.create_ws("put-post-c2", json!({})).await;
    let put = |path: String, body: Option<Value>| {
        let ws = &ws;
        async move { ws.call(Method::PUT, &path, Some(ROOT), body).await }
    };
    // create a run with PUT /runs
    let r = put(
        "/api/v2/runs".into(),
        Some(json!({"data": {"type": "runs", "attributes": {},
            "relationships": {"workspace": {"data": {"type": "workspaces", "id": w}}}}})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let run = r.body["data"]["id"].as_str().unwrap().to_string();
    ws.wait_status(&run, "planned").await;
    let r = put(format!("/api/v2/runs/{run}/actions/discard"), None).await;
    assert_eq!(r.status, 202);
    ws.wait_status(&run, "discarded").await;
    // lock with PUT
    let r = put(
        format!("/api/v2/workspaces/{w}/actions/lock"),
        Some(json!({"reason": "put"})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["locked"], true);
    // consumers: POST adds, PUT replaces like PATCH
    let path = format!("/api/v2/workspaces/{w}/relationships/remote-state-consumers");
    let add = json!({"data": [{"type": "workspaces", "id": c1}]});
    assert_eq!(ws.post(&path, add).await.status, 204);
    let r = put(
        path.clone(),
        Some(json!({"data": [{"type": "workspaces", "id": c2}]})),
    )
    .await;
    assert_eq!(r.status, 204);
    let ids: Vec<Value> = ws.get(&path).await.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(c2)]);
    // a GET-only path does not take PUT
    let r = put("/api/v2/ping".into(), None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["errors"][0]["status"], "404");
}

/// python-tfe's `Run.target_addrs`/`replace_addrs` are `None` on a run created without them,
/// as the live service answers `null` (issue 22); the sandbox answered `[]`.
#[tokio::test]
async fn run_target_and_replace_addrs_are_null_when_unset() {
    let ws = Ws::start().await;
    let w = ws.create_ws_with_config("addrs-unset", json!({})).await;
    let run = ws.create_run(&w, json!({})).await;
    let r = ws.get(&format!("/api/v2/runs/{run}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let a = &r.body["data"]["attributes"];
    assert_eq!(a["target-addrs"], Value::Null);
    assert_eq!(a["replace-addrs"], Value::Null);
}

/// terrasnek's `no_code_provisioning.deploy` without a description: the workspace's
/// `description` is `null`, as the live service answers (issue 22); the sandbox answered `""`.
#[tokio::test]
async fn no_code_workspace_description_is_null_when_unset() {
    let ws = Ws::start().await;
    let m = ws
        .admin(
            Method::POST,
            "/registry-modules",
            json!({"organization": ORG, "name": "descr", "provider": "aws", "versions": [
                {"version": "1.0.0", "variables": [{"name": "region", "type": "string", "required": true}]}
            ]}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = ws
        .post(
            &format!("/api/v2/organizations/{ORG}/no-code-modules"),
            json!({"data": {"type": "no-code-modules", "attributes": {}, "relationships": {
                "registry-module": {"data": {"id": m, "type": "registry-module"}}}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let nc = r.body["data"]["id"].as_str().unwrap().to_string();
    let r = ws
        .post(
            &format!("/api/v2/no-code-modules/{nc}/workspaces"),
            json!({"data": {"type": "workspaces", "attributes": {"name": "descr-ws"},
                "relationships": {"vars": {"data": [{"type": "vars", "attributes":
                    {"key": "region", "value": "eu-west-1", "category": "terraform"}}]}}}}),
        )
        .await;
    assert!(r.status == 201 || r.status == 200, "{}", r.body);
    assert_eq!(r.body["data"]["attributes"]["description"], Value::Null);
}
