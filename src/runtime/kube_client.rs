//! The operator's Kubernetes client (its requests counted by RBAC verb and resource in the
//! metrics) and the key of the keyed hashes of write-only inputs, which every replica reads
//! from the same Secret.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Api, Client, Config};
use rand::Rng;

use crate::clients::SecretString;
use crate::metrics::Metrics;

/// A Kubernetes client from a kubeconfig (or the usual inference), counting its requests by verb
/// in `metrics` so benchmarks and dashboards see the operator's load on the API server.
pub async fn client_from(
    kubeconfig: Option<&std::path::Path>,
    metrics: Arc<Metrics>,
) -> anyhow::Result<Client> {
    let config = config_from(kubeconfig, None).await?;
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&CountCalls(metrics))
        .build())
}

/// Where every command finds its cluster: the kubeconfig given (its `context`, else its
/// current one), else kube's inference (`KUBECONFIG`, `~/.kube/config`, then the pod's
/// ServiceAccount). Errors are one sentence naming the file.
pub async fn config_from(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> anyhow::Result<Config> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    Ok(match (kubeconfig, context) {
        (Some(path), _) => {
            let read = read_kubeconfig(path)?;
            Config::from_custom_kubeconfig(read, &options)
                .await
                .map_err(|e| {
                    anyhow::anyhow!("could not use the kubeconfig {}: {e}", path.display())
                })?
        }
        // A context is a kubeconfig's: no inference from the pod.
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| anyhow::anyhow!("could not use the kubeconfig: {e}"))?,
        (None, None) => Config::infer().await.map_err(no_cluster)?,
    })
}

/// The kubeconfig at `path`, or, when `path` is a list as `KUBECONFIG` may be (`a:b`, which the
/// flags take from it) and no file of that name exists, the files of the list merged as kubectl
/// merges them: the first to set a value wins, and a file that does not exist is skipped.
fn read_kubeconfig(path: &std::path::Path) -> anyhow::Result<Kubeconfig> {
    let listed: Vec<std::path::PathBuf> = std::env::split_paths(path.as_os_str())
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    if path.exists() || listed.len() < 2 {
        return Kubeconfig::read_from(path).map_err(|e| unreadable(path, e));
    }
    let mut merged: Option<Kubeconfig> = None;
    for file in listed.iter().filter(|p| p.exists()) {
        let next = Kubeconfig::read_from(file).map_err(|e| unreadable(file, e))?;
        merged = Some(match merged {
            None => next,
            Some(m) => m.merge(next).map_err(|e| {
                anyhow::anyhow!("could not merge the kubeconfig {}: {e}", file.display())
            })?,
        });
    }
    merged.ok_or_else(|| {
        anyhow::anyhow!(
            "could not read the kubeconfig: none of {} exists",
            path.display()
        )
    })
}

/// A kubeconfig that cannot be read, in a sentence naming the file as the user gave it (kube's
/// own message quotes the path in Rust's debug form and repeats its cause).
fn unreadable(path: &std::path::Path, e: KubeconfigError) -> anyhow::Error {
    match e {
        KubeconfigError::ReadConfig(io, _) => {
            anyhow::anyhow!("could not read the kubeconfig {}: {io}", path.display())
        }
        other => anyhow::anyhow!("could not use the kubeconfig {}: {other}", path.display()),
    }
}

/// No cluster found by `Config::infer`. Outside a pod (no `KUBERNETES_SERVICE_HOST`), the
/// in-cluster half of kube's message is noise: say what was looked for and how to give it.
fn no_cluster(e: kube::config::InferConfigError) -> anyhow::Error {
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return anyhow::anyhow!("could not use the pod's service account or a kubeconfig: {e}");
    }
    let why = match std::error::Error::source(&e).and_then(|s| s.downcast_ref::<KubeconfigError>())
    {
        Some(KubeconfigError::ReadConfig(io, path)) => format!("{} ({io})", path.display()),
        Some(other) => other.to_string(),
        None => e.to_string(),
    };
    anyhow::anyhow!(
        "found no cluster to connect to: not in a pod, and no usable kubeconfig: {why}; give \
         --kubeconfig or set KUBECONFIG"
    )
}

