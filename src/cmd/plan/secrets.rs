//! Secrets of the manifests, served to the plan as if the cluster had them.
//!
//! A pull request often adds a Secret next to the resource that reads it: the plan must use
//! that Secret (what the merge would apply), whether or not the cluster has it yet. Kinds read
//! Secrets in many places (their `desired`, a Connection's token, a key import), all through
//! the Kubernetes client, so the Secrets are answered in the client itself: a GET of a Secret
//! the manifests hold never leaves the process; everything else goes on to the cluster.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use base64::Engine;
use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::Frame;
use kube::client::DynBody;
use serde_json::Value;

/// The Secrets of the manifests, by (namespace, name), each as the API server would return it
/// (`stringData` folded into `data`).
#[derive(Clone, Debug, Default)]
pub struct ManifestSecrets(Arc<BTreeMap<(String, String), Bytes>>);

impl ManifestSecrets {
    /// The `v1` Secrets among `docs` (those without a namespace are in `default_ns`).
    pub fn from_docs(docs: &[Value], default_ns: &str) -> Self {
        let mut map = BTreeMap::new();
        for d in docs {
            if d.get("apiVersion").and_then(Value::as_str) != Some("v1")
                || d.get("kind").and_then(Value::as_str) != Some("Secret")
            {
                continue;
            }
            let Some(name) = d.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            let ns = d
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(default_ns);
            let mut s = d.clone();
            let mut data = s
                .get("data")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if let Some(sd) = s.get("stringData").and_then(Value::as_object) {
                for (k, v) in sd {
                    let text = match v {
                        Value::String(t) => t.clone(),
                        other => other.to_string(),
                    };
                    data.insert(
                        k.clone(),
                        Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
                    );
                }
            }
            if let Some(o) = s.as_object_mut() {
                o.remove("stringData");
                o.insert("data".into(), Value::Object(data));
                if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("namespace".into(), Value::String(ns.to_string()));
                }
            }
            map.insert(
                (ns.to_string(), name.to_string()),
                Bytes::from(s.to_string()),
            );
        }
        Self(Arc::new(map))
    }

    /// The Secret a request path names, when the manifests hold it.
    fn lookup(&self, method: &str, path: &str) -> Option<Bytes> {
        if method != "GET" {
            return None;
        }
        let rest = path.strip_prefix("/api/v1/namespaces/")?;
        let (ns, rest) = rest.split_once('/')?;
        let name = rest.strip_prefix("secrets/")?;
        if name.is_empty() || name.contains('/') {
            return None;
        }
        self.0.get(&(ns.to_string(), name.to_string())).cloned()
    }
}

impl<S> tower::Layer<S> for ManifestSecrets {
    type Service = ManifestSecretsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ManifestSecretsService {
            inner,
            secrets: self.clone(),
        }
    }
}

/// The plan's Kubernetes client stack with the manifests' Secrets: a read of one of them is
/// answered from the manifests, everything else goes to `inner`.
#[derive(Clone, Debug)]
pub struct ManifestSecretsService<S> {
    inner: S,
    secrets: ManifestSecrets,
}

/// One response body of bytes known in advance.
struct Once(Option<Bytes>);

impl http_body::Body for Once {
    type Data = Bytes;
    type Error = tower::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }
}

impl<S, B> tower::Service<http::Request<B>> for ManifestSecretsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Box<DynBody>>>,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Box<DynBody>>;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, tower::BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if let Some(body) = self.secrets.lookup(req.method().as_str(), req.uri().path()) {
            let mut resp = http::Response::new(Box::new(Once(Some(body))) as Box<DynBody>);
            resp.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            return Box::pin(async move { Ok(resp) });
        }
        let fut = self.inner.call(req);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_of_the_manifests_is_found_by_its_path_with_string_data_as_data() {
        let docs = vec![
            serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "pw"}, "stringData": {"password": "s3cret"}}),
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm"}}),
        ];
        let s = ManifestSecrets::from_docs(&docs, "team");
        let body = s
            .lookup("GET", "/api/v1/namespaces/team/secrets/pw")
            .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["data"]["password"], "czNjcmV0");
        assert!(v.get("stringData").is_none());
        assert_eq!(v["metadata"]["namespace"], "team");
        assert!(s
            .lookup("PATCH", "/api/v1/namespaces/team/secrets/pw")
            .is_none());
        assert!(s
            .lookup("GET", "/api/v1/namespaces/other/secrets/pw")
            .is_none());
        assert!(s
            .lookup("GET", "/api/v1/namespaces/team/configmaps/cm")
            .is_none());
    }
}
