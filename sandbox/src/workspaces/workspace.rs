//! Workspaces (spec B §2.1, §2.2, §4.1) and remote state consumers (§4.2).
//!
//! Beyond the spec's rows the sandbox serves what the real API has and clients call: show by id
//! and by organization/name, delete and safe-delete (409 while the workspace manages
//! resources), lock/unlock/force-unlock, and the workspace variables list. `source-name` and
//! `source-url` are create-only: on update they are ignored, as the real service ignores them.
//!
//! Corrections after the audit against the real service (issue 22; sources: go-tfe and its
//! integration tests against the live service, the production Terraform provider
//! `terraform-provider-tfe`, the archived API docs), each pinned by a test in
//! `tests/workspaces_attributes.rs`:
//! * `setting-overwrites` is real: a workspace created without `execution-mode` follows the
//!   organization's `default-execution-mode` (and default agent pool) and reports
//!   `{"execution-mode": false, "agent-pool": false}`; an explicit mode sets both true;
//!   sending `false` reverts to the default (the provider sends `{false, false}` when
//!   `execution_mode` is unset). `PATCH /organizations/:org` changes the default and the
//!   inheriting workspaces follow.
//! * `auto-apply-run-trigger`, `auto-destroy-at`, `auto-destroy-activity-duration`,
//!   `project-remote-state` and `inherits-project-auto-destroy` are stored and echoed.
//! * `agent-pool-id: ""` means no pool (go-tfe sends it for an unset pointer) and is accepted
//!   with `remote` and `local`.
//! * A PATCH carrying only `trigger-patterns` on a workspace with prefixes succeeds and replaces
//!   them (and the reverse); only a request carrying both non-empty is 422.
//! * `vcs-repo.github-app-installation-id` (`ghain-…`) is the alternative to
//!   `oauth-token-id`; the other one is then `null`.
//! * Organization names in paths are case-insensitive (rewritten by the service middleware,
//!   see [`super::orgs::canonical_org_uri`]).
//! * `relationships.tag-bindings` on create and update sets the key/value tags (see
//!   [`super::tags`]).
//! * Typed clients: `working-directory` is `null` when unset; `no-code-upgrade-available`
//!   appears only on workspaces created from a no-code module; `locked-reason` is always
//!   present (the reason given to `actions/lock`, else `""`); pagination links are absolute
//!   URLs (see [`super::jsonapi::paginate`]).

use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::auth::{self, Caller};
use super::jsonapi::*;
use super::model::*;
use super::orgs::{org_json, visible_org};
use super::{query, run, tags, versions, Svc};

pub fn routes() -> Router<Svc> {
    Router::new()
        .route(
            "/api/v2/organizations/{org}/workspaces",
            get(list).post(create),
        )
        .route(
            "/api/v2/organizations/{org}/workspaces/{name}",
            get(read_by_name)
                .patch(update_by_name)
                .put(update_by_name)
                .delete(delete_by_name),
        )
        .route(
            "/api/v2/organizations/{org}/workspaces/{name}/actions/safe-delete",
            post(safe_delete_by_name),
        )
        .route(
            "/api/v2/workspaces/{id}",
            get(read_by_id)
                .patch(update_by_id)
                .put(update_by_id)
                .delete(delete_by_id),
        )
        .route(
            "/api/v2/workspaces/{id}/actions/safe-delete",
            post(safe_delete_by_id),
        )
        .route("/api/v2/workspaces/{id}/actions/lock", post(lock))
        .route("/api/v2/workspaces/{id}/actions/unlock", post(unlock))
        .route(
            "/api/v2/workspaces/{id}/actions/force-unlock",
            post(force_unlock),
        )
        .route(
            "/api/v2/workspaces/{id}/vars",
            get(list_vars).post(create_var),
        )
        .route(
            "/api/v2/workspaces/{id}/vars/{var}",
            get(read_var)
                .patch(update_var)
                .put(update_var)
                .delete(delete_var),
        )
        .route(
            "/api/v2/workspaces/{id}/relationships/remote-state-consumers",
            get(list_consumers)
                .patch(replace_consumers)
                .put(replace_consumers)
                .post(add_consumers)
                .delete(remove_consumers),
        )
}

/// Letters, numbers, `-` and `_`; at most 90 characters like the real service.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 90
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Workspace id from organization and name, 404 when absent.
fn id_by_name(state: &State, org: &str, name: &str) -> ApiResult<String> {
    state
        .workspaces
        .values()
        .find(|w| w.organization == org && w.name == name)
        .map(|w| w.id.clone())
        .ok_or_else(ApiError::not_found)
}

/// The run holding the workspace's lock: the oldest run that left `pending` and is not final.
/// Plan-only (speculative) runs never lock.
pub fn locking_run<'a>(state: &'a State, ws_id: &str) -> Option<&'a Run> {
    state
        .runs
        .values()
        .filter(|r| r.workspace == ws_id && !r.plan_only && !r.is_final() && r.status != "pending")
        .min_by_key(|r| r.created_at)
}

pub fn is_locked(state: &State, ws: &Workspace) -> bool {
    ws.manual_lock.is_some() || locking_run(state, &ws.id).is_some()
}

fn latest_run<'a>(state: &'a State, ws_id: &str, include_speculative: bool) -> Option<&'a Run> {
    state
        .runs
        .values()
        .filter(|r| r.workspace == ws_id && (include_speculative || !r.plan_only))
        .max_by_key(|r| r.created_at)
}

pub fn self_link(ws: &Workspace) -> String {
    format!(
        "/api/v2/organizations/{}/workspaces/{}",
        ws.organization, ws.name
    )
}

fn permissions(state: &State, caller: &Caller, ws: &Workspace) -> Value {
    let a = auth::workspace_access(state, caller, ws);
    let runs_ok = !caller.is_org_token();
    let read = a >= Access::Read;
    let plan = a >= Access::Plan;
    let write = a >= Access::Write;
    let admin = a >= Access::Admin;
    json!({
        "can-create-state-versions": write,
        "can-destroy": admin,
        "can-force-unlock": admin,
        "can-lock": write,
        "can-manage-run-tasks": admin,
        "can-manage-tags": admin,
        "can-manage-assessments": admin,
        "can-queue-apply": write && runs_ok,
        "can-queue-destroy": write && runs_ok,
        "can-queue-run": plan && runs_ok,
        "can-read-settings": read,
        "can-read-state-versions": read,
        "can-read-variable": read,
        "can-unlock": write,
        "can-update": admin,
        "can-update-variable": write,
        "can-read-assessment-result": read,
        "can-read-run-state-outputs": read,
        "can-force-delete": admin,
    })
}

