//! No-code provisioning of the workspace service (spec B §2.5, §4.5), and the workspace,
//! registry-module and run reads it needs.
//!
//! Path encoding and pagination are the shared JSON:API helpers of [`super`]; fields the
//! service sends as `null` and absent fields are treated alike.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{list_all, seg as enc};
use crate::clients::http::{ClientError, Http};

const API: &str = "/api/v2";

/// Calls of no-code provisioning: no-code modules, registry modules, no-code workspaces and their
/// upgrades.
#[derive(Clone, Debug)]
pub struct NoCodeClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for NoCodeClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

/// One variable-options set of a no-code module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteOptions {
    /// The set's id.
    pub id: String,
    /// The variable it constrains.
    pub name: String,
    /// The variable's type (`string`, `number`, ...).
    pub type_: String,
    /// The values allowed.
    pub options: Vec<String>,
}

/// A variable-options set to send: the id of the set it replaces (none: a new set), the
/// variable's name and type, and the allowed values.
pub type OptionSet = (Option<String>, String, String, Vec<String>);

/// A no-code module as the service has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteModule {
    /// The no-code module's id.
    pub id: String,
    /// Its organization.
    pub organization: String,
    /// The id of the registry module it is made from.
    pub registry_module: String,
    /// Whether workspaces can be provisioned from it.
    pub enabled: bool,
    /// `""` when the module floats.
    pub version_pin: String,
    /// Its variable-options sets.
    pub options: Vec<RemoteOptions>,
}

/// A private-registry module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryModule {
    /// The registry module's id.
    pub id: String,
    /// Its namespace (the organization, for a private module).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its provider, e.g. `aws`.
    pub provider: String,
    /// The versions published.
    pub versions: Vec<String>,
    /// Ids of the no-code modules made from it.
    pub no_code_modules: Vec<String>,
}

/// The settings of a workspace that a NoCodeWorkspace manages.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteWorkspace {
    /// The workspace's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its organization.
    pub organization: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// `remote` or `agent`.
    pub execution_mode: String,
    /// The agent pool of the `agent` execution mode.
    pub agent_pool_id: Option<String>,
    /// Whether successful plans are applied without a confirmation.
    pub auto_apply: bool,
    /// Its project, if any.
    pub project_id: Option<String>,
    /// `private/<org>/<name>/<provider>/<version>` for a no-code workspace.
    pub source_module_id: Option<String>,
    /// Whether a newer module version than the workspace's is available.
    pub upgrade_available: bool,
    /// The workspace document (`data`), for the shared settings diff.
    pub raw: Value,
}

impl RemoteWorkspace {
    /// The module version of a no-code workspace (the last segment of its `source-module-id`).
    pub fn module_version(&self) -> Option<String> {
        self.source_module_id
            .as_deref()
            .and_then(|s| s.rsplit('/').next())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    }
}

/// What starting an upgrade did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpgradeStart {
    /// An upgrade run was started.
    Started(Upgrade),
    /// Nothing to upgrade: the service's message, no run.
    NothingToUpgrade(String),
}

/// An upgrade (its run) and where to read its plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upgrade {
    /// The upgrade run's id.
    pub id: String,
    /// The run's status.
    pub status: String,
    /// Where to read its plan, when the service gives it.
    pub plan_url: Option<String>,
}

/// The machine-readable state of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunState {
    /// The run's status, e.g. `planned` or `applied`.
    pub status: String,
    /// Whether the run waits for a confirmation to apply.
    pub is_confirmable: bool,
    /// Whether its plan changes anything.
    pub has_changes: bool,
    /// Whether it was force-cancelled.
    pub force_canceled: bool,
}

impl RunState {
    /// Every terminal state (a force-cancel ends `canceled` on the live service, or
    /// `force_canceled` where the spec's enum has it).
    pub fn is_final(&self) -> bool {
        matches!(
            self.status.as_str(),
            "applied"
                | "planned_and_finished"
                | "discarded"
                | "errored"
                | "canceled"
                | "force_canceled"
                | "policy_soft_failed"
        )
    }
}

