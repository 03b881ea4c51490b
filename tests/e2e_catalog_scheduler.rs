//! CatalogAclBootstrap and DeploymentGate end to end: the real `quartet` binary (`quartet
//! sandbox --kubeconfig` and `quartet run`, or `quartet dev`), the real kubectl, and the
//! catalog and scheduler read over HTTP in the test.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use support::catalog::*;
use support::*;

const WAIT: Duration = Duration::from_secs(60);

/// A sandbox with the CRDs, Connections `catalog` and `scheduler` (root token) and an operator
/// resyncing every `resync`.
fn env(resync: &str) -> (Sandbox, Operator) {
    env_with(resync, &[])
}

/// [`env`] with more flags of `quartet run`.
fn env_with(resync: &str, extra: &[&str]) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    for service in ["catalog", "scheduler"] {
        sb.apply_ok(&format!(
            "apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: {service}, namespace: default}}\n\
             spec: {{service: {service}, address: \"{}\", tokenSecretRef: {{name: secrets-token, key: token}}, timeoutSeconds: 10}}\n",
            sb.url(service)
        ));
    }
    let op = Operator::start_with(&sb, resync, extra);
    (sb, op)
}

fn secret_key(sb: &Sandbox, name: &str, key: &str) -> Option<String> {
    let s = sb.get_json("secret", name)?;
    let b64 = s["data"][key].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(bytes).ok()
}

fn ready_reason(obj: &Value) -> String {
    condition(obj, "Ready")
        .and_then(|c| c["reason"].as_str())
        .unwrap_or("")
        .to_string()
}

fn count(reqs: &[(String, String, u16)], method: &str, prefix: &str) -> usize {
    reqs.iter()
        .filter(|(m, p, _)| m == method && p.starts_with(prefix))
        .count()
}

fn bootstrap_yaml(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: catalog.quartet.dev/v1alpha1\nkind: CatalogAclBootstrap\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  secretName: {name}-token\n{extra}"
    )
}

// ---- CatalogAclBootstrap ----

