//! Service-account tokens: the TokenRequest subresource (`POST
//! /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`), TokenReview (`POST
//! /apis/authentication.k8s.io/v1/tokenreviews`) and the issuer discovery documents
//! (`/.well-known/openid-configuration`, `/openid/v1/jwks`), as kube-apiserver serves them.
//!
//! Tokens are RS256 JWTs signed with one 2048-bit key per server (generated on first use; kept
//! in the state directory when there is one, as the real server reads
//! `--service-account-signing-key-file`), with the claims the real server issues: `iss`, `sub`
//! (`system:serviceaccount:NS:NAME`), `aud` (the request's audiences, or the issuer when none),
//! `exp`, `iat`, `nbf`, `jti` and the private `kubernetes.io` claim
//! (`{namespace, serviceaccount: {name, uid}}`, plus `secret` when bound to a Secret). The
//! `kid` header is the base64url SHA-256 of the DER public key, as kube-apiserver computes it.
//!
//! Differences: only Secrets can be bound objects (this server stores no Pods or Nodes, so a
//! Pod or Node binding is 404 as for a missing object); the discovery documents are public
//! (as on clusters that bind `system:service-account-issuer-discovery` to unauthenticated
//! users, the usual setup for external token verifiers).
//!
//! The tokens are also bearer tokens of this server ([`authenticate`]): a request with one is
//! the ServiceAccount's user, authorized by RBAC (see [`super::rbac`]).

use std::path::PathBuf;
use std::sync::OnceLock;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::RsaPrivateKey;
use serde_json::{json, Value};
use sha2::Digest;

use super::error::{json_response, ApiError};
use super::rbac::UserInfo;
use super::store::State;

/// The issuer (`--service-account-issuer`) of a default cluster.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// kube-apiserver's floor for `spec.expirationSeconds`.
const MIN_EXPIRATION: i64 = 600;
const DEFAULT_EXPIRATION: i64 = 3600;
const KEY_FILE: &str = "sa-signing-key.pem";

struct Key {
    private_pem: String,
    public_pem: String,
    kid: String,
    jwk: Value,
    /// Parsed once: every request with a service-account token is verified with it.
    decoding: jsonwebtoken::DecodingKey,
}

/// The service-account signing key, made on first use.
pub struct Signer {
    key: OnceLock<Key>,
    state_dir: Option<PathBuf>,
}

fn b64url(b: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

impl Signer {
    pub fn new(state_dir: Option<PathBuf>) -> Self {
        Self {
            key: OnceLock::new(),
            state_dir,
        }
    }

    fn key(&self) -> &Key {
        self.key.get_or_init(|| {
            let path = self.state_dir.as_ref().map(|d| d.join(KEY_FILE));
            let saved = path
                .as_ref()
                .and_then(|p| std::fs::read_to_string(p).ok())
                .and_then(|pem| RsaPrivateKey::from_pkcs8_pem(&pem).ok());
            let private = saved.unwrap_or_else(|| {
                let k = RsaPrivateKey::new(&mut rand08::thread_rng(), 2048)
                    .expect("RSA key generation does not fail for 2048 bits");
                if let (Some(p), Ok(pem)) = (&path, k.to_pkcs8_pem(LineEnding::LF)) {
                    let _ = p.parent().map(std::fs::create_dir_all);
                    if let Err(e) = write_private(p, pem.as_bytes()) {
                        tracing::warn!(error = %e, "cannot keep the service-account signing key");
                    }
                }
                k
            });
            let public = private.to_public_key();
            let der = public
                .to_public_key_der()
                .expect("an RSA public key encodes as DER");
            let kid = b64url(&sha2::Sha256::digest(der.as_bytes()));
            let jwk = json!({
                "use": "sig", "kty": "RSA", "kid": kid, "alg": "RS256",
                "n": b64url(&public.n().to_bytes_be()), "e": b64url(&public.e().to_bytes_be()),
            });
            let public_pem = public
                .to_public_key_pem(LineEnding::LF)
                .expect("an RSA public key encodes as PEM");
            Key {
                decoding: jsonwebtoken::DecodingKey::from_rsa_pem(public_pem.as_bytes())
                    .expect("the PEM just made parses"),
                private_pem: private
                    .to_pkcs8_pem(LineEnding::LF)
                    .expect("an RSA key encodes as PKCS#8")
                    .to_string(),
                public_pem,
                kid,
                jwk,
            }
        })
    }

    /// PEM (SPKI) of the public key tokens are verified with.
    pub fn public_key_pem(&self) -> String {
        self.key().public_pem.clone()
    }

    fn sign(&self, claims: &Value) -> Result<String, ApiError> {
        let key = self.key();
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(key.kid.clone());
        let enc = EncodingKey::from_rsa_pem(key.private_pem.as_bytes())
            .map_err(|e| ApiError::internal(format!("signing key: {e}")))?;
        jsonwebtoken::encode(&header, claims, &enc)
            .map_err(|e| ApiError::internal(format!("failed to sign token: {e}")))
    }

    /// Claims of a token this server signed, if the signature and times hold.
    fn verify(&self, token: &str) -> Option<serde_json::Map<String, Value>> {
        let mut v = jsonwebtoken::Validation::new(Algorithm::RS256);
        v.validate_aud = false;
        v.validate_nbf = true;
        v.set_issuer(&[ISSUER]);
        jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &self.key().decoding, &v)
            .ok()
            .map(|d| d.claims)
    }
}

