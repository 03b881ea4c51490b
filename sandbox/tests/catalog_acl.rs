//! Conformance tests of the emulated catalog ACL API (spec C §4.3, §2.3, §5, §7), through HTTP:
//! bootstrap, replication status, login/logout with a Kubernetes-style auth method, token checks,
//! namespace precedence and persistence.

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use quartet_sandbox::{start, Edition, Sandbox, SandboxOptions};
use serde_json::{json, Value};

const SA_KEY: &str = "service-account-signing-secret";
const MGMT: &str = "6a1f5c0e-9c1d-4c43-a0a8-5d4ce0b1d001";

const RSA_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCCmdZKdLlav056
ZXpWRS9Bvs7bAzUGyrPenTL0yOH1ci+J7dMvlpa4JqzCTzJpVQYtIg3PCwWJGFCQ
oVXQFSs1O5PqcF6MnMndWznfO2tIz/EZ7mS+1XrcOXnbZwObd331z/HTJJ/6TxMg
EnFLuusiDoysNRcdUlRrzwwsKSpdwYrWE3CwxMr9XcXXPbKN4EEPVZMY+MS/O25x
wp89nGYpden6h3gd7FSO82cKZPbL7dWplPp6rYco9c258Yi+jn3OVjFuiL0xTuDo
ROUU0NNxdybZvy02G4YwW8tX+S0fjQEjW3nAz8qeG62ZH32n519Jnt8w5ipCHXus
9wgOk/m5AgMBAAECggEAET89HiyPfNU2STIlB4cP8FQBL8ma41h6C/xBCjQMKRSJ
BCNI6CgwI8YRuwBn9SKSE/xDDBRVyQ7RtuPjd/0PrXI+fK+VwOaEvwuI1zra1m0F
l0nU+qGpHbOmbMvMHWgYlZF+S0azLMRsD2h4F0rqOd9ngudo88mXVfxsDFnsWyCf
iB6PPb5EiL9tuEmIjRqrZoRNpbqGqnEGcFBGLOeEGWQc+of+/dddIgJys/EtXTOl
jDbuR35zmOSDJSkv8vAHHO4wqduZbpLQ521i1HFHvw/CK98wHiaGVvRZwronR0fD
e1qldYdhG2x7GaCGBPAtqwX3FLeYXBf1xR1ZZ4p3nQKBgQC4NDt9kh+TXVUkmkRv
Z2wC0W5MRKSJavey+Aqkr4GI2Y6iQQnr4uYvoevQkZWAlXU13psNtkb2gRDFz3/o
aelNEMGkzhJRI2MG/RFoGHzX3/g+K7Oo+gW9AjUBvcYh6cKu5QM4G+JPu1Q2C1wT
hItNlpTlUjW4VzFKvYGW/eWAHQKBgQC1gR5ywm6itWIwYyzPCINyWOr9zC6nkzBD
8Y1ezQdk2LF44X1TRBY+UsWmTMzZiSMcZinwe0n7RWKweYmxbHbtWIG92jrx1e95
sM2nilHGAVWUeLuWLeIFzaa/dFNrAQyqud0JCDFO7+UY4e87VI0hYLOWTRaQjlpI
BQpk6zVlTQKBgQCEklsKieMdzTtdB4YfY6Cx+obWb0S3/ftdm/UVB5dDpcho8EQy
t++Q8olkZ5LgozBjX93aJYi3Gra2lxtoaulU5K1pbkJykPRRcEtZzt3zBCeGny9D
ewYsPO1nXmy9tZ6+/uWtOSxM0/bMmqpfBbK4WZq53Mv66w33y6H7yKmm5QKBgAnQ
qazbBtCVrnGfa1TmyPTuCgcfe4ZkVz/VWCfAPp4debtntjdCf1FveHC9xnYdDGEE
xU/T2vRTlDqm1+NYUjYTizCRFI7vWrvh670bpcBnYhFdVgeRA5/8tv+zcq9epyi0
VFegscnq/yCRVzaGI/uiFxQRpx66E/fBDgbXEVQhAoGAHBA3QnHLAQzKQMdQniRZ
s0uQ2I2086XATQHxFrRC+CzlCw42UR8asHGmIYhk8o9nP8TOubVa4zptm4ouH20m
hJKaMB3YcJk9ZymhZw4EDXvjjoDhV+AEetINdAKpbPfa6hm7bIRFjhwVSSCkMuet
oE/Ig3KFgIQvIxiYUzWFRa0=
-----END PRIVATE KEY-----";
const RSA_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAgpnWSnS5Wr9OemV6VkUv
Qb7O2wM1Bsqz3p0y9Mjh9XIvie3TL5aWuCaswk8yaVUGLSINzwsFiRhQkKFV0BUr
NTuT6nBejJzJ3Vs53ztrSM/xGe5kvtV63Dl522cDm3d99c/x0ySf+k8TIBJxS7rr
Ig6MrDUXHVJUa88MLCkqXcGK1hNwsMTK/V3F1z2yjeBBD1WTGPjEvztuccKfPZxm
KXXp+od4HexUjvNnCmT2y+3VqZT6eq2HKPXNufGIvo59zlYxboi9MU7g6ETlFNDT
cXcm2b8tNhuGMFvLV/ktH40BI1t5wM/KnhutmR99p+dfSZ7fMOYqQh17rPcIDpP5
uQIDAQAB
-----END PUBLIC KEY-----";

