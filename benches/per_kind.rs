//! Per-kind benchmark at scale: service and Kubernetes calls per resource (prints figures;
//! asserts nothing).
//!
//! For each kind (env `QUARTET_BENCH_KINDS`, comma-separated, default all of SecretsPolicy,
//! IdpUser, IdpGroup, TotpEnrollment, Workspace, CatalogAclToken, AdCheckout) and each N (env
//! `QUARTET_BENCH_N`, default `1000`): start `quartet sandbox --kubeconfig` (dev API server and
//! services) and `quartet run` (resync 15 s, concurrency `QUARTET_BENCH_CONCURRENCY`, default 8),
//! set up what the kind needs (Connection, TotpMethod and N entities, AdEngine and library sets,
//! auth method), wait for that to settle, then create N resources of the kind and wait until all
//! are Ready. It prints, per resource:
//!
//! * the service calls while converging, by method and by path shape (segments holding a digit,
//!   and server-assigned ids such as `ws-` and 16 letters, are shown as `:x`), from the
//!   sandbox's request log;
//! * the service calls during one mean resync interval (16.5 s) with nothing changed (reads
//!   and writes; `PUT sys/leases/lookup` is a read);
//! * the operator's Kubernetes calls while converging, by verb and resource;
//! * then, every resource deleted at once (concurrency as for the creates), the time until
//!   all are gone and the service and Kubernetes calls per resource while deleting;
//! * the wall time and the load average (rough: the machine is shared; the call counts are the
//!   figures that matter).
//!
//! The Connections' client-side limit is raised (`QUARTET_BENCH_RPS`, default 1000) so the
//! operator rather than its limiter is measured. AdCheckouts borrow from library sets of
//! `QUARTET_BENCH_AD_SET_SIZE` accounts (default 50): a set serves one check-out at a time.
//!
//! Run: `cargo bench --bench per_kind` (release), or `cargo bench --profile dev --bench per_kind`
//! where a release build is unaffordable.

#[path = "../tests/support/mod.rs"]
mod support;

