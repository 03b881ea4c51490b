//! Command line: `quartet run | crd | plan | sandbox | dev | leases | login | catalog`.

pub mod catalog;
pub mod crd;
#[cfg(feature = "sandbox")]
pub mod dev;
pub mod leases;
pub mod login;
pub mod plan;
pub mod run;
#[cfg(feature = "sandbox")]
pub mod sandbox;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `quartet --version`: the crate's version and the git commit it was built from (set by
/// `build.rs`; `unknown` when built outside a git checkout without `QUARTET_GIT_COMMIT`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("QUARTET_GIT_COMMIT"),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "quartet",
    version = VERSION,
    about = "Kubernetes operator for a secrets service, a workspace service, a catalog and a scheduler"
)]
// The command line of `quartet` (no doc comment: clap would print it as the program's about text).
#[allow(missing_docs)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format: `text` or `json`. Log level comes from RUST_LOG (default `info`).
    #[arg(
        long,
        global = true,
        env = "QUARTET_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: String,
    /// Export OpenTelemetry traces over OTLP/HTTP (protobuf) to this collector base URL (the
    /// spans go to `{url}/v1/traces`), e.g. `http://otel-collector:4318`. Off when unset; the
    /// other standard `OTEL_*` variables (headers, service name, batch delay) apply.
    #[arg(long, global = true, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

#[derive(Subcommand, Debug)]
// The subcommands of `quartet`; each variant's doc comment is its --help text.
#[allow(missing_docs)]
pub enum Command {
    /// Run the controllers against a cluster (kubeconfig, or in-cluster config).
    #[command(after_help = "Example:\n  quartet run --namespace team-a --leader-elect")]
    Run(run::RunArgs),
    /// Print the CustomResourceDefinitions as YAML, or write one file per kind.
    #[command(
        after_help = "Example:\n  quartet crd | kubectl apply --server-side -f -\n  quartet crd --out crds --chart charts/quartet/templates/crds"
    )]
    Crd(crd::CrdArgs),
    /// What applying manifests would do to the services, without changing anything: exit 0
    /// when nothing would change, 2 when something would, 1 when a resource is blocked or on
    /// error.
    #[command(after_help = "Example:\n  quartet plan -f examples/secrets-policy.yaml -o markdown")]
    Plan(plan::PlanArgs),
    /// Start the emulated services only (and, with --kubeconfig, the dev Kubernetes API server).
    /// For development and tests, never production.
    #[cfg(feature = "sandbox")]
    #[command(after_help = "Example:\n  quartet sandbox --kubeconfig sandbox.kubeconfig")]
    Sandbox(sandbox::SandboxArgs),
    /// Everything embedded for a first look: dev Kubernetes API server with the CRDs installed,
    /// the emulated services, Connections to them, and the controllers. Serves until Ctrl-C.
    #[cfg(feature = "sandbox")]
    #[command(after_help = "Example:\n  quartet dev --kubeconfig quartet-dev.kubeconfig")]
    Dev(dev::DevArgs),
    /// Lease operations of the secrets service: lookup, list, renew, revoke, revoke-prefix,
    /// revoke-force, tidy, count and list irrevocable leases.
    #[command(
        after_help = "Example:\n  quartet leases count --irrevocable --connection secrets/prod"
    )]
    Leases(leases::LeasesArgs),
    /// Log in to the secrets service (identity-provider auth method) and print the token.
    #[command(
        after_help = "Example:\n  quartet login idp alice --address https://secrets.example.com:8200"
    )]
    Login(login::LoginArgs),
    /// The catalog from the command line: `login --oidc` (interactive OIDC login).
    #[command(
        after_help = "Example:\n  quartet catalog login --oidc --auth-method oidc --address https://catalog.example.com:8501"
    )]
    Catalog(catalog::CatalogArgs),
    /// Not in this build (built without the `sandbox` feature).
    #[cfg(not(feature = "sandbox"))]
    #[command(hide = true)]
    Sandbox(NotBuilt),
    /// Not in this build (built without the `sandbox` feature).
    #[cfg(not(feature = "sandbox"))]
    #[command(hide = true)]
    Dev(NotBuilt),
}

