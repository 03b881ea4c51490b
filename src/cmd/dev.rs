//! `quartet dev`: the emulated services, the dev Kubernetes API server, and the CRDs,
//! Connections and controllers wired to them. Development only.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, ResourceExt};
use quartet_sandbox::apiserver::ApiServer;
use quartet_sandbox::Sandbox;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::run::OperatorArgs;
use super::sandbox::{print_services, sandbox_options, start_apiserver, ServiceArgs};
use crate::api::Service;
use crate::metrics::Metrics;
use crate::runtime::controllers;

/// Name of the Secret holding the sandbox tokens in `quartet dev`.
pub const TOKEN_SECRET: &str = "quartet-sandbox-tokens";
const FIELD_MANAGER: &str = "quartet-dev";

/// `quartet dev` exits this long after Ctrl-C at the latest (as `quartet run` does by default).
const DEV_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Args, Debug)]
// The arguments of `quartet dev` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct DevArgs {
    #[command(flatten)]
    pub services: ServiceArgs,
    /// Where to write the kubeconfig of the dev cluster.
    #[arg(long, default_value = "quartet-dev.kubeconfig")]
    pub kubeconfig: PathBuf,
    #[command(flatten)]
    pub operator: OperatorArgs,
}

/// Secrets clusters of `quartet dev` unless `--secrets-clusters` says: the three that
/// `examples/dr-replication.yaml` names (`secrets`, `secrets-1`, `secrets-2`), so that every
/// example works under a plain `quartet dev`.
const DEV_SECRETS_CLUSTERS: u16 = 3;

/// `quartet dev`: starts the emulated services, the dev API server with the CRDs and the
/// controllers, and runs until a signal stops them.
pub async fn dev(args: DevArgs) -> anyhow::Result<()> {
    let api = start_apiserver(&args.services).await?;
    api.write_kubeconfig(&args.kubeconfig)?;
    let metrics = Arc::new(Metrics::default());
    // One instance serving every resource, as `quartet run` without `--shard` (the dashboard's
    // shard panels read this series).
    let shard = crate::shard::Shard::default();
    metrics.shard_info(shard.label_value(), &shard.selector());
    let client =
        crate::runtime::kube_client::client_from(Some(&args.kubeconfig), metrics.clone()).await?;
    install_crds(&client).await?;
    let sandbox =
        quartet_sandbox::start(sandbox_options(&args.services, DEV_SECRETS_CLUSTERS)).await?;
    create_connections(
        &client,
        &sandbox,
        &args.services.root_token,
        &args.services.organization,
    )
    .await?;
    seed_example_module(&sandbox, &args.services.organization).await?;
    seed_example_vcs(&sandbox, &args.services.organization).await?;
    seed_example_entity(sandbox.secrets_url(), &args.services.root_token).await?;
    seed_directory(sandbox.secrets_url()).await?;
    trust_cluster_in_catalog(&sandbox, &api).await?;
    seed_demo_job(&sandbox).await?;

    let shutdown = CancellationToken::new();
    let health = Arc::new(crate::runtime::server::Health::default());
    health.set_role(crate::runtime::server::Role::Leader);
    tokio::spawn(controllers::shutdown_on_signal(
        shutdown.clone(),
        DEV_SHUTDOWN_TIMEOUT,
        || {},
    ));
    // A busy metrics port must not stop a newcomer's first run.
    let metrics_addr = match crate::runtime::server::serve(
        args.operator.metrics_addr,
        metrics.clone(),
        health.clone(),
        shutdown.clone(),
    )
    .await
    {
        Ok(a) => a.to_string(),
        Err(e) => {
            eprintln!("warning: {e}; metrics are not served (choose another --metrics-addr)");
            "(not served)".to_string()
        }
    };
    let settings = crate::cmd::run::settings(&client, &args.operator, shard).await?;

    println!("Quartet dev is running (development only: nothing here is for production)");
    println!("  {:<12} {}", "kubernetes", api.url());
    print_services(&sandbox);
    println!("  {:<12} http://{metrics_addr}/metrics", "metrics");
    println!("  {:<12} {}", "kubeconfig", args.kubeconfig.display());
    println!();
    println!(
        "Try: kubectl --kubeconfig {} apply -f examples/secrets-policy.yaml",
        args.kubeconfig.display()
    );
    println!("Quartet dev is ready");

    controllers::run(
        client,
        settings,
        Vec::new(),
        metrics,
        health,
        DEV_SHUTDOWN_TIMEOUT.mul_f64(0.6),
        shutdown,
    )
    .await?;
    sandbox.shutdown();
    drop(api);
    Ok(())
}