struct T {
    sandbox: Sandbox,
    http: reqwest::Client,
}

struct Resp {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    fn index(&self) -> u64 {
        self.headers["x-catalog-index"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    }
}

impl T {
    async fn new() -> Self {
        Self::with(SandboxOptions::ephemeral()).await
    }
    async fn with(opts: SandboxOptions) -> Self {
        let sandbox = start(opts).await.expect("sandbox starts");
        Self {
            sandbox,
            http: reqwest::Client::new(),
        }
    }
    fn url(&self, path: &str) -> String {
        format!("{}{}", self.sandbox.catalog_url, path)
    }
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let mut rb = self.http.request(method.parse().unwrap(), self.url(path));
        if let Some(t) = token {
            rb = rb.header("X-Catalog-Token", t);
        }
        if let Some(b) = body {
            rb = rb.body(b.to_string());
        }
        let r = rb.send().await.unwrap();
        Resp {
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            body: r.text().await.unwrap(),
        }
    }
    async fn admin(&self, method: &str, path: &str, body: Value) -> Value {
        let r = self.call(method, path, None, Some(body)).await;
        assert!(
            (200..300).contains(&r.status),
            "admin {path}: {} {}",
            r.status,
            r.body
        );
        if r.body.is_empty() {
            Value::Null
        } else {
            r.json()
        }
    }
    /// A Kubernetes auth method `k8s` in `ns` whose `default`-namespace service accounts bind
    /// to a service identity named after the account.
    async fn k8s_method(&self, ns: &str) {
        self.admin(
            "POST",
            "/_sandbox/catalog/auth-methods",
            json!({"Name": "k8s", "Type": "kubernetes", "Namespace": ns,
                   "Config": {"Host": "https://kubernetes.default.svc", "ValidationKey": SA_KEY}}),
        )
        .await;
        self.admin(
            "POST",
            "/_sandbox/catalog/binding-rules",
            json!({"AuthMethod": "k8s", "Namespace": ns, "Selector": "serviceaccount.namespace==default",
                   "BindType": "service", "BindName": "${serviceaccount.name}"}),
        )
        .await;
    }
    async fn login(&self, path: &str, body: Value) -> Resp {
        self.call("POST", path, None, Some(body)).await
    }
    async fn login_ok(&self) -> Value {
        self.k8s_method("default").await;
        let r = self
            .login(
                "/v1/acl/login",
                json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 3600)}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }
    async fn management(&self) -> String {
        self.admin(
            "PUT",
            "/_sandbox/catalog/config",
            json!({"InitialManagementToken": MGMT}),
        )
        .await;
        MGMT.to_string()
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn sa_claims(ns: &str, name: &str, ttl: i64) -> Value {
    json!({
        "iss": "https://kubernetes.default.svc",
        "sub": format!("system:serviceaccount:{ns}:{name}"),
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": "0b6c0e4e-1111-2222-3333-444455556666"}},
        "iat": now(), "exp": now() + ttl,
    })
}

fn sa_jwt(ns: &str, name: &str, ttl: i64) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &sa_claims(ns, name, ttl),
        &EncodingKey::from_secret(SA_KEY.as_bytes()),
    )
    .unwrap()
}

// ---- bootstrap ----