mod figures;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use figures::*;
use futures::{stream, StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::watcher;
use quartet::metrics::Metrics;
use serde_json::{json, Value};
use support::catalog::*;
use support::*;

const RESYNC_SECS: u64 = 15;
const KINDS: [&str; 7] = [
    "SecretsPolicy",
    "IdpUser",
    "IdpGroup",
    "TotpEnrollment",
    "Workspace",
    "CatalogAclToken",
    "AdCheckout",
];
const ADMIN_DN: &str = "CN=admin,CN=Users,DC=example,DC=com";
const BIND_PW: &str = "bind-pw-0123456789";

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

fn main() {
    let sizes: Vec<usize> = std::env::var("QUARTET_BENCH_N")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let kinds: Vec<String> = std::env::var("QUARTET_BENCH_KINDS")
        .map(|s| {
            s.split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect()
        })
        .unwrap_or_else(|_| KINDS.iter().map(|k| k.to_string()).collect());
    for k in &kinds {
        assert!(
            KINDS.contains(&k.as_str()),
            "unknown kind {k:?}: one of {KINDS:?}"
        );
    }
    if std::env::var_os("QUARTET_OPERATOR_LOG").is_none() {
        std::env::set_var("QUARTET_OPERATOR_LOG", "info");
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    println!(
        "Per-kind convergence: `quartet sandbox` (dev API server + services), concurrency {}, resync {RESYNC_SECS}s, build profile {}",
        env_num("QUARTET_BENCH_CONCURRENCY", 8),
        if cfg!(debug_assertions) { "debug" } else { "release" },
    );
    for n in sizes {
        for kind in &kinds {
            rt.block_on(run(kind, n));
        }
    }
}

fn total(m: &BTreeMap<String, usize>) -> usize {
    m.values().sum()
}

/// A path with every segment that holds a digit (names with an index, ids) shown as `:x`, and
/// the query dropped: calls of the same shape count together.
fn shape(path: &str) -> String {
    path.split('?')
        .next()
        .unwrap_or("")
        .split('/')
        .map(|s| {
            // A server-assigned id (`ws-` and 16 letters may hold no digit) is one too.
            let assigned_id = s.split_once('-').is_some_and(|(p, id)| {
                p.len() <= 4 && id.len() >= 16 && id.chars().all(|c| c.is_ascii_alphanumeric())
            });
            if (s.chars().any(|c| c.is_ascii_digit()) && !s.starts_with('v')) || assigned_id {
                ":x"
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The calls the sandbox logged for the kind's services since the cursors: by method, and by
/// method and path shape. The sandbox's own admin API (`/_sandbox/`) is left out.
struct Calls {
    by_method: BTreeMap<String, usize>,
    by_shape: BTreeMap<String, usize>,
    writes: usize,
}

fn service_calls(sb: &Sandbox, services: &[&str], cursors: &[u64]) -> Calls {
    let mut c = Calls {
        by_method: BTreeMap::new(),
        by_shape: BTreeMap::new(),
        writes: 0,
    };
    for (service, cursor) in services.iter().zip(cursors) {
        let (reqs, _) = sb.requests(service, *cursor);
        for (method, path, _) in reqs {
            if path.starts_with("/_sandbox") {
                continue;
            }
            c.writes += usize::from(is_write(&method, &path));
            *c.by_method.entry(method.clone()).or_insert(0) += 1;
            *c.by_shape
                .entry(format!("{method} {}", shape(&path)))
                .or_insert(0) += 1;
        }
    }
    c
}

fn cursors(sb: &Sandbox, services: &[&str]) -> Vec<u64> {
    services.iter().map(|s| sb.requests(s, 0).1).collect()
}

/// Whether a call changes the service: not a read verb, nor a lookup sent with PUT
/// (`sys/leases/lookup`).
fn is_write(method: &str, path: &str) -> bool {
    !matches!(method, "GET" | "LIST" | "HEAD") && !path.ends_with("/sys/leases/lookup")
}

fn is_ready(o: &DynamicObject) -> bool {
    o.data["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn wait_ready(sb: &Sandbox, resource: &str, name: &str) {
    wait_for(
        &format!("{resource}/{name} Ready"),
        Duration::from_secs(180),
        || {
            sb.get_json(resource, name)
                .filter(|o| condition_is(o, "Ready", "True"))
        },
    );
}

fn connection(sb: &Sandbox, service: &str, extra: &str) {
    sb.apply_ok(&format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: {service}, namespace: default}}\n\
         spec: {{service: {service}, address: \"{}\", tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 10, requestsPerSecond: {}{extra}}}\n",
        sb.url(service),
        env_num("QUARTET_BENCH_RPS", 1000),
    ));
}

/// What a kind needs before its resources: returns (API group, plural, services whose calls
/// count) and sets the service up.
fn setup(sb: &Sandbox, kind: &str, n: usize) -> (&'static str, &'static str, Vec<&'static str>) {
    // Every kind's Connection reads its token from `secrets-token` (the root token).
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: secrets-token, namespace: default}}\nstringData: {{token: {}}}\n",
        sb.root_token
    ));
    match kind {
        "SecretsPolicy" | "IdpUser" | "IdpGroup" => {
            connection(sb, "secrets", "");
            let plural = match kind {
                "SecretsPolicy" => "secretspolicies",
                "IdpUser" => "idpusers",
                _ => "idpgroups",
            };
            ("secrets.quartet.dev", plural, vec!["secrets"])
        }
        "TotpEnrollment" => {
            connection(sb, "secrets", "");
            sb.apply_ok(
                "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpMethod\nmetadata: {name: m, namespace: default}\nspec: {issuer: Bench}\n",
            );
            wait_ready(sb, "totpmethod", "m");
            for i in 0..n {
                let (s, b) = sb.secrets(
                    "POST",
                    "/v1/identity/entity",
                    Some(json!({"name": format!("ent-{i}")})),
                );
                assert!(s < 300, "entity: {b}");
            }
            ("secrets.quartet.dev", "totpenrollments", vec!["secrets"])
        }
        "Workspace" => {
            sb.apply_ok(&format!(
                "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: workspaces, namespace: default}}\n\
                 spec: {{service: workspaces, address: \"{}\", organization: quartet, tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 10, requestsPerSecond: {}}}\n",
                sb.url("workspaces"),
                env_num("QUARTET_BENCH_RPS", 1000),
            ));
            ("workspaces.quartet.dev", "workspaces", vec!["workspaces"])
        }
        "CatalogAclToken" => {
            connection(sb, "catalog", "");
            // The Connection's (root) token may list tokens (`acl:read`): the search for
            // tokens a lost login left is made, as with a real catalog's management token.
            logins_on_root_token(sb);
            // One ServiceAccount token for all: the calls per resource are the same.
            sb.apply_ok(&format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: app-jwt, namespace: default}}\nstringData: {{token: {}}}\n",
                sa_jwt("default", "app")
            ));
            ("catalog.quartet.dev", "catalogacltokens", vec!["catalog"])
        }
        "AdCheckout" => {
            connection(sb, "secrets", "");
            let admin = |path: &str, body: Value| {
                let (s, b) = http(
                    "PUT",
                    &format!("{}/_sandbox/secrets/ad/{path}", sb.url("secrets")),
                    None,
                    Some(body),
                );
                assert_eq!(s, 204, "{b}");
            };
            admin(
                "accounts/admin@example.com",
                json!({"dn": ADMIN_DN, "password": BIND_PW}),
            );
            for i in 0..n {
                admin(
                    &format!("accounts/lib{i}@example.com"),
                    json!({"dn": format!("CN=lib{i},OU=Svc,DC=example,DC=com"), "password": "initial-pw"}),
                );
            }
            sb.apply_ok(&format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: bind, namespace: default}}\nstringData: {{password: {BIND_PW}}}\n---\n\
                 apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdEngine\nmetadata: {{name: ad, namespace: default}}\n\
                 spec:\n  binddn: \"{ADMIN_DN}\"\n  bindpassSecretRef: {{name: bind, key: password}}\n  userdn: DC=example,DC=com\n"
            ));
            wait_ready(sb, "adengine", "ad");
            let size = env_num("QUARTET_BENCH_AD_SET_SIZE", 50).max(1);
            let sets = n.div_ceil(size);
            let mut yaml = String::new();
            for s in 0..sets {
                let names: Vec<String> = (s * size..((s + 1) * size).min(n))
                    .map(|i| format!("lib{i}@example.com"))
                    .collect();
                yaml.push_str(&format!(
                    "---\napiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {{name: set{s}, namespace: default}}\n\
                     spec: {{serviceAccountNames: [{}], ttl: 1h, maxTtl: 24h}}\n",
                    names.join(", ")
                ));
            }
            sb.apply_ok(&yaml);
            for s in 0..sets {
                wait_ready(sb, "adlibraryset", &format!("set{s}"));
            }
            ("secrets.quartet.dev", "adcheckouts", vec!["secrets"])
        }
        other => panic!("unknown kind {other}"),
    }
}

