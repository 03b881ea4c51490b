//! Logging and OpenTelemetry traces. Traces are off unless an OTLP endpoint is given
//! (`--otlp-endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT`; the other standard `OTEL_*` variables,
//! e.g. `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_BSP_SCHEDULE_DELAY`, are read by
//! the exporter). Spans go out over OTLP/HTTP with protobuf bodies, or over OTLP/gRPC with
//! `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`. Either speaks TLS to an `https://` endpoint, trusting the
//! public roots (webpki) and the CA of `OTEL_EXPORTER_OTLP_CERTIFICATE`, with a client
//! certificate for mutual TLS from `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` and `_CLIENT_KEY`
//! (the specification's variables, which the exporter crate does not read itself).
//!
//! The spans are made with `tracing` on the target `quartet::trace`, which only the
//! OpenTelemetry layer sees, so the log lines stay as they are: one root span per reconcile
//! pass, a child per service call and per Kubernetes write. A resource annotated with a W3C
//! `traceparent` gets a link from its reconcile spans to that trace (a link rather than a
//! parent: the resource's later resyncs do not pile into the trace that applied it).

use std::collections::HashMap;

use kube::ResourceExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` names a protocol this build lacks (http/json).
    #[error(
        "OTLP protocol {0:?} is not in this build: set OTEL_EXPORTER_OTLP_PROTOCOL to \
         http/protobuf (the default) or grpc"
    )]
    Protocol(String),
    /// A TLS file named by a standard variable cannot be read or is not PEM: which and why.
    #[error("cannot use {var}={path} for the OTLP exporter's TLS: {reason}")]
    TlsFile {
        /// The variable that names the file.
        var: String,
        /// The path as the variable gives it.
        path: String,
        /// Why it cannot be used (an I/O error, or not PEM); never the contents.
        reason: String,
    },
    /// A client certificate without its key, or a key without its certificate.
    #[error(
        "OTLP mutual TLS needs both OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and \
         OTEL_EXPORTER_OTLP_CLIENT_KEY (or their TRACES_ forms); only {0} is set"
    )]
    ClientKeyPair(String),
    /// The exporter could not be built (a bad endpoint or header): why.
    #[error("cannot set up the OTLP trace exporter: {0}")]
    Exporter(String),
}

/// Keeps the trace exporter alive; dropping it sends the spans still queued.
pub struct Guard(Option<opentelemetry_sdk::trace::SdkTracerProvider>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = p.shutdown();
        }
    }
}

/// The log lines' and the spans' subscriber. `otlp_endpoint`: the collector's base URL (over
/// HTTP the traces go to `{endpoint}/v1/traces`), `None` for no traces (unless
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` names one). Call it inside the tokio runtime (the
/// gRPC exporter's channel lives there) and drop the guard before the runtime.
pub fn init(format: &str, otlp_endpoint: Option<&str>) -> Result<Guard, Error> {
    use tracing_subscriber::EnvFilter;
    let mut filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,kube=warn,hyper=warn,tower=warn"))
        .add_directive("quartet::trace=off".parse().expect("a valid directive"));
    // A watch's failure is said by Quartet, once per run of failures and as a sentence
    // (`reconcile::watch_failures`); kube's watcher says a 403 again at every retry, with the
    // API server's answer in debug form. Its lines stay available when RUST_LOG names kube.
    if !std::env::var("RUST_LOG").is_ok_and(|f| f.contains("kube")) {
        filter = filter.add_directive(
            "kube_runtime::watcher=error"
                .parse()
                .expect("a valid directive"),
        );
    }
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let fmt = if format == "json" {
        fmt.json()
            .map_event_format(ChangeRecords)
            .with_filter(filter)
            .boxed()
    } else {
        fmt.with_filter(filter).boxed()
    };
    let traces_endpoint = std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty());
    let Some(endpoint) = otlp_endpoint
        .filter(|e| !e.is_empty())
        .or(traces_endpoint.as_deref())
    else {
        tracing_subscriber::registry().with(fmt).init();
        return Ok(Guard(None));
    };
    let provider = provider(otlp_endpoint.filter(|e| !e.is_empty()))?;
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("quartet"))
        .with_filter(
            tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::TRACE),
        );
    tracing_subscriber::registry().with(fmt).with(layer).init();
    let over = match transport()? {
        Transport::Http => "OTLP/HTTP",
        Transport::Grpc => "OTLP/gRPC",
    };
    tracing::info!(host = host_of(endpoint), "exporting traces over {over}");
    Ok(Guard(Some(provider)))
}

const TARGET: &str = "quartet::trace";

/// The log target of the change records (the change log writes on it), which the JSON log
/// lines write as objects ([`ChangeRecords`]).
pub const CHANGE_LOG_TARGET: &str = "quartet::changes";

/// The JSON log lines, with a change record (the change log's) as a JSON object in the
/// line's `change` field rather than a string holding one, so that a log agent (or `jq
/// .fields.change.resource.kind`) reads it as it is. tracing's JSON formatter writes every field
/// as a string; this one line in a thousand is parsed again and written with the object in it.
struct ChangeRecords<F>(F);

