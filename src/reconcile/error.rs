//! The one error type of reconciles, with a bounded category used as the Event reason, the
//! condition reason and the metric label. Kubernetes API errors are told as sentences
//! ([`kube_sentence`]): a condition never shows a debug dump of a `kube::Error`.

use std::time::Duration;

use kube::core::Status;
use kube::Resource;

use crate::clients::ClientError;

/// The result of a reconcile step.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a reconcile pass failed; its [`Category`] gives the Event reason, the metric label and
/// whether to retry.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The service answered with an error, or could not be reached.
    #[error(transparent)]
    Remote(#[from] ClientError),
    /// The Kubernetes API failed (told by [`kube_sentence`]).
    #[error("{}", kube_sentence(.0))]
    Kube(#[from] kube::Error),
    /// The API server does not serve a kind Quartet reads: its CRD is not installed (made by
    /// [`Error::kube_for`], which knows the kind the request was for).
    #[error("the {kind} CRD is not installed in this cluster: install Quartet's chart or apply crds/{crd}.yaml")]
    KubeNotInstalled {
        /// The kind asked for.
        kind: String,
        /// The file name of its CRD under `crds/`, without `.yaml`.
        crd: String,
    },
    /// The Connection cannot be used (absent, not allowed, wrong service, token Secret absent).
    #[error("{0}")]
    Connection(String),
    /// A referenced Secret or resource does not exist (yet).
    #[error("{0}")]
    MissingReference(String),
    /// The service does not offer this feature (licence, version).
    #[error("{0}")]
    Unsupported(String),
    /// The spec is invalid in a way admission could not catch.
    #[error("{0}")]
    InvalidSpec(String),
    /// Adding or removing the finalizer failed: why.
    #[error("finalizer: {0}")]
    Finalizer(String),
    /// The service refuses to delete an object other objects still use (a template used by a
    /// transformation): resolves itself when they go, so it is retried with backoff, and never
    /// orphaned (unlike a missing reference when the namespace goes).
    #[error("{0}")]
    InUse(String),
    /// A request the kind itself refuses until the spec or a referenced Secret changes, with a
    /// reason of its own for the condition and Event (`KeyImmutable`). Categorised as
    /// [`Category::InvalidSpec`].
    #[error("{message}")]
    Refused {
        /// The condition and Event reason, e.g. `KeyImmutable`.
        reason: &'static str,
        /// What was refused and what would let it through.
        message: String,
    },
    /// The resource moved to another shard while this pass was under way: the pass stops
    /// before its next write and writes nothing more (see [`crate::shard`]).
    #[error("{0}")]
    HandedOver(String),
}

/// Bounded error categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Category {
    /// The service rejected the request (4xx other than auth): needs a spec change.
    Rejected,
    /// The token was refused (401/403).
    Unauthorized,
    /// 429, 5xx, timeouts, connection failures: retried with backoff.
    Transient,
    /// Licence or version does not allow it: terminal until the spec changes.
    Unsupported,
    /// A referenced Secret or resource is missing: waiting.
    ReferenceMissing,
    /// The Connection is missing or unusable.
    ConnectionUnavailable,
    /// Invalid spec.
    InvalidSpec,
    /// The Kubernetes API failed.
    KubeApi,
    /// The Kubernetes API refused the operator's identity (403): its RBAC lacks a rule.
    KubeForbidden,
    /// A kind Quartet reads is not served: its CRD is not installed.
    KubeNotInstalled,
}

impl Category {
    /// CamelCase reason for conditions and Events; also the metric label.
    pub fn reason(self) -> &'static str {
        match self {
            Category::Rejected => "Rejected",
            Category::Unauthorized => "Unauthorized",
            Category::Transient => "ServiceUnavailable",
            Category::Unsupported => "Unsupported",
            Category::ReferenceMissing => "ReferenceMissing",
            Category::ConnectionUnavailable => "ConnectionUnavailable",
            Category::InvalidSpec => "InvalidSpec",
            Category::KubeApi => "KubernetesApiError",
            Category::KubeForbidden => "KubeForbidden",
            Category::KubeNotInstalled => "KubeNotInstalled",
        }
    }

    /// Whether the category is a failure of the Kubernetes API rather than of the service.
    pub fn is_kube(self) -> bool {
        matches!(
            self,
            Category::KubeApi | Category::KubeForbidden | Category::KubeNotInstalled
        )
    }
}

