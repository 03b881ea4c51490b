//! The catalog's OIDC flow (spec C §4.3, enterprise only) against the sandbox's emulated
//! provider: auth-url, the provider's redirect with a code, and callback with its state, code,
//! client-nonce and ID-token nonce checks.

use quartet_sandbox::{start, Sandbox, SandboxOptions};
use serde_json::{json, Value};

const REDIRECT: &str = "http://localhost:8550/oidc/callback";

struct T {
    sandbox: Sandbox,
    http: reqwest::Client,
}

impl T {
    async fn new() -> Self {
        let sandbox = start(SandboxOptions::ephemeral())
            .await
            .expect("sandbox starts");
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let t = Self { sandbox, http };
        t.setup("default").await;
        t
    }
    fn url(&self, path: &str) -> String {
        format!("{}{}", self.sandbox.catalog_url, path)
    }
    async fn post(&self, path: &str, body: Value) -> (u16, String) {
        let r = self
            .http
            .post(self.url(path))
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
    async fn admin(&self, method: reqwest::Method, path: &str, body: Value) {
        let r = self
            .http
            .request(method, self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}");
    }
    async fn setup(&self, ns: &str) {
        self.admin(
            reqwest::Method::POST,
            "/_sandbox/catalog/auth-methods",
            json!({"Name": "oidc", "Type": "oidc", "Namespace": ns, "Config": {
                "OIDCDiscoveryURL": "https://idp.example.com", "OIDCClientID": "catalog", "OIDCClientSecret": "s3cret",
                "AllowedRedirectURIs": [REDIRECT], "ClaimMappings": {"email": "email"}, "ListClaimMappings": {"groups": "groups"}}}),
        )
        .await;
        self.admin(
            reqwest::Method::POST,
            "/_sandbox/catalog/roles",
            json!({"Name": "admins", "Namespace": ns}),
        )
        .await;
        self.admin(
            reqwest::Method::POST,
            "/_sandbox/catalog/binding-rules",
            json!({"AuthMethod": "oidc", "Namespace": ns, "Selector": "\"admins\" in list.groups", "BindType": "role", "BindName": "admins"}),
        )
        .await;
        self.admin(
            reqwest::Method::POST,
            "/_sandbox/catalog/oidc/users",
            json!({"Subject": "alice", "Claims": {"email": "alice@example.com", "groups": ["admins"]}}),
        )
        .await;
    }
    async fn auth_url(&self, client_nonce: &str) -> String {
        let (s, body) = self
            .post(
                "/v1/acl/oidc/auth-url",
                json!({"AuthMethod": "oidc", "RedirectURI": REDIRECT, "ClientNonce": client_nonce}),
            )
            .await;
        assert_eq!(s, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["AuthURL"]
            .as_str()
            .unwrap()
            .to_string()
    }
    /// Visit the provider and return (code, state) from its redirect.
    async fn authorize(&self, auth_url: &str) -> (String, String) {
        let r = self.http.get(auth_url).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 302);
        let loc = r.headers()["location"].to_str().unwrap().to_string();
        assert!(loc.starts_with(REDIRECT), "{loc}");
        let q: Vec<(String, String)> =
            serde_urlencoded::from_str(loc.split_once('?').unwrap().1).unwrap();
        let get = |k: &str| q.iter().find(|(n, _)| n == k).unwrap().1.clone();
        (get("code"), get("state"))
    }
}

fn param(url: &str, name: &str) -> String {
    let q: Vec<(String, String)> =
        serde_urlencoded::from_str(url.split_once('?').unwrap().1).unwrap();
    q.into_iter().find(|(k, _)| k == name).unwrap().1
}

#[tokio::test]
async fn oidc_flow_returns_a_token_from_the_callback() {
    let t = T::new().await;
    let url = t.auth_url("cn-1").await;
    assert_eq!(param(&url, "client_id"), "catalog");
    assert_eq!(param(&url, "redirect_uri"), REDIRECT);
    assert!(param(&url, "scope").contains("openid"));
    let state = param(&url, "state");
    assert_eq!(state.len(), 40);
    let (code, returned_state) = t.authorize(&url).await;
    assert_eq!(returned_state, state);
    let (s, body) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": state, "Code": code, "ClientNonce": "cn-1"}),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let tok: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(tok["AuthMethod"], "oidc");
    assert_eq!(tok["Local"], true);
    assert_eq!(tok["Roles"][0]["Name"], "admins");
    let r = t
        .http
        .get(t.url("/v1/acl/token/self"))
        .header("X-Catalog-Token", tok["SecretID"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn oidc_callback_with_an_unknown_state_fails() {
    let t = T::new().await;
    let url = t.auth_url("").await;
    let (code, _) = t.authorize(&url).await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": "bogus", "Code": code}),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (
            500,
            "Provider login failed: Expired or missing OAuth state."
        )
    );
}

#[tokio::test]
async fn oidc_state_can_be_used_only_once() {
    let t = T::new().await;
    let url = t.auth_url("").await;
    let (code, state) = t.authorize(&url).await;
    let body = json!({"AuthMethod": "oidc", "State": state, "Code": code});
    assert_eq!(t.post("/v1/acl/oidc/callback", body.clone()).await.0, 200);
    let (s, text) = t.post("/v1/acl/oidc/callback", body).await;
    assert_eq!(
        (s, text.as_str()),
        (
            500,
            "Provider login failed: Expired or missing OAuth state."
        )
    );
}

#[tokio::test]
async fn oidc_client_nonce_must_match_the_auth_url_request() {
    let t = T::new().await;
    let url = t.auth_url("cn-1").await;
    let (code, state) = t.authorize(&url).await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": state, "Code": code, "ClientNonce": "other"}),
        )
        .await;
    assert_eq!(s, 500);
    assert!(body.contains("client nonce"), "{body}");
}

#[tokio::test]
async fn oidc_code_must_be_the_one_the_provider_issued() {
    let t = T::new().await;
    let url = t.auth_url("").await;
    let (_code, state) = t.authorize(&url).await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": state, "Code": "forged"}),
        )
        .await;
    assert_eq!(s, 500);
    assert!(
        body.starts_with("Provider login failed: Error exchanging oidc code"),
        "{body}"
    );
    let (s, body) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": "x", "Code": ""}),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (
            500,
            "Provider login failed: OAuth code parameter not provided"
        )
    );
}

