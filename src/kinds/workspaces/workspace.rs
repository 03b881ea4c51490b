//! Workspace ↔ `/api/v2/workspaces/:id` and its tags, tag bindings, remote state consumers and
//! variables (spec B §4.1–4.3).
//!
//! Observed by the id in status (so a rename is a PATCH by id), or by organization and name
//! when there is none (adoption, and a create whose response was lost). Lists are read in full
//! (`meta.pagination`); tags and consumers change by POST/DELETE of the differences only.

use std::collections::BTreeMap;

use kube::ResourceExt;
use serde_json::{json, Value};

use super::settings;
use crate::api::workspaces::workspace::{DeletionMode, ListPolicy, Workspace};
use crate::api::{ManagedStatus, Service};
use crate::clients::workspaces::workspace::Var;
use crate::clients::workspaces::{attr_str, WorkspacesClient};
use crate::reconcile::hash::keyed_hash;
use crate::reconcile::{managed_fields, Context, Created, Error, Managed, Reconciled, Result};

impl Managed for Workspace {
    const SERVICE: Service = Service::Workspaces;
    managed_fields!();
    const WATCHES_SECRETS: bool = true;
    /// `workspaceId` is written with the id the moment a create returns, with the other
    /// status fields read from the create response (the driver reads no status fields on a
    /// create pass).
    fn status_json(&self, managed: &ManagedStatus) -> Value {
        let mut v = serde_json::to_value(managed).unwrap_or(Value::Null);
        if let (Some(o), Some(id)) = (v.as_object_mut(), &managed.remote_id) {
            o.insert("workspaceId".into(), json!(id));
            let uid = self.uid().unwrap_or_default();
            // Kept (not taken): every status write of the create pass must carry them, or
            // server-side apply would drop them again.
            let cached = CREATED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&uid)
                .cloned();
            if let Some(fields) = cached.filter(|f| f.get("workspaceId") == Some(&json!(id))) {
                o.extend(fields);
            }
        }
        v
    }
    fn secret_refs(&self) -> Vec<String> {
        self.spec
            .variables
            .iter()
            .flatten()
            .filter_map(|v| v.value_from.as_ref())
            .map(|s| s.secret_key_ref.name.clone())
            .collect()
    }
}

/// Status fields read from a create response, by object uid (one small map per Workspace
/// created by this process; later passes write the fields they read, which take precedence).
static CREATED: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, serde_json::Map<String, Value>>>,
> = std::sync::LazyLock::new(Default::default);

/// One variable as it should be.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredVar {
    /// The variable's name.
    pub key: String,
    /// Its value (from a Secret when sensitive).
    pub value: String,
    /// `terraform` (an input variable) or `env` (an environment variable).
    pub category: String,
    /// Whether the value is HCL rather than a string.
    pub hcl: bool,
    /// Whether the service hides the value once written.
    pub sensitive: bool,
    /// A description shown in the service.
    pub description: String,
}

/// A remote state consumer of the spec.
#[derive(Clone, Debug, PartialEq)]
pub enum Consumer {
    /// A workspace of the same organization, by name.
    Name(String),
    /// A workspace by id.
    Id(String),
}

/// Everything the spec manages.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The organization the workspace belongs to.
    pub organization: String,
    /// The workspace's name.
    pub name: String,
    /// Its settings.
    pub settings: settings::Desired,
    /// Its tags, with the list policy (own them all, or merge into what is there).
    pub tags: Option<(Vec<String>, ListPolicy)>,
    /// Its tag bindings (key → value).
    pub tag_bindings: Option<BTreeMap<String, String>>,
    /// The workspaces that may read its state.
    pub consumers: Option<Vec<Consumer>>,
    /// Its variables, with the list policy (own them all, or merge into what is there).
    pub variables: Option<(Vec<DesiredVar>, ListPolicy)>,
    /// Keyed hash of the sensitive variables' values.
    pub sensitive_hash: Option<String>,
}

