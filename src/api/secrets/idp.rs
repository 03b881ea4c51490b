//! `IdpUser` and `IdpGroup`: local users and groups of the secrets service's identity-provider
//! auth method (spec A §2.3, §4.2).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus, SecretKeyRef};

fn default_mount() -> String {
    "idp".to_string()
}

/// A user of the identity-provider auth method, with the local groups and policies its logins
/// get (in addition to the provider's groups). Kept equal to spec.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "IdpUser",
    plural = "idpusers",
    doc = "A user of the secrets service's identity-provider auth method, kept equal to spec.",
    cel,
    namespaced,
    status = "IdpUserStatus",
    shortname = "idpuser",
    category = "quartet",
    printcolumn(name = "Mount", type_ = "string", json_path = ".spec.mount"),
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
    validation = Rule::new("self.mount == oldSelf.mount").message("mount is immutable: create a new IdpUser instead"),
    validation = Rule::new("has(self.username) == has(oldSelf.username) && (!has(self.username) || self.username == oldSelf.username)").message("username is immutable: create a new IdpUser instead")
)]
#[serde(rename_all = "camelCase")]
pub struct IdpUserSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path the auth method is mounted at (default `idp`). Immutable.
    #[serde(default = "default_mount")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^\s]+$"))]
    pub mount: String,
    /// The user's name at the identity provider; defaults to `metadata.name`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub username: Option<String>,
    /// Local groups the user belongs to (a set; compared without regard to order or case).
    /// Left out, the service's value is kept and not managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 256)))]
    pub groups: Option<Vec<String>>,
    /// Policies the user's logins get (a set; compared without regard to order or case). Left
    /// out, the service's value is kept and not managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 256)))]
    pub policies: Option<Vec<String>>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the user from the auth method when this resource is deleted;
    /// `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of an IdpUser.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdpUserStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

/// A local group of the identity-provider auth method, with the policies its members' logins
/// get. Kept equal to spec.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "IdpGroup",
    plural = "idpgroups",
    doc = "A group of the secrets service's identity-provider auth method, kept equal to spec.",
    cel,
    namespaced,
    status = "IdpGroupStatus",
    shortname = "idpgroup",
    category = "quartet",
    printcolumn(name = "Mount", type_ = "string", json_path = ".spec.mount"),
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
    validation = Rule::new("self.mount == oldSelf.mount").message("mount is immutable: create a new IdpGroup instead"),
    validation = Rule::new("has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)").message("name is immutable: create a new IdpGroup instead")
)]
#[serde(rename_all = "camelCase")]
pub struct IdpGroupSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path the auth method is mounted at (default `idp`). Immutable.
    #[serde(default = "default_mount")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^\s]+$"))]
    pub mount: String,
    /// The group's name (matched without regard to case, stored lower-cased by the service);
    /// defaults to `metadata.name`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub name: Option<String>,
    /// Policies the group's members' logins get (a set; compared without regard to order or
    /// case). Left out, the service's value is kept and not managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 256)))]
    pub policies: Option<Vec<String>>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) removes the group from the auth method when this resource is deleted;
    /// `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of an IdpGroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdpGroupStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

