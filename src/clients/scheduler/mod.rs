//! Client of the scheduler's deployments API (spec C §4.4), `/v1/...` with the Connection's
//! token header (`X-Scheduler-Token` by default; real servers take `X-Nomad-Token`, set it with
//! the Connection's `tokenHeader`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::http::{ClientError, Http};

/// Calls of the scheduler's deployments API: deployments and their actions, jobs, allocations.
#[derive(Clone, Debug)]
pub struct SchedulerClient {
    http: Arc<Http>,
}

impl From<Arc<Http>> for SchedulerClient {
    fn from(http: Arc<Http>) -> Self {
        Self { http }
    }
}

use crate::clients::http::encode_segment as encode;

/// `wait` of a blocking query in the service's format (whole milliseconds).
fn wait_param(wait: Duration) -> String {
    format!("{}ms", wait.as_millis().max(1))
}

impl SchedulerClient {
    fn ns(ns: &str) -> String {
        format!("namespace={}", encode(ns))
    }

    /// `GET /v1/job/:id/deployment`: the job's latest deployment (`None` when it has none, or
    /// the job does not exist).
    pub async fn latest_deployment(
        &self,
        job: &str,
        ns: &str,
    ) -> Result<Option<Value>, ClientError> {
        let path = format!("/v1/job/{}/deployment?{}", encode(job), Self::ns(ns));
        let body = self.http.call("GET", &path, None).await?.body;
        Ok((!body.is_null()).then_some(body))
    }

    /// `GET /v1/deployment/:id`, as a blocking query when `block` is `(index, wait)`: answers
    /// once the deployment's modify index is above `index` or `wait` passed.
    pub async fn deployment(
        &self,
        id: &str,
        ns: &str,
        block: Option<(u64, Duration)>,
    ) -> Result<Option<Value>, ClientError> {
        let mut path = format!("/v1/deployment/{}?{}", encode(id), Self::ns(ns));
        if let Some((index, wait)) = block {
            path.push_str(&format!("&index={index}&wait={}", wait_param(wait)));
        }
        match self.http.call("GET", &path, None).await {
            Ok(r) => Ok(Some(r.body)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /v1/deployment/allocations/:id`: the deployment's allocations.
    pub async fn allocations(&self, id: &str, ns: &str) -> Result<Vec<Value>, ClientError> {
        let path = format!("/v1/deployment/allocations/{}?{}", encode(id), Self::ns(ns));
        let body = self.http.call("GET", &path, None).await?.body;
        Ok(body.as_array().cloned().unwrap_or_default())
    }

    /// `GET /v1/job/:id`: the job (its groups' `Update.HealthCheck`); `None` when absent.
    pub async fn job(&self, job: &str, ns: &str) -> Result<Option<Value>, ClientError> {
        let path = format!("/v1/job/{}?{}", encode(job), Self::ns(ns));
        match self.http.call("GET", &path, None).await {
            Ok(r) => Ok(Some(r.body)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn control(
        &self,
        what: &str,
        id: &str,
        ns: &str,
        body: Option<Value>,
    ) -> Result<Value, ClientError> {
        let path = format!("/v1/deployment/{what}/{}?{}", encode(id), Self::ns(ns));
        Ok(self.http.call("POST", &path, body.as_ref()).await?.body)
    }

    /// `POST /v1/deployment/promote/:id`: all groups (`groups` empty) or the named ones.
    pub async fn promote(
        &self,
        id: &str,
        ns: &str,
        groups: &[String],
    ) -> Result<Value, ClientError> {
        let body = if groups.is_empty() {
            json!({"DeploymentID": id, "All": true})
        } else {
            json!({"DeploymentID": id, "Groups": groups})
        };
        self.control("promote", id, ns, Some(body)).await
    }

    /// `POST /v1/deployment/fail/:id` (no body).
    pub async fn fail(&self, id: &str, ns: &str) -> Result<Value, ClientError> {
        self.control("fail", id, ns, None).await
    }

    /// `POST /v1/deployment/pause/:id` with `Pause` true (pause) or false (resume).
    pub async fn pause(&self, id: &str, ns: &str, pause: bool) -> Result<Value, ClientError> {
        self.control(
            "pause",
            id,
            ns,
            Some(json!({"DeploymentID": id, "Pause": pause})),
        )
        .await
    }

    /// `POST /v1/deployment/allocation-health/:id`.
    pub async fn allocation_health(
        &self,
        id: &str,
        ns: &str,
        healthy: &[String],
        unhealthy: &[String],
    ) -> Result<Value, ClientError> {
        let body = json!({
            "DeploymentID": id,
            "HealthyAllocationIDs": healthy,
            "UnhealthyAllocationIDs": unhealthy,
        });
        self.control("allocation-health", id, ns, Some(body)).await
    }

    /// `POST /v1/deployment/unblock/:id`.
    pub async fn unblock(&self, id: &str, ns: &str) -> Result<Value, ClientError> {
        self.control("unblock", id, ns, Some(json!({"DeploymentID": id})))
            .await
    }
}