/// What the service has.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The workspace's id.
    pub id: String,
    /// The workspace document (`data`).
    pub doc: Value,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its tag bindings (key → value).
    pub tag_bindings: BTreeMap<String, String>,
    /// The workspaces that may read its state, as (id, name).
    pub consumers: Vec<(String, String)>,
    /// Its variables.
    pub vars: Vec<Var>,
    /// The status of its latest run, if any.
    pub latest_run_status: Option<String>,
    /// The service's base URL, for the workspace's link in status.
    pub base_url: String,
}

fn has_consumer(list: &[(String, String)], c: &Consumer) -> bool {
    list.iter().any(|(id, name)| match c {
        Consumer::Id(i) => i == id,
        Consumer::Name(n) => n == name,
    })
}

/// Tags to add and to remove.
pub fn tag_changes(
    want: &[String],
    policy: ListPolicy,
    have: &[String],
) -> (Vec<String>, Vec<String>) {
    let add: Vec<String> = want.iter().filter(|t| !have.contains(t)).cloned().collect();
    let remove = match policy {
        ListPolicy::Own => have.iter().filter(|t| !want.contains(t)).cloned().collect(),
        ListPolicy::Merge => Vec::new(),
    };
    (add, remove)
}

/// Consumers to add (as in the spec) and ids to remove.
pub fn consumer_changes(
    want: &[Consumer],
    have: &[(String, String)],
) -> (Vec<Consumer>, Vec<String>) {
    let add = want
        .iter()
        .filter(|c| !has_consumer(have, c))
        .cloned()
        .collect();
    let remove = have
        .iter()
        .filter(|(id, name)| {
            !want.iter().any(|c| match c {
                Consumer::Id(i) => i == id,
                Consumer::Name(n) => n == name,
            })
        })
        .map(|(id, _)| id.clone())
        .collect();
    (add, remove)
}

/// Variables to create or update (with the id when it exists) and ids to delete.
pub fn var_changes(
    want: &[DesiredVar],
    policy: ListPolicy,
    have: &[Var],
    resend_sensitive: bool,
) -> (Vec<(Option<String>, DesiredVar)>, Vec<String>) {
    let mut put = Vec::new();
    for w in want {
        match have
            .iter()
            .find(|h| h.key == w.key && h.category == w.category)
        {
            None => put.push((None, w.clone())),
            Some(h) => {
                let value_differs = if w.sensitive {
                    !h.sensitive || resend_sensitive
                } else {
                    h.value.as_deref().unwrap_or_default() != w.value
                };
                if value_differs
                    || h.hcl != w.hcl
                    || h.sensitive != w.sensitive
                    || h.description != w.description
                {
                    put.push((Some(h.id.clone()), w.clone()));
                }
            }
        }
    }
    let delete = match policy {
        ListPolicy::Own => have
            .iter()
            .filter(|h| {
                !want
                    .iter()
                    .any(|w| w.key == h.key && w.category == h.category)
            })
            .map(|h| h.id.clone())
            .collect(),
        ListPolicy::Merge => Vec::new(),
    };
    (put, delete)
}

/// Create or update the variables `put` (from [`var_changes`]) of workspace `id`, one call each.
/// Shared with NoCodeWorkspace, whose variables are ordinary workspace variables.
pub async fn write_vars(
    client: &WorkspacesClient,
    id: &str,
    put: Vec<(Option<String>, DesiredVar)>,
) -> std::result::Result<(), crate::clients::ClientError> {
    for (var_id, v) in put {
        let attrs = json!({
            "key": v.key, "value": v.value, "category": v.category,
            "hcl": v.hcl, "sensitive": v.sensitive, "description": v.description,
        });
        client.put_var(id, var_id.as_deref(), attrs).await?;
    }
    Ok(())
}

