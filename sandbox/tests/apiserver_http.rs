//! Wire-level behaviour of the dev API server, over HTTPS with reqwest.

use crate::common;

use std::time::Duration;

use common::{server, Http};
use quartet_sandbox::apiserver::{ApiServer, ApiServerOptions};
use serde_json::{json, Value};

const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"k": "v"}})
}

fn widget(name: &str) -> Value {
    json!({"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": "small", "replicas": 1}})
}

const WIDGETS: &str = "/apis/test.quartet.dev/v1alpha1/namespaces/default/widgets";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

#[tokio::test]
async fn a_wrong_token_is_401_and_a_request_without_one_is_the_anonymous_user() {
    let s = server().await;
    let h = Http::new(&s);
    let anonymous = |method, path: &str| h.client.request(method, format!("{}{path}", h.base));
    // No token: `system:anonymous`, which the bootstrap policy allows the public info only.
    let (c, b) = h
        .send(anonymous(reqwest::Method::GET, "/api/v1/namespaces"))
        .await;
    assert_eq!(c, 403, "{b}");
    assert_eq!(
        b,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope",
               "reason": "Forbidden", "details": {"kind": "namespaces"}, "code": 403})
    );
    let (c, b) = h.send(anonymous(reqwest::Method::GET, "/api")).await;
    assert_eq!(
        (c, b["message"].as_str()),
        (
            403,
            Some("forbidden: User \"system:anonymous\" cannot get path \"/api\"")
        ),
        "discovery is for authenticated users"
    );
    for path in ["/version", "/healthz", "/livez", "/readyz"] {
        let (c, b) = h.send(anonymous(reqwest::Method::GET, path)).await;
        assert_eq!(c, 200, "{path}: {b}");
    }
    // Issuer discovery is for ServiceAccounts (and the admin), not for anonymous callers.
    let (c, _) = h
        .send(anonymous(
            reqwest::Method::GET,
            "/.well-known/openid-configuration",
        ))
        .await;
    assert_eq!(c, 403);
    // Public means `get`: another verb on a public path is refused like any other.
    let (c, b) = h
        .send(anonymous(reqwest::Method::POST, "/healthz").body("{}"))
        .await;
    assert_eq!(
        (c, b["message"].as_str()),
        (
            403,
            Some("forbidden: User \"system:anonymous\" cannot post path \"/healthz\"")
        )
    );
    // Another scheme or an empty bearer token is no token at all, as kube's bearer-token
    // authenticator reads the header.
    let (c, _) = h
        .send(anonymous(reqwest::Method::GET, "/healthz").header("authorization", "Basic eDp5"))
        .await;
    assert_eq!(c, 200);
    // A token that is not valid is 401, whatever the path.
    for path in ["/api/v1/namespaces", "/healthz", "/version"] {
        let (c, b) = h
            .send(anonymous(reqwest::Method::GET, path).bearer_auth("nope"))
            .await;
        assert_eq!(c, 401, "{path}: {b}");
        assert_eq!(
            b,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
    }
}

