//! The ACL objects real clients manage over `/v1` before a login (policies, roles, auth
//! methods, binding rules) and the agent calls they make on start (`agent/self`,
//! `status/peers`), through HTTP, with the real service's shapes and texts; and the wire types
//! of §2.3 that typed clients (the Go API structs) decode.

use quartet_sandbox::{start, Sandbox, SandboxOptions};
use serde_json::{json, Value};

const MGMT: &str = "6a1f5c0e-9c1d-4c43-a0a8-5d4ce0b1d001";

struct T {
    sandbox: Sandbox,
    http: reqwest::Client,
}

struct Resp {
    status: u16,
    body: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl T {
    /// A sandbox whose catalog has the management token `MGMT`.
    async fn new() -> Self {
        let t = Self {
            sandbox: start(SandboxOptions::ephemeral())
                .await
                .expect("sandbox starts"),
            http: reqwest::Client::new(),
        };
        let r = t
            .call(
                "PUT",
                "/_sandbox/catalog/config",
                None,
                Some(json!({"InitialManagementToken": MGMT})),
            )
            .await;
        assert!(r.status < 300, "{}", r.body);
        t
    }
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let mut rb = self.http.request(
            method.parse().unwrap(),
            format!("{}{}", self.sandbox.catalog_url, path),
        );
        if let Some(t) = token {
            rb = rb.header("X-Catalog-Token", t);
        }
        if let Some(b) = body {
            rb = rb.body(b.to_string());
        }
        let r = rb.send().await.unwrap();
        Resp {
            status: r.status().as_u16(),
            body: r.text().await.unwrap(),
        }
    }
    async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let r = self.call(method, path, Some(MGMT), body).await;
        assert_eq!(r.status, 200, "{method} {path}: {}", r.body);
        r.json()
    }
}

fn b64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

/// A service-account JWT with a signature nobody checks (the real method asks the cluster's
/// TokenReview API, which the sandbox cannot reach).
fn sa_jwt(ns: &str, name: &str, ttl: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let claims = json!({
        "iss": "kubernetes/serviceaccount", "sub": format!("system:serviceaccount:{ns}:{name}"),
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": "0b6c0e4e-1111-2222-3333-444455556666"}},
        "iat": now, "exp": now + ttl,
    });
    format!(
        "{}.{}.{}",
        b64(br#"{"alg":"RS256","typ":"JWT"}"#),
        b64(claims.to_string().as_bytes()),
        b64(b"signature")
    )
}

const K8S_CONFIG: &str = r#"{"Host": "https://kubernetes.default.svc", "CACert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "ServiceAccountJWT": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"}"#;

#[tokio::test]
async fn policies_are_created_read_updated_and_deleted_over_v1() {
    let t = T::new().await;
    let p = t
        .ok(
            "PUT",
            "/v1/acl/policy",
            Some(json!({"Name": "ops", "Description": "d", "Rules": "acl = \"read\""})),
        )
        .await;
    let id = p["ID"].as_str().unwrap().to_string();
    assert_eq!(p["Name"], "ops");
    assert_eq!(p["Rules"], "acl = \"read\"");
    assert!(p["Hash"].is_string() && p["CreateIndex"].is_u64());
    assert_eq!(
        t.ok("GET", &format!("/v1/acl/policy/{id}"), None).await["Name"],
        "ops"
    );
    assert_eq!(
        t.ok("GET", "/v1/acl/policy/name/ops", None).await["ID"],
        id.as_str()
    );
    let u = t
        .ok(
            "PUT",
            &format!("/v1/acl/policy/{id}"),
            Some(json!({"Name": "ops2", "Rules": "acl = \"write\""})),
        )
        .await;
    assert_eq!(u["Name"], "ops2");
    assert!(u["ModifyIndex"].as_u64() > p["ModifyIndex"].as_u64());
    let list = t.ok("GET", "/v1/acl/policies", None).await;
    assert!(list.as_array().unwrap().iter().any(|x| x["Name"] == "ops2"));
    assert_eq!(
        t.ok("DELETE", &format!("/v1/acl/policy/{id}"), None).await,
        json!(true)
    );
    let r = t
        .call("GET", &format!("/v1/acl/policy/{id}"), Some(MGMT), None)
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "ACL not found"));
}

