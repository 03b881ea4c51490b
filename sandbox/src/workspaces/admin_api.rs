//! The sandbox admin API of the workspace service, under `/_sandbox/workspaces/` (no token;
//! JSON bodies with plain snake_case keys; errors are `{"errors": ["..."]}` with status 400/404).
//!
//! | Method | Path | Body | Answer |
//! |---|---|---|---|
//! | POST | /_sandbox/workspaces/organizations | `{"name", "email"?}` | `{"name", "owners_team_id", "default_project_id"}` |
//! | POST | /_sandbox/workspaces/projects | `{"organization", "name"}` | `{"id"}` |
//! | POST | /_sandbox/workspaces/teams | `{"organization", "name", "manage_workspaces"?, "manage_projects"?, "workspace_access"?: {"ws-…": "read"\|"plan"\|"write"\|"admin"}, "project_access"?: {"prj-…": "read"\|"write"\|"maintain"\|"admin"}, "members"?: ["user-…"]}` | `{"id"}` |
//! | PATCH | /_sandbox/workspaces/teams/{id} | same keys, each replacing the stored value | `{"id"}` |
//! | POST | /_sandbox/workspaces/users | `{"username", "teams"?: ["team-…"], "token"?}` | `{"id", "token"}` (a user token) |
//! | POST | /_sandbox/workspaces/tokens | `{"kind": "user"\|"team"\|"organization", "user"\|"team"\|"organization": id-or-name, "token"?}` | `{"id", "token"}` |
//! | POST | /_sandbox/workspaces/agent-pools | `{"organization", "name"?}` | `{"id"}` (`apool-…`) |
//! | POST | /_sandbox/workspaces/oauth-tokens | `{"organization", "id"?: "ot-…"}` | `{"id"}` (`ot-…`, a VCS connection; a given `id` is kept) |
//! | GET, PUT | /_sandbox/workspaces/settings | `{"step_ms"?, "force_cancel_cooloff_ms"?, "engine_versions"?}` | the settings |
//! | POST | /_sandbox/workspaces/scripts | `{"workspace": "ws-…", "plan"?: "changes"\|"no-changes"\|"errored", "apply"?: "ok"\|"errored", "cancel"?: "ok"\|"ignore", "count"?: 1}` | 204; the next `count` runs (0 = all) of the workspace follow the script |
//! | POST | /_sandbox/workspaces/registry-modules | `{"organization", "name", "provider", "namespace"?, "no_code_ready"?: true, "versions": [{"version", "variables": [{"name", "type"?, "required"?, "default"?}]}], "id"?: "mod-…"}` | `{"id"}` (`mod-…`; a given `id` is kept, so examples can name a seeded module; an existing one with that id is replaced) |
//! | POST | /_sandbox/workspaces/registry-modules/{id}/versions | `{"version", "variables"?}` | 204 |
//! | PUT | /_sandbox/workspaces/run-phases | `{"workspace": "ws-…"` or `"organization", "cost_estimation"?, "policy_check"?, "post_plan"?}` (booleans, default false) | the phases; runs created afterwards in that workspace (or organization, unless the workspace has its own) pass through cost estimation, policy check and post-plan, and wait for confirmation in the last of them |

use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use axum::Router;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

use super::model::*;
use super::Svc;

pub fn routes() -> Router<Svc> {
    Router::new()
        .route("/_sandbox/workspaces/organizations", post(add_org))
        .route("/_sandbox/workspaces/projects", post(add_project))
        .route("/_sandbox/workspaces/teams", post(add_team))
        .route("/_sandbox/workspaces/teams/{id}", patch(update_team))
        .route("/_sandbox/workspaces/users", post(add_user))
        .route("/_sandbox/workspaces/tokens", post(add_token))
        .route("/_sandbox/workspaces/agent-pools", post(add_agent_pool))
        .route("/_sandbox/workspaces/oauth-tokens", post(add_oauth_token))
        .route(
            "/_sandbox/workspaces/settings",
            get(get_settings).put(put_settings),
        )
        .route("/_sandbox/workspaces/scripts", post(add_script))
        .route("/_sandbox/workspaces/run-phases", put(put_run_phases))
        .route("/_sandbox/workspaces/registry-modules", post(add_module))
        .route(
            "/_sandbox/workspaces/registry-modules/{id}/versions",
            post(add_module_version),
        )
}

