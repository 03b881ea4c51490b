//! Convergence benchmark (prints figures; asserts nothing about time).
//!
//! For each N (env `QUARTET_BENCH_N`, default `100,1000`): start `quartet sandbox --kubeconfig`
//! (its dev Kubernetes API server, and its secrets service unless the backend is OpenBao), then
//! run two things against the same servers at the same concurrency C (env
//! `QUARTET_BENCH_CONCURRENCY`, default 8, also the operator's `--concurrency`):
//!
//! * the floor: a plain client doing, per resource, exactly the calls the operator needs (create
//!   the SecretsPolicy, add the finalizer, write the policy to the service, patch status), in a
//!   namespace of its own, before the operator starts;
//! * the operator: `quartet run` watching `default`, where the benchmark creates N SecretsPolicies.
//!
//! With `QUARTET_BENCH_FLOOR_FULL=1`, a second floor first (namespace `floor-full`): the plain
//! client making every call the operator makes (also the observe GET, the Event, a watch of its
//! namespace, the full status), so that `operator/that` is the operator's own overhead.
//! `QUARTET_BENCH_FLOOR_WITH` chooses which of those four the second floor makes, to tell what
//! each costs: a comma-separated list of `watch`, `get`, `status`, `event`, `all`, and `-NAME`
//! to leave one out (`all,-event`: every call but the Event).
//!
//! Both sides are timed alike, by one observer each ([`Readiness`]: a watch of the side's
//! namespace, on a thread of its own): from the first create until it has seen all N Ready.
//! Until 2026-12-07 only the operator's side was observed and the floor's time ended with its
//! last call; the observer's cost (the API server serving one more watcher, this process
//! decoding its events) then fell on the operator's side alone. That figure is printed too
//! (`operator/unobserved floor`), so both can be compared with earlier results.
//!
//! It prints, side by side, the wall time, `operator/floor`, calls per resource by verb on each
//! side (Kubernetes API, from the same per-verb counter the operator exports; the secrets service,
//! from the sandbox's request log or OpenBao's audit log), the operator's passes per resource, CPU
//! seconds (the operator, the floor client, the servers during each side's run, each side's
//! observer, and the user's creates on the operator's side), the operator's peak RSS, create →
//! Ready percentiles, the calls of one resync with nothing changed (writes must be 0), and the load
//! average.
//!
//! The secrets backend is the sandbox's service, or a real `bao server -dev` with
//! `QUARTET_BENCH_BACKEND=openbao` (or `-- --backend openbao`): the Connection then uses
//! `tokenHeader: X-Vault-Token`, as with any OpenBao.
//!
//! Sharded mode (env `QUARTET_BENCH_SHARDS=K`, default 0: one instance without `--shard`): K
//! operator processes `--shard s0` … `--shard s{K-1}`, the N resources labelled
//! `quartet.dev/shard` round-robin; calls and CPU are summed over the processes and the peak
//! RSS is printed per shard, with the service writes per resource (1.00: nothing served twice).
//!
//! With `QUARTET_BENCH_GITOPS=1` the N resources carry what Argo CD adds when it applies them
//! (an instance label, a tracking annotation, `kubectl apply`'s last-applied manifest).
//!
//! Restart and steady state (single instance only; opt-in, they take minutes): with
//! `QUARTET_BENCH_RESTART=1`, once all N are Ready and one resync was counted, the operator is
//! stopped (SIGTERM) and started again with the default resync (5 minutes); the benchmark waits
//! until the new process has reconciled every resource once (its relist) and prints the writes
//! it made to Kubernetes and to the service (must be 0), its calls per resource, and its peak RSS
//! during the relist next to the steady-state RSS of the first process. With
//! `QUARTET_BENCH_STEADY_SECS=S` (implies the restart; 330 covers one 5-minute resync with its
//! ±10 % jitter) it then prints the CPU the operator used over S seconds as a share of one core,
//! with the calls of that window.
//!
//! `QUARTET_BENCH_CRDS=used` installs only the CRDs this benchmark uses (Connection,
//! ClusterConnection, SecretsPolicy), so the operator starts no controller for the other kinds:
//! the difference in peak RSS is what the idle kinds cost.
//!
//! `QUARTET_BENCH_CLUSTER_SECRETS=M` puts M Secrets of 150 KB each (random data, as large as
//! Helm's release Secrets get) in `default` before anything starts: the operator's peak RSS then
//! shows what its watches of Secrets hold or decode of values it never reads.
//!
//! `QUARTET_BENCH_BIN`: the `quartet` binary to run instead of the one this benchmark was built
//! with (a copy, when several worktrees build into one target dir).
//!
//! Run: `cargo bench --bench converge` (builds the binary in release mode first).

#[path = "../tests/support/mod.rs"]
mod support;

mod figures;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use figures::*;
use futures::{stream, StreamExt, TryStreamExt};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::Resource;
use quartet::api::SecretsPolicy;
use quartet::metrics::Metrics;
use support::openbao::OpenBao;
use support::*;

