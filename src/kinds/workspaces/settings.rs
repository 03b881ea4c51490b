//! Workspace settings (spec B §2.1): what the spec asks for, how it compares with the service,
//! and the body that changes it. Shared by the kinds that manage a workspace's settings
//! (Workspace; NoCodeWorkspace for its settings drift).
//!
//! The public API is three functions over [`WorkspaceSettings`] (the CRD's camelCase
//! attributes) and a workspace document as the service returns it (`data`):
//! * [`desired`] — the managed attributes only (a field left out of the spec is not managed);
//! * [`diff`] — the camelCase names of the managed settings that differ (pure);
//! * [`update_data`] / [`create_data`] — the JSON:API `data` that sets them.
//!
//! Comparison rules: `null` and absent and `""` are one value for strings the service leaves
//! unset (`description`, `workingDirectory`, `agentPoolId`, `vcsRepo.branch`,
//! `vcsRepo.tagsRegex`); trigger prefixes and patterns are sets; the engine version reads
//! `engine-version` or `terraform-version`, drift detection `drift-detection` or
//! `assessments-enabled` (the service's two spellings).

use serde_json::{json, Map, Value};

use crate::api::workspaces::workspace::WorkspaceSettings;

/// What the VCS repository should be.
#[derive(Clone, Debug, PartialEq)]
pub enum Vcs {
    /// Not managed.
    Unmanaged,
    /// Managed before and now removed from the spec: the repository is removed.
    Remove,
    /// These keys (kebab-case; only those the spec sets besides the two required ones).
    Set(Map<String, Value>),
}

/// The managed settings of a workspace.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// Managed attributes, kebab-case, with the value to send.
    pub attributes: Map<String, Value>,
    /// Project id, when managed.
    pub project: Option<String>,
    /// The VCS repository, when managed.
    pub vcs: Vcs,
    /// Create-only attributes (`source-name`, `source-url`).
    pub create_only: Map<String, Value>,
}

/// camelCase spec name ↔ kebab-case service attribute, for the plain attributes.
const FIELDS: &[(&str, &str)] = &[
    ("agentPoolId", "agent-pool-id"),
    ("allowDestroyPlan", "allow-destroy-plan"),
    ("autoApply", "auto-apply"),
    ("description", "description"),
    ("executionMode", "execution-mode"),
    ("fileTriggersEnabled", "file-triggers-enabled"),
    ("globalRemoteState", "global-remote-state"),
    ("operations", "operations"),
    ("queueAllRuns", "queue-all-runs"),
    ("speculativeEnabled", "speculative-enabled"),
    ("engineVersion", "engine-version"),
    ("triggerPrefixes", "trigger-prefixes"),
    ("triggerPatterns", "trigger-patterns"),
    ("workingDirectory", "working-directory"),
    ("driftDetection", "drift-detection"),
];

fn camel_of(kebab: &str) -> &'static str {
    FIELDS
        .iter()
        .find(|(_, k)| *k == kebab)
        .map(|(c, _)| *c)
        .unwrap_or("settings")
}

/// The managed settings of `s`. `vcs_was_managed`: the last applied spec had a `vcsRepo`
/// (so its absence now means "remove the repository").
pub fn desired(s: &WorkspaceSettings, vcs_was_managed: bool) -> Desired {
    let mut a = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            a.insert(k.to_string(), v);
        }
    };
    put("agent-pool-id", s.agent_pool_id.clone().map(Value::from));
    put("allow-destroy-plan", s.allow_destroy_plan.map(Value::from));
    put("auto-apply", s.auto_apply.map(Value::from));
    put("description", s.description.clone().map(Value::from));
    put("execution-mode", s.execution_mode.clone().map(Value::from));
    put(
        "file-triggers-enabled",
        s.file_triggers_enabled.map(Value::from),
    );
    put(
        "global-remote-state",
        s.global_remote_state.map(Value::from),
    );
    put("operations", s.operations.map(Value::from));
    put("queue-all-runs", s.queue_all_runs.map(Value::from));
    put(
        "speculative-enabled",
        s.speculative_enabled.map(Value::from),
    );
    put("engine-version", s.engine_version.clone().map(Value::from));
    put(
        "trigger-prefixes",
        s.trigger_prefixes.clone().map(|v| json!(v)),
    );
    put(
        "trigger-patterns",
        s.trigger_patterns.clone().map(|v| json!(v)),
    );
    put(
        "working-directory",
        s.working_directory.clone().map(Value::from),
    );
    put("drift-detection", s.drift_detection.map(Value::from));
    let mut create_only = Map::new();
    if let Some(n) = &s.source_name {
        create_only.insert("source-name".into(), json!(n));
    }
    if let Some(u) = &s.source_url {
        create_only.insert("source-url".into(), json!(u));
    }
    let vcs = match &s.vcs_repo {
        Some(r) => {
            let mut m = Map::new();
            m.insert("oauth-token-id".into(), json!(r.oauth_token_id));
            m.insert("identifier".into(), json!(r.identifier));
            if let Some(b) = &r.branch {
                m.insert("branch".into(), json!(b));
            }
            if let Some(i) = r.ingress_submodules {
                m.insert("ingress-submodules".into(), json!(i));
            }
            if let Some(t) = &r.tags_regex {
                m.insert("tags-regex".into(), json!(t));
            }
            Vcs::Set(m)
        }
        None if vcs_was_managed => Vcs::Remove,
        None => Vcs::Unmanaged,
    };
    Desired {
        attributes: a,
        project: s.project_id.clone(),
        vcs,
        create_only,
    }
}

