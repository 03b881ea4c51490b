//! The transform engine's kinds end to end (TransformRole, Transformation, TransformTemplate,
//! TransformAlphabet, TransformStore): the built `quartet` binary against the dev API server and
//! the sandbox's secrets service, driven with the real `kubectl`; the service is read over HTTP.

use crate::support;

use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use support::*;

const WAIT: Duration = Duration::from_secs(90);
const G: &str = "apiVersion: secrets.quartet.dev/v1alpha1";

fn env(resync: &str, sandbox_args: &[&str]) -> (Sandbox, Operator) {
    let sb = Sandbox::start(sandbox_args);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let op = Operator::start(&sb, resync);
    (sb, op)
}

/// Poll every half second (kubectl is not free) until `f` gives a value.
fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `data` of `GET /v1/transform/<path>`, `None` on 404.
fn remote(sb: &Sandbox, path: &str) -> Option<Value> {
    let (status, body) = sb.secrets("GET", &format!("/v1/transform/{path}"), None);
    assert!(
        status == 200 || status == 404,
        "GET {path}: {status} {body}"
    );
    (status == 200).then(|| body["data"].clone())
}

fn ready(sb: &Sandbox, kind: &str, name: &str) -> Value {
    wait(&format!("{kind}/{name} Ready"), || {
        sb.get_json(kind, name).filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    })
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

fn events(sb: &Sandbox) -> String {
    sb.kubectl_ok(&["get", "events", "-o", "json"])
}

/// Writes (non-GET) the sandbox logged since `since` whose path ends with `suffix`.
fn writes(sb: &Sandbox, since: u64, suffix: &str) -> Vec<(String, String, u16)> {
    let (reqs, _) = sb.requests("secrets", since);
    reqs.into_iter()
        .filter(|(m, p, _)| m != "GET" && p.ends_with(suffix))
        .collect()
}

fn now_mark(sb: &Sandbox) -> u64 {
    sb.requests("secrets", 0).1
}

#[test]
fn a_role_two_transformations_a_template_an_alphabet_and_a_store_in_one_manifest_converge_in_any_order(
) {
    let (sb, _op) = env("3s", &[]);
    // The example lists the role first and the alphabet last: the reverse of dependency order.
    let example = repo_root().join("examples/transform.yaml");
    sb.kubectl_ok(&["apply", "-f", example.to_str().unwrap()]);
    for (kind, name) in [
        ("transformalphabet", "digits"),
        ("transformtemplate", "ccn"),
        ("transformstore", "tokens-db"),
        ("transformation", "ccn-fpe"),
        ("transformation", "ccn-token"),
    ] {
        ready(&sb, kind, name);
    }
    let role = wait("role Ready with every transformation allowing it", || {
        sb.get_json("transformrole", "payments").filter(|o| {
            condition_is(o, "Ready", "True") && condition_is(o, "TransformationsAllowed", "True")
        })
    });
    assert_eq!(role["status"]["remoteId"], "payments");

    // The service holds exactly the spec.
    let r = remote(&sb, "role/payments").expect("role");
    assert_eq!(sorted(&r["transformations"]), vec!["ccn-fpe", "ccn-token"]);
    let f = remote(&sb, "transformation/ccn-fpe").expect("fpe");
    assert_eq!(f["type"], "fpe");
    assert_eq!(f["templates"], json!(["ccn"]));
    assert_eq!(f["tweak_source"], "internal");
    assert_eq!(f["allowed_roles"], json!(["payments"]));
    assert_eq!(f["deletion_allowed"], true);
    let t = remote(&sb, "transformation/ccn-token").expect("tokenization");
    assert_eq!(t["type"], "tokenization");
    assert_eq!(t["stores"], json!(["tokens-db"]));
    assert_eq!(t["max_ttl"], 86400);
    let tpl = remote(&sb, "template/ccn").expect("template");
    assert_eq!(tpl["pattern"], r"(\d{4})-(\d{4})-(\d{4})-(\d{4})");
    assert_eq!(tpl["alphabet"], "digits");
    assert_eq!(tpl["encode_format"], "$1-$2-$3-$4");
    assert_eq!(tpl["decode_formats"], json!({"last-four": "$4"}));
    assert_eq!(
        remote(&sb, "alphabet/digits").expect("alphabet")["alphabet"],
        "0123456789"
    );
    let (_, store_body) = sb.secrets("GET", "/v1/transform/stores/tokens-db", None);
    assert_eq!(store_body["data"]["driver"], "postgres");
    assert_eq!(store_body["data"]["max_open_connections"], 8);
    assert!(
        !store_body.to_string().contains("change-me"),
        "store password read back"
    );

    // A transformation edited in the service is restored, naming the field; a role deleted in the
    // service is recreated.
    let (status, _) = sb.secrets(
        "POST",
        "/v1/transform/transformations/fpe/ccn-fpe",
        Some(json!({"template": "ccn", "allowed_roles": ["intruder"]})),
    );
    assert_eq!(status, 204);
    wait("fpe drift corrected", || {
        sb.get_json("transformation", "ccn-fpe")
            .filter(|o| o["status"]["driftedFields"] == json!(["allowedRoles"]))
    });
    assert_eq!(
        remote(&sb, "transformation/ccn-fpe").unwrap()["allowed_roles"],
        json!(["payments"])
    );
    sb.secrets("DELETE", "/v1/transform/role/payments", None);
    wait("role recreated", || remote(&sb, "role/payments"));

    // Deleting everything at once finishes although the service refuses to delete what is
    // still in use: those deletes are retried until their users are gone.
    sb.kubectl_ok(&[
        "delete",
        "-f",
        example.to_str().unwrap(),
        "--wait=true",
        "--timeout=150s",
    ]);
    for path in [
        "role/payments",
        "transformation/ccn-fpe",
        "transformation/ccn-token",
        "template/ccn",
        "alphabet/digits",
        "stores/tokens-db",
    ] {
        assert!(remote(&sb, path).is_none(), "{path} still in the service");
    }
}

fn alphabet(name: &str, value: &str, extra: &str) -> String {
    format!("{G}\nkind: TransformAlphabet\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  alphabet: \"{value}\"\n{extra}")
}

#[test]
fn an_alphabet_is_created_edited_restored_after_remote_changes_adopted_and_retained() {
    let (sb, _op) = env("2s", &[]);
    // Adoption: an alphabet already in the service is taken over, not duplicated.
    let (status, _) = sb.secrets(
        "POST",
        "/v1/transform/alphabet/old",
        Some(json!({"alphabet": "xyz"})),
    );
    assert_eq!(status, 204);
    sb.apply_ok(&alphabet("old", "abc", ""));
    ready(&sb, "transformalphabet", "old");
    assert_eq!(remote(&sb, "alphabet/old").unwrap()["alphabet"], "abc");
    sb.wait_events(&["Adopted"]);

    sb.apply_ok(&alphabet("hex", "0123456789abcdef", ""));
    let obj = ready(&sb, "transformalphabet", "hex");
    assert_eq!(obj["status"]["remoteId"], "hex");
    assert_eq!(
        remote(&sb, "alphabet/hex").unwrap()["alphabet"],
        "0123456789abcdef"
    );

    // Edit.
    sb.apply_ok(&alphabet("hex", "0123456789ABCDEF", ""));
    wait("edited alphabet", || {
        remote(&sb, "alphabet/hex").filter(|a| a["alphabet"] == "0123456789ABCDEF")
    });

    // Remote edit → restored, with the drifted field named.
    sb.secrets(
        "POST",
        "/v1/transform/alphabet/hex",
        Some(json!({"alphabet": "01"})),
    );
    let obj = wait("drift corrected", || {
        sb.get_json("transformalphabet", "hex")
            .filter(|o| o["status"]["driftedFields"] == json!(["alphabet"]))
    });
    assert!(condition_is(&obj, "Ready", "True"));
    assert_eq!(
        remote(&sb, "alphabet/hex").unwrap()["alphabet"],
        "0123456789ABCDEF"
    );

    // Remote delete → recreated.
    sb.secrets("DELETE", "/v1/transform/alphabet/hex", None);
    wait("recreated", || remote(&sb, "alphabet/hex"));

    // Delete → gone; Retain → kept.
    sb.kubectl_ok(&[
        "delete",
        "transformalphabet",
        "hex",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(remote(&sb, "alphabet/hex").is_none());
    sb.apply_ok(&alphabet("old", "abc", "  deletionPolicy: Retain\n"));
    sb.kubectl_ok(&[
        "delete",
        "transformalphabet",
        "old",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(
        remote(&sb, "alphabet/old").is_some(),
        "retained alphabet deleted"
    );
}

#[test]
fn a_template_waits_for_its_alphabet_and_a_used_alphabet_is_deleted_only_after_it() {
    let (sb, _op) = env("5m", &[]);
    sb.apply_ok(&format!("{G}\nkind: TransformTemplate\nmetadata: {{name: acct, namespace: default}}\nspec:\n  pattern: '([0-9a-f]+)'\n  alphabet: hexdigits\n"));
    let obj = wait("template waiting for its alphabet", || {
        sb.get_json("transformtemplate", "acct").filter(|o| {
            condition(o, "Ready").is_some_and(|c| {
                c["status"] == "False" && c["message"].as_str().unwrap_or("").contains("hexdigits")
            })
        })
    });
    assert!(
        condition_is(&obj, "Synced", "True"),
        "a wait is not an error"
    );
    assert_eq!(condition(&obj, "Ready").unwrap()["reason"], "Waiting");
    // The service accepts a template naming an alphabet it does not have yet.
    assert_eq!(
        remote(&sb, "template/acct").unwrap()["alphabet"],
        "hexdigits"
    );
    sb.apply_ok(&alphabet("hexdigits", "0123456789abcdef", ""));
    ready(&sb, "transformtemplate", "acct");

    // The service refuses to delete an alphabet a template uses: the resource shows why and
    // keeps its finalizer until the template is gone.
    sb.kubectl_ok(&["delete", "transformalphabet", "hexdigits", "--wait=false"]);
    let obj = wait("DeletionBlocked", || {
        sb.get_json("transformalphabet", "hexdigits")
            .filter(|o| condition_is(o, "DeletionBlocked", "True"))
    });
    assert_eq!(
        condition(&obj, "DeletionBlocked").unwrap()["reason"],
        "InUse"
    );
    let msg = condition(&obj, "DeletionBlocked").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("in use") && msg.contains("acct"), "{msg}");
    assert!(remote(&sb, "alphabet/hexdigits").is_some());
    sb.kubectl_ok(&[
        "delete",
        "transformtemplate",
        "acct",
        "--wait=true",
        "--timeout=60s",
    ]);
    wait("alphabet deleted after its template", || {
        sb.get_json("transformalphabet", "hexdigits")
            .is_none()
            .then_some(())
    });
    assert!(remote(&sb, "alphabet/hexdigits").is_none());
}

#[test]
fn a_role_names_the_transformations_that_do_not_allow_it() {
    // A long resync: the role looks again on its own while a transformation does not allow it.
    let (sb, _op) = env("5m", &[]);
    let masking = |roles: &str| {
        format!("{G}\nkind: Transformation\nmetadata: {{name: mask, namespace: default}}\nspec:\n  type: masking\n  template: builtin/creditcardnumber\n  maskingCharacter: '#'\n  allowedRoles: [{roles}]\n")
    };
    sb.apply_ok(&masking("someone-else"));
    ready(&sb, "transformation", "mask");
    sb.apply_ok(&format!("{G}\nkind: TransformRole\nmetadata: {{name: support, namespace: default}}\nspec:\n  transformations: [mask]\n"));
    let obj = wait("TransformationsAllowed=False", || {
        sb.get_json("transformrole", "support")
            .filter(|o| condition_is(o, "TransformationsAllowed", "False"))
    });
    assert!(condition_is(&obj, "Ready", "True"), "the role is written");
    let msg = condition(&obj, "TransformationsAllowed").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("mask") && msg.contains("support"), "{msg}");
    assert_eq!(
        remote(&sb, "role/support").unwrap()["transformations"],
        json!(["mask"])
    );
    assert_eq!(
        remote(&sb, "transformation/mask").unwrap()["masking_character"],
        "#"
    );

    sb.apply_ok(&masking("someone-else, support"));
    wait("TransformationsAllowed=True", || {
        sb.get_json("transformrole", "support")
            .filter(|o| condition_is(o, "TransformationsAllowed", "True"))
    });
    // Masking has no key: deleting it needs no opt-in (once the role no longer uses it).
    sb.kubectl_ok(&[
        "delete",
        "transformrole",
        "support",
        "--wait=true",
        "--timeout=60s",
    ]);
    sb.kubectl_ok(&[
        "delete",
        "transformation",
        "mask",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(remote(&sb, "transformation/mask").is_none());
}

#[test]
fn invalid_manifests_are_refused_with_the_rules_message() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let refused = |yaml: String, needle: &str| {
        let out = sb.apply_yaml(&yaml);
        assert!(!out.status.success(), "accepted: {yaml}");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(err.contains(needle), "{needle:?} not in {err}");
    };
    let tform = |spec: &str| {
        format!("{G}\nkind: Transformation\nmetadata: {{name: bad, namespace: default}}\nspec: {spec}\n")
    };
    refused(
        tform("{type: tokenization, template: ccn}"),
        "template is required for fpe and masking transformations and not allowed for tokenization",
    );
    refused(
        tform("{type: fpe}"),
        "template is required for fpe and masking transformations",
    );
    refused(
        tform("{type: masking, template: ccn, deletionAllowed: true}"),
        "deletionAllowed is only allowed for fpe and tokenization",
    );
    refused(
        tform("{type: masking, template: ccn, tweakSource: internal}"),
        "tweakSource is only allowed for fpe",
    );
    refused(
        tform("{type: fpe, template: ccn, maskingCharacter: '#'}"),
        "maskingCharacter is only allowed for masking",
    );
    refused(
        tform("{type: masking, template: ccn, maskingCharacter: '##'}"),
        "maskingCharacter must be exactly one character",
    );
    refused(
        tform("{type: fpe, template: ccn, stores: [s]}"),
        "mappingMode, convergent, maxTtl and stores are only allowed for tokenization",
    );
    refused(
        tform(
            "{type: tokenization, convergent: true, keyImport: {keySecretRef: {name: k, key: k}}}",
        ),
        "an imported key does not support convergent tokenization",
    );
    refused(
        format!("{G}\nkind: TransformAlphabet\nmetadata: {{name: bad, namespace: default}}\nspec: {{alphabet: a}}\n"),
        "spec.alphabet",
    );
    let store = |driver: &str, cs: &str| {
        format!("{G}\nkind: TransformStore\nmetadata: {{name: bad, namespace: default}}\nspec: {{driver: {driver}, connectionString: '{cs}', credentialsSecretRef: {{name: db}}}}\n")
    };
    refused(
        store("postgres", "postgresql://db:5432/x"),
        "connectionString must contain the {{username}} and {{password}} template slots",
    );
    refused(
        store("mysql", "{{username}}:{{password}}@tcp(db)/x"),
        "a mysql connectionString must carry parseTime=true",
    );
    // Immutable fields.
    sb.apply_ok(&tform("{type: tokenization, convergent: false}"));
    refused(
        tform("{type: tokenization, convergent: true}"),
        "convergent is immutable",
    );
    refused(
        tform("{type: fpe, template: ccn, convergent: false}"),
        "type is immutable",
    );
    refused(
        tform("{type: tokenization, convergent: false, mount: other}"),
        "mount is immutable",
    );
    refused(
        tform("{type: tokenization, convergent: false, name: renamed}"),
        "name is immutable",
    );
}

#[test]
fn a_keyed_transformation_is_deleted_only_when_deletion_is_allowed() {
    let (sb, _op) = env("5m", &[]);
    sb.apply_ok(&format!("{G}\nkind: Transformation\nmetadata: {{name: keep-key, namespace: default}}\nspec: {{type: fpe, template: builtin/socialsecuritynumber}}\n"));
    ready(&sb, "transformation", "keep-key");
    sb.kubectl_ok(&[
        "delete",
        "transformation",
        "keep-key",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(
        remote(&sb, "transformation/keep-key").is_some(),
        "the key was deleted without deletionAllowed"
    );
    sb.wait_events(&["Retained", "deletionAllowed is not true"]);

    sb.apply_ok(&format!("{G}\nkind: Transformation\nmetadata: {{name: drop-key, namespace: default}}\nspec: {{type: tokenization, deletionAllowed: true, maxTtl: 7200}}\n"));
    ready(&sb, "transformation", "drop-key");
    // A duration may also be given as a number of seconds.
    assert_eq!(
        remote(&sb, "transformation/drop-key").unwrap()["max_ttl"],
        7200
    );
    sb.kubectl_ok(&[
        "delete",
        "transformation",
        "drop-key",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(remote(&sb, "transformation/drop-key").is_none());
}

fn key_secret(name: &str, key: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(key);
    format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: default}}\ndata: {{key: {}}}\n",
        base64::engine::general_purpose::STANDARD.encode(b64))
}

/// The key versions the sandbox holds for a transformation (sandbox admin API).
fn stored_keys(sb: &Sandbox, name: &str) -> Vec<String> {
    let (status, body) = http(
        "GET",
        &format!(
            "{}/_sandbox/secrets/transform/keys/transform/{name}",
            sb.url("secrets")
        ),
        None,
        None,
    );
    assert_eq!(status, 200, "{body}");
    sorted_keep_order(&body["keys"])
}

fn sorted_keep_order(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_imported_key_is_the_secrets_bytes_and_a_rotation_is_sent_exactly_once() {
    let (sb, op) = env("3s", &[]);
    let b64 = |k: &[u8]| base64::engine::general_purpose::STANDARD.encode(k);
    let k1 = [0x11u8; 32];
    let k2 = [0x22u8; 32];
    sb.apply_ok(&key_secret("tok-key", &k1));
    sb.apply_ok(&format!("{G}\nkind: Transformation\nmetadata: {{name: byok, namespace: default}}\nspec:\n  type: tokenization\n  allowedRoles: [app]\n  deletionAllowed: true\n  keyImport:\n    keySecretRef: {{name: tok-key, key: key}}\n    hashFunction: SHA512\n"));
    let obj = ready(&sb, "transformation", "byok");
    assert_eq!(stored_keys(&sb, "byok"), vec![b64(&k1)]);
    let hash = obj["status"]["writeOnlyHash"].as_str().unwrap_or_default();
    assert!(hash.starts_with("hmac-sha256:"), "{hash}");
    assert_eq!(
        remote(&sb, "transformation/byok").unwrap()["allowed_roles"],
        json!(["app"])
    );

    // A new key in the Secret is sent once, as a new key version.
    let since = now_mark(&sb);
    sb.apply_ok(&key_secret("tok-key", &k2));
    wait("second key version", || {
        (stored_keys(&sb, "byok") == vec![b64(&k1), b64(&k2)]).then_some(())
    });
    ready(&sb, "transformation", "byok");
    std::thread::sleep(Duration::from_secs(8));
    let sent = writes(&sb, since, "/byok/import_version");
    assert_eq!(sent.len(), 1, "import_version sent {sent:?}");
    assert_eq!(stored_keys(&sb, "byok").len(), 2);

    // FPE keys are imported only on create: a changed key is reported, never sent.
    sb.apply_ok(&key_secret("fpe-key", &k1));
    sb.apply_ok(&format!("{G}\nkind: Transformation\nmetadata: {{name: byok-fpe, namespace: default}}\nspec:\n  type: fpe\n  template: builtin/creditcardnumber\n  keyImport:\n    keySecretRef: {{name: fpe-key, key: key}}\n"));
    ready(&sb, "transformation", "byok-fpe");
    assert_eq!(stored_keys(&sb, "byok-fpe"), vec![b64(&k1)]);
    sb.apply_ok(&key_secret("fpe-key", &k2));
    let obj = wait("KeyImmutable", || {
        sb.get_json("transformation", "byok-fpe").filter(|o| {
            condition(o, "Ready")
                .is_some_and(|c| c["status"] == "False" && c["reason"] == "KeyImmutable")
        })
    });
    assert_eq!(stored_keys(&sb, "byok-fpe"), vec![b64(&k1)]);

    // An import whose response is lost is found again, never sent twice.
    let (status, _) = http(
        "POST",
        &format!("{}/_sandbox/faults", sb.url("secrets")),
        None,
        Some(
            json!({"method": "POST", "path": "/v1/transform/transformations/tokenization/lost/import", "after": true, "count": 1}),
        ),
    );
    assert!(status < 300, "fault not installed: {status}");
    let since = now_mark(&sb);
    sb.apply_ok(&format!("{G}\nkind: Transformation\nmetadata: {{name: lost, namespace: default}}\nspec:\n  type: tokenization\n  keyImport:\n    keySecretRef: {{name: tok-key, key: key}}\n"));
    ready(&sb, "transformation", "lost");
    assert_eq!(stored_keys(&sb, "lost"), vec![b64(&k2)]);
    assert_eq!(
        writes(&sb, since, "/lost/import").len(),
        1,
        "import sent again"
    );
    assert!(writes(&sb, since, "/lost/import_version").is_empty());

    // The key never reaches status, events or the operator's log.
    let everything = format!("{obj}{}{}", events(&sb), op.log());
    for k in [&k1[..], &k2[..]] {
        assert!(!everything.contains(&b64(k)), "key material leaked");
    }
}

#[test]
fn a_store_sends_its_credentials_once_per_change_and_initialises_its_schema_once() {
    let (sb, op) = env("2s", &[]);
    let creds = |name: &str, user: &str, pass: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: default}}\nstringData: {{username: {user}, password: {pass}}}\n")
    };
    sb.apply_ok(&creds("db-app", "app", "pw-app-1"));
    sb.apply_ok(&creds("db-ddl", "ddl", "pw-ddl-1"));
    let since = now_mark(&sb);
    sb.apply_ok(&format!("{G}\nkind: TransformStore\nmetadata: {{name: mysql-tokens, namespace: default}}\nspec:\n  driver: mysql\n  connectionString: '{{{{username}}}}:{{{{password}}}}@tcp(db:3306)/tokens?parseTime=true'\n  credentialsSecretRef: {{name: db-app}}\n  maxConnectionLifetime: 1h\n  schemaInit:\n    credentialsSecretRef: {{name: db-ddl}}\n"));
    let obj = ready(&sb, "transformstore", "mysql-tokens");
    let (_, body) = sb.secrets("GET", "/v1/transform/stores/mysql-tokens", None);
    assert_eq!(body["data"]["driver"], "mysql");
    assert_eq!(body["data"]["max_connection_lifetime"], 3600);
    assert!(obj["status"]["writeOnlyHash"]
        .as_str()
        .unwrap_or("")
        .contains("schema="));
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(writes(&sb, since, "/stores/mysql-tokens/schema").len(), 1);
    assert_eq!(
        writes(&sb, since, "/stores/mysql-tokens").len(),
        1,
        "in-sync resyncs rewrote the store"
    );

    // A new store password: the store is written once, the schema is not initialised again.
    let since = now_mark(&sb);
    sb.apply_ok(&creds("db-app", "app", "pw-app-2"));
    wait("store rewritten", || {
        (!writes(&sb, since, "/stores/mysql-tokens").is_empty()).then_some(())
    });
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(writes(&sb, since, "/stores/mysql-tokens").len(), 1);
    assert!(writes(&sb, since, "/stores/mysql-tokens/schema").is_empty());

    // New DDL credentials: the schema endpoint is called once more.
    let since = now_mark(&sb);
    sb.apply_ok(&creds("db-ddl", "ddl", "pw-ddl-2"));
    wait("schema initialised again", || {
        (!writes(&sb, since, "/stores/mysql-tokens/schema").is_empty()).then_some(())
    });
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(writes(&sb, since, "/stores/mysql-tokens/schema").len(), 1);
    let obj = sb.get_json("transformstore", "mysql-tokens").unwrap();
    let everything = format!("{obj}{}{}", events(&sb), op.log());
    assert!(
        !everything.contains("pw-"),
        "a password reached status, events or logs"
    );
}

#[test]
fn a_write_the_service_rejects_is_a_condition_without_a_hot_loop() {
    let (sb, _op) = env("5m", &[]);
    sb.apply_ok(&alphabet("dupes", "aab", ""));
    let obj = wait("Synced=False", || {
        sb.get_json("transformalphabet", "dupes")
            .filter(|o| condition_is(o, "Synced", "False"))
    });
    let c = condition(&obj, "Synced").unwrap();
    assert_eq!(c["reason"], "Rejected");
    assert!(
        c["message"].as_str().unwrap_or("").contains("duplicate"),
        "{c}"
    );
    let since = now_mark(&sb);
    std::thread::sleep(Duration::from_secs(6));
    assert!(
        writes(&sb, since, "/alphabet/dupes").len() <= 1,
        "retried in a loop"
    );
    sb.apply_ok(&alphabet("dupes", "ab", ""));
    ready(&sb, "transformalphabet", "dupes");
}

#[test]
fn a_server_without_the_transform_engine_reports_unsupported_without_retrying() {
    let (sb, _op) = env("5m", &["--edition", "community"]);
    sb.apply_ok(&alphabet("nowhere", "ab", ""));
    let obj = wait("Unsupported", || {
        sb.get_json("transformalphabet", "nowhere")
            .filter(|o| condition_is(o, "Ready", "False"))
    });
    assert_eq!(condition(&obj, "Ready").unwrap()["reason"], "Unsupported");
    let since = now_mark(&sb);
    std::thread::sleep(Duration::from_secs(6));
    let (reqs, _) = sb.requests("secrets", since);
    let mine = reqs
        .iter()
        .filter(|(_, p, _)| p.contains("/transform/"))
        .count();
    assert!(mine <= 1, "{mine} calls in 6s");
}