#[tokio::test]
async fn a_watch_or_proxy_verb_naming_nothing_is_the_request_info_error_before_authentication() {
    let s = server().await;
    let h = Http::new(&s);
    let r = h
        .client
        .get(format!("{}/api/v1/watch?a=1&b=2", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; charset=utf-8",
        "{:?}",
        r.headers()
    );
    assert_eq!(
        r.text().await.unwrap(),
        "Internal Server Error: \"/api/v1/watch?a=1&amp;b=2\": failed to create RequestInfo: unable to determine kind and namespace from url, /api/v1/watch?a=1&amp;b=2\n"
    );
    let (c, _) = h.get("/apis/coordination.k8s.io/v1/proxy").await;
    assert_eq!(c, 500);
}

/// The first event of a watch (`path` has a query) that the server ends after a second.
async fn first_watch_event(h: &Http, path: &str) -> Value {
    let r = h
        .req(reqwest::Method::GET, &format!("{path}&timeoutSeconds=1"))
        .send()
        .await
        .unwrap();
    let body = tokio::time::timeout(Duration::from_secs(10), r.text())
        .await
        .expect("the watch ends at its timeout")
        .unwrap();
    serde_json::from_str(body.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

#[tokio::test]
async fn the_watch_parameter_is_read_as_kube_reads_it() {
    let s = server().await;
    let h = Http::new(&s);
    let (c, b) = h.post(SECRETS, secret("w")).await;
    assert_eq!(c, 201, "{b}");
    // Anything but `0` and `false` (in any case) watches, a bare `watch=` too; a repeated
    // parameter counts by its first value.
    for q in ["watch=yes", "watch=", "watch=TRUE", "watch=1&watch=false"] {
        let first = first_watch_event(&h, &format!("{SECRETS}?{q}")).await;
        assert_eq!(first["type"], "ADDED", "{q}: {first}");
    }
    for q in ["watch=false", "watch=FALSE", "watch=0", "watch=0&watch=1"] {
        let (c, b) = h.get(&format!("{SECRETS}?{q}")).await;
        assert_eq!(
            (c, b["kind"].as_str()),
            (200, Some("SecretList")),
            "{q}: {b}"
        );
    }
}

#[tokio::test]
async fn one_object_is_watched_by_the_watch_path_only_and_its_selector_may_only_repeat_its_name() {
    let s = server().await;
    let h = Http::new(&s);
    let (c, b) = h.post(SECRETS, secret("one")).await;
    assert_eq!(c, 201, "{b}");
    // A named GET is a get, whatever `watch` says.
    // (With a timeout, so that a server that wrongly watches here ends the stream.)
    let (c, b) = h
        .get(&format!("{SECRETS}/one?watch=true&timeoutSeconds=1"))
        .await;
    assert_eq!((c, b["kind"].as_str()), (200, Some("Secret")), "{b}");
    let path = "/api/v1/watch/namespaces/default/secrets/one";
    for q in [
        "fieldSelector=metadata.name%3Dother",
        "fieldSelector=type%3DOpaque",
    ] {
        let (c, b) = h.get(&format!("{path}?{q}")).await;
        assert_eq!(
            (c, b["message"].as_str()),
            (
                400,
                Some("fieldSelector metadata.name doesn't match requested name")
            ),
            "{q}"
        );
    }
    let first = first_watch_event(&h, &format!("{path}?fieldSelector=metadata.name%3Done")).await;
    assert_eq!(
        (
            first["type"].as_str(),
            first["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("one")),
        "{first}"
    );
}

#[tokio::test]
async fn a_write_with_options_a_real_server_refuses_is_422_and_writes_nothing() {
    let s = server().await;
    let h = Http::new(&s);
    let (c, b) = h.post(&format!("{SECRETS}?dryRun=true"), secret("d")).await;
    assert_eq!(
        (c, b["message"].as_str()),
        (
            422,
            Some("CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"true\"]: supported values: \"All\"")
        ),
        "{b}"
    );
    assert_eq!(
        b["details"],
        json!({"group": "meta.k8s.io", "kind": "CreateOptions", "causes": [
            {"reason": "FieldValueNotSupported", "message": "Unsupported value: [\"true\"]: supported values: \"All\"", "field": "dryRun"}]})
    );
    let (c, _) = h.get(&format!("{SECRETS}/d")).await;
    assert_eq!(c, 404, "nothing was written");
    let (c, b) = h.post(SECRETS, secret("d")).await;
    assert_eq!(c, 201, "{b}");
    let (c, b) = h
        .put(&format!("{SECRETS}/d?fieldValidation=strict"), secret("d"))
        .await;
    assert_eq!(
        (c, b["message"].as_str()),
        (422, Some("UpdateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"")),
        "{b}"
    );
    // `force` belongs to apply: on any other patch it is refused, whatever its value.
    let (c, b) = h
        .patch(
            &format!("{SECRETS}/d?force=false"),
            MERGE,
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    assert_eq!(
        (c, b["message"].as_str()),
        (422, Some("PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch")),
        "{b}"
    );
    let (c, b) = h
        .patch(
            &format!("{SECRETS}/d?fieldManager={}", "m".repeat(129)),
            MERGE,
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    assert_eq!(
        (c, b["message"].as_str()),
        (422, Some("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes")),
        "{b}"
    );
    let (c, b) = h.get(&format!("{SECRETS}/d")).await;
    assert_eq!((c, &b["metadata"]["labels"]), (200, &Value::Null), "{b}");
    // Apply takes `force` in kube's spelling of a boolean: taking over the creator's field
    // conflicts with `force=0` and succeeds with `force=1`.
    let apply = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "d"}, "data": {"k": "dw=="}});
    let (c, b) = h
        .patch(
            &format!("{SECRETS}/d?fieldManager=other&force=0"),
            APPLY,
            apply.clone(),
        )
        .await;
    assert_eq!(c, 409, "{b}");
    let (c, b) = h
        .patch(
            &format!("{SECRETS}/d?fieldManager=other&force=1"),
            APPLY,
            apply,
        )
        .await;
    assert_eq!((c, &b["data"]["k"]), (200, &json!("dw==")), "{b}");
}

#[tokio::test]
async fn a_secret_a_real_server_refuses_is_refused_with_its_field_and_message() {
    let s = server().await;
    let h = Http::new(&s);
    let key_msg = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    for (body, message) in [
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"user name": "x"}}),
            format!("Secret \"s\" is invalid: data[user name]: Invalid value: \"user name\": {key_msg}"),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "x".repeat(1024 * 1024 + 1)}}),
            "Secret \"s\" is invalid: data: Too long: may not be more than 1048576 bytes".to_string(),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/tls", "stringData": {"tls.crt": "c"}}),
            "Secret \"s\" is invalid: data[tls.key]: Required value".to_string(),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/basic-auth"}),
            "Secret \"s\" is invalid: [data[%s][username]: Required value, data[%s][password]: Required value]".to_string(),
        ),
    ] {
        let (c, b) = h.post(SECRETS, body).await;
        assert_eq!((c, b["message"].as_str()), (422, Some(message.as_str())), "{b}");
    }
    let (c, b) = h
        .post(
            SECRETS,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/basic-auth", "stringData": {"username": "u"}}),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    // An update is checked the same way.
    let (c, b) = h
        .patch(
            &format!("{SECRETS}/s"),
            MERGE,
            json!({"stringData": {"a/b": "x"}}),
        )
        .await;
    assert_eq!(c, 422, "{b}");
}

