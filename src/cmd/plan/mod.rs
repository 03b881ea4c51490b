//! `quartet plan`: what applying a set of manifests would do to the services, before it is
//! merged.
//!
//! Each Quartet resource is planned with its kind's own `desired` / `observe` / `diff` (the code
//! the controllers run), against the object a server-side dry-run apply says the cluster would
//! store (defaults filled in, admission rules checked, `status` kept from the live object).
//!
//! A plan is read-only by construction, not by care: the service clients are built in
//! read-only mode ([`crate::clients::HttpConfig::read_only`]), which refuses any call but a read
//! before it is sent, and the Kubernetes client goes through [`ReadOnlyKube`], which refuses
//! any request but a read or a `dryRun=All` write. A kind whose observe would write (a due
//! rotation) is reported with the refusal instead of doing it.

mod cluster;
pub mod render;
pub mod secrets;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, ValueEnum};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::{reflector, watcher};
use kube::{Api, Client, Config, Resource, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use crate::api::secrets::directory::{AdCheckout, AdEngine, AdLibrarySet, AdRole};
use crate::api::secrets::dr::DrReplication;
use crate::api::Service;
use crate::api::{CatalogAclBootstrap, CatalogAclToken, Connection, DeploymentGate, SecretsPolicy};
use crate::api::{
    IdpAuthMethod, IdpGroup, IdpUser, TotpEnrollment, TotpMethod, TransformAlphabet, TransformRole,
    TransformStore, TransformTemplate, Transformation,
};
use crate::api::{NoCodeModule, NoCodeWorkspace, Workspace, WorkspaceRun};
use crate::clients::http::Auth;
use crate::clients::{Http, HttpConfig, SecretString};
use crate::metrics::Metrics;
use crate::reconcile::driver::Managed;
use crate::reconcile::gitops::Intent;
use crate::reconcile::{Context, Operated, Reconciled, Settings};

/// The field manager of the dry-run applies.
const MANAGER: &str = "quartet-plan";

#[derive(Args, Debug)]
// The arguments of `quartet plan` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct PlanArgs {
    /// Manifests: files, directories (every `.yaml`, `.yml` and `.json` file below), or `-`
    /// for stdin; multi-document YAML.
    #[arg(short = 'f', long = "filename", required_unless_present = "resource")]
    pub files: Vec<PathBuf>,
    /// Plan one resource of the cluster as it stands (`KIND/NAME`, in `-n`): the diff its next
    /// reconcile would apply.
    #[arg(long, conflicts_with = "files")]
    pub resource: Option<String>,
    /// Kubeconfig to use; default: $KUBECONFIG (a list such as a:b is
    /// merged as kubectl merges it), ~/.kube/config, or the in-cluster service account.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Namespace of resources whose manifest names none.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Label selector: resources in the cluster that match it and are absent from the
    /// manifests are shown as deleted.
    #[arg(long)]
    pub prune_selector: Option<String>,
    /// Use this Connection (`NAMESPACE/NAME`) for every resource, whatever its connectionRef.
    #[arg(long)]
    pub connection: Option<String>,
    /// Plan against one service at this address, without a cluster: the token comes from
    /// `QUARTET_TOKEN`, every resource of the service's kinds uses it, and nothing is read from
    /// Kubernetes (no status: objects are created or adopted; Secrets only from the manifests).
    #[arg(long, conflicts_with_all = ["kubeconfig", "context", "resource", "prune_selector", "connection"])]
    pub address: Option<String>,
    /// With `--address`: the header that carries the token (default: the service's own,
    /// e.g. `X-Secrets-Token`; `X-Vault-Token` for OpenBao). The workspace service takes
    /// `Authorization: Bearer`.
    #[arg(long, requires = "address")]
    pub token_header: Option<String>,
    /// Namespace of the operator (where its `quartet-hash-key` Secret is).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub operator_namespace: String,
    /// Output: `table` (for people), `markdown` (for a pull-request comment) or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
// The shape of the plan printed: a table, Markdown or JSON (no doc comments: clap would list them
// in --help).
#[allow(missing_docs)]
pub enum Format {
    Table,
    Markdown,
    Json,
}

/// Errors of a plan as a whole (a resource that cannot be planned is an entry, not an error).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A manifest could not be read.
    #[error("cannot read {path}: {detail}")]
    Read {
        /// The file (or `-` for stdin).
        path: String,
        /// Why.
        detail: String,
    },
    /// A manifest is not valid YAML.
    #[error("{path} is not valid YAML: {detail}")]
    Yaml {
        /// The file (or `-` for stdin).
        path: String,
        /// The parser's message.
        detail: String,
    },
    /// The kubeconfig could not be read or used: why.
    #[error("{0}")]
    Kubeconfig(String),
    /// A read from the Kubernetes API failed.
    #[error("a read from Kubernetes failed: {}", crate::reconcile::error::kube_cli_sentence(.0))]
    Kube(#[from] kube::Error),
    /// `--resource` is not `KIND/NAME` of a Quartet kind: what was given.
    #[error("--resource takes KIND/NAME with a Quartet kind, not {0:?}")]
    ResourceArg(String),
    /// The resource of `--resource` is not in the cluster: which.
    #[error("{0} does not exist")]
    NotFound(String),
    /// `--address` was given without `QUARTET_TOKEN`.
    #[error("--address needs the token in the QUARTET_TOKEN environment variable")]
    NoToken,
    /// `--connection` is not `NAMESPACE/NAME`: what was given.
    #[error("--connection takes NAMESPACE/NAME, not {0:?}")]
    ConnectionArg(String),
    /// `--address` reaches one service, and the manifests hold kinds of several: which.
    #[error(
        "--address reaches one service, but the manifests hold resources of several: {0}. \
             Plan each service's manifests with its own --address"
    )]
    MixedServices(String),
    /// The API server refused `--prune-selector`: the selector and its message.
    #[error(
        "--prune-selector {selector:?} is not a label selector the API server accepts: {message}"
    )]
    PruneSelector {
        /// The selector given.
        selector: String,
        /// The API server's message.
        message: String,
    },
    /// A write the Kubernetes client refused (never sent).
    #[error("plan is read-only: refused {verb} {path}")]
    KubeWrite {
        /// The HTTP method refused.
        verb: String,
        /// The request path.
        path: String,
    },
}