impl<S, N, F> tracing_subscriber::fmt::FormatEvent<S, N> for ChangeRecords<F>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
    F: tracing_subscriber::fmt::FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        if event.metadata().target() != CHANGE_LOG_TARGET {
            return self.0.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.0.format_event(
            ctx,
            tracing_subscriber::fmt::format::Writer::new(&mut line),
            event,
        )?;
        let Ok(mut parsed) = serde_json::from_str::<serde_json::Value>(line.trim_end()) else {
            return writer.write_str(&line);
        };
        if let Some(change) = parsed.pointer_mut("/fields/change") {
            if let Some(record) = change
                .as_str()
                .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            {
                *change = record;
            }
        }
        writeln!(writer, "{parsed}")
    }
}

/// The annotation naming the trace a resource's reconciles link to (W3C Trace Context).
pub const TRACEPARENT: &str = "traceparent";
/// Its vendor-specific companion.
pub const TRACESTATE: &str = "tracestate";

/// The host of an endpoint URL, for messages: a URL may carry credentials.
fn host_of(endpoint: &str) -> String {
    endpoint
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.authority().map(|a| a.host().to_string()))
        .unwrap_or_default()
}

/// The OTLP transport named by the standard variables.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    /// `http/protobuf` (the default): `POST {endpoint}/v1/traces`.
    Http,
    /// `grpc`: the collector's `TraceService/Export`, at the endpoint as given.
    Grpc,
}

fn transport() -> Result<Transport, Error> {
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    match protocol.as_str() {
        "" | "http/protobuf" => Ok(Transport::Http),
        "grpc" => Ok(Transport::Grpc),
        _ => Err(Error::Protocol(protocol)),
    }
}

/// Must run inside the tokio runtime: the gRPC channel starts its connection task there.
fn provider(endpoint: Option<&str>) -> Result<opentelemetry_sdk::trace::SdkTracerProvider, Error> {
    let exporter = match transport()? {
        Transport::Http => {
            let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
            if let Some(e) = endpoint {
                // The flag is a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is.
                exporter = exporter.with_endpoint(format!("{}/v1/traces", e.trim_end_matches('/')));
            }
            let files = TlsFiles::read()?;
            if files.ca.is_some() || files.identity.is_some() {
                exporter = exporter.with_http_client(http_client(&files)?);
            }
            exporter.build()
        }
        Transport::Grpc => {
            let configured = endpoint.map(str::to_string).or_else(|| {
                [
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                ]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|e| !e.is_empty()))
            });
            let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
            if configured
                .as_deref()
                .is_some_and(|e| e.starts_with("https://"))
            {
                exporter = exporter.with_tls_config(grpc_tls(&TlsFiles::read()?));
            }
            if let Some(e) = endpoint {
                exporter = exporter.with_endpoint(e.to_string());
            }
            exporter.build()
        }
    }
    .map_err(|e| Error::Exporter(e.to_string()))?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("quartet");
    }
    Ok(opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// The TLS files the standard variables name (the `TRACES_` form first), read.
struct TlsFiles {
    /// The CA bundle to trust besides the public roots.
    ca: Option<Pem>,
    /// The client certificate chain and its key, for mutual TLS.
    identity: Option<(Pem, Pem)>,
}

/// One PEM file and the variable that named it (for errors: they name the two, never the
/// contents).
struct Pem {
    var: String,
    path: String,
    pem: Vec<u8>,
}

impl Pem {
    fn unusable(&self, reason: impl ToString) -> Error {
        Error::TlsFile {
            var: self.var.clone(),
            path: self.path.clone(),
            reason: reason.to_string(),
        }
    }
}

impl TlsFiles {
    fn read() -> Result<TlsFiles, Error> {
        let ca = pem_file("CERTIFICATE")?;
        let identity = match (pem_file("CLIENT_CERTIFICATE")?, pem_file("CLIENT_KEY")?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (Some(one), None) | (None, Some(one)) => return Err(Error::ClientKeyPair(one.var)),
            (None, None) => None,
        };
        Ok(TlsFiles { ca, identity })
    }
}

/// `OTEL_EXPORTER_OTLP_TRACES_{name}` or else `OTEL_EXPORTER_OTLP_{name}`, and the PEM file it
/// names.
fn pem_file(name: &str) -> Result<Option<Pem>, Error> {
    let Some((var, path)) = ["OTEL_EXPORTER_OTLP_TRACES_", "OTEL_EXPORTER_OTLP_"]
        .iter()
        .map(|prefix| format!("{prefix}{name}"))
        .find_map(|var| {
            let path = std::env::var(&var).ok().filter(|p| !p.is_empty())?;
            Some((var, path))
        })
    else {
        return Ok(None);
    };
    let mut file = Pem {
        var,
        path,
        pem: Vec::new(),
    };
    file.pem = std::fs::read(&file.path).map_err(|e| file.unusable(e))?;
    if !file.pem.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(file.unusable("the file holds no PEM block"));
    }
    Ok(Some(file))
}

