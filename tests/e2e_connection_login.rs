//! A Connection that logs in (`spec.auth.idp`) end to end: the built `quartet` binary against
//! the dev API server and the sandbox's secrets service (its identity provider set up through
//! the sandbox admin API), driven with the real `kubectl`. What the operator did is read from
//! the sandbox's request log and the service itself, never from the operator.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const LOGIN_PATH: &str = "/v1/auth/idp/login/";

/// The sandbox's identity provider knows `user` with `password` (and a verification-app
/// factor with `totp_seed`); the idp auth method is configured with `token` fields and maps the
/// user to a policy that may do anything.
fn set_up_idp(sb: &Sandbox, user: &str, password: &str, totp_seed: Option<&str>, token: Value) {
    let mut config = json!({"org_name": "quartet"});
    for (k, v) in token.as_object().cloned().unwrap_or_default() {
        config[k] = v;
    }
    let (s, b) = sb.secrets("POST", "/v1/auth/idp/config", Some(config));
    assert!(s < 300, "idp config: {s} {b}");
    let (s, b) = sb.secrets(
        "POST",
        "/v1/sys/policies/acl/quartet",
        Some(json!({"policy": "path \"*\" {\n  capabilities = [\"create\", \"read\", \"update\", \"delete\", \"list\", \"sudo\"]\n}\n"})),
    );
    assert!(s < 300, "policy: {s} {b}");
    let (s, b) = sb.secrets(
        "POST",
        &format!("/v1/auth/idp/users/{user}"),
        Some(json!({"policies": ["quartet"]})),
    );
    assert!(s < 300, "idp user: {s} {b}");
    let mut body = json!({"password": password});
    if let Some(seed) = totp_seed {
        body["totp"] = json!({"provider": "OKTA", "secret": seed});
    }
    let (s, b) = http(
        "PUT",
        &format!("{}/_sandbox/secrets/idp/users/{user}", sb.url("secrets")),
        None,
        Some(body),
    );
    assert!(s < 300, "provider user: {s} {b}");
}

/// The `secrets` Connection in `default`, logging in as `user` with the password in Secret
/// `login` (key `password`) and, when `seed` is set, the seed in key `seed`.
fn connect_with_login(sb: &Sandbox, user: &str, password: &str, seed: Option<&str>) {
    let (seed_data, seed_ref) = match seed {
        Some(s) => (
            format!(", seed: {s}"),
            ", totpSecretRef: {name: login, key: seed}".to_string(),
        ),
        None => (String::new(), String::new()),
    };
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: login, namespace: default}}\nstringData: {{password: \"{password}\"{seed_data}}}\n---\n\
         apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: secrets, namespace: default}}\n\
         spec: {{service: secrets, address: \"{}\", timeoutSeconds: 5, requestsPerSecond: 2000, auth: {{idp: {{username: {user}, passwordSecretRef: {{name: login, key: password}}{seed_ref}}}}}}}\n",
        sb.url("secrets")
    ));
}

fn policies_yaml(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: p{i}, namespace: default}}\nspec:\n  type: acl\n  policy: |\n    path \"secret/p{i}/*\" {{ capabilities = [\"read\"] }}\n"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Whether every SecretsPolicy in `default` (at least `n`) is Ready.
fn all_ready(sb: &Sandbox, n: usize) -> bool {
    let out = sb.kubectl(&["get", "secretspolicies", "-n", "default", "-o", "json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items.len() >= n && items.iter().all(|o| condition_is(o, "Ready", "True"))
}

/// Login calls in the request log: (attempts, successes).
fn logins(sb: &Sandbox) -> (usize, usize) {
    let (reqs, _) = sb.requests("secrets", 0);
    let tried: Vec<_> = reqs
        .iter()
        .filter(|(m, p, _)| m == "POST" && p.starts_with(LOGIN_PATH))
        .collect();
    let ok = tried.iter().filter(|(_, _, s)| *s == 200).count();
    (tried.len(), ok)
}

/// `renew-self` calls in the request log, by status.
fn renewals(sb: &Sandbox) -> Vec<u16> {
    sb.requests("secrets", 0)
        .0
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p == "/v1/auth/token/renew-self")
        .map(|(_, _, s)| s)
        .collect()
}

fn metrics(op: &Operator) -> String {
    let url = format!("http://{}/metrics", op.metrics_addr());
    reqwest::blocking::get(url)
        .and_then(|r| r.text())
        .unwrap_or_default()
}

fn connection(sb: &Sandbox) -> Value {
    sb.get_json("connection", "secrets").expect("connection")
}

/// A Connection logging in as `alice` with a 6 s token lease (renewed every 4 s) that renewals
/// extend up to `max_ttl`, an operator resyncing every `resync`, and three Ready
/// SecretsPolicies using the Connection.
fn renewing_login(resync: &str, max_ttl: &str) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    set_up_idp(
        &sb,
        "alice",
        "pw-alice",
        None,
        json!({"token_ttl": "6s", "token_max_ttl": max_ttl}),
    );
    connect_with_login(&sb, "alice", "pw-alice", None);
    let op = Operator::start(&sb, resync);
    sb.apply_ok(&policies_yaml(3));
    wait_for("3 Ready SecretsPolicies", WAIT, || {
        all_ready(&sb, 3).then_some(())
    });
    (sb, op)
}

