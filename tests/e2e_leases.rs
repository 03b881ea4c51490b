//! `quartet leases` against a secrets server: every verb, through an address and
//! `QUARTET_TOKEN` and through a Connection in the dev cluster.
//!
//! The scenarios whose behaviour is the same on both servers run from one body against both
//! backends: `<scenario>::sandbox` against the sandbox, `<scenario>::openbao` against a real
//! OpenBao 2.7.2 (one `bao server -dev -dev-leased-kv` per test binary, see `support::openbao`).
//! Leases are real on both: logins make them (the sandbox's identity-provider auth method,
//! OpenBao's `userpass`), and renewable non-token leases come from the sandbox's lease admin API
//! or OpenBao's leased KV reads. Irrevocable leases exist only in the sandbox (OpenBao has no way
//! to make one on purpose), so those scenarios are the sandbox's alone.

use crate::support;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::openbao::{on_both_backends, Backend};
use support::*;

on_both_backends!(
    lookup_and_list_show_the_leases_of_logins,
    renew_with_and_without_increment_extends_a_lease_and_token_leases_are_refused_with_the_servers_message,
    revoke_prefix_lists_counts_and_asks_before_revoking,
    revoke_and_revoke_force_remove_leases_and_yes_skips_the_question,
    count_irrevocable_and_tidy_answer_on_a_server_with_no_irrevocable_lease,
    a_connection_in_the_cluster_supplies_address_token_and_token_header,
);

/// The OpenBao server of this test binary: `secret/` makes renewable leases.
fn bao() -> &'static openbao::OpenBao {
    static BAO: OnceLock<openbao::OpenBao> = OnceLock::new();
    BAO.get_or_init(|| openbao::OpenBao::start_with(&["-dev-leased-kv"]))
}

/// A secrets server as the CLI and the test reach it.
struct Server {
    /// The sandbox: its secrets service, or (for OpenBao) only its dev API server.
    sb: Sandbox,
    backend: Backend,
    url: String,
    header: &'static str,
    token: String,
}

impl Server {
    fn start(backend: Backend) -> Server {
        let sb = Sandbox::start(&[]);
        match backend {
            Backend::Sandbox => Server {
                url: sb.url("secrets").to_string(),
                header: "X-Secrets-Token",
                token: sb.root_token.clone(),
                sb,
                backend,
            },
            Backend::OpenBao => Server {
                url: bao().addr.clone(),
                header: "X-Vault-Token",
                token: bao().root_token.clone(),
                sb,
                backend,
            },
        }
    }

