//! Directory engine kinds end to end (AdEngine, AdRole, AdLibrarySet, AdCheckout): the built
//! `quartet` binary against the dev API server and the sandbox's secrets service, driven with
//! the real `kubectl`; directory accounts are created through the sandbox admin API and the
//! service is read over HTTP.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const WAIT: Duration = Duration::from_secs(90);
const ADMIN_DN: &str = "CN=admin,CN=Users,DC=example,DC=com";
const BIND_PW: &str = "bind-pw-0123456789";

fn env(resync: &str) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, resync);
    (sb, op)
}

fn admin(sb: &Sandbox, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    http(
        method,
        &format!("{}/_sandbox/secrets/ad/{path}", sb.url("secrets")),
        None,
        body,
    )
}

fn account(sb: &Sandbox, upn: &str, dn: &str, pw: &str) {
    let (s, b) = admin(
        sb,
        "PUT",
        &format!("accounts/{upn}"),
        Some(json!({"dn": dn, "password": pw})),
    );
    assert_eq!(s, 204, "{b}");
}

fn dir_password(sb: &Sandbox, upn: &str) -> String {
    admin(sb, "GET", &format!("accounts/{upn}"), None).1["password"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The bind account and service accounts svc@, lib1@, lib2@ (example.com).
fn directory(sb: &Sandbox) {
    account(sb, "admin@example.com", ADMIN_DN, BIND_PW);
    for a in ["svc", "lib1", "lib2"] {
        account(
            sb,
            &format!("{a}@example.com"),
            &format!("CN={a},OU=Svc,DC=example,DC=com"),
            "initial-pw",
        );
    }
}

fn engine_yaml(extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: bind, namespace: default}}\nstringData: {{password: {BIND_PW}}}\n---\n\
         apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdEngine\nmetadata: {{name: ad, namespace: default}}\n\
         spec:\n  binddn: \"{ADMIN_DN}\"\n  bindpassSecretRef: {{name: bind, key: password}}\n  userdn: DC=example,DC=com\n{extra}"
    )
}

fn wait_ready(sb: &Sandbox, kind: &str, name: &str) -> Value {
    wait_for(&format!("{kind}/{name} Ready"), WAIT, || {
        sb.get_json(kind, name).filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    })
}

fn wait_reason(sb: &Sandbox, kind: &str, name: &str, reason: &str) -> Value {
    wait_for(&format!("{kind}/{name} Ready=False {reason}"), WAIT, || {
        sb.get_json(kind, name).filter(|o| {
            condition(o, "Ready").is_some_and(|c| c["status"] == "False" && c["reason"] == reason)
        })
    })
}

fn secret_data(sb: &Sandbox, name: &str) -> Option<Value> {
    let s = sb.get_json("secret", name)?;
    let data = s["data"].as_object()?;
    let mut out = serde_json::Map::new();
    for (k, v) in data {
        let bytes = base64_decode(v.as_str().unwrap_or_default());
        out.insert(k.clone(), json!(String::from_utf8(bytes).unwrap()));
    }
    Some(Value::Object(out))
}

