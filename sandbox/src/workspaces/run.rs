//! Runs (spec B §2.4, §3.1, §4.4), with the configuration versions, plans and applies they
//! point to (not shown in the spec; served minimally so clients can follow the relationships).
//! Organization tokens get 404 on `POST /runs` and the run actions (spec §5).
//!
//! Corrections against the real service (issue 22), each pinned by a test in
//! `tests/workspaces_runs.rs`:
//! * **Runs need a configuration.** `POST /runs` in a workspace that never had a configuration
//!   version is 422 `Configuration version is missing` (the live service's answer; go-tfe's
//!   run tests always upload a configuration version first). No-code workspaces get one when
//!   created (`nocode.rs`), VCS-backed ones too (`workspace.rs`); a VCS-backed workspace
//!   without one (its repository attached later) gets its ingressed one when a run is queued.
//! * **Run states.** After the plan, a run passes through the phases switched on for its
//!   workspace or organization (admin API `run-phases`): `cost_estimating`/`cost_estimated`,
//!   `policy_checking`/`policy_checked`, `post_plan_running`/`post_plan_completed`, and waits for
//!   confirmation in whichever of those is last. `actions.is-confirmable` is true exactly there
//!   and apply anywhere else is 409 (the real service decides from the same flag; go-tfe's
//!   `Run.Actions.IsConfirmable`).
//! * A `pending` (or queued) run is cancelable (`is-cancelable: true`) and not discardable
//!   (`is-discardable: false`), as the live service reports; cancel answers 202 and the run
//!   ends `canceled`.
//! * **Force-cancel** ends in `canceled` with `status-timestamps.force-canceled-at` set: the live
//!   service's run status enum has no `force_canceled` (spec §3.1 lists it; the real service
//!   wins).

use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use bytes::Bytes;
use chrono::Utc;
use serde_json::{json, Value};

use super::auth::{self, Caller};
use super::jsonapi::*;
use super::model::*;
use super::workspace::{check_includes, locking_run};
use super::{query, versions, Svc};

pub fn routes() -> Router<Svc> {
    Router::new()
        .route("/api/v2/runs", post(create))
        .route("/api/v2/organizations/{org}/runs", get(list_org))
        .route("/api/v2/runs/{id}", get(read))
        .route("/api/v2/runs/{id}/actions/apply", post(apply))
        .route("/api/v2/runs/{id}/actions/discard", post(discard))
        .route("/api/v2/runs/{id}/actions/cancel", post(cancel))
        .route("/api/v2/runs/{id}/actions/force-cancel", post(force_cancel))
        .route(
            "/api/v2/runs/{id}/actions/force-execute",
            post(force_execute),
        )
        .route("/api/v2/workspaces/{id}/runs", get(list))
        .route("/api/v2/plans/{id}", get(read_plan))
        .route("/api/v2/applies/{id}", get(read_apply))
        .route(
            "/api/v2/workspaces/{id}/configuration-versions",
            get(list_cvs).post(create_cv),
        )
        .route("/api/v2/configuration-versions/{id}", get(read_cv))
        .route("/api/v2/configuration-versions/{id}/upload", put(upload_cv))
}

const RUN_INCLUDES: &[&str] = &[
    "plan",
    "apply",
    "created_by",
    "cost_estimate",
    "configuration_version",
    "configuration_version.ingress_attributes",
    "workspace",
    // go-tfe's RunTaskStages and RunTFPolicyEvaluation: accepted; the sandbox has no task stages
    // or policy evaluations, so they add no records.
    "task_stages",
    "tf_policy_evaluations",
];

/// A new configuration version of the workspace, made current.
pub fn new_configuration_version(
    state: &mut State,
    ws: &mut Workspace,
    source: &str,
    speculative: bool,
) -> String {
    let cv = ConfigurationVersion {
        id: new_id("cv-"),
        workspace: ws.id.clone(),
        source: source.into(),
        speculative,
        auto_queue_runs: true,
        status: "uploaded".into(),
        created_at: Utc::now(),
    };
    let id = cv.id.clone();
    state.configuration_versions.insert(id.clone(), cv);
    if !speculative {
        ws.current_configuration_version = Some(id.clone());
    }
    id
}