type AdminResult = Result<Response, (StatusCode, String)>;

fn bad(msg: impl Into<String>) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, msg.into())
}

fn missing(msg: impl Into<String>) -> (StatusCode, String) {
    (StatusCode::NOT_FOUND, msg.into())
}

fn respond(r: AdminResult) -> Response {
    match r {
        Ok(r) => r,
        Err((status, msg)) => (status, axum::Json(json!({"errors": [msg]}))).into_response(),
    }
}

fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, (StatusCode, String)> {
    let b: &[u8] = if body.is_empty() { b"{}" } else { body };
    serde_json::from_slice(b).map_err(|e| bad(e.to_string()))
}

fn json_ok(v: Value) -> Response {
    (StatusCode::OK, axum::Json(v)).into_response()
}

/// Creates an organization with its owners team and default project; returns their ids.
pub fn create_org(state: &mut State, name: &str, email: &str) -> (String, String) {
    if let Some(o) = state.organizations.get(name) {
        return (o.owners_team.clone(), o.default_project.clone());
    }
    let now = chrono::Utc::now();
    let team = Team {
        id: new_id("team-"),
        organization: name.into(),
        name: "owners".into(),
        owners: true,
        manage_workspaces: true,
        manage_projects: true,
        ..Team::default()
    };
    let project = Project {
        id: new_id("prj-"),
        organization: name.into(),
        name: "Default Project".into(),
        created_at: now,
    };
    state.organizations.insert(
        name.into(),
        Organization {
            name: name.into(),
            external_id: new_id("org-"),
            email: email.into(),
            created_at: now,
            owners_team: team.id.clone(),
            default_project: project.id.clone(),
        },
    );
    let ids = (team.id.clone(), project.id.clone());
    state.teams.insert(team.id.clone(), team);
    state.projects.insert(project.id.clone(), project);
    ids
}

/// The ready-made organization: owners team with a user (`admin`) holding the root token.
pub fn ensure_root(state: &mut State, org: &str, root_token: &str) {
    let (owners, _) = create_org(state, org, "admin@quartet.invalid");
    if state.tokens.contains_key(root_token) {
        return;
    }
    let user = User {
        id: new_id("user-"),
        username: "admin".into(),
        email: "admin@quartet.invalid".into(),
    };
    if let Some(t) = state.teams.get_mut(&owners) {
        t.members.push(user.id.clone());
    }
    state.tokens.insert(
        root_token.into(),
        Token {
            id: new_id("at-"),
            principal: Principal::User {
                user: user.id.clone(),
            },
            created_at: chrono::Utc::now(),
            description: None,
            expired_at: None,
        },
    );
    state.users.insert(user.id.clone(), user);
}

#[derive(Deserialize)]
struct OrgBody {
    name: String,
    #[serde(default)]
    email: Option<String>,
}

async fn add_org(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: OrgBody = parse(&body)?;
        if !super::workspace::valid_name(&b.name) {
            return Err(bad("organization name: letters, numbers, - and _ only"));
        }
        let mut state = svc.lock();
        let email = b
            .email
            .unwrap_or_else(|| format!("{}@quartet.invalid", b.name));
        let (team, project) = create_org(&mut state, &b.name, &email);
        Ok(json_ok(
            json!({"name": b.name, "owners_team_id": team, "default_project_id": project}),
        ))
    })())
}

#[derive(Deserialize)]
struct ProjectBody {
    organization: String,
    name: String,
}

async fn add_project(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: ProjectBody = parse(&body)?;
        let mut state = svc.lock();
        if !state.organizations.contains_key(&b.organization) {
            return Err(missing("no such organization"));
        }
        let p = Project {
            id: new_id("prj-"),
            organization: b.organization,
            name: b.name,
            created_at: chrono::Utc::now(),
        };
        let id = p.id.clone();
        state.projects.insert(id.clone(), p);
        Ok(json_ok(json!({"id": id})))
    })())
}

