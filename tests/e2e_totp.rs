//! TotpMethod, TotpEnrollment and the Connection's `features` end to end: the built `quartet`
//! binary against the dev API server and the sandbox's secrets service, driven with the real
//! `kubectl`, the service read over HTTP in the test.
//!
//! The test bodies reach the service only through [`Svc`] (an address and a token header) and
//! [`Env`], so the scenarios the real server can play run against both backends from the same
//! code: `<scenario>::sandbox` against the sandbox, `<scenario>::openbao` against a real OpenBao
//! 2.7.2 (`bao server -dev`, one per test so method lists are the test's own, see
//! `support::openbao`) through a Connection with `tokenHeader: X-Vault-Token`. Writes are counted
//! in the sandbox's request log or OpenBao's audit log; where the sandbox reads an entity's TOTP
//! secret through its admin view, OpenBao is asked through its login MFA (a userpass user
//! aliased to the entity, a login enforcement, `sys/mfa/validate` with the code from the URL).
//! Sandbox-only tools (faults) are used only in the scenarios that need them.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::openbao::{on_both_backends, Backend};
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const TOTP: &str = "/v1/identity/mfa/method/totp";

/// The secrets service as the tests see it: an address and the header carrying a token.
struct Svc {
    url: String,
    header: String,
    token: String,
}

impl Svc {
    fn of(sb: &Sandbox) -> Svc {
        Svc {
            url: sb.url("secrets").to_string(),
            header: "X-Secrets-Token".into(),
            token: sb.root_token.clone(),
        }
    }

    fn of_bao(bao: &openbao::OpenBao) -> Svc {
        Svc {
            url: bao.addr.clone(),
            header: "X-Vault-Token".into(),
            token: bao.root_token.clone(),
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http(
            method,
            &format!("{}{path}", self.url),
            Some((&self.header, &self.token)),
            body,
        )
    }

    fn method(&self, id: &str) -> Option<Value> {
        let (status, body) = self.call("GET", &format!("{TOTP}/{id}"), None);
        (status == 200).then(|| body["data"].clone())
    }

    fn method_ids(&self) -> Vec<String> {
        let (status, body) = self.call("LIST", TOTP, None);
        if status != 200 {
            return Vec::new();
        }
        body["data"]["keys"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn create_method(&self, body: Value) -> String {
        let (status, resp) = self.call("POST", TOTP, Some(body));
        assert_eq!(status, 200, "create method: {resp}");
        resp["data"]["method_id"].as_str().unwrap().to_string()
    }
}

on_both_backends!(
    a_totp_method_is_created_edited_restored_after_drift_and_recreated_after_remote_delete,
    retain_keeps_the_method_and_an_existing_method_is_adopted_by_its_id,
    an_in_sync_method_and_enrollment_see_no_writes_over_many_resyncs,
    deleting_a_method_used_by_a_login_enforcement_is_blocked_until_it_is_released,
    a_connection_lists_features_and_a_method_without_its_feature_is_unsupported_without_a_write,
    resources_of_features_the_server_lacks_are_unsupported_without_a_write,
    an_enrollment_delivers_a_png_and_a_url_with_the_entitys_secret_and_regenerates_once,
    an_enrollment_by_method_and_entity_id_with_retain_keeps_the_secret,
    an_entity_enrolled_elsewhere_is_not_replaced_until_regenerate_asks_for_it,
);

/// The kube side (dev API server with CRDs, from the sandbox), the operator, and the secrets
/// server the Connection `secrets` points at (the sandbox's, or an OpenBao of this test's own).
struct Env {
    sb: Sandbox,
    op: Operator,
    svc: Svc,
    bao: Option<openbao::OpenBao>,
}

/// A point in the secrets server's request log.
#[derive(Clone, Copy)]
struct Mark(u64);

impl Env {
    fn backend(&self) -> Backend {
        if self.bao.is_some() {
            Backend::OpenBao
        } else {
            Backend::Sandbox
        }
    }

    fn mark(&self) -> Mark {
        match &self.bao {
            Some(b) => Mark(b.requests().len() as u64),
            None => Mark(self.sb.requests("secrets", 0).1),
        }
    }

    /// Requests answered since `mark`: (is a write, path without `/v1/`).
    fn requests_since(&self, mark: Mark) -> Vec<(bool, String)> {
        match &self.bao {
            Some(b) => b
                .requests()
                .into_iter()
                .skip(mark.0 as usize)
                .map(|(op, p)| (op != "read" && op != "list", p))
                .collect(),
            None => self
                .sb
                .requests("secrets", mark.0)
                .0
                .into_iter()
                .map(|(m, p, _)| {
                    (
                        !matches!(m.as_str(), "GET" | "LIST" | "HEAD"),
                        p.trim_start_matches("/v1/").to_string(),
                    )
                })
                .collect(),
        }
    }

    /// Writes since `mark` to paths `matching` (paths without `/v1/`).
    fn writes_since(&self, mark: Mark, matching: impl Fn(&str) -> bool) -> Vec<String> {
        self.requests_since(mark)
            .into_iter()
            .filter(|(w, p)| *w && matching(p))
            .map(|(_, p)| p)
            .collect()
    }

    /// Reads since `mark` of exactly `path` (without `/v1/`).
    fn reads_since(&self, mark: Mark, path: &str) -> usize {
        self.requests_since(mark)
            .into_iter()
            .filter(|(w, p)| !*w && p == path)
            .count()
    }
}

/// CRDs, a `secrets` Connection to `backend` and a running operator; `sandbox_args` go to the
/// sandbox (e.g. its edition).
fn env_on(backend: Backend, resync: &str, sandbox_args: &[&str]) -> Env {
    let sb = Sandbox::start(sandbox_args);
    sb.install_crds();
    let (svc, bao) = match backend {
        Backend::Sandbox => {
            sb.connect_secrets(&sb.root_token.clone());
            (Svc::of(&sb), None)
        }
        Backend::OpenBao => {
            let bao = openbao::OpenBao::start();
            sb.apply_ok(&bao.connection_yaml("secrets", "default"));
            (Svc::of_bao(&bao), Some(bao))
        }
    };
    let op = Operator::start(&sb, resync);
    Env { sb, op, svc, bao }
}

/// A sandbox with CRDs, a `secrets` Connection and a running operator.
fn ready_env(resync: &str) -> (Sandbox, Operator, Svc) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, resync);
    let svc = Svc::of(&sb);
    (sb, op, svc)
}

fn totp_method(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpMethod\nmetadata: {{name: {name}, namespace: default}}\nspec: {spec}\n"
    )
}

fn wait_ready(sb: &Sandbox, kind: &str, name: &str) -> Value {
    wait_for(&format!("{kind} {name} Ready"), WAIT, || {
        sb.get_json(kind, name).filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    })
}

fn remote_id(obj: &Value) -> String {
    obj["status"]["remoteId"]
        .as_str()
        .expect("status.remoteId")
        .to_string()
}

fn events(sb: &Sandbox) -> String {
    sb.kubectl_ok(&["get", "events", "-o", "json"])
}

/// Calls the sandbox logged for `path` (exact) and `method` since `since`.
fn calls(sb: &Sandbox, since: u64, method: &str, path: &str) -> usize {
    sb.requests("secrets", since)
        .0
        .iter()
        .filter(|(m, p, _)| m == method && p == path)
        .count()
}