fn base64_decode(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut buf, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        let Some(v) = A.iter().position(|a| *a == c) else {
            continue;
        };
        buf = (buf << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

fn count(sb: &Sandbox, since: u64, method: &str, path: &str) -> usize {
    sb.requests("secrets", since)
        .0
        .iter()
        .filter(|(m, p, _)| m == method && p == path)
        .count()
}

/// Everything a leak could reach: the operator's log, Events, and the resources' status.
fn assert_no_leak(sb: &Sandbox, op: &Operator, secrets: &[&str]) {
    let events = sb.kubectl_ok(&["get", "events", "-A", "-o", "json"]);
    let objects = sb.kubectl_ok(&[
        "get",
        "adengines,adroles,adlibrarysets,adcheckouts",
        "-A",
        "-o",
        "json",
    ]);
    let log = op.log();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        assert!(!log.contains(s), "a secret is in the operator log");
        assert!(!events.contains(s), "a secret is in an Event");
        assert!(!objects.contains(s), "a secret is in a resource");
    }
}

#[test]
fn engine_is_configured_as_the_spec_says_and_a_root_rotation_on_create_survives_an_edit_and_a_restart(
) {
    let (sb, op) = env("3s");
    directory(&sb);
    sb.apply_ok(&engine_yaml(
        "  url: ldap://dc1.example.com\n  ttl: 1h\n  maxTtl: 10h\n  connectionTimeout: 10s\n  rotateRoot: {policy: OnCreate}\n",
    ));
    let obj = wait_for("root rotated", WAIT, || {
        sb.get_json("adengine", "ad").filter(|o| {
            condition_is(o, "Ready", "True") && o["status"]["lastRootRotation"].is_string()
        })
    });
    assert_eq!(obj["status"]["remoteId"], "ad/config");
    let (s, cfg) = sb.secrets("GET", "/v1/ad/config", None);
    assert_eq!(s, 200);
    let d = &cfg["data"];
    assert_eq!(d["binddn"], ADMIN_DN);
    assert_eq!(d["url"], "ldap://dc1.example.com");
    assert_eq!(d["userdn"], "DC=example,DC=com");
    assert_eq!(d["ttl"], 3600);
    assert_eq!(d["max_ttl"], 36000);
    // Only the service knows the bind password now.
    let rotated = dir_password(&sb, "admin@example.com");
    assert_ne!(rotated, BIND_PW);

    // An edit of another field leaves the bind password out: the service keeps the rotated one
    // (a bind with it works: a role's credentials can be read).
    let since = sb.requests("secrets", 0).1;
    sb.apply_ok(&engine_yaml(
        "  url: ldap://dc2.example.com\n  ttl: 1h\n  maxTtl: 10h\n  connectionTimeout: 10s\n  rotateRoot: {policy: OnCreate}\n",
    ));
    wait_for("url updated", WAIT, || {
        let (_, c) = sb.secrets("GET", "/v1/ad/config", None);
        (c["data"]["url"] == "ldap://dc2.example.com").then_some(())
    });
    wait_ready(&sb, "adengine", "ad");
    assert_eq!(dir_password(&sb, "admin@example.com"), rotated);
    assert_eq!(count(&sb, since, "POST", "/v1/ad/rotate-root"), 0);
    let (s, _) = sb.secrets(
        "POST",
        "/v1/ad/roles/probe",
        Some(json!({"service_account_name": "svc@example.com"})),
    );
    assert_eq!(s, 204);
    let (s, b) = sb.secrets("GET", "/v1/ad/creds/probe", None);
    assert_eq!(s, 200, "the service no longer binds: {b}");

    // A restart of the operator: no new rotation, no bind password sent, still in force.
    let log1 = op.stop();
    let since = sb.requests("secrets", 0).1;
    let op = Operator::start(&sb, "3s");
    std::thread::sleep(Duration::from_secs(8));
    wait_ready(&sb, "adengine", "ad");
    assert_eq!(count(&sb, since, "POST", "/v1/ad/rotate-root"), 0);
    assert_eq!(count(&sb, since, "POST", "/v1/ad/config"), 0);
    let (s, _) = sb.secrets("POST", "/v1/ad/rotate-role/probe", None);
    assert_eq!(s, 204);
    assert!(!log1.contains(BIND_PW));
    assert_no_leak(&sb, &op, &[BIND_PW, &rotated]);
}

#[test]
fn a_changed_bind_password_secret_is_sent_and_other_edits_never_send_it() {
    let (sb, _op) = env("3s");
    directory(&sb);
    sb.apply_ok(&engine_yaml("  url: ldap://a\n"));
    wait_ready(&sb, "adengine", "ad");
    // Remote drift is restored.
    let (s, _) = sb.secrets("POST", "/v1/ad/config", Some(json!({"url": "ldap://evil"})));
    assert_eq!(s, 204);
    let obj = wait_for("drift corrected", WAIT, || {
        sb.get_json("adengine", "ad").filter(|o| {
            o["status"]["driftedFields"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "url"))
        })
    });
    assert!(condition_is(&obj, "Ready", "True"));
    let (_, c) = sb.secrets("GET", "/v1/ad/config", None);
    assert_eq!(c["data"]["url"], "ldap://a");
    // The directory's admin password changes, and so does the Secret: the new one is sent
    // (a rotation through the service then works).
    account(&sb, "admin@example.com", ADMIN_DN, "second-bind-pw-99");
    sb.apply_ok(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: bind, namespace: default}\nstringData: {password: second-bind-pw-99}\n",
    );
    wait_for("new bind password in force", WAIT, || {
        let (s, _) = sb.secrets(
            "POST",
            "/v1/ad/roles/probe",
            Some(json!({"service_account_name": "svc@example.com"})),
        );
        let (s2, _) = sb.secrets("GET", "/v1/ad/creds/probe", None);
        (s == 204 && s2 == 200).then_some(())
    });
    // Delete removes the config.
    sb.kubectl_ok(&["delete", "adengine", "ad", "--timeout=60s"]);
    assert_eq!(sb.secrets("GET", "/v1/ad/config", None).0, 404);
}