pub fn cv_json(cv: &ConfigurationVersion) -> Value {
    json!({
        "id": cv.id,
        "type": "configuration-versions",
        "attributes": {
            "auto-queue-runs": cv.auto_queue_runs,
            "error": null,
            "error-message": null,
            "source": cv.source,
            "speculative": cv.speculative,
            "provisional": false,
            "status": cv.status,
            "status-timestamps": {},
            "changed-files": [],
            "upload-url": null,
        },
        "relationships": {"ingress-attributes": {"data": null}},
        "links": {
            "self": format!("/api/v2/configuration-versions/{}", cv.id),
            "download": format!("/api/v2/configuration-versions/{}/download", cv.id),
        },
    })
}

fn status_of_plan(r: &Run) -> &'static str {
    match r.status.as_str() {
        "pending" | "fetching" => "pending",
        "plan_queued" => "queued",
        "planning" => "running",
        "errored" if !r.status_timestamps.contains_key("planned-at") => "errored",
        "canceled" | "force_canceled" if !r.status_timestamps.contains_key("planned-at") => {
            "canceled"
        }
        "discarded" if !r.status_timestamps.contains_key("planned-at") => "unreachable",
        _ => "finished",
    }
}

pub fn plan_json(r: &Run) -> Value {
    let finished = status_of_plan(r) == "finished";
    let adds = if finished && r.has_changes && !r.is_destroy {
        1
    } else {
        0
    };
    let dels = if finished && r.has_changes && r.is_destroy {
        1
    } else {
        0
    };
    json!({
        "id": r.plan_id,
        "type": "plans",
        "attributes": {
            "status": status_of_plan(r),
            "has-changes": r.has_changes,
            "resource-additions": adds,
            "resource-changes": 0,
            "resource-destructions": dels,
            "resource-imports": 0,
            "execution-details": {"mode": "remote"},
            "status-timestamps": {},
            "log-read-url": format!("/api/v2/plans/{}/logs", r.plan_id),
        },
        "relationships": {"state-versions": {"data": []}},
        "links": {"self": format!("/api/v2/plans/{}", r.plan_id), "json-output": format!("/api/v2/plans/{}/json-output", r.plan_id)},
    })
}

pub fn apply_json(r: &Run) -> Value {
    let status = match r.status.as_str() {
        "apply_queued" => "queued",
        "applying" => "running",
        "applied" => "finished",
        "errored" if r.status_timestamps.contains_key("applying-at") => "errored",
        "canceled" | "force_canceled" if r.status_timestamps.contains_key("applying-at") => {
            "canceled"
        }
        _ if is_final_status(&r.status) => "unreachable",
        _ => "pending",
    };
    let applied = r.status == "applied" && r.has_changes;
    json!({
        "id": r.apply_id,
        "type": "applies",
        "attributes": {
            "status": status,
            "resource-additions": if applied && !r.is_destroy { 1 } else { 0 },
            "resource-changes": 0,
            "resource-destructions": if applied && r.is_destroy { 1 } else { 0 },
            "resource-imports": 0,
            "execution-details": {"mode": "remote"},
            "status-timestamps": {},
            "log-read-url": format!("/api/v2/applies/{}/logs", r.apply_id),
        },
        "relationships": {"state-versions": {"data": []}},
        "links": {"self": format!("/api/v2/applies/{}", r.apply_id)},
    })
}

fn is_cancelable(r: &Run) -> bool {
    matches!(
        r.status.as_str(),
        "pending" | "plan_queued" | "planning" | "applying"
    ) && r.cancel_requested_at.is_none()
}

/// The state in which the run waits for confirmation: the last phase switched on for it.
pub fn awaiting_status(r: &Run) -> &'static str {
    if r.phases.post_plan {
        "post_plan_completed"
    } else if r.phases.policy_check {
        "policy_checked"
    } else if r.phases.cost_estimation {
        "cost_estimated"
    } else {
        "planned"
    }
}

/// The run phases switched on for a workspace (its own switch, else its organization's).
pub fn phases_for(state: &State, ws: &Workspace) -> RunPhases {
    state
        .run_phases
        .get(&ws.id)
        .or_else(|| state.run_phases.get(&ws.organization))
        .copied()
        .unwrap_or_default()
}

fn is_force_cancelable(r: &Run) -> bool {
    matches!(r.status.as_str(), "planning" | "applying")
        && r.force_cancel_available_at.is_some_and(|t| Utc::now() >= t)
}

pub fn is_confirmable(r: &Run) -> bool {
    !r.plan_only && r.status == awaiting_status(r)
}

fn is_discardable(r: &Run) -> bool {
    is_confirmable(r) || (!r.plan_only && r.status == "policy_override")
}