#[derive(Deserialize, Default)]
struct TeamBody {
    #[serde(default)]
    organization: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    manage_workspaces: Option<bool>,
    #[serde(default)]
    manage_projects: Option<bool>,
    #[serde(default)]
    workspace_access: Option<BTreeMap<String, String>>,
    #[serde(default)]
    project_access: Option<BTreeMap<String, String>>,
    #[serde(default)]
    members: Option<Vec<String>>,
}

fn access_map(
    m: BTreeMap<String, String>,
) -> Result<BTreeMap<String, Access>, (StatusCode, String)> {
    m.into_iter()
        .map(|(k, v)| {
            Access::parse(&v)
                .map(|a| (k, a))
                .ok_or_else(|| bad(format!("unknown access level {v:?}")))
        })
        .collect()
}

fn apply_team(state: &State, team: &mut Team, b: TeamBody) -> Result<(), (StatusCode, String)> {
    if let Some(n) = b.name {
        team.name = n;
    }
    if let Some(v) = b.manage_workspaces {
        team.manage_workspaces = v;
    }
    if let Some(v) = b.manage_projects {
        team.manage_projects = v;
    }
    if let Some(m) = b.workspace_access {
        team.workspace_access = access_map(m)?;
    }
    if let Some(m) = b.project_access {
        team.project_access = access_map(m)?;
    }
    if let Some(m) = b.members {
        for u in &m {
            if !state.users.contains_key(u) {
                return Err(missing(format!("no such user {u}")));
            }
        }
        team.members = m;
    }
    Ok(())
}

async fn add_team(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: TeamBody = parse(&body)?;
        let mut state = svc.lock();
        let org = b
            .organization
            .clone()
            .ok_or_else(|| bad("organization is required"))?;
        if !state.organizations.contains_key(&org) {
            return Err(missing("no such organization"));
        }
        let mut team = Team {
            id: new_id("team-"),
            organization: org,
            ..Team::default()
        };
        if b.name.is_none() {
            return Err(bad("name is required"));
        }
        apply_team(&state, &mut team, b)?;
        let id = team.id.clone();
        state.teams.insert(id.clone(), team);
        Ok(json_ok(json!({"id": id})))
    })())
}

async fn update_team(AxState(svc): AxState<Svc>, Path(id): Path<String>, body: Bytes) -> Response {
    respond((|| {
        let b: TeamBody = parse(&body)?;
        let mut state = svc.lock();
        let mut team = state
            .teams
            .get(&id)
            .cloned()
            .ok_or_else(|| missing("no such team"))?;
        apply_team(&state, &mut team, b)?;
        state.teams.insert(id.clone(), team);
        Ok(json_ok(json!({"id": id})))
    })())
}

#[derive(Deserialize)]
struct UserBody {
    username: String,
    #[serde(default)]
    teams: Vec<String>,
    #[serde(default)]
    token: Option<String>,
}

async fn add_user(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: UserBody = parse(&body)?;
        let mut state = svc.lock();
        for t in &b.teams {
            if !state.teams.contains_key(t) {
                return Err(missing(format!("no such team {t}")));
            }
        }
        let user = User {
            id: new_id("user-"),
            email: format!("{}@quartet.invalid", b.username),
            username: b.username,
        };
        for t in &b.teams {
            if let Some(team) = state.teams.get_mut(t) {
                team.members.push(user.id.clone());
            }
        }
        let secret = b.token.unwrap_or_else(new_token_secret);
        if state.tokens.contains_key(&secret) {
            return Err(bad("token already in use"));
        }
        let tid = new_id("at-");
        state.tokens.insert(
            secret.clone(),
            Token {
                id: tid,
                principal: Principal::User {
                    user: user.id.clone(),
                },
                created_at: chrono::Utc::now(),
                description: None,
                expired_at: None,
            },
        );
        let id = user.id.clone();
        state.users.insert(id.clone(), user);
        Ok(json_ok(json!({"id": id, "token": secret})))
    })())
}

