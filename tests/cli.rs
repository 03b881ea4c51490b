//! The command line as people type it, through the real `quartet` binary: every verb takes its
//! command's flags after the verb (a usage error would exit 2 with clap's `Usage:`; these reach
//! the network and fail there, against an address where nothing listens), `--version` names the
//! git commit, and every subcommand's help shows an example.

use std::net::TcpListener;
use std::process::{Command, Output};

fn quartet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quartet"))
        .args(args)
        .env("QUARTET_TOKEN", "not-a-real-token")
        .env("QUARTET_PASSWORD", "not-a-real-password")
        .env_remove("QUARTET_ADDRESS")
        .env_remove("QUARTET_CATALOG_ADDRESS")
        .env_remove("BROWSER")
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "error")
        .output()
        .expect("the quartet binary runs")
}

/// An address where nothing listens: a port the system handed out, closed again.
fn nothing_listens() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The arguments were accepted and the command failed on the network, not on its usage.
fn assert_parsed_then_unreachable(args: &[&str]) {
    let out = quartet(args);
    let said = text(&out);
    assert!(
        !said.contains("Usage:") && !said.contains("unexpected argument"),
        "`quartet {}` was refused as a usage error:\n{said}",
        args.join(" ")
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "`quartet {}` should fail (nothing listens), not with clap's usage code 2:\n{said}",
        args.join(" ")
    );
    assert!(
        said.contains("unreachable"),
        "`quartet {}` should say the service is unreachable:\n{said}",
        args.join(" ")
    );
}

#[test]
fn every_leases_verb_takes_the_connection_flags_after_the_verb() {
    let addr = nothing_listens();
    let a = addr.as_str();
    let flags = [
        "--address",
        a,
        "--token-header",
        "X-Vault-Token",
        "-o",
        "json",
    ];
    let verbs: [&[&str]; 12] = [
        &["lookup", "database/creds/app/abc"],
        &["list", "database/creds/"],
        &["renew", "database/creds/app/abc", "--increment", "1h"],
        &["revoke", "database/creds/app/abc", "--sync", "true"],
        // `--sync` alone, as the issue writes it (`revoke ID [--sync]`), and `--sync false`.
        &["revoke", "database/creds/app/abc", "--sync"],
        &["revoke", "database/creds/app/abc", "--sync", "false"],
        &["revoke-prefix", "database/creds/app/", "--sync", "--yes"],
        &["revoke-prefix", "database/creds/app/", "--yes"],
        &["revoke-force", "database/creds/app/", "--yes"],
        &["tidy"],
        &["count", "--irrevocable"],
        &["irrevocable", "--limit", "none"],
    ];
    for verb in verbs {
        let mut args = vec!["leases"];
        args.extend_from_slice(verb);
        args.extend_from_slice(&flags);
        assert_parsed_then_unreachable(&args);
    }
}

#[test]
fn the_leases_flags_are_still_taken_before_the_verb() {
    let addr = nothing_listens();
    assert_parsed_then_unreachable(&[
        "leases",
        "--address",
        &addr,
        "-o",
        "json",
        "count",
        "--irrevocable",
    ]);
}

#[test]
fn login_idp_takes_its_flags_after_the_user_name() {
    let addr = nothing_listens();
    assert_parsed_then_unreachable(&[
        "login",
        "idp",
        "alice",
        "--address",
        &addr,
        "--mount",
        "idp",
        "-o",
        "json",
    ]);
}

#[test]
fn catalog_login_takes_its_flags_after_the_verb() {
    let addr = nothing_listens();
    assert_parsed_then_unreachable(&[
        "catalog",
        "login",
        "--oidc",
        "--auth-method",
        "oidc",
        "--address",
        &addr,
        "--listen-addr",
        "127.0.0.1:0",
        "--timeout",
        "5s",
    ]);
}

#[test]
fn plan_takes_its_flags_after_the_verb() {
    let addr = nothing_listens();
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/secrets-policy.yaml");
    assert_parsed_then_unreachable(&[
        "plan",
        "-f",
        manifest,
        "--address",
        &addr,
        "--token-header",
        "X-Vault-Token",
        "-o",
        "json",
    ]);
}