pub fn run_json(state: &State, caller: &Caller, r: &Run) -> Value {
    let access = state
        .workspaces
        .get(&r.workspace)
        .map(|w| auth::workspace_access(state, caller, w))
        .unwrap_or(Access::None);
    let runs_ok = !caller.is_org_token();
    let write = access >= Access::Write && runs_ok;
    let org = state
        .workspaces
        .get(&r.workspace)
        .map(|w| w.organization.clone())
        .unwrap_or_default();
    let timestamps: serde_json::Map<String, Value> = r
        .status_timestamps
        .iter()
        .map(|(k, v)| (k.clone(), json!(iso(v))))
        .collect();
    let position = if r.status == "pending" {
        state
            .runs
            .values()
            .filter(|o| {
                o.workspace == r.workspace
                    && !o.is_final()
                    && !o.plan_only
                    && o.created_at < r.created_at
            })
            .count()
    } else {
        0
    };
    let mut attrs = json!({
        "actions": {
            "is-cancelable": is_cancelable(r),
            "is-confirmable": is_confirmable(r),
            "is-discardable": is_discardable(r),
            "is-force-cancelable": is_force_cancelable(r),
        },
        "allow-config-generation": false,
        "allow-empty-apply": r.allow_empty_apply,
        "auto-apply": r.auto_apply,
        "canceled-at": r.canceled_at.as_ref().map(iso),
        "created-at": iso(&r.created_at),
        "has-changes": r.has_changes,
        "is-destroy": r.is_destroy,
        "message": r.message,
        "plan-only": r.plan_only,
        "position-in-queue": position,
        "refresh": r.refresh,
        "refresh-only": r.refresh_only,
        "replace-addrs": addrs_or_null(&r.replace_addrs),
        "save-plan": false,
        "source": r.source,
        "status": r.status,
        "status-timestamps": timestamps,
        "target-addrs": addrs_or_null(&r.target_addrs),
        "engine-version": r.engine_version,
        "terraform-version": r.engine_version,
        "trigger-reason": r.trigger_reason,
        "variables": r.variables.iter().map(|v| json!({"key": v.key, "value": v.value})).collect::<Vec<_>>(),
        "permissions": {
            "can-apply": write,
            "can-cancel": write,
            "can-comment": access >= Access::Read,
            "can-discard": write,
            "can-force-execute": write,
            "can-force-cancel": access >= Access::Admin && runs_ok,
            "can-override-policy-check": auth::is_owner(state, caller, &org) && runs_ok,
        },
    });
    if let Some(t) = &r.force_cancel_available_at {
        attrs["force-cancel-available-at"] = json!(iso(t));
        attrs["force_cancel_available_at"] = json!(iso(t));
    }
    let related = |p: &str| format!("/api/v2/runs/{}/{p}", r.id);
    json!({
        "id": r.id,
        "type": "runs",
        "attributes": attrs,
        "relationships": {
            "apply": {"data": {"id": r.apply_id, "type": "applies"}, "links": {"related": related("apply")}},
            "comments": {"data": [], "links": {"related": related("comments")}},
            "configuration-version": {"data": {"id": r.configuration_version, "type": "configuration-versions"}, "links": {"related": related("configuration-version")}},
            "cost-estimate": {"data": null, "links": {"related": related("cost-estimate")}},
            "created-by": {"data": r.created_by.as_ref().map(|u| json!({"id": u, "type": "users"})), "links": {"related": related("created-by")}},
            "confirmed-by": {"data": null},
            "input-state-version": {"data": null, "links": {"related": related("input-state-version")}},
            "plan": {"data": {"id": r.plan_id, "type": "plans"}, "links": {"related": related("plan")}},
            "run-events": {"data": [], "links": {"related": related("run-events")}},
            "policy-checks": {"data": [], "links": {"related": related("policy-checks")}},
            "task-stages": {"data": [], "links": {"related": related("task-stages")}},
            "workspace": {"data": {"id": r.workspace, "type": "workspaces"}},
            "workspace-run-alerts": {"data": [], "links": {"related": related("workspace-run-alerts")}},
        },
        "links": {"self": format!("/api/v2/runs/{}", r.id)},
    })
}

fn run_included(
    state: &State,
    caller: &Caller,
    r: &Run,
    includes: &[String],
    out: &mut Vec<Value>,
) {
    let mut push = |v: Value| {
        if !v.is_null()
            && !out
                .iter()
                .any(|o| o["id"] == v["id"] && o["type"] == v["type"])
        {
            out.push(v);
        }
    };
    for inc in includes {
        match inc.as_str() {
            "plan" => push(plan_json(r)),
            "apply" => push(apply_json(r)),
            "created_by" => {
                if let Some(u) = r.created_by.as_ref().and_then(|u| state.users.get(u)) {
                    push(super::orgs::user_json(u));
                }
            }
            "configuration_version" | "configuration_version.ingress_attributes" => {
                if let Some(cv) = state.configuration_versions.get(&r.configuration_version) {
                    push(cv_json(cv));
                }
            }
            "workspace" => {
                if let Some(w) = state.workspaces.get(&r.workspace) {
                    push(super::workspace::workspace_json(state, caller, w));
                }
            }
            _ => {}
        }
    }
}

