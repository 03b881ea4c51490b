//! Conformance of the transform secrets engine (spec C §2.1, §4.1).

use crate::secrets_support;

use base64::Engine;
use reqwest::Method;
use rsa::pkcs8::DecodePublicKey;
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, RsaPublicKey};
use secrets_support::*;
use serde_json::{json, Value};

async fn put(s: &S, p: &str, b: Value) -> R {
    s.root(Method::POST, &format!("transform/{p}"), Some(b))
        .await
}
async fn get(s: &S, p: &str) -> R {
    s.root(Method::GET, &format!("transform/{p}"), None).await
}

async fn template(s: &S) {
    let r = put(s, "template/ccn", json!({"type": "regex", "pattern": r"(\d{4})-(\d{4})-(\d{4})-(\d{4})", "alphabet": "builtin/numeric"})).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
}

async fn public_key(s: &S) -> RsaPublicKey {
    let r = get(s, "wrapping_key").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    RsaPublicKey::from_public_key_pem(r.body["data"]["public_key"].as_str().unwrap())
        .expect("PEM public key")
}

/// Wraps `target` for import: RSA-OAEP(hash) of an ephemeral AES-256 key, then AES-KWP.
fn wrap<D: 'static + rsa::sha2::digest::Digest + rsa::sha2::digest::DynDigest + Send + Sync>(
    pk: &RsaPublicKey,
    target: &[u8],
) -> String {
    let mut rng = rand08::thread_rng();
    let aes: [u8; 32] = rand08::Rng::gen(&mut rng);
    let mut out = pk.encrypt(&mut rng, Oaep::new::<D>(), &aes).unwrap();
    let kek = aes_kw::KekAes256::new(&aes.into());
    out.extend(kek.wrap_with_padding_vec(target).unwrap());
    base64::engine::general_purpose::STANDARD.encode(out)
}

#[tokio::test]
async fn role_write_read_list_delete() {
    let s = start().await;
    assert_eq!(
        put(
            &s,
            "role/payments",
            json!({"transformations": "ccn-fpe, ccn-mask"})
        )
        .await
        .status,
        204
    );
    let r = get(&s, "role/payments").await;
    assert_eq!(
        r.body["data"]["transformations"],
        json!(["ccn-fpe", "ccn-mask"])
    );
    put(&s, "role/hr", json!({"transformations": ["ssn"]})).await;
    let r = s.root(list(), "transform/role", None).await;
    assert_eq!(r.body["data"]["keys"], json!(["hr", "payments"]));
    let r = s.root(list(), "transform/role?filter=pay*", None).await;
    assert_eq!(r.body["data"]["keys"], json!(["payments"]));
    assert_eq!(
        s.root(Method::DELETE, "transform/role/payments", None)
            .await
            .status,
        204
    );
    assert_eq!(get(&s, "role/payments").await.status, 404);
}

#[tokio::test]
async fn role_transformations_default_to_empty() {
    let s = start().await;
    put(&s, "role/r", json!({})).await;
    assert_eq!(
        get(&s, "role/r").await.body["data"]["transformations"],
        json!([])
    );
}

#[tokio::test]
async fn fpe_transformation_has_type_specific_defaults() {
    let s = start().await;
    template(&s).await;
    assert_eq!(
        put(
            &s,
            "transformations/fpe/ccn-fpe",
            json!({"template": "ccn"})
        )
        .await
        .status,
        204
    );
    let d = get(&s, "transformation/ccn-fpe").await.body["data"].clone();
    assert_eq!(d["type"], "fpe");
    assert_eq!(d["templates"], json!(["ccn"]));
    assert_eq!(d["tweak_source"], "supplied");
    assert_eq!(d["allowed_roles"], json!([]));
}

#[tokio::test]
async fn fpe_needs_a_template_and_a_valid_tweak_source() {
    let s = start().await;
    assert_eq!(
        put(&s, "transformations/fpe/x", json!({})).await.status,
        400
    );
    assert_eq!(
        put(
            &s,
            "transformations/fpe/x",
            json!({"template": "builtin/creditcardnumber", "tweak_source": "random"})
        )
        .await
        .status,
        400
    );
    for ts in ["supplied", "generated", "internal"] {
        let r = put(
            &s,
            &format!("transformations/fpe/{ts}"),
            json!({"template": "builtin/creditcardnumber", "tweak_source": ts}),
        )
        .await;
        assert_eq!(r.status, 204, "{ts}");
    }
}

