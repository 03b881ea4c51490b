//! No-code provisioning (spec B §2.5, §4.5) and the private registry modules behind it.
//!
//! Registry modules (with their versions and variables) are created through the admin API.
//!
//! Corrections against the real service (issue 22), each pinned by a test in
//! `tests/workspaces_nocode.rs`:
//! * **`enabled` defaults to true** when a module is enabled without it (go-tfe's
//!   `TestRegistryNoCodeModulesCreate` "with no version given" asserts `Enabled` true; the spec
//!   says false: the real service wins).
//! * **An omitted `version-pin` stays `""`**: the module floats, its workspaces are provisioned
//!   with the newest version, and `no-code-upgrade-available` turns true once a newer version
//!   is published. A module without any version can be enabled (go-tfe's tests enable a module
//!   before creating its first version). `latest` resolves to the newest version; a pin that is
//!   neither is 422 with the live service's message (quoted in go-tfe's upgrade test).
//! * **An upgrade with nothing to upgrade** answers 200 with a `workspace-upgrade` document whose
//!   attributes hold only `message`, and queues no run. go-tfe's history pins the shape:
//!   36d261e1 first decoded a bare `{"message": ...}` into `WorkspaceUpgradeNoUpgradeAvailable`,
//!   then d412d63e ("Use new standard no-code wksp upgrade response structure") folded it into
//!   `WorkspaceUpgrade.Message`, "the message returned by the API when an upgrade is not
//!   available", decoded as a JSON:API attribute. The text itself is published nowhere we could
//!   find (go-tfe, the provider, the API docs): the sentence below is ours.
//! * **An upgrade run is a normal run** (spec §3.1 lists `planned`, `cost_estimated`, ...): it
//!   stops for confirmation like any run (in the last phase switched on for the workspace), and
//!   the confirm is accepted whenever the run's `actions.is-confirmable` is true (409
//!   otherwise); the confirmed run applies, and the workspace then records the new version. A
//!   plan without changes ends `planned_and_finished` and records the version at once.
//! * **`source-module-id`** is `private/<org>/<name>/<provider>/<version>`.
//! * Workspaces created from a module get a configuration version at creation (runs need one),
//!   and their provisioning run applies without a confirmation (the no-code flow has none).
//!
//! The sandbox's choices where the spec is silent:
//! * A variable-options set sent without `id` replaces any existing set for the same variable
//!   name (one set per variable), otherwise it is added; sets not mentioned are kept.
//! * go-tfe sends `type: "no-code-module-workspace"` for workspace creation and upgrade, the
//!   spec says `workspaces`: both are accepted. `include=variable-options` (go-tfe) and
//!   `include=variable_options` (spec) are both accepted.
//! * The confirmation answers 200 with the plain-text body `Workspace update completed`, as the
//!   real service does.
//! * `GET /no-code-modules/:id/versions/:version/module-variables` lists the module version's
//!   variables with their allowed options (used by clients to build forms).

use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::auth::{self, Caller};
use super::jsonapi::*;
use super::model::*;
use super::orgs::visible_org;
use super::workspace::{
    check_includes, create_project_for, new_workspace, valid_name, workspace_json,
};
use super::{query, run, versions, Svc};

pub fn routes() -> Router<Svc> {
    Router::new()
        .route("/api/v2/organizations/{org}/no-code-modules", post(enable))
        .route(
            "/api/v2/no-code-modules/{id}/versions/{version}/module-variables",
            get(module_variables),
        )
        .route(
            "/api/v2/no-code-modules/{id}",
            get(read).patch(update).put(update).delete(remove),
        )
        .route(
            "/api/v2/no-code-modules/{id}/workspaces",
            post(create_workspace),
        )
        .route(
            "/api/v2/no-code-modules/{id}/workspaces/{ws}/upgrade",
            post(start_upgrade),
        )
        .route(
            "/api/v2/no-code-modules/{id}/workspaces/{ws}/upgrade/{run}",
            get(upgrade_status).post(confirm_upgrade),
        )
        // terrasnek's no-code client addresses the upgrade under the organization (and starts it
        // without the `/upgrade` suffix); served as aliases so that client works.
        .route(
            "/api/v2/organizations/{org}/no-code-modules/{id}/workspaces/{ws}",
            post(start_upgrade_org_alias),
        )
        .route(
            "/api/v2/organizations/{org}/no-code-modules/{id}/workspaces/{ws}/upgrade",
            post(start_upgrade_org_alias),
        )
        .route(
            "/api/v2/organizations/{org}/no-code-modules/{id}/workspaces/{ws}/upgrade/{run}",
            get(upgrade_status_org_alias).post(confirm_upgrade_org_alias),
        )
        .route(
            "/api/v2/organizations/{org}/registry-modules",
            get(list_modules),
        )
        .route(
            "/api/v2/organizations/{org}/registry-modules/{registry}/{namespace}/{name}/{provider}",
            get(read_module),
        )
}

