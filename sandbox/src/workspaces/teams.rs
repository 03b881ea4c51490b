//! The real API's own ways of setting up permissions and tokens, for clients that do not use
//! the admin API: teams (create, update, delete), team access to workspaces (`team-workspaces`)
//! and projects (`team-projects`), and the three token kinds (`authentication-tokens`).
//!
//! Only owners manage teams, grants, team tokens and the organization token; a user manages
//! its own user tokens. A `custom` access level counts as `read` in the sandbox (custom
//! permission sets are not emulated). Token secrets are shown only in the create response.

use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use chrono::Utc;
use serde_json::{json, Value};

use super::auth::{self, Caller};
use super::jsonapi::*;
use super::model::*;
use super::orgs::{team_json, visible_org};
use super::{query, Svc};

pub fn routes() -> Router<Svc> {
    Router::new()
        .route("/api/v2/organizations/{org}/teams", post(create_team))
        .route(
            "/api/v2/teams/{id}",
            axum::routing::patch(update_team)
                .put(update_team)
                .delete(delete_team),
        )
        .route(
            "/api/v2/team-workspaces",
            get(list_ws_access).post(add_ws_access),
        )
        .route(
            "/api/v2/team-workspaces/{id}",
            get(read_ws_access)
                .patch(update_ws_access)
                .put(update_ws_access)
                .delete(remove_ws_access),
        )
        .route(
            "/api/v2/team-projects",
            get(list_prj_access).post(add_prj_access),
        )
        .route(
            "/api/v2/team-projects/{id}",
            get(read_prj_access)
                .patch(update_prj_access)
                .put(update_prj_access)
                .delete(remove_prj_access),
        )
        .route(
            "/api/v2/organizations/{org}/authentication-token",
            get(read_org_token)
                .post(create_org_token)
                .delete(delete_org_token),
        )
        .route(
            "/api/v2/teams/{id}/authentication-token",
            get(read_team_token)
                .post(create_team_token)
                .delete(delete_team_token),
        )
        .route(
            "/api/v2/teams/{id}/authentication-tokens",
            post(create_team_token),
        )
        .route(
            "/api/v2/users/{id}/authentication-tokens",
            get(list_user_tokens).post(create_user_token),
        )
        .route(
            "/api/v2/authentication-tokens/{id}",
            get(read_token).delete(delete_token),
        )
}

fn require_owner(state: &State, caller: &Caller, org: &str) -> ApiResult<()> {
    visible_org(state, caller, org)?;
    if auth::is_owner(state, caller, org) {
        Ok(())
    } else {
        Err(ApiError::not_found())
    }
}

fn apply_org_access(team: &mut Team, v: Option<&Value>) {
    let Some(o) = v.and_then(Value::as_object) else {
        return;
    };
    let a = Attrs::from_map(o);
    if let Ok(Some(b)) = a.bool("manage-workspaces") {
        team.manage_workspaces = b;
    }
    if let Ok(Some(b)) = a.bool("manage-projects") {
        team.manage_projects = b;
    }
}

async fn create_team(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        require_owner(state, caller, &org)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["teams"])?;
        let a = Attrs::of(data)?;
        let name = a
            .string("name")?
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid("/data/attributes/name", "Name can't be blank"))?;
        if state
            .teams
            .values()
            .any(|t| t.organization == org && t.name == name)
        {
            return Err(ApiError::invalid(
                "/data/attributes/name",
                "Name has already been taken",
            ));
        }
        let mut team = Team {
            id: new_id("team-"),
            organization: org.clone(),
            name,
            ..Team::default()
        };
        apply_org_access(&mut team, a.raw("organization-access"));
        let doc = team_json(&team);
        state.teams.insert(team.id.clone(), team);
        Ok(created(json!({"data": doc})))
    })
}

async fn update_team(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let mut team = state
            .teams
            .get(&id)
            .cloned()
            .ok_or_else(ApiError::not_found)?;
        require_owner(state, caller, &team.organization)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["teams"])?;
        let a = Attrs::of(data)?;
        if let Some(n) = a.string("name")? {
            if team.owners && n != team.name {
                return Err(ApiError::invalid(
                    "/data/attributes/name",
                    "The owners team cannot be renamed",
                ));
            }
            if state
                .teams
                .values()
                .any(|t| t.organization == team.organization && t.name == n && t.id != id)
            {
                return Err(ApiError::invalid(
                    "/data/attributes/name",
                    "Name has already been taken",
                ));
            }
            team.name = n;
        }
        if !team.owners {
            apply_org_access(&mut team, a.raw("organization-access"));
        }
        let doc = team_json(&team);
        state.teams.insert(id, team);
        Ok(ok(json!({"data": doc})))
    })
}