fn sandbox_fault(sb: &Sandbox, fault: Value) {
    let (status, _) = http(
        "POST",
        &format!("{}/_sandbox/faults", sb.url("secrets")),
        None,
        Some(fault),
    );
    assert!(status < 300, "fault not accepted");
}

fn a_totp_method_is_created_edited_restored_after_drift_and_recreated_after_remote_delete(
    backend: Backend,
) {
    let env = env_on(backend, "2s", &[]);
    let (sb, svc) = (&env.sb, &env.svc);
    sb.apply_ok(&totp_method(
        "corp",
        "{issuer: Acme, periodSeconds: 60, digits: 8, algorithm: SHA256, skew: 0, keySize: 32, qrSize: 150, maxValidationAttempts: 7}",
    ));
    let obj = wait_ready(sb, "totp", "corp");
    let id = remote_id(&obj);
    let m = svc.method(&id).expect("method exists in the service");
    assert_eq!(m["issuer"], "Acme");
    assert_eq!(m["period"], 60);
    assert_eq!(m["digits"], 8);
    assert_eq!(m["algorithm"], "SHA256");
    assert_eq!(m["skew"], 0);
    assert_eq!(m["key_size"], 32);
    assert_eq!(m["qr_size"], 150);
    assert_eq!(m["max_validation_attempts"], 7);
    assert_eq!(svc.method_ids(), vec![id.clone()]);
    sb.wait_events(&["Created"]);

    // Edit: the same method is updated in place.
    sb.apply_ok(&totp_method(
        "corp",
        "{issuer: Acme Corp, periodSeconds: 60, digits: 6, algorithm: SHA256, skew: 0, keySize: 32, qrSize: 150, maxValidationAttempts: 7}",
    ));
    wait_for("edited method", WAIT, || {
        svc.method(&id)
            .filter(|m| m["issuer"] == "Acme Corp" && m["digits"] == 6)
    });
    let obj = wait_ready(sb, "totp", "corp");
    assert_eq!(remote_id(&obj), id);
    assert_eq!(svc.method_ids(), vec![id.clone()]);
    let m = svc.method(&id).unwrap();
    assert_eq!(m["period"], 60, "unchanged settings are kept");

    // Remote edit: restored, reported as drift.
    let (status, _) = svc.call(
        "POST",
        &format!("{TOTP}/{id}"),
        Some(json!({"issuer": "Evil", "period": 60, "digits": 6, "algorithm": "SHA256", "skew": 0, "key_size": 32, "qr_size": 150, "max_validation_attempts": 7})),
    );
    assert!(status < 300);
    wait_for("drift corrected", WAIT, || {
        svc.method(&id).filter(|m| m["issuer"] == "Acme Corp")
    });
    let obj = wait_for("driftedFields", WAIT, || {
        sb.get_json("totp", "corp")
            .filter(|o| o["status"]["driftedFields"] == json!(["issuer"]))
    });
    assert_eq!(obj["status"]["driftedFields"], json!(["issuer"]));
    sb.wait_events(&["DriftCorrected"]);

    // Remote delete: recreated, the new id recorded.
    let (status, _) = svc.call("DELETE", &format!("{TOTP}/{id}"), None);
    assert!(status < 300);
    let obj = wait_for("recreated with a new id", WAIT, || {
        sb.get_json("totp", "corp")
            .filter(|o| o["status"]["remoteId"].as_str().is_some_and(|r| r != id))
    });
    let new_id = remote_id(&obj);
    let m = svc.method(&new_id).expect("recreated method");
    assert_eq!(m["issuer"], "Acme Corp");
    assert_eq!(svc.method_ids(), vec![new_id.clone()]);

    // Delete: gone from the service.
    sb.kubectl_ok(&["delete", "totp", "corp", "--wait=true", "--timeout=60s"]);
    assert!(svc.method(&new_id).is_none(), "method still in the service");
}

fn retain_keeps_the_method_and_an_existing_method_is_adopted_by_its_id(backend: Backend) {
    let env = env_on(backend, "5m", &[]);
    let (sb, svc) = (&env.sb, &env.svc);
    let id = svc.create_method(json!({"issuer": "Before", "digits": 8}));
    sb.apply_ok(&totp_method(
        "adopted",
        &format!("{{issuer: After, methodId: {id}, deletionPolicy: Retain}}"),
    ));
    let obj = wait_ready(sb, "totp", "adopted");
    assert_eq!(remote_id(&obj), id);
    let m = svc.method(&id).unwrap();
    assert_eq!(m["issuer"], "After");
    assert_eq!(m["digits"], 8, "a setting the spec leaves out is kept");
    assert_eq!(svc.method_ids(), vec![id.clone()], "no second method");
    sb.wait_events(&["Adopted"]);

    sb.kubectl_ok(&["delete", "totp", "adopted", "--wait=true", "--timeout=60s"]);
    assert!(svc.method(&id).is_some(), "retained method was deleted");
}

#[test]
fn invalid_totp_methods_are_refused_at_admission_with_the_rule_message() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    for (spec, message) in [
        ("{issuer: a, digits: 7}", "digits must be 6 or 8"),
        ("{issuer: a, skew: 2}", "skew must be 0 or 1"),
        (
            "{issuer: a, algorithm: MD5}",
            "algorithm must be SHA1, SHA256 or SHA512",
        ),
        (
            "{issuer: a, periodSeconds: 0}",
            "periodSeconds must be greater than zero",
        ),
        (
            "{issuer: a, maxValidationAttempts: 0}",
            "maxValidationAttempts must be greater than zero",
        ),
        ("{issuer: ''}", "issuer must not be empty"),
        (
            "{issuer: a, methodId: not-a-uuid}",
            "methodId must be a UUID",
        ),
        ("{digits: 6}", "issuer"),
    ] {
        let out = sb.apply_yaml(&totp_method("bad", spec));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{spec} was accepted");
        assert!(err.contains(message), "{spec}: {err}");
    }
    let id = "0f0e4bd8-7c2c-4b1c-9f39-6c2a2b4d2f10";
    sb.apply_ok(&totp_method(
        "fixed",
        &format!("{{issuer: a, methodId: {id}}}"),
    ));
    let out = sb.apply_yaml(&totp_method(
        "fixed",
        "{issuer: a, methodId: 1f0e4bd8-7c2c-4b1c-9f39-6c2a2b4d2f10}",
    ));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("methodId cannot be changed once set"));
    // A mistyped id is no dead end: it can be removed.
    sb.apply_ok(&totp_method("fixed", "{issuer: a}"));
}

#[test]
fn a_lost_create_response_leaves_exactly_one_method() {
    let (sb, _op, svc) = ready_env("5m");
    sandbox_fault(
        &sb,
        json!({"method": "POST", "path": TOTP, "service": "secrets", "after": true}),
    );
    sb.apply_ok(&totp_method("lossy", "{issuer: Lossy}"));
    let obj = wait_ready(&sb, "totp", "lossy");
    let ids = svc.method_ids();
    assert_eq!(ids.len(), 1, "duplicate methods: {ids:?}");
    assert_eq!(remote_id(&obj), ids[0]);
    assert_eq!(svc.method(&ids[0]).unwrap()["issuer"], "Lossy");
}