/// `null`, absent and `""` are one value.
fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn set_of(v: Option<&Value>) -> Vec<String> {
    let mut out: Vec<String> = v
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.dedup();
    out
}

/// The observed value of a kebab-case attribute (the service's alternative spellings read).
fn observed_attr<'a>(ws: &'a Value, key: &str) -> Option<&'a Value> {
    let attrs = ws.get("attributes")?;
    let first = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| attrs.get(*k).filter(|v| !v.is_null()))
    };
    match key {
        "engine-version" => first(&["engine-version", "terraform-version"]),
        "drift-detection" => first(&["drift-detection", "assessments-enabled"]),
        "agent-pool-id" => attrs
            .get("agent-pool-id")
            .filter(|v| !v.is_null())
            .or_else(|| ws.pointer("/relationships/agent-pool/data/id")),
        _ => attrs.get(key),
    }
}

fn same(key: &str, want: &Value, have: Option<&Value>) -> bool {
    match key {
        "description" | "working-directory" | "agent-pool-id" => text(Some(want)) == text(have),
        "trigger-prefixes" | "trigger-patterns" => set_of(Some(want)) == set_of(have),
        _ => Some(want) == have,
    }
}

fn vcs_same(want: &Map<String, Value>, have: Option<&Value>) -> bool {
    let Some(have) = have.filter(|h| h.is_object()) else {
        return false;
    };
    want.iter().all(|(k, v)| match k.as_str() {
        "branch" | "tags-regex" => text(Some(v)) == text(have.get(k)),
        _ => Some(v) == have.get(k),
    })
}

/// camelCase names of the managed settings that differ from the workspace document `ws`.
pub fn diff(desired: &Desired, ws: &Value) -> Vec<&'static str> {
    let mut changed = Vec::new();
    for (k, want) in &desired.attributes {
        if !same(k, want, observed_attr(ws, k)) {
            changed.push(camel_of(k));
        }
    }
    if let Some(p) = &desired.project {
        if ws
            .pointer("/relationships/project/data/id")
            .and_then(Value::as_str)
            != Some(p)
        {
            changed.push("projectId");
        }
    }
    let have_vcs = ws.pointer("/attributes/vcs-repo").filter(|v| !v.is_null());
    match &desired.vcs {
        Vcs::Unmanaged => {}
        Vcs::Remove if have_vcs.is_some() => changed.push("vcsRepo"),
        Vcs::Remove => {}
        Vcs::Set(want) => {
            if !vcs_same(want, have_vcs) {
                changed.push("vcsRepo");
            }
        }
    }
    changed
}

/// Old and new value of the plain setting `field` (a camelCase name from [`diff`]), for
/// `quartet plan`.
pub fn shown(desired: &Desired, ws: &Value, field: &str) -> Option<(String, String)> {
    let text = |v: Option<&Value>| match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let (k, want) = desired
        .attributes
        .iter()
        .find(|(k, _)| camel_of(k) == field)?;
    Some((text(observed_attr(ws, k)), text(Some(want))))
}