async fn delete_team(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let team = state
            .teams
            .get(&id)
            .cloned()
            .ok_or_else(ApiError::not_found)?;
        require_owner(state, caller, &team.organization)?;
        if team.owners {
            return Err(ApiError::unprocessable("The owners team cannot be deleted"));
        }
        state.teams.remove(&id);
        state
            .tokens
            .retain(|_, t| t.principal != Principal::Team { team: id.clone() });
        state
            .access_ids
            .retain(|k, _| !k.starts_with(&format!("{id}|")));
        Ok(no_content())
    })
}

// ---- team access grants ----

/// A grant found by id: (team id, target id).
fn grant_by_id(state: &State, id: &str) -> Option<(String, String)> {
    state
        .access_ids
        .iter()
        .find(|(_, v)| v.as_str() == id)
        .and_then(|(k, _)| {
            let (t, w) = k.split_once('|')?;
            Some((t.to_string(), w.to_string()))
        })
}

fn level_name(a: Access) -> &'static str {
    match a {
        Access::None => "none",
        Access::Read => "read",
        Access::Plan => "plan",
        Access::Write => "write",
        Access::Admin => "admin",
    }
}

fn ws_access_json(state: &State, team: &str, ws: &str) -> Value {
    let a = state
        .teams
        .get(team)
        .and_then(|t| t.workspace_access.get(ws))
        .copied()
        .unwrap_or(Access::None);
    let id = state
        .access_ids
        .get(&format!("{team}|{ws}"))
        .cloned()
        .unwrap_or_default();
    json!({
        "id": id,
        "type": "team-workspaces",
        "attributes": {
            "access": level_name(a),
            "runs": match a { Access::Admin | Access::Write => "apply", Access::Plan => "plan", _ => "read" },
            "variables": match a { Access::Admin | Access::Write => "write", Access::None => "none", _ => "read" },
            "state-versions": match a { Access::Admin | Access::Write => "write", Access::None => "none", _ => "read" },
            "sentinel-mocks": if a >= Access::Write { "read" } else { "none" },
            "workspace-locking": a >= Access::Write,
            "run-tasks": a >= Access::Admin,
        },
        "relationships": {
            "team": rel_one("teams", Some(team)),
            "workspace": rel_one("workspaces", Some(ws)),
        },
        "links": {"self": format!("/api/v2/team-workspaces/{id}")},
    })
}

fn parse_access(a: &Attrs, project: bool) -> ApiResult<Access> {
    let s = a
        .string("access")?
        .ok_or_else(|| ApiError::invalid("/data/attributes/access", "access is required"))?;
    let allowed: &[&str] = if project {
        &["read", "write", "maintain", "admin", "custom"]
    } else {
        &["read", "plan", "write", "admin", "custom"]
    };
    if !allowed.contains(&s.as_str()) {
        return Err(ApiError::invalid(
            "/data/attributes/access",
            format!("access must be one of {allowed:?}"),
        ));
    }
    Ok(if s == "custom" {
        Access::Read
    } else if project && s == "write" {
        Access::Write
    } else {
        Access::parse(&s).unwrap_or(Access::Read)
    })
}

async fn add_ws_access(AxState(svc): AxState<Svc>, headers: HeaderMap, body: Bytes) -> Response {
    svc.call(&headers, |state, caller| {
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["team-workspaces"])?;
        let ws_id = relationship_id(data, "workspace").ok_or_else(|| {
            ApiError::invalid("/data/relationships/workspace", "workspace is required")
        })?;
        let team_id = relationship_id(data, "team")
            .ok_or_else(|| ApiError::invalid("/data/relationships/team", "team is required"))?;
        let org = state
            .workspaces
            .get(&ws_id)
            .map(|w| w.organization.clone())
            .ok_or_else(ApiError::not_found)?;
        require_owner(state, caller, &org)?;
        if state
            .teams
            .get(&team_id)
            .is_none_or(|t| t.organization != org)
        {
            return Err(ApiError::not_found());
        }
        let key = format!("{team_id}|{ws_id}");
        if state.access_ids.contains_key(&key) {
            return Err(ApiError::invalid(
                "/data/relationships/team",
                "Team already has access to this workspace",
            ));
        }
        let access = parse_access(&Attrs::of(data)?, false)?;
        state.access_ids.insert(key, new_id("tws-"));
        if let Some(t) = state.teams.get_mut(&team_id) {
            t.workspace_access.insert(ws_id.clone(), access);
        }
        Ok(created(
            json!({"data": ws_access_json(state, &team_id, &ws_id)}),
        ))
    })
}