/// Apply every CRD (server-side) and wait until each is established.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    for crd in crate::cmd::crd::crds() {
        let name = crd.name_any();
        api.patch(&name, &pp, &Patch::Apply(&crd)).await?;
    }
    for crd in crate::cmd::crd::crds() {
        let name = crd.name_any();
        tokio::time::timeout(
            Duration::from_secs(20),
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .map_err(|_| anyhow::anyhow!("CRD {name} was not established in time"))??;
    }
    Ok(())
}

/// A Secret with the sandbox tokens and one Connection per service in `default`, named after
/// the service, so resources without `connectionRef` reach the sandbox.
async fn create_connections(
    client: &Client,
    sandbox: &Sandbox,
    root_token: &str,
    organization: &str,
) -> anyhow::Result<()> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": TOKEN_SECRET, "namespace": "default"},
        "type": "Opaque",
        "stringData": {"token": root_token}
    });
    secrets
        .patch(TOKEN_SECRET, &pp, &Patch::Apply(&secret))
        .await?;
    let connections: Api<crate::api::Connection> = Api::namespaced(client.clone(), "default");
    for (service, url) in [
        (Service::Secrets, sandbox.secrets_url()),
        (Service::Workspaces, sandbox.workspaces_url.as_str()),
        (Service::Catalog, sandbox.catalog_url.as_str()),
        (Service::Scheduler, sandbox.scheduler_url.as_str()),
    ] {
        let name = service.as_str();
        let mut conn = json!({
            "apiVersion": "quartet.dev/v1alpha1", "kind": "Connection",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "service": name,
                "address": url,
                "tokenSecretRef": {"name": TOKEN_SECRET, "key": "token"}
            }
        });
        // Workspaces resources that name no organization use the one the sandbox created.
        if service == Service::Workspaces {
            conn["spec"]["organization"] = json!(organization);
        }
        connections.patch(name, &pp, &Patch::Apply(&conn)).await?;
    }
    // More secrets clusters (--secrets-clusters N, for DR replication): `secrets-1`, ...
    for (i, url) in sandbox.secrets_urls.iter().enumerate().skip(1) {
        let name = format!("secrets-{i}");
        let conn = json!({
            "apiVersion": "quartet.dev/v1alpha1", "kind": "Connection",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "service": "secrets",
                "address": url,
                "tokenSecretRef": {"name": TOKEN_SECRET, "key": "token"}
            }
        });
        connections.patch(&name, &pp, &Patch::Apply(&conn)).await?;
    }
    if sandbox.secrets_urls.len() > 1 {
        // The unseal key shares, so a DrReplication can fail over (the operation-token
        // ceremony feeds them). A real cluster's shares are held by people, not in the cluster.
        let keys: serde_json::Value =
            reqwest::get(format!("{}/_sandbox/secrets/keys", sandbox.secrets_url()))
                .await?
                .json()
                .await?;
        let mut data = serde_json::Map::new();
        for (i, k) in keys["keys"].as_array().into_iter().flatten().enumerate() {
            data.insert(format!("share-{}", i + 1), k.clone());
        }
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": DR_KEY_SHARES, "namespace": "default"},
            "type": "Opaque",
            "stringData": data
        });
        secrets
            .patch(DR_KEY_SHARES, &pp, &Patch::Apply(&secret))
            .await?;
    }
    Ok(())
}

/// The registry module `examples/no-code.yaml` names (`mod-quartetexample`), seeded through the
/// workspace sandbox's admin API.
async fn seed_example_module(sandbox: &Sandbox, org: &str) -> anyhow::Result<()> {
    let body = json!({
        "id": "mod-quartetexample", "organization": org, "name": "network", "provider": "aws",
        "versions": [{"version": "1.0.0", "variables": [
            {"name": "region", "type": "string", "required": true}
        ]}]
    });
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/_sandbox/workspaces/registry-modules",
            sandbox.workspaces_url
        ))
        .body(body.to_string())
        .send()
        .await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "seeding the example registry module failed: {}",
        resp.status()
    );
    Ok(())
}

/// The VCS connection `examples/workspace.yaml` names (`ot-quartetexample`): a VCS-backed
/// workspace gets its configuration from the repository, so the run of
/// `examples/workspace-run.yaml` has something to plan.
async fn seed_example_vcs(sandbox: &Sandbox, org: &str) -> anyhow::Result<()> {
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/_sandbox/workspaces/oauth-tokens",
            sandbox.workspaces_url
        ))
        .body(json!({"organization": org, "id": "ot-quartetexample"}).to_string())
        .send()
        .await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "seeding the example VCS connection failed: {}",
        resp.status()
    );
    Ok(())
}