#[test]
fn a_write_the_service_rejects_reports_its_message_without_a_retry_loop() {
    let (sb, _op, _svc) = ready_env("5m");
    let (_, since) = sb.requests("secrets", 0);
    sandbox_fault(
        &sb,
        json!({"method": "POST", "path": TOTP, "service": "secrets", "status": 400, "count": 0,
               "body": {"errors": ["issuer is not allowed here"]}}),
    );
    sb.apply_ok(&totp_method("refused", "{issuer: Nope}"));
    let obj = wait_for("Rejected condition", WAIT, || {
        sb.get_json("totp", "refused")
            .filter(|o| condition(o, "Ready").is_some_and(|c| c["reason"] == "Rejected"))
    });
    let c = condition(&obj, "Ready").unwrap();
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("issuer is not allowed here"),
        "{c}"
    );
    // The status write may wake one more pass; after that, nothing until the resync.
    std::thread::sleep(Duration::from_secs(2));
    let (_, after) = sb.requests("secrets", 0);
    assert!(calls(&sb, since, "POST", TOTP) <= 2);
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(
        calls(&sb, after, "POST", TOTP),
        0,
        "the rejected create was retried"
    );
}

fn deleting_a_method_used_by_a_login_enforcement_is_blocked_until_it_is_released(backend: Backend) {
    let env = env_on(backend, "2s", &[]);
    let (sb, svc) = (&env.sb, &env.svc);
    sb.apply_ok(&totp_method("enforced", "{issuer: Enforced}"));
    let id = remote_id(&wait_ready(sb, "totp", "enforced"));
    let (status, body) = svc.call(
        "POST",
        "/v1/identity/mfa/login-enforcement/everyone",
        Some(json!({"mfa_method_ids": [id], "auth_method_types": ["token"]})),
    );
    assert!(status < 300, "enforcement: {body}");
    sb.kubectl_ok(&["delete", "totp", "enforced", "--wait=false"]);
    let obj = wait_for("DeletionBlocked", WAIT, || {
        sb.get_json("totp", "enforced")
            .filter(|o| condition_is(o, "DeletionBlocked", "True"))
    });
    let message = condition(&obj, "DeletionBlocked").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("enforcement"), "{message}");
    assert!(svc.method(&id).is_some());
    let (status, _) = svc.call(
        "DELETE",
        "/v1/identity/mfa/login-enforcement/everyone",
        None,
    );
    assert!(status < 300);
    wait_for("resource gone", WAIT, || {
        sb.get_json("totp", "enforced").is_none().then_some(())
    });
    assert!(svc.method(&id).is_none(), "method still in the service");
}

/// What `status.features` lists for the root token: (present, absent). OpenBao has no
/// identity-provider auth method, no directory or transform engine and none of the enterprise
/// features.
fn expected_features(backend: Backend) -> (&'static [&'static str], &'static [&'static str]) {
    match backend {
        Backend::Sandbox => (&["acl-policies", "idp", "mfa-totp", "leases"], &[]),
        Backend::OpenBao => (
            &["acl-policies", "mfa-totp", "leases"],
            &[
                "rgp-policies",
                "egp-policies",
                "idp",
                "transform",
                "ad",
                "dr-replication",
            ],
        ),
    }
}

fn features_of(sb: &Sandbox, connection: &str) -> Vec<String> {
    let conn = wait_for(&format!("{connection} features"), WAIT, || {
        sb.get_json("connection", connection)
            .filter(|c| c["status"]["features"].is_array())
    });
    conn["status"]["features"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

fn a_connection_lists_features_and_a_method_without_its_feature_is_unsupported_without_a_write(
    backend: Backend,
) {
    let env = env_on(backend, "5m", &[]);
    let (sb, svc) = (&env.sb, &env.svc);
    let features = features_of(sb, "secrets");
    let (present, absent) = expected_features(backend);
    for f in present {
        assert!(
            features.iter().any(|x| x == f),
            "{f} missing from {features:?}"
        );
    }
    for f in absent {
        assert!(
            !features.iter().any(|x| x == f),
            "{f} listed in {features:?}"
        );
    }

    // A token that reaches policies only (no default policy, so no identity paths).
    let (status, _) = svc.call(
        "PUT",
        "/v1/sys/policies/acl/policies-only",
        Some(json!({"policy": "path \"sys/policies/acl/*\" { capabilities = [\"create\", \"read\", \"update\", \"delete\", \"list\"] }\npath \"auth/token/lookup-self\" { capabilities = [\"read\"] }"})),
    );
    assert!(status < 300);
    let (status, body) = svc.call(
        "POST",
        "/v1/auth/token/create",
        Some(json!({"policies": ["policies-only"], "no_default_policy": true})),
    );
    assert!(status < 300, "{body}");
    let token = body["auth"]["client_token"].as_str().unwrap().to_string();
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: narrow-token, namespace: default}}\nstringData: {{token: {token}}}\n---\n\
         apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: narrow, namespace: default}}\n\
         spec: {{service: secrets, address: \"{}\", tokenHeader: {}, tokenSecretRef: {{name: narrow-token, key: token}}}}\n",
        svc.url, svc.header
    ));
    let features = features_of(sb, "narrow");
    assert!(features.iter().any(|f| f == "acl-policies"), "{features:?}");
    assert!(!features.iter().any(|f| f == "mfa-totp"), "{features:?}");

    let since = env.mark();
    sb.apply_ok(&totp_method(
        "narrow",
        "{issuer: Narrow, connectionRef: {name: narrow}}",
    ));
    let obj = wait_for("Unsupported", WAIT, || {
        sb.get_json("totp", "narrow")
            .filter(|o| condition(o, "Ready").is_some_and(|c| c["reason"] == "Unsupported"))
    });
    assert!(condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("mfa-totp"));
    assert_eq!(
        env.writes_since(since, |p| p.starts_with("identity/mfa/method/totp")),
        Vec::<String>::new(),
        "a write was sent"
    );
    assert!(svc.method_ids().is_empty());

    // The Connection changes to a token that reaches the TOTP methods: re-checked, created.
    sb.kubectl_ok(&[
        "patch",
        "connection",
        "narrow",
        "--type=merge",
        "-p",
        r#"{"spec":{"tokenSecretRef":{"name":"secrets-token","key":"token"}}}"#,
    ]);
    let obj = wait_ready(sb, "totp", "narrow");
    assert_eq!(svc.method_ids(), vec![remote_id(&obj)]);
}

/// Resources of every feature a server may lack: (feature, kubectl resource, name, manifest,
/// the path prefix its writes would go to).
const FEATURE_RESOURCES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "rgp-policies",
        "secretspolicy",
        "gated-rgp",
        "kind: SecretsPolicy\nmetadata: {name: gated-rgp, namespace: default}\nspec: {type: rgp, policy: \"main = rule { true }\", enforcementLevel: advisory}\n",
        "sys/policies/rgp/",
    ),
    (
        "egp-policies",
        "secretspolicy",
        "gated-egp",
        "kind: SecretsPolicy\nmetadata: {name: gated-egp, namespace: default}\nspec: {type: egp, policy: \"main = rule { true }\", enforcementLevel: advisory, paths: [\"secret/*\"]}\n",
        "sys/policies/egp/",
    ),
    (
        "idp",
        "idpuser",
        "alice",
        "kind: IdpUser\nmetadata: {name: alice, namespace: default}\nspec: {groups: [ops], policies: [app-read]}\n",
        "auth/idp/",
    ),
    (
        "transform",
        "transformalphabet",
        "digits",
        "kind: TransformAlphabet\nmetadata: {name: digits, namespace: default}\nspec: {alphabet: \"0123456789\"}\n",
        "transform/",
    ),
    (
        "ad",
        "adlibraryset",
        "team",
        "kind: AdLibrarySet\nmetadata: {name: team, namespace: default}\nspec: {serviceAccountNames: [lib1@example.com], ttl: 1h}\n",
        "ad/",
    ),
    (
        "dr-replication",
        "drreplication",
        "dr",
        "kind: DrReplication\nmetadata: {name: dr, namespace: default}\nspec: {primary: {connectionRef: {name: secrets}}}\n",
        "sys/replication/",
    ),
];

