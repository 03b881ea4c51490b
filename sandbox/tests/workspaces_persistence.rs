//! `state_dir` persistence of the workspace service: state survives a restart.

use crate::workspaces_support;

use reqwest::Method;
use serde_json::json;
use workspaces_support::*;

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::env::temp_dir().join(format!("quartet-ws-{tag}-{}-{nanos}", std::process::id()))
}

#[tokio::test]
async fn workspaces_tags_runs_and_tokens_survive_a_restart_with_state_dir() {
    let dir = temp_dir("persist");
    let mut opts = quartet_sandbox::SandboxOptions::ephemeral();
    opts.state_dir = Some(dir.clone());

    let ws = Ws::start_with(opts.clone()).await;
    let id = ws
        .create_ws(
            "kept",
            json!({"description": "survives", "tag-names": ["keep"]}),
        )
        .await;
    let (_, token) = ws
        .team_user(json!({"workspace_access": {id.clone(): "read"}}))
        .await;
    let run = ws.create_run(&id, json!({"auto-apply": true})).await;
    ws.wait_status(&run, "applied").await;
    ws.sb.shutdown();

    let ws = Ws::start_with(opts).await;
    let r = ws.get(&format!("/api/v2/workspaces/{id}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["attributes"]["description"], "survives");
    assert_eq!(r.body["data"]["attributes"]["tag-names"], json!(["keep"]));
    assert_eq!(ws.run_status(&run).await, "applied");
    assert_eq!(
        ws.get_as(&token, &format!("/api/v2/workspaces/{id}"))
            .await
            .status,
        200
    );
    let s = ws.admin(Method::GET, "/settings", json!({})).await;
    assert_eq!(s["step_ms"], 40);
    ws.sb.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn without_state_dir_a_restart_starts_empty() {
    let ws = Ws::start().await;
    let id = ws.create_ws("ephemeral", json!({})).await;
    ws.sb.shutdown();
    let ws = Ws::start().await;
    assert_eq!(
        ws.get(&format!("/api/v2/workspaces/{id}")).await.status,
        404
    );
}
