//! `TotpMethod` and `TotpEnrollment`: TOTP MFA methods of the secrets service and the TOTP
//! secrets of identity entities (spec A §2.7, §4.5).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus};

/// A TOTP MFA method of the secrets service (`identity/mfa/method/totp`). The service assigns
/// the method's UUID; it is recorded in `status.remoteId` the moment the
/// method is created. Every field but `issuer` is optional: a field left out keeps the service's
/// value (its default on create) and is not managed.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "TotpMethod",
    plural = "totpmethods",
    doc = "A TOTP MFA method of the secrets service, kept equal to spec.",
    cel,
    namespaced,
    status = "TotpMethodStatus",
    shortname = "totp",
    category = "quartet",
    printcolumn(name = "Issuer", type_ = "string", json_path = ".spec.issuer"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Synced",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Synced\")].status"
    ),
    printcolumn(name = "Method ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("!has(oldSelf.methodId) || !has(self.methodId) || self.methodId == oldSelf.methodId").message("methodId cannot be changed once set: remove it (the method already found stays managed) or create a new TotpMethod")
)]
#[serde(rename_all = "camelCase")]
pub struct TotpMethodSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Name of the issuing organisation, shown by authenticator apps. Required.
    #[x_kube(validation = Rule::new("self.size() > 0").message("issuer must not be empty"))]
    #[schemars(length(max = 256))]
    pub issuer: String,
    /// Length of the TOTP period in seconds (service default 30). Must be greater than zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self > 0").message("periodSeconds must be greater than zero"))]
    pub period_seconds: Option<i64>,
    /// Size in bytes of each generated key (service default 20). Must be greater than zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self > 0 && self <= 4096").message("keySize must be between 1 and 4096 bytes"))]
    pub key_size: Option<i64>,
    /// Pixel size of the square QR code of generated secrets (service default 200); 0 generates
    /// no QR code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 0 && self <= 4096").message("qrSize must be between 0 and 4096 pixels"))]
    pub qr_size: Option<i64>,
    /// Hash algorithm: `SHA1` (service default), `SHA256` or `SHA512`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self in ['SHA1', 'SHA256', 'SHA512']").message("algorithm must be SHA1, SHA256 or SHA512"))]
    #[schemars(length(max = 16))]
    pub algorithm: Option<String>,
    /// Number of digits of a passcode: 6 (service default) or 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == 6 || self == 8").message("digits must be 6 or 8"))]
    pub digits: Option<i64>,
    /// Number of periods of delay allowed when validating a passcode: 0 or 1 (service default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == 0 || self == 1").message("skew must be 0 or 1"))]
    pub skew: Option<i64>,
    /// Consecutive failed validations allowed before the entity is locked out (service default
    /// 5). Must be greater than zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self > 0").message("maxValidationAttempts must be greater than zero"))]
    pub max_validation_attempts: Option<i64>,
    /// UUID of an existing TOTP method to adopt (and then keep equal to this spec) instead of
    /// creating a new one. Cannot be changed once set; it can be removed (a mistyped id is then
    /// no dead end: the method found before stays managed, by the id in status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')").message("methodId must be a UUID"))]
    #[schemars(length(max = 36))]
    pub method_id: Option<String>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the method from the service when this resource is deleted (a
    /// method still used by a login enforcement cannot be deleted: the resource then reports
    /// `DeletionBlocked` and retries); `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of a TotpMethod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TotpMethodStatus {
    /// `remoteId` is the method's UUID in the service, recorded as soon as the service assigns
    /// it; TotpEnrollments refer to the method through it.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

/// A reference to a TotpMethod in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TotpMethodRef {
    /// Name of the TotpMethod (in the namespace of the TotpEnrollment).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A TOTP secret of one identity entity for one TOTP method, generated by the service
/// (`admin-generate`). The result, the otpauth URL (`url`) and its QR code (`barcode.png`), is
/// written to a Secret owned by this resource; it never appears in status, logs or Events.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "TotpEnrollment",
    plural = "totpenrollments",
    doc = "A TOTP secret for one identity entity, delivered to a Secret owned by the resource.",
    cel,
    namespaced,
    status = "TotpEnrollmentStatus",
    shortname = "totpenroll",
    category = "quartet",
    printcolumn(name = "Secret", type_ = "string", json_path = ".status.secretName"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Synced",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Synced\")].status"
    ),
    printcolumn(name = "Remote ID", type_ = "string", json_path = ".status.remoteId"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.methodRef) != has(self.methodId)").message("exactly one of methodRef and methodId must be set"),
    validation = Rule::new("has(self.entityId) != has(self.entityName)").message("exactly one of entityId and entityName must be set"),
    validation = Rule::new("has(self.methodRef) == has(oldSelf.methodRef) && (!has(self.methodRef) || self.methodRef == oldSelf.methodRef) && has(self.methodId) == has(oldSelf.methodId) && (!has(self.methodId) || self.methodId == oldSelf.methodId)").message("methodRef and methodId are immutable: create a new TotpEnrollment instead"),
    validation = Rule::new("has(self.entityId) == has(oldSelf.entityId) && (!has(self.entityId) || self.entityId == oldSelf.entityId) && has(self.entityName) == has(oldSelf.entityName) && (!has(self.entityName) || self.entityName == oldSelf.entityName)").message("entityId and entityName are immutable: create a new TotpEnrollment instead"),
    validation = Rule::new("has(self.secretName) == has(oldSelf.secretName) && (!has(self.secretName) || self.secretName == oldSelf.secretName)").message("secretName is immutable: create a new TotpEnrollment instead")
)]
#[serde(rename_all = "camelCase")]
pub struct TotpEnrollmentSpec {
    /// `suspend`, flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// The TotpMethod (in this namespace) whose method the secret is for. The enrollment waits,
    /// with a `Waiting` condition, until that TotpMethod has a method id. Exactly one of
    /// `methodRef` and `methodId`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method_ref: Option<TotpMethodRef>,
    /// UUID of the TOTP method in the service. Exactly one of `methodRef` and `methodId`.
    /// Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')").message("methodId must be a UUID"))]
    #[schemars(length(max = 36))]
    pub method_id: Option<String>,
    /// ID of the identity entity that receives the secret. Exactly one of `entityId` and
    /// `entityName`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub entity_id: Option<String>,
    /// Name of the identity entity that receives the secret, resolved to its id through the
    /// service's identity endpoints. Exactly one of `entityId` and `entityName`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub entity_name: Option<String>,
    /// Name of the Secret (in this namespace, owned by this resource) that receives `url` (the
    /// otpauth URI, which holds the seed) and `barcode.png` (its QR code as a PNG image);
    /// defaults to `metadata.name`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub secret_name: Option<String>,
    /// Set to a new value (any string, e.g. a date) to destroy the entity's secret and generate
    /// a new one, once. `status.handledRegenerate` records the value handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub regenerate: Option<String>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) destroys the entity's secret in the service (`admin-destroy`) when this
    /// resource is deleted; `Retain` leaves it (the Secret goes away with the resource either
    /// way).
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of a TotpEnrollment. Never holds the secret itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TotpEnrollmentStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// The TOTP method the secret was generated for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 36))]
    pub method_id: Option<String>,
    /// The entity that holds the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// The Secret that holds `url` and `barcode.png`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// The last `spec.regenerate` value acted upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_regenerate: Option<String>,
    /// True when a generate may have happened in the service without its result reaching the
    /// Secret (a lost response): the next pass destroys that secret and generates again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_outcome_unknown: Option<bool>,
}