/// The floor client allocates with the operator's allocator (src/main.rs), so their CPU seconds
/// compare the work and not two allocators.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The operator's resync while converging: `QUARTET_BENCH_RESYNC` seconds, default 15. On a
/// loaded machine convergence at N = 10,000 can outlast a 15 s resync, and the resyncs of
/// objects already Ready then add to the operator's CPU: a longer one measures convergence alone
/// (the one-resync window is then skipped: it would take as long).
fn resync_secs() -> u64 {
    std::env::var("QUARTET_BENCH_RESYNC")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15)
}

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
    let args: Vec<String> = std::env::args().collect();
    let backend = args
        .iter()
        .position(|a| a == "--backend")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| std::env::var("QUARTET_BENCH_BACKEND").ok())
        .unwrap_or_else(|| "sandbox".into());
    let openbao = match backend.as_str() {
        "sandbox" => false,
        "openbao" => true,
        other => panic!("unknown backend {other:?}: sandbox or openbao"),
    };
    // The operator logs at its production level (the tests' default is `debug`).
    if std::env::var_os("QUARTET_OPERATOR_LOG").is_none() {
        std::env::set_var("QUARTET_OPERATOR_LOG", "info");
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    println!(
        "SecretsPolicy convergence: dev API server of `quartet sandbox` + secrets service of {}, concurrency {concurrency}, resync {}s, build profile {}",
        if openbao { "a real `bao server -dev` (OpenBao)" } else { "`quartet sandbox`" },
        resync_secs(),
        if cfg!(debug_assertions) { "debug" } else { "release" },
    );
    for n in sizes {
        rt.block_on(run(n, concurrency, openbao));
    }
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
    stat_cpu_seconds(&format!("/proc/{pid}/stat"))
}

/// CPU seconds (user + system) from a `stat` file of /proc: a process's, or one thread's
/// (`/proc/<pid>/task/<tid>/stat`).
fn stat_cpu_seconds(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds of every process whose command line contains `needle` (OpenBao runs under a
/// wrapper shell, so its pid is not at hand).
fn cpu_seconds_of(needle: &str) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return f64::NAN;
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .map(cpu_seconds)
        .sum()
}

/// The secrets service the policies are written to: the sandbox's, or a real OpenBao.
struct Backend<'a> {
    sandbox: &'a Sandbox,
    openbao: Option<OpenBao>,
}

impl Backend<'_> {
    fn base(&self) -> String {
        match &self.openbao {
            Some(b) => b.addr.clone(),
            None => self.sandbox.url("secrets").to_string(),
        }
    }
    fn header(&self) -> (&'static str, String) {
        match &self.openbao {
            Some(b) => ("X-Vault-Token", b.root_token.clone()),
            None => ("X-Secrets-Token", self.sandbox.root_token.clone()),
        }
    }
    /// A cursor for [`Backend::policy_calls`].
    fn cursor(&self) -> u64 {
        match &self.openbao {
            Some(b) => b.requests().len() as u64,
            None => self.sandbox.requests("secrets", 0).1,
        }
    }
    /// Calls to `sys/policies/` since `cursor`, by HTTP verb (OpenBao's audit operations are
    /// mapped back: read → GET, create/update → PUT, delete → DELETE, list → LIST).
    fn policy_calls(&self, cursor: u64) -> (BTreeMap<String, usize>, u64) {
        let mut m = BTreeMap::new();
        match &self.openbao {
            Some(b) => {
                let all = b.requests();
                for (op, path) in all.iter().skip(cursor as usize) {
                    if !path.starts_with("sys/policies/") {
                        continue;
                    }
                    let verb = match op.as_str() {
                        "read" => "GET",
                        "create" | "update" => "PUT",
                        "delete" => "DELETE",
                        "list" => "LIST",
                        other => other,
                    };
                    *m.entry(verb.to_string()).or_insert(0) += 1;
                }
                (m, all.len() as u64)
            }
            None => {
                let (reqs, next) = self.sandbox.requests("secrets", cursor);
                for (method, path, _) in reqs {
                    if path.starts_with("/v1/sys/policies/") {
                        *m.entry(method).or_insert(0) += 1;
                    }
                }
                (m, next)
            }
        }
    }
    /// CPU seconds of the servers: the sandbox (API server and, unless OpenBao, the service)
    /// and OpenBao.
    fn server_cpu(&self) -> f64 {
        cpu_seconds(self.sandbox.pid())
            + match &self.openbao {
                Some(b) => cpu_seconds_of(&b.root_token),
                None => 0.0,
            }
    }
}

/// What one side (operator or floor) cost.
struct Side {
    /// From the first create until the observer saw every resource Ready.
    wall: Duration,
    /// The floor's: until its own calls were all answered (before its observer saw the last
    /// status), the floor's wall time before both sides were observed alike. The operator's
    /// side has no calls of its own to time: there it is `wall`.
    calls_done: Duration,
    latencies: Latencies,
    /// CPU seconds of the side's readiness watch (its thread in this process).
    observer_cpu: f64,
    kube: BTreeMap<String, usize>,
    service: BTreeMap<String, usize>,
    /// CPU seconds of the client (the operator process, or the benchmark process for the floor).
    client_cpu: f64,
    server_cpu: f64,
}