/// What applying one resource would do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The remote object does not exist: it would be created.
    Create,
    /// The remote object exists and some fields would change.
    Update,
    /// An object of the same name exists in the service and would be taken over.
    Adopt,
    /// The service already matches the spec.
    NoChange,
    /// The resource could not be planned (invalid, or a reference or Connection missing): the
    /// entry's message says why.
    Blocked,
    /// The resource is being deleted: the remote object would be deleted (or orphaned, per its
    /// deletion policy).
    Delete,
}

impl Outcome {
    /// The outcome as a plan prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Create => "create",
            Outcome::Update => "update",
            Outcome::Adopt => "adopt",
            Outcome::NoChange => "no change",
            Outcome::Blocked => "blocked",
            Outcome::Delete => "delete",
        }
    }
}

/// One changed field. A write-only field carries `sensitive` and never a value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The field's name as the spec spells it.
    pub field: String,
    /// Its value in the service, shortened for display; `None` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// Its value after the apply, shortened for display; `None` when it would be removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
    /// `would be sent` or `unchanged`, for write-only inputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sensitive: Option<&'static str>,
}

/// The plan of one resource.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The resource's kind.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// What applying it would do.
    pub outcome: Outcome,
    /// The remote object's identifier, when it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_id: Option<String>,
    /// Why it is blocked, or a note on the outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The fields that would change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// One-shot operations the apply would trigger.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<String>,
    /// Destructive effects, each a sentence.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub destructive: Vec<String>,
    /// `spec.deletionPolicy` of a resource being deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<String>,
}

impl Entry {
    fn new(kind: &str, namespace: &str, name: &str, outcome: Outcome) -> Self {
        Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            outcome,
            remote_id: None,
            message: None,
            changes: Vec::new(),
            triggers: Vec::new(),
            destructive: Vec::new(),
            deletion_policy: None,
        }
    }

    fn blocked(kind: &str, namespace: &str, name: &str, why: impl Into<String>) -> Self {
        let mut e = Self::new(kind, namespace, name, Outcome::Blocked);
        e.message = Some(why.into());
        e
    }
}

/// A whole plan.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Plan {
    /// How many resources have each outcome.
    pub summary: Summary,
    /// One entry per resource, in the order of the manifests.
    pub resources: Vec<Entry>,
}

/// How many resources of a plan have each outcome.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Resources whose remote object would be created.
    pub create: usize,
    /// Resources whose remote object would change.
    pub update: usize,
    /// Resources that would take over an existing object.
    pub adopt: usize,
    /// Resources whose remote object would be deleted.
    pub delete: usize,
    /// Resources already matching the service.
    pub unchanged: usize,
    /// Resources that could not be planned.
    pub blocked: usize,
}

impl Plan {
    fn new(resources: Vec<Entry>) -> Self {
        let mut s = Summary::default();
        for e in &resources {
            match e.outcome {
                Outcome::Create => s.create += 1,
                Outcome::Update => s.update += 1,
                Outcome::Adopt => s.adopt += 1,
                Outcome::Delete => s.delete += 1,
                Outcome::NoChange => s.unchanged += 1,
                Outcome::Blocked => s.blocked += 1,
            }
        }
        Self {
            summary: s,
            resources,
        }
    }

    /// Whether applying would change anything.
    pub fn changes(&self) -> bool {
        let s = &self.summary;
        s.create + s.update + s.adopt + s.delete > 0
    }
}

/// `quartet plan`: prints the plan; the exit code is 0 when nothing would change, 2 when
/// something would, 1 when a resource is blocked or the plan failed.
pub async fn run(args: PlanArgs) -> anyhow::Result<std::process::ExitCode> {
    let direct = match &args.address {
        Some(a) => Some(Direct {
            address: a.trim_end_matches('/').to_string(),
            token: SecretString::new(
                std::env::var("QUARTET_TOKEN")
                    .ok()
                    .filter(|t| !t.is_empty())
                    .ok_or(PlanError::NoToken)?,
            ),
            header: args.token_header.clone(),
        }),
        None => None,
    };
    let files = match &args.resource {
        Some(_) => Vec::new(),
        None => load(&args.files)?,
    };
    // Secrets of the manifests are what the merge would apply: the plan reads them instead of
    // the cluster's (which may not have them yet).
    let secrets = secrets::ManifestSecrets::from_docs(&files, &args.namespace);
    let client = match &direct {
        // No cluster: a client to an address nothing listens on, so any Kubernetes read fails
        // (and says so) instead of reaching a cluster the user did not name.
        Some(_) => {
            let url: http::Uri = "http://127.0.0.1:1".parse().expect("a valid URI");
            kube::client::ClientBuilder::try_from(Config::new(url))
                .map_err(|e| {
                    PlanError::Kubeconfig(format!("could not make a Kubernetes client: {e}"))
                })?
                .with_layer(&ReadOnlyKube)
                .with_layer(&secrets)
                .build()
        }
        None => client(args.kubeconfig.as_deref(), args.context.as_deref(), secrets).await?,
    };
    let docs = match &args.resource {
        Some(r) => vec![live_doc(&client, r, &args.namespace).await?],
        None => files,
    };
    let override_conn = match &args.connection {
        Some(c) => Some(
            c.split_once('/')
                .filter(|(ns, n)| !ns.is_empty() && !n.is_empty())
                .map(|(ns, n)| (ns.to_string(), n.to_string()))
                .ok_or_else(|| PlanError::ConnectionArg(c.clone()))?,
        ),
        None => None,
    };
    let plan = plan(
        client,
        docs,
        &args.namespace,
        &args.operator_namespace,
        args.prune_selector.as_deref(),
        override_conn,
        direct,
    )
    .await?;
    let out = match args.output {
        Format::Table => render::table(&plan),
        Format::Markdown => render::markdown(&plan),
        Format::Json => render::json(&plan),
    };
    print!("{out}");
    Ok(std::process::ExitCode::from(if plan.summary.blocked > 0 {
        1
    } else if plan.changes() {
        2
    } else {
        0
    }))
}

/// The documents of `paths` (files, directories, `-` for stdin), `List`s expanded.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Value>, PlanError> {
    let mut files = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            files.push(p.clone());
        } else if p.is_dir() {
            collect_dir(p, &mut files)?;
        } else {
            files.push(p.clone());
        }
    }
    let mut docs = Vec::new();
    for f in files {
        let shown = f.display().to_string();
        let text = if f.as_os_str() == "-" {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| PlanError::Read {
                    path: "stdin".into(),
                    detail: e.to_string(),
                })?;
            s
        } else {
            std::fs::read_to_string(&f).map_err(|e| PlanError::Read {
                path: shown.clone(),
                detail: e.to_string(),
            })?
        };
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v =
                <Value as serde::Deserialize>::deserialize(doc).map_err(|e| PlanError::Yaml {
                    path: shown.clone(),
                    detail: e.to_string(),
                })?;
            expand(v, &mut docs);
        }
    }
    Ok(docs)
}

