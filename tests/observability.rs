//! Operations, tested with the real Prometheus tools (Debian's `prometheus` package):
//! `promtool check rules` and `promtool test rules` on the chart's alerts
//! (`charts/quartet/files/alerts.yaml`, unit tests in `tests/promtool/alerts_test.yaml`), every
//! alert's runbook present in `docs/runbooks.md`, the chart rendering the rules and the dashboard
//! from those same files, and a real Prometheus scraping a running operator answering every
//! query of the dashboard (`charts/quartet/files/dashboard.json`).
//!
//! promtool and prometheus are found in `PATH` (or `QUARTET_PROMTOOL_BIN` /
//! `QUARTET_PROMETHEUS_BIN`); missing, the tests fail saying how to install them.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

const INSTALL: &str =
    "install Debian's prometheus package (`apt-get install -y prometheus`, as .ci/run does), \
                       which provides /usr/bin/promtool and /usr/bin/prometheus";

fn tool(name: &str, env: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found ({env}, PATH): {INSTALL}"))
}

fn run_ok(cmd: &mut Command) -> String {
    let out: Output = cmd.output().expect("run the tool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn alerts_file() -> PathBuf {
    repo_root().join("charts/quartet/files/alerts.yaml")
}

fn alerts() -> Value {
    let text = std::fs::read_to_string(alerts_file()).expect("read alerts.yaml");
    serde_yaml::from_str(&text).expect("alerts.yaml is YAML")
}

fn rules(alerts: &Value) -> Vec<Value> {
    alerts["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn promtool_check_rules_accepts_the_charts_alert_rules() {
    let out = run_ok(
        Command::new(tool("promtool", "QUARTET_PROMTOOL_BIN"))
            .args(["check", "rules"])
            .arg(alerts_file()),
    );
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn every_alert_fires_on_its_series_and_not_otherwise_in_promtool_unit_tests() {
    let tests_file = repo_root().join("tests/promtool/alerts_test.yaml");
    let out = run_ok(
        Command::new(tool("promtool", "QUARTET_PROMTOOL_BIN"))
            .args(["test", "rules"])
            .arg(&tests_file),
    );
    assert!(out.contains("SUCCESS"), "{out}");
    // Every alert has unit tests, each both firing (an expected alert) and quiet (none).
    let tests: Value =
        serde_yaml::from_str(&std::fs::read_to_string(&tests_file).unwrap()).unwrap();
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for t in tests["tests"].as_array().unwrap() {
        for a in t["alert_rule_test"].as_array().unwrap() {
            let name = a["alertname"].as_str().unwrap().to_string();
            if a["exp_alerts"].as_array().is_some_and(|e| e.is_empty()) {
                quiet.insert(name);
            } else {
                firing.insert(name);
            }
        }
    }
    for rule in rules(&alerts()) {
        let name = rule["alert"].as_str().unwrap();
        assert!(firing.contains(name), "no test in which {name} fires");
        assert!(quiet.contains(name), "no test in which {name} stays quiet");
    }
}

#[test]
fn every_alert_has_a_for_a_severity_and_a_runbook_section() {
    let runbooks = std::fs::read_to_string(repo_root().join("docs/runbooks.md")).unwrap();
    let anchors: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    let rules = rules(&alerts());
    assert!(rules.len() >= 9, "{rules:?}");
    for rule in rules {
        let name = rule["alert"].as_str().expect("every rule is an alert");
        assert!(rule["for"].as_str().is_some(), "{name} has no `for`");
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        let (page, anchor) = url.split_once('#').unwrap_or_default();
        assert!(page.ends_with("docs/runbooks.md"), "{name}: {url}");
        assert_eq!(anchor, name.to_lowercase(), "{name}: {url}");
        assert!(
            anchors.contains(anchor),
            "docs/runbooks.md has no section `## {name}`"
        );
        for part in ["**Means**", "**Confirm**", "**Do**"] {
            let section = runbooks
                .split(&format!("## {name}\n"))
                .nth(1)
                .and_then(|s| s.split("\n## ").next())
                .unwrap_or_default();
            assert!(section.contains(part), "{name}'s runbook lacks {part}");
        }
    }
}

fn helm_template(values: &[&str]) -> Vec<Value> {
    let helm = std::env::var("QUARTET_HELM_BIN")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/opt/quartet-tools/bin/helm".into());
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(&helm);
    for (k, d) in [
        ("HELM_CONFIG_HOME", "config"),
        ("HELM_CACHE_HOME", "cache"),
        ("HELM_DATA_HOME", "data"),
    ] {
        cmd.env(k, home.path().join(d));
    }
    cmd.args([
        "template",
        "q",
        repo_root().join("charts/quartet").to_str().unwrap(),
    ]);
    for v in values {
        cmd.args(["--set", v]);
    }
    let out = run_ok(&mut cmd);
    serde_yaml::Deserializer::from_str(&out)
        .filter_map(|d| {
            let v: Value = serde::Deserialize::deserialize(d).ok()?;
            (!v.is_null()).then_some(v)
        })
        .collect()
}

#[test]
fn the_chart_renders_its_prometheus_rule_and_dashboard_from_the_tested_files_only_when_enabled() {
    let docs = helm_template(&[]);
    for kind in ["PrometheusRule", "ConfigMap"] {
        assert!(
            !docs.iter().any(|d| d["kind"] == kind),
            "{kind} rendered by default"
        );
    }
    let docs = helm_template(&[
        "prometheusRule.enabled=true",
        "prometheusRule.labels.release=kps",
        "prometheusRule.runbookUrl=https://wiki.example.com/quartet",
        "grafanaDashboard.enabled=true",
    ]);
    let rule = docs
        .iter()
        .find(|d| d["kind"] == "PrometheusRule")
        .expect("PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["labels"]["release"], "kps");
    // The same rules as the file promtool tests, but for the runbook address.
    let mut expected = alerts();
    for g in expected["groups"].as_array_mut().unwrap() {
        for r in g["rules"].as_array_mut().unwrap() {
            let url = r["annotations"]["runbook_url"]
                .as_str()
                .unwrap()
                .to_string();
            let anchor = url.split_once('#').unwrap().1.to_string();
            r["annotations"]["runbook_url"] =
                Value::String(format!("https://wiki.example.com/quartet#{anchor}"));
        }
    }
    assert_eq!(rule["spec"], expected);
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("dashboard ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: Value = serde_json::from_str(cm["data"]["quartet.json"].as_str().unwrap()).unwrap();
    assert_eq!(json, dashboard());
}

#[test]
fn the_charts_change_log_path_becomes_the_flag_and_a_volume_at_its_directory() {
    let docs = helm_template(&["changeLog.path=/var/log/quartet/changes.jsonl"]);
    let deploy = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("Deployment");
    let pod = &deploy["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert!(
        c["args"]
            .as_array()
            .unwrap()
            .contains(&Value::from("--change-log=/var/log/quartet/changes.jsonl")),
        "{c}"
    );
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/var/log/quartet", "{c}");
    assert_eq!(pod["volumes"][0]["name"], c["volumeMounts"][0]["name"]);
    assert!(pod["volumes"][0]["emptyDir"].is_object(), "{pod}");
    let default = helm_template(&[]);
    let deploy = default.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert!(!deploy.to_string().contains("--change-log"));
}

#[test]
fn the_charts_traces_values_become_the_otlp_endpoint_and_otel_variables() {
    let docs = helm_template(&[
        "traces.otlpEndpoint=http://collector:4318",
        "traces.env.OTEL_SERVICE_NAME=quartet-prod",
    ]);
    let deploy = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("Deployment");
    let env = deploy["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .clone();
    let value = |name: &str| {
        env.iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(
        value("OTEL_EXPORTER_OTLP_ENDPOINT"),
        Some(Value::from("http://collector:4318"))
    );
    assert_eq!(
        value("OTEL_SERVICE_NAME"),
        Some(Value::from("quartet-prod"))
    );
    let default = helm_template(&[]);
    let deploy = default.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert!(
        !deploy.to_string().contains("OTEL_"),
        "traces on by default"
    );
}

#[test]
fn the_charts_traces_tls_secret_is_mounted_and_named_by_the_otel_certificate_variables() {
    let env_of = |docs: &[Value]| {
        let deploy = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
        let pod = deploy["spec"]["template"]["spec"].clone();
        let env: BTreeMap<String, String> = pod["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_string(),
                    e["value"].as_str()?.to_string(),
                ))
            })
            .collect();
        (pod, env)
    };
    let docs = helm_template(&[
        "traces.otlpEndpoint=https://collector:4318",
        "traces.tls.secretName=otel-ca",
        "changeLog.path=/var/log/quartet/changes.jsonl",
    ]);
    let (pod, env) = env_of(&docs);
    assert_eq!(
        env.get("OTEL_EXPORTER_OTLP_CERTIFICATE")
            .map(String::as_str),
        Some("/etc/quartet/otlp-tls/ca.crt")
    );
    assert!(
        !env.contains_key("OTEL_EXPORTER_OTLP_CLIENT_KEY"),
        "{env:?}"
    );
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["secret"]["secretName"] == "otel-ca")
        .expect("the Secret's volume");
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    let mount = mounts
        .iter()
        .find(|m| m["name"] == volume["name"])
        .expect("its mount");
    assert_eq!(mount["mountPath"], "/etc/quartet/otlp-tls");
    assert_eq!(mount["readOnly"], true);
    // The change log's volume is still there beside it.
    assert_eq!(mounts.len(), 2, "{mounts:?}");
    let (_, env) = env_of(&helm_template(&[
        "traces.otlpEndpoint=https://collector:4317",
        "traces.tls.secretName=otel-mtls",
        "traces.tls.clientCertificate=true",
    ]));
    assert_eq!(
        env.get("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
            .map(String::as_str),
        Some("/etc/quartet/otlp-tls/tls.crt")
    );
    assert_eq!(
        env.get("OTEL_EXPORTER_OTLP_CLIENT_KEY").map(String::as_str),
        Some("/etc/quartet/otlp-tls/tls.key")
    );
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(repo_root().join("charts/quartet/files/dashboard.json"))
        .expect("read dashboard.json");
    serde_json::from_str(&text).expect("dashboard.json is JSON")
}

/// Every PromQL query of the dashboard: (panel title, expression).
fn panel_queries() -> Vec<(String, String)> {
    dashboard()["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap_or_default().to_string();
            p["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |t| (title.clone(), t["expr"].as_str().unwrap().to_string()))
        })
        .collect()
}

struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// A real Prometheus on a loopback port scraping `target` every second, with the chart's
    /// alert rules loaded.
    fn start(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                 rule_files: [{:?}]\n\
                 scrape_configs:\n  - job_name: quartet\n    static_configs: [{{targets: [{target:?}]}}]\n",
                alerts_file().display().to_string()
            ),
        )
        .unwrap();
        let child = Command::new(tool("prometheus", "QUARTET_PROMETHEUS_BIN"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("start prometheus: {e}: {INSTALL}"));
        let url = format!("http://127.0.0.1:{port}");
        let p = Prometheus {
            child,
            url,
            _dir: dir,
        };
        wait_for("Prometheus ready", Duration::from_secs(30), || {
            let ok = reqwest::blocking::get(format!("{}/-/ready", p.url))
                .is_ok_and(|r| r.status().is_success());
            ok.then_some(())
        });
        p
    }

    fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let resp = reqwest::blocking::Client::new()
            .get(format!("{}/api/v1/{path}", self.url))
            .query(query)
            .timeout(Duration::from_secs(10))
            .send()
            .expect("Prometheus API");
        let body: Value = resp.json().expect("JSON");
        assert_eq!(body["status"], "success", "{path} {query:?}: {body}");
        body["data"].clone()
    }

    /// The number of series `expr` returns now.
    fn series(&self, expr: &str) -> usize {
        self.api("query", &[("query", expr)])["result"]
            .as_array()
            .map_or(0, Vec::len)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_prometheus_scraping_the_operator_answers_every_dashboard_query_with_a_series() {
    let started = Instant::now();
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    // A Connection with a small budget (2 calls/s, 1/s for resyncs) and enough policies that
    // calls queue for it and resyncs are deferred; a Connection whose login is refused; and a
    // policy naming a Connection that does not exist (a reconcile error, a resource not Ready).
    let mut yaml = format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: slow, namespace: default}}\n\
         spec: {{service: secrets, address: \"{url}\", tokenSecretRef: {{name: secrets-token, key: token}}, requestsPerSecond: 2}}\n\
         ---\napiVersion: v1\nkind: Secret\nmetadata: {{name: login, namespace: default}}\nstringData: {{password: not-the-password}}\n\
         ---\napiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: login, namespace: default}}\n\
         spec: {{service: secrets, address: \"{url}\", timeoutSeconds: 5, auth: {{idp: {{username: nobody, passwordSecretRef: {{name: login, key: password}}}}}}}}\n\
         ---\napiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: orphan, namespace: default}}\n\
         spec: {{type: acl, policy: \"path \\\"o/*\\\" {{ capabilities = [\\\"read\\\"] }}\", connectionRef: {{name: nowhere}}}}\n",
        url = sb.url("secrets")
    );
    for i in 0..6 {
        yaml.push_str(&format!(
            "---\napiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: p{i}, namespace: default}}\n\
             spec: {{type: acl, policy: \"path \\\"p{i}/*\\\" {{ capabilities = [\\\"read\\\"] }}\", connectionRef: {{name: slow}}}}\n"
        ));
    }
    sb.apply_ok(&yaml);
    let op = Operator::start(&sb, "2s");
    let prom = Prometheus::start(&op.metrics_addr());
    // The alert rules the chart ships load into a real Prometheus.
    let groups = prom.api("rules", &[]);
    let loaded = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().map_or(0, Vec::len))
        .sum::<usize>();
    assert_eq!(loaded, rules(&alerts()).len(), "{groups}");

    let queries = panel_queries();
    assert!(queries.len() >= 12, "{queries:?}");
    let mut missing = queries.clone();
    let deadline = Instant::now() + Duration::from_secs(90);
    while !missing.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(2));
        // Grafana's $__rate_interval is at least four scrape intervals; 30s is plenty at 1s.
        missing.retain(|(_, expr)| prom.series(&expr.replace("$__rate_interval", "30s")) == 0);
    }
    assert!(
        missing.is_empty(),
        "dashboard queries without a series after {:?}: {missing:#?}\noperator log tail:\n{}",
        started.elapsed(),
        op.log()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "all {} dashboard queries answered after {:.1}s",
        queries.len(),
        started.elapsed().as_secs_f64()
    );
    // The one replica runs the controllers, and says so.
    assert_eq!(prom.series("quartet_leader == 1"), 1);
    // The shard panels join on the scrape's `instance` (this scrape has no `pod` label) and
    // name the default instance's series.
    for title in ["Reconciles by shard", "Resources not Ready by shard"] {
        let (_, expr) = queries.iter().find(|(t, _)| t == title).expect(title);
        let result = prom.api(
            "query",
            &[("query", &expr.replace("$__rate_interval", "30s"))],
        );
        assert_eq!(
            result["result"].as_array().map(|r| r
                .iter()
                .map(|s| s["metric"]["shard"].clone())
                .collect::<Vec<_>>()),
            Some(vec![Value::from("(default)")]),
            "{title}: {result}"
        );
    }
    assert_eq!(
        prom.series(r#"quartet_resource_ready{kind="SecretsPolicy", name="orphan"} == 0"#),
        1
    );
    assert_eq!(
        prom.series(r#"quartet_resource_ready{kind="Connection", name="login"} == 0"#),
        1
    );
    drop(prom);
    op.stop();
}

/// The operator's writes to the secrets service for paths containing `needle`: (method, path).
fn writes(sb: &Sandbox, ranges: &[(u64, u64)], needle: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (from, to) in ranges {
        let (items, _) = sb.requests("secrets", *from);
        // The log is in order; `to` is where the next range's caller stepped in.
        let n = (to - from) as usize;
        out.extend(
            items
                .into_iter()
                .take(n)
                .filter(|(m, p, _)| {
                    !["GET", "LIST", "HEAD"].contains(&m.as_str()) && p.contains(needle)
                })
                .map(|(m, p, _)| (m, p)),
        );
    }
    out
}

#[test]
fn every_write_of_a_secrets_policy_has_one_change_record_an_event_and_no_secret_value() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    let log = sb.dir.path().join("changes.jsonl");
    let op = Operator::start_with(&sb, "2s", &["--change-log", log.to_str().unwrap()]);
    let (_, start) = sb.requests("secrets", 0);
    let policy = |cap: &str| {
        format!(
            "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: audited, namespace: default}}\n\
             spec: {{type: acl, policy: \"path \\\"audit/*\\\" {{ capabilities = [\\\"{cap}\\\"] }}\"}}\n"
        )
    };
    let ready_at = |generation: i64| {
        move |o: &Value| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"].as_i64() == Some(generation)
        }
    };
    let wait = Duration::from_secs(60);
    // Create, then a spec change.
    sb.apply_ok(&policy("read"));
    wait_for("created", wait, || {
        sb.get_json("secretspolicy", "audited").filter(ready_at(1))
    });
    sb.apply_ok(&policy("list"));
    wait_for("updated", wait, || {
        sb.get_json("secretspolicy", "audited").filter(ready_at(2))
    });
    // Drift: the policy is changed behind the operator's back (this write is the test's, not
    // the operator's: it is left out of the count), and the resync restores it.
    let (_, before_drift) = sb.requests("secrets", start);
    let (status, _) = sb.secrets(
        "PUT",
        "/v1/sys/policies/acl/audited",
        Some(serde_json::json!({"policy": "path \"x/*\" { capabilities = [\"deny\"] }"})),
    );
    assert_eq!(status, 204);
    let (_, after_drift) = sb.requests("secrets", before_drift);
    wait_for("drift repaired", wait, || {
        let (_, body) = sb.secrets("GET", "/v1/sys/policies/acl/audited", None);
        body["data"]["policy"]
            .as_str()
            .is_some_and(|p| p.contains("audit/*"))
            .then_some(())
    });
    sb.kubectl_ok(&["delete", "secretspolicy", "audited", "--timeout=60s"]);
    let (_, end) = sb.requests("secrets", after_drift);
    let made = writes(
        &sb,
        &[(start, before_drift), (after_drift, end)],
        "policies/acl/audited",
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .filter(|r: &Value| r["resource"]["name"] == "audited")
        .collect();
    assert_eq!(
        records.len(),
        made.len(),
        "one record per write: writes {made:#?}\nrecords {records:#?}"
    );
    let triggers: BTreeSet<&str> = records
        .iter()
        .map(|r| r["trigger"].as_str().unwrap())
        .collect();
    for t in ["create", "spec-change", "drift-repair", "deletion"] {
        assert!(triggers.contains(t), "no {t} record: {records:#?}");
    }
    for r in &records {
        assert_eq!(r["resource"]["kind"], "SecretsPolicy");
        assert_eq!(r["resource"]["namespace"], "default");
        assert!(!r["resource"]["uid"].as_str().unwrap().is_empty(), "{r}");
        assert_eq!(r["service"], "secrets");
        assert_eq!(r["connection"], "default/secrets");
        assert_eq!(r["path"], "/v1/sys/policies/acl/{name}", "{r}");
        assert!(
            r["status"]
                .as_u64()
                .is_some_and(|s| (200..300).contains(&s)),
            "{r}"
        );
    }
    let puts: Vec<&Value> = records.iter().filter(|r| r["method"] == "PUT").collect();
    assert!(
        puts.iter()
            .all(|r| r["fields"] == serde_json::json!(["policy"])),
        "{puts:#?}"
    );
    // Names, never values: neither the token nor the policy text is in the log.
    assert!(
        !text.contains(&sb.root_token),
        "the token is in the change log"
    );
    assert!(
        !text.contains("capabilities"),
        "a field value is in the change log"
    );
    let log = op.stop();
    assert!(
        log.contains("quartet::changes"),
        "no record on the log target"
    );
    assert!(!log.contains(&sb.root_token));
    // One Event per pass that wrote, listing its writes: the pass's own Event (Created,
    // Updated, DriftCorrected, Deleted), not a second `Changed` Event next to it.
    let events = sb.kubectl_ok(&["get", "events", "-o", "json"]);
    let events: Value = serde_json::from_str(&events).unwrap();
    let listed: std::collections::BTreeMap<String, String> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "audited")
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("write(s) to secrets through default/secrets"))
        })
        .map(|e| {
            (
                e["reason"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (reason, path) in [
        ("Created", "(create): PUT /v1/sys/policies/acl/{name} 20"),
        (
            "Updated",
            "(spec-change): PUT /v1/sys/policies/acl/{name} 20",
        ),
        (
            "DriftCorrected",
            "(drift-repair): PUT /v1/sys/policies/acl/{name} 20",
        ),
        (
            "Deleted",
            "(deletion): DELETE /v1/sys/policies/acl/{name} 20",
        ),
    ] {
        assert!(
            listed.get(reason).is_some_and(|m| m.contains(path)),
            "no {reason} Event listing {path:?}: {listed:#?}"
        );
    }
    assert!(
        !listed.contains_key("Changed"),
        "a second Event for the same write: {listed:#?}"
    );
}

/// A Secret the spec references changes (the auth method's API token): the new value is sent
/// once, recorded as `secret-change`, told by an `Updated` Event, never as drift "restored"; and
/// under `driftPolicy: Report` it is sent too, since a Secret's new value is not drift. With
/// `--log-format json` the record is a JSON object in the log line's `change` field.
#[test]
fn a_changed_secret_is_sent_as_a_secret_change_not_as_drift_even_when_drift_is_only_reported() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    let log = sb.dir.path().join("changes.jsonl");
    let op = Operator::start_with(
        &sb,
        "2s",
        &[
            "--change-log",
            log.to_str().unwrap(),
            "--log-format",
            "json",
        ],
    );
    let token = |value: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: idp-token, namespace: default}}\nstringData: {{token: {value}}}\n")
    };
    let method = |policy: &str| {
        format!(
            "apiVersion: secrets.quartet.dev/v1alpha1\nkind: IdpAuthMethod\nmetadata: {{name: idp, namespace: default}}\n\
             spec: {{orgName: example, enableMount: true, driftPolicy: {policy}, apiTokenSecretRef: {{name: idp-token, key: token}}}}\n"
        )
    };
    let wait = Duration::from_secs(60);
    sb.apply_ok(&token("first-api-token-1"));
    sb.apply_ok(&method("Correct"));
    let hash_of = |o: &Value| o["status"]["writeOnlyHash"].as_str().map(str::to_string);
    let first = wait_for("configured", wait, || {
        sb.get_json("idpauthmethod", "idp")
            .filter(|o| condition_is(o, "Ready", "True"))
            .and_then(|o| hash_of(&o))
    });
    let config_writes = |since: u64| {
        let (items, _) = sb.requests("secrets", since);
        items
            .iter()
            .filter(|(m, p, _)| m != "GET" && p.ends_with("/auth/idp/config"))
            .count()
    };
    // The Secret changes: one write sends it.
    let (_, before) = sb.requests("secrets", 0);
    sb.apply_ok(&token("second-api-token-2"));
    let second = wait_for("the new token sent", wait, || {
        sb.get_json("idpauthmethod", "idp")
            .and_then(|o| hash_of(&o))
            .filter(|h| *h != first)
    });
    assert_eq!(
        config_writes(before),
        1,
        "the new token was not sent exactly once"
    );
    // Under driftPolicy: Report it is sent as well.
    sb.apply_ok(&method("Report"));
    wait_for("Report in force", wait, || {
        sb.get_json("idpauthmethod", "idp").filter(|o| {
            o["status"]["observedGeneration"].as_i64() == o["metadata"]["generation"].as_i64()
                && condition_is(o, "Ready", "True")
        })
    });
    let (_, before) = sb.requests("secrets", 0);
    sb.apply_ok(&token("third-api-token-3"));
    wait_for("the third token sent under Report", wait, || {
        sb.get_json("idpauthmethod", "idp")
            .and_then(|o| hash_of(&o))
            .filter(|h| *h != second)
    });
    assert_eq!(config_writes(before), 1);
    let obj = sb.get_json("idpauthmethod", "idp").unwrap();
    assert!(
        !condition_is(&obj, "Drifted", "True"),
        "a changed Secret reported as drift: {obj}"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .filter(|r: &Value| r["resource"]["kind"] == "IdpAuthMethod")
        .collect();
    let triggers: Vec<&str> = records
        .iter()
        .map(|r| r["trigger"].as_str().unwrap())
        .collect();
    assert_eq!(
        triggers.iter().filter(|t| **t == "secret-change").count(),
        2,
        "{records:#?}"
    );
    assert!(!triggers.contains(&"drift-repair"), "{records:#?}");
    for secret in [
        "first-api-token-1",
        "second-api-token-2",
        "third-api-token-3",
    ] {
        assert!(!text.contains(secret), "a token is in the change log");
    }
    let events = sb.kubectl_ok(&["get", "events", "-o", "json"]);
    let events: Value = serde_json::from_str(&events).unwrap();
    let reasons: Vec<(String, String)> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["kind"] == "IdpAuthMethod")
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        !reasons.iter().any(|(r, _)| r == "DriftCorrected"),
        "a changed Secret told as drift restored: {reasons:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(r, m)| r == "Updated" && m.contains("(secret-change)")),
        "no Updated Event listing the secret-change write: {reasons:#?}"
    );
    // The JSON log line carries the record as an object.
    let log = op.stop();
    let line: Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| {
            l["target"] == "quartet::changes" && l["fields"]["change"]["trigger"] == "secret-change"
        })
        .unwrap_or_else(|| panic!("no JSON change line with the record as an object:\n{log}"));
    assert_eq!(
        line["fields"]["change"]["resource"]["kind"],
        "IdpAuthMethod"
    );
    assert!(line["fields"]["message"]
        .as_str()
        .unwrap()
        .contains("(secret-change)"));
    for secret in [
        "first-api-token-1",
        "second-api-token-2",
        "third-api-token-3",
    ] {
        assert!(!log.contains(secret), "a token is in the operator's log");
    }
}