fn write_private(path: &std::path::Path, pem: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path)?.write_all(pem)
}

/// The issuer discovery documents, answered once RBAC has allowed the request (the bootstrap
/// policy grants them to ServiceAccounts, not to anonymous callers).
pub fn public_route(signer: &Signer, addr: &str, segs: &[&str]) -> Option<Response> {
    match segs {
        [".well-known", "openid-configuration"] => Some(json_response(
            StatusCode::OK,
            &json!({
                "issuer": ISSUER,
                "jwks_uri": format!("https://{addr}/openid/v1/jwks"),
                "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }),
        )),
        ["openid", "v1", "jwks"] => Some(json_response(
            StatusCode::OK,
            &json!({"keys": [signer.key().jwk.clone()]}),
        )),
        _ => None,
    }
}

/// TokenRequest and TokenReview; `None` for every other path.
pub fn route(
    signer: &Signer,
    st: &State,
    method: &Method,
    segs: &[&str],
    body: &[u8],
) -> Option<Result<Response, ApiError>> {
    match segs {
        ["api", "v1", "namespaces", ns, "serviceaccounts", name, "token"] => {
            Some(if method == Method::POST {
                token_request(signer, st, ns, name, body)
            } else {
                Err(ApiError::method_not_allowed())
            })
        }
        ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => {
            Some(if method == Method::POST {
                token_review(signer, st, body)
            } else {
                Err(ApiError::method_not_allowed())
            })
        }
        _ => None,
    }
}

fn parse(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice::<Value>(body)
        .or_else(|_| {
            serde_yaml::from_slice::<serde_yaml::Value>(body)
                .map_err(|e| e.to_string())
                .and_then(|y| serde_json::to_value(y).map_err(|e| e.to_string()))
        })
        .map_err(|e| ApiError::bad_request(format!("the object provided is unrecognized: {e}")))
}

fn token_request(
    signer: &Signer,
    st: &State,
    ns: &str,
    name: &str,
    body: &[u8],
) -> Result<Response, ApiError> {
    let sa_key = (String::new(), "serviceaccounts".to_string());
    let sa = st
        .get(&sa_key, ns, name)
        .ok_or_else(|| ApiError::not_found("serviceaccounts", "", name))?;
    let req = parse(body)?;
    if let Some(k) = req["kind"].as_str().filter(|k| *k != "TokenRequest") {
        return Err(ApiError::bad_request(format!(
            "the API version in the data (authentication.k8s.io/v1) does not match the expected kind: {k}"
        )));
    }
    let spec = &req["spec"];
    let invalid = |field: &str, msg: String| {
        ApiError::invalid(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            field,
            "FieldValueInvalid",
            &msg,
        )
    };
    let exp_secs = match &spec["expirationSeconds"] {
        Value::Null => DEFAULT_EXPIRATION,
        v => v
            .as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .ok_or_else(|| ApiError::bad_request("spec.expirationSeconds: not an integer"))?,
    };
    if exp_secs < MIN_EXPIRATION {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {exp_secs}: may not specify a duration less than 10 minutes"),
        ));
    }
    if exp_secs > 1 << 32 {
        return Err(invalid(
            "spec.expirationSeconds",
            format!(
                "Invalid value: {exp_secs}: may not specify a duration larger than 2^32 seconds"
            ),
        ));
    }
    let mut audiences: Vec<String> = spec["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if audiences.is_empty() {
        // The API server's own audiences (`--api-audiences`, default: the issuer).
        audiences.push(ISSUER.to_string());
    }
    let sa_uid = sa["metadata"]["uid"].as_str().unwrap_or_default();
    let mut k8s = json!({"namespace": ns, "serviceaccount": {"name": name, "uid": sa_uid}});
    let bound = &spec["boundObjectRef"];
    if bound.is_object() {
        let kind = bound["kind"].as_str().unwrap_or_default();
        let bname = bound["name"].as_str().unwrap_or_default();
        let (plural, claim) = match kind {
            "Secret" => ("secrets", "secret"),
            "Pod" => ("pods", "pod"),
            "Node" => ("nodes", "node"),
            other => {
                return Err(invalid(
                    "spec.boundObjectRef.kind",
                    format!("Unsupported value: \"{other}\": supported values: \"Pod\", \"Secret\", \"Node\""),
                ))
            }
        };
        let key = (String::new(), plural.to_string());
        let obj = st
            .get(&key, ns, bname)
            .ok_or_else(|| ApiError::not_found(plural, "", bname))?;
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
        if let Some(want) = bound["uid"].as_str().filter(|u| !u.is_empty()) {
            if want != uid {
                return Err(ApiError::conflict_message(
                    plural,
                    "",
                    bname,
                    &format!("the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"),
                ));
            }
        }
        k8s[claim] = json!({"name": bname, "uid": uid});
    }
    let now = chrono::Utc::now();
    let exp = now + chrono::Duration::seconds(exp_secs);
    let claims = json!({
        "aud": audiences, "exp": exp.timestamp(), "iat": now.timestamp(), "nbf": now.timestamp(),
        "iss": ISSUER, "jti": uuid::Uuid::new_v4().to_string(),
        "kubernetes.io": k8s, "sub": format!("system:serviceaccount:{ns}:{name}"),
    });
    let token = signer.sign(&claims)?;
    // As the real registry does, the answer's spec carries the defaulted audiences.
    let mut out_spec = json!({"audiences": audiences,
        "expirationSeconds": exp_secs, "boundObjectRef": null});
    if bound.is_object() {
        out_spec["boundObjectRef"] = bound.clone();
    }
    Ok(json_response(
        StatusCode::CREATED,
        &json!({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
            "spec": out_spec,
            "status": {"token": token, "expirationTimestamp": exp.format("%Y-%m-%dT%H:%M:%SZ").to_string()},
        }),
    ))
}