fn expand(v: Value, out: &mut Vec<Value>) {
    if v.is_null() {
        return;
    }
    if v.get("kind").and_then(Value::as_str) == Some("List") {
        if let Some(items) = v.get("items").and_then(Value::as_array) {
            for i in items {
                expand(i.clone(), out);
            }
        }
        return;
    }
    out.push(v);
}

fn collect_dir(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), PlanError> {
    let read = |e: std::io::Error| PlanError::Read {
        path: dir.display().to_string(),
        detail: e.to_string(),
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_dir(&p, out)?;
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            out.push(p);
        }
    }
    Ok(())
}

/// The manifest of the live resource `KIND/NAME` in `ns` (its metadata name, namespace and
/// labels, and its spec), so its plan is what its next reconcile would do.
async fn live_doc(client: &Client, resource: &str, ns: &str) -> Result<Value, PlanError> {
    let bad = || PlanError::ResourceArg(resource.to_string());
    let (kind, name) = resource.split_once('/').ok_or_else(bad)?;
    let r = crate::runtime::controllers::registry()
        .into_iter()
        .find(|r| {
            r.kind.eq_ignore_ascii_case(kind)
                || r.plural.eq_ignore_ascii_case(kind)
                || r.crd_name.eq_ignore_ascii_case(kind)
        })
        .ok_or_else(bad)?;
    let obj = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &r.resource)
        .get_opt(name)
        .await?
        .ok_or_else(|| PlanError::NotFound(format!("{} {ns}/{name}", r.kind)))?;
    Ok(serde_json::json!({
        "apiVersion": r.resource.api_version,
        "kind": r.kind,
        "metadata": {"name": name, "namespace": ns, "labels": obj.labels()},
        "spec": obj.data.get("spec").cloned().unwrap_or_default(),
    }))
}

/// A Kubernetes client that can only read and dry-run, and reads `secrets` from the manifests.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    secrets: secrets::ManifestSecrets,
) -> Result<Client, PlanError> {
    let config = crate::runtime::kube_client::config_from(kubeconfig, context)
        .await
        .map_err(|e| PlanError::Kubeconfig(format!("{e:#}")))?;
    Ok(kube::client::ClientBuilder::try_from(config)
        .map_err(|e| PlanError::Kubeconfig(format!("could not make a Kubernetes client: {e}")))?
        .with_layer(&ReadOnlyKube)
        .with_layer(&secrets)
        .build())
}

/// The layer that keeps the Kubernetes client of a plan to reads and dry-runs.
#[derive(Clone, Copy, Debug)]
pub struct ReadOnlyKube;

impl<S> tower::Layer<S> for ReadOnlyKube {
    type Service = ReadOnlyService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ReadOnlyService(inner)
    }
}

/// The plan's Kubernetes client stack: lets reads and dry runs through and refuses every other
/// request before it is sent.
#[derive(Clone, Debug)]
pub struct ReadOnlyService<S>(S);

/// Whether a Kubernetes API request only reads or is a dry run.
pub fn kube_request_allowed(method: &str, query: &str) -> bool {
    matches!(method, "GET" | "HEAD") || query.split('&').any(|kv| kv == "dryRun=All")
}

impl<S, B> tower::Service<http::Request<B>> for ReadOnlyService<S>
where
    S: tower::Service<http::Request<B>>,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.method().as_str().to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        if !kube_request_allowed(&method, &query) {
            let err = PlanError::KubeWrite {
                verb: method,
                path: req.uri().path().to_string(),
            };
            return Box::pin(async move { Err(Box::new(err) as tower::BoxError) });
        }
        let fut = self.0.call(req);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

/// The read-only key of the keyed hashes: the operator's `quartet-hash-key` Secret, read (never
/// created). Without it no hash can match, so every write-only input shows as would be sent.
async fn hash_key(client: &Client, namespace: &str) -> Result<SecretString, PlanError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let key = api
        .get_opt("quartet-hash-key")
        .await?
        .and_then(|s| s.data)
        .and_then(|d| {
            d.get("key")
                .map(|b| String::from_utf8_lossy(&b.0).to_string())
        });
    Ok(SecretString::new(key.unwrap_or_else(|| {
        // A key nobody has: nothing recorded can match it.
        hex::encode(rand::random::<[u8; 32]>())
    })))
}

/// One service reached directly (`--address`), without a cluster.
pub struct Direct {
    /// The service's base URL.
    pub address: String,
    /// The token to read with (from `QUARTET_TOKEN`).
    pub token: SecretString,
    /// The header the token goes in; `None`: the service's usual one.
    pub header: Option<String>,
}

/// What every resource's plan shares.
struct Env {
    client: Client,
    ctx: Context,
    default_ns: String,
    connection: Option<(String, String)>,
    direct: Option<Direct>,
    /// Namespaces the manifests create (absent from the cluster): a dry run in them cannot be
    /// made, so their resources are planned from the manifests as they are.
    new_namespaces: BTreeSet<String>,
}

impl Env {
    /// The read-only client of the service `obj` uses: its Connection's, or the direct one.
    async fn http<K: Managed>(&self, obj: &K) -> crate::reconcile::Result<Arc<Http>> {
        let Some(d) = &self.direct else {
            let ns = obj.namespace().unwrap_or_default();
            let conn =
                self.ctx
                    .connection_for(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE)?;
            if conn.spec.token_secret_ref.is_none() && conn.spec.auth.is_some() {
                // A login is a write (it creates a token) and may page a person with an MFA
                // push: a plan never logs in.
                return Err(crate::reconcile::Error::Connection(format!(
                    "Connection {}/{} logs in (spec.auth), and a plan never logs in: a login \
                     creates a token and may send an MFA push to a person. Plan with \
                     --connection NAMESPACE/NAME naming a Connection with a tokenSecretRef, or \
                     with --address and QUARTET_TOKEN",
                    conn.namespace().unwrap_or_default(),
                    conn.name_any()
                )));
            }
            return self
                .ctx
                .http_for(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE)
                .await;
        };
        let service = K::SERVICE;
        let header = |default: &str| d.header.clone().unwrap_or_else(|| default.to_string());
        let auth = match service {
            Service::Workspaces => Auth::Bearer(d.token.clone()),
            Service::Secrets => Auth::Header(header("X-Secrets-Token"), d.token.clone()),
            Service::Catalog => Auth::Header(header("X-Catalog-Token"), d.token.clone()),
            Service::Scheduler => Auth::Header(header("X-Scheduler-Token"), d.token.clone()),
        };
        let cfg = HttpConfig {
            service,
            connection: String::new(),
            base_url: d.address.clone(),
            auth,
            timeout: std::time::Duration::from_secs(10),
            requests_per_second: 50,
            ca_pem: None,
            extra_headers: Vec::new(),
            max_retries: 1,
            read_only: true,
        };
        Http::new(cfg, self.ctx.metrics.clone())
            .map(Arc::new)
            .map_err(crate::reconcile::Error::Remote)
    }
}