#[test]
fn bootstrap_writes_the_secret_before_the_call_so_a_lost_response_loses_nothing_and_a_second_bootstrap_ends_bootstrapped_elsewhere(
) {
    let (sb, op) = env("3s");
    let catalog = sb.url("catalog").to_string();
    // The bootstrap is processed, then its response is dropped.
    http(
        "POST",
        &format!("{catalog}/_sandbox/faults"),
        None,
        Some(json!({"method": "PUT", "path": "/v1/acl/bootstrap", "after": true, "count": 1})),
    );
    let (_, since) = sb.requests("catalog", 0);
    sb.apply_ok(&bootstrap_yaml("first", ""));
    let obj = wait_for("first bootstrap Ready", WAIT, || {
        sb.get_json("catalogaclbootstrap", "first")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    assert_eq!(ready_reason(&obj), "Bootstrapped", "{obj}");
    let token = secret_key(&sb, "first-token", "token").expect("token in the Secret");
    let (status, me) = http(
        "GET",
        &format!("{catalog}/v1/acl/token/self"),
        Some(("X-Catalog-Token", &token)),
        None,
    );
    assert_eq!(status, 200, "the Secret's token works: {me}");
    assert_eq!(me["Policies"][0]["Name"], "global-management");
    let accessor = wait_for("accessorId in the Secret", WAIT, || {
        secret_key(&sb, "first-token", "accessorId")
    });
    assert_eq!(me["AccessorID"], accessor);
    assert_eq!(obj["status"]["accessorId"], accessor);
    let (reqs, _) = sb.requests("catalog", since);
    let first_puts = count(&reqs, "PUT", "/v1/acl/bootstrap");
    assert!(first_puts >= 1, "{reqs:?}");
    // The Secret is not owned by the resource (deleting it keeps the management token).
    let s = sb.get_json("secret", "first-token").unwrap();
    assert!(s["metadata"]["ownerReferences"].is_null(), "{s}");

    // A second bootstrap on the same catalog: elsewhere, with the warning and an Event.
    sb.apply_ok(&bootstrap_yaml("second", ""));
    let obj = wait_for("second bootstrap refused", WAIT, || {
        sb.get_json("catalogaclbootstrap", "second")
            .filter(|o| ready_reason(o) == "BootstrappedElsewhere")
    });
    assert!(condition_is(&obj, "Ready", "False"));
    let msg = condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("potentially compromised"), "{msg}");
    assert!(msg.contains("reset index"), "{msg}");
    let events = sb.wait_events(&["BootstrappedElsewhere"]);
    // No retry loop: several resyncs later, no further bootstrap call.
    let (reqs, mark) = sb.requests("catalog", since);
    let puts = count(&reqs, "PUT", "/v1/acl/bootstrap");
    std::thread::sleep(Duration::from_secs(8));
    let (later, _) = sb.requests("catalog", mark);
    assert_eq!(count(&later, "PUT", "/v1/acl/bootstrap"), 0, "{later:?}");
    assert!(puts <= first_puts + 1, "{reqs:?}");
    // The management token never reaches logs, Events or status.
    let statuses = sb.kubectl_ok(&["get", "catalogaclbootstraps", "-o", "json"]);
    for text in [op.log(), sb.log(), events, statuses] {
        assert!(!text.contains(&token), "the management token leaked");
    }
    // Deleting the first resource keeps its Secret.
    sb.kubectl_ok(&[
        "delete",
        "catalogaclbootstrap",
        "first",
        "--wait=true",
        "--timeout=30s",
    ]);
    assert!(sb.get_json("secret", "first-token").is_some());
}

#[test]
fn replication_status_of_an_unhealthy_secondary_shows_healthy_false() {
    let (sb, op) = env("2s");
    let catalog = sb.url("catalog").to_string();
    let config = format!("{catalog}/_sandbox/catalog/config");
    http(
        "PUT",
        &config,
        None,
        Some(json!({"SecondaryDatacenter": "dc2", "TokenReplication": true})),
    );
    std::thread::sleep(Duration::from_millis(1100));
    http(
        "PUT",
        &config,
        None,
        Some(json!({"ReplicationError": "failed to sync remote tokens"})),
    );
    sb.apply_ok(&bootstrap_yaml(
        "rep",
        "  replicationDatacenters: [dc2]\n  secretPolicy: Owned\n",
    ));
    let obj = wait_for("unhealthy replication in status", WAIT, || {
        sb.get_json("catalogaclbootstrap", "rep")
            .filter(|o| o["status"]["replication"][0]["healthy"] == false)
    });
    let r = &obj["status"]["replication"][0];
    assert_eq!(r["datacenter"], "dc2");
    assert_eq!(r["lastErrorMessage"], "failed to sync remote tokens");
    assert_eq!(r["replicationType"], "tokens");
    assert!(condition_is(&obj, "ReplicationHealthy", "False"), "{obj}");
    assert!(condition_is(&obj, "Ready", "True"), "{obj}");
    // A metric per datacenter.
    let addr = op.metrics_addr();
    let metrics = reqwest::blocking::get(format!("http://{addr}/metrics"))
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics.contains(r#"resource="default/rep",datacenter="dc2",measure="healthy"} 0"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"datacenter="dc2",measure="seconds_since_last_success"}"#),
        "{metrics}"
    );
    // The primary moves on while dc2 fails: the index lag (primary's policy list index minus
    // dc2's ReplicatedIndex) grows past zero.
    http(
        "POST",
        &format!("{catalog}/_sandbox/catalog/policies"),
        None,
        Some(json!({"Name": "written-during-the-outage", "Rules": "acl = \"read\""})),
    );
    let lag_line = wait_for("a positive index lag", WAIT, || {
        let text = reqwest::blocking::get(format!("http://{addr}/metrics"))
            .ok()?
            .text()
            .ok()?;
        text.lines()
            .find(|l| l.contains(r#"datacenter="dc2",measure="index_lag"}"#))
            .filter(|l| {
                l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v > 0.0)
            })
            .map(str::to_string)
    });
    assert!(
        lag_line.starts_with("quartet_catalog_acl_replication"),
        "{lag_line}"
    );
    // Owned: the Secret names the resource as its owner.
    let s = sb.get_json("secret", "rep-token").unwrap();
    assert_eq!(s["metadata"]["ownerReferences"][0]["name"], "rep");
    // Recovery: the error stays reported, but success is later: healthy.
    http("PUT", &config, None, Some(json!({"ReplicationError": ""})));
    let obj = wait_for("healthy replication in status", WAIT, || {
        sb.get_json("catalogaclbootstrap", "rep")
            .filter(|o| o["status"]["replication"][0]["healthy"] == true)
    });
    assert_eq!(
        obj["status"]["replication"][0]["lastErrorMessage"],
        "failed to sync remote tokens"
    );
    assert!(condition_is(&obj, "ReplicationHealthy", "True"), "{obj}");
    // Caught up after the recovery: no lag.
    wait_for("the index lag back to zero", WAIT, || {
        let text = reqwest::blocking::get(format!("http://{addr}/metrics"))
            .ok()?
            .text()
            .ok()?;
        text.contains(r#"datacenter="dc2",measure="index_lag"} 0"#)
            .then_some(())
    });
}

// ---- CatalogAclToken ----

fn token_works(catalog: &str, token: &str) -> bool {
    http(
        "GET",
        &format!("{catalog}/v1/acl/token/self"),
        Some(("X-Catalog-Token", token)),
        None,
    )
    .0 == 200
}

#[test]
fn acl_token_logs_in_rotates_and_is_logged_out_on_delete() {
    let changes = tempfile::NamedTempFile::new().unwrap();
    let (sb, op) = env_with("3s", &["--change-log", changes.path().to_str().unwrap()]);
    let catalog = sb.url("catalog").to_string();
    trust_service_accounts(&catalog);
    let jwt = sa_jwt("default", "web");
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: web-jwt, namespace: default}}\nstringData: {{token: {jwt}}}\n---\n\
         apiVersion: catalog.quartet.dev/v1alpha1\nkind: CatalogAclToken\nmetadata: {{name: web, namespace: default}}\n\
         spec:\n  authMethod: k8s\n  meta: {{app: web}}\n  bearerTokenSecretRef: {{name: web-jwt, key: token}}\n  rotationInterval: 6s\n"
    ));
    let obj = wait_for("token Ready", WAIT, || {
        sb.get_json("catalogacltoken", "web")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    let first = secret_key(&sb, "web", "token").expect("token");
    let (status, me) = http(
        "GET",
        &format!("{catalog}/v1/acl/token/self"),
        Some(("X-Catalog-Token", &first)),
        None,
    );
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["AuthMethod"], "k8s");
    assert_eq!(me["ServiceIdentities"][0]["ServiceName"], "web");
    assert_eq!(obj["status"]["accessorId"], me["AccessorID"]);
    let s = sb.get_json("secret", "web").unwrap();
    assert_eq!(s["metadata"]["ownerReferences"][0]["name"], "web");
    // Rotation: a new token in the Secret, the old one logged out.
    let second = wait_for("rotated token", WAIT, || {
        secret_key(&sb, "web", "token").filter(|t| *t != first)
    });
    wait_for("previous token logged out", WAIT, || {
        (!token_works(&catalog, &first) && secret_key(&sb, "web", "previousToken").is_none())
            .then_some(())
    });
    let current = secret_key(&sb, "web", "token").unwrap();
    assert!(current == second || current != first);
    assert!(token_works(&catalog, &current));
    // The change log: the first login is a create, the rotation's login and the logout of the
    // token it replaced are a `rotation`, and no token is in any record.
    let records: Vec<Value> = support::changes::records(changes.path())
        .into_iter()
        .filter(|r| r["resource"]["name"] == "web")
        .collect();
    let of = |trigger: &str, path: &str| {
        records
            .iter()
            .filter(|r| r["trigger"] == trigger && r["path"] == path && r["status"] == 200)
            .count()
    };
    assert_eq!(of("create", "/v1/acl/login"), 1, "{records:#?}");
    assert!(of("rotation", "/v1/acl/login") >= 1, "{records:#?}");
    assert!(of("rotation", "/v1/acl/logout") >= 1, "{records:#?}");
    assert!(
        records.iter().all(|r| r["trigger"] != "step"),
        "{records:#?}"
    );
    let text = std::fs::read_to_string(changes.path()).unwrap();
    for secret in [&jwt, &first, &second, &current] {
        assert!(
            !text.contains(secret.as_str()),
            "a token is in the change log"
        );
    }
    // No token in logs, Events or status.
    let events = sb.kubectl_ok(&["get", "events", "-o", "json"]);
    let status = sb.get_json("catalogacltoken", "web").unwrap()["status"].to_string();
    for text in [sb.log(), op.log(), events, status] {
        for secret in [&jwt, &first, &current] {
            assert!(!text.contains(secret.as_str()), "a token leaked");
        }
    }
    // A token the catalog no longer accepts is replaced at the next pass.
    let (st, _) = http(
        "POST",
        &format!("{catalog}/v1/acl/logout"),
        Some(("X-Catalog-Token", &current)),
        None,
    );
    assert_eq!(st, 200);
    let current = wait_for("a new token after the refusal", WAIT, || {
        secret_key(&sb, "web", "token").filter(|t| *t != current && token_works(&catalog, t))
    });
    // That login repaired what changed outside.
    assert!(
        support::changes::records(changes.path())
            .iter()
            .any(|r| r["resource"]["name"] == "web"
                && r["trigger"] == "drift-repair"
                && r["path"] == "/v1/acl/login"),
        "no drift-repair login recorded"
    );
    // Delete (deletionPolicy Delete): the token stops working.
    sb.kubectl_ok(&[
        "delete",
        "catalogacltoken",
        "web",
        "--wait=true",
        "--timeout=30s",
    ]);
    let last = current;
    wait_for("logged out on delete", WAIT, || {
        (!token_works(&catalog, &last)).then_some(())
    });
}