#[test]
fn every_write_of_a_totp_enrollment_and_its_method_has_one_change_record_without_the_seed() {
    use base64::Engine;
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    let (status, body) = sb.secrets(
        "POST",
        "/v1/identity/entity",
        Some(serde_json::json!({"name": "dora"})),
    );
    assert!(status < 300, "{body}");
    let log = sb.dir.path().join("changes.jsonl");
    let (_, start) = sb.requests("secrets", 0);
    let op = Operator::start_with(&sb, "5m", &["--change-log", log.to_str().unwrap()]);
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpMethod\nmetadata: {name: corp, namespace: default}\nspec: {issuer: Corp}\n---\n\
         apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpEnrollment\nmetadata: {name: dora, namespace: default}\n\
         spec: {methodRef: {name: corp}, entityName: dora}\n",
    );
    let wait = Duration::from_secs(60);
    for kind in ["totp", "totpenroll"] {
        wait_for(&format!("{kind} Ready"), wait, || {
            sb.get_json(kind, if kind == "totp" { "corp" } else { "dora" })
                .filter(|o| condition_is(o, "Ready", "True"))
        });
    }
    let url = wait_for("the enrollment's Secret", wait, || {
        let s = sb.get_json("secret", "dora")?;
        let b = base64::engine::general_purpose::STANDARD
            .decode(s["data"]["url"].as_str()?)
            .ok()?;
        String::from_utf8(b).ok()
    });
    let seed = url
        .split_once("secret=")
        .map(|(_, s)| s.split('&').next().unwrap_or_default().to_string())
        .expect("a seed in the url");
    assert!(seed.len() >= 16, "{url}");
    sb.kubectl_ok(&["delete", "totpenrollment", "dora", "--timeout=60s"]);
    sb.kubectl_ok(&["delete", "totpmethod", "corp", "--timeout=60s"]);
    let (_, end) = sb.requests("secrets", start);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let of = |kind: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| r["resource"]["kind"] == kind)
            .collect()
    };
    let totp_writes = writes(&sb, &[(start, end)], "identity/mfa/method/totp");
    let (enrolling, method): (Vec<_>, Vec<_>) =
        totp_writes.iter().partition(|(_, p)| p.contains("/admin-"));
    assert_eq!(
        of("TotpEnrollment").len(),
        enrolling.len(),
        "writes {enrolling:#?}\nrecords {records:#?}"
    );
    assert!(
        enrolling.len() >= 2,
        "admin-generate and admin-destroy: {enrolling:?}"
    );
    assert_eq!(
        of("TotpMethod").len(),
        method.len(),
        "writes {method:#?}\nrecords {records:#?}"
    );
    let triggers: BTreeSet<&str> = of("TotpEnrollment")
        .iter()
        .map(|r| r["trigger"].as_str().unwrap())
        .collect();
    assert!(
        triggers.contains("create") && triggers.contains("deletion"),
        "{triggers:?}"
    );
    for r in of("TotpEnrollment") {
        let path = r["path"].as_str().unwrap();
        assert!(path.contains("/admin-"), "{r}");
        assert!(!path.contains("dora"), "{r}");
    }
    // The seed (the Secret's value) and the token are nowhere in the change log.
    assert!(!text.contains(&seed), "the TOTP seed is in the change log");
    assert!(!text.contains("otpauth"), "the url is in the change log");
    assert!(
        !text.contains(&sb.root_token),
        "the token is in the change log"
    );
    let log = op.stop();
    assert!(!log.contains(&seed), "the TOTP seed is in the operator log");
}