/// Plan `docs` against the cluster of `client`.
pub async fn plan(
    client: Client,
    docs: Vec<Value>,
    default_ns: &str,
    operator_ns: &str,
    prune_selector: Option<&str>,
    connection: Option<(String, String)>,
    direct: Option<Direct>,
) -> Result<Plan, PlanError> {
    let key = match direct {
        Some(_) => SecretString::new(hex::encode(rand::random::<[u8; 32]>())),
        None => hash_key(&client, operator_ns).await?,
    };
    let settings = Settings {
        hash_key: key,
        max_retries: 1,
        read_only: true,
        operator_namespace: operator_ns.to_string(),
        ..Settings::default()
    };
    // The Connections the resources resolve: the cluster's, overridden by those in the
    // manifests (a new Connection planned with the resources that use it).
    let (store, mut writer) = reflector::store::<Connection>();
    if let Some(d) = &direct {
        // The Connection each resource resolves (named after its service, in its namespace),
        // for what kinds read from it; the calls go to the direct client.
        let namespaces: BTreeSet<String> =
            docs.iter().map(|d| namespace_of(d, default_ns)).collect();
        for ns in namespaces {
            for service in ["secrets", "workspaces", "catalog", "scheduler"] {
                let c = serde_json::json!({
                    "apiVersion": "quartet.dev/v1alpha1", "kind": "Connection",
                    "metadata": {"name": service, "namespace": ns},
                    "spec": {"service": service, "address": d.address},
                });
                if let Ok(c) = serde_json::from_value::<Connection>(c) {
                    writer.apply_watcher_event(&watcher::Event::Apply(c));
                }
            }
        }
    }
    let listed = match direct {
        Some(_) => Vec::new(),
        None => match Api::<Connection>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(l) => l.items,
            Err(_) => {
                let mut items = Vec::new();
                let namespaces: BTreeSet<String> =
                    docs.iter().map(|d| namespace_of(d, default_ns)).collect();
                for ns in namespaces {
                    if let Ok(l) = Api::<Connection>::namespaced(client.clone(), &ns)
                        .list(&ListParams::default())
                        .await
                    {
                        items.extend(l.items);
                    }
                }
                items
            }
        },
    };
    for c in listed {
        writer.apply_watcher_event(&watcher::Event::Apply(c));
    }
    for d in &docs {
        if kind_of(d) == Some(("quartet.dev", "Connection")) {
            let mut d = d.clone();
            set_namespace(&mut d, default_ns);
            if let Ok(c) = serde_json::from_value::<Connection>(d) {
                writer.apply_watcher_event(&watcher::Event::Apply(c));
            }
        }
    }
    let tenancy = cluster::tenancy(&client, &docs, operator_ns, direct.is_some()).await;
    let ctx = Context::new(
        client.clone(),
        settings,
        Arc::new(Metrics::default()),
        store,
    )
    .with_tenancy(tenancy);
    let new_namespaces = new_namespaces(&client, &docs, direct.is_some()).await;
    if direct.is_some() {
        one_service(&docs)?;
    }
    let env = Env {
        client: client.clone(),
        ctx,
        default_ns: default_ns.to_string(),
        connection,
        direct,
        new_namespaces,
    };
    let registry = crate::runtime::controllers::registry();
    let mut entries = Vec::new();
    let mut planned = BTreeSet::new();
    for d in docs {
        let Some((group, kind)) = kind_of(&d) else {
            continue;
        };
        if !registry.iter().any(|r| r.group == group && r.kind == kind) {
            continue;
        }
        let kind = kind.to_string();
        let mut d = d;
        if kind == "ClusterConnection" {
            // Cluster-scoped: no namespace (and none to prune by).
            if let Some(m) = d.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("namespace");
            }
            planned.insert((kind.clone(), String::new(), name_of(&d)));
            entries.push(plan_doc(&env, &kind, d).await);
            continue;
        }
        set_namespace(&mut d, &env.default_ns);
        planned.insert((kind.clone(), namespace_of(&d, &env.default_ns), name_of(&d)));
        entries.push(plan_doc(&env, &kind, d).await);
    }
    if let Some(selector) = prune_selector {
        for r in &registry {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &r.resource);
            let list = match api.list(&ListParams::default().labels(selector)).await {
                Ok(list) => list,
                // A kind the cluster does not serve has nothing to prune.
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                // A mistyped selector must fail the plan, not hide the deletions it meant.
                Err(kube::Error::Api(e)) if e.code == 400 => {
                    return Err(PlanError::PruneSelector {
                        selector: selector.to_string(),
                        message: e.message,
                    })
                }
                Err(e) => return Err(e.into()),
            };
            for o in list.items {
                let key = (
                    r.kind.clone(),
                    o.namespace().unwrap_or_default(),
                    o.name_any(),
                );
                if planned.contains(&key) {
                    continue;
                }
                entries.push(deletion(&r.kind, &o));
            }
        }
    }
    Ok(Plan::new(entries))
}

/// The Namespaces of `docs` that the cluster does not have yet (none without a cluster).
async fn new_namespaces(client: &Client, docs: &[Value], direct: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if direct {
        return out;
    }
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for d in docs {
        if kind_of(d) != Some(("", "Namespace")) {
            continue;
        }
        let name = name_of(d);
        if matches!(api.get_opt(&name).await, Ok(None)) {
            out.insert(name);
        }
    }
    out
}

