//! `quartet catalog login --oidc`: the real binary against the sandbox catalog's emulated OIDC
//! provider. The test plays the browser: it reads the printed URL, follows it to the provider,
//! which redirects to the CLI's loopback listener.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use support::*;

/// An enterprise catalog (management token: the root token) with the OIDC auth method `oidc` (redirects to
/// `http://localhost:8550/oidc/callback`, any loopback port), a role bound to the `admins`
/// group, and the provider's user `alice` in that group.
fn catalog_with_oidc(sb: &Sandbox) -> String {
    let catalog = sb.url("catalog").to_string();
    for (method, path, body) in [
        (
            "PUT",
            "config",
            json!({"Enterprise": true, "UseRootToken": true}),
        ),
        (
            "POST",
            "auth-methods",
            json!({"Name": "oidc", "Type": "oidc", "Config": {
                "OIDCDiscoveryURL": "https://idp.example.com", "OIDCClientID": "catalog",
                "OIDCClientSecret": "s3cret", "AllowedRedirectURIs": ["http://localhost:8550/oidc/callback"],
                "ClaimMappings": {"email": "email"}, "ListClaimMappings": {"groups": "groups"}}}),
        ),
        ("POST", "roles", json!({"Name": "admins"})),
        (
            "POST",
            "binding-rules",
            json!({"AuthMethod": "oidc", "Selector": "\"admins\" in list.groups", "BindType": "role", "BindName": "admins"}),
        ),
        (
            "POST",
            "oidc/users",
            json!({"Subject": "alice", "Claims": {"email": "alice@example.com", "groups": ["admins"]}}),
        ),
    ] {
        let (s, v) = http(
            method,
            &format!("{catalog}/_sandbox/catalog/{path}"),
            None,
            Some(body),
        );
        assert!((200..300).contains(&s), "{path}: {s} {v}");
    }
    catalog
}

/// Start the login; returns the child and the authorization URL it printed (on stderr).
fn start_login(
    catalog: &str,
    extra: &[&str],
) -> (Child, String, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args([
            "catalog",
            "login",
            "--oidc",
            "--auth-method",
            "oidc",
            "--address",
            catalog,
            "--timeout",
            "60s",
        ])
        .args(extra)
        // No browser here: the command must print the URL and wait, not fail.
        .env_remove("BROWSER")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let url = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no URL printed; stderr so far: {seen:?}"));
        if let Some(u) = line.trim().strip_prefix("http") {
            break format!("http{u}");
        }
        seen.push(line);
    };
    (child, url, rx)
}

fn finish(child: Child, rx: std::sync::mpsc::Receiver<String>) -> (bool, String, String) {
    let out = child.wait_with_output().unwrap();
    // The reader thread may not have forwarded the last lines yet when the child exits: read
    // until it reaches the end of the pipe (the channel closes), not only what is queued now.
    let mut stderr = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
        stderr.push(line);
    }
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        stderr.join("\n"),
    )
}

fn browser() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

fn token_self(catalog: &str, token: &str) -> (u16, Value) {
    http(
        "GET",
        &format!("{catalog}/v1/acl/token/self"),
        Some(("X-Catalog-Token", token)),
        None,
    )
}

#[test]
fn the_oidc_login_prints_a_working_token_after_the_browser_comes_back_to_the_loopback_listener() {
    let sb = Sandbox::start(&[]);
    let catalog = catalog_with_oidc(&sb);
    let (child, url, rx) = start_login(&catalog, &["--meta", "host=laptop"]);
    // The URL goes to the provider, with a loopback redirect on the listener's port.
    let redirect = url
        .split('&')
        .chain(url.split('?'))
        .find_map(|p| p.strip_prefix("redirect_uri="))
        .expect("redirect_uri in the URL")
        .to_string();
    assert!(
        redirect.starts_with("http%3A%2F%2Flocalhost%3A"),
        "{redirect}"
    );
    assert!(
        !redirect.contains("localhost%3A8550%2F"),
        "a random port, not the fixed one"
    );
    // The browser follows the provider's redirect to the CLI's listener.
    let page = browser().get(&url).send().unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.text().unwrap().contains("Signed in"));
    let (ok, stdout, stderr) = finish(child, rx);
    assert!(ok, "{stderr}");
    let token = stdout;
    assert_eq!(token.len(), 36, "a SecretID: {token}");
    let (s, me) = token_self(&catalog, &token);
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["AuthMethod"], "oidc");
    assert_eq!(me["Roles"][0]["Name"], "admins");
    assert!(
        me["Description"].as_str().unwrap().contains("laptop"),
        "{me}"
    );
    assert!(!stderr.contains(&token), "the token went to stderr");
}

#[test]
fn the_oidc_login_writes_the_token_to_a_file_or_a_kubernetes_secret_instead_of_stdout() {
    let sb = Sandbox::start(&[]);
    let catalog = catalog_with_oidc(&sb);
    let file = sb.dir.path().join("catalog-token");
    let (child, url, rx) = start_login(&catalog, &["--out", file.to_str().unwrap()]);
    browser().get(&url).send().unwrap();
    let (ok, stdout, stderr) = finish(child, rx);
    assert!(ok, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert_eq!(token_self(&catalog, &token).0, 200);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    let (child, url, rx) = start_login(
        &catalog,
        &[
            "--secret",
            "default/catalog-login",
            "--kubeconfig",
            sb.kubeconfig.to_str().unwrap(),
        ],
    );
    browser().get(&url).send().unwrap();
    let (ok, stdout, stderr) = finish(child, rx);
    assert!(ok, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let secret = sb.get_json("secret", "catalog-login").expect("the Secret");
    let decode = |k: &str| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"][k].as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    let token = decode("token");
    let (s, me) = token_self(&catalog, &token);
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["AccessorID"], decode("accessorId").as_str());
}

#[test]
fn a_redirect_with_another_state_is_refused_and_no_token_is_created() {
    let sb = Sandbox::start(&[]);
    let catalog = catalog_with_oidc(&sb);
    let (child, url, rx) = start_login(&catalog, &[]);
    // A browser that does not follow: take the provider's redirect and alter its state.
    let no_follow = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_follow.get(&url).send().unwrap();
    assert_eq!(r.status().as_u16(), 302);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let forged: String = location
        .split('&')
        .map(|p| {
            if p.starts_with("state=") || p.contains("?state=") {
                let (head, _) = p.split_once("state=").unwrap();
                format!("{head}state=forged")
            } else {
                p.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("&");
    assert_ne!(forged, location);
    let _ = no_follow.get(&forged).send();
    let (ok, stdout, stderr) = finish(child, rx);
    assert!(!ok);
    assert!(stdout.is_empty());
    assert!(stderr.contains("state does not match"), "{stderr}");
    // No OIDC token was created by the refused redirect.
    let (s, tokens) = http(
        "GET",
        &format!("{catalog}/v1/acl/tokens?authmethod=oidc"),
        Some(("X-Catalog-Token", &sb.root_token)),
        None,
    );
    assert_eq!(s, 200, "{tokens}");
    assert_eq!(tokens.as_array().map(Vec::len), Some(0), "{tokens}");
}