fn vcs_json(v: &VcsRepo) -> Value {
    let oauth = if v.oauth_token_id.is_empty() {
        Value::Null
    } else {
        json!(v.oauth_token_id)
    };
    json!({
        "github-app-installation-id": v.github_app_installation_id,
        "branch": v.branch,
        "display-identifier": v.identifier,
        "identifier": v.identifier,
        "ingress-submodules": v.ingress_submodules,
        "oauth-token-id": oauth,
        "repository-http-url": format!("https://vcs.quartet.invalid/{}", v.identifier),
        "service-provider": "github",
        "tags-regex": v.tags_regex,
        "webhook-url": format!("https://vcs.quartet.invalid/webhooks/vcs/{}", v.oauth_token_id),
    })
}

pub fn no_code_upgrade_available(state: &State, ws: &Workspace) -> bool {
    ws.no_code.as_ref().is_some_and(|nc| {
        state
            .no_code_modules
            .get(&nc.no_code_module)
            .is_some_and(|m| {
                let pinned = super::nocode::pinned_version(state, m);
                pinned.is_some_and(|p| p != nc.version)
            })
    })
}

/// The workspace resource as the caller sees it (§2.2).
pub fn workspace_json(state: &State, caller: &Caller, ws: &Workspace) -> Value {
    let runs: Vec<&Run> = state
        .runs
        .values()
        .filter(|r| r.workspace == ws.id)
        .collect();
    let run_failures = runs.iter().filter(|r| r.status == "errored").count();
    let current_run = latest_run(state, &ws.id, false);
    let latest = latest_run(state, &ws.id, true);
    let locked_by = if let Some(r) = locking_run(state, &ws.id) {
        json!({"data": {"id": r.id, "type": "runs"}})
    } else if let Some(who) = &ws.manual_lock {
        let kind = if who.starts_with("team-") {
            "teams"
        } else {
            "users"
        };
        json!({"data": {"id": who, "type": kind}})
    } else {
        json!({"data": null})
    };
    let tag_names: Vec<String> = ws
        .tags
        .iter()
        .filter_map(|t| state.tags.get(t))
        .map(|t| t.name.clone())
        .collect();
    let mut attrs = json!({
        "actions": {"is-destroyable": true},
        "agent-pool-id": ws.agent_pool_id,
        "allow-destroy-plan": ws.allow_destroy_plan,
        "apply-duration-average": null,
        "assessments-enabled": ws.drift_detection,
        "auto-apply": ws.auto_apply,
        "auto-apply-run-trigger": ws.extra.auto_apply_run_trigger,
        "auto-destroy-at": ws.extra.auto_destroy_at,
        "auto-destroy-activity-duration": ws.extra.auto_destroy_activity_duration,
        "can-queue-destroy-plan": ws.allow_destroy_plan,
        "created-at": iso(&ws.created_at),
        "description": ws.description,
        "drift-detection": ws.drift_detection,
        "environment": "default",
        "engine-version": ws.engine_version,
        "execution-mode": ws.execution_mode,
        "file-triggers-enabled": ws.file_triggers_enabled,
        "global-remote-state": ws.global_remote_state,
        "last-assessment-result-at": null,
        "latest-change-at": iso(&ws.latest_change_at),
    });
    let more = json!({
        "locked": is_locked(state, ws),
        "locked-reason": if ws.manual_lock.is_some() { ws.extra.locked_reason.clone().unwrap_or_default() } else { String::new() },
        "project-remote-state": ws.extra.project_remote_state,
        "inherits-project-auto-destroy": ws.extra.inherits_project_auto_destroy,
        "name": ws.name,
        "operations": ws.execution_mode != "local",
        "permissions": permissions(state, caller, ws),
        "plan-duration-average": null,
        "policy-check-failures": null,
        "queue-all-runs": ws.queue_all_runs,
        "resource-count": ws.resource_count,
        "run-failures": run_failures,
        "source": if ws.no_code.is_some() { "tfe-module" } else { "tfe-api" },
        "source-name": ws.source_name,
        "source-url": ws.source_url,
        "speculative-enabled": ws.speculative_enabled,
        "structured-run-output-enabled": ws.structured_run_output_enabled,
        "tag-names": tag_names,
        "terraform-version": ws.engine_version,
        "trigger-prefixes": ws.trigger_prefixes,
        "trigger-patterns": ws.trigger_patterns,
        "updated-at": iso(&ws.updated_at),
        "vcs-repo": ws.vcs_repo.as_ref().map(vcs_json),
        "vcs-repo-identifier": ws.vcs_repo.as_ref().map(|v| v.identifier.clone()),
        "working-directory": if ws.working_directory.is_empty() { Value::Null } else { json!(ws.working_directory) },
        "workspace-kpis-runs-count": runs.len(),
        "setting-overwrites": {
            "execution-mode": ws.extra.overwrites_execution_mode,
            "agent-pool": ws.extra.overwrites_agent_pool,
        },
    });
    if let (Some(a), Value::Object(m)) = (attrs.as_object_mut(), more) {
        a.extend(m);
    }
    let mut rels = json!({
        "agent-pool": rel_one("agent-pools", ws.agent_pool_id.as_deref()),
        "current-configuration-version": {
            "data": ws.current_configuration_version.as_ref().map(|c| json!({"id": c, "type": "configuration-versions"})),
            "links": {"related": format!("/api/v2/workspaces/{}/current-configuration-version", ws.id)},
        },
        "current-run": {
            "data": current_run.map(|r| json!({"id": r.id, "type": "runs"})),
            "links": {"related": format!("/api/v2/workspaces/{}/current-run", ws.id)},
        },
        "current-state-version": {"data": null, "links": {"related": format!("/api/v2/workspaces/{}/current-state-version", ws.id)}},
        "current-assessment-result": {"data": null},
        "latest-run": {"data": latest.map(|r| json!({"id": r.id, "type": "runs"}))},
        "locked-by": locked_by,
        "organization": rel_one("organizations", Some(&ws.organization)),
        "outputs": {"data": [], "links": {"related": format!("/api/v2/workspaces/{}/current-state-version-outputs", ws.id)}},
        "readme": {"data": null},
        "remote-state-consumers": {"links": {"related": format!("/api/v2/workspaces/{}/relationships/remote-state-consumers", ws.id)}},
        "project": rel_one("projects", Some(&ws.project)),
        "tags": rel_many("tags", ws.tags.clone()),
        "tag-bindings": {"links": {"related": format!("/api/v2/workspaces/{}/tag-bindings", ws.id)}},
        "effective-tag-bindings": {"links": {"related": format!("/api/v2/workspaces/{}/effective-tag-bindings", ws.id)}},
        "vars": rel_many("vars", ws.vars.iter().map(|v| v.id.clone())),
    });
    if let Some(nc) = &ws.no_code {
        attrs["source-module-id"] = json!(nc.registry_module);
        attrs["no-code-upgrade-available"] = json!(no_code_upgrade_available(state, ws));
        attrs["auto-destroy-status"] = Value::Null;
        rels["no-code-module-version"] =
            json!({"data": {"id": nc.version_id, "type": "no-code-module-versions"}});
    }
    json!({
        "id": ws.id,
        "type": "workspaces",
        "attributes": attrs,
        "relationships": rels,
        "links": {
            "self": self_link(ws),
            "self-html": format!("/app/{}/workspaces/{}", ws.organization, ws.name),
        },
    })
}