#[test]
fn a_thousand_reconciles_through_one_connection_make_exactly_one_login() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let password = format!("pw-{}", unique_token());
    set_up_idp(&sb, "alice", &password, None, json!({"token_ttl": "1h"}));
    connect_with_login(&sb, "alice", &password, None);
    let op = Operator::start(&sb, "1s");
    sb.apply_ok(&policies_yaml(50));
    wait_for("50 Ready SecretsPolicies", Duration::from_secs(180), || {
        all_ready(&sb, 50).then_some(())
    });
    // Authenticated requests: every call but the login carries the token.
    let authenticated = |sb: &Sandbox| {
        sb.requests("secrets", 0)
            .0
            .iter()
            .filter(|(_, p, _)| !p.starts_with(LOGIN_PATH))
            .count()
    };
    let reconciles = |m: &str| -> f64 {
        m.lines()
            .filter(|l| l.starts_with("quartet_reconciles_total") && l.contains("SecretsPolicy"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let (mut seen, mut m) = (0, String::new());
    for _ in 0..600 {
        m = metrics(&op);
        seen = authenticated(&sb);
        if seen >= 1000 && reconciles(&m) >= 1000.0 {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let reconciles = reconciles(&m);
    assert!(seen >= 1000, "only {seen} authenticated requests");
    assert_eq!(logins(&sb), (1, 1), "exactly one login for {seen} requests");
    eprintln!("{seen} authenticated requests, {reconciles} SecretsPolicy reconciles, 1 login");
    assert!(reconciles >= 1000.0, "{reconciles} reconciles\n{m}");
    assert!(
        m.contains("quartet_logins_total{connection=\"default/secrets\",result=\"ok\"} 1"),
        "{m}"
    );
    let conn = connection(&sb);
    assert!(condition_is(&conn, "Ready", "True"), "{conn}");
    let auth = &conn["status"]["auth"];
    assert_eq!(auth["method"], "idp", "{conn}");
    assert_eq!(auth["username"], "alice", "{conn}");
    assert_eq!(auth["mount"], "idp", "{conn}");
    assert!(auth["expiresAt"].is_string(), "{conn}");
    let log = op.stop();
    assert!(
        !log.contains(&password),
        "the password reached the operator log"
    );
    assert!(
        !conn.to_string().contains("hvs."),
        "a token reached the status: {conn}"
    );
}

#[test]
fn the_token_is_renewed_before_it_expires_and_a_refused_renewal_logs_in_again() {
    let (sb, op) = renewing_login("1s", "1h");
    // Three renewals cover well over one 6 s lease: the token outlived it by being renewed.
    wait_for("three renewals", WAIT, || {
        (renewals(&sb).iter().filter(|s| **s == 200).count() >= 3).then_some(())
    });
    assert_eq!(logins(&sb), (1, 1), "renewals, not new logins");
    assert!(all_ready(&sb, 3));

    // The user's policies change in the auth method: the service refuses to renew the token
    // (`policies have changed, not renewing`), so the operator logs in again.
    let (s, b) = sb.secrets(
        "POST",
        "/v1/auth/idp/users/alice",
        Some(json!({"policies": ["quartet", "extra"]})),
    );
    assert!(s < 300, "{s} {b}");
    wait_for("a second login", WAIT, || {
        (logins(&sb).1 == 2).then_some(())
    });
    assert!(
        renewals(&sb).contains(&500),
        "a refused renewal came first: {:?}",
        renewals(&sb)
    );
    // And it keeps working: an edit reaches the service.
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {name: p0, namespace: default}\nspec:\n  type: acl\n  policy: |\n    path \"secret/edited/*\" { capabilities = [\"read\"] }\n",
    );
    wait_for("the edit in the service", WAIT, || {
        let (_, b) = sb.secrets("GET", "/v1/sys/policies/acl/p0", None);
        b["data"]["policy"]
            .as_str()
            .is_some_and(|p| p.contains("secret/edited"))
            .then_some(())
    });
    assert_eq!(logins(&sb).1, 2);
    let m = metrics(&op);
    assert!(
        m.contains("quartet_logins_total{connection=\"default/secrets\",result=\"ok\"} 2"),
        "{m}"
    );
}

/// The Connection's `status.auth.expiresAt`.
fn expires_at(sb: &Sandbox) -> Option<String> {
    connection(sb)["status"]["auth"]["expiresAt"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn a_renewed_login_starts_no_pass_of_the_resources_using_the_connection() {
    // The resources resync every 5 minutes: a call of theirs below can only come from a wake.
    let (sb, _op) = renewing_login("5m", "1h");
    // Each renewal (every 4 s) moves `status.auth.expiresAt`: the Connection's status changes,
    // but nothing the resources use (its Ready condition, its features).
    let first = expires_at(&sb);
    let renewed = wait_for("a renewal in the status", WAIT, || {
        expires_at(&sb).filter(|e| Some(e) != first.as_ref())
    });
    let (_, since) = sb.requests("secrets", 0);
    wait_for("another renewal in the status", WAIT, || {
        expires_at(&sb).filter(|e| *e != renewed)
    });
    std::thread::sleep(Duration::from_secs(2));
    let (reqs, _) = sb.requests("secrets", since);
    let passes: Vec<_> = reqs
        .iter()
        .filter(|(_, p, _)| p.starts_with("/v1/sys/policies/"))
        .collect();
    assert!(
        passes.is_empty(),
        "a renewal woke the SecretsPolicies: {passes:?}"
    );
    assert!(
        renewals(&sb).iter().filter(|s| **s == 200).count() >= 2,
        "{:?}",
        renewals(&sb)
    );
    assert!(condition_is(&connection(&sb), "Ready", "True"));
}

#[test]
fn a_token_at_its_maximum_lifetime_is_replaced_by_a_new_login() {
    // Renewals stop extending the token after 14 s: the operator logs in again before it ends.
    let (sb, _op) = renewing_login("1s", "14s");
    wait_for("a second login", WAIT, || {
        (logins(&sb).1 >= 2).then_some(())
    });
    assert!(
        renewals(&sb).contains(&200),
        "renewed before the maximum lifetime: {:?}",
        renewals(&sb)
    );
    // (Whether the old token is revoked, or already expired because a loaded machine let the
    // renewal slip past its end, depends on timing: not asserted.)
    assert_eq!(logins(&sb).0, logins(&sb).1, "no login was refused");
    assert!(all_ready(&sb, 3));
}

#[test]
fn a_user_with_the_verification_app_logs_in_with_the_computed_passcode() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let seed = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP";
    set_up_idp(&sb, "bob", "pw-bob", Some(seed), json!({}));
    // Without the passcode the provider asks for one: the login is refused.
    let (s, b) = http(
        "POST",
        &format!("{}{LOGIN_PATH}bob", sb.url("secrets")),
        None,
        Some(json!({"password": "pw-bob"})),
    );
    assert_eq!(s, 400, "{b}");
    assert_eq!(logins(&sb), (1, 0));
    connect_with_login(&sb, "bob", "pw-bob", Some(seed));
    let _op = Operator::start(&sb, "2s");
    sb.apply_ok(&policies_yaml(1));
    wait_for("a Ready SecretsPolicy", WAIT, || {
        all_ready(&sb, 1).then_some(())
    });
    assert_eq!(
        logins(&sb),
        (2, 1),
        "the operator's one login, with the passcode, succeeded"
    );
    let conn = connection(&sb);
    assert!(condition_is(&conn, "Ready", "True"), "{conn}");
    assert_eq!(conn["status"]["auth"]["username"], "bob");
}

/// The accessor of the live token the idp method issued to `user` (found with the root token).
fn login_accessor(sb: &Sandbox, user: &str) -> Option<String> {
    let (_, list) = sb.secrets("LIST", "/v1/auth/token/accessors", None);
    list["data"]["keys"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find(|a| {
            let (s, b) = sb.secrets(
                "POST",
                "/v1/auth/token/lookup-accessor",
                Some(json!({"accessor": a})),
            );
            s == 200 && b["data"]["path"] == format!("auth/idp/login/{user}")
        })
        .map(str::to_string)
}

#[test]
fn deleting_the_connection_revokes_its_token() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    set_up_idp(&sb, "alice", "pw-alice", None, json!({}));
    connect_with_login(&sb, "alice", "pw-alice", None);
    let _op = Operator::start(&sb, "2s");
    wait_for("the Connection Ready", WAIT, || {
        condition_is(&connection(&sb), "Ready", "True").then_some(())
    });
    let accessor = login_accessor(&sb, "alice").expect("the operator's login token");
    sb.kubectl_ok(&["delete", "connection", "secrets", "-n", "default"]);
    wait_for("the token revoked", WAIT, || {
        let (s, _) = sb.secrets(
            "POST",
            "/v1/auth/token/lookup-accessor",
            Some(json!({"accessor": accessor})),
        );
        (s == 400).then_some(())
    });
    assert!(
        sb.requests("secrets", 0)
            .0
            .iter()
            .any(|(m, p, s)| m == "POST" && p == "/v1/auth/token/revoke-self" && *s < 300),
        "revoked with revoke-self"
    );
    assert_eq!(login_accessor(&sb, "alice"), None, "no token left behind");
}

#[test]
fn a_wrong_password_is_login_failed_with_the_service_message_and_is_not_retried_in_a_loop() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    set_up_idp(&sb, "alice", "pw-right", None, json!({}));
    connect_with_login(&sb, "alice", "pw-wrong", None);
    let _op = Operator::start(&sb, "1s");
    sb.apply_ok(&policies_yaml(3));
    let conn = wait_for("LoginFailed", WAIT, || {
        let c = connection(&sb);
        condition(&c, "Ready")
            .is_some_and(|r| r["status"] == "False" && r["reason"] == "LoginFailed")
            .then_some(c)
    });
    let message = condition(&conn, "Ready").unwrap()["message"].to_string();
    assert!(message.contains("idp auth failed"), "{message}");
    assert!(!message.contains("pw-wrong"), "{message}");
    // Four reconcilers (the Connection, three policies at a 1 s resync) over 10 s: the login
    // backoff lets only a few attempts through.
    let (before, _) = logins(&sb);
    std::thread::sleep(Duration::from_secs(10));
    let (after, ok) = logins(&sb);
    assert_eq!(ok, 0);
    assert!(
        after - before <= 3,
        "{} login attempts in 10 s",
        after - before
    );

    // The right password in the Secret: the Connection logs in (the Secret is watched).
    sb.apply_ok(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: login, namespace: default}\nstringData: {password: pw-right}\n",
    );
    wait_for("Ready after the fix", Duration::from_secs(120), || {
        (condition_is(&connection(&sb), "Ready", "True") && all_ready(&sb, 3)).then_some(())
    });
    assert_eq!(logins(&sb).1, 1);
}

#[test]
fn a_connection_needs_exactly_one_of_a_token_secret_and_a_login() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let both = format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: both, namespace: default}}\n\
         spec: {{service: secrets, address: \"{}\", tokenSecretRef: {{name: t, key: token}}, auth: {{idp: {{username: a, passwordSecretRef: {{name: p, key: password}}}}}}}}\n",
        sb.url("secrets")
    );
    let out = sb.apply_yaml(&both);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exactly one of tokenSecretRef and auth"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let neither = format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: neither, namespace: default}}\n\
         spec: {{service: secrets, address: \"{}\"}}\n",
        sb.url("secrets")
    );
    assert!(!sb.apply_yaml(&neither).status.success());
    let workspaces = format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: ws, namespace: default}}\n\
         spec: {{service: workspaces, address: \"{}\", auth: {{idp: {{username: a, passwordSecretRef: {{name: p, key: password}}}}}}}}\n",
        sb.url("workspaces")
    );
    let out = sb.apply_yaml(&workspaces);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only offered by the secrets service"));
    // The default mount.
    let ok = format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: ok, namespace: default}}\n\
         spec: {{service: secrets, address: \"{}\", auth: {{idp: {{username: a, passwordSecretRef: {{name: p, key: password}}}}}}}}\n",
        sb.url("secrets")
    );
    sb.apply_ok(&ok);
    let c = sb.get_json("connection", "ok").unwrap();
    assert_eq!(c["spec"]["auth"]["idp"]["mount"], "idp");
}