/// A token just got is not asked about again by the pass its own write wakes: becoming Ready
/// costs one login and no `token/self`. A Secret changed by someone else is asked about (a token
/// the catalog refuses is replaced), and so is the token at a reconcile-now request, however
/// new it is.
#[test]
fn a_new_token_costs_one_login_and_is_checked_once_its_secret_changes_or_a_reconcile_is_asked() {
    let (sb, _op) = env("1h");
    let catalog = sb.url("catalog").to_string();
    trust_service_accounts(&catalog);
    let jwt = sa_jwt("default", "web");
    // The Connection's own check of its token is a `token/self` too, refused here (its token is
    // none of the catalog's): only the accepted ones are the resource's checks of its token.
    let accepted = |reqs: &[(String, String, u16)]| {
        reqs.iter()
            .filter(|(m, p, s)| m == "GET" && p == "/v1/acl/token/self" && *s == 200)
            .count()
    };
    let (_, since) = sb.requests("catalog", 0);
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: web-jwt, namespace: default}}\nstringData: {{token: {jwt}}}\n---\n\
         apiVersion: catalog.quartet.dev/v1alpha1\nkind: CatalogAclToken\nmetadata: {{name: web, namespace: default}}\n\
         spec:\n  authMethod: k8s\n  bearerTokenSecretRef: {{name: web-jwt, key: token}}\n"
    ));
    wait_for("token Ready", WAIT, || {
        sb.get_json("catalogacltoken", "web")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    // The passes that the Secret and status writes wake come within milliseconds.
    std::thread::sleep(Duration::from_secs(2));
    let (reqs, mark) = sb.requests("catalog", since);
    assert_eq!(count(&reqs, "POST", "/v1/acl/login"), 1, "{reqs:?}");
    assert_eq!(accepted(&reqs), 0, "{reqs:?}");

    // Someone else writes the Secret: the token in it is asked about, refused, replaced.
    let first = secret_key(&sb, "web", "token").expect("token");
    sb.kubectl_ok(&[
        "patch",
        "secret",
        "web",
        "--type=merge",
        "-p",
        r#"{"stringData":{"token":"not-a-token"}}"#,
    ]);
    let second = wait_for("a new token after the edit", WAIT, || {
        secret_key(&sb, "web", "token").filter(|t| *t != first && t != "not-a-token")
    });
    let (reqs, mark) = sb.requests("catalog", mark);
    assert!(count(&reqs, "GET", "/v1/acl/token/self") >= 1, "{reqs:?}");
    assert_eq!(count(&reqs, "POST", "/v1/acl/login"), 1, "{reqs:?}");
    sb.wait_events(&["TokenRefused"]);

    // A reconcile-now request right after that login: the token is asked about all the same.
    std::thread::sleep(Duration::from_secs(1));
    let (_, mark) = sb.requests("catalog", mark);
    sb.kubectl_ok(&[
        "annotate",
        "catalogacltoken",
        "web",
        "reconcile.quartet.dev/requestedAt=now-1",
        "--overwrite",
    ]);
    wait_for("the request handled", WAIT, || {
        sb.get_json("catalogacltoken", "web")
            .filter(|o| o["status"]["lastHandledReconcileAt"] == "now-1")
    });
    let (reqs, _) = sb.requests("catalog", mark);
    assert!(accepted(&reqs) >= 1, "{reqs:?}");
    assert_eq!(count(&reqs, "POST", "/v1/acl/login"), 0, "{reqs:?}");
    assert_eq!(
        secret_key(&sb, "web", "token").as_deref(),
        Some(second.as_str())
    );
    assert!(token_works(&catalog, &second));
}

// ---- DeploymentGate ----

struct Sched<'a> {
    sb: &'a Sandbox,
    url: String,
}

impl<'a> Sched<'a> {
    /// Job `api` (the service's own progress deadline off, auto-revert on) at version 0, all
    /// healthy, then version 1, whose deployment (returned) waits on the gate.
    fn second_deployment_of_api(&self) -> String {
        let job = |task: &str| {
            json!({"ID": "api", "TaskGroups": [{"Name": "api", "Count": 1, "AutoRevert": true,
                   "ProgressDeadline": 0, "Tasks": [task]}]})
        };
        let v0 = self.job(job("v0"));
        self.all_healthy(&v0);
        self.job(job("v1"))
    }