/// The gRPC channel's TLS: the public roots, the CA and the client certificate of the variables.
fn grpc_tls(files: &TlsFiles) -> opentelemetry_otlp::tonic_types::transport::ClientTlsConfig {
    use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig, Identity};
    let mut tls = ClientTlsConfig::new().with_webpki_roots();
    if let Some(ca) = &files.ca {
        tls = tls.ca_certificate(Certificate::from_pem(&ca.pem));
    }
    if let Some((cert, key)) = &files.identity {
        tls = tls.identity(Identity::from_pem(&cert.pem, &key.pem));
    }
    tls
}

/// The HTTP exporter's client when the variables name a CA or a client certificate (the
/// exporter's own client trusts the public roots only), with the exporter's timeout
/// (`OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`, milliseconds, 10 s by default).
fn http_client(files: &TlsFiles) -> Result<reqwest::blocking::Client, Error> {
    let timeout = [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse::<u64>().ok())
    .map_or(
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis,
    );
    let mut builder = reqwest::blocking::Client::builder().timeout(timeout);
    if let Some(ca) = &files.ca {
        for cert in reqwest::Certificate::from_pem_bundle(&ca.pem).map_err(|e| ca.unusable(e))? {
            builder = builder.add_root_certificate(cert);
        }
    }
    if let Some((cert, key)) = &files.identity {
        let pem = [key.pem.as_slice(), b"\n", cert.pem.as_slice()].concat();
        builder =
            builder.identity(reqwest::Identity::from_pem(&pem).map_err(|e| cert.unusable(e))?);
    }
    // A blocking client owns a runtime of its own, which cannot be made inside the caller's
    // (the exporter crate builds its default client the same way).
    std::thread::spawn(move || builder.build())
        .join()
        .map_err(|_| Error::Exporter("the HTTP client's thread panicked".into()))?
        .map_err(|e| Error::Exporter(e.to_string()))
}

/// The root span of one reconcile pass over `obj`, linked to the trace of its `traceparent`
/// annotation when it has a valid one.
pub fn reconcile_span<K: kube::Resource<DynamicType = ()>>(obj: &K) -> Span {
    let kind = K::kind(&());
    let span = tracing::info_span!(
        target: TARGET,
        parent: None,
        "reconcile",
        otel.name = %format!("reconcile {kind}"),
        kind = %kind,
        namespace = %obj.namespace().unwrap_or_default(),
        name = %obj.name_any(),
        generation = obj.meta().generation.unwrap_or_default(),
        outcome = Empty,
        error.category = Empty,
        otel.status_code = Empty,
    );
    if let Some(parent) = obj.annotations().get(TRACEPARENT) {
        let mut carrier = HashMap::from([(TRACEPARENT.to_string(), parent.clone())]);
        if let Some(state) = obj.annotations().get(TRACESTATE) {
            carrier.insert(TRACESTATE.to_string(), state.clone());
        }
        let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        let linked = cx.span().span_context().clone();
        if linked.is_valid() {
            span.add_link(linked);
        }
    }
    span
}

/// Record how the pass ended on its span: `outcome` `ok` or `error`, and the error's category.
pub fn reconciled(span: &Span, error_category: Option<&str>) {
    match error_category {
        None => {
            span.record("outcome", "ok");
        }
        Some(c) => {
            span.record("outcome", "error");
            span.record("error.category", c);
            span.record("otel.status_code", "ERROR");
        }
    }
}

/// The span of one call to a service (`path`: the template, ids as placeholders).
pub fn call_span(service: &str, connection: &str, method: &str, path: &str) -> Span {
    let method = method.to_ascii_uppercase();
    tracing::info_span!(
        target: TARGET,
        "call",
        otel.name = %format!("{service} {method} {path}"),
        otel.kind = "client",
        service = %service,
        connection = %connection,
        http.request.method = %method,
        url.template = %path,
        http.response.status_code = Empty,
        retries = Empty,
        otel.status_code = Empty,
    )
}

/// Record a call's answer (0: none) on its span.
pub fn called(span: &Span, status: u16) {
    // i64: the OpenTelemetry layer exports unsigned integers as strings.
    span.record("http.response.status_code", i64::from(status));
    if !(200..400).contains(&status) {
        span.record("otel.status_code", "ERROR");
    }
}

/// Record on the current call's span how many times it was retried (once, when the client is
/// done with it: each record adds an attribute). No-op outside a call span.
pub fn retried(retries: u32) {
    Span::current().record("retries", i64::from(retries));
}

/// The span of one write to the Kubernetes API (`verb` and `resource` as in
/// `quartet_kube_api_calls_total`); reads and watches get none.
pub fn kube_write_span(verb: &str, resource: &str) -> Option<Span> {
    if !matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    ) {
        return None;
    }
    Some(tracing::info_span!(
        target: TARGET,
        "kubernetes write",
        otel.name = %format!("kubernetes {verb} {resource}"),
        otel.kind = "client",
        verb = %verb,
        resource = %resource,
        http.response.status_code = Empty,
    ))
}
