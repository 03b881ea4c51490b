//! Endpoints real clients call when they start, and the organization-level records: ping,
//! account details, organizations, entitlements, projects and teams (read-only except project
//! create; setup goes through the admin API).
//!
//! `GET /account/details` with a team or organization token answers the synthetic "service
//! user" the real service associates with such tokens (its OpenAPI description, vendored in
//! go-tfe as `v2/openapi/spec.json`: "HCP Terraform associates team and organization tokens with
//! a synthetic user account called service user"; `is-service-account`; the
//! `authenticated-resource` relationship, of type `organizations` or `teams`). Its username is
//! `api-org-<organization>-<random>` / `api-team-<team>-<random>`, the shape HashiCorp's own
//! token-identity code (Go package `tfc`, `resolveTokenIdentity`, tested against the live
//! service's answers such as `api-org-mullen-14JAXvyITM`) parses to tell the token kinds apart.

use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use serde_json::{json, Value};

use super::auth::{self, Caller};
use super::jsonapi::*;
use super::model::*;
use super::{query, Svc};

pub fn routes() -> Router<Svc> {
    Router::new()
        .route("/api/v2/ping", get(ping))
        .route("/api/v2/account/details", get(account_details))
        .route("/api/v2/organizations", get(list_orgs))
        .route(
            "/api/v2/organizations/{org}",
            get(read_org).patch(update_org).put(update_org),
        )
        .route(
            "/api/v2/organizations/{org}/entitlement-set",
            get(entitlements),
        )
        .route(
            "/api/v2/organizations/{org}/projects",
            get(list_projects).post(create_project),
        )
        .route("/api/v2/projects/{id}", get(read_project))
        .route("/api/v2/organizations/{org}/teams", get(list_teams))
        .route("/api/v2/teams/{id}", get(read_team))
        .route("/api/v2/users/{id}", get(read_user))
}

/// `GET /api/v2/ping`: 204 with the version headers (added by the service middleware). The real
/// service answers without checking the token; so does the sandbox.
async fn ping() -> Response {
    no_content()
}

pub fn user_json(u: &User) -> Value {
    json!({
        "id": u.id,
        "type": "users",
        "attributes": {
            "username": u.username,
            "email": u.email,
            "is-service-account": false,
            "avatar-url": "",
            "two-factor": {"enabled": false, "verified": false},
            "permissions": {"can-create-organizations": true, "can-change-email": true, "can-change-username": true},
        },
        "links": {"self": format!("/api/v2/users/{}", u.id)},
    })
}

/// The user behind a token; team and organization tokens act through a service account user,
/// as in the real service.
pub fn caller_user_json(state: &State, caller: &Caller) -> Value {
    match &caller.principal {
        Principal::User { user } => state.users.get(user).map(user_json).unwrap_or(Value::Null),
        Principal::Team { team } => {
            let name = state
                .teams
                .get(team)
                .map(|t| t.name.clone())
                .unwrap_or_else(|| team.clone());
            service_account(&format!("api-team-{name}-{}", suffix(team)), "teams", team)
        }
        Principal::Organization { organization } => service_account(
            &format!("api-org-{organization}-{}", suffix(organization)),
            "organizations",
            organization,
        ),
    }
}

/// The random-looking tail of a service account's username (stable per team/organization).
fn suffix(seed: &str) -> String {
    let h = seed.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..10)
        .map(|i| alphabet[((h >> (i * 6)) % 62) as usize] as char)
        .collect()
}

/// The synthetic user the service shows for a team or organization token: username
/// `api-team-<team>-<random>` / `api-org-<organization>-<random>`, `is-service-account: true`,
/// and the token's owner in `relationships.authenticated-resource`.
fn service_account(name: &str, kind: &str, owner: &str) -> Value {
    json!({
        "id": format!("user-{}", suffix(name)),
        "type": "users",
        "attributes": {"username": name, "email": "", "is-service-account": true},
        "relationships": {"authenticated-resource": {"data": {"type": kind, "id": owner}}},
    })
}

async fn account_details(AxState(svc): AxState<Svc>, headers: HeaderMap) -> Response {
    svc.call(&headers, |state, caller| {
        Ok(ok(json!({"data": caller_user_json(state, caller)})))
    })
}

