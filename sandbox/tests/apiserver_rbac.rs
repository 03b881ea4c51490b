//! RBAC in the dev API server, checked against what kube-apiserver answers: requests with a
//! ServiceAccount token (TokenRequest) are authorized by the stored Roles, ClusterRoles and
//! their bindings, denials are 403 Status with the real wording, an apply that creates needs
//! `create`, the admin token stays all-powerful, and `kubectl auth can-i --as` / `whoami` work
//! through impersonation and the access-review APIs.

use crate::common;

use common::{server, Http, Kubectl};
use serde_json::{json, Value};

const NS: &str = "quartet-system";
const SA: &str = "quartet";
const USER: &str = "system:serviceaccount:quartet-system:quartet";

/// A namespace and ServiceAccount made by the admin, and a client with a token of that
/// ServiceAccount.
async fn service_account(admin: &Http, s: &quartet_sandbox::apiserver::ApiServer) -> Http {
    let (c, b) = admin
        .post(
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        )
        .await;
    assert!(c == 201 || c == 409, "{b}");
    let (c, b) = admin
        .post(
            &format!("/api/v1/namespaces/{NS}/serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}}),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    let (c, tr) = admin
        .post(
            &format!("/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token"),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
        )
        .await;
    assert_eq!(c, 201, "{tr}");
    Http {
        token: tr["status"]["token"].as_str().unwrap().to_string(),
        ..Http::new(s)
    }
}

async fn create(admin: &Http, path: &str, obj: Value) {
    let (c, b) = admin.post(path, obj).await;
    assert_eq!(c, 201, "{path}: {b}");
}

/// A ClusterRole (or Role when `ns` is given) with `rules`, bound to the ServiceAccount by a
/// ClusterRoleBinding (or a RoleBinding in `ns`).
async fn grant(admin: &Http, name: &str, ns: Option<&str>, rules: Value) {
    let subject = json!([{"kind": "ServiceAccount", "name": SA, "namespace": NS}]);
    match ns {
        Some(ns) => {
            create(admin, &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules})).await;
            create(admin, &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": subject})).await;
        }
        None => {
            create(admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})).await;
            create(admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, "subjects": subject})).await;
        }
    }
}

fn assert_forbidden(code: u16, body: &Value, message: &str) {
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["reason"], "Forbidden", "{body}");
    assert_eq!(body["code"], 403, "{body}");
    assert_eq!(body["message"], message, "{body}");
}