/// The sandbox as the community edition, or OpenBao: the Connection does not list the
/// features the server lacks, and a resource of each gets `Ready=False` reason `Unsupported`
/// while the server sees no write for it, then or later.
fn resources_of_features_the_server_lacks_are_unsupported_without_a_write(backend: Backend) {
    let env = env_on(backend, "5m", &["--edition", "community"]);
    let sb = &env.sb;
    let lacking: &[&str] = match backend {
        Backend::Sandbox => &[
            "rgp-policies",
            "egp-policies",
            "transform",
            "dr-replication",
        ],
        Backend::OpenBao => expected_features(backend).1,
    };
    let features = features_of(sb, "secrets");
    let since = env.mark();
    let mut applied = Vec::new();
    for (feature, resource, name, manifest, prefix) in FEATURE_RESOURCES {
        if !lacking.contains(feature) {
            continue;
        }
        assert!(
            !features.iter().any(|f| f == feature),
            "{feature} listed in {features:?}"
        );
        sb.apply_ok(&format!(
            "apiVersion: secrets.quartet.dev/v1alpha1\n{manifest}"
        ));
        applied.push((*resource, *name, *prefix));
    }
    assert_eq!(applied.len(), lacking.len());
    for (resource, name, _) in &applied {
        let obj = wait_for(&format!("{resource} {name} Unsupported"), WAIT, || {
            sb.get_json(resource, name).filter(|o| {
                condition(o, "Ready")
                    .is_some_and(|c| c["status"] == "False" && c["reason"] == "Unsupported")
            })
        });
        let message = condition(&obj, "Ready").unwrap()["message"].to_string();
        assert!(!message.is_empty(), "{resource} {name}");
    }
    // No retry storm either: a few seconds later, still no write.
    std::thread::sleep(Duration::from_secs(3));
    for (resource, _, prefix) in &applied {
        assert_eq!(
            env.writes_since(since, |p| p.starts_with(prefix)),
            Vec::<String>::new(),
            "{resource} sent a write"
        );
    }
}

/// Converged, then many resyncs: the method and the enrollment are read at each, and nothing is
/// written (OpenBao's method read carries `name`, `type`, `namespace_id`, `namespace_path`,
/// which are not settings).
fn an_in_sync_method_and_enrollment_see_no_writes_over_many_resyncs(backend: Backend) {
    let env = env_on(backend, "1s", &[]);
    let (sb, svc) = (&env.sb, &env.svc);
    create_entity(svc, "erin");
    sb.apply_ok(&totp_method(
        "full",
        "{issuer: Full, periodSeconds: 30, digits: 6, algorithm: SHA256, skew: 1, keySize: 20, qrSize: 100, maxValidationAttempts: 5}",
    ));
    sb.apply_ok(&totp_method("bare", "{issuer: Bare}"));
    sb.apply_ok(&enrollment(
        "erin",
        "{methodRef: {name: full}, entityName: erin}",
    ));
    let full = remote_id(&wait_ready(sb, "totp", "full"));
    let bare = remote_id(&wait_ready(sb, "totp", "bare"));
    wait_ready(sb, "totpenroll", "erin");
    let method_gets = kube_gets_of_totp_methods(&env.op);
    let since = env.mark();
    for id in [&full, &bare] {
        let path = format!("identity/mfa/method/totp/{id}");
        wait_for(&format!("5 resync reads of {path}"), WAIT, || {
            (env.reads_since(since, &path) >= 5).then_some(())
        });
    }
    // Each pass of the enrollment reads its entity and its TotpMethod: the method from the
    // operator's watched cache, not with one API GET per pass.
    wait_for("3 resync passes of the enrollment", WAIT, || {
        (env.reads_since(since, "identity/entity/name/erin") >= 3).then_some(())
    });
    assert_eq!(
        kube_gets_of_totp_methods(&env.op),
        method_gets,
        "the enrollment's resyncs read its TotpMethod from the API server instead of the cache"
    );
    assert_eq!(
        env.writes_since(since, |p| p.starts_with("identity/")),
        Vec::<String>::new(),
        "writes while in sync"
    );
    for name in ["full", "bare"] {
        let obj = sb.get_json("totp", name).unwrap();
        assert!(
            obj["status"]["driftedFields"]
                .as_array()
                .is_none_or(|a| a.is_empty()),
            "{name} reports drift: {}",
            obj["status"]
        );
    }
}

/// The operator's `get` requests for TotpMethods so far (its `quartet_kube_api_calls_total`).
fn kube_gets_of_totp_methods(op: &Operator) -> f64 {
    let addr = op.metrics_addr();
    let text = reqwest::blocking::get(format!("http://{addr}/metrics"))
        .and_then(|r| r.text())
        .expect("scrape the operator's metrics");
    text.lines()
        .find(|l| {
            l.starts_with(
                r#"quartet_kube_api_calls_total{verb="get",resource="totpmethods.secrets.quartet.dev"}"#,
            )
        })
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0.0)
}

// ---------------------------------------------------------------------------------------------
// TotpEnrollment

fn enrollment(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpEnrollment\nmetadata: {{name: {name}, namespace: default}}\nspec: {spec}\n"
    )
}

fn create_entity(svc: &Svc, name: &str) -> String {
    let (status, body) = svc.call("POST", "/v1/identity/entity", Some(json!({"name": name})));
    assert!(status < 300, "entity: {body}");
    body["data"]["id"].as_str().expect("entity id").to_string()
}

/// The sandbox's admin view of the TOTP secret `entity` holds for `method`: (seed, code now).
fn admin_view(sb: &Sandbox, entity: &str, method: &str) -> Option<(String, String)> {
    let (status, body) = http(
        "GET",
        &format!(
            "{}/_sandbox/secrets/mfa/{entity}/{method}",
            sb.url("secrets")
        ),
        None,
        None,
    );
    (status == 200).then(|| {
        (
            body["secret"].as_str().unwrap_or_default().to_string(),
            body["code"].as_str().unwrap_or_default().to_string(),
        )
    })
}

/// The Secret's keys, decoded.
fn result_secret(sb: &Sandbox, name: &str) -> Option<std::collections::BTreeMap<String, Vec<u8>>> {
    use base64::Engine;
    let s = sb.get_json("secret", name)?;
    Some(
        s["data"]
            .as_object()?
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    base64::engine::general_purpose::STANDARD
                        .decode(v.as_str().unwrap_or_default())
                        .expect("base64 data"),
                )
            })
            .collect(),
    )
}