async fn list_ws_access(AxState(svc): AxState<Svc>, headers: HeaderMap, uri: Uri) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let ws_id = params
            .get("filter[workspace][id]")
            .ok_or_else(|| ApiError::bad_request("filter[workspace][id] is required"))?
            .to_string();
        auth::readable(state, caller, &ws_id)?;
        let items = state
            .teams
            .values()
            .filter(|t| t.workspace_access.contains_key(&ws_id))
            .map(|t| ws_access_json(state, &t.id, &ws_id))
            .collect();
        Ok(ok(paginate(
            items,
            &params,
            "/api/v2/team-workspaces",
            vec![],
        )))
    })
}

fn ws_grant(state: &State, caller: &Caller, id: &str, owner: bool) -> ApiResult<(String, String)> {
    let (team, ws) = grant_by_id(state, id)
        .filter(|(_, w)| w.starts_with("ws-"))
        .ok_or_else(ApiError::not_found)?;
    let org = state
        .workspaces
        .get(&ws)
        .map(|w| w.organization.clone())
        .ok_or_else(ApiError::not_found)?;
    if owner {
        require_owner(state, caller, &org)?;
    } else {
        auth::readable(state, caller, &ws)?;
    }
    Ok((team, ws))
}

async fn read_ws_access(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (team, ws) = ws_grant(state, caller, &id, false)?;
        Ok(ok(json!({"data": ws_access_json(state, &team, &ws)})))
    })
}

async fn update_ws_access(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (team, ws) = ws_grant(state, caller, &id, true)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["team-workspaces"])?;
        let access = parse_access(&Attrs::of(data)?, false)?;
        if let Some(t) = state.teams.get_mut(&team) {
            t.workspace_access.insert(ws.clone(), access);
        }
        Ok(ok(json!({"data": ws_access_json(state, &team, &ws)})))
    })
}

async fn remove_ws_access(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (team, ws) = ws_grant(state, caller, &id, true)?;
        if let Some(t) = state.teams.get_mut(&team) {
            t.workspace_access.remove(&ws);
        }
        state.access_ids.remove(&format!("{team}|{ws}"));
        Ok(no_content())
    })
}

fn prj_access_json(state: &State, team: &str, prj: &str) -> Value {
    let a = state
        .teams
        .get(team)
        .and_then(|t| t.project_access.get(prj))
        .copied()
        .unwrap_or(Access::None);
    let id = state
        .access_ids
        .get(&format!("{team}|{prj}"))
        .cloned()
        .unwrap_or_default();
    let name = match a {
        Access::Admin => "admin",
        Access::Write | Access::Plan => "write",
        _ => "read",
    };
    json!({
        "id": id,
        "type": "team-projects",
        "attributes": {"access": name},
        "relationships": {
            "team": rel_one("teams", Some(team)),
            "project": rel_one("projects", Some(prj)),
        },
        "links": {"self": format!("/api/v2/team-projects/{id}")},
    })
}

async fn add_prj_access(AxState(svc): AxState<Svc>, headers: HeaderMap, body: Bytes) -> Response {
    svc.call(&headers, |state, caller| {
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["team-projects"])?;
        let prj = relationship_id(data, "project").ok_or_else(|| {
            ApiError::invalid("/data/relationships/project", "project is required")
        })?;
        let team_id = relationship_id(data, "team")
            .ok_or_else(|| ApiError::invalid("/data/relationships/team", "team is required"))?;
        let org = state
            .projects
            .get(&prj)
            .map(|p| p.organization.clone())
            .ok_or_else(ApiError::not_found)?;
        require_owner(state, caller, &org)?;
        if state
            .teams
            .get(&team_id)
            .is_none_or(|t| t.organization != org)
        {
            return Err(ApiError::not_found());
        }
        let key = format!("{team_id}|{prj}");
        if state.access_ids.contains_key(&key) {
            return Err(ApiError::invalid(
                "/data/relationships/team",
                "Team already has access to this project",
            ));
        }
        let access = parse_access(&Attrs::of(data)?, true)?;
        state.access_ids.insert(key, new_id("tprj-"));
        if let Some(t) = state.teams.get_mut(&team_id) {
            t.project_access.insert(prj.clone(), access);
        }
        Ok(created(
            json!({"data": prj_access_json(state, &team_id, &prj)}),
        ))
    })
}