#[tokio::test]
async fn masking_character_defaults_to_star_and_keeps_the_first_character() {
    let s = start().await;
    template(&s).await;
    put(&s, "transformations/masking/m1", json!({"template": "ccn"})).await;
    assert_eq!(
        get(&s, "transformation/m1").await.body["data"]["masking_character"],
        "*"
    );
    put(
        &s,
        "transformations/masking/m2",
        json!({"template": "ccn", "masking_character": "#%"}),
    )
    .await;
    assert_eq!(
        get(&s, "transformation/m2").await.body["data"]["masking_character"],
        "#"
    );
}

#[tokio::test]
async fn tokenization_has_defaults_and_convergent_is_immutable() {
    let s = start().await;
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/t",
            json!({"allowed_roles": "a,b"})
        )
        .await
        .status,
        204
    );
    let d = get(&s, "transformation/t").await.body["data"].clone();
    assert_eq!(d["type"], "tokenization");
    assert_eq!(d["mapping_mode"], "default");
    assert_eq!(d["stores"], json!(["builtin/internal"]));
    assert_eq!(d["max_ttl"], 0);
    assert_eq!(d["convergent"], false);
    assert_eq!(d["allowed_roles"], json!(["a", "b"]));
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/t",
            json!({"convergent": true})
        )
        .await
        .status,
        400
    );
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/t",
            json!({"mapping_mode": "exportable", "max_ttl": "1h"})
        )
        .await
        .status,
        204
    );
    let d = get(&s, "transformation/t").await.body["data"].clone();
    assert_eq!(d["mapping_mode"], "exportable");
    assert_eq!(d["max_ttl"], 3600);
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/u",
            json!({"mapping_mode": "weird"})
        )
        .await
        .status,
        400
    );
    // A store that does not exist yet is accepted (references are not checked when written).
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/u",
            json!({"stores": ["missing-store"]})
        )
        .await
        .status,
        204
    );
}