#[tokio::test]
async fn a_lease_a_real_server_refuses_is_refused_with_its_field_and_message() {
    let s = server().await;
    let h = Http::new(&s);
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = |name: &str, spec: Value| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": spec});
    for (spec, message) in [
        (
            json!({"holderIdentity": "a", "leaseDurationSeconds": 0}),
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
        ),
        (
            json!({"leaseTransitions": -1}),
            "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"preferredHolder": "a"}),
            "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
        ),
        (
            json!({"strategy": "Newest"}),
            "spec.strategy: Unsupported value: \"Newest\": supported values: \"OldestEmulationVersion\"",
        ),
    ] {
        let (c, b) = h.post(leases, lease("l", spec.clone())).await;
        assert_eq!(
            (c, b["message"].as_str()),
            (422, Some(format!("Lease.coordination.k8s.io \"l\" is invalid: {message}").as_str())),
            "{spec}"
        );
    }
    let (c, b) = h
        .post(
            leases,
            lease(
                "l",
                json!({"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                              "strategy": "OldestEmulationVersion", "preferredHolder": "a"}),
            ),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    // The same checks on an update.
    let (c, b) = h
        .patch(
            &format!("{leases}/l"),
            MERGE,
            json!({"spec": {"leaseDurationSeconds": -5}}),
        )
        .await;
    assert_eq!(c, 422, "{b}");
}

#[tokio::test]
async fn list_parameters_kube_cannot_decode_are_400_with_its_message() {
    let s = server().await;
    let h = Http::new(&s);
    for (q, message) in [
        (
            "limit=abc",
            "strconv.ParseInt: parsing \"abc\": invalid syntax",
        ),
        (
            "timeoutSeconds=",
            "strconv.ParseInt: parsing \"\": invalid syntax",
        ),
        (
            "limit=99999999999999999999",
            "strconv.ParseInt: parsing \"99999999999999999999\": value out of range",
        ),
        (
            "fieldSelector=metadata.name%3Da%5Cx",
            "invalid field selector: invalid escape sequence: \\x",
        ),
        (
            "fieldSelector=metadata.name%3Da%3Db",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "fieldSelector=metadata.name",
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
        ),
        // Nothing is trimmed: the field is ` metadata.name `.
        (
            "fieldSelector=%20metadata.name%20%3D%20x",
            "field label not supported:  metadata.name ",
        ),
    ] {
        let (c, b) = h.get(&format!("{SECRETS}?{q}")).await;
        assert_eq!(
            (c, b["reason"].as_str()),
            (400, Some("BadRequest")),
            "{q}: {b}"
        );
        assert_eq!(b["message"], message, "{q}");
    }
    // Escaped commas and equals signs are a value's own characters, and terms split at the
    // first operator.
    let (c, b) = h.post(SECRETS, secret("x")).await;
    assert_eq!(c, 201, "{b}");
    for (q, names) in [
        ("fieldSelector=metadata.name%3Dx", vec!["x"]),
        ("fieldSelector=metadata.name%3D%3Dx", vec!["x"]),
        ("fieldSelector=metadata.name!%3Dx", vec![]),
        ("fieldSelector=metadata.name%3Dx%5C,y", vec![]),
        ("fieldSelector=metadata.name%3D%3D%5C%3Dx", vec![]),
    ] {
        let (c, b) = h.get(&format!("{SECRETS}?{q}")).await;
        assert_eq!(c, 200, "{q}: {b}");
        let got: Vec<&str> = b["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(got, names, "{q}");
    }
}

#[tokio::test]
async fn version_reports_kubernetes_1_33() {
    let s = server().await;
    let (code, v) = Http::new(&s).get("/version").await;
    assert_eq!(code, 200);
    assert_eq!(v["major"], "1");
    assert_eq!(v["minor"], "33");
    assert!(v["gitVersion"].as_str().unwrap().starts_with("v1.33."));
}

#[tokio::test]
async fn discovery_lists_builtin_kinds_with_verbs_and_short_names() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, v) = h.get("/api/v1").await;
    let rs = v["resources"].as_array().unwrap();
    let cm = rs.iter().find(|r| r["name"] == "configmaps").unwrap();
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["namespaced"], true);
    assert_eq!(cm["shortNames"], json!(["cm"]));
    assert!(cm["verbs"].as_array().unwrap().contains(&json!("watch")));
    assert!(rs.iter().any(|r| r["name"] == "namespaces/status"));
    let (_, g) = h.get("/apis").await;
    let names: Vec<&str> = g["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for want in [
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
    ] {
        assert!(names.contains(&want), "{names:?}");
    }
    let (_, l) = h.get("/apis/coordination.k8s.io/v1").await;
    assert_eq!(l["resources"][0]["name"], "leases");
    let (code, _) = h.get("/apis/nope.example.com/v1").await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn aggregated_discovery_is_served_when_asked_for() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let r = h
        .req(reqwest::Method::GET, "/apis")
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["kind"], "APIGroupDiscoveryList");
    let g = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "test.quartet.dev")
        .unwrap();
    let res = &g["versions"][0]["resources"][0];
    assert_eq!(res["resource"], "widgets");
    assert_eq!(res["scope"], "Namespaced");
    assert_eq!(res["categories"], json!(["quartet"]));
    assert_eq!(res["shortNames"], json!(["wg"]));
    assert_eq!(res["subresources"][0]["subresource"], "status");
}

#[tokio::test]
async fn default_namespaces_exist_at_start() {
    let s = server().await;
    let h = Http::new(&s);
    for ns in ["default", "kube-system"] {
        let (code, v) = h.get(&format!("/api/v1/namespaces/{ns}")).await;
        assert_eq!(code, 200);
        assert_eq!(v["status"]["phase"], "Active");
    }
}

#[tokio::test]
async fn absent_secret_is_404_not_found_status() {
    let s = server().await;
    let (code, v) = Http::new(&s).get(&format!("{SECRETS}/x")).await;
    assert_eq!(code, 404);
    assert_eq!(v["message"], "secrets \"x\" not found");
    assert_eq!(v["reason"], "NotFound");
    assert_eq!(v["details"], json!({"name": "x", "kind": "secrets"}));
}

#[tokio::test]
async fn create_sets_metadata_and_duplicate_is_already_exists() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, v) = h.post(SECRETS, secret("s1")).await;
    assert_eq!(code, 201, "{v}");
    assert!(v["metadata"]["uid"].is_string());
    assert!(v["metadata"]["creationTimestamp"].is_string());
    assert!(v["metadata"]["resourceVersion"].is_string());
    assert_eq!(v["data"]["k"], "dg==", "stringData is folded into data");
    assert!(v.get("stringData").is_none());
    assert_eq!(v["type"], "Opaque");
    let (code, v) = h.post(SECRETS, secret("s1")).await;
    assert_eq!(code, 409);
    assert_eq!(v["reason"], "AlreadyExists");
    assert_eq!(v["message"], "secrets \"s1\" already exists");
}

#[tokio::test]
async fn generate_name_gets_a_random_suffix() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, v) = h
        .post(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"generateName": "cm-"}}),
        )
        .await;
    assert_eq!(code, 201);
    let name = v["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("cm-") && name.len() == 8, "{name}");
}

#[tokio::test]
async fn create_in_missing_namespace_is_404() {
    let s = server().await;
    let (code, v) = Http::new(&s)
        .post("/api/v1/namespaces/nope/secrets", secret("s"))
        .await;
    assert_eq!(code, 404);
    assert_eq!(v["message"], "namespaces \"nope\" not found");
}