pub fn org_json(state: &State, caller: &Caller, o: &Organization) -> Value {
    let owner = auth::is_owner(state, caller, &o.name);
    let manage = auth::can_manage_workspaces(state, caller, &o.name);
    let permissions = json!({
                "can-update": owner,
                "can-destroy": owner,
                "can-access-via-teams": true,
                "can-create-module": owner,
                "can-create-team": owner,
                "can-create-workspace": manage,
                "can-manage-users": owner,
                "can-manage-subscription": owner,
                "can-manage-sso": owner,
                "can-update-oauth": owner,
                "can-update-sentinel": owner,
                "can-update-ssh-keys": owner,
                "can-update-api-token": owner,
                "can-traverse": true,
                "can-start-trial": false,
                "can-update-agent-pools": owner,
                "can-manage-tags": manage,
                "can-manage-varsets": owner,
                "can-read-varsets": true,
                "can-manage-public-providers": owner,
                "can-create-provider": owner,
                "can-manage-public-modules": owner,
                "can-manage-custom-providers": false,
                "can-manage-run-tasks": owner,
                "can-read-run-tasks": true,
                "can-create-project": owner,
    });
    json!({
        "id": o.name,
        "type": "organizations",
        "attributes": {
            "name": o.name,
            "external-id": o.external_id,
            "email": o.email,
            "created-at": iso(&o.created_at),
            "collaborator-auth-policy": "password",
            "cost-estimation-enabled": false,
            "assessments-enforced": false,
            "default-execution-mode": default_mode(state, &o.name),
            "allow-force-delete-workspaces": false,
            "session-timeout": null,
            "session-remember": null,
            "owners-team-saml-role-id": null,
            "saml-enabled": false,
            "two-factor-conformant": false,
            "send-passing-statuses-for-untriggered-speculative-plans": false,
            "aggregated-commit-status-enabled": true,
            "speculative-plan-management-enabled": true,
            "trial-expires-at": null,
            "plan-identifier": "enterprise",
            "permissions": permissions,
        },
        "relationships": {
            "default-project": rel_one("projects", Some(&o.default_project)),
            "oauth-tokens": {"links": {"related": format!("/api/v2/organizations/{}/oauth-tokens", o.name)}},
            "authentication-token": {"links": {"related": format!("/api/v2/organizations/{}/authentication-token", o.name)}},
            "entitlement-set": {"data": {"id": o.external_id, "type": "entitlement-sets"}, "links": {"related": format!("/api/v2/organizations/{}/entitlement-set", o.name)}},
            "subscription": {"links": {"related": format!("/api/v2/organizations/{}/subscription", o.name)}},
        },
        "links": {"self": format!("/api/v2/organizations/{}", o.name)},
    })
}

/// The organization's default execution mode (`remote` unless changed).
pub fn default_mode(state: &State, org: &str) -> String {
    state
        .org_defaults
        .get(org)
        .map(|d| d.execution_mode.clone())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "remote".into())
}

/// The request URI with the organization segment of `/api/v2/organizations/:org/...` spelled
/// as the organization is stored, when it differs only in letter case (the real service finds
/// organizations case-insensitively). `None` when nothing changes.
pub fn canonical_org_uri(state: &State, uri: &Uri) -> Option<Uri> {
    let path = uri.path();
    let rest = path.strip_prefix("/api/v2/organizations/")?;
    let (seg, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if seg.is_empty() || state.organizations.contains_key(seg) {
        return None;
    }
    let name = state
        .organizations
        .keys()
        .find(|k| k.eq_ignore_ascii_case(seg))?;
    let mut new = format!("/api/v2/organizations/{name}{tail}");
    if let Some(q) = uri.query() {
        new.push('?');
        new.push_str(q);
    }
    new.parse().ok()
}

/// `PATCH /organizations/:org` (owners): `default-execution-mode` and the
/// `default-agent-pool` relationship. Workspaces that follow the default
/// (`setting-overwrites` false) take the new mode and pool at once.
async fn update_org(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        if !auth::is_owner(state, caller, &org) {
            return Err(ApiError::not_found());
        }
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["organizations"])?;
        let a = Attrs::of(data)?;
        let mut d = state.org_defaults.get(&org).cloned().unwrap_or_default();
        if let Some(m) = a.string("default-execution-mode")? {
            if !["remote", "local", "agent"].contains(&m.as_str()) {
                return Err(ApiError::invalid(
                    "/data/attributes/default-execution-mode",
                    "Default execution mode must be one of remote, local, agent",
                ));
            }
            d.execution_mode = m;
        }
        if let Some(p) = relationship_id(data, "default-agent-pool") {
            if state.agent_pools.get(&p) != Some(&org) {
                return Err(ApiError::invalid(
                    "/data/relationships/default-agent-pool",
                    "Agent pool not found",
                ));
            }
            d.agent_pool_id = Some(p);
        }
        if d.execution_mode == "agent" && d.agent_pool_id.is_none() {
            return Err(ApiError::invalid(
                "/data/relationships/default-agent-pool",
                "A default agent pool is required with the agent execution mode",
            ));
        }
        let mode = if d.execution_mode.is_empty() {
            "remote".to_string()
        } else {
            d.execution_mode.clone()
        };
        for w in state
            .workspaces
            .values_mut()
            .filter(|w| w.organization == org && !w.extra.overwrites_execution_mode)
        {
            w.execution_mode = mode.clone();
            w.agent_pool_id = if mode == "agent" {
                d.agent_pool_id.clone()
            } else {
                None
            };
        }
        state.org_defaults.insert(org.clone(), d);
        let o = visible_org(state, caller, &org)?;
        Ok(ok(json!({"data": org_json(state, caller, o)})))
    })
}