/// Validate a bearer token as the service-account token authenticator does: signed by this
/// server, not expired, meant for one of `audiences` (the API server's own when empty), and
/// naming a ServiceAccount (and bound Secret) that still exist as the same objects. Returns the
/// user and the audiences that matched, or why the token is refused.
pub fn authenticate(
    signer: &Signer,
    st: &State,
    token: &str,
    audiences: &[String],
) -> Result<(UserInfo, Vec<String>), String> {
    let claims = signer
        .verify(token)
        .ok_or_else(|| "token could not be validated".to_string())?;
    let token_aud: Vec<String> = match &claims["aud"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|s| s.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    let target = if audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        audiences.to_vec()
    };
    let matched: Vec<String> = target
        .iter()
        .filter(|a| token_aud.contains(a))
        .cloned()
        .collect();
    if matched.is_empty() {
        return Err(format!(
            "token audiences {token_aud:?} is invalid for the target audiences {target:?}"
        ));
    }
    let k8s = &claims["kubernetes.io"];
    let ns = k8s["namespace"].as_str().unwrap_or_default();
    let name = k8s["serviceaccount"]["name"].as_str().unwrap_or_default();
    let uid = k8s["serviceaccount"]["uid"].as_str().unwrap_or_default();
    // A token outlives nothing it names: the ServiceAccount (and a bound Secret) must still be
    // the same objects.
    let sa_key = (String::new(), "serviceaccounts".to_string());
    let sa_ok = st
        .get(&sa_key, ns, name)
        .is_some_and(|sa| sa["metadata"]["uid"].as_str() == Some(uid));
    if !sa_ok {
        return Err(format!(
            "service account {ns}/{name} has been deleted or recreated"
        ));
    }
    if let Some(s) = k8s.get("secret") {
        let key = (String::new(), "secrets".to_string());
        let sname = s["name"].as_str().unwrap_or_default();
        let ok = st
            .get(&key, ns, sname)
            .is_some_and(|o| o["metadata"]["uid"] == s["uid"]);
        if !ok {
            return Err(format!("secret {ns}/{sname} has been deleted or recreated"));
        }
    }
    let jti = claims["jti"].as_str().unwrap_or_default();
    let mut user = UserInfo::service_account(ns, name, uid);
    user.extra.insert(
        "authentication.kubernetes.io/credential-id".into(),
        vec![format!("JTI={jti}")],
    );
    Ok((user, matched))
}

fn token_review(signer: &Signer, st: &State, body: &[u8]) -> Result<Response, ApiError> {
    let req = parse(body)?;
    let token = req["spec"]["token"].as_str().unwrap_or_default();
    let wanted: Vec<String> = req["spec"]["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let respond = |status: Value| {
        json_response(
            StatusCode::CREATED,
            &json!({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": null}, "spec": req["spec"].clone(), "status": status}),
        )
    };
    match authenticate(signer, st, token, &wanted) {
        Ok((user, matched)) => Ok(respond(json!({
            "authenticated": true,
            "user": user.to_json(),
            "audiences": matched,
        }))),
        Err(why) => Ok(respond(
            json!({"user": {}, "error": format!("[invalid bearer token, {why}]")}),
        )),
    }
}
