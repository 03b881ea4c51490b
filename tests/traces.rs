//! OpenTelemetry traces end to end: the built `quartet` binary exports its spans over
//! OTLP/HTTP and over OTLP/gRPC, each in plaintext and with mutual TLS to a collector whose
//! certificate a private CA signed, to a receiver inside this test, which decodes them with the
//! `opentelemetry-proto` types (for gRPC, the collector service generated from them). One reconcile of a SecretsPolicy whose write fails once (a sandbox fault) and is
//! retried must show as a root span with the call and the Kubernetes write as its children,
//! linked to the trace named in the resource's `traceparent` annotation.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use support::*;

/// An OTLP/HTTP receiver on a loopback port keeping every span it is sent.
struct Receiver {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    posts: Arc<Mutex<usize>>,
}

impl Receiver {
    fn start() -> Receiver {
        Receiver::start_http(None)
    }

    /// Over HTTPS with `pki`'s server certificate, requiring a client certificate of its CA.
    fn start_https(pki: &Pki) -> Receiver {
        Receiver::start_http(Some(pki.rustls_server()))
    }

    fn start_http(tls: Option<Arc<rustls::ServerConfig>>) -> Receiver {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let posts = Arc::new(Mutex::new(0usize));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = match tls {
            Some(_) => format!("https://localhost:{port}"),
            None => format!("http://127.0.0.1:{port}"),
        };
        let (kept, counted) = (spans.clone(), posts.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = axum::Router::new().route(
                    "/v1/traces",
                    axum::routing::post(move |body: axum::body::Bytes| {
                        let (kept, counted) = (kept.clone(), counted.clone());
                        async move {
                            *counted.lock().unwrap() += 1;
                            let Ok(req) = ExportTraceServiceRequest::decode(body) else {
                                return http::StatusCode::BAD_REQUEST;
                            };
                            let mut kept = kept.lock().unwrap();
                            for rs in req.resource_spans {
                                for ss in rs.scope_spans {
                                    kept.extend(ss.spans);
                                }
                            }
                            http::StatusCode::OK
                        }
                    }),
                );
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                match tls {
                    Some(config) => {
                        let tls =
                            quartet_sandbox::apiserver::tls::TlsListener::new(listener, config)
                                .unwrap();
                        axum::serve(tls, app).await.unwrap();
                    }
                    None => axum::serve(listener, app).await.unwrap(),
                }
            });
        });
        Receiver { url, spans, posts }
    }

    /// The same over OTLP/gRPC: the collector's `TraceService` on a plaintext HTTP/2 port, or
    /// with `pki`, over TLS requiring a client certificate of its CA.
    fn start_grpc(pki: Option<&Pki>) -> Receiver {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let posts = Arc::new(Mutex::new(0usize));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = match pki {
            Some(_) => format!("https://localhost:{port}"),
            None => format!("http://127.0.0.1:{port}"),
        };
        let tls = pki.map(|pki| {
            tonic::transport::ServerTlsConfig::new()
                .identity(tonic::transport::Identity::from_pem(
                    &pki.server_cert,
                    &pki.server_key,
                ))
                .client_ca_root(tonic::transport::Certificate::from_pem(&pki.ca))
        });
        let collector = Collector {
            spans: spans.clone(),
            posts: posts.clone(),
        };
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let mut server = tonic::transport::Server::builder();
                if let Some(tls) = tls {
                    server = server.tls_config(tls).unwrap();
                }
                server
                    .add_service(TraceServiceServer::new(collector))
                    .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                    .await
                    .unwrap();
            });
        });
        Receiver { url, spans, posts }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