impl Error {
    /// The bounded category of this error (Event reason, metric label, retry policy).
    pub fn category(&self) -> Category {
        match self {
            Error::Remote(e) => match e {
                ClientError::Status {
                    status: 401 | 403, ..
                } => Category::Unauthorized,
                ClientError::Login { .. } => Category::Unauthorized,
                e if e.is_transient() => Category::Transient,
                ClientError::Decode { .. } => Category::Transient,
                ClientError::Config(_) => Category::ConnectionUnavailable,
                _ => Category::Rejected,
            },
            Error::Kube(e) => kube_category(e),
            Error::KubeNotInstalled { .. } => Category::KubeNotInstalled,
            Error::Finalizer(_) | Error::HandedOver(_) => Category::KubeApi,
            Error::Connection(_) => Category::ConnectionUnavailable,
            Error::MissingReference(_) | Error::InUse(_) => Category::ReferenceMissing,
            Error::Unsupported(_) => Category::Unsupported,
            Error::InvalidSpec(_) | Error::Refused { .. } => Category::InvalidSpec,
        }
    }

    /// The condition and Event reason: the category's, or a [`Error::Refused`] one's own.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Refused { reason, .. } => reason,
            Error::InUse(_) => "InUse",
            e => e.category().reason(),
        }
    }

    /// How long to wait before trying again after `failures` consecutive failures (1-based).
    /// Errors that need a human (rejected, unsupported, invalid) wait for the resync or a spec
    /// change instead of looping; transient ones back off exponentially, honouring Retry-After.
    pub fn requeue_after(&self, failures: u32, resync: Duration) -> Duration {
        let exp = |base: u64, cap: u64| {
            let secs = base
                .saturating_mul(1u64 << failures.saturating_sub(1).min(16))
                .min(cap);
            jitter(Duration::from_secs(secs))
        };
        match self.category() {
            Category::Transient => match self {
                Error::Remote(e) if e.retry_after().is_some() => e
                    .retry_after()
                    .unwrap_or_default()
                    .max(Duration::from_secs(1)),
                _ => exp(1, 300),
            },
            Category::ReferenceMissing
            | Category::ConnectionUnavailable
            | Category::Unauthorized
            | Category::KubeForbidden
            | Category::KubeNotInstalled => exp(5, 300),
            Category::KubeApi => exp(1, 60),
            Category::Rejected | Category::Unsupported | Category::InvalidSpec => jitter(resync),
        }
    }
}

impl Error {
    /// A Kubernetes API error of a request for kind `K`: a 404 without a Status body (the API
    /// server has no such resource type) becomes [`Error::KubeNotInstalled`] naming `K`.
    pub fn kube_for<K: Resource<DynamicType = ()>>(e: kube::Error) -> Error {
        match &e {
            kube::Error::Api(s) if is_unserved(s) => Error::KubeNotInstalled {
                kind: K::kind(&()).into_owned(),
                crd: format!("{}.{}", K::plural(&()), K::group(&())),
            },
            _ => Error::Kube(e),
        }
    }
}

/// A 404 that is not an object's NotFound (which names the object in its details): the path
/// names no resource type the server serves. The apiextensions server answers a plain-text
/// `404 page not found` (kube reports it as "Failed to parse error data"); other paths get a
/// NotFound Status naming nothing ("the server could not find the requested resource").
fn is_unserved(s: &Status) -> bool {
    s.code == 404
        && (s.reason != "NotFound" || s.details.as_ref().is_none_or(|d| d.name.is_empty()))
}

