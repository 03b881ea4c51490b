//! NoCodeWorkspace ↔ `POST /no-code-modules/:id/workspaces`, then `/workspaces/:id`, and the
//! upgrade endpoints (spec B §3.1, §4.5).
//!
//! An operation-shaped kind ([`Operated`]): besides owning a workspace it follows and steers
//! upgrades. Each pass observes the workspace (by the id in status, else by name in the module's
//! organization, which also finds one whose create response was lost: never a second create),
//! creates it or corrects drifted settings, then takes at most one upgrade step:
//!
//! * the workspace shows `no-code-upgrade-available` → start the upgrade (once; recorded in
//!   `status.upgrade` with `fromVersion`/`toVersion`), sending a changed `vars` list with it;
//!   an answer with only a `message` means nothing to upgrade: done, not an error;
//! * an upgrade in flight → poll it; when its run says `actions.is-confirmable` (never decided
//!   from a status name) and the policy is `Auto` or `approvedVersion` is the target, confirm
//!   it exactly once; a plan without changes finishes by itself;
//! * final states (including `canceled` after a force-cancel) end the upgrade; a failed upgrade
//!   to a version is not restarted for that version (no retry storm).
//!
//! Variables: a no-code workspace's variables are ordinary workspace variables (the service's
//! create response lists them under `relationships.vars`, and they are read and written through
//! `/workspaces/:id/vars` like any workspace's). So `vars` are kept like a Workspace's
//! `variables` with `variablesPolicy: Merge`, with the same code: compared with the service
//! each pass, sensitive values (write-only) by a keyed hash of their source, Secrets watched,
//! and a change written at once through the variables API (the next run uses it) — except in
//! the pass that starts an upgrade, where the whole list goes in the upgrade's body (as the
//! spec's upgrade body allows) instead, and while an upgrade is in flight, where the change
//! waits for it to end. Variables not in the list are left alone.

use kube::ResourceExt;
use serde_json::{json, Map, Value};

use crate::api::workspaces::nocode::{
    DeletionMode, NoCodeModule, NoCodeWorkspace, NoCodeWorkspaceSpec, UpgradePolicy, UpgradeStatus,
};
use crate::api::workspaces::workspace::ListPolicy;
use crate::api::workspaces::workspace::WorkspaceSettings;
use crate::api::Service;
use crate::clients::workspaces::nocode::{NoCodeClient, UpgradeStart, VarInput};
use crate::clients::ClientError;
use crate::kinds::workspaces::nocode::module::{newest, org_token_refusal, ORG_TOKEN};
use crate::kinds::workspaces::settings;
use crate::kinds::workspaces::workspace::{sensitive_hash, var_changes, write_vars, DesiredVar};
use crate::reconcile::{
    conditions, managed_fields, Context, Error, Managed, Operated, Result, Step,
};

/// Condition type: whether an upgrade to a newer module version is available or under way.
pub const UPGRADE_AVAILABLE: &str = "UpgradeAvailable";
const POLL: std::time::Duration = std::time::Duration::from_secs(2);

impl Managed for NoCodeWorkspace {
    const SERVICE: Service = Service::Workspaces;
    managed_fields!();
    const WATCHES_SECRETS: bool = true;
    /// The Secrets behind `vars[].valueFrom`: a rotated one wakes the resource at once.
    fn secret_refs(&self) -> Vec<String> {
        self.spec
            .vars
            .iter()
            .flatten()
            .filter_map(|v| v.value_from.as_ref())
            .map(|s| s.secret_key_ref.name.clone())
            .collect()
    }
}

/// The NoCodeWorkspaces (of `all`) that name `module` in `moduleRef`: woken when it changes
/// (its version moved, it got its id).
pub fn users_of(
    module: &NoCodeModule,
    all: &[std::sync::Arc<NoCodeWorkspace>],
) -> Vec<std::sync::Arc<NoCodeWorkspace>> {
    all.iter()
        .filter(|w| {
            w.namespace() == module.namespace()
                && w.spec
                    .module_ref
                    .as_ref()
                    .is_some_and(|r| r.name == module.name_any())
        })
        .cloned()
        .collect()
}