/// Keyed hash of the sensitive variables' categories, keys and values (`None` when there are
/// none): a sensitive value is write-only, so a change is found by this hash, never by reading
/// it back. Shared with NoCodeWorkspace.
pub fn sensitive_hash(key: &[u8], vars: &[DesiredVar]) -> Option<String> {
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for v in vars.iter().filter(|v| v.sensitive) {
        parts.push(format!("{}\u{0}{}\u{0}", v.category, v.key).into_bytes());
        parts.push(v.value.clone().into_bytes());
    }
    (!parts.is_empty()).then(|| {
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        keyed_hash(key, &refs)
    })
}

/// Names of the managed fields that differ (pure).
pub fn diff(d: &Desired, o: &Observed) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if attr_str(&o.doc, "name").as_deref() != Some(d.name.as_str()) {
        changed.push("name");
    }
    changed.extend(settings::diff(&d.settings, &o.doc));
    if let Some((want, policy)) = &d.tags {
        let (add, remove) = tag_changes(want, *policy, &o.tags);
        if !add.is_empty() || !remove.is_empty() {
            changed.push("tags");
        }
    }
    if let Some(b) = &d.tag_bindings {
        if *b != o.tag_bindings {
            changed.push("tagBindings");
        }
    }
    if let Some(c) = &d.consumers {
        let (add, remove) = consumer_changes(c, &o.consumers);
        if !add.is_empty() || !remove.is_empty() {
            changed.push("remoteStateConsumers");
        }
    }
    if let Some((want, policy)) = &d.variables {
        let (put, delete) = var_changes(want, *policy, &o.vars, false);
        if !put.is_empty() || !delete.is_empty() {
            changed.push("variables");
        }
    }
    changed
}

impl Workspace {
    fn organization(&self, ctx: &Context) -> Result<String> {
        if let Some(o) = &self.spec.organization {
            return Ok(o.clone());
        }
        let ns = self.namespace().unwrap_or_default();
        let conn = ctx.connection_for(
            "Workspace",
            &ns,
            self.spec.connection_ref.as_deref(),
            Service::Workspaces,
        )?;
        conn.spec
            .organization
            .clone()
            .filter(|o| !o.is_empty())
            .ok_or_else(|| {
                // spec.organization is immutable (a workspace never moves between
                // organizations), so the one fix that keeps this resource is the Connection's.
                Error::InvalidSpec(format!(
                "no organization: set the Connection {}'s spec.organization (spec.organization \
                 is immutable: giving it means creating this Workspace again with it)",
                conn.name_any()
            ))
            })
    }