/// The organization if the caller belongs to it; 404 otherwise.
pub fn visible_org<'a>(
    state: &'a State,
    caller: &Caller,
    name: &str,
) -> ApiResult<&'a Organization> {
    let o = state
        .organizations
        .get(name)
        .ok_or_else(ApiError::not_found)?;
    if auth::is_member(state, caller, name) {
        Ok(o)
    } else {
        Err(ApiError::not_found())
    }
}

async fn list_orgs(AxState(svc): AxState<Svc>, headers: HeaderMap, uri: Uri) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let items = state
            .organizations
            .values()
            .filter(|o| auth::is_member(state, caller, &o.name))
            .map(|o| org_json(state, caller, o))
            .collect();
        Ok(ok(paginate(
            items,
            &params,
            "/api/v2/organizations",
            vec![],
        )))
    })
}

async fn read_org(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let o = visible_org(state, caller, &org)?;
        Ok(ok(json!({"data": org_json(state, caller, o)})))
    })
}

/// Every feature the spec covers is entitled (the sandbox plays a business-tier organization).
async fn entitlements(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let o = visible_org(state, caller, &org)?;
        Ok(ok(json!({"data": {
            "id": o.external_id,
            "type": "entitlement-sets",
            "attributes": {
                "agents": true, "assessments": true, "audit-logging": true, "configuration-designer": true,
                "cost-estimation": true, "global-run-tasks": true, "module-tests-generation": false,
                "operations": true, "private-module-registry": true, "private-run-tasks": true,
                "run-tasks": true, "self-serve-billing": false, "sentinel": true, "sso": true,
                "state-storage": true, "teams": true, "vcs-integrations": true, "waypoint-actions": false,
                "waypoint-templates-and-addons": false, "no-code-modules": true, "usage-reporting": false,
                "user-limit": null, "policy-limit": null, "policy-set-limit": null,
                "run-task-limit": null, "run-task-workspace-limit": null, "run-task-mandatory-enforcement-limit": null,
            },
            "links": {"self": format!("/api/v2/entitlement-sets/{}", o.external_id)},
        }})))
    })
}

pub fn project_json(state: &State, p: &Project) -> Value {
    let count = state
        .workspaces
        .values()
        .filter(|w| w.project == p.id)
        .count();
    json!({
        "id": p.id,
        "type": "projects",
        "attributes": {
            "name": p.name,
            "description": null,
            "created-at": iso(&p.created_at),
            "workspace-count": count,
            "auto-destroy-activity-duration": null,
            "permissions": {"can-read": true, "can-update": true, "can-destroy": true, "can-create-workspace": true},
        },
        "relationships": {"organization": rel_one("organizations", Some(&p.organization))},
        "links": {"self": format!("/api/v2/projects/{}", p.id)},
    })
}

/// Whether the caller sees a project: organization-wide managers see all, other teams the
/// projects they have access to or hold workspaces in.
fn project_visible(state: &State, caller: &Caller, p: &Project) -> bool {
    if auth::can_manage_workspaces(state, caller, &p.organization) {
        return true;
    }
    if !auth::is_member(state, caller, &p.organization) {
        return false;
    }
    state
        .workspaces
        .values()
        .any(|w| w.project == p.id && auth::workspace_access(state, caller, w) >= Access::Read)
        || auth::can_create_in_project(state, caller, &p.organization, &p.id)
}