/// The concrete module version a no-code module provisions with: its pin, or the newest
/// version of the registry module when the pin is `""` (floating). `None` when it floats and
/// the module has no versions yet.
pub fn pinned_version(state: &State, m: &NoCodeModule) -> Option<String> {
    if !m.version_pin.is_empty() {
        return Some(m.version_pin.clone());
    }
    let rm = state.registry_modules.get(&m.registry_module)?;
    let avail: Vec<String> = rm.versions.iter().map(|v| v.version.clone()).collect();
    versions::newest(&avail)
}

/// The `source-module-id` of a workspace provisioned from `m` at `version`.
pub fn source_module_id(m: &RegistryModule, version: &str) -> String {
    format!(
        "private/{}/{}/{}/{version}",
        m.namespace, m.name, m.provider
    )
}

/// Records on a no-code workspace the module version an upgrade moved it to.
pub fn record_upgrade(state: &mut State, ws_id: &str, version: &str, version_id: &str) {
    let module = state
        .workspaces
        .get(ws_id)
        .and_then(|w| w.no_code.as_ref())
        .and_then(|o| state.no_code_modules.get(&o.no_code_module))
        .and_then(|nc| state.registry_modules.get(&nc.registry_module))
        .cloned();
    if let Some(origin) = state
        .workspaces
        .get_mut(ws_id)
        .and_then(|w| w.no_code.as_mut())
    {
        origin.version = version.to_string();
        origin.version_id = version_id.to_string();
        if let Some(m) = module {
            origin.registry_module = source_module_id(&m, version);
        }
    }
}

fn module_json(state: &State, m: &RegistryModule) -> Value {
    let no_code: Vec<String> = state
        .no_code_modules
        .values()
        .filter(|n| n.registry_module == m.id)
        .map(|n| n.id.clone())
        .collect();
    json!({
        "id": m.id,
        "type": "registry-modules",
        "attributes": {
            "name": m.name,
            "namespace": m.namespace,
            "provider": m.provider,
            "registry-name": "private",
            "status": "setup_complete",
            "no-code": !no_code.is_empty(),
            "version-statuses": m.versions.iter().map(|v| json!({"version": v.version, "status": "ok"})).collect::<Vec<_>>(),
            "created-at": iso(&m.created_at),
            "updated-at": iso(&m.created_at),
            "permissions": {"can-delete": true, "can-resync": true, "can-retry": true},
        },
        "relationships": {
            "organization": rel_one("organizations", Some(&m.organization)),
            "no-code-modules": rel_many("no-code-modules", no_code),
        },
        "links": {"self": format!("/api/v2/registry-modules/private/{}/{}/{}", m.namespace, m.name, m.provider)},
    })
}

async fn list_modules(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(org): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        let items = state
            .registry_modules
            .values()
            .filter(|m| m.organization == org)
            .map(|m| module_json(state, m))
            .collect();
        Ok(ok(paginate(
            items,
            &params,
            &format!("/api/v2/organizations/{org}/registry-modules"),
            vec![],
        )))
    })
}

async fn read_module(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((org, registry, namespace, name, provider)): Path<(
        String,
        String,
        String,
        String,
        String,
    )>,
) -> Response {
    svc.call(&headers, |state, caller| {
        visible_org(state, caller, &org)?;
        if registry != "private" {
            return Err(ApiError::not_found());
        }
        let m = state
            .registry_modules
            .values()
            .find(|m| {
                m.organization == org
                    && m.namespace == namespace
                    && m.name == name
                    && m.provider == provider
            })
            .ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": module_json(state, m)})))
    })
}