#[tokio::test]
async fn transformation_type_is_immutable() {
    let s = start().await;
    put(&s, "transformations/tokenization/t", json!({})).await;
    let r = put(
        &s,
        "transformations/masking/t",
        json!({"template": "builtin/creditcardnumber"}),
    )
    .await;
    assert_eq!(r.status, 400);
    let r = put(
        &s,
        "transformation/t",
        json!({"type": "fpe", "template": "builtin/creditcardnumber"}),
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn deprecated_generic_endpoint_creates_transformations() {
    let s = start().await;
    assert_eq!(
        put(
            &s,
            "transformation/g",
            json!({"template": "builtin/creditcardnumber"})
        )
        .await
        .status,
        400
    );
    let r = put(
        &s,
        "transformation/g",
        json!({"type": "masking", "template": "builtin/creditcardnumber"}),
    )
    .await;
    assert!(r.status == 200 || r.status == 204, "{:?}", r.body);
    let r = put(
        &s,
        "transformation/tok",
        json!({"type": "tokenization", "template": "ignored"}),
    )
    .await;
    assert!(r.status == 200 || r.status == 204, "{:?}", r.body);
    assert_eq!(
        get(&s, "transformation/g").await.body["data"]["type"],
        "masking"
    );
}

#[tokio::test]
async fn transformation_list_and_deletion_needs_deletion_allowed() {
    let s = start().await;
    put(
        &s,
        "transformations/fpe/f",
        json!({"template": "builtin/creditcardnumber"}),
    )
    .await;
    put(
        &s,
        "transformations/masking/m",
        json!({"template": "builtin/creditcardnumber"}),
    )
    .await;
    assert_eq!(
        s.root(list(), "transform/transformation", None).await.body["data"]["keys"],
        json!(["f", "m"])
    );
    assert_eq!(
        s.root(Method::DELETE, "transform/transformation/f", None)
            .await
            .status,
        400
    );
    assert_eq!(
        s.root(Method::DELETE, "transform/transformation/m", None)
            .await
            .status,
        204
    );
    put(
        &s,
        "transformations/fpe/f",
        json!({"deletion_allowed": true}),
    )
    .await;
    assert_eq!(
        s.root(Method::DELETE, "transform/transformation/f", None)
            .await
            .status,
        204
    );
    assert_eq!(get(&s, "transformation/f").await.status, 404);
}

#[tokio::test]
async fn template_is_a_regex_with_capture_groups() {
    let s = start().await;
    assert_eq!(
        put(&s, "template/t", json!({"pattern": r"(\d+)"}))
            .await
            .status,
        400
    );
    assert_eq!(
        put(
            &s,
            "template/t",
            json!({"type": "glob", "pattern": r"(\d+)"})
        )
        .await
        .status,
        400
    );
    assert_eq!(
        put(
            &s,
            "template/t",
            json!({"type": "regex", "pattern": r"(\d+"})
        )
        .await
        .status,
        400
    );
    assert_eq!(
        put(
            &s,
            "template/t",
            json!({"type": "regex", "pattern": r"\d+"})
        )
        .await
        .status,
        400
    );
    let r = put(
        &s,
        "template/t",
        json!({"type": "regex", "pattern": r"(\d+)-(\d+)", "alphabet": "builtin/numeric",
        "encode_format": "$1-$2", "decode_formats": {"last": "$2"}}),
    )
    .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let d = get(&s, "template/t").await.body["data"].clone();
    assert_eq!(d["type"], "regex");
    assert_eq!(d["pattern"], r"(\d+)-(\d+)");
    assert_eq!(d["alphabet"], "builtin/numeric");
    assert_eq!(d["encode_format"], "$1-$2");
    assert_eq!(d["decode_formats"], json!({"last": "$2"}));
    assert_eq!(
        s.root(list(), "transform/template", None).await.body["data"]["keys"],
        json!(["t"])
    );
    assert_eq!(
        s.root(Method::DELETE, "transform/template/t", None)
            .await
            .status,
        204
    );
    assert_eq!(get(&s, "template/t").await.status, 404);
}

#[tokio::test]
async fn alphabet_write_read_list_delete_and_validation() {
    let s = start().await;
    assert_eq!(
        put(&s, "alphabet/hex", json!({"alphabet": "0123456789abcdef"}))
            .await
            .status,
        204
    );
    assert_eq!(
        get(&s, "alphabet/hex").await.body["data"]["alphabet"],
        "0123456789abcdef"
    );
    assert_eq!(
        s.root(list(), "transform/alphabet", None).await.body["data"]["keys"],
        json!(["hex"])
    );
    assert_eq!(put(&s, "alphabet/bad", json!({})).await.status, 400);
    assert_eq!(
        put(&s, "alphabet/bad", json!({"alphabet": "aa"}))
            .await
            .status,
        400
    );
    assert_eq!(
        put(&s, "alphabet/bad", json!({"alphabet": "a"}))
            .await
            .status,
        400
    );
    // A custom alphabet can be used by a template.
    assert_eq!(
        put(
            &s,
            "template/h",
            json!({"type": "regex", "pattern": "([0-9a-f]+)", "alphabet": "hex"})
        )
        .await
        .status,
        204
    );
    assert_eq!(
        s.root(Method::DELETE, "transform/template/h", None)
            .await
            .status,
        204
    );
    assert_eq!(
        s.root(Method::DELETE, "transform/alphabet/hex", None)
            .await
            .status,
        204
    );
    assert_eq!(get(&s, "alphabet/hex").await.status, 404);
}

#[tokio::test]
async fn sql_store_defaults_and_credentials_are_never_read_back() {
    let s = start().await;
    let r = put(&s, "stores/pg", json!({"type": "sql", "driver": "postgres",
        "connection_string": "postgresql://{{username}}:{{password}}@db:5432/tokens", "username": "app", "password": "s3cret"})).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = get(&s, "stores/pg").await;
    let d = &r.body["data"];
    assert_eq!(d["type"], "sql");
    assert_eq!(d["driver"], "postgres");
    assert_eq!(d["supported_transformations"], json!(["tokenization"]));
    assert_eq!(d["schema"], "public");
    assert_eq!(d["max_open_connections"], 4);
    assert_eq!(d["max_idle_connections"], 4);
    assert_eq!(d["max_connection_lifetime"], 0);
    assert!(d.get("username").is_none() && d.get("password").is_none());
    assert!(!r.body.to_string().contains("s3cret"));
    // Stores can back tokenization transformations.
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/t",
            json!({"stores": ["pg"]})
        )
        .await
        .status,
        204
    );
}