const WORKSPACE_INCLUDES: &[&str] = &[
    "organization",
    "project",
    "current_configuration_version",
    "current_configuration_version.ingress_attributes",
    "current_run",
    "current_run.plan",
    "current_run.configuration_version",
    "current_run.configuration_version.ingress_attributes",
    "current_state_version",
    "effective_tag_bindings",
    "locked_by",
    "readme",
    "outputs",
];

/// Checks `include` values; unknown ones are 400 like the real service.
pub fn check_includes(includes: &[String], allowed: &[&str]) -> ApiResult<()> {
    for i in includes {
        if !allowed.contains(&i.as_str()) {
            return Err(ApiError::bad_request(format!(
                "Invalid include parameter: {i}"
            )));
        }
    }
    Ok(())
}

fn push_unique(out: &mut Vec<Value>, v: Value) {
    if v.is_null() {
        return;
    }
    if !out
        .iter()
        .any(|o| o["id"] == v["id"] && o["type"] == v["type"])
    {
        out.push(v);
    }
}

/// The `included` records for one workspace.
fn workspace_included(
    state: &State,
    caller: &Caller,
    ws: &Workspace,
    includes: &[String],
    out: &mut Vec<Value>,
) {
    let current_run = latest_run(state, &ws.id, false);
    for inc in includes {
        match inc.as_str() {
            "organization" => {
                if let Some(o) = state.organizations.get(&ws.organization) {
                    push_unique(out, org_json(state, caller, o));
                }
            }
            "project" => {
                if let Some(p) = state.projects.get(&ws.project) {
                    push_unique(out, super::orgs::project_json(state, p));
                }
            }
            "current_configuration_version"
            | "current_configuration_version.ingress_attributes" => {
                if let Some(cv) = ws
                    .current_configuration_version
                    .as_ref()
                    .and_then(|c| state.configuration_versions.get(c))
                {
                    push_unique(out, run::cv_json(cv));
                }
            }
            "current_run" => {
                if let Some(r) = current_run {
                    push_unique(out, run::run_json(state, caller, r));
                }
            }
            "current_run.plan" => {
                if let Some(r) = current_run {
                    push_unique(out, run::run_json(state, caller, r));
                    push_unique(out, run::plan_json(r));
                }
            }
            "current_run.configuration_version"
            | "current_run.configuration_version.ingress_attributes" => {
                if let Some(r) = current_run {
                    push_unique(out, run::run_json(state, caller, r));
                    if let Some(cv) = state.configuration_versions.get(&r.configuration_version) {
                        push_unique(out, run::cv_json(cv));
                    }
                }
            }
            "locked_by" => {
                if let Some(r) = locking_run(state, &ws.id) {
                    push_unique(out, run::run_json(state, caller, r));
                } else if let Some(u) = ws.manual_lock.as_ref().and_then(|u| state.users.get(u)) {
                    push_unique(out, super::orgs::user_json(u));
                }
            }
            _ => {}
        }
    }
}

fn single(state: &State, caller: &Caller, ws: &Workspace, includes: &[String]) -> Value {
    let mut included = Vec::new();
    workspace_included(state, caller, ws, includes, &mut included);
    let mut doc = json!({"data": workspace_json(state, caller, ws)});
    if !included.is_empty() {
        doc["included"] = Value::Array(included);
    }
    doc
}

async fn list(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(org): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        let includes = params.includes();
        check_includes(&includes, WORKSPACE_INCLUDES)?;
        let lower_set = |key: &str| -> Vec<String> {
            params
                .get(key)
                .map(|s| {
                    s.split(',')
                        .map(|t| t.trim().to_lowercase())
                        .filter(|t| !t.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        let want_tags = lower_set("search[tags]");
        let exclude_tags = lower_set("search[exclude-tags]");
        let name_q = params.get("search[name]").map(str::to_lowercase);
        let wildcard = params.get("search[wildcard-name]").map(str::to_string);
        let project = params.get("filter[project][id]").map(str::to_string);
        let run_status: Option<Vec<String>> = params
            .get("filter[current-run][status]")
            .map(|s| s.split(',').map(str::to_string).collect());
        let mut found: Vec<&Workspace> = state
            .workspaces
            .values()
            .filter(|w| w.organization == org)
            .filter(|w| auth::workspace_access(state, caller, w) >= Access::Read)
            .filter(|w| {
                name_q
                    .as_ref()
                    .is_none_or(|q| w.name.to_lowercase().contains(q))
            })
            .filter(|w| wildcard.as_ref().is_none_or(|p| wildcard_match(p, &w.name)))
            .filter(|w| project.as_ref().is_none_or(|p| &w.project == p))
            .filter(|w| {
                run_status.as_ref().is_none_or(|st| {
                    latest_run(state, &w.id, false).is_some_and(|r| st.contains(&r.status))
                })
            })
            .filter(|w| {
                let names = tags::names_of(state, w);
                want_tags.iter().all(|t| names.contains(t))
                    && !exclude_tags.iter().any(|t| names.contains(t))
            })
            .collect();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        let (number, size) = params.page();
        let mut included = Vec::new();
        for w in found.iter().skip((number - 1) * size).take(size) {
            workspace_included(state, caller, w, &includes, &mut included);
        }
        let items = found
            .iter()
            .map(|w| workspace_json(state, caller, w))
            .collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/organizations/{org}/workspaces"),
            included,
        )))
    })
}

/// `search[wildcard-name]`: `*` at either end matches any prefix or suffix.
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let p = pattern.to_lowercase();
    let n = name.to_lowercase();
    match (p.strip_prefix('*'), p.strip_suffix('*')) {
        (Some(rest), _) if rest.ends_with('*') => n.contains(rest.trim_end_matches('*')),
        (Some(rest), _) => n.ends_with(rest),
        (None, Some(rest)) => n.starts_with(rest),
        (None, None) => n == p,
    }
}