/// Takes the next admin script of the workspace for a new run.
fn take_script(state: &mut State, ws: &str) -> Script {
    let Some(queue) = state.scripts.get_mut(ws) else {
        return Script::default();
    };
    let Some(first) = queue.first_mut() else {
        return Script::default();
    };
    let s = first.clone();
    match first.count {
        0 => {}
        1 => {
            queue.remove(0);
        }
        _ => first.count -= 1,
    }
    s
}

/// Options of a new run, validated.
pub struct NewRun {
    pub auto_apply: Option<bool>,
    pub is_destroy: bool,
    pub message: Option<String>,
    pub refresh: bool,
    pub refresh_only: bool,
    pub replace_addrs: Vec<String>,
    pub target_addrs: Vec<String>,
    pub variables: Vec<RunVariable>,
    pub plan_only: Option<bool>,
    pub engine_version: Option<String>,
    pub allow_empty_apply: bool,
    pub configuration_version: Option<String>,
    pub source: String,
    pub trigger_reason: String,
    pub upgrade_to: Option<(String, String)>,
}

impl Default for NewRun {
    fn default() -> Self {
        Self {
            auto_apply: None,
            is_destroy: false,
            message: None,
            refresh: true,
            refresh_only: false,
            replace_addrs: vec![],
            target_addrs: vec![],
            variables: vec![],
            plan_only: None,
            engine_version: None,
            allow_empty_apply: false,
            configuration_version: None,
            source: "tfe-api".into(),
            trigger_reason: "manual".into(),
            upgrade_to: None,
        }
    }
}

/// Queues a run in the workspace (state `pending`); the backend takes it from there.
pub fn queue_run(
    state: &mut State,
    caller: Option<&Caller>,
    ws_id: &str,
    opts: NewRun,
) -> ApiResult<String> {
    let mut ws = state
        .workspaces
        .get(ws_id)
        .cloned()
        .ok_or_else(ApiError::not_found)?;
    let cv_id = match opts.configuration_version {
        Some(cv) => cv,
        None => match ws.current_configuration_version.clone() {
            Some(cv) => cv,
            // A VCS-backed workspace has the configuration ingressed from its repository.
            None if ws.vcs_repo.is_some() => {
                let id = new_configuration_version(state, &mut ws, "github", false);
                state.workspaces.insert(ws.id.clone(), ws.clone());
                id
            }
            None => {
                return Err(ApiError::invalid(
                    "/data/relationships/configuration-version",
                    "Configuration version is missing",
                ))
            }
        },
    };
    let speculative = state
        .configuration_versions
        .get(&cv_id)
        .is_some_and(|c| c.speculative);
    let plan_only = opts.plan_only.unwrap_or(speculative);
    let engine = match &opts.engine_version {
        Some(v) => v.clone(),
        None => versions::resolve(&ws.engine_version, &state.settings.engine_versions)
            .unwrap_or_default(),
    };
    let script = take_script(state, ws_id);
    let phases = phases_for(state, &ws);
    let now = Utc::now();
    let run = Run {
        id: new_id("run-"),
        workspace: ws_id.into(),
        configuration_version: cv_id,
        plan_id: new_id("plan-"),
        apply_id: new_id("apply-"),
        created_by: caller.and_then(|c| c.user_id().map(str::to_string)),
        status: "pending".into(),
        status_timestamps: Default::default(),
        created_at: now,
        next_step_at: now + chrono::Duration::milliseconds(state.settings.step_ms as i64),
        auto_apply: opts.auto_apply.unwrap_or(ws.auto_apply),
        is_destroy: opts.is_destroy,
        message: opts.message.unwrap_or_else(|| "Triggered via API".into()),
        refresh: opts.refresh,
        refresh_only: opts.refresh_only,
        replace_addrs: opts.replace_addrs,
        target_addrs: opts.target_addrs,
        variables: opts.variables,
        plan_only,
        engine_version: engine,
        allow_empty_apply: opts.allow_empty_apply,
        source: opts.source,
        trigger_reason: opts.trigger_reason,
        has_changes: false,
        script,
        canceled_at: None,
        cancel_requested_at: None,
        force_cancel_available_at: None,
        upgrade_to: opts.upgrade_to,
        upgrade_applied: false,
        phases,
        comments: vec![],
    };
    let id = run.id.clone();
    state.runs.insert(id.clone(), run);
    if let Some(w) = state.workspaces.get_mut(ws_id) {
        w.latest_change_at = now;
    }
    Ok(id)
}