#[tokio::test]
async fn update_with_stale_resource_version_is_409_conflict() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let (_, v) = h.post(WIDGETS, widget("w1")).await;
    let mut a = v.clone();
    a["spec"]["replicas"] = json!(2);
    let (code, updated) = h.put(&format!("{WIDGETS}/w1"), a).await;
    assert_eq!(code, 200);
    assert_eq!(updated["metadata"]["generation"], 2);
    let mut stale = v.clone();
    stale["spec"]["replicas"] = json!(3);
    let (code, e) = h.put(&format!("{WIDGETS}/w1"), stale).await;
    assert_eq!(code, 409);
    assert_eq!(e["reason"], "Conflict");
    assert_eq!(
        e["message"],
        "Operation cannot be fulfilled on widgets.test.quartet.dev \"w1\": the object has been modified; please apply your changes to the latest version and try again"
    );
}

#[tokio::test]
async fn status_subresource_separates_spec_and_status_and_generation() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let mut w = widget("w1");
    w["status"] = json!({"observedGeneration": 7});
    let (_, v) = h.post(WIDGETS, w).await;
    assert!(
        v.get("status").is_none(),
        "status is ignored on create: {v}"
    );
    // A status write ignores spec changes and does not bump generation.
    let (code, v) = h
        .patch(
            &format!("{WIDGETS}/w1/status"),
            MERGE,
            json!({"spec": {"replicas": 5}, "status": {"observedGeneration": 1}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["spec"]["replicas"], 1);
    assert_eq!(v["status"]["observedGeneration"], 1);
    assert_eq!(v["metadata"]["generation"], 1);
    // A main-resource write ignores status; metadata-only changes do not bump generation.
    let (_, v) = h
        .patch(
            &format!("{WIDGETS}/w1"),
            MERGE,
            json!({"metadata": {"labels": {"a": "b"}}, "status": {"observedGeneration": 9}}),
        )
        .await;
    assert_eq!(v["status"]["observedGeneration"], 1);
    assert_eq!(v["metadata"]["generation"], 1);
    let (_, v) = h
        .patch(
            &format!("{WIDGETS}/w1"),
            MERGE,
            json!({"spec": {"replicas": 2}}),
        )
        .await;
    assert_eq!(v["metadata"]["generation"], 2);
}

#[tokio::test]
async fn no_op_write_keeps_resource_version() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, v) = h.post(SECRETS, secret("s1")).await;
    let (_, v2) = h
        .patch(
            &format!("{SECRETS}/s1"),
            MERGE,
            json!({"data": {"k": "dg=="}}),
        )
        .await;
    assert_eq!(
        v["metadata"]["resourceVersion"],
        v2["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn strategic_merge_patch_works_for_builtins_and_is_415_for_custom_resources() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "c", "finalizers": ["a/b"]}, "data": {"x": "1"}}),
    )
    .await;
    let (code, v) = h
        .patch(
            "/api/v1/namespaces/default/configmaps/c",
            "application/strategic-merge-patch+json",
            json!({"metadata": {"finalizers": ["c/d"]}, "data": {"y": "2"}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["metadata"]["finalizers"], json!(["a/b", "c/d"]));
    assert_eq!(v["data"], json!({"x": "1", "y": "2"}));
    h.install_widget_crd().await;
    h.post(WIDGETS, widget("w1")).await;
    let (code, v) = h
        .patch(
            &format!("{WIDGETS}/w1"),
            "application/strategic-merge-patch+json",
            json!({"spec": {}}),
        )
        .await;
    assert_eq!(code, 415);
    assert_eq!(v["reason"], "UnsupportedMediaType");
}

#[tokio::test]
async fn json_patch_test_failure_leaves_object_unchanged() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(SECRETS, secret("s1")).await;
    let (code, _) = h
        .patch(
            &format!("{SECRETS}/s1"),
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}, {"op": "test", "path": "/type", "value": "Other"}]),
        )
        .await;
    assert_eq!(code, 422);
    let (_, v) = h.get(&format!("{SECRETS}/s1")).await;
    assert!(v["metadata"]["labels"].is_null());
}

#[tokio::test]
async fn list_filters_by_label_and_field_selectors_and_pages() {
    let s = server().await;
    let h = Http::new(&s);
    for (n, l) in [("a", "x"), ("b", "y"), ("c", "x"), ("d", "x")] {
        let mut sec = secret(n);
        sec["metadata"]["labels"] = json!({"app": l});
        h.post(SECRETS, sec).await;
    }
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, v) = h.get(&format!("{SECRETS}?labelSelector=app%3Dx")).await;
    assert_eq!(names(&v), ["a", "c", "d"]);
    let (_, v) = h
        .get(&format!("{SECRETS}?labelSelector=app%20in%20(y)"))
        .await;
    assert_eq!(names(&v), ["b"]);
    let (_, v) = h
        .get(&format!("{SECRETS}?fieldSelector=metadata.name%3Dc"))
        .await;
    assert_eq!(names(&v), ["c"]);
    let (_, v) = h
        .get("/api/v1/secrets?fieldSelector=metadata.namespace%21%3Ddefault")
        .await;
    assert_eq!(names(&v), Vec::<String>::new());
    let (code, v) = h
        .get(&format!("{SECRETS}?fieldSelector=spec.foo%3Dbar"))
        .await;
    assert_eq!(code, 400);
    assert_eq!(v["message"], "field label not supported: spec.foo");
    // Paging.
    let (_, p1) = h.get(&format!("{SECRETS}?limit=3")).await;
    assert_eq!(names(&p1), ["a", "b", "c"]);
    assert_eq!(p1["metadata"]["remainingItemCount"], 1);
    let cont = p1["metadata"]["continue"].as_str().unwrap();
    let (_, p2) = h.get(&format!("{SECRETS}?limit=3&continue={cont}")).await;
    assert_eq!(names(&p2), ["d"]);
    assert!(p2["metadata"].get("continue").is_none());
}