#[derive(Deserialize)]
struct TokenBody {
    kind: String,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    team: Option<String>,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default)]
    token: Option<String>,
}

async fn add_token(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: TokenBody = parse(&body)?;
        let mut state = svc.lock();
        let principal = match b.kind.as_str() {
            "user" => {
                let u = b.user.ok_or_else(|| bad("user is required"))?;
                if !state.users.contains_key(&u) {
                    return Err(missing("no such user"));
                }
                Principal::User { user: u }
            }
            "team" => {
                let t = b.team.ok_or_else(|| bad("team is required"))?;
                if !state.teams.contains_key(&t) {
                    return Err(missing("no such team"));
                }
                // A team has one token: a new one replaces the old (as in the real service).
                state
                    .tokens
                    .retain(|_, tok| tok.principal != Principal::Team { team: t.clone() });
                Principal::Team { team: t }
            }
            "organization" => {
                let o = b
                    .organization
                    .ok_or_else(|| bad("organization is required"))?;
                if !state.organizations.contains_key(&o) {
                    return Err(missing("no such organization"));
                }
                // One organization token per organization: a new one replaces the old.
                state.tokens.retain(|_, tok| {
                    tok.principal
                        != Principal::Organization {
                            organization: o.clone(),
                        }
                });
                Principal::Organization { organization: o }
            }
            other => return Err(bad(format!("unknown token kind {other:?}"))),
        };
        let secret = b.token.unwrap_or_else(new_token_secret);
        if state.tokens.contains_key(&secret) {
            return Err(bad("token already in use"));
        }
        let id = new_id("at-");
        state.tokens.insert(
            secret.clone(),
            Token {
                id: id.clone(),
                principal,
                created_at: chrono::Utc::now(),
                description: None,
                expired_at: None,
            },
        );
        Ok(json_ok(json!({"id": id, "token": secret})))
    })())
}

#[derive(Deserialize)]
struct OrgRef {
    organization: String,
}

async fn add_agent_pool(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: OrgRef = parse(&body)?;
        let mut state = svc.lock();
        if !state.organizations.contains_key(&b.organization) {
            return Err(missing("no such organization"));
        }
        let id = new_id("apool-");
        state.agent_pools.insert(id.clone(), b.organization);
        Ok(json_ok(json!({"id": id})))
    })())
}

#[derive(Deserialize)]
struct OauthTokenBody {
    organization: String,
    #[serde(default)]
    id: Option<String>,
}

async fn add_oauth_token(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: OauthTokenBody = parse(&body)?;
        let mut state = svc.lock();
        if !state.organizations.contains_key(&b.organization) {
            return Err(missing("no such organization"));
        }
        // A given id is kept, so an example can name the VCS connection `quartet dev` seeds.
        let id =
            b.id.filter(|i| i.starts_with("ot-"))
                .unwrap_or_else(|| new_id("ot-"));
        state.oauth_tokens.insert(id.clone(), b.organization);
        Ok(json_ok(json!({"id": id})))
    })())
}

async fn get_settings(AxState(svc): AxState<Svc>) -> Response {
    let s = svc.lock().settings.clone();
    json_ok(serde_json::to_value(s).unwrap_or(Value::Null))
}

#[derive(Deserialize)]
struct SettingsBody {
    #[serde(default)]
    step_ms: Option<u64>,
    #[serde(default)]
    force_cancel_cooloff_ms: Option<u64>,
    #[serde(default)]
    engine_versions: Option<Vec<String>>,
}

async fn put_settings(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: SettingsBody = parse(&body)?;
        let mut state = svc.lock();
        if let Some(v) = b.step_ms {
            state.settings.step_ms = v;
        }
        if let Some(v) = b.force_cancel_cooloff_ms {
            state.settings.force_cancel_cooloff_ms = v;
        }
        if let Some(v) = b.engine_versions {
            if v.is_empty() || v.iter().any(|s| super::versions::parse(s).is_none()) {
                return Err(bad("engine_versions must be a non-empty list of versions"));
            }
            state.settings.engine_versions = v;
        }
        Ok(json_ok(
            serde_json::to_value(&state.settings).unwrap_or(Value::Null),
        ))
    })())
}

