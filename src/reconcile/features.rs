//! What a secrets service offers to a Connection's token, read from its OpenAPI description
//! (`GET /v1/sys/internal/specs/openapi`, spec A §4.1), and the one-line check a kind makes
//! before writing.
//!
//! The Connection controller probes the description and lists in `status.features` the
//! features whose paths appear in it (the description covers only what the token can reach,
//! and only mounted engines). A kind calls, first thing in `desired`:
//!
//! ```ignore
//! features::require(ctx, self, features::TRANSFORM).await?;
//! ```
//!
//! A missing feature gives `Error::Unsupported` (`Ready=False`, reason `Unsupported`, no write
//! sent, no retry loop); the resource is re-checked when its Connection changes (the driver
//! watches Connections). A Connection that has not listed features yet (first probe pending, or
//! the description could not be read) does not block anything.

use std::collections::BTreeSet;

use kube::ResourceExt;
use serde_json::Value;

use super::managed::Managed;
use super::{Context, Error, Result};
use crate::api::Service;

/// ACL policies (`sys/policies/acl`).
pub const ACL_POLICIES: &str = "acl-policies";
/// Role-governing Sentinel policies (`sys/policies/rgp`, premium).
pub const RGP_POLICIES: &str = "rgp-policies";
/// Endpoint-governing Sentinel policies (`sys/policies/egp`, premium).
pub const EGP_POLICIES: &str = "egp-policies";
/// The identity-provider auth method (an `idp` mount).
pub const IDP: &str = "idp";
/// TOTP MFA methods (`identity/mfa/method/totp`).
pub const MFA_TOTP: &str = "mfa-totp";
/// The transform engine (enterprise Advanced Data Protection).
pub const TRANSFORM: &str = "transform";
/// The directory engine (an `ad` mount).
pub const AD: &str = "ad";
/// DR replication (`sys/replication/dr`, enterprise).
pub const DR_REPLICATION: &str = "dr-replication";
/// Lease lookup and revocation (`sys/leases`).
pub const LEASES: &str = "leases";

/// Every feature name, in the order `status.features` lists them.
pub const ALL: [&str; 9] = [
    ACL_POLICIES,
    RGP_POLICIES,
    EGP_POLICIES,
    IDP,
    MFA_TOTP,
    TRANSFORM,
    AD,
    DR_REPLICATION,
    LEASES,
];

/// The features an OpenAPI description's `paths` show. Engines are recognised by the shape of
/// their paths, not by mount names (mounts are configurable).
pub fn from_openapi(doc: &Value) -> Vec<String> {
    let paths: BTreeSet<String> = doc
        .get("paths")
        .and_then(Value::as_object)
        .map(|p| {
            p.keys()
                .map(|k| k.trim_end_matches('/').to_string())
                .collect()
        })
        .unwrap_or_default();
    let any = |f: &dyn Fn(&str) -> bool| paths.iter().any(|p| f(p));
    let mut out = Vec::new();
    let mut add = |name: &str, on: bool| {
        if on {
            out.push(name.to_string());
        }
    };
    add(ACL_POLICIES, any(&|p| p.starts_with("/sys/policies/acl")));
    add(RGP_POLICIES, any(&|p| p.starts_with("/sys/policies/rgp")));
    add(EGP_POLICIES, any(&|p| p.starts_with("/sys/policies/egp")));
    // An identity-provider auth method: logins with a number-challenge verify endpoint.
    add(
        IDP,
        any(&|p| {
            p.starts_with("/auth/")
                && p.split_once("/verify/{").is_some_and(|(m, _)| {
                    paths
                        .iter()
                        .any(|q| q.starts_with(&format!("{m}/login/{{")))
                })
        }),
    );
    add(
        MFA_TOTP,
        any(&|p| p.starts_with("/identity/mfa/method/totp")),
    );
    add(TRANSFORM, any(&|p| p.contains("/transformations/")));
    // The directory engine: library sets to check out, next to roles (the LDAP engine has
    // libraries too, but singular `role`/`static-role` paths).
    add(
        AD,
        any(&|p| {
            p.ends_with("/check-out")
                && p.split_once("/library/{").is_some_and(|(m, _)| {
                    paths
                        .iter()
                        .any(|q| q.starts_with(&format!("{m}/roles/{{")))
                })
        }),
    );
    add(
        DR_REPLICATION,
        any(&|p| p.starts_with("/sys/replication/dr/")),
    );
    add(LEASES, any(&|p| p.starts_with("/sys/leases/")));
    out
}