fn query_param(url: &str, key: &str) -> Option<String> {
    let q = url.split_once('?')?.1;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

fn base32_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = Vec::new();
    let (mut buf, mut bits) = (0u64, 0u32);
    for c in s.trim_end_matches('=').bytes() {
        let v = ALPHABET
            .iter()
            .position(|a| *a == c.to_ascii_uppercase())
            .expect("base32") as u64;
        buf = (buf << 5) | v;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// RFC 6238 TOTP with HMAC-SHA256.
fn totp_sha256(key: &[u8], period: u64, digits: u32) -> String {
    use hmac::{Hmac, Mac};
    let counter = unix_now() / period;
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).unwrap();
    mac.update(&counter.to_be_bytes());
    let h = mac.finalize().into_bytes();
    let off = (h[h.len() - 1] & 0x0f) as usize;
    let bin = ((h[off] as u32 & 0x7f) << 24)
        | ((h[off + 1] as u32) << 16)
        | ((h[off + 2] as u32) << 8)
        | h[off + 3] as u32;
    format!(
        "{:0width$}",
        bin % 10u32.pow(digits),
        width = digits as usize
    )
}

/// The url's seed is the entity's secret for the method: on the sandbox, its admin view holds
/// the same seed and the same current code; on OpenBao, the code computed from the url passes
/// the login MFA of a user of the entity.
fn assert_url_matches_service(env: &Env, url: &str, entity: &str, method: &str) -> String {
    assert!(url.starts_with("otpauth://totp/"), "not an otpauth url");
    let seed = query_param(url, "secret").expect("secret in url");
    assert_seed_is_the_entitys(env, &seed, entity, method);
    seed
}

/// `seed` is the entity's secret for the method (see [`assert_url_matches_service`]).
fn assert_seed_is_the_entitys(env: &Env, seed: &str, entity: &str, method: &str) {
    if env.backend() == Backend::OpenBao {
        if let Err(e) = mfa_login(env, entity, method, seed) {
            panic!("the code from the seed does not pass OpenBao's login MFA: {e}");
        }
        return;
    }
    let sb = &env.sb;
    let (admin_seed, _) = admin_view(sb, entity, method).expect("entity holds a secret");
    assert_eq!(
        seed, admin_seed,
        "the url's seed is not the entity's secret"
    );
    let key = base32_decode(seed);
    // A code computed from the url equals the service's current code (retry across a period
    // boundary).
    let matched = (0..3).any(|_| {
        let mine = totp_sha256(&key, 30, 6);
        let theirs = admin_view(sb, entity, method).unwrap().1;
        if mine == theirs {
            return true;
        }
        std::thread::sleep(Duration::from_secs(1));
        false
    });
    assert!(matched, "codes differ");
}

/// Whether the entity holds a TOTP secret for the method. OpenBao has no read of it:
/// `admin-generate` answers a warning and no url when one exists, and generates one otherwise
/// (so this is asked only where the test no longer cares about the secret).
fn holds_secret(env: &Env, entity: &str, method: &str) -> bool {
    if env.backend() == Backend::Sandbox {
        return admin_view(&env.sb, entity, method).is_some();
    }
    let (status, body) = env.svc.call(
        "POST",
        &format!("{TOTP}/admin-generate"),
        Some(json!({"method_id": method, "entity_id": entity})),
    );
    assert!(status < 300, "admin-generate: {body}");
    body["data"]["url"].as_str().is_none()
}

/// Logs in to OpenBao as a userpass user tied to `entity` (same name, an entity alias on the
/// userpass mount) under a login enforcement of `method`, and answers the MFA requirement with
/// the code of `seed` (`sys/mfa/validate`). A code is accepted once per period, so a refused
/// code is tried again in the next period (twice at most).
fn mfa_login(env: &Env, entity: &str, method: &str, seed: &str) -> Result<(), String> {
    let svc = &env.svc;
    // Setup, idempotent: the mount, the user and alias, the enforcement.
    svc.call(
        "POST",
        "/v1/sys/auth/userpass",
        Some(json!({"type": "userpass"})),
    );
    let (_, mounts) = svc.call("GET", "/v1/sys/auth", None);
    let accessor = mounts["data"]["userpass/"]["accessor"]
        .as_str()
        .expect("userpass accessor")
        .to_string();
    let (status, e) = svc.call("GET", &format!("/v1/identity/entity/id/{entity}"), None);
    assert_eq!(status, 200, "entity: {e}");
    let user = e["data"]["name"].as_str().unwrap().to_lowercase();
    let (status, body) = svc.call(
        "POST",
        &format!("/v1/auth/userpass/users/{user}"),
        Some(json!({"password": "pw"})),
    );
    assert!(status < 300, "userpass user: {body}");
    let aliased = e["data"]["aliases"]
        .as_array()
        .is_some_and(|a| a.iter().any(|a| a["mount_accessor"] == accessor.as_str()));
    if !aliased {
        let (status, body) = svc.call(
            "POST",
            "/v1/identity/entity-alias",
            Some(json!({"name": user, "canonical_id": entity, "mount_accessor": accessor})),
        );
        assert!(status < 300, "entity alias: {body}");
    }
    let (status, body) = svc.call(
        "POST",
        &format!("/v1/identity/mfa/login-enforcement/e2e-{method}"),
        Some(json!({"mfa_method_ids": [method], "auth_method_accessors": [accessor], "identity_entity_ids": [entity]})),
    );
    assert!(status < 300, "login enforcement: {body}");

    let key = base32_decode(seed);
    let mut last = String::new();
    for attempt in 0..3 {
        if attempt > 0 {
            // The next period: a new code.
            std::thread::sleep(Duration::from_secs(30 - unix_now() % 30 + 1));
        }
        let (status, body) = http(
            "POST",
            &format!("{}/v1/auth/userpass/login/{user}", svc.url),
            None,
            Some(json!({"password": "pw"})),
        );
        assert_eq!(status, 200, "userpass login: {body}");
        let request = body["auth"]["mfa_requirement"]["mfa_request_id"]
            .as_str()
            .unwrap_or_else(|| panic!("the login asks for no MFA: {body}"))
            .to_string();
        let code = totp_sha256(&key, 30, 6);
        let (status, body) = http(
            "POST",
            &format!("{}/v1/sys/mfa/validate", svc.url),
            None,
            Some(json!({"mfa_request_id": request, "mfa_payload": {method: [code]}})),
        );
        if status == 200
            && body["auth"]["client_token"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        {
            return Ok(());
        }
        last = format!("{status} {body}");
    }
    Err(last)
}

fn png_size(bytes: &[u8]) -> (u32, u32) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let reader = decoder.read_info().expect("barcode.png is a PNG");
    let info = reader.info();
    (info.width, info.height)
}

fn an_enrollment_delivers_a_png_and_a_url_with_the_entitys_secret_and_regenerates_once(
    backend: Backend,
) {
    let env = env_on(backend, "5m", &[]);
    let (sb, op, svc) = (&env.sb, &env.op, &env.svc);
    let entity = create_entity(svc, "alice");
    // The enrollment waits for its TotpMethod.
    sb.apply_ok(&enrollment(
        "alice-totp",
        "{methodRef: {name: corp}, entityName: alice}",
    ));
    wait_for("waiting condition", WAIT, || {
        sb.get_json("totpenroll", "alice-totp").filter(|o| {
            condition(o, "Ready").is_some_and(|c| {
                c["status"] == "False" && c["message"].as_str().unwrap_or("").contains("corp")
            })
        })
    });
    sb.apply_ok(&totp_method(
        "corp",
        "{issuer: Acme, algorithm: SHA256, qrSize: 120}",
    ));
    let method = remote_id(&wait_ready(sb, "totp", "corp"));
    let obj = wait_ready(sb, "totpenroll", "alice-totp");
    assert_eq!(obj["status"]["entityId"], entity.as_str());
    assert_eq!(obj["status"]["methodId"], method.as_str());
    assert_eq!(obj["status"]["secretName"], "alice-totp");

    let data = result_secret(sb, "alice-totp").expect("result Secret");
    let url = String::from_utf8(data["url"].clone()).unwrap();
    let seed = assert_url_matches_service(&env, &url, &entity, &method);
    let (w, h) = png_size(&data["barcode.png"]);
    assert!(w >= 120 && w == h, "QR code is {w}x{h}");
    let secret = sb.get_json("secret", "alice-totp").unwrap();
    assert_eq!(
        secret["metadata"]["ownerReferences"][0]["name"],
        "alice-totp"
    );

    // Regenerate once: a new seed, recorded as handled; no further generate.
    sb.apply_ok(&enrollment(
        "alice-totp",
        "{methodRef: {name: corp}, entityName: alice, regenerate: first}",
    ));
    let obj = wait_for("regenerate handled", WAIT, || {
        sb.get_json("totpenroll", "alice-totp").filter(|o| {
            o["status"]["handledRegenerate"] == "first" && condition_is(o, "Ready", "True")
        })
    });
    let data = result_secret(sb, "alice-totp").unwrap();
    let url2 = String::from_utf8(data["url"].clone()).unwrap();
    let seed2 = assert_url_matches_service(&env, &url2, &entity, &method);
    assert_ne!(seed, seed2, "regenerate kept the old seed");
    let since = env.mark();
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        env.writes_since(since, |p| p.ends_with("/admin-generate")),
        Vec::<String>::new(),
        "generated again without a new regenerate value"
    );

    // No seed in status, Events or the operator log.
    let status = obj["status"].to_string();
    let evs = events(sb);
    let log = op.log();
    for s in [&seed, &seed2] {
        assert!(!status.contains(s.as_str()), "seed in status");
        assert!(!evs.contains(s.as_str()), "seed in events");
        assert!(!log.contains(s.as_str()), "seed in the operator log");
    }
    for text in [&status, &evs, &log] {
        assert!(!text.contains("otpauth"), "otpauth url leaked");
    }

    // Delete: the entity's secret is destroyed.
    sb.kubectl_ok(&[
        "delete",
        "totpenroll",
        "alice-totp",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(
        !holds_secret(&env, &entity, &method),
        "secret not destroyed"
    );
}

fn an_enrollment_by_method_and_entity_id_with_retain_keeps_the_secret(backend: Backend) {
    let env = env_on(backend, "5m", &[]);
    let (sb, svc) = (&env.sb, &env.svc);
    let entity = create_entity(svc, "bob");
    let method = svc.create_method(json!({"issuer": "Direct", "algorithm": "SHA256"}));
    sb.apply_ok(&enrollment(
        "bob",
        &format!("{{methodId: {method}, entityId: {entity}, secretName: bob-otp, deletionPolicy: Retain}}"),
    ));
    wait_ready(sb, "totpenroll", "bob");
    let data = result_secret(sb, "bob-otp").expect("result Secret");
    let url = String::from_utf8(data["url"].clone()).unwrap();
    assert_url_matches_service(&env, &url, &entity, &method);
    sb.kubectl_ok(&[
        "delete",
        "totpenroll",
        "bob",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(
        holds_secret(&env, &entity, &method),
        "retained secret was destroyed"
    );
}

#[test]
fn invalid_enrollments_are_refused_at_admission_with_the_rule_message() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let id = "0f0e4bd8-7c2c-4b1c-9f39-6c2a2b4d2f10";
    for (spec, message) in [
        (
            format!("{{methodId: {id}, entityId: e1, entityName: someone}}"),
            "exactly one of entityId and entityName must be set",
        ),
        (
            format!("{{methodId: {id}, methodRef: {{name: m}}, entityId: e}}"),
            "exactly one of methodRef and methodId must be set",
        ),
        (
            "{entityId: e}".to_string(),
            "exactly one of methodRef and methodId must be set",
        ),
    ] {
        let out = sb.apply_yaml(&enrollment("bad", &spec));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{spec} was accepted");
        assert!(err.contains(message), "{spec}: {err}");
    }
    sb.apply_ok(&enrollment(
        "fixed",
        &format!("{{methodId: {id}, entityId: e}}"),
    ));
    let out = sb.apply_yaml(&enrollment(
        "fixed",
        &format!("{{methodId: {id}, entityId: f}}"),
    ));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("immutable"));
}

#[test]
fn a_lost_generate_response_is_destroyed_and_generated_again_so_the_secret_matches() {
    let env = env_on(Backend::Sandbox, "5m", &[]);
    let (sb, svc) = (&env.sb, &env.svc);
    let entity = create_entity(svc, "carol");
    let method = svc.create_method(json!({"issuer": "Lossy", "algorithm": "SHA256"}));
    sandbox_fault(
        sb,
        json!({"method": "POST", "path": format!("{TOTP}/admin-generate"), "service": "secrets", "after": true}),
    );
    sb.apply_ok(&enrollment(
        "carol",
        &format!("{{methodId: {method}, entityName: carol}}"),
    ));
    let obj = wait_ready(sb, "totpenroll", "carol");
    assert!(obj["status"]["generateOutcomeUnknown"].is_null());
    let data = result_secret(sb, "carol").expect("result Secret");
    let url = String::from_utf8(data["url"].clone()).unwrap();
    assert_url_matches_service(&env, &url, &entity, &method);
    let (reqs, _) = sb.requests("secrets", 0);
    let generates = reqs
        .iter()
        .filter(|(m, p, _)| m == "POST" && p.ends_with("/admin-generate"))
        .count();
    assert_eq!(generates, 2, "one lost generate, one delivered");
}

// ---------------------------------------------------------------------------------------------
// IdpUser and IdpGroup

fn idp_resource(kind: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}, namespace: default}}\nspec: {spec}\n"
    )
}