/// The variables a module version declares, with the allowed options of the no-code module.
async fn module_variables(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((id, version)): Path<(String, String)>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let nc = visible_nocode(state, caller, &id)?;
        let m = state
            .registry_modules
            .get(&nc.registry_module)
            .ok_or_else(ApiError::not_found)?;
        let v = m
            .versions
            .iter()
            .find(|v| v.version == version)
            .ok_or_else(ApiError::not_found)?;
        let items: Vec<Value> = v
            .variables
            .iter()
            .enumerate()
            .map(|(i, var)| {
                let options = nc
                    .variable_options
                    .iter()
                    .find(|o| o.variable_name == var.name)
                    .map(|o| o.options.clone())
                    .unwrap_or_default();
                let default = match &var.default {
                    None | Some(Value::Null) => Value::Null,
                    Some(Value::String(s)) => json!(s),
                    Some(other) => json!(other.to_string()),
                };
                json!({
                    "id": format!("{}-{}-{i}", m.id, version),
                    "type": "registry-module-variables",
                    "attributes": {
                        "name": var.name,
                        "type": var.var_type,
                        "description": var.description,
                        "default": default,
                        "required": var.required && var.default.is_none(),
                        "sensitive": false,
                        "options": options,
                    },
                })
            })
            .collect();
        Ok(ok(json!({"data": items})))
    })
}

fn options_json(nc: &NoCodeModule, o: &VariableOptions) -> Value {
    json!({
        "id": o.id,
        "type": "variable-options",
        "attributes": {"variable-name": o.variable_name, "variable-type": o.variable_type, "options": o.options},
        "relationships": {"no-code-allowed-module": {"data": {"id": nc.id, "type": "no-code-allowed-modules"}}},
    })
}

fn nocode_json(nc: &NoCodeModule) -> Value {
    json!({
        "id": nc.id,
        "type": "no-code-modules",
        "attributes": {"enabled": nc.enabled, "version-pin": nc.version_pin},
        "relationships": {
            "organization": {
                "data": {"id": nc.organization, "type": "organizations"},
                "links": {"related": format!("/api/v2/organizations/{}", nc.organization)},
            },
            "registry-module": {
                "data": {"id": nc.registry_module, "type": "registry-modules"},
                "links": {"related": format!("/api/v2/registry-modules/{}", nc.registry_module)},
            },
            "variable-options": rel_many("variable-options", nc.variable_options.iter().map(|o| o.id.clone())),
        },
        "links": {"self": format!("/api/v2/no-code-modules/{}", nc.id)},
    })
}

/// Managing no-code modules: a user or team token of the owners team or of a team managing
/// workspaces organization-wide (organization tokens are refused, spec §5).
fn require_module_manager(state: &State, caller: &Caller, org: &str) -> ApiResult<()> {
    auth::require_user_or_team(caller)?;
    visible_org(state, caller, org)?;
    if auth::can_manage_workspaces(state, caller, org) {
        Ok(())
    } else {
        Err(ApiError::not_found())
    }
}

/// The registry module named by `relationships.registry-module`, checked for no-code use.
fn registry_module_of(
    state: &State,
    data: &Map<String, Value>,
    org: &str,
) -> ApiResult<Option<RegistryModule>> {
    let Some(id) = relationship_id(data, "registry-module") else {
        return Ok(None);
    };
    let m = state
        .registry_modules
        .get(&id)
        .filter(|m| m.organization == org)
        .ok_or_else(ApiError::not_found)?;
    if !m.no_code_ready {
        return Err(ApiError::invalid(
            "/data/relationships/registry-module",
            "The module does not meet the no-code design requirements",
        ));
    }
    Ok(Some(m.clone()))
}

/// The live service's refusal of a pin that is neither `latest` nor a version of the module.
const BAD_PIN: &str = "Validation failed: Provided version pin is not equal to latest or provided string does not represent an existing version of the module.";

/// The stored pin: `""` (floating) when omitted or empty, the newest version for `latest`,
/// else a version of the module.
fn resolve_pin(m: &RegistryModule, pin: Option<String>) -> ApiResult<String> {
    let avail: Vec<String> = m.versions.iter().map(|v| v.version.clone()).collect();
    match pin.as_deref() {
        None | Some("") => Ok(String::new()),
        Some("latest") => versions::newest(&avail)
            .ok_or_else(|| ApiError::invalid("/data/attributes/version-pin", BAD_PIN)),
        Some(v) if avail.iter().any(|a| a == v) => Ok(v.to_string()),
        Some(_) => Err(ApiError::invalid("/data/attributes/version-pin", BAD_PIN)),
    }
}

/// One variable-options entry of a request: its id when given, and its attributes.
type OptionEntry = (Option<String>, Map<String, Value>);