/// A pass never decides from a copy older than its own last status write. The dev API server's
/// watch of AdEngines lags 3 s behind the writes, as a busy server's watch cache does. The bind
/// password Secret changes: that wake's pass sends the new password and records its hash in
/// status. Then the Secret changes again (an annotation, the password unchanged) while the cache
/// still holds the copy from before that pass, with the old password's hash: a pass deciding
/// from it would send the password a second time.
#[test]
fn a_wake_while_the_cache_lags_behind_the_last_status_write_sends_the_bind_password_once() {
    let (sb, op) = env("300s");
    directory(&sb);
    sb.apply_ok(&engine_yaml("  url: ldap://a\n"));
    wait_ready(&sb, "adengine", "ad");
    sb.lag_watches("adengines", Duration::from_secs(3));
    account(&sb, "admin@example.com", ADMIN_DN, "second-bind-pw-99");
    let since = sb.requests("secrets", 0).1;
    sb.apply_ok(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: bind, namespace: default}\nstringData: {password: second-bind-pw-99}\n",
    );
    wait_for("the new bind password sent", WAIT, || {
        (count(&sb, since, "POST", "/v1/ad/config") == 1).then_some(())
    });
    let woken = sb.requests("secrets", 0).1;
    sb.kubectl_ok(&["annotate", "secret", "bind", "example.com/touched=1"]);
    // The second wake's pass reads the config (after the lag, from the current copy) ...
    wait_for("the second wake's pass", WAIT, || {
        (count(&sb, woken, "GET", "/v1/ad/config") >= 1).then_some(())
    });
    // ... and a write would follow that read at once.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        count(&sb, since, "POST", "/v1/ad/config"),
        1,
        "the bind password was sent again from a copy without its hash"
    );
    let obj = wait_ready(&sb, "adengine", "ad");
    assert!(condition_is(&obj, "Synced", "True"));
    assert_no_leak(&sb, &op, &["second-bind-pw-99"]);
}

#[test]
fn a_refused_config_is_a_condition_without_retries_and_a_role_edited_outside_is_restored() {
    let (sb, _op) = env("3s");
    directory(&sb);
    sb.apply_ok(&engine_yaml(
        "  ttl: 10h
  maxTtl: 1h
",
    ));
    let obj = wait_reason(&sb, "adengine", "ad", "InvalidSpec");
    let msg = condition(&obj, "Ready").unwrap()["message"].to_string();
    assert!(
        msg.contains("ttl must be smaller than or equal to max_ttl"),
        "{msg}"
    );
    let since = sb.requests("secrets", 0).1;
    std::thread::sleep(Duration::from_secs(5));
    assert!(count(&sb, since, "POST", "/v1/ad/config") <= 2);
    // Fixing the spec applies at once.
    sb.apply_ok(&engine_yaml(
        "  ttl: 1h
  maxTtl: 10h
",
    ));
    wait_ready(&sb, "adengine", "ad");

    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdRole\nmetadata: {name: app, namespace: default}\n\
         spec: {serviceAccountName: svc@example.com, ttl: 30m}\n",
    );
    let obj = wait_ready(&sb, "adrole", "app");
    // Without credentialsSecret nothing reads the credentials: no rotation yet.
    assert!(obj["status"]["lastVaultRotation"].is_null());
    let (s, _) = sb.secrets(
        "POST",
        "/v1/ad/roles/app",
        Some(json!({"service_account_name": "svc@example.com", "ttl": 60})),
    );
    assert_eq!(s, 204);
    wait_for("role drift corrected", WAIT, || {
        sb.get_json("adrole", "app").filter(|o| {
            o["status"]["driftedFields"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "ttl"))
        })
    });
    assert_eq!(
        sb.secrets("GET", "/v1/ad/roles/app", None).1["data"]["ttl"],
        1800
    );
    // Retain keeps the role in the service.
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdRole\nmetadata: {name: app, namespace: default}\n\
         spec: {serviceAccountName: svc@example.com, ttl: 30m, deletionPolicy: Retain}\n",
    );
    wait_ready(&sb, "adrole", "app");
    sb.kubectl_ok(&["delete", "adrole", "app", "--timeout=60s"]);
    assert_eq!(sb.secrets("GET", "/v1/ad/roles/app", None).0, 200);
}

