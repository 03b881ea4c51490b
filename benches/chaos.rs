//! Chaos benchmark (prints figures; asserts nothing about time).
//!
//! Starts `quartet sandbox --kubeconfig` and `quartet run`, then, while the sandbox answers about
//! 20% of the calls to its services with a fault (429 with Retry-After, 500, 503, a delay past the
//! client's timeout, a dropped connection, a lost response after the write) and the operator is
//! killed with SIGKILL and restarted at random moments:
//!
//! 1. creates N resources spread over the kinds below (env `QUARTET_CHAOS_N`, default 300),
//! 2. edits a field of each that causes a remote write,
//! 3. deletes half of them.
//!
//! Then it clears the faults, stops killing and waits (up to 10 min) for convergence, and prints:
//! resources converged (Ready with the last generation observed, or gone when deleted); remote
//! duplicates (objects in the services no live resource accounts for, and resources whose remote
//! object exists twice or is not the one its status names); lost deletions (remote objects of
//! deleted resources); secret values (every token the bench knows, and the values it put in
//! Secrets) found in the operator's logs over all its runs, in Events or in status; and the time
//! to converge after the last fault.
//!
//! Env: `QUARTET_CHAOS_N` (300), `QUARTET_CHAOS_KILLS` (20), `QUARTET_CHAOS_SEED` (random;
//! printed, so a run can be repeated: the same seed picks the same faults, kill delays and
//! deletions; thread timing still varies), `QUARTET_CHAOS_FAULT_RATE` (0.2).
//!
//! Run: `cargo bench --bench chaos` (or `--profile dev` on a busy machine).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use support::*;

const RESYNC: &str = "20s";
const CONCURRENCY: usize = 8;
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(600);

/// One kind the bench drives: how to write a resource and its edit, and how to find its remote
/// objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    SecretsPolicy,
    TotpMethod,
    IdpUser,
    IdpGroup,
    TransformAlphabet,
    TransformTemplate,
    Workspace,
    TransformStore,
    Transformation,
    TransformRole,
    AdRole,
    AdLibrarySet,
    NoCodeModule,
    NoCodeWorkspace,
    CatalogAclToken,
    TotpEnrollment,
    AdCheckout,
    WorkspaceRun,
    DeploymentGate,
}

/// Each kind of `DEPENDS` comes after the kind it depends on, so there are at least as many of
/// the latter: dependent j needs object j (see `Kind::edit` and the choice of deletions).
const KINDS: [Kind; 19] = [
    Kind::SecretsPolicy,
    Kind::TotpMethod,
    Kind::IdpUser,
    Kind::IdpGroup,
    Kind::TransformAlphabet,
    Kind::TransformTemplate,
    Kind::Workspace,
    Kind::TransformStore,
    Kind::Transformation,
    Kind::TransformRole,
    Kind::AdRole,
    Kind::AdLibrarySet,
    Kind::NoCodeModule,
    Kind::NoCodeWorkspace,
    Kind::CatalogAclToken,
    Kind::TotpEnrollment,
    Kind::AdCheckout,
    Kind::WorkspaceRun,
    Kind::DeploymentGate,
];

/// (dependent, what it needs): resource j of the first needs resource j of the second, and is
/// deleted exactly when that one is (a transformation a role lists cannot be deleted; a no-code
/// workspace is provisioned from its module; a check-out borrows from its set).
const DEPENDS: [(Kind, Kind); 3] = [
    (Kind::TransformRole, Kind::Transformation),
    (Kind::NoCodeWorkspace, Kind::NoCodeModule),
    (Kind::AdCheckout, Kind::AdLibrarySet),
];

/// Workspace for WorkspaceRun j (`chaos-runws-<j>`, made with a configuration version before
/// the chaos, never deleted) → id.
static RUN_WORKSPACES: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();

/// DeploymentGate j's job (`chaos-job-<j>`) → the deployment of its second version, whose
/// canary waits for promotion (registered before the chaos).
static GATE_DEPLOYMENTS: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();

/// Registry module name → id, seeded through the sandbox admin API before the first create.
static REGISTRY_MODULES: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();

/// Identity entity name (= TotpEnrollment name) → id, created before the first create.
static ENTITIES: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();

/// The TotpMethod every TotpEnrollment enrolls in (its name and issuer do not start with
/// `chaos-`, so the TotpMethod census and remote count leave it out).
const ENROLL_METHOD: &str = "bench-enroll";

