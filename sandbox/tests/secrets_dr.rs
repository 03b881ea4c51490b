//! Conformance of DR replication across several secrets clusters (spec A §2.8, §2.9, §3, §4.6).

use crate::secrets_support;

use base64::Engine;
use quartet_sandbox::{Edition, SandboxOptions};
use reqwest::Method;
use secrets_support::*;
use serde_json::{json, Value};

const DR: &str = "sys/replication/dr";

async fn three() -> S {
    start_with(SandboxOptions {
        secrets_clusters: 3,
        ..SandboxOptions::ephemeral()
    })
    .await
}

impl S {
    async fn at(&self, i: usize, m: Method, p: &str, body: Option<Value>) -> R {
        let root = self.root.clone();
        self.call_at(i, m, p, Some(&root), body).await
    }
    async fn status(&self, i: usize) -> Value {
        let r = self
            .call_at(i, Method::GET, &format!("{DR}/status"), None, None)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["data"].clone()
    }
}

async fn activation(s: &S, primary: usize, id: &str) -> String {
    let r = s
        .at(
            primary,
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(json!({"id": id})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["wrap_info"]["token"].as_str().unwrap().to_string()
}

/// Cluster 0 primary, cluster 1 its secondary `dr1`.
async fn pair() -> S {
    let s = three().await;
    let r = s
        .at(
            0,
            Method::POST,
            &format!("{DR}/primary/enable"),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let t = activation(&s, 0, "dr1").await;
    let r = s
        .at(
            1,
            Method::POST,
            &format!("{DR}/secondary/enable"),
            Some(json!({"token": t})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    s
}

async fn keys(s: &S) -> Vec<String> {
    serde_json::from_value(s.admin(Method::GET, "keys", None).await.body["keys"].clone()).unwrap()
}

/// Generates a DR operation token on secondary `i` with the OTP flow.
async fn op_token(s: &S, i: usize) -> String {
    let r = s
        .call_at(
            i,
            Method::POST,
            &format!("{DR}/secondary/generate-operation-token/attempt"),
            None,
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let otp = r.body["data"]["otp"].as_str().unwrap().to_string();
    let nonce = r.body["data"]["nonce"].as_str().unwrap().to_string();
    let mut last = Value::Null;
    for k in keys(s).await.into_iter().take(3) {
        let r = s
            .call_at(
                i,
                Method::POST,
                &format!("{DR}/secondary/generate-operation-token/update"),
                None,
                Some(json!({"key": k, "nonce": nonce})),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        last = r.body["data"].clone();
    }
    assert_eq!(last["complete"], true);
    decode_otp(last["encoded_token"].as_str().unwrap(), &otp)
}

fn decode_otp(encoded: &str, otp: &str) -> String {
    let raw = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .expect("encoded token is base64");
    assert_eq!(raw.len(), otp.len());
    String::from_utf8(raw.iter().zip(otp.bytes()).map(|(a, b)| a ^ b).collect()).unwrap()
}

#[tokio::test]
async fn dr_status_is_unauthenticated_and_disabled_by_default() {
    let s = three().await;
    assert_eq!(s.status(0).await["mode"], "disabled");
    assert_eq!(s.status(2).await["mode"], "disabled");
}

#[tokio::test]
async fn primary_enable_makes_a_primary_with_a_cluster_id() {
    let s = three().await;
    let r = s
        .at(
            0,
            Method::POST,
            &format!("{DR}/primary/enable"),
            Some(json!({"primary_cluster_addr": ""})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(r.body["warnings"].is_array());
    let st = s.status(0).await;
    assert_eq!(st["mode"], "primary");
    assert_eq!(st["cluster_id"].as_str().unwrap().len(), 36);
    assert_eq!(st["known_secondaries"], json!([]));
    assert_eq!(st["corrupted_merkle_tree"], false);
    assert!(st["last_corruption_check_epoch"].is_string());
    assert!(st["last_wal"].is_u64());
    assert_eq!(st["merkle_root"].as_str().unwrap().len(), 40);
    assert_eq!(st["secondaries"], json!([]));
    let r = s
        .at(0, Method::POST, &format!("{DR}/primary/enable"), None)
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn secondary_token_is_wrapped_with_a_default_30m_ttl() {
    let s = three().await;
    s.at(0, Method::POST, &format!("{DR}/primary/enable"), None)
        .await;
    let r = s
        .at(
            0,
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(json!({"id": "a"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["wrap_info"]["ttl"], 1800);
    assert!(r.body["wrap_info"]["token"].as_str().unwrap().len() > 20);
    assert!(r.body["wrap_info"]["creation_time"].is_string());
    let r = s
        .at(
            0,
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(json!({"id": "b", "ttl": "5m"})),
        )
        .await;
    assert_eq!(r.body["wrap_info"]["ttl"], 300);
    // id is required and unique.
    assert_eq!(
        s.at(
            0,
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(json!({}))
        )
        .await
        .status,
        400
    );
    assert_eq!(
        s.at(
            0,
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(json!({"id": "a"}))
        )
        .await
        .status,
        400
    );
}

#[tokio::test]
async fn secondary_token_needs_sudo() {
    let s = three().await;
    s.at(0, Method::POST, &format!("{DR}/primary/enable"), None)
        .await;
    let p = r#"path "sys/replication/*" { capabilities = ["create", "update", "read"] }"#;
    s.at(
        0,
        Method::PUT,
        "sys/policies/acl/r",
        Some(json!({"policy": p})),
    )
    .await;
    let t = s
        .at(
            0,
            Method::POST,
            "auth/token/create",
            Some(json!({"policies": ["r"]})),
        )
        .await
        .body["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s
        .call_at(
            0,
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(&t),
            Some(json!({"id": "x"})),
        )
        .await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn secondary_enable_clears_local_data_and_replicates_the_primary() {
    let s = three().await;
    s.at(
        1,
        Method::PUT,
        "sys/policies/acl/local-only",
        Some(json!({"policy": "path \"a\" { capabilities = [\"read\"] }"})),
    )
    .await;
    s.at(
        0,
        Method::PUT,
        "sys/policies/acl/from-primary",
        Some(json!({"policy": "path \"b\" { capabilities = [\"read\"] }"})),
    )
    .await;
    s.at(0, Method::POST, &format!("{DR}/primary/enable"), None)
        .await;
    let t = activation(&s, 0, "dr1").await;
    let r = s
        .at(
            1,
            Method::POST,
            &format!("{DR}/secondary/enable"),
            Some(json!({"token": t})),
        )
        .await;
    assert_eq!(r.status, 200);
    let p = s.status(0).await;
    let sec = s.status(1).await;
    assert_eq!(sec["mode"], "secondary");
    assert_eq!(sec["cluster_id"], p["cluster_id"]);
    assert_eq!(sec["merkle_root"], p["merkle_root"]);
    // Promote to read the data: the local policy is gone, the primary's is there.
    s.at(0, Method::POST, &format!("{DR}/primary/demote"), None)
        .await;
    let op = op_token(&s, 1).await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/promote"),
            None,
            Some(json!({"dr_operation_token": op})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        s.at(1, Method::GET, "sys/policies/acl/local-only", None)
            .await
            .status,
        404
    );
    assert_eq!(
        s.at(1, Method::GET, "sys/policies/acl/from-primary", None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn writes_and_reads_on_a_dr_secondary_are_refused() {
    let s = pair().await;
    let r = s
        .at(
            1,
            Method::PUT,
            "sys/policies/acl/x",
            Some(json!({"policy": "path \"a\" { capabilities = [\"read\"] }"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!(["path disabled in replication DR secondary mode"])
    );
    assert_eq!(
        s.at(1, Method::GET, "sys/policies/acl/default", None)
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn last_wal_advances_with_writes_and_the_secondary_follows() {
    let s = pair().await;
    let before = s.status(0).await["last_wal"].as_u64().unwrap();
    for i in 0..3 {
        s.at(
            0,
            Method::PUT,
            &format!("sys/policies/acl/p{i}"),
            Some(json!({"policy": "path \"a\" { capabilities = [\"read\"] }"})),
        )
        .await;
    }
    let p = s.status(0).await;
    assert_eq!(p["last_wal"].as_u64().unwrap(), before + 3);
    let sec = s.status(1).await;
    assert_eq!(sec["last_remote_wal"], p["last_wal"]);
    assert_eq!(sec["merkle_root"], p["merkle_root"]);
}

#[tokio::test]
async fn primary_and_secondary_status_describe_the_connection() {
    let s = pair().await;
    let p = s.status(0).await;
    assert_eq!(p["known_secondaries"], json!(["dr1"]));
    let sec0 = &p["secondaries"][0];
    assert_eq!(sec0["connection_status"], "connected");
    assert_eq!(sec0["node_id"], "dr1");
    assert!(sec0["api_address"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:"));
    assert!(sec0["cluster_address"].is_string());
    assert!(sec0["last_heartbeat"].is_string());
    let sec = s.status(1).await;
    assert_eq!(sec["mode"], "secondary");
    assert_eq!(sec["state"], "stream-wals");
    assert_eq!(sec["secondary_id"], "dr1");
    assert_eq!(sec["primaries"][0]["connection_status"], "connected");
    assert!(sec["primaries"][0]["api_address"].is_string());
    assert!(sec["primaries"][0]["last_heartbeat"].is_string());
    assert_eq!(
        sec["known_primary_cluster_addrs"].as_array().unwrap().len(),
        1
    );
    assert!(sec["primary_cluster_addr"].is_string());
    assert!(sec["last_remote_wal"].is_u64());
}

#[tokio::test]
async fn activation_tokens_are_single_use_and_expire() {
    let s = three().await;
    s.at(0, Method::POST, &format!("{DR}/primary/enable"), None)
        .await;
    let t = activation(&s, 0, "a").await;
    assert_eq!(
        s.at(
            1,
            Method::POST,
            &format!("{DR}/secondary/enable"),
            Some(json!({"token": t}))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        s.at(
            2,
            Method::POST,
            &format!("{DR}/secondary/enable"),
            Some(json!({"token": t}))
        )
        .await
        .status,
        400
    );
    let r = s
        .at(
            0,
            Method::POST,
            &format!("{DR}/primary/secondary-token"),
            Some(json!({"id": "b", "ttl": "1s"})),
        )
        .await;
    let short = r.body["wrap_info"]["token"].as_str().unwrap().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let r = s
        .at(
            2,
            Method::POST,
            &format!("{DR}/secondary/enable"),
            Some(json!({"token": short})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        s.at(
            2,
            Method::POST,
            &format!("{DR}/secondary/enable"),
            Some(json!({"token": "bogus"}))
        )
        .await
        .status,
        400
    );
    assert_eq!(s.status(2).await["mode"], "disabled");
}

#[tokio::test]
async fn revoke_secondary_disconnects_it() {
    let s = pair().await;
    let r = s
        .at(
            0,
            Method::POST,
            &format!("{DR}/primary/revoke-secondary"),
            Some(json!({"id": "dr1"})),
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(s.status(0).await["known_secondaries"], json!([]));
    let sec = s.status(1).await;
    assert_ne!(sec["state"], "stream-wals");
    // Writes no longer reach it.
    let wal = sec["last_remote_wal"].clone();
    s.at(
        0,
        Method::PUT,
        "sys/policies/acl/after",
        Some(json!({"policy": "path \"a\" { capabilities = [\"read\"] }"})),
    )
    .await;
    assert_eq!(s.status(1).await["last_remote_wal"], wal);
}

#[tokio::test]
async fn operation_token_generation_encodes_the_token_with_the_otp() {
    let s = pair().await;
    let p = format!("{DR}/secondary/generate-operation-token/attempt");
    let r = s.call_at(1, Method::GET, &p, None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["started"], false);
    let r = s.call_at(1, Method::POST, &p, None, Some(json!({}))).await;
    let d = r.body["data"].clone();
    assert_eq!(d["started"], true);
    assert_eq!(d["progress"], 0);
    assert_eq!(d["required"], 3);
    assert_eq!(d["complete"], false);
    assert_eq!(d["encoded_token"], "");
    let otp = d["otp"].as_str().unwrap().to_string();
    assert_eq!(d["otp_length"].as_u64().unwrap() as usize, otp.len());
    // The OTP is never returned again.
    let r = s.call_at(1, Method::GET, &p, None, None).await;
    assert_eq!(r.body["data"]["otp"], "");
    assert_eq!(r.body["data"]["nonce"], d["nonce"]);
    let ks = keys(&s).await;
    let upd = format!("{DR}/secondary/generate-operation-token/update");
    let r = s
        .call_at(
            1,
            Method::POST,
            &upd,
            None,
            Some(json!({"key": ks[0], "nonce": d["nonce"]})),
        )
        .await;
    assert_eq!(r.body["data"]["progress"], 1);
    assert_eq!(r.body["data"]["complete"], false);
    s.call_at(
        1,
        Method::POST,
        &upd,
        None,
        Some(json!({"key": ks[1], "nonce": d["nonce"]})),
    )
    .await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &upd,
            None,
            Some(json!({"key": ks[2], "nonce": d["nonce"]})),
        )
        .await;
    assert_eq!(r.body["data"]["complete"], true);
    let token = decode_otp(r.body["data"]["encoded_token"].as_str().unwrap(), &otp);
    // The decoded token is a working DR operation token.
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/reindex"),
            None,
            Some(json!({"dr_operation_token": token})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        s.call_at(1, Method::GET, &p, None, None).await.body["data"]["started"],
        false
    );
}

#[tokio::test]
async fn only_one_generation_attempt_at_a_time_and_cancel_clears_it() {
    let s = pair().await;
    let p = format!("{DR}/secondary/generate-operation-token/attempt");
    let r = s.call_at(1, Method::POST, &p, None, None).await;
    let nonce = r.body["data"]["nonce"].clone();
    assert_eq!(s.call_at(1, Method::POST, &p, None, None).await.status, 400);
    let ks = keys(&s).await;
    let upd = format!("{DR}/secondary/generate-operation-token/update");
    s.call_at(
        1,
        Method::POST,
        &upd,
        None,
        Some(json!({"key": ks[0], "nonce": nonce})),
    )
    .await;
    assert_eq!(
        s.call_at(1, Method::DELETE, &p, None, None).await.status,
        204
    );
    let r = s.call_at(1, Method::GET, &p, None, None).await;
    assert_eq!(r.body["data"]["started"], false);
    assert_eq!(r.body["data"]["progress"], 0);
    assert_eq!(s.call_at(1, Method::POST, &p, None, None).await.status, 200);
}

#[tokio::test]
async fn generation_update_rejects_wrong_nonce_repeated_and_unknown_keys() {
    let s = pair().await;
    let attempt = format!("{DR}/secondary/generate-operation-token/attempt");
    let r = s.call_at(1, Method::POST, &attempt, None, None).await;
    let nonce = r.body["data"]["nonce"].as_str().unwrap().to_string();
    let ks = keys(&s).await;
    let upd = format!("{DR}/secondary/generate-operation-token/update");
    let call = |body: Value| {
        let s = &s;
        let upd = upd.clone();
        async move { s.call_at(1, Method::POST, &upd, None, Some(body)).await }
    };
    assert_eq!(
        call(json!({"key": ks[0], "nonce": "wrong"})).await.status,
        400
    );
    assert_eq!(
        call(json!({"key": ks[0], "nonce": nonce})).await.status,
        200
    );
    let r = call(json!({"key": ks[0], "nonce": nonce})).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!(["given key has already been provided during this generation operation"])
    );
    let r = call(json!({"nonce": nonce})).await;
    assert_eq!(
        r.body["errors"],
        json!(["'key' must be specified in request body as JSON"])
    );
    assert_eq!(
        call(json!({"key": "not hex or base64!", "nonce": nonce}))
            .await
            .status,
        400
    );
    // A wrong share is only found out at the threshold, which aborts and resets the progress.
    assert_eq!(
        call(json!({"key": ks[1], "nonce": nonce})).await.status,
        200
    );
    let r = call(json!({"key": "ab".repeat(32), "nonce": nonce})).await;
    assert_eq!(r.status, 400);
    assert!(r.body["errors"][0]
        .as_str()
        .unwrap()
        .starts_with("root generation aborted"));
    let st = s.call_at(1, Method::GET, &attempt, None, None).await;
    assert_eq!(st.body["data"]["started"], true);
    assert_eq!(st.body["data"]["progress"], 0);
}

#[tokio::test]
async fn generation_accepts_base64_shares_and_a_caller_otp() {
    let s = pair().await;
    let attempt = format!("{DR}/secondary/generate-operation-token/attempt");
    let otp = "A".repeat(28);
    let r = s
        .call_at(1, Method::POST, &attempt, None, Some(json!({"otp": otp})))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["otp"], "");
    let nonce = r.body["data"]["nonce"].clone();
    let b64: Vec<String> = serde_json::from_value(
        s.admin(Method::GET, "keys", None).await.body["keys_base64"].clone(),
    )
    .unwrap();
    let mut last = Value::Null;
    for k in b64.iter().take(3) {
        last = s
            .call_at(
                1,
                Method::POST,
                &format!("{DR}/secondary/generate-operation-token/update"),
                None,
                Some(json!({"key": k, "nonce": nonce})),
            )
            .await
            .body["data"]
            .clone();
    }
    assert_eq!(last["complete"], true);
    assert_eq!(last["encoded_root_token"], "");
    let token = decode_otp(last["encoded_token"].as_str().unwrap(), &otp);
    assert!(token.starts_with("hvs."));
    let s2 = s
        .call_at(
            1,
            Method::POST,
            &attempt,
            None,
            Some(json!({"otp": "short"})),
        )
        .await;
    assert_eq!(s2.status, 400);
}

#[tokio::test]
async fn operation_token_is_pgp_encrypted_when_a_key_is_given() {
    use pgp::composed::{
        EncryptionCaps, KeyType, Message, SecretKeyParamsBuilder, SignedPublicKey,
        SubkeyParamsBuilder,
    };
    use pgp::crypto::ecc_curve::ECCCurve;
    use pgp::ser::Serialize;
    use pgp::types::{KeyDetails, Password};

    let mut enc = SubkeyParamsBuilder::default();
    enc.key_type(KeyType::ECDH(ECCCurve::Curve25519Legacy))
        .can_sign(false)
        .can_encrypt(EncryptionCaps::All);
    let mut params = SecretKeyParamsBuilder::default();
    params
        .key_type(KeyType::Ed25519Legacy)
        .can_certify(true)
        .can_sign(true)
        .primary_user_id("Op <op@example.com>".into())
        .subkeys(vec![enc.build().unwrap()]);
    let secret = params
        .build()
        .unwrap()
        .generate(rand08::thread_rng())
        .unwrap();
    let public = SignedPublicKey::from(secret.clone());
    let pub_b64 = base64::engine::general_purpose::STANDARD.encode(public.to_bytes().unwrap());

    let s = pair().await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/generate-operation-token/attempt"),
            None,
            Some(json!({"pgp_key": pub_b64})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["data"]["otp"], "");
    assert_eq!(
        r.body["data"]["pgp_fingerprint"],
        format!("{:x}", public.fingerprint())
    );
    let nonce = r.body["data"]["nonce"].clone();
    let mut last = Value::Null;
    for k in keys(&s).await.into_iter().take(3) {
        last = s
            .call_at(
                1,
                Method::POST,
                &format!("{DR}/secondary/generate-operation-token/update"),
                None,
                Some(json!({"key": k, "nonce": nonce})),
            )
            .await
            .body["data"]
            .clone();
    }
    let msg = base64::engine::general_purpose::STANDARD
        .decode(last["encoded_token"].as_str().unwrap())
        .unwrap();
    let mut dec = Message::from_bytes(&msg[..])
        .unwrap()
        .decrypt(&Password::empty(), &secret)
        .unwrap();
    let token = String::from_utf8(dec.as_data_vec().unwrap()).unwrap();
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/merkle-check"),
            None,
            Some(json!({"dr_operation_token": token})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[tokio::test]
async fn bad_pgp_key_is_400() {
    let s = pair().await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/generate-operation-token/attempt"),
            None,
            Some(json!({"pgp_key": "bm90IGEga2V5"})),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn promote_needs_a_valid_operation_token_and_a_gone_primary_unless_forced() {
    let s = pair().await;
    let p = format!("{DR}/secondary/promote");
    assert_eq!(
        s.call_at(1, Method::POST, &p, None, Some(json!({})))
            .await
            .status,
        400
    );
    assert_eq!(
        s.call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": "nope"}))
        )
        .await
        .status,
        400
    );
    let op = op_token(&s, 1).await;
    // The primary is still active: refused unless forced.
    let r = s
        .call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op, "force": true})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["complete"], true);
    assert_eq!(r.body["data"]["complete"], true);
    assert!(r.body["progress"].is_u64());
    assert!(r.body["required"].is_u64());
    assert_eq!(s.status(1).await["mode"], "primary");
}

#[tokio::test]
async fn failover_demote_promote_then_update_primary_with_token() {
    let s = pair().await;
    s.at(
        0,
        Method::PUT,
        "sys/policies/acl/keep",
        Some(json!({"policy": "path \"a\" { capabilities = [\"read\"] }"})),
    )
    .await;
    // Fail over: demote 0, promote 1.
    let r = s
        .at(0, Method::POST, &format!("{DR}/primary/demote"), None)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(s.status(0).await["mode"], "secondary");
    let op1 = op_token(&s, 1).await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/promote"),
            None,
            Some(json!({"dr_operation_token": op1})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        s.at(1, Method::GET, "sys/policies/acl/keep", None)
            .await
            .status,
        200
    );
    // The demoted cluster cannot use update_primary_addrs; it needs a token from the new primary.
    let op0 = op_token(&s, 0).await;
    let new_primary = s.status(1).await;
    let addr = s.sb.secrets_urls[1].clone();
    let r = s
        .call_at(
            0,
            Method::POST,
            &format!("{DR}/secondary/update-primary"),
            None,
            Some(json!({"dr_operation_token": op0, "update_primary_addrs": [addr]})),
        )
        .await;
    assert_eq!(r.status, 400);
    let t = activation(&s, 1, "old-primary").await;
    let r = s
        .call_at(
            0,
            Method::POST,
            &format!("{DR}/secondary/update-primary"),
            None,
            Some(json!({"dr_operation_token": op0, "token": t})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let st = s.status(0).await;
    assert_eq!(st["state"], "stream-wals");
    assert_eq!(st["cluster_id"], new_primary["cluster_id"]);
    assert_eq!(
        s.status(1).await["known_secondaries"],
        json!(["old-primary"])
    );
}

#[tokio::test]
async fn update_primary_rejects_token_with_addrs_and_blank_token_forgets_the_primary() {
    let s = pair().await;
    let op = op_token(&s, 1).await;
    let p = format!("{DR}/secondary/update-primary");
    let r = s
        .call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op, "token": "x", "update_primary_addrs": ["a"]})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op, "token": ""})),
        )
        .await;
    assert_eq!(r.status, 204);
    let st = s.status(1).await;
    assert_eq!(st["mode"], "secondary");
    assert_eq!(st["known_primary_cluster_addrs"], json!([]));
    assert_eq!(st["primaries"], json!([]));
    // update_primary_addrs reconnects to the primary of the same replication set.
    let addr = s.sb.secrets_urls[0].clone();
    let r = s
        .call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op, "update_primary_addrs": [addr]})),
        )
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert_eq!(s.status(1).await["state"], "stream-wals");
}

#[tokio::test]
async fn primary_disable_and_reenable_changes_the_cluster_id() {
    let s = pair().await;
    let id1 = s.status(0).await["cluster_id"].clone();
    assert_eq!(
        s.at(0, Method::POST, &format!("{DR}/primary/disable"), None)
            .await
            .status,
        200
    );
    assert_eq!(s.status(0).await["mode"], "disabled");
    assert_ne!(s.status(1).await["state"], "stream-wals");
    s.at(0, Method::POST, &format!("{DR}/primary/enable"), None)
        .await;
    assert_ne!(s.status(0).await["cluster_id"], id1);
}

#[tokio::test]
async fn secondary_disable_needs_an_operation_token() {
    let s = pair().await;
    let p = format!("{DR}/secondary/disable");
    assert_eq!(
        s.call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": "x"}))
        )
        .await
        .status,
        400
    );
    let op = op_token(&s, 1).await;
    assert_eq!(
        s.call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op}))
        )
        .await
        .status,
        200
    );
    assert_eq!(s.status(1).await["mode"], "disabled");
    assert_eq!(
        s.status(0).await["secondaries"][0]["connection_status"],
        "disconnected"
    );
}

#[tokio::test]
async fn operation_token_delete_invalidates_it() {
    let s = pair().await;
    let op = op_token(&s, 1).await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/operation-token/delete"),
            None,
            Some(json!({"dr_operation_token": op})),
        )
        .await;
    assert_eq!(r.status, 204);
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/reindex"),
            None,
            Some(json!({"dr_operation_token": op})),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn reindex_answers_warnings() {
    let s = pair().await;
    let op = op_token(&s, 1).await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &format!("{DR}/secondary/reindex"),
            None,
            Some(
                json!({"dr_operation_token": op, "diff": true, "force": false, "skip_flush": true}),
            ),
        )
        .await;
    assert_eq!(r.status, 200);
    let w = r.body["warnings"].as_array().unwrap();
    assert!(!w.is_empty() && w.iter().all(|x| x.is_string()));
}

#[tokio::test]
async fn merkle_check_reports_corruption_in_the_documented_shape() {
    let s = pair().await;
    let op = op_token(&s, 1).await;
    let p = format!("{DR}/secondary/merkle-check");
    let r = s
        .call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op})),
        )
        .await;
    assert_eq!(r.status, 200);
    let rep = &r.body["data"]["merkle_corruption_report"];
    assert_eq!(rep["corrupted_root"], false);
    assert_eq!(rep["corrupted_tree_map"], json!({}));
    assert!(rep["last_corruption_check_epoch"].is_string());
    // Corrupt the tree through the admin API of cluster 1.
    let url = format!("{}/_sandbox/secrets/dr/corrupt", s.sb.secrets_urls[1]);
    assert_eq!(
        s.client.post(url).send().await.unwrap().status().as_u16(),
        204
    );
    let r = s
        .call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op})),
        )
        .await;
    let rep = &r.body["data"]["merkle_corruption_report"];
    assert_eq!(rep["corrupted_root"], true);
    let page = &rep["corrupted_tree_map"]["1"];
    assert_eq!(page["corrupted_subtree_root"], true);
    assert_eq!(page["tree_type"], "replicated");
    assert!(page["root_hash"].is_string());
    assert_eq!(page["corrupted_index_tuples_map"]["5"]["corrupted"], true);
    assert!(page["corrupted_index_tuples_map"]["5"]["subpages"].is_array());
    // Reindex repairs it.
    s.call_at(
        1,
        Method::POST,
        &format!("{DR}/secondary/reindex"),
        None,
        Some(json!({"dr_operation_token": op})),
    )
    .await;
    let r = s
        .call_at(
            1,
            Method::POST,
            &p,
            None,
            Some(json!({"dr_operation_token": op})),
        )
        .await;
    assert_eq!(
        r.body["data"]["merkle_corruption_report"]["corrupted_root"],
        false
    );
}

#[tokio::test]
async fn a_secondary_cannot_enable_as_primary_and_a_primary_cannot_enable_as_secondary() {
    let s = pair().await;
    assert_eq!(
        s.at(
            0,
            Method::POST,
            &format!("{DR}/secondary/enable"),
            Some(json!({"token": "x"}))
        )
        .await
        .status,
        400
    );
    assert_eq!(
        s.at(1, Method::POST, &format!("{DR}/primary/enable"), None)
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn dr_endpoints_need_an_enterprise_licence() {
    let s = start_with(SandboxOptions {
        edition: Edition::Community,
        secrets_clusters: 2,
        ..SandboxOptions::ephemeral()
    })
    .await;
    let r = s
        .root(Method::POST, &format!("{DR}/primary/enable"), None)
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        s.root(Method::GET, &format!("{DR}/status"), None)
            .await
            .status,
        404
    );
    // Without a token the unregistered path is refused first, as on the real service.
    assert_eq!(
        s.call(Method::GET, &format!("{DR}/status"), None, None)
            .await
            .status,
        403
    );
    let s = start_with(SandboxOptions {
        edition: Edition::Enterprise,
        secrets_clusters: 2,
        ..SandboxOptions::ephemeral()
    })
    .await;
    assert_eq!(
        s.root(Method::POST, &format!("{DR}/primary/enable"), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn dr_endpoints_are_restricted_to_the_root_namespace() {
    let s = three().await;
    let r = s
        .client
        .post(format!("{}/v1/{DR}/primary/enable", s.url))
        .header("X-Secrets-Token", &s.root)
        .header("X-Secrets-Namespace", "team-a")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(s.status(0).await["mode"], "disabled");
    let r = s
        .client
        .get(format!("{}/v1/{DR}/status", s.url))
        .header("X-Secrets-Namespace", "team-a")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = s
        .client
        .post(format!("{}/v1/{DR}/primary/enable", s.url))
        .header("X-Secrets-Token", &s.root)
        .header("X-Secrets-Namespace", "root")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn overall_replication_status_includes_dr() {
    let s = pair().await;
    let r = s
        .call_at(1, Method::GET, "sys/replication/status", None, None)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["dr"]["mode"], "secondary");
    assert_eq!(r.body["data"]["performance"]["mode"], "disabled");
}