#[test]
fn invalid_engine_manifests_are_refused_with_the_rule() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    for (extra, msg) in [
        ("  length: 13\n", "length must be at least 14"),
        ("  formatter: corp\n", "{{PASSWORD}} exactly once"),
        (
            "  formatter: \"{{PASSWORD}}-{{PASSWORD}}\"\n",
            "{{PASSWORD}} exactly once",
        ),
        (
            "  passwordPolicy: p\n  length: 20\n",
            "passwordPolicy is mutually exclusive",
        ),
        (
            "  rotateRoot: {policy: Interval}\n",
            "rotateRoot.interval is required",
        ),
    ] {
        let out = sb.apply_yaml(&engine_yaml(extra));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(msg), "{extra}: {err}");
    }
    sb.apply_ok(&engine_yaml("  mount: ad\n"));
    let out = sb.apply_yaml(&engine_yaml("  mount: other\n"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mount is immutable"));
}

#[test]
fn a_server_without_the_directory_engine_reports_unsupported_without_retrying() {
    let (sb, _op) = env("1m");
    directory(&sb);
    sb.apply_ok(&engine_yaml("  mount: nodirectory\n"));
    let obj = wait_reason(&sb, "adengine", "ad", "Unsupported");
    let msg = condition(&obj, "Ready").unwrap()["message"].to_string();
    assert!(msg.contains("not available"), "{msg}");
    let since = sb.requests("secrets", 0).1;
    std::thread::sleep(Duration::from_secs(6));
    assert!(count(&sb, since, "GET", "/v1/nodirectory/config") <= 1);
}

#[test]
fn role_keeps_its_credentials_in_an_owned_secret_and_rotates_on_request() {
    let (sb, op) = env("3s");
    directory(&sb);
    // The role first: it waits for the engine's config instead of failing for good.
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdRole\nmetadata: {name: app, namespace: default}\n\
         spec: {serviceAccountName: svc@example.com, ttl: 1h, credentialsSecret: {name: app-creds}}\n",
    );
    wait_reason(&sb, "adrole", "app", "ReferenceMissing");
    sb.apply_ok(&engine_yaml("  ttl: 2h\n"));
    let obj = wait_for("credentials", WAIT, || {
        sb.get_json("adrole", "app").filter(|o| {
            condition_is(o, "Ready", "True") && o["status"]["lastVaultRotation"].is_string()
        })
    });
    assert!(obj["status"]["passwordLastSet"].is_string());
    let (s, r) = sb.secrets("GET", "/v1/ad/roles/app", None);
    assert_eq!(s, 200);
    assert_eq!(r["data"]["service_account_name"], "svc@example.com");
    assert_eq!(r["data"]["ttl"], 3600);
    let first = wait_for("secret", WAIT, || secret_data(&sb, "app-creds"));
    assert_eq!(first["username"], "svc");
    let pw1 = first["password"].as_str().unwrap().to_string();
    assert_eq!(pw1, dir_password(&sb, "svc@example.com"));
    let owner = sb.get_json("secret", "app-creds").unwrap();
    assert_eq!(owner["metadata"]["ownerReferences"][0]["kind"], "AdRole");

    // A rotation request rotates once and refreshes the Secret.
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdRole\nmetadata: {name: app, namespace: default}\n\
         spec: {serviceAccountName: svc@example.com, ttl: 1h, credentialsSecret: {name: app-creds}, rotateRequest: \"1\"}\n",
    );
    let second = wait_for("rotated secret", WAIT, || {
        secret_data(&sb, "app-creds").filter(|d| d["password"] != pw1.as_str())
    });
    assert_eq!(second["lastPassword"], pw1.as_str());
    let pw2 = second["password"].as_str().unwrap().to_string();
    assert_eq!(pw2, dir_password(&sb, "svc@example.com"));
    let obj = wait_for("handled", WAIT, || {
        sb.get_json("adrole", "app")
            .filter(|o| o["status"]["handledRotateRequest"] == "1")
    });
    assert!(condition_is(&obj, "Ready", "True"));
    let since = sb.requests("secrets", 0).1;
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(count(&sb, since, "POST", "/v1/ad/rotate-role/app"), 0);
    assert_eq!(count(&sb, since, "POST", "/v1/ad/roles/app"), 0);

    // A role for an account the directory does not have: a condition with the service's text,
    // no hot loop.
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdRole\nmetadata: {name: ghost, namespace: default}\n\
         spec: {serviceAccountName: ghost@example.com}\n",
    );
    let obj = wait_reason(&sb, "adrole", "ghost", "InvalidSpec");
    assert!(condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("unable to find service account"));
    let since = sb.requests("secrets", 0).1;
    std::thread::sleep(Duration::from_secs(6));
    assert!(count(&sb, since, "POST", "/v1/ad/roles/ghost") <= 3);

    // Delete removes the role.
    sb.kubectl_ok(&["delete", "adrole", "app", "--timeout=60s"]);
    assert_eq!(sb.secrets("GET", "/v1/ad/roles/app", None).0, 404);
    assert_no_leak(&sb, &op, &[BIND_PW, &pw1, &pw2]);
}