/// A paged list reports the first page's resourceVersion on every page, so a client that
/// watches from it sees objects created while it paged (even ones sorting before the continue
/// key, which the later pages cannot show).
#[tokio::test]
async fn paged_list_reports_the_first_pages_resource_version() {
    let s = server().await;
    let h = Http::new(&s);
    for n in ["b", "c", "d"] {
        let (code, _) = h.post(SECRETS, secret(n)).await;
        assert_eq!(code, 201);
    }
    let (_, p1) = h.get(&format!("{SECRETS}?limit=2")).await;
    let first_rv = p1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let cont = p1["metadata"]["continue"].as_str().unwrap().to_string();
    // Created between pages, sorting before the continue key.
    let (code, _) = h.post(SECRETS, secret("a")).await;
    assert_eq!(code, 201);
    let (_, p2) = h.get(&format!("{SECRETS}?limit=2&continue={cont}")).await;
    let p2_names: Vec<&str> = p2["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(p2_names, ["d"]);
    assert_eq!(p2["metadata"]["resourceVersion"], first_rv.as_str());
    let mut w = h
        .req(
            reqwest::Method::GET,
            &format!("{SECRETS}?watch=true&resourceVersion={first_rv}&timeoutSeconds=1"),
        )
        .send()
        .await
        .unwrap();
    let events = read_events(&mut w, 1).await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], "a");
}

/// Read watch events until `n` arrive or the stream ends.
async fn read_events(r: &mut reqwest::Response, n: usize) -> Vec<Value> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while out.len() < n {
        let chunk = match tokio::time::timeout(Duration::from_secs(5), r.chunk()).await {
            Ok(Ok(Some(c))) => c,
            _ => break,
        };
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            out.push(serde_json::from_slice(&line).unwrap());
        }
    }
    out
}

/// A watch of Secrets from the list's current resourceVersion, with `extra` query parameters.
async fn watch_secrets_from_now(h: &Http, extra: &str) -> reqwest::Response {
    let (_, list) = h.get(SECRETS).await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    h.req(
        reqwest::Method::GET,
        &format!("{SECRETS}?watch=true&resourceVersion={rv}{extra}"),
    )
    .send()
    .await
    .unwrap()
}

#[tokio::test]
async fn watch_streams_changes_after_a_resource_version() {
    let s = server().await;
    let h = Http::new(&s);
    let mut r = watch_secrets_from_now(&h, "").await;
    h.post(SECRETS, secret("s1")).await;
    h.patch(
        &format!("{SECRETS}/s1"),
        MERGE,
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    h.delete(&format!("{SECRETS}/s1")).await;
    let evs = read_events(&mut r, 3).await;
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);
    assert_eq!(evs[1]["object"]["metadata"]["labels"]["a"], "b");
}

#[tokio::test]
async fn watch_sends_bookmarks_when_allowed() {
    let s = server().await;
    let h = Http::new(&s);
    let mut r = h
        .req(reqwest::Method::GET, &format!("{SECRETS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"))
        .send()
        .await
        .unwrap();
    let evs = read_events(&mut r, 1).await;
    assert_eq!(evs[0]["type"], "BOOKMARK");
    assert_eq!(
        evs[0]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

/// A watch of Secrets hears no ConfigMap write, yet its BOOKMARK carries the cluster's
/// resourceVersion past those writes (as kube-apiserver's do), so a client resuming from it
/// does not replay, or fall behind, history that was never its own.
#[tokio::test]
async fn a_watch_hears_only_its_resource_and_its_bookmarks_follow_the_cluster() {
    let s = server().await;
    let h = Http::new(&s);
    let mut r = watch_secrets_from_now(&h, "&allowWatchBookmarks=true").await;
    let mut last = 0u64;
    for i in 0..3 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}, "data": {"k": "v"}});
        let (code, v) = h.post("/api/v1/namespaces/default/configmaps", cm).await;
        assert_eq!(code, 201, "{v}");
        last = v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    }
    // A bookmark comes every 5 s; the read waits up to 5 s a chunk.
    let mut evs = read_events(&mut r, 1).await;
    if evs.is_empty() {
        evs = read_events(&mut r, 1).await;
    }
    assert_eq!(evs.len(), 1, "a bookmark within 10 s");
    assert_eq!(
        evs[0]["type"], "BOOKMARK",
        "no ConfigMap event on a Secret watch: {evs:?}"
    );
    let bookmark: u64 = evs[0]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        bookmark >= last,
        "bookmark {bookmark} behind the cluster's {last}"
    );
    h.post(SECRETS, secret("s1")).await;
    let evs = read_events(&mut r, 1).await;
    assert_eq!(evs[0]["type"], "ADDED", "{evs:?}");
    assert_eq!(evs[0]["object"]["metadata"]["name"], "s1");
}

/// A lagging watch (`POST /_sandbox/watch-lag`) is a cache behind the writes: its events come
/// that long after each write and in order, while reads of the same resource already answer
/// with the write.
#[tokio::test]
async fn a_lagging_watch_delivers_each_event_late_in_order_and_reads_are_not_delayed() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, v) = h
        .post(
            "/_sandbox/watch-lag",
            json!({"resource": "secrets", "ms": 1500}),
        )
        .await;
    assert_eq!(code, 204, "{v}");
    let mut r = watch_secrets_from_now(&h, "&allowWatchBookmarks=true").await;
    let written = std::time::Instant::now();
    for name in ["s1", "s2"] {
        let (code, v) = h.post(SECRETS, secret(name)).await;
        assert_eq!(code, 201, "{v}");
    }
    let (code, _) = h.get(&format!("{SECRETS}/s2")).await;
    assert_eq!(code, 200, "a read is not delayed");
    let evs = read_events(&mut r, 2).await;
    assert!(
        written.elapsed() >= Duration::from_millis(1400),
        "events came {:?} after the writes",
        written.elapsed()
    );
    let names: Vec<&Value> = evs
        .iter()
        .map(|e| &e["object"]["metadata"]["name"])
        .collect();
    assert_eq!(names, [&json!("s1"), &json!("s2")], "{evs:?}");
    assert!(evs.iter().all(|e| e["type"] == "ADDED"), "{evs:?}");

    // Lag 0: at once again (a lag of a minute would outlast the read's 5 s).
    h.post(
        "/_sandbox/watch-lag",
        json!({"resource": "secrets", "ms": 60000}),
    )
    .await;
    h.post(
        "/_sandbox/watch-lag",
        json!({"resource": "secrets", "ms": 0}),
    )
    .await;
    h.post(SECRETS, secret("s3")).await;
    let evs = read_events(&mut r, 1).await;
    assert_eq!(evs.len(), 1, "no event within 5 s");
    assert_eq!(evs[0]["object"]["metadata"]["name"], "s3", "{evs:?}");
}