#[tokio::test]
async fn policy_writes_need_acl_write_a_name_and_a_unique_name() {
    let t = T::new().await;
    let r = t
        .call("PUT", "/v1/acl/policy", None, Some(json!({"Name": "x"})))
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        r.body.contains("lacks permission 'acl:write'"),
        "{}",
        r.body
    );
    let r = t
        .call("PUT", "/v1/acl/policy", Some(MGMT), Some(json!({})))
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, "Invalid Policy: no Name is set")
    );
    t.ok("PUT", "/v1/acl/policy", Some(json!({"Name": "dup"})))
        .await;
    let r = t
        .call(
            "PUT",
            "/v1/acl/policy",
            Some(MGMT),
            Some(json!({"Name": "dup"})),
        )
        .await;
    assert_eq!(r.status, 500);
    assert!(r.body.contains("already exists"), "{}", r.body);
    let r = t
        .call(
            "PUT",
            "/v1/acl/policy",
            Some(MGMT),
            Some(json!({"ID": "6a1f5c0e-9c1d-4c43-a0a8-5d4ce0b1d002", "Name": "y"})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Cannot specify the ID when creating a new policy")
    );
}

#[tokio::test]
async fn builtin_global_management_policy_cannot_be_deleted() {
    let t = T::new().await;
    let r = t
        .call(
            "DELETE",
            "/v1/acl/policy/00000000-0000-0000-0000-000000000001",
            Some(MGMT),
            None,
        )
        .await;
    assert_eq!(r.status, 500);
    assert!(r.body.contains("global-management"), "{}", r.body);
}

#[tokio::test]
async fn roles_are_managed_over_v1_and_tokens_link_them_by_name() {
    let t = T::new().await;
    t.ok(
        "PUT",
        "/v1/acl/policy",
        Some(json!({"Name": "reader", "Rules": "acl = \"read\""})),
    )
    .await;
    let role = t
        .ok(
            "PUT",
            "/v1/acl/role",
            Some(json!({"Name": "r1", "Policies": [{"Name": "reader"}], "ServiceIdentities": [{"ServiceName": "web"}]})),
        )
        .await;
    assert_eq!(role["Policies"][0]["Name"], "reader");
    assert_eq!(role["ServiceIdentities"][0]["ServiceName"], "web");
    let id = role["ID"].as_str().unwrap().to_string();
    assert_eq!(
        t.ok("GET", "/v1/acl/role/name/r1", None).await["ID"],
        id.as_str()
    );
    assert_eq!(
        t.ok("GET", "/v1/acl/roles", None)
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let tok = t
        .ok(
            "PUT",
            "/v1/acl/token",
            Some(json!({"Roles": [{"Name": "r1"}]})),
        )
        .await;
    assert_eq!(tok["Roles"][0]["ID"], id.as_str());
    // The role's policy gives the token acl:read.
    let secret = tok["SecretID"].as_str().unwrap();
    let r = t.call("GET", "/v1/acl/tokens", Some(secret), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = t
        .call(
            "PUT",
            "/v1/acl/token",
            Some(MGMT),
            Some(json!({"Roles": [{"Name": "nope"}]})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        t.ok("DELETE", &format!("/v1/acl/role/{id}"), None).await,
        json!(true)
    );
    let r = t
        .call("GET", &format!("/v1/acl/role/{id}"), Some(MGMT), None)
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "ACL not found"));
}

#[tokio::test]
async fn auth_method_and_binding_rule_created_over_v1_allow_a_login() {
    let t = T::new().await;
    let config: Value = serde_json::from_str(K8S_CONFIG).unwrap();
    let m = t
        .ok(
            "PUT",
            "/v1/acl/auth-method",
            Some(
                json!({"Name": "k8s", "Type": "kubernetes", "MaxTokenTTL": "1h", "Config": config}),
            ),
        )
        .await;
    assert_eq!(m["MaxTokenTTL"], "1h0m0s");
    assert_eq!(m["Config"]["Host"], "https://kubernetes.default.svc");
    let rule = t
        .ok(
            "PUT",
            "/v1/acl/binding-rule",
            Some(
                json!({"AuthMethod": "k8s", "Selector": "serviceaccount.namespace==default",
                        "BindType": "service", "BindName": "${serviceaccount.name}"}),
            ),
        )
        .await;
    assert_eq!(rule["BindType"], "service");
    assert!(rule["ID"].as_str().unwrap().len() == 36);
    let list = t
        .ok("GET", "/v1/acl/binding-rules?authmethod=k8s", None)
        .await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let methods = t.ok("GET", "/v1/acl/auth-methods", None).await;
    assert_eq!(methods[0]["Name"], "k8s");
    assert!(
        methods[0].get("Config").is_none(),
        "list entries carry no Config"
    );
    let r = t
        .call(
            "POST",
            "/v1/acl/login",
            None,
            Some(json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 600)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let tok = r.json();
    assert_eq!(tok["AuthMethod"], "k8s");
    assert_eq!(tok["ServiceIdentities"][0]["ServiceName"], "web");
    assert!(tok["ExpirationTime"].is_string());
    // An expired service-account JWT is refused.
    let r = t
        .call(
            "POST",
            "/v1/acl/login",
            None,
            Some(json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", -60)})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, "lookup failed: service account jwt not valid")
    );
}

#[tokio::test]
async fn auth_method_writes_are_validated_like_the_real_service() {
    let t = T::new().await;
    let r = t
        .call(
            "PUT",
            "/v1/acl/auth-method",
            Some(MGMT),
            Some(json!({"Name": "x", "Type": "ldap"})),
        )
        .await;
    assert_eq!(r.status, 500);
    assert!(
        r.body
            .starts_with("Invalid Auth Method: Type should be one of"),
        "{}",
        r.body
    );
    let r = t
        .call(
            "PUT",
            "/v1/acl/auth-method",
            Some(MGMT),
            Some(json!({"Name": "x", "Type": "kubernetes", "Config": {"Host": "h"}})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, "Invalid Auth Method: Config.CACert is required")
    );
    let r = t
        .call("GET", "/v1/acl/auth-method/absent", Some(MGMT), None)
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "ACL not found"));
    let r = t
        .call(
            "PUT",
            "/v1/acl/binding-rule",
            Some(MGMT),
            Some(json!({"AuthMethod": "absent", "BindType": "service", "BindName": "x"})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, "Invalid Binding Rule: unknown auth method \"absent\"")
    );
}

#[tokio::test]
async fn deleting_an_auth_method_deletes_its_rules_and_tokens() {
    let t = T::new().await;
    let config: Value = serde_json::from_str(K8S_CONFIG).unwrap();
    t.ok(
        "PUT",
        "/v1/acl/auth-method",
        Some(json!({"Name": "k8s", "Type": "kubernetes", "Config": config})),
    )
    .await;
    t.ok(
        "PUT",
        "/v1/acl/binding-rule",
        Some(json!({"AuthMethod": "k8s", "BindType": "service", "BindName": "svc"})),
    )
    .await;
    let r = t
        .call(
            "POST",
            "/v1/acl/login",
            None,
            Some(json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 600)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let secret = r.json()["SecretID"].as_str().unwrap().to_string();
    assert_eq!(
        t.ok("DELETE", "/v1/acl/auth-method/k8s", None).await,
        json!(true)
    );
    assert_eq!(t.ok("GET", "/v1/acl/binding-rules", None).await, json!([]));
    let r = t
        .call("GET", "/v1/acl/token/self", Some(&secret), None)
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "ACL not found"));
}