async fn list_projects(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(org): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        let mut ps: Vec<&Project> = state
            .projects
            .values()
            .filter(|p| p.organization == org && project_visible(state, caller, p))
            .collect();
        if let Some(n) = params.get("filter[names]") {
            let names: Vec<&str> = n.split(',').collect();
            ps.retain(|p| names.contains(&p.name.as_str()));
        }
        if let Some(q) = params.get("q") {
            ps.retain(|p| p.name.to_lowercase().contains(&q.to_lowercase()));
        }
        ps.sort_by(|a, b| a.name.cmp(&b.name));
        let items = ps.into_iter().map(|p| project_json(state, p)).collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/organizations/{org}/projects"),
            vec![],
        )))
    })
}

async fn read_project(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let p = state.projects.get(&id).ok_or_else(ApiError::not_found)?;
        if !project_visible(state, caller, p) {
            return Err(ApiError::not_found());
        }
        Ok(ok(json!({"data": project_json(state, p)})))
    })
}

/// `POST /organizations/:org/projects` (owners and "Manage Projects" teams, and the organization
/// token). Names are 3–40 characters, unique in the organization.
async fn create_project(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        let allowed = caller.is_org_token()
            || auth::is_owner(state, caller, &org)
            || state.teams.values().any(|t| {
                t.organization == org
                    && t.manage_projects
                    && match &caller.principal {
                        Principal::User { user } => t.members.contains(user),
                        Principal::Team { team } => &t.id == team,
                        _ => false,
                    }
            });
        if !allowed {
            return Err(ApiError::not_found());
        }
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["projects"])?;
        let attrs = Attrs::of(data)?;
        let name = attrs
            .string("name")?
            .ok_or_else(|| ApiError::invalid("/data/attributes/name", "Name can't be blank"))?;
        if name.len() < 3 || name.len() > 40 {
            return Err(ApiError::invalid(
                "/data/attributes/name",
                "Name must be between 3 and 40 characters",
            ));
        }
        if state
            .projects
            .values()
            .any(|p| p.organization == org && p.name == name)
        {
            return Err(ApiError::invalid(
                "/data/attributes/name",
                "Name has already been taken",
            ));
        }
        let p = Project {
            id: new_id("prj-"),
            organization: org.clone(),
            name,
            created_at: chrono::Utc::now(),
        };
        let doc = project_json(state, &p);
        state.projects.insert(p.id.clone(), p);
        Ok(created(json!({"data": doc})))
    })
}

pub fn team_json(t: &Team) -> Value {
    json!({
        "id": t.id,
        "type": "teams",
        "attributes": {
            "name": t.name,
            "users-count": t.members.len(),
            "visibility": "organization",
            "organization-access": {
                "manage-workspaces": t.owners || t.manage_workspaces,
                "manage-projects": t.owners || t.manage_projects,
                "manage-policies": t.owners,
                "manage-vcs-settings": t.owners,
                "manage-modules": t.owners,
                "manage-providers": t.owners,
                "manage-run-tasks": t.owners,
                "manage-membership": t.owners,
                "read-workspaces": t.owners || t.manage_workspaces,
                "read-projects": t.owners || t.manage_projects,
            },
            "permissions": {"can-update-membership": t.owners, "can-destroy": !t.owners, "can-update-organization-access": !t.owners, "can-update-api-token": true, "can-update-visibility": true},
        },
        "relationships": {
            "organization": rel_one("organizations", Some(&t.organization)),
            "users": rel_many("users", t.members.clone()),
        },
        "links": {"self": format!("/api/v2/teams/{}", t.id)},
    })
}

async fn list_teams(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(org): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        let items = state
            .teams
            .values()
            .filter(|t| t.organization == org)
            .map(team_json)
            .collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/organizations/{org}/teams"),
            vec![],
        )))
    })
}

async fn read_team(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let t = state.teams.get(&id).ok_or_else(ApiError::not_found)?;
        visible_org(state, caller, &t.organization)?;
        Ok(ok(json!({"data": team_json(t)})))
    })
}

async fn read_user(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, _caller| {
        let u = state.users.get(&id).ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": user_json(u)})))
    })
}
