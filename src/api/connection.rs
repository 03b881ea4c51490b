//! `Connection`: how Quartet reaches one instance of one service.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, SecretKeyRef};

/// The four services Quartet manages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Service {
    /// The secrets service (spec A; transform and directory engines of spec C).
    Secrets,
    /// The infrastructure workspace service (spec B).
    Workspaces,
    /// The catalog service's ACL API (spec C).
    Catalog,
    /// The scheduler's deployments API (spec C).
    Scheduler,
}

impl Service {
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Secrets => "secrets",
            Service::Workspaces => "workspaces",
            Service::Catalog => "catalog",
            Service::Scheduler => "scheduler",
        }
    }
}

impl std::fmt::Display for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How Quartet reaches one service instance. Managed resources name it in `spec.connectionRef`;
/// a resource without `connectionRef` uses the Connection named after its service (`secrets`,
/// `workspaces`, `catalog` or `scheduler`) in its own namespace.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "quartet.dev",
    cel,
    version = "v1alpha1",
    kind = "Connection",
    doc = "How Quartet reaches one service instance: address, token Secret, CA, limits.",
    namespaced,
    status = "ConnectionStatus",
    shortname = "qconn",
    category = "quartet",
    printcolumn(name = "Service", type_ = "string", json_path = ".spec.service"),
    printcolumn(name = "Address", type_ = "string", json_path = ".spec.address"),
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
    validation = Rule::new("!has(self.organization) || self.service == 'workspaces'").message("organization is only used by workspaces Connections")
)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionSpec {
    /// Which service this Connection reaches: `secrets`, `workspaces`, `catalog` or `scheduler`.
    pub service: Service,
    /// Base URL of the service, e.g. `https://secrets.example.com:8200` (no `/v1` or `/api/v2`).
    #[schemars(regex(pattern = r"^https?://[^\s/]+(/[^\s]*)?$"))]
    pub address: String,
    /// The Secret key holding the API token (secrets: `X-Secrets-Token`; workspaces: bearer
    /// token; catalog: `X-Catalog-Token`; scheduler: management or ACL token).
    pub token_secret_ref: SecretKeyRef,
    /// The Secret key holding a PEM CA bundle to trust for `https` addresses, in addition to the
    /// system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<SecretKeyRef>,
    /// HTTP header that carries the token, for servers of the same API that name it differently
    /// (`X-Vault-Token` for an OpenBao server). Defaults by service: `X-Secrets-Token` for
    /// secrets, `X-Catalog-Token` for catalog, `X-Scheduler-Token` for scheduler; the workspace
    /// service always takes a bearer token (`Authorization: Bearer`), so this field is refused
    /// there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9-]+$"), length(min = 1, max = 128))]
    pub token_header: Option<String>,
    /// Workspace service only: the default organization of resources that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub organization: Option<String>,
    /// Namespace of the service to work in (secrets service namespaces), sent with each call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// Timeout of one HTTP call, in seconds.
    #[serde(default = "default_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: u32,
    /// Client-side limit on calls per second to this service from this operator.
    #[serde(default = "default_rate")]
    #[schemars(range(min = 1, max = 10000))]
    pub requests_per_second: u32,
    /// Namespaces other than the Connection's own whose resources may use it; `*` allows all.
    /// Empty (the default) allows only resources in the Connection's namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_namespaces: Vec<String>,
}

fn default_timeout() -> u32 {
    10
}
fn default_rate() -> u32 {
    50
}

/// Whether the service answers and accepts the token.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    /// The `metadata.generation` last checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the service answered and accepted the token (reasons `Connected`,
    /// `Unreachable`, `Unauthorized`, `SecretNotFound`, `InvalidSpec`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Secrets service only: what the Connection's token can reach, from the service's OpenAPI
    /// description (`acl-policies`, `rgp-policies`, `egp-policies`, `idp`, `mfa-totp`,
    /// `transform`, `ad`, `dr-replication`, `leases`). Resources of a feature not listed report
    /// `Ready=False` with reason `Unsupported` and send nothing. Absent until first read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<String>>,
    /// Secrets service only: irrevocable leases (revocations that failed for good), from
    /// `sys/leases/count?type=irrevocable` at each check, when the token may read it. Also the
    /// metric `quartet_secrets_irrevocable_leases{connection,mount}`; a Warning Event
    /// `IrrevocableLeases` says when the count grows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irrevocable_leases: Option<i64>,
}