/// The configuration of the identity-provider auth method at `mount` (`auth/:mount/config`):
/// the provider organisation, its API token (write-only) and the defaults of the tokens its
/// logins create. Fields left out keep the service's value and are not managed (except
/// `orgName`, which is required).
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "secrets.quartet.dev",
    version = "v1alpha1",
    kind = "IdpAuthMethod",
    plural = "idpauthmethods",
    doc = "The configuration of the secrets service's identity-provider auth method, kept equal to spec.",
    cel,
    namespaced,
    status = "IdpAuthMethodStatus",
    shortname = "idpauth",
    category = "quartet",
    printcolumn(name = "Mount", type_ = "string", json_path = ".spec.mount"),
    printcolumn(name = "Org", type_ = "string", json_path = ".spec.orgName"),
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
    validation = Rule::new("self.mount == oldSelf.mount").message("mount is immutable: create a new IdpAuthMethod instead")
)]
#[serde(rename_all = "camelCase")]
pub struct IdpAuthMethodSpec {
    /// The GitOps fields (`suspend`, `driftPolicy`), flattened into the spec.
    #[serde(flatten)]
    pub gitops: crate::api::GitOps,
    /// Path the auth method is mounted at (default `idp`). Immutable.
    #[serde(default = "default_mount")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^\s]+$"))]
    pub mount: String,
    /// Organisation name used in the identity provider's API. Required.
    #[x_kube(validation = Rule::new("self.size() > 0").message("orgName must not be empty"))]
    #[schemars(length(max = 256))]
    pub org_name: String,
    /// The Secret key holding the provider's API token (needed to read group membership).
    /// Write-only: the service never returns it; a change of the Secret is detected by a keyed
    /// hash and sent at once (the Secret is watched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_token_secret_ref: Option<SecretKeyRef>,
    /// Base domain of the provider's API; the provider's default domain when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!self.contains(' ')").message("baseUrl must not contain spaces"))]
    #[schemars(length(max = 2048))]
    pub base_url: Option<String>,
    /// Skip the provider's MFA request (also ignores other account statuses such as an expired
    /// password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bypass_idp_mfa: Option<bool>,
    /// Defaults of the tokens logins create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<IdpTokenSettings>,
    /// When true, the auth method is enabled at `mount` if it is missing and, with
    /// `deletionPolicy: Delete`, disabled when this resource is deleted. WARNING: disabling an
    /// auth method removes its users and groups and revokes the tokens of its logins. When
    /// false (default), the configuration is left in the service on deletion (the service has
    /// no delete for it).
    #[serde(default)]
    pub enable_mount: bool,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in this
    /// namespace, else to the ClusterConnection marked `default: true` for this service that admits
    /// this namespace and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<Box<ConnectionRef>>,
    /// `Delete` (default) disables the auth method on deletion when `enableMount` is true;
    /// `Retain` leaves it. Without `enableMount` the configuration is always left.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Token defaults of the auth method (`token_*` fields of the service). Durations are strings
/// such as `90s`, `30m`, `1h`, `7d` or a number of seconds, compared with the service's seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(
    validation = Rule::new("!has(self.type) || self.type != 'batch' || !has(self.numUses) || self.numUses == 0").message("'token_type' cannot be 'batch' or 'default_batch' when set to generate tokens with limited use count"),
    validation = Rule::new("!has(self.type) || self.type != 'batch' || !has(self.period) || self.period == '0' || self.period == '0s'").message("'token_type' cannot be 'batch' or 'default_batch' when set to generate periodic tokens")
)]
#[serde(rename_all = "camelCase")]
pub struct IdpTokenSettings {
    /// Incremental lifetime of tokens (e.g. `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+(s|m|h|d))+)$"))]
    #[schemars(length(max = 64))]
    pub ttl: Option<String>,
    /// Maximum lifetime of tokens (e.g. `24h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+(s|m|h|d))+)$"))]
    #[schemars(length(max = 64))]
    pub max_ttl: Option<String>,
    /// Hard cap of a token's lifetime, even when renewable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+(s|m|h|d))+)$"))]
    #[schemars(length(max = 64))]
    pub explicit_max_ttl: Option<String>,
    /// Period of periodic tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+(s|m|h|d))+)$"))]
    #[schemars(length(max = 64))]
    pub period: Option<String>,
    /// Policies encoded on tokens (a set), in addition to the user's and groups'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 256)))]
    pub policies: Option<Vec<String>>,
    /// CIDR blocks allowed to log in and to use the tokens (a set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 64)))]
    pub bound_cidrs: Option<Vec<String>>,
    /// When true, the `default` policy is not added to tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_default_policy: Option<bool>,
    /// Maximum uses of a token; 0 is unlimited (and required for tokens that create children).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 0").message("numUses must not be negative"))]
    pub num_uses: Option<i64>,
    /// Token type: `service`, `batch` or `default`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    #[x_kube(validation = Rule::new("self in ['service', 'batch', 'default']").message("type must be service, batch or default"))]
    pub type_: Option<String>,
}

/// Observed state of an IdpAuthMethod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdpAuthMethodStatus {
    /// The status every managed kind shares, flattened into this one.
    #[serde(flatten)]
    pub managed: ManagedStatus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_and_username_are_immutable_and_mount_defaults_to_idp() {
        let user = |spec: serde_json::Value| -> IdpUser {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "secrets.quartet.dev/v1alpha1", "kind": "IdpUser",
                "metadata": {"name": "u"}, "spec": spec
            }))
            .expect("valid shape")
        };
        let old = user(serde_json::json!({"username": "a"}));
        assert_eq!(old.spec.mount, "idp");
        assert!(user(serde_json::json!({"username": "b"}))
            .validate_cel_update(&old)
            .is_err());
        assert!(user(serde_json::json!({"username": "a", "mount": "other"}))
            .validate_cel_update(&old)
            .is_err());
        assert!(
            user(serde_json::json!({"username": "a", "policies": ["x"]}))
                .validate_cel_update(&old)
                .is_ok()
        );
    }
}
