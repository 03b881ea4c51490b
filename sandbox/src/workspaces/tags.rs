//! Workspace tags (spec B §2.3, §4.3) and the organization tag list.
//!
//! Tag names are lower-cased by the service (as the real one does): `Prod` and `prod` are the
//! same tag. A name holds letters, numbers, `:`, `-` and `_` (at most 255 characters, starting
//! with a letter or number). A tag no workspace uses any more leaves the organization list.
//!
//! Tag bindings (key/value tags, issue 22; follows go-tfe `ListTagBindings` /
//! `AddTagBindings` and the API docs): `GET /workspaces/:id/tag-bindings`, `PATCH` there adds
//! or modifies by key (go-tfe), `GET|POST|PATCH /workspaces/:id/relationships/tag-bindings`
//! (POST adds or modifies, PATCH replaces the set), `GET /workspaces/:id/effective-tag-bindings`
//! and `relationships.tag-bindings` on workspace create and update (replaces). Limits: 10 per
//! workspace, key ≤ 128 and value ≤ 256 characters, no `hc:`/`hcp:` key prefix (422).

use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use serde_json::{json, Value};

use super::auth::{self, Caller};
use super::jsonapi::*;
use super::model::*;
use super::orgs::visible_org;
use super::{query, Svc};

pub fn routes() -> Router<Svc> {
    Router::new()
        .route(
            "/api/v2/workspaces/{id}/relationships/tags",
            get(list).post(add).delete(remove),
        )
        .route(
            "/api/v2/organizations/{org}/tags",
            get(list_org).delete(delete_org_tags),
        )
        .route(
            "/api/v2/tags/{id}/relationships/workspaces",
            post(add_workspaces_to_tag),
        )
}

pub fn validate_name(name: &str) -> ApiResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "/data/attributes/name",
            "Tag names can only contain letters, numbers, colons, hyphens, and underscores, and must start with a letter or number",
        ))
    }
}

/// Lower-cased tag names of a workspace.
pub fn names_of(state: &State, ws: &Workspace) -> Vec<String> {
    ws.tags
        .iter()
        .filter_map(|t| state.tags.get(t))
        .map(|t| t.name.clone())
        .collect()
}

fn instance_count(state: &State, tag_id: &str) -> usize {
    state
        .workspaces
        .values()
        .filter(|w| w.tags.iter().any(|t| t == tag_id))
        .count()
}

pub fn tag_json(state: &State, t: &Tag) -> Value {
    json!({
        "id": t.id,
        "type": "tags",
        "attributes": {
            "name": t.name,
            "created-at": iso(&t.created_at),
            "instance-count": instance_count(state, &t.id),
        },
        "relationships": {"organization": rel_one("organizations", Some(&t.organization))},
    })
}

/// Attach the organization tag called `name` (created when missing) to the workspace.
pub fn attach_by_name(state: &mut State, ws_id: &str, name: &str) {
    let Some(org) = state.workspaces.get(ws_id).map(|w| w.organization.clone()) else {
        return;
    };
    let lower = name.to_lowercase();
    let tag_id = match state
        .tags
        .values()
        .find(|t| t.organization == org && t.name == lower)
    {
        Some(t) => t.id.clone(),
        None => {
            let t = Tag {
                id: new_id("tag-"),
                organization: org,
                name: lower,
                created_at: chrono::Utc::now(),
            };
            let id = t.id.clone();
            state.tags.insert(id.clone(), t);
            id
        }
    };
    if let Some(w) = state.workspaces.get_mut(ws_id) {
        if !w.tags.contains(&tag_id) {
            w.tags.push(tag_id);
        }
    }
}

/// Drops organization tags that no workspace uses any more.
pub fn prune_unused(state: &mut State) {
    let used: std::collections::BTreeSet<String> = state
        .workspaces
        .values()
        .flat_map(|w| w.tags.iter().cloned())
        .collect();
    state.tags.retain(|id, _| used.contains(id));
}

/// One entry of a tags body: an existing tag id, or a name.
enum TagRef {
    Id(String),
    Name(String),
}

fn tag_refs(body: &Bytes) -> ApiResult<Vec<TagRef>> {
    let body = parse_body(body)?;
    let list = data_array(&body)?;
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        if item
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "tags")
        {
            return Err(ApiError::invalid(
                &format!("/data/{i}/type"),
                "type must be tags",
            ));
        }
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let name = item.pointer("/attributes/name").and_then(Value::as_str);
        match (id, name) {
            (Some(id), _) => out.push(TagRef::Id(id.to_string())),
            (None, Some(n)) => out.push(TagRef::Name(n.to_string())),
            (None, None) => {
                return Err(ApiError::invalid(
                    &format!("/data/{i}"),
                    "each tag needs an id or attributes.name",
                ))
            }
        }
    }
    Ok(out)
}

async fn list(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?;
        let mut tags: Vec<&Tag> = ws.tags.iter().filter_map(|t| state.tags.get(t)).collect();
        tags.sort_by(|a, b| a.name.cmp(&b.name));
        let items = tags.into_iter().map(|t| tag_json(state, t)).collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/workspaces/{id}/relationships/tags"),
            vec![],
        )))
    })
}