/// The workspace settings a NoCodeWorkspace manages, in the Workspace kind's terms, so drift
/// is found and corrected by the shared settings code (only fields the spec sets are managed).
pub fn managed_settings(spec: &NoCodeWorkspaceSpec) -> WorkspaceSettings {
    WorkspaceSettings {
        description: spec.description.clone(),
        execution_mode: spec.execution_mode.map(|m| m.as_str().to_string()),
        agent_pool_id: spec.agent_pool_id.clone(),
        auto_apply: spec.auto_apply,
        project_id: spec.project_id.clone(),
        ..WorkspaceSettings::default()
    }
}

/// Whether the upgrade should be confirmed (pure): `Auto`, or `approvedVersion` is the target.
pub fn approved(spec: &NoCodeWorkspaceSpec, to_version: Option<&str>) -> bool {
    match spec.upgrade.policy {
        UpgradePolicy::Auto => true,
        UpgradePolicy::Manual => {
            to_version.is_some() && spec.upgrade.approved_version.as_deref() == to_version
        }
    }
}

fn is_final(status: &str) -> bool {
    matches!(
        status,
        "applied"
            | "planned_and_finished"
            | "discarded"
            | "errored"
            | "canceled"
            | "force_canceled"
            | "policy_soft_failed"
            | "gone"
    )
}

/// The module a NoCodeWorkspace provisions from.
struct Module {
    id: String,
    organization: Option<String>,
    version: Option<String>,
}

impl NoCodeWorkspace {
    fn workspace_name(&self) -> String {
        self.spec.name.clone().unwrap_or_else(|| self.name_any())
    }

    async fn module(&self, ctx: &Context) -> Result<Module> {
        let ns = self.namespace().unwrap_or_default();
        match (&self.spec.module_ref, &self.spec.no_code_module_id) {
            (Some(r), _) => {
                let m: NoCodeModule = ctx.referenced(&ns, &r.name).await?;
                let st = m.status.unwrap_or_default();
                let id = st.no_code_module_id.ok_or_else(|| {
                    Error::MissingReference(format!(
                        "waiting for NoCodeModule {ns}/{} to be enabled (it has no id yet)",
                        r.name
                    ))
                })?;
                // The NoCodeModule's status.versionPin may lag a newly published version of
                // a floating module: the target version is read from the service when needed.
                Ok(Module {
                    id,
                    organization: st.organization,
                    version: None,
                })
            }
            (None, Some(id)) => Ok(Module {
                id: id.clone(),
                organization: None,
                version: None,
            }),
            (None, None) => Err(Error::InvalidSpec(
                "one of moduleRef and noCodeModuleId is required".into(),
            )),
        }
    }

    /// The module's organization and the version an upgrade moves to, read from the service
    /// when the NoCodeModule's status does not say.
    async fn module_details(
        &self,
        client: &NoCodeClient,
        module: &mut Module,
        need_version: bool,
    ) -> Result<()> {
        if module.organization.is_some() && (module.version.is_some() || !need_version) {
            return Ok(());
        }
        let m = client.read_module(&module.id).await?.ok_or_else(|| {
            Error::MissingReference(format!("no-code module {} does not exist", module.id))
        })?;
        module.organization = Some(m.organization.clone());
        if need_version && module.version.is_none() {
            module.version = if m.version_pin.is_empty() {
                client
                    .registry_modules(&m.organization)
                    .await?
                    .into_iter()
                    .find(|r| r.id == m.registry_module)
                    .and_then(|r| newest(&r.versions))
            } else {
                Some(m.version_pin)
            };
        }
        Ok(())
    }

    /// Values of variables that are sensitive or read from Secrets: never shown in a condition
    /// or Event, even when the service's error message quotes them.
    fn secret_values(&self, vars: &[VarInput]) -> Vec<String> {
        let spec = self.spec.vars.as_deref().unwrap_or_default();
        vars.iter()
            .zip(spec)
            .filter(|(v, s)| (v.sensitive || s.value_from.is_some()) && !v.value.is_empty())
            .map(|(v, _)| v.value.clone())
            .collect()
    }

    /// The variables to send, values read from Secrets where referenced.
    async fn vars(&self, ctx: &Context) -> Result<Vec<VarInput>> {
        let ns = self.namespace().unwrap_or_default();
        let mut out = Vec::new();
        for v in self.spec.vars.as_deref().unwrap_or_default() {
            let value = match (&v.value, &v.value_from) {
                (Some(val), _) => val.clone(),
                (None, Some(from)) => ctx
                    .secret_value(
                        &ns,
                        &from.secret_key_ref,
                        &format!("value of var {}", v.key),
                    )
                    .await?
                    .expose()
                    .to_string(),
                (None, None) => String::new(),
            };
            out.push(VarInput {
                key: v.key.clone(),
                value,
                category: v.category.as_str().to_string(),
                hcl: v.hcl,
                sensitive: v.sensitive,
                description: v.description.clone(),
            });
        }
        Ok(out)
    }