/// Variable-option sets of a request body: `relationships.variable-options.data[]`, with the
/// attributes inline or, for clients that side-load them, in `included` (matched by position
/// among the entries without attributes).
fn variable_option_entries(
    body: &Value,
    data: &Map<String, Value>,
) -> ApiResult<Option<Vec<OptionEntry>>> {
    let Some(list) = relationship_list(data, "variable-options") else {
        return Ok(None);
    };
    let mut side = body
        .get("included")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("variable-options"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter();
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        if item
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "variable-options")
        {
            return Err(ApiError::invalid(
                &format!("/data/relationships/variable-options/data/{i}/type"),
                "type must be variable-options",
            ));
        }
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let attrs = match item.get("attributes").and_then(Value::as_object) {
            Some(a) => a.clone(),
            None => side
                .next()
                .and_then(|s| s.get("attributes"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        };
        out.push((id, attrs));
    }
    Ok(Some(out))
}

fn parse_options(
    i: usize,
    attrs: &Map<String, Value>,
    m: &RegistryModule,
    version: &str,
) -> ApiResult<VariableOptions> {
    let a = Attrs::from_map(attrs);
    let ptr = |k: &str| format!("/data/relationships/variable-options/data/{i}/attributes/{k}");
    let name = match a.raw("variable-name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(ApiError::invalid(
                &ptr("variable-name"),
                "variable-name is required",
            ))
        }
    };
    let vtype = match a.raw("variable-type") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(ApiError::invalid(
                &ptr("variable-type"),
                "variable-type is required",
            ))
        }
    };
    let options = match a.raw("options") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(o)) => o.clone(),
        Some(_) => {
            return Err(ApiError::invalid(
                &ptr("options"),
                "options must be an array",
            ))
        }
    };
    if let Some(v) = m.versions.iter().find(|v| v.version == version) {
        if !v.variables.is_empty() && !v.variables.iter().any(|x| x.name == name) {
            return Err(ApiError::invalid(
                &ptr("variable-name"),
                format!("{name:?} is not a variable of the module"),
            ));
        }
    }
    Ok(VariableOptions {
        id: new_id("ncvaropt-"),
        variable_name: name,
        variable_type: vtype,
        options,
    })
}

async fn enable(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(org): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        require_module_manager(state, caller, &org)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["no-code-modules"])?;
        let m = registry_module_of(state, data, &org)?.ok_or_else(|| {
            ApiError::invalid(
                "/data/relationships/registry-module/data/id",
                "registry-module is required",
            )
        })?;
        if state
            .no_code_modules
            .values()
            .any(|n| n.registry_module == m.id)
        {
            return Err(ApiError::invalid(
                "/data/relationships/registry-module",
                "No-code provisioning is already configured for this module",
            ));
        }
        let a = Attrs::of(data)?;
        let pin = resolve_pin(&m, a.string("version-pin")?)?;
        let enabled = a.bool("enabled")?.unwrap_or(true);
        let mut opts = Vec::new();
        for (i, (_, attrs)) in variable_option_entries(&body, data)?
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let o = parse_options(i, &attrs, &m, &pin)?;
            opts.retain(|x: &VariableOptions| x.variable_name != o.variable_name);
            opts.push(o);
        }
        let nc = NoCodeModule {
            id: new_id("nocode-"),
            organization: org.clone(),
            registry_module: m.id.clone(),
            enabled,
            version_pin: pin,
            variable_options: opts,
            version_ids: Default::default(),
        };
        let doc = nocode_json(&nc);
        state.no_code_modules.insert(nc.id.clone(), nc);
        Ok(ok(json!({"data": doc})))
    })
}

/// The no-code module if the caller belongs to its organization; 404 otherwise.
fn visible_nocode(state: &State, caller: &Caller, id: &str) -> ApiResult<NoCodeModule> {
    let nc = state
        .no_code_modules
        .get(id)
        .ok_or_else(ApiError::not_found)?;
    visible_org(state, caller, &nc.organization)?;
    Ok(nc.clone())
}

async fn read(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let params = query(&uri);
    svc.call(&headers, |state, caller| {
        let nc = visible_nocode(state, caller, &id)?;
        let includes = params.includes();
        check_includes(&includes, &["variable_options"])?;
        let mut doc = json!({"data": nocode_json(&nc)});
        if !includes.is_empty() {
            doc["included"] = Value::Array(
                nc.variable_options
                    .iter()
                    .map(|o| options_json(&nc, o))
                    .collect(),
            );
        }
        Ok(ok(doc))
    })
}