fn change(state: &mut State, caller: &Caller, id: &str, body: &Bytes, add: bool) -> ApiResult {
    auth::readable(state, caller, id)?;
    auth::require(state, caller, id, Access::Admin)?;
    let org = state
        .workspaces
        .get(id)
        .map(|w| w.organization.clone())
        .ok_or_else(ApiError::not_found)?;
    let refs = tag_refs(body)?;
    // Validate everything before changing anything.
    for r in &refs {
        match r {
            TagRef::Id(t) if add && state.tags.get(t).is_none_or(|t| t.organization != org) => {
                return Err(ApiError::not_found());
            }
            TagRef::Name(n) if add => validate_name(n)?,
            _ => {}
        }
    }
    for r in refs {
        match (r, add) {
            (TagRef::Id(t), true) => {
                if let Some(w) = state.workspaces.get_mut(id) {
                    if !w.tags.contains(&t) {
                        w.tags.push(t);
                    }
                }
            }
            (TagRef::Name(n), true) => attach_by_name(state, id, &n),
            (TagRef::Id(t), false) => {
                if let Some(w) = state.workspaces.get_mut(id) {
                    w.tags.retain(|x| *x != t);
                }
            }
            (TagRef::Name(n), false) => {
                let lower = n.to_lowercase();
                let tid = state
                    .tags
                    .values()
                    .find(|t| t.organization == org && t.name == lower)
                    .map(|t| t.id.clone());
                if let (Some(tid), Some(w)) = (tid, state.workspaces.get_mut(id)) {
                    w.tags.retain(|x| *x != tid);
                }
            }
        }
    }
    if !add {
        prune_unused(state);
    }
    Ok(no_content())
}

async fn add(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        change(state, caller, &id, &body, true)
    })
}

async fn remove(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        change(state, caller, &id, &body, false)
    })
}

/// `GET /organizations/:org/tags` with `q` (name substring) and
/// `filter[exclude][taggable][id]` (tags not on that workspace).
async fn list_org(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(org): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        let exclude: Vec<String> = params
            .get("filter[exclude][taggable][id]")
            .and_then(|w| state.workspaces.get(w))
            .map(|w| w.tags.clone())
            .unwrap_or_default();
        let q = params.get("q").map(str::to_lowercase);
        let mut tags: Vec<&Tag> = state
            .tags
            .values()
            .filter(|t| t.organization == org && !exclude.contains(&t.id))
            .filter(|t| q.as_ref().is_none_or(|q| t.name.contains(q)))
            .collect();
        tags.sort_by(|a, b| a.name.cmp(&b.name));
        let items = tags.into_iter().map(|t| tag_json(state, t)).collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/organizations/{org}/tags"),
            vec![],
        )))
    })
}

/// `DELETE /organizations/:org/tags`: removes the tags from every workspace (managers only).
async fn delete_org_tags(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        if !auth::can_manage_workspaces(state, caller, &org) {
            return Err(ApiError::not_found());
        }
        let ids: Vec<String> = tag_refs(&body)?
            .into_iter()
            .filter_map(|r| match r {
                TagRef::Id(i) => Some(i),
                TagRef::Name(_) => None,
            })
            .collect();
        for w in state
            .workspaces
            .values_mut()
            .filter(|w| w.organization == org)
        {
            w.tags.retain(|t| !ids.contains(t));
        }
        state
            .tags
            .retain(|id, t| !(t.organization == org && ids.contains(id)));
        Ok(no_content())
    })
}

/// `POST /tags/:id/relationships/workspaces`: tags several workspaces at once.
async fn add_workspaces_to_tag(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(tag): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let org = state
            .tags
            .get(&tag)
            .map(|t| t.organization.clone())
            .ok_or_else(ApiError::not_found)?;
        visible_org(state, caller, &org)?;
        let body = parse_body(&body)?;
        let list = data_array(&body)?;
        let mut ids = Vec::new();
        for item in list {
            let wid = item
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::invalid("/data", "id is required"))?;
            auth::readable(state, caller, wid)?;
            auth::require(state, caller, wid, Access::Admin)?;
            ids.push(wid.to_string());
        }
        for wid in ids {
            if let Some(w) = state.workspaces.get_mut(&wid) {
                if !w.tags.contains(&tag) {
                    w.tags.push(tag.clone());
                }
            }
        }
        Ok(no_content())
    })
}

// ---- tag bindings (key/value tags) ----

/// Most tag bindings a workspace may carry.
pub const MAX_TAG_BINDINGS: usize = 10;

pub fn binding_routes() -> Router<Svc> {
    Router::new()
        .route(
            "/api/v2/workspaces/{id}/tag-bindings",
            get(list_bindings).patch(add_bindings).post(add_bindings),
        )
        .route(
            "/api/v2/workspaces/{id}/relationships/tag-bindings",
            get(list_bindings)
                .post(add_bindings)
                .patch(replace_bindings),
        )
        .route(
            "/api/v2/workspaces/{id}/effective-tag-bindings",
            get(list_effective_bindings),
        )
}