/// Resource `i` of the kind.
fn resource(kind: &str, i: usize) -> Value {
    let name = format!("bench-{i}");
    let spec = match kind {
        "SecretsPolicy" => {
            json!({"type": "acl", "policy": format!("path \"bench/{i}/*\" {{ capabilities = [\"read\"] }}")})
        }
        "IdpUser" | "IdpGroup" => json!({"policies": [format!("p{i}")]}),
        "TotpEnrollment" => json!({"methodRef": {"name": "m"}, "entityName": format!("ent-{i}")}),
        "Workspace" => json!({"description": format!("workspace {i}")}),
        "CatalogAclToken" => {
            json!({"authMethod": "k8s", "bearerTokenSecretRef": {"name": "app-jwt", "key": "token"}})
        }
        "AdCheckout" => {
            let size = env_num("QUARTET_BENCH_AD_SET_SIZE", 50).max(1);
            json!({"setRef": {"name": format!("set{}", i / size)}})
        }
        _ => unreachable!(),
    };
    let group = match kind {
        "Workspace" => "workspaces.quartet.dev",
        "CatalogAclToken" => "catalog.quartet.dev",
        _ => "secrets.quartet.dev",
    };
    json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

async fn run(kind: &str, n: usize) {
    let concurrency = env_num("QUARTET_BENCH_CONCURRENCY", 8);
    let sb = blocking(|| {
        let sb = Sandbox::start(&[]);
        sb.install_crds();
        sb
    });
    let op = Operator::start_with(
        &sb,
        &format!("{RESYNC_SECS}s"),
        &[
            "--concurrency",
            &concurrency.to_string(),
            "--namespace",
            "default",
        ],
    );
    let setup_started = Instant::now();
    let (group, plural, services) = blocking(|| setup(&sb, kind, n));
    let metrics_addr = blocking(|| op.metrics_addr());
    let client = quartet::runtime::kube_client::client_from(
        Some(&sb.kubeconfig),
        Arc::new(Metrics::default()),
    )
    .await
    .expect("client");
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1alpha1", kind), plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    // Let the setup settle (Connection Ready, the setup's resources reconciled) before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let setup_secs = setup_started.elapsed().as_secs_f64();
    let kube_before = kube_calls(&blocking(|| scrape(&metrics_addr)));
    let cursor = blocking(|| cursors(&sb, &services));
    let load_before = load();

    let (all_ready_tx, mut all_ready) = tokio::sync::watch::channel(0usize);
    let ready = Arc::new(Mutex::new(std::collections::BTreeSet::<String>::new()));
    let readiness = {
        let (api, ready) = (api.clone(), ready.clone());
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
            while let Ok(Some(ev)) = events.try_next().await {
                let o = match ev {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => o,
                    _ => continue,
                };
                if is_ready(&o) {
                    let mut r = ready.lock().unwrap();
                    if r.insert(o.metadata.name.clone().unwrap_or_default()) {
                        let _ = all_ready_tx.send(r.len());
                    }
                }
            }
        })
    };
    let started = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let api = api.clone();
            async move {
                let obj: DynamicObject =
                    serde_json::from_value(resource(kind, i)).expect("resource");
                api.create(&PostParams::default(), &obj)
                    .await
                    .expect("create");
            }
        })
        .await;
    let timeout = env_num("QUARTET_BENCH_TIMEOUT_SECS", 900) as u64;
    let converged = tokio::time::timeout(
        Duration::from_secs(timeout),
        all_ready.wait_for(|r| *r >= n),
    )
    .await
    .is_ok();
    let wall = started.elapsed();
    let ready_count = *all_ready.borrow();
    let load_after = load();
    readiness.abort();
    let kube = delta(
        &kube_calls(&blocking(|| scrape(&metrics_addr))),
        &kube_before,
    );
    let converging = blocking(|| service_calls(&sb, &services, &cursor));

    // One mean resync interval with nothing changed: each resource's resync is jittered by up
    // to a fifth, so over this window each resyncs once on average.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resync_from = blocking(|| cursors(&sb, &services));
    tokio::time::sleep(Duration::from_secs_f64(RESYNC_SECS as f64 * 1.1)).await;
    let resync = blocking(|| service_calls(&sb, &services, &resync_from));
    let writes = resync.writes;
    let reads = total(&resync.by_method) - writes;

    // Every resource deleted at once (what a namespace's deletion or a GitOps prune does):
    // the service calls a delete makes, searches for what lost answers left included.
    let delete_from = blocking(|| cursors(&sb, &services));
    let kube_before_delete = kube_calls(&blocking(|| scrape(&metrics_addr)));
    let (gone_tx, mut gone) = tokio::sync::watch::channel(0usize);
    let deletions = {
        let api = api.clone();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
            let mut left = std::collections::BTreeSet::new();
            let mut listed = false;
            while let Ok(Some(ev)) = events.try_next().await {
                match ev {
                    watcher::Event::Init => left.clear(),
                    watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                        left.insert(o.metadata.name.clone().unwrap_or_default());
                    }
                    watcher::Event::Delete(o) => {
                        left.remove(&o.metadata.name.clone().unwrap_or_default());
                    }
                    watcher::Event::InitDone => listed = true,
                }
                if listed {
                    let _ = gone_tx.send(n.saturating_sub(left.len()));
                }
            }
        })
    };
    let delete_started = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let api = api.clone();
            async move {
                let name = format!("bench-{i}");
                api.delete(&name, &DeleteParams::default())
                    .await
                    .expect("delete");
            }
        })
        .await;
    let _ = tokio::time::timeout(Duration::from_secs(timeout), gone.wait_for(|g| *g >= n)).await;
    let delete_wall = delete_started.elapsed();
    let left = n - *gone.borrow();
    deletions.abort();
    let deleting = blocking(|| service_calls(&sb, &services, &delete_from));
    let kube_deleting = delta(
        &kube_calls(&blocking(|| scrape(&metrics_addr))),
        &kube_before_delete,
    );

    println!(
        "{kind} N={n} (load average {load_before} before, {load_after} after; setup {setup_secs:.0} s)"
    );
    if !converged {
        println!(
            "  NOT CONVERGED: {ready_count} of {n} Ready after {:.0} s",
            wall.as_secs_f64()
        );
    }
    println!(
        "  all Ready after                  {:.1} s",
        wall.as_secs_f64()
    );
    println!(
        "  service calls/resource, converging {:.2}: {}",
        total(&converging.by_method) as f64 / n as f64,
        per(&converging.by_method, n)
    );
    println!(
        "    by path:                       {}",
        per(&converging.by_shape, n)
    );
    println!(
        "  service calls/resource, one resync: reads {:.2}, writes {:.2}: {}",
        reads as f64 / n as f64,
        writes as f64 / n as f64,
        per(&resync.by_shape, n)
    );
    println!(
        "  Kubernetes calls/resource {:.2}:  {}",
        total(&kube) as f64 / n as f64,
        per(&kube, n)
    );
    if left > 0 {
        println!("  NOT DELETED: {left} of {n} still there after {timeout} s");
    }
    println!(
        "  all deleted after                {:.1} s",
        delete_wall.as_secs_f64()
    );
    println!(
        "  service calls/resource, deleting {:.2}: {}",
        total(&deleting.by_method) as f64 / n as f64,
        per(&deleting.by_shape, n)
    );
    println!(
        "  Kubernetes calls/resource deleting {:.2}:  {}",
        total(&kube_deleting) as f64 / n as f64,
        per(&kube_deleting, n)
    );
    drop(op);
    drop(sb);
}