/// The RBAC verb and resource (`resource.group[/subresource]`, core group empty) of a request,
/// e.g. `("patch", "secretspolicies.secrets.quartet.dev/status")`.
pub fn classify(method: &str, path: &str, query: &str) -> (&'static str, String) {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.first() {
        Some(&"api") => ("", &segs[segs.len().min(2)..]),
        Some(&"apis") if segs.len() >= 3 => (segs[1], &segs[3..]),
        _ => return ("other", path.to_string()),
    };
    let rest = match rest {
        ["namespaces", _ns, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    let (resource, named, sub) = match rest {
        [plural] => (*plural, false, None),
        [plural, _name] => (*plural, true, None),
        [plural, _name, sub, ..] => (*plural, true, Some(*sub)),
        _ => ("", false, None),
    };
    let verb = match method {
        "GET"
            if query
                .split('&')
                .any(|kv| kv == "watch=true" || kv == "watch=1") =>
        {
            "watch"
        }
        "GET" if named => "get",
        "GET" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if named => "delete",
        "DELETE" => "deletecollection",
        _ => "other",
    };
    let mut name = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    if let Some(sub) = sub {
        name = format!("{name}/{sub}");
    }
    (verb, name)
}

/// The second RBAC verb a request needed, known from its answer: a PATCH (server-side apply)
/// or PUT answered `201 Created` made the object, which the API server authorizes as `create`
/// as well.
pub fn implied_verb(verb: &str, status: u16) -> Option<&'static str> {
    (matches!(verb, "patch" | "update") && status == 201).then_some("create")
}

/// Counts every request of the client in `quartet_kube_api_calls_total` by [`classify`], and
/// once more by [`implied_verb`] when the answer shows it needed another verb.
struct CountCalls(Arc<Metrics>);

impl<S> tower::Layer<S> for CountCalls {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            metrics: self.0.clone(),
        }
    }
}

struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B> tower::Service<http::Request<kube::client::Body>> for Counted<S>
where
    S: tower::Service<http::Request<kube::client::Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let (verb, resource) = classify(
            req.method().as_str(),
            req.uri().path(),
            req.uri().query().unwrap_or(""),
        );
        self.metrics.kube_call(verb, &resource);
        let metrics = self.metrics.clone();
        // Made here, in the caller's span (kube's request buffer carries it over), so a
        // reconcile's writes are its children in a trace.
        let span = crate::traces::kube_write_span(verb, &resource);
        let answer = self.inner.call(req);
        Box::pin(async move {
            let res = answer.await?;
            if let Some(span) = span {
                span.record(
                    "http.response.status_code",
                    i64::from(res.status().as_u16()),
                );
            }
            if let Some(also) = implied_verb(verb, res.status().as_u16()) {
                metrics.kube_call(also, &resource);
            }
            Ok(res)
        })
    }
}

/// The key of the keyed hashes of write-only inputs: the `quartet-hash-key` Secret in the
/// operator's namespace, created with 32 random bytes on first start (so every replica and every
/// restart uses the same key, and nobody without that Secret can test guesses against status).
pub async fn hash_key(client: &Client, namespace: &str) -> anyhow::Result<SecretString> {
    const NAME: &str = "quartet-hash-key";
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let read = |s: Secret| {
        s.data.and_then(|d| {
            d.get("key")
                .map(|b| String::from_utf8_lossy(&b.0).to_string())
        })
    };
    if let Some(key) = api.get_opt(NAME).await?.and_then(read) {
        return Ok(SecretString::new(key));
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill(&mut bytes);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            ..Default::default()
        },
        string_data: Some([("key".to_string(), hex::encode(bytes))].into()),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(s) => {
            if let Some(k) = read(s) {
                return Ok(SecretString::new(k));
            }
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    // Another replica won the race (or the server did not echo data): read what is stored.
    api.get(NAME)
        .await
        .ok()
        .and_then(read)
        .map(SecretString::new)
        .ok_or_else(|| anyhow::anyhow!("Secret {namespace}/{NAME} has no key"))
}