async fn read_by_id(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let includes = params.includes();
        let ws = auth::readable(state, caller, &id)?;
        check_includes(&includes, WORKSPACE_INCLUDES)?;
        Ok(ok(single(state, caller, ws, &includes)))
    })
}

async fn read_by_name(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path((org, name)): Path<(String, String)>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let id = id_by_name(state, &org, &name)?;
        let includes = params.includes();
        let ws = auth::readable(state, caller, &id)?;
        check_includes(&includes, WORKSPACE_INCLUDES)?;
        Ok(ok(single(state, caller, ws, &includes)))
    })
}

/// Settings parsed from a create or update body, applied over `ws`.
fn apply_attributes(
    state: &mut State,
    ws: &mut Workspace,
    data: &Map<String, Value>,
    creating: bool,
) -> ApiResult<()> {
    let a = Attrs::of(data)?;
    if let Some(name) = a.string("name")? {
        if !valid_name(&name) {
            return Err(ApiError::invalid(
                "/data/attributes/name",
                "Name can only include letters, numbers, -, and _.",
            ));
        }
        if state
            .workspaces
            .values()
            .any(|w| w.organization == ws.organization && w.name == name && w.id != ws.id)
        {
            return Err(ApiError::invalid(
                "/data/attributes/name",
                "Name has already been taken",
            ));
        }
        ws.name = name;
    } else if creating || a.raw("name").is_some_and(Value::is_null) {
        return Err(ApiError::invalid(
            "/data/attributes/name",
            "Name can't be blank",
        ));
    }

    // execution-mode, operations and agent-pool-id.
    let mode = a.string("execution-mode")?;
    let operations = a.bool("operations")?;
    if mode.is_some() && operations.is_some() {
        return Err(ApiError::invalid(
            "/data/attributes/operations",
            "operations is deprecated and cannot be specified when execution mode is used",
        ));
    }
    // `agent-pool-id: ""` means no pool (what typed clients send for an unset pointer).
    let pool = a.string("agent-pool-id")?.filter(|p| !p.is_empty());
    let defaults = state
        .org_defaults
        .get(&ws.organization)
        .cloned()
        .unwrap_or_default();
    let default_mode = if defaults.execution_mode.is_empty() {
        "remote".to_string()
    } else {
        defaults.execution_mode.clone()
    };
    let explicit = mode.is_some() || operations.is_some();
    let mut new_mode = match (&mode, operations) {
        (Some(m), _) => {
            if !["remote", "local", "agent"].contains(&m.as_str()) {
                return Err(ApiError::invalid(
                    "/data/attributes/execution-mode",
                    "Execution mode must be one of remote, local, agent",
                ));
            }
            m.clone()
        }
        (None, Some(true)) => "remote".to_string(),
        (None, Some(false)) => "local".to_string(),
        (None, None) if creating => default_mode.clone(),
        (None, None) => ws.execution_mode.clone(),
    };
    // setting-overwrites: a workspace created without an execution mode follows the
    // organization's default ({false, false}); an explicit mode or pool overwrites it; sending
    // `false` reverts to the default.
    if creating {
        ws.extra.overwrites_execution_mode = explicit;
        ws.extra.overwrites_agent_pool = explicit || pool.is_some();
    } else if explicit {
        ws.extra.overwrites_execution_mode = true;
        ws.extra.overwrites_agent_pool = true;
    } else if pool.is_some() {
        ws.extra.overwrites_agent_pool = true;
    }
    match a.raw("setting-overwrites") {
        None | Some(Value::Null) => {}
        Some(Value::Object(o)) => {
            for (k, field) in [("execution-mode", 0), ("agent-pool", 1)] {
                match o.get(k) {
                    None | Some(Value::Null) => {}
                    Some(Value::Bool(b)) => {
                        if field == 0 {
                            ws.extra.overwrites_execution_mode = *b;
                        } else {
                            ws.extra.overwrites_agent_pool = *b;
                        }
                    }
                    Some(_) => {
                        return Err(ApiError::invalid(
                            &format!("/data/attributes/setting-overwrites/{k}"),
                            "must be a boolean",
                        ))
                    }
                }
            }
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "/data/attributes/setting-overwrites",
                "setting-overwrites must be an object",
            ))
        }
    }
    let inherits = !ws.extra.overwrites_execution_mode;
    if inherits {
        new_mode = default_mode.clone();
    }
    if pool.is_some() {
        if operations.is_some() {
            return Err(ApiError::invalid(
                "/data/attributes/agent-pool-id",
                "Agent pool cannot be specified together with operations",
            ));
        }
        if new_mode != "agent" {
            return Err(ApiError::invalid(
                "/data/attributes/agent-pool-id",
                format!("Agent pool must not be specified unless using 'agent' execution mode (execution mode is {new_mode:?})"),
            ));
        }
    }
    if new_mode == "agent" {
        let p = if inherits && !ws.extra.overwrites_agent_pool {
            defaults.agent_pool_id.clone()
        } else {
            pool.clone().or_else(|| ws.agent_pool_id.clone())
        };
        match p {
            None => {
                return Err(ApiError::invalid(
                    "/data/attributes/agent-pool-id",
                    "Agent pool must be specified when using 'agent' execution mode",
                ))
            }
            Some(p) => {
                if state.agent_pools.get(&p) != Some(&ws.organization) {
                    return Err(ApiError::invalid(
                        "/data/attributes/agent-pool-id",
                        "Agent pool not found",
                    ));
                }
                ws.agent_pool_id = Some(p);
            }
        }
    } else {
        ws.agent_pool_id = None;
    }
    ws.execution_mode = new_mode;

    macro_rules! set_bool {
        ($key:literal, $field:ident) => {
            if let Some(v) = a.bool($key)? {
                ws.$field = v;
            }
        };
    }
    set_bool!("allow-destroy-plan", allow_destroy_plan);
    set_bool!("auto-apply", auto_apply);
    set_bool!("file-triggers-enabled", file_triggers_enabled);
    set_bool!("global-remote-state", global_remote_state);
    set_bool!("queue-all-runs", queue_all_runs);
    set_bool!("speculative-enabled", speculative_enabled);
    set_bool!(
        "structured-run-output-enabled",
        structured_run_output_enabled
    );
    if let Some(v) = a
        .bool("drift-detection")?
        .or(a.bool("assessments-enabled")?)
    {
        ws.drift_detection = v;
    }
    if a.raw("description").is_some() {
        ws.description = a.string("description")?;
    }
    if a.raw("working-directory").is_some() {
        ws.working_directory = a.string("working-directory")?.unwrap_or_default();
    }
    if let Some(v) = a.bool("auto-apply-run-trigger")? {
        ws.extra.auto_apply_run_trigger = v;
    }
    if let Some(v) = a.bool("project-remote-state")? {
        ws.extra.project_remote_state = v;
    }
    if let Some(v) = a.bool("inherits-project-auto-destroy")? {
        ws.extra.inherits_project_auto_destroy = v;
    }
    if a.raw("auto-destroy-at").is_some() {
        let v = a.string("auto-destroy-at")?.filter(|s| !s.is_empty());
        if let Some(t) = &v {
            if chrono::DateTime::parse_from_rfc3339(t).is_err() {
                return Err(ApiError::invalid(
                    "/data/attributes/auto-destroy-at",
                    "Auto destroy at must be an ISO 8601 timestamp",
                ));
            }
        }
        ws.extra.auto_destroy_at = v;
    }
    if a.raw("auto-destroy-activity-duration").is_some() {
        let v = a
            .string("auto-destroy-activity-duration")?
            .filter(|s| !s.is_empty());
        if let Some(d) = &v {
            let digits = d.trim_end_matches(['d', 'h']);
            let ok = d.len() > digits.len()
                && d.len() == digits.len() + 1
                && !digits.is_empty()
                && digits.len() <= 4
                && digits.chars().all(|c| c.is_ascii_digit());
            if !ok {
                return Err(ApiError::invalid(
                    "/data/attributes/auto-destroy-activity-duration",
                    "Auto destroy activity duration must be a number of days or hours, e.g. 14d or 2h",
                ));
            }
        }
        ws.extra.auto_destroy_activity_duration = v;
    }
    if creating {
        ws.source_name = a.string("source-name")?;
        ws.source_url = a.string("source-url")?;
    }
    // Only a request carrying both (non-empty) is refused; setting one replaces the other.
    let prefixes = a.strings("trigger-prefixes")?;
    let patterns = a.strings("trigger-patterns")?;
    if prefixes.as_ref().is_some_and(|p| !p.is_empty())
        && patterns.as_ref().is_some_and(|p| !p.is_empty())
    {
        return Err(ApiError::invalid(
            "/data/attributes/trigger-patterns",
            "Only one of trigger prefixes or trigger patterns can be set",
        ));
    }
    if let Some(v) = prefixes {
        if !v.is_empty() {
            ws.trigger_patterns.clear();
        }
        ws.trigger_prefixes = v;
    }
    if let Some(v) = patterns {
        if !v.is_empty() {
            ws.trigger_prefixes.clear();
        }
        ws.trigger_patterns = v;
    }

    // engine-version (also accepted as terraform-version, the real service's name).
    let version = a
        .string("engine-version")?
        .or(a.string("terraform-version")?);
    if let Some(v) = version {
        let avail = &state.settings.engine_versions;
        let known = if v == "latest" {
            versions::newest(avail)
        } else {
            versions::resolve(&v, avail)
        };
        if known.is_none() {
            let key = if a.has("engine-version") {
                "engine-version"
            } else {
                "terraform-version"
            };
            return Err(ApiError::invalid(
                &pointer(key),
                format!("Version {v:?} is not an available version"),
            ));
        }
        ws.engine_version = v;
    }
    if ws.drift_detection && ws.execution_mode != "remote" {
        return Err(ApiError::invalid(
            "/data/attributes/drift-detection",
            "Drift detection is only available for workspaces using remote execution mode",
        ));
    }

    // vcs-repo.
    if let Some(raw) = a.raw("vcs-repo") {
        match raw {
            Value::Null if creating => {}
            Value::Null => ws.vcs_repo = None,
            // python-tfe sends `"vcs-repo": {}` on every create and update without a repository:
            // an empty object changes nothing.
            Value::Object(o) if o.is_empty() => {}
            Value::Object(o) => {
                let v = Attrs::from_map(o);
                let ptr = |k: &str| format!("/data/attributes/vcs-repo/{k}");
                let str_of = |k: &str| -> ApiResult<Option<String>> {
                    match v.raw(k) {
                        None | Some(Value::Null) => Ok(None),
                        Some(Value::String(s)) => Ok(Some(s.clone())),
                        Some(_) => Err(ApiError::invalid(&ptr(k), format!("{k} must be a string"))),
                    }
                };
                let oauth = str_of("oauth-token-id")?.filter(|s| !s.is_empty());
                let gha = str_of("github-app-installation-id")?.filter(|s| !s.is_empty());
                if oauth.is_some() && gha.is_some() {
                    return Err(ApiError::invalid(
                        &ptr("github-app-installation-id"),
                        "Only one of oauth-token-id or github-app-installation-id can be set",
                    ));
                }
                let connection = oauth.clone().or(gha.clone());
                let mut repo =
                    match (&ws.vcs_repo, &connection, &ident_of(&v)?) {
                        (Some(existing), _, _) => existing.clone(),
                        (None, Some(_), Some(i)) => VcsRepo {
                            oauth_token_id: String::new(),
                            identifier: i.clone(),
                            branch: String::new(),
                            ingress_submodules: false,
                            tags_regex: None,
                            github_app_installation_id: None,
                        },
                        (None, None, _) => return Err(ApiError::invalid(
                            &ptr("oauth-token-id"),
                            "VCS repository requires oauth-token-id or github-app-installation-id",
                        )),
                        (None, _, None) => {
                            return Err(ApiError::invalid(
                                &ptr("identifier"),
                                "VCS repository requires identifier",
                            ))
                        }
                    };
                let ident = ident_of(&v)?;
                if let Some(o) = oauth {
                    if state.oauth_tokens.get(&o) != Some(&ws.organization) {
                        return Err(ApiError::invalid(
                            &ptr("oauth-token-id"),
                            "OAuth token not found",
                        ));
                    }
                    repo.oauth_token_id = o;
                    repo.github_app_installation_id = None;
                }
                if let Some(g) = gha {
                    if !g.starts_with("ghain-") {
                        return Err(ApiError::invalid(
                            &ptr("github-app-installation-id"),
                            "GitHub App installation not found",
                        ));
                    }
                    repo.github_app_installation_id = Some(g);
                    repo.oauth_token_id = String::new();
                }
                if let Some(i) = ident {
                    if !i.contains('/') || i.starts_with('/') || i.ends_with('/') {
                        return Err(ApiError::invalid(
                            &ptr("identifier"),
                            "Identifier must be of the form :org/:repo",
                        ));
                    }
                    repo.identifier = i;
                }
                if let Some(b) = str_of("branch")? {
                    repo.branch = b;
                }
                match v.raw("ingress-submodules") {
                    None | Some(Value::Null) => {}
                    Some(Value::Bool(b)) => repo.ingress_submodules = *b,
                    Some(_) => {
                        return Err(ApiError::invalid(
                            &ptr("ingress-submodules"),
                            "must be a boolean",
                        ))
                    }
                }
                if v.raw("tags-regex").is_some() {
                    let t = str_of("tags-regex")?;
                    if let Some(t) = &t {
                        if regex::Regex::new(t).is_err() {
                            return Err(ApiError::invalid(
                                &ptr("tags-regex"),
                                "tags-regex is not a valid regular expression",
                            ));
                        }
                    }
                    repo.tags_regex = t.filter(|t| !t.is_empty());
                }
                ws.vcs_repo = Some(repo);
            }
            _ => {
                return Err(ApiError::invalid(
                    "/data/attributes/vcs-repo",
                    "vcs-repo must be an object or null",
                ))
            }
        }
    }
    if ws.vcs_repo.as_ref().is_some_and(|r| r.tags_regex.is_some())
        && (!ws.trigger_patterns.is_empty() || !ws.trigger_prefixes.is_empty())
    {
        return Err(ApiError::invalid(
            "/data/attributes/vcs-repo/tags-regex",
            "tags-regex cannot be used together with trigger prefixes or trigger patterns",
        ));
    }
    Ok(())
}

