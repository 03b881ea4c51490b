//! `quartet catalog login --oidc --auth-method NAME --address URL`: the catalog's interactive
//! OIDC login (spec C §4.3), the CLI side of `POST /v1/acl/oidc/auth-url` and `callback`.
//!
//! As the catalog's own CLI does: a loopback listener receives the provider's redirect
//! (`http://localhost:PORT/oidc/callback`; the catalog matches loopback redirect URIs on any
//! port, RFC 8252 §7.3, so the auth method lists `http://localhost:8550/oidc/callback` once and
//! the port may be random), `auth-url` is called with that redirect and a fresh client nonce, the
//! URL is printed (and opened with `$BROWSER` or `xdg-open` when there is one; never required),
//! the redirect's `code` and `state` go to `callback` with the nonce, and the token's SecretID is
//! printed, written to `--out FILE` (mode 0600), or kept in a Kubernetes Secret (`--secret
//! NS/NAME`, keys `token` and `accessorId`). The SecretID never goes to stderr or a log.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use rand::Rng;
use serde_json::{json, Value};

#[derive(Args, Debug)]
// The arguments of `quartet catalog` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct CatalogArgs {
    #[command(subcommand)]
    pub command: CatalogCommand,
}

#[derive(Subcommand, Debug)]
// The subcommands of `quartet catalog`; each variant's doc comment is its --help text.
#[allow(missing_docs)]
pub enum CatalogCommand {
    /// Log in to the catalog (interactive OIDC flow through a browser) and print the token.
    #[command(
        after_help = "Example:\n  quartet catalog login --oidc --auth-method oidc --address https://catalog.example.com:8501"
    )]
    Login(CatalogLoginArgs),
}

#[derive(Args, Debug)]
// The arguments of `quartet catalog login` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct CatalogLoginArgs {
    /// Use the OIDC flow (the only interactive login; `kubernetes` logins are what
    /// CatalogAclToken does).
    #[arg(long, required = true)]
    pub oidc: bool,
    /// Name of the catalog's OIDC auth method.
    #[arg(long)]
    pub auth_method: String,
    /// Address of the catalog, e.g. `https://catalog.example.com:8501`.
    #[arg(long, env = "QUARTET_CATALOG_ADDRESS")]
    pub address: String,
    /// Namespace of the auth method (enterprise).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Metadata for the token's description, `KEY=VALUE` (repeatable).
    #[arg(long = "meta", value_parser = parse_meta)]
    pub meta: Vec<(String, String)>,
    /// Name of an environment variable holding a token to call the catalog with (none needed
    /// by the login itself).
    #[arg(long)]
    pub token_env: Option<String>,
    /// Where the redirect listener listens; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen_addr: SocketAddr,
    /// Host name of the redirect URI (must match the auth method's `AllowedRedirectURIs`).
    #[arg(long, default_value = "localhost")]
    pub redirect_host: String,
    /// How long to wait for the browser to come back.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Write the SecretID to this file (mode 0600) instead of stdout.
    #[arg(long, conflicts_with = "secret")]
    pub out: Option<PathBuf>,
    /// Keep the token in this Kubernetes Secret (`NAMESPACE/NAME`, keys `token` and
    /// `accessorId`) instead of printing it.
    #[arg(long)]
    pub secret: Option<String>,
    /// Kubeconfig for `--secret` (default: the usual kubeconfig or in-cluster config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Output on stdout: the SecretID alone, or the token's JSON (`AccessorID`, `SecretID`, ...).
    #[arg(short = 'o', long, value_enum, default_value = "token")]
    pub output: Output,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
// What `quartet catalog login` prints: the token alone, or the login response as JSON (no doc
// comments: clap would list them in --help).
#[allow(missing_docs)]
pub enum Output {
    Token,
    Json,
}

fn parse_meta(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 30s, 5m)"))
}

/// Why a `quartet catalog login` failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogLoginError {
    /// The arguments are unusable: why.
    #[error("{0}")]
    Input(String),
    /// The catalog could not be reached: why.
    #[error("the catalog is unreachable: {0}")]
    Unreachable(String),
    /// The catalog refused a step of the flow.
    #[error("{step} refused ({status}): {message}")]
    Refused {
        /// The step refused (`auth-url`, `callback`).
        step: &'static str,
        /// The HTTP status.
        status: u16,
        /// The catalog's message.
        message: String,
    },
    /// The local redirect listener failed: why.
    #[error("the redirect listener: {0}")]
    Listener(String),
    /// The identity provider's redirect carried an error: what it said.
    #[error("the provider answered with an error: {0}")]
    Provider(String),
    /// No redirect came back within this long.
    #[error("no answer from the browser within {0:?}")]
    Timeout(Duration),
    /// The redirect's state is not the login's.
    #[error("the redirect's state does not match the login's (a stale or forged redirect)")]
    StateMismatch,
    /// The token could not be written out: why.
    #[error("writing the token: {0}")]
    Output(String),
}