fn policy_body(prefix: &str, i: usize) -> String {
    format!("path \"{prefix}/{i}/*\" {{ capabilities = [\"read\"] }}")
}

/// What a resource applied by Argo CD carries besides its manifest: its instance label and
/// tracking annotation, and `kubectl apply`'s copy of the manifest (Argo CD applies
/// client-side by default).
fn as_applied_by_gitops(p: &mut SecretsPolicy) {
    let name = p.metadata.name.clone().unwrap_or_default();
    let manifest = serde_json::to_string(&*p).expect("manifest");
    p.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(
            "app.kubernetes.io/instance".into(),
            "platform-policies".into(),
        );
    p.metadata.annotations = Some(
        [
            (
                "argocd.argoproj.io/tracking-id".to_string(),
                format!("platform-policies:secrets.quartet.dev/SecretsPolicy:default/{name}"),
            ),
            (
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                manifest,
            ),
        ]
        .into(),
    );
}

fn policy(name: &str, body: &str) -> SecretsPolicy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
        "metadata": {"name": name},
        "spec": {"type": "acl", "policy": body}
    }))
    .expect("policy")
}

/// The floor: a plain client doing, per resource, exactly the calls the operator needs (create
/// the resource, add the finalizer, write the service object, patch status) at the same
/// concurrency against the same dev API server and secrets service.
///
/// With `extras`, the plain client also makes (some of) the calls the operator makes beyond
/// those (in a namespace of its own, `floor-full`): it watches the namespace and decodes every
/// event (the operator's cache), reads the policy from the service before writing it (the
/// observe step), writes the status the operator writes (four conditions, `observedGeneration`,
/// `lastSyncTime`), and records the same Event. What the operator costs beyond the floor with
/// all four is its own work; what that floor costs beyond the plain one is the servers' work
/// for those calls.
async fn floor(
    sb: &Sandbox,
    backend: &Backend<'_>,
    n: usize,
    concurrency: usize,
    extras: Extras,
) -> Side {
    let ns = if extras.any() { "floor-full" } else { "floor" };
    blocking(|| sb.kubectl_ok(&["create", "namespace", ns]));
    let metrics = Arc::new(Metrics::default());
    let client = quartet::runtime::kube_client::client_from(Some(&sb.kubeconfig), metrics.clone())
        .await
        .expect("client");
    let api: Api<SecretsPolicy> = Api::namespaced(client.clone(), ns);
    let watch = extras.watch.then(|| {
        let api = api.clone();
        tokio::spawn(async move {
            let events = watcher(api, watcher::Config::default());
            futures::pin_mut!(events);
            while events.next().await.is_some() {}
        })
    });
    let reporter = kube::runtime::events::Reporter {
        controller: "floor".into(),
        instance: None,
    };
    let http = reqwest::Client::new();
    let base = backend.base();
    let (header, token) = backend.header();
    let mut readiness = blocking(|| Readiness::watch(&sb.kubeconfig, ns));
    let cursor = blocking(|| backend.cursor());
    let server_cpu = backend.server_cpu();
    let own_cpu = cpu_seconds(std::process::id());
    let started = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let (api, http, base, token) = (api.clone(), http.clone(), base.clone(), token.clone());
            let (client, reporter) = (client.clone(), reporter.clone());
            let readiness = &readiness;
            async move {
                let name = format!("floor-{i}");
                let body = policy_body("floor", i);
                readiness.created(&name);
                let created = api
                    .create(&PostParams::default(), &policy(&name, &body))
                    .await
                    .expect("create");
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"metadata": {"finalizers": ["secrets.quartet.dev/cleanup"]}})),
                )
                .await
                .expect("finalizer");
                if extras.get {
                    let res = http
                        .get(format!("{base}/v1/sys/policies/acl/{name}"))
                        .header(header, token.clone())
                        .send()
                        .await
                        .expect("service read");
                    let _ = res.bytes().await;
                }
                let res = http
                    .put(format!("{base}/v1/sys/policies/acl/{name}"))
                    .header(header, token)
                    .json(&serde_json::json!({"policy": body}))
                    .send()
                    .await
                    .expect("service write");
                assert!(res.status().is_success(), "service write: {}", res.status());
                let status = if extras.status {
                    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
                        serde_json::json!({"type": type_, "status": status, "reason": reason, "message": message,
                            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
                    };
                    serde_json::json!({
                        "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
                        "status": {"remoteId": name, "observedGeneration": 1, "lastSyncTime": "2026-01-01T00:00:00Z", "conditions": [
                            condition("Ready", "True", "InSync", &format!("{name} matches the spec")),
                            condition("Synced", "True", "ReconcileSuccess", ""),
                            condition("Reconciling", "False", "ReconcileSuccess", ""),
                            condition("Stalled", "False", "ReconcileSuccess", ""),
                        ]}
                    })
                } else {
                    serde_json::json!({
                        "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
                        "status": {"remoteId": name, "conditions": [{"type": "Ready", "status": "True", "reason": "InSync", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
                    })
                };
                api.patch_status(&name, &PatchParams::apply("floor").force(), &Patch::Apply(&status))
                    .await
                    .expect("status");
                if extras.event {
                    let ev = kube::runtime::events::Event {
                        type_: kube::runtime::events::EventType::Normal,
                        reason: "Created".into(),
                        note: Some(format!("created {name}")),
                        action: "Create".into(),
                        secondary: None,
                    };
                    let recorder = kube::runtime::events::Recorder::new(client, reporter);
                    recorder
                        .publish(&ev, &created.object_ref(&()))
                        .await
                        .expect("event");
                }
            }
        })
        .await;
    let calls_done = started.elapsed();
    assert!(
        readiness.all(n).await,
        "the floor's {n} resources were seen Ready"
    );
    let wall = started.elapsed();
    let (latencies, observer_cpu) = readiness.stop();
    if let Some(watch) = watch {
        watch.abort();
    }
    let client_cpu = cpu_seconds(std::process::id()) - own_cpu - observer_cpu;
    let server_cpu = backend.server_cpu() - server_cpu;
    let (service, _) = blocking(|| backend.policy_calls(cursor));
    Side {
        wall,
        calls_done,
        latencies,
        observer_cpu,
        kube: delta(&kube_calls(&metrics.render()), &BTreeMap::new()),
        service,
        client_cpu,
        server_cpu,
    }
}

