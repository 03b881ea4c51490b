//! Service-account tokens of the dev API server, checked against what kube-apiserver does:
//! TokenRequest (`serviceaccounts/{name}/token`), TokenReview, the issuer discovery documents,
//! and `kubectl create token` with the real kubectl.

use crate::common;

use base64::Engine;
use common::{server, Http, Kubectl};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{json, Value};

const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

fn header_of(jwt: &str) -> Value {
    let h = jwt.split('.').next().unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(h)
            .unwrap(),
    )
    .unwrap()
}

/// Verify `jwt` with the key the server publishes at `/openid/v1/jwks`, as an external verifier
/// does (the `kid` picks the key).
async fn verify_with_jwks(h: &Http, jwt: &str) -> serde_json::Map<String, Value> {
    let (s, conf) = h.get("/.well-known/openid-configuration").await;
    assert_eq!(s, 200, "{conf}");
    assert_eq!(conf["issuer"], ISSUER);
    assert_eq!(
        conf["id_token_signing_alg_values_supported"],
        json!(["RS256"])
    );
    let jwks_path = conf["jwks_uri"]
        .as_str()
        .unwrap()
        .split_once("/openid/")
        .map(|(_, p)| format!("/openid/{p}"))
        .unwrap();
    // Issuer discovery is for ServiceAccounts (the bootstrap binding's group) and the admin,
    // not for anonymous callers, as on a real cluster.
    let r = h
        .client
        .get(format!("{}{jwks_path}", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let (c, jwks) = h.get(&jwks_path).await;
    assert_eq!(c, 200, "{jwks}");
    let kid = header_of(jwt)["kid"].as_str().unwrap().to_string();
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid.as_str())
        .expect("the token's kid is in the JWKS")
        .clone();
    assert_eq!(jwk["kty"], "RSA");
    assert_eq!(jwk["alg"], "RS256");
    let key =
        DecodingKey::from_rsa_components(jwk["n"].as_str().unwrap(), jwk["e"].as_str().unwrap())
            .unwrap();
    let mut v = Validation::new(Algorithm::RS256);
    v.validate_aud = false;
    v.set_issuer(&[ISSUER]);
    jsonwebtoken::decode::<serde_json::Map<String, Value>>(jwt, &key, &v)
        .expect("the signature verifies with the published key")
        .claims
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_request_returns_an_rs256_jwt_with_the_standard_claims_signed_by_the_published_key()
{
    let s = server().await;
    let h = Http::new(&s);
    let (code, sa) = h
        .get("/api/v1/namespaces/default/serviceaccounts/default")
        .await;
    assert_eq!(code, 200, "{sa}");
    let (code, tr) = h
        .post(
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"audiences": ["catalog", "other"], "expirationSeconds": 900}}),
        )
        .await;
    assert_eq!(code, 201, "{tr}");
    assert_eq!(tr["kind"], "TokenRequest");
    assert_eq!(tr["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(tr["spec"]["expirationSeconds"], 900);
    let jwt = tr["status"]["token"].as_str().unwrap();
    assert_eq!(header_of(jwt)["alg"], "RS256");
    let c = verify_with_jwks(&h, jwt).await;
    assert_eq!(c["iss"], ISSUER);
    assert_eq!(c["sub"], "system:serviceaccount:default:default");
    assert_eq!(c["aud"], json!(["catalog", "other"]));
    let (iat, nbf, exp) = (
        c["iat"].as_i64().unwrap(),
        c["nbf"].as_i64().unwrap(),
        c["exp"].as_i64().unwrap(),
    );
    assert_eq!(iat, nbf);
    assert_eq!(exp - iat, 900);
    assert!(!c["jti"].as_str().unwrap().is_empty());
    assert_eq!(c["kubernetes.io"]["namespace"], "default");
    assert_eq!(c["kubernetes.io"]["serviceaccount"]["name"], "default");
    assert_eq!(
        c["kubernetes.io"]["serviceaccount"]["uid"],
        sa["metadata"]["uid"]
    );
    let expires =
        chrono::DateTime::parse_from_rfc3339(tr["status"]["expirationTimestamp"].as_str().unwrap())
            .unwrap();
    assert_eq!(expires.timestamp(), exp);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_request_defaults_to_an_hour_and_the_issuer_audience_and_refuses_less_than_ten_minutes_or_a_missing_service_account(
) {
    let s = server().await;
    let h = Http::new(&s);
    let path = "/api/v1/namespaces/default/serviceaccounts/default/token";
    let (code, tr) = h.post(path, json!({"spec": {}})).await;
    assert_eq!(code, 201, "{tr}");
    assert_eq!(tr["spec"]["expirationSeconds"], 3600);
    assert_eq!(tr["spec"]["audiences"], json!([ISSUER]));
    let c = verify_with_jwks(&h, tr["status"]["token"].as_str().unwrap()).await;
    assert_eq!(c["aud"], json!([ISSUER]));
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        3600
    );

    let (code, st) = h
        .post(path, json!({"spec": {"expirationSeconds": 599}}))
        .await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(
        st["message"],
        "TokenRequest.authentication.k8s.io \"default\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
    );

    let (code, st) = h
        .post(
            "/api/v1/namespaces/default/serviceaccounts/nobody/token",
            json!({"spec": {}}),
        )
        .await;
    assert_eq!(code, 404, "{st}");
    assert_eq!(st["message"], "serviceaccounts \"nobody\" not found");
    // Only POST: the subresource is create-only.
    let (code, _) = h.get(path).await;
    assert_eq!(code, 405);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bound_to_a_secret_carries_its_claim_and_stops_reviewing_once_the_secret_is_gone() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, sec) = h
        .post(
            "/api/v1/namespaces/default/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "anchor"}}),
        )
        .await;
    assert_eq!(code, 201, "{sec}");
    let (code, tr) = h
        .post(
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            json!({"spec": {"audiences": ["x"], "boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "anchor"}}}),
        )
        .await;
    assert_eq!(code, 201, "{tr}");
    let jwt = tr["status"]["token"].as_str().unwrap().to_string();
    let c = verify_with_jwks(&h, &jwt).await;
    assert_eq!(c["kubernetes.io"]["secret"]["name"], "anchor");
    assert_eq!(c["kubernetes.io"]["secret"]["uid"], sec["metadata"]["uid"]);
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "spec": {"token": jwt, "audiences": ["x"]}});
    let (code, r) = h
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            review.clone(),
        )
        .await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["status"]["authenticated"], true, "{r}");
    h.delete("/api/v1/namespaces/default/secrets/anchor").await;
    let (_, r) = h
        .post("/apis/authentication.k8s.io/v1/tokenreviews", review)
        .await;
    assert_ne!(r["status"]["authenticated"], true, "{r}");
    // A missing bound object is 404, as for the real server.
    let (code, _) = h
        .post(
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            json!({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}}),
        )
        .await;
    assert_eq!(code, 404);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_review_authenticates_the_service_account_checks_the_audience_and_refuses_once_the_account_is_recreated(
) {
    let s = server().await;
    let h = Http::new(&s);
    let (code, _) = h
        .post(
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app"}}),
        )
        .await;
    assert_eq!(code, 201);
    let (_, tr) = h
        .post(
            "/api/v1/namespaces/default/serviceaccounts/app/token",
            json!({"spec": {"audiences": ["catalog"]}}),
        )
        .await;
    let jwt = tr["status"]["token"].as_str().unwrap().to_string();
    let review = |aud: Value, token: &str| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
               "spec": {"token": token, "audiences": aud}})
    };
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let (code, r) = h.post(path, review(json!(["catalog"]), &jwt)).await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["status"]["authenticated"], true, "{r}");
    assert_eq!(
        r["status"]["user"]["username"],
        "system:serviceaccount:default:app"
    );
    assert_eq!(r["status"]["audiences"], json!(["catalog"]));
    let groups = r["status"]["user"]["groups"].as_array().unwrap();
    assert!(
        groups.contains(&json!("system:serviceaccounts:default")),
        "{r}"
    );

    let (_, r) = h.post(path, review(json!(["vault"]), &jwt)).await;
    assert_ne!(r["status"]["authenticated"], true, "{r}");
    assert!(r["status"]["error"]
        .as_str()
        .unwrap()
        .contains("invalid bearer token"));
    let (_, r) = h.post(path, review(json!([]), "not-a-jwt")).await;
    assert_ne!(r["status"]["authenticated"], true, "{r}");

    // Recreated under the same name: a new uid, so the old token no longer reviews.
    h.delete("/api/v1/namespaces/default/serviceaccounts/app")
        .await;
    h.post(
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app"}}),
    )
    .await;
    let (_, r) = h.post(path, review(json!(["catalog"]), &jwt)).await;
    assert_ne!(r["status"]["authenticated"], true, "{r}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_the_token_subresource_of_serviceaccounts_as_the_real_server_does() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, list) = h.get("/api/v1").await;
    let entry = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "serviceaccounts/token")
        .expect("serviceaccounts/token listed")
        .clone();
    assert_eq!(entry["group"], "authentication.k8s.io");
    assert_eq!(entry["version"], "v1");
    assert_eq!(entry["kind"], "TokenRequest");
    assert_eq!(entry["verbs"], json!(["create"]));
    let r = h
        .req(reqwest::Method::GET, "/api")
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )
        .send()
        .await
        .unwrap();
    let doc: Value = r.json().await.unwrap();
    let sa = doc["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "serviceaccounts")
        .unwrap()
        .clone();
    assert!(
        sa["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["subresource"] == "token"
                && s["responseKind"]["kind"] == "TokenRequest"
                && s["verbs"] == json!(["create"])),
        "{sa}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_prints_a_token_for_the_audience_it_was_asked_for() {
    let s = server().await;
    let h = Http::new(&s);
    let k = Kubectl::new(&s);
    k.ok(&["create", "namespace", "ns"]);
    let out = k.ok(&[
        "create",
        "token",
        "default",
        "-n",
        "ns",
        "--audience",
        "x",
        "--duration",
        "20m",
    ]);
    let jwt = out.trim();
    let c = verify_with_jwks(&h, jwt).await;
    assert_eq!(c["sub"], "system:serviceaccount:ns:default");
    assert_eq!(c["aud"], json!(["x"]));
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        1200
    );
    let o = k.run(&["create", "token", "nobody", "-n", "ns"]);
    assert!(!o.ok);
    assert!(o.stderr.contains("not found"), "{}", o.stderr);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_state_directory_the_signing_key_survives_a_restart_so_issued_tokens_stay_valid() {
    use quartet_sandbox::apiserver::{ApiServer, ApiServerOptions};
    let dir = std::env::temp_dir().join(format!("quartet-sa-key-{}", uuid::Uuid::new_v4()));
    let opts = ApiServerOptions {
        state_dir: Some(dir.clone()),
        ..Default::default()
    };
    let s = ApiServer::start(opts.clone()).await.unwrap();
    let h = Http::new(&s);
    let (_, tr) = h
        .post(
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            json!({"spec": {"audiences": ["x"]}}),
        )
        .await;
    let jwt = tr["status"]["token"].as_str().unwrap().to_string();
    let pem = s.service_account_public_key_pem();
    s.shutdown().await;
    let key = std::fs::metadata(dir.join("sa-signing-key.pem")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(key.permissions().mode() & 0o777, 0o600);
    }

    let s = ApiServer::start(opts).await.unwrap();
    assert_eq!(s.service_account_public_key_pem(), pem);
    let h = Http::new(&s);
    let c = verify_with_jwks(&h, &jwt).await;
    assert_eq!(c["sub"], "system:serviceaccount:default:default");
    let (_, r) = h
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"spec": {"token": jwt, "audiences": ["x"]}}),
        )
        .await;
    assert_eq!(r["status"]["authenticated"], true, "{r}");
    s.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