/// Kinds left out, and why (printed with the figures).
const LEFT_OUT: &[(&str, &str)] = &[
    ("IdpAuthMethod", "one per mount, not N: the bench has one, edited (its token Secret is among the secrets searched for), never deleted"),
    ("AdEngine", "one per mount, not N: the bench has one (its bind password is among the secrets searched for), never edited or deleted"),
    ("CatalogAclBootstrap", "one per catalog, and bootstrapping is a one-time call"),
    ("TotpMethod bench-enroll", "the one method all TotpEnrollments enroll in, never edited or deleted"),
    ("DrReplication", "drives a cluster pair's replication: one per cluster, not N"),
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::SecretsPolicy => "SecretsPolicy",
            Kind::TotpMethod => "TotpMethod",
            Kind::IdpUser => "IdpUser",
            Kind::IdpGroup => "IdpGroup",
            Kind::TransformAlphabet => "TransformAlphabet",
            Kind::TransformTemplate => "TransformTemplate",
            Kind::Workspace => "Workspace",
            Kind::TransformStore => "TransformStore",
            Kind::Transformation => "Transformation",
            Kind::TransformRole => "TransformRole",
            Kind::AdRole => "AdRole",
            Kind::AdLibrarySet => "AdLibrarySet",
            Kind::NoCodeModule => "NoCodeModule",
            Kind::NoCodeWorkspace => "NoCodeWorkspace",
            Kind::CatalogAclToken => "CatalogAclToken",
            Kind::TotpEnrollment => "TotpEnrollment",
            Kind::AdCheckout => "AdCheckout",
            Kind::WorkspaceRun => "WorkspaceRun",
            Kind::DeploymentGate => "DeploymentGate",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Kind::SecretsPolicy => "pol",
            Kind::TotpMethod => "totp",
            Kind::IdpUser => "user",
            Kind::IdpGroup => "group",
            Kind::TransformAlphabet => "alpha",
            Kind::TransformTemplate => "tpl",
            Kind::Workspace => "ws",
            Kind::TransformStore => "store",
            Kind::Transformation => "tf",
            Kind::TransformRole => "role",
            Kind::AdRole => "adrole",
            Kind::AdLibrarySet => "adlib",
            Kind::NoCodeModule => "ncmod",
            Kind::NoCodeWorkspace => "ncws",
            Kind::CatalogAclToken => "cat",
            Kind::TotpEnrollment => "enroll",
            Kind::AdCheckout => "adco",
            Kind::WorkspaceRun => "run",
            Kind::DeploymentGate => "gate",
        }
    }

    fn api_resource(self) -> ApiResource {
        let (group, plural) = match self {
            Kind::SecretsPolicy => ("secrets.quartet.dev", "secretspolicies"),
            Kind::TotpMethod => ("secrets.quartet.dev", "totpmethods"),
            Kind::IdpUser => ("secrets.quartet.dev", "idpusers"),
            Kind::IdpGroup => ("secrets.quartet.dev", "idpgroups"),
            Kind::TransformAlphabet => ("secrets.quartet.dev", "transformalphabets"),
            Kind::TransformTemplate => ("secrets.quartet.dev", "transformtemplates"),
            Kind::Workspace => ("workspaces.quartet.dev", "workspaces"),
            Kind::TransformStore => ("secrets.quartet.dev", "transformstores"),
            Kind::Transformation => ("secrets.quartet.dev", "transformations"),
            Kind::TransformRole => ("secrets.quartet.dev", "transformroles"),
            Kind::AdRole => ("secrets.quartet.dev", "adroles"),
            Kind::AdLibrarySet => ("secrets.quartet.dev", "adlibrarysets"),
            Kind::NoCodeModule => ("workspaces.quartet.dev", "nocodemodules"),
            Kind::NoCodeWorkspace => ("workspaces.quartet.dev", "nocodeworkspaces"),
            Kind::CatalogAclToken => ("catalog.quartet.dev", "catalogacltokens"),
            Kind::TotpEnrollment => ("secrets.quartet.dev", "totpenrollments"),
            Kind::AdCheckout => ("secrets.quartet.dev", "adcheckouts"),
            Kind::WorkspaceRun => ("workspaces.quartet.dev", "workspaceruns"),
            Kind::DeploymentGate => ("scheduler.quartet.dev", "deploymentgates"),
        };
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, "v1alpha1", self.name()),
            plural,
        )
    }

    fn spec(self, name: &str) -> Value {
        match self {
            Kind::SecretsPolicy => {
                json!({"type": "acl", "policy": format!("path \"chaos/{name}/*\" {{ capabilities = [\"read\"] }}")})
            }
            Kind::TotpMethod => json!({"issuer": name, "digits": 6}),
            Kind::IdpUser | Kind::IdpGroup => json!({"policies": ["chaos-read"]}),
            Kind::TransformAlphabet => json!({"alphabet": "0123456789"}),
            Kind::TransformTemplate => {
                json!({"pattern": r"(\d{4})-(\d{4})", "alphabet": "builtin/numeric"})
            }
            Kind::Workspace => json!({"description": "created by the chaos bench"}),
            // All stores share one credentials Secret (its password is among the secrets
            // searched for).
            Kind::TransformStore => json!({
                "driver": "postgres",
                "connectionString": "postgresql://{{username}}:{{password}}@db.example.internal:5432/chaos",
                "credentialsSecretRef": {"name": STORE_SECRET},
                "maxOpenConnections": 4,
            }),
            // Masking (no key, deletable); the builtin template, since the bench's templates
            // are deleted at random. Transformation j allows role j.
            Kind::Transformation => json!({
                "type": "masking",
                "template": "builtin/creditcardnumber",
                "maskingCharacter": "#",
                "allowedRoles": [partner(name, "tf", "role")],
            }),
            // Created empty; the edit gives it its transformation.
            Kind::TransformRole => json!({"transformations": []}),
            // Each role and set has its own directory account `<name>@example.com` (seeded
            // through the sandbox admin API); the role keeps its credentials in an owned Secret.
            Kind::AdRole => json!({
                "serviceAccountName": format!("{name}@example.com"),
                "ttl": "1h",
                "credentialsSecret": {"name": format!("{name}-creds")},
            }),
            // Two accounts: a check-out made twice would hold both.
            Kind::AdLibrarySet => json!({
                "serviceAccountNames": [format!("{name}@example.com"), format!("{name}-b@example.com")],
                "ttl": "1h",
                "maxTtl": "2h",
            }),
            // Registry module j (`chaos-ncmod-<j>`, one version with a required `region`).
            Kind::NoCodeModule => json!({
                "registryModuleId": REGISTRY_MODULES.get().expect("seeded")[name],
                "variableOptions": [{"name": "region", "type": "string", "options": ["eu-west-1", "us-east-1"]}],
            }),
            Kind::NoCodeWorkspace => json!({
                "moduleRef": {"name": partner(name, "ncws", "ncmod")},
                "description": "created by the chaos bench",
                "deletionMode": "Force",
                "vars": [{"key": "region", "value": "eu-west-1"}],
            }),
            // Logs in with the JWT of ServiceAccount `<name>` (Secret `<name>-jwt`); the binding
            // rule makes it a token with the service identity `<name>`.
            Kind::CatalogAclToken => json!({
                "authMethod": CATALOG_AUTH,
                "meta": {"bench": "chaos"},
                "bearerTokenSecretRef": {"name": format!("{name}-jwt"), "key": "token"},
            }),
            // Entity `<name>` (created before the chaos), enrolled in the one method.
            Kind::TotpEnrollment => json!({
                "methodRef": {"name": ENROLL_METHOD},
                "entityName": name,
            }),
            // Check-out j borrows from set j.
            Kind::AdCheckout => json!({
                "setRef": {"name": partner(name, "adco", "adlib")},
                "ttl": "30m",
            }),
            // A run of the pre-made workspace j: it plans, then waits for confirmation.
            Kind::WorkspaceRun => json!({
                "workspaceId": RUN_WORKSPACES.get().expect("seeded")[&partner(name, "run", "runws")],
            }),
            // Promotes job j's canary once healthy (the bench marks allocations healthy as the
            // scheduler's health checks would).
            Kind::DeploymentGate => json!({
                "jobId": partner(name, "gate", "job"),
                "promote": {"policy": "Auto", "healthyFor": "1s"},
            }),
        }
    }

    /// A spec change that needs a remote write.
    fn edit(self, name: &str) -> Value {
        match self {
            Kind::SecretsPolicy => {
                json!({"policy": format!("path \"chaos/{name}/*\" {{ capabilities = [\"read\", \"list\"] }}")})
            }
            Kind::TotpMethod => json!({"digits": 8}),
            Kind::IdpUser | Kind::IdpGroup => json!({"policies": ["chaos-read", "chaos-edited"]}),
            Kind::TransformAlphabet => json!({"alphabet": "0123456789abcdef"}),
            Kind::TransformTemplate => json!({"pattern": r"(\d{4})-(\d{4})-(\d{4})"}),
            Kind::Workspace => json!({"description": "edited by the chaos bench"}),
            Kind::TransformStore => json!({"maxOpenConnections": 8}),
            Kind::Transformation => json!({"maskingCharacter": "X"}),
            // A role whose transformation is missing waits (Ready=False), and a transformation a
            // role lists cannot be deleted: role j lists transformation j, which exists (see
            // KINDS) and is deleted exactly when role j is.
            Kind::TransformRole => json!({"transformations": [partner(name, "role", "tf")]}),
            Kind::AdRole => json!({"ttl": "2h"}),
            Kind::AdLibrarySet => json!({"ttl": "30m"}),
            Kind::NoCodeModule => json!({
                "variableOptions": [{"name": "region", "type": "string", "options": ["eu-west-1", "us-east-1", "ap-south-1"]}],
            }),
            Kind::NoCodeWorkspace => json!({"description": "edited by the chaos bench"}),
            // No spec field of a login token is written to the catalog outside a login: the meta
            // applies at the next one (rotation), so this edit makes no remote write.
            Kind::CatalogAclToken => json!({"meta": {"bench": "chaos", "edited": "yes"}}),
            // Destroy the entity's secret and generate a new one (once).
            Kind::TotpEnrollment => json!({"regenerate": "edited"}),
            // A shorter lease: the next check-out or renewal asks for it.
            Kind::AdCheckout => json!({"ttl": "20m"}),
            // Apply the plan.
            Kind::WorkspaceRun => json!({"confirm": true}),
            // No remote write of its own: the gate re-decides with the longer wait.
            Kind::DeploymentGate => json!({"promote": {"policy": "Auto", "healthyFor": "2s"}}),
        }
    }

    fn manifest(self, name: &str) -> DynamicObject {
        let ar = self.api_resource();
        let mut obj = DynamicObject::new(name, &ar).within("default");
        obj.data = json!({"spec": self.spec(name)});
        obj
    }
}

