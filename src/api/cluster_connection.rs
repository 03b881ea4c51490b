//! `ClusterConnection`: a platform team's Connection, cluster-scoped, that resources in the
//! namespaces it admits may use without holding its token.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::connection::{ConnectionAuth, ConnectionStatus, Service};
use super::SecretKeyRef;

/// How Quartet reaches one service instance for the namespaces a platform team allows. Its
/// token (or login) Secrets live in `spec.secretNamespace` (by default the operator's own
/// namespace), which tenants need not be able to read. A resource uses it with
/// `spec.connectionRef: {kind: ClusterConnection, name: NAME}`, or, with no `connectionRef` and
/// no Connection named after its service in its namespace, when it is marked `default: true`
/// for that service and admits the resource's namespace.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "quartet.dev",
    cel,
    version = "v1alpha1",
    kind = "ClusterConnection",
    doc = "A cluster-wide Connection: address, token Secret in the operator's namespace, and which namespaces and kinds may use it.",
    status = "ConnectionStatus",
    shortname = "qcc",
    category = "quartet",
    printcolumn(name = "Service", type_ = "string", json_path = ".spec.service"),
    printcolumn(name = "Address", type_ = "string", json_path = ".spec.address"),
    printcolumn(name = "Default", type_ = "boolean", json_path = ".spec.default"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("!has(self.tokenHeader) || self.service != 'workspaces'").message("tokenHeader is not used by the workspace service (it takes a bearer token)"),
    validation = Rule::new("!has(self.organization) || self.service == 'workspaces'").message("organization is only used by workspaces ClusterConnections"),
    validation = Rule::new("has(self.tokenSecretRef) != has(self.auth)").message("set exactly one of tokenSecretRef and auth"),
    validation = Rule::new("!has(self.auth) || self.service == 'secrets'").message("auth (a login) is only offered by the secrets service")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConnectionSpec {
    /// `true` stops the ClusterConnection's own checks of the service (the probe of the token,
    /// the lease count, login renewals it schedules): `Ready` is `False` with reason
    /// `Suspended`. Resources that use it go on calling the service: suspend them to stop
    /// those. Setting it back to `false` checks at once.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// Which service this ClusterConnection reaches: `secrets`, `workspaces`, `catalog` or
    /// `scheduler`.
    pub service: Service,
    /// Base URL of the service, e.g. `https://secrets.example.com:8200` (no `/v1` or `/api/v2`).
    /// At most 2048 characters.
    #[schemars(regex(pattern = r"^https?://[^\s/]+(/[^\s]*)?$"), length(max = 2048))]
    pub address: String,
    /// Namespace of the Secrets this ClusterConnection reads (`tokenSecretRef`, `caSecretRef`,
    /// the login's Secrets). Defaults to the operator's own namespace, so tenants using the
    /// ClusterConnection never need to read its token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        length(min = 1, max = 63)
    )]
    pub secret_namespace: Option<String>,
    /// The Secret key (in `secretNamespace`) holding the API token. Exactly one of
    /// `tokenSecretRef` and `auth` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretKeyRef>,
    /// Secrets service only: log in to get the token instead of reading it from a Secret (the
    /// login's Secrets are read from `secretNamespace`). Exactly one of `tokenSecretRef` and
    /// `auth` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ConnectionAuth>,
    /// The Secret key (in `secretNamespace`) holding a PEM CA bundle to trust for `https`
    /// addresses, in addition to the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<SecretKeyRef>,
    /// HTTP header that carries the token (`X-Vault-Token` for an OpenBao server). Defaults by
    /// service as for a Connection; refused for the workspace service (bearer token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9-]+$"), length(min = 1, max = 128))]
    pub token_header: Option<String>,
    /// Workspace service only: the default organization of resources that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub organization: Option<String>,
    /// Namespace of the service to work in (secrets service namespaces), sent with each call.
    /// At most 1024 characters.
    #[schemars(length(max = 1024))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// Timeout of one HTTP call, in seconds.
    #[serde(default = "default_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: u32,
    /// Client-side limit on calls per second to this service through this ClusterConnection,
    /// shared by every namespace that uses it.
    #[serde(default = "default_rate")]
    #[schemars(range(min = 1, max = 10000))]
    pub requests_per_second: u32,
    /// Optional limit on calls per second for the resources of any one namespace, within
    /// `requestsPerSecond`, so one tenant cannot use up the budget of the others. Unset: no
    /// per-namespace limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub requests_per_second_per_namespace: Option<u32>,
    /// How many Quartet instances (the default instance and each shard, see `quartet run
    /// --shard`) use this ClusterConnection. Each instance then keeps to its share of
    /// `requestsPerSecond` and of `requestsPerSecondPerNamespace`, each divided by `shards`
    /// and rounded up (at least 1, with a burst of twice that), so together they stay within
    /// them. When set, it wins over the instance's `--shard-count`; unset, each instance
    /// divides by its `--shard-count` (1 by default). `status.requestsPerSecondPerInstance`
    /// shows the share in use. At least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub shards: Option<u32>,
    /// Namespaces whose labels match this selector may use the ClusterConnection. An empty
    /// selector (`{}`) matches every namespace; unset matches none. A namespace admitted by
    /// `namespaceSelector` or by `namespaces` may use it; any other is refused
    /// (`ConnectionNotAllowed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Names of namespaces that may use the ClusterConnection, whatever their labels. At most
    /// 256 names.
    #[schemars(length(max = 256), inner(length(max = 63)))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Kinds that may use the ClusterConnection (`SecretsPolicy`, `Workspace`, ...), spelt as
    /// in a manifest's `kind` (a name that is no Quartet kind is refused at admission, so a
    /// typo cannot lock every tenant out). Empty (the default) allows every kind of its service.
    /// At most 64 kinds.
    #[schemars(
        length(max = 64),
        extend("items" = {"type": "string", "enum": [
            "AdCheckout", "AdEngine", "AdLibrarySet", "AdRole", "CatalogAclBootstrap",
            "CatalogAclToken", "DeploymentGate", "DrReplication", "IdpAuthMethod", "IdpGroup",
            "IdpUser", "NoCodeModule", "NoCodeWorkspace", "SecretsPolicy", "TotpEnrollment",
            "TotpMethod", "TransformAlphabet", "TransformRole", "TransformStore",
            "TransformTemplate", "Transformation", "Workspace", "WorkspaceRun"
        ]})
    )]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Use this ClusterConnection for resources of its service that have no `connectionRef`,
    /// in the namespaces it admits that have no Connection named after the service. At most
    /// one default ClusterConnection per service should admit a namespace: when several do,
    /// such resources are refused until one is named in `connectionRef`.
    #[serde(default)]
    pub default: bool,
}

fn default_timeout() -> u32 {
    10
}
fn default_rate() -> u32 {
    50
}
