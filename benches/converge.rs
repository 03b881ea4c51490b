//! Convergence benchmark (prints figures; asserts nothing about time).
//!
//! For each N (env `QUARTET_BENCH_N`, default `100,1000`): start `quartet sandbox --kubeconfig`
//! and `quartet run`, create N SecretsPolicy resources with concurrency C (env
//! `QUARTET_BENCH_CONCURRENCY`, default 8, also the operator's `--concurrency`), and report:
//! seconds until all are Ready; secrets-service calls per resource during convergence by verb
//! (from the sandbox's request log); calls per resource during one resync with nothing changed
//! (writes must be 0); Kubernetes API calls per resource by verb (the operator's own counter);
//! the operator's peak RSS; and the time of the same N policy writes sent straight to the
//! sandbox with the same concurrency, as the ratio operator/direct.
//!
//! Run: `cargo bench --bench converge` (builds the binary in release mode first).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use kube::api::{Api, ListParams, PostParams};
use quartet::api::SecretsPolicy;
use support::*;

const RESYNC_SECS: u64 = 15;

fn main() {
    let sizes: Vec<usize> = std::env::var("QUARTET_BENCH_N")
        .unwrap_or_else(|_| "100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let concurrency: usize = std::env::var("QUARTET_BENCH_CONCURRENCY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    println!("SecretsPolicy convergence against `quartet sandbox` (dev API server + secrets service), concurrency {concurrency}, resync {RESYNC_SECS}s");
    for n in sizes {
        rt.block_on(run(n, concurrency));
    }
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn metric_values(text: &str, name: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with(name)) {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        out.insert(labels.to_string(), value.parse().unwrap_or(0.0));
    }
    out
}

fn scrape(addr: &str) -> String {
    reqwest::blocking::get(format!("http://{addr}/metrics"))
        .and_then(|r| r.text())
        .unwrap_or_default()
}

fn by_verb(
    reqs: &[(String, String, u16)],
    filter: impl Fn(&str) -> bool,
) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (method, path, _) in reqs.iter().filter(|(_, p, _)| filter(p)) {
        let _ = path;
        *m.entry(method.clone()).or_insert(0) += 1;
    }
    m
}

fn per(m: &BTreeMap<String, usize>, n: usize) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {:.2}", *v as f64 / n as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// CPU seconds (user + system) a process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// The floor: a plain client doing, per resource, exactly the calls the operator needs (create
/// the resource, add the finalizer, write the service object, patch status) at the same
/// concurrency against the same dev API server and sandbox. Returns the wall time.
async fn floor(sb: &Sandbox, n: usize, concurrency: usize) -> Duration {
    use kube::api::{Patch, PatchParams};
    blocking(|| sb.kubectl_ok(&["create", "namespace", "floor"]));
    let client = quartet::run::client_from(
        Some(&sb.kubeconfig),
        Arc::new(quartet::reconcile::metrics::Metrics::default()),
    )
    .await
    .expect("client");
    let api: Api<SecretsPolicy> = Api::namespaced(client, "floor");
    let http = reqwest::Client::new();
    let base = sb.url("secrets").to_string();
    let token = sb.root_token.clone();
    let started = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let (api, http, base, token) = (api.clone(), http.clone(), base.clone(), token.clone());
            async move {
                let name = format!("floor-{i}");
                let body = format!("path \"floor/{i}/*\" {{ capabilities = [\"read\"] }}");
                let p: SecretsPolicy = serde_json::from_value(serde_json::json!({
                    "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
                    "metadata": {"name": name},
                    "spec": {"type": "acl", "policy": body}
                }))
                .expect("policy");
                api.create(&PostParams::default(), &p).await.expect("create");
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"metadata": {"finalizers": ["secrets.quartet.dev/cleanup"]}})),
                )
                .await
                .expect("finalizer");
                http.put(format!("{base}/v1/sys/policies/acl/{name}"))
                    .header("X-Secrets-Token", token)
                    .json(&serde_json::json!({"policy": body}))
                    .send()
                    .await
                    .expect("service write");
                let status = serde_json::json!({
                    "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
                    "status": {"remoteId": name, "conditions": [{"type": "Ready", "status": "True", "reason": "InSync", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
                });
                api.patch_status(&name, &PatchParams::apply("floor").force(), &Patch::Apply(&status))
                    .await
                    .expect("status");
            }
        })
        .await;
    started.elapsed()
}