#[tokio::test]
async fn bootstrap_returns_the_first_management_token() {
    let t = T::new().await;
    let r = t.call("PUT", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let tok = r.json();
    assert_eq!(tok["ID"], tok["SecretID"]);
    assert_eq!(tok["AccessorID"].as_str().unwrap().len(), 36);
    assert_eq!(tok["Description"], "Bootstrap Token (Global Management)");
    assert_eq!(
        tok["Policies"],
        json!([{"ID": "00000000-0000-0000-0000-000000000001", "Name": "global-management"}])
    );
    assert_eq!(tok["Local"], false);
    for k in ["CreateTime", "Hash"] {
        assert!(tok[k].is_string(), "{k}");
    }
    for k in ["CreateIndex", "ModifyIndex"] {
        assert!(tok[k].as_u64().unwrap() > 0, "{k}");
    }
    // The token is a management token.
    let secret = tok["SecretID"].as_str().unwrap();
    assert_eq!(
        t.call("GET", "/v1/acl/tokens", Some(secret), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn second_bootstrap_is_403_with_the_reset_index() {
    let t = T::new().await;
    let first = t.call("PUT", "/v1/acl/bootstrap", None, None).await.json();
    let r = t.call("PUT", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.body,
        format!(
            "Permission denied: ACL bootstrap no longer allowed (reset index: {})",
            first["CreateIndex"]
        )
    );
    assert_eq!(
        t.call("PUT", "/v1/acl/bootstrap", None, None).await.status,
        403
    );
}

#[tokio::test]
async fn bootstrap_honours_the_bootstrap_secret() {
    let t = T::new().await;
    let secret = "2b778dd9-f5f1-6f29-b4b4-9a5fa948757a";
    let r = t
        .call(
            "PUT",
            "/v1/acl/bootstrap",
            None,
            Some(json!({"BootstrapSecret": secret})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["SecretID"], secret);
    assert_eq!(
        t.call("GET", "/v1/acl/token/self", Some(secret), None)
            .await
            .json()["SecretID"],
        secret
    );
}

#[tokio::test]
async fn bootstrap_secret_must_be_a_uuid() {
    let t = T::new().await;
    let r = t
        .call(
            "PUT",
            "/v1/acl/bootstrap",
            None,
            Some(json!({"BootstrapSecret": "not-a-uuid"})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, "uuid string is wrong length")
    );
    // A failed attempt does not consume the bootstrap.
    assert_eq!(
        t.call("PUT", "/v1/acl/bootstrap", None, None).await.status,
        200
    );
}

#[tokio::test]
async fn bootstrap_is_refused_when_an_initial_management_token_is_configured() {
    let t = T::new().await;
    let mgmt = t.management().await;
    let r = t.call("PUT", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(r.status, 403);
    assert!(
        r.body
            .starts_with("Permission denied: ACL bootstrap no longer allowed (reset index: "),
        "{}",
        r.body
    );
    assert_eq!(
        t.call("GET", "/v1/acl/tokens", Some(&mgmt), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn bootstrap_accepts_keys_in_any_case_and_refuses_post() {
    let t = T::new().await;
    let secret = "3c778dd9-f5f1-6f29-b4b4-9a5fa948757a";
    let r = t
        .call(
            "PUT",
            "/v1/acl/bootstrap",
            None,
            Some(json!({"bootstrapsecret": secret, "Extra": 1})),
        )
        .await;
    assert_eq!(r.json()["SecretID"], secret);
    let r = t.call("POST", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (405, "method POST not allowed")
    );
}

// ---- replication ----

#[tokio::test]
async fn replication_in_the_primary_reports_zero_values() {
    let t = T::new().await;
    let r = t.call("GET", "/v1/acl/replication", None, None).await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["Enabled"], false);
    assert_eq!(v["Running"], false);
    assert_eq!(v["LastSuccess"], "0001-01-01T00:00:00Z");
    assert_eq!(v["LastError"], "0001-01-01T00:00:00Z");
    assert_eq!(v["LastErrorMessage"], "");
    for k in [
        "ReplicatedIndex",
        "ReplicatedTokenIndex",
        "SourceDatacenter",
        "ReplicationType",
    ] {
        assert!(!v[k].is_null(), "{k}");
    }
}

#[tokio::test]
async fn replication_in_a_secondary_reports_indexes_comparable_with_list_indexes() {
    let t = T::new().await;
    let mgmt = t.management().await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"SecondaryDatacenter": "dc2", "TokenReplication": true}),
    )
    .await;
    let v = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    assert_eq!(v["Enabled"], true);
    assert_eq!(v["Running"], true);
    assert_eq!(v["SourceDatacenter"], "dc1");
    assert_eq!(v["ReplicationType"], "tokens");
    assert_ne!(v["LastSuccess"], "0001-01-01T00:00:00Z");
    assert_eq!(v["LastError"], "0001-01-01T00:00:00Z");
    let tokens = t.call("GET", "/v1/acl/tokens", Some(&mgmt), None).await;
    let policies = t.call("GET", "/v1/acl/policies", Some(&mgmt), None).await;
    assert_eq!(v["ReplicatedTokenIndex"].as_u64().unwrap(), tokens.index());
    assert_eq!(v["ReplicatedIndex"].as_u64().unwrap(), policies.index());
}

#[tokio::test]
async fn replication_without_token_replication_is_policies_only() {
    let t = T::new().await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"SecondaryDatacenter": "dc2"}),
    )
    .await;
    let v = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    assert_eq!(v["ReplicationType"], "policies");
    assert_eq!(v["ReplicatedTokenIndex"], 0);
}

#[tokio::test]
async fn replication_error_is_reported_after_the_last_success() {
    let t = T::new().await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"SecondaryDatacenter": "dc2", "TokenReplication": true}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"ReplicationError": "failed to sync remote tokens"}),
    )
    .await;
    let v = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    assert_eq!(v["LastErrorMessage"], "failed to sync remote tokens");
    assert_ne!(v["LastError"], "0001-01-01T00:00:00Z");
    // RFC 3339 UTC timestamps of one format compare in time order.
    assert!(
        v["LastError"].as_str().unwrap() > v["LastSuccess"].as_str().unwrap(),
        "{v}"
    );
}