/// `vcs-repo.identifier` of a request, when given as a string.
fn ident_of(v: &Attrs<'_>) -> ApiResult<Option<String>> {
    match v.raw("identifier") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid(
            "/data/attributes/vcs-repo/identifier",
            "identifier must be a string",
        )),
    }
}

/// Tag names given on create, as `tag-names` or `relationships.tags.data[].attributes.name`.
fn create_tag_names(data: &Map<String, Value>) -> ApiResult<Vec<String>> {
    let a = Attrs::of(data)?;
    let mut names = a.strings("tag-names")?.unwrap_or_default();
    if let Some(list) = relationship_list(data, "tags") {
        for t in list {
            if let Some(n) = t.pointer("/attributes/name").and_then(Value::as_str) {
                names.push(n.to_string());
            }
        }
    }
    Ok(names)
}

/// A new workspace with the §2.1 defaults.
pub fn new_workspace(state: &State, org: &str, project: &str) -> Workspace {
    let now = chrono::Utc::now();
    Workspace {
        id: new_id("ws-"),
        organization: org.into(),
        project: project.into(),
        name: String::new(),
        description: None,
        agent_pool_id: None,
        allow_destroy_plan: true,
        auto_apply: false,
        execution_mode: "remote".into(),
        file_triggers_enabled: true,
        global_remote_state: false,
        queue_all_runs: false,
        source_name: None,
        source_url: None,
        speculative_enabled: true,
        engine_version: versions::newest(&state.settings.engine_versions).unwrap_or_default(),
        trigger_prefixes: vec![],
        trigger_patterns: vec![],
        vcs_repo: None,
        working_directory: String::new(),
        drift_detection: false,
        structured_run_output_enabled: true,
        created_at: now,
        updated_at: now,
        latest_change_at: now,
        manual_lock: None,
        remote_state_consumers: vec![],
        tags: vec![],
        vars: vec![],
        current_configuration_version: None,
        no_code: None,
        no_code_upgrade_available: false,
        resource_count: 0,
        extra: WorkspaceExtra::default(),
    }
}