/// The `data` of the PATCH that sets the `changed` settings (names from [`diff`]).
pub fn update_data(desired: &Desired, changed: &[&str]) -> Value {
    let mut attrs = Map::new();
    for (k, v) in &desired.attributes {
        if changed.contains(&camel_of(k)) {
            attrs.insert(k.clone(), v.clone());
        }
    }
    // The service checks the pool against the mode of the same request.
    if attrs.contains_key("execution-mode") || attrs.contains_key("agent-pool-id") {
        for k in ["execution-mode", "agent-pool-id"] {
            if let Some(v) = desired.attributes.get(k) {
                attrs.insert(k.into(), v.clone());
            }
        }
    }
    if attrs
        .get("agent-pool-id")
        .is_some_and(|v| text(Some(v)).is_empty())
    {
        attrs.remove("agent-pool-id");
    }
    if changed.contains(&"vcsRepo") {
        match &desired.vcs {
            Vcs::Set(m) => {
                attrs.insert("vcs-repo".into(), Value::Object(m.clone()));
            }
            Vcs::Remove => {
                attrs.insert("vcs-repo".into(), Value::Null);
            }
            Vcs::Unmanaged => {}
        }
    }
    let mut data = json!({"type": "workspaces", "attributes": attrs});
    if changed.contains(&"projectId") {
        if let Some(p) = &desired.project {
            data["relationships"] = json!({"project": {"data": {"type": "projects", "id": p}}});
        }
    }
    data
}

/// The `data` of the create request: `name`, every managed setting and the create-only ones.
pub fn create_data(desired: &Desired, name: &str) -> Value {
    let mut attrs = desired.attributes.clone();
    if attrs
        .get("agent-pool-id")
        .is_some_and(|v| text(Some(v)).is_empty())
    {
        attrs.remove("agent-pool-id");
    }
    attrs.extend(desired.create_only.clone());
    attrs.insert("name".into(), json!(name));
    if let Vcs::Set(m) = &desired.vcs {
        attrs.insert("vcs-repo".into(), Value::Object(m.clone()));
    }
    let mut data = json!({"type": "workspaces", "attributes": attrs});
    if let Some(p) = &desired.project {
        data["relationships"] = json!({"project": {"data": {"type": "projects", "id": p}}});
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(v: Value) -> WorkspaceSettings {
        serde_json::from_value(v).unwrap()
    }

    fn ws(attrs: Value) -> Value {
        json!({"id": "ws-1", "attributes": attrs, "relationships": {"project": {"data": {"id": "prj-1"}}}})
    }

    #[test]
    fn unset_settings_are_not_managed() {
        let d = desired(&settings(json!({"autoApply": true})), false);
        assert!(diff(
            &d,
            &ws(json!({"auto-apply": true, "description": "x", "execution-mode": "agent"}))
        )
        .is_empty());
    }

    #[test]
    fn null_and_empty_strings_are_equal_and_trigger_lists_are_sets() {
        let d = desired(
            &settings(
                json!({"description": "", "workingDirectory": "", "triggerPrefixes": ["a", "b"]}),
            ),
            false,
        );
        assert!(diff(&d, &ws(json!({"description": null, "working-directory": null, "trigger-prefixes": ["b", "a"]}))).is_empty());
    }

    #[test]
    fn changed_settings_are_named_and_only_they_are_sent() {
        let d = desired(
            &settings(json!({"autoApply": true, "engineVersion": "1.9.8", "projectId": "prj-2"})),
            false,
        );
        let have = ws(json!({"auto-apply": false, "terraform-version": "1.9.8"}));
        let changed = diff(&d, &have);
        assert_eq!(changed, vec!["autoApply", "projectId"]);
        let body = update_data(&d, &changed);
        assert_eq!(body["attributes"], json!({"auto-apply": true}));
        assert_eq!(body["relationships"]["project"]["data"]["id"], "prj-2");
    }

    #[test]
    fn a_removed_vcs_repo_is_sent_as_null() {
        let d = desired(&settings(json!({})), true);
        let have = ws(json!({"vcs-repo": {"identifier": "a/b", "oauth-token-id": "ot-1"}}));
        assert_eq!(diff(&d, &have), vec!["vcsRepo"]);
        assert_eq!(
            update_data(&d, &["vcsRepo"])["attributes"]["vcs-repo"],
            Value::Null
        );
        assert!(diff(&d, &ws(json!({"vcs-repo": null}))).is_empty());
    }

    #[test]
    fn agent_pool_is_sent_with_the_mode() {
        let d = desired(
            &settings(json!({"executionMode": "agent", "agentPoolId": "apool-1"})),
            false,
        );
        let have = ws(json!({"execution-mode": "remote", "agent-pool-id": null}));
        let changed = diff(&d, &have);
        assert_eq!(changed, vec!["agentPoolId", "executionMode"]);
        let body = update_data(&d, &["executionMode"]);
        assert_eq!(body["attributes"]["agent-pool-id"], "apool-1");
    }
}
