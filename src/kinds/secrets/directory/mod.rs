//! The directory secrets engine's kinds (spec C §2.2, §4.2): one file per kind, and what they
//! share: how the engine's errors are classified, and whether a Secret exists.

pub mod checkout;
pub mod engine;
pub mod library;
pub mod role;
pub mod strays;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::clients::secrets::directory::unmounted;
use crate::clients::ClientError;
use crate::reconcile::{Error, Result};

/// Plain errors (500) of the directory engine that no retry can fix: they wait for a spec
/// change (or the resync) like a 4xx instead of backing off as transient failures.
const PERMANENT: [&str; 18] = [
    "unable to find service account",
    "is over the max ttl",
    "does not exist",
    "cannot derive UserBindDN",
    "invalid 'tls",
    "tls_max_version",
    "password replacement field",
    "cannot set password_policy",
    "ttl must be",
    "max_ttl must be",
    "failed to decode PEM",
    "is already managed by set",
    "secure_ password",
    "sufficiently complex",
    "Invalid Credentials",
    "unable to find an entry for binddn",
    "matches more than one entity",
    "\"service_account_name\" is required",
];

/// Classify an error of the directory engine at `mount`:
/// * a 404 naming no route: the server has no directory engine there (OpenBao, community
///   builds without it, a wrong mount) → `Unsupported`, terminal;
/// * `the config is currently unset` (a plain 500): the engine is not configured yet → a
///   waiting condition (an AdEngine configures it), retried with backoff;
/// * the known permanent refusals that arrive as 500 → `InvalidSpec` with the service's text;
/// * anything else as usual (4xx rejected, 5xx transient).
pub fn ad_error(mount: &str, e: ClientError) -> Error {
    if unmounted(&e) {
        return Error::Unsupported(format!(
            "the directory secrets engine is not available at {mount}/ on this server: {e}"
        ));
    }
    if let ClientError::Status {
        status: 500,
        message,
        ..
    } = &e
    {
        if message.contains("the config is currently unset") {
            return Error::MissingReference(format!(
                "the directory engine at {mount}/ is not configured yet (the config is currently unset): an AdEngine configures it"
            ));
        }
        if PERMANENT.iter().any(|p| message.contains(p)) {
            return Error::InvalidSpec(format!("the service refused: {message}"));
        }
    }
    Error::Remote(e)
}

/// Whether the Secret `name` exists in `ns`.
pub async fn secret_exists(client: &kube::Client, ns: &str, name: &str) -> Result<bool> {
    Ok(Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?
        .is_some())
}

/// Now as RFC 3339 (seconds).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Seconds since the epoch of an RFC 3339 time.
pub fn epoch(t: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|d| d.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Service;
    use crate::reconcile::Category;

    fn status(code: u16, m: &str) -> ClientError {
        ClientError::Status {
            service: Service::Secrets,
            status: code,
            message: m.into(),
            retry_after: None,
        }
    }

    #[test]
    fn known_permanent_500s_are_not_transient() {
        assert_eq!(
            ad_error("ad", status(500, "the config is currently unset")).category(),
            Category::ReferenceMissing
        );
        assert_eq!(
            ad_error("ad", status(500, "role x does not exist")).category(),
            Category::InvalidSpec
        );
        assert_eq!(
            ad_error("ad", status(500, "internal error")).category(),
            Category::Transient
        );
    }

    #[test]
    fn a_server_without_the_engine_is_unsupported() {
        assert_eq!(
            ad_error(
                "ad",
                status(
                    404,
                    "no handler for route \"ad/config\". route entry not found."
                )
            )
            .category(),
            Category::Unsupported
        );
    }
}
