//! Tokens and the permission rules of spec §5.
//!
//! A caller is a user (through its teams), a team, or an organization token. Access to a
//! workspace is the highest of: owners team or "Manage Workspaces" (admin everywhere in the
//! organization), the team's project access (maintain/admin give workspace admin), and the
//! team's direct workspace access. Organization tokens manage workspaces but cannot queue or act
//! on runs nor use the no-code enable/update/create-workspace endpoints; the sandbox answers
//! those with 404 like any other unauthorized call, since the real service hides what a caller
//! may not touch.

use axum::http::HeaderMap;

use super::jsonapi::{ApiError, ApiResult};
use super::model::{Access, Principal, State, Workspace};

#[derive(Clone, Debug)]
pub struct Caller {
    pub token_id: String,
    pub principal: Principal,
}

impl Caller {
    pub fn is_org_token(&self) -> bool {
        matches!(self.principal, Principal::Organization { .. })
    }

    /// The user behind a user token (for `created-by` and account details).
    pub fn user_id(&self) -> Option<&str> {
        match &self.principal {
            Principal::User { user } => Some(user),
            _ => None,
        }
    }
}

/// The bearer token of the request. A missing or unknown token is 401, as in the real service.
pub fn authenticate(state: &State, headers: &HeaderMap) -> ApiResult<Caller> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(ApiError::unauthorized)?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .unwrap_or(value)
        .trim();
    let t = state.tokens.get(token).ok_or_else(ApiError::unauthorized)?;
    if t.expired_at.is_some_and(|e| e <= chrono::Utc::now()) {
        return Err(ApiError::unauthorized());
    }
    Ok(Caller {
        token_id: t.id.clone(),
        principal: t.principal.clone(),
    })
}

/// The teams the caller acts through, within one organization.
fn teams_in<'a>(state: &'a State, caller: &Caller, org: &str) -> Vec<&'a super::model::Team> {
    match &caller.principal {
        Principal::User { user } => state
            .teams
            .values()
            .filter(|t| t.organization == org && t.members.iter().any(|m| m == user))
            .collect(),
        Principal::Team { team } => state
            .teams
            .get(team)
            .filter(|t| t.organization == org)
            .into_iter()
            .collect(),
        Principal::Organization { .. } => Vec::new(),
    }
}

/// Whether the caller belongs to the organization at all (can see it).
pub fn is_member(state: &State, caller: &Caller, org: &str) -> bool {
    match &caller.principal {
        Principal::Organization { organization } => organization == org,
        _ => !teams_in(state, caller, org).is_empty(),
    }
}

pub fn is_owner(state: &State, caller: &Caller, org: &str) -> bool {
    teams_in(state, caller, org).iter().any(|t| t.owners)
}

/// Owners team, "Manage Workspaces", or the organization token: may create workspaces
/// anywhere and replace remote state consumers.
pub fn can_manage_workspaces(state: &State, caller: &Caller, org: &str) -> bool {
    match &caller.principal {
        Principal::Organization { organization } => organization == org,
        _ => teams_in(state, caller, org)
            .iter()
            .any(|t| t.owners || t.manage_workspaces),
    }
}

/// May create workspaces in `project`: organization-wide managers, or project maintain/admin.
pub fn can_create_in_project(state: &State, caller: &Caller, org: &str, project: &str) -> bool {
    can_manage_workspaces(state, caller, org)
        || teams_in(state, caller, org).iter().any(|t| {
            t.project_access
                .get(project)
                .is_some_and(|a| *a >= Access::Admin)
        })
}

/// The caller's access level on a workspace.
pub fn workspace_access(state: &State, caller: &Caller, ws: &Workspace) -> Access {
    if can_manage_workspaces(state, caller, &ws.organization) {
        return Access::Admin;
    }
    let mut best = Access::None;
    for t in teams_in(state, caller, &ws.organization) {
        if let Some(a) = t.workspace_access.get(&ws.id) {
            best = best.max(*a);
        }
        if let Some(a) = t.project_access.get(&ws.project) {
            best = best.max(*a);
        }
    }
    best
}

/// The workspace if the caller can at least read it; 404 otherwise (absent and unauthorized
/// look the same).
pub fn readable<'a>(state: &'a State, caller: &Caller, ws_id: &str) -> ApiResult<&'a Workspace> {
    let ws = state
        .workspaces
        .get(ws_id)
        .ok_or_else(ApiError::not_found)?;
    if workspace_access(state, caller, ws) >= Access::Read {
        Ok(ws)
    } else {
        Err(ApiError::not_found())
    }
}

/// Checks the caller has at least `need` on the workspace, 404 otherwise.
pub fn require(state: &State, caller: &Caller, ws_id: &str, need: Access) -> ApiResult<()> {
    let ws = state
        .workspaces
        .get(ws_id)
        .ok_or_else(ApiError::not_found)?;
    if workspace_access(state, caller, ws) >= need {
        Ok(())
    } else {
        Err(ApiError::not_found())
    }
}

/// Organization tokens cannot queue runs, act on runs, or use the no-code write endpoints.
pub fn require_user_or_team(caller: &Caller) -> ApiResult<()> {
    if caller.is_org_token() {
        Err(ApiError::not_found())
    } else {
        Ok(())
    }
}