/// A workspace variable to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarInput {
    /// The variable's name.
    pub key: String,
    /// Its value.
    pub value: String,
    /// `terraform` (an input variable) or `env` (an environment variable).
    pub category: String,
    /// Whether the value is HCL rather than a string.
    pub hcl: bool,
    /// Whether the service hides the value once written.
    pub sensitive: bool,
    /// A description shown in the service.
    pub description: Option<String>,
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn rel_id(data: &Value, rel: &str) -> Option<String> {
    data.pointer(&format!("/relationships/{rel}/data/id"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn absent(e: &ClientError) -> bool {
    e.status() == Some(404)
}

fn parse_module(doc: &Value) -> RemoteModule {
    let data = &doc["data"];
    let attrs = &data["attributes"];
    let included: Vec<&Value> = doc
        .get("included")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let option_ids: Vec<String> = data
        .pointer("/relationships/variable-options/data")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|o| o.get("id").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let options = option_ids
        .iter()
        .filter_map(|id| {
            included
                .iter()
                .find(|i| i["id"] == json!(id) && i["type"] == "variable-options")
                .map(|i| {
                    let a = &i["attributes"];
                    RemoteOptions {
                        id: id.clone(),
                        name: text(a, "variable-name").unwrap_or_default(),
                        type_: text(a, "variable-type").unwrap_or_default(),
                        options: a
                            .get("options")
                            .and_then(Value::as_array)
                            .map(|o| {
                                o.iter()
                                    .map(|x| match x {
                                        Value::String(s) => s.clone(),
                                        other => other.to_string(),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                    }
                })
        })
        .collect();
    RemoteModule {
        id: text(data, "id").unwrap_or_default(),
        organization: rel_id(data, "organization").unwrap_or_default(),
        registry_module: rel_id(data, "registry-module").unwrap_or_default(),
        enabled: attrs
            .get("enabled")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        version_pin: text(attrs, "version-pin").unwrap_or_default(),
        options,
    }
}

fn parse_workspace(data: &Value) -> RemoteWorkspace {
    let a = &data["attributes"];
    RemoteWorkspace {
        id: text(data, "id").unwrap_or_default(),
        name: text(a, "name").unwrap_or_default(),
        organization: rel_id(data, "organization").unwrap_or_default(),
        description: text(a, "description"),
        execution_mode: text(a, "execution-mode").unwrap_or_else(|| "remote".into()),
        agent_pool_id: rel_id(data, "agent-pool").or_else(|| text(a, "agent-pool-id")),
        auto_apply: a
            .get("auto-apply")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        project_id: rel_id(data, "project"),
        source_module_id: text(a, "source-module-id"),
        upgrade_available: a
            .get("no-code-upgrade-available")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        raw: data.clone(),
    }
}

fn vars_json(vars: &[VarInput]) -> Value {
    Value::Array(
        vars.iter()
            .map(|v| {
                json!({"type": "vars", "attributes": {
                    "key": v.key,
                    "value": v.value,
                    "category": v.category,
                    "hcl": v.hcl,
                    "sensitive": v.sensitive,
                    "description": v.description.clone().unwrap_or_default(),
                }})
            })
            .collect(),
    )
}

/// The answer to starting an upgrade (pure). With nothing to upgrade the service queues no
/// run and answers a `workspace-upgrade` document whose attributes hold only `message` (go-tfe's
/// `WorkspaceUpgrade.Message`, "the message returned by the API when an upgrade is not
/// available", commit d412d63e "Use new standard no-code wksp upgrade response structure");
/// before that change it answered a bare `{"message": ...}` (go-tfe 36d261e1 decoded it so).
/// Both are read; a run is recognised by its id with a status.
pub fn upgrade_start(body: &Value) -> UpgradeStart {
    let d = &body["data"];
    let status = text(&d["attributes"], "status").filter(|s| !s.is_empty());
    match (text(d, "id"), status) {
        (Some(id), Some(status)) => UpgradeStart::Started(Upgrade {
            id,
            status,
            plan_url: text(&d["attributes"], "plan-url"),
        }),
        _ => UpgradeStart::NothingToUpgrade(
            text(&d["attributes"], "message")
                .or_else(|| text(body, "message"))
                .unwrap_or_else(|| "no upgrade available".into()),
        ),
    }
}

/// Whether an `account/details` document is an organization token's service user (pure).
pub fn is_organization_account(doc: &Value) -> bool {
    let d = &doc["data"];
    d.pointer("/relationships/authenticated-resource/data/type")
        .and_then(Value::as_str)
        == Some("organizations")
        || d.pointer("/attributes/username")
            .and_then(Value::as_str)
            .is_some_and(|u| u.starts_with("api-org-"))
}

impl NoCodeClient {
    /// The same connection as a workspaces client: a no-code workspace is a workspace, its
    /// variables are the workspace's variables.
    pub fn workspaces(&self) -> super::WorkspacesClient {
        super::WorkspacesClient::from(self.http.clone())
    }

    /// Whether the token is an organization token (which cannot manage no-code modules). The
    /// service answers `GET /account/details` for team and organization tokens with a
    /// synthetic "service user" (its OpenAPI description): for an organization token its
    /// `authenticated-resource` relationship is the organization and its username is
    /// `api-org-<organization>-<random>` (the shape HashiCorp's own token-identity code parses).
    /// Either sign is enough.
    pub async fn is_organization_token(&self) -> Result<bool, ClientError> {
        let r = self
            .http
            .call("GET", &format!("{API}/account/details"), None)
            .await?;
        Ok(is_organization_account(&r.body))
    }

    /// `GET /no-code-modules/:id?include=variable_options`; `None` when absent.
    pub async fn read_module(&self, id: &str) -> Result<Option<RemoteModule>, ClientError> {
        match self
            .http
            .call(
                "GET",
                &format!("{API}/no-code-modules/{}?include=variable_options", enc(id)),
                None,
            )
            .await
        {
            Ok(r) => Ok(Some(parse_module(&r.body))),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn module_body(
        registry_module: &str,
        enabled: bool,
        version_pin: Option<&str>,
        options: Option<&[OptionSet]>,
    ) -> Value {
        let mut attrs = json!({"enabled": enabled});
        if let Some(p) = version_pin {
            attrs["version-pin"] = json!(p);
        }
        let mut body = json!({"data": {"type": "no-code-modules", "attributes": attrs,
            "relationships": {"registry-module": {"data": {"id": registry_module, "type": "registry-modules"}}}}});
        if let Some(opts) = options {
            let data: Vec<Value> = opts
                .iter()
                .map(|(id, name, type_, options)| {
                    let mut o = json!({"type": "variable-options", "attributes": {
                        "variable-name": name, "variable-type": type_, "options": options}});
                    if let Some(id) = id {
                        o["id"] = json!(id);
                    }
                    o
                })
                .collect();
            body["data"]["relationships"]["variable-options"] = json!({ "data": data });
        }
        body
    }

    /// `POST /organizations/:org/no-code-modules` (enable). `enabled` is always sent.
    pub async fn enable(
        &self,
        org: &str,
        registry_module: &str,
        enabled: bool,
        version_pin: Option<&str>,
        options: &[OptionSet],
    ) -> Result<RemoteModule, ClientError> {
        let body = Self::module_body(registry_module, enabled, version_pin, Some(options));
        let r = self
            .http
            .call(
                "POST",
                &format!("{API}/organizations/{}/no-code-modules", enc(org)),
                Some(&body),
            )
            .await?;
        Ok(parse_module(&r.body))
    }

    /// `PATCH /no-code-modules/:id`; options with an id replace that set.
    pub async fn update_module(
        &self,
        id: &str,
        registry_module: &str,
        enabled: bool,
        version_pin: Option<&str>,
        options: Option<&[OptionSet]>,
    ) -> Result<(), ClientError> {
        let body = Self::module_body(registry_module, enabled, version_pin, options);
        self.http
            .call(
                "PATCH",
                &format!("{API}/no-code-modules/{}", enc(id)),
                Some(&body),
            )
            .await
            .map(|_| ())
    }

    /// The organization's private-registry modules (every page).
    pub async fn registry_modules(&self, org: &str) -> Result<Vec<RegistryModule>, ClientError> {
        let items = list_all(
            &self.http,
            &format!("{API}/organizations/{}/registry-modules", enc(org)),
        )
        .await?;
        Ok(items
            .iter()
            .map(|d| {
                let a = &d["attributes"];
                RegistryModule {
                    id: text(d, "id").unwrap_or_default(),
                    namespace: text(a, "namespace").unwrap_or_default(),
                    name: text(a, "name").unwrap_or_default(),
                    provider: text(a, "provider").unwrap_or_default(),
                    versions: a
                        .get("version-statuses")
                        .and_then(Value::as_array)
                        .map(|v| v.iter().filter_map(|x| text(x, "version")).collect())
                        .unwrap_or_default(),
                    no_code_modules: d
                        .pointer("/relationships/no-code-modules/data")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|x| text(x, "id")).collect())
                        .unwrap_or_default(),
                }
            })
            .collect())
    }

    /// `POST /no-code-modules/:id/workspaces`.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_workspace(
        &self,
        module: &str,
        name: &str,
        settings: &Value,
        project: Option<&str>,
        vars: &[VarInput],
    ) -> Result<RemoteWorkspace, ClientError> {
        let mut attrs = settings.clone();
        attrs["name"] = json!(name);
        let mut body = json!({"data": {"type": "workspaces", "attributes": attrs,
            "relationships": {"vars": {"data": vars_json(vars)}}}});
        if let Some(p) = project {
            body["data"]["relationships"]["project"] =
                json!({"data": {"id": p, "type": "projects"}});
        }
        let r = self
            .http
            .call(
                "POST",
                &format!("{API}/no-code-modules/{}/workspaces", enc(module)),
                Some(&body),
            )
            .await?;
        Ok(parse_workspace(&r.body["data"]))
    }

    /// `GET /workspaces/:id`; `None` when absent.
    pub async fn read_workspace(&self, id: &str) -> Result<Option<RemoteWorkspace>, ClientError> {
        match self
            .http
            .call("GET", &format!("{API}/workspaces/{}", enc(id)), None)
            .await
        {
            Ok(r) => Ok(Some(parse_workspace(&r.body["data"]))),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /organizations/:org/workspaces/:name`; `None` when absent.
    pub async fn workspace_by_name(
        &self,
        org: &str,
        name: &str,
    ) -> Result<Option<RemoteWorkspace>, ClientError> {
        match self
            .http
            .call(
                "GET",
                &format!("{API}/organizations/{}/workspaces/{}", enc(org), enc(name)),
                None,
            )
            .await
        {
            Ok(r) => Ok(Some(parse_workspace(&r.body["data"]))),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `PATCH /workspaces/:id` with the given `data` (from the shared settings code).
    pub async fn update_workspace(&self, id: &str, data: Value) -> Result<(), ClientError> {
        let body = json!({ "data": data });
        self.http
            .call(
                "PATCH",
                &format!("{API}/workspaces/{}", enc(id)),
                Some(&body),
            )
            .await
            .map(|_| ())
    }

    /// Safe-delete (`POST /workspaces/:id/actions/safe-delete`) or delete; absent is done.
    pub async fn delete_workspace(&self, id: &str, force: bool) -> Result<(), ClientError> {
        let result = if force {
            self.http
                .call("DELETE", &format!("{API}/workspaces/{}", enc(id)), None)
                .await
        } else {
            self.http
                .call(
                    "POST",
                    &format!("{API}/workspaces/{}/actions/safe-delete", enc(id)),
                    None,
                )
                .await
        };
        match result {
            Ok(_) => Ok(()),
            Err(e) if absent(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `POST /no-code-modules/:m/workspaces/:w/upgrade`, with the variables when given.
    pub async fn start_upgrade(
        &self,
        module: &str,
        workspace: &str,
        vars: Option<&[VarInput]>,
    ) -> Result<UpgradeStart, ClientError> {
        let mut body = json!({"data": {"type": "workspaces"}});
        if let Some(v) = vars {
            body["data"]["relationships"] = json!({"vars": {"data": vars_json(v)}});
        }
        let r = self
            .http
            .call(
                "POST",
                &format!(
                    "{API}/no-code-modules/{}/workspaces/{}/upgrade",
                    enc(module),
                    enc(workspace)
                ),
                Some(&body),
            )
            .await?;
        Ok(upgrade_start(&r.body))
    }

    /// `GET /no-code-modules/:m/workspaces/:w/upgrade/:id`; `None` when absent.
    pub async fn upgrade_status(
        &self,
        module: &str,
        workspace: &str,
        id: &str,
    ) -> Result<Option<Upgrade>, ClientError> {
        match self
            .http
            .call(
                "GET",
                &format!(
                    "{API}/no-code-modules/{}/workspaces/{}/upgrade/{}",
                    enc(module),
                    enc(workspace),
                    enc(id)
                ),
                None,
            )
            .await
        {
            Ok(r) => {
                let d = &r.body["data"];
                Ok(Some(Upgrade {
                    id: id.to_string(),
                    status: text(&d["attributes"], "status").unwrap_or_default(),
                    plan_url: text(&d["attributes"], "plan-url"),
                }))
            }
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /runs/:id`: its status and `actions`; `None` when absent.
    pub async fn read_run(&self, id: &str) -> Result<Option<RunState>, ClientError> {
        match self
            .http
            .call("GET", &format!("{API}/runs/{}", enc(id)), None)
            .await
        {
            Ok(r) => {
                let a = &r.body["data"]["attributes"];
                Ok(Some(RunState {
                    status: text(a, "status").unwrap_or_default(),
                    is_confirmable: a
                        .pointer("/actions/is-confirmable")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    has_changes: a
                        .get("has-changes")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    force_canceled: a
                        .pointer("/status-timestamps/force-canceled-at")
                        .is_some_and(|v| !v.is_null()),
                }))
            }
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /no-code-modules/:m/workspaces/:w/upgrade/:id` (confirm). The service answers a
    /// plain-text message on success.
    pub async fn confirm_upgrade(
        &self,
        module: &str,
        workspace: &str,
        id: &str,
    ) -> Result<(), ClientError> {
        match self
            .http
            .call(
                "POST",
                &format!(
                    "{API}/no-code-modules/{}/workspaces/{}/upgrade/{}",
                    enc(module),
                    enc(workspace),
                    enc(id)
                ),
                None,
            )
            .await
        {
            Ok(_) | Err(ClientError::Decode { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_answer_with_only_a_message_is_nothing_to_upgrade_in_either_shape() {
        let standard = json!({"data": {"type": "workspace-upgrade",
            "attributes": {"message": "nothing new"}}});
        let bare = json!({"message": "nothing new"});
        for doc in [standard, bare] {
            match upgrade_start(&doc) {
                UpgradeStart::NothingToUpgrade(m) => assert_eq!(m, "nothing new"),
                UpgradeStart::Started(u) => panic!("started {u:?}"),
            }
        }
        let run = json!({"data": {"id": "run-1", "type": "workspace-upgrade",
            "attributes": {"status": "pending", "plan-url": "https://x/runs/run-1"}}});
        assert!(matches!(upgrade_start(&run), UpgradeStart::Started(u) if u.id == "run-1"));
    }

    #[test]
    fn an_organization_token_is_told_by_its_service_user() {
        let org = json!({"data": {"type": "users", "attributes": {"username": "api-org-acme-14JAXvyITM",
            "is-service-account": true}, "relationships": {}}});
        let by_rel = json!({"data": {"type": "users", "attributes": {"username": "svc"},
            "relationships": {"authenticated-resource": {"data": {"type": "organizations", "id": "acme"}}}}});
        let team = json!({"data": {"type": "users", "attributes": {"username": "api-team-ops-abc123",
            "is-service-account": true}, "relationships": {"authenticated-resource": {"data": {"type": "teams", "id": "team-1"}}}}});
        assert!(is_organization_account(&org));
        assert!(is_organization_account(&by_rel));
        assert!(!is_organization_account(&team));
    }

    #[test]
    fn module_document_with_included_options_is_read() {
        let doc = json!({"data": {"id": "nocode-1", "type": "no-code-modules",
            "attributes": {"enabled": true, "version-pin": ""},
            "relationships": {"organization": {"data": {"id": "org"}},
                "registry-module": {"data": {"id": "mod-1"}},
                "variable-options": {"data": [{"id": "ncvaropt-1", "type": "variable-options"}]}}},
            "included": [{"id": "ncvaropt-1", "type": "variable-options",
                "attributes": {"variable-name": "region", "variable-type": "string", "options": ["a", 1]}}]});
        let m = parse_module(&doc);
        assert_eq!(m.version_pin, "");
        assert_eq!(m.organization, "org");
        assert_eq!(m.options[0].options, vec!["a".to_string(), "1".to_string()]);
    }

    #[test]
    fn null_description_and_pool_read_as_absent() {
        let w = parse_workspace(&json!({"id": "ws-1", "attributes": {"name": "a",
            "description": null, "execution-mode": "remote", "auto-apply": false,
            "source-module-id": "private/org/net/aws/1.2.0"},
            "relationships": {"agent-pool": {"data": null}, "organization": {"data": {"id": "org"}}}}));
        assert_eq!(w.description, None);
        assert_eq!(w.agent_pool_id, None);
        assert_eq!(w.module_version().as_deref(), Some("1.2.0"));
    }
}
