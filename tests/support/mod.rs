//! Test harness: the real `quartet` binary (`quartet sandbox --kubeconfig` for the dev API
//! server and the emulated services, `quartet run` for the operator), the real `kubectl`, and
//! the sandbox's services over HTTP. Every environment listens on ephemeral loopback ports, so
//! tests run in parallel.

#![allow(dead_code)]

pub mod catalog;
pub mod changes;
pub mod dev;
pub mod helm;
pub mod reads;
pub mod workspaces;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod openbao;

pub const BIN: &str = env!("CARGO_BIN_EXE_quartet");

/// The binary the sandbox and the operator run: [`BIN`], or `QUARTET_BENCH_BIN` (benchmarks on
/// a shared target dir run a copy, since another build may replace `target/release/quartet`).
pub fn bin() -> String {
    std::env::var("QUARTET_BENCH_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// The binary `quartet run` runs: [`bin`], or `QUARTET_BENCH_OPERATOR_BIN` (benchmarks of the
/// production build, `--no-default-features`, which has no sandbox to start the servers with).
pub fn operator_bin() -> String {
    std::env::var("QUARTET_BENCH_OPERATOR_BIN").unwrap_or_else(|_| bin())
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A unique, recognisable token so tests can prove it never leaks.
pub fn unique_token() -> String {
    format!("tok-{:016x}", rand::random::<u64>())
}

/// A running `quartet sandbox --kubeconfig` process.
pub struct Sandbox {
    child: Child,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub urls: std::collections::HashMap<String, String>,
    pub root_token: String,
    /// The REST reads of [`Sandbox::get_json`], made at its first call.
    reader: std::sync::OnceLock<reads::KubeReader>,
}

impl Sandbox {
    pub fn start(extra: &[&str]) -> Sandbox {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let root_token = unique_token();
        let mut args = vec![
            "sandbox",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--secrets-addr",
            "127.0.0.1:0",
            "--workspaces-addr",
            "127.0.0.1:0",
            "--catalog-addr",
            "127.0.0.1:0",
            "--scheduler-addr",
            "127.0.0.1:0",
            "--kube-addr",
            "127.0.0.1:0",
            "--root-token",
            &root_token,
        ];
        args.extend_from_slice(extra);
        let mut child = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("sandbox.log")).expect("log file"))
            .spawn()
            .expect("start quartet sandbox");
        let urls = read_ready(&mut child, "Quartet sandbox is ready");
        Sandbox {
            child,
            dir,
            kubeconfig,
            urls,
            root_token,
            reader: std::sync::OnceLock::new(),
        }
    }

    /// The sandbox process id (benchmarks read its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, service: &str) -> &str {
        self.urls
            .get(service)
            .unwrap_or_else(|| panic!("no {service} url in {:?}", self.urls))
    }

    /// Inject a fault into a service (`POST /_sandbox/faults`; `service` as for [`Self::url`],
    /// e.g. `secrets[1]` for a second secrets cluster).
    pub fn fault(&self, service: &str, fault: Value) {
        let (s, b) = http(
            "POST",
            &format!("{}/_sandbox/faults", self.url(service)),
            None,
            Some(fault),
        );
        assert!(s < 300, "fault: {s} {b}");
    }

    /// A call to the dev API server's sandbox admin API (`/_sandbox/faults`, `expire-watches`,
    /// `watch-lag`), which needs no token; panics unless it succeeds.
    pub fn kube_admin(&self, method: &str, path: &str, body: Value) {
        let resp = reqwest::blocking::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap()
            .request(
                method.parse().unwrap(),
                format!("{}{path}", self.url("kubernetes")),
            )
            .json(&body)
            .send()
            .expect("admin call");
        assert!(
            resp.status().is_success(),
            "{method} {path}: {}",
            resp.status()
        );
    }

    /// Deliver the dev API server's watch events of `resource` (a plural name) `lag` after
    /// each write: the operator's cache then stays behind its own writes that long, as behind
    /// a busy API server's watch cache.
    pub fn lag_watches(&self, resource: &str, lag: Duration) {
        self.kube_admin(
            "POST",
            "/_sandbox/watch-lag",
            serde_json::json!({"resource": resource, "ms": lag.as_millis() as u64}),
        );
    }

    /// Remove every fault of a service.
    pub fn clear_faults(&self, service: &str) {
        http(
            "DELETE",
            &format!("{}/_sandbox/faults", self.url(service)),
            None,
            None,
        );
    }

    /// The faults a service still holds: a `count` fault is gone once it was hit that often.
    pub fn faults_left(&self, service: &str) -> Vec<Value> {
        let (_, b) = http(
            "GET",
            &format!("{}/_sandbox/faults", self.url(service)),
            None,
            None,
        );
        b["faults"].as_array().cloned().unwrap_or_default()
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        kubectl(&self.kubeconfig, args, None)
    }

    /// Run kubectl and require success; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// A kubeconfig like the admin's with `token` as its only credential, written to `file` in
    /// the sandbox's directory.
    pub fn kubeconfig_with_token(&self, token: &str, file: &str) -> PathBuf {
        let mut kc: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&self.kubeconfig).unwrap()).unwrap();
        kc["users"][0]["user"] =
            serde_yaml::to_value(serde_json::json!({ "token": token })).unwrap();
        let path = self.dir.path().join(file);
        std::fs::write(&path, serde_yaml::to_string(&kc).unwrap()).unwrap();
        path
    }

    /// A kubeconfig with a token of the ServiceAccount `ns/name`, made here: what a person or a
    /// CI job bound to a role would have (the dev API server enforces RBAC for it).
    pub fn service_account_kubeconfig(&self, ns: &str, name: &str) -> PathBuf {
        self.kubectl_ok(&["create", "serviceaccount", name, "-n", ns]);
        let token = self.kubectl_ok(&["create", "token", name, "-n", ns]);
        self.kubeconfig_with_token(token.trim(), &format!("{name}.kubeconfig"))
    }

    /// `kubectl get events -o json` once its output holds every one of `wanted`. A pass
    /// publishes its Events after the status write that a test waits for, so a test that has
    /// just seen that status waits for the Events too rather than reading them once.
    pub fn wait_events(&self, wanted: &[&str]) -> String {
        self.wait_events_with(&["get", "events", "-o", "json"], wanted)
    }

    /// As [`Sandbox::wait_events`], with the kubectl arguments given (a field selector).
    pub fn wait_events_with(&self, args: &[&str], wanted: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.kubectl_ok(args);
            let missing: Vec<&str> = wanted
                .iter()
                .copied()
                .filter(|w| !out.contains(w))
                .collect();
            if missing.is_empty() {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "no Event with {missing:?} within 30 s: {out}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn apply_yaml(&self, yaml: &str) -> Output {
        kubectl(&self.kubeconfig, &["apply", "-f", "-"], Some(yaml))
    }

    pub fn apply_ok(&self, yaml: &str) {
        let out = self.apply_yaml(yaml);
        assert!(
            out.status.success(),
            "kubectl apply failed: {}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The object `kubectl get RESOURCE NAME -o json` prints, or None when there is none. Read
    /// over the REST API: tests poll with it (see [`reads`]).
    pub fn get_json(&self, resource: &str, name: &str) -> Option<Value> {
        self.reader().object(resource, name)
    }

    /// Reads of the dev API server over its REST API (see [`reads`]).
    pub fn reader(&self) -> &reads::KubeReader {
        self.reader
            .get_or_init(|| reads::KubeReader::new(&self.kubeconfig))
    }

    /// Install only the CRDs named (`plural.group`, files of `crds/`) and wait until they are
    /// established: a cluster where the others are missing.
    pub fn install_crds_named<S: AsRef<str>>(&self, crds: &[S]) {
        let files: Vec<String> = crds
            .iter()
            .map(|c| {
                repo_root()
                    .join("crds")
                    .join(format!("{}.yaml", c.as_ref()))
                    .display()
                    .to_string()
            })
            .collect();
        let mut args = vec!["apply", "--server-side"];
        for f in &files {
            args.extend(["-f", f.as_str()]);
        }
        self.kubectl_ok(&args);
        let mut wait = vec!["wait", "--for=condition=Established", "--timeout=30s"];
        let names: Vec<String> = crds.iter().map(|c| format!("crd/{}", c.as_ref())).collect();
        wait.extend(names.iter().map(String::as_str));
        self.kubectl_ok(&wait);
    }

    /// Install the CRDs from `crds/` with kubectl, as a user would, and wait until established.
    pub fn install_crds(&self) {
        let crds = repo_root().join("crds");
        self.kubectl_ok(&["apply", "--server-side", "-f", crds.to_str().unwrap()]);
        // One read of the list per poll rather than `kubectl wait crd --all`: that waits on each
        // CRD in turn, about 0.1 s apiece even when all are established, in every test.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let list = self
                .reader()
                .get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
                .unwrap_or_default();
            let pending: Vec<&str> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|crd| {
                    !crd["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["type"] == "Established" && c["status"] == "True")
                })
                .map(|crd| crd["metadata"]["name"].as_str().unwrap_or_default())
                .collect();
            if list["items"].is_array() && pending.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "CRDs not established within 30s: {pending:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The token Secret and a `secrets` Connection to the sandbox's secrets service.
    pub fn connect_secrets(&self, token: &str) {
        self.connect_secrets_at("default", self.url("secrets"), token);
    }

    /// The token Secret and a `secrets` Connection in `namespace`, to the secrets service at
    /// `address` (e.g. a second cluster, `url("secrets[1]")`).
    pub fn connect_secrets_at(&self, namespace: &str, address: &str, token: &str) {
        let yaml = format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: secrets-token, namespace: {namespace}}}\nstringData: {{token: {token}}}\n---\n\
             apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: secrets, namespace: {namespace}}}\n\
             spec: {{service: secrets, address: \"{address}\", tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 5}}\n",
        );
        self.apply_ok(&yaml);
    }

    /// Merge `spec` into the spec of the Connection `secrets` ([`Self::connect_secrets`]).
    pub fn patch_secrets_connection(&self, spec: Value) {
        let patch = serde_json::json!({ "spec": spec }).to_string();
        self.kubectl_ok(&[
            "patch",
            "connection",
            "secrets",
            "--type=merge",
            "-p",
            &patch,
        ]);
    }

    /// A call to the secrets service with the root token.
    pub fn secrets(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http(
            method,
            &format!("{}{path}", self.url("secrets")),
            Some(("X-Secrets-Token", &self.root_token)),
            body,
        )
    }

    /// Requests the sandbox logged for `service` since `since`: (method, path, status).
    pub fn requests(&self, service: &str, since: u64) -> (Vec<(String, String, u16)>, u64) {
        let (_, body) = http(
            "GET",
            &format!(
                "{}/_sandbox/requests?service={service}&since={since}",
                self.url(service)
            ),
            None,
            None,
        );
        let list = body["requests"].as_array().cloned().unwrap_or_default();
        let items = list
            .iter()
            .map(|r| {
                (
                    r["method"].as_str().unwrap_or("").to_string(),
                    r["path"].as_str().unwrap_or("").to_string(),
                    r["status"].as_u64().unwrap_or(0) as u16,
                )
            })
            .collect();
        (items, body["next"].as_u64().unwrap_or(0))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sandbox.log")).unwrap_or_default()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("QUARTET_KEEP_LOGS").is_some() {
            // Keep the logs of a failed run for a look: set QUARTET_KEEP_LOGS=1.
            let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"));
            eprintln!("logs kept in {}", dir.keep().display());
        }
    }
}