    /// A call with the root token; `path` starts with `/v1/`.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http(
            method,
            &format!("{}{path}", self.url),
            Some((self.header, &self.token)),
            body,
        )
    }

    /// `quartet leases --address ... --token-header ...` with the root token in the
    /// environment.
    fn leases(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(BIN)
            .arg("leases")
            .args(["--address", &self.url, "--token-header", self.header])
            .args(args)
            .env("QUARTET_TOKEN", &self.token)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start quartet leases");
        if let Some(input) = stdin {
            let _ = child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes());
        }
        drop(child.stdin.take());
        child.wait_with_output().expect("quartet leases")
    }

    /// A new user logs in `count` times; returns the login path (the prefix its leases live
    /// under) and the lease IDs. The sandbox's users log in through its identity-provider auth
    /// method, OpenBao's through `userpass`.
    fn login_leases(&self, user: &str, count: usize) -> (String, Vec<String>) {
        let user = format!("{user}-{:08x}", rand::random::<u32>());
        let login = match self.backend {
            Backend::Sandbox => {
                let (status, body) = self.call(
                    "POST",
                    "/v1/auth/idp/config",
                    Some(json!({"org_name": "acme", "token_ttl": "1h"})),
                );
                assert!(status < 300, "idp config: {body}");
                let (status, body) = http(
                    "PUT",
                    &format!("{}/_sandbox/secrets/idp/users/{user}", self.url),
                    None,
                    Some(json!({"password": "pw"})),
                );
                assert!(status < 300, "provider user: {body}");
                format!("auth/idp/login/{user}")
            }
            Backend::OpenBao => {
                // Another test may have enabled it already.
                self.call(
                    "POST",
                    "/v1/sys/auth/userpass",
                    Some(json!({"type": "userpass"})),
                );
                let (status, body) = self.call(
                    "POST",
                    &format!("/v1/auth/userpass/users/{user}"),
                    Some(json!({"password": "pw", "token_ttl": "1h"})),
                );
                assert!(status < 300, "userpass user: {body}");
                format!("auth/userpass/login/{user}")
            }
        };
        for _ in 0..count {
            let (status, body) = http(
                "POST",
                &format!("{}/v1/{login}", self.url),
                None,
                Some(json!({"password": "pw"})),
            );
            assert_eq!(status, 200, "login: {body}");
        }
        let (status, body) = self.call("LIST", &format!("/v1/sys/leases/lookup/{login}/"), None);
        assert_eq!(status, 200, "lease list: {body}");
        let ids: Vec<String> = body["data"]["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| format!("{login}/{}", k.as_str().unwrap()))
            .collect();
        assert_eq!(ids.len(), count, "{ids:?}");
        (login, ids)
    }

    /// `count` renewable leases that are not tokens: the sandbox's lease admin API, OpenBao's
    /// leased KV reads.
    fn renewable_leases(&self, count: usize) -> Vec<String> {
        let name = format!("app-{:08x}", rand::random::<u32>());
        match self.backend {
            Backend::Sandbox => {
                let (status, body) = http(
                    "POST",
                    &format!("{}/_sandbox/secrets/leases", self.url),
                    None,
                    Some(
                        json!({"prefix": format!("ad/library/{name}/check-out/"), "count": count, "ttl": 3600, "irrevocable": false}),
                    ),
                );
                assert!(status < 300, "admin leases: {status} {body}");
                body["lease_ids"]
                    .as_array()
                    .expect("lease_ids")
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            }
            Backend::OpenBao => {
                let (status, body) = self.call(
                    "POST",
                    &format!("/v1/secret/{name}"),
                    Some(json!({"password": "x", "ttl": "1h"})),
                );
                assert!(status < 300, "kv write: {body}");
                (0..count)
                    .map(|_| {
                        let (status, body) = self.call("GET", &format!("/v1/secret/{name}"), None);
                        assert_eq!(status, 200, "kv read: {body}");
                        body["lease_id"]
                            .as_str()
                            .expect("a leased read")
                            .to_string()
                    })
                    .collect()
            }
        }
    }

    fn lookup_status(&self, id: &str) -> u16 {
        self.call(
            "PUT",
            "/v1/sys/leases/lookup",
            Some(json!({"lease_id": id})),
        )
        .0
    }
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "quartet leases failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn lookup_and_list_show_the_leases_of_logins(backend: Backend) {
    let s = Server::start(backend);
    let (login, ids) = s.login_leases("lister", 3);
    let out = ok(&s.leases(&["-o", "json", "lookup", &ids[0]], None));
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["id"], ids[0]);
    assert_eq!(v["path"], login.as_str());
    assert!(v["ttl"].as_i64().unwrap() > 0);
    let table = ok(&s.leases(&["lookup", &ids[0]], None));
    assert!(table.contains(&ids[0]), "{table}");

    // Listing a parent prefix walks down to the leases.
    let parent = login.rsplit_once('/').unwrap().0;
    let listed = ok(&s.leases(&["list", parent], None));
    for id in &ids {
        assert!(listed.lines().any(|l| l == id), "{id} not in {listed}");
    }
    let listed = ok(&s.leases(&["-o", "json", "list", &login], None));
    let v: Value = serde_json::from_str(&listed).expect("json");
    let mut want = ids.clone();
    want.sort();
    assert_eq!(v["keys"], json!(want));
}