    fn settings(&self) -> Value {
        let s = &self.spec;
        let mut a = Map::new();
        if let Some(d) = &s.description {
            a.insert("description".into(), json!(d));
        }
        if let Some(m) = s.execution_mode {
            a.insert("execution-mode".into(), json!(m.as_str()));
        }
        if let Some(p) = &s.agent_pool_id {
            a.insert("agent-pool-id".into(), json!(p));
        }
        if let Some(b) = s.auto_apply {
            a.insert("auto-apply".into(), json!(b));
        }
        if let Some(n) = &s.source_name {
            a.insert("source-name".into(), json!(n));
        }
        if let Some(u) = &s.source_url {
            a.insert("source-url".into(), json!(u));
        }
        Value::Object(a)
    }

    fn drifting(&self) -> bool {
        self.status.as_ref().is_some_and(|st| {
            conditions::get(&st.managed.conditions, conditions::READY)
                .is_some_and(|c| c.status == "True" && c.generation() == self.metadata.generation)
        })
    }
}

/// The variables in the Workspace kind's terms, for the shared comparison and writes.
fn desired_vars(vars: &[VarInput]) -> Vec<DesiredVar> {
    vars.iter()
        .map(|v| DesiredVar {
            key: v.key.clone(),
            value: v.value.clone(),
            category: v.category.clone(),
            hcl: v.hcl,
            sensitive: v.sensitive,
            description: v.description.clone().unwrap_or_default(),
        })
        .collect()
}

async fn refusal(client: &NoCodeClient, e: ClientError) -> Result<Step> {
    if org_token_refusal(client, &e).await? {
        Ok(Step::not_ready("Forbidden", ORG_TOKEN))
    } else {
        Err(Error::Remote(e))
    }
}

/// `e` with every secret value removed from the service's message (a 422 quotes the refused
/// variable value).
pub fn redact(e: ClientError, secrets: &[String]) -> ClientError {
    match e {
        ClientError::Status {
            service,
            status,
            message,
            retry_after,
        } => {
            let mut message = message;
            for s in secrets {
                message = message.replace(s.as_str(), "[redacted]");
            }
            ClientError::Status {
                service,
                status,
                message,
                retry_after,
            }
        }
        other => other,
    }
}

impl Operated for NoCodeWorkspace {
    type Client = NoCodeClient;