#[test]
fn every_write_of_a_catalog_bootstrap_has_one_change_record_without_the_management_token() {
    use base64::Engine;
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    sb.apply_ok(&format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: catalog, namespace: default}}\n\
         spec: {{service: catalog, address: \"{}\", tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 10}}\n",
        sb.url("catalog")
    ));
    let log = sb.dir.path().join("changes.jsonl");
    let (_, start) = sb.requests("catalog", 0);
    let op = Operator::start_with(&sb, "5m", &["--change-log", log.to_str().unwrap()]);
    sb.apply_ok(
        "apiVersion: catalog.quartet.dev/v1alpha1\nkind: CatalogAclBootstrap\nmetadata: {name: boot, namespace: default}\n\
         spec: {secretName: boot-token}\n",
    );
    let wait = Duration::from_secs(60);
    wait_for("bootstrap Ready", wait, || {
        sb.get_json("catalogaclbootstrap", "boot")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    let token = wait_for("the management token", wait, || {
        let s = sb.get_json("secret", "boot-token")?;
        let b = base64::engine::general_purpose::STANDARD
            .decode(s["data"]["token"].as_str()?)
            .ok()?;
        String::from_utf8(b).ok()
    });
    sb.kubectl_ok(&["delete", "catalogaclbootstrap", "boot", "--timeout=60s"]);
    let (items, _) = sb.requests("catalog", start);
    let made: Vec<(String, String)> = items
        .into_iter()
        .filter(|(m, _, _)| !["GET", "LIST", "HEAD"].contains(&m.as_str()))
        .map(|(m, p, _)| (m, p))
        .collect();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .filter(|r: &Value| r["service"] == "catalog")
        .collect();
    assert!(!made.is_empty(), "the bootstrap made no write");
    assert_eq!(
        records.len(),
        made.len(),
        "one record per write: writes {made:#?}\nrecords {records:#?}"
    );
    for r in &records {
        assert_eq!(r["resource"]["kind"], "CatalogAclBootstrap", "{r}");
        assert_eq!(r["connection"], "default/catalog", "{r}");
    }
    assert!(
        records.iter().any(|r| r["path"] == "/v1/acl/bootstrap"),
        "{records:#?}"
    );
    // The token the bootstrap returned (the Secret's value) is nowhere in the change log.
    assert!(
        !text.contains(&token),
        "the management token is in the change log"
    );
    let log = op.stop();
    assert!(
        !log.contains(&token),
        "the management token is in the operator log"
    );
}

#[test]
fn every_write_of_workspaces_created_and_adopted_has_one_change_record_without_a_variable_value() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_workspaces();
    // Already in the service: the operator adopts it.
    sb.create_remote_workspace("legacy", serde_json::json!({"description": "before"}));
    let log = sb.dir.path().join("changes.jsonl");
    let (_, start) = sb.requests("workspaces", 0);
    let op = Operator::start_with(&sb, "5m", &["--change-log", log.to_str().unwrap()]);
    sb.apply_ok(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: app-vars, namespace: default}\nstringData: {password: s3cret-one}\n---\n\
         apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: app, namespace: default}\n\
         spec:\n  description: the app\n  variables:\n    - {key: region, value: eu-west-1}\n    - key: password\n      sensitive: true\n      \
         valueFrom: {secretKeyRef: {name: app-vars, key: password}}\n---\n\
         apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: legacy, namespace: default}\nspec: {description: adopted}\n",
    );
    let wait = Duration::from_secs(60);
    for name in ["app", "legacy"] {
        wait_for(&format!("{name} Ready"), wait, || {
            sb.get_json("workspace", name)
                .filter(|o| condition_is(o, "Ready", "True"))
        });
    }
    sb.kubectl_ok(&["delete", "workspace", "app", "legacy", "--timeout=60s"]);
    let (items, _) = sb.requests("workspaces", start);
    let made: Vec<(String, String)> = items
        .into_iter()
        .filter(|(m, p, _)| m != "GET" && p.starts_with("/api/v2"))
        .map(|(m, p, _)| (m, p))
        .collect();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .filter(|r: &Value| r["service"] == "workspaces")
        .collect();
    assert_eq!(
        records.len(),
        made.len(),
        "one record per write: writes {made:#?}\nrecords {records:#?}"
    );
    let trigger_of = |name: &str| -> BTreeSet<String> {
        records
            .iter()
            .filter(|r| r["resource"]["name"] == name)
            .map(|r| r["trigger"].as_str().unwrap().to_string())
            .collect()
    };
    let app = trigger_of("app");
    assert!(
        app.contains("create") && app.contains("deletion"),
        "{app:?}"
    );
    let legacy = trigger_of("legacy");
    assert!(legacy.contains("adoption"), "{legacy:?}\n{records:#?}");
    for r in &records {
        assert_eq!(r["resource"]["kind"], "Workspace", "{r}");
        assert!(!r["path"].as_str().unwrap().contains("ws-"), "an id in {r}");
    }
    // Neither the sensitive variable's value nor the token is in the change log.
    assert!(
        !text.contains("s3cret-one"),
        "a variable value is in the change log"
    );
    assert!(
        !text.contains("eu-west-1"),
        "a variable value is in the change log"
    );
    assert!(
        !text.contains(&sb.root_token),
        "the token is in the change log"
    );
    op.stop();
}