async fn create(AxState(svc): AxState<Svc>, headers: HeaderMap, body: Bytes) -> Response {
    svc.call(&headers, |state, caller| {
        auth::require_user_or_team(caller)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["runs"])?;
        let ws_id = relationship_id(data, "workspace").ok_or_else(|| {
            ApiError::invalid("/data/relationships/workspace/data/id", "workspace is required")
        })?;
        let ws = auth::readable(state, caller, &ws_id)?.clone();
        auth::require(state, caller, &ws_id, Access::Plan)?;
        let a = Attrs::of(data)?;
        let mut o = NewRun {
            auto_apply: a.bool("auto-apply")?,
            is_destroy: a.bool("is-destroy")?.unwrap_or(false),
            message: a.string("message")?,
            refresh: a.bool("refresh")?.unwrap_or(true),
            refresh_only: a.bool("refresh-only")?.unwrap_or(false),
            replace_addrs: a.strings("replace-addrs")?.unwrap_or_default(),
            target_addrs: a.strings("target-addrs")?.unwrap_or_default(),
            plan_only: a.bool("plan-only")?,
            allow_empty_apply: a.bool("allow-empty-apply")?.unwrap_or(false),
            ..NewRun::default()
        };
        if o.is_destroy && o.refresh_only {
            return Err(ApiError::invalid(
                "/data/attributes/refresh-only",
                "refresh-only and is-destroy are mutually exclusive",
            ));
        }
        if o.is_destroy && !ws.allow_destroy_plan {
            return Err(ApiError::invalid(
                "/data/attributes/is-destroy",
                "Destroy plans are not allowed in this workspace",
            ));
        }
        if ws.execution_mode == "local" {
            return Err(ApiError::unprocessable("Runs cannot be queued in a workspace using local execution mode"));
        }
        match a.raw("variables") {
            None | Some(Value::Null) => {}
            Some(Value::Array(vars)) => {
                for (i, v) in vars.iter().enumerate() {
                    let key = v.get("key").and_then(Value::as_str);
                    let value = v.get("value").and_then(Value::as_str);
                    match (key, value) {
                        (Some(k), Some(val)) if !k.is_empty() => {
                            o.variables.push(RunVariable { key: k.into(), value: val.into() })
                        }
                        _ => {
                            return Err(ApiError::invalid(
                                &format!("/data/attributes/variables/{i}"),
                                "each run variable needs a string key and a string value (an HCL literal)",
                            ))
                        }
                    }
                }
            }
            Some(_) => return Err(ApiError::invalid("/data/attributes/variables", "variables must be an array")),
        }
        if let Some(v) = a.string("engine-version")?.or(a.string("terraform-version")?) {
            if o.plan_only != Some(true) {
                return Err(ApiError::invalid(
                    "/data/attributes/engine-version",
                    "engine-version can only be set for plan-only runs",
                ));
            }
            if !state.settings.engine_versions.contains(&v) {
                return Err(ApiError::invalid(
                    "/data/attributes/engine-version",
                    format!("Version {v:?} is not an available version"),
                ));
            }
            o.engine_version = Some(v);
        }
        if let Some(cv) = relationship_id(data, "configuration-version") {
            match state.configuration_versions.get(&cv) {
                Some(c) if c.workspace == ws_id => {}
                _ => return Err(ApiError::not_found()),
            }
            o.configuration_version = Some(cv);
        }
        let id = queue_run(state, Some(caller), &ws_id, o)?;
        let r = state.runs.get(&id).ok_or_else(ApiError::not_found)?;
        Ok(created(json!({"data": run_json(state, caller, r)})))
    })
}

/// The run if the caller can read its workspace; 404 otherwise.
fn readable_run<'a>(state: &'a State, caller: &Caller, id: &str) -> ApiResult<&'a Run> {
    let r = state.runs.get(id).ok_or_else(ApiError::not_found)?;
    auth::readable(state, caller, &r.workspace)?;
    Ok(r)
}