#[tokio::test]
async fn a_failing_secondary_keeps_its_replicated_indexes_while_the_primary_moves_on_until_it_recovers(
) {
    let t = T::new().await;
    let mgmt = t.management().await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"SecondaryDatacenter": "dc2", "TokenReplication": true}),
    )
    .await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"ReplicationError": "failed to sync remote policies"}),
    )
    .await;
    let frozen = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    // The primary writes a policy: its list index moves, the failing secondary's does not.
    t.admin(
        "POST",
        "/_sandbox/catalog/policies",
        json!({"Name": "late", "Rules": "acl = \"read\""}),
    )
    .await;
    let policies = t.call("GET", "/v1/acl/policies", Some(&mgmt), None).await;
    let v = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    assert_eq!(v["ReplicatedIndex"], frozen["ReplicatedIndex"]);
    assert!(
        v["ReplicatedIndex"].as_u64().unwrap() < policies.index(),
        "{v}"
    );
    // Recovery: a successful round catches up.
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"ReplicationError": ""}),
    )
    .await;
    let policies = t.call("GET", "/v1/acl/policies", Some(&mgmt), None).await;
    let v = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    assert_eq!(v["ReplicatedIndex"].as_u64().unwrap(), policies.index());
}

#[tokio::test]
async fn unknown_datacenter_has_no_path() {
    let t = T::new().await;
    let r = t
        .call("GET", "/v1/acl/replication?dc=nowhere", None, None)
        .await;
    assert_eq!((r.status, r.body.as_str()), (500, "No path to datacenter"));
}

// ---- login ----

#[tokio::test]
async fn login_returns_a_local_token_with_auth_method_set() {
    let t = T::new().await;
    let tok = t.login_ok().await;
    assert_eq!(tok["AuthMethod"], "k8s");
    assert_eq!(tok["Local"], true);
    assert_eq!(tok["Description"], "token created via login");
    assert_eq!(tok["ServiceIdentities"], json!([{"ServiceName": "web"}]));
    let me = t
        .call(
            "GET",
            "/v1/acl/token/self",
            Some(tok["SecretID"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(me.status, 200);
    assert_eq!(me.json()["AccessorID"], tok["AccessorID"]);
}

#[tokio::test]
async fn login_accepts_an_rs256_service_account_token() {
    let t = T::new().await;
    t.admin(
        "POST",
        "/_sandbox/catalog/auth-methods",
        json!({"Name": "k8s-rsa", "Type": "kubernetes", "Config": {"ValidationKey": RSA_PUBLIC}}),
    )
    .await;
    t.admin(
        "POST",
        "/_sandbox/catalog/binding-rules",
        json!({"AuthMethod": "k8s-rsa", "BindType": "service", "BindName": "api"}),
    )
    .await;
    let jwt = encode(
        &Header::new(Algorithm::RS256),
        &sa_claims("default", "api", 600),
        &EncodingKey::from_rsa_pem(RSA_PRIVATE.as_bytes()).unwrap(),
    )
    .unwrap();
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s-rsa", "BearerToken": jwt}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // A token signed with another key is refused.
    let forged = encode(
        &Header::new(Algorithm::HS256),
        &sa_claims("default", "api", 600),
        &EncodingKey::from_secret(b"x"),
    )
    .unwrap();
    assert_eq!(
        t.login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s-rsa", "BearerToken": forged})
        )
        .await
        .status,
        500
    );
}

#[tokio::test]
async fn login_meta_is_recorded_in_the_description() {
    let t = T::new().await;
    t.k8s_method("default").await;
    let r = t
        .login("/v1/acl/login", json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 60), "Meta": {"pod": "web-0"}}))
        .await;
    assert_eq!(
        r.json()["Description"],
        "token created via login: {\"pod\":\"web-0\"}"
    );
}

#[tokio::test]
async fn login_with_a_badly_signed_jwt_is_refused() {
    let t = T::new().await;
    t.k8s_method("default").await;
    let jwt = encode(
        &Header::new(Algorithm::HS256),
        &sa_claims("default", "web", 60),
        &EncodingKey::from_secret(b"other"),
    )
    .unwrap();
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s", "BearerToken": jwt}),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, "lookup failed: service account jwt not valid")
    );
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s", "BearerToken": "not-a-jwt"}),
        )
        .await;
    assert_eq!(r.status, 500);
    assert!(
        r.body.starts_with("failed to parse and validate JWT: "),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn login_with_an_expired_jwt_is_refused() {
    let t = T::new().await;
    t.k8s_method("default").await;
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", -3600)}),
        )
        .await;
    assert_eq!(r.status, 500);
}

#[tokio::test]
async fn login_with_an_unknown_auth_method_is_acl_not_found() {
    let t = T::new().await;
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "nope", "BearerToken": sa_jwt("default", "web", 60)}),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (403, "ACL not found: auth method \"nope\" not found")
    );
}

#[tokio::test]
async fn login_without_a_matching_binding_rule_is_permission_denied() {
    let t = T::new().await;
    t.k8s_method("default").await;
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("kube-system", "web", 60)}),
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "Permission denied"));
}