#[test]
fn library_set_matches_the_spec_and_reports_its_accounts_availability() {
    let (sb, op) = env("2s");
    directory(&sb);
    sb.apply_ok(&engine_yaml(""));
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {name: team, namespace: default}\n\
         spec: {serviceAccountNames: [lib2@example.com, lib1@example.com], ttl: 1h, maxTtl: 2h}\n",
    );
    let obj = wait_for("accounts in status", WAIT, || {
        sb.get_json("adlibraryset", "team")
            .filter(|o| condition_is(o, "Ready", "True") && o["status"]["availableCount"] == 2)
    });
    assert_eq!(
        obj["status"]["accounts"],
        json!([{"name": "lib1@example.com", "available": true}, {"name": "lib2@example.com", "available": true}])
    );
    let (s, set) = sb.secrets("GET", "/v1/ad/library/team", None);
    assert_eq!(s, 200);
    assert_eq!(set["data"]["ttl"], 3600);
    assert_eq!(set["data"]["max_ttl"], 7200);
    let out = sb.kubectl_ok(&["get", "adlib", "team"]);
    assert!(out.contains("AVAILABLE"), "{out}");

    // A check-out by someone else shows at the next resync, without their token.
    let (s, co) = sb.secrets("POST", "/v1/ad/library/team/check-out", Some(json!({})));
    assert_eq!(s, 200, "{co}");
    let obj = wait_for("one available", WAIT, || {
        sb.get_json("adlibraryset", "team")
            .filter(|o| o["status"]["availableCount"] == 1)
    });
    assert!(!obj["status"].to_string().contains(&sb.root_token));
    assert!(!obj["status"].to_string().to_lowercase().contains("token"));

    // Remote edit → restored; remote delete (after check-in) → recreated.
    let (s, _) = sb.secrets(
        "POST",
        "/v1/ad/library/team",
        Some(json!({"ttl": 60, "max_ttl": 7200})),
    );
    assert_eq!(s, 204);
    wait_for("drift corrected", WAIT, || {
        sb.get_json("adlibraryset", "team").filter(|o| {
            o["status"]["driftedFields"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "ttl"))
        })
    });
    assert_eq!(
        sb.secrets("GET", "/v1/ad/library/team", None).1["data"]["ttl"],
        3600
    );
    let lease = co["lease_id"].as_str().unwrap();
    sb.secrets(
        "PUT",
        "/v1/sys/leases/revoke",
        Some(json!({"lease_id": lease, "sync": true})),
    );
    sb.secrets("DELETE", "/v1/ad/library/team", None);
    wait_for("recreated", WAIT, || {
        let (s, _) = sb.secrets("GET", "/v1/ad/library/team", None);
        (s == 200).then_some(())
    });
    wait_for("two available", WAIT, || {
        sb.get_json("adlibraryset", "team")
            .filter(|o| o["status"]["availableCount"] == 2)
    });

    // An unknown account: a condition with the service's text.
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {name: bad, namespace: default}\n\
         spec: {serviceAccountNames: [nobody@example.com]}\n",
    );
    let obj = wait_reason(&sb, "adlibraryset", "bad", "InvalidSpec");
    assert!(condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("nobody@example.com"));

    // Delete → gone; Retain → kept.
    sb.kubectl_ok(&["delete", "adlibraryset", "team", "--timeout=60s"]);
    assert_eq!(sb.secrets("GET", "/v1/ad/library/team", None).0, 404);
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {name: keep, namespace: default}\n\
         spec: {serviceAccountNames: [lib1@example.com], deletionPolicy: Retain}\n",
    );
    wait_ready(&sb, "adlibraryset", "keep");
    sb.kubectl_ok(&["delete", "adlibraryset", "keep", "--timeout=60s"]);
    assert_eq!(sb.secrets("GET", "/v1/ad/library/keep", None).0, 200);
    assert_no_leak(
        &sb,
        &op,
        &[BIND_PW, co["data"]["password"].as_str().unwrap()],
    );
}