#[tokio::test]
async fn sql_store_rejects_bad_input() {
    let s = start().await;
    let ok = json!({"type": "sql", "driver": "mysql", "connection_string": "{{username}}:{{password}}@tcp(db)/t?parseTime=true", "username": "u", "password": "p"});
    for (k, v) in [
        ("type", json!("kv")),
        ("driver", json!("oracle")),
        ("username", json!("")),
        ("password", Value::Null),
        ("supported_transformations", json!(["fpe"])),
    ] {
        let mut b = ok.clone();
        if v.is_null() {
            b.as_object_mut().unwrap().remove(k);
        } else {
            b[k] = v;
        }
        assert_eq!(put(&s, "stores/x", b).await.status, 400, "{k}");
    }
    assert_eq!(put(&s, "stores/x", ok.clone()).await.status, 204);
    let mut no_parse = ok.clone();
    no_parse["connection_string"] = json!("{{username}}:{{password}}@tcp(db)/t");
    let r = put(&s, "stores/y", no_parse).await;
    assert_eq!(r.status, 200);
    assert!(r.body["warnings"][0]
        .as_str()
        .unwrap()
        .contains("parseTime"));
}

#[tokio::test]
async fn store_schema_needs_its_own_credentials() {
    let s = start().await;
    assert_eq!(
        put(
            &s,
            "stores/none/schema",
            json!({"username": "ddl", "password": "p"})
        )
        .await
        .status,
        400
    );
    put(&s, "stores/pg", json!({"type": "sql", "driver": "postgres", "connection_string": "x", "username": "app", "password": "p"})).await;
    assert_eq!(
        put(&s, "stores/pg/schema", json!({"username": "ddl"}))
            .await
            .status,
        400
    );
    assert_eq!(
        put(
            &s,
            "stores/pg/schema",
            json!({"username": "ddl", "password": "p", "transformation_type": "fpe"})
        )
        .await
        .status,
        400
    );
    assert_eq!(
        put(
            &s,
            "stores/pg/schema",
            json!({"username": "ddl", "password": "p"})
        )
        .await
        .status,
        204
    );
}

#[tokio::test]
async fn wrapping_key_is_a_4096_bit_rsa_public_key() {
    let s = start().await;
    let pk = public_key(&s).await;
    assert_eq!(pk.size() * 8, 4096);
    // Stable across reads.
    assert_eq!(public_key(&s).await, pk);
}