/// The key/value pairs of a `data` array of `tag-bindings`; each key ≤ 128 and each value ≤ 256
/// characters, no reserved `hc:`/`hcp:` prefix, keys unique.
pub fn parse_bindings(list: &[Value]) -> ApiResult<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        if item
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "tag-bindings")
        {
            return Err(ApiError::invalid(
                &format!("/data/{i}/type"),
                "type must be tag-bindings",
            ));
        }
        let key = item
            .pointer("/attributes/key")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let value = match item.pointer("/attributes/value") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                return Err(ApiError::invalid(
                    &format!("/data/{i}/attributes/value"),
                    "value must be a string",
                ))
            }
        };
        let ptr = format!("/data/{i}/attributes/key");
        if key.is_empty() {
            return Err(ApiError::invalid(&ptr, "Key can't be blank"));
        }
        if key.chars().count() > 128 {
            return Err(ApiError::invalid(
                &ptr,
                "Key is too long (maximum is 128 characters)",
            ));
        }
        let lower = key.to_lowercase();
        if lower.starts_with("hc:") || lower.starts_with("hcp:") {
            return Err(ApiError::invalid(
                &ptr,
                "Key cannot begin with the reserved prefixes hc: or hcp:",
            ));
        }
        if value.chars().count() > 256 {
            return Err(ApiError::invalid(
                &format!("/data/{i}/attributes/value"),
                "Value is too long (maximum is 256 characters)",
            ));
        }
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => out.push((key, value)),
        }
    }
    Ok(out)
}

/// Sets (replace) or merges (add or modify by key) the workspace's bindings; more than
/// [`MAX_TAG_BINDINGS`] is 422 and changes nothing.
pub fn set_bindings(
    ws: &mut Workspace,
    given: Vec<(String, String)>,
    replace: bool,
) -> ApiResult<()> {
    let mut next: Vec<(String, String)> = if replace {
        Vec::new()
    } else {
        ws.extra.tag_bindings.clone()
    };
    for (k, v) in given {
        match next.iter_mut().find(|(x, _)| *x == k) {
            Some(slot) => slot.1 = v,
            None => next.push((k, v)),
        }
    }
    if next.len() > MAX_TAG_BINDINGS {
        return Err(ApiError::invalid(
            "/data",
            format!("A workspace can have at most {MAX_TAG_BINDINGS} tag bindings"),
        ));
    }
    ws.extra
        .tag_binding_ids
        .retain(|k, _| next.iter().any(|(x, _)| x == k));
    for (k, _) in &next {
        ws.extra
            .tag_binding_ids
            .entry(k.clone())
            .or_insert_with(|| new_id("tb-"));
    }
    ws.extra.tag_bindings = next;
    Ok(())
}

fn binding_json(ws: &Workspace, key: &str, value: &str) -> Value {
    json!({
        "id": ws.extra.tag_binding_ids.get(key).cloned().unwrap_or_default(),
        "type": "tag-bindings",
        "attributes": {"key": key, "value": value},
    })
}

fn bindings_doc(ws: &Workspace, params: &QueryParams, path: &str) -> Value {
    let items = ws
        .extra
        .tag_bindings
        .iter()
        .map(|(k, v)| binding_json(ws, k, v))
        .collect();
    paginate(items, params, path, vec![])
}

async fn list_bindings(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?;
        Ok(ok(bindings_doc(ws, &params, uri.path())))
    })
}

/// Effective bindings: the workspace's own (projects carry none in the sandbox), each with
/// `links.inherited-from` null.
async fn list_effective_bindings(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?;
        let items = ws
            .extra
            .tag_bindings
            .iter()
            .map(|(k, v)| {
                let mut b = binding_json(ws, k, v);
                b["type"] = json!("effective-tag-bindings");
                b["links"] = json!({"inherited-from": null});
                b
            })
            .collect();
        Ok(ok(paginate(items, &params, uri.path(), vec![])))
    })
}

fn change_bindings(
    state: &mut State,
    caller: &Caller,
    id: &str,
    body: &Bytes,
    replace: bool,
    path: &str,
) -> ApiResult {
    auth::readable(state, caller, id)?;
    auth::require(state, caller, id, Access::Admin)?;
    let body = parse_body(body)?;
    let given = parse_bindings(data_array(&body)?)?;
    let mut ws = state
        .workspaces
        .get(id)
        .cloned()
        .ok_or_else(ApiError::not_found)?;
    set_bindings(&mut ws, given, replace)?;
    let doc = bindings_doc(&ws, &QueryParams::default(), path);
    state.workspaces.insert(id.to_string(), ws);
    Ok(ok(doc))
}

/// `PATCH /workspaces/:id/tag-bindings` (go-tfe `AddTagBindings`) and `POST
/// .../relationships/tag-bindings`: add bindings or modify the value of existing keys.
async fn add_bindings(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        change_bindings(state, caller, &id, &body, false, uri.path())
    })
}

/// `PATCH .../relationships/tag-bindings`: the bindings become exactly the payload.
async fn replace_bindings(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        change_bindings(state, caller, &id, &body, true, uri.path())
    })
}
