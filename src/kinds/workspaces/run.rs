//! WorkspaceRun ↔ `/api/v2/runs` (spec B §4.4): one resource, one run.
//!
//! Each pass reads the run and takes at most one step: create it (once; its id is recorded
//! before anything else), or send one action the spec asks for and the run's own
//! `actions.is-*` flags allow (never decided from a state name: cost estimation, policy checks
//! and post-plan phases add states), or wait. Every final state counts as final (`canceled`
//! after a force-cancel too). Runs that move are polled every few seconds; runs that wait for a
//! person (confirmation, policy override) are polled slowly.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::{Api, Resource, ResourceExt};
use serde_json::{json, Map, Value};

use crate::api::workspaces::run::WorkspaceRun;
use crate::api::{Service, Workspace};
use crate::clients::workspaces::run::RunsClient;
use crate::reconcile::{managed_fields, Context, Error, Managed, Operated, Result, Step};

impl Managed for WorkspaceRun {
    const SERVICE: Service = Service::Workspaces;
    managed_fields!();
}

/// Final run states (the service's and the spec's: `force_canceled` and `policy_soft_failed`
/// included; a force-canceled run reads `canceled` on the live service).
pub fn is_final(status: &str) -> bool {
    matches!(
        status,
        "applied"
            | "planned_and_finished"
            | "errored"
            | "discarded"
            | "canceled"
            | "force_canceled"
            | "policy_soft_failed"
    )
}

/// Poll interval while the run moves, and while it waits for a person.
const MOVING: Duration = Duration::from_secs(2);
const WAITING: Duration = Duration::from_secs(30);

/// The action to send now, if any: (spec flag, endpoint). Pure: from the spec flags, the run's
/// `actions` and `permissions`, its state and the actions already sent.
pub fn next_action(
    run: &WorkspaceRun,
    actions: &Map<String, Value>,
    permissions: &Map<String, Value>,
    status: &str,
    sent: &[String],
) -> Option<(&'static str, &'static str)> {
    let flag = |k: &str| actions.get(k).and_then(Value::as_bool).unwrap_or(false);
    let perm = |k: &str| permissions.get(k).and_then(Value::as_bool).unwrap_or(false);
    let not_sent = |a: &str| !sent.iter().any(|s| s == a);
    let s = &run.spec;
    if s.force_cancel && not_sent("forceCancel") && flag("is-force-cancelable") {
        return Some(("forceCancel", "force-cancel"));
    }
    if (s.cancel || s.force_cancel) && not_sent("cancel") && flag("is-cancelable") {
        return Some(("cancel", "cancel"));
    }
    if s.discard && not_sent("discard") && flag("is-discardable") {
        return Some(("discard", "discard"));
    }
    if s.confirm && not_sent("confirm") && flag("is-confirmable") {
        return Some(("confirm", "apply"));
    }
    if s.force_execute
        && not_sent("forceExecute")
        && status == "pending"
        && perm("can-force-execute")
    {
        return Some(("forceExecute", "force-execute"));
    }
    None
}

impl WorkspaceRun {
    fn sent(&self) -> Vec<String> {
        self.status
            .as_ref()
            .map(|s| s.actions_sent.clone())
            .unwrap_or_default()
    }

    async fn workspace_id(&self, ctx: &Context) -> Result<String> {
        if let Some(id) = &self.spec.workspace_id {
            return Ok(id.clone());
        }
        let name = self
            .spec
            .workspace_ref
            .as_ref()
            .map(|r| r.name.clone())
            .unwrap_or_default();
        let ns = self.namespace().unwrap_or_default();
        let api: Api<Workspace> = Api::namespaced(ctx.client.clone(), &ns);
        let ws = crate::reconcile::error::get_opt(&api, &name).await?;
        ws.and_then(|w| {
            w.status
                .and_then(|s| s.workspace_id.or(s.managed.remote_id))
        })
        .ok_or_else(|| {
            Error::MissingReference(format!(
                "waiting for Workspace {name} to have a workspace id"
            ))
        })
    }