    fn new(sb: &'a Sandbox) -> Self {
        Self {
            sb,
            url: sb.url("scheduler").to_string(),
        }
    }
    fn admin(&self, path: &str, body: Value) -> Value {
        let (s, v) = http("POST", &format!("{}{path}", self.url), None, Some(body));
        assert!((200..300).contains(&s), "admin {path}: {s} {v}");
        v
    }
    /// Register a job version; returns its deployment ID.
    fn job(&self, body: Value) -> String {
        self.admin("/_sandbox/scheduler/jobs", body)["DeploymentID"]
            .as_str()
            .unwrap()
            .to_string()
    }
    fn all_healthy(&self, dep: &str) {
        self.admin(
            &format!("/_sandbox/scheduler/deployments/{dep}/health"),
            json!({"Healthy": true}),
        );
    }
    fn get(&self, path: &str) -> Value {
        let (s, v) = http(
            "GET",
            &format!("{}{path}", self.url),
            Some(("X-Nomad-Token", &self.sb.root_token)),
            None,
        );
        assert_eq!(s, 200, "{path}: {v}");
        v
    }
    fn deployment(&self, id: &str) -> Value {
        self.get(&format!("/v1/deployment/{id}"))
    }
    fn allocs(&self, id: &str) -> Vec<Value> {
        self.get(&format!("/v1/deployment/allocations/{id}"))
            .as_array()
            .unwrap()
            .clone()
    }
}

/// Accessor ids of the auth method's tokens whose login marker names the resource `uid`.
fn tokens_of(sb: &Sandbox, uid: &str) -> Vec<String> {
    let (s, list) = http(
        "GET",
        &format!("{}/v1/acl/tokens?authmethod=k8s", sb.url("catalog")),
        Some(("X-Catalog-Token", &sb.root_token)),
        None,
    );
    assert_eq!(s, 200, "{list}");
    list.as_array()
        .unwrap()
        .iter()
        .filter(|t| t["Description"].as_str().is_some_and(|d| d.contains(uid)))
        .map(|t| t["AccessorID"].as_str().unwrap().to_string())
        .collect()
}