    fn vcs_was_managed(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.vcs_repo_managed)
            .unwrap_or(false)
    }

    /// Apply tags, bindings, consumers and variables that differ.
    async fn apply_lists(
        &self,
        client: &WorkspacesClient,
        d: &Desired,
        o: &Observed,
        resend: bool,
    ) -> Result<()> {
        let id = &o.id;
        if let Some((want, policy)) = &d.tags {
            let (add, remove) = tag_changes(want, *policy, &o.tags);
            client.change_tags(id, &add, true).await?;
            client.change_tags(id, &remove, false).await?;
        }
        if let Some(b) = &d.tag_bindings {
            if *b != o.tag_bindings {
                client.set_tag_bindings(id, b).await?;
            }
        }
        if let Some(c) = &d.consumers {
            let (add, remove) = consumer_changes(c, &o.consumers);
            let mut ids = Vec::new();
            for c in add {
                match c {
                    Consumer::Id(i) => ids.push(i),
                    Consumer::Name(n) => match client.read_by_name(&d.organization, &n).await? {
                        Some(w) => ids.push(w.get("id").and_then(Value::as_str).unwrap_or_default().to_string()),
                        None => {
                            return Err(Error::MissingReference(format!(
                                "remote state consumer {n}: no workspace of that name in organization {}",
                                d.organization
                            )))
                        }
                    },
                }
            }
            client.change_consumers(id, &ids, true).await?;
            client.change_consumers(id, &remove, false).await?;
        }
        if let Some((want, policy)) = &d.variables {
            let (put, delete) = var_changes(want, *policy, &o.vars, resend);
            write_vars(client, id, put).await.map_err(Error::Remote)?;
            for v in delete {
                client.delete_var(id, &v).await?;
            }
        }
        Ok(())
    }

    async fn observe_id(
        &self,
        client: &WorkspacesClient,
        d: &Desired,
        doc: Value,
    ) -> Result<Observed> {
        let id = doc
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let tags = match &d.tags {
            Some(_) => client.tags(&id).await?,
            None => Vec::new(),
        };
        let tag_bindings = match &d.tag_bindings {
            Some(_) => client.tag_bindings(&id).await?,
            None => BTreeMap::new(),
        };
        let consumers = match &d.consumers {
            Some(_) => client.consumers(&id).await?,
            None => Vec::new(),
        };
        let vars = match &d.variables {
            Some(_) => client.vars(&id).await?,
            None => Vec::new(),
        };
        let latest = doc
            .pointer("/relationships/latest-run/data/id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let latest_run_status = match latest {
            Some(r) => client
                .run(&r)
                .await?
                .and_then(|run| attr_str(&run, "status")),
            None => None,
        };
        Ok(Observed {
            id,
            doc,
            tags,
            tag_bindings,
            consumers,
            vars,
            latest_run_status,
            base_url: client.base_url().to_string(),
        })
    }
}

impl Reconciled for Workspace {
    type Client = WorkspacesClient;
    type Desired = Desired;
    type Observed = Observed;
    const SERVER_ASSIGNED_ID: bool = true;

    async fn desired(&self, ctx: &Context) -> Result<Desired> {
        let ns = self.namespace().unwrap_or_default();
        let organization = self.organization(ctx)?;
        let variables = match &self.spec.variables {
            None => None,
            Some(list) => {
                let mut out = Vec::new();
                for v in list {
                    let value = match (&v.value, &v.value_from) {
                        (Some(val), _) => val.clone(),
                        (None, Some(src)) => ctx
                            .secret_value(&ns, &src.secret_key_ref, &format!("variable {}", v.key))
                            .await?
                            .expose()
                            .to_string(),
                        (None, None) => String::new(),
                    };
                    let category = v.category.clone().unwrap_or_else(|| "terraform".into());
                    out.push(DesiredVar {
                        key: v.key.clone(),
                        value,
                        category,
                        hcl: v.hcl,
                        sensitive: v.sensitive,
                        description: v.description.clone().unwrap_or_default(),
                    });
                }
                Some((out, self.spec.variables_policy))
            }
        };
        let sensitive_hash = variables
            .as_ref()
            .and_then(|(vars, _)| sensitive_hash(ctx.settings.hash_key.expose().as_bytes(), vars));
        let name = self.workspace_name();
        if self
            .spec
            .remote_state_consumers
            .iter()
            .flatten()
            .any(|c| c.name.as_deref() == Some(name.as_str()))
        {
            return Err(Error::InvalidSpec(
                "remoteStateConsumers may not include the workspace itself".into(),
            ));
        }
        Ok(Desired {
            organization,
            name,
            settings: settings::desired(&self.spec.settings, self.vcs_was_managed()),
            tags: self.spec.tags.clone().map(|t| (t, self.spec.tags_policy)),
            tag_bindings: self.spec.tag_bindings.clone(),
            consumers: self.spec.remote_state_consumers.as_ref().map(|l| {
                l.iter()
                    .filter_map(|c| match (&c.id, &c.name) {
                        (Some(i), _) => Some(Consumer::Id(i.clone())),
                        (None, Some(n)) => Some(Consumer::Name(n.clone())),
                        _ => None,
                    })
                    .collect()
            }),
            variables,
            sensitive_hash,
        })
    }