async fn run(n: usize, concurrency: usize) {
    let sb = tokio::task::block_in_place(|| {
        let sb = Sandbox::start(&[]);
        sb.install_crds();
        sb.connect_secrets(&sb.root_token.clone());
        // The Connection's default client-side limit (50 calls/s) is below the resync load of
        // 1,000 objects every 15 s: the fair queue must still make every new object Ready.
        // `QUARTET_BENCH_RPS` raises it to measure the operator without the limiter.
        if let Ok(rps) = std::env::var("QUARTET_BENCH_RPS") {
            sb.kubectl_ok(&[
                "patch",
                "connection",
                "secrets",
                "--type=merge",
                "-p",
                &format!(r#"{{"spec":{{"requestsPerSecond":{rps}}}}}"#),
            ]);
        }
        sb
    });
    // The floor first, in its own namespace, before the operator starts (which then watches
    // only `default`): the same dev API server and sandbox, nothing else running.
    let floor = floor(&sb, n, concurrency).await;
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
    let metrics_addr = tokio::task::block_in_place(|| op.metrics_addr());
    let client = quartet::run::client_from(
        Some(&sb.kubeconfig),
        Arc::new(quartet::reconcile::metrics::Metrics::default()),
    )
    .await
    .expect("client");
    let api: Api<SecretsPolicy> = Api::namespaced(client, "default");
    // Let the operator settle (Connection Ready) before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kube_before = metric_values(
        &blocking(|| scrape(&metrics_addr)),
        "quartet_kube_api_calls_total",
    );
    let (_, since) = blocking(|| sb.requests("secrets", 0));

    let started = Instant::now();
    let created_at = Arc::new(std::sync::Mutex::new(BTreeMap::<String, Instant>::new()));
    let ready_after = Arc::new(std::sync::Mutex::new(BTreeMap::<String, Duration>::new()));
    // Watch readiness while creating: the time from each create to its Ready.
    let watcher = {
        let (api, created_at, ready_after) = (api.clone(), created_at.clone(), ready_after.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(list) = api.list(&ListParams::default()).await {
                    let now = Instant::now();
                    let created = created_at.lock().unwrap().clone();
                    let mut ready = ready_after.lock().unwrap();
                    for p in &list.items {
                        let name = p.metadata.name.clone().unwrap_or_default();
                        let is_ready = p.status.as_ref().is_some_and(|s| {
                            s.managed
                                .conditions
                                .iter()
                                .any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                        if let (true, Some(at)) = (is_ready, created.get(&name)) {
                            ready.entry(name).or_insert(now - *at);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let api = api.clone();
            let created_at = created_at.clone();
            async move {
                let p: SecretsPolicy = serde_json::from_value(serde_json::json!({
                    "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
                    "metadata": {"name": format!("bench-{i}")},
                    "spec": {"type": "acl", "policy": format!("path \"bench/{i}/*\" {{ capabilities = [\"read\"] }}")}
                }))
                .expect("policy");
                let at = Instant::now();
                api.create(&PostParams::default(), &p).await.expect("create");
                created_at.lock().unwrap().insert(format!("bench-{i}"), at);
            }
        })
        .await;
    loop {
        let list = api.list(&ListParams::default()).await.expect("list");
        let ready = list
            .items
            .iter()
            .filter(|p| {
                p.status.as_ref().is_some_and(|s| {
                    s.managed
                        .conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .count();
        if ready == n {
            break;
        }
        if started.elapsed() > Duration::from_secs(600) {
            println!("N={n}: only {ready} of {n} Ready after 600 s");
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let converge = started.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    watcher.abort();
    let mut latencies: Vec<Duration> = ready_after.lock().unwrap().values().copied().collect();
    latencies.sort();
    let pct = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .map(|d| d.as_secs_f64())
            .unwrap_or(f64::NAN)
    };
    let (during, after_converge) = blocking(|| sb.requests("secrets", since));
    let kube_after = metric_values(
        &blocking(|| scrape(&metrics_addr)),
        "quartet_kube_api_calls_total",
    );
    let mut kube = BTreeMap::new();
    for (k, v) in &kube_after {
        let d = v - kube_before.get(k).copied().unwrap_or(0.0);
        if d > 0.0 {
            let verb = k.split('"').nth(1).unwrap_or(k).to_string();
            *kube.entry(verb).or_insert(0) += d as usize;
        }
    }

    // One full resync with nothing changed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, resync_from) = blocking(|| sb.requests("secrets", after_converge));
    tokio::time::sleep(Duration::from_secs(RESYNC_SECS + RESYNC_SECS / 5 + 1)).await;
    let (resync, _) = blocking(|| sb.requests("secrets", resync_from));
    let policy_calls = |p: &str| p.starts_with("/v1/sys/policies/");
    let resync_verbs = by_verb(&resync, policy_calls);
    let writes: usize = resync_verbs
        .iter()
        .filter(|(k, _)| k.as_str() != "GET")
        .map(|(_, v)| v)
        .sum();
    let rss = peak_rss_mib(op.pid());
    let cpu = cpu_seconds(op.pid());

    // The same N writes straight to the service, same concurrency.
    let http = reqwest::Client::new();
    let base = sb.url("secrets").to_string();
    let token = sb.root_token.clone();
    let direct_started = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let (http, base, token) = (http.clone(), base.clone(), token.clone());
            async move {
                http.put(format!("{base}/v1/sys/policies/acl/direct-{i}"))
                    .header("X-Secrets-Token", token)
                    .json(&serde_json::json!({"policy": format!("path \"bench/{i}/*\" {{ capabilities = [\"read\"] }}")}))
                    .send()
                    .await
                    .expect("direct put");
            }
        })
        .await;
    let direct = direct_started.elapsed();

    println!(
        "N={n} (Connection requestsPerSecond: {})",
        std::env::var("QUARTET_BENCH_RPS").unwrap_or_else(|_| "50, the default".into())
    );
    println!(
        "  all Ready after                    {:.2} s",
        converge.as_secs_f64()
    );
    println!(
        "  secrets calls/resource, converging {}",
        per(&by_verb(&during, policy_calls), n)
    );
    println!(
        "  secrets calls/resource, one resync {}  (writes: {writes})",
        per(&resync_verbs, n)
    );
    println!(
        "  create -> Ready                    p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        pct(0.50),
        pct(0.99),
        pct(1.0)
    );
    println!("  Kubernetes API calls/resource      {}", per(&kube, n));
    println!("  operator peak RSS                  {rss:.1} MiB");
    println!("  operator CPU (user+system)         {cpu:.1} s");
    println!(
        "  floor (same calls, plain client)   {:.2} s  -> operator/floor {:.2}",
        floor.as_secs_f64(),
        converge.as_secs_f64() / floor.as_secs_f64().max(1e-9)
    );
    println!(
        "  direct writes (same concurrency)   {:.2} s  -> operator/direct {:.1}x",
        direct.as_secs_f64(),
        converge.as_secs_f64() / direct.as_secs_f64().max(1e-9)
    );
    drop(op);
    drop(sb);
}