/// With `--address` (one service), every resource planned must be of one service: a kind of
/// another would be read from the wrong service and planned as a create.
fn one_service(docs: &[Value]) -> Result<(), PlanError> {
    let mut by_service: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
    for d in docs {
        let Some((_, kind)) = kind_of(d) else {
            continue;
        };
        if let Some(service) = service_of(kind) {
            by_service
                .entry(service.as_str())
                .or_default()
                .insert(kind.to_string());
        }
    }
    if by_service.len() <= 1 {
        return Ok(());
    }
    let listed: Vec<String> = by_service
        .iter()
        .map(|(s, kinds)| {
            format!(
                "{s} ({})",
                kinds.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    Err(PlanError::MixedServices(listed.join("; ")))
}

/// The service a Quartet kind's resources are reconciled against (`None`: not such a kind).
fn service_of(kind: &str) -> Option<crate::api::Service> {
    macro_rules! kinds {
        ($($k:ty),*) => {
            $( if kind == <$k as Resource>::kind(&()) { return Some(<$k as Managed>::SERVICE); } )*
        };
    }
    kinds!(
        SecretsPolicy,
        AdEngine,
        AdRole,
        AdLibrarySet,
        TransformRole,
        Transformation,
        TransformTemplate,
        TransformAlphabet,
        TransformStore,
        TotpMethod,
        IdpUser,
        IdpGroup,
        IdpAuthMethod,
        Workspace,
        CatalogAclBootstrap,
        CatalogAclToken,
        DeploymentGate,
        NoCodeModule,
        NoCodeWorkspace,
        AdCheckout,
        DrReplication,
        TotpEnrollment,
        WorkspaceRun
    );
    None
}

fn kind_of(d: &Value) -> Option<(&str, &str)> {
    let api_version = d.get("apiVersion")?.as_str()?;
    let group = api_version.split_once('/').map(|(g, _)| g).unwrap_or("");
    Some((group, d.get("kind")?.as_str()?))
}

fn namespace_of(d: &Value, default_ns: &str) -> String {
    d.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(default_ns)
        .to_string()
}

fn name_of(d: &Value) -> String {
    d.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn set_namespace(d: &mut Value, default_ns: &str) {
    let ns = namespace_of(d, default_ns);
    if let Some(m) = d.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("namespace".into(), Value::String(ns));
    }
}

/// Dispatch on the kind: owned kinds through their `Reconciled` rules, operated kinds through
/// their spec and status, Connections by their spec alone.
async fn plan_doc(env: &Env, kind: &str, d: Value) -> Entry {
    macro_rules! kinds {
        (owned: $($o:ty),* ; operated: $($p:ty),*) => {
            $( if kind == <$o as Resource>::kind(&()) { return owned::<$o>(env, d).await; } )*
            $( if kind == <$p as Resource>::kind(&()) { return operated::<$p>(env, d).await; } )*
        };
    }
    kinds!(
        owned: SecretsPolicy, AdEngine, AdRole, AdLibrarySet, TransformRole, Transformation,
            TransformTemplate, TransformAlphabet, TransformStore, TotpMethod, IdpUser, IdpGroup,
            IdpAuthMethod, Workspace;
        operated: CatalogAclBootstrap, CatalogAclToken, DeploymentGate, NoCodeModule,
            NoCodeWorkspace, AdCheckout, DrReplication, TotpEnrollment, WorkspaceRun
    );
    if kind == "ClusterConnection" {
        return cluster::entry(env, d).await;
    }
    connection(env, d).await
}

/// The object the cluster would store for manifest `d` (server-side dry-run apply), with the
/// live object when there is one; `Err` is the entry saying why it is blocked.
async fn dry_run<K>(env: &Env, mut d: Value) -> Result<(K, Option<K>), Box<Entry>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let kind = K::kind(&()).to_string();
    let ns = namespace_of(&d, &env.default_ns);
    let name = name_of(&d);
    if let Some(o) = d.as_object_mut() {
        o.remove("status");
    }
    if let Some((cns, cname)) = &env.connection {
        if K::kind(&()) != "Connection" {
            if let Some(spec) = d.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert(
                    "connectionRef".into(),
                    serde_json::json!({"name": cname, "namespace": cns}),
                );
            }
        }
    }
    // No cluster, or a namespace the manifests create (no dry run can be made in it before it
    // exists): the manifest as the typed object (serde defaults only), never a live one.
    let new_namespace = env.new_namespaces.contains(&ns);
    if env.direct.is_some() || new_namespace {
        if env.direct.is_some() {
            if let Some(spec) = d.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("connectionRef");
            }
        }
        return serde_json::from_value::<K>(d)
            .map(|o| (o, None))
            .map_err(|e| {
                Box::new(Entry::blocked(
                    &kind,
                    &ns,
                    &name,
                    format!("not a valid {kind}: {e}"),
                ))
            });
    }
    let api: Api<K> = Api::namespaced(env.client.clone(), &ns);
    let live = match api.get_opt(&name).await {
        Ok(l) => l,
        Err(e) => {
            return Err(Box::new(Entry::blocked(
                &kind,
                &ns,
                &name,
                kube_message(&e),
            )))
        }
    };
    let applied = api
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force().dry_run(),
            &Patch::Apply(&d),
        )
        .await;
    match applied {
        Ok(obj) => Ok((obj, live)),
        Err(e) => Err(Box::new(Entry::blocked(
            &kind,
            &ns,
            &name,
            format!("the API server would refuse it: {}", kube_message(&e)),
        ))),
    }
}

fn kube_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// The write a read-only client refused (`VERB PATH`): to a service, or to Kubernetes (a
/// Secret the kind writes while it observes, such as an AdRole's credentials).
fn refused_write(e: &crate::reconcile::Error) -> Option<String> {
    match e {
        crate::reconcile::Error::Remote(crate::clients::ClientError::ReadOnly { verb, path }) => {
            Some(format!("{verb} {path}"))
        }
        crate::reconcile::Error::Kube(kube::Error::Service(b)) => match b.downcast_ref() {
            Some(PlanError::KubeWrite { verb, path }) => Some(format!("{verb} {path}")),
            _ => None,
        },
        _ => None,
    }
}