async fn list_prj_access(AxState(svc): AxState<Svc>, headers: HeaderMap, uri: Uri) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let prj = params
            .get("filter[project][id]")
            .ok_or_else(|| ApiError::bad_request("filter[project][id] is required"))?
            .to_string();
        let org = state
            .projects
            .get(&prj)
            .map(|p| p.organization.clone())
            .ok_or_else(ApiError::not_found)?;
        visible_org(state, caller, &org)?;
        let items = state
            .teams
            .values()
            .filter(|t| t.project_access.contains_key(&prj))
            .map(|t| prj_access_json(state, &t.id, &prj))
            .collect();
        Ok(ok(paginate(
            items,
            &params,
            "/api/v2/team-projects",
            vec![],
        )))
    })
}

fn prj_grant(state: &State, caller: &Caller, id: &str, owner: bool) -> ApiResult<(String, String)> {
    let (team, prj) = grant_by_id(state, id)
        .filter(|(_, p)| p.starts_with("prj-"))
        .ok_or_else(ApiError::not_found)?;
    let org = state
        .projects
        .get(&prj)
        .map(|p| p.organization.clone())
        .ok_or_else(ApiError::not_found)?;
    if owner {
        require_owner(state, caller, &org)?;
    } else {
        visible_org(state, caller, &org)?;
    }
    Ok((team, prj))
}

async fn read_prj_access(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (team, prj) = prj_grant(state, caller, &id, false)?;
        Ok(ok(json!({"data": prj_access_json(state, &team, &prj)})))
    })
}

async fn update_prj_access(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (team, prj) = prj_grant(state, caller, &id, true)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["team-projects"])?;
        let access = parse_access(&Attrs::of(data)?, true)?;
        if let Some(t) = state.teams.get_mut(&team) {
            t.project_access.insert(prj.clone(), access);
        }
        Ok(ok(json!({"data": prj_access_json(state, &team, &prj)})))
    })
}

async fn remove_prj_access(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (team, prj) = prj_grant(state, caller, &id, true)?;
        if let Some(t) = state.teams.get_mut(&team) {
            t.project_access.remove(&prj);
        }
        state.access_ids.remove(&format!("{team}|{prj}"));
        Ok(no_content())
    })
}

// ---- authentication tokens ----

fn token_json(t: &Token, secret: Option<&str>) -> Value {
    let created_by = match &t.principal {
        Principal::User { user } => json!({"data": {"id": user, "type": "users"}}),
        _ => json!({"data": null}),
    };
    json!({
        "id": t.id,
        "type": "authentication-tokens",
        "attributes": {
            "created-at": iso(&t.created_at),
            "last-used-at": null,
            "description": t.description,
            "token": secret,
            "expired-at": t.expired_at.as_ref().map(iso),
        },
        "relationships": {"created-by": created_by},
        "links": {"self": format!("/api/v2/authentication-tokens/{}", t.id)},
    })
}

/// Optional `description` and `expired-at` of a token create body (the body may be empty).
fn token_options(body: &Bytes) -> ApiResult<(Option<String>, Option<Time>)> {
    let body = parse_body(body)?;
    let Some(data) = body.get("data").and_then(Value::as_object) else {
        return Ok((None, None));
    };
    let a = Attrs::of(data)?;
    let expired_at = match a.string("expired-at")? {
        None => None,
        Some(s) => Some(
            chrono::DateTime::parse_from_rfc3339(&s)
                .map_err(|_| {
                    ApiError::invalid(
                        "/data/attributes/expired-at",
                        "expired-at must be an ISO 8601 time",
                    )
                })?
                .with_timezone(&Utc),
        ),
    };
    Ok((a.string("description")?, expired_at))
}