#[derive(Deserialize)]
struct ScriptBody {
    workspace: String,
    #[serde(flatten)]
    script: Script,
}

async fn add_script(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: ScriptBody = parse(&body)?;
        let check = |v: &Option<String>, allowed: &[&str]| match v {
            Some(s) if !allowed.contains(&s.as_str()) => {
                Err(bad(format!("{s:?} is not one of {allowed:?}")))
            }
            _ => Ok(()),
        };
        check(&b.script.plan, &["changes", "no-changes", "errored"])?;
        check(&b.script.apply, &["ok", "errored"])?;
        check(&b.script.cancel, &["ok", "ignore"])?;
        let mut state = svc.lock();
        if !state.workspaces.contains_key(&b.workspace) {
            return Err(missing("no such workspace"));
        }
        state.scripts.entry(b.workspace).or_default().push(b.script);
        Ok(StatusCode::NO_CONTENT.into_response())
    })())
}

#[derive(Deserialize)]
struct ModuleBody {
    #[serde(default)]
    id: Option<String>,
    organization: String,
    name: String,
    provider: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default = "yes")]
    no_code_ready: bool,
    #[serde(default)]
    versions: Vec<ModuleVersion>,
}

fn yes() -> bool {
    true
}

async fn add_module(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: ModuleBody = parse(&body)?;
        let mut state = svc.lock();
        if !state.organizations.contains_key(&b.organization) {
            return Err(missing("no such organization"));
        }
        for v in &b.versions {
            if super::versions::parse(&v.version).is_none() {
                return Err(bad(format!("invalid version {:?}", v.version)));
            }
        }
        if let Some(id) = &b.id {
            let tail = id.strip_prefix("mod-").unwrap_or_default();
            if tail.is_empty() || !tail.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(bad("id must be mod- followed by letters and digits"));
            }
        }
        let m = RegistryModule {
            id: b.id.clone().unwrap_or_else(|| new_id("mod-")),
            namespace: b.namespace.unwrap_or_else(|| b.organization.clone()),
            organization: b.organization,
            name: b.name,
            provider: b.provider,
            no_code_ready: b.no_code_ready,
            versions: b.versions,
            created_at: chrono::Utc::now(),
        };
        let id = m.id.clone();
        state.registry_modules.insert(id.clone(), m);
        Ok(json_ok(json!({"id": id})))
    })())
}

async fn add_module_version(
    AxState(svc): AxState<Svc>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    respond((|| {
        let v: ModuleVersion = parse(&body)?;
        if super::versions::parse(&v.version).is_none() {
            return Err(bad(format!("invalid version {:?}", v.version)));
        }
        let mut state = svc.lock();
        let m = state
            .registry_modules
            .get_mut(&id)
            .ok_or_else(|| missing("no such module"))?;
        m.versions.retain(|x| x.version != v.version);
        m.versions.push(v);
        Ok(StatusCode::NO_CONTENT.into_response())
    })())
}

#[derive(Deserialize)]
struct RunPhasesBody {
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    organization: Option<String>,
    #[serde(flatten)]
    phases: RunPhases,
}

async fn put_run_phases(AxState(svc): AxState<Svc>, body: Bytes) -> Response {
    respond((|| {
        let b: RunPhasesBody = parse(&body)?;
        let mut state = svc.lock();
        let key = match (b.workspace, b.organization) {
            (Some(w), None) if state.workspaces.contains_key(&w) => w,
            (Some(_), None) => return Err(missing("no such workspace")),
            (None, Some(o)) if state.organizations.contains_key(&o) => o,
            (None, Some(_)) => return Err(missing("no such organization")),
            _ => return Err(bad("give exactly one of workspace and organization")),
        };
        state.run_phases.insert(key, b.phases);
        Ok(json_ok(
            serde_json::to_value(b.phases).unwrap_or(Value::Null),
        ))
    })())
}
