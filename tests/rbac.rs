//! The Helm chart's RBAC is least privilege: every Kubernetes API call the operator makes in a
//! full lifecycle is allowed by it, and every rule it grants is used (the operator counts its
//! own requests by RBAC verb and resource in `quartet_kube_api_calls_total`).

use crate::support;
use crate::support::helm;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use support::*;

/// (apiGroup, resource, verb) triples the chart grants with `--set` values `set`: the rules of
/// every ClusterRole and Role `helm template` renders.
fn chart_rules(set: &[&str]) -> BTreeSet<(String, String, String)> {
    let helm = helm::Helm::new(std::env::temp_dir().join("no-kubeconfig"));
    let chart = repo_root().join("charts/quartet");
    let mut args = vec![
        "template",
        "quartet",
        chart.to_str().unwrap(),
        "--namespace",
        "quartet-system",
    ];
    for v in set {
        args.extend(["--set", v]);
    }
    let text = helm.ok(&args);
    let mut out = BTreeSet::new();
    for doc in text.split("\n---") {
        let v: Value = match serde_yaml::from_str(doc) {
            Ok(v) => v,
            Err(e) => panic!("helm template rendered YAML that does not parse: {e}\n{doc}"),
        };
        if !matches!(v["kind"].as_str(), Some("ClusterRole" | "Role")) {
            continue;
        }
        // The roles for people (aggregated into view, edit and admin) are not the operator's.
        let labels = v["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if labels
            .keys()
            .any(|k| k.starts_with("rbac.authorization.k8s.io/aggregate-to-"))
        {
            continue;
        }
        for rule in v["rules"].as_array().cloned().unwrap_or_default() {
            for g in rule["apiGroups"].as_array().unwrap() {
                for r in rule["resources"].as_array().unwrap() {
                    for verb in rule["verbs"].as_array().unwrap() {
                        out.insert((
                            g.as_str().unwrap().into(),
                            r.as_str().unwrap().into(),
                            verb.as_str().unwrap().into(),
                        ));
                    }
                }
            }
        }
    }
    out
}

const TRANSFORM_KINDS: [(&str, &str); 5] = [
    ("transformrole", "rbac-role"),
    ("transformation", "rbac-mask"),
    ("transformtemplate", "rbac-tmpl"),
    ("transformalphabet", "rbac-alpha"),
    ("transformstore", "rbac-store"),
];

const TRANSFORM_OBJECTS: &str = "\
apiVersion: secrets.quartet.dev/v1alpha1
kind: TransformRole
metadata: {name: rbac-role, namespace: default}
spec: {transformations: [rbac-mask]}
---
apiVersion: secrets.quartet.dev/v1alpha1
kind: Transformation
metadata: {name: rbac-mask, namespace: default}
spec: {type: masking, template: builtin/creditcardnumber, allowedRoles: [rbac-role]}
---
apiVersion: secrets.quartet.dev/v1alpha1
kind: TransformTemplate
metadata: {name: rbac-tmpl, namespace: default}
spec: {pattern: '(\\d+)', alphabet: builtin/numeric}
---
apiVersion: secrets.quartet.dev/v1alpha1
kind: TransformAlphabet
metadata: {name: rbac-alpha, namespace: default}
spec: {alphabet: ab}
---
apiVersion: v1
kind: Secret
metadata: {name: rbac-db, namespace: default}
stringData: {username: u, password: p}
---
apiVersion: secrets.quartet.dev/v1alpha1
kind: TransformStore
metadata: {name: rbac-store, namespace: default}
spec: {driver: postgres, connectionString: 'postgresql://{{username}}:{{password}}@db/t', credentialsSecretRef: {name: rbac-db}}
";

#[test]
fn the_chart_grants_exactly_what_the_operator_uses() {
    lifecycle_uses_exactly(&[], &[]);
}

#[test]
fn the_chart_watching_one_namespace_grants_exactly_what_the_operator_uses_there() {
    lifecycle_uses_exactly(
        &["watchNamespaces={default}"],
        &["--watch-namespaces=default"],
    );
}

/// A full lifecycle of the operator (run with `args`) counts its Kubernetes calls, which must
/// be exactly what the chart rendered with `set` grants.
fn lifecycle_uses_exactly(set: &[&str], args: &[&str]) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    sb.connect_secrets(&sb.root_token.clone());
    let mut op_args = vec!["--leader-elect"];
    op_args.extend_from_slice(args);
    let op = Operator::start_with(&sb, "2s", &op_args);
    // A ClusterConnection (its token in the operator's namespace): its status is written.
    sb.apply_ok(&format!(
        "apiVersion: quartet.dev/v1alpha1\nkind: ClusterConnection\nmetadata: {{name: rbac-shared}}\n\
         spec: {{service: secrets, address: \"{}\", secretNamespace: default, tokenSecretRef: {{name: secrets-token, key: token}}, namespaces: [default]}}\n",
        sb.url("secrets")
    ));
    wait_for("ClusterConnection Ready", Duration::from_secs(30), || {
        sb.get_json("clusterconnection", "rbac-shared")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    let policy = |name: &str, body: &str| {
        format!("apiVersion: secrets.quartet.dev/v1alpha1\nkind: SecretsPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  type: acl\n  policy: '{body}'\n")
    };
    sb.apply_ok(&policy(
        "rbac-ok",
        r#"path "a/*" { capabilities = ["read"] }"#,
    ));
    sb.apply_ok(&policy("rbac-bad", "path {"));
    sb.connect_workspaces();
    sb.apply_ok("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: Workspace\nmetadata: {name: rbac-ws, namespace: default}\nspec: {description: rbac, deletionMode: Force}\n");
    wait_for("Workspace Ready", Duration::from_secs(30), || {
        sb.get_json("workspace", "rbac-ws")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    sb.apply_ok("apiVersion: workspaces.quartet.dev/v1alpha1\nkind: WorkspaceRun\nmetadata: {name: rbac-run, namespace: default}\nspec: {workspaceRef: {name: rbac-ws}}\n");
    wait_for("WorkspaceRun reconciled", Duration::from_secs(30), || {
        sb.get_json("workspacerun", "rbac-run")
            .filter(|o| condition(o, "Synced").is_some())
    });
    sb.kubectl_ok(&[
        "delete",
        "workspacerun",
        "rbac-run",
        "--wait=true",
        "--timeout=30s",
    ]);
    sb.kubectl_ok(&[
        "delete",
        "workspace",
        "rbac-ws",
        "--wait=true",
        "--timeout=30s",
    ]);
    wait_for("Ready", Duration::from_secs(30), || {
        sb.get_json("secretspolicy", "rbac-ok")
            .filter(|o| condition_is(o, "Ready", "True"))
    });
    // Transform engine kinds: one object of each, so their resource and status patches are used.
    sb.apply_ok(TRANSFORM_OBJECTS);
    for (kind, name) in TRANSFORM_KINDS {
        wait_for(&format!("{kind} Ready"), Duration::from_secs(60), || {
            sb.get_json(kind, name)
                .filter(|o| condition_is(o, "Ready", "True"))
        });
    }
    for (kind, name) in TRANSFORM_KINDS {
        sb.kubectl_ok(&["delete", kind, name, "--wait=true", "--timeout=60s"]);
    }
    wait_for("rejected", Duration::from_secs(30), || {
        sb.get_json("secretspolicy", "rbac-bad")
            .filter(|o| condition_is(o, "Synced", "False"))
    });
    sb.kubectl_ok(&[
        "delete",
        "secretspolicy",
        "rbac-ok",
        "rbac-bad",
        "--wait=true",
        "--timeout=30s",
    ]);
    // A TotpMethod and a TotpEnrollment naming it (methodRef: a get of the method; the result
    // Secret: a patch of secrets).
    let (status, _) = sb.secrets(
        "POST",
        "/v1/identity/entity",
        Some(serde_json::json!({"name": "rbac-user"})),
    );
    assert!(status < 300);
    sb.apply_ok(
        "apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpMethod\nmetadata: {name: rbac-totp, namespace: default}\nspec: {issuer: RBAC}\n---\n\
         apiVersion: secrets.quartet.dev/v1alpha1\nkind: TotpEnrollment\nmetadata: {name: rbac-enroll, namespace: default}\nspec: {methodRef: {name: rbac-totp}, entityName: rbac-user}\n---\n\
         apiVersion: secrets.quartet.dev/v1alpha1\nkind: IdpUser\nmetadata: {name: rbac-idp-user, namespace: default}\nspec: {policies: [a]}\n---\n\
         apiVersion: secrets.quartet.dev/v1alpha1\nkind: IdpGroup\nmetadata: {name: rbac-idp-group, namespace: default}\nspec: {policies: [a]}\n---\n\
         apiVersion: secrets.quartet.dev/v1alpha1\nkind: IdpAuthMethod\nmetadata: {name: rbac-idp-auth, namespace: default}\nspec: {orgName: rbac}\n",
    );
    for (kind, name) in [
        ("totpmethod", "rbac-totp"),
        ("totpenrollment", "rbac-enroll"),
        ("idpuser", "rbac-idp-user"),
        ("idpgroup", "rbac-idp-group"),
        ("idpauthmethod", "rbac-idp-auth"),
    ] {
        wait_for("Ready", Duration::from_secs(60), || {
            sb.get_json(kind, name)
                .filter(|o| condition_is(o, "Ready", "True"))
        });
    }
    sb.kubectl_ok(&[
        "delete",
        "totpenrollment",
        "rbac-enroll",
        "--wait=true",
        "--timeout=30s",
    ]);
    sb.kubectl_ok(&[
        "delete",
        "idpuser/rbac-idp-user",
        "idpgroup/rbac-idp-group",
        "idpauthmethod/rbac-idp-auth",
        "--wait=true",
        "--timeout=30s",
    ]);
    sb.kubectl_ok(&[
        "delete",
        "totpmethod",
        "rbac-totp",
        "--wait=true",
        "--timeout=30s",
    ]);
    std::thread::sleep(Duration::from_secs(3));
    // The leader renews its Lease every few seconds: wait for one renewal to be counted.
    let addr = op.metrics_addr();
    let text = wait_for("a lease renewal", Duration::from_secs(30), || {
        let text = reqwest::blocking::get(format!("http://{addr}/metrics"))
            .ok()?
            .text()
            .ok()?;
        text.contains(r#"verb="update",resource="leases.coordination.k8s.io""#)
            .then_some(text)
    });

    let mut used = BTreeSet::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("quartet_kube_api_calls_total{"))
    {
        let labels: Vec<&str> = line.split('"').collect();
        let (verb, resource) = (labels[1].to_string(), labels[3].to_string());
        let (res, group) = match resource.split_once('/') {
            Some((r, sub)) => {
                let (plural, group) = r.split_once('.').unwrap_or((r, ""));
                (format!("{plural}/{sub}"), group.to_string())
            }
            None => {
                let (plural, group) = resource.split_once('.').unwrap_or((&resource, ""));
                (plural.to_string(), group.to_string())
            }
        };
        used.insert((group, res, verb));
    }
    assert!(!used.is_empty(), "no Kubernetes calls counted:\n{text}");
    // An apply that made a Secret (the enrollment's QR code) is a create as well as a patch: it
    // is counted as both, next to the POST of the hash-key Secret.
    let creates: f64 = text
        .lines()
        .find(|l| {
            l.starts_with(r#"quartet_kube_api_calls_total{verb="create",resource="secrets"}"#)
        })
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0.0);
    assert!(
        creates >= 2.0,
        "applies that created Secrets not counted as create:\n{text}"
    );
    let granted = chart_rules(set);
    let missing: Vec<_> = used.difference(&granted).collect();
    assert!(
        missing.is_empty(),
        "the operator makes calls the chart does not allow: {missing:?}"
    );
    // Rules only some paths need: namespace reads (cleanup when a Connection is gone), event
    // patches (repeated events are aggregated into a series), Secrets written for results
    // owned by a resource, and the finalizer and status patches of the kinds this lifecycle
    // does not create (the driver makes the same calls for every kind).
    let mut rarely: BTreeSet<(String, String, String)> = [
        ("", "namespaces", "get"),
        ("events.k8s.io", "events", "patch"),
        // An AdCheckout reads the AdLibrarySet it names, and a TotpEnrollment its TotpMethod,
        // from a watched cache (src/reconcile/references.rs); the API GET is the fallback while
        // the cache has not seen the object yet (tests/e2e_directory.rs, tests/e2e_totp.rs).
        ("secrets.quartet.dev", "adlibrarysets", "get"),
        ("secrets.quartet.dev", "totpmethods", "get"),
        // A NoCodeWorkspace reads the NoCodeModule it names (tests/e2e_nocode.rs).
        ("workspaces.quartet.dev", "nocodemodules", "get"),
        ("", "secrets", "patch"),
        // TokenRequest (CatalogAclToken serviceAccountName): this lifecycle creates none; exercised
        // by tests/e2e_catalog_scheduler.rs.
        ("", "serviceaccounts/token", "create"),
    ]
    .into_iter()
    .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
    .collect();
    for crd in quartet::runtime::controllers::crds() {
        if crd.spec.group == "quartet.dev" {
            continue;
        }
        for res in [
            crd.spec.names.plural.clone(),
            format!("{}/status", crd.spec.names.plural),
        ] {
            rarely.insert((crd.spec.group.clone(), res, "patch".into()));
        }
    }
    // Every kind's controller lists and watches its resources from the start.
    for crd in quartet::runtime::controllers::crds() {
        for verb in ["list", "watch"] {
            let rule = (
                crd.spec.group.clone(),
                crd.spec.names.plural.clone(),
                verb.to_string(),
            );
            assert!(
                granted.contains(&rule),
                "the chart does not let the operator {verb} {}",
                crd.spec.names.plural
            );
        }
    }
    let unused: Vec<_> = granted
        .difference(&used)
        .filter(|r| !rarely.contains(*r))
        .collect();
    assert!(
        unused.is_empty(),
        "the chart grants what the operator never uses: {unused:?}"
    );
}