/// Any arguments of a subcommand this build leaves out.
#[cfg(not(feature = "sandbox"))]
#[derive(clap::Args, Debug)]
pub struct NotBuilt {
    /// The arguments given, unread: the command is refused whatever they are.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}

/// What `quartet sandbox|dev` says in a build without the `sandbox` feature.
#[cfg(not(feature = "sandbox"))]
fn not_built(command: &str) -> anyhow::Result<()> {
    anyhow::bail!(
        "`quartet {command}` is not in this build: it was built without the `sandbox` feature, as \
         production images are (they carry no emulated services and no dev Kubernetes API \
         server). Use a development build, which has it by default: from a checkout of the \
         source, `cargo run --release -- {command}` (or `cargo install --path .` for a \
         `quartet` binary with it)"
    )
}

/// The `quartet` binary: parses the command line, sets up logging and traces, runs the command and
/// returns the exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    if !cli.command.serves() {
        end_quietly_on_a_closed_pipe();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Made inside the runtime (a gRPC exporter's channel runs on it) and declared after it, so
    // it is dropped first: dropping it sends the spans still queued, which needs the runtime.
    let traces = {
        let _in_runtime = runtime.enter();
        crate::traces::init(&cli.log_format, cli.otlp_endpoint.as_deref())
    };
    let _traces = match traces {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        if let Command::Plan(args) = cli.command {
            return plan::run(args).await;
        }
        let done = match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Crd(args) => crd::crd(args),
            #[cfg(feature = "sandbox")]
            Command::Sandbox(args) => sandbox::sandbox(args).await,
            #[cfg(feature = "sandbox")]
            Command::Dev(args) => dev::dev(args).await,
            Command::Leases(args) => leases::run(args).await.map_err(Into::into),
            #[cfg(not(feature = "sandbox"))]
            Command::Sandbox(_) => not_built("sandbox"),
            #[cfg(not(feature = "sandbox"))]
            Command::Dev(_) => not_built("dev"),
            Command::Login(args) => login::run(args).await.map_err(Into::into),
            Command::Catalog(args) => catalog::run(args).await.map_err(Into::into),
            Command::Plan(_) => unreachable!("handled above"),
        };
        done.map(|()| ExitCode::SUCCESS)
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes in one line, each said once: many errors (kube's among them) already
/// end with their cause's message, which `{:#}` would print a second time. A Kubernetes error
/// is said as a sentence, and what lies under it is not said: kube's own text carries a debug
/// dump of the API server's answer.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let kube = cause.downcast_ref::<kube::Error>();
        let said = kube.map_or_else(
            || cause.to_string(),
            crate::reconcile::error::kube_cli_sentence,
        );
        if line.is_empty() {
            line = said;
        } else if !line.contains(&said) {
            line.push_str(": ");
            line.push_str(&said);
        }
        if kube.is_some() {
            break;
        }
    }
    line
}

impl Command {
    /// Whether the command is a server that runs until stopped (`run`, `dev`, `sandbox`); the
    /// others print their answer and end.
    fn serves(&self) -> bool {
        matches!(
            self,
            Command::Run(_) | Command::Dev(_) | Command::Sandbox(_)
        )
    }
}

/// A command that prints its answer ends at once, silently, when its reader goes (`quartet crd
/// | head -1`), as `cat` or `kubectl` do, instead of panicking on the failed write: SIGPIPE gets
/// its default action back (Rust's runtime ignores it so that a failed write is an error). The
/// servers keep it ignored, and sockets are written with `MSG_NOSIGNAL` in any case.
fn end_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called once at start, before any thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A command line clap refused (or `--help`/`--version`, which it answers the same way): printed
/// as clap prints it, with clap's exit code, 2, except for `quartet plan`, whose 2 means "changes
/// would be made": a CI job must not read a mistyped flag as a plan with changes, so it gets 1,
/// the plan's code for an error.
fn usage_error(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if !e.use_stderr() {
        return ExitCode::SUCCESS;
    }
    let plan = std::env::args_os().skip(1).any(|a| a == "plan");
    ExitCode::from(if plan { 1 } else { 2 })
}

#[cfg(test)]
mod tests {
    use super::one_line;

    fn forbidden() -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            status: Some(kube::core::response::StatusSummary::Failure),
            code: 403,
            message: "secrets \"k\" is forbidden: User \"u\" cannot get resource \"secrets\""
                .into(),
            metadata: None,
            reason: "Forbidden".into(),
            details: None,
        }))
    }

    #[test]
    fn a_kubernetes_error_is_said_once_as_a_sentence_without_kubes_debug_dump() {
        let direct = anyhow::Error::new(forbidden());
        assert_eq!(
            one_line(&direct),
            "forbidden: secrets \"k\" is forbidden: User \"u\" cannot get resource \"secrets\""
        );
        let under_context = anyhow::Error::new(forbidden()).context("could not read the key");
        assert_eq!(
            one_line(&under_context),
            "could not read the key: forbidden: secrets \"k\" is forbidden: User \"u\" cannot get resource \"secrets\""
        );
        let io = anyhow::Error::new(std::io::Error::other("disk full")).context("writing");
        assert_eq!(one_line(&io), "writing: disk full");
    }
}
