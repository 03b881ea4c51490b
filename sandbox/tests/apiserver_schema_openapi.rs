//! OpenAPI documents as kubectl reads them (`/openapi/v3` index, group-version documents,
//! `/openapi/v2`).

use crate::apiserver_schema_fixtures;

use apiserver_schema_fixtures::crd;
use quartet_sandbox::apiserver::schema::{openapi_v2, openapi_v3_group_version, openapi_v3_index};
use serde_json::{json, Value};

const CR_SCHEMA: &str = "dev.quartet.secrets.v1alpha1.SecretsPolicy";

/// kubectl explain's lookup: the GVK from the resource's paths, then the component schema
/// whose `x-kubernetes-group-version-kind` contains exactly that GVK.
fn explain_schema<'a>(doc: &'a Value, prefix: &str, resource: &str) -> &'a Value {
    let candidates = [
        format!("{prefix}/{resource}"),
        format!("{prefix}/namespaces/{{namespace}}/{resource}"),
    ];
    let gvk = candidates
        .iter()
        .filter_map(|p| doc["paths"].get(p))
        .flat_map(|p| ["get", "post", "put", "patch", "delete"].map(|m| &p[m]))
        .find_map(|op| op.get("x-kubernetes-group-version-kind"))
        .expect("a path with the GVK");
    doc["components"]["schemas"]
        .as_object()
        .unwrap()
        .values()
        .find(|s| {
            s["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|l| l.contains(gvk))
        })
        .expect("a schema with the GVK")
}

#[test]
fn v3_index_lists_builtin_and_crd_group_versions_with_hashes() {
    let idx = openapi_v3_index(&[crd()]);
    for p in [
        "api/v1",
        "apis/events.k8s.io/v1",
        "apis/coordination.k8s.io/v1",
        "apis/apiextensions.k8s.io/v1",
        "apis/secrets.quartet.dev/v1alpha1",
    ] {
        let url = idx["paths"][p]["serverRelativeURL"]
            .as_str()
            .unwrap_or_else(|| panic!("{p} missing"));
        assert!(url.starts_with(&format!("/openapi/v3/{p}?hash=")), "{url}");
    }
    assert!(openapi_v3_index(&[])["paths"]
        .get("apis/secrets.quartet.dev/v1alpha1")
        .is_none());
}

#[test]
fn v3_hash_changes_when_the_crd_schema_changes() {
    let url = |c: &Value| {
        openapi_v3_index(std::slice::from_ref(c))["paths"]["apis/secrets.quartet.dev/v1alpha1"]
            ["serverRelativeURL"]
            .clone()
    };
    let mut changed = crd();
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["policy"]["description"] = json!("new docs");
    assert_ne!(url(&crd()), url(&changed));
    assert_eq!(url(&crd()), url(&crd()));
}

#[test]
fn unserved_group_version_has_no_document() {
    assert!(openapi_v3_group_version(&[crd()], "secrets.quartet.dev/v9").is_none());
    assert!(openapi_v3_group_version(&[], "secrets.quartet.dev/v1alpha1").is_none());
}

#[test]
fn crd_document_resolves_the_kind_for_explain_with_field_docs() {
    let doc = openapi_v3_group_version(&[crd()], "secrets.quartet.dev/v1alpha1").unwrap();
    assert_eq!(doc["openapi"], "3.0.0");
    let schema = explain_schema(
        &doc,
        "/apis/secrets.quartet.dev/v1alpha1",
        "secretspolicies",
    );
    assert_eq!(schema, &doc["components"]["schemas"][CR_SCHEMA]);
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "secrets.quartet.dev", "kind": "SecretsPolicy", "version": "v1alpha1"}])
    );
    assert_eq!(
        schema["properties"]["spec"]["description"],
        "SecretsPolicySpec defines a policy in the secrets service."
    );
    assert_eq!(
        schema["properties"]["spec"]["properties"]["policy"]["description"],
        "The policy document (HCL)."
    );
    assert_eq!(
        schema["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert!(
        doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
            ["properties"]["name"]
            .is_object()
    );
    assert!(doc["components"]["schemas"][format!("{CR_SCHEMA}List")].is_object());
}

#[test]
fn every_patch_post_and_put_operation_offers_field_validation() {
    for (crds, gv) in [
        (vec![crd()], "secrets.quartet.dev/v1alpha1"),
        (vec![], "v1"),
        (vec![], "coordination.k8s.io/v1"),
    ] {
        let doc = openapi_v3_group_version(&crds, gv).unwrap();
        let mut seen = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for m in ["patch", "post", "put"] {
                if let Some(op) = item.get(m) {
                    seen += 1;
                    assert!(
                        op["x-kubernetes-group-version-kind"]["kind"].is_string(),
                        "{path} {m}"
                    );
                    let has = op["parameters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|p| p["name"] == "fieldValidation" && p["in"] == "query");
                    assert!(has, "{gv} {path} {m} lacks fieldValidation");
                }
            }
        }
        assert!(seen > 0);
    }
}

