//! `quartet leases`: lease operations of the secrets service (spec A §2.6, §4.4) from the
//! command line, against a Connection in the cluster or an address and token.
//!
//! Destructive verbs that act on a prefix (`revoke-prefix`, `revoke-force`) first list and count
//! what they would revoke and ask for confirmation (`--yes` for scripts). `revoke` and
//! `revoke-prefix` send `sync` explicitly: the spec's table says it defaults to false while the
//! real server defaults to true, so saying it makes the verb mean the same on either.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{json, Value};

use crate::api::{Connection, Service};
use crate::clients::http::{Auth, Http, HttpConfig, SecretString};
use crate::clients::ClientError;
use crate::metrics::Metrics;
use crate::reconcile::error::kube_cli_sentence;

/// The connection flags are global to `quartet leases`: they go before or after the verb.
#[derive(Args, Debug)]
pub struct LeasesArgs {
    /// A secrets Connection in the cluster, `NAMESPACE/NAME` (its address, token Secret, CA and
    /// token header are used; the token is read through the kubeconfig's credentials).
    #[arg(long, global = true, conflicts_with = "address")]
    pub connection: Option<String>,
    /// Kubeconfig for `--connection`; default: $KUBECONFIG (a list such as a:b is
    /// merged as kubectl merges it), ~/.kube/config, or the in-cluster service account.
    #[arg(long, global = true, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Address of the secrets service, e.g. `https://secrets.example.com:8200`.
    #[arg(long, global = true, env = "QUARTET_ADDRESS")]
    pub address: Option<String>,
    /// Token for `--address` (read from the environment only, so it never appears in a process
    /// list or a shell history).
    #[arg(skip)]
    pub token: Option<String>,
    /// Header carrying the token with `--address` (`X-Vault-Token` for OpenBao).
    #[arg(long, global = true, default_value = "X-Secrets-Token")]
    pub token_header: String,
    /// Output: a table for people, or the service's `data` as JSON.
    #[arg(short = 'o', long, global = true, value_enum, default_value = "table")]
    pub output: Output,
    #[command(subcommand)]
    // The verb to run (no doc comment: clap would print it in --help).
    #[allow(missing_docs)]
    pub verb: Verb,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
// What `quartet leases` prints: a table for people, or the service's `data` as JSON (no doc
// comments: clap would list them in --help).
#[allow(missing_docs)]
pub enum Output {
    Table,
    Json,
}

#[derive(Subcommand, Debug)]
// The verbs of `quartet leases`; each variant's doc comment is its --help text, and their
// positional arguments have none on purpose (clap would print them).
#[allow(missing_docs)]
pub enum Verb {
    /// Show one lease.
    #[command(
        after_help = "Example:\n  quartet leases lookup database/creds/app/abc123 --connection secrets/prod"
    )]
    Lookup { lease_id: String },
    /// List lease IDs under a prefix (needs sudo).
    #[command(
        after_help = "Example:\n  quartet leases list database/creds/ --address https://secrets.example.com:8200"
    )]
    List { prefix: String },
    /// Renew a lease; `--increment` asks for that many seconds (default: the lease's own TTL).
    #[command(
        after_help = "Example:\n  quartet leases renew database/creds/app/abc123 --increment 1h --connection secrets/prod"
    )]
    Renew {
        lease_id: String,
        #[arg(long)]
        increment: Option<String>,
    },
    /// Revoke one lease.
    #[command(
        after_help = "Example:\n  quartet leases revoke database/creds/app/abc123 --connection secrets/prod"
    )]
    Revoke {
        lease_id: String,
        /// Wait until the revocation is done (default true, as the real server does):
        /// `--sync`, `--sync true` or `--sync false`.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
        sync: bool,
    },
    /// Revoke every lease under a prefix (needs sudo): lists and counts them, then asks.
    #[command(
        after_help = "Example:\n  quartet leases revoke-prefix database/creds/app/ --connection secrets/prod"
    )]
    RevokePrefix {
        prefix: String,
        /// Wait until the revocations are done (default true): `--sync`, `--sync true` or
        /// `--sync false`.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
        sync: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Revoke every lease under a prefix ignoring backend errors (emergencies only; needs
    /// sudo): lists and counts them, then asks.
    #[command(
        after_help = "Example:\n  quartet leases revoke-force database/creds/app/ --yes --connection secrets/prod"
    )]
    RevokeForce {
        prefix: String,
        #[arg(long)]
        yes: bool,
    },
    /// Revoke leases whose token is gone (heavy storage I/O on large servers).
    #[command(after_help = "Example:\n  quartet leases tidy --connection secrets/prod")]
    Tidy,
    /// Count leases; only irrevocable leases can be counted.
    #[command(
        after_help = "Example:\n  quartet leases count --irrevocable --address https://secrets.example.com:8200"
    )]
    Count {
        #[arg(long, required = true)]
        irrevocable: bool,
    },
    /// List irrevocable leases (at most 10,000 unless `--limit N` or `--limit none`).
    #[command(
        after_help = "Example:\n  quartet leases irrevocable --limit none -o json --connection secrets/prod"
    )]
    Irrevocable {
        #[arg(long)]
        limit: Option<String>,
    },
}