async fn read(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let r = readable_run(state, caller, &id)?;
        let includes = params.includes();
        check_includes(&includes, RUN_INCLUDES)?;
        let mut included = Vec::new();
        run_included(state, caller, r, &includes, &mut included);
        let mut doc = json!({"data": run_json(state, caller, r)});
        if !included.is_empty() {
            doc["included"] = Value::Array(included);
        }
        Ok(ok(doc))
    })
}

fn operation_of(r: &Run) -> &'static str {
    if r.plan_only {
        "plan_only"
    } else if r.is_destroy {
        "destroy"
    } else if r.refresh_only {
        "refresh_only"
    } else {
        "plan_and_apply"
    }
}

async fn list(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        auth::readable(state, caller, &id)?;
        list_runs(
            state,
            caller,
            &params,
            &format!("/api/v2/workspaces/{id}/runs"),
            |r| r.workspace == id,
        )
    })
}

/// `GET /organizations/:org/runs`: the runs of every workspace of the organization the caller
/// can read, with the same filters.
async fn list_org(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(org): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        super::orgs::visible_org(state, caller, &org)?;
        let readable: std::collections::BTreeSet<String> = state
            .workspaces
            .values()
            .filter(|w| {
                w.organization == org && auth::workspace_access(state, caller, w) >= Access::Read
            })
            .map(|w| w.id.clone())
            .collect();
        list_runs(
            state,
            caller,
            &params,
            &format!("/api/v2/organizations/{org}/runs"),
            |r| readable.contains(&r.workspace),
        )
    })
}

/// The filtered, newest-first, paginated run list.
fn list_runs(
    state: &State,
    caller: &Caller,
    params: &super::jsonapi::QueryParams,
    path: &str,
    scope: impl Fn(&Run) -> bool,
) -> ApiResult {
    let includes = params.includes();
    check_includes(&includes, RUN_INCLUDES)?;
    let set = |key: &str| -> Option<Vec<String>> {
        params.get(key).map(|s| {
            s.split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect()
        })
    };
    let statuses = set("filter[status]");
    let operations = set("filter[operation]");
    let sources = set("filter[source]");
    let groups = set("filter[status_group]");
    let user = params.get("search[user]").map(str::to_lowercase);
    let commit = params.get("search[commit]");
    let basic = params.get("search[basic]").map(str::to_lowercase);
    let mut found: Vec<&Run> = state
        .runs
        .values()
        .filter(|r| scope(r))
        .filter(|r| statuses.as_ref().is_none_or(|s| s.contains(&r.status)))
        .filter(|r| {
            operations
                .as_ref()
                .is_none_or(|s| s.iter().any(|o| o == operation_of(r)))
        })
        .filter(|r| sources.as_ref().is_none_or(|s| s.contains(&r.source)))
        .filter(|r| {
            groups.as_ref().is_none_or(|g| {
                g.iter().any(|g| match g.as_str() {
                    "final" => r.is_final(),
                    "non_final" => !r.is_final(),
                    "discardable" => is_discardable(r),
                    _ => false,
                })
            })
        })
        .filter(|r| {
            user.as_ref().is_none_or(|u| {
                r.created_by
                    .as_ref()
                    .and_then(|c| state.users.get(c))
                    .is_some_and(|usr| usr.username.to_lowercase().contains(u))
            })
        })
        // The sandbox's configuration versions carry no commits: a commit search matches none.
        .filter(|_| commit.is_none())
        .filter(|r| {
            basic.as_ref().is_none_or(|b| {
                r.id.to_lowercase().contains(b) || r.message.to_lowercase().contains(b)
            })
        })
        .collect();
    found.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    let (number, size) = params.page();
    let mut included = Vec::new();
    for r in found.iter().skip((number - 1) * size).take(size) {
        run_included(state, caller, r, &includes, &mut included);
    }
    let items = found.iter().map(|r| run_json(state, caller, r)).collect();
    Ok(ok(paginate(items, params, path, included)))
}

/// Common checks of the run actions: a user or team token, a readable run, and `need` access.
fn action_run(state: &State, caller: &Caller, id: &str, need: Access) -> ApiResult<Run> {
    auth::require_user_or_team(caller)?;
    let r = readable_run(state, caller, id)?.clone();
    auth::require(state, caller, &r.workspace, need)?;
    Ok(r)
}

/// Optional `{"comment": "..."}` of an action body, recorded on the run.
fn comment_of(body: &Bytes) -> ApiResult<Option<String>> {
    let v = parse_body(body)?;
    match v.get("comment") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid("/comment", "comment must be a string")),
    }
}

