//! `SecretsPolicy`: an ACL, RGP or EGP policy of the secrets service (spec A §2.5, §4.3).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus};

/// A policy of the secrets service: ACL (path rules), RGP (role-governing, Sentinel) or EGP
/// (endpoint-governing, Sentinel, attached to paths). RGP and EGP need a premium licence: on a
/// server without it the resource reports `Ready=False` with reason `Unsupported`.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "SecretsPolicy",
    plural = "secretspolicies",
    doc = "A policy of the secrets service (ACL, RGP or EGP), kept equal to spec.",
    cel,
    namespaced,
    status = "SecretsPolicyStatus",
    shortname = "spol",
    category = "quartet",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Synced", type_ = "string", json_path = ".status.conditions[?(@.type==\"Synced\")].status"),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("self.metadata.name.size() <= 128 || has(self.spec.name)").message("metadata.name is longer than a policy name may be: set spec.name")
)]
#[x_kube(
    validation = Rule::new("self.type == 'acl' ? !has(self.enforcementLevel) : has(self.enforcementLevel)").message("enforcementLevel is required for rgp and egp policies and not allowed for acl policies"),
    validation = Rule::new("self.type == 'egp' ? (has(self.paths) && self.paths.size() > 0) : !has(self.paths)").message("paths is required for egp policies and not allowed for acl and rgp policies"),
    validation = Rule::new("self.type == oldSelf.type").message("type is immutable: create a new SecretsPolicy instead"),
    validation = Rule::new("has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)").message("name is immutable: create a new SecretsPolicy instead")
)]
#[serde(rename_all = "camelCase")]
pub struct SecretsPolicySpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Policy type: `acl`, `rgp` or `egp`. Immutable.
    #[serde(rename = "type")]
    pub type_: PolicyType,
    /// Name of the policy in the service; defaults to `metadata.name`. Lower case, as the service
    /// lower-cases policy names. `root` is reserved. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self != 'root'").message("the root policy cannot be managed"))]
    #[schemars(
        length(min = 1, max = 128),
        regex(pattern = r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
    )]
    pub name: Option<String>,
    /// The policy document: HCL path rules for `acl`, Sentinel source for `rgp` and `egp`.
    #[schemars(length(min = 1, max = 1048576))]
    pub policy: String,
    /// Enforcement level for `rgp` and `egp` (required there, not allowed for `acl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement_level: Option<EnforcementLevel>,
    /// Request paths the `egp` policy applies to (required for egp only). A trailing `*` globs,
    /// e.g. `secret/*`; `*` alone affects all authenticated and login requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    #[schemars(inner(length(max = 1024)))]
    pub paths: Option<Vec<String>>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the policy from the service when this resource is deleted;
    /// `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Policy type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PolicyType {
    /// Access-control list policy (path rules).
    Acl,
    /// Role-governing policy (Sentinel); premium licence.
    Rgp,
    /// Endpoint-governing policy (Sentinel) attached to paths; premium licence.
    Egp,
}

impl PolicyType {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyType::Acl => "acl",
            PolicyType::Rgp => "rgp",
            PolicyType::Egp => "egp",
        }
    }
}

// Sentinel enforcement level. (A `//` comment: on an optional field schemars would show the
// type's doc instead of the field's in `kubectl explain`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)] // a doc comment would replace the field's in `kubectl explain`
pub enum EnforcementLevel {
    /// Failures are logged, never block.
    Advisory,
    /// Failures block unless overridden.
    SoftMandatory,
    /// Failures always block.
    HardMandatory,
}

impl EnforcementLevel {
    /// The value as the service and the CRD spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            EnforcementLevel::Advisory => "advisory",
            EnforcementLevel::SoftMandatory => "soft-mandatory",
            EnforcementLevel::HardMandatory => "hard-mandatory",
        }
    }
}

/// Observed state of a SecretsPolicy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretsPolicyStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

impl SecretsPolicy {
    /// The policy's name in the service.
    pub fn policy_name(&self) -> String {
        use kube::ResourceExt;
        self.spec.name.clone().unwrap_or_else(|| self.name_any())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(spec: serde_json::Value) -> SecretsPolicy {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "SecretsPolicy",
            "metadata": {"name": "p"}, "spec": spec
        }))
        .expect("valid shape")
    }

    #[test]
    fn acl_policy_with_enforcement_level_is_rejected() {
        let p = policy(
            serde_json::json!({"type": "acl", "policy": "x", "enforcementLevel": "advisory"}),
        );
        assert!(p.validate_cel().is_err());
        assert!(policy(serde_json::json!({"type": "acl", "policy": "x"}))
            .validate_cel()
            .is_ok());
    }

    #[test]
    fn rgp_policy_needs_an_enforcement_level() {
        assert!(policy(serde_json::json!({"type": "rgp", "policy": "x"}))
            .validate_cel()
            .is_err());
        assert!(policy(
            serde_json::json!({"type": "rgp", "policy": "x", "enforcementLevel": "soft-mandatory"})
        )
        .validate_cel()
        .is_ok());
    }

    #[test]
    fn egp_policy_needs_paths_and_others_may_not_have_them() {
        assert!(policy(
            serde_json::json!({"type": "egp", "policy": "x", "enforcementLevel": "advisory"})
        )
        .validate_cel()
        .is_err());
        assert!(policy(serde_json::json!({"type": "egp", "policy": "x", "enforcementLevel": "advisory", "paths": []})).validate_cel().is_err());
        assert!(policy(serde_json::json!({"type": "egp", "policy": "x", "enforcementLevel": "advisory", "paths": ["a/*"]})).validate_cel().is_ok());
        assert!(
            policy(serde_json::json!({"type": "acl", "policy": "x", "paths": ["a/*"]}))
                .validate_cel()
                .is_err()
        );
    }

    #[test]
    fn type_and_name_are_immutable() {
        let old = policy(serde_json::json!({"type": "acl", "policy": "x", "name": "a"}));
        let renamed = policy(serde_json::json!({"type": "acl", "policy": "x", "name": "b"}));
        let retyped = policy(
            serde_json::json!({"type": "rgp", "policy": "x", "name": "a", "enforcementLevel": "advisory"}),
        );
        let edited = policy(serde_json::json!({"type": "acl", "policy": "y", "name": "a"}));
        assert!(renamed.validate_cel_update(&old).is_err());
        assert!(retyped.validate_cel_update(&old).is_err());
        assert!(edited.validate_cel_update(&old).is_ok());
    }

    #[test]
    fn root_policy_cannot_be_managed() {
        assert!(
            policy(serde_json::json!({"type": "acl", "policy": "x", "name": "root"}))
                .validate_cel()
                .is_err()
        );
    }
}