    async fn observe(
        &self,
        client: &WorkspacesClient,
        d: &Desired,
        remote_id: Option<&str>,
    ) -> Result<Option<Observed>> {
        let doc = match remote_id {
            Some(id) => client.read(id).await?,
            None => client.read_by_name(&d.organization, &d.name).await?,
        };
        match doc {
            Some(doc) => Ok(Some(self.observe_id(client, d, doc).await?)),
            None => Ok(None),
        }
    }

    fn diff(desired: &Desired, observed: &Observed) -> Vec<&'static str> {
        diff(desired, observed)
    }

    /// Values of the name and the plain settings only: variables may be sensitive, so they
    /// are shown as changed without values.
    fn shown(desired: &Desired, observed: &Observed, field: &str) -> Option<(String, String)> {
        if field == "name" {
            return Some((
                attr_str(&observed.doc, "name").unwrap_or_default(),
                desired.name.clone(),
            ));
        }
        settings::shown(&desired.settings, &observed.doc, field)
    }

    async fn create(&self, client: &WorkspacesClient, d: &Desired) -> Result<Created> {
        let mut data = settings::create_data(&d.settings, &d.name);
        if let Some(b) = &d.tag_bindings {
            let list: Vec<Value> = b
                .iter()
                .map(|(k, v)| json!({"type": "tag-bindings", "attributes": {"key": k, "value": v}}))
                .collect();
            data["relationships"]["tag-bindings"] = json!({"data": list});
        }
        let doc = client.create(&d.organization, data).await?;
        let id = doc
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        // Tags, consumers and variables go in one pass with the workspace; a failure here is
        // found again by name (adopted), never created twice.
        let observed = Observed {
            id: id.clone(),
            doc,
            tags: Vec::new(),
            tag_bindings: d.tag_bindings.clone().unwrap_or_default(),
            consumers: Vec::new(),
            vars: Vec::new(),
            latest_run_status: None,
            base_url: String::new(),
        };
        self.apply_lists(client, d, &observed, true).await?;
        let fields = self.status_fields(&Observed {
            base_url: client.base_url().to_string(),
            ..observed
        });
        CREATED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.uid().unwrap_or_default(), fields);
        // `workspaceId` is in status at once (see `status_json`); locked, resourceCount,
        // latestRun and url come with the next read of the workspace.
        Ok(Created {
            remote_id: id,
            complete: true,
        })
    }

    async fn update(
        &self,
        client: &WorkspacesClient,
        d: &Desired,
        o: &Observed,
        changed: &[&'static str],
    ) -> Result<()> {
        let settings_changed: Vec<&str> = changed
            .iter()
            .copied()
            .filter(|c| {
                !matches!(
                    *c,
                    "tags"
                        | "tagBindings"
                        | "remoteStateConsumers"
                        | "variables"
                        | "(write-only fields)"
                )
            })
            .collect();
        if !settings_changed.is_empty() {
            let mut data = settings::update_data(&d.settings, &settings_changed);
            if settings_changed.contains(&"name") {
                data["attributes"]["name"] = json!(d.name);
            }
            client.update(&o.id, data).await?;
        }
        let resend = changed.contains(&"(write-only fields)");
        self.apply_lists(client, d, o, resend).await
    }

    async fn delete(&self, client: &WorkspacesClient, remote_id: &str) -> Result<()> {
        client
            .delete(remote_id, self.spec.deletion_mode == DeletionMode::Force)
            .await
            .map_err(Error::from)
    }

    fn remote_id(observed: &Observed) -> String {
        observed.id.clone()
    }

    fn write_only_hash(desired: &Desired, _ctx: &Context) -> Option<String> {
        desired.sensitive_hash.clone()
    }

    fn status_fields(&self, o: &Observed) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("workspaceId".into(), json!(o.id));
        let a = o.doc.get("attributes").cloned().unwrap_or(Value::Null);
        m.insert(
            "locked".into(),
            json!(a.get("locked").and_then(Value::as_bool).unwrap_or(false)),
        );
        m.insert(
            "resourceCount".into(),
            json!(a.get("resource-count").and_then(Value::as_u64).unwrap_or(0)),
        );
        if let Some(r) = o
            .doc
            .pointer("/relationships/latest-run/data/id")
            .and_then(Value::as_str)
        {
            m.insert(
                "latestRun".into(),
                json!({"id": r, "status": o.latest_run_status.clone().unwrap_or_default()}),
            );
        }
        let html = o
            .doc
            .pointer("/links/self-html")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                format!(
                    "/app/{}/workspaces/{}",
                    o.doc
                        .pointer("/relationships/organization/data/id")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    attr_str(&o.doc, "name").unwrap_or_default()
                )
            });
        let url = if html.starts_with("http") {
            html
        } else {
            format!("{}{html}", o.base_url)
        };
        m.insert("url".into(), json!(url));
        // Remembered until the repository is gone, so removing vcsRepo from the spec sends null.
        let still_there = o
            .doc
            .pointer("/attributes/vcs-repo")
            .is_some_and(|v| !v.is_null());
        if self.spec.settings.vcs_repo.is_some() || (self.vcs_was_managed() && still_there) {
            m.insert("vcsRepoManaged".into(), json!(true));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(key: &str, value: &str, sensitive: bool) -> DesiredVar {
        DesiredVar {
            key: key.into(),
            value: value.into(),
            category: "terraform".into(),
            hcl: false,
            sensitive,
            description: String::new(),
        }
    }

    fn have(id: &str, key: &str, value: Option<&str>, sensitive: bool) -> Var {
        Var {
            id: id.into(),
            key: key.into(),
            value: value.map(Into::into),
            category: "terraform".into(),
            hcl: false,
            sensitive,
            description: String::new(),
        }
    }

    #[test]
    fn merge_tags_never_remove_and_own_tags_do() {
        let want = vec!["a".to_string()];
        let have = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            tag_changes(&want, ListPolicy::Merge, &have),
            (vec![], vec![])
        );
        assert_eq!(
            tag_changes(&want, ListPolicy::Own, &have),
            (vec![], vec!["b".to_string()])
        );
    }

    #[test]
    fn consumers_match_by_name_or_id_and_extra_ones_are_removed() {
        let have = vec![
            ("ws-1".to_string(), "one".to_string()),
            ("ws-2".to_string(), "two".to_string()),
        ];
        let want = vec![Consumer::Name("one".into()), Consumer::Id("ws-3".into())];
        let (add, remove) = consumer_changes(&want, &have);
        assert_eq!(add, vec![Consumer::Id("ws-3".into())]);
        assert_eq!(remove, vec!["ws-2".to_string()]);
    }

    #[test]
    fn sensitive_values_are_sent_only_when_their_hash_changed() {
        let want = vec![var("k", "secret", true), var("p", "plain", false)];
        let have = vec![
            have("var-1", "k", None, true),
            have("var-2", "p", Some("plain"), false),
        ];
        assert!(var_changes(&want, ListPolicy::Merge, &have, false)
            .0
            .is_empty());
        let (put, _) = var_changes(&want, ListPolicy::Merge, &have, true);
        assert_eq!(put.len(), 1);
        assert_eq!(put[0].0.as_deref(), Some("var-1"));
    }

    #[test]
    fn unlisted_variables_are_removed_only_when_owned() {
        let want = vec![var("p", "plain", false)];
        let have = vec![
            have("var-2", "p", Some("plain"), false),
            have("var-9", "x", Some("y"), false),
        ];
        assert!(var_changes(&want, ListPolicy::Merge, &have, false)
            .1
            .is_empty());
        assert_eq!(
            var_changes(&want, ListPolicy::Own, &have, false).1,
            vec!["var-9".to_string()]
        );
    }
}