fn sorted(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn idp_entry(svc: &Svc, kind: &str, name: &str) -> Option<Value> {
    let (status, body) = svc.call("GET", &format!("/v1/auth/idp/{kind}/{name}"), None);
    (status == 200).then(|| body["data"].clone())
}

#[test]
fn idp_users_and_groups_are_created_edited_restored_after_drift_recreated_and_deleted() {
    let (sb, _op, svc) = ready_env("2s");
    sb.apply_ok(&idp_resource(
        "IdpGroup",
        "ops",
        "{policies: [deploy, read]}",
    ));
    sb.apply_ok(&idp_resource(
        "IdpUser",
        "alice",
        "{groups: [ops], policies: [p1]}",
    ));
    wait_ready(&sb, "idpgroup", "ops");
    let user = wait_ready(&sb, "idpuser", "alice");
    assert_eq!(user["status"]["remoteId"], "alice");
    let g = idp_entry(&svc, "groups", "ops").expect("group exists");
    assert_eq!(sorted(&g["policies"]), vec!["deploy", "read"]);
    let u = idp_entry(&svc, "users", "alice").expect("user exists");
    assert_eq!(sorted(&u["policies"]), vec!["p1"]);
    assert_eq!(sorted(&u["groups"]), vec!["ops"]);

    // Edit.
    sb.apply_ok(&idp_resource(
        "IdpUser",
        "alice",
        "{groups: [ops], policies: [p1, p2]}",
    ));
    wait_for("edited user", WAIT, || {
        idp_entry(&svc, "users", "alice").filter(|u| sorted(&u["policies"]) == ["p1", "p2"])
    });

    // Remote edit of the group: restored, reported.
    let (status, _) = svc.call(
        "POST",
        "/v1/auth/idp/groups/ops",
        Some(json!({"policies": ["evil"]})),
    );
    assert!(status < 300);
    wait_for("group restored", WAIT, || {
        idp_entry(&svc, "groups", "ops").filter(|g| sorted(&g["policies"]) == ["deploy", "read"])
    });
    let obj = wait_for("driftedFields", WAIT, || {
        sb.get_json("idpgroup", "ops")
            .filter(|o| o["status"]["driftedFields"] == json!(["policies"]))
    });
    assert_eq!(obj["status"]["driftedFields"], json!(["policies"]));

    // Remote delete of the user: recreated.
    let (status, _) = svc.call("DELETE", "/v1/auth/idp/users/alice", None);
    assert!(status < 300);
    wait_for("user recreated", WAIT, || idp_entry(&svc, "users", "alice"));

    // Delete: gone.
    sb.kubectl_ok(&[
        "delete",
        "idpuser/alice",
        "idpgroup/ops",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(idp_entry(&svc, "users", "alice").is_none());
    assert!(idp_entry(&svc, "groups", "ops").is_none());
}

#[test]
fn an_existing_idp_user_is_adopted_keeping_unmanaged_lists_and_retain_keeps_it() {
    let (sb, _op, svc) = ready_env("5m");
    let (status, _) = svc.call(
        "POST",
        "/v1/auth/idp/users/bob",
        Some(json!({"policies": ["old"], "groups": ["legacy"]})),
    );
    assert!(status < 300);
    sb.apply_ok(&idp_resource(
        "IdpUser",
        "bob-user",
        "{username: bob, policies: [new], deletionPolicy: Retain}",
    ));
    let obj = wait_ready(&sb, "idpuser", "bob-user");
    assert_eq!(obj["status"]["remoteId"], "bob");
    let u = idp_entry(&svc, "users", "bob").unwrap();
    assert_eq!(sorted(&u["policies"]), vec!["new"]);
    assert_eq!(
        sorted(&u["groups"]),
        vec!["legacy"],
        "unmanaged groups kept"
    );
    sb.wait_events(&["Adopted"]);
    sb.kubectl_ok(&[
        "delete",
        "idpuser",
        "bob-user",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(
        idp_entry(&svc, "users", "bob").is_some(),
        "retained user deleted"
    );
}

#[test]
fn idp_names_and_mounts_cannot_change_after_creation() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.apply_ok(&idp_resource("IdpUser", "u", "{username: carol}"));
    for (spec, message) in [
        ("{username: dave}", "username is immutable"),
        ("{username: carol, mount: other}", "mount is immutable"),
    ] {
        let out = sb.apply_yaml(&idp_resource("IdpUser", "u", spec));
        assert!(!out.status.success(), "{spec} was accepted");
        assert!(String::from_utf8_lossy(&out.stderr).contains(message));
    }
    sb.apply_ok(&idp_resource("IdpGroup", "g", "{name: team}"));
    let out = sb.apply_yaml(&idp_resource("IdpGroup", "g", "{name: other}"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("name is immutable"));
}

// ---------------------------------------------------------------------------------------------
// IdpAuthMethod

fn idp_config(svc: &Svc, mount: &str) -> Option<Value> {
    let (status, body) = svc.call("GET", &format!("/v1/auth/{mount}/config"), None);
    (status == 200).then(|| body["data"].clone())
}

fn config_writes(sb: &Sandbox, since: u64) -> usize {
    calls(sb, since, "POST", "/v1/auth/idp/config")
}

#[test]
fn idp_auth_method_sends_every_field_and_a_rotated_api_token_is_written_once() {
    let (sb, op, svc) = ready_env("2s");
    let t1 = unique_token();
    let t2 = unique_token();
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: idp-api, namespace: default}}\nstringData: {{token: {t1}}}\n"
    ));
    sb.apply_ok(&idp_resource(
        "IdpAuthMethod",
        "idp",
        "{orgName: acme, apiTokenSecretRef: {name: idp-api, key: token}, baseUrl: example.com, bypassIdpMfa: true, \
         token: {ttl: 1h, maxTtl: 2h, explicitMaxTtl: 3h, period: 30m, policies: [b, a], boundCidrs: [127.0.0.1/32], noDefaultPolicy: true, numUses: 5, type: service}}",
    ));
    let obj = wait_ready(&sb, "idpauth", "idp");
    assert_eq!(obj["status"]["remoteId"], "idp");
    let c = idp_config(&svc, "idp").expect("config exists");
    assert_eq!(c["org_name"], "acme");
    assert_eq!(c["base_url"], "example.com");
    assert_eq!(c["bypass_idp_mfa"], true);
    assert_eq!(c["token_ttl"], 3600);
    assert_eq!(c["token_max_ttl"], 7200);
    assert_eq!(c["token_explicit_max_ttl"], 10800);
    assert_eq!(c["token_period"], 1800);
    assert_eq!(sorted(&c["token_policies"]), vec!["a", "b"]);
    assert_eq!(sorted(&c["token_bound_cidrs"]), vec!["127.0.0.1/32"]);
    assert_eq!(c["token_no_default_policy"], true);
    assert_eq!(c["token_num_uses"], 5);
    assert_eq!(c["token_type"], "service");
    assert!(c.get("api_token").is_none());
    let hash1 = obj["status"]["writeOnlyHash"]
        .as_str()
        .expect("keyed hash")
        .to_string();

    // In sync: resyncs write nothing.
    let (_, since) = sb.requests("secrets", 0);
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        config_writes(&sb, since),
        0,
        "in-sync resyncs wrote the config"
    );

    // Rotating the Secret: exactly one write, soon (the Secret is watched).
    let (_, since) = sb.requests("secrets", 0);
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: idp-api, namespace: default}}\nstringData: {{token: {t2}}}\n"
    ));
    wait_for("new keyed hash", WAIT, || {
        sb.get_json("idpauth", "idp").filter(|o| {
            o["status"]["writeOnlyHash"]
                .as_str()
                .is_some_and(|h| h != hash1)
        })
    });
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        config_writes(&sb, since),
        1,
        "the rotated token was not written exactly once"
    );

    // A remote edit is restored and reported.
    let (status, _) = svc.call(
        "POST",
        "/v1/auth/idp/config",
        Some(json!({"org_name": "evil"})),
    );
    assert!(status < 300);
    wait_for("org restored", WAIT, || {
        idp_config(&svc, "idp").filter(|c| c["org_name"] == "acme")
    });
    let obj = wait_for("driftedFields", WAIT, || {
        sb.get_json("idpauth", "idp")
            .filter(|o| o["status"]["driftedFields"] == json!(["orgName"]))
    });
    assert_eq!(obj["status"]["driftedFields"], json!(["orgName"]));

    // Neither token reaches status, Events or the log.
    let status = obj["status"].to_string();
    let evs = events(&sb);
    let log = op.log();
    for t in [&t1, &t2] {
        assert!(
            !status.contains(t.as_str()) && !evs.contains(t.as_str()) && !log.contains(t.as_str()),
            "api token leaked"
        );
    }

    // Without enableMount, deletion leaves the configuration and says so.
    sb.kubectl_ok(&["delete", "idpauth", "idp", "--wait=true", "--timeout=60s"]);
    assert!(idp_config(&svc, "idp").is_some(), "config removed");
    sb.wait_events(&["Retained"]);
}

