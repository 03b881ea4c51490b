//! Server-side Table rendering (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`).

use crate::apiserver_schema_fixtures;

use apiserver_schema_fixtures::{cr, crd};
use chrono::{TimeZone, Utc};
use quartet_sandbox::apiserver::schema::{human_duration, table_at};
use serde_json::{json, Value};

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 10, 12, 0, 0).unwrap()
}

fn ready_cr() -> Value {
    let mut o = cr(json!({"policy": "p", "type": "rgp", "count": 3}));
    o["metadata"]["creationTimestamp"] = json!("2026-01-10T11:54:57Z");
    o["status"] = json!({"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]});
    o
}

#[test]
fn human_duration_matches_apimachinery() {
    assert_eq!(human_duration(5), "5s");
    assert_eq!(human_duration(119), "119s");
    assert_eq!(human_duration(303), "5m3s");
    assert_eq!(human_duration(600), "10m");
    assert_eq!(human_duration(3 * 3600 + 120), "3h2m");
    assert_eq!(human_duration(20 * 3600), "20h");
    assert_eq!(human_duration(2 * 86400 + 3600 * 4), "2d4h");
    assert_eq!(human_duration(30 * 86400), "30d");
    assert_eq!(human_duration(-5), "<invalid>");
}

#[test]
fn custom_resource_table_has_name_then_printer_columns_with_jsonpath_filters() {
    let t = table_at(
        now(),
        Some(&crd()),
        "v1alpha1",
        "secretspolicies",
        &[ready_cr()],
        json!({"resourceVersion": "7"}),
        "Metadata",
    );
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["metadata"], json!({"resourceVersion": "7"}));
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["Name", "Type", "Ready", "Count", "Age"]);
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(t["columnDefinitions"][3]["priority"], 1);
    assert_eq!(t["columnDefinitions"][3]["type"], "integer");
    assert_eq!(
        t["columnDefinitions"][1]["description"],
        "Custom resource definition column (in JSONPath format): .spec.type"
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["p1", "rgp", "True", 3, "5m3s"])
    );
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "p1");
}

#[test]
fn missing_values_are_null_cells() {
    let mut o = ready_cr();
    o["status"] = json!({});
    o["spec"].as_object_mut().unwrap().remove("count");
    let t = table_at(
        now(),
        Some(&crd()),
        "v1alpha1",
        "secretspolicies",
        &[o],
        json!({}),
        "None",
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["p1", "rgp", null, null, "5m3s"])
    );
    assert!(t["rows"][0].get("object").is_none());
}

#[test]
fn include_object_object_embeds_the_full_object() {
    let t = table_at(
        now(),
        Some(&crd()),
        "v1alpha1",
        "secretspolicies",
        &[ready_cr()],
        json!({}),
        "Object",
    );
    assert_eq!(t["rows"][0]["object"]["spec"]["policy"], "p");
}

#[test]
fn crd_without_printer_columns_gets_age() {
    let mut c = crd();
    c["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("additionalPrinterColumns");
    let t = table_at(
        now(),
        Some(&c),
        "v1alpha1",
        "secretspolicies",
        &[ready_cr()],
        json!({}),
        "None",
    );
    assert_eq!(t["rows"][0]["cells"], json!(["p1", "5m3s"]));
}

#[test]
fn builtin_tables_use_kube_printers() {
    let ts = "2026-01-10T10:00:00Z";
    let ns = json!({"metadata": {"name": "default", "creationTimestamp": ts}, "status": {"phase": "Active"}});
    let t = table_at(now(), None, "v1", "namespaces", &[ns], json!({}), "None");
    assert_eq!(t["rows"][0]["cells"], json!(["default", "Active", "120m"]));

    let secret = json!({"metadata": {"name": "s", "creationTimestamp": ts}, "type": "Opaque", "data": {"a": "YQ==", "b": "Yg=="}});
    let t = table_at(now(), None, "v1", "secrets", &[secret], json!({}), "None");
    assert_eq!(t["rows"][0]["cells"], json!(["s", "Opaque", 2, "120m"]));

    let cm = json!({"metadata": {"name": "c", "creationTimestamp": ts}, "data": {"a": "1"}, "binaryData": {"b": "Yg=="}});
    let t = table_at(now(), None, "v1", "configmaps", &[cm], json!({}), "None");
    assert_eq!(t["rows"][0]["cells"], json!(["c", 2, "120m"]));

    let lease = json!({"metadata": {"name": "l", "creationTimestamp": ts}, "spec": {"holderIdentity": "me"}});
    let t = table_at(now(), None, "v1", "leases", &[lease], json!({}), "None");
    assert_eq!(t["rows"][0]["cells"], json!(["l", "me", "120m"]));

    let crd_obj = json!({"metadata": {"name": "x.y.z", "creationTimestamp": ts}});
    let t = table_at(
        now(),
        None,
        "v1",
        "customresourcedefinitions",
        &[crd_obj],
        json!({}),
        "None",
    );
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["Name", "Created At"]);
    assert_eq!(t["rows"][0]["cells"], json!(["x.y.z", ts]));
}

#[test]
fn event_table_shows_object_reason_and_message() {
    let ev = json!({
        "metadata": {"name": "e1", "creationTimestamp": "2026-01-10T11:59:00Z"},
        "involvedObject": {"kind": "SecretsPolicy", "name": "p1"},
        "reason": "Synced", "message": "ok", "type": "Normal",
        "lastTimestamp": "2026-01-10T11:59:30Z", "firstTimestamp": "2026-01-10T11:59:00Z", "count": 2,
        "source": {"component": "quartet"}
    });
    let t = table_at(now(), None, "v1", "events", &[ev], json!({}), "None");
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "30s",
            "Normal",
            "Synced",
            "secretspolicy/p1",
            "",
            "quartet",
            "ok",
            "60s",
            2,
            "e1"
        ])
    );
}