/// The project of a create request (default project when absent); 404 when it is not in the
/// organization, and 404 when the caller may not create workspaces in it.
pub fn create_project_for(
    state: &State,
    caller: &Caller,
    org: &str,
    data: &Map<String, Value>,
) -> ApiResult<String> {
    let o = state
        .organizations
        .get(org)
        .ok_or_else(ApiError::not_found)?;
    let project = relationship_id(data, "project").unwrap_or_else(|| o.default_project.clone());
    match state.projects.get(&project) {
        Some(p) if p.organization == org => {}
        _ => return Err(ApiError::not_found()),
    }
    if !auth::can_create_in_project(state, caller, org, &project) {
        return Err(ApiError::not_found());
    }
    Ok(project)
}

async fn create(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["workspaces"])?;
        let project = create_project_for(state, caller, &org, data)?;
        let mut ws = new_workspace(state, &org, &project);
        apply_attributes(state, &mut ws, data, true)?;
        if let Some(list) = relationship_list(data, "tag-bindings") {
            tags::set_bindings(&mut ws, tags::parse_bindings(list)?, true)?;
        }
        let tag_names = create_tag_names(data)?;
        for n in &tag_names {
            tags::validate_name(n)?;
        }
        if let Some(vcs) = &ws.vcs_repo {
            let _ = vcs;
            run::new_configuration_version(state, &mut ws, "github", false);
        }
        let id = ws.id.clone();
        state.workspaces.insert(id.clone(), ws);
        for n in tag_names {
            tags::attach_by_name(state, &id, &n);
        }
        let ws = state.workspaces.get(&id).ok_or_else(ApiError::not_found)?;
        Ok(created(json!({"data": workspace_json(state, caller, ws)})))
    })
}

fn update(state: &mut State, caller: &Caller, id: &str, body: &Bytes) -> ApiResult {
    auth::readable(state, caller, id)?;
    auth::require(state, caller, id, Access::Admin)?;
    let body = parse_body(body)?;
    let data = data_object(&body)?;
    check_type(data, &["workspaces"])?;
    let mut ws = state
        .workspaces
        .get(id)
        .cloned()
        .ok_or_else(ApiError::not_found)?;
    let had_vcs = ws.vcs_repo.is_some();
    apply_attributes(state, &mut ws, data, false)?;
    if let Some(list) = relationship_list(data, "tag-bindings") {
        tags::set_bindings(&mut ws, tags::parse_bindings(list)?, true)?;
    }
    if let Some(p) = relationship_id(data, "project") {
        match state.projects.get(&p) {
            Some(pr) if pr.organization == ws.organization => {}
            _ => return Err(ApiError::not_found()),
        }
        if !auth::can_create_in_project(state, caller, &ws.organization, &p) {
            return Err(ApiError::not_found());
        }
        ws.project = p;
    }
    if !had_vcs && ws.vcs_repo.is_some() {
        run::new_configuration_version(state, &mut ws, "github", false);
    }
    ws.updated_at = chrono::Utc::now();
    state.workspaces.insert(id.to_string(), ws);
    let ws = state.workspaces.get(id).ok_or_else(ApiError::not_found)?;
    Ok(ok(json!({"data": workspace_json(state, caller, ws)})))
}