#[tokio::test]
async fn fpe_import_really_unwraps_the_key_and_only_into_a_new_transformation() {
    let s = start().await;
    template(&s).await;
    let pk = public_key(&s).await;
    let ct = wrap::<rsa::sha2::Sha256>(&pk, &[7u8; 32]);
    let r = put(
        &s,
        "transformations/fpe/imp/import",
        json!({"ciphertext": ct, "template": "ccn", "allowed_roles": ["r"]}),
    )
    .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let d = get(&s, "transformation/imp").await.body["data"].clone();
    assert_eq!(d["type"], "fpe");
    assert_eq!(d["allowed_roles"], json!(["r"]));
    let ct = wrap::<rsa::sha2::Sha256>(&pk, &[8u8; 32]);
    let r = put(
        &s,
        "transformations/fpe/imp/import",
        json!({"ciphertext": ct, "template": "ccn"}),
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn import_honours_the_hash_function() {
    let s = start().await;
    let pk = public_key(&s).await;
    let ct = wrap::<rsa::sha2::Sha512>(&pk, &[1u8; 32]);
    let r = put(
        &s,
        "transformations/tokenization/t512/import",
        json!({"ciphertext": ct, "hash_function": "SHA512"}),
    )
    .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let ct = wrap::<rsa::sha2::Sha256>(&pk, &[1u8; 32]);
    let r = put(
        &s,
        "transformations/tokenization/mismatch/import",
        json!({"ciphertext": ct, "hash_function": "SHA1"}),
    )
    .await;
    assert_eq!(r.status, 400);
    let r = put(
        &s,
        "transformations/tokenization/bad/import",
        json!({"ciphertext": ct, "hash_function": "MD5"}),
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn import_rejects_malformed_ciphertexts() {
    let s = start().await;
    let pk = public_key(&s).await;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    for ct in [
        json!("not base64!!"),
        json!(b64(&[1u8; 100])),
        json!(b64(&[1u8; 600])),
        json!(wrap::<rsa::sha2::Sha256>(&pk, &[1u8; 16])),
    ] {
        let r = put(
            &s,
            "transformations/tokenization/x/import",
            json!({"ciphertext": ct}),
        )
        .await;
        assert_eq!(r.status, 400, "{ct}");
    }
    assert_eq!(
        put(&s, "transformations/tokenization/x/import", json!({}))
            .await
            .status,
        400
    );
    // A corrupted wrapped key fails the AES key unwrap.
    let good = wrap::<rsa::sha2::Sha256>(&pk, &[1u8; 32]);
    let mut raw = base64::engine::general_purpose::STANDARD
        .decode(good)
        .unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 0xff;
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/x/import",
            json!({"ciphertext": b64(&raw)})
        )
        .await
        .status,
        400
    );
    assert_eq!(get(&s, "transformation/x").await.status, 404);
}

#[tokio::test]
async fn tokenization_import_does_not_support_convergent() {
    let s = start().await;
    let pk = public_key(&s).await;
    let ct = wrap::<rsa::sha2::Sha256>(&pk, &[1u8; 32]);
    let r = put(
        &s,
        "transformations/tokenization/c/import",
        json!({"ciphertext": ct, "convergent": true}),
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn import_version_needs_an_imported_key_not_rotated_inside() {
    let s = start().await;
    let pk = public_key(&s).await;
    put(&s, "transformations/tokenization/native", json!({})).await;
    let ct = wrap::<rsa::sha2::Sha256>(&pk, &[2u8; 32]);
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/native/import_version",
            json!({"ciphertext": ct})
        )
        .await
        .status,
        400
    );
    let ct = wrap::<rsa::sha2::Sha256>(&pk, &[3u8; 32]);
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/imp/import",
            json!({"ciphertext": ct, "allow_rotation": true})
        )
        .await
        .status,
        204
    );
    let ct = wrap::<rsa::sha2::Sha256>(&pk, &[4u8; 32]);
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/imp/import_version",
            json!({"ciphertext": ct})
        )
        .await
        .status,
        204
    );
    assert_eq!(
        put(&s, "tokenization/keys/imp/rotate", json!({}))
            .await
            .status,
        204
    );
    let ct = wrap::<rsa::sha2::Sha256>(&pk, &[5u8; 32]);
    assert_eq!(
        put(
            &s,
            "transformations/tokenization/imp/import_version",
            json!({"ciphertext": ct})
        )
        .await
        .status,
        400
    );
}

#[tokio::test]
async fn transform_can_be_mounted_at_another_path() {
    let s = start().await;
    assert_eq!(
        s.root(
            Method::POST,
            "sys/mounts/tx",
            Some(json!({"type": "transform"}))
        )
        .await
        .status,
        204
    );
    assert_eq!(
        s.root(
            Method::POST,
            "tx/role/r",
            Some(json!({"transformations": ["a"]}))
        )
        .await
        .status,
        204
    );
    assert_eq!(get(&s, "role/r").await.status, 404);
    let r = s.root(Method::GET, "sys/mounts", None).await;
    assert_eq!(r.body["data"]["tx/"]["type"], "transform");
    assert_eq!(
        s.root(
            Method::POST,
            "sys/mounts/tx",
            Some(json!({"type": "transform"}))
        )
        .await
        .status,
        400
    );
    assert_eq!(
        s.root(Method::DELETE, "sys/mounts/tx", None).await.status,
        204
    );
    assert_eq!(s.root(Method::GET, "tx/role/r", None).await.status, 404);
}

async fn delete(s: &S, p: &str) -> R {
    s.root(Method::DELETE, &format!("transform/{p}"), None)
        .await
}