    async fn step(&self, ctx: &Context, client: &NoCodeClient) -> Result<Step> {
        let st = self.status.clone().unwrap_or_default();
        let mut module = self.module(ctx).await?;
        if module.organization.is_none() {
            module.organization = st.organization.clone();
        }
        if let Err(e) = self.module_details(client, &mut module, false).await {
            return match e {
                Error::Remote(e) => refusal(client, e).await,
                other => Err(other),
            };
        }
        let org = module.organization.clone().unwrap_or_default();
        let name = self.workspace_name();
        let vars = self.vars(ctx).await?;
        let want = desired_vars(&vars);
        let hash = sensitive_hash(ctx.settings.hash_key.expose().as_bytes(), &want);
        let secrets = self.secret_values(&vars);

        let observed = match &st.workspace_id {
            Some(id) => client.read_workspace(id).await?,
            None => client.workspace_by_name(&org, &name).await?,
        };
        let mut fields = Map::new();
        fields.insert("noCodeModuleId".into(), json!(module.id));
        fields.insert("organization".into(), json!(org));
        if let Some(u) = &st.upgrade {
            fields.insert("upgrade".into(), json!(u));
        }

        let Some(ws) = observed else {
            let created = match client
                .create_workspace(
                    &module.id,
                    &name,
                    &self.settings(),
                    self.spec.project_id.as_deref(),
                    &vars,
                )
                .await
            {
                Ok(w) => w,
                Err(e) => return refusal(client, redact(e, &secrets)).await,
            };
            fields.insert("workspaceId".into(), json!(created.id));
            if let Some(h) = &hash {
                fields.insert("varsHash".into(), json!(h));
            }
            if let Some(v) = created.module_version() {
                fields.insert("moduleVersion".into(), json!(v));
            }
            let (reason, note) = match &st.workspace_id {
                Some(old) => (
                    "DriftCorrected",
                    format!(
                        "{old} was deleted outside Quartet; provisioned {} again",
                        created.id
                    ),
                ),
                None => (
                    "Created",
                    format!("provisioned workspace {} from {}", created.id, module.id),
                ),
            };
            let mut step = Step::ready("InSync", format!("{} matches the spec", created.id))
                .remote_id(created.id.clone())
                .event(false, reason, note)
                .condition(
                    UPGRADE_AVAILABLE,
                    false,
                    "UpToDate",
                    "provisioned with the module's current version",
                )
                .again(POLL);
            step.fields = fields;
            return Ok(step);
        };

        let adopted = st.workspace_id.is_none();
        fields.insert("workspaceId".into(), json!(ws.id));
        if let Some(v) = ws.module_version() {
            fields.insert("moduleVersion".into(), json!(v));
        }
        let mut step =
            Step::ready("InSync", format!("{} matches the spec", ws.id)).remote_id(ws.id.clone());
        if adopted {
            step = step.event(
                false,
                "Adopted",
                format!("adopted existing workspace {} ({name})", ws.id),
            );
        }
        let desired = settings::desired(&managed_settings(&self.spec), false);
        let changed = settings::diff(&desired, &ws.raw);
        if !changed.is_empty() {
            let data = settings::update_data(&desired, &changed);
            if let Err(e) = client.update_workspace(&ws.id, data).await {
                return refusal(client, e).await;
            }
            if !adopted && self.drifting() {
                fields.insert("driftedFields".into(), json!(changed));
                step = step.event(
                    false,
                    "DriftCorrected",
                    format!(
                        "{} was changed outside Quartet; restored {}",
                        ws.id,
                        changed.join(", ")
                    ),
                );
            } else {
                step = step.event(
                    false,
                    "Updated",
                    format!("updated {}: {}", ws.id, changed.join(", ")),
                );
            }
        }

        // Vars: compared with the workspace's variables (sensitive ones by the keyed hash of
        // their source, as a Workspace's), so a rotated Secret or an edit is found here.
        let put = match &self.spec.vars {
            Some(_) => {
                let have = client.workspaces().vars(&ws.id).await?;
                var_changes(&want, ListPolicy::Merge, &have, st.vars_hash != hash).0
            }
            None => Vec::new(),
        };
        let vars_changed = !put.is_empty();
        // Written at once unless this pass sends them with an upgrade or one is in flight.
        let mut vars_pending = vars_changed;
        if let Some(h) = &st.vars_hash {
            fields.insert("varsHash".into(), json!(h));
        }
        let in_flight = st.upgrade.as_ref().is_some_and(|u| !is_final(&u.status));

        let prev = st.upgrade.clone();
        match prev.filter(|u| !is_final(&u.status)) {
            Some(mut up) => {
                let status = client.upgrade_status(&module.id, &ws.id, &up.id).await?;
                let run = client.read_run(&up.id).await?;
                let was = up.status.clone();
                match (&status, &run) {
                    (Some(s), Some(r)) => {
                        up.status = r.status.clone();
                        if s.plan_url.is_some() {
                            up.plan_url = s.plan_url.clone();
                        }
                    }
                    _ => up.status = "gone".into(),
                }
                let to = up.to_version.clone().unwrap_or_default();
                let plan = up.plan_url.clone().unwrap_or_default();
                let confirmable = run.as_ref().is_some_and(|r| r.is_confirmable);
                if is_final(&up.status) {
                    step = match up.status.as_str() {
                        "applied" => step.event(false, "UpgradeApplied", format!("upgraded to module version {to} (run {})", up.id)),
                        "planned_and_finished" => step.event(false, "UpgradeApplied", format!("upgrade to module version {to} planned no changes: nothing to apply (run {})", up.id)),
                        s => step.event(true, "UpgradeFailed", format!("upgrade to module version {to} ended {s} (run {})", up.id)),
                    };
                    let failed = !matches!(up.status.as_str(), "applied" | "planned_and_finished");
                    step = if failed {
                        step.condition(UPGRADE_AVAILABLE, true, "UpgradeFailed", format!("the upgrade to {to} ended {}: it is not retried for this version (plan: {plan})", up.status))
                    } else {
                        step.condition(
                            UPGRADE_AVAILABLE,
                            false,
                            "UpToDate",
                            format!("upgraded to {to}"),
                        )
                    };
                } else if confirmable {
                    if was != up.status {
                        step = step.event(
                            false,
                            "UpgradePlanned",
                            format!("upgrade plan to module version {to} is ready: {plan}"),
                        );
                    }
                    if approved(&self.spec, up.to_version.as_deref()) {
                        if !up.confirmed {
                            client.confirm_upgrade(&module.id, &ws.id, &up.id).await?;
                            up.confirmed = true;
                            step = step.event(
                                false,
                                "UpgradeConfirmed",
                                format!(
                                    "confirmed the upgrade to module version {to} (run {})",
                                    up.id
                                ),
                            );
                        }
                        step = step
                            .condition(
                                UPGRADE_AVAILABLE,
                                true,
                                "Upgrading",
                                format!("applying the upgrade to {to}: {plan}"),
                            )
                            .again(POLL);
                    } else {
                        step = step.condition(
                            UPGRADE_AVAILABLE,
                            true,
                            "AwaitingApproval",
                            format!("the upgrade plan to module version {to} waits for approval: review {plan} and set spec.upgrade.approvedVersion: {to} (or policy: Auto)"),
                        );
                    }
                } else {
                    step = step
                        .condition(
                            UPGRADE_AVAILABLE,
                            true,
                            "Upgrading",
                            format!("upgrade to {to} is {}: {plan}", up.status),
                        )
                        .again(POLL);
                }
                fields.insert("upgrade".into(), json!(up));
            }
            None => {
                let last = st.upgrade.clone();
                if ws.upgrade_available {
                    if let Err(e) = self.module_details(client, &mut module, true).await {
                        return match e {
                            Error::Remote(e) => refusal(client, e).await,
                            other => Err(other),
                        };
                    }
                    let target = module.version.clone();
                    let failed_before = last.as_ref().is_some_and(|u| {
                        u.to_version == target
                            && !matches!(u.status.as_str(), "applied" | "planned_and_finished")
                    });
                    if failed_before {
                        let to = target.unwrap_or_default();
                        step = step.condition(UPGRADE_AVAILABLE, true, "UpgradeFailed", format!("an upgrade to {to} is available but the last attempt failed; it is not retried for this version"));
                    } else {
                        let send = vars_changed.then_some(vars.as_slice());
                        match client.start_upgrade(&module.id, &ws.id, send).await {
                            Ok(UpgradeStart::Started(u)) => {
                                let to = target.clone().unwrap_or_default();
                                let up = UpgradeStatus {
                                    id: u.id.clone(),
                                    status: u.status,
                                    plan_url: u.plan_url,
                                    from_version: ws.module_version(),
                                    to_version: target,
                                    confirmed: false,
                                };
                                if vars_changed {
                                    vars_pending = false;
                                    match &hash {
                                        Some(h) => fields.insert("varsHash".into(), json!(h)),
                                        None => fields.remove("varsHash"),
                                    };
                                }
                                fields.insert("upgrade".into(), json!(up));
                                step = step
                                    .event(false, "UpgradeStarted", format!("started the upgrade from module version {} to {to} (run {})", up.from_version.clone().unwrap_or_default(), up.id))
                                    .condition(UPGRADE_AVAILABLE, true, "Upgrading", format!("planning the upgrade to {to}"))
                                    .again(POLL);
                            }
                            Ok(UpgradeStart::NothingToUpgrade(msg)) => {
                                step = step.condition(UPGRADE_AVAILABLE, false, "UpToDate", msg);
                            }
                            Err(e) => return refusal(client, redact(e, &secrets)).await,
                        }
                    }
                } else {
                    step = step.condition(
                        UPGRADE_AVAILABLE,
                        false,
                        "UpToDate",
                        "the workspace runs the module's current version",
                    );
                }
            }
        }
        if vars_pending && in_flight {
            step.ready.2 = format!(
                "{} matches the spec; the changed vars are written once the upgrade in flight ends",
                ws.id
            );
        } else if vars_pending {
            let keys: Vec<String> = put
                .iter()
                .map(|(_, v)| format!("{}/{}", v.category, v.key))
                .collect();
            if let Err(e) = write_vars(&client.workspaces(), &ws.id, put).await {
                return refusal(client, redact(e, &secrets)).await;
            }
            match &hash {
                Some(h) => fields.insert("varsHash".into(), json!(h)),
                None => fields.remove("varsHash"),
            };
            step = step.event(
                false,
                "Updated",
                format!("wrote variables of {}: {}", ws.id, keys.join(", ")),
            );
        }
        step.fields = fields;
        Ok(step)
    }