/// What the provider's redirect brought back.
enum Redirect {
    Code { code: String, state: String },
    Error(String),
}

fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

/// The `state` parameter of an authorization URL, when it carries one.
fn query_param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    let query = query.split('#').next().unwrap_or_default();
    url_decode_pairs(query)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

fn url_decode_pairs(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Try to show the URL in a browser; a machine without one is fine (the URL is printed).
fn open_browser(url: &str) {
    let browser = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty());
    let cmd = match browser {
        Some(b) => b,
        None => {
            let has_display = std::env::var_os("DISPLAY").is_some()
                || std::env::var_os("WAYLAND_DISPLAY").is_some();
            let on_path = std::env::var_os("PATH")
                .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("xdg-open").is_file()));
            if !(has_display && on_path) {
                return;
            }
            "xdg-open".to_string()
        }
    };
    let _ = std::process::Command::new(cmd)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// Serve the loopback listener until the provider's redirect arrives.
async fn receive_redirect(
    listener: tokio::net::TcpListener,
    timeout: Duration,
) -> Result<Redirect, CatalogLoginError> {
    use axum::extract::RawQuery;
    use axum::response::Html;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Redirect>(1);
    let app = axum::Router::new().route(
        "/oidc/callback",
        axum::routing::get(move |RawQuery(q): RawQuery| {
            let tx = tx.clone();
            async move {
                let pairs = url_decode_pairs(q.as_deref().unwrap_or_default());
                let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                let (redirect, page) = match (get("code"), get("state"), get("error")) {
                    (_, _, Some(e)) => {
                        let desc = get("error_description").unwrap_or_default();
                        (
                            Redirect::Error(format!("{e} {desc}").trim().to_string()),
                            "Login failed: return to the terminal.",
                        )
                    }
                    (Some(code), Some(state), None) => (
                        Redirect::Code { code, state },
                        "Signed in to the catalog. You can close this window.",
                    ),
                    _ => (
                        Redirect::Error("the redirect carried no code".into()),
                        "Login failed: return to the terminal.",
                    ),
                };
                let _ = tx.send(redirect).await;
                Html(format!(
                    "<!doctype html><title>quartet</title><p>{page}</p>"
                ))
            }
        }),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let server = {
        let stop = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        })
    };
    let got = tokio::time::timeout(timeout, rx.recv()).await;
    // Let the browser's page be written before the listener goes away.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
    match got {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(CatalogLoginError::Listener("closed".into())),
        Err(_) => Err(CatalogLoginError::Timeout(timeout)),
    }
}

async fn post(
    http: &reqwest::Client,
    args: &CatalogLoginArgs,
    token: Option<&str>,
    step: &'static str,
    path: &str,
    body: &Value,
) -> Result<Value, CatalogLoginError> {
    let url = format!("{}{path}", args.address.trim_end_matches('/'));
    let mut req = http.post(&url).json(body);
    if let Some(t) = token {
        req = req.header("X-Catalog-Token", t);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| CatalogLoginError::Unreachable(e.without_url().to_string()))?;
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    if !(200..300).contains(&status) {
        return Err(CatalogLoginError::Refused {
            step,
            status,
            message: text.trim().to_string(),
        });
    }
    serde_json::from_str(&text).map_err(|e| CatalogLoginError::Refused {
        step,
        status,
        message: format!("not JSON: {e}"),
    })
}

async fn write_secret(
    args: &CatalogLoginArgs,
    target: &str,
    token: &Value,
) -> Result<(), CatalogLoginError> {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Patch, PatchParams};
    let (ns, name) = target
        .split_once('/')
        .filter(|(n, m)| !n.is_empty() && !m.is_empty())
        .ok_or_else(|| {
            CatalogLoginError::Input(format!("--secret {target:?} is not NAMESPACE/NAME"))
        })?;
    let out = |e: String| CatalogLoginError::Output(e);
    let config = crate::runtime::kube_client::config_from(args.kubeconfig.as_deref(), None)
        .await
        .map_err(|e| out(format!("{e:#}")))?;
    let client = kube::Client::try_from(config)
        .map_err(|e| out(format!("could not make a Kubernetes client: {e}")))?;
    // Under `data`, as every Secret Quartet writes (`reconcile::owned_secret::QuartetSecret`).
    use base64::Engine;
    let b64 = |v: &Value| {
        base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default())
    };
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "type": "Opaque",
        "data": {"token": b64(&token["SecretID"]), "accessorId": b64(&token["AccessorID"])},
    });
    kube::Api::<Secret>::namespaced(client, ns)
        .patch_metadata(
            name,
            &PatchParams::apply("quartet-catalog-login").force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(|e| out(crate::reconcile::error::kube_cli_sentence(&e)))?;
    Ok(())
}