async fn update(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        let mut nc = visible_nocode(state, caller, &id)?;
        require_module_manager(state, caller, &nc.organization)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(data, &["no-code-modules"])?;
        let module = match registry_module_of(state, data, &nc.organization)? {
            Some(m) => {
                if m.id != nc.registry_module
                    && state
                        .no_code_modules
                        .values()
                        .any(|n| n.registry_module == m.id)
                {
                    return Err(ApiError::invalid(
                        "/data/relationships/registry-module",
                        "No-code provisioning is already configured for this module",
                    ));
                }
                m
            }
            None => state
                .registry_modules
                .get(&nc.registry_module)
                .cloned()
                .ok_or_else(ApiError::not_found)?,
        };
        let a = Attrs::of(data)?;
        let module_changed = module.id != nc.registry_module;
        nc.version_pin = match a.string("version-pin")? {
            Some(p) => resolve_pin(&module, Some(p))?,
            None if module_changed => resolve_pin(&module, None)?,
            None => nc.version_pin.clone(),
        };
        nc.registry_module = module.id.clone();
        if let Some(e) = a.bool("enabled")? {
            nc.enabled = e;
        }
        if let Some(entries) = variable_option_entries(&body, data)? {
            for (i, (oid, attrs)) in entries.into_iter().enumerate() {
                let mut o = parse_options(i, &attrs, &module, &nc.version_pin)?;
                match oid {
                    Some(oid) => {
                        let slot = nc
                            .variable_options
                            .iter_mut()
                            .find(|x| x.id == oid)
                            .ok_or_else(|| {
                                ApiError::invalid(
                                    &format!("/data/relationships/variable-options/data/{i}/id"),
                                    format!("variable options {oid:?} not found"),
                                )
                            })?;
                        o.id = oid;
                        *slot = o;
                    }
                    None => {
                        nc.variable_options
                            .retain(|x| x.variable_name != o.variable_name);
                        nc.variable_options.push(o);
                    }
                }
            }
        }
        let doc = nocode_json(&nc);
        state.no_code_modules.insert(nc.id.clone(), nc);
        Ok(ok(json!({"data": doc})))
    })
}

async fn remove(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let nc = visible_nocode(state, caller, &id)?;
        require_module_manager(state, caller, &nc.organization)?;
        state.no_code_modules.remove(&id);
        Ok(no_content())
    })
}

/// Whether `value` (a variable value as sent: a string, possibly an HCL literal) is one of the
/// allowed options.
fn option_allows(options: &[Value], value: &str) -> bool {
    options.iter().any(|o| match o {
        Value::String(s) => {
            s == value
                || value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) == Some(s.as_str())
        }
        // Numbers and booleans compare as the HCL literal the value string holds.
        other => serde_json::from_str::<Value>(value).is_ok_and(|v| &v == other),
    })
}

/// Workspace variables of a create/upgrade body, validated against the module version and the
/// variable options.
fn parse_vars(
    data: &Map<String, Value>,
    nc: &NoCodeModule,
    m: &RegistryModule,
    version: &str,
    require_all: bool,
) -> ApiResult<Vec<Var>> {
    let mut out: Vec<Var> = Vec::new();
    let module_vars = m
        .versions
        .iter()
        .find(|v| v.version == version)
        .map(|v| v.variables.clone())
        .unwrap_or_default();
    for (i, item) in relationship_list(data, "vars")
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ptr = |k: &str| format!("/data/relationships/vars/data/{i}/attributes/{k}");
        if item
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "vars")
        {
            return Err(ApiError::invalid(
                &format!("/data/relationships/vars/data/{i}/type"),
                "type must be vars",
            ));
        }
        let attrs = item
            .get("attributes")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let a = Attrs::from_map(&attrs);
        let key = a
            .string("key")
            .map_err(|_| ApiError::invalid(&ptr("key"), "key must be a string"))?;
        let key = key
            .filter(|k| !k.is_empty())
            .ok_or_else(|| ApiError::invalid(&ptr("key"), "key is required"))?;
        let value = match a.raw("value") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let category = a
            .string("category")
            .ok()
            .flatten()
            .unwrap_or_else(|| "terraform".into());
        if category != "terraform" && category != "env" {
            return Err(ApiError::invalid(
                &ptr("category"),
                "category must be terraform or env",
            ));
        }
        if category == "terraform" {
            if !module_vars.is_empty() && !module_vars.iter().any(|v| v.name == key) {
                return Err(ApiError::invalid(
                    &ptr("key"),
                    format!("{key:?} is not a variable of the module"),
                ));
            }
            if let Some(o) = nc.variable_options.iter().find(|o| o.variable_name == key) {
                if !o.options.is_empty() && !option_allows(&o.options, &value) {
                    return Err(ApiError::invalid(
                        &ptr("value"),
                        format!("{value:?} is not one of the allowed options for {key}"),
                    ));
                }
            }
        }
        out.retain(|v| !(v.key == key && v.category == category));
        out.push(Var {
            id: new_id("var-"),
            key,
            value,
            description: a.string("description").ok().flatten().unwrap_or_default(),
            category: category.clone(),
            hcl: a.bool("hcl").ok().flatten().unwrap_or(false) && category == "terraform",
            sensitive: a.bool("sensitive").ok().flatten().unwrap_or(false),
        });
    }
    if require_all {
        for mv in module_vars
            .iter()
            .filter(|v| v.required && v.default.is_none())
        {
            if !out
                .iter()
                .any(|v| v.category == "terraform" && v.key == mv.name)
            {
                return Err(ApiError::invalid(
                    "/data/relationships/vars",
                    format!("The module variable {:?} is required", mv.name),
                ));
            }
        }
    }
    Ok(out)
}