    async fn finish(&self, _ctx: &Context, client: &NoCodeClient) -> Result<()> {
        let Some(id) = self.status.as_ref().and_then(|s| s.workspace_id.clone()) else {
            return Ok(());
        };
        client
            .delete_workspace(&id, self.spec.deletion_mode == DeletionMode::Force)
            .await
            .map_err(Error::Remote)
    }

    fn holds_remote(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.workspace_id.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::workspaces::nocode::{NoCodeExecutionMode, UpgradeSpec};

    fn spec(v: Value) -> NoCodeWorkspaceSpec {
        serde_json::from_value(v).expect("valid spec")
    }

    fn remote() -> Value {
        json!({"id": "ws-1", "attributes": {"name": "a", "description": null,
            "execution-mode": "remote", "auto-apply": false},
            "relationships": {"project": {"data": {"id": "prj-1"}}, "agent-pool": {"data": null}}})
    }

    fn diff(s: &NoCodeWorkspaceSpec) -> Vec<&'static str> {
        settings::diff(&settings::desired(&managed_settings(s), false), &remote())
    }

    #[test]
    fn unset_fields_are_not_managed_and_null_description_is_empty() {
        assert!(diff(&spec(json!({"noCodeModuleId": "nocode-1"}))).is_empty());
        assert!(diff(&spec(
            json!({"noCodeModuleId": "nocode-1", "description": ""})
        ))
        .is_empty());
    }