#[tokio::test]
async fn agent_self_reports_the_datacenter_to_a_management_token() {
    let t = T::new().await;
    let v = t.ok("GET", "/v1/agent/self", None).await;
    assert_eq!(v["Config"]["Datacenter"], "dc1");
    assert!(v["Config"]["NodeName"].is_string());
    assert!(v["Member"]["Port"].is_u64());
}

#[tokio::test]
async fn agent_self_uses_the_agents_default_token_without_one_and_checks_given_tokens() {
    let t = T::new().await;
    let r = t.call("GET", "/v1/agent/self", None, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["Config"]["Datacenter"], "dc1");
    let tok = t
        .ok("PUT", "/v1/acl/token", Some(json!({"Description": "none"})))
        .await;
    let r = t
        .call("GET", "/v1/agent/self", tok["SecretID"].as_str(), None)
        .await;
    assert_eq!(r.status, 403);
    assert!(
        r.body.contains("lacks permission 'agent:read'"),
        "{}",
        r.body
    );
    let r = t
        .call(
            "GET",
            "/v1/agent/self",
            Some("6a1f5c0e-9c1d-4c43-a0a8-5d4ce0b1dfff"),
            None,
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (403, "ACL not found"));
}

#[tokio::test]
async fn status_peers_lists_the_server() {
    let t = T::new().await;
    let r = t.call("GET", "/v1/status/peers", None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!(["127.0.0.1:8300"]));
}