fn set_status(state: &mut State, id: &str, status: &str) {
    let step = state.settings.step_ms;
    if let Some(r) = state.runs.get_mut(id) {
        let now = Utc::now();
        r.status = status.into();
        r.status_timestamps
            .insert(format!("{}-at", status.replace('_', "-")), now);
        r.next_step_at = now + chrono::Duration::milliseconds(step as i64);
        if status == "canceled" || status == "force_canceled" {
            r.canceled_at = Some(now);
        }
    }
}

fn record_comment(state: &mut State, id: &str, comment: Option<String>) {
    if let (Some(c), Some(r)) = (comment, state.runs.get_mut(id)) {
        r.comments.push(c);
    }
}

/// Confirms a run paused for confirmation (shared with the no-code upgrade confirm).
pub fn confirm(state: &mut State, id: &str) -> ApiResult<()> {
    let r = state.runs.get(id).ok_or_else(ApiError::not_found)?;
    if !is_confirmable(r) {
        return Err(ApiError::conflict(
            "Transition not allowed: the run is not paused for confirmation",
        ));
    }
    set_status(state, id, "confirmed");
    Ok(())
}

async fn apply(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        action_run(state, caller, &id, Access::Write)?;
        let comment = comment_of(&body)?;
        confirm(state, &id)?;
        record_comment(state, &id, comment);
        Ok(accepted())
    })
}

async fn discard(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let r = action_run(state, caller, &id, Access::Write)?;
        let comment = comment_of(&body)?;
        if !is_discardable(&r) {
            return Err(ApiError::conflict(
                "Transition not allowed: the run is not paused for confirmation or priority",
            ));
        }
        set_status(state, &id, "discarded");
        record_comment(state, &id, comment);
        Ok(accepted())
    })
}

async fn cancel(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let r = action_run(state, caller, &id, Access::Write)?;
        let comment = comment_of(&body)?;
        if !is_cancelable(&r) {
            return Err(ApiError::conflict(
                "Transition not allowed: the run is not planning or applying",
            ));
        }
        // A run that has not started yet is canceled at once.
        if matches!(r.status.as_str(), "pending" | "plan_queued") {
            set_status(state, &id, "canceled");
            record_comment(state, &id, comment);
            return Ok(accepted());
        }
        let now = Utc::now();
        let cooloff = chrono::Duration::milliseconds(state.settings.force_cancel_cooloff_ms as i64);
        let ignore = r.script.cancel.as_deref() == Some("ignore");
        if let Some(run) = state.runs.get_mut(&id) {
            run.cancel_requested_at = Some(now);
            run.force_cancel_available_at = Some(now + cooloff);
        }
        if !ignore {
            set_status(state, &id, "canceled");
        }
        record_comment(state, &id, comment);
        Ok(accepted())
    })
}

async fn force_cancel(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let r = action_run(state, caller, &id, Access::Admin)?;
        let comment = comment_of(&body)?;
        if !matches!(r.status.as_str(), "planning" | "applying") {
            return Err(ApiError::conflict(
                "Transition not allowed: the run is not planning or applying",
            ));
        }
        if r.cancel_requested_at.is_none() {
            return Err(ApiError::conflict(
                "The run must be canceled non-forcefully before it can be force-canceled",
            ));
        }
        if !is_force_cancelable(&r) {
            return Err(ApiError::conflict(
                "The cool-off period after the cancel has not passed yet",
            ));
        }
        // The live service ends a force-canceled run `canceled`, with `force-canceled-at`.
        set_status(state, &id, "canceled");
        if let Some(run) = state.runs.get_mut(&id) {
            run.status_timestamps
                .insert("force-canceled-at".into(), Utc::now());
        }
        record_comment(state, &id, comment);
        Ok(accepted())
    })
}

async fn force_execute(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let r = action_run(state, caller, &id, Access::Write)?;
        if r.status != "pending" {
            return Err(ApiError::forbidden("The run is not pending"));
        }
        let locker = locking_run(state, &r.workspace)
            .filter(|l| l.id != r.id)
            .cloned();
        let Some(locker) = locker else {
            return Err(ApiError::forbidden(
                "The workspace is not locked by another run",
            ));
        };
        if !is_discardable(&locker) {
            return Err(ApiError::conflict(
                "The run locking the workspace cannot be discarded",
            ));
        }
        // Every earlier incomplete run of the workspace goes away; this one starts.
        let prior: Vec<Run> = state
            .runs
            .values()
            .filter(|o| {
                o.workspace == r.workspace
                    && !o.is_final()
                    && o.id != r.id
                    && o.created_at <= r.created_at
            })
            .cloned()
            .collect();
        for o in prior {
            let to = if is_discardable(&o) {
                "discarded"
            } else {
                "canceled"
            };
            set_status(state, &o.id, to);
        }
        if let Some(run) = state.runs.get_mut(&id) {
            run.status_timestamps
                .insert("plan-queueable-at".into(), Utc::now());
        }
        set_status(state, &id, "plan_queued");
        Ok(accepted())
    })
}