/// `n` CatalogAclTokens `name-0..` logging in with one ServiceAccount JWT, all Ready: their uids.
fn ready_tokens(sb: &Sandbox, name: &str, n: usize) -> Vec<String> {
    let jwt = sa_jwt("default", "api");
    let mut manifest = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-jwt, namespace: default}}\nstringData: {{token: {jwt}}}\n"
    );
    for i in 0..n {
        manifest.push_str(&format!(
            "---\napiVersion: catalog.quartet.dev/v1alpha1\nkind: CatalogAclToken\nmetadata: {{name: {name}-{i}, namespace: default}}\n\
             spec:\n  authMethod: k8s\n  bearerTokenSecretRef: {{name: {name}-jwt, key: token}}\n  rotationInterval: 1h\n"
        ));
    }
    sb.apply_ok(&manifest);
    (0..n)
        .map(|i| {
            let obj = wait_for("token Ready", WAIT, || {
                sb.get_json("catalogacltoken", &format!("{name}-{i}"))
                    .filter(|o| condition_is(o, "Ready", "True"))
            });
            obj["metadata"]["uid"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Deleting many tokens at once (a namespace deleted, a GitOps prune) logs each out once and
/// lists the auth method's tokens for strays only where a lost answer may have left one: not
/// once per token, which at N tokens would be N listings of N.
#[test]
fn tokens_deleted_together_are_logged_out_without_a_listing_of_every_token_each() {
    let (sb, op) = env("1h");
    logins_on_root_token(&sb);
    let uids = ready_tokens(&sb, "many", 6);
    let (_, since) = sb.requests("catalog", 0);
    sb.kubectl_ok(&["delete", "catalogacltoken", "--all", "--wait=true"]);
    // The operator's calls only: the checks below list tokens too.
    let (reqs, _) = sb.requests("catalog", since);
    for uid in &uids {
        assert!(tokens_of(&sb, uid).is_empty(), "every token logged out");
    }
    assert_eq!(count(&reqs, "POST", "/v1/acl/logout"), 6, "{reqs:?}");
    assert_eq!(
        count(&reqs, "GET", "/v1/acl/tokens"),
        0,
        "this process listed the auth method's tokens at the first login and lost no answer since: {reqs:?}"
    );
    // The garbage collector's removal of each owned Secret wakes its resource: the copy the
    // cache holds then is older than the finalizer's removal, and gets no second cleanup.
    let log = op.log();
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("reconcile failed"))
        .collect();
    assert!(
        failed.is_empty(),
        "a deletion failed or was cleaned up twice: {failed:#?}"
    );
}

/// A token whose Secret is deleted by hand is held by nobody once the resource logs in again:
/// it is deleted from the catalog then, not left until it expires.
#[test]
fn a_token_whose_secret_was_deleted_by_hand_is_removed_from_the_catalog_after_the_next_login() {
    let (sb, _op) = env("1h");
    logins_on_root_token(&sb);
    let uid = ready_tokens(&sb, "lost", 1).remove(0);
    let first = sb.get_json("catalogacltoken", "lost-0").unwrap()["status"]["accessorId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(tokens_of(&sb, &uid), vec![first.clone()]);
    sb.kubectl_ok(&["delete", "secret", "lost-0"]);
    let second = wait_for("a new login", WAIT, || {
        let obj = sb.get_json("catalogacltoken", "lost-0")?;
        let a = obj["status"]["accessorId"].as_str()?.to_string();
        (a != first && condition_is(&obj, "Ready", "True")).then_some(a)
    });
    assert!(secret_key(&sb, "lost-0", "token").is_some(), "a new Secret");
    wait_for("only the new token left", WAIT, || {
        (tokens_of(&sb, &uid) == vec![second.clone()]).then_some(())
    });
}

/// A login the catalog processed but whose answer was lost made a token nobody holds: the
/// operator finds it by its login marker and deletes it, so the resource has exactly one token,
/// and none once it is deleted.
#[test]
fn a_login_whose_response_was_lost_leaves_no_second_token_and_deletion_leaves_none() {
    let (sb, _op) = env("3s");
    let catalog = logins_on_root_token(&sb);
    // The first login is processed, then its response is dropped.
    http(
        "POST",
        &format!("{catalog}/_sandbox/faults"),
        None,
        Some(json!({"method": "POST", "path": "/v1/acl/login", "after": true, "count": 1})),
    );
    let (_, since) = sb.requests("catalog", 0);
    let jwt = sa_jwt("default", "api");
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: api-jwt, namespace: default}}\nstringData: {{token: {jwt}}}\n---\n\
         apiVersion: catalog.quartet.dev/v1alpha1\nkind: CatalogAclToken\nmetadata: {{name: api, namespace: default}}\n\
         spec:\n  authMethod: k8s\n  bearerTokenSecretRef: {{name: api-jwt, key: token}}\n  rotationInterval: 1h\n"
    ));
    let obj = wait_for("token Ready", WAIT, || {
        sb.get_json("catalogacltoken", "api")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    let uid = obj["metadata"]["uid"].as_str().unwrap().to_string();
    let (reqs, _) = sb.requests("catalog", since);
    assert!(
        count(&reqs, "POST", "/v1/acl/login") >= 2,
        "the lost login was retried"
    );
    let marked = || tokens_of(&sb, &uid);
    let left = wait_for("one token for the resource", WAIT, || {
        let m = marked();
        (m.len() == 1).then_some(m)
    });
    let obj = sb.get_json("catalogacltoken", "api").unwrap();
    assert_eq!(obj["status"]["accessorId"].as_str(), Some(left[0].as_str()));
    assert!(token_works(
        &catalog,
        &secret_key(&sb, "api", "token").unwrap()
    ));
    sb.kubectl_ok(&["delete", "catalogacltoken", "api", "--wait=true"]);
    wait_for("no token left after delete", WAIT, || {
        marked().is_empty().then_some(())
    });
}

fn gate(sb: &Sandbox, name: &str, spec: &str) {
    sb.apply_ok(&format!(
        "apiVersion: scheduler.quartet.dev/v1alpha1\nkind: DeploymentGate\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{spec}"
    ));
}

fn gate_obj(sb: &Sandbox, name: &str) -> Value {
    sb.get_json("deploymentgate", name).unwrap_or(Value::Null)
}

#[test]
fn canaries_are_promoted_automatically_once_healthy_with_exactly_one_promote() {
    let (sb, _op) = env("30s");
    let s = Sched::new(&sb);
    let job = |task: &str| {
        json!({"ID": "web", "TaskGroups": [{"Name": "web", "Count": 2, "Canary": 1,
               "MaxParallel": 2, "Tasks": [task]}]})
    };
    let v0 = s.job(job("v0"));
    s.all_healthy(&v0);
    let v1 = s.job(job("v1"));
    let (_, since) = sb.requests("scheduler", 0);
    gate(
        &sb,
        "web",
        "  jobId: web\n  promote: {policy: Auto, healthyFor: 1s}\n",
    );
    let obj = wait_for("gate waiting for canaries", WAIT, || {
        Some(gate_obj(&sb, "web")).filter(|o| ready_reason(o) == "WaitingForCanaries")
    });
    assert_eq!(obj["status"]["deploymentId"], v1.as_str());
    assert_eq!(obj["status"]["taskGroups"]["web"]["desiredCanaries"], 1);
    // Unhealthy canaries: the gate does not call promote.
    std::thread::sleep(Duration::from_secs(3));
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(
        count(&reqs, "POST", "/v1/deployment/promote/"),
        0,
        "{reqs:?}"
    );
    let canary = s.deployment(&v1)["TaskGroups"]["web"]["PlacedCanaries"][0]
        .as_str()
        .unwrap()
        .to_string();
    s.admin(
        &format!("/_sandbox/scheduler/allocations/{canary}/health"),
        json!({"Healthy": true}),
    );
    wait_for("promotion", WAIT, || {
        (s.deployment(&v1)["TaskGroups"]["web"]["Promoted"] == true).then_some(())
    });
    s.all_healthy(&v1);
    let obj = wait_for("gate Ready", WAIT, || {
        Some(gate_obj(&sb, "web")).filter(|o| condition_is(o, "Ready", "True"))
    });
    assert_eq!(obj["status"]["deploymentStatus"], "successful");
    assert_eq!(obj["status"]["lastAction"]["type"], "promote");
    assert!(!obj["status"]["lastAction"]["evalId"]
        .as_str()
        .unwrap()
        .is_empty());
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(
        count(&reqs, "POST", "/v1/deployment/promote/"),
        1,
        "{reqs:?}"
    );
}

/// Lengthening `progressDeadline` while a deployment runs gives it the new time at once: the
/// clock moves by the difference, and the deployment is not failed at the old deadline.
#[test]
fn a_longer_progress_deadline_moves_the_clock_of_the_deployment_under_way() {
    let (sb, _op) = env("30s");
    let s = Sched::new(&sb);
    let v1 = s.second_deployment_of_api();
    let (_, since) = sb.requests("scheduler", 0);
    gate(&sb, "api", "  jobId: api\n  progressDeadline: 15s\n");
    let clock = |o: &Value| {
        let st = &o["status"];
        (st["deploymentId"] == v1.as_str())
            .then(|| st["progressDeadlineAt"].as_str().map(str::to_string))
            .flatten()
    };
    let first = wait_for("clock started", WAIT, || clock(&gate_obj(&sb, "api")));
    gate(&sb, "api", "  jobId: api\n  progressDeadline: 10m\n");
    wait_for("clock moved", WAIT, || {
        clock(&gate_obj(&sb, "api")).filter(|at| *at > first)
    });
    // Past the old deadline: still running, never failed.
    let old = chrono::DateTime::parse_from_rfc3339(&first).unwrap();
    let left = (old.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_milliseconds();
    std::thread::sleep(Duration::from_millis(left.max(0) as u64 + 3000));
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(s.deployment(&v1)["Status"], "running", "{reqs:?}");
    assert_eq!(count(&reqs, "POST", "/v1/deployment/fail/"), 0, "{reqs:?}");
}

#[test]
fn a_deployment_past_the_gates_deadline_is_failed_and_rolled_back() {
    let (sb, _op) = env("30s");
    let s = Sched::new(&sb);
    // The service's own deadline is off: the gate's decides.
    let v1 = s.second_deployment_of_api();
    let (_, since) = sb.requests("scheduler", 0);
    gate(&sb, "api", "  jobId: api\n  progressDeadline: 4s\n");
    wait_for("deployment failed", WAIT, || {
        (s.deployment(&v1)["Status"] == "failed").then_some(())
    });
    let d = s.deployment(&v1);
    assert_eq!(
        d["StatusDescription"],
        "Deployment marked as failed - rolling back to job version 0"
    );
    let obj = wait_for("reverted version in status", WAIT, || {
        Some(gate_obj(&sb, "api")).filter(|o| o["status"]["revertedJobVersion"] == 0)
    });
    assert_eq!(obj["status"]["lastAction"]["type"], "fail");
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(
        count(&reqs, "POST", &format!("/v1/deployment/fail/{v1}")),
        1,
        "one fail for the late deployment: {reqs:?}"
    );
    // The rollback is a new job version (a copy of version 0) with its own deployment.
    let versions = s.get("/_sandbox/scheduler/jobs/default/api");
    assert_eq!(versions[0]["Version"], 2);
}

#[test]
fn a_new_fail_request_fails_the_running_deployment_once_and_rolls_back() {
    let (sb, _op) = env("30s");
    let s = Sched::new(&sb);
    let v1 = s.second_deployment_of_api();
    gate(&sb, "api", "  jobId: api\n");
    wait_for("gate sees the running deployment", WAIT, || {
        Some(gate_obj(&sb, "api")).filter(|o| o["status"]["deploymentStatus"] == "running")
    });
    let (_, since) = sb.requests("scheduler", 0);
    // What Argo CD's `fail` action sets.
    gate(&sb, "api", "  jobId: api\n  failRequest: \"fail-1\"\n");
    wait_for("deployment failed", WAIT, || {
        (s.deployment(&v1)["Status"] == "failed").then_some(())
    });
    let obj = wait_for("handled request in status", WAIT, || {
        Some(gate_obj(&sb, "api")).filter(|o| o["status"]["handledFailRequest"] == "fail-1")
    });
    assert_eq!(obj["status"]["lastAction"]["type"], "fail");
    assert_eq!(obj["status"]["revertedJobVersion"], 0);
    // Handled once: the rollback's own deployment is not failed by the same value.
    std::thread::sleep(Duration::from_secs(3));
    sb.kubectl_ok(&[
        "annotate",
        "--overwrite",
        "deploymentgate/api",
        "reconcile.quartet.dev/requestedAt=after-fail",
    ]);
    wait_for("the pass after the fail", WAIT, || {
        Some(gate_obj(&sb, "api")).filter(|o| o["status"]["lastHandledReconcileAt"] == "after-fail")
    });
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(
        count(&reqs, "POST", "/v1/deployment/fail/"),
        1,
        "one fail for one request: {reqs:?}"
    );
}

#[test]
fn manual_health_is_marked_from_task_states_and_never_for_pending_allocations() {
    let (sb, _op) = env("30s");
    let s = Sched::new(&sb);
    let dep = s.job(json!({"ID": "db", "TaskGroups": [{"Name": "db", "Count": 2,
        "MaxParallel": 1, "HealthCheck": "manual", "ProgressDeadline": 0, "Tasks": ["app", "sidecar"]}]}));
    let (_, since) = sb.requests("scheduler", 0);
    gate(
        &sb,
        "db",
        "  jobId: db\n  manualHealth: {policy: FromTaskStates, healthyFor: 1s}\n",
    );
    wait_for("gate observing", WAIT, || {
        Some(gate_obj(&sb, "db")).filter(|o| o["status"]["deploymentId"] == dep.as_str())
    });
    // Pending allocation: no verdict.
    std::thread::sleep(Duration::from_secs(3));
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(
        count(&reqs, "POST", "/v1/deployment/allocation-health/"),
        0,
        "{reqs:?}"
    );
    let first = s.allocs(&dep)[0]["ID"].as_str().unwrap().to_string();
    s.admin(
        &format!("/_sandbox/scheduler/allocations/{first}/tasks"),
        json!({"State": "running"}),
    );
    wait_for("first allocation healthy", WAIT, || {
        let allocs = s.allocs(&dep);
        let a = allocs.iter().find(|a| a["ID"] == first.as_str())?;
        (a["DeploymentStatus"]["Healthy"] == true).then_some(())
    });
    // The rolling update places the second; one of its tasks fails.
    let second = wait_for("second allocation", WAIT, || {
        s.allocs(&dep)
            .iter()
            .find(|a| a["ID"] != first.as_str())
            .map(|a| a["ID"].as_str().unwrap().to_string())
    });
    s.admin(
        &format!("/_sandbox/scheduler/allocations/{second}/tasks"),
        json!({"Task": "sidecar", "State": "dead", "Failed": true}),
    );
    s.admin(
        &format!("/_sandbox/scheduler/allocations/{second}/tasks"),
        json!({"Task": "app", "State": "running"}),
    );
    wait_for("deployment failed", WAIT, || {
        (s.deployment(&dep)["Status"] == "failed").then_some(())
    });
    let d = s.deployment(&dep);
    assert_eq!(d["TaskGroups"]["db"]["UnhealthyAllocs"], 1);
    let obj = wait_for("gate reports the failure", WAIT, || {
        Some(gate_obj(&sb, "db")).filter(|o| condition_is(o, "Failed", "True"))
    });
    assert_eq!(ready_reason(&obj), "DeploymentFailed");
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(
        count(&reqs, "POST", "/v1/deployment/allocation-health/"),
        2,
        "{reqs:?}"
    );
}

#[test]
fn pause_and_resume_follow_spec_paused_and_a_token_without_submit_job_is_forbidden() {
    let (sb, _op) = env("30s");
    let s = Sched::new(&sb);
    let dep = s.job(json!({"ID": "cache", "TaskGroups": [{"Name": "cache", "Count": 1}]}));
    let (_, since) = sb.requests("scheduler", 0);
    gate(&sb, "cache", "  jobId: cache\n  paused: true\n");
    wait_for("deployment paused", WAIT, || {
        (s.deployment(&dep)["Status"] == "paused").then_some(())
    });
    let obj = wait_for("gate reports paused", WAIT, || {
        Some(gate_obj(&sb, "cache")).filter(|o| o["status"]["deploymentStatus"] == "paused")
    });
    assert_eq!(ready_reason(&obj), "Paused");
    gate(&sb, "cache", "  jobId: cache\n  paused: false\n");
    wait_for("deployment resumed", WAIT, || {
        (s.deployment(&dep)["Status"] == "running").then_some(())
    });
    let obj = wait_for("gate reports resume", WAIT, || {
        // The step that resumes records the status it saw before acting: wait for the next read.
        Some(gate_obj(&sb, "cache")).filter(|o| {
            o["status"]["lastAction"]["type"] == "resume"
                && o["status"]["deploymentStatus"] == "running"
        })
    });
    assert_eq!(obj["status"]["deploymentStatus"], "running");
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(count(&reqs, "POST", "/v1/deployment/pause/"), 2, "{reqs:?}");

    // A read-only token: the pause is refused, reported as Forbidden with the service's words.
    s.admin(
        "/_sandbox/scheduler/acl/policies",
        json!({"Name": "ro", "Namespaces": {"default": {"Policy": "read"}}}),
    );
    let tok = s.admin(
        "/_sandbox/scheduler/acl/tokens",
        json!({"Name": "ro", "Policies": ["ro"]}),
    )["SecretID"]
        .as_str()
        .unwrap()
        .to_string();
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: ro-token, namespace: default}}\nstringData: {{token: {tok}}}\n---\n\
         apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: scheduler-ro, namespace: default}}\n\
         spec: {{service: scheduler, address: \"{}\", tokenSecretRef: {{name: ro-token, key: token}}}}\n",
        s.url
    ));
    gate(
        &sb,
        "cache-ro",
        "  jobId: cache\n  paused: true\n  connectionRef: {name: scheduler-ro}\n",
    );
    let obj = wait_for("Forbidden", WAIT, || {
        Some(gate_obj(&sb, "cache-ro")).filter(|o| ready_reason(o) == "Forbidden")
    });
    let msg = condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("Permission denied"), "{msg}");
    assert!(!msg.contains(&tok));
    assert_eq!(s.deployment(&dep)["Status"], "running");
}