/// `api.get_opt(name)`, except that a kind the API server does not serve is
/// [`Error::KubeNotInstalled`] instead of an absent object (kube's `get_opt` takes any
/// NotFound for an absent object).
pub async fn get_opt<K>(api: &kube::Api<K>, name: &str) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(obj) => Ok(Some(obj)),
        Err(kube::Error::Api(s)) if s.code == 404 && !is_unserved(&s) => Ok(None),
        Err(e) => Err(Error::kube_for::<K>(e)),
    }
}

fn kube_category(e: &kube::Error) -> Category {
    match e {
        kube::Error::Api(s) if s.code == 403 => Category::KubeForbidden,
        kube::Error::Api(s) if is_unserved(s) => Category::KubeNotInstalled,
        _ => Category::KubeApi,
    }
}

/// A Kubernetes API error as a sentence for a condition, an Event or a log line:
///
/// - 403: `forbidden: the operator's ServiceAccount ns/name may not create secrets in
///   namespace default` (read from the API server's message);
/// - a 404 without a Status (no such resource type): a CRD is not installed;
/// - any other answer: its code, reason and message;
/// - no answer: the API server could not be reached, and why.
pub fn kube_sentence(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => forbidden_sentence(s),
        kube::Error::Api(s) if is_unserved(s) => {
            "the Kubernetes API serves no such resource type: a CRD Quartet uses is not \
             installed in this cluster"
                .into()
        }
        kube::Error::Api(s) => {
            let reason = if is_known_reason(&s.reason) {
                format!(" {}", s.reason)
            } else {
                String::new()
            };
            let message = s.message.trim();
            if message.is_empty() {
                format!("the Kubernetes API answered {}{reason}", s.code)
            } else {
                format!("the Kubernetes API answered {}{reason}: {message}", s.code)
            }
        }
        kube::Error::HyperError(inner) => format!(
            "the Kubernetes API server could not be reached: {}",
            with_causes(inner)
        ),
        kube::Error::Service(inner) => format!(
            "the Kubernetes API server could not be reached: {}",
            with_causes(inner.as_ref())
        ),
        kube::Error::Auth(inner) => {
            format!("the operator's Kubernetes credentials could not be used: {inner}")
        }
        kube::Error::SerdeError(inner) => {
            format!("the Kubernetes API sent an answer Quartet could not read: {inner}")
        }
        other => format!("the Kubernetes API request failed: {other}"),
    }
}

/// An error and its causes, each said once: hyper's `client error (Connect)` says nothing of
/// why until its cause does (`tcp connect error: Connection refused`).
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !line.contains(&said) {
            line.push_str(": ");
            line.push_str(&said);
        }
        cause = c.source();
    }
    line
}

/// A Kubernetes API error as a sentence for the person running a command (`quartet plan`,
/// `quartet catalog login --secret`): as [`kube_sentence`], but a refusal is the API server's
/// own message, which names the user the command ran as, where `kube_sentence` speaks of the
/// operator's ServiceAccount.
pub fn kube_cli_sentence(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 && !s.message.trim().is_empty() => {
            format!("forbidden: {}", s.message.trim())
        }
        kube::Error::Auth(inner) => {
            format!("the Kubernetes credentials could not be used: {inner}")
        }
        other => kube_sentence(other),
    }
}

/// A reason the API server itself sends (one CamelCase word), not kube's stand-in for a body
/// that was no Status ("Failed to parse error data").
fn is_known_reason(reason: &str) -> bool {
    !reason.is_empty() && reason.chars().all(|c| c.is_ascii_alphabetic())
}

