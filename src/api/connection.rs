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
    /// The value as the service and the CRD spell it.
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
    validation = Rule::new("!has(self.organization) || self.service == 'workspaces'").message("organization is only used by workspaces Connections"),
    validation = Rule::new("has(self.tokenSecretRef) != has(self.auth)").message("set exactly one of tokenSecretRef and auth"),
    validation = Rule::new("!has(self.auth) || self.service == 'secrets'").message("auth (a login) is only offered by the secrets service")
)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionSpec {
    /// `true` stops the Connection's own checks of the service (the probe of the token, the
    /// lease count, login renewals it schedules): `Ready` is `False` with reason `Suspended`.
    /// Resources that use the Connection go on calling the service: suspend them to stop
    /// those. Setting it back to `false` checks at once.
    #[serde(flatten)]
    pub gitops: crate::api::Suspend,
    /// Which service this Connection reaches: `secrets`, `workspaces`, `catalog` or `scheduler`.
    pub service: Service,
    /// Base URL of the service, e.g. `https://secrets.example.com:8200` (no `/v1` or `/api/v2`).
    /// At most 2048 characters.
    #[schemars(regex(pattern = r"^https?://[^\s/]+(/[^\s]*)?$"), length(max = 2048))]
    pub address: String,
    /// The Secret key holding the API token (secrets: `X-Secrets-Token`; workspaces: bearer
    /// token; catalog: `X-Catalog-Token`; scheduler: management or ACL token). Exactly one of
    /// `tokenSecretRef` and `auth` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretKeyRef>,
    /// Secrets service only: log in to get the token instead of reading it from a Secret.
    /// Quartet logs in once per Connection, reuses the token for every resource, renews it
    /// before it expires, logs in again only when it is refused or cannot be renewed, and
    /// revokes it when the Connection is deleted or its auth changes. Exactly one of
    /// `tokenSecretRef` and `auth` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ConnectionAuth>,
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
    /// At most 1024 characters.
    #[schemars(length(max = 1024))]
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
    /// How many Quartet instances (the default instance and each shard, see `quartet run
    /// --shard`) use this Connection. Each instance then keeps to its share,
    /// `ceil(requestsPerSecond / shards)` calls per second (at least 1, with a burst of twice
    /// that), so together they stay within `requestsPerSecond`. When set, it wins over the
    /// instance's `--shard-count`; unset, each instance divides by its `--shard-count` (1 by
    /// default: the whole budget per instance). `status.requestsPerSecondPerInstance` shows
    /// the share in use. At least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub shards: Option<u32>,
    /// Namespaces other than the Connection's own whose resources may use it; `*` allows all.
    /// Empty (the default) allows only resources in the Connection's namespace. At most 256
    /// namespaces.
    #[schemars(length(max = 256), inner(length(max = 63)))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_namespaces: Vec<String>,
}

/// How a Connection logs in to get its token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionAuth {
    /// Log in with the identity-provider auth method (`POST /v1/auth/<mount>/login/<username>`).
    pub idp: IdpLogin,
}

/// An identity-provider login: a username, its password, and optionally the verification-app
/// seed or an MFA provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdpLogin {
    /// Path the identity-provider auth method is mounted at, without `auth/` (default `idp`).
    #[serde(default = "default_idp_mount")]
    #[schemars(
        regex(pattern = r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$"),
        length(min = 1, max = 128)
    )]
    pub mount: String,
    /// The user to log in as.
    #[schemars(length(min = 1, max = 255))]
    pub username: String,
    /// The Secret key holding the user's password. A changed Secret makes Quartet log in again
    /// (and revoke the previous token).
    pub password_secret_ref: SecretKeyRef,
    /// The Secret key holding the base32 seed of the user's verification-app (TOTP) factor:
    /// Quartet computes the current passcode itself (SHA1, 6 digits, 30 s, as the verification
    /// app does) and sends it with each login. Without it, an account with MFA must use a push
    /// factor (see `provider`), which makes each login wait until the push is answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totp_secret_ref: Option<SecretKeyRef>,
    /// The MFA factor provider to prefer (sent as the login's `provider`, upper case, e.g.
    /// `OKTA` or `GOOGLE`). Factors of other providers are then ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_]+$"), length(min = 1, max = 32))]
    pub provider: Option<String>,
}

fn default_idp_mount() -> String {
    "idp".into()
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
    /// `Unreachable`, `Unauthorized`, `SecretNotFound`, `InvalidSpec`, `Suspended`, and
    /// `LoginFailed` with the service's message when a login of `spec.auth` is refused).
    /// `Reconciling` is `True` while a transient failure (unreachable, 429, 5xx) is retried;
    /// `Stalled` is `True` when the check cannot pass without a change from someone (a refused
    /// token or login, a missing Secret, an invalid spec). Each carries `observedGeneration`.
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
    /// The calls per second one Quartet instance makes through this Connection:
    /// `spec.requestsPerSecond` divided by `spec.shards` (or, unset, by the `--shard-count` of
    /// the instance writing this status), rounded up. Absent until first checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second_per_instance: Option<u32>,
    /// With `spec.auth`: the state of the login (never the token itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ConnectionAuthStatus>,
    /// The value of the annotation `reconcile.quartet.dev/requestedAt` (or Flux's
    /// `reconcile.fluxcd.io/requestedAt`) last handled: a new value makes the Connection check
    /// the service at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

/// The login a Connection with `spec.auth` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionAuthStatus {
    /// The auth method used: `idp`.
    pub method: String,
    /// The mount of the auth method (without `auth/`).
    pub mount: String,
    /// The user logged in as.
    pub username: String,
    /// When the current token expires unless renewed (RFC 3339); absent for a token without
    /// expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Whether the service lets the token be renewed (Quartet renews at 2/3 of its lease).
    pub renewable: bool,
}