/// The calls the operator makes beyond the floor's, which a second floor can make too.
#[derive(Clone, Copy, Default)]
struct Extras {
    /// A watch of the namespace whose events are decoded (the operator's cache).
    watch: bool,
    /// The observe GET to the service before the write.
    get: bool,
    /// The operator's whole status instead of one condition.
    status: bool,
    /// The Event of the create.
    event: bool,
}

impl Extras {
    /// `QUARTET_BENCH_FLOOR_FULL=1` (all four) or `QUARTET_BENCH_FLOOR_WITH` (see the module
    /// doc); `None` when neither asks for a second floor.
    fn from_env() -> Option<Self> {
        if std::env::var("QUARTET_BENCH_FLOOR_FULL").is_ok_and(|v| v == "1") {
            return Some(Extras::parse("all"));
        }
        let with = std::env::var("QUARTET_BENCH_FLOOR_WITH").ok()?;
        Some(Extras::parse(&with)).filter(Extras::any)
    }

    fn parse(list: &str) -> Self {
        let mut e = Extras::default();
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (on, name) = match item.strip_prefix('-') {
                Some(name) => (false, name),
                None => (true, item),
            };
            match name {
                "all" => {
                    e = Extras {
                        watch: on,
                        get: on,
                        status: on,
                        event: on,
                    }
                }
                "watch" => e.watch = on,
                "get" => e.get = on,
                "status" => e.status = on,
                "event" => e.event = on,
                other => panic!(
                    "QUARTET_BENCH_FLOOR_WITH: {other:?} is none of watch, get, status, event, all"
                ),
            }
        }
        e
    }

    fn any(&self) -> bool {
        self.watch || self.get || self.status || self.event
    }

    /// What the second floor makes beyond the plain one, for its line of the report.
    fn describe(&self) -> String {
        let named = [
            (self.watch, "the watch"),
            (self.get, "the observe GET"),
            (self.status, "the whole status"),
            (self.event, "the Event"),
        ];
        let on: Vec<&str> = named
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        if on.len() == named.len() {
            "the operator's other calls".into()
        } else {
            on.join(" + ")
        }
    }
}