#[tokio::test]
async fn watch_ends_after_timeout_seconds() {
    let s = server().await;
    let h = Http::new(&s);
    let start = std::time::Instant::now();
    let r = h
        .req(
            reqwest::Method::GET,
            &format!("{SECRETS}?watch=true&timeoutSeconds=1&resourceVersion=1"),
        )
        .send()
        .await
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), r.bytes())
        .await
        .expect("stream ends");
    assert!(start.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn watch_from_compacted_resource_version_is_410_expired() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, v) = h.post(SECRETS, secret("s1")).await;
    let rv = v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    s.expire_watches();
    let mut r = h
        .req(
            reqwest::Method::GET,
            &format!("{SECRETS}?watch=true&resourceVersion={rv}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let evs = read_events(&mut r, 1).await;
    assert_eq!(evs[0]["type"], "ERROR");
    assert_eq!(evs[0]["object"]["code"], 410);
    assert_eq!(evs[0]["object"]["reason"], "Expired");
    assert!(evs[0]["object"]["message"]
        .as_str()
        .unwrap()
        .starts_with("too old resource version: "));
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let mut w = widget("w1");
    w["metadata"]["finalizers"] = json!(["x/y"]);
    h.post(WIDGETS, w).await;
    let (code, v) = h.delete(&format!("{WIDGETS}/w1")).await;
    assert_eq!(code, 200);
    assert!(v["metadata"]["deletionTimestamp"].is_string());
    let (code, v) = h.get(&format!("{WIDGETS}/w1")).await;
    assert_eq!(code, 200);
    assert!(v["metadata"]["deletionTimestamp"].is_string());
    // No new finalizers while deleting.
    let (code, _) = h
        .patch(
            &format!("{WIDGETS}/w1"),
            MERGE,
            json!({"metadata": {"finalizers": ["x/y", "z/w"]}}),
        )
        .await;
    assert_eq!(code, 422);
    let (code, _) = h
        .patch(
            &format!("{WIDGETS}/w1"),
            MERGE,
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(code, 200);
    let (code, _) = h.get(&format!("{WIDGETS}/w1")).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn owner_references_garbage_collect_dependents() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let (_, owner) = h.post(WIDGETS, widget("owner")).await;
    let oref = json!([{"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "name": "owner", "uid": owner["metadata"]["uid"], "controller": true}]);
    let mut dep = secret("dep");
    dep["metadata"]["ownerReferences"] = oref.clone();
    h.post(SECRETS, dep).await;
    // Orphan keeps the dependent (and strips the reference).
    let (_, owner2) = h.post(WIDGETS, widget("owner2")).await;
    let mut dep2 = secret("dep2");
    dep2["metadata"]["ownerReferences"] = json!([{"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "name": "owner2", "uid": owner2["metadata"]["uid"]}]);
    h.post(SECRETS, dep2).await;

    h.delete(&format!("{WIDGETS}/owner")).await;
    let (code, _) = h.get(&format!("{SECRETS}/dep")).await;
    assert_eq!(code, 404, "background propagation deletes the dependent");

    let (code, _) = h
        .send(
            h.req(reqwest::Method::DELETE, &format!("{WIDGETS}/owner2"))
                .json(&json!({"propagationPolicy": "Orphan"})),
        )
        .await;
    assert_eq!(code, 200);
    let (code, v) = h.get(&format!("{SECRETS}/dep2")).await;
    assert_eq!(code, 200);
    assert!(v["metadata"]["ownerReferences"]
        .as_array()
        .is_none_or(|a| a.is_empty()));
    let (code, _) = h.get(&format!("{WIDGETS}/owner2")).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn deleting_a_crd_stops_serving_its_kind() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let (code, v) = h
        .get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.quartet.dev")
        .await;
    assert_eq!(code, 200);
    let conds: Vec<&str> = v["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert!(conds.contains(&"Established") && conds.contains(&"NamesAccepted"));
    h.post(WIDGETS, widget("w1")).await;
    let (code, _) = h.get(WIDGETS).await;
    assert_eq!(code, 200);
    h.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.quartet.dev")
        .await;
    let (code, _) = h.get(WIDGETS).await;
    assert_eq!(code, 404);
    let (code, _) = h.get("/apis/test.quartet.dev/v1alpha1").await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents() {
    let s = server().await;
    let h = Http::new(&s);
    h.post("/api/v1/namespaces", json!({"metadata": {"name": "team"}}))
        .await;
    let (code, _) = h
        .get("/api/v1/namespaces/team/serviceaccounts/default")
        .await;
    assert_eq!(code, 200);
    h.post("/api/v1/namespaces/team/secrets", secret("s")).await;
    h.delete("/api/v1/namespaces/team").await;
    let (code, _) = h.get("/api/v1/namespaces/team/secrets/s").await;
    assert_eq!(code, 404);
    let (code, _) = h.get("/api/v1/namespaces/team").await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn server_side_apply_removes_fields_a_manager_stops_applying() {
    let s = server().await;
    let h = Http::new(&s);
    let cm = |data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
            .to_string()
    };
    let path = "/api/v1/namespaces/default/configmaps/c?fieldManager=m";
    let (code, v) = h
        .send(
            h.req(reqwest::Method::PATCH, path)
                .header("content-type", APPLY)
                .body(cm(json!({"a": "1", "b": "2"}))),
        )
        .await;
    assert_eq!(code, 201, "apply creates: {v}");
    // Another manager sets a field of its own.
    h.patch(
        "/api/v1/namespaces/default/configmaps/c?fieldManager=other",
        MERGE,
        json!({"data": {"c": "3"}}),
    )
    .await;
    let (code, v) = h
        .send(
            h.req(reqwest::Method::PATCH, path)
                .header("content-type", APPLY)
                .body(cm(json!({"a": "1"}))),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(v["data"], json!({"a": "1", "c": "3"}));
    let mf = v["metadata"]["managedFields"].as_array().unwrap();
    let m = mf.iter().find(|e| e["manager"] == "m").unwrap();
    assert_eq!(m["operation"], "Apply");
    assert_eq!(m["fieldsV1"], json!({"f:data": {".": {}, "f:a": {}}}));
    // YAML bodies work too, and fieldManager is required.
    let (code, _) = h
        .send(
            h.req(
                reqwest::Method::PATCH,
                "/api/v1/namespaces/default/configmaps/c",
            )
            .header("content-type", APPLY)
            .body("apiVersion: v1\nkind: ConfigMap\n"),
        )
        .await;
    assert_eq!(
        code, 422,
        "the options are refused as kube's ValidatePatchOptions does"
    );
}

#[tokio::test]
async fn unknown_fields_follow_field_validation() {
    let s = server().await;
    let h = Http::new(&s);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}, "bogus": 1});
    let (code, v) = h
        .post(
            "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
            body.clone(),
        )
        .await;
    assert_eq!(code, 400);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("strict decoding error: unknown field \"bogus\""),
        "{v}"
    );
    let r = h
        .req(
            reqwest::Method::POST,
            "/api/v1/namespaces/default/configmaps?fieldValidation=Warn",
        )
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(
        r.headers()["warning"].to_str().unwrap(),
        "299 - \"unknown field \\\"bogus\\\"\""
    );
    let v: Value = r.json().await.unwrap();
    assert!(v.get("bogus").is_none(), "unknown fields are dropped");
    // Server-side apply words it like structured-merge-diff.
    let (code, v) = h
        .send(
            h.req(reqwest::Method::PATCH, "/api/v1/namespaces/default/configmaps/d?fieldManager=m&fieldValidation=Strict")
                .header("content-type", APPLY)
                .body(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "bogus": 1}).to_string()),
        )
        .await;
    assert_eq!(code, 400);
    assert_eq!(v["message"], "failed to create typed patch object (/v1, Kind=ConfigMap): .bogus: field not declared in schema");
}

#[tokio::test]
async fn table_is_returned_when_kubectl_asks_for_it() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(SECRETS, secret("s1")).await;
    let (code, v) = h
        .send(h.req(reqwest::Method::GET, SECRETS).header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        ))
        .await;
    assert_eq!(code, 200);
    assert_eq!(v["kind"], "Table");
    assert_eq!(v["rows"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn restart_with_state_dir_keeps_objects_and_resource_versions_grow() {
    let dir = std::env::temp_dir().join(format!("quartet-apiserver-{}", uuid::Uuid::new_v4()));
    let opts = ApiServerOptions {
        state_dir: Some(dir.clone()),
        ..Default::default()
    };
    let s = ApiServer::start(opts.clone()).await.unwrap();
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let (_, w) = h.post(WIDGETS, widget("w1")).await;
    let rv: u64 = w["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    s.shutdown().await;

    let s = ApiServer::start(opts).await.unwrap();
    let h = Http::new(&s);
    let (code, v) = h.get(&format!("{WIDGETS}/w1")).await;
    assert_eq!(code, 200, "the CRD and its objects survive a restart");
    assert_eq!(v["metadata"]["uid"], w["metadata"]["uid"]);
    let (_, w2) = h.post(WIDGETS, widget("w2")).await;
    let rv2: u64 = w2["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv);
    s.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn dry_run_does_not_store() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, _) = h.post(&format!("{SECRETS}?dryRun=All"), secret("s1")).await;
    assert_eq!(code, 201);
    let (code, _) = h.get(&format!("{SECRETS}/s1")).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn crd_selectable_fields_work_in_field_selectors() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    h.post(WIDGETS, widget("w1")).await;
    let mut big = widget("w2");
    big["spec"]["size"] = json!("large");
    h.post(WIDGETS, big).await;
    let (code, v) = h
        .get(&format!("{WIDGETS}?fieldSelector=spec.size%3Dlarge"))
        .await;
    assert_eq!(code, 200, "{v}");
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "w2");
    let (code, _) = h
        .get(&format!("{WIDGETS}?fieldSelector=spec.replicas%3D1"))
        .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn partial_object_metadata_is_returned_when_asked_for() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(SECRETS, secret("s1")).await;
    let accept =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let (_, v) = h
        .send(
            h.req(reqwest::Method::GET, SECRETS)
                .header("accept", accept),
        )
        .await;
    assert_eq!(v["kind"], "PartialObjectMetadataList");
    assert_eq!(v["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(v["items"][0]["metadata"]["name"], "s1");
    assert!(v["items"][0].get("data").is_none());
}

#[tokio::test]
async fn a_write_asked_for_metadata_only_is_answered_with_the_metadata_of_what_it_wrote() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let metadata_only = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let create_w1 = || {
        h.send(
            h.req(reqwest::Method::POST, WIDGETS)
                .header("accept", metadata_only)
                .json(&widget("w1")),
        )
    };
    let (code, created) = create_w1().await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["kind"], "PartialObjectMetadata");
    assert_eq!(created["metadata"]["name"], "w1");
    assert!(created.get("spec").is_none(), "{created}");
    let status = json!({"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "status": {"observedGeneration": 1}});
    let (code, v) = h
        .send(
            h.req(
                reqwest::Method::PATCH,
                &format!("{WIDGETS}/w1/status?fieldManager=op&force=true"),
            )
            .header("content-type", APPLY)
            .header("accept", metadata_only)
            .body(status.to_string()),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        v["apiVersion"], "meta.k8s.io/v1",
        "a PartialObjectMetadata: {v}"
    );
    assert!(v.get("status").is_none() && v.get("spec").is_none(), "{v}");
    assert_ne!(
        v["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "the answer is of the object as written"
    );
    // The write happened, whatever the answer's shape.
    let (_, full) = h.get(&format!("{WIDGETS}/w1")).await;
    assert_eq!(full["status"]["observedGeneration"], 1);
    assert_eq!(
        full["metadata"]["resourceVersion"],
        v["metadata"]["resourceVersion"]
    );
    // Refused writes are still answered with a Status.
    let (code, v) = create_w1().await;
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["kind"], "Status");
}

#[tokio::test]
async fn watch_with_label_selector_sees_objects_enter_and_leave() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, list) = h.get(SECRETS).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut r = h
        .req(
            reqwest::Method::GET,
            &format!("{SECRETS}?watch=true&labelSelector=app%3Dx&resourceVersion={rv}"),
        )
        .send()
        .await
        .unwrap();
    h.post(SECRETS, secret("s1")).await;
    h.patch(
        &format!("{SECRETS}/s1"),
        MERGE,
        json!({"metadata": {"labels": {"app": "x"}}}),
    )
    .await;
    h.patch(
        &format!("{SECRETS}/s1"),
        MERGE,
        json!({"metadata": {"labels": {"app": "y"}}}),
    )
    .await;
    let evs = read_events(&mut r, 2).await;
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "DELETED"]);
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let (_, owner) = h.post(WIDGETS, widget("owner")).await;
    let mut dep = widget("dep");
    dep["metadata"]["ownerReferences"] = json!([{"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "name": "owner", "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true}]);
    dep["metadata"]["finalizers"] = json!(["x/hold"]);
    h.post(WIDGETS, dep).await;
    let (code, v) = h
        .send(
            h.req(reqwest::Method::DELETE, &format!("{WIDGETS}/owner"))
                .json(&json!({"propagationPolicy": "Foreground"})),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(v["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    // The dependent is being deleted but held by its finalizer, so the owner stays.
    let (_, d) = h.get(&format!("{WIDGETS}/dep")).await;
    assert!(d["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = h.get(&format!("{WIDGETS}/owner")).await;
    assert_eq!(code, 200);
    h.patch(
        &format!("{WIDGETS}/dep"),
        MERGE,
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    let (code, _) = h.get(&format!("{WIDGETS}/owner")).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn invalid_label_value_is_422_naming_the_field() {
    let s = server().await;
    let h = Http::new(&s);
    let mut sec = secret("s1");
    sec["metadata"]["labels"] = json!({"app": "not valid!"});
    let (code, v) = h.post(SECRETS, sec).await;
    assert_eq!(code, 422);
    assert_eq!(v["reason"], "Invalid");
    assert!(
        v["message"].as_str().unwrap().starts_with("Secret \"s1\" is invalid: metadata.labels: Invalid value: \"not valid!\": a valid label must be"),
        "{v}"
    );
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.labels");
}

#[tokio::test]
async fn secret_type_is_immutable() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(SECRETS, secret("s1")).await;
    let (code, v) = h
        .patch(
            &format!("{SECRETS}/s1"),
            MERGE,
            json!({"type": "kubernetes.io/tls"}),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        v["message"],
        "Secret \"s1\" is invalid: type: Invalid value: \"kubernetes.io/tls\": field is immutable"
    );
}

/// A custom resource's metadata is checked like any object's: label keys and values,
/// annotation keys, finalizer names.
#[tokio::test]
async fn a_custom_resource_with_an_invalid_label_is_422_like_any_object() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let mut w = widget("w1");
    w["metadata"]["labels"] = json!({"app": "not valid!"});
    w["metadata"]["finalizers"] = json!(["a/b/c"]);
    let (code, v) = h.post(WIDGETS, w).await;
    assert_eq!(code, 422, "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.starts_with("Widget.test.quartet.dev \"w1\" is invalid: [metadata.labels: Invalid value: \"not valid!\": a valid label must be an empty string"),
        "{v}"
    );
    assert!(
        message.contains("metadata.finalizers: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters"),
        "{v}"
    );
    let (code, _) = h.get(&format!("{WIDGETS}/w1")).await;
    assert_eq!(code, 404);
}

/// Strict decoding reads the body as sent: a create's unknown status field is refused even
/// though the status subresource drops the status of a create.
#[tokio::test]
async fn strict_decoding_refuses_an_unknown_status_field_in_a_create() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let mut w = widget("w1");
    w["status"] = json!({"bogus": 1});
    let (code, v) = h
        .post(&format!("{WIDGETS}?fieldValidation=Strict"), w.clone())
        .await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(
        v["message"],
        "Widget in version \"v1alpha1\" cannot be handled as a Widget: strict decoding error: unknown field \"status.bogus\""
    );
    let (code, v) = h.post(WIDGETS, w).await;
    assert_eq!(code, 201, "{v}");
}

/// (schema part) defaults added to a CRD later show on reads without a write.
#[tokio::test]
async fn custom_resources_are_defaulted_on_read() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    h.post(WIDGETS, widget("w1")).await;
    let crd_path =
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.quartet.dev";
    let (_, mut crd) = h.get(crd_path).await;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["color"] = json!({"type": "string", "default": "blue"});
    let (code, v) = h.put(crd_path, crd).await;
    assert_eq!(code, 200, "{v}");
    let (_, w) = h.get(&format!("{WIDGETS}/w1")).await;
    assert_eq!(w["spec"]["color"], "blue");
    let (_, l) = h.get(WIDGETS).await;
    assert_eq!(l["items"][0]["spec"]["color"], "blue");
}

/// (schema part) strict decoding fails before validation, as on a real server.
#[tokio::test]
async fn strict_unknown_field_error_comes_before_validation_errors() {
    let s = server().await;
    let h = Http::new(&s);
    h.install_widget_crd().await;
    let mut w = widget("w1");
    w["spec"]["size"] = json!("huge");
    w["spec"]["bogus"] = json!(1);
    let (code, v) = h
        .post(&format!("{WIDGETS}?fieldValidation=Strict"), w.clone())
        .await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(
        v["message"],
        "Widget in version \"v1alpha1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.bogus\""
    );
    let (code, v) = h.post(WIDGETS, w).await;
    assert_eq!(code, 422, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("spec.size: Unsupported value: \"huge\""),
        "{v}"
    );
}