/// The real engine's setup walkthrough writes role → transformation → template → alphabet, in
/// that order: none of the references is checked when written.
#[tokio::test]
async fn references_are_not_checked_when_written() {
    let s = start().await;
    for (path, body) in [
        (
            "role/payments",
            json!({"transformations": ["ccn-fpe", "tok"]}),
        ),
        (
            "transformations/fpe/ccn-fpe",
            json!({"template": "ccn", "tweak_source": "internal", "allowed_roles": ["payments"]}),
        ),
        (
            "transformations/masking/ccn-mask",
            json!({"template": "ccn"}),
        ),
        (
            "transformations/tokenization/tok",
            json!({"stores": ["pg"]}),
        ),
        (
            "template/ccn",
            json!({"type": "regex", "pattern": r"(\d{4})-(\d{4})", "alphabet": "digits"}),
        ),
        ("alphabet/digits", json!({"alphabet": "0123456789"})),
    ] {
        let r = put(&s, path, body).await;
        assert_eq!(r.status, 204, "{path}: {:?}", r.body);
    }
    assert_eq!(
        get(&s, "transformation/ccn-fpe").await.body["data"]["templates"],
        json!(["ccn"])
    );
    assert_eq!(
        get(&s, "transformation/tok").await.body["data"]["stores"],
        json!(["pg"])
    );
    assert_eq!(
        get(&s, "template/ccn").await.body["data"]["alphabet"],
        "digits"
    );
}

/// "Deletion Behavior": what is in use cannot be deleted until the reference is removed; a set
/// of objects can always be deleted in dependency order.
#[tokio::test]
async fn deleting_what_is_in_use_is_refused_with_the_user_named() {
    let s = start().await;
    put(&s, "alphabet/digits", json!({"alphabet": "0123456789"})).await;
    put(
        &s,
        "template/ccn",
        json!({"type": "regex", "pattern": r"(\d+)", "alphabet": "digits"}),
    )
    .await;
    put(&s, "stores/pg", json!({"type": "sql", "driver": "postgres",
        "connection_string": "postgresql://{{username}}:{{password}}@db/t", "username": "u", "password": "p"})).await;
    put(
        &s,
        "transformations/fpe/f",
        json!({"template": "ccn", "deletion_allowed": true}),
    )
    .await;
    put(
        &s,
        "transformations/tokenization/t",
        json!({"stores": ["pg"], "deletion_allowed": true}),
    )
    .await;
    put(&s, "role/payments", json!({"transformations": ["f"]})).await;

    for (path, needle) in [
        ("alphabet/digits", "template(s) ccn"),
        ("template/ccn", "transformation(s) f"),
        ("stores/pg", "transformation(s) t"),
        ("transformation/f", "role(s) payments"),
    ] {
        let r = delete(&s, path).await;
        assert_eq!(r.status, 400, "{path}");
        let msg = r.body["errors"][0].as_str().unwrap_or_default().to_string();
        assert!(
            msg.contains("in use") && msg.contains(needle),
            "{path}: {msg}"
        );
    }
    // Dependency order succeeds.
    for path in [
        "role/payments",
        "transformation/f",
        "transformation/t",
        "template/ccn",
        "stores/pg",
        "alphabet/digits",
    ] {
        assert_eq!(delete(&s, path).await.status, 204, "{path}");
    }
    assert_eq!(get(&s, "alphabet/digits").await.status, 404);
}

/// The sandbox admin API shows the key versions a transformation holds, for import tests.
#[tokio::test]
async fn admin_api_shows_the_imported_key() {
    let s = start().await;
    let pk = public_key(&s).await;
    let key = [7u8; 32];
    let r = put(
        &s,
        "transformations/tokenization/imp/import",
        json!({"ciphertext": wrap::<rsa::sha2::Sha256>(&pk, &key)}),
    )
    .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    let r = s
        .client
        .get(format!(
            "{}/_sandbox/secrets/transform/keys/transform/imp",
            s.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["keys"],
        json!([base64::engine::general_purpose::STANDARD.encode(key)])
    );
}

/// The engine is part of an enterprise module: the community edition has no transform mount,
/// so its paths answer like any unmounted path of the community server (404 `no handler for
/// route`, as OpenBao 2.7 answers; see `secrets_openbao.rs`).
#[tokio::test]
async fn community_edition_has_no_transform_engine() {
    let mut opts = quartet_sandbox::SandboxOptions::ephemeral();
    opts.edition = quartet_sandbox::Edition::Community;
    let s = start_with(opts).await;
    let r = put(&s, "alphabet/digits", json!({"alphabet": "0123456789"})).await;
    assert_eq!(r.status, 404);
    let text = r.body.to_string();
    assert!(
        text.contains("no handler for route") || text.contains("unsupported path"),
        "{:?}",
        r.body
    );
}