/// The benchmark's observer of one side: one watch of a namespace's SecretsPolicies (not
/// repeated lists, which at N = 10,000 would load the API server more than the operator does)
/// that times each resource from its create to its first `Ready=True`.
///
/// Both sides are timed by it, so the observer's cost (the API server encoding and sending
/// every event of the namespace to one more watcher, and this process decoding them) is on both
/// sides of `operator/floor`. It runs on a thread of its own, with its own runtime and client,
/// so its CPU seconds are told apart from the rest of this process's (the floor client's, or the
/// user's creates on the operator's side).
struct Readiness {
    created_at: Arc<Mutex<BTreeMap<String, Instant>>>,
    ready_after: Arc<Mutex<BTreeMap<String, Duration>>>,
    all_ready: tokio::sync::watch::Receiver<usize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// `/proc/<pid>/task/<tid>/stat` of the observer's thread.
    stat: String,
    cpu_at_start: f64,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Readiness {
    /// Starts watching `namespace` and returns once the watch has listed it.
    fn watch(kubeconfig: &std::path::Path, namespace: &str) -> Self {
        let created_at = Arc::new(Mutex::new(BTreeMap::<String, Instant>::new()));
        let ready_after = Arc::new(Mutex::new(BTreeMap::<String, Duration>::new()));
        let (all_ready_tx, all_ready) = tokio::sync::watch::channel(0usize);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (listed_tx, listed) = std::sync::mpsc::channel::<String>();
        let (kubeconfig, namespace) = (kubeconfig.to_path_buf(), namespace.to_string());
        let (created, ready) = (created_at.clone(), ready_after.clone());
        let thread = std::thread::spawn(move || {
            // A link to `<pid>/task/<tid>`, relative to /proc.
            let stat = std::fs::read_link("/proc/thread-self")
                .map(|p| format!("/proc/{}/stat", p.display()))
                .unwrap_or_default();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("observer runtime");
            rt.block_on(async move {
                let client = quartet::runtime::kube_client::client_from(
                    Some(&kubeconfig),
                    Arc::new(Metrics::default()),
                )
                .await
                .expect("observer client");
                let api: Api<SecretsPolicy> = Api::namespaced(client, &namespace);
                let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
                let mut listed = Some((listed_tx, stat));
                let observe = async {
                    while let Ok(Some(ev)) = events.try_next().await {
                        let p = match ev {
                            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => p,
                            watcher::Event::InitDone => {
                                if let Some((tx, stat)) = listed.take() {
                                    let _ = tx.send(stat);
                                }
                                continue;
                            }
                            _ => continue,
                        };
                        if !is_ready(&p) {
                            continue;
                        }
                        let now = Instant::now();
                        let name = p.metadata.name.clone().unwrap_or_default();
                        // The create call may not have returned yet: then it counts from now.
                        let at = created.lock().unwrap().get(&name).copied().unwrap_or(now);
                        let mut ready = ready.lock().unwrap();
                        if let std::collections::btree_map::Entry::Vacant(e) = ready.entry(name) {
                            e.insert(now - at);
                            let _ = all_ready_tx.send(ready.len());
                        }
                    }
                };
                tokio::select! {
                    _ = observe => {}
                    _ = stopped => {}
                }
            });
        });
        let stat = listed
            .recv_timeout(Duration::from_secs(60))
            .expect("the readiness watch listed its namespace");
        let cpu_at_start = stat_cpu_seconds(&stat);
        Readiness {
            created_at,
            ready_after,
            all_ready,
            stop: Some(stop),
            stat,
            cpu_at_start,
            thread: Some(thread),
        }
    }

    /// Records that `name` is about to be created (its Ready is timed from now).
    fn created(&self, name: &str) {
        self.created_at
            .lock()
            .unwrap()
            .insert(name.to_string(), Instant::now());
    }

    /// Waits (up to 900 s) until `n` resources were seen Ready; false on the time-out.
    async fn all(&mut self, n: usize) -> bool {
        tokio::time::timeout(
            Duration::from_secs(900),
            self.all_ready.wait_for(|ready| *ready >= n),
        )
        .await
        .is_ok_and(|r| r.is_ok())
    }

    fn count(&self) -> usize {
        *self.all_ready.borrow()
    }

    /// The observer's CPU seconds so far.
    fn cpu(&self) -> f64 {
        stat_cpu_seconds(&self.stat) - self.cpu_at_start
    }

    /// Stops watching; returns the create -> Ready times seen and the observer's CPU seconds.
    fn stop(&mut self) -> (Latencies, f64) {
        let cpu = self.cpu();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let mut all: Vec<Duration> = self.ready_after.lock().unwrap().values().copied().collect();
        all.sort();
        (Latencies(all), cpu)
    }
}

/// Create -> Ready times, sorted.
struct Latencies(Vec<Duration>);

impl Latencies {
    /// The `q` quantile in seconds (1.0: the maximum).
    fn at(&self, q: f64) -> f64 {
        self.0
            .get(((self.0.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .map(|d| d.as_secs_f64())
            .unwrap_or(f64::NAN)
    }
}

fn is_ready(p: &SecretsPolicy) -> bool {
    p.status.as_ref().is_some_and(|s| {
        s.managed
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// `verb resource` → count, summed over the scrapes of every operator process.
fn kube_calls_of(addrs: &[String]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for addr in addrs {
        for (k, v) in kube_calls(&blocking(|| scrape(addr))) {
            *out.entry(k).or_insert(0.0) += v;
        }
    }
    out
}

/// `m` Secrets of 150 KB of random data in `default`, none of them used by any resource.
async fn cluster_secrets(sb: &Sandbox, m: usize) {
    use rand::RngCore;
    let client = quartet::runtime::kube_client::client_from(
        Some(&sb.kubeconfig),
        Arc::new(Metrics::default()),
    )
    .await
    .expect("client");
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
    let mut value = vec![0u8; 150 * 1024];
    for i in 0..m {
        rand::rng().fill_bytes(&mut value);
        let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("release-{i}")},
            "data": {"release": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &value)},
        }))
        .expect("a Secret");
        api.create(&PostParams::default(), &secret)
            .await
            .expect("create a Secret");
    }
    println!("  {m} Secrets of 150 KB in `default` (used by nothing)");
}

async fn run(n: usize, concurrency: usize, openbao: bool) {
    let gitops = std::env::var("QUARTET_BENCH_GITOPS").is_ok_and(|v| v == "1");
    let shards: usize = std::env::var("QUARTET_BENCH_SHARDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let sb = blocking(|| {
        let sb = Sandbox::start(&[]);
        if std::env::var("QUARTET_BENCH_CRDS").is_ok_and(|v| v == "used") {
            // Only the kinds this benchmark creates: the operator then starts no controller
            // for the others (it serves what is installed), to measure what idle kinds cost.
            sb.install_crds_named(&[
                "connections.quartet.dev",
                "clusterconnections.quartet.dev",
                "secretspolicies.secrets.quartet.dev",
            ]);
        } else {
            sb.install_crds();
        }
        sb
    });
    let backend = Backend {
        sandbox: &sb,
        openbao: openbao.then(|| blocking(OpenBao::start)),
    };
    blocking(|| {
        match &backend.openbao {
            // Named `secrets`, the default Connection of SecretsPolicies in `default`.
            Some(b) => sb.apply_ok(&b.connection_yaml("secrets", "default")),
            None => sb.connect_secrets(&sb.root_token.clone()),
        }
        // The Connection's default client-side limit (50 calls/s) bounds what any operator can
        // do (2 calls per new policy: 25 policies/s); `QUARTET_BENCH_RPS` raises it to measure
        // the operator rather than its limiter.
        if let Ok(rps) = std::env::var("QUARTET_BENCH_RPS") {
            let rps: u64 = rps.parse().expect("QUARTET_BENCH_RPS: a whole number");
            sb.patch_secrets_connection(serde_json::json!({ "requestsPerSecond": rps }));
        }
    });
    if let Some(m) = std::env::var("QUARTET_BENCH_CLUSTER_SECRETS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    {
        cluster_secrets(&sb, m).await;
    }
    let load_before = load();
    // The floor first, in its own namespace, before the operator starts (which then watches
    // only `default`): the same servers, nothing else running.
    let extras = Extras::from_env();
    let floor_full = match extras {
        Some(extras) => Some(floor(&sb, &backend, n, concurrency, extras).await),
        None => None,
    };
    let floor = floor(&sb, &backend, n, concurrency, Extras::default()).await;
    let shard_names: Vec<Option<String>> = match shards {
        0 => vec![None],
        k => (0..k).map(|s| Some(format!("s{s}"))).collect(),
    };
    let ops: Vec<Operator> = shard_names
        .iter()
        .map(|shard| {
            let c = concurrency.to_string();
            let mut args = vec!["--concurrency", &c, "--namespace", "default"];
            if let Some(s) = shard {
                args.extend(["--shard", s.as_str()]);
            }
            Operator::start_with(&sb, &format!("{}s", resync_secs()), &args)
        })
        .collect();
    let metrics_addrs: Vec<String> = ops
        .iter()
        .map(|op| blocking(|| op.metrics_addr()))
        .collect();
    let ops_cpu = || ops.iter().map(|op| cpu_seconds(op.pid())).sum::<f64>();
    let client = quartet::runtime::kube_client::client_from(
        Some(&sb.kubeconfig),
        Arc::new(Metrics::default()),
    )
    .await
    .expect("client");
    let api: Api<SecretsPolicy> = Api::namespaced(client, "default");
    // Let the operator settle (Connection Ready) before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kube_before = kube_calls_of(&metrics_addrs);
    let passes = || {
        metrics_addrs
            .iter()
            .map(|a| policy_reconciles(&blocking(|| scrape(a))))
            .sum::<f64>()
    };
    let passes_before = passes();
    let cursor = blocking(|| backend.cursor());
    let op_cpu_before = ops_cpu();
    let server_cpu_before = backend.server_cpu();
    let bench_cpu_before = cpu_seconds(std::process::id());

