//! Workspaces, their tags, tag bindings, remote state consumers and variables (spec B §4.1–4.3).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::{attr_str, doc, list_all, seg};
use crate::clients::http::{ClientError, Http};

/// Calls of workspaces and their tags, tag bindings, remote state consumers and variables.
#[derive(Clone)]
pub struct WorkspacesClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for WorkspacesClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

/// `None` for a 404 (absent, or not visible to the token).
fn found(r: Result<Value, ClientError>) -> Result<Option<Value>, ClientError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.status() == Some(404) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A workspace variable as the service shows it (a sensitive value reads as `None`).
#[derive(Clone, Debug, PartialEq)]
pub struct Var {
    /// The variable's id.
    pub id: String,
    /// The variable's name.
    pub key: String,
    /// Its value; `None` when sensitive.
    pub value: Option<String>,
    /// `terraform` (an input variable) or `env` (an environment variable).
    pub category: String,
    /// Whether the value is HCL rather than a string.
    pub hcl: bool,
    /// Whether the service hides the value once written.
    pub sensitive: bool,
    /// A description shown in the service.
    pub description: String,
}

impl WorkspacesClient {
    /// The service's base URL (for links to the service's web pages).
    pub fn base_url(&self) -> &str {
        self.http.base_url()
    }

    async fn data(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let r = self.http.call(verb, path, body).await?;
        Ok(r.body.get("data").cloned().unwrap_or(Value::Null))
    }

    /// `GET /workspaces/:id`.
    pub async fn read(&self, id: &str) -> Result<Option<Value>, ClientError> {
        found(
            self.data("GET", &format!("/api/v2/workspaces/{}", seg(id)), None)
                .await,
        )
    }

    /// `GET /organizations/:org/workspaces/:name`.
    pub async fn read_by_name(&self, org: &str, name: &str) -> Result<Option<Value>, ClientError> {
        let path = format!(
            "/api/v2/organizations/{}/workspaces/{}",
            seg(org),
            seg(name)
        );
        found(self.data("GET", &path, None).await)
    }

    /// `POST /organizations/:org/workspaces` with `data` (type, attributes, relationships).
    pub async fn create(&self, org: &str, data: Value) -> Result<Value, ClientError> {
        let path = format!("/api/v2/organizations/{}/workspaces", seg(org));
        self.data("POST", &path, Some(&doc(data))).await
    }

    /// `PATCH /workspaces/:id`.
    pub async fn update(&self, id: &str, data: Value) -> Result<Value, ClientError> {
        self.data(
            "PATCH",
            &format!("/api/v2/workspaces/{}", seg(id)),
            Some(&doc(data)),
        )
        .await
    }