/// A running `quartet run` process against a sandbox.
pub struct Operator {
    child: Child,
    pub log_path: PathBuf,
    pub metrics_url: Option<String>,
}

impl Operator {
    pub fn start(sandbox: &Sandbox, resync: &str) -> Operator {
        Self::start_with(sandbox, resync, &[])
    }

    pub fn start_with(sandbox: &Sandbox, resync: &str, extra: &[&str]) -> Operator {
        Self::start_with_env(sandbox, resync, extra, &[])
    }

    /// As [`Operator::start_with`], with variables set for the operator's process only.
    pub fn start_with_env(
        sandbox: &Sandbox,
        resync: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Operator {
        let n = std::fs::read_dir(sandbox.dir.path())
            .map(|d| d.count())
            .unwrap_or(0);
        let log_path = sandbox.dir.path().join(format!("operator-{n}.log"));
        let mut args = vec![
            "run",
            "--kubeconfig",
            sandbox.kubeconfig.to_str().unwrap(),
            "--resync-interval",
            resync,
            "--metrics-addr",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        let child = Command::new(operator_bin())
            .args(&args)
            .env(
                "RUST_LOG",
                // Benchmarks run the operator at its production level (`info`).
                std::env::var("QUARTET_OPERATOR_LOG").unwrap_or_else(|_| {
                    "debug,hyper=info,h2=info,rustls=info,tower=info,kube_client=info".into()
                }),
            )
            // A test's own `RUST_LOG` (the chart's `info`, say) wins.
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).expect("log file"))
            .spawn()
            .expect("start quartet run");
        Operator {
            child,
            log_path,
            metrics_url: None,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The metrics address the operator logged (`serving metrics and health addr=...`).
    pub fn metrics_addr(&self) -> String {
        wait_for(
            "metrics address in the operator log",
            Duration::from_secs(30),
            || {
                let log = self.log();
                let line = log
                    .lines()
                    .find(|l| l.contains("serving metrics and health"))?;
                let at = line.find("addr=")? + 5;
                Some(line[at..].split_whitespace().next()?.to_string())
            },
        )
    }

    /// Stop like Kubernetes does (SIGTERM), then wait.
    pub fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log()
    }

    /// SIGTERM, then wait up to `limit` for the process to exit: how long it took (`None`: it
    /// was still running at `limit`, and is killed), and its log.
    pub fn terminate(mut self, limit: Duration) -> (Option<Duration>, String) {
        let sent = Instant::now();
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let mut took = None;
        while sent.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                took = Some(sent.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        (took, self.log())
    }

    /// Kill without warning (a crash).
    pub fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Read stdout lines `  name   url` until `ready` appears.
pub fn read_ready(child: &mut Child, ready: &str) -> std::collections::HashMap<String, String> {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let ready = ready.to_string();
    std::thread::spawn(move || {
        let mut urls = std::collections::HashMap::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let mut parts = line.split_whitespace();
            if let (Some(name), Some(url)) = (parts.next(), parts.next()) {
                if line.starts_with("  ") {
                    urls.insert(name.to_string(), url.to_string());
                }
            }
            if line.contains(&ready) {
                let _ = tx.send(urls.clone());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("process did not become ready within 60s")
}

pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new("kubectl");
    // A discovery cache per cluster: servers of earlier tests may have had the same port.
    let cache = kubeconfig
        .parent()
        .map(|d| d.join("kube-cache"))
        .unwrap_or_else(|| std::env::temp_dir().join("quartet-kube-cache"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl on PATH");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("kubectl output")
}

/// Blocking HTTP with an optional auth header; returns status and JSON body (Null if none).
pub fn http(
    method: &str,
    url: &str,
    header: Option<(&str, &str)>,
    body: Option<Value>,
) -> (u16, Value) {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let mut req = client.request(
        reqwest::Method::from_bytes(method.as_bytes()).expect("method"),
        url,
    );
    if let Some((k, v)) = header {
        req = req.header(k, v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().expect("http call");
    let status = resp.status().as_u16();
    let text = resp.text().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Poll `f` until it returns Some, or panic with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

pub fn condition_is(obj: &Value, type_: &str, status: &str) -> bool {
    condition(obj, type_).is_some_and(|c| c["status"] == status)
}