/// Whether `feature` is available, given a Connection's `status.features` (`None`: not known
/// yet, so not blocking).
pub fn check(features: Option<&[String]>, feature: &str, connection: &str) -> Result<()> {
    match features {
        Some(list) if !list.iter().any(|f| f == feature) => Err(Error::Unsupported(format!(
            "the secrets service behind Connection {connection} does not offer {feature} to its token (not in the Connection's status.features)"
        ))),
        _ => Ok(()),
    }
}

/// Fail with [`Error::Unsupported`] when the Connection `obj` uses lists features and `feature`
/// is not among them. One call, first thing in a kind's `desired`.
pub async fn require<K: Managed>(ctx: &Context, obj: &K, feature: &str) -> Result<()> {
    if K::SERVICE != Service::Secrets {
        return Ok(());
    }
    let ns = obj.namespace().unwrap_or_default();
    let conn = ctx.connection_for(&K::kind(&()), &ns, obj.connection_ref(), K::SERVICE)?;
    let name = format!(
        "{}/{}",
        conn.namespace().unwrap_or_default(),
        conn.name_any()
    );
    check(
        conn.status.as_ref().and_then(|s| s.features.as_deref()),
        feature,
        &name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(paths: &[&str]) -> Value {
        let map: serde_json::Map<String, Value> =
            paths.iter().map(|p| (p.to_string(), json!({}))).collect();
        json!({"openapi": "3.0.2", "paths": map})
    }

    #[test]
    fn features_are_recognised_by_path_shape_whatever_the_mount() {
        let d = doc(&[
            "/sys/policies/acl/{name}",
            "/sys/policies/acl/",
            "/identity/mfa/method/totp/{method_id}",
            "/auth/corp-idp/login/{username}",
            "/auth/corp-idp/verify/{nonce}",
            "/tr/transformations/fpe/{name}",
            "/dir/roles/{name}",
            "/dir/library/{name}/check-out",
            "/sys/leases/lookup",
        ]);
        assert_eq!(
            from_openapi(&d),
            vec![
                "acl-policies",
                "idp",
                "mfa-totp",
                "transform",
                "ad",
                "leases"
            ]
        );
    }

    #[test]
    fn the_ldap_engine_library_is_not_the_directory_engine() {
        let d = doc(&["/ldap/library/{name}/check-out", "/ldap/role/{name}"]);
        assert!(from_openapi(&d).is_empty());
    }

    #[test]
    fn licensed_features_show_only_when_their_paths_do() {
        let d = doc(&[
            "/sys/policies/rgp/{name}",
            "/sys/policies/egp/{name}",
            "/sys/replication/dr/status",
        ]);
        assert_eq!(
            from_openapi(&d),
            vec!["rgp-policies", "egp-policies", "dr-replication"]
        );
    }

    #[test]
    fn a_missing_feature_is_unsupported_and_unknown_features_do_not_block() {
        let list = vec!["acl-policies".to_string()];
        assert!(check(Some(&list), "acl-policies", "ns/c").is_ok());
        let err = check(Some(&list), "mfa-totp", "ns/c").unwrap_err();
        assert_eq!(err.category(), crate::reconcile::Category::Unsupported);
        assert!(check(None, "mfa-totp", "ns/c").is_ok());
    }
}