#[test]
fn enable_mount_creates_the_auth_method_and_deletion_disables_it() {
    let (sb, _op, svc) = ready_env("5m");
    sb.apply_ok(&idp_resource(
        "IdpAuthMethod",
        "corp",
        "{mount: corp-idp, orgName: corp, enableMount: true}",
    ));
    wait_ready(&sb, "idpauth", "corp");
    let (_, mounts) = svc.call("GET", "/v1/sys/auth", None);
    let mounts = if mounts["data"].is_object() {
        &mounts["data"]
    } else {
        &mounts
    };
    assert_eq!(mounts["corp-idp/"]["type"], "idp");
    assert_eq!(idp_config(&svc, "corp-idp").unwrap()["org_name"], "corp");
    sb.kubectl_ok(&["delete", "idpauth", "corp", "--wait=true", "--timeout=60s"]);
    let (_, mounts) = svc.call("GET", "/v1/sys/auth", None);
    let mounts = if mounts["data"].is_object() {
        &mounts["data"]
    } else {
        &mounts
    };
    assert!(mounts.get("corp-idp/").is_none(), "mount still enabled");
}

#[test]
fn invalid_idp_auth_methods_are_refused_at_admission_with_the_rule_message() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    for (spec, message) in [
        (
            "{orgName: a, token: {type: batch, numUses: 3}}",
            "when set to generate tokens with limited use count",
        ),
        (
            "{orgName: a, token: {type: batch, period: 1h}}",
            "when set to generate periodic tokens",
        ),
        (
            "{orgName: a, token: {type: other}}",
            "type must be service, batch or default",
        ),
        ("{orgName: a, token: {ttl: soon}}", "token.ttl"),
        ("{orgName: ''}", "orgName must not be empty"),
    ] {
        let out = sb.apply_yaml(&idp_resource("IdpAuthMethod", "bad", spec));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{spec} was accepted");
        assert!(err.contains(message), "{spec}: {err}");
    }
    sb.apply_ok(&idp_resource("IdpAuthMethod", "m", "{orgName: a}"));
    let out = sb.apply_yaml(&idp_resource(
        "IdpAuthMethod",
        "m",
        "{orgName: a, mount: x}",
    ));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("mount is immutable"));
}

