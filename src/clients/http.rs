//! The one HTTP layer every service client goes through: timeouts, client-side rate limit,
//! retries with jittered exponential backoff on 429 and 5xx (honouring `Retry-After`), metrics,
//! and redaction. No token, and no request or response body, ever reaches a log line or an
//! error message; errors carry only the service's own error text.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use rand::Rng;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::api::Service;
use crate::clients::secrets::login::Session;
use crate::metrics::Metrics;

/// A string that never prints: `Debug` and `Display` show `[redacted]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    /// Wraps a secret so that it is never printed.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}
impl std::fmt::Display for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// How the token is presented.
#[derive(Clone, Debug)]
pub enum Auth {
    /// A named header carrying the token as is (`X-Secrets-Token`, `X-Catalog-Token`, ...).
    Header(String, SecretString),
    /// `Authorization: Bearer <token>`.
    Bearer(SecretString),
    /// A token the Connection logs in for ([`Session`]), in the named header.
    Login(String, Arc<Session>),
    /// No token: the calls of a login itself.
    None,
}

/// How one service client calls its service: address, credentials, limits, retries.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The service called, for metrics, log fields and error messages.
    pub service: Service,
    /// The Connection (`namespace/name`) the calls go through, for metrics and the change
    /// log; empty for calls made outside a Connection (the `leases` command with --address).
    pub connection: String,
    /// Base URL without trailing slash, e.g. `http://127.0.0.1:8200`.
    pub base_url: String,
    /// The token the calls carry, if any.
    pub auth: Auth,
    /// Timeout of one attempt (connecting is capped at 5 seconds within it).
    pub timeout: Duration,
    /// Client-side rate limit of this Connection, in calls per second.
    pub requests_per_second: u32,
    /// PEM bundle to trust in addition to the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Extra headers sent with every call (e.g. the secrets service namespace).
    pub extra_headers: Vec<(&'static str, String)>,
    /// Retries after the first attempt for retryable failures.
    pub max_retries: u32,
    /// Refuse every call but reads (GET, HEAD, LIST) before anything is sent: the client of
    /// `quartet plan`, which must never change a service, whatever a kind's code asks of it.
    pub read_only: bool,
}

/// Errors of a call. Messages carry the service's error text, never tokens or bodies we sent.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The service could not be reached (connection refused, DNS, TLS, timeout).
    #[error("{service} is unreachable: {detail}")]
    Unreachable {
        /// The service called.
        service: Service,
        /// What went wrong, as the HTTP library says it.
        detail: String,
    },
    /// The service answered with an error status.
    #[error("{service} answered {status}: {message}")]
    Status {
        /// The service called.
        service: Service,
        /// The HTTP status.
        status: u16,
        /// The service's error text.
        message: String,
        /// Seconds the service asked us to wait (429/503 `Retry-After`).
        retry_after: Option<u64>,
    },
    /// The answer was not the JSON expected.
    #[error("{service} sent a response that could not be read: {detail}")]
    Decode {
        /// The service called.
        service: Service,
        /// What could not be read.
        detail: String,
    },
    /// The client could not be built (a bad CA bundle, header or address): what is wrong.
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// The Connection's login (`spec.auth`) was refused: the service's message.
    #[error("{service} refused the Connection's login: {message}")]
    Login {
        /// The service that refused.
        service: Service,
        /// Its message.
        message: String,
    },
    /// A write through a read-only client ([`HttpConfig::read_only`]); nothing was sent.
    #[error("plan is read-only: refused {verb} {path}")]
    ReadOnly {
        /// The HTTP method refused.
        verb: String,
        /// The path it was for.
        path: String,
    },
    /// A write of a pass whose resource moved to another shard meanwhile; nothing was sent
    /// (see [`crate::changes::Gate`]).
    #[error("{0}")]
    HandedOver(String),
}

impl ClientError {
    /// The HTTP status the service answered with, for an error status; `None` otherwise.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Transient failures are worth retrying later without a spec change.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } => true,
            ClientError::Status { status, .. } => *status == 429 || *status >= 500,
            ClientError::Decode { .. }
            | ClientError::Config(_)
            | ClientError::Login { .. }
            | ClientError::ReadOnly { .. }
            | ClientError::HandedOver(_) => false,
        }
    }

    /// How long the service asked to wait (`Retry-After` on a 429 or 503), if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ClientError::Status {
                retry_after: Some(s),
                ..
            } => Some(Duration::from_secs(*s)),
            _ => None,
        }
    }
}