// ---- examples under `quartet dev` ----

/// `quartet dev` on ephemeral ports, resyncing every `resync`: the child, its printed
/// addresses, and the kubeconfig (in `dir`).
fn quartet_dev(
    dir: &std::path::Path,
    resync: &str,
) -> (
    std::process::Child,
    std::collections::HashMap<String, String>,
    std::path::PathBuf,
) {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(BIN)
        .args([
            "dev",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--secrets-addr",
            "127.0.0.1:0",
            "--workspaces-addr",
            "127.0.0.1:0",
            "--catalog-addr",
            "127.0.0.1:0",
            "--scheduler-addr",
            "127.0.0.1:0",
            "--kube-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--resync-interval",
            resync,
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("dev.log")).unwrap())
        .spawn()
        .unwrap();
    let urls = read_ready(&mut child, "Quartet dev is ready");
    (child, urls, kubeconfig)
}

fn kubectl_ok(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(kubeconfig, args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn the_catalog_acl_token_and_deployment_gate_examples_become_ready_under_quartet_dev_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, urls, kubeconfig) = quartet_dev(dir.path(), "30s");
    let apply = |file: &str| {
        let path = repo_root().join("examples").join(file);
        kubectl_ok(&kubeconfig, &["apply", "-f", path.to_str().unwrap()], None);
    };
    let wait_ready = |what: &str| {
        kubectl_ok(
            &kubeconfig,
            &["wait", "--for=condition=Ready", "--timeout=60s", what],
            None,
        );
    };
    apply("catalog.yaml");
    wait_ready("catalogaclbootstrap/catalog-acl");
    // `quartet dev` configured the `kubernetes` auth method and registered the job `web`.
    apply("catalog-acl-token.yaml");
    wait_ready("catalogacltoken/app-catalog-token");
    let token = secret_value(&kubeconfig, "app-catalog-token", "token").expect("token");
    let (status, me) = http(
        "GET",
        &format!("{}/v1/acl/token/self", urls["catalog"]),
        Some(("X-Catalog-Token", &token)),
        None,
    );
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["ServiceIdentities"][0]["ServiceName"], "app");
    apply("deployment-gate.yaml");
    wait_ready("deploymentgate/web");
    let _ = child.kill();
    let _ = child.wait();
}