fn version_id(nc: &mut NoCodeModule, version: &str) -> String {
    nc.version_ids
        .entry(version.to_string())
        .or_insert_with(|| new_id("nocodever-"))
        .clone()
}

async fn create_workspace(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        auth::require_user_or_team(caller)?;
        let mut nc = visible_nocode(state, caller, &id)?;
        let body = parse_body(&body)?;
        let data = data_object(&body)?;
        check_type(
            data,
            &[
                "workspaces",
                "no-code-module-workspace",
                "no-code-module-workspaces",
            ],
        )?;
        let org = nc.organization.clone();
        let project = create_project_for(state, caller, &org, data)?;
        if !nc.enabled {
            return Err(ApiError::unprocessable(
                "No-code provisioning is not enabled for this module",
            ));
        }
        let m = state
            .registry_modules
            .get(&nc.registry_module)
            .cloned()
            .ok_or_else(ApiError::not_found)?;
        let a = Attrs::of(data)?;
        let name = a
            .string("name")?
            .ok_or_else(|| ApiError::invalid("/data/attributes/name", "Name can't be blank"))?;
        if !valid_name(&name) {
            return Err(ApiError::invalid(
                "/data/attributes/name",
                "Name can only include letters, numbers, -, and _.",
            ));
        }
        if state
            .workspaces
            .values()
            .any(|w| w.organization == org && w.name == name)
        {
            return Err(ApiError::invalid(
                "/data/attributes/name",
                "Name has already been taken",
            ));
        }
        let mode = a
            .string("execution-mode")?
            .unwrap_or_else(|| "remote".into());
        let pool = a.string("agent-pool-id")?;
        match (mode.as_str(), &pool) {
            ("remote", None) => {}
            ("remote", Some(_)) => {
                return Err(ApiError::invalid(
                    "/data/attributes/agent-pool-id",
                    "Agent pool must not be specified with remote execution mode",
                ))
            }
            ("agent", None) => {
                return Err(ApiError::invalid(
                    "/data/attributes/agent-pool-id",
                    "Agent pool must be specified when using 'agent' execution mode",
                ))
            }
            ("agent", Some(p)) => {
                if state.agent_pools.get(p) != Some(&org) {
                    return Err(ApiError::invalid(
                        "/data/attributes/agent-pool-id",
                        "Agent pool not found",
                    ));
                }
            }
            _ => {
                return Err(ApiError::invalid(
                    "/data/attributes/execution-mode",
                    "Execution mode must be remote or agent",
                ))
            }
        }
        let version = pinned_version(state, &nc).ok_or_else(|| {
            ApiError::unprocessable("The module has no versions to provision from")
        })?;
        let vars = parse_vars(data, &nc, &m, &version, true)?;
        let mut ws = new_workspace(state, &org, &project);
        ws.name = name;
        // Unset stays `null`, as the live service answers (issue 22; terrasnek's
        // `no_code_provisioning.deploy` without a description reads `None`).
        ws.description = a.string("description")?;
        ws.auto_apply = a.bool("auto-apply")?.unwrap_or(false);
        ws.execution_mode = mode;
        ws.agent_pool_id = pool;
        ws.source_name = a.string("source-name")?;
        ws.source_url = a.string("source-url")?;
        if let Some(v) = a
            .string("engine-version")?
            .or(a.string("terraform-version")?)
        {
            if versions::resolve(&v, &state.settings.engine_versions).is_none() {
                return Err(ApiError::invalid(
                    "/data/attributes/terraform-version",
                    format!("Version {v:?} is not an available version"),
                ));
            }
            ws.engine_version = v;
        }
        ws.vars = vars;
        ws.no_code = Some(NoCodeOrigin {
            no_code_module: nc.id.clone(),
            registry_module: source_module_id(&m, &version),
            version_id: version_id(&mut nc, &version),
            version,
        });
        // A no-code workspace gets its configuration version (the module's) at creation.
        run::new_configuration_version(state, &mut ws, "tfe-module", false);
        let ws_id = ws.id.clone();
        let auto_apply = ws.auto_apply;
        state.workspaces.insert(ws_id.clone(), ws);
        state.no_code_modules.insert(nc.id.clone(), nc);
        // The provisioning run applies by itself (no-code provisioning has no confirmation
        // step), whatever the workspace's auto-apply setting for later runs.
        let _ = auto_apply;
        let opts = run::NewRun {
            auto_apply: Some(true),
            message: Some("Triggered via no-code provisioning".into()),
            ..run::NewRun::default()
        };
        run::queue_run(state, Some(caller), &ws_id, opts)?;
        let ws = state
            .workspaces
            .get(&ws_id)
            .ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": workspace_json(state, caller, ws)})))
    })
}