/// A response: status and JSON body (`Null` for an empty body).
#[derive(Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: StatusCode,
    /// The JSON body.
    pub body: Value,
    /// The blocking-query index of a Consul-family service (`X-Consul-Index`, also sent as
    /// `X-Catalog-Index`, or `X-Nomad-Index`), when the answer carries one.
    pub index: Option<u64>,
    /// The service's id of the request (`X-Request-Id`, or a secrets-style body's
    /// `request_id`), for the change log.
    pub request_id: Option<String>,
}

/// A client-side rate limit.
pub type Limiter = DefaultDirectRateLimiter;

/// A limiter of `rate` calls per second with a burst of one second's worth.
pub fn limiter(rate: u32) -> Arc<Limiter> {
    let rps = NonZeroU32::new(rate.max(1)).unwrap_or(NonZeroU32::MIN);
    Arc::new(RateLimiter::direct(Quota::per_second(rps)))
}

/// The configured client of one Connection. Clones share its budget ([`Http::for_namespace`]).
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    cfg: Arc<HttpConfig>,
    limiter: Arc<DefaultDirectRateLimiter>,
    /// The share of the budget periodic resyncs may use (see [`Http::try_resync`]).
    resync_limiter: Arc<DefaultDirectRateLimiter>,
    metrics: Arc<Metrics>,
    /// The namespace whose resources make the calls (counted per namespace), and its own limit
    /// within the budget, if any.
    tenant: Option<(String, Option<Arc<Limiter>>)>,
}

/// The share of a Connection's `requestsPerSecond` that periodic resyncs may use; the rest is
/// kept for work a change asked for (a new or edited resource, a deletion), so resyncs of many
/// known objects can never starve it.
pub const RESYNC_SHARE: f64 = 0.5;

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("service", &self.cfg.service)
            .field("base_url", &self.cfg.base_url)
            .finish()
    }
}

const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