fn secret_value(kubeconfig: &std::path::Path, name: &str, key: &str) -> Option<String> {
    let out = kubectl(kubeconfig, &["get", "secret", name, "-o", "json"], None);
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v["data"][key].as_str()?)
        .ok()?;
    String::from_utf8(bytes).ok()
}

#[test]
fn a_service_account_token_from_token_request_is_exchanged_rotated_and_logged_out_and_a_revoked_one_is_replaced_at_the_next_resync(
) {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, urls, kc) = quartet_dev(dir.path(), "3s");
    let catalog = urls["catalog"].clone();
    let token_yaml = |name: &str, rotation: &str| {
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: default}}\n---\n\
             apiVersion: catalog.quartet.dev/v1alpha1\nkind: CatalogAclToken\nmetadata: {{name: {name}, namespace: default}}\n\
             spec:\n  authMethod: kubernetes\n  serviceAccountName: {name}\n  audience: catalog\n  rotationInterval: {rotation}\n"
        )
    };
    // `web` rotates every 8s; `api` would rotate after an hour only.
    kubectl_ok(&kc, &["apply", "-f", "-"], Some(&token_yaml("web", "8s")));
    kubectl_ok(&kc, &["apply", "-f", "-"], Some(&token_yaml("api", "1h")));
    for name in ["web", "api"] {
        kubectl_ok(
            &kc,
            &[
                "wait",
                "--for=condition=Ready",
                "--timeout=60s",
                &format!("catalogacltoken/{name}"),
            ],
            None,
        );
    }
    // The token was exchanged for the ServiceAccount's identity.
    let first = secret_value(&kc, "web", "token").expect("token");
    let (status, me) = http(
        "GET",
        &format!("{catalog}/v1/acl/token/self"),
        Some(("X-Catalog-Token", &first)),
        None,
    );
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["AuthMethod"], "kubernetes");
    assert_eq!(me["ServiceIdentities"][0]["ServiceName"], "web");
    // Rotation: a new token, and the old one stops working.
    let rotated = wait_for("rotated token", WAIT, || {
        secret_value(&kc, "web", "token").filter(|t| *t != first)
    });
    wait_for("the old token logged out after rotation", WAIT, || {
        (!token_works(&catalog, &first)).then_some(())
    });
    assert!(
        token_works(&catalog, &rotated) || {
            // Rotated again meanwhile (8s): the Secret's current token works.
            let now = secret_value(&kc, "web", "token").unwrap();
            token_works(&catalog, &now)
        }
    );

    // Revoked behind the operator's back: noticed at the next resync, replaced by a new login.
    let api_before = secret_value(&kc, "api", "token").expect("token");
    let login_before = kubectl_ok(
        &kc,
        &[
            "get",
            "catalogacltoken",
            "api",
            "-o",
            "jsonpath={.status.lastLoginTime}",
        ],
        None,
    );
    let (st, _) = http(
        "POST",
        &format!("{catalog}/v1/acl/logout"),
        Some(("X-Catalog-Token", &api_before)),
        None,
    );
    assert_eq!(st, 200);
    assert!(!token_works(&catalog, &api_before));
    let api_after = wait_for("a new token after the refusal", WAIT, || {
        secret_value(&kc, "api", "token").filter(|t| *t != api_before && token_works(&catalog, t))
    });
    assert_ne!(api_after, api_before);
    // A re-login caused by the refusal (rotationInterval is 1h): a TokenRefused Warning.
    let refused = wait_for("a TokenRefused event", WAIT, || {
        let events: Value =
            serde_json::from_str(&kubectl_ok(&kc, &["get", "events", "-o", "json"], None)).ok()?;
        events["items"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == "TokenRefused")
            .cloned()
    });
    assert_eq!(refused["involvedObject"]["name"], "api", "{refused}");
    assert_eq!(refused["type"], "Warning");
    let login_after = kubectl_ok(
        &kc,
        &[
            "get",
            "catalogacltoken",
            "api",
            "-o",
            "jsonpath={.status.lastLoginTime}",
        ],
        None,
    );
    assert!(!login_before.is_empty());
    assert_ne!(login_before, login_after);

    // Delete: each token is logged out (stops working).
    let web_last = secret_value(&kc, "web", "token").unwrap();
    kubectl_ok(
        &kc,
        &[
            "delete",
            "catalogacltoken",
            "web",
            "api",
            "--wait=true",
            "--timeout=30s",
        ],
        None,
    );
    wait_for("logged out on delete", WAIT, || {
        (!token_works(&catalog, &web_last) && !token_works(&catalog, &api_after)).then_some(())
    });
    // No token in the operator's log or the Events.
    let log = std::fs::read_to_string(dir.path().join("dev.log")).unwrap_or_default();
    let events = kubectl_ok(&kc, &["get", "events", "-o", "json"], None);
    for text in [log, events] {
        for secret in [&first, &rotated, &api_before, &api_after, &web_last] {
            assert!(!text.contains(secret.as_str()), "a token leaked");
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_new_unblock_request_unblocks_a_blocked_multiregion_deployment_once() {
    let (sb, _op) = env("30s");
    let s = Sched::new(&sb);
    let dep = s.job(json!({"ID": "multi", "Multiregion": true,
        "TaskGroups": [{"Name": "g", "Count": 1}]}));
    s.all_healthy(&dep);
    assert_eq!(s.deployment(&dep)["Status"], "blocked");
    let (_, since) = sb.requests("scheduler", 0);
    gate(&sb, "multi", "  jobId: multi\n");
    let obj = wait_for("gate reports blocked", WAIT, || {
        Some(gate_obj(&sb, "multi")).filter(|o| ready_reason(o) == "Blocked")
    });
    assert_eq!(obj["status"]["deploymentStatus"], "blocked");
    gate(
        &sb,
        "multi",
        "  jobId: multi\n  unblockRequest: \"first\"\n",
    );
    let obj = wait_for("gate Ready after unblock", WAIT, || {
        Some(gate_obj(&sb, "multi")).filter(|o| condition_is(o, "Ready", "True"))
    });
    assert_eq!(obj["status"]["handledUnblockRequest"], "first");
    assert_eq!(s.deployment(&dep)["Status"], "successful");
    let (reqs, _) = sb.requests("scheduler", since);
    assert_eq!(
        count(&reqs, "POST", "/v1/deployment/unblock/"),
        1,
        "{reqs:?}"
    );
}

/// A CatalogAclToken whose Secret name is already taken by a Secret it did not make (here its
/// own bearer token's, the mistake a user makes with `secretName` left to default) refuses to
/// write there: the user's Secret keeps its keys, is not adopted, and outlives the resource.
#[test]
fn a_token_never_overwrites_or_deletes_a_secret_it_did_not_make() {
    let (sb, _op) = env("1h");
    let catalog = sb.url("catalog").to_string();
    trust_service_accounts(&catalog);
    let jwt = sa_jwt("default", "web");
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: web, namespace: default}}\nstringData: {{token: {jwt}, db-url: postgres://x}}\n---\n\
         apiVersion: catalog.quartet.dev/v1alpha1\nkind: CatalogAclToken\nmetadata: {{name: web, namespace: default}}\n\
         spec:\n  authMethod: k8s\n  bearerTokenSecretRef: {{name: web, key: token}}\n"
    ));
    let obj = wait_for("refused", WAIT, || {
        sb.get_json("catalogacltoken", "web")
            .filter(|o| condition_is(o, "Stalled", "True"))
    });
    let message = condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("Secret default/web already exists and is not this CatalogAclToken's"),
        "{obj}"
    );
    assert_eq!(
        secret_key(&sb, "web", "token").as_deref(),
        Some(jwt.as_str())
    );
    let secret = sb.get_json("secret", "web").unwrap();
    assert!(secret["metadata"]["ownerReferences"].is_null(), "{secret}");
    sb.kubectl_ok(&["delete", "catalogacltoken", "web", "--timeout=60s"]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        secret_key(&sb, "web", "db-url").as_deref(),
        Some("postgres://x")
    );
}