    /// `POST /workspaces/:id/actions/safe-delete` (refused while the workspace manages
    /// resources) or `DELETE /workspaces/:id`; an absent workspace counts as deleted.
    pub async fn delete(&self, id: &str, force: bool) -> Result<(), ClientError> {
        let r = if force {
            self.http
                .call("DELETE", &format!("/api/v2/workspaces/{}", seg(id)), None)
                .await
        } else {
            self.http
                .call(
                    "POST",
                    &format!("/api/v2/workspaces/{}/actions/safe-delete", seg(id)),
                    None,
                )
                .await
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Tag names of the workspace (every page).
    pub async fn tags(&self, id: &str) -> Result<Vec<String>, ClientError> {
        let items = list_all(
            &self.http,
            &format!("/api/v2/workspaces/{}/relationships/tags", seg(id)),
        )
        .await?;
        Ok(items.iter().filter_map(|t| attr_str(t, "name")).collect())
    }

    /// Add (`POST`) or remove (`DELETE`) tags by name.
    pub async fn change_tags(
        &self,
        id: &str,
        names: &[String],
        add: bool,
    ) -> Result<(), ClientError> {
        if names.is_empty() {
            return Ok(());
        }
        let data: Vec<Value> = names
            .iter()
            .map(|n| json!({"type": "tags", "attributes": {"name": n}}))
            .collect();
        let verb = if add { "POST" } else { "DELETE" };
        self.http
            .call(
                verb,
                &format!("/api/v2/workspaces/{}/relationships/tags", seg(id)),
                Some(&json!({"data": data})),
            )
            .await
            .map(|_| ())
    }

    /// Key/value tags of the workspace.
    pub async fn tag_bindings(&self, id: &str) -> Result<BTreeMap<String, String>, ClientError> {
        let items = list_all(
            &self.http,
            &format!("/api/v2/workspaces/{}/tag-bindings", seg(id)),
        )
        .await?;
        Ok(items
            .iter()
            .filter_map(|t| {
                Some((
                    attr_str(t, "key")?,
                    attr_str(t, "value").unwrap_or_default(),
                ))
            })
            .collect())
    }

    /// Make the key/value tags exactly `bindings` (`relationships.tag-bindings` on update).
    pub async fn set_tag_bindings(
        &self,
        id: &str,
        bindings: &BTreeMap<String, String>,
    ) -> Result<(), ClientError> {
        let data: Vec<Value> = bindings
            .iter()
            .map(|(k, v)| json!({"type": "tag-bindings", "attributes": {"key": k, "value": v}}))
            .collect();
        self.update(
            id,
            json!({"type": "workspaces", "relationships": {"tag-bindings": {"data": data}}}),
        )
        .await
        .map(|_| ())
    }

    /// Remote state consumers as (id, name), every page.
    pub async fn consumers(&self, id: &str) -> Result<Vec<(String, String)>, ClientError> {
        let items = list_all(
            &self.http,
            &format!(
                "/api/v2/workspaces/{}/relationships/remote-state-consumers",
                seg(id)
            ),
        )
        .await?;
        Ok(items
            .iter()
            .filter_map(|w| {
                Some((
                    w.get("id")?.as_str()?.to_string(),
                    attr_str(w, "name").unwrap_or_default(),
                ))
            })
            .collect())
    }

    /// Add (`POST`) or remove (`DELETE`) remote state consumers by id: what a workspace admin
    /// may call (PATCH replace needs organization-wide rights).
    pub async fn change_consumers(
        &self,
        id: &str,
        ids: &[String],
        add: bool,
    ) -> Result<(), ClientError> {
        if ids.is_empty() {
            return Ok(());
        }
        let data: Vec<Value> = ids
            .iter()
            .map(|i| json!({"type": "workspaces", "id": i}))
            .collect();
        let verb = if add { "POST" } else { "DELETE" };
        self.http
            .call(
                verb,
                &format!(
                    "/api/v2/workspaces/{}/relationships/remote-state-consumers",
                    seg(id)
                ),
                Some(&json!({"data": data})),
            )
            .await
            .map(|_| ())
    }

    /// Workspace variables.
    pub async fn vars(&self, id: &str) -> Result<Vec<Var>, ClientError> {
        let items = list_all(&self.http, &format!("/api/v2/workspaces/{}/vars", seg(id))).await?;
        Ok(items
            .iter()
            .map(|v| {
                let a = v.get("attributes").cloned().unwrap_or(Value::Null);
                let b = |k: &str| a.get(k).and_then(Value::as_bool).unwrap_or(false);
                Var {
                    id: v
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    key: attr_str(v, "key").unwrap_or_default(),
                    value: attr_str(v, "value"),
                    category: attr_str(v, "category").unwrap_or_default(),
                    hcl: b("hcl"),
                    sensitive: b("sensitive"),
                    description: attr_str(v, "description").unwrap_or_default(),
                }
            })
            .collect())
    }

    /// Create (`var_id` None) or update a variable with `attributes`.
    pub async fn put_var(
        &self,
        id: &str,
        var_id: Option<&str>,
        attributes: Value,
    ) -> Result<(), ClientError> {
        let body = json!({"data": {"type": "vars", "attributes": attributes}});
        let r = match var_id {
            None => {
                self.http
                    .call(
                        "POST",
                        &format!("/api/v2/workspaces/{}/vars", seg(id)),
                        Some(&body),
                    )
                    .await
            }
            Some(v) => {
                self.http
                    .call(
                        "PATCH",
                        &format!("/api/v2/workspaces/{}/vars/{}", seg(id), seg(v)),
                        Some(&body),
                    )
                    .await
            }
        };
        r.map(|_| ())
    }

    /// Deletes variable `var_id` of workspace `id`; a variable already gone is not an error.
    pub async fn delete_var(&self, id: &str, var_id: &str) -> Result<(), ClientError> {
        match self
            .http
            .call(
                "DELETE",
                &format!("/api/v2/workspaces/{}/vars/{}", seg(id), seg(var_id)),
                None,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `GET /runs/:id`.
    pub async fn run(&self, id: &str) -> Result<Option<Value>, ClientError> {
        found(
            self.data("GET", &format!("/api/v2/runs/{}", seg(id)), None)
                .await,
        )
    }
}