impl Http {
    /// A client for `cfg`; fails when the CA bundle is not valid PEM or the HTTP client cannot be
    /// built.
    pub fn new(cfg: HttpConfig, metrics: Arc<Metrics>) -> Result<Self, ClientError> {
        let mut builder = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(cfg.timeout.min(Duration::from_secs(5)))
            .pool_max_idle_per_host(32)
            .user_agent(concat!("quartet/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &cfg.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ClientError::Config(format!("CA bundle is not valid PEM: {e}")))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .build()
            .map_err(|e| ClientError::Config(e.to_string()))?;
        let rps = NonZeroU32::new(cfg.requests_per_second.max(1)).unwrap_or(NonZeroU32::MIN);
        let limiter = RateLimiter::direct(
            Quota::per_second(rps)
                .allow_burst(rps.saturating_mul(NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN))),
        );
        let resync_rps = NonZeroU32::new(
            ((f64::from(cfg.requests_per_second) * RESYNC_SHARE).floor() as u32).max(1),
        )
        .unwrap_or(NonZeroU32::MIN);
        let resync_limiter = RateLimiter::direct(Quota::per_second(resync_rps));
        if !cfg.connection.is_empty() {
            // The series exists from the Connection's first client on, at 0 until a call
            // waits, so a dashboard shows 0 instead of no data.
            metrics.budget_wait(&cfg.connection, Duration::ZERO);
        }
        Ok(Self {
            client,
            cfg: Arc::new(cfg),
            limiter: Arc::new(limiter),
            resync_limiter: Arc::new(resync_limiter),
            metrics,
            tenant: None,
        })
    }

    /// This client for the resources of namespace `ns`: the same budget, its calls counted
    /// for `ns` too, and, with `own`, within a limit of `ns`'s own.
    pub fn for_namespace(&self, ns: &str, own: Option<Arc<Limiter>>) -> Http {
        let mut h = self.clone();
        h.tenant = Some((ns.to_string(), own));
        h
    }

    /// The service this client calls.
    pub fn service(&self) -> Service {
        self.cfg.service
    }

    /// Whether this client refuses writes ([`HttpConfig::read_only`], `quartet plan`).
    pub fn read_only(&self) -> bool {
        self.cfg.read_only
    }

    /// The Connection (`namespace/name`) the calls go through.
    pub fn connection(&self) -> &str {
        &self.cfg.connection
    }

    /// The service's address (`scheme://host[:port]`, no trailing `/`).
    pub fn base_url(&self) -> &str {
        &self.cfg.base_url
    }

    /// Take one slot of the resync share of this Connection's budget, without waiting: `false`
    /// means resyncs have used their share and this one should be put off (not queued: a
    /// waiting resync would hold a worker that a changed object needs).
    pub fn try_resync(&self) -> bool {
        self.resync_limiter.check().is_ok()
    }

    /// Send one call; `verb` is the method name (`LIST` allowed). Retries retryable failures:
    /// 429 always (the request was not processed), 5xx and transport errors only for idempotent
    /// methods (a POST that may have been processed is left to the reconciler, which finds the
    /// object again instead of creating a duplicate).
    pub async fn call(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Response, ClientError> {
        self.call_recorded(verb, path, body, !is_read(verb)).await
    }

    /// A call that changes nothing although its method is not a read (`PUT sys/leases/lookup`
    /// only looks a lease up): like [`Http::call`], but not a change, so no change-log record.
    pub async fn call_read(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Response, ClientError> {
        self.call_recorded(verb, path, body, false).await
    }

    async fn call_recorded(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
        record: bool,
    ) -> Result<Response, ClientError> {
        let service = self.cfg.service.to_string();
        let cause = crate::changes::count_call(&service);
        self.metrics.connection_call(&self.cfg.connection, cause);
        let span = crate::traces::call_span(
            &service,
            &self.cfg.connection,
            verb,
            &crate::changes::path_template(path),
        );
        let result = tracing::Instrument::instrument(
            self.authenticated(verb, path, body, record),
            span.clone(),
        )
        .await;
        let status = match &result {
            Ok(r) => r.status.as_u16(),
            Err(e) => e.status().unwrap_or(0),
        };
        crate::traces::called(&span, status);
        result
    }

    async fn authenticated(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
        record: bool,
    ) -> Result<Response, ClientError> {
        let send = |cred| self.send(verb, path, body, cred, record);
        match &self.cfg.auth {
            Auth::Header(name, token) => send(Cred::Header(name, token)).await,
            Auth::Bearer(token) => send(Cred::Bearer(token)).await,
            Auth::None => send(Cred::None).await,
            Auth::Login(header, session) => {
                let token = session.token().await?;
                match send(Cred::Header(header, &token)).await {
                    // Log in again only when the token itself is refused, not when it merely
                    // lacks a permission (the session asks `lookup-self` to tell them apart).
                    Err(ClientError::Status { status: 403, .. })
                        if session.refused(&token).await =>
                    {
                        let token = session.token().await?;
                        send(Cred::Header(header, &token)).await
                    }
                    other => other,
                }
            }
        }
    }

    /// A call with an explicit token header (or none), whatever the client's own auth: the
    /// calls of a login session (login, renew-self, revoke-self, lookup-self).
    pub async fn call_as(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<(&str, &SecretString)>,
    ) -> Result<Response, ClientError> {
        let cred = match token {
            Some((name, t)) => Cred::Header(name, t),
            None => Cred::None,
        };
        // A session's own calls are not changes of a resource.
        self.send(verb, path, body, cred, false).await
    }

    /// The Connection's login session, when it logs in (`spec.auth`).
    pub fn session(&self) -> Option<&Arc<Session>> {
        match &self.cfg.auth {
            Auth::Login(_, s) => Some(s),
            _ => None,
        }
    }

    /// Send with retries; with `record`, each attempt that reached the service (or was lost on
    /// the way) is one change-log record with its own status: a retried write is as many writes
    /// in the service's log, any of which may have changed something.
    async fn send(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
        cred: Cred<'_>,
        record: bool,
    ) -> Result<Response, ClientError> {
        if self.cfg.read_only && !is_read(verb) {
            return Err(ClientError::ReadOnly {
                verb: verb.to_ascii_uppercase(),
                // The query is left out: some APIs carry values in it.
                path: path.split('?').next().unwrap_or_default().to_string(),
            });
        }
        let idempotent = !verb.eq_ignore_ascii_case("POST") && !verb.eq_ignore_ascii_case("PATCH");
        let mut attempt = 0u32;
        loop {
            // Each attempt of a write, a retry too: the resource may have moved meanwhile.
            if record {
                crate::changes::may_write().map_err(ClientError::HandedOver)?;
            }
            let result = self.once(verb, path, body, cred).await;
            if record {
                let (status, request_id) = match &result {
                    Ok(r) => (r.status.as_u16(), r.request_id.clone()),
                    Err(e) => (e.status().unwrap_or(0), None),
                };
                crate::changes::record(
                    &self.cfg.service.to_string(),
                    &self.cfg.connection,
                    verb,
                    path,
                    body,
                    status,
                    request_id,
                );
            }
            let retry = match &result {
                Ok(_) => None,
                Err(e @ ClientError::Status { status: 429, .. }) => Some(e.retry_after()),
                Err(e @ ClientError::Status { status, .. }) if *status >= 500 && idempotent => {
                    Some(e.retry_after())
                }
                Err(ClientError::Unreachable { .. }) if idempotent => Some(None),
                Err(_) => None,
            };
            match retry {
                Some(after) if attempt < self.cfg.max_retries => {
                    if after.is_some_and(|a| a > MAX_RETRY_AFTER) {
                        // The service wants a long pause: leave it to the controller's requeue.
                        crate::traces::retried(attempt);
                        return result;
                    }
                    let wait = after.unwrap_or_else(|| backoff(attempt));
                    tracing::debug!(service = %self.cfg.service, verb, path, attempt, wait_ms = wait.as_millis() as u64, "retrying call");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                _ => {
                    crate::traces::retried(attempt);
                    return result;
                }
            }
        }
    }

    async fn once(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
        cred: Cred<'_>,
    ) -> Result<Response, ClientError> {
        let queued = Instant::now();
        if let Some((_, Some(own))) = &self.tenant {
            own.until_ready().await;
        }
        self.limiter.until_ready().await;
        let waited = queued.elapsed();
        // A call that got its slot at once is not worth a metric update.
        if waited >= Duration::from_millis(1) {
            self.metrics.budget_wait(&self.cfg.connection, waited);
        }
        let service = self.cfg.service;
        let method =
            Method::from_bytes(verb.as_bytes()).map_err(|e| ClientError::Config(e.to_string()))?;
        let url = format!("{}{}", self.cfg.base_url, path);
        let mut req = self.client.request(method, &url);
        req = match cred {
            Cred::Header(name, token) => req.header(name, token.expose()),
            Cred::Bearer(token) => req.bearer_auth(token.expose()),
            Cred::None => req,
        };
        for (k, v) in &self.cfg.extra_headers {
            req = req.header(*k, v);
        }
        if let Some(body) = body {
            let content_type = match service {
                Service::Workspaces => "application/vnd.api+json",
                _ => "application/json",
            };
            req = req
                .header("content-type", content_type)
                .body(body.to_string());
        }
        if let Some((ns, _)) = &self.tenant {
            self.metrics.namespace_call(&self.cfg.connection, ns);
        }
        let started = Instant::now();
        let sent = req.send().await;
        let elapsed = started.elapsed();
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                self.metrics.remote_call(service, verb, "error", elapsed);
                return Err(ClientError::Unreachable {
                    service,
                    detail: transport_detail(&e),
                });
            }
        };
        let status = resp.status();
        self.metrics
            .remote_call(service, verb, status.as_str(), elapsed);
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let index = ["x-consul-index", "x-catalog-index", "x-nomad-index"]
            .iter()
            .find_map(|h| resp.headers().get(*h))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let request_id = resp
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = resp.bytes().await.map_err(|e| ClientError::Unreachable {
            service,
            detail: transport_detail(&e),
        })?;
        if status.is_success() {
            let body = if bytes.iter().all(u8::is_ascii_whitespace) {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode {
                    service,
                    detail: e.to_string(),
                })?
            };
            let request_id = request_id.or_else(|| {
                body.get("request_id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            });
            return Ok(Response {
                status,
                body,
                index,
                request_id,
            });
        }
        let message = redact(cred, error_message(&bytes, status));
        Err(ClientError::Status {
            service,
            status: status.as_u16(),
            message,
            retry_after,
        })
    }
}

/// Whether `verb` only reads (the verbs a read-only client lets through).
pub fn is_read(verb: &str) -> bool {
    ["GET", "HEAD", "LIST"]
        .iter()
        .any(|r| verb.eq_ignore_ascii_case(r))
}

/// The token one request carries.
#[derive(Clone, Copy)]
enum Cred<'a> {
    Header(&'a str, &'a SecretString),
    Bearer(&'a SecretString),
    None,
}

/// Belt and braces: no error text may echo the token back.
fn redact(cred: Cred<'_>, message: String) -> String {
    let token = match cred {
        Cred::Header(_, t) | Cred::Bearer(t) => t.expose(),
        Cred::None => return message,
    };
    if token.len() >= 4 && message.contains(token) {
        message.replace(token, "[redacted]")
    } else {
        message
    }
}

/// Jittered exponential backoff for retry `attempt` (0-based): full jitter over 200ms·2^n, cap 5s.
pub fn backoff(attempt: u32) -> Duration {
    let cap = Duration::from_secs(5).as_millis() as u64;
    let max = (200u64 << attempt.min(10)).min(cap);
    Duration::from_millis(rand::rng().random_range(max / 2..=max))
}

/// Transport errors without the URL's query (which could carry a token in some APIs).
fn transport_detail(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "connection broke while reading the response"
    } else {
        "request failed"
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut root = None;
    while let Some(s) = source {
        root = Some(s.to_string());
        source = s.source();
    }
    match root {
        Some(r) => format!("{kind} ({r})"),
        None => kind.to_string(),
    }
}

/// The service's own error text: `{"errors": ["..."]}` (secrets), JSON:API error objects
/// (workspaces), or a plain-text body (catalog, scheduler). Truncated, never the raw JSON.
pub fn error_message(bytes: &[u8], status: StatusCode) -> String {
    let text = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => match map.get("errors") {
            Some(Value::Array(errors)) => {
                let parts: Vec<String> = errors
                    .iter()
                    .filter_map(|e| match e {
                        Value::String(s) => Some(s.trim().to_string()),
                        Value::Object(o) => {
                            let title = o.get("title").and_then(Value::as_str).unwrap_or_default();
                            let detail =
                                o.get("detail").and_then(Value::as_str).unwrap_or_default();
                            Some(match (title.is_empty(), detail.is_empty()) {
                                (false, false) => format!("{title}: {detail}"),
                                (true, false) => detail.to_string(),
                                _ => title.to_string(),
                            })
                        }
                        _ => None,
                    })
                    .filter(|s| !s.is_empty())
                    .collect();
                parts.join("; ")
            }
            _ => map
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        },
        Ok(_) => String::new(),
        Err(_) => String::from_utf8_lossy(bytes).trim().to_string(),
    };
    let mut text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        text = status.canonical_reason().unwrap_or("error").to_lowercase();
    }
    if text.len() > 500 {
        let mut cut = 500;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Percent-encode one path segment or query value (RFC 3986: everything but the unreserved
/// characters), so a name with `/`, spaces or `?` stays one segment. Every client uses this one.
pub fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_string_never_prints() {
        let s = SecretString::new("s3cr3t-token");
        assert_eq!(format!("{s} {s:?}"), "[redacted] [redacted]");
    }

    #[test]
    fn error_message_reads_each_service_format() {
        let secrets = br#"{"errors":["1 error occurred:\n\t* permission denied\n\n"]}"#;
        assert_eq!(
            error_message(secrets, StatusCode::FORBIDDEN),
            "1 error occurred: * permission denied"
        );
        let jsonapi = br#"{"errors":[{"status":"422","title":"invalid attribute","detail":"Name has already been taken"}]}"#;
        assert_eq!(
            error_message(jsonapi, StatusCode::UNPROCESSABLE_ENTITY),
            "invalid attribute: Name has already been taken"
        );
        assert_eq!(
            error_message(b"ACL not found", StatusCode::FORBIDDEN),
            "ACL not found"
        );
        assert_eq!(
            error_message(br#"{"errors":[]}"#, StatusCode::NOT_FOUND),
            "not found"
        );
    }

    /// A read-only client against a local listener that counts connections: writes fail with
    /// the plan's sentence and never reach the socket; reads do.
    #[tokio::test]
    async fn a_read_only_client_refuses_writes_without_sending_them() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
                    )
                    .await;
            }
        });
        let http = Http::new(
            HttpConfig {
                service: Service::Secrets,
                connection: String::new(),
                base_url: format!("http://{addr}"),
                auth: Auth::Header("X-Secrets-Token".into(), SecretString::new("t0ken")),
                timeout: Duration::from_secs(5),
                requests_per_second: 100,
                ca_pem: None,
                extra_headers: Vec::new(),
                max_retries: 0,
                read_only: true,
            },
            Arc::new(Metrics::default()),
        )
        .unwrap();
        for verb in ["POST", "put", "PATCH", "DELETE"] {
            let err = http
                .call(
                    verb,
                    "/v1/sys/policies/acl/p?x=1",
                    Some(&serde_json::json!({})),
                )
                .await
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "plan is read-only: refused {} /v1/sys/policies/acl/p",
                    verb.to_uppercase()
                )
            );
            assert!(!err.is_transient());
        }
        assert_eq!(
            seen.load(Ordering::SeqCst),
            0,
            "a refused write reached the service"
        );
        http.call("GET", "/v1/sys/policies/acl/p", None)
            .await
            .unwrap();
        http.call("LIST", "/v1/sys/policies/acl", None)
            .await
            .unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert!(backoff(0) <= Duration::from_millis(200));
        assert!(backoff(20) <= Duration::from_secs(5));
        assert!(backoff(20) >= Duration::from_millis(2500));
    }
}