#[test]
fn two_checkouts_of_a_one_account_set_take_turns_and_the_lease_is_renewed() {
    let (sb, op) = env("5s");
    directory(&sb);
    sb.apply_ok(&engine_yaml(""));
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {name: solo, namespace: default}\n\
         spec: {serviceAccountNames: [lib1@example.com], ttl: 6s, maxTtl: 1h}\n",
    );
    wait_ready(&sb, "adlibraryset", "solo");
    let co = |name: &str| {
        format!(
            "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdCheckout\nmetadata: {{name: {name}, namespace: default}}\n\
             spec: {{setRef: {{name: solo}}}}\n"
        )
    };
    sb.apply_ok(&co("first"));
    let first = wait_ready(&sb, "adcheckout", "first");
    assert_eq!(first["status"]["serviceAccountName"], "lib1@example.com");
    let data = wait_for("secret", WAIT, || secret_data(&sb, "first"));
    assert_eq!(data["serviceAccountName"], "lib1@example.com");
    let pw = data["password"].as_str().unwrap().to_string();
    assert_eq!(pw, dir_password(&sb, "lib1@example.com"));

    sb.apply_ok(&co("second"));
    wait_reason(&sb, "adcheckout", "second", "NoAccountAvailable");

    // The lease outlives more than one TTL: it is renewed, the account stays ours.
    let expires1 = first["status"]["leaseExpiresAt"]
        .as_str()
        .unwrap()
        .to_string();
    std::thread::sleep(Duration::from_secs(14));
    let now = sb.get_json("adcheckout", "first").unwrap();
    assert!(condition_is(&now, "Ready", "True"));
    assert_ne!(now["status"]["leaseExpiresAt"], expires1.as_str());
    assert_eq!(now["status"]["remoteId"], first["status"]["remoteId"]);
    let (_, st) = sb.secrets("GET", "/v1/ad/library/solo/status", None);
    assert_eq!(st["data"]["lib1@example.com"]["available"], false);
    assert!(sb
        .requests("secrets", 0)
        .0
        .iter()
        .any(|(m, p, s)| m == "PUT" && p == "/v1/sys/leases/renew" && *s == 200));
    let second = sb.get_json("adcheckout", "second").unwrap();
    assert_eq!(
        condition(&second, "Ready").unwrap()["reason"],
        "NoAccountAvailable"
    );

    // Deleting the first checks the account in: the second gets it within the resync interval.
    sb.kubectl_ok(&["delete", "adcheckout", "first", "--timeout=60s"]);
    let second = wait_for("second Ready", Duration::from_secs(30), || {
        sb.get_json("adcheckout", "second")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    assert_eq!(second["status"]["serviceAccountName"], "lib1@example.com");
    let data2 = wait_for("secret", WAIT, || secret_data(&sb, "second"));
    let pw2 = data2["password"].as_str().unwrap().to_string();
    assert_ne!(pw2, pw, "check-in rotates the password");

    // A lease revoked outside: checked out again, Secret updated.
    let lease = second["status"]["remoteId"].as_str().unwrap().to_string();
    let (s, _) = sb.secrets(
        "PUT",
        "/v1/sys/leases/revoke",
        Some(json!({"lease_id": lease, "sync": true})),
    );
    assert_eq!(s, 204);
    let data3 = wait_for("checked out again", WAIT, || {
        secret_data(&sb, "second").filter(|d| d["password"] != pw2.as_str())
    });
    let pw3 = data3["password"].as_str().unwrap().to_string();
    assert_eq!(pw3, dir_password(&sb, "lib1@example.com"));
    wait_ready(&sb, "adcheckout", "second");

    sb.kubectl_ok(&["delete", "adcheckout", "second", "--timeout=60s"]);
    let (_, st) = sb.secrets("GET", "/v1/ad/library/solo/status", None);
    assert_eq!(st["data"]["lib1@example.com"]["available"], true);
    assert_no_leak(&sb, &op, &[BIND_PW, &pw, &pw2, &pw3]);
}

#[test]
fn an_existing_set_is_adopted_and_a_lost_create_response_makes_no_duplicate() {
    let (sb, _op) = env("3s");
    directory(&sb);
    sb.apply_ok(&engine_yaml(""));
    wait_ready(&sb, "adengine", "ad");
    // Adoption of a set made outside Quartet.
    let (s, _) = sb.secrets(
        "POST",
        "/v1/ad/library/old",
        Some(
            json!({"service_account_names": ["lib1@example.com"], "ttl": "24h", "max_ttl": "24h"}),
        ),
    );
    assert_eq!(s, 204);
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {name: old, namespace: default}\n\
         spec: {serviceAccountNames: [lib1@example.com]}\n",
    );
    wait_ready(&sb, "adlibraryset", "old");
    sb.wait_events(&["Adopted"]);
    // The service processes the create but the response is lost: found again by name.
    sb.fault(
        "secrets",
        json!({"method": "POST", "path": "/v1/ad/library/lost", "after": true, "count": 1}),
    );
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {name: lost, namespace: default}\n\
         spec: {serviceAccountNames: [lib2@example.com]}\n",
    );
    wait_ready(&sb, "adlibraryset", "lost");
    let (_, list) = sb.secrets("LIST", "/v1/ad/library", None);
    let keys = list["data"]["keys"].as_array().unwrap();
    assert_eq!(keys.iter().filter(|k| *k == "lost").count(), 1);
    let (_, set) = sb.secrets("GET", "/v1/ad/library/lost", None);
    assert_eq!(
        set["data"]["service_account_names"],
        json!(["lib2@example.com"])
    );
}

