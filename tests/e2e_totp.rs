//! TotpMethod, TotpEnrollment and the Connection's `features` end to end: the built `quartet`
//! binary against the dev API server and the sandbox's secrets service, driven with the real
//! `kubectl`, the service read over HTTP in the test.
//!
//! The test bodies reach the service only through [`Svc`] (an address and a token header), so
//! they can run against a real server as well; sandbox-only tools (faults, the request log, the
//! admin view of an entity's TOTP secret) are used only where a real server has no equivalent.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
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

#[test]
fn a_totp_method_is_created_edited_restored_after_drift_and_recreated_after_remote_delete() {
    let (sb, _op, svc) = ready_env("2s");
    sb.apply_ok(&totp_method(
        "corp",
        "{issuer: Acme, periodSeconds: 60, digits: 8, algorithm: SHA256, skew: 0, keySize: 32, qrSize: 150, maxValidationAttempts: 7}",
    ));
    let obj = wait_ready(&sb, "totp", "corp");
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
    assert!(events(&sb).contains("Created"));

    // Edit: the same method is updated in place.
    sb.apply_ok(&totp_method(
        "corp",
        "{issuer: Acme Corp, periodSeconds: 60, digits: 6, algorithm: SHA256, skew: 0, keySize: 32, qrSize: 150, maxValidationAttempts: 7}",
    ));
    wait_for("edited method", WAIT, || {
        svc.method(&id)
            .filter(|m| m["issuer"] == "Acme Corp" && m["digits"] == 6)
    });
    let obj = wait_ready(&sb, "totp", "corp");
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
        sb.get_json("totp", "corp").filter(|o| {
            o["status"]["driftedFields"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
    });
    assert_eq!(obj["status"]["driftedFields"], json!(["issuer"]));
    assert!(events(&sb).contains("DriftCorrected"));

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

#[test]
fn retain_keeps_the_method_and_an_existing_method_is_adopted_by_its_id() {
    let (sb, _op, svc) = ready_env("5m");
    let id = svc.create_method(json!({"issuer": "Before", "digits": 8}));
    sb.apply_ok(&totp_method(
        "adopted",
        &format!("{{issuer: After, methodId: {id}, deletionPolicy: Retain}}"),
    ));
    let obj = wait_ready(&sb, "totp", "adopted");
    assert_eq!(remote_id(&obj), id);
    let m = svc.method(&id).unwrap();
    assert_eq!(m["issuer"], "After");
    assert_eq!(m["digits"], 8, "a setting the spec leaves out is kept");
    assert_eq!(svc.method_ids(), vec![id.clone()], "no second method");
    assert!(events(&sb).contains("Adopted"));

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
    assert!(String::from_utf8_lossy(&out.stderr).contains("methodId is immutable"));
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

#[test]
fn deleting_a_method_used_by_a_login_enforcement_is_blocked_until_it_is_released() {
    let (sb, _op, svc) = ready_env("2s");
    sb.apply_ok(&totp_method("enforced", "{issuer: Enforced}"));
    let id = remote_id(&wait_ready(&sb, "totp", "enforced"));
    let (status, body) = svc.call(
        "POST",
        "/v1/identity/mfa/login-enforcement/everyone",
        Some(json!({"mfa_method_ids": [id], "auth_method_types": ["userpass"]})),
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

#[test]
fn a_connection_lists_features_and_a_method_without_its_feature_is_unsupported_without_a_write() {
    let (sb, _op, svc) = ready_env("5m");
    let conn = wait_for("features", WAIT, || {
        sb.get_json("connection", "secrets")
            .filter(|c| c["status"]["features"].is_array())
    });
    let features = conn["status"]["features"].to_string();
    for f in ["acl-policies", "idp", "mfa-totp", "leases"] {
        assert!(features.contains(f), "{f} missing from {features}");
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
         spec: {{service: secrets, address: \"{}\", tokenSecretRef: {{name: narrow-token, key: token}}}}\n",
        svc.url
    ));
    let conn = wait_for("narrow features", WAIT, || {
        sb.get_json("connection", "narrow")
            .filter(|c| c["status"]["features"].is_array())
    });
    let features = conn["status"]["features"].to_string();
    assert!(features.contains("acl-policies"), "{features}");
    assert!(!features.contains("mfa-totp"), "{features}");

    let (_, since) = sb.requests("secrets", 0);
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
    assert_eq!(calls(&sb, since, "POST", TOTP), 0, "a write was sent");
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
    let obj = wait_ready(&sb, "totp", "narrow");
    assert_eq!(svc.method_ids(), vec![remote_id(&obj)]);
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

/// RFC 6238 TOTP with HMAC-SHA256.
fn totp_sha256(key: &[u8], period: u64, digits: u32) -> String {
    use hmac::{Hmac, Mac};
    let counter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / period;
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

/// The url's seed gives the same codes as the service's view of the entity's secret.
fn assert_url_matches_service(sb: &Sandbox, url: &str, entity: &str, method: &str) -> String {
    assert!(url.starts_with("otpauth://totp/"), "not an otpauth url");
    let seed = query_param(url, "secret").expect("secret in url");
    let (admin_seed, _) = admin_view(sb, entity, method).expect("entity holds a secret");
    assert_eq!(
        seed, admin_seed,
        "the url's seed is not the entity's secret"
    );
    let key = base32_decode(&seed);
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
    seed
}

fn png_size(bytes: &[u8]) -> (u32, u32) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let reader = decoder.read_info().expect("barcode.png is a PNG");
    let info = reader.info();
    (info.width, info.height)
}

#[test]
fn an_enrollment_delivers_a_png_and_a_url_with_the_entitys_secret_and_regenerates_once() {
    let (sb, op, svc) = ready_env("5m");
    let entity = create_entity(&svc, "alice");
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
    let method = remote_id(&wait_ready(&sb, "totp", "corp"));
    let obj = wait_ready(&sb, "totpenroll", "alice-totp");
    assert_eq!(obj["status"]["entityId"], entity.as_str());
    assert_eq!(obj["status"]["methodId"], method.as_str());
    assert_eq!(obj["status"]["secretName"], "alice-totp");

    let data = result_secret(&sb, "alice-totp").expect("result Secret");
    let url = String::from_utf8(data["url"].clone()).unwrap();
    let seed = assert_url_matches_service(&sb, &url, &entity, &method);
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
    let data = result_secret(&sb, "alice-totp").unwrap();
    let url2 = String::from_utf8(data["url"].clone()).unwrap();
    let seed2 = assert_url_matches_service(&sb, &url2, &entity, &method);
    assert_ne!(seed, seed2, "regenerate kept the old seed");
    let (_, since) = sb.requests("secrets", 0);
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        calls(&sb, since, "POST", &format!("{TOTP}/admin-generate")),
        0,
        "generated again without a new regenerate value"
    );

    // No seed in status, Events or the operator log.
    let status = obj["status"].to_string();
    let evs = events(&sb);
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
        admin_view(&sb, &entity, &method).is_none(),
        "secret not destroyed"
    );
}

#[test]
fn an_enrollment_by_method_and_entity_id_with_retain_keeps_the_secret() {
    let (sb, _op, svc) = ready_env("5m");
    let entity = create_entity(&svc, "bob");
    let method = svc.create_method(json!({"issuer": "Direct", "algorithm": "SHA256"}));
    sb.apply_ok(&enrollment(
        "bob",
        &format!("{{methodId: {method}, entityId: {entity}, secretName: bob-otp, deletionPolicy: Retain}}"),
    ));
    wait_ready(&sb, "totpenroll", "bob");
    let data = result_secret(&sb, "bob-otp").expect("result Secret");
    let url = String::from_utf8(data["url"].clone()).unwrap();
    assert_url_matches_service(&sb, &url, &entity, &method);
    sb.kubectl_ok(&[
        "delete",
        "totpenroll",
        "bob",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(
        admin_view(&sb, &entity, &method).is_some(),
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
    let (sb, _op, svc) = ready_env("5m");
    let entity = create_entity(&svc, "carol");
    let method = svc.create_method(json!({"issuer": "Lossy", "algorithm": "SHA256"}));
    sandbox_fault(
        &sb,
        json!({"method": "POST", "path": format!("{TOTP}/admin-generate"), "service": "secrets", "after": true}),
    );
    sb.apply_ok(&enrollment(
        "carol",
        &format!("{{methodId: {method}, entityName: carol}}"),
    ));
    let obj = wait_ready(&sb, "totpenroll", "carol");
    assert!(obj["status"]["generateOutcomeUnknown"].is_null());
    let data = result_secret(&sb, "carol").expect("result Secret");
    let url = String::from_utf8(data["url"].clone()).unwrap();
    assert_url_matches_service(&sb, &url, &entity, &method);
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
        sb.get_json("idpgroup", "ops").filter(|o| {
            o["status"]["driftedFields"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
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
    assert!(events(&sb).contains("Adopted"));
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
        sb.get_json("idpauth", "idp").filter(|o| {
            o["status"]["driftedFields"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
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
    assert!(events(&sb).contains("Retained"));
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

#[test]
fn an_entity_enrolled_elsewhere_is_not_replaced_until_regenerate_asks_for_it() {
    let (sb, _op, svc) = ready_env("5m");
    let entity = create_entity(&svc, "dora");
    let method = svc.create_method(json!({"issuer": "Elsewhere", "algorithm": "SHA256"}));
    let (status, _) = svc.call(
        "POST",
        &format!("{TOTP}/admin-generate"),
        Some(json!({"method_id": method, "entity_id": entity})),
    );
    assert!(status < 300);
    let (old_seed, _) = admin_view(&sb, &entity, &method).unwrap();
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
    assert_eq!(admin_view(&sb, &entity, &method).unwrap().0, old_seed);
    assert!(result_secret(&sb, "dora").is_none());
    sb.apply_ok(&enrollment(
        "dora",
        &format!("{{methodId: {method}, entityId: {entity}, regenerate: now}}"),
    ));
    wait_ready(&sb, "totpenroll", "dora");
    let data = result_secret(&sb, "dora").expect("result Secret");
    let seed = assert_url_matches_service(
        &sb,
        &String::from_utf8(data["url"].clone()).unwrap(),
        &entity,
        &method,
    );
    assert_ne!(seed, old_seed);
}