    fn create_data(&self, ws: &str) -> Value {
        let s = &self.spec;
        let mut a = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                a.insert(k.into(), v);
            }
        };
        let message = s.message.clone().unwrap_or_else(|| {
            format!(
                "Queued by Quartet for WorkspaceRun {}/{} ({})",
                self.namespace().unwrap_or_default(),
                self.name_any(),
                self.uid().unwrap_or_default()
            )
        });
        put("message", Some(Value::from(message)));
        put("is-destroy", s.is_destroy.map(Value::from));
        put("refresh", s.refresh.map(Value::from));
        put("refresh-only", s.refresh_only.map(Value::from));
        put("replace-addrs", s.replace_addrs.clone().map(|v| json!(v)));
        put("target-addrs", s.target_addrs.clone().map(|v| json!(v)));
        put(
            "variables",
            s.variables.as_ref().map(|v| {
                json!(v
                    .iter()
                    .map(|x| json!({"key": x.key, "value": x.value}))
                    .collect::<Vec<_>>())
            }),
        );
        put("plan-only", s.plan_only.map(Value::from));
        put("engine-version", s.engine_version.clone().map(Value::from));
        put("allow-empty-apply", s.allow_empty_apply.map(Value::from));
        put("auto-apply", s.auto_apply.map(Value::from));
        let mut rels = json!({"workspace": {"data": {"type": "workspaces", "id": ws}}});
        if let Some(cv) = &s.configuration_version_id {
            rels["configuration-version"] =
                json!({"data": {"type": "configuration-versions", "id": cv}});
        }
        json!({"type": "runs", "attributes": a, "relationships": rels})
    }
}

fn fields(run_id: &str, ws: &str, doc: &Value, sent: &[String]) -> Map<String, Value> {
    let a = doc.get("attributes").cloned().unwrap_or(Value::Null);
    let mut m = Map::new();
    m.insert("runId".into(), json!(run_id));
    m.insert("workspaceId".into(), json!(ws));
    m.insert(
        "runStatus".into(),
        a.get("status").cloned().unwrap_or(Value::Null),
    );
    let ts: BTreeMap<String, String> = a
        .get("status-timestamps")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    m.insert("statusTimestamps".into(), json!(ts));
    m.insert(
        "hasChanges".into(),
        json!(a
            .get("has-changes")
            .and_then(Value::as_bool)
            .unwrap_or(false)),
    );
    let actions: BTreeMap<String, bool> = a
        .get("actions")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_bool()?)))
                .collect()
        })
        .unwrap_or_default();
    m.insert("actions".into(), json!(actions));
    m.insert("actionsSent".into(), json!(sent));
    m
}

impl Operated for WorkspaceRun {
    type Client = RunsClient;

    async fn step(&self, ctx: &Context, client: &RunsClient) -> Result<Step> {
        let status = self.status.clone().unwrap_or_default();
        let Some(run_id) = status.run_id.clone() else {
            let ws = self.workspace_id(ctx).await?;
            // A create whose response was lost is found again (by its message, which names
            // this resource when the spec sets none, created after this resource), never
            // created twice.
            let data = self.create_data(&ws);
            let message = data["attributes"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let since = self
                .meta()
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default();
            let found = client.recent(&ws).await?.into_iter().find(|r| {
                r.pointer("/attributes/message").and_then(Value::as_str) == Some(message.as_str())
                    && r.pointer("/attributes/created-at")
                        .and_then(Value::as_str)
                        .and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok())
                        .zip(chrono::DateTime::parse_from_rfc3339(&since).ok())
                        .is_some_and(|(c, s)| c >= s)
            });
            let doc = match found {
                Some(doc) => doc,
                None => client.create(data).await?,
            };
            let id = doc
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let mut step = Step::not_ready("Created", format!("run {id} created"))
                .remote_id(id.clone())
                .event(false, "Created", format!("created run {id}"))
                .again(MOVING);
            step.fields = fields(&id, &ws, &doc, &[]);
            return Ok(step);
        };
        let ws = status.workspace_id.clone().unwrap_or_default();
        let sent = self.sent();
        let Some(doc) = client.read(&run_id).await? else {
            return Ok(
                Step::not_ready("NotFound", format!("run {run_id} no longer exists"))
                    .remote_id(run_id),
            );
        };
        let a = doc.get("attributes").cloned().unwrap_or(Value::Null);
        let state = a
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if is_final(&state) {
            let mut step = if matches!(state.as_str(), "applied" | "planned_and_finished") {
                Step::ready(state.clone(), format!("run {run_id} {state}"))
            } else {
                Step::not_ready(state.clone(), format!("run {run_id} ended {state}"))
            }
            .remote_id(run_id.clone())
            .condition(
                "Completed",
                true,
                state.clone(),
                format!("run {run_id} is final: {state}"),
            );
            step.fields = fields(&run_id, &ws, &doc, &sent);
            return Ok(step);
        }
        let empty = Map::new();
        let actions = a
            .get("actions")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let perms = a
            .get("permissions")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut sent_now = sent.clone();
        let mut step =
            if let Some((flag, endpoint)) = next_action(self, actions, perms, &state, &sent) {
                client.action(&run_id, endpoint).await?;
                sent_now.push(flag.to_string());
                Step::not_ready(
                    "InProgress",
                    format!("run {run_id} is {state}; sent {endpoint}"),
                )
                .event(
                    false,
                    "ActionSent",
                    format!("{endpoint} sent to run {run_id}"),
                )
                .again(MOVING)
            } else {
                let waiting = actions
                    .get("is-confirmable")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                    || state == "policy_override";
                let again = if waiting { WAITING } else { MOVING };
                let msg = if waiting {
                    format!("run {run_id} is {state}, waiting for confirmation")
                } else {
                    format!("run {run_id} is {state}")
                };
                Step::not_ready("InProgress", msg).again(again)
            }
            .remote_id(run_id.clone())
            .condition(
                "Completed",
                false,
                "Running",
                format!("run {run_id} is {state}"),
            );
        step.fields = fields(&run_id, &ws, &doc, &sent_now);
        Ok(step)
    }