    let mut readiness = blocking(|| Readiness::watch(&sb.kubeconfig, "default"));
    let started = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(concurrency, |i| {
            let api = api.clone();
            let readiness = &readiness;
            async move {
                let name = format!("bench-{i}");
                readiness.created(&name);
                let mut p = policy(&name, &policy_body("bench", i));
                if shards > 0 {
                    p.metadata.labels = Some(
                        [("quartet.dev/shard".to_string(), format!("s{}", i % shards))].into(),
                    );
                }
                if gitops {
                    as_applied_by_gitops(&mut p);
                }
                api.create(&PostParams::default(), &p)
                    .await
                    .expect("create");
            }
        })
        .await;
    let converged = readiness.all(n).await;
    let wall = started.elapsed();
    if !converged {
        println!(
            "N={n}: only {} of {n} Ready after {:.0} s (load {})",
            readiness.count(),
            wall.as_secs_f64(),
            load()
        );
    }
    let load_after = load();
    let (pct, observer_cpu) = readiness.stop();
    // On the same cores as the operator and the servers, so part of its wall time.
    let bench_cpu = cpu_seconds(std::process::id()) - bench_cpu_before;
    let operator_passes = passes() - passes_before;
    let operator = Side {
        wall,
        calls_done: wall,
        latencies: pct,
        observer_cpu,
        kube: delta(&kube_calls_of(&metrics_addrs), &kube_before),
        service: blocking(|| backend.policy_calls(cursor)).0,
        client_cpu: ops_cpu() - op_cpu_before,
        server_cpu: backend.server_cpu() - server_cpu_before,
    };
    // The benchmark's own creates are the user's calls, not the operator's.
    let mut floor_kube = floor.kube.clone();
    floor_kube.remove("create secretspolicies");