#[test]
fn a_lost_check_out_answer_leaves_no_second_account_borrowed_and_deletion_gives_all_back() {
    let (sb, op) = env("3s");
    directory(&sb);
    sb.apply_ok(&engine_yaml(""));
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {name: pair, namespace: default}\n\
         spec: {serviceAccountNames: [lib1@example.com, lib2@example.com], ttl: 1h}\n",
    );
    wait_ready(&sb, "adlibraryset", "pair");
    // The service lends an account, then the answer is lost.
    sb.fault("secrets", json!({"method": "POST", "path": "/v1/ad/library/pair/check-out", "after": true, "count": 1}));
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdCheckout\nmetadata: {name: co, namespace: default}\n\
         spec: {setRef: {name: pair}}\n",
    );
    let obj = wait_ready(&sb, "adcheckout", "co");
    let account = obj["status"]["serviceAccountName"]
        .as_str()
        .unwrap()
        .to_string();
    let borrowed = |sb: &Sandbox| {
        let (_, st) = sb.secrets("GET", "/v1/ad/library/pair/status", None);
        st["data"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| v["available"] == false)
            .map(|(k, _)| k.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        borrowed(&sb),
        vec![account.clone()],
        "one account borrowed, the recorded one"
    );
    let check_outs = sb
        .requests("secrets", 0)
        .0
        .iter()
        .filter(|(m, p, _)| m == "POST" && p == "/v1/ad/library/pair/check-out")
        .count();
    assert_eq!(check_outs, 2, "the lost check-out and one more");
    let pw = wait_for("secret", WAIT, || secret_data(&sb, "co"))["password"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(pw, dir_password(&sb, &account));

    // Lost again, and the resource is deleted before anything was recorded: deletion gives the
    // account back all the same.
    sb.fault("secrets", json!({"method": "POST", "path": "/v1/ad/library/pair/check-out", "after": true, "count": 100}));
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdCheckout\nmetadata: {name: gone, namespace: default}\n\
         spec: {setRef: {name: pair}}\n",
    );
    wait_for("second account lent", WAIT, || {
        (borrowed(&sb).len() == 2).then_some(())
    });
    sb.kubectl_ok(&["delete", "adcheckout", "gone", "--timeout=60s"]);
    assert_eq!(borrowed(&sb), vec![account.clone()]);
    sb.clear_faults("secrets");
    sb.kubectl_ok(&["delete", "adcheckout", "co", "--timeout=60s"]);
    assert!(borrowed(&sb).is_empty());
    assert_no_leak(&sb, &op, &[BIND_PW, &pw]);
}