/// The workspace-upgrade document; `plan-url` is absolute, on the host the client called.
fn upgrade_json(headers: &HeaderMap, ws: &Workspace, run: &Run) -> Value {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    json!({
        "id": run.id,
        "type": "workspace-upgrade",
        "attributes": {
            "status": run.status,
            "plan-url": format!("http://{host}/app/{}/workspaces/{}/runs/{}", ws.organization, ws.name, run.id),
        },
        "relationships": {"workspace": {"data": {"id": ws.id, "type": "workspaces"}}},
    })
}

/// The no-code workspace of module `id`, checked for `need` access; 404 otherwise.
fn nocode_workspace(
    state: &State,
    caller: &Caller,
    id: &str,
    ws_id: &str,
    need: Access,
) -> ApiResult<(NoCodeModule, Workspace)> {
    let nc = visible_nocode(state, caller, id)?;
    let ws = auth::readable(state, caller, ws_id)?.clone();
    auth::require(state, caller, ws_id, need)?;
    if ws
        .no_code
        .as_ref()
        .is_none_or(|o| o.no_code_module != nc.id)
    {
        return Err(ApiError::not_found());
    }
    Ok((nc, ws))
}

async fn start_upgrade(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((id, ws_id)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    svc.call(&headers, |state, caller| {
        auth::require_user_or_team(caller)?;
        let (mut nc, mut ws) = nocode_workspace(state, caller, &id, &ws_id, Access::Write)?;
        let body = parse_body(&body)?;
        let empty = Map::new();
        let data = match body.get("data") {
            None | Some(Value::Null) => &empty,
            Some(_) => data_object(&body)?,
        };
        if !data.is_empty() {
            check_type(
                data,
                &[
                    "workspaces",
                    "no-code-module-workspace",
                    "no-code-module-workspaces",
                ],
            )?;
        }
        let m = state
            .registry_modules
            .get(&nc.registry_module)
            .cloned()
            .ok_or_else(ApiError::not_found)?;
        let target = pinned_version(state, &nc).unwrap_or_default();
        let current = ws.no_code.as_ref().map(|o| o.version.clone());
        if target.is_empty() || current.as_deref() == Some(target.as_str()) {
            // Nothing to upgrade: the live service answers a document with only `message`.
            return Ok(ok(json!({"data": {
                "type": "workspace-upgrade",
                "attributes": {"message": "No upgrade available for this workspace."},
            }})));
        }
        if relationship_list(data, "vars").is_some() {
            for v in parse_vars(data, &nc, &m, &target, false)? {
                ws.vars
                    .retain(|x| !(x.key == v.key && x.category == v.category));
                ws.vars.push(v);
            }
        }
        let vid = version_id(&mut nc, &target);
        state.workspaces.insert(ws.id.clone(), ws.clone());
        state.no_code_modules.insert(nc.id.clone(), nc);
        // The upgrade run is a normal run that stops for confirmation.
        let opts = run::NewRun {
            auto_apply: Some(false),
            plan_only: Some(false),
            message: Some("No-code module upgrade".into()),
            upgrade_to: Some((target, vid)),
            ..run::NewRun::default()
        };
        let run_id = run::queue_run(state, Some(caller), &ws.id, opts)?;
        let run = state.runs.get(&run_id).ok_or_else(ApiError::not_found)?;
        Ok(ok(json!({"data": upgrade_json(&headers, &ws, run)})))
    })
}

/// The upgrade run `run` of the workspace; 404 when it is not one.
fn upgrade_run(state: &State, ws: &Workspace, run: &str) -> ApiResult<Run> {
    state
        .runs
        .get(run)
        .filter(|r| r.workspace == ws.id && r.upgrade_to.is_some())
        .cloned()
        .ok_or_else(ApiError::not_found)
}

/// Alias of [`start_upgrade`] under the organization (terrasnek's path). The organization must
/// be the module's.
async fn start_upgrade_org_alias(
    svc: AxState<Svc>,
    headers: HeaderMap,
    Path((org, id, ws_id)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    if let Some(resp) = org_mismatch(&svc, &org, &id) {
        return resp;
    }
    start_upgrade(svc, headers, Path((id, ws_id)), body).await
}

/// Alias of [`upgrade_status`] under the organization (terrasnek's path).
async fn upgrade_status_org_alias(
    svc: AxState<Svc>,
    headers: HeaderMap,
    Path((org, id, ws_id, run)): Path<(String, String, String, String)>,
) -> Response {
    if let Some(resp) = org_mismatch(&svc, &org, &id) {
        return resp;
    }
    upgrade_status(svc, headers, Path((id, ws_id, run))).await
}

/// Alias of [`confirm_upgrade`] under the organization (terrasnek's path). terrasnek decodes
/// every 200 body as JSON, so this alias answers the same message as a JSON document
/// `{"data": {"status": "Workspace update completed"}}`.
async fn confirm_upgrade_org_alias(
    svc: AxState<Svc>,
    headers: HeaderMap,
    Path((org, id, ws_id, run)): Path<(String, String, String, String)>,
) -> Response {
    if let Some(resp) = org_mismatch(&svc, &org, &id) {
        return resp;
    }
    let resp = confirm_upgrade(svc, headers, Path((id, ws_id, run))).await;
    if resp.status() != axum::http::StatusCode::OK {
        return resp;
    }
    ok(json!({"data": {"status": "Workspace update completed"}}))
}

/// 404 when the no-code module does not belong to the organization named in an alias path.
fn org_mismatch(svc: &Svc, org: &str, id: &str) -> Option<Response> {
    let state = svc.lock();
    match state.no_code_modules.get(id) {
        Some(m) if m.organization != org => Some(ApiError::not_found().into_response()),
        _ => None,
    }
}

async fn upgrade_status(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((id, ws_id, run)): Path<(String, String, String)>,
) -> Response {
    svc.call(&headers, |state, caller| {
        let (_, ws) = nocode_workspace(state, caller, &id, &ws_id, Access::Read)?;
        let r = upgrade_run(state, &ws, &run)?;
        Ok(ok(json!({"data": upgrade_json(&headers, &ws, &r)})))
    })
}

async fn confirm_upgrade(
    AxState(svc): AxState<Svc>,
    headers: HeaderMap,
    Path((id, ws_id, run)): Path<(String, String, String)>,
) -> Response {
    svc.call(&headers, |state, caller| {
        auth::require_user_or_team(caller)?;
        let (_, ws) = nocode_workspace(state, caller, &id, &ws_id, Access::Write)?;
        let r = upgrade_run(state, &ws, &run)?;
        // Accepted whenever the run is confirmable (its `actions.is-confirmable`); the
        // confirmed run applies and the workspace records the version once applied.
        if !run::is_confirmable(&r) {
            return Err(ApiError::conflict(
                "The upgrade run is not paused for confirmation",
            ));
        }
        run::confirm(state, &r.id)?;
        if let Some(run) = state.runs.get_mut(&r.id) {
            run.upgrade_applied = true;
        }
        let mut resp = (axum::http::StatusCode::OK, "Workspace update completed").into_response();
        resp.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        Ok(resp)
    })
}