// ---------------------------------------------------------------------------------------------
// quartet login idp

fn idp_login_env() -> Sandbox {
    let sb = Sandbox::start(&[]);
    let svc = Svc::of(&sb);
    let (status, _) = svc.call(
        "POST",
        "/v1/auth/idp/config",
        Some(json!({"org_name": "acme"})),
    );
    assert!(status < 300);
    sb
}

fn provider_user(sb: &Sandbox, name: &str, user: Value) -> Value {
    let (status, body) = http(
        "PUT",
        &format!("{}/_sandbox/secrets/idp/users/{name}", sb.url("secrets")),
        None,
        Some(user),
    );
    assert!(status < 300, "provider user: {body}");
    body
}

fn token_works(sb: &Sandbox, token: &str) -> bool {
    let (status, _) = http(
        "GET",
        &format!("{}/v1/auth/token/lookup-self", sb.url("secrets")),
        Some(("X-Secrets-Token", token)),
        None,
    );
    status == 200
}

fn login_command(sb: &Sandbox, user: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["login", "idp", user, "--address", sb.url("secrets")])
        .env_remove("QUARTET_PASSWORD")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

#[test]
fn quartet_login_idp_asks_for_the_passcode_of_the_verification_app_and_prints_the_token() {
    use std::io::Write;
    let sb = idp_login_env();
    provider_user(
        &sb,
        "alice",
        json!({"password": "pw-alice", "totp": {"provider": "OKTA"}}),
    );
    let (_, code) = http(
        "GET",
        &format!(
            "{}/_sandbox/secrets/idp/users/alice/totp",
            sb.url("secrets")
        ),
        None,
        None,
    );
    let code = code["code"].as_str().expect("passcode").to_string();
    let mut child = login_command(&sb, "alice").spawn().expect("quartet login");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("pw-alice\n{code}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "login failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(token_works(&sb, &token), "the printed token is not valid");

    // A wrong password is refused with the service's message.
    let mut child = login_command(&sb, "alice").spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"wrong\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("idp auth failed"));
}

#[test]
fn quartet_login_idp_prints_the_number_to_pick_while_the_push_waits() {
    use std::io::{BufRead, Write};
    let sb = idp_login_env();
    provider_user(
        &sb,
        "bob",
        json!({"password": "pw-bob", "push": {"provider": "OKTA", "response": "manual", "number_challenge": true, "correct_answer": 42}}),
    );
    let mut cmd = login_command(&sb, "bob");
    cmd.args(["-o", "json"]);
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"pw-bob\n").unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the number to pick is printed");
    assert!(line.contains("42"), "{line}");
    let (status, _) = http(
        "POST",
        &format!("{}/_sandbox/secrets/idp/push/bob", sb.url("secrets")),
        None,
        Some(json!({"answer": 42})),
    );
    assert!(status < 300);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let auth: Value = serde_json::from_slice(&out.stdout).expect("auth as JSON");
    assert!(token_works(&sb, auth["client_token"].as_str().unwrap()));
}

fn an_entity_enrolled_elsewhere_is_not_replaced_until_regenerate_asks_for_it(backend: Backend) {
    let env = env_on(backend, "5m", &[]);
    let (sb, svc) = (&env.sb, &env.svc);
    let entity = create_entity(svc, "dora");
    let method = svc.create_method(json!({"issuer": "Elsewhere", "algorithm": "SHA256"}));
    let (status, body) = svc.call(
        "POST",
        &format!("{TOTP}/admin-generate"),
        Some(json!({"method_id": method, "entity_id": entity})),
    );
    assert!(status < 300);
    let old_seed = query_param(body["data"]["url"].as_str().expect("url"), "secret").unwrap();
    sb.apply_ok(&enrollment(
        "dora",
        &format!("{{methodId: {method}, entityId: {entity}}}"),
    ));
    let obj = wait_for("AlreadyEnrolled", WAIT, || {
        sb.get_json("totpenroll", "dora")
            .filter(|o| condition(o, "Ready").is_some_and(|c| c["reason"] == "AlreadyEnrolled"))
    });
    assert!(condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("regenerate"));
    assert_seed_is_the_entitys(&env, &old_seed, &entity, &method);
    assert!(result_secret(sb, "dora").is_none());
    sb.apply_ok(&enrollment(
        "dora",
        &format!("{{methodId: {method}, entityId: {entity}, regenerate: now}}"),
    ));
    wait_ready(sb, "totpenroll", "dora");
    let data = result_secret(sb, "dora").expect("result Secret");
    let seed = assert_url_matches_service(
        &env,
        &String::from_utf8(data["url"].clone()).unwrap(),
        &entity,
        &method,
    );
    assert_ne!(seed, old_seed);
}