fn write_file(path: &std::path::Path, content: &str) -> std::io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o.open(path)?;
    f.write_all(content.as_bytes())?;
    f.write_all(b"\n")
}

/// `quartet catalog login --oidc`: runs the browser flow and prints the token.
pub async fn run(args: CatalogArgs) -> Result<(), CatalogLoginError> {
    let CatalogCommand::Login(args) = args.command;
    if !args.oidc {
        return Err(CatalogLoginError::Input(
            "only --oidc logins are interactive".into(),
        ));
    }
    let token = match &args.token_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            CatalogLoginError::Input(format!("--token-env {var}: the variable is not set"))
        })?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(args.listen_addr)
        .await
        .map_err(|e| {
            CatalogLoginError::Listener(format!("cannot listen on {}: {e}", args.listen_addr))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| CatalogLoginError::Listener(e.to_string()))?
        .port();
    let redirect_uri = format!("http://{}:{port}/oidc/callback", args.redirect_host);
    let client_nonce = random_hex(32);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| CatalogLoginError::Unreachable(e.to_string()))?;
    let meta: serde_json::Map<String, Value> = args
        .meta
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let mut body = json!({
        "AuthMethod": args.auth_method, "RedirectURI": redirect_uri, "ClientNonce": client_nonce,
    });
    if let Some(ns) = &args.namespace {
        body["Namespace"] = json!(ns);
    }
    if !meta.is_empty() {
        body["Meta"] = Value::Object(meta);
    }
    let started = post(
        &http,
        &args,
        token.as_deref(),
        "auth-url",
        "/v1/acl/oidc/auth-url",
        &body,
    )
    .await?;
    let auth_url = started["AuthURL"]
        .as_str()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| CatalogLoginError::Refused {
            step: "auth-url",
            status: 200,
            message: "no AuthURL in the answer".into(),
        })?
        .to_string();
    let expected_state = query_param(&auth_url, "state");
    eprintln!("Complete the login in your browser:");
    eprintln!("  {auth_url}");
    eprintln!("Waiting for the redirect on {redirect_uri} ...");
    let _ = std::io::stderr().flush();
    open_browser(&auth_url);
    let (code, state) = match receive_redirect(listener, args.timeout).await? {
        Redirect::Code { code, state } => (code, state),
        Redirect::Error(e) => return Err(CatalogLoginError::Provider(e)),
    };
    if expected_state.as_deref().is_some_and(|s| s != state) {
        return Err(CatalogLoginError::StateMismatch);
    }
    let mut body = json!({
        "AuthMethod": args.auth_method, "State": state, "Code": code, "ClientNonce": client_nonce,
    });
    if let Some(ns) = &args.namespace {
        body["Namespace"] = json!(ns);
    }
    let t = post(
        &http,
        &args,
        token.as_deref(),
        "callback",
        "/v1/acl/oidc/callback",
        &body,
    )
    .await?;
    let secret_id = t["SecretID"].as_str().unwrap_or_default().to_string();
    if secret_id.is_empty() {
        return Err(CatalogLoginError::Refused {
            step: "callback",
            status: 200,
            message: "no SecretID in the answer".into(),
        });
    }
    let accessor = t["AccessorID"].as_str().unwrap_or_default();
    if let Some(path) = &args.out {
        let content = match args.output {
            Output::Token => secret_id.clone(),
            Output::Json => t.to_string(),
        };
        write_file(path, &content)
            .map_err(|e| CatalogLoginError::Output(format!("{}: {e}", path.display())))?;
        eprintln!(
            "Logged in (accessor {accessor}); token written to {}",
            path.display()
        );
    } else if let Some(target) = &args.secret {
        write_secret(&args, target, &t).await?;
        eprintln!("Logged in (accessor {accessor}); token kept in Secret {target}");
    } else {
        match args.output {
            Output::Token => println!("{secret_id}"),
            Output::Json => println!("{t}"),
        }
        eprintln!("Logged in (accessor {accessor})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_percent_decoded() {
        let url = "http://x/authorize?client_id=c&redirect_uri=http%3A%2F%2Flocalhost%3A1%2Fcb&state=ab+c%21";
        assert_eq!(query_param(url, "state").as_deref(), Some("ab c!"));
        assert_eq!(
            query_param(url, "redirect_uri").as_deref(),
            Some("http://localhost:1/cb")
        );
        assert_eq!(query_param(url, "nonce"), None);
    }
}