const STORE_SECRET: &str = "chaos-store-creds";
const CATALOG_AUTH: &str = "chaos-k8s";
const SA_KEY: &str = "chaos-service-account-signing-key";

/// An HS256 ServiceAccount JWT the catalog's `kubernetes` auth method verifies with `SA_KEY`.
fn sa_jwt(ns: &str, name: &str) -> String {
    use base64::Engine;
    use hmac::Mac;
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = b64(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = b64(json!({
        "iss": "https://kubernetes.default.svc",
        "sub": format!("system:serviceaccount:{ns}:{name}"),
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": "0b6c0e4e-1111-2222-3333-444455556666"}},
        "iat": now, "exp": now + 6 * 3600,
    })
    .to_string()
    .as_bytes());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SA_KEY.as_bytes()).unwrap();
    mac.update(format!("{header}.{claims}").as_bytes());
    let sig = b64(&mac.finalize().into_bytes());
    format!("{header}.{claims}.{sig}")
}
const AD_BIND_DN: &str = "CN=chaos-bind,CN=Users,DC=example,DC=com";

/// The sandbox's directory: `PUT /_sandbox/secrets/ad/accounts/<upn>`.
fn ad_account(sb: &Sandbox, upn: &str, dn: &str, password: &str) {
    let (s, b) = http(
        "PUT",
        &format!("{}/_sandbox/secrets/ad/accounts/{upn}", sb.url("secrets")),
        None,
        Some(json!({"dn": dn, "password": password})),
    );
    assert_eq!(s, 204, "seed account {upn}: {b}");
}

/// The sandbox's admin view of the TOTP secret `entity` holds for `method`, if any.
fn totp_seed(sb: &Sandbox, entity: &str, method: &str) -> Option<String> {
    let (s, b) = http(
        "GET",
        &format!(
            "{}/_sandbox/secrets/mfa/{entity}/{method}",
            sb.url("secrets")
        ),
        None,
        None,
    );
    (s == 200).then(|| b["secret"].as_str().unwrap_or_default().to_string())
}

/// Mark every allocation of a deployment healthy (sandbox admin API, never faulted).
fn all_healthy(scheduler: &str, deployment: &str) {
    let (s, b) = http(
        "POST",
        &format!("{scheduler}/_sandbox/scheduler/deployments/{deployment}/health"),
        None,
        Some(json!({"Healthy": true})),
    );
    assert!(s < 300, "health {deployment}: {s} {b}");
}

fn ad_password(sb: &Sandbox, upn: &str) -> String {
    let (_, b) = http(
        "GET",
        &format!("{}/_sandbox/secrets/ad/accounts/{upn}", sb.url("secrets")),
        None,
        None,
    );
    b["password"].as_str().unwrap_or_default().to_string()
}