/// A resource suspended as it would be applied (`spec.suspend: true`): its reconciles make no
/// call to the service, so neither does its plan, which says so.
fn suspended<K: Managed>(obj: &K) -> Option<Entry> {
    if !Intent::of(obj, None).suspend {
        return None;
    }
    let kind = K::kind(&()).to_string();
    let mut e = Entry::new(
        &kind,
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
        Outcome::NoChange,
    );
    e.remote_id = obj.managed_status().and_then(|s| s.remote_id.clone());
    e.message = Some(
        "suspended (spec.suspend: true): no call is made to the service until it is resumed".into(),
    );
    Some(e)
}

/// An owned kind: create, adopt, update field by field, or no change.
async fn owned<K: Reconciled>(env: &Env, d: Value) -> Entry {
    let (obj, _live) = match dry_run::<K>(env, d).await {
        Ok(x) => x,
        Err(e) => return *e,
    };
    if let Some(e) = suspended(&obj) {
        return e;
    }
    let kind = K::kind(&()).to_string();
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let ctx = &env.ctx;
    let status = obj.managed_status().cloned().unwrap_or_default();
    // Under `driftPolicy: Report`, drift at the applied spec is reported, never written back.
    let report_drift = Intent::of(&obj, None).report_drift
        && crate::reconcile::driver::unchanged_spec(&obj, &status);
    let http = match env.http(&obj).await {
        Ok(h) => h,
        Err(e) => return Entry::blocked(&kind, &ns, &name, e.to_string()),
    };
    let client = K::Client::from(http);
    let desired = match obj.desired(ctx).await {
        Ok(d) => d,
        Err(e) => return Entry::blocked(&kind, &ns, &name, e.to_string()),
    };
    let hash = K::write_only_hash(&desired, ctx);
    // One-shot requests (an AdEngine's rotateRootRequest, an AdRole's rotateRequest) not yet
    // handled: what the apply would trigger, whatever the observe below says.
    let one_shot = {
        let v = serde_json::to_value(&obj).unwrap_or_default();
        requests(
            v.get("spec").unwrap_or(&Value::Null),
            v.get("status").unwrap_or(&Value::Null),
        )
    };
    let observed = match obj
        .observe(&client, &desired, status.remote_id.as_deref())
        .await
    {
        Ok(o) => o,
        // The kind's observe writes on its own at times (a rotation that is due): that is what
        // the apply would trigger, refused here before it was sent.
        Err(err) => {
            let Some(write) = refused_write(&err) else {
                return Entry::blocked(&kind, &ns, &name, err.to_string());
            };
            let mut e = Entry::new(&kind, &ns, &name, Outcome::Update);
            e.remote_id = status.remote_id.clone();
            e.triggers.extend(one_shot);
            e.triggers
                .push(format!("{write} (the kind's own step when it observes)"));
            flag(&kind, &obj, &mut e);
            return e;
        }
    };
    let sensitive = |recorded: Option<&String>| {
        hash.as_ref().map(|h| Change {
            field: "write-only fields".into(),
            sensitive: Some(if Some(h) == recorded {
                "unchanged"
            } else {
                "would be sent"
            }),
            ..Default::default()
        })
    };
    let mut entry = Entry::new(&kind, &ns, &name, Outcome::NoChange);
    entry.triggers = one_shot;
    let Some(observed) = observed else {
        if let (Some(id), true) = (&status.remote_id, report_drift) {
            entry.remote_id = Some(id.clone());
            entry.message = Some(format!(
                "{id} was deleted outside Quartet: left as it is and reported (driftPolicy: Report)"
            ));
            if !entry.triggers.is_empty() {
                entry.outcome = Outcome::Update;
            }
            flag(&kind, &obj, &mut entry);
            return entry;
        }
        entry.outcome = Outcome::Create;
        if let Some(id) = &status.remote_id {
            entry.message = Some(format!("{id} was deleted outside Quartet: recreated"));
        }
        entry.changes.extend(sensitive(None));
        flag(&kind, &obj, &mut entry);
        return entry;
    };
    entry.remote_id = Some(K::remote_id(&observed));
    let adopted = status.remote_id.is_none();
    for field in K::diff(&desired, &observed) {
        let (old, new) = match K::shown(&desired, &observed, field) {
            Some((o, n)) => (Some(o), Some(n)),
            None => (None, None),
        };
        entry.changes.push(Change {
            field: field.into(),
            old,
            new,
            sensitive: None,
        });
    }
    if report_drift && !adopted && !entry.changes.is_empty() {
        // Left as they are, as the reconcile leaves them; a Secret's new value waits with them
        // (the kind's update could write the drifted fields too).
        let fields: Vec<String> = entry.changes.drain(..).map(|c| c.field).collect();
        entry.message = Some(format!(
            "drifted in the service: {}; left as it is and reported (driftPolicy: Report)",
            fields.join(", ")
        ));
        if !entry.triggers.is_empty() {
            entry.outcome = Outcome::Update;
        }
        flag(&kind, &obj, &mut entry);
        return entry;
    }
    let secret = sensitive(status.write_only_hash.as_ref());
    let secret_changed = secret
        .as_ref()
        .is_some_and(|c| c.sensitive == Some("would be sent"));
    entry.changes.extend(secret);
    entry.outcome = if adopted {
        Outcome::Adopt
    } else if entry.changes.iter().any(|c| c.sensitive.is_none())
        || secret_changed
        || !entry.triggers.is_empty()
    {
        Outcome::Update
    } else {
        Outcome::NoChange
    };
    flag(&kind, &obj, &mut entry);
    entry
}

/// An operated kind: what applying it would start or trigger.
async fn operated<K: Operated>(env: &Env, d: Value) -> Entry {
    let (obj, live) = match dry_run::<K>(env, d).await {
        Ok(x) => x,
        Err(e) => return *e,
    };
    if let Some(e) = suspended(&obj) {
        return e;
    }
    let kind = K::kind(&()).to_string();
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    if obj.holds_remote() {
        if let Err(e) = env.http(&obj).await {
            return Entry::blocked(&kind, &ns, &name, e.to_string());
        }
    }
    let mut entry = spec_entry(&kind, &obj, live.as_ref());
    entry.remote_id = obj.managed_status().and_then(|s| s.remote_id.clone());
    let value = serde_json::to_value(&obj).unwrap_or_default();
    let spec = value.get("spec").cloned().unwrap_or_default();
    let status = value.get("status").cloned().unwrap_or_default();
    if live.is_none() {
        entry
            .triggers
            .push(format!("would start the {kind}'s operation"));
    }
    entry.triggers.extend(requests(&spec, &status));
    let controlled = controls(&kind, &entry, &spec, &status);
    entry.triggers.extend(controlled);
    if entry.outcome == Outcome::NoChange && !entry.triggers.is_empty() {
        entry.outcome = Outcome::Update;
    }
    flag(&kind, &obj, &mut entry);
    entry
}