/// A login through a `/v1`-configured Kubernetes method; returns the token JSON.
async fn login(t: &T) -> Value {
    let config: Value = serde_json::from_str(K8S_CONFIG).unwrap();
    t.ok(
        "PUT",
        "/v1/acl/auth-method",
        Some(json!({"Name": "k8s", "Type": "kubernetes", "Config": config})),
    )
    .await;
    t.ok(
        "PUT",
        "/v1/acl/binding-rule",
        Some(json!({"AuthMethod": "k8s", "BindType": "service", "BindName": "${serviceaccount.name}"})),
    )
    .await;
    let r = t
        .call(
            "POST",
            "/v1/acl/login",
            None,
            Some(json!({"AuthMethod": "k8s", "BearerToken": sa_jwt("default", "web", 600)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[tokio::test]
async fn login_token_fields_have_the_types_go_clients_decode() {
    use base64::Engine;
    let t = T::new().await;
    let tok = login(&t).await;
    for k in ["AccessorID", "SecretID"] {
        assert!(
            uuid::Uuid::parse_str(tok[k].as_str().unwrap()).is_ok(),
            "{k}"
        );
    }
    assert!(tok["Description"].is_string());
    assert_eq!(tok["Local"], true);
    assert_eq!(tok["AuthMethod"], "k8s");
    assert_eq!(tok["ServiceIdentities"], json!([{"ServiceName": "web"}]));
    // Empty link lists are omitted (omitempty), never null.
    assert!(tok.get("Policies").is_none() && tok.get("Roles").is_none());
    chrono::DateTime::parse_from_rfc3339(tok["CreateTime"].as_str().unwrap()).unwrap();
    base64::engine::general_purpose::STANDARD
        .decode(tok["Hash"].as_str().unwrap())
        .unwrap();
    assert!(tok["CreateIndex"].is_u64() && tok["ModifyIndex"].is_u64());
}

#[tokio::test]
async fn replication_status_fields_have_the_types_go_clients_decode() {
    let t = T::new().await;
    let r = t.call("GET", "/v1/acl/replication", None, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    for k in ["Enabled", "Running"] {
        assert!(v[k].is_boolean(), "{k}");
    }
    for k in ["SourceDatacenter", "ReplicationType", "LastErrorMessage"] {
        assert!(v[k].is_string(), "{k}");
    }
    for k in [
        "ReplicatedIndex",
        "ReplicatedRoleIndex",
        "ReplicatedTokenIndex",
    ] {
        assert!(v[k].is_u64(), "{k}");
    }
    for k in ["LastSuccess", "LastError"] {
        chrono::DateTime::parse_from_rfc3339(v[k].as_str().unwrap()).unwrap();
    }
}

#[tokio::test]
async fn acl_endpoints_do_not_block_on_an_index() {
    let t = T::new().await;
    let started = std::time::Instant::now();
    let r = t
        .call(
            "GET",
            "/v1/acl/replication?index=100000&wait=10s",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    let r = t
        .call("PUT", "/v1/acl/bootstrap?index=100000&wait=10s", None, None)
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}

#[tokio::test]
async fn login_without_a_bearer_token_is_refused() {
    let t = T::new().await;
    login(&t).await;
    let r = t
        .call(
            "POST",
            "/v1/acl/login",
            None,
            Some(json!({"AuthMethod": "k8s"})),
        )
        .await;
    assert_eq!(r.status, 500, "{}", r.body);
    assert!(
        r.body.starts_with("failed to parse and validate JWT"),
        "{}",
        r.body
    );
    let r = t
        .call(
            "POST",
            "/v1/acl/login",
            None,
            Some(json!({"BearerToken": sa_jwt("default", "web", 600)})),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (403, "ACL not found: auth method \"\" not found")
    );
}

#[tokio::test]
async fn catalog_acl_responses_are_application_json() {
    let t = T::new().await;
    let tok = login(&t).await;
    let secret = tok["SecretID"].as_str().unwrap();
    for (method, path, token) in [
        ("GET", "/v1/acl/replication", None),
        ("GET", "/v1/acl/token/self", Some(secret)),
        ("POST", "/v1/acl/logout", Some(secret)),
    ] {
        let mut rb = t.http.request(
            method.parse().unwrap(),
            format!("{}{}", t.sandbox.catalog_url, path),
        );
        if let Some(tk) = token {
            rb = rb.header("X-Catalog-Token", tk);
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], "application/json", "{path}");
    }
}

#[tokio::test]
async fn the_admin_api_adds_an_identical_binding_rule_only_once() {
    let t = T::new().await;
    t.call(
        "POST",
        "/_sandbox/catalog/auth-methods",
        None,
        Some(json!({"Name": "k8s", "Type": "kubernetes", "Config": {"ValidationKey": "k"}})),
    )
    .await;
    let rule =
        json!({"AuthMethod": "k8s", "BindType": "service", "BindName": "${serviceaccount.name}"});
    let first = t
        .call(
            "POST",
            "/_sandbox/catalog/binding-rules",
            None,
            Some(rule.clone()),
        )
        .await
        .json();
    let second = t
        .call("POST", "/_sandbox/catalog/binding-rules", None, Some(rule))
        .await
        .json();
    assert_eq!(first["ID"], second["ID"]);
    let list = t
        .ok("GET", "/v1/acl/binding-rules?authmethod=k8s", None)
        .await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
}
