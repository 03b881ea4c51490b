//! Runs (spec B §4.4): create, read, and the action endpoints.

use std::sync::Arc;

use serde_json::Value;

use super::{doc, seg};
use crate::clients::http::{ClientError, Http};

/// Calls of runs: create one, read one or the recent ones of a workspace, and the action endpoints
/// (apply, discard, cancel).
#[derive(Clone)]
pub struct RunsClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for RunsClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

impl RunsClient {
    /// `POST /runs` with `data` (type, attributes, relationships); returns the run document.
    pub async fn create(&self, data: Value) -> Result<Value, ClientError> {
        let r = self
            .http
            .call("POST", "/api/v2/runs", Some(&doc(data)))
            .await?;
        Ok(r.body.get("data").cloned().unwrap_or(Value::Null))
    }

    /// `GET /runs/:id`; `None` when absent.
    pub async fn read(&self, id: &str) -> Result<Option<Value>, ClientError> {
        match self
            .http
            .call("GET", &format!("/api/v2/runs/{}", seg(id)), None)
            .await
        {
            Ok(r) => Ok(r.body.get("data").cloned()),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The newest runs of a workspace (first page, newest first).
    pub async fn recent(&self, workspace_id: &str) -> Result<Vec<Value>, ClientError> {
        let r = self
            .http
            .call(
                "GET",
                &format!(
                    "/api/v2/workspaces/{}/runs?page%5Bsize%5D=20",
                    seg(workspace_id)
                ),
                None,
            )
            .await?;
        Ok(r.body
            .get("data")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// `POST /runs/:id/actions/<action>` (`apply`, `discard`, `cancel`, `force-cancel`,
    /// `force-execute`).
    pub async fn action(&self, id: &str, action: &str) -> Result<(), ClientError> {
        self.http
            .call(
                "POST",
                &format!("/api/v2/runs/{}/actions/{action}", seg(id)),
                None,
            )
            .await
            .map(|_| ())
    }
}
