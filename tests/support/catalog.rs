//! The sandbox's catalog set up for logins of ServiceAccounts: the signing key the dev API
//! server's tokens are checked with, JWTs signed with it, and the `k8s` auth method.

use base64::Engine;
use serde_json::json;

use super::{http, Sandbox};

/// The key the catalog's `kubernetes` auth method verifies ServiceAccount JWTs with.
pub const SA_KEY: &str = "sandbox-service-account-signing-key";

/// An HS256 ServiceAccount JWT (valid for a day) that the auth method verifies with [`SA_KEY`].
pub fn sa_jwt(ns: &str, name: &str) -> String {
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
        "iat": now, "exp": now + 24 * 3600,
    })
    .to_string()
    .as_bytes());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SA_KEY.as_bytes()).unwrap();
    mac.update(format!("{header}.{claims}").as_bytes());
    let sig = b64(&mac.finalize().into_bytes());
    format!("{header}.{claims}.{sig}")
}

/// The catalog's auth method `k8s` trusts [`SA_KEY`] and binds each ServiceAccount to the
/// service identity of its name.
pub fn trust_service_accounts(catalog: &str) {
    for (path, body) in [
        (
            "auth-methods",
            json!({"Name": "k8s", "Type": "kubernetes",
            "Config": {"Host": "https://kubernetes.default.svc", "ValidationKey": SA_KEY}}),
        ),
        (
            "binding-rules",
            json!({"AuthMethod": "k8s", "BindType": "service", "BindName": "${serviceaccount.name}"}),
        ),
    ] {
        let (s, v) = http(
            "POST",
            &format!("{catalog}/_sandbox/catalog/{path}"),
            None,
            Some(body),
        );
        assert!((200..300).contains(&s), "{path}: {v}");
    }
}

/// The catalog's ACL system bootstrapped with the root token (the Connection's, so the operator
/// may list and delete tokens, as with a real catalog's management token), and
/// [`trust_service_accounts`]. Returns the catalog's URL.
pub fn logins_on_root_token(sb: &Sandbox) -> String {
    let catalog = sb.url("catalog").to_string();
    let (s, v) = http(
        "PUT",
        &format!("{catalog}/_sandbox/catalog/config"),
        None,
        Some(json!({"UseRootToken": true})),
    );
    assert!((200..300).contains(&s), "config: {v}");
    trust_service_accounts(&catalog);
    catalog
}