    async fn finish(&self, _ctx: &Context, client: &RunsClient) -> Result<()> {
        let Some(run_id) = self.status.as_ref().and_then(|s| s.run_id.clone()) else {
            return Ok(());
        };
        let Some(doc) = client.read(&run_id).await? else {
            return Ok(());
        };
        let state = doc
            .pointer("/attributes/status")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if is_final(state) {
            return Ok(());
        }
        let flag = |k: &str| {
            doc.pointer(&format!("/attributes/actions/{k}"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        if flag("is-discardable") {
            client.action(&run_id, "discard").await?;
        } else if flag("is-cancelable") {
            client.action(&run_id, "cancel").await?;
        }
        Ok(())
    }

    fn holds_remote(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.run_id.as_ref())
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(spec: Value) -> WorkspaceRun {
        serde_json::from_value(json!({
            "apiVersion": "workspaces.quartet.dev/v1alpha1", "kind": "WorkspaceRun",
            "metadata": {"name": "r"}, "spec": spec
        }))
        .unwrap()
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn every_final_state_counts() {
        for s in [
            "applied",
            "planned_and_finished",
            "errored",
            "discarded",
            "canceled",
            "force_canceled",
            "policy_soft_failed",
        ] {
            assert!(is_final(s), "{s}");
        }
        assert!(!is_final("planned"));
        assert!(!is_final("cost_estimated"));
    }

    #[test]
    fn confirm_is_sent_once_and_only_when_confirmable() {
        let r = run(json!({"workspaceId": "ws-1", "confirm": true}));
        let no = map(json!({"is-confirmable": false}));
        let yes = map(json!({"is-confirmable": true}));
        assert_eq!(next_action(&r, &no, &Map::new(), "planned", &[]), None);
        assert_eq!(
            next_action(&r, &yes, &Map::new(), "cost_estimated", &[]),
            Some(("confirm", "apply"))
        );
        assert_eq!(
            next_action(&r, &yes, &Map::new(), "planned", &["confirm".into()]),
            None
        );
    }

    #[test]
    fn force_cancel_cancels_first_then_force_cancels_when_allowed() {
        let r = run(json!({"workspaceId": "ws-1", "forceCancel": true}));
        let a = map(json!({"is-cancelable": true, "is-force-cancelable": false}));
        assert_eq!(
            next_action(&r, &a, &Map::new(), "planning", &[]),
            Some(("cancel", "cancel"))
        );
        assert_eq!(
            next_action(&r, &a, &Map::new(), "planning", &["cancel".into()]),
            None
        );
        let b = map(json!({"is-cancelable": false, "is-force-cancelable": true}));
        assert_eq!(
            next_action(&r, &b, &Map::new(), "planning", &["cancel".into()]),
            Some(("forceCancel", "force-cancel"))
        );
    }
}