/// A Connection: no remote object, only its spec.
async fn connection(env: &Env, d: Value) -> Entry {
    match dry_run::<Connection>(env, d).await {
        Ok((obj, live)) => spec_entry("Connection", &obj, live.as_ref()),
        Err(e) => *e,
    }
}

/// Create when `live` is absent, else the top-level spec fields that would change.
fn spec_entry<K: Resource + Serialize + ResourceExt>(
    kind: &str,
    obj: &K,
    live: Option<&K>,
) -> Entry {
    let ns = obj.namespace().unwrap_or_default();
    let mut entry = Entry::new(kind, &ns, &obj.name_any(), Outcome::Create);
    let Some(live) = live else {
        return entry;
    };
    let spec = |o: &K| {
        serde_json::to_value(o)
            .ok()
            .and_then(|v| v.get("spec").cloned())
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default()
    };
    let (want, have) = (spec(obj), spec(live));
    let keys: BTreeSet<&String> = want.keys().chain(have.keys()).collect();
    for k in keys {
        if want.get(k) != have.get(k) {
            entry.changes.push(Change {
                field: k.clone(),
                old: have.get(k).map(short),
                new: want.get(k).map(short),
                sensitive: None,
            });
        }
    }
    entry.outcome = if entry.changes.is_empty() {
        Outcome::NoChange
    } else {
        Outcome::Update
    };
    entry
}

fn short(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What a changed control would do: a DeploymentGate's to the job's active deployment, a
/// WorkspaceRun's to its run, a TotpEnrollment's `regenerate`, a DrReplication's `failover`.
fn controls(kind: &str, entry: &Entry, spec: &Value, status: &Value) -> Vec<String> {
    let changed =
        |f: &str| entry.outcome == Outcome::Create || entry.changes.iter().any(|c| c.field == f);
    let mut out = Vec::new();
    match kind {
        "WorkspaceRun" => {
            for (field, what) in [
                (
                    "confirm",
                    "would apply the run once it waits for confirmation",
                ),
                ("discard", "would discard the run"),
                ("cancel", "would cancel the run"),
                ("forceCancel", "would force-cancel the run"),
            ] {
                if changed(field) && spec.get(field) == Some(&Value::Bool(true)) {
                    out.push(format!("{field}: {what}"));
                }
            }
            return out;
        }
        "TotpEnrollment" => {
            let want = spec.get("regenerate").filter(|v| !v.is_null());
            if want.is_some() && want != status.get("handledRegenerate") {
                out.push(
                    "regenerate: would replace the TOTP key: codes of the old one stop working"
                        .into(),
                );
            }
            return out;
        }
        "DrReplication" => {
            if let Some(f) = spec.get("failover").filter(|v| !v.is_null()) {
                if changed("failover") {
                    out.push(format!(
                        "failover: would make {} the primary{}",
                        f.get("promote").map(short).unwrap_or_default(),
                        if f.get("force") == Some(&Value::Bool(true)) {
                            " (forced, while the old primary may still answer)"
                        } else {
                            ""
                        }
                    ));
                }
            }
            return out;
        }
        "DeploymentGate" => {}
        _ => return out,
    }
    if changed("paused") {
        out.push(
            if spec.get("paused") == Some(&Value::Bool(true)) {
                "paused: would pause the job's active deployment"
            } else if entry.outcome == Outcome::Create {
                return out;
            } else {
                "paused: would resume the job's active deployment"
            }
            .to_string(),
        );
    }
    if entry.outcome != Outcome::Create && changed("promote") {
        let policy = spec
            .pointer("/promote/policy")
            .and_then(Value::as_str)
            .unwrap_or("Auto");
        out.push(format!(
            "promote: canaries would be promoted {}",
            if policy == "Manual" {
                "only by a person (Manual)"
            } else {
                "once healthy (Auto)"
            }
        ));
    }
    out
}

/// The `...Request` fields of `spec` (anywhere in it) whose value no `handled...Request` of
/// `status` records: the one-shot operations an apply would trigger.
fn requests(spec: &Value, status: &Value) -> Vec<String> {
    let mut handled = Vec::new();
    walk(status, "", &mut |key, _path, v| {
        if key.starts_with("handled") && key.ends_with("Request") {
            handled.push(v.clone());
        }
    });
    let mut out = Vec::new();
    walk(spec, "spec", &mut |key, path, v| {
        if key.ends_with("Request") && !v.is_null() && !handled.contains(v) {
            out.push(format!("{path} = {}", short(v)));
        }
    });
    out
}

fn walk(v: &Value, path: &str, f: &mut dyn FnMut(&str, &str, &Value)) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}.{k}");
                f(k, &p, x);
                walk(x, &p, f);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk(x, &format!("{path}[{i}]"), f);
            }
        }
        _ => {}
    }
}

/// Destructive effects of applying `obj` (as a create, update or one-shot request).
fn flag<K: Serialize>(kind: &str, obj: &K, entry: &mut Entry) {
    let v = serde_json::to_value(obj).unwrap_or_default();
    let spec = v.get("spec").cloned().unwrap_or_default();
    if kind == "DrReplication" && spec.get("allowSecondaryWipe") == Some(&Value::Bool(true)) {
        entry.destructive.push(
            "allowSecondaryWipe: a secondary's own data may be wiped when it is made a secondary"
                .into(),
        );
    }
    if entry
        .triggers
        .iter()
        .any(|t| t.contains("rotateRootRequest"))
        || (kind == "AdEngine"
            && entry
                .changes
                .iter()
                .any(|c| c.field.to_lowercase().contains("rotateroot")))
    {
        entry.destructive.push(
            "root rotation: the root credential changes and the old one stops working".into(),
        );
    }
}