#[test]
fn a_checkout_waits_for_its_set_and_retain_leaves_the_account_checked_out() {
    let (sb, _op) = env("3s");
    directory(&sb);
    sb.apply_ok(&engine_yaml(""));
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdCheckout\nmetadata: {name: early, namespace: default}\n\
         spec: {setRef: {name: later}, ttl: 1h, secretName: early-account, deletionPolicy: Retain}\n",
    );
    let obj = wait_reason(&sb, "adcheckout", "early", "ReferenceMissing");
    assert!(condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("later"));
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: AdLibrarySet\nmetadata: {name: later, namespace: default}\n\
         spec: {serviceAccountNames: [lib1@example.com, lib2@example.com], ttl: 30m}\n",
    );
    let obj = wait_ready(&sb, "adcheckout", "early");
    let account = obj["status"]["serviceAccountName"]
        .as_str()
        .unwrap()
        .to_string();
    let data = wait_for("secret", WAIT, || secret_data(&sb, "early-account"));
    assert_eq!(data["serviceAccountName"], account.as_str());
    // The requested ttl is capped by the set's, as the service does.
    let (_, lease) = sb.secrets(
        "PUT",
        "/v1/sys/leases/lookup",
        Some(json!({"lease_id": obj["status"]["remoteId"]})),
    );
    assert!(lease["data"]["ttl"].as_i64().unwrap() <= 1800);
    sb.kubectl_ok(&["delete", "adcheckout", "early", "--timeout=60s"]);
    let (_, st) = sb.secrets("GET", "/v1/ad/library/later/status", None);
    assert_eq!(st["data"][account.as_str()]["available"], false);
}

#[test]
fn a_root_rotation_already_in_progress_is_reported_and_retried_not_counted_as_done() {
    let (sb, _op) = env("30s");
    directory(&sb);
    let (s, _) = admin(
        &sb,
        "POST",
        "rotation-in-progress",
        Some(json!({"target": "root", "mount": "ad/", "in_progress": true})),
    );
    assert_eq!(s, 204);
    sb.apply_ok(&engine_yaml("  rotateRootRequest: r1\n"));
    // `InProgress` first says the rotation waits for the bind password to be written (a pass
    // may see that before the one that asks the service): wait for the service's answer.
    let obj = wait_for("the service's rotation in progress", WAIT, || {
        sb.get_json("adengine", "ad").filter(|o| {
            condition(o, "Ready").is_some_and(|c| {
                c["status"] == "False"
                    && c["reason"] == "InProgress"
                    && c["message"].as_str().is_some_and(|m| {
                        m.contains("Root password rotation is already in progress.")
                    })
            })
        })
    });
    assert!(obj["status"]["handledRotateRootRequest"].is_null());
    assert_eq!(dir_password(&sb, "admin@example.com"), BIND_PW);
    admin(
        &sb,
        "POST",
        "rotation-in-progress",
        Some(json!({"target": "root", "mount": "ad/", "in_progress": false})),
    );
    let obj = wait_for("rotation done", WAIT, || {
        sb.get_json("adengine", "ad")
            .filter(|o| o["status"]["handledRotateRootRequest"] == "r1")
    });
    assert!(obj["status"]["lastRootRotation"].is_string());
    assert_ne!(dir_password(&sb, "admin@example.com"), BIND_PW);
    wait_ready(&sb, "adengine", "ad");
}

#[test]
fn the_directory_example_becomes_ready_under_quartet_dev() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
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
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("dev.log")).unwrap())
        .spawn()
        .unwrap();
    read_ready(&mut child, "Quartet dev is ready");
    let example = repo_root().join("examples/directory.yaml");
    let out = kubectl(
        &kubeconfig,
        &["apply", "-f", example.to_str().unwrap()],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for obj in [
        "adengine/ad",
        "adrole/app",
        "adlibraryset/team",
        "adcheckout/build",
    ] {
        let out = kubectl(
            &kubeconfig,
            &["wait", "--for=condition=Ready", "--timeout=60s", obj],
            None,
        );
        assert!(
            out.status.success(),
            "{obj} not Ready: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for secret in ["app-ad-credentials", "build-account"] {
        wait_for(&format!("Secret {secret}"), WAIT, || {
            kubectl(&kubeconfig, &["get", "secret", secret], None)
                .status
                .success()
                .then_some(())
        });
    }
    let _ = child.kill();
    let _ = child.wait();
}
