//! Conformance of remote state consumers (spec B §4.2) and workspace tags (§2.3, §4.3).

use crate::workspaces_support;

use serde_json::{json, Value};
use workspaces_support::*;

fn refs(ids: &[&str]) -> Value {
    json!({"data": ids.iter().map(|i| json!({"type": "workspaces", "id": i})).collect::<Vec<_>>()})
}

fn consumers_path(id: &str) -> String {
    format!("/api/v2/workspaces/{id}/relationships/remote-state-consumers")
}

fn ids(body: &Value) -> Vec<String> {
    let mut v: Vec<String> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn consumers_get_lists_the_approved_workspaces_as_workspace_documents() {
    let ws = Ws::start().await;
    let a = ws.create_ws("src", json!({})).await;
    let b = ws.create_ws("c1", json!({})).await;
    let r = ws.post(&consumers_path(&a), refs(&[&b])).await;
    assert_eq!(r.status, 204);
    assert_eq!(r.body, Value::Null);
    let r = ws.get(&consumers_path(&a)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"][0]["type"], "workspaces");
    assert_eq!(r.body["data"][0]["id"], b);
    for k in ["first", "last", "self"] {
        assert!(r.body["links"][k].is_string(), "{k}");
    }
    for k in [
        "current-page",
        "next-page",
        "page-size",
        "prev-page",
        "total-count",
        "total-pages",
    ] {
        assert!(r.body["meta"]["pagination"].get(k).is_some(), "{k}");
    }
}

#[tokio::test]
async fn consumers_get_with_global_remote_state_lists_every_other_workspace() {
    let ws = Ws::start().await;
    let a = ws
        .create_ws("glob", json!({"global-remote-state": true}))
        .await;
    let b = ws.create_ws("g1", json!({})).await;
    let c = ws.create_ws("g2", json!({})).await;
    let r = ws.get(&consumers_path(&a)).await;
    assert_eq!(ids(&r.body), sorted(vec![b, c]));
}

#[tokio::test]
async fn consumers_patch_replaces_the_list_exactly() {
    let ws = Ws::start().await;
    let a = ws.create_ws("p-src", json!({})).await;
    let b = ws.create_ws("p1", json!({})).await;
    let c = ws.create_ws("p2", json!({})).await;
    assert_eq!(ws.patch(&consumers_path(&a), refs(&[&b])).await.status, 204);
    assert_eq!(ws.patch(&consumers_path(&a), refs(&[&c])).await.status, 204);
    assert_eq!(ids(&ws.get(&consumers_path(&a)).await.body), vec![c]);
    assert_eq!(ws.patch(&consumers_path(&a), refs(&[])).await.status, 204);
    assert_eq!(
        ids(&ws.get(&consumers_path(&a)).await.body),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn consumers_post_ignores_duplicates_and_delete_ignores_absent_entries() {
    let ws = Ws::start().await;
    let a = ws.create_ws("d-src", json!({})).await;
    let b = ws.create_ws("d1", json!({})).await;
    let c = ws.create_ws("d2", json!({})).await;
    assert_eq!(ws.post(&consumers_path(&a), refs(&[&b])).await.status, 204);
    assert_eq!(
        ws.post(&consumers_path(&a), refs(&[&b, &c])).await.status,
        204
    );
    let r = ws.get(&consumers_path(&a)).await;
    assert_eq!(r.body["meta"]["pagination"]["total-count"], 2);
    // c removed, and b, absent after the first delete, is ignored the second time
    assert_eq!(
        ws.delete(&consumers_path(&a), Some(refs(&[&c])))
            .await
            .status,
        204
    );
    assert_eq!(
        ws.delete(&consumers_path(&a), Some(refs(&[&c, &b])))
            .await
            .status,
        204
    );
    assert_eq!(
        ids(&ws.get(&consumers_path(&a)).await.body),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn adding_a_workspace_as_its_own_consumer_is_refused() {
    let ws = Ws::start().await;
    let a = ws.create_ws("self", json!({})).await;
    let r = ws.post(&consumers_path(&a), refs(&[&a])).await;
    assert_eq!(r.status, 422);
    let r = ws.patch(&consumers_path(&a), refs(&[&a])).await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn consumer_changes_are_422_when_global_remote_state_is_true() {
    let ws = Ws::start().await;
    let a = ws
        .create_ws("g-src", json!({"global-remote-state": true}))
        .await;
    let b = ws.create_ws("g-c", json!({})).await;
    assert_eq!(ws.post(&consumers_path(&a), refs(&[&b])).await.status, 422);
    assert_eq!(ws.patch(&consumers_path(&a), refs(&[&b])).await.status, 422);
    assert_eq!(
        ws.delete(&consumers_path(&a), Some(refs(&[&b])))
            .await
            .status,
        422
    );
}

#[tokio::test]
async fn consumer_changes_on_an_absent_workspace_are_404() {
    let ws = Ws::start().await;
    let b = ws.create_ws("x-c", json!({})).await;
    assert_eq!(
        ws.post(&consumers_path("ws-absent"), refs(&[&b]))
            .await
            .status,
        404
    );
    assert_eq!(ws.get(&consumers_path("ws-absent")).await.status, 404);
}

#[tokio::test]
async fn consumer_the_token_cannot_read_is_404() {
    let ws = Ws::start().await;
    let a = ws.create_ws("r-src", json!({})).await;
    let hidden = ws.create_ws("r-hidden", json!({})).await;
    let (_, token) = ws
        .team_user(json!({"workspace_access": {a.clone(): "admin"}}))
        .await;
    let r = ws
        .post_as(&token, &consumers_path(&a), refs(&[&hidden]))
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn consumers_list_omits_workspaces_the_token_cannot_read() {
    let ws = Ws::start().await;
    let a = ws.create_ws("o-src", json!({})).await;
    let seen = ws.create_ws("o-seen", json!({})).await;
    let hidden = ws.create_ws("o-hidden", json!({})).await;
    ws.post(&consumers_path(&a), refs(&[&seen, &hidden])).await;
    let (_, token) = ws
        .team_user(json!({"workspace_access": {a.clone(): "read", seen.clone(): "read"}}))
        .await;
    let r = ws.get_as(&token, &consumers_path(&a)).await;
    assert_eq!(ids(&r.body), vec![seen]);
}

#[tokio::test]
async fn consumers_patch_needs_organization_wide_workspace_management_but_admins_may_post_and_delete(
) {
    let ws = Ws::start().await;
    let a = ws.create_ws("m-src", json!({})).await;
    let b = ws.create_ws("m-c", json!({})).await;
    let (_, admin) = ws
        .team_user(json!({"workspace_access": {a.clone(): "admin", b.clone(): "read"}}))
        .await;
    assert_eq!(
        ws.patch_as(&admin, &consumers_path(&a), refs(&[&b]))
            .await
            .status,
        404
    );
    assert_eq!(
        ws.post_as(&admin, &consumers_path(&a), refs(&[&b]))
            .await
            .status,
        204
    );
    assert_eq!(
        ws.delete_as(&admin, &consumers_path(&a), refs(&[&b]))
            .await
            .status,
        204
    );
    let (_, manager) = ws.team_user(json!({"manage_workspaces": true})).await;
    assert_eq!(
        ws.patch_as(&manager, &consumers_path(&a), refs(&[&b]))
            .await
            .status,
        204
    );
}

#[tokio::test]
async fn consumers_page_size_defaults_to_twenty() {
    let ws = Ws::start().await;
    let a = ws
        .create_ws("pg-src", json!({"global-remote-state": true}))
        .await;
    for i in 0..22 {
        ws.create_ws(&format!("pg-{i:02}"), json!({})).await;
    }
    let r = ws.get(&consumers_path(&a)).await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 20);
    assert_eq!(r.body["meta"]["pagination"]["total-count"], 22);
    assert_eq!(r.body["meta"]["pagination"]["next-page"], 2);
}

// ---- tags ----

fn tags_path(id: &str) -> String {
    format!("/api/v2/workspaces/{id}/relationships/tags")
}

fn names(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["attributes"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn tag_by_name_creates_an_organization_tag_with_instance_count() {
    let ws = Ws::start().await;
    let a = ws.create_ws("tg-a", json!({})).await;
    let b = ws.create_ws("tg-b", json!({})).await;
    let body = json!({"data": [{"type": "tags", "attributes": {"name": "prod"}}]});
    assert_eq!(ws.post(&tags_path(&a), body.clone()).await.status, 204);
    assert_eq!(ws.post(&tags_path(&b), body).await.status, 204);
    let r = ws.get(&tags_path(&a)).await;
    assert_eq!(r.status, 200);
    let t = &r.body["data"][0];
    assert!(t["id"].as_str().unwrap().starts_with("tag-"));
    assert_eq!(t["type"], "tags");
    assert_eq!(t["attributes"]["name"], "prod");
    assert_eq!(t["attributes"]["instance-count"], 2);
    assert!(t["attributes"]["created-at"].is_string());
    assert_eq!(
        t["relationships"]["organization"]["data"],
        json!({"id": "quartet", "type": "organizations"})
    );
    let org = ws.get("/api/v2/organizations/quartet/tags").await;
    assert_eq!(names(&org.body), vec!["prod"]);
}

#[tokio::test]
async fn tag_names_are_lower_cased() {
    let ws = Ws::start().await;
    let a = ws.create_ws("lc", json!({})).await;
    ws.post(
        &tags_path(&a),
        json!({"data": [{"type": "tags", "attributes": {"name": "Prod"}}]}),
    )
    .await;
    ws.post(
        &tags_path(&a),
        json!({"data": [{"type": "tags", "attributes": {"name": "PROD"}}]}),
    )
    .await;
    assert_eq!(names(&ws.get(&tags_path(&a)).await.body), vec!["prod"]);
    let id = ws
        .create_ws("lc2", json!({"tag-names": ["MixedCase"]}))
        .await;
    assert_eq!(
        names(&ws.get(&tags_path(&id)).await.body),
        vec!["mixedcase"]
    );
}

#[tokio::test]
async fn tag_by_id_must_exist() {
    let ws = Ws::start().await;
    let a = ws
        .create_ws("tid-a", json!({"tag-names": ["shared"]}))
        .await;
    let b = ws.create_ws("tid-b", json!({})).await;
    let tag = ws.get(&tags_path(&a)).await.body["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        ws.post(
            &tags_path(&b),
            json!({"data": [{"type": "tags", "id": tag}]})
        )
        .await
        .status,
        204
    );
    assert_eq!(names(&ws.get(&tags_path(&b)).await.body), vec!["shared"]);
    let r = ws
        .post(
            &tags_path(&b),
            json!({"data": [{"type": "tags", "id": "tag-doesnotexist"}]}),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn invalid_tag_name_is_422() {
    let ws = Ws::start().await;
    let a = ws.create_ws("inv", json!({})).await;
    let r = ws
        .post(
            &tags_path(&a),
            json!({"data": [{"type": "tags", "attributes": {"name": "has space"}}]}),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn delete_by_unknown_name_does_nothing_for_that_entry() {
    let ws = Ws::start().await;
    let a = ws
        .create_ws("dn", json!({"tag-names": ["keep", "drop"]}))
        .await;
    let r = ws
        .delete(
            &tags_path(&a),
            Some(json!({"data": [{"type": "tags", "attributes": {"name": "nosuch"}}, {"type": "tags", "attributes": {"name": "drop"}}]})),
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(names(&ws.get(&tags_path(&a)).await.body), vec!["keep"]);
}

#[tokio::test]
async fn tag_removed_from_every_workspace_leaves_the_organization_list() {
    let ws = Ws::start().await;
    let a = ws.create_ws("rm-a", json!({"tag-names": ["temp"]})).await;
    let b = ws.create_ws("rm-b", json!({"tag-names": ["temp"]})).await;
    let tag = ws.get(&tags_path(&a)).await.body["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ws.delete(
        &tags_path(&a),
        Some(json!({"data": [{"type": "tags", "id": tag}]})),
    )
    .await;
    let org = ws.get("/api/v2/organizations/quartet/tags").await;
    assert_eq!(names(&org.body), vec!["temp"]);
    assert_eq!(org.body["data"][0]["attributes"]["instance-count"], 1);
    ws.delete(
        &tags_path(&b),
        Some(json!({"data": [{"type": "tags", "attributes": {"name": "temp"}}]})),
    )
    .await;
    let org = ws.get("/api/v2/organizations/quartet/tags").await;
    assert_eq!(names(&org.body), Vec::<String>::new());
}

#[tokio::test]
async fn tags_on_an_absent_workspace_are_404() {
    let ws = Ws::start().await;
    let body = json!({"data": [{"type": "tags", "attributes": {"name": "x"}}]});
    assert_eq!(
        ws.post(&tags_path("ws-absent"), body.clone()).await.status,
        404
    );
    assert_eq!(
        ws.delete(&tags_path("ws-absent"), Some(body)).await.status,
        404
    );
    assert_eq!(ws.get(&tags_path("ws-absent")).await.status, 404);
}

#[tokio::test]
async fn tags_of_an_unreadable_workspace_are_404() {
    let ws = Ws::start().await;
    let a = ws.create_ws("hid", json!({})).await;
    let (_, token) = ws.team_user(json!({})).await;
    let r = ws
        .post_as(
            &token,
            &tags_path(&a),
            json!({"data": [{"type": "tags", "attributes": {"name": "x"}}]}),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn tags_list_paginates_twenty_by_default() {
    let ws = Ws::start().await;
    let names: Vec<String> = (0..23).map(|i| format!("t{i:02}")).collect();
    let a = ws.create_ws("many", json!({"tag-names": names})).await;
    let r = ws.get(&tags_path(&a)).await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 20);
    assert_eq!(r.body["meta"]["pagination"]["total-count"], 23);
}

#[tokio::test]
async fn deleting_a_workspace_prunes_its_now_unused_tags_and_consumer_entries() {
    let ws = Ws::start().await;
    let a = ws
        .create_ws("pr-a", json!({"tag-names": ["only-here"]}))
        .await;
    let b = ws.create_ws("pr-b", json!({})).await;
    ws.post(&consumers_path(&b), refs(&[&a])).await;
    ws.delete(&format!("/api/v2/workspaces/{a}"), None).await;
    assert_eq!(
        names(&ws.get("/api/v2/organizations/quartet/tags").await.body),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(&ws.get(&consumers_path(&b)).await.body),
        Vec::<String>::new()
    );
}