async fn update_by_id(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| update(state, caller, &id, &body))
}

async fn update_by_name(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((org, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let id = id_by_name(state, &org, &name)?;
        update(state, caller, &id, &body)
    })
}

/// Removes the workspace and everything that hangs off it.
fn delete(state: &mut State, caller: &Caller, id: &str, safe: bool) -> ApiResult {
    auth::readable(state, caller, id)?;
    auth::require(state, caller, id, Access::Admin)?;
    let ws = state.workspaces.get(id).ok_or_else(ApiError::not_found)?;
    // go-tfe tells the two 409s apart by the word "locked" in the message.
    if safe && is_locked(state, ws) {
        return Err(ApiError::conflict(
            "The workspace is locked and cannot be deleted.",
        ));
    }
    if safe && ws.resource_count > 0 {
        return Err(ApiError::conflict(
            "The workspace is not safe to delete: it is managing resources. Use force delete to delete it anyway.",
        ));
    }
    state.workspaces.remove(id);
    state.runs.retain(|_, r| r.workspace != id);
    state
        .configuration_versions
        .retain(|_, c| c.workspace != id);
    state.scripts.remove(id);
    for w in state.workspaces.values_mut() {
        w.remote_state_consumers.retain(|c| c != id);
    }
    tags::prune_unused(state);
    Ok(no_content())
}

async fn delete_by_id(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| delete(state, caller, &id, false))
}

async fn delete_by_name(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((org, name)): Path<(String, String)>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let id = id_by_name(state, &org, &name)?;
        delete(state, caller, &id, false)
    })
}

async fn safe_delete_by_id(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| delete(state, caller, &id, true))
}

async fn safe_delete_by_name(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((org, name)): Path<(String, String)>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let id = id_by_name(state, &org, &name)?;
        delete(state, caller, &id, true)
    })
}

fn locker_id(caller: &Caller) -> String {
    match &caller.principal {
        Principal::User { user } => user.clone(),
        Principal::Team { team } => team.clone(),
        Principal::Organization { organization } => format!("org-{organization}"),
    }
}

/// `POST /workspaces/:id/actions/lock`: 200 with the workspace; 409 when already locked.
async fn lock(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let reason = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b.get("reason").and_then(Value::as_str).map(str::to_string));
    svc.call(&headers, |state, caller| {
        auth::readable(state, caller, &id)?;
        auth::require(state, caller, &id, Access::Write)?;
        let ws = state.workspaces.get(&id).ok_or_else(ApiError::not_found)?;
        if is_locked(state, ws) {
            return Err(ApiError::conflict(
                "Unable to lock workspace. The workspace is already locked.",
            ));
        }
        if let Some(w) = state.workspaces.get_mut(&id) {
            w.manual_lock = Some(locker_id(caller));
            w.extra.locked_reason = reason;
        }
        let ws = state.workspaces.get(&id).ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": workspace_json(state, caller, ws)})))
    })
}

/// `POST /workspaces/:id/actions/unlock`: only the locker may unlock (409 otherwise).
async fn unlock(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        auth::readable(state, caller, &id)?;
        auth::require(state, caller, &id, Access::Write)?;
        let ws = state.workspaces.get(&id).ok_or_else(ApiError::not_found)?;
        // The messages name the lock holder the way go-tfe matches them ("is locked by Run").
        if let Some(r) = locking_run(state, &id) {
            return Err(ApiError::conflict(format!(
                "Unable to unlock workspace. The workspace is locked by Run {}.",
                r.id
            )));
        }
        match &ws.manual_lock {
            None => {
                return Err(ApiError::conflict(
                    "Unable to unlock workspace. The workspace is not locked.",
                ))
            }
            Some(l) if *l != locker_id(caller) => {
                let kind = if l.starts_with("team-") {
                    "Team"
                } else {
                    "User"
                };
                return Err(ApiError::conflict(format!(
                    "Unable to unlock workspace. The workspace is locked by {kind} {l}."
                )));
            }
            _ => {}
        }
        if let Some(w) = state.workspaces.get_mut(&id) {
            w.manual_lock = None;
        }
        let ws = state.workspaces.get(&id).ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": workspace_json(state, caller, ws)})))
    })
}

/// `POST /workspaces/:id/actions/force-unlock`: workspace admins remove anyone's manual lock.
async fn force_unlock(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        auth::readable(state, caller, &id)?;
        auth::require(state, caller, &id, Access::Admin)?;
        let ws = state.workspaces.get(&id).ok_or_else(ApiError::not_found)?;
        if ws.manual_lock.is_none() {
            return Err(ApiError::conflict(
                "Unable to unlock workspace. The workspace is not locked.",
            ));
        }
        if let Some(w) = state.workspaces.get_mut(&id) {
            w.manual_lock = None;
        }
        let ws = state.workspaces.get(&id).ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": workspace_json(state, caller, ws)})))
    })
}

pub fn var_json(ws: &Workspace, v: &Var) -> Value {
    json!({
        "id": v.id,
        "type": "vars",
        "attributes": {
            "key": v.key,
            "value": if v.sensitive { Value::Null } else { json!(v.value) },
            "description": v.description,
            "category": v.category,
            "hcl": v.hcl,
            "sensitive": v.sensitive,
            "version-id": "",
        },
        "relationships": {"configurable": {"data": {"id": ws.id, "type": "workspaces"}, "links": {"related": self_link(ws)}}},
        "links": {"self": format!("/api/v2/workspaces/{}/vars/{}", ws.id, v.id)},
    })
}

async fn list_vars(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?;
        let items = ws.vars.iter().map(|v| var_json(ws, v)).collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/workspaces/{id}/vars"),
            vec![],
        )))
    })
}

/// Attributes of a workspace variable body applied over `v`; `creating` requires key and
/// category. Keys are unique per category in a workspace.
fn apply_var(ws: &Workspace, v: &mut Var, body: &Bytes, creating: bool) -> ApiResult<()> {
    let body = parse_body(body)?;
    let data = data_object(&body)?;
    check_type(data, &["vars"])?;
    let a = Attrs::of(data)?;
    if let Some(k) = a.string("key")? {
        if k.is_empty() {
            return Err(ApiError::invalid(
                "/data/attributes/key",
                "Key can't be blank",
            ));
        }
        v.key = k;
    } else if creating {
        return Err(ApiError::invalid(
            "/data/attributes/key",
            "Key can't be blank",
        ));
    }
    if a.raw("value").is_some() {
        v.value = match a.raw("value") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
    }
    if let Some(c) = a.string("category")? {
        if c != "terraform" && c != "env" {
            return Err(ApiError::invalid(
                "/data/attributes/category",
                "Category must be terraform or env",
            ));
        }
        v.category = c;
    } else if creating {
        return Err(ApiError::invalid(
            "/data/attributes/category",
            "Category can't be blank",
        ));
    }
    if let Some(d) = a.string("description")? {
        v.description = d;
    }
    if let Some(h) = a.bool("hcl")? {
        v.hcl = h;
    }
    if let Some(sens) = a.bool("sensitive")? {
        if v.sensitive && !sens && !creating {
            return Err(ApiError::invalid(
                "/data/attributes/sensitive",
                "A sensitive variable cannot be made non-sensitive",
            ));
        }
        v.sensitive = sens;
    }
    if ws
        .vars
        .iter()
        .any(|o| o.id != v.id && o.key == v.key && o.category == v.category)
    {
        return Err(ApiError::invalid(
            "/data/attributes/key",
            "Key has already been taken",
        ));
    }
    Ok(())
}