/// `chaos-<from>-<j>` → `chaos-<to>-<j>`.
fn partner(name: &str, from: &str, to: &str) -> String {
    name.replacen(&format!("chaos-{from}-"), &format!("chaos-{to}-"), 1)
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn main() {
    let n: usize = env_or("QUARTET_CHAOS_N", 300);
    let kills: usize = env_or("QUARTET_CHAOS_KILLS", 20);
    let seed: u64 = env_or("QUARTET_CHAOS_SEED", rand::random::<u32>() as u64);
    let rate: f64 = env_or("QUARTET_CHAOS_FAULT_RATE", 0.2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("Chaos: N={n}, kills={kills}, fault rate {rate}, seed {seed} (QUARTET_CHAOS_SEED={seed} repeats the draws)");
    rt.block_on(run(n, kills, seed, rate));
}

/// The faults the sandbox injects, each on `rate / 6` of all calls to every service (the kube
/// API server excepted). The Connections time out after 5 s: a 6 s delay is past it.
fn inject_faults(sb: &Sandbox, rate: f64, seed: u64) {
    let p = rate / 6.0;
    let faults = [
        json!({"status": 429, "retry_after": 1}),
        json!({"status": 500}),
        json!({"status": 503}),
        json!({"status": 200, "delay_ms": 6000}),
        json!({"drop": true}),
        json!({"after": true}),
    ];
    for service in ["secrets", "workspaces", "catalog", "scheduler"] {
        for (i, f) in faults.iter().enumerate() {
            let mut f = f.clone();
            f["path"] = json!("/*");
            f["service"] = json!(service);
            f["count"] = json!(0);
            f["probability"] = json!(p);
            if i == 0 {
                f["seed"] = json!(seed);
            }
            sb.fault(service, f);
        }
    }
}

fn clear_faults(sb: &Sandbox) {
    for service in ["secrets", "workspaces", "catalog", "scheduler"] {
        sb.clear_faults(service);
    }
}

/// The operator's process across kills, with the logs of every run.
struct Operators {
    current: Option<Operator>,
    logs: Vec<String>,
}

fn is_converged(o: &DynamicObject) -> bool {
    let st = &o.data["status"];
    let ready = st["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    });
    ready && st["observedGeneration"].as_i64() == o.metadata.generation
}

struct World {
    apis: BTreeMap<Kind, Api<DynamicObject>>,
}

impl World {
    /// (converged live, live, deleted still present) per kind.
    async fn census(&self, live: &BTreeSet<String>) -> BTreeMap<Kind, (usize, usize, usize)> {
        let mut out = BTreeMap::new();
        for (kind, api) in &self.apis {
            let Ok(list) = api.list(&ListParams::default()).await else {
                out.insert(*kind, (0, usize::MAX, usize::MAX));
                continue;
            };
            let mut c = (0, 0, 0);
            for o in &list.items {
                let name = o.metadata.name.clone().unwrap_or_default();
                if !name.starts_with("chaos-") {
                    continue;
                }
                if live.contains(&name) {
                    c.1 += 1;
                    if is_converged(o) {
                        c.0 += 1;
                    }
                } else {
                    c.2 += 1;
                }
            }
            out.insert(*kind, c);
        }
        out
    }

    async fn all_converged(
        &self,
        live: &BTreeSet<String>,
        expected: &BTreeMap<Kind, usize>,
    ) -> bool {
        let census = self.census(live).await;
        census
            .iter()
            .all(|(k, (conv, l, gone))| *conv == expected[k] && *l == expected[k] && *gone == 0)
    }
}

async fn run(n: usize, kills: usize, seed: u64, rate: f64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let idp_token = unique_token();
    let store_password = unique_token();
    let bind_password = unique_token();
    let mut jwts = Vec::new();
    let sb = Arc::new(blocking(|| {
        let sb = Sandbox::start(&[]);
        sb.install_crds();
        sb.connect_secrets(&sb.root_token.clone());
        sb.connect_workspaces();
        // One IdpAuthMethod (one per mount), with a token the logs must never show.
        sb.apply_ok(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: chaos-idp-token, namespace: default}}\nstringData: {{token: {idp_token}}}\n---\n\
             apiVersion: secrets.quartet.dev/v1alpha1\nkind: IdpAuthMethod\nmetadata: {{name: chaos-idp, namespace: default}}\n\
             spec: {{orgName: chaos, apiTokenSecretRef: {{name: chaos-idp-token, key: token}}}}\n"
        ));
        sb.apply_ok(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {STORE_SECRET}, namespace: default}}\nstringData: {{username: chaos_app, password: {store_password}}}\n"
        ));
        // The directory: the engine's bind account, and one account per AdRole / AdLibrarySet.
        ad_account(&sb, "chaos-bind@example.com", AD_BIND_DN, &bind_password);
        for j in 0..n.div_ceil(KINDS.len()) {
            for kind in [Kind::AdRole, Kind::AdLibrarySet] {
                let name = format!("chaos-{}-{j}", kind.short());
                ad_account(
                    &sb,
                    &format!("{name}@example.com"),
                    &format!("CN={name},OU=Svc,DC=example,DC=com"),
                    &unique_token(),
                );
            }
            let b = format!("chaos-{}-{j}-b", Kind::AdLibrarySet.short());
            ad_account(
                &sb,
                &format!("{b}@example.com"),
                &format!("CN={b},OU=Svc,DC=example,DC=com"),
                &unique_token(),
            );
        }
        // The WorkspaceRuns' workspaces, each with a configuration to plan.
        let mut run_workspaces = BTreeMap::new();
        for j in 0..n.div_ceil(KINDS.len()) {
            let name = format!("chaos-runws-{j}");
            let (s, b) = sb.ws_api(
                "POST",
                &format!("/organizations/{}/workspaces", support::workspaces::ORG),
                Some(json!({"data": {"type": "workspaces", "attributes": {"name": name, "auto-apply": false}}})),
            );
            assert_eq!(s, 201, "workspace {name}: {b}");
            let id = b["data"]["id"].as_str().expect("id").to_string();
            sb.upload_configuration(&id);
            run_workspaces.insert(name, id);
        }
        RUN_WORKSPACES.set(run_workspaces).expect("once");
        // The gates' jobs: version 0 healthy, version 1 with one canary waiting for promotion.
        let scheduler = sb.url("scheduler").to_string();
        let mut deployments = BTreeMap::new();
        for j in 0..n.div_ceil(KINDS.len()) {
            let id = format!("chaos-job-{j}");
            let job = |task: &str| {
                json!({"ID": id, "TaskGroups": [{"Name": "web", "Count": 2, "Canary": 1,
                       "MaxParallel": 2, "Tasks": [task]}]})
            };
            let register = |body: Value| {
                let (s, b) = http(
                    "POST",
                    &format!("{scheduler}/_sandbox/scheduler/jobs"),
                    None,
                    Some(body),
                );
                assert!(s < 300, "job {id}: {s} {b}");
                b["DeploymentID"].as_str().expect("deployment").to_string()
            };
            let v0 = register(job("v0"));
            all_healthy(&scheduler, &v0);
            deployments.insert(id.clone(), register(job("v1")));
        }
        GATE_DEPLOYMENTS.set(deployments).expect("once");
        let mut modules = BTreeMap::new();
        for j in 0..n.div_ceil(KINDS.len()) {
            let name = format!("chaos-{}-{j}", Kind::NoCodeModule.short());
            let (s, b) = http(
                "POST",
                &format!(
                    "{}/_sandbox/workspaces/registry-modules",
                    sb.url("workspaces")
                ),
                None,
                Some(
                    json!({"organization": support::workspaces::ORG, "name": name, "provider": "aws",
                    "versions": [{"version": "1.0.0", "variables": [{"name": "region", "type": "string", "required": true}]}]}),
                ),
            );
            assert!(s < 300, "registry module {name}: {s} {b}");
            modules.insert(name, b["id"].as_str().expect("id").to_string());
        }
        REGISTRY_MODULES.set(modules).expect("once");
        // Identity entities for the TotpEnrollments, and the method they enroll in.
        let mut entities = BTreeMap::new();
        for j in 0..n.div_ceil(KINDS.len()) {
            let name = format!("chaos-{}-{j}", Kind::TotpEnrollment.short());
            let (s, b) = sb.secrets("POST", "/v1/identity/entity", Some(json!({"name": name})));
            assert!(s < 300, "entity {name}: {s} {b}");
            entities.insert(
                name,
                b["data"]["id"].as_str().expect("entity id").to_string(),
            );
        }
        ENTITIES.set(entities).expect("once");
        sb.apply_ok(&format!(
            "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpMethod\nmetadata: {{name: {ENROLL_METHOD}, namespace: default}}\nspec: {{issuer: {ENROLL_METHOD}}}\n"
        ));
        // The catalog: a `kubernetes` auth method and a binding rule (service identity = the
        // ServiceAccount's name), a Connection, and one JWT Secret per CatalogAclToken.
        let catalog = sb.url("catalog").to_string();
        // `UseRootToken`: the root token is the catalog's management token (the bench lists its
        // tokens with it).
        for (method, path, body) in [
            ("PUT", "config", json!({"UseRootToken": true})),
            (
                "POST",
                "auth-methods",
                json!({"Name": CATALOG_AUTH, "Type": "kubernetes",
                "Config": {"Host": "https://kubernetes.default.svc", "ValidationKey": SA_KEY}}),
            ),
            (
                "POST",
                "binding-rules",
                json!({"AuthMethod": CATALOG_AUTH, "BindType": "service", "BindName": "${serviceaccount.name}"}),
            ),
        ] {
            let (s, b) = http(
                method,
                &format!("{catalog}/_sandbox/catalog/{path}"),
                None,
                Some(body),
            );
            assert!(s < 300, "catalog {path}: {s} {b}");
        }
        let mut yaml = format!(
            "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: catalog, namespace: default}}\n\
             spec: {{service: catalog, address: \"{catalog}\", tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 5}}\n\
             ---\napiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: scheduler, namespace: default}}\n\
             spec: {{service: scheduler, address: \"{}\", tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 5}}\n",
            sb.url("scheduler")
        );
        for j in 0..n.div_ceil(KINDS.len()) {
            let name = format!("chaos-{}-{j}", Kind::CatalogAclToken.short());
            let jwt = sa_jwt("default", &name);
            yaml.push_str(&format!(
                "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-jwt, namespace: default}}\nstringData: {{token: {jwt}}}\n"
            ));
            jwts.push(jwt);
        }
        sb.apply_ok(&yaml);
        sb.apply_ok(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: chaos-ad-bind, namespace: default}}\nstringData: {{password: {bind_password}}}\n---\n\
             apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdEngine\nmetadata: {{name: chaos-ad, namespace: default}}\n\
             spec: {{binddn: \"{AD_BIND_DN}\", bindpassSecretRef: {{name: chaos-ad-bind, key: password}}, userdn: \"DC=example,DC=com\"}}\n"
        ));
        sb
    }));
    let mut secrets_known: Vec<(&str, String)> = vec![
        ("the Connections' token (root token)", sb.root_token.clone()),
        ("the IdpAuthMethod's API token", idp_token.clone()),
        (
            "the TransformStores' database password",
            store_password.clone(),
        ),
        ("the AdEngine's bind password", bind_password.clone()),
    ];
    for jwt in &jwts {
        secrets_known.push(("a CatalogAclToken's bearer JWT", jwt.clone()));
    }
    let ops = Arc::new(Mutex::new(Operators {
        current: Some(blocking(|| Operator::start(&sb, RESYNC))),
        logs: Vec::new(),
    }));
    let client = quartet::runtime::kube_client::client_from(
        Some(&sb.kubeconfig),
        Arc::new(quartet::metrics::Metrics::default()),
    )
    .await
    .expect("client");
    let world = World {
        apis: KINDS
            .iter()
            .map(|k| {
                (
                    *k,
                    Api::namespaced_with(client.clone(), "default", &k.api_resource()),
                )
            })
            .collect(),
    };
    let resources: Vec<(Kind, String)> = (0..n)
        .map(|i| {
            let k = KINDS[i % KINDS.len()];
            (k, format!("chaos-{}-{}", k.short(), i / KINDS.len()))
        })
        .collect();
    // Delete half of each kind, chosen by the seed.
    let mut doomed = BTreeSet::new();
    for kind in KINDS
        .into_iter()
        .filter(|k| !DEPENDS.iter().any(|(d, _)| d == k))
    {
        let mut names: Vec<&String> = resources
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n)
            .collect();
        let half = names.len() / 2;
        for _ in 0..half {
            let i = rng.random_range(0..names.len());
            doomed.insert(names.swap_remove(i).clone());
        }
    }
    // Dependent j goes exactly when what it needs goes.
    for (dependent, needed) in DEPENDS {
        for (_, name) in resources.iter().filter(|(k, _)| *k == dependent) {
            if doomed.contains(&partner(name, dependent.short(), needed.short())) {
                doomed.insert(name.clone());
            }
        }
    }
    // The kills are shared out over the three phases (create, edit, delete), each at a random
    // delay of 1–5 s after the one before, so they land while that phase's work is under way.
    let kill_delays: Vec<Vec<Duration>> = (0..3)
        .map(|p| {
            (0..kills / 3 + usize::from(p < kills % 3))
                .map(|_| Duration::from_millis(rng.random_range(1_000..5_000)))
                .collect()
        })
        .collect();
    let (phase_tx, phase_rx) = std::sync::mpsc::channel::<usize>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();

    // The scheduler's health checks: every allocation of the gates' deployments turns healthy
    // a moment after it is placed (canaries first, the rest once promoted).
    let healthy_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let health = {
        let (url, stop) = (sb.url("scheduler").to_string(), healthy_stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for dep in GATE_DEPLOYMENTS.get().expect("seeded").values() {
                    all_healthy(&url, dep);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    // Faults on, then the killer: SIGKILL at random moments, restart at once.
    blocking(|| inject_faults(&sb, rate, seed));
    let started = Instant::now();
    let killer = {
        let (sb, ops) = (sb.clone(), ops.clone());
        std::thread::spawn(move || {
            let mut last = Instant::now();
            while let Ok(p) = phase_rx.recv() {
                for d in &kill_delays[p] {
                    std::thread::sleep(*d);
                    let mut o = ops.lock().unwrap();
                    if let Some(op) = o.current.take() {
                        let log = op.kill();
                        o.logs.push(log);
                    }
                    o.current = Some(Operator::start(&sb, RESYNC));
                    last = Instant::now();
                }
                let _ = done_tx.send(());
            }
            last
        })
    };

    // 1. Create all.
    phase_tx.send(0).expect("killer");
    let phase = Instant::now();
    stream::iter(resources.iter())
        .for_each_concurrent(CONCURRENCY, |(kind, name)| {
            let api = world.apis[kind].clone();
            async move {
                api.create(&PostParams::default(), &kind.manifest(name))
                    .await
                    .expect("create");
            }
        })
        .await;
    println!("  created {n} in {:.1} s", phase.elapsed().as_secs_f64());
    let all: BTreeSet<String> = resources.iter().map(|(_, n)| n.clone()).collect();
    let per_kind: BTreeMap<Kind, usize> = KINDS
        .iter()
        .map(|k| (*k, resources.iter().filter(|(r, _)| r == k).count()))
        .collect();
    settle(&world, &all, &per_kind, Duration::from_secs(30)).await;
    blocking(|| done_rx.recv()).expect("killer");

    // 2. Edit each.
    phase_tx.send(1).expect("killer");
    let phase = Instant::now();
    stream::iter(resources.iter())
        .for_each_concurrent(CONCURRENCY, |(kind, name)| {
            let api = world.apis[kind].clone();
            async move {
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": kind.edit(name)})),
                )
                .await
                .expect("edit");
            }
        })
        .await;
    blocking(|| {
        sb.apply_ok("apiVersion: secrets.quartet.dev/v1alpha1\nkind: IdpAuthMethod\nmetadata: {name: chaos-idp, namespace: default}\nspec: {orgName: chaos-edited, apiTokenSecretRef: {name: chaos-idp-token, key: token}}\n")
    });
    println!("  edited {n} in {:.1} s", phase.elapsed().as_secs_f64());
    settle(&world, &all, &per_kind, Duration::from_secs(30)).await;
    blocking(|| done_rx.recv()).expect("killer");

    // 3. Delete half.
    phase_tx.send(2).expect("killer");
    let phase = Instant::now();
    stream::iter(resources.iter().filter(|(_, name)| doomed.contains(name)))
        .for_each_concurrent(CONCURRENCY, |(kind, name)| {
            let api = world.apis[kind].clone();
            async move {
                api.delete(name, &DeleteParams::default())
                    .await
                    .expect("delete");
            }
        })
        .await;
    println!(
        "  deleted {} in {:.1} s",
        doomed.len(),
        phase.elapsed().as_secs_f64()
    );
    let live: BTreeSet<String> = all.difference(&doomed).cloned().collect();
    let expected: BTreeMap<Kind, usize> = KINDS
        .iter()
        .map(|k| {
            (
                *k,
                resources
                    .iter()
                    .filter(|(r, name)| r == k && live.contains(name))
                    .count(),
            )
        })
        .collect();

    // Stop the chaos: the last kill, then the faults.
    blocking(|| done_rx.recv()).expect("killer");
    drop(phase_tx);
    let last_kill = blocking(|| killer.join().expect("killer"));
    blocking(|| clear_faults(&sb));
    let mut fault_counts = Vec::new();
    for service in ["secrets", "workspaces", "catalog", "scheduler"] {
        let (reqs, _) = blocking(|| sb.requests(service, 0));
        let faulted = reqs
            .iter()
            .filter(|(_, _, s)| matches!(s, 0 | 429 | 500 | 503))
            .count();
        fault_counts.push(format!("{service}: {faulted} of {} calls answered 429/500/503 or dropped (lost responses and delays not counted)", reqs.len()));
    }
    let last_fault = Instant::now().max(last_kill);
    println!(
        "  chaos over after {:.1} s ({kills} kills, last {:.1} s ago)",
        started.elapsed().as_secs_f64(),
        last_kill.elapsed().as_secs_f64()
    );
    let mut converged_after = None;
    while last_fault.elapsed() < CONVERGE_TIMEOUT {
        if world.all_converged(&live, &expected).await && idp_converged(&sb) {
            converged_after = Some(last_fault.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let census = world.census(&live).await;
    healthy_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = health.join();

    // Remote objects against resources.
    let mut status: BTreeMap<String, Value> = BTreeMap::new();
    for api in world.apis.values() {
        if let Ok(list) = api.list(&ListParams::default()).await {
            for o in list.items {
                status.insert(
                    o.metadata.name.clone().unwrap_or_default(),
                    o.data["status"].clone(),
                );
            }
        }
    }
    let report = blocking(|| remote_report(&sb, &status, &resources, &live, &doomed));
    // The catalog tokens the live CatalogAclTokens hold (their Secrets).
    for (_, name) in resources
        .iter()
        .filter(|(k, n)| *k == Kind::CatalogAclToken && live.contains(n))
    {
        use base64::Engine;
        let token = blocking(|| sb.get_json("secret", name))
            .and_then(|s| s["data"]["token"].as_str().map(str::to_string))
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .map(|b| String::from_utf8_lossy(&b).to_string())
            .unwrap_or_default();
        if !token.is_empty() {
            secrets_known.push(("a CatalogAclToken's catalog token", token));
        }
    }
    // The TOTP seeds the live enrollments' entities hold now.
    let method_id = blocking(|| sb.get_json("totpmethod", ENROLL_METHOD))
        .and_then(|o| o["status"]["remoteId"].as_str().map(str::to_string))
        .unwrap_or_default();
    for (_, name) in resources
        .iter()
        .filter(|(k, n)| *k == Kind::TotpEnrollment && live.contains(n))
    {
        if let Some(seed) =
            blocking(|| totp_seed(&sb, &ENTITIES.get().expect("seeded")[name], &method_id))
        {
            secrets_known.push(("an enrolled entity's TOTP seed", seed));
        }
    }
    // The directory passwords of the AdRoles' and library sets' accounts as they are now
    // (rotated by the service, kept in the roles' and check-outs' Secrets): never in logs,
    // Events or status either.
    for (kind, name) in &resources {
        let accounts = match kind {
            Kind::AdRole => vec![format!("{name}@example.com")],
            Kind::AdLibrarySet => vec![
                format!("{name}@example.com"),
                format!("{name}-b@example.com"),
            ],
            _ => continue,
        };
        for account in accounts {
            let pw = blocking(|| ad_password(&sb, &account));
            if !pw.is_empty() {
                secrets_known.push(("a directory account's password", pw));
            }
        }
    }
    let mut ops = Arc::try_unwrap(ops)
        .ok()
        .expect("ops")
        .into_inner()
        .unwrap();
    if let Some(op) = ops.current.take() {
        ops.logs.push(op.stop());
    }
    let events = blocking(|| sb.kubectl_ok(&["get", "events", "-A", "-o", "json"]));
    let mut statuses = String::new();
    for k in KINDS {
        statuses.push_str(&blocking(|| {
            sb.kubectl_ok(&["get", &k.api_resource().plural, "-A", "-o", "json"])
        }));
    }
    statuses.push_str(&blocking(|| {
        sb.kubectl_ok(&[
            "get",
            "idpauthmethods,adengines,connections",
            "-A",
            "-o",
            "json",
        ])
    }));
    let logs = ops.logs.join("\n");

    println!("Results ({} operator runs)", ops.logs.len());
    for f in &fault_counts {
        println!("  faults while chaotic               {f}");
    }
    let total_expected: usize = expected.values().sum();
    let total_converged: usize = census.values().map(|c| c.0).sum();
    let total_left: usize = census.values().map(|c| c.2).sum();
    println!("  resources converged                {total_converged} / {total_expected}  (+ IdpAuthMethod, AdEngine, TotpMethod {ENROLL_METHOD}: {})", if blocking(|| idp_converged(&sb)) { "converged" } else { "NOT converged" });
    println!("  deleted resources still present    {total_left}");
    for (k, (c, l, gone)) in &census {
        println!(
            "    {:<18} converged {c}/{} (listed {l}), deleted but present {gone}",
            k.name(),
            expected[k]
        );
    }
    println!(
        "  remote duplicates                  {}",
        report.duplicates.len()
    );
    for d in report.duplicates.iter().take(20) {
        println!("    {d}");
    }
    println!("  lost deletions                     {}", report.lost.len());
    for d in report.lost.iter().take(20) {
        println!("    {d}");
    }
    println!(
        "  live resources without remote obj  {}",
        report.missing.len()
    );
    for d in report.missing.iter().take(20) {
        println!("    {d}");
    }
    let mut leaks = Vec::new();
    for (what, value) in &secrets_known {
        for (place, text) in [
            ("operator logs", &logs),
            ("Events", &events),
            ("status", &statuses),
        ] {
            let hits = text.matches(value.as_str()).count();
            if hits > 0 {
                leaks.push(format!("{what} in {place} ({hits}×)"));
            }
        }
    }
    println!("  secret values in logs/Events/status {}", leaks.len());
    for l in &leaks {
        println!("    {l}");
    }
    match converged_after {
        Some(d) => println!(
            "  converged after the last fault      {:.1} s",
            d.as_secs_f64()
        ),
        None => println!(
            "  NOT converged {} s after the last fault",
            CONVERGE_TIMEOUT.as_secs()
        ),
    }
    println!(
        "  operator log lines searched         {}",
        logs.lines().count()
    );
    println!("  kinds left out:");
    for (k, why) in LEFT_OUT {
        println!("    {k}: {why}");
    }
    if std::env::var_os("QUARTET_KEEP_LOGS").is_some() {
        let dir = std::env::temp_dir().join(format!("quartet-chaos-{seed}"));
        let _ = std::fs::create_dir_all(&dir);
        for (i, l) in ops.logs.iter().enumerate() {
            let _ = std::fs::write(dir.join(format!("operator-{i}.log")), l);
        }
        println!("  operator logs kept in {}", dir.display());
    }
}

/// The one-per-mount resources (the IdpAuthMethod, the AdEngine) and the TotpEnrollments' method.
fn idp_converged(sb: &Sandbox) -> bool {
    [
        ("idpauthmethod", "chaos-idp"),
        ("adengine", "chaos-ad"),
        ("totpmethod", ENROLL_METHOD),
    ]
    .iter()
    .all(|(kind, name)| {
        sb.get_json(kind, name).is_some_and(|o| {
            condition_is(&o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    })
}

/// Wait until everything is converged or `max` passed (the chaos goes on meanwhile).
async fn settle(
    world: &World,
    live: &BTreeSet<String>,
    expected: &BTreeMap<Kind, usize>,
    max: Duration,
) {
    let t = Instant::now();
    while t.elapsed() < max && !world.all_converged(live, expected).await {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let census = world.census(live).await;
    let conv: usize = census.values().map(|c| c.0).sum();
    println!(
        "    after {:.1} s: {conv} converged",
        t.elapsed().as_secs_f64()
    );
}

#[derive(Default)]
struct RemoteReport {
    duplicates: Vec<String>,
    lost: Vec<String>,
    missing: Vec<String>,
}

fn secrets_keys(sb: &Sandbox, path: &str) -> Vec<String> {
    let (s, b) = sb.secrets("GET", &format!("{path}?list=true"), None);
    if s == 404 {
        return Vec::new();
    }
    assert_eq!(s, 200, "list {path}: {b}");
    b["data"]["keys"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn remote_report(
    sb: &Sandbox,
    status: &BTreeMap<String, Value>,
    resources: &[(Kind, String)],
    live: &BTreeSet<String>,
    doomed: &BTreeSet<String>,
) -> RemoteReport {
    let mut r = RemoteReport::default();
    for kind in KINDS {
        let ours: BTreeSet<&String> = resources
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n)
            .collect();
        // remote name → remote ids
        let mut remote: BTreeMap<String, Vec<String>> = BTreeMap::new();
        match kind {
            Kind::SecretsPolicy
            | Kind::IdpUser
            | Kind::IdpGroup
            | Kind::TransformAlphabet
            | Kind::TransformTemplate
            | Kind::TransformStore
            | Kind::Transformation
            | Kind::TransformRole => {
                let path = match kind {
                    Kind::SecretsPolicy => "/v1/sys/policies/acl",
                    Kind::IdpUser => "/v1/auth/idp/users",
                    Kind::IdpGroup => "/v1/auth/idp/groups",
                    Kind::TransformTemplate => "/v1/transform/template",
                    Kind::TransformStore => "/v1/transform/stores",
                    Kind::Transformation => "/v1/transform/transformation",
                    Kind::TransformRole => "/v1/transform/role",
                    _ => "/v1/transform/alphabet",
                };
                for k in secrets_keys(sb, path) {
                    remote.entry(k.clone()).or_default().push(k);
                }
            }
            Kind::TotpMethod => {
                for id in secrets_keys(sb, "/v1/identity/mfa/method/totp") {
                    let (_, b) =
                        sb.secrets("GET", &format!("/v1/identity/mfa/method/totp/{id}"), None);
                    let issuer = b["data"]["issuer"].as_str().unwrap_or("").to_string();
                    remote.entry(issuer).or_default().push(id);
                }
            }
            Kind::AdRole | Kind::AdLibrarySet => {
                let what = if kind == Kind::AdRole {
                    "roles"
                } else {
                    "library"
                };
                for k in secrets_keys(sb, &format!("/v1/ad/{what}")) {
                    remote
                        .entry(k.clone())
                        .or_default()
                        .push(format!("ad/{what}/{k}"));
                }
            }
            // A deleted NoCodeModule is disabled (the service has no delete): an enabled one of a
            // deleted resource is a lost deletion.
            Kind::NoCodeModule => {
                for m in sb.ws_list(&format!(
                    "/organizations/{}/registry-modules",
                    support::workspaces::ORG
                )) {
                    let name = m["attributes"]["name"].as_str().unwrap_or("").to_string();
                    let ids = m["relationships"]["no-code-modules"]["data"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    for id in ids.iter().filter_map(|d| d["id"].as_str()) {
                        let (_, b) = sb.ws_api("GET", &format!("/no-code-modules/{id}"), None);
                        let enabled = b["data"]["attributes"]["enabled"] == json!(true);
                        if enabled || !doomed.contains(&name) {
                            remote.entry(name.clone()).or_default().push(id.to_string());
                        }
                    }
                }
            }
            // Login tokens of the bench's auth method, by service identity (= resource name).
            Kind::CatalogAclToken => {
                let (s, b) = http(
                    "GET",
                    &format!(
                        "{}/v1/acl/tokens?authmethod={CATALOG_AUTH}",
                        sb.url("catalog")
                    ),
                    Some(("X-Catalog-Token", &sb.root_token)),
                    None,
                );
                assert_eq!(s, 200, "catalog tokens: {b}");
                for t in b.as_array().cloned().unwrap_or_default() {
                    let name = t["ServiceIdentities"][0]["ServiceName"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    let id = t["AccessorID"].as_str().unwrap_or("").to_string();
                    remote.entry(name).or_default().push(id);
                }
            }
            // An entity's secret for the method: one at most, so only lost deletions and missing
            // secrets can show.
            Kind::TotpEnrollment => {
                let method = sb
                    .get_json("totpmethod", ENROLL_METHOD)
                    .and_then(|o| o["status"]["remoteId"].as_str().map(str::to_string))
                    .unwrap_or_default();
                for (name, entity) in ENTITIES.get().expect("seeded") {
                    if totp_seed(sb, entity, &method).is_some() {
                        remote
                            .entry(name.clone())
                            .or_default()
                            .push(format!("{method}/{entity}"));
                    }
                }
            }
            // The accounts borrowed from set j belong to check-out j. A deleted check-out's set is
            // deleted with it, which the service refuses while an account is borrowed: a set
            // left with borrowed accounts is a lost deletion.
            Kind::AdCheckout => {
                for set in secrets_keys(sb, "/v1/ad/library") {
                    if !set.starts_with("chaos-adlib-") {
                        continue;
                    }
                    let (s, b) = sb.secrets("GET", &format!("/v1/ad/library/{set}/status"), None);
                    assert_eq!(s, 200, "set status {set}: {b}");
                    for (account, st) in b["data"].as_object().cloned().unwrap_or_default() {
                        if st["available"] == json!(false) {
                            remote
                                .entry(partner(&set, "adlib", "adco"))
                                .or_default()
                                .push(account);
                        }
                    }
                }
            }
            // The runs of workspace j that name resource j: any run of a live one (more than one
            // is a duplicate), a run still going of a deleted one (a lost deletion: deletion
            // discards or cancels it).
            Kind::WorkspaceRun => {
                for (ws, id) in RUN_WORKSPACES.get().expect("seeded") {
                    let name = partner(ws, "runws", "run");
                    for run in sb.ws_list(&format!("/workspaces/{id}/runs")) {
                        let message = run["attributes"]["message"].as_str().unwrap_or("");
                        if !message.contains(&format!("WorkspaceRun default/{name} ")) {
                            continue;
                        }
                        let state = run["attributes"]["status"].as_str().unwrap_or("");
                        let final_ = quartet::kinds::workspaces::run::is_final(state);
                        if !doomed.contains(&name) || !final_ {
                            remote
                                .entry(name.clone())
                                .or_default()
                                .push(run["id"].as_str().unwrap_or("").to_string());
                        }
                    }
                }
            }
            // A gate owns nothing: what counts is the promotes the scheduler carried out (answered
            // 2xx, or processed with the answer lost) on job j's deployment: exactly one for a
            // live gate, more is a control sent twice. Deleted gates are not looked at.
            Kind::DeploymentGate => {
                let (reqs, _) = sb.requests("scheduler", 0);
                for (job, dep) in GATE_DEPLOYMENTS.get().expect("seeded") {
                    let name = partner(job, "job", "gate");
                    if doomed.contains(&name) {
                        continue;
                    }
                    let path = format!("/v1/deployment/promote/{dep}");
                    for _ in reqs
                        .iter()
                        .filter(|(m, p, st)| m == "POST" && *p == path && (200..300).contains(st))
                    {
                        remote.entry(name.clone()).or_default().push(dep.clone());
                    }
                }
            }
            Kind::Workspace | Kind::NoCodeWorkspace => {
                let prefix = format!("chaos-{}-", kind.short());
                for w in sb.ws_list(&format!(
                    "/organizations/{}/workspaces",
                    support::workspaces::ORG
                )) {
                    let name = w["attributes"]["name"].as_str().unwrap_or("").to_string();
                    if !name.starts_with(&prefix) {
                        continue;
                    }
                    remote
                        .entry(name)
                        .or_default()
                        .push(w["id"].as_str().unwrap_or("").to_string());
                }
            }
        }
        for (name, ids) in &remote {
            if !name.starts_with("chaos-") {
                continue;
            }
            if !ours.contains(name) {
                r.duplicates.push(format!(
                    "{} {name}: in the service, no resource of that name",
                    kind.name()
                ));
            } else if doomed.contains(name) {
                r.lost
                    .push(format!("{} {name} ({})", kind.name(), ids.join(", ")));
            } else {
                if ids.len() > 1 {
                    r.duplicates.push(format!(
                        "{} {name}: {} remote objects ({})",
                        kind.name(),
                        ids.len(),
                        ids.join(", ")
                    ));
                }
                let st = status.get(name).cloned().unwrap_or(Value::Null);
                let id = if kind == Kind::AdCheckout {
                    st["serviceAccountName"].as_str()
                } else if kind == Kind::DeploymentGate {
                    st["deploymentId"].as_str()
                } else {
                    st["remoteId"].as_str().or(st["accessorId"].as_str())
                }
                .unwrap_or("");
                if !ids.iter().any(|i| i == id) {
                    r.duplicates.push(format!(
                        "{} {name}: status remoteId {id:?} is not the remote object ({})",
                        kind.name(),
                        ids.join(", ")
                    ));
                }
            }
        }
        for name in ours.iter().filter(|n| live.contains(**n)) {
            if !remote.contains_key(*name) {
                r.missing.push(format!("{} {name}", kind.name()));
            }
        }
    }
    r
}