fn issue(
    state: &mut State,
    principal: Principal,
    replace: bool,
    opts: (Option<String>, Option<Time>),
) -> Value {
    if replace {
        state.tokens.retain(|_, t| t.principal != principal);
    }
    let secret = new_token_secret();
    let t = Token {
        id: new_id("at-"),
        principal,
        created_at: Utc::now(),
        description: opts.0,
        expired_at: opts.1,
    };
    let doc = token_json(&t, Some(&secret));
    state.tokens.insert(secret, t);
    doc
}

fn find_token<'a>(state: &'a State, principal: &Principal) -> Option<&'a Token> {
    state.tokens.values().find(|t| &t.principal == principal)
}

async fn create_org_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        require_owner(state, caller, &org)?;
        let opts = token_options(&body)?;
        let doc = issue(
            state,
            Principal::Organization {
                organization: org.clone(),
            },
            true,
            opts,
        );
        Ok(created(json!({"data": doc})))
    })
}

async fn read_org_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        require_owner(state, caller, &org)?;
        let t = find_token(
            state,
            &Principal::Organization {
                organization: org.clone(),
            },
        )
        .ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": token_json(t, None)})))
    })
}

async fn delete_org_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        require_owner(state, caller, &org)?;
        let p = Principal::Organization {
            organization: org.clone(),
        };
        if find_token(state, &p).is_none() {
            return Err(ApiError::not_found());
        }
        state.tokens.retain(|_, t| t.principal != p);
        Ok(no_content())
    })
}

async fn create_team_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let org = state
            .teams
            .get(&id)
            .map(|t| t.organization.clone())
            .ok_or_else(ApiError::not_found)?;
        require_owner(state, caller, &org)?;
        let opts = token_options(&body)?;
        let doc = issue(state, Principal::Team { team: id.clone() }, true, opts);
        Ok(created(json!({"data": doc})))
    })
}

async fn read_team_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let org = state
            .teams
            .get(&id)
            .map(|t| t.organization.clone())
            .ok_or_else(ApiError::not_found)?;
        require_owner(state, caller, &org)?;
        let t = find_token(state, &Principal::Team { team: id.clone() })
            .ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": token_json(t, None)})))
    })
}

async fn delete_team_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let org = state
            .teams
            .get(&id)
            .map(|t| t.organization.clone())
            .ok_or_else(ApiError::not_found)?;
        require_owner(state, caller, &org)?;
        let p = Principal::Team { team: id.clone() };
        if find_token(state, &p).is_none() {
            return Err(ApiError::not_found());
        }
        state.tokens.retain(|_, t| t.principal != p);
        Ok(no_content())
    })
}

fn require_self(caller: &Caller, user: &str) -> ApiResult<()> {
    if caller.user_id() == Some(user) {
        Ok(())
    } else {
        Err(ApiError::not_found())
    }
}

async fn create_user_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        require_self(caller, &id)?;
        let opts = token_options(&body)?;
        let doc = issue(state, Principal::User { user: id.clone() }, false, opts);
        Ok(created(json!({"data": doc})))
    })
}

async fn list_user_tokens(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        require_self(caller, &id)?;
        let p = Principal::User { user: id.clone() };
        let items = state
            .tokens
            .values()
            .filter(|t| t.principal == p)
            .map(|t| token_json(t, None))
            .collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/users/{id}/authentication-tokens"),
            vec![],
        )))
    })
}

/// A token record the caller may see: its own user tokens, and as an owner the organization's
/// team and organization tokens.
fn visible_token(state: &State, caller: &Caller, id: &str) -> ApiResult<(String, Token)> {
    let (secret, t) = state
        .tokens
        .iter()
        .find(|(_, t)| t.id == id)
        .ok_or_else(ApiError::not_found)?;
    let ok = match &t.principal {
        Principal::User { user } => caller.user_id() == Some(user.as_str()),
        Principal::Team { team } => state
            .teams
            .get(team)
            .is_some_and(|tm| auth::is_owner(state, caller, &tm.organization)),
        Principal::Organization { organization } => auth::is_owner(state, caller, organization),
    };
    if ok {
        Ok((secret.clone(), t.clone()))
    } else {
        Err(ApiError::not_found())
    }
}

async fn read_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (_, t) = visible_token(state, caller, &id)?;
        Ok(ok(json!({"data": token_json(&t, None)})))
    })
}

async fn delete_token(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (secret, _) = visible_token(state, caller, &id)?;
        state.tokens.remove(&secret);
        Ok(no_content())
    })
}
