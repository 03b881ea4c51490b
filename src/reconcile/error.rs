//! The one error type of reconciles, with a bounded category used as the Event reason, the
//! condition reason and the metric label.

use std::time::Duration;

use crate::clients::ClientError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The service answered with an error, or could not be reached.
    #[error(transparent)]
    Remote(#[from] ClientError),
    /// The Kubernetes API failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
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
        reason: &'static str,
        message: String,
    },
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
        }
    }
}

impl Error {
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
            Error::Kube(_) | Error::Finalizer(_) => Category::KubeApi,
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
            | Category::Unauthorized => exp(5, 300),
            Category::KubeApi => exp(1, 60),
            Category::Rejected | Category::Unsupported | Category::InvalidSpec => jitter(resync),
        }
    }
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