fn renew_with_and_without_increment_extends_a_lease_and_token_leases_are_refused_with_the_servers_message(
    backend: Backend,
) {
    let s = Server::start(backend);
    let ids = s.renewable_leases(2);
    let renewed = ok(&s.leases(
        &["-o", "json", "renew", &ids[0], "--increment", "10m"],
        None,
    ));
    let v: Value = serde_json::from_str(&renewed).expect("json");
    assert_eq!(v["lease_id"], ids[0]);
    assert_eq!(v["renewable"], true, "{v}");
    let d = v["lease_duration"].as_i64().unwrap();
    assert!(d > 0 && d <= 600, "asked for 10m: {v}");
    let renewed = ok(&s.leases(&["-o", "json", "renew", &ids[1]], None));
    let v: Value = serde_json::from_str(&renewed).expect("json");
    assert_eq!(v["lease_id"], ids[1]);
    assert!(v["lease_duration"].as_i64().unwrap() > 0, "{v}");
    let table = ok(&s.leases(&["renew", &ids[1], "--increment", "60"], None));
    assert!(table.contains(&ids[1]), "{table}");

    // A login's lease is a token's: the server renews tokens through the token store only.
    let (_, tokens) = s.login_leases("renewer", 1);
    for args in [
        vec!["renew", &tokens[0]],
        vec!["renew", &tokens[0], "--increment", "2h"],
    ] {
        let out = s.leases(&args, None);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("tokens cannot be renewed through this endpoint"),
            "{err}"
        );
    }
}

fn revoke_prefix_lists_counts_and_asks_before_revoking(backend: Backend) {
    let s = Server::start(backend);
    let (login, ids) = s.login_leases("ops", 3);
    // Answering no revokes nothing (a trailing slash, as listings hand out, is fine).
    let with_slash = format!("{login}/");
    let out = s.leases(&["revoke-prefix", &with_slash], Some("n\n"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("3 lease(s) under {login}")), "{err}");
    assert!(err.contains("nothing was revoked"), "{err}");
    assert!(ids.iter().all(|id| s.lookup_status(id) == 200));
    // Answering yes revokes them all (the trailing slash is dropped: the real server refuses a
    // path ending in '/').
    ok(&s.leases(&["revoke-prefix", &with_slash], Some("y\n")));
    assert!(ids.iter().all(|id| s.lookup_status(id) == 400));
    let listed = ok(&s.leases(&["list", &login], None));
    assert_eq!(listed.trim(), "", "leases left: {listed}");
}

fn revoke_and_revoke_force_remove_leases_and_yes_skips_the_question(backend: Backend) {
    let s = Server::start(backend);
    let (login, ids) = s.login_leases("one", 2);
    ok(&s.leases(&["revoke", &ids[0]], None));
    assert_eq!(s.lookup_status(&ids[0]), 400);
    assert_eq!(s.lookup_status(&ids[1]), 200);
    ok(&s.leases(&["revoke-force", &login, "--yes"], None));
    assert_eq!(s.lookup_status(&ids[1]), 400);
    // Revoke-prefix with --yes does not ask either.
    let (login, ids) = s.login_leases("two", 2);
    ok(&s.leases(&["revoke-prefix", &login, "--yes"], None));
    assert!(ids.iter().all(|id| s.lookup_status(id) == 400));
}

/// Neither a fresh sandbox nor OpenBao has an irrevocable lease.
fn count_irrevocable_and_tidy_answer_on_a_server_with_no_irrevocable_lease(backend: Backend) {
    let s = Server::start(backend);
    s.login_leases("counted", 2);
    let count = ok(&s.leases(&["-o", "json", "count", "--irrevocable"], None));
    let v: Value = serde_json::from_str(&count).expect("json");
    assert_eq!(v["lease_count"], 0, "{v}");
    let table = ok(&s.leases(&["count", "--irrevocable"], None));
    assert!(table.contains("irrevocable leases: 0"), "{table}");
    let all = ok(&s.leases(&["irrevocable", "--limit", "none"], None));
    assert_eq!(all.lines().count(), 1, "only the header: {all}");
    let tidy = ok(&s.leases(&["tidy"], None));
    assert!(
        tidy.contains("Tidy operation successfully started"),
        "{tidy}"
    );
}

fn a_connection_in_the_cluster_supplies_address_token_and_token_header(backend: Backend) {
    let s = Server::start(backend);
    let sb = &s.sb;
    sb.install_crds();
    match backend {
        Backend::Sandbox => sb.connect_secrets(&sb.root_token.clone()),
        Backend::OpenBao => sb.apply_ok(&bao().connection_yaml("secrets", "default")),
    }
    let (_, ids) = s.login_leases("viaconn", 1);
    let out = Command::new(BIN)
        .args([
            "leases",
            "--connection",
            "default/secrets",
            "--kubeconfig",
            sb.kubeconfig.to_str().unwrap(),
            "-o",
            "json",
            "lookup",
            &ids[0],
        ])
        .env_remove("QUARTET_TOKEN")
        .output()
        .expect("quartet leases");
    let text = ok(&out);
    let v: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["id"], ids[0]);
    assert!(!text.contains(&s.token));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&s.token));
}