/// `User "U" cannot VERB resource "RES" in API group "G" in the namespace "NS"` (or `at the
/// cluster scope`), as the API server words a denial, told from the operator's side.
fn forbidden_sentence(s: &Status) -> String {
    let m = &s.message;
    let quoted = |after: &str| -> Option<String> {
        let rest = &m[m.find(after)? + after.len()..];
        let rest = rest.strip_prefix('"')?;
        Some(rest[..rest.find('"')?].to_string())
    };
    let who = match quoted("User ") {
        Some(u) => match u.strip_prefix("system:serviceaccount:") {
            Some(sa) => format!("the operator's ServiceAccount {}", sa.replacen(':', "/", 1)),
            None => format!("the operator's identity {u}"),
        },
        None => "the operator's identity".to_string(),
    };
    let verb = m
        .find(" cannot ")
        .map(|i| &m[i + " cannot ".len()..])
        .and_then(|r| r.split(' ').next())
        .map(str::to_string);
    let (Some(verb), Some(resource)) = (verb, quoted("resource ")) else {
        let message = m.trim();
        return if message.is_empty() {
            format!("forbidden: {who} may not make this request")
        } else {
            format!("forbidden: {message}")
        };
    };
    let group = quoted("in API group ")
        .filter(|g| !g.is_empty())
        .map(|g| format!(" (API group {g})"))
        .unwrap_or_default();
    let scope = match quoted("in the namespace ") {
        Some(ns) => format!(" in namespace {ns}"),
        None if m.contains("at the cluster scope") => " at the cluster scope".to_string(),
        None => String::new(),
    };
    format!("forbidden: {who} may not {verb} {resource}{group}{scope}")
}