#[test]
fn crd_writes_the_files_its_flags_ask_for() {
    let out_dir = tempfile::tempdir().expect("a temporary directory");
    let chart_dir = tempfile::tempdir().expect("a temporary directory");
    let out = quartet(&[
        "crd",
        "--out",
        out_dir.path().to_str().expect("a UTF-8 path"),
        "--chart",
        chart_dir.path().to_str().expect("a UTF-8 path"),
    ]);
    assert!(out.status.success(), "quartet crd failed:\n{}", text(&out));
    for dir in [out_dir.path(), chart_dir.path()] {
        let files = std::fs::read_dir(dir).expect("the directory").count();
        assert!(files > 20, "{} holds only {files} files", dir.display());
    }
}

#[test]
fn version_names_the_git_commit_it_was_built_from() {
    let out = quartet(&["--version"]);
    assert!(out.status.success(), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let prefix = format!("quartet {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(
        line.starts_with(&prefix) && line.ends_with(')'),
        "unexpected --version: {line}"
    );
    let commit = &line[prefix.len()..line.len() - 1];
    assert!(!commit.is_empty(), "no commit in: {line}");
    // Built from this checkout and not told otherwise (`QUARTET_GIT_COMMIT` at build time): the
    // commit is this checkout's HEAD.
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if let (Some(head), Err(_)) = (head, std::env::var("QUARTET_GIT_COMMIT")) {
        assert!(
            head.starts_with(commit) || commit.starts_with(&head),
            "--version says commit {commit}, the checkout is at {head}"
        );
    }
}

#[test]
fn every_subcommand_help_shows_an_example() {
    let commands: [&[&str]; 19] = [
        &["run"],
        &["crd"],
        &["plan"],
        &["sandbox"],
        &["dev"],
        &["leases"],
        &["leases", "lookup"],
        &["leases", "list"],
        &["leases", "renew"],
        &["leases", "revoke"],
        &["leases", "revoke-prefix"],
        &["leases", "revoke-force"],
        &["leases", "tidy"],
        &["leases", "count"],
        &["leases", "irrevocable"],
        &["login"],
        &["login", "idp"],
        &["catalog"],
        &["catalog", "login"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        args.push("--help");
        let out = quartet(&args);
        let said = text(&out);
        assert!(
            out.status.success(),
            "`quartet {}` failed:\n{said}",
            args.join(" ")
        );
        assert!(
            said.contains("Example:\n  quartet "),
            "`quartet {}` shows no example:\n{said}",
            args.join(" ")
        );
    }
}

#[test]
fn a_shard_whose_lease_name_kubernetes_would_refuse_stops_before_any_call() {
    // No cluster is configured: the process stops on its flags, before it looks for one.
    let out = quartet(&["run", "--leader-elect", "--shard", "EU_West"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(r#"Lease named "quartet-leader-EU_West""#) && said.contains("--lease-name"),
        "{said}"
    );
    let out = quartet(&[
        "run",
        "--leader-elect",
        "--shard",
        "eu",
        "--lease-name",
        "Leader",
    ]);
    assert!(
        text(&out).contains(r#"Lease named "Leader""#),
        "{}",
        text(&out)
    );
    // Without leader election no Lease is made, and the label value alone is checked.
    let out = quartet(&[
        "run",
        "--shard",
        "EU_West",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert!(!text(&out).contains("Lease"), "{}", text(&out));
}

#[test]
fn a_missing_kubeconfig_is_one_sentence_naming_the_file_and_what_to_give() {
    let out = quartet(&["run", "--kubeconfig", "/nonexistent/kubeconfig"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert_eq!(
        said.trim(),
        "error: could not read the kubeconfig /nonexistent/kubeconfig: No such file or directory (os error 2)"
    );
    // Outside a pod and without a kubeconfig: where it looked, and how to give one.
    let home = std::env::temp_dir().join(format!("quartet-cli-home-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_quartet"))
        .args(["run"])
        .env("HOME", &home)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("RUST_LOG", "error")
        .output()
        .expect("the quartet binary runs");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("found no cluster to connect to"), "{said}");
    assert!(
        said.contains(".kube/config") && said.contains("--kubeconfig"),
        "{said}"
    );
    assert_eq!(
        said.matches("No such file").count(),
        1,
        "the cause is said once: {said}"
    );
    assert!(
        !said.contains("in-cluster") && !said.contains("'\""),
        "{said}"
    );
}