/// A resource in the cluster, matching the prune selector, absent from the manifests.
fn deletion(kind: &str, o: &DynamicObject) -> Entry {
    let mut e = Entry::new(
        kind,
        &o.namespace().unwrap_or_default(),
        &o.name_any(),
        Outcome::Delete,
    );
    let spec = o.data.get("spec").cloned().unwrap_or_default();
    let policy = spec
        .get("deletionPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Delete")
        .to_string();
    e.remote_id = o
        .data
        .pointer("/status/remoteId")
        .and_then(Value::as_str)
        .map(str::to_string);
    if policy == "Delete" {
        match kind {
            "Workspace" | "NoCodeWorkspace"
                if spec.get("deletionMode").and_then(Value::as_str) == Some("Force") =>
            {
                e.destructive.push(
                    "workspace force-delete: deleted with its state, even with resources under management"
                        .into(),
                )
            }
            "Transformation" => e.destructive.push(
                "transformation key deletion: values it encoded can no longer be decoded".into(),
            ),
            _ => {}
        }
    } else {
        e.message = Some("the remote object is kept (deletionPolicy Retain)".into());
    }
    e.deletion_policy = Some(policy);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_and_dry_runs_reach_the_api_server() {
        assert!(kube_request_allowed("GET", "labelSelector=a%3Db"));
        assert!(kube_request_allowed(
            "PATCH",
            "fieldManager=quartet-plan&dryRun=All"
        ));
        assert!(!kube_request_allowed("PATCH", "fieldManager=quartet-plan"));
        assert!(!kube_request_allowed("POST", ""));
        assert!(!kube_request_allowed("DELETE", "dryRun=None"));
    }

    /// The layer in front of a counting service: a write without `dryRun=All` fails with the
    /// plan's sentence and never reaches the service; reads and dry runs do.
    #[tokio::test]
    async fn the_kubernetes_client_layer_refuses_writes_without_sending_them() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tower::{Layer, Service, ServiceExt};
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let inner = tower::service_fn(move |_req: http::Request<()>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, std::convert::Infallible>(http::Response::new(())) }
        });
        let mut svc = ReadOnlyKube.layer(inner);
        let req = |method: &str, uri: &str| {
            http::Request::builder()
                .method(method)
                .uri(uri)
                .body(())
                .unwrap()
        };
        let err = svc
            .ready()
            .await
            .unwrap()
            .call(req(
                "PATCH",
                "/apis/x/v1/namespaces/default/things/a?fieldManager=m",
            ))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "plan is read-only: refused PATCH /apis/x/v1/namespaces/default/things/a"
        );
        assert!(svc
            .ready()
            .await
            .unwrap()
            .call(req("POST", "/api/v1/namespaces/default/secrets"))
            .await
            .is_err());
        assert_eq!(seen.load(Ordering::SeqCst), 0);
        for (m, u) in [
            ("GET", "/api/v1/namespaces/default/secrets/s"),
            (
                "PATCH",
                "/apis/x/v1/namespaces/default/things/a?fieldManager=m&dryRun=All",
            ),
        ] {
            svc.ready().await.unwrap().call(req(m, u)).await.unwrap();
        }
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_pruned_force_workspace_and_transformation_are_flagged_destructive() {
        let obj = |kind: &str, spec: Value| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "x/v1", "kind": kind,
                "metadata": {"name": "n", "namespace": "default"},
                "spec": spec,
            }))
            .unwrap()
        };
        let ws = deletion(
            "Workspace",
            &obj("Workspace", serde_json::json!({"deletionMode": "Force"})),
        );
        assert_eq!(ws.deletion_policy.as_deref(), Some("Delete"));
        assert!(ws.destructive[0].starts_with("workspace force-delete"));
        let kept = deletion(
            "Workspace",
            &obj(
                "Workspace",
                serde_json::json!({"deletionMode": "Force", "deletionPolicy": "Retain"}),
            ),
        );
        assert!(kept.destructive.is_empty());
        let t = deletion(
            "Transformation",
            &obj("Transformation", serde_json::json!({})),
        );
        assert!(t.destructive[0].starts_with("transformation key deletion"));
    }

    #[test]
    fn a_secondary_wipe_and_a_root_rotation_are_flagged_destructive() {
        let mut e = Entry::new("DrReplication", "default", "dr", Outcome::Update);
        flag(
            "DrReplication",
            &serde_json::json!({"spec": {"allowSecondaryWipe": true}}),
            &mut e,
        );
        assert!(e.destructive[0].starts_with("allowSecondaryWipe"));
        let mut e = Entry::new("AdEngine", "default", "ad", Outcome::Update);
        e.triggers.push("spec.rotateRootRequest = 2".into());
        flag("AdEngine", &serde_json::json!({"spec": {}}), &mut e);
        assert!(e.destructive[0].starts_with("root rotation"));
    }

    #[test]
    fn changed_controls_say_what_they_would_do() {
        let mut e = Entry::new("WorkspaceRun", "default", "r", Outcome::Update);
        e.changes.push(Change {
            field: "cancel".into(),
            ..Default::default()
        });
        let spec = serde_json::json!({"cancel": true, "confirm": true});
        assert_eq!(
            controls("WorkspaceRun", &e, &spec, &Value::Null),
            vec!["cancel: would cancel the run".to_string()]
        );
        let e = Entry::new("TotpEnrollment", "default", "t", Outcome::NoChange);
        let spec = serde_json::json!({"regenerate": "2"});
        let handled = serde_json::json!({"handledRegenerate": "2"});
        assert!(controls("TotpEnrollment", &e, &spec, &handled).is_empty());
        assert_eq!(controls("TotpEnrollment", &e, &spec, &Value::Null).len(), 1);
        let mut e = Entry::new("DeploymentGate", "default", "g", Outcome::Update);
        e.changes.push(Change {
            field: "paused".into(),
            ..Default::default()
        });
        let spec = serde_json::json!({"paused": false});
        assert_eq!(
            controls("DeploymentGate", &e, &spec, &Value::Null),
            vec!["paused: would resume the job's active deployment".to_string()]
        );
    }

    #[test]
    fn requests_not_yet_handled_are_triggers() {
        let spec =
            serde_json::json!({"rotateRootRequest": "2", "secondaries": [{"reindexRequest": "a"}]});
        let status = serde_json::json!({"handledRotateRootRequest": "2"});
        assert_eq!(
            requests(&spec, &status),
            vec!["spec.secondaries[0].reindexRequest = a".to_string()]
        );
    }

    #[test]
    fn a_multi_document_file_and_a_list_are_each_document() {
        let dir = std::env::temp_dir().join(format!("quartet-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.yaml");
        std::fs::write(
            &f,
            "kind: A\n---\n---\nkind: List\nitems:\n- kind: B\n- kind: C\n",
        )
        .unwrap();
        let docs = load(std::slice::from_ref(&dir)).unwrap();
        let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
        assert_eq!(kinds, ["A", "B", "C"]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