    #[test]
    fn changed_settings_are_named_and_patched_with_the_shared_settings_code() {
        let s = spec(
            json!({"noCodeModuleId": "nocode-1", "description": "d", "autoApply": true,
            "executionMode": "agent", "agentPoolId": "apool-1", "projectId": "prj-2"}),
        );
        let mut changed = diff(&s);
        changed.sort();
        assert_eq!(
            changed,
            vec![
                "agentPoolId",
                "autoApply",
                "description",
                "executionMode",
                "projectId"
            ]
        );
        let d = settings::desired(&managed_settings(&s), false);
        let data = settings::update_data(&d, &changed);
        assert_eq!(data["attributes"]["agent-pool-id"], "apool-1");
        assert_eq!(
            data["attributes"]["execution-mode"],
            NoCodeExecutionMode::Agent.as_str()
        );
        assert_eq!(data["relationships"]["project"]["data"]["id"], "prj-2");
    }

    #[test]
    fn manual_upgrades_need_the_approved_version_and_auto_ones_do_not() {
        let mut s = spec(json!({"noCodeModuleId": "nocode-1"}));
        assert!(!approved(&s, Some("1.1.0")));
        s.upgrade = UpgradeSpec {
            policy: UpgradePolicy::Manual,
            approved_version: Some("1.1.0".into()),
        };
        assert!(approved(&s, Some("1.1.0")));
        assert!(!approved(&s, Some("1.2.0")));
        s.upgrade.policy = UpgradePolicy::Auto;
        assert!(approved(&s, Some("1.2.0")));
    }

    #[test]
    fn secret_values_are_removed_from_service_messages() {
        let e = ClientError::Status {
            service: Service::Workspaces,
            status: 422,
            message: "\"s3cr3t\" is not one of the allowed options for region".into(),
            retry_after: None,
        };
        let msg = redact(e, &["s3cr3t".into()]).to_string();
        assert!(
            !msg.contains("s3cr3t") && msg.contains("[redacted]"),
            "{msg}"
        );
    }

    #[test]
    fn every_terminal_run_state_ends_an_upgrade() {
        for s in [
            "applied",
            "planned_and_finished",
            "discarded",
            "errored",
            "canceled",
            "force_canceled",
        ] {
            assert!(is_final(s), "{s}");
        }
        for s in [
            "pending",
            "planned",
            "cost_estimated",
            "confirmed",
            "applying",
        ] {
            assert!(!is_final(s), "{s}");
        }
    }
}