#[tokio::test]
async fn oidc_id_token_nonce_must_match_the_state() {
    let t = T::new().await;
    let url = t.auth_url("").await;
    let nonce = param(&url, "nonce");
    let tampered = url.replace(&format!("nonce={nonce}"), "nonce=tampered");
    let (code, state) = t.authorize(&tampered).await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": state, "Code": code}),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (500, "Token verification failed: Invalid ID token nonce.")
    );
}

#[tokio::test]
async fn oidc_redirect_uri_must_be_allowed() {
    let t = T::new().await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/auth-url",
            json!({"AuthMethod": "oidc", "RedirectURI": "http://evil.example.com/cb"}),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (500, "unauthorized redirect_uri: http://evil.example.com/cb")
    );
    let (s, body) = t
        .post("/v1/acl/oidc/auth-url", json!({"AuthMethod": "oidc"}))
        .await;
    assert_eq!((s, body.as_str()), (500, "missing redirect_uri"));
}

#[tokio::test]
async fn oidc_binding_rules_decide_the_token() {
    let t = T::new().await;
    t.admin(
        reqwest::Method::POST,
        "/_sandbox/catalog/oidc/users",
        json!({"Subject": "bob", "Claims": {"groups": ["devs"]}}),
    )
    .await;
    let url = t.auth_url("").await;
    let (code, state) = t.authorize(&format!("{url}&subject=bob")).await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": state, "Code": code}),
        )
        .await;
    assert_eq!((s, body.as_str()), (403, "Permission denied"));
}

#[tokio::test]
async fn oidc_namespace_must_match_between_auth_url_and_callback() {
    let t = T::new().await;
    t.setup("team-a").await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/auth-url",
            json!({"AuthMethod": "oidc", "RedirectURI": REDIRECT, "Namespace": "team-a"}),
        )
        .await;
    assert_eq!(s, 200);
    let url = serde_json::from_str::<Value>(&body).unwrap()["AuthURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, state) = t.authorize(&url).await;
    // Callback in the default namespace: the state is not known there.
    let (s, text) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": state, "Code": code}),
        )
        .await;
    assert_eq!(
        (s, text.as_str()),
        (
            500,
            "Provider login failed: Expired or missing OAuth state."
        )
    );
    // The same flow completed in the right namespace succeeds.
    let (s, body) = t
        .post(
            "/v1/acl/oidc/auth-url?ns=team-a",
            json!({"AuthMethod": "oidc", "RedirectURI": REDIRECT}),
        )
        .await;
    assert_eq!(s, 200);
    let url = serde_json::from_str::<Value>(&body).unwrap()["AuthURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, state) = t.authorize(&url).await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": state, "Code": code, "Namespace": "team-a"}),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["Namespace"],
        "team-a"
    );
}

#[tokio::test]
async fn oidc_is_enterprise_only() {
    let t = T::new().await;
    t.admin(
        reqwest::Method::PUT,
        "/_sandbox/catalog/config",
        json!({"Enterprise": false}),
    )
    .await;
    let (s, _) = t
        .post(
            "/v1/acl/oidc/auth-url",
            json!({"AuthMethod": "oidc", "RedirectURI": REDIRECT}),
        )
        .await;
    assert_eq!(s, 404);
    let (s, _) = t
        .post(
            "/v1/acl/oidc/callback",
            json!({"AuthMethod": "oidc", "State": "x", "Code": "y"}),
        )
        .await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn oidc_auth_url_needs_an_oidc_auth_method() {
    let t = T::new().await;
    let (s, body) = t
        .post(
            "/v1/acl/oidc/auth-url",
            json!({"AuthMethod": "nope", "RedirectURI": REDIRECT}),
        )
        .await;
    assert_eq!(
        (s, body.as_str()),
        (403, "ACL not found: auth method \"nope\" not found")
    );
}

#[tokio::test]
async fn a_loopback_redirect_uri_matches_an_allowed_one_on_any_port_and_other_uris_only_exactly() {
    let t = T::new().await;
    let try_uri = |uri: &'static str| {
        let t = &t;
        async move {
            t.post(
                "/v1/acl/oidc/auth-url",
                json!({"AuthMethod": "oidc", "RedirectURI": uri, "ClientNonce": "n"}),
            )
            .await
        }
    };
    // The allowed URI is http://localhost:8550/oidc/callback: a CLI listening on another
    // loopback port (RFC 8252 §7.3) is accepted, as by the real service's OIDC library.
    assert_eq!(try_uri("http://localhost:43211/oidc/callback").await.0, 200);
    assert_eq!(try_uri("http://localhost/oidc/callback").await.0, 200);
    // Host, scheme and path still have to match.
    for uri in [
        "http://127.0.0.1:8550/oidc/callback",
        "https://localhost:8550/oidc/callback",
        "http://localhost:8550/other",
        "http://evil.example.com:8550/oidc/callback",
    ] {
        let (s, body) = try_uri(uri).await;
        assert_eq!(
            (s, body.as_str()),
            (500, format!("unauthorized redirect_uri: {uri}").as_str())
        );
    }
}