    // One full resync with nothing changed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resync_from = blocking(|| backend.cursor());
    let resync = resync_secs();
    if resync <= 60 {
        tokio::time::sleep(Duration::from_secs(resync + resync / 5 + 1)).await;
    }
    let (resync, _) = blocking(|| backend.policy_calls(resync_from));
    let writes: usize = resync
        .iter()
        .filter(|(k, _)| k.as_str() != "GET")
        .map(|(_, v)| v)
        .sum();
    let rss: Vec<f64> = ops.iter().map(|op| peak_rss_mib(op.pid())).collect();
    let op_cpu_total = ops_cpu();

    println!(
        "N={n}{} (Connection requestsPerSecond: {}; load average {load_before} before, {load_after} after)",
        if shards > 0 { format!(" across {shards} shards (one process each)") } else { String::new() },
        std::env::var("QUARTET_BENCH_RPS").unwrap_or_else(|_| "50, the default".into())
    );
    println!(
        "  operator: all Ready after          {:.2} s  (create -> Ready p50 {:.2} s, p99 {:.2} s, max {:.2} s)",
        operator.wall.as_secs_f64(),
        operator.latencies.at(0.50),
        operator.latencies.at(0.99),
        operator.latencies.at(1.0)
    );
    println!(
        "  floor: same calls, plain client    {:.2} s  (create -> Ready p50 {:.2} s, p99 {:.2} s) -> operator/floor {:.2}",
        floor.wall.as_secs_f64(),
        floor.latencies.at(0.50),
        floor.latencies.at(0.99),
        operator.wall.as_secs_f64() / floor.wall.as_secs_f64().max(1e-9)
    );
    println!(
        "                                     its calls all answered after {:.2} s -> operator/unobserved floor {:.2} (the measure before 2026-12-07)",
        floor.calls_done.as_secs_f64(),
        operator.wall.as_secs_f64() / floor.calls_done.as_secs_f64().max(1e-9)
    );
    if let (Some(full), Some(extras)) = (&floor_full, extras) {
        let mut kube = full.kube.clone();
        kube.remove("create secretspolicies");
        println!(
            "  floor + {}: {:.2} s  -> operator/that {:.2}; calls/resource Kubernetes: {}{}; secrets: {}",
            extras.describe(),
            full.wall.as_secs_f64(),
            operator.wall.as_secs_f64() / full.wall.as_secs_f64().max(1e-9),
            per(&kube, n),
            if extras.watch { ", watch events decoded" } else { "" },
            per(&full.service, n)
        );
        println!(
            "                                     CPU seconds: client {:.2} (operator/that {:.2}), servers {:.2}",
            full.client_cpu,
            operator.client_cpu / full.client_cpu.max(1e-9),
            full.server_cpu
        );
    }
    println!(
        "  Kubernetes calls/resource          operator: {}",
        per(&operator.kube, n)
    );
    println!(
        "                                     floor:    {} (+ create 1.00, the user's, on both sides)",
        per(&floor_kube, n)
    );
    println!(
        "  passes/resource                    operator: {:.2} (every reconcile, those with nothing to do included)",
        operator_passes / n as f64
    );
    println!(
        "  secrets calls/resource             operator: {}; floor: {}",
        per(&operator.service, n),
        per(&floor.service, n)
    );
    println!(
        "  CPU seconds                        operator {:.2}, floor client {:.2}; servers during operator {:.2}, during floor {:.2}",
        operator.client_cpu, floor.client_cpu, operator.server_cpu, floor.server_cpu
    );
    println!(
        "                                     readiness watch (this benchmark's observer) during operator {:.2}, during floor {:.2}; the user's creates during operator {:.2}",
        operator.observer_cpu,
        floor.observer_cpu,
        bench_cpu - operator.observer_cpu
    );
    let rss_text = shard_names
        .iter()
        .zip(&rss)
        .map(|(s, r)| match s {
            Some(s) => format!("{s} {r:.1} MiB"),
            None => format!("{r:.1} MiB"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "  operator peak RSS                  {rss_text} (CPU since start {op_cpu_total:.1} s)"
    );
    if resync_secs() <= 60 {
        println!(
            "  secrets calls/resource, one resync {}  (writes: {writes})",
            per(&resync, n)
        );
    }
    // Opt-in: restart at N Ready, then the steady state at the default resync.
    let ops = restart_and_steady(&sb, &backend, ops, n, concurrency).await;
    drop(ops);
    drop(backend);
    drop(sb);
}

/// Resident set size now (VmRSS), in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// Resident memory now, anonymous (the heap: caches, queues) and file-backed (mostly the pages
/// of the `quartet` binary, which carries the sandbox too), in MiB.
fn rss_split_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(f64::NAN)
    };
    (field("RssAnon:"), field("RssFile:"))
}

/// `m` without the entries under 0.005 per resource (the restarted operator's one list and
/// watch per kind).
fn per_resource_only(m: &BTreeMap<String, usize>, n: usize) -> String {
    let kept: BTreeMap<String, usize> = m
        .iter()
        .filter(|(_, v)| **v as f64 / n as f64 >= 0.005)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    per(&kept, n)
}

/// Reconciles of SecretsPolicies (any result) in a scrape.
fn policy_reconciles(text: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.starts_with("quartet_reconciles_total") && l.contains("kind=\"SecretsPolicy\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The Kubernetes calls of `calls` that change something (not get, list or watch).
fn kube_writes(calls: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    calls
        .iter()
        .filter(|(k, _)| !["get ", "list ", "watch "].iter().any(|v| k.starts_with(v)))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// The opt-in phases after convergence (see the module doc): a restart at N Ready resources,
/// and the steady-state CPU at the default resync. Returns the operators still running.
async fn restart_and_steady(
    sb: &Sandbox,
    backend: &Backend<'_>,
    mut ops: Vec<Operator>,
    n: usize,
    concurrency: usize,
) -> Vec<Operator> {
    let steady_secs: Option<u64> = std::env::var("QUARTET_BENCH_STEADY_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let restart =
        steady_secs.is_some() || std::env::var("QUARTET_BENCH_RESTART").is_ok_and(|v| v == "1");
    if !restart || ops.len() != 1 {
        return ops;
    }
    let first = ops.pop().expect("one operator");
    let steady_rss = rss_mib(first.pid());
    let (anon, file) = rss_split_mib(first.pid());
    println!("  steady-state RSS before the restart {steady_rss:.1} MiB: anonymous {anon:.1}, file-backed {file:.1}");
    let load_before = load();
    blocking(|| first.stop());
    let cursor = blocking(|| backend.cursor());
    let c = concurrency.to_string();
    let op = Operator::start_with(sb, "5m", &["--concurrency", &c, "--namespace", "default"]);
    let started = Instant::now();
    let addr = blocking(|| op.metrics_addr());
    let relisted = loop {
        if blocking(|| policy_reconciles(&scrape(&addr))) >= n as f64 {
            break Some(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(600) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Whatever the relist's passes still send (Events are recorded in the background).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kube = delta(&kube_calls(&blocking(|| scrape(&addr))), &BTreeMap::new());
    let (service, _) = blocking(|| backend.policy_calls(cursor));
    let service_writes: usize = service
        .iter()
        .filter(|(k, _)| k.as_str() != "GET")
        .map(|(_, v)| v)
        .sum();
    let relist_peak = peak_rss_mib(op.pid());
    println!(
        "  restart at {n} Ready (resync 5m; load average {load_before} before, {} after)",
        load()
    );
    println!(
        "    every resource reconciled after  {}",
        relisted.map_or("not within 600 s".into(), |d| format!(
            "{:.2} s",
            d.as_secs_f64()
        ))
    );
    println!(
        "    writes                           Kubernetes: {}; secrets: {service_writes}",
        per(&kube_writes(&kube), n)
    );
    println!(
        "    calls/resource                   Kubernetes: {}; secrets: {}",
        per_resource_only(&kube, n),
        per(&service, n)
    );
    println!(
        "    peak RSS during the relist       {relist_peak:.1} MiB vs steady state {steady_rss:.1} MiB -> {:.2}x (CPU {:.2} s)",
        relist_peak / steady_rss,
        cpu_seconds(op.pid())
    );
    if let Some(secs) = steady_secs {
        let cursor = blocking(|| backend.cursor());
        let kube_before = kube_calls(&blocking(|| scrape(&addr)));
        let reconciles = blocking(|| policy_reconciles(&scrape(&addr)));
        let cpu = cpu_seconds(op.pid());
        let load_before = load();
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let used = cpu_seconds(op.pid()) - cpu;
        let scraped = blocking(|| scrape(&addr));
        let kube = delta(&kube_calls(&scraped), &kube_before);
        let (service, _) = blocking(|| backend.policy_calls(cursor));
        println!(
            "  steady state over {secs} s at {n} resources (resync 5m; load average {load_before} before, {} after)",
            load()
        );
        let (anon, file) = rss_split_mib(op.pid());
        println!(
            "    operator CPU                     {used:.2} s = {:.2} % of one core; RSS {:.1} MiB (anonymous {anon:.1}, file-backed {file:.1}; peak {:.1})",
            used / secs as f64 * 100.0,
            rss_mib(op.pid()),
            peak_rss_mib(op.pid())
        );
        println!(
            "    reconciles/resource {:.2}; calls/resource Kubernetes: {}; secrets: {}",
            (policy_reconciles(&scraped) - reconciles) / n as f64,
            per_resource_only(&kube, n),
            per(&service, n)
        );
    }
    vec![op]
}