impl TotpEnrollment {
    /// The name of the result Secret.
    pub fn result_secret_name(&self) -> String {
        use kube::ResourceExt;
        self.spec
            .secret_name
            .clone()
            .unwrap_or_else(|| self.name_any())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(spec: serde_json::Value) -> TotpMethod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "TotpMethod",
            "metadata": {"name": "m"}, "spec": spec
        }))
        .expect("valid shape")
    }

    fn enrollment(spec: serde_json::Value) -> TotpEnrollment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "TotpEnrollment",
            "metadata": {"name": "e"}, "spec": spec
        }))
        .expect("valid shape")
    }

    #[test]
    fn totp_method_value_rules_are_checked() {
        assert!(method(serde_json::json!({"issuer": "Acme"}))
            .validate_cel()
            .is_ok());
        for bad in [
            serde_json::json!({"issuer": ""}),
            serde_json::json!({"issuer": "a", "digits": 7}),
            serde_json::json!({"issuer": "a", "skew": 2}),
            serde_json::json!({"issuer": "a", "algorithm": "MD5"}),
            serde_json::json!({"issuer": "a", "periodSeconds": 0}),
            serde_json::json!({"issuer": "a", "keySize": 0}),
            serde_json::json!({"issuer": "a", "qrSize": -1}),
            serde_json::json!({"issuer": "a", "maxValidationAttempts": 0}),
            serde_json::json!({"issuer": "a", "methodId": "nope"}),
        ] {
            assert!(method(bad.clone()).validate_cel().is_err(), "{bad}");
        }
        assert!(method(serde_json::json!({"issuer": "a", "digits": 8, "skew": 0, "algorithm": "SHA512", "qrSize": 0})).validate_cel().is_ok());
    }

    #[test]
    fn method_id_can_be_set_or_removed_but_never_changed() {
        let id = "0f0e4bd8-7c2c-4b1c-9f39-6c2a2b4d2f10";
        let other = "1f0e4bd8-7c2c-4b1c-9f39-6c2a2b4d2f10";
        let none = method(serde_json::json!({"issuer": "a"}));
        let set = method(serde_json::json!({"issuer": "a", "methodId": id}));
        let changed = method(serde_json::json!({"issuer": "a", "methodId": other}));
        assert!(set.validate_cel_update(&none).is_ok());
        assert!(changed.validate_cel_update(&set).is_err());
        // A mistyped id is no dead end.
        assert!(none.validate_cel_update(&set).is_ok());
        assert!(set.validate_cel_update(&set).is_ok());
    }

    #[test]
    fn enrollment_needs_exactly_one_method_and_one_entity() {
        let id = "0f0e4bd8-7c2c-4b1c-9f39-6c2a2b4d2f10";
        assert!(
            enrollment(serde_json::json!({"methodRef": {"name": "m"}, "entityName": "alice"}))
                .validate_cel()
                .is_ok()
        );
        assert!(
            enrollment(serde_json::json!({"methodId": id, "entityId": "e1"}))
                .validate_cel()
                .is_ok()
        );
        assert!(enrollment(
            serde_json::json!({"methodRef": {"name": "m"}, "methodId": id, "entityId": "e1"})
        )
        .validate_cel()
        .is_err());
        assert!(enrollment(serde_json::json!({"entityId": "e1"}))
            .validate_cel()
            .is_err());
        assert!(enrollment(
            serde_json::json!({"methodId": id, "entityId": "e1", "entityName": "a"})
        )
        .validate_cel()
        .is_err());
        assert!(enrollment(serde_json::json!({"methodId": id}))
            .validate_cel()
            .is_err());
    }

    #[test]
    fn enrollment_targets_are_immutable_but_regenerate_is_not() {
        let old = enrollment(serde_json::json!({"methodRef": {"name": "m"}, "entityName": "a"}));
        let other_entity =
            enrollment(serde_json::json!({"methodRef": {"name": "m"}, "entityName": "b"}));
        let other_method =
            enrollment(serde_json::json!({"methodRef": {"name": "n"}, "entityName": "a"}));
        let regen = enrollment(
            serde_json::json!({"methodRef": {"name": "m"}, "entityName": "a", "regenerate": "1"}),
        );
        assert!(other_entity.validate_cel_update(&old).is_err());
        assert!(other_method.validate_cel_update(&old).is_err());
        assert!(regen.validate_cel_update(&old).is_ok());
    }
}