/// `POST /workspaces/:id/vars` (needs write access, like `can-update-variable`).
async fn create_var(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?.clone();
        auth::require(state, caller, &id, Access::Write)?;
        let mut v = Var {
            id: new_id("var-"),
            key: String::new(),
            value: String::new(),
            description: String::new(),
            category: String::new(),
            hcl: false,
            sensitive: false,
        };
        apply_var(&ws, &mut v, &body, true)?;
        let doc = var_json(&ws, &v);
        if let Some(w) = state.workspaces.get_mut(&id) {
            w.vars.push(v);
        }
        Ok(created(json!({"data": doc})))
    })
}

async fn read_var(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((id, var)): Path<(String, String)>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?;
        let v = ws
            .vars
            .iter()
            .find(|v| v.id == var)
            .ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": var_json(ws, v)})))
    })
}

async fn update_var(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((id, var)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?.clone();
        auth::require(state, caller, &id, Access::Write)?;
        let mut v = ws
            .vars
            .iter()
            .find(|v| v.id == var)
            .cloned()
            .ok_or_else(ApiError::not_found)?;
        apply_var(&ws, &mut v, &body, false)?;
        let doc = var_json(&ws, &v);
        if let Some(slot) = state
            .workspaces
            .get_mut(&id)
            .and_then(|w| w.vars.iter_mut().find(|x| x.id == var))
        {
            *slot = v;
        }
        Ok(ok(json!({"data": doc})))
    })
}

async fn delete_var(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((id, var)): Path<(String, String)>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?;
        if !ws.vars.iter().any(|v| v.id == var) {
            return Err(ApiError::not_found());
        }
        auth::require(state, caller, &id, Access::Write)?;
        if let Some(w) = state.workspaces.get_mut(&id) {
            w.vars.retain(|v| v.id != var);
        }
        Ok(no_content())
    })
}

// ---- remote state consumers (§4.2) ----

async fn list_consumers(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let ws = auth::readable(state, caller, &id)?;
        let ids: Vec<String> = if ws.global_remote_state {
            let mut all: Vec<&Workspace> = state
                .workspaces
                .values()
                .filter(|w| w.organization == ws.organization && w.id != ws.id)
                .collect();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all.into_iter().map(|w| w.id.clone()).collect()
        } else {
            ws.remote_state_consumers.clone()
        };
        let items = ids
            .iter()
            .filter_map(|c| state.workspaces.get(c))
            .filter(|w| auth::workspace_access(state, caller, w) >= Access::Read)
            .map(|w| workspace_json(state, caller, w))
            .collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/workspaces/{id}/relationships/remote-state-consumers"),
            vec![],
        )))
    })
}

/// The consumer ids of a PATCH/POST/DELETE body: each must be a readable workspace of the same
/// organization (404 otherwise, as the real service hides what the token cannot read).
fn consumer_ids(
    state: &State,
    caller: &Caller,
    ws: &Workspace,
    body: &Bytes,
) -> ApiResult<Vec<String>> {
    let body = parse_body(body)?;
    let list = data_array(&body)?;
    let mut ids = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let t = item.get("type").and_then(Value::as_str);
        if t.is_some_and(|t| t != "workspaces") {
            return Err(ApiError::invalid(
                &format!("/data/{i}/type"),
                "type must be workspaces",
            ));
        }
        let cid = item
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid(&format!("/data/{i}/id"), "id is required"))?;
        let c = state
            .workspaces
            .get(cid)
            .filter(|c| c.organization == ws.organization);
        match c {
            Some(c) if auth::workspace_access(state, caller, c) >= Access::Read => {}
            _ => return Err(ApiError::not_found()),
        }
        if cid == ws.id {
            return Err(ApiError::invalid(
                &format!("/data/{i}/id"),
                "A workspace cannot be added as a remote state consumer of itself",
            ));
        }
        if !ids.iter().any(|x| x == cid) {
            ids.push(cid.to_string());
        }
    }
    Ok(ids)
}

#[derive(Clone, Copy)]
enum ConsumerOp {
    Replace,
    Add,
    Remove,
}

fn change_consumers(
    state: &mut State,
    caller: &Caller,
    id: &str,
    body: &Bytes,
    op: ConsumerOp,
) -> ApiResult {
    let ws = auth::readable(state, caller, id)?.clone();
    match op {
        // PATCH replaces the list: only for teams managing workspaces organization-wide.
        ConsumerOp::Replace => {
            if !auth::can_manage_workspaces(state, caller, &ws.organization) {
                return Err(ApiError::not_found());
            }
        }
        ConsumerOp::Add | ConsumerOp::Remove => auth::require(state, caller, id, Access::Admin)?,
    }
    if ws.global_remote_state {
        return Err(ApiError::unprocessable(
            "Remote state consumers can only be managed when global remote state is disabled",
        ));
    }
    let ids = consumer_ids(state, caller, &ws, body)?;
    let w = state
        .workspaces
        .get_mut(id)
        .ok_or_else(ApiError::not_found)?;
    match op {
        ConsumerOp::Replace => w.remote_state_consumers = ids,
        ConsumerOp::Add => {
            for c in ids {
                if !w.remote_state_consumers.contains(&c) {
                    w.remote_state_consumers.push(c);
                }
            }
        }
        ConsumerOp::Remove => w.remote_state_consumers.retain(|c| !ids.contains(c)),
    }
    Ok(no_content())
}

async fn replace_consumers(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        change_consumers(state, caller, &id, &body, ConsumerOp::Replace)
    })
}

async fn add_consumers(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        change_consumers(state, caller, &id, &body, ConsumerOp::Add)
    })
}

async fn remove_consumers(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        change_consumers(state, caller, &id, &body, ConsumerOp::Remove)
    })
}