const APPLY: &str = "application/apply-patch+yaml";

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"}, "stringData": {"k": "v"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_gets_only_discovery_until_a_binding_grants_more() {
    let s = server().await;
    let admin = Http::new(&s);
    let sa = service_account(&admin, &s).await;

    // Discovery and the public info are for every authenticated user (system:discovery).
    for path in ["/api", "/api/v1", "/apis", "/openapi/v3", "/version"] {
        let (c, b) = sa.get(path).await;
        assert_eq!(c, 200, "{path}: {b}");
    }
    let (c, b) = sa.get("/api/v1/namespaces/default/secrets").await;
    assert_forbidden(c, &b, &format!("secrets is forbidden: User \"{USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""));
    assert_eq!(b["details"], json!({"kind": "secrets"}));
    let (c, b) = sa.get("/api/v1/secrets").await;
    assert_forbidden(c, &b, &format!("secrets is forbidden: User \"{USER}\" cannot list resource \"secrets\" in API group \"\" at the cluster scope"));
    let (c, b) = sa
        .post("/api/v1/namespaces/default/secrets", secret("x"))
        .await;
    assert_forbidden(c, &b, &format!("secrets is forbidden: User \"{USER}\" cannot create resource \"secrets\" in API group \"\" in the namespace \"default\""));
    let (c, b) = sa
        .get("/apis/coordination.k8s.io/v1/namespaces/quartet-system/leases/quartet")
        .await;
    assert_forbidden(c, &b, &format!("leases.coordination.k8s.io \"quartet\" is forbidden: User \"{USER}\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"quartet-system\""));
    assert_eq!(
        b["details"],
        json!({"group": "coordination.k8s.io", "kind": "leases", "name": "quartet"})
    );
    let (c, b) = sa.get("/logs/").await;
    assert_forbidden(
        c,
        &b,
        &format!("forbidden: User \"{USER}\" cannot get path \"/logs/\""),
    );

    // The admin token is not affected by any of it.
    let (c, b) = admin
        .post("/api/v1/namespaces/default/secrets", secret("x"))
        .await;
    assert_eq!(c, 201, "{b}");

    // A wrong token, and a token whose ServiceAccount is gone, are not users at all.
    let bogus = Http {
        token: "eyJhbGciOiJSUzI1NiJ9.e30.c2ln".into(),
        ..Http::new(&s)
    };
    let (c, b) = bogus.get("/api/v1/namespaces/default/secrets").await;
    assert_eq!(c, 401, "{b}");
    let (c, _) = admin
        .delete(&format!("/api/v1/namespaces/{NS}/serviceaccounts/{SA}"))
        .await;
    assert_eq!(c, 200);
    let (c, b) = sa.get("/api").await;
    assert_eq!(c, 401, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_binding_grants_in_its_namespace_and_only_a_cluster_role_binding_grants_cluster_wide(
) {
    let s = server().await;
    let admin = Http::new(&s);
    let sa = service_account(&admin, &s).await;
    grant(
        &admin,
        "read-secrets",
        Some("default"),
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    let (c, b) = sa.get("/api/v1/namespaces/default/secrets").await;
    assert_eq!(c, 200, "{b}");
    let (c, b) = sa.get("/api/v1/namespaces/kube-system/secrets").await;
    assert_forbidden(c, &b, &format!("secrets is forbidden: User \"{USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""));
    let (c, b) = sa.get("/api/v1/secrets?watch=true&timeoutSeconds=1").await;
    assert_forbidden(c, &b, &format!("secrets is forbidden: User \"{USER}\" cannot watch resource \"secrets\" in API group \"\" at the cluster scope"));
    // Granting a verb is not granting another.
    let (c, b) = sa.delete("/api/v1/namespaces/default/secrets/none").await;
    assert_forbidden(c, &b, &format!("secrets \"none\" is forbidden: User \"{USER}\" cannot delete resource \"secrets\" in API group \"\" in the namespace \"default\""));

    grant(
        &admin,
        "list-secrets",
        None,
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]),
    )
    .await;
    let (c, b) = sa.get("/api/v1/secrets").await;
    assert_eq!(c, 200, "{b}");
    let (c, b) = sa.get("/api/v1/namespaces/kube-system/secrets").await;
    assert_eq!(c, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_side_apply_that_creates_an_object_needs_create_as_well_as_patch() {
    let s = server().await;
    let admin = Http::new(&s);
    let sa = service_account(&admin, &s).await;
    grant(
        &admin,
        "patch-secrets",
        None,
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["patch"]}]),
    )
    .await;
    let path = "/api/v1/namespaces/default/secrets/applied?fieldManager=quartet";
    let (c, b) = sa.patch(path, APPLY, secret("applied")).await;
    assert_forbidden(c, &b, &format!("secrets \"applied\" is forbidden: User \"{USER}\" cannot create resource \"secrets\" in API group \"\" in the namespace \"default\""));
    assert_eq!(b["details"], json!({"kind": "secrets", "name": "applied"}));
    let (c, _) = admin
        .get("/api/v1/namespaces/default/secrets/applied")
        .await;
    assert_eq!(c, 404, "nothing was created");

    // Once the object exists, applying it is a patch only.
    let (c, b) = admin
        .post("/api/v1/namespaces/default/secrets", secret("applied"))
        .await;
    assert_eq!(c, 201, "{b}");
    let (c, b) = sa.patch(path, APPLY, secret("applied")).await;
    assert_eq!(c, 200, "{b}");

    grant(
        &admin,
        "create-secrets",
        None,
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]),
    )
    .await;
    let (c, b) = sa
        .patch(
            "/api/v1/namespaces/default/secrets/fresh?fieldManager=quartet",
            APPLY,
            secret("fresh"),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    // create without patch is not enough for an apply: the request itself is a patch.
    let (c, b) = sa
        .patch(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/l?fieldManager=quartet",
            APPLY,
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}}),
        )
        .await;
    assert_forbidden(c, &b, &format!("leases.coordination.k8s.io \"l\" is forbidden: User \"{USER}\" cannot patch resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"default\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subresources_resource_names_and_wildcards_match_as_on_a_real_server() {
    let s = server().await;
    let admin = Http::new(&s);
    admin.install_widget_crd().await;
    let sa = service_account(&admin, &s).await;
    grant(
        &admin,
        "widgets",
        None,
        json!([
            {"apiGroups": ["test.quartet.dev"], "resources": ["widgets"], "verbs": ["get", "create", "patch"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"], "resourceNames": ["named"]},
        ]),
    )
    .await;
    let base = "/apis/test.quartet.dev/v1alpha1/namespaces/default/widgets";
    let (c, b) = sa
        .post(
            base,
            json!({"apiVersion": "test.quartet.dev/v1alpha1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "small"}}),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    let status = json!({"status": {"observedGeneration": 1}});
    let merge = "application/merge-patch+json";
    let (c, b) = sa
        .patch(&format!("{base}/w/status"), merge, status.clone())
        .await;
    assert_forbidden(c, &b, &format!("widgets.test.quartet.dev \"w\" is forbidden: User \"{USER}\" cannot patch resource \"widgets/status\" in API group \"test.quartet.dev\" in the namespace \"default\""));
    grant(
        &admin,
        "any-status",
        None,
        json!([{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["patch"]}]),
    )
    .await;
    let (c, b) = sa.patch(&format!("{base}/w/status"), merge, status).await;
    assert_eq!(c, 200, "{b}");

    // resourceNames: that object only, and a list only when it names that object.
    for name in ["named", "other"] {
        let (c, b) = admin
            .post("/api/v1/namespaces/default/secrets", secret(name))
            .await;
        assert_eq!(c, 201, "{b}");
    }
    let (c, b) = sa.get("/api/v1/namespaces/default/secrets/named").await;
    assert_eq!(c, 200, "{b}");
    let (c, b) = sa.get("/api/v1/namespaces/default/secrets/other").await;
    assert_forbidden(c, &b, &format!("secrets \"other\" is forbidden: User \"{USER}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\""));
    let (c, b) = sa
        .get("/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3Dnamed")
        .await;
    assert_eq!(c, 200, "{b}");
    assert_eq!(b["items"].as_array().unwrap().len(), 1);
    let (c, _) = sa.get("/api/v1/namespaces/default/secrets").await;
    assert_eq!(c, 403);

    // TokenRequest is `create` on serviceaccounts/token.
    let token_path = format!("/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token");
    let tr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let (c, b) = sa.post(&token_path, tr.clone()).await;
    assert_forbidden(c, &b, &format!("serviceaccounts \"{SA}\" is forbidden: User \"{USER}\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"{NS}\""));
    grant(
        &admin,
        "tokens",
        Some(NS),
        json!([{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]),
    )
    .await;
    let (c, b) = sa.post(&token_path, tr).await;
    assert_eq!(c, 201, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_is_authorized_with_the_verb_and_name_kube_reads_from_its_query() {
    let s = server().await;
    let admin = Http::new(&s);
    let sa = service_account(&admin, &s).await;
    grant(
        &admin,
        "named",
        None,
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"], "resourceNames": ["named"]}]),
    )
    .await;
    let (c, b) = admin
        .post("/api/v1/namespaces/default/secrets", secret("named"))
        .await;
    assert_eq!(c, 201, "{b}");
    let base = "/api/v1/namespaces/default/secrets";
    let (c, b) = sa
        .get(&format!("{base}?fieldSelector=metadata.name%3Dnamed"))
        .await;
    assert_eq!(c, 200, "{b}");
    // The name is the first `metadata.name` term of the sorted terms: authorized, then refused
    // for the field secrets cannot be selected by.
    let (c, b) = sa
        .get(&format!(
            "{base}?fieldSelector=spec.x%3Dy,metadata.name%3D%3Dnamed"
        ))
        .await;
    assert_eq!(
        (c, b["message"].as_str()),
        (400, Some("field label not supported: spec.x"))
    );
    // `watch=yes` watches, so the verb is `watch`.
    let (c, b) = sa
        .get(&format!(
            "{base}?fieldSelector=metadata.name%3Dnamed&watch=yes"
        ))
        .await;
    assert_forbidden(c, &b, &format!("secrets \"named\" is forbidden: User \"{USER}\" cannot watch resource \"secrets\" in API group \"\" in the namespace \"default\""));
    // A query kube cannot decode is authorized without the name; so is a `!=` term.
    for q in [
        "fieldSelector=metadata.name%3Dnamed&limit=abc",
        "fieldSelector=metadata.name!%3Dother",
    ] {
        let (c, b) = sa.get(&format!("{base}?{q}")).await;
        assert_forbidden(c, &b, &format!("secrets is forbidden: User \"{USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""));
    }
    // Public paths are public for `get` only; issuer discovery is for ServiceAccounts.
    let (c, b) = sa.post("/healthz", json!({})).await;
    assert_forbidden(
        c,
        &b,
        &format!("forbidden: User \"{USER}\" cannot post path \"/healthz\""),
    );
    let (c, b) = sa.get("/.well-known/openid-configuration").await;
    assert_eq!(c, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_to_a_missing_role_is_named_in_the_denial() {
    let s = server().await;
    let admin = Http::new(&s);
    let sa = service_account(&admin, &s).await;
    create(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "dangling"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nope"},
               "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}]})).await;
    let (c, b) = sa.get("/api/v1/namespaces/default/configmaps").await;
    assert_forbidden(c, &b, &format!("configmaps is forbidden: User \"{USER}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\": RBAC: clusterrole.rbac.authorization.k8s.io \"nope\" not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_reviews_and_impersonation_answer_for_a_service_account() {
    let s = server().await;
    let admin = Http::new(&s);
    let sa = service_account(&admin, &s).await;
    grant(
        &admin,
        "read-cm",
        Some("default"),
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
    )
    .await;
    // SubjectAccessReview: the admin asks about the ServiceAccount.
    let sar = |verb: &str, ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": USER, "groups": ["system:serviceaccounts", "system:authenticated"],
                        "resourceAttributes": {"verb": verb, "resource": "configmaps", "namespace": ns}}})
    };
    let (c, b) = admin
        .post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            sar("get", "default"),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    assert_eq!(b["status"]["allowed"], true, "{b}");
    assert_eq!(
        b["status"]["reason"],
        format!("RBAC: allowed by RoleBinding \"read-cm/default\" of Role \"read-cm\" to ServiceAccount \"{SA}/{NS}\"")
    );
    let (c, b) = admin
        .post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            sar("get", "kube-system"),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    assert_eq!(b["status"]["allowed"], false, "{b}");
    // The ServiceAccount may not ask about others, only about itself.
    let (c, b) = sa
        .post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            sar("get", "default"),
        )
        .await;
    assert_forbidden(c, &b, &format!("subjectaccessreviews.authorization.k8s.io is forbidden: User \"{USER}\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"));
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "configmaps", "namespace": "default", "name": "x"}}});
    let (c, b) = sa
        .post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            ssar.clone(),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    assert_eq!(b["status"]["allowed"], true, "{b}");
    let (c, b) = sa
        .post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}),
        )
        .await;
    assert_eq!(c, 422, "{b}");
    assert_eq!(b["message"], "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified");

    // The admin impersonates the ServiceAccount: its groups come with it.
    let as_sa = |rb: reqwest::RequestBuilder| rb.header("Impersonate-User", USER);
    let (c, b) = admin
        .send(
            as_sa(admin.req(
                reqwest::Method::POST,
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            ))
            .json(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    assert_eq!(
        b["status"]["userInfo"],
        json!({"username": USER, "groups": ["system:serviceaccounts", "system:serviceaccounts:quartet-system", "system:authenticated"]})
    );
    let (c, b) = admin
        .send(as_sa(admin.req(
            reqwest::Method::GET,
            "/api/v1/namespaces/default/secrets",
        )))
        .await;
    assert_forbidden(c, &b, &format!("secrets is forbidden: User \"{USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""));
    // Rules review: what the ServiceAccount may do in a namespace.
    let (c, b) = admin
        .send(as_sa(admin.req(reqwest::Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"))
            .json(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}})))
        .await;
    assert_eq!(c, 201, "{b}");
    let rules = b["status"]["resourceRules"].as_array().unwrap();
    assert!(
        rules.contains(&json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]})),
        "{b}"
    );
    // Impersonating a user and a group: the group's bindings apply to that user.
    create(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "read-ns"},
               "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]})).await;
    create(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "devs-read-ns"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "read-ns"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]})).await;
    let alice = || {
        admin
            .req(reqwest::Method::GET, "/api/v1/namespaces/default")
            .header("Impersonate-User", "alice")
    };
    let (c, b) = admin.send(alice()).await;
    // A namespace is addressed inside itself: the message says "in the namespace".
    assert_forbidden(c, &b, "namespaces \"default\" is forbidden: User \"alice\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"default\"");
    let (c, b) = admin
        .send(alice().header("Impersonate-Group", "devs"))
        .await;
    assert_eq!(c, 200, "{b}");
    // A ServiceAccount may not impersonate without the `impersonate` verb.
    let (c, b) = sa
        .send(
            sa.req(reqwest::Method::GET, "/api")
                .header("Impersonate-User", "alice"),
        )
        .await;
    assert_forbidden(c, &b, &format!("users \"alice\" is forbidden: User \"{USER}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"));
}

/// kubectl's own view: `auth can-i --as`, `auth whoami`, and a kubeconfig with the
/// ServiceAccount's token (`kubectl create token`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_as_a_service_account_answers_from_the_stored_rbac() {
    let s = server().await;
    let k = Kubectl::new(&s);
    k.ok(&["create", "namespace", NS]);
    k.ok(&["create", "serviceaccount", SA, "-n", NS]);
    let can = |args: &[&str]| {
        let mut a = vec!["auth", "can-i", "--as", USER];
        a.extend_from_slice(args);
        let o = k.run(&a);
        (o.ok, o.stdout.trim().to_string(), o.stderr)
    };
    let (ok, out, err) = can(&["create", "secrets", "-n", "default"]);
    assert_eq!((ok, out.as_str()), (false, "no"), "{err}");
    // Granted as a user would, with kubectl's typed clients (protobuf bodies).
    let sa_ref = format!("--serviceaccount={NS}:{SA}");
    k.ok(&[
        "create",
        "clusterrole",
        "op",
        "--verb=create,patch",
        "--resource=secrets",
    ]);
    k.ok(&[
        "create",
        "clusterrolebinding",
        "op",
        "--clusterrole=op",
        &sa_ref,
    ]);
    k.ok(&[
        "create",
        "role",
        "lease",
        "--verb=get,update",
        "--resource=leases.coordination.k8s.io",
        "-n",
        NS,
    ]);
    k.ok(&[
        "create",
        "rolebinding",
        "lease",
        "--role=lease",
        &sa_ref,
        "-n",
        NS,
    ]);
    let (ok, out, err) = can(&["update", "leases", "-n", NS]);
    assert_eq!((ok, out.as_str()), (true, "yes"), "{err}");
    let (ok, out, err) = can(&["update", "leases", "-n", "default"]);
    assert_eq!((ok, out.as_str()), (false, "no"), "{err}");
    let (ok, out, err) = can(&["create", "secrets", "-n", "default"]);
    assert_eq!((ok, out.as_str()), (true, "yes"), "{err}");
    let (ok, out, err) = can(&["list", "secrets", "--all-namespaces"]);
    assert_eq!((ok, out.as_str()), (false, "no"), "{err}");
    let (ok, out, err) = can(&["create", "selfsubjectaccessreviews.authorization.k8s.io"]);
    assert_eq!((ok, out.as_str()), (true, "yes"), "{err}");
    let (ok, out, err) = can(&["get", "/version"]);
    assert_eq!((ok, out.as_str()), (true, "yes"), "{err}");
    let out = k.ok(&["auth", "can-i", "--as", USER, "--list", "-n", "default"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("secrets ") && l.contains("[create patch]")),
        "{out}"
    );
    let out = k.ok(&["auth", "whoami", "--as", USER, "-o", "json"]);
    let who: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], USER, "{out}");

    // kubectl with the ServiceAccount's own token.
    let token = k.ok(&["create", "token", SA, "-n", NS]);
    let kc = std::fs::read_to_string(k.dir.join("kubeconfig"))
        .unwrap()
        .replace(s.token(), token.trim());
    let sa = Kubectl::new(&s);
    std::fs::write(sa.dir.join("kubeconfig"), kc).unwrap();
    let o = sa.run(&["get", "secrets", "-n", "default"]);
    assert!(!o.ok);
    assert!(
        o.stderr.contains(&format!("Error from server (Forbidden): secrets is forbidden: User \"{USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\"")),
        "{}",
        o.stderr
    );
    sa.ok(&[
        "create",
        "secret",
        "generic",
        "made-by-sa",
        "-n",
        "default",
        "--from-literal=k=v",
    ]);
    let out = sa.ok(&["auth", "whoami"]);
    assert!(out.contains(USER), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_apis_and_the_bootstrap_policy_are_served_like_a_real_cluster() {
    let s = server().await;
    let k = Kubectl::new(&s);
    let out = k.ok(&["api-resources", "-o", "name"]);
    for r in [
        "tokenreviews.authentication.k8s.io",
        "selfsubjectreviews.authentication.k8s.io",
        "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
        "subjectaccessreviews.authorization.k8s.io",
        "localsubjectaccessreviews.authorization.k8s.io",
    ] {
        assert!(out.lines().any(|l| l == r), "{r} missing from:\n{out}");
    }
    let out = k.ok(&[
        "api-resources",
        "--api-group=authorization.k8s.io",
        "-o",
        "wide",
    ]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("selfsubjectaccessreviews ")
                && l.split_whitespace().any(|w| w == "create")),
        "{out}"
    );
    let out = k.ok(&["get", "clusterrolebindings", "-o", "name"]);
    for b in [
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "system:service-account-issuer-discovery",
    ] {
        assert!(
            out.lines()
                .any(|l| l == format!("clusterrolebinding.rbac.authorization.k8s.io/{b}")),
            "{b} missing from:\n{out}"
        );
    }
    let h = Http::new(&s);
    let (c, b) = h
        .get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .await;
    assert_eq!(c, 405, "{b}");
}

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_and_bindings_a_real_server_refuses_are_refused_with_its_messages() {
    let s = server().await;
    let admin = Http::new(&s);
    let (c, b) = admin
        .post(
            &format!("{RBAC}/namespaces/default/roles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
                   "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}, {"verbs": ["get"], "resources": ["secrets"]}]}),
        )
        .await;
    assert_eq!(c, 422, "{b}");
    assert_eq!(
        b["message"],
        "Role.rbac.authorization.k8s.io \"r\" is invalid: [rules[0].nonResourceURLs: Invalid value: [\"/metrics\"]: namespaced rules cannot apply to non-resource URLs, rules[1].apiGroups: Required value: resource rules must supply at least one api group]"
    );
    // The metadata's errors and the kind's come in one answer, as kube's validation gives them.
    let (c, b) = admin
        .post(
            &format!("{RBAC}/clusterroles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "a/b", "labels": {"team": "a b"}}, "rules": [{"apiGroups": [""], "resources": ["secrets"]}]}),
        )
        .await;
    assert_eq!(c, 422, "{b}");
    let message = b["message"].as_str().unwrap();
    assert!(
        message.starts_with("ClusterRole.rbac.authorization.k8s.io \"a/b\" is invalid: [metadata.name: Invalid value: \"a/b\": may not contain '/', metadata.labels: Invalid value: \"a b\": ")
            && message.ends_with(", rules[0].verbs: Required value: verbs must contain at least one value]"),
        "{b}"
    );
    // RBAC names need only be a path segment; a Service's name must be a DNS-1035 label.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "quartet:viewer"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]});
    let (c, b) = admin.post(&format!("{RBAC}/clusterroles"), role).await;
    assert_eq!(c, 201, "{b}");
    let (c, b) = admin
        .post(
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1-metrics"}, "spec": {"ports": [{"port": 80}]}}),
        )
        .await;
    assert_eq!(c, 422, "{b}");
    assert!(
        b["message"].as_str().unwrap().contains("metadata.name: Invalid value: \"1-metrics\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character"),
        "{b}"
    );
    // A binding's roleRef group and a User's group are defaulted; the roleRef never changes.
    let (c, b) = admin
        .post(
            &format!("{RBAC}/clusterrolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "viewers"},
                   "roleRef": {"kind": "ClusterRole", "name": "quartet:viewer"}, "subjects": [{"kind": "User", "name": "alice"}]}),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    assert_eq!(b["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(b["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    let (c, b) = admin
        .patch(
            &format!("{RBAC}/clusterrolebindings/viewers"),
            "application/merge-patch+json",
            json!({"roleRef": {"name": "edit"}}),
        )
        .await;
    assert_eq!(c, 422, "{b}");
    assert_eq!(
        b["message"],
        "ClusterRoleBinding.rbac.authorization.k8s.io \"viewers\" is invalid: roleRef: Invalid value: {\"APIGroup\":\"rbac.authorization.k8s.io\",\"Kind\":\"ClusterRole\",\"Name\":\"edit\"}: cannot change roleRef"
    );
    let (c, b) = admin
        .post(
            &format!("{RBAC}/clusterrolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "sa"},
                   "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "quartet"}]}),
        )
        .await;
    assert_eq!(c, 422, "{b}");
    assert_eq!(
        b["message"],
        "ClusterRoleBinding.rbac.authorization.k8s.io \"sa\" is invalid: [roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\", subjects[0].namespace: Required value]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_role_labelled_for_edit_lends_its_rules_to_edit_and_admin_until_it_goes() {
    let s = server().await;
    let admin = Http::new(&s);
    let sa = service_account(&admin, &s).await;
    let (c, b) = admin
        .post(
            &format!("{RBAC}/namespaces/default/rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "team-edit"},
                   "roleRef": {"kind": "ClusterRole", "name": "edit"},
                   "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}]}),
        )
        .await;
    assert_eq!(c, 201, "{b}");
    let (c, b) = sa
        .post("/api/v1/namespaces/default/secrets", secret("x"))
        .await;
    assert_forbidden(c, &b, &format!("secrets is forbidden: User \"{USER}\" cannot create resource \"secrets\" in API group \"\" in the namespace \"default\""));

    let labels = json!({"rbac.authorization.k8s.io/aggregate-to-edit": "true"});
    let rule = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]});
    create(
        &admin,
        &format!("{RBAC}/clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "secrets-edit", "labels": labels}, "rules": [rule]}),
    )
    .await;
    let (c, b) = sa
        .post("/api/v1/namespaces/default/secrets", secret("x"))
        .await;
    assert_eq!(c, 201, "{b}");
    // Only in the namespace of the binding.
    let (c, _) = sa
        .post("/api/v1/namespaces/quartet-system/secrets", secret("x"))
        .await;
    assert_eq!(c, 403);
    // `edit` feeds `admin`; `view` gets nothing of it.
    for (role, has) in [("edit", true), ("admin", true), ("view", false)] {
        let (c, b) = admin.get(&format!("{RBAC}/clusterroles/{role}")).await;
        assert_eq!(c, 200, "{b}");
        let rules = b["rules"].as_array().cloned().unwrap_or_default();
        assert_eq!(rules.contains(&rule), has, "{role}: {b}");
    }

    // Removed with the role that lent it.
    let (c, _) = admin
        .delete(&format!("{RBAC}/clusterroles/secrets-edit"))
        .await;
    assert_eq!(c, 200);
    let (c, b) = sa
        .post("/api/v1/namespaces/default/secrets", secret("y"))
        .await;
    assert_eq!(c, 403, "{b}");
    let (_, b) = admin.get(&format!("{RBAC}/clusterroles/admin")).await;
    assert_eq!(b["rules"], json!([]), "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregated_role_takes_its_rules_selector_by_selector_each_rule_once() {
    let s = server().await;
    let admin = Http::new(&s);
    let role = |name: &str, label: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name, "labels": {label: "true"}}, "rules": rules})
    };
    let pods = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
    let secrets = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]});
    // `a-...` sorts first but is selected by the second selector; `b-...` lends the pods rule
    // again, with an empty `resourceNames` that is the same rule to kube.
    let pods_again =
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": []});
    let clusterroles = format!("{RBAC}/clusterroles");
    create(
        &admin,
        &clusterroles,
        role("a-secrets", "y", json!([secrets])),
    )
    .await;
    create(
        &admin,
        &clusterroles,
        role("b-pods", "x", json!([pods, pods_again])),
    )
    .await;
    create(
        &admin,
        &clusterroles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "both"},
               "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "true"}}, {"matchLabels": {"y": "true"}}]}}),
    )
    .await;
    let (c, b) = admin.get(&format!("{clusterroles}/both")).await;
    assert_eq!(c, 200, "{b}");
    assert_eq!(b["rules"], json!([pods, secrets]), "{b}");
}