/// A private CA, a server certificate for `localhost` and a client certificate it signed (PEM),
/// and the files the operator is pointed at.
struct Pki {
    ca: String,
    server_cert: String,
    server_key: String,
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(vec![name.to_string()])
                .unwrap()
                .signed_by(&key, &issuer)
                .unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf("localhost");
        let (client_cert, client_key) = leaf("quartet");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("tls.crt"), client_cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), client_key).unwrap();
        Pki {
            ca: ca.pem(),
            server_cert,
            server_key,
            dir,
        }
    }

    /// The operator's variables: trust the CA, present the client certificate.
    fn env(&self) -> Vec<(&'static str, String)> {
        let file = |f: &str| self.dir.path().join(f).display().to_string();
        vec![
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", file("ca.crt")),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", file("tls.crt")),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", file("tls.key")),
        ]
    }

    /// A rustls server config with the server certificate, requiring a client certificate.
    fn rustls_server(&self) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca.as_bytes()).unwrap())
            .unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.into(),
            provider.clone(),
        )
        .build()
        .unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![CertificateDer::from_pem_slice(self.server_cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(self.server_key.as_bytes()).unwrap(),
            )
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// The gRPC side of [`Receiver`].
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
    posts: Arc<Mutex<usize>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        *self.posts.lock().unwrap() += 1;
        let mut kept = self.spans.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            for ss in rs.scope_spans {
                kept.extend(ss.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn attr(span: &Span, key: &str) -> Option<Any> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref())
        .and_then(|v| v.value.clone())
}

fn text(span: &Span, key: &str) -> Option<String> {
    match attr(span, key)? {
        Any::StringValue(s) => Some(s),
        _ => None,
    }
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match attr(span, key)? {
        Any::IntValue(i) => Some(i),
        _ => None,
    }
}

fn describe(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| {
            format!(
                "{} id={} parent={} attrs={:?}",
                s.name,
                hex::encode(&s.span_id),
                hex::encode(&s.parent_span_id),
                s.attributes
                    .iter()
                    .map(|a| format!(
                        "{}={:?}",
                        a.key,
                        a.value.as_ref().and_then(|v| v.value.clone())
                    ))
                    .collect::<Vec<_>>()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn one_reconcile_with_a_retried_call_is_a_span_tree_linked_to_the_resources_traceparent() {
    a_retried_call_arrives_as_a_span_tree(Receiver::start(), &[]);
}

/// A sandbox with a secrets Connection and `fault` set, and an operator started with `env`
/// that exports its spans to `receiver`.
fn traced(
    receiver: &Receiver,
    fault: serde_json::Value,
    env: &[(&str, &str)],
) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token);
    let (status, _) = http(
        "POST",
        &format!("{}/_sandbox/faults", sb.url("secrets")),
        None,
        Some(fault),
    );
    assert!(status < 300, "fault not set: {status}");
    // A short export interval, so the test does not wait the default 5 s per batch. The
    // operator inherits it (the other tests of this binary do not mind it).
    std::env::set_var("OTEL_BSP_SCHEDULE_DELAY", "200");
    let op = Operator::start_with_env(&sb, "5m", &["--otlp-endpoint", &receiver.url], env);
    (sb, op)
}

/// The pass's other Kubernetes writes (the finalizer's patch, its Event) and a Connection's
/// check are in traces too, and a pass whose write the service rejects (a failure recorded in
/// status, not returned) is exported as one that failed, with its category.
#[test]
fn a_rejected_pass_is_an_error_span_and_every_write_of_a_pass_and_a_connection_check_are_traced() {
    let receiver = Receiver::start();
    let (sb, op) = traced(
        &receiver,
        json!({"method": "PUT", "path": "/v1/sys/policies/acl/refused", "status": 400, "count": 100}),
        &[],
    );
    for name in ["accepted", "refused"] {
        sb.apply_ok(&format!(
            "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: {name}, namespace: default}}\n\
             spec: {{type: acl, policy: \"path \\\"t/*\\\" {{ capabilities = [\\\"read\\\"] }}\"}}\n"
        ));
    }
    wait_for(
        "accepted Ready, refused Stalled",
        Duration::from_secs(60),
        || {
            let ok = sb
                .get_json("secretspolicy", "accepted")
                .filter(|o| condition_is(o, "Ready", "True"))?;
            let bad = sb
                .get_json("secretspolicy", "refused")
                .filter(|o| condition_is(o, "Stalled", "True"))?;
            Some((ok, bad))
        },
    );
    let roots_of = |spans: &[Span], name: &str| -> Vec<Span> {
        spans
            .iter()
            .filter(|s| {
                s.name == "reconcile SecretsPolicy" && text(s, "name").as_deref() == Some(name)
            })
            .cloned()
            .collect()
    };
    let under = |spans: &[Span], roots: &[Span], prefix: &str| {
        spans.iter().any(|s| {
            s.name.starts_with(prefix) && roots.iter().any(|r| r.span_id == s.parent_span_id)
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let spans = receiver.spans();
        let accepted = roots_of(&spans, "accepted");
        let refused = roots_of(&spans, "refused");
        let done = under(&spans, &accepted, "kubernetes patch secretspolicies")
            && under(&spans, &accepted, "kubernetes create events")
            && refused
                .iter()
                .any(|r| text(r, "outcome").as_deref() == Some("error"))
            && spans.iter().any(|s| s.name == "reconcile Connection");
        if done {
            break spans;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "after 30s the spans lack the finalizer's patch or the Event under the pass, the \
             refused pass's error, or a Connection's reconcile:\n{}",
            describe(&spans)
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let all = describe(&spans);
    let refused = roots_of(&spans, "refused");
    let failed = refused
        .iter()
        .find(|r| text(r, "outcome").as_deref() == Some("error"))
        .unwrap();
    assert_eq!(
        text(failed, "error.category").as_deref(),
        Some("Rejected"),
        "{all}"
    );
    // The refused PUT is a child of the failed pass, with the service's status.
    assert!(
        spans.iter().any(|s| s.parent_span_id == failed.span_id
            && text(s, "http.request.method").as_deref() == Some("PUT")
            && int(s, "http.response.status_code") == Some(400)),
        "no refused PUT under the failed pass:\n{all}"
    );
    // No pass of the accepted policy says it failed.
    assert!(
        roots_of(&spans, "accepted")
            .iter()
            .all(|r| text(r, "outcome").as_deref() == Some("ok")),
        "{all}"
    );
    // The Connection's check: its probe is a child of its own reconcile root.
    let conn = spans
        .iter()
        .find(|s| s.name == "reconcile Connection")
        .unwrap();
    assert!(conn.parent_span_id.is_empty(), "{all}");
    assert!(
        spans.iter().any(|s| s.parent_span_id == conn.span_id
            && text(s, "service").as_deref() == Some("secrets")),
        "no service call under the Connection's reconcile:\n{all}"
    );
    assert!(!format!("{spans:?}").contains(&sb.root_token));
    op.stop();
}

#[test]
fn the_same_span_tree_arrives_over_otlp_grpc() {
    a_retried_call_arrives_as_a_span_tree(
        Receiver::start_grpc(None),
        &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
    );
}

#[test]
fn the_same_span_tree_arrives_over_grpc_with_mutual_tls_to_a_collector_of_a_private_ca() {
    let pki = Pki::new();
    let mut env = pki.env();
    env.push(("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    a_retried_call_arrives_as_a_span_tree(Receiver::start_grpc(Some(&pki)), &env);
}

#[test]
fn the_same_span_tree_arrives_over_https_with_mutual_tls_to_a_collector_of_a_private_ca() {
    let pki = Pki::new();
    let env = pki.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    a_retried_call_arrives_as_a_span_tree(Receiver::start_https(&pki), &env);
}

/// One reconcile whose PUT is retried once, exported to `receiver` by an operator started with
/// `env`: the root span, the call under it with its retry, the Kubernetes write, the link.
fn a_retried_call_arrives_as_a_span_tree(receiver: Receiver, env: &[(&str, &str)]) {
    // The policy's first write fails with a 503; the client retries it in the same call.
    let (sb, op) = traced(
        &receiver,
        json!({"method": "PUT", "path": "/v1/sys/policies/acl/traced", "status": 503, "count": 1}),
        env,
    );
    let ci_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    sb.apply_ok(&format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata:\n  name: traced\n  namespace: default\n  \
         annotations: {{traceparent: 00-{ci_trace}-00f067aa0ba902b7-01}}\n\
         spec: {{type: acl, policy: \"path \\\"t/*\\\" {{ capabilities = [\\\"read\\\"] }}\"}}\n"
    ));
    wait_for("Ready", Duration::from_secs(60), || {
        sb.get_json("secretspolicy", "traced")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    // The PUT's call span, its reconcile root, and the root's status write, once exported.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let find = || {
        let spans = receiver.spans();
        let call = spans
            .iter()
            .find(|s| {
                text(s, "http.request.method").as_deref() == Some("PUT")
                    && int(s, "http.response.status_code").is_some_and(|c| c < 300)
            })?
            .clone();
        let root = spans
            .iter()
            .find(|s| s.span_id == call.parent_span_id && s.name.starts_with("reconcile"))?
            .clone();
        spans
            .iter()
            .any(|s| s.parent_span_id == root.span_id && s.name.starts_with("kubernetes"))
            .then_some((spans, call, root))
    };
    let (spans, call, root) = loop {
        if let Some(found) = find() {
            break found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no reconcile span with a PUT and a Kubernetes write under it after 30s; {} exports, \
             spans:\n{}\noperator log (trace lines):\n{}",
            *receiver.posts.lock().unwrap(),
            describe(&receiver.spans()),
            op.log()
                .lines()
                .filter(|l| l.contains("trace")
                    || l.contains("OTLP")
                    || l.contains("opentelemetry"))
                .take(30)
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let all = describe(&spans);
    // The root: one per pass, no parent, the resource and how the pass ended.
    assert_eq!(root.name, "reconcile SecretsPolicy", "{all}");
    assert!(
        root.parent_span_id.is_empty(),
        "the reconcile span has a parent:\n{all}"
    );
    assert_eq!(text(&root, "kind").as_deref(), Some("SecretsPolicy"));
    assert_eq!(text(&root, "namespace").as_deref(), Some("default"));
    assert_eq!(text(&root, "name").as_deref(), Some("traced"));
    assert_eq!(int(&root, "generation"), Some(1), "{all}");
    assert_eq!(text(&root, "outcome").as_deref(), Some("ok"), "{all}");
    // Linked to the trace that applied it.
    assert!(
        root.links
            .iter()
            .any(|l| hex::encode(&l.trace_id) == ci_trace),
        "no link to the traceparent's trace: {:?}",
        root.links
    );
    // The call: a child in the same trace, with the service, the route and the retry.
    assert_eq!(call.trace_id, root.trace_id);
    assert_eq!(
        call.name, "secrets PUT /v1/sys/policies/acl/{name}",
        "{all}"
    );
    assert_eq!(text(&call, "service").as_deref(), Some("secrets"));
    assert_eq!(
        text(&call, "url.template").as_deref(),
        Some("/v1/sys/policies/acl/{name}")
    );
    assert_eq!(
        int(&call, "retries"),
        Some(1),
        "the 503 was not retried once:\n{all}"
    );
    // The pass's other calls (reads) are its children too.
    let children: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id == root.span_id)
        .collect();
    assert!(
        children
            .iter()
            .any(|s| text(s, "http.request.method").as_deref() == Some("GET")),
        "no read under the reconcile span:\n{all}"
    );
    let write = children
        .iter()
        .find(|s| s.name.starts_with("kubernetes"))
        .unwrap();
    assert!(text(write, "resource").is_some(), "{all}");
    assert!(*receiver.posts.lock().unwrap() >= 1);
    // The token never goes out in a span.
    assert!(!format!("{spans:?}").contains(&sb.root_token));
    op.stop();
}

#[test]
fn an_unknown_protocol_or_an_unusable_tls_file_is_refused_with_a_sentence_saying_what_to_fix() {
    let refused = |protocol: &str, endpoint: &str, env: &[(&str, &str)]| {
        let out = std::process::Command::new(BIN)
            .args(["crd", "--otlp-endpoint", endpoint])
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = refused("http/json", "http://127.0.0.1:4318", &[]);
    assert!(
        err.contains("OTLP protocol \"http/json\" is not in this build")
            && err.contains("http/protobuf")
            && err.contains("grpc"),
        "{err}"
    );
    // A CA file that is missing, or holds something other than PEM (a key pasted in the
    // wrong place must not be echoed), on either transport.
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("ca.crt");
    std::fs::write(&not_pem, "s3cr3t-not-a-certificate").unwrap();
    for protocol in ["grpc", "http/protobuf"] {
        let err = refused(
            protocol,
            "https://collector.example:4317",
            &[("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.crt")],
        );
        assert!(
            err.contains("OTEL_EXPORTER_OTLP_CERTIFICATE=/nonexistent/ca.crt")
                && err.contains("No such file"),
            "{protocol}: {err}"
        );
        let err = refused(
            protocol,
            "https://collector.example:4317",
            &[(
                "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                not_pem.to_str().unwrap(),
            )],
        );
        assert!(err.contains("holds no PEM block"), "{protocol}: {err}");
        assert!(!err.contains("s3cr3t"), "the file's contents are in: {err}");
    }
    // Half of a client key pair.
    let pki = Pki::new();
    let cert = pki.dir.path().join("tls.crt");
    let err = refused(
        "grpc",
        "https://collector.example:4317",
        &[(
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            cert.to_str().unwrap(),
        )],
    );
    assert!(
        err.contains("needs both") && err.contains("only OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"),
        "{err}"
    );
    // Without an endpoint, traces stay off and the protocol does not matter.
    let out = std::process::Command::new(BIN)
        .arg("crd")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