// ---------------------------------------------------------------------------------------------
// The sandbox's own: irrevocable leases, refused prefixes.

fn leases(sb: &Sandbox, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .arg("leases")
        .args(["--address", sb.url("secrets")])
        .args(args)
        .env("QUARTET_TOKEN", &sb.root_token)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start quartet leases");
    if let Some(input) = stdin {
        let _ = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes());
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("quartet leases")
}

/// Synthetic leases through the sandbox admin API; returns their ids.
fn make_leases(sb: &Sandbox, prefix: &str, count: u32, irrevocable: bool) -> Vec<String> {
    let (status, body) = http(
        "POST",
        &format!("{}/_sandbox/secrets/leases", sb.url("secrets")),
        None,
        Some(json!({"prefix": prefix, "count": count, "ttl": 3600, "irrevocable": irrevocable})),
    );
    assert!(status < 300, "admin leases: {status} {body}");
    body["lease_ids"]
        .as_array()
        .expect("lease_ids")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn prefixes_holding_every_token_are_refused() {
    let sb = Sandbox::start(&[]);
    let out = leases(&sb, &["revoke-prefix", "auth/token/", "--yes"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing"));
}

#[test]
fn irrevocable_leases_are_counted_and_listed_and_tidy_starts() {
    let sb = Sandbox::start(&[]);
    make_leases(&sb, "ad/library/bad/check-out/", 3, true);
    let count = ok(&leases(
        &sb,
        &["-o", "json", "count", "--irrevocable"],
        None,
    ));
    let v: Value = serde_json::from_str(&count).expect("json");
    assert_eq!(v["lease_count"], 3, "{v}");
    let table = ok(&leases(&sb, &["count", "--irrevocable"], None));
    assert!(table.contains("irrevocable leases: 3"), "{table}");
    let listed = ok(&leases(
        &sb,
        &["-o", "json", "irrevocable", "--limit", "2"],
        None,
    ));
    let v: Value = serde_json::from_str(&listed).expect("json");
    assert_eq!(v["leases"].as_array().unwrap().len(), 2, "{v}");
    assert!(
        v["warnings"].as_array().is_some_and(|w| !w.is_empty()),
        "{v}"
    );
    let all = ok(&leases(&sb, &["irrevocable", "--limit", "none"], None));
    assert_eq!(all.lines().count(), 4, "header and three leases: {all}");
    ok(&leases(&sb, &["tidy"], None));
}

/// The irrevocable-lease count is read at each Connection check: a metric per mount, the
/// Connection's status, and a Warning Event when it grows.
#[test]
fn irrevocable_leases_move_the_metric_and_a_growing_count_is_a_warning_event() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, "2s");
    let addr = op.metrics_addr();
    let total = || -> Option<i64> {
        let text = reqwest::blocking::get(format!("http://{addr}/metrics"))
            .ok()?
            .text()
            .ok()?;
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.starts_with("quartet_secrets_irrevocable_leases{")
                    && l.contains(r#"connection="default/secrets""#)
            })
            .collect();
        (!lines.is_empty()).then(|| {
            lines
                .iter()
                .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
                .sum()
        })
    };
    make_leases(&sb, "ad/library/stuck/check-out/", 2, true);
    wait_for("metric shows 2", std::time::Duration::from_secs(60), || {
        (total() == Some(2)).then_some(())
    });
    make_leases(&sb, "ad/library/stuck/check-out/", 1, true);
    wait_for("metric shows 3", std::time::Duration::from_secs(60), || {
        (total() == Some(3)).then_some(())
    });
    let conn = wait_for("status count", std::time::Duration::from_secs(30), || {
        sb.get_json("connection", "secrets")
            .filter(|c| c["status"]["irrevocableLeases"] == 3)
    });
    assert!(condition_is(&conn, "Ready", "True"));
    sb.wait_events_with(
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=secrets,reason=IrrevocableLeases",
            "-o",
            "json",
        ],
        &["irrevocable lease"],
    );
}