#[test]
fn stopping_the_operator_revokes_the_connection_token() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    set_up_idp(&sb, "alice", "pw-alice", None, json!({}));
    connect_with_login(&sb, "alice", "pw-alice", None);
    let op = Operator::start(&sb, "2s");
    wait_for("the Connection Ready", WAIT, || {
        condition_is(&connection(&sb), "Ready", "True").then_some(())
    });
    assert!(login_accessor(&sb, "alice").is_some());
    // SIGTERM, as Kubernetes stops a pod; the process has exited when `stop` returns.
    op.stop();
    assert_eq!(
        login_accessor(&sb, "alice"),
        None,
        "the token outlived the operator"
    );
}

#[test]
fn a_user_with_a_push_factor_logs_in_once_the_push_is_approved() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    set_up_idp(&sb, "carol", "pw-carol", None, json!({}));
    // The provider's push factor, approved by the (simulated) phone after a moment.
    let (s, b) = http(
        "PUT",
        &format!("{}/_sandbox/secrets/idp/users/carol", sb.url("secrets")),
        None,
        Some(
            json!({"password": "pw-carol", "push": {"provider": "OKTA", "response": "approve", "delay_ms": 1500}}),
        ),
    );
    assert!(s < 300, "{s} {b}");
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: login, namespace: default}}\nstringData: {{password: pw-carol}}\n---\n\
         apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: secrets, namespace: default}}\n\
         spec: {{service: secrets, address: \"{}\", timeoutSeconds: 5, auth: {{idp: {{username: carol, provider: okta, passwordSecretRef: {{name: login, key: password}}}}}}}}\n",
        sb.url("secrets")
    ));
    let _op = Operator::start(&sb, "2s");
    sb.apply_ok(&policies_yaml(2));
    wait_for("2 Ready SecretsPolicies", WAIT, || {
        all_ready(&sb, 2).then_some(())
    });
    assert_eq!(logins(&sb), (1, 1), "one push, one login");
    assert_eq!(connection(&sb)["status"]["auth"]["username"], "carol");
}

#[test]
fn a_changed_token_secret_is_checked_at_once_not_at_the_resync() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    // A resync far beyond the test: only the watch of the Connection's Secret can wake it.
    let _op = Operator::start(&sb, "1h");
    wait_for("the Connection Ready", WAIT, || {
        condition_is(&connection(&sb), "Ready", "True").then_some(())
    });
    sb.apply_ok(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: secrets-token, namespace: default}\nstringData: {token: revoked-long-ago}\n",
    );
    wait_for("the refused token seen", Duration::from_secs(20), || {
        condition(&connection(&sb), "Ready")
            .filter(|r| r["status"] == "False")
            .map(|r| r["reason"].clone())
    });
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: secrets-token, namespace: default}}\nstringData: {{token: {}}}\n",
        sb.root_token
    ));
    wait_for(
        "Ready again with the good token",
        Duration::from_secs(20),
        || condition_is(&connection(&sb), "Ready", "True").then_some(()),
    );
}