/// The identity entity `examples/totp-enrollment.yaml` enrolls (`alice`), unless it exists
/// (with `--state-dir`, a restart keeps it and its TOTP secret).
async fn seed_example_entity(secrets_url: &str, root_token: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let found = http
        .get(format!("{secrets_url}/v1/identity/entity/name/alice"))
        .header("X-Secrets-Token", root_token)
        .send()
        .await?;
    if found.status().is_success() {
        return Ok(());
    }
    let resp = http
        .post(format!("{secrets_url}/v1/identity/entity"))
        .header("X-Secrets-Token", root_token)
        .body(json!({"name": "alice"}).to_string())
        .send()
        .await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "seeding the example identity entity failed: {}",
        resp.status()
    );
    Ok(())
}

/// The directory accounts `examples/directory.yaml` names (the directory engine manages
/// accounts that already exist, as in a real directory). Existing ones are left as they are
/// (with `--state-dir`, a rotated password must survive a restart).
async fn seed_directory(secrets_url: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    for (upn, cn, ou, password) in [
        (
            "admin@example.com",
            "admin",
            "CN=Users",
            "dev-bind-password",
        ),
        (
            "app@example.com",
            "app",
            "OU=Service Accounts",
            "app-initial",
        ),
        (
            "lib1@example.com",
            "lib1",
            "OU=Service Accounts",
            "lib1-initial",
        ),
        (
            "lib2@example.com",
            "lib2",
            "OU=Service Accounts",
            "lib2-initial",
        ),
    ] {
        let url = format!("{secrets_url}/_sandbox/secrets/ad/accounts/{upn}");
        if http.get(&url).send().await?.status().is_success() {
            continue;
        }
        http.put(&url)
            .json(&serde_json::json!({"dn": format!("CN={cn},{ou},DC=example,DC=com"), "password": password}))
            .send()
            .await?
            .error_for_status()?;
    }
    Ok(())
}
/// The catalog's auth method for this cluster's ServiceAccounts (`examples/catalog-acl-token.yaml`).
pub const CATALOG_AUTH_METHOD: &str = "kubernetes";

/// A `kubernetes` auth method in the catalog that trusts the dev API server's service-account
/// tokens (what `examples/catalog-acl-token.yaml` logs in with), and a binding rule giving every
/// ServiceAccount the service identity of its name, so a login yields a usable token. A real
/// catalog asks the cluster's TokenReview API; the sandbox catalog verifies the JWT itself with
/// the key given as `Config.ValidationKey` (the API server's public signing key) and the issuer.
async fn trust_cluster_in_catalog(sandbox: &Sandbox, api: &ApiServer) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let base = format!("{}/_sandbox/catalog", sandbox.catalog_url);
    for (path, body) in [
        (
            "auth-methods",
            json!({
                "Name": CATALOG_AUTH_METHOD, "Type": "kubernetes",
                "DisplayName": "quartet dev cluster",
                "Config": {
                    "Host": api.url(),
                    "CACert": api.ca_pem(),
                    "ValidationKey": api.service_account_public_key_pem(),
                    "Issuer": api.service_account_issuer(),
                }
            }),
        ),
        (
            "binding-rules",
            json!({"AuthMethod": CATALOG_AUTH_METHOD, "BindType": "service",
                   "BindName": "${serviceaccount.name}"}),
        ),
    ] {
        let resp = http
            .post(format!("{base}/{path}"))
            .body(body.to_string())
            .send()
            .await?;
        anyhow::ensure!(
            resp.status().is_success(),
            "configuring the catalog's {CATALOG_AUTH_METHOD} auth method ({path}) failed: {}",
            resp.status()
        );
    }
    Ok(())
}

/// The scheduler job `examples/deployment-gate.yaml` drives (`web`: two allocations), registered
/// through the scheduler sandbox's admin API with its allocations reported healthy, as a real
/// cluster's clients would. Its first version has no canaries, so its deployment succeeds once
/// healthy and the example's gate is `Ready`; a later version (registered the same way) gets a
/// canary that the gate promotes. Left alone when the job exists (`--state-dir` restarts).
async fn seed_demo_job(sandbox: &Sandbox) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let base = format!("{}/_sandbox/scheduler", sandbox.scheduler_url);
    if http
        .get(format!("{base}/jobs/default/web"))
        .send()
        .await?
        .status()
        .is_success()
    {
        return Ok(());
    }
    let job = json!({"ID": "web", "TaskGroups": [{"Name": "web", "Count": 2, "Canary": 1}]});
    let resp: serde_json::Value = http
        .post(format!("{base}/jobs"))
        .body(job.to_string())
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let deployment = resp["DeploymentID"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("the demo job was registered without a deployment"))?;
    http.post(format!("{base}/deployments/{deployment}/health"))
        .body(json!({"Healthy": true}).to_string())
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

/// The Secret with the sandbox's unseal key shares in `quartet dev --secrets-clusters N`.
pub const DR_KEY_SHARES: &str = "dr-key-shares";
