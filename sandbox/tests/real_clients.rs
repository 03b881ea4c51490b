//! The real client libraries, run against the sandbox: each test starts a sandbox on ephemeral
//! ports and runs one script of `sandbox/clients/` (python-tfe, terrasnek, py-consul,
//! python-nomad, hvac), which drives the service through the client's own calls and exits
//! non-zero at the first answer the client cannot use or that differs from the real service's.
//! The hvac script also runs against a real OpenBao (`bao server -dev`), the judge for the
//! secrets service.
//!
//! The clients live in a virtual environment of their own, found through
//! `QUARTET_CLIENTS_PYTHON` (its python) or the default install `/opt/quartet-clients`
//! (`.ci/run` makes it with the pinned versions of `sandbox/clients/requirements.txt`). When
//! neither exists the tests fail with the install command; they never skip.

use crate::secrets_support::openbao;

use std::path::PathBuf;

use quartet_sandbox::{Sandbox, SandboxOptions};

const INSTALL: &str = "the real client libraries are needed by these tests: install them with \
`python3 -m venv /opt/quartet-clients && /opt/quartet-clients/bin/pip install -r \
sandbox/clients/requirements.txt` (or set QUARTET_CLIENTS_PYTHON to the python of a virtual \
environment that has them)";

/// The python that has the clients: `QUARTET_CLIENTS_PYTHON`, else the default install.
fn python() -> PathBuf {
    if let Ok(p) = std::env::var("QUARTET_CLIENTS_PYTHON") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "QUARTET_CLIENTS_PYTHON={} is not a file. {INSTALL}",
            p.display()
        );
        return p;
    }
    let p = PathBuf::from("/opt/quartet-clients/bin/python");
    assert!(p.is_file(), "{INSTALL}");
    p
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("clients")
        .join(name)
}

/// The addresses and tokens every script reads (documented at the top of each script).
fn sandbox_env(sb: &Sandbox, opts: &SandboxOptions) -> Vec<(&'static str, String)> {
    vec![
        ("QUARTET_SECRETS_ADDR", sb.secrets_url().to_string()),
        ("QUARTET_SECRETS_TOKEN", opts.root_token.clone()),
        ("QUARTET_SECRETS_TOKEN_HEADER", "X-Secrets-Token".into()),
        ("QUARTET_SECRETS_BACKEND", "sandbox".into()),
        ("QUARTET_WORKSPACES_ADDR", sb.workspaces_url.clone()),
        ("QUARTET_WORKSPACES_TOKEN", opts.root_token.clone()),
        ("QUARTET_WORKSPACES_ORG", opts.organization.clone()),
        ("QUARTET_CATALOG_ADDR", sb.catalog_url.clone()),
        ("QUARTET_SCHEDULER_ADDR", sb.scheduler_url.clone()),
        ("QUARTET_SCHEDULER_TOKEN", opts.root_token.clone()),
    ]
}

/// Runs `sandbox/clients/<name>` with `env` and asserts it exits 0, showing its output if not.
async fn run(name: &str, env: Vec<(&'static str, String)>) {
    let out = tokio::process::Command::new(python())
        .arg(script(name))
        .envs(env)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {name}: {e}. {INSTALL}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    println!("{stdout}");
}

async fn run_against_sandbox(name: &str) {
    let opts = SandboxOptions::ephemeral();
    let sb = quartet_sandbox::start(opts.clone())
        .await
        .expect("sandbox starts");
    let env = sandbox_env(&sb, &opts);
    run(name, env).await;
    sb.shutdown();
}

#[tokio::test(flavor = "multi_thread")]
async fn python_tfe_drives_workspaces_runs_and_no_code_against_the_sandbox() {
    run_against_sandbox("pytfe_client.py").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn terrasnek_drives_workspaces_runs_and_no_code_against_the_sandbox() {
    run_against_sandbox("terrasnek_client.py").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn py_consul_drives_the_acl_api_against_the_sandbox() {
    run_against_sandbox("consul_client.py").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn python_nomad_drives_deployments_against_the_sandbox() {
    run_against_sandbox("nomad_client.py").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hvac_drives_tokens_policies_leases_and_mfa_against_the_sandbox() {
    run_against_sandbox("hvac_client.py").await;
}

/// The same hvac script against a real OpenBao: what it asserts is what the real server does.
#[tokio::test(flavor = "multi_thread")]
async fn hvac_script_passes_unchanged_against_a_real_openbao() {
    let bao = tokio::task::spawn_blocking(openbao::OpenBao::start)
        .await
        .expect("start bao");
    let env = vec![
        ("QUARTET_SECRETS_ADDR", bao.addr.clone()),
        ("QUARTET_SECRETS_TOKEN", bao.root_token.clone()),
        ("QUARTET_SECRETS_TOKEN_HEADER", "X-Vault-Token".into()),
        ("QUARTET_SECRETS_BACKEND", "openbao".into()),
    ];
    run("hvac_client.py", env).await;
    tokio::task::spawn_blocking(move || drop(bao))
        .await
        .expect("stop bao");
}