#[tokio::test]
async fn login_role_binding_links_the_role() {
    let t = T::new().await;
    t.k8s_method("default").await;
    let rid = t
        .admin(
            "POST",
            "/_sandbox/catalog/roles",
            json!({"Name": "web-role"}),
        )
        .await["ID"]
        .clone();
    t.admin(
        "POST",
        "/_sandbox/catalog/binding-rules",
        json!({"AuthMethod": "k8s", "BindType": "role", "BindName": "${serviceaccount.name}-role"}),
    )
    .await;
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 60)}),
        )
        .await;
    assert_eq!(r.json()["Roles"], json!([{"ID": rid, "Name": "web-role"}]));
}

#[tokio::test]
async fn login_token_expires_after_the_max_token_ttl() {
    let t = T::new().await;
    t.admin(
        "POST",
        "/_sandbox/catalog/auth-methods",
        json!({"Name": "k8s", "Type": "kubernetes", "MaxTokenTTL": "1h", "Config": {"ValidationKey": SA_KEY}}),
    )
    .await;
    t.admin(
        "POST",
        "/_sandbox/catalog/binding-rules",
        json!({"AuthMethod": "k8s", "BindType": "service", "BindName": "web"}),
    )
    .await;
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 60)}),
        )
        .await;
    assert!(r.json()["ExpirationTime"].is_string());
}