async fn read_plan(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let r = state
            .runs
            .values()
            .find(|r| r.plan_id == id)
            .ok_or_else(ApiError::not_found)?;
        auth::readable(state, caller, &r.workspace)?;
        Ok(ok(json!({"data": plan_json(r)})))
    })
}

async fn read_apply(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let r = state
            .runs
            .values()
            .find(|r| r.apply_id == id)
            .ok_or_else(ApiError::not_found)?;
        auth::readable(state, caller, &r.workspace)?;
        Ok(ok(json!({"data": apply_json(r)})))
    })
}

async fn list_cvs(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        auth::readable(state, caller, &id)?;
        let mut cvs: Vec<&ConfigurationVersion> = state
            .configuration_versions
            .values()
            .filter(|c| c.workspace == id)
            .collect();
        cvs.sort_by_key(|c| std::cmp::Reverse(c.created_at));
        let items = cvs.into_iter().map(cv_json).collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/workspaces/{id}/configuration-versions"),
            vec![],
        )))
    })
}

/// `POST /workspaces/:id/configuration-versions`: a pending version with an `upload-url`
/// (absolute, built from the request's Host) to PUT the archive to; uploading marks it
/// uploaded and, with `auto-queue-runs` (default true), queues a run.
async fn create_cv(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string();
    svc.call(&headers, |state, caller| {
        auth::readable(state, caller, &id)?;
        auth::require(state, caller, &id, Access::Write)?;
        let body = parse_body(&body)?;
        let (auto_queue, speculative) = match body.get("data").and_then(Value::as_object) {
            Some(d) => {
                let a = Attrs::of(d)?;
                (
                    a.bool("auto-queue-runs")?.unwrap_or(true),
                    a.bool("speculative")?.unwrap_or(false),
                )
            }
            None => (true, false),
        };
        let cv = ConfigurationVersion {
            id: new_id("cv-"),
            workspace: id.clone(),
            source: "tfe-api".into(),
            speculative,
            auto_queue_runs: auto_queue,
            status: "pending".into(),
            created_at: Utc::now(),
        };
        let mut doc = cv_json(&cv);
        doc["attributes"]["upload-url"] = json!(format!(
            "http://{host}/api/v2/configuration-versions/{}/upload",
            cv.id
        ));
        state.configuration_versions.insert(cv.id.clone(), cv);
        Ok(created(json!({"data": doc})))
    })
}

async fn read_cv(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let cv = state
            .configuration_versions
            .get(&id)
            .ok_or_else(ApiError::not_found)?;
        auth::readable(state, caller, &cv.workspace)?;
        Ok(ok(json!({"data": cv_json(cv)})))
    })
}

/// The upload URL takes the archive without a token, like the real archivist URL.
async fn upload_cv(AxState(svc): AxState<Svc>, Path(id): Path<String>) -> Response {
    let mut state = svc.lock();
    let Some(cv) = state.configuration_versions.get_mut(&id) else {
        return ApiError::not_found().into_response();
    };
    if cv.status != "pending" {
        return ApiError::conflict("configuration version already uploaded").into_response();
    }
    cv.status = "uploaded".into();
    let cv = cv.clone();
    if !cv.speculative {
        if let Some(w) = state.workspaces.get_mut(&cv.workspace) {
            w.current_configuration_version = Some(cv.id.clone());
        }
    }
    if cv.auto_queue_runs {
        let opts = NewRun {
            configuration_version: Some(cv.id.clone()),
            source: "tfe-configuration-version".into(),
            message: Some("Queued manually via the API".into()),
            ..NewRun::default()
        };
        let _ = queue_run(&mut state, None, &cv.workspace, opts);
    }
    axum::http::StatusCode::OK.into_response()
}

/// `target-addrs`/`replace-addrs` are `null` when unset, as the live service answers them
/// (python-tfe's `Run.target_addrs` reads `None`, go-tfe's `TargetAddrs` a nil slice); an
/// empty array would read as "target nothing" to a typed client.
fn addrs_or_null(addrs: &[String]) -> Value {
    if addrs.is_empty() {
        Value::Null
    } else {
        json!(addrs)
    }
}
