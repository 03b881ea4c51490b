//! CEL rule cost budgets at CRD create and update, against what a real kube-apiserver 1.36
//! answered for the same CRD: the workspaces CRD as committed before its fields were bounded
//! (`fixtures/workspaces-crd-unbounded.yaml`, from git history) was refused by a real server
//! for four causes, and the dev API server must refuse it for the same ones.

use crate::common;

use common::{server, Http, Kubectl};
use quartet_sandbox::apiserver::schema::{validate_crd, validate_crd_update};
use serde_json::{json, Value};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const NAME: &str = "workspaces.workspaces.quartet.dev";
const HINT: &str = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
const ROOT: &str = "spec.validation.openAPIV3Schema";
const TAGS_RULE: &str =
    "spec.validation.openAPIV3Schema.properties[spec].properties[tags].x-kubernetes-validations[0].rule";
const CONSUMERS_ITEM_RULE: &str = "spec.validation.openAPIV3Schema.properties[spec].properties[remoteStateConsumers].items.x-kubernetes-validations[0].rule";
const CONTRIBUTED: &str =
    "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema";

fn unbounded() -> Value {
    let yaml = include_str!("fixtures/workspaces-crd-unbounded.yaml");
    serde_yaml::from_str(yaml).expect("fixture parses")
}

fn spec_schema(crd: &mut Value) -> &mut Value {
    &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
}

/// The fixture with its lists and strings bounded and the tags rule checking each tag
/// instead of joining the list.
fn bounded() -> Value {
    let mut crd = unbounded();
    let spec = spec_schema(&mut crd);
    let tags = &mut spec["properties"]["tags"];
    tags["maxItems"] = json!(50);
    tags.as_object_mut()
        .unwrap()
        .remove("x-kubernetes-validations");
    tags["items"]["x-kubernetes-validations"] = json!([
        {"rule": "self == self.lowerAscii()", "message": "tags must be lower case"}
    ]);
    let consumers = &mut spec["properties"]["remoteStateConsumers"];
    consumers["maxItems"] = json!(100);
    consumers["items"]["properties"]["name"]["maxLength"] = json!(90);
    consumers["items"]["properties"]["id"]["maxLength"] = json!(64);
    crd
}

fn causes(status: &Value) -> Vec<(String, String, String)> {
    status["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The refusal of the unbounded fixture, cause by cause, as a real 1.36 server words it.
fn assert_refused_like_kubernetes(code: u16, status: &Value) {
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid", "{status}");
    assert_eq!(status["details"]["kind"], "CustomResourceDefinition");
    assert_eq!(status["details"]["group"], "apiextensions.k8s.io");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"{NAME}\" is invalid: ["
        )),
        "{message}"
    );
    let got = causes(status);
    let forbidden = |field: &str, msg: &str| {
        (
            field.to_string(),
            "FieldValueForbidden".to_string(),
            format!("Forbidden: {msg}"),
        )
    };
    let root_rule = |i: usize| format!("{ROOT}.x-kubernetes-validations[{i}].rule");
    let want = vec![
        forbidden(
            TAGS_RULE,
            &format!("estimated rule cost exceeds budget by factor of 42.8x {HINT}"),
        ),
        forbidden(
            &root_rule(1),
            &format!("estimated rule cost exceeds budget by factor of more than 100x {HINT}"),
        ),
        forbidden(&root_rule(1), CONTRIBUTED),
        forbidden(TAGS_RULE, CONTRIBUTED),
        forbidden(CONSUMERS_ITEM_RULE, CONTRIBUTED),
        forbidden(&root_rule(0), CONTRIBUTED),
        forbidden(
            ROOT,
            &format!("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {HINT}"),
        ),
    ];
    assert_eq!(got, want);
    // The real server said 42.8x for the tags rule; ours must be within 10% of it.
    let tags = &got[0].2;
    let factor: f64 = tags
        .split("factor of ")
        .nth(1)
        .and_then(|s| s.split('x').next())
        .and_then(|s| s.parse().ok())
        .expect("a factor");
    assert!((factor - 42.8).abs() <= 4.28, "{factor}");
}

#[tokio::test]
async fn todays_workspaces_crd_is_refused_for_the_four_causes_a_real_1_36_server_gave() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, status) = h.post(CRDS, unbounded()).await;
    assert_refused_like_kubernetes(code, &status);
    let (code, _) = h.get(&format!("{CRDS}/{NAME}")).await;
    assert_eq!(code, 404, "nothing is stored");
}

#[tokio::test]
async fn an_update_to_the_unbounded_schema_is_refused_the_same_way() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, body) = h.post(CRDS, bounded()).await;
    assert_eq!(code, 201, "{body}");
    let mut update = unbounded();
    update["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"].clone();
    let (code, status) = h.put(&format!("{CRDS}/{NAME}"), update).await;
    assert_refused_like_kubernetes(code, &status);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bounded_schema_with_a_per_tag_rule_is_accepted_with_kubectl_and_warns_about_uint64() {
    let s = server().await;
    let k = Kubectl::new(&s);
    let file = k.write(
        "crd.yaml",
        &serde_yaml::to_string(&bounded()).expect("yaml"),
    );
    let out = k.run(&["create", "-f", &file]);
    assert!(out.ok, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("Warning: unrecognized format \"uint64\""),
        "{}",
        out.stderr
    );
    // Applying it again changes nothing: no new unrecognized format, no warning.
    let out = k.run(&["apply", "-f", &file]);
    assert!(out.ok, "{}", out.stderr);
    assert!(
        !out.stderr.contains("unrecognized format"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn the_warning_header_is_the_one_kube_apiserver_sends() {
    let s = server().await;
    let h = Http::new(&s);
    let r = h
        .req(reqwest::Method::POST, CRDS)
        .json(&bounded())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let warnings: Vec<&str> = r
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(warnings, vec![r#"299 - "unrecognized format \"uint64\"""#]);
}

/// A list of at most 100 unbounded strings checked item by item with `lowerAscii`: about
/// 629,000 per item (two traversals of 3 MiB / 10), 63 million in all, over the per-rule
/// limit and under the whole-schema one.
fn crd_with_one_rule_over_the_per_rule_limit() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.test.quartet.dev"},
        "spec": {
            "group": "test.quartet.dev",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {"names": {
                        "type": "array",
                        "maxItems": 100,
                        "items": {"type": "string"},
                        "x-kubernetes-validations": [{"rule": "self.all(n, n.lowerAscii() == n)"}]
                    }}}}
                }}
            }]
        }
    })
}

#[test]
fn an_update_that_keeps_a_schema_unchanged_is_not_refused_for_the_per_rule_limit() {
    let crd = crd_with_one_rule_over_the_per_rule_limit();
    let errs = validate_crd(&crd).unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        errs[0].field,
        "spec.validation.openAPIV3Schema.properties[spec].properties[names].x-kubernetes-validations[0].rule"
    );
    assert!(
        errs[0].message.contains("exceeds budget by factor of 6.3x"),
        "{errs:?}"
    );
    // Kubernetes ratchets: a CRD stored before (e.g. by an older control plane) may be
    // updated as long as that version's schema stays as it is.
    let mut relabelled = crd.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    validate_crd_update(&relabelled, Some(&crd)).unwrap();
    let mut changed = crd.clone();
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = json!("new");
    assert!(validate_crd_update(&changed, Some(&crd)).is_err());
}