#[test]
fn crd_paths_cover_namespaced_crud_status_and_watch() {
    let doc = openapi_v3_group_version(&[crd()], "secrets.quartet.dev/v1alpha1").unwrap();
    let p = &doc["paths"];
    let base = "/apis/secrets.quartet.dev/v1alpha1";
    assert_eq!(
        p[format!("{base}/namespaces/{{namespace}}/secretspolicies")]["get"]["x-kubernetes-action"],
        "list"
    );
    assert_eq!(
        p[format!("{base}/namespaces/{{namespace}}/secretspolicies")]["post"]
            ["x-kubernetes-action"],
        "post"
    );
    let item = &p[format!("{base}/namespaces/{{namespace}}/secretspolicies/{{name}}")];
    for m in ["get", "put", "patch", "delete"] {
        assert!(item[m].is_object(), "{m}");
    }
    let patch_types: Vec<&String> = item["patch"]["requestBody"]["content"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        patch_types,
        vec![
            "application/apply-patch+yaml",
            "application/json-patch+json",
            "application/merge-patch+json"
        ]
    );
    assert!(
        p[format!("{base}/namespaces/{{namespace}}/secretspolicies/{{name}}/status")]["patch"]
            .is_object()
    );
    assert!(p[format!("{base}/secretspolicies")]["get"].is_object());
    assert!(p[format!("{base}/watch/namespaces/{{namespace}}/secretspolicies")]["get"].is_object());
    assert_eq!(
        item["get"]["operationId"],
        "readSecretsQuartetDevV1alpha1NamespacedSecretsPolicy"
    );
}

#[test]
fn core_document_explains_secrets_with_kubernetes_field_docs() {
    let doc = openapi_v3_group_version(&[], "v1").unwrap();
    let secret = explain_schema(&doc, "/api/v1", "secrets");
    assert_eq!(
        secret["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "Secret", "version": "v1"}])
    );
    assert!(secret["properties"]["data"]["description"]
        .as_str()
        .unwrap()
        .starts_with("Data contains the secret data."));
    let ns = explain_schema(&doc, "/api/v1", "namespaces");
    assert_eq!(
        ns["x-kubernetes-group-version-kind"][0]["kind"],
        "Namespace"
    );
    for kind in ["ConfigMap", "Event", "ServiceAccount"] {
        assert!(
            doc["components"]["schemas"][format!("io.k8s.api.core.v1.{kind}")].is_object(),
            "{kind}"
        );
    }
}

#[test]
fn every_v3_reference_resolves() {
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                    out.push(r);
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    for gv in [
        "v1",
        "events.k8s.io/v1",
        "coordination.k8s.io/v1",
        "apiextensions.k8s.io/v1",
        "secrets.quartet.dev/v1alpha1",
    ] {
        let doc = openapi_v3_group_version(&[crd()], gv).unwrap();
        let mut all = Vec::new();
        refs(&doc, &mut all);
        for r in all {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{gv}: bad ref {r}"));
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "{gv}: dangling {r}"
            );
        }
    }
}

#[test]
fn v2_is_swagger_with_definitions_keyed_by_reversed_group_and_no_v3_only_keywords() {
    let mut c = crd();
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["alt"] = json!({"type": "string", "nullable": true, "anyOf": [{"type": "string"}]});
    let doc = openapi_v2(&[c]);
    assert_eq!(doc["swagger"], "2.0");
    let def = &doc["definitions"][CR_SCHEMA];
    assert_eq!(
        def["x-kubernetes-group-version-kind"][0]["kind"],
        "SecretsPolicy"
    );
    assert_eq!(
        def["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(def["properties"]["spec"]["properties"]["alt"], json!({}));
    assert!(doc["definitions"]["io.k8s.api.core.v1.Secret"].is_object());
    let text = doc.to_string();
    assert!(!text.contains("#/components/schemas"));
    let patch = &doc["paths"]
        ["/apis/secrets.quartet.dev/v1alpha1/namespaces/{namespace}/secretspolicies/{name}"]
        ["patch"];
    assert!(!patch["consumes"]
        .as_array()
        .unwrap()
        .contains(&json!("application/strategic-merge-patch+json")));
    let secret_patch = &doc["paths"]["/api/v1/namespaces/{namespace}/secrets/{name}"]["patch"];
    assert!(secret_patch["consumes"]
        .as_array()
        .unwrap()
        .contains(&json!("application/strategic-merge-patch+json")));
}