/// Why a `quartet leases` command failed.
#[derive(Debug, thiserror::Error)]
pub enum LeasesError {
    /// The arguments are unusable: why.
    #[error("{0}")]
    Usage(String),
    /// The secrets service failed the call.
    #[error(transparent)]
    Remote(#[from] ClientError),
    /// A Kubernetes API error, already a sentence.
    #[error("{0}")]
    Kube(String),
    /// The user answered no at the confirmation prompt.
    #[error("aborted: nothing was revoked")]
    Aborted,
}

/// Run one `quartet leases` command; prints to stdout.
pub async fn run(mut args: LeasesArgs) -> Result<(), LeasesError> {
    args.token = std::env::var("QUARTET_TOKEN").ok();
    let http = client(&args).await?;
    let out = std::io::stdout();
    let mut out = out.lock();
    let mut print = |v: &Value, table: &dyn Fn(&Value) -> String| {
        let text = match args.output {
            Output::Json => serde_json::to_string_pretty(v).unwrap_or_default(),
            Output::Table => table(v),
        };
        let _ = writeln!(out, "{text}");
    };
    match &args.verb {
        Verb::Lookup { lease_id } => {
            let r = http
                .call(
                    "PUT",
                    "/v1/sys/leases/lookup",
                    Some(&json!({ "lease_id": lease_id })),
                )
                .await?;
            print(&r.body["data"], &key_values);
        }
        Verb::List { prefix } => {
            let ids = list(&http, prefix).await?;
            print(&json!({ "keys": ids }), &|v| lines(&v["keys"]));
        }
        Verb::Renew {
            lease_id,
            increment,
        } => {
            let mut body = json!({ "lease_id": lease_id });
            if let Some(i) = increment {
                body["increment"] = increment_seconds(i)?.into();
            }
            let r = http
                .call("PUT", "/v1/sys/leases/renew", Some(&body))
                .await?;
            let env = json!({
                "lease_id": r.body["lease_id"],
                "lease_duration": r.body["lease_duration"],
                "renewable": r.body["renewable"],
            });
            print(&env, &key_values);
        }
        Verb::Revoke { lease_id, sync } => {
            http.call(
                "PUT",
                "/v1/sys/leases/revoke",
                Some(&json!({ "lease_id": lease_id, "sync": sync })),
            )
            .await?;
            print(&json!({ "revoked": lease_id }), &|_| {
                format!("revoked {lease_id}")
            });
        }
        Verb::RevokePrefix { prefix, sync, yes } => {
            let prefix = clean_prefix(prefix)?;
            confirm(&http, &prefix, "revoke", *yes).await?;
            http.call(
                "PUT",
                &format!("/v1/sys/leases/revoke-prefix/{prefix}"),
                Some(&json!({ "sync": sync })),
            )
            .await?;
            print(&json!({ "revokedPrefix": prefix }), &|_| {
                format!("revoked every lease under {prefix}")
            });
        }
        Verb::RevokeForce { prefix, yes } => {
            let prefix = clean_prefix(prefix)?;
            confirm(
                &http,
                &prefix,
                "FORCE-revoke (backend errors ignored)",
                *yes,
            )
            .await?;
            http.call(
                "PUT",
                &format!("/v1/sys/leases/revoke-force/{prefix}"),
                None,
            )
            .await?;
            print(&json!({ "revokedPrefix": prefix }), &|_| {
                format!("force-revoked every lease under {prefix}")
            });
        }
        Verb::Tidy => {
            let r = http.call("POST", "/v1/sys/leases/tidy", None).await?;
            let warnings = r.body["warnings"].clone();
            print(&json!({ "warnings": warnings }), &|v| {
                let w = lines(&v["warnings"]);
                if w.is_empty() {
                    "tidy started".into()
                } else {
                    w
                }
            });
        }
        Verb::Count { .. } => {
            let r = http
                .call("GET", "/v1/sys/leases/count?type=irrevocable", None)
                .await?;
            print(&r.body["data"], &|d| {
                let mut s = format!("irrevocable leases: {}", d["lease_count"]);
                if let Some(counts) = d["counts"].as_object() {
                    for (mount, n) in counts {
                        s.push_str(&format!("\n  {mount:<40} {n}"));
                    }
                }
                s
            });
        }
        Verb::Irrevocable { limit } => {
            let q = match limit {
                Some(l) => format!("?type=irrevocable&limit={l}"),
                None => "?type=irrevocable".into(),
            };
            let r = http
                .call("GET", &format!("/v1/sys/leases{q}"), None)
                .await?;
            let mut data = r.body["data"].clone();
            if let Some(w) = r.body["warnings"].as_array().filter(|w| !w.is_empty()) {
                data["warnings"] = Value::Array(w.clone());
            }
            print(&data, &|d| {
                let mut s = format!("{:<70} {:<24} ERROR", "LEASE ID", "MOUNT");
                for l in d["leases"].as_array().into_iter().flatten() {
                    s.push_str(&format!(
                        "\n{:<70} {:<24} {}",
                        l["lease_id"].as_str().unwrap_or(""),
                        l["mount_id"].as_str().unwrap_or(""),
                        l["error"].as_str().unwrap_or("")
                    ));
                }
                for w in d["warnings"].as_array().into_iter().flatten() {
                    s.push_str(&format!("\nwarning: {}", w.as_str().unwrap_or("")));
                }
                s
            });
        }
    }
    Ok(())
}

/// The lease IDs under `prefix`, recursively (a LIST answers one level: keys ending in `/` are
/// folders).
async fn list(http: &Http, prefix: &str) -> Result<Vec<String>, LeasesError> {
    let mut out = Vec::new();
    let mut todo = vec![prefix.trim_end_matches('/').to_string() + "/"];
    while let Some(dir) = todo.pop() {
        let r = match http
            .call("LIST", &format!("/v1/sys/leases/lookup/{dir}"), None)
            .await
        {
            Ok(r) => r,
            Err(ClientError::Status { status: 404, .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        for k in r.body["data"]["keys"].as_array().into_iter().flatten() {
            let k = k.as_str().unwrap_or_default();
            if k.ends_with('/') {
                todo.push(format!("{dir}{k}"));
            } else {
                out.push(format!("{dir}{k}"));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A prefix as the service takes it: never ending in `/` (the real server refuses a path
/// ending in `/` with 400 and revokes nothing, and lease listings hand out exactly such keys).
fn clean_prefix(prefix: &str) -> Result<String, LeasesError> {
    let p = prefix.trim_matches('/').to_string();
    if p.is_empty() {
        return Err(LeasesError::Usage(
            "refusing an empty prefix: it would revoke every lease of the server".into(),
        ));
    }
    if p == "auth" || p.starts_with("auth/token") {
        return Err(LeasesError::Usage(format!(
            "refusing to revoke {p}: it holds every token (including the ones Quartet and this \
             command use); revoke a narrower prefix"
        )));
    }
    Ok(p)
}

/// List and count what a prefix revocation would revoke, and ask (unless `yes`).
async fn confirm(http: &Http, prefix: &str, what: &str, yes: bool) -> Result<(), LeasesError> {
    let ids = list(http, prefix).await?;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{} lease(s) under {prefix}:", ids.len());
    for id in ids.iter().take(20) {
        let _ = writeln!(err, "  {id}");
    }
    if ids.len() > 20 {
        let _ = writeln!(err, "  ... and {} more", ids.len() - 20);
    }
    if yes {
        return Ok(());
    }
    let _ = write!(err, "{what} these {} lease(s)? [y/N] ", ids.len());
    let _ = err.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| LeasesError::Usage(format!("could not read the confirmation: {e}")))?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        Ok(())
    } else {
        Err(LeasesError::Aborted)
    }
}

/// `--increment` as seconds: a number or a duration such as `1h`.
fn increment_seconds(s: &str) -> Result<u64, LeasesError> {
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    humantime::parse_duration(s)
        .map(|d| d.as_secs())
        .map_err(|e| LeasesError::Usage(format!("--increment {s:?}: {e}")))
}

fn key_values(v: &Value) -> String {
    match v.as_object() {
        Some(o) => o
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s.clone(),
                    Value::Null => "-".into(),
                    other => other.to_string(),
                };
                format!("{k:<16} {v}")
            })
            .collect::<Vec<_>>()
            .join("\n"),
        None => v.to_string(),
    }
}

fn lines(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The HTTP client: from a Connection in the cluster, or from `--address` and `QUARTET_TOKEN`.
async fn client(args: &LeasesArgs) -> Result<Http, LeasesError> {
    let metrics = Arc::new(Metrics::default());
    let (base_url, header, token, ca_pem, service_ns) = match &args.connection {
        Some(c) => {
            let (ns, name) = c.split_once('/').ok_or_else(|| {
                LeasesError::Usage(format!("--connection {c:?}: expected NAMESPACE/NAME"))
            })?;
            let kube = crate::runtime::kube_client::client_from(
                args.kubeconfig.as_deref(),
                metrics.clone(),
            )
            .await
            .map_err(|e| {
                LeasesError::Kube(format!("the Kubernetes client could not be set up: {e:#}"))
            })?;
            let conn = Api::<Connection>::namespaced(kube.clone(), ns)
                .get(name)
                .await
                .map_err(|e| {
                    LeasesError::Kube(match crate::reconcile::Error::kube_for::<Connection>(e) {
                        crate::reconcile::Error::Kube(e) => kube_cli_sentence(&e),
                        not_installed => not_installed.to_string(),
                    })
                })?;
            if conn.spec.service != Service::Secrets {
                return Err(LeasesError::Usage(format!(
                    "Connection {c} is for the {} service, not secrets",
                    conn.spec.service
                )));
            }
            let secrets = Api::<Secret>::namespaced(kube, ns);
            let read = |r: crate::api::SecretKeyRef| {
                let secrets = secrets.clone();
                async move {
                    let s = secrets
                        .get(&r.name)
                        .await
                        .map_err(|e| LeasesError::Kube(kube_cli_sentence(&e)))?;
                    s.data
                        .and_then(|d| d.get(&r.key).map(|b| b.0.clone()))
                        .ok_or_else(|| {
                            LeasesError::Usage(format!(
                                "Secret {ns}/{} has no key {}",
                                r.name, r.key
                            ))
                        })
                }
            };
            let token_ref = conn.spec.token_secret_ref.clone().ok_or_else(|| {
                LeasesError::Usage(format!(
                    "Connection {ns}/{} logs in (spec.auth) instead of naming a token Secret: use --address with the token in QUARTET_TOKEN (`quartet login idp` prints one)",
                    conn.metadata.name.clone().unwrap_or_default()
                ))
            })?;
            let token = String::from_utf8(read(token_ref).await?)
                .map_err(|_| LeasesError::Usage("the token is not UTF-8 text".into()))?;
            let ca = match conn.spec.ca_secret_ref.clone() {
                Some(r) => Some(read(r).await?),
                None => None,
            };
            (
                conn.spec.address.trim_end_matches('/').to_string(),
                conn.spec
                    .token_header
                    .clone()
                    .unwrap_or_else(|| "X-Secrets-Token".into()),
                token.trim_end().to_string(),
                ca,
                conn.spec.service_namespace.clone(),
            )
        }
        None => {
            let address = args.address.clone().ok_or_else(|| {
                LeasesError::Usage(
                    "say where the service is: --connection NAMESPACE/NAME, or --address URL with the token in QUARTET_TOKEN".into(),
                )
            })?;
            let token = args.token.clone().ok_or_else(|| {
                LeasesError::Usage("--address needs the token in QUARTET_TOKEN".into())
            })?;
            (
                address.trim_end_matches('/').to_string(),
                args.token_header.clone(),
                token,
                None,
                None,
            )
        }
    };
    let mut extra_headers = Vec::new();
    if let Some(n) = service_ns {
        extra_headers.push(("X-Secrets-Namespace", n));
    }
    Http::new(
        HttpConfig {
            service: Service::Secrets,
            connection: String::new(),
            base_url,
            auth: Auth::Header(header, SecretString::new(token)),
            timeout: Duration::from_secs(30),
            requests_per_second: 50,
            ca_pem,
            extra_headers,
            max_retries: 2,
            read_only: false,
        },
        metrics,
    )
    .map_err(LeasesError::Remote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_loses_its_trailing_slash() {
        assert_eq!(clean_prefix("ad/library/x/").unwrap(), "ad/library/x");
    }

    #[test]
    fn prefixes_that_hold_every_token_are_refused() {
        assert!(clean_prefix("auth/token/").is_err());
        assert!(clean_prefix("/").is_err());
        assert!(clean_prefix("auth").is_err());
        assert!(clean_prefix("auth/userpass/login").is_ok());
    }

    #[test]
    fn increments_are_seconds_or_durations() {
        assert_eq!(increment_seconds("90").unwrap(), 90);
        assert_eq!(increment_seconds("1h").unwrap(), 3600);
        assert!(increment_seconds("soon").is_err());
    }
}