/// ±10% jitter so many objects do not wake together.
pub fn jitter(d: Duration) -> Duration {
    use rand::Rng;
    let ms = d.as_millis() as u64;
    if ms < 10 {
        return d;
    }
    let spread = ms / 10;
    Duration::from_millis(rand::rng().random_range(ms - spread..=ms + spread))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Service;

    fn status(code: u16) -> Error {
        Error::Remote(ClientError::Status {
            service: Service::Secrets,
            status: code,
            message: "x".into(),
            retry_after: None,
        })
    }

    #[test]
    fn remote_errors_are_categorised_by_status() {
        assert_eq!(status(400).category(), Category::Rejected);
        assert_eq!(status(403).category(), Category::Unauthorized);
        assert_eq!(status(429).category(), Category::Transient);
        assert_eq!(status(503).category(), Category::Transient);
    }

    #[test]
    fn rejected_requests_wait_for_resync_instead_of_looping() {
        let resync = Duration::from_secs(300);
        assert!(status(400).requeue_after(1, resync) >= Duration::from_secs(270));
        assert!(status(400).requeue_after(20, resync) <= Duration::from_secs(330));
    }

    #[test]
    fn transient_errors_back_off_exponentially_up_to_a_cap() {
        let resync = Duration::from_secs(300);
        let first = status(503).requeue_after(1, resync);
        let later = status(503).requeue_after(6, resync);
        assert!(first <= Duration::from_millis(1100));
        assert!(later >= Duration::from_secs(28));
        assert!(status(503).requeue_after(30, resync) <= Duration::from_secs(330));
    }

    #[test]
    fn in_use_refusals_back_off_and_keep_their_own_reason() {
        let e = Error::InUse("template t is in use".into());
        assert_eq!(e.reason(), "InUse");
        assert!(e.requeue_after(1, Duration::from_secs(300)) <= Duration::from_secs(6));
        let r = Error::Refused {
            reason: "KeyImmutable",
            message: "m".into(),
        };
        assert_eq!(r.reason(), "KeyImmutable");
        assert_eq!(r.category(), Category::InvalidSpec);
    }

    fn api(code: u16, reason: &str, message: &str, details: bool) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            status: Some(kube::core::response::StatusSummary::Failure),
            code,
            message: message.into(),
            metadata: None,
            reason: reason.into(),
            // An object's error names it in its details; a path without a resource does not.
            details: details.then(|| {
                let name = if message.contains('"') { "w" } else { "" };
                serde_json::from_value(serde_json::json!({ "name": name })).expect("details")
            }),
        }))
    }

    #[test]
    fn a_404_without_a_status_names_the_missing_crd() {
        // What kube makes of the API server's plain-text `404 page not found`.
        let e = api(
            404,
            "Failed to parse error data",
            "404 page not found",
            false,
        );
        let named = Error::kube_for::<crate::api::Workspace>(e);
        assert_eq!(named.category(), Category::KubeNotInstalled);
        assert_eq!(named.reason(), "KubeNotInstalled");
        assert_eq!(
            named.to_string(),
            "the Workspace CRD is not installed in this cluster: install Quartet's chart or apply crds/workspaces.workspaces.quartet.dev.yaml"
        );
        let e = Error::Kube(api(
            404,
            "Failed to parse error data",
            "404 page not found",
            false,
        ));
        assert_eq!(e.category(), Category::KubeNotInstalled);
        assert!(e.to_string().contains("CRD"), "{e}");
        // The other wording of a path no resource serves: a NotFound naming no object.
        let e = Error::kube_for::<crate::api::Workspace>(api(
            404,
            "NotFound",
            "the server could not find the requested resource",
            true,
        ));
        assert_eq!(e.category(), Category::KubeNotInstalled);
        assert!(!e.to_string().contains("Status {"), "{e}");
        // An object's own NotFound is no missing CRD.
        let e = Error::kube_for::<crate::api::Workspace>(api(
            404,
            "NotFound",
            "workspaces.workspaces.quartet.dev \"w\" not found",
            true,
        ));
        assert_eq!(e.category(), Category::KubeApi);
        assert_eq!(
            e.to_string(),
            "the Kubernetes API answered 404 NotFound: workspaces.workspaces.quartet.dev \"w\" not found"
        );
    }

    #[test]
    fn a_403_says_what_the_service_account_may_not_do() {
        let e = Error::Kube(api(
            403,
            "Forbidden",
            "secrets \"s\" is forbidden: User \"system:serviceaccount:quartet-system:quartet\" cannot create resource \"secrets\" in API group \"\" in the namespace \"default\"",
            true,
        ));
        assert_eq!(e.category(), Category::KubeForbidden);
        assert_eq!(e.reason(), "KubeForbidden");
        assert_eq!(
            e.to_string(),
            "forbidden: the operator's ServiceAccount quartet-system/quartet may not create secrets in namespace default"
        );
        let e = Error::Kube(api(
            403,
            "Forbidden",
            "leases.coordination.k8s.io is forbidden: User \"system:serviceaccount:q:op\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster scope",
            true,
        ));
        assert_eq!(
            e.to_string(),
            "forbidden: the operator's ServiceAccount q/op may not list leases (API group coordination.k8s.io) at the cluster scope"
        );
        let e = Error::Kube(api(403, "Forbidden", "", false));
        assert_eq!(
            e.to_string(),
            "forbidden: the operator's identity may not make this request"
        );
    }

    #[test]
    fn an_unreachable_api_server_is_said_with_the_cause_that_tells_why() {
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Connect(#[source] std::io::Error);
        let e = Error::Kube(kube::Error::Service(Box::new(Connect(
            std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "tcp connect error: Connection refused (os error 111)",
            ),
        ))));
        assert_eq!(
            e.to_string(),
            "the Kubernetes API server could not be reached: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
    }

    #[test]
    fn other_kubernetes_errors_are_sentences() {
        let e = Error::Kube(api(
            409,
            "Conflict",
            "Operation cannot be fulfilled on secrets \"s\": the object has been modified",
            true,
        ));
        assert_eq!(e.category(), Category::KubeApi);
        assert_eq!(
            e.to_string(),
            "the Kubernetes API answered 409 Conflict: Operation cannot be fulfilled on secrets \"s\": the object has been modified"
        );
        let e = Error::Kube(api(502, "Failed to parse error data", "bad gateway", false));
        assert_eq!(
            e.to_string(),
            "the Kubernetes API answered 502: bad gateway"
        );
        let e = Error::Kube(kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "tcp connect error: Connection refused (os error 111)",
        ))));
        assert_eq!(
            e.to_string(),
            "the Kubernetes API server could not be reached: tcp connect error: Connection refused (os error 111)"
        );
        assert_eq!(e.category(), Category::KubeApi);
    }

    #[test]
    fn retry_after_is_honoured() {
        let e = Error::Remote(ClientError::Status {
            service: Service::Secrets,
            status: 429,
            message: "slow down".into(),
            retry_after: Some(7),
        });
        assert_eq!(
            e.requeue_after(1, Duration::from_secs(300)),
            Duration::from_secs(7)
        );
    }
}
