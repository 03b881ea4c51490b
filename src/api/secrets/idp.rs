//! `IdpUser` and `IdpGroup`: local users and groups of the secrets service's identity-provider
//! auth method (spec A §2.3, §4.2).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{ConnectionRef, DeletionPolicy, ManagedStatus};

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
    pub groups: Option<Vec<String>>,
    /// Policies the user's logins get (a set; compared without regard to order or case). Left
    /// out, the service's value is kept and not managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<String>>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in
    /// this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<ConnectionRef>,
    /// `Delete` (default) removes the user from the auth method when this resource is deleted;
    /// `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of an IdpUser.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdpUserStatus {
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
    pub policies: Option<Vec<String>>,
    /// The Connection to the secrets service; defaults to the Connection named `secrets` in
    /// this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<ConnectionRef>,
    /// `Delete` (default) removes the group from the auth method when this resource is deleted;
    /// `Retain` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Observed state of an IdpGroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdpGroupStatus {
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