#[tokio::test]
async fn login_in_a_secondary_needs_token_replication() {
    let t = T::new().await;
    t.k8s_method("default").await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"SecondaryDatacenter": "dc2"}),
    )
    .await;
    let body = json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 60)});
    let r = t.login("/v1/acl/login?dc=dc2", body.clone()).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            500,
            "Token replication is required for auth methods to function"
        )
    );
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"TokenReplication": true}),
    )
    .await;
    let r = t.login("/v1/acl/login?dc=dc2", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let secret = r.json()["SecretID"].as_str().unwrap().to_string();
    // A local token works in its own datacenter only.
    assert_eq!(
        t.call("GET", "/v1/acl/token/self?dc=dc2", Some(&secret), None)
            .await
            .status,
        200
    );
    assert_eq!(
        t.call("GET", "/v1/acl/token/self", Some(&secret), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn login_refuses_other_methods() {
    let t = T::new().await;
    let r = t.call("GET", "/v1/acl/login", None, None).await;
    assert_eq!((r.status, r.body.as_str()), (405, "method GET not allowed"));
}

// ---- logout ----

#[tokio::test]
async fn logout_by_header_destroys_the_login_token() {
    let t = T::new().await;
    let secret = t.login_ok().await["SecretID"].as_str().unwrap().to_string();
    let r = t.call("POST", "/v1/acl/logout", Some(&secret), None).await;
    assert_eq!((r.status, r.body.as_str()), (200, "true"));
    let r = t
        .call("GET", "/v1/acl/token/self", Some(&secret), None)
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "ACL not found"));
}

#[tokio::test]
async fn logout_by_query_token_destroys_the_login_token() {
    let t = T::new().await;
    let secret = t.login_ok().await["SecretID"].as_str().unwrap().to_string();
    assert_eq!(
        t.call(
            "POST",
            &format!("/v1/acl/logout?token={secret}"),
            None,
            None
        )
        .await
        .status,
        200
    );
    assert_eq!(
        t.call("GET", "/v1/acl/token/self", Some(&secret), None)
            .await
            .status,
        403
    );
}

#[tokio::test]
async fn logout_without_a_token_is_401() {
    let t = T::new().await;
    let r = t.call("POST", "/v1/acl/logout", None, None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (401, "Supplied token does not exist")
    );
}

#[tokio::test]
async fn logout_of_a_token_not_created_by_login_is_permission_denied() {
    let t = T::new().await;
    let mgmt = t.management().await;
    let r = t.call("POST", "/v1/acl/logout", Some(&mgmt), None).await;
    assert_eq!((r.status, r.body.as_str()), (403, "Permission denied"));
    assert_eq!(
        t.call("GET", "/v1/acl/token/self", Some(&mgmt), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn logout_of_an_unknown_token_is_acl_not_found() {
    let t = T::new().await;
    let r = t
        .call(
            "POST",
            "/v1/acl/logout",
            Some("0f4b1b4e-8a39-4a6c-9a4c-7d5c2f7b8d11"),
            None,
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "ACL not found"));
}

// ---- token checks ----

#[tokio::test]
async fn acl_reads_without_a_token_are_denied_for_the_anonymous_token() {
    let t = T::new().await;
    let r = t.call("GET", "/v1/acl/tokens", None, None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            403,
            "Permission denied: token with AccessorID '00000000-0000-0000-0000-000000000002' lacks permission 'acl:read'"
        )
    );
}

#[tokio::test]
async fn acl_reads_with_an_unprivileged_token_name_its_accessor() {
    let t = T::new().await;
    let tok = t.login_ok().await;
    let r = t
        .call(
            "GET",
            "/v1/acl/policies",
            Some(tok["SecretID"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.body,
        format!(
            "Permission denied: token with AccessorID '{}' lacks permission 'acl:read'",
            tok["AccessorID"].as_str().unwrap()
        )
    );
}

#[tokio::test]
async fn unknown_token_is_acl_not_found() {
    let t = T::new().await;
    let r = t
        .call(
            "GET",
            "/v1/acl/tokens",
            Some("0f4b1b4e-8a39-4a6c-9a4c-7d5c2f7b8d11"),
            None,
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "ACL not found"));
}

#[tokio::test]
async fn a_policy_with_acl_read_allows_reads_but_not_writes() {
    let t = T::new().await;
    let mgmt = t.management().await;
    t.admin(
        "POST",
        "/_sandbox/catalog/policies",
        json!({"Name": "acl-read", "Rules": "acl = \"read\""}),
    )
    .await;
    let reader = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(&mgmt),
            Some(json!({"Description": "r", "Policies": [{"Name": "acl-read"}]})),
        )
        .await
        .json();
    let secret = reader["SecretID"].as_str().unwrap();
    assert_eq!(
        t.call("GET", "/v1/acl/tokens", Some(secret), None)
            .await
            .status,
        200
    );
    let r = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(secret),
            Some(json!({"Description": "x"})),
        )
        .await;
    assert_eq!(r.status, 403);
    assert!(
        r.body.ends_with("lacks permission 'acl:write'"),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn tokens_are_taken_from_bearer_authorization_and_the_token_parameter() {
    let t = T::new().await;
    let mgmt = t.management().await;
    let r = t
        .http
        .get(t.url("/v1/acl/tokens"))
        .header("Authorization", format!("Bearer {mgmt}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        t.call("GET", &format!("/v1/acl/tokens?token={mgmt}"), None, None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn token_read_self_without_a_token_is_the_anonymous_token() {
    let t = T::new().await;
    let r = t.call("GET", "/v1/acl/token/self", None, None).await;
    assert_eq!(
        r.json()["AccessorID"],
        "00000000-0000-0000-0000-000000000002"
    );
}

#[tokio::test]
async fn management_token_reads_and_deletes_tokens_by_accessor() {
    let t = T::new().await;
    let mgmt = t.management().await;
    let tok = t.login_ok().await;
    let accessor = tok["AccessorID"].as_str().unwrap();
    let r = t
        .call(
            "GET",
            &format!("/v1/acl/token/{accessor}"),
            Some(&mgmt),
            None,
        )
        .await;
    assert_eq!(r.json()["AuthMethod"], "k8s");
    assert!(r.headers.contains_key("x-catalog-index"));
    assert_eq!(
        t.call(
            "DELETE",
            &format!("/v1/acl/token/{accessor}"),
            Some(&mgmt),
            None
        )
        .await
        .status,
        200
    );
    assert_eq!(
        t.call(
            "GET",
            &format!("/v1/acl/token/{accessor}"),
            Some(&mgmt),
            None
        )
        .await
        .status,
        404
    );
    let r = t
        .call(
            "DELETE",
            &format!("/v1/acl/token/{accessor}"),
            Some(&mgmt),
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (404, "Cannot find token to delete")
    );
}

// ---- namespaces (enterprise) ----

#[tokio::test]
async fn login_namespace_body_field_takes_precedence_over_query_and_header() {
    let t = T::new().await;
    t.k8s_method("team-a").await;
    let jwt = sa_jwt("default", "web", 60);
    let r = t
        .http
        .post(t.url("/v1/acl/login?ns=team-b"))
        .header("X-Catalog-Namespace", "team-c")
        .body(json!({"AuthMethod": "k8s", "BearerToken": jwt, "Namespace": "team-a"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["Namespace"], "team-a");
}

#[tokio::test]
async fn login_ns_query_takes_precedence_over_the_header() {
    let t = T::new().await;
    t.k8s_method("team-a").await;
    let jwt = sa_jwt("default", "web", 60);
    let r = t
        .http
        .post(t.url("/v1/acl/login?ns=team-a"))
        .header("X-Catalog-Namespace", "team-c")
        .body(json!({"AuthMethod": "k8s", "BearerToken": jwt}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn login_namespace_header_is_used_without_body_or_query() {
    let t = T::new().await;
    t.k8s_method("team-a").await;
    let jwt = sa_jwt("default", "web", 60);
    let r = t
        .http
        .post(t.url("/v1/acl/login"))
        .header("X-Catalog-Namespace", "team-a")
        .body(json!({"AuthMethod": "k8s", "BearerToken": jwt}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // Without any namespace the default namespace is used, where the method does not exist.
    let r = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 60)}),
        )
        .await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn token_namespace_applies_when_no_other_namespace_is_given() {
    let t = T::new().await;
    let mgmt = t.management().await;
    let team = t
        .http
        .put(t.url("/v1/acl/token?ns=team-a"))
        .header("X-Catalog-Token", &mgmt)
        .body(
            json!({"Description": "team token", "Policies": [{"Name": "global-management"}]})
                .to_string(),
        )
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(team["Namespace"], "team-a");
    // A token created by a team-a token without any namespace lands in team-a.
    let child = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(team["SecretID"].as_str().unwrap()),
            Some(json!({"Description": "child"})),
        )
        .await
        .json();
    assert_eq!(child["Namespace"], "team-a");
}

#[tokio::test]
async fn community_edition_refuses_namespaces() {
    let mut opts = SandboxOptions::ephemeral();
    opts.edition = Edition::Community;
    let t = T::with(opts).await;
    t.k8s_method("default").await;
    let r = t
        .login(
            "/v1/acl/login?ns=team-a",
            json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 60)}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.body
            .contains("Namespaces are a Consul Enterprise feature"),
        "{}",
        r.body
    );
    let ok = t
        .login(
            "/v1/acl/login",
            json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 60)}),
        )
        .await;
    assert_eq!(ok.status, 200);
    assert!(ok.json().get("Namespace").is_none());
}

// ---- persistence ----

#[tokio::test]
async fn catalog_state_persists_across_restarts_with_a_state_dir() {
    let dir = std::env::temp_dir().join(format!("quartet-catalog-{}", uuid::Uuid::new_v4()));
    let mut opts = SandboxOptions::ephemeral();
    opts.state_dir = Some(dir.clone());
    let t = T::with(opts.clone()).await;
    let secret = t.call("PUT", "/v1/acl/bootstrap", None, None).await.json()["SecretID"]
        .as_str()
        .unwrap()
        .to_string();
    t.sandbox.shutdown();
    let t2 = T::with(opts).await;
    assert_eq!(
        t2.call("GET", "/v1/acl/token/self", Some(&secret), None)
            .await
            .status,
        200
    );
    assert_eq!(
        t2.call("PUT", "/v1/acl/bootstrap", None, None).await.status,
        403
    );
    t2.sandbox.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn status_leader_answers_for_liveness_probes() {
    let t = T::new().await;
    let r = t.call("GET", "/v1/status/leader", None, None).await;
    assert_eq!(r.status, 200);
    assert!(r.json().is_string());
}

#[tokio::test]
async fn replication_supports_consistent_but_not_together_with_stale() {
    let t = T::new().await;
    assert_eq!(
        t.call("GET", "/v1/acl/replication?consistent", None, None)
            .await
            .status,
        200
    );
    let r = t
        .call("GET", "/v1/acl/replication?consistent&stale", None, None)
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            400,
            "Cannot specify ?stale with ?consistent, conflicting semantics."
        )
    );
}

#[tokio::test]
async fn root_token_can_be_made_the_initial_management_token() {
    let t = T::new().await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"UseRootToken": true}),
    )
    .await;
    assert_eq!(
        t.call("GET", "/v1/acl/tokens", Some("root"), None)
            .await
            .status,
        200
    );
    assert_eq!(
        t.call("PUT", "/v1/acl/bootstrap", None, None).await.status,
        403
    );
}

