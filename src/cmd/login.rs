//! `quartet login idp USERNAME --address URL`: log in with the secrets service's
//! identity-provider auth method (spec A §4.2) and print the client token.
//!
//! The password is read from `QUARTET_PASSWORD` or prompted for (without echo on a terminal).
//! When the account uses the verification app, the service answers that a passcode is required
//! and the command asks for it. For a push with a number challenge, the login is sent with a
//! random `nonce` and, while the push waits, `verify/:nonce` is polled for the number to pick,
//! which is printed. The token goes to stdout only (`-o json`: the whole `auth` object).

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use rand::Rng;
use serde_json::{json, Value};

use crate::clients::http::error_message;

#[derive(Args, Debug)]
// The arguments of `quartet login` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct LoginArgs {
    #[command(subcommand)]
    pub method: LoginMethod,
}

#[derive(Subcommand, Debug)]
// The login methods of `quartet login`; each variant's doc comment is its --help text.
#[allow(missing_docs)]
pub enum LoginMethod {
    /// Log in with the identity-provider auth method: password, then a passcode or a push
    /// when the account asks for one.
    #[command(
        after_help = "Example:\n  quartet login idp alice --address https://secrets.example.com:8200\n  (the password is read from QUARTET_PASSWORD, or prompted for)"
    )]
    Idp(IdpLoginArgs),
}

#[derive(Args, Debug)]
// The arguments of `quartet login idp` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct IdpLoginArgs {
    /// The user's name at the identity provider.
    pub username: String,
    /// Address of the secrets service, e.g. `https://secrets.example.com:8200`.
    #[arg(long, env = "QUARTET_ADDRESS")]
    pub address: String,
    /// Path the auth method is mounted at.
    #[arg(long, default_value = "idp")]
    pub mount: String,
    /// MFA provider to use when the account has several (e.g. `OKTA`, `GOOGLE`).
    #[arg(long)]
    pub provider: Option<String>,
    /// Output: the client token alone, or the whole `auth` object as JSON.
    #[arg(short = 'o', long, value_enum, default_value = "token")]
    pub output: LoginOutput,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
// What `quartet login` prints: the token alone, or the auth response as JSON (no doc comments: clap
// would list them in --help).
#[allow(missing_docs)]
pub enum LoginOutput {
    Token,
    Json,
}

/// Why a `quartet login` failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The input is unusable (no password, a prompt failed): why.
    #[error("{0}")]
    Input(String),
    /// The service could not be reached: why.
    #[error("the secrets service is unreachable: {0}")]
    Unreachable(String),
    #[error("login refused ({status}): {message}")]
    /// The service refused the login.
    Refused {
        /// The HTTP status.
        status: u16,
        /// The service's message.
        message: String,
    },
}

/// Read one line from the terminal or stdin, without echo on a terminal.
fn prompt(label: &str, secret: bool) -> Result<String, LoginError> {
    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    if tty {
        eprint!("{label}: ");
        let _ = std::io::stderr().flush();
    }
    let hide = secret && tty && cfg!(unix);
    if hide {
        let _ = std::process::Command::new("stty").arg("-echo").status();
    }
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if hide {
        let _ = std::process::Command::new("stty").arg("echo").status();
        eprintln!();
    }
    read.map_err(|e| LoginError::Input(format!("cannot read the {label}: {e}")))?;
    let line = line.trim_end_matches(['\n', '\r']).to_string();
    if line.is_empty() {
        return Err(LoginError::Input(format!("no {label} given")));
    }
    Ok(line)
}

use crate::clients::http::encode_segment as segment;

/// Poll `verify/:nonce` until the number challenge appears, and print it.
async fn show_number(client: reqwest::Client, url: String) {
    loop {
        if let Ok(resp) = client.get(&url).send().await {
            if resp.status().is_success() {
                if let Ok(body) = resp.json::<Value>().await {
                    if let Some(n) = body["data"]["correct_answer"].as_i64() {
                        eprintln!("Pick {n} in the verification app to approve the sign-in.");
                        return;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `quartet login`: logs in and prints the token; fails when the service refuses or cannot be
/// reached.
pub async fn run(args: LoginArgs) -> Result<(), LoginError> {
    let LoginMethod::Idp(args) = args.method;
    let password = match std::env::var("QUARTET_PASSWORD") {
        Ok(p) if !p.is_empty() => p,
        _ => prompt("Password", true)?,
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| LoginError::Unreachable(e.to_string()))?;
    let base = args.address.trim_end_matches('/').to_string();
    let mount = args
        .mount
        .trim_matches('/')
        .split('/')
        .map(segment)
        .collect::<Vec<_>>()
        .join("/");
    let login_url = format!("{base}/v1/auth/{mount}/login/{}", segment(&args.username));
    let mut passcode: Option<String> = None;
    loop {
        let nonce = format!("{:032x}", rand::rng().random::<u128>());
        let mut body = json!({"password": password, "nonce": nonce});
        if let Some(p) = &args.provider {
            body["provider"] = json!(p);
        }
        if let Some(code) = &passcode {
            body["totp"] = json!(code);
        }
        let watcher = tokio::spawn(show_number(
            client.clone(),
            format!("{base}/v1/auth/{mount}/verify/{nonce}"),
        ));
        let sent = client.post(&login_url).json(&body).send().await;
        watcher.abort();
        let resp = sent.map_err(|e| LoginError::Unreachable(e.to_string()))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| LoginError::Unreachable(e.to_string()))?;
        if status.is_success() {
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let auth = &body["auth"];
            let Some(token) = auth["client_token"].as_str() else {
                return Err(LoginError::Refused {
                    status: status.as_u16(),
                    message: "the response has no auth.client_token".into(),
                });
            };
            match args.output {
                LoginOutput::Token => println!("{token}"),
                LoginOutput::Json => {
                    println!("{}", serde_json::to_string_pretty(auth).unwrap_or_default())
                }
            }
            return Ok(());
        }
        let message = error_message(&bytes, status);
        if passcode.is_none() && message.contains("passcode parameter is required") {
            passcode = Some(prompt("Passcode", false)?);
            continue;
        }
        return Err(LoginError::Refused {
            status: status.as_u16(),
            message,
        });
    }
}