#[tokio::test]
async fn acl_reads_refuse_other_methods_with_the_real_text() {
    let t = T::new().await;
    let r = t.call("POST", "/v1/acl/token/self", None, None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (405, "method POST not allowed")
    );
    let r = t.call("DELETE", "/v1/acl/replication", None, None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (405, "method DELETE not allowed")
    );
}

#[tokio::test]
async fn management_token_updates_a_token_by_accessor() {
    let t = T::new().await;
    let mgmt = t.management().await;
    t.admin(
        "POST",
        "/_sandbox/catalog/policies",
        json!({"Name": "acl-read", "Rules": "acl = \"read\""}),
    )
    .await;
    let tok = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(&mgmt),
            Some(json!({"Description": "before"})),
        )
        .await
        .json();
    let accessor = tok["AccessorID"].as_str().unwrap();
    let r = t
        .call(
            "PUT",
            &format!("/v1/acl/token/{accessor}"),
            Some(&mgmt),
            Some(json!({"Description": "after", "Policies": [{"Name": "acl-read"}]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["Description"], "after");
    assert_eq!(v["Policies"][0]["Name"], "acl-read");
    assert_eq!(v["SecretID"], tok["SecretID"]);
    assert!(v["ModifyIndex"].as_u64() > tok["ModifyIndex"].as_u64());
    let other = "0f4b1b4e-8a39-4a6c-9a4c-7d5c2f7b8d11";
    let r = t
        .call(
            "PUT",
            &format!("/v1/acl/token/{accessor}"),
            Some(&mgmt),
            Some(json!({"AccessorID": other})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Token Accessor ID in URL and payload do not match")
    );
    let r = t
        .call(
            "PUT",
            &format!("/v1/acl/token/{accessor}"),
            Some(&mgmt),
            Some(json!({"Local": true})),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn token_create_honours_given_accessor_and_secret_ids() {
    let t = T::new().await;
    let mgmt = t.management().await;
    let (a, sct) = (
        "1f4b1b4e-8a39-4a6c-9a4c-7d5c2f7b8d11",
        "2f4b1b4e-8a39-4a6c-9a4c-7d5c2f7b8d11",
    );
    let v = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(&mgmt),
            Some(json!({"AccessorID": a, "SecretID": sct})),
        )
        .await
        .json();
    assert_eq!(
        (v["AccessorID"].as_str(), v["SecretID"].as_str()),
        (Some(a), Some(sct))
    );
    let r = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(&mgmt),
            Some(json!({"SecretID": "nope"})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, "Invalid Token: SecretID is not a valid UUID")
    );
}

#[tokio::test]
async fn token_clone_copies_links_with_new_ids() {
    let t = T::new().await;
    let mgmt = t.management().await;
    let tok = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(&mgmt),
            Some(json!({"Description": "orig", "Policies": [{"Name": "global-management"}]})),
        )
        .await
        .json();
    let accessor = tok["AccessorID"].as_str().unwrap();
    let r = t
        .call(
            "PUT",
            &format!("/v1/acl/token/{accessor}/clone"),
            Some(&mgmt),
            Some(json!({"Description": "copy"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["Description"], "copy");
    assert_eq!(v["Policies"], tok["Policies"]);
    assert_ne!(v["AccessorID"], tok["AccessorID"]);
    assert_ne!(v["SecretID"], tok["SecretID"]);
}

#[tokio::test]
async fn token_create_with_expiration_ttl_sets_expiration_time() {
    let t = T::new().await;
    let mgmt = t.management().await;
    let v = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(&mgmt),
            Some(json!({"ExpirationTTL": "1h"})),
        )
        .await
        .json();
    assert!(v["ExpirationTime"].is_string());
    let r = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(&mgmt),
            Some(json!({"ExpirationTTL": "5s"})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            500,
            "Token Expiration TTL '5s' should be between 1m0s and 24h0m0s"
        )
    );
}

// ---- corrections against the real catalog (issue 22) ----

#[tokio::test]
async fn acl_token_list_blocks_until_the_index_moves() {
    let t = T::new().await;
    let root = t.call("PUT", "/v1/acl/bootstrap", None, None).await.json();
    let secret = root["SecretID"].as_str().unwrap().to_string();
    let r = t.call("GET", "/v1/acl/tokens", Some(&secret), None).await;
    let idx = r.index();
    let url = t.url(&format!("/v1/acl/tokens?index={idx}&wait=20s"));
    let (http, s2) = (t.http.clone(), secret.clone());
    let started = std::time::Instant::now();
    let waiter = tokio::spawn(async move {
        http.get(url)
            .header("X-Catalog-Token", s2)
            .send()
            .await
            .unwrap()
    });
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(
        !waiter.is_finished(),
        "the list must block until the index moves"
    );
    let r = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(&secret),
            Some(json!({"Description": "new"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = waiter.await.unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let new_idx: u64 = r.headers()["x-catalog-index"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(new_idx > idx);
}

#[tokio::test]
async fn acl_policy_read_blocks_until_the_wait_passes_without_change() {
    let t = T::new().await;
    let root = t.call("PUT", "/v1/acl/bootstrap", None, None).await.json();
    let secret = root["SecretID"].as_str().unwrap();
    let path = "/v1/acl/policy/name/global-management";
    let idx = t.call("GET", path, Some(secret), None).await.index();
    let started = std::time::Instant::now();
    let r = t
        .call(
            "GET",
            &format!("{path}?index={idx}&wait=1s"),
            Some(secret),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    assert_eq!(r.index(), idx);
    let r = t
        .call(
            "GET",
            &format!("{path}?index={idx}&wait=nope"),
            Some(secret),
            None,
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (400, "Invalid wait time"));
}

#[tokio::test]
async fn bootstrap_403_from_a_follower_carries_the_rpc_error_prefix() {
    let t = T::new().await;
    let first = t.call("PUT", "/v1/acl/bootstrap", None, None).await.json();
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"BootstrapFromFollower": true}),
    )
    .await;
    let r = t.call("PUT", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.body,
        format!(
            "Permission denied: rpc error making call: ACL bootstrap no longer allowed (reset index: {})",
            first["CreateIndex"]
        )
    );
}

#[tokio::test]
async fn replication_last_error_is_kept_after_recovery_and_health_is_last_error_after_last_success()
{
    let t = T::new().await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"SecondaryDatacenter": "dc2", "TokenReplication": true}),
    )
    .await;
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"ReplicationError": "failed to sync remote tokens"}),
    )
    .await;
    let failing = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    assert!(
        failing["LastError"].as_str().unwrap() > failing["LastSuccess"].as_str().unwrap(),
        "{failing}"
    );
    // A write while failing does not count as a successful round.
    t.call("PUT", "/v1/acl/bootstrap", None, None).await;
    let still = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    assert_eq!(still["LastSuccess"], failing["LastSuccess"]);
    // Recovery.
    t.admin(
        "PUT",
        "/_sandbox/catalog/config",
        json!({"ReplicationError": ""}),
    )
    .await;
    let v = t
        .call("GET", "/v1/acl/replication?dc=dc2", None, None)
        .await
        .json();
    assert_eq!(v["LastError"], failing["LastError"], "never cleared");
    assert_eq!(v["LastErrorMessage"], "failed to sync remote tokens");
    assert!(
        v["LastSuccess"].as_str().unwrap() > v["LastError"].as_str().unwrap(),
        "healthy again: {v}"
    );
}
