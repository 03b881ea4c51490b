//! NoCodeModule and NoCodeWorkspace end to end: the built `quartet` binary against the dev API
//! server and the sandbox's workspace service, driven with the real `kubectl`; the service is
//! read over HTTP here, registry modules and versions set up through the sandbox admin API.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const WAIT: Duration = Duration::from_secs(60);

/// A call to the workspace service with the sandbox's owners-team user token.
fn api(sb: &Sandbox, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let auth = format!("Bearer {}", sb.root_token);
    http(
        method,
        &format!("{}/api/v2{path}", sb.url("workspaces")),
        Some(("Authorization", &auth)),
        body,
    )
}

fn admin(sb: &Sandbox, method: &str, path: &str, body: Value) -> Value {
    let (status, body) = http(
        method,
        &format!("{}/_sandbox/workspaces{path}", sb.url("workspaces")),
        None,
        Some(body),
    );
    assert!(status < 300, "admin {path}: {status} {body}");
    body
}

/// A registry module `name`/aws with the given versions (each with a required `region`).
fn registry_module(sb: &Sandbox, name: &str, versions: &[&str]) -> String {
    let versions: Vec<Value> = versions.iter().map(|v| version(v)).collect();
    admin(
        sb,
        "POST",
        "/registry-modules",
        json!({"organization": "quartet", "name": name, "provider": "aws", "versions": versions}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn version(v: &str) -> Value {
    json!({"version": v, "variables": [{"name": "region", "type": "string", "required": true}]})
}

fn publish(sb: &Sandbox, module: &str, v: &str) {
    admin(
        sb,
        "POST",
        &format!("/registry-modules/{module}/versions"),
        version(v),
    );
}

/// The token Secret and a `workspaces` Connection (organization `quartet`).
fn connect(sb: &Sandbox, name: &str, token: &str) {
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-token, namespace: default}}\nstringData: {{token: {token}}}\n---\n\
         apiVersion: quartet.dev/v1alpha1\nkind: Connection\nmetadata: {{name: {name}, namespace: default}}\n\
         spec: {{service: workspaces, address: \"{}\", organization: quartet, tokenSecretRef: {{name: {name}-token, key: token}}, timeoutSeconds: 5}}\n",
        sb.url("workspaces")
    ));
}

fn env(resync: &str) -> (Sandbox, Operator) {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    connect(&sb, "workspaces", &sb.root_token.clone());
    admin(&sb, "PUT", "/settings", json!({"step_ms": 100}));
    let op = Operator::start(&sb, resync);
    (sb, op)
}

fn ncmod(name: &str, module: &str, extra: &str) -> String {
    format!(
        "apiVersion: workspaces.quartet.dev/v1alpha1\nkind: NoCodeModule\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  registryModuleId: {module}\n{extra}"
    )
}

fn ncws(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: workspaces.quartet.dev/v1alpha1\nkind: NoCodeWorkspace\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{extra}"
    )
}

const REGION_OPTIONS: &str =
    "  variableOptions:\n  - {name: region, type: string, options: [eu-west-1, us-east-1]}\n";
const REGION_VAR: &str = "  vars:\n  - {key: region, value: eu-west-1}\n";

fn wait_ready(sb: &Sandbox, kind: &str, name: &str) -> Value {
    wait_for(&format!("{kind} {name} Ready"), WAIT, || {
        sb.get_json(kind, name).filter(|o| {
            condition_is(o, "Ready", "True")
                && o["status"]["observedGeneration"] == o["metadata"]["generation"]
        })
    })
}

fn nocode_module(sb: &Sandbox, id: &str) -> Value {
    let (status, body) = api(
        sb,
        "GET",
        &format!("/no-code-modules/{id}?include=variable_options"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    body
}

fn workspace(sb: &Sandbox, id: &str) -> Option<Value> {
    let (status, body) = api(sb, "GET", &format!("/workspaces/{id}"), None);
    (status == 200).then(|| body["data"].clone())
}

fn workspace_by_name(sb: &Sandbox, name: &str) -> Option<Value> {
    let (status, body) = api(
        sb,
        "GET",
        &format!("/organizations/quartet/workspaces/{name}"),
        None,
    );
    (status == 200).then(|| body["data"].clone())
}

/// Requests logged for the workspace service with this method whose path matches.
fn count(sb: &Sandbox, method: &str, path: impl Fn(&str) -> bool) -> usize {
    let (items, _) = sb.requests("workspaces", 0);
    items
        .iter()
        .filter(|(m, p, _)| m == method && path(p))
        .count()
}

/// Reasons and notes of the Events about the object `name`.
fn events(sb: &Sandbox, name: &str) -> String {
    let out = sb.kubectl_ok(&["get", "events", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).expect("events json");
    v["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name || e["regarding"]["name"] == name)
        .map(|e| {
            format!(
                "{} {}\n",
                e["reason"],
                e["message"].as_str().or(e["note"].as_str()).unwrap_or("")
            )
        })
        .collect()
}

fn module_ready(sb: &Sandbox, name: &str, module: &str, extra: &str) -> String {
    sb.apply_ok(&ncmod(name, module, extra));
    let obj = wait_ready(sb, "nocodemodule", name);
    obj["status"]["noCodeModuleId"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn no_code_module_is_enabled_kept_equal_to_spec_and_disabled_on_delete() {
    let (sb, _op) = env("2s");
    let m = registry_module(&sb, "net", &["1.0.0"]);
    sb.apply_ok(&ncmod("net", &m, REGION_OPTIONS));
    let obj = wait_ready(&sb, "nocodemodule", "net");
    let id = obj["status"]["noCodeModuleId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(id.starts_with("nocode-"), "{obj}");
    assert_eq!(obj["status"]["remoteId"], json!(id));
    assert_eq!(obj["status"]["versionPin"], "1.0.0", "floating: the latest");
    let opt_id = obj["status"]["variableOptionIds"]["region"]
        .as_str()
        .unwrap()
        .to_string();
    let remote = nocode_module(&sb, &id);
    assert_eq!(remote["data"]["attributes"]["enabled"], true);
    assert_eq!(remote["data"]["attributes"]["version-pin"], "");
    assert_eq!(
        remote["included"][0]["attributes"]["options"],
        json!(["eu-west-1", "us-east-1"])
    );

    // Edit: new options and a pin; the set is replaced by its id, never duplicated.
    sb.apply_ok(&ncmod(
        "net",
        &m,
        "  versionPin: \"1.0.0\"\n  variableOptions:\n  - {name: region, type: string, options: [eu-west-1, us-east-1, ap-south-1]}\n",
    ));
    wait_for("options and pin updated", WAIT, || {
        let r = nocode_module(&sb, &id);
        (r["data"]["attributes"]["version-pin"] == "1.0.0"
            && r["included"][0]["attributes"]["options"]
                .as_array()
                .is_some_and(|o| o.len() == 3))
        .then_some(r)
    });
    let r = nocode_module(&sb, &id);
    assert_eq!(
        r["data"]["relationships"]["variable-options"]["data"],
        json!([{"id": opt_id, "type": "variable-options"}])
    );
    wait_ready(&sb, "nocodemodule", "net");

    // Changed in the service: restored at the next resync, with the drifted field named.
    let (status, _) = api(
        &sb,
        "PATCH",
        &format!("/no-code-modules/{id}"),
        Some(json!({"data": {"type": "no-code-modules", "attributes": {"enabled": false}}})),
    );
    assert_eq!(status, 200);
    wait_for("enabled restored", WAIT, || {
        (nocode_module(&sb, &id)["data"]["attributes"]["enabled"] == true).then_some(())
    });
    let obj = wait_for("driftedFields", WAIT, || {
        sb.get_json("nocodemodule", "net")
            .filter(|o| o["status"]["driftedFields"] == json!(["enabled"]))
    });
    assert!(condition_is(&obj, "Ready", "True"));
    sb.wait_events(&["DriftCorrected"]);

    // Delete: provisioning is disabled (no delete endpoint is documented).
    sb.kubectl_ok(&[
        "delete",
        "nocodemodule",
        "net",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert_eq!(
        nocode_module(&sb, &id)["data"]["attributes"]["enabled"],
        false
    );

    // Retain leaves it enabled.
    let m2 = registry_module(&sb, "kept", &["1.0.0"]);
    let kept = module_ready(&sb, "kept", &m2, "  deletionPolicy: Retain\n");
    sb.kubectl_ok(&[
        "delete",
        "nocodemodule",
        "kept",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert_eq!(
        nocode_module(&sb, &kept)["data"]["attributes"]["enabled"],
        true
    );

    // An existing no-code module of the registry module is adopted, not enabled twice.
    let m3 = registry_module(&sb, "byhand", &["1.0.0"]);
    let (status, body) = api(
        &sb,
        "POST",
        "/organizations/quartet/no-code-modules",
        Some(
            json!({"data": {"type": "no-code-modules", "attributes": {"enabled": true},
            "relationships": {"registry-module": {"data": {"id": m3, "type": "registry-modules"}}}}}),
        ),
    );
    assert_eq!(status, 200, "{body}");
    let hand = body["data"]["id"].as_str().unwrap().to_string();
    let enables_before = count(&sb, "POST", |p| p.ends_with("/no-code-modules"));
    let adopted = module_ready(&sb, "byhand", &m3, "");
    assert_eq!(adopted, hand);
    assert_eq!(
        count(&sb, "POST", |p| p.ends_with("/no-code-modules")),
        enables_before,
        "no second enable"
    );
    sb.wait_events(&["Adopted"]);
}

#[test]
fn invalid_manifests_are_refused_with_the_rules_message() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let refused = |yaml: &str, msg: &str| {
        let out = sb.apply_yaml(yaml);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "accepted: {yaml}");
        assert!(err.contains(msg), "{msg:?} not in {err}");
    };
    refused(&ncmod("bad", "not-a-module", ""), "spec.registryModuleId");
    refused(
        &ncws(
            "bad",
            "  moduleRef: {name: m}\n  noCodeModuleId: nocode-abc\n",
        ),
        "exactly one of moduleRef and noCodeModuleId is required",
    );
    refused(
        &ncws(
            "bad",
            "  noCodeModuleId: nocode-abc\n  executionMode: agent\n",
        ),
        "agentPoolId is required when executionMode is agent",
    );
    refused(
        &ncws(
            "bad",
            "  noCodeModuleId: nocode-abc\n  executionMode: remote\n  agentPoolId: apool-x\n",
        ),
        "agentPoolId is only allowed when executionMode is agent",
    );
    refused(
        &ncws("bad", "  noCodeModuleId: nocode-abc\n  vars:\n  - {key: a, value: x, valueFrom: {secretKeyRef: {name: s, key: k}}}\n"),
        "exactly one of value and valueFrom is required",
    );
    refused(
        &ncws(
            "bad",
            "  noCodeModuleId: nocode-abc\n  upgrade: {policy: Sometimes}\n",
        ),
        "spec.upgrade.policy",
    );
    // Immutable fields.
    sb.apply_ok(&ncmod("fixed", "mod-abc", ""));
    refused(
        &ncmod("fixed", "mod-other", ""),
        "registryModuleId is immutable",
    );
    sb.apply_ok(&ncws(
        "named",
        "  noCodeModuleId: nocode-abc\n  name: first\n",
    ));
    refused(
        &ncws("named", "  noCodeModuleId: nocode-abc\n  name: second\n"),
        "name is immutable",
    );
}

#[test]
fn an_organization_token_is_forbidden_with_the_token_kind_needed() {
    let (sb, _op) = env("5m");
    let org_token = admin(
        &sb,
        "POST",
        "/tokens",
        json!({"kind": "organization", "organization": "quartet"}),
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    connect(&sb, "orgtoken", &org_token);
    let m = registry_module(&sb, "orgtok", &["1.0.0"]);
    sb.apply_ok(&ncmod("orgtok", &m, "  connectionRef: {name: orgtoken}\n"));
    let obj = wait_for("Forbidden", WAIT, || {
        sb.get_json("nocodemodule", "orgtok")
            .filter(|o| condition(o, "Ready").is_some_and(|c| c["reason"] == "Forbidden"))
    });
    let msg = condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("organization token") && msg.contains("user or team token"),
        "{msg}"
    );
    assert!(!msg.contains(&org_token));
}

#[test]
fn no_code_workspace_is_provisioned_kept_in_sync_recreated_and_deleted() {
    let (sb, _op) = env("2s");
    let m = registry_module(&sb, "app", &["1.0.0"]);
    let nc = module_ready(&sb, "app", &m, REGION_OPTIONS);
    sb.apply_ok(&ncws(
        "app-ws",
        &format!("  moduleRef: {{name: app}}\n  description: first\n  autoApply: false\n  sourceName: quartet\n  deletionMode: Force\n{REGION_VAR}"),
    ));
    let obj = wait_ready(&sb, "nocodeworkspace", "app-ws");
    let id = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    assert_eq!(obj["status"]["remoteId"], json!(id));
    assert_eq!(obj["status"]["noCodeModuleId"], json!(nc));
    assert_eq!(obj["status"]["moduleVersion"], "1.0.0");
    let w = workspace(&sb, &id).expect("workspace exists");
    let a = &w["attributes"];
    assert_eq!(a["name"], "app-ws");
    assert_eq!(a["description"], "first");
    assert_eq!(a["auto-apply"], false);
    assert_eq!(a["source-name"], "quartet");
    assert_eq!(a["source-module-id"], "private/quartet/app/aws/1.0.0");
    let (_, vars) = api(&sb, "GET", &format!("/workspaces/{id}/vars"), None);
    assert_eq!(vars["data"][0]["attributes"]["key"], "region");
    assert_eq!(vars["data"][0]["attributes"]["value"], "eu-west-1");
    sb.wait_events(&["Created"]);

    // Edit.
    sb.kubectl_ok(&[
        "patch",
        "nocodeworkspace",
        "app-ws",
        "--type=merge",
        "-p",
        r#"{"spec":{"description":"second"}}"#,
    ]);
    wait_for("description updated", WAIT, || {
        workspace(&sb, &id).filter(|w| w["attributes"]["description"] == "second")
    });
    wait_ready(&sb, "nocodeworkspace", "app-ws");

    // Changed in the service: restored.
    api(
        &sb,
        "PATCH",
        &format!("/workspaces/{id}"),
        Some(json!({"data": {"type": "workspaces", "attributes": {"description": "hacked"}}})),
    );
    wait_for("description restored", WAIT, || {
        workspace(&sb, &id).filter(|w| w["attributes"]["description"] == "second")
    });
    wait_for("driftedFields", WAIT, || {
        sb.get_json("nocodeworkspace", "app-ws")
            .filter(|o| o["status"]["driftedFields"] == json!(["description"]))
    });

    // Deleted in the service: provisioned again.
    let (status, _) = api(&sb, "DELETE", &format!("/workspaces/{id}"), None);
    assert!(status < 300, "{status}");
    let again = wait_for("provisioned again", WAIT, || {
        sb.get_json("nocodeworkspace", "app-ws").and_then(|o| {
            o["status"]["workspaceId"]
                .as_str()
                .filter(|w| *w != id)
                .map(str::to_string)
        })
    });
    assert!(workspace(&sb, &again).is_some());

    // Delete (Force): gone.
    sb.kubectl_ok(&[
        "delete",
        "nocodeworkspace",
        "app-ws",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(workspace_by_name(&sb, "app-ws").is_none());

    // Retain keeps it.
    sb.apply_ok(&ncws(
        "app-kept",
        &format!("  noCodeModuleId: {nc}\n  deletionPolicy: Retain\n{REGION_VAR}"),
    ));
    wait_ready(&sb, "nocodeworkspace", "app-kept");
    sb.kubectl_ok(&[
        "delete",
        "nocodeworkspace",
        "app-kept",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(workspace_by_name(&sb, "app-kept").is_some());

    // Safe-delete (the default) is refused while the workspace manages resources.
    sb.apply_ok(&ncws(
        "app-safe",
        &format!("  noCodeModuleId: {nc}\n{REGION_VAR}"),
    ));
    let obj = wait_ready(&sb, "nocodeworkspace", "app-safe");
    let safe = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    wait_for("provisioning applied", WAIT, || {
        workspace(&sb, &safe).filter(|w| w["attributes"]["resource-count"].as_u64() > Some(0))
    });
    sb.kubectl_ok(&["delete", "nocodeworkspace", "app-safe", "--wait=false"]);
    let obj = wait_for("DeletionBlocked", WAIT, || {
        sb.get_json("nocodeworkspace", "app-safe")
            .filter(|o| condition_is(o, "DeletionBlocked", "True"))
    });
    assert!(workspace(&sb, &safe).is_some(), "{obj}");
}

#[test]
fn a_value_outside_the_options_is_refused_with_the_service_message_and_no_hot_loop() {
    let (sb, _op) = env("5m");
    let m = registry_module(&sb, "strict", &["1.0.0"]);
    let nc = module_ready(&sb, "strict", &m, REGION_OPTIONS);
    // The value comes from a Secret: the service's message quotes it, the condition must not.
    sb.apply_ok(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: region, namespace: default}\nstringData: {value: mars-1}\n",
    );
    sb.apply_ok(&ncws(
        "mars",
        &format!("  noCodeModuleId: {nc}\n  vars:\n  - {{key: region, valueFrom: {{secretKeyRef: {{name: region, key: value}}}}}}\n"),
    ));
    let obj = wait_for("Rejected", WAIT, || {
        sb.get_json("nocodeworkspace", "mars")
            .filter(|o| condition(o, "Ready").is_some_and(|c| c["reason"] == "Rejected"))
    });
    let msg = condition(&obj, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("not one of the allowed options"), "{msg}");
    assert!(
        !msg.contains("mars-1"),
        "secret value in the condition: {msg}"
    );
    assert!(!events(&sb, "mars").contains("mars-1"));
    let creates = |sb: &Sandbox| {
        count(sb, "POST", |p| {
            p == format!("/api/v2/no-code-modules/{nc}/workspaces")
        })
    };
    let first = creates(&sb);
    std::thread::sleep(Duration::from_secs(10));
    let later = creates(&sb);
    assert!(
        later - first <= 1,
        "{first} then {later} creates: a hot loop"
    );
    assert!(workspace_by_name(&sb, "mars").is_none());
}

/// The service enables the module and the answer (with its server-assigned id) is lost: the
/// next pass finds the registry module's no-code module instead of enabling a second one.
#[test]
fn a_lost_enable_response_makes_no_second_no_code_module() {
    let (sb, _op) = env("5m");
    let m = registry_module(&sb, "lostmod", &["1.0.0"]);
    sb.fault("workspaces", json!({"method": "POST", "path": "/api/v2/organizations/quartet/no-code-modules", "after": true, "count": 1}));
    let id = module_ready(&sb, "lostmod", &m, REGION_OPTIONS);
    assert!(
        sb.faults_left("workspaces").is_empty(),
        "the enable's answer was lost"
    );
    let reg = sb
        .ws_list("/organizations/quartet/registry-modules")
        .into_iter()
        .find(|r| r["id"] == json!(m))
        .expect("registry module");
    let ncs = reg["relationships"]["no-code-modules"]["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(ncs.len(), 1, "one no-code module: {reg}");
    assert_eq!(ncs[0]["id"], json!(id));
    let remote = nocode_module(&sb, &id);
    assert_eq!(remote["data"]["attributes"]["enabled"], true);
    assert_eq!(
        remote["included"][0]["attributes"]["options"],
        json!(["eu-west-1", "us-east-1"])
    );
}

#[test]
fn an_existing_workspace_is_adopted_and_a_lost_create_response_makes_no_duplicate() {
    let (sb, _op) = env("5m");
    let m = registry_module(&sb, "adopt", &["1.0.0"]);
    let nc = module_ready(&sb, "adopt", &m, "");
    let create_path = format!("/api/v2/no-code-modules/{nc}/workspaces");
    let (status, body) = api(
        &sb,
        "POST",
        &format!("/no-code-modules/{nc}/workspaces"),
        Some(
            json!({"data": {"type": "workspaces", "attributes": {"name": "handmade"},
            "relationships": {"vars": {"data": [{"type": "vars", "attributes": {"key": "region", "value": "eu-west-1", "category": "terraform"}}]}}}}),
        ),
    );
    assert_eq!(status, 200, "{body}");
    let hand = body["data"]["id"].as_str().unwrap().to_string();
    sb.apply_ok(&ncws(
        "handmade",
        &format!("  noCodeModuleId: {nc}\n{REGION_VAR}"),
    ));
    let obj = wait_ready(&sb, "nocodeworkspace", "handmade");
    assert_eq!(obj["status"]["workspaceId"], json!(hand));
    sb.wait_events(&["Adopted"]);
    assert_eq!(
        count(&sb, "POST", |p| p == create_path),
        1,
        "only the hand-made create"
    );

    // The service creates the workspace and the response is lost.
    sb.fault(
        "workspaces",
        json!({"method": "POST", "path": create_path, "after": true, "count": 1}),
    );
    sb.apply_ok(&ncws(
        "lost",
        &format!("  noCodeModuleId: {nc}\n{REGION_VAR}"),
    ));
    let obj = wait_ready(&sb, "nocodeworkspace", "lost");
    let (_, list) = api(
        &sb,
        "GET",
        "/organizations/quartet/workspaces?search%5Bname%5D=lost",
        None,
    );
    let named: Vec<&Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["attributes"]["name"] == "lost")
        .collect();
    assert_eq!(named.len(), 1, "{list}");
    assert_eq!(obj["status"]["workspaceId"], named[0]["id"]);
    assert_eq!(
        count(&sb, "POST", |p| p == create_path),
        2,
        "one create each"
    );
}

/// Starts of the upgrade and confirmations of `run` (from the request log).
fn upgrade_calls(sb: &Sandbox, nc: &str, ws: &str, run: &str) -> (usize, usize) {
    let base = format!("/api/v2/no-code-modules/{nc}/workspaces/{ws}/upgrade");
    (
        count(sb, "POST", |p| p == base),
        count(sb, "POST", |p| p == format!("{base}/{run}")),
    )
}

#[test]
fn a_manual_upgrade_waits_with_the_plan_url_and_confirms_once_approved() {
    // A long resync: the workspace is woken by its NoCodeModule's change, not by polling.
    let (sb, _op) = env("5m");
    let m = registry_module(&sb, "man", &["1.0.0"]);
    let nc = module_ready(&sb, "man", &m, "  versionPin: \"1.0.0\"\n");
    sb.apply_ok(&ncws(
        "man-ws",
        &format!("  moduleRef: {{name: man}}\n  deletionMode: Force\n{REGION_VAR}"),
    ));
    let obj = wait_ready(&sb, "nocodeworkspace", "man-ws");
    let ws = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    assert!(condition_is(&obj, "UpgradeAvailable", "False"));

    // A changed vars list outside an upgrade is written at once through the workspace
    // variables API (a no-code workspace's variables are ordinary workspace variables).
    sb.kubectl_ok(&[
        "patch",
        "nocodeworkspace",
        "man-ws",
        "--type=merge",
        "-p",
        r#"{"spec":{"vars":[{"key":"region","value":"us-east-1"}]}}"#,
    ]);
    let region = |sb: &Sandbox| {
        let (_, vars) = api(sb, "GET", &format!("/workspaces/{ws}/vars"), None);
        vars["data"][0]["attributes"]["value"].clone()
    };
    wait_for("the changed variable written", WAIT, || {
        (region(&sb) == "us-east-1").then_some(())
    });
    assert_eq!(
        count(&sb, "POST", |p| p.ends_with("/upgrade")),
        0,
        "no upgrade for a variable change"
    );
    publish(&sb, &m, "1.1.0");
    sb.kubectl_ok(&[
        "patch",
        "nocodemodule",
        "man",
        "--type=merge",
        "-p",
        r#"{"spec":{"versionPin":"1.1.0"}}"#,
    ]);
    let obj = wait_for("upgrade awaiting approval", WAIT, || {
        sb.get_json("nocodeworkspace", "man-ws").filter(|o| {
            condition(o, "UpgradeAvailable").is_some_and(|c| c["reason"] == "AwaitingApproval")
        })
    });
    let up = &obj["status"]["upgrade"];
    let run = up["id"].as_str().unwrap().to_string();
    assert!(
        up["planUrl"].as_str().is_some_and(|u| u.contains(&run)),
        "{up}"
    );
    assert_eq!(up["fromVersion"], "1.0.0");
    assert_eq!(up["toVersion"], "1.1.0");
    assert_eq!(up["status"], "planned");
    let msg = condition(&obj, "UpgradeAvailable").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("approvedVersion: 1.1.0") && msg.contains(up["planUrl"].as_str().unwrap()),
        "{msg}"
    );
    // Still waiting after a few resyncs: nothing confirmed.
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(upgrade_calls(&sb, &nc, &ws, &run), (1, 0));
    let (_, r) = api(&sb, "GET", &format!("/runs/{run}"), None);
    assert_eq!(r["data"]["attributes"]["status"], "planned");

    sb.kubectl_ok(&[
        "patch",
        "nocodeworkspace",
        "man-ws",
        "--type=merge",
        "-p",
        r#"{"spec":{"upgrade":{"approvedVersion":"1.1.0"}}}"#,
    ]);
    let obj = wait_for("upgrade applied", WAIT, || {
        sb.get_json("nocodeworkspace", "man-ws").filter(|o| {
            o["status"]["upgrade"]["status"] == "applied"
                && condition_is(o, "UpgradeAvailable", "False")
        })
    });
    assert_eq!(obj["status"]["upgrade"]["confirmed"], true);
    wait_for("module version recorded", WAIT, || {
        sb.get_json("nocodeworkspace", "man-ws")
            .filter(|o| o["status"]["moduleVersion"] == "1.1.0")
    });
    assert_eq!(
        workspace(&sb, &ws).unwrap()["attributes"]["source-module-id"],
        "private/quartet/man/aws/1.1.0"
    );
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(region(&sb), "us-east-1");
    assert_eq!(
        upgrade_calls(&sb, &nc, &ws, &run),
        (1, 1),
        "each sent exactly once"
    );
    sb.wait_events(&[
        "UpgradeStarted",
        "UpgradePlanned",
        "UpgradeConfirmed",
        "UpgradeApplied",
    ]);
}

/// Requests of the workspace service logged after index `since` with this method whose path
/// matches.
fn count_since(sb: &Sandbox, since: u64, method: &str, path: impl Fn(&str) -> bool) -> usize {
    let (items, _) = sb.requests("workspaces", since);
    items
        .iter()
        .filter(|(m, p, _)| m == method && path(p))
        .count()
}

fn secret(sb: &Sandbox, name: &str, value: &str) {
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: default}}\nstringData: {{value: {value}}}\n"
    ));
}

#[test]
fn a_rotated_secret_is_written_at_once_and_a_change_meeting_an_upgrade_goes_with_it() {
    // A long resync: the rotation is seen through the Secret watch, not by polling.
    let (sb, op) = env("5m");
    let m = registry_module(&sb, "rot", &["1.0.0"]);
    let nc = module_ready(&sb, "rot", &m, "  versionPin: \"1.0.0\"\n");
    secret(&sb, "rot-region", "eu-west-1");
    let api_key = unique_token();
    secret(&sb, "rot-key", &api_key);
    sb.apply_ok(&ncws(
        "rot-ws",
        "  moduleRef: {name: rot}\n  deletionMode: Force\n  vars:\n  \
         - {key: region, valueFrom: {secretKeyRef: {name: rot-region, key: value}}}\n  \
         - {key: API_KEY, category: env, sensitive: true, valueFrom: {secretKeyRef: {name: rot-key, key: value}}}\n",
    ));
    let obj = wait_ready(&sb, "nocodeworkspace", "rot-ws");
    let ws = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    let var_writes = |since: u64| {
        let vars = format!("/api/v2/workspaces/{ws}/vars");
        count_since(&sb, since, "PATCH", |p| p.starts_with(&vars))
            + count_since(&sb, since, "POST", |p| p.starts_with(&vars))
    };
    let upgrades = |since: u64| count_since(&sb, since, "POST", |p| p.ends_with("/upgrade"));
    // Settled: further passes write nothing.
    std::thread::sleep(Duration::from_secs(3));
    let (_, mark) = sb.requests("workspaces", 0);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(var_writes(mark), 0, "nothing to write while in sync");

    // The sensitive value's Secret rotates: one write of that variable, no upgrade.
    secret(&sb, "rot-key", &unique_token());
    wait_for("the rotated value written", WAIT, || {
        (var_writes(mark) > 0).then_some(())
    });
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(var_writes(mark), 1, "exactly one variable write");
    assert_eq!(upgrades(mark), 0, "no upgrade started");
    let (_, vars) = api(&sb, "GET", &format!("/workspaces/{ws}/vars"), None);
    let key = vars["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["attributes"]["key"] == "API_KEY")
        .cloned()
        .unwrap();
    assert_eq!(key["attributes"]["sensitive"], true);
    assert!(key["attributes"]["value"].is_null(), "write-only: {key}");

    // A change that meets an upgrade goes with it, not through the variables API: with the
    // operator stopped, the module's pin moves in the service and the region's Secret changes.
    let _ = op.stop();
    publish(&sb, &m, "1.1.0");
    let (status, body) = api(
        &sb,
        "PATCH",
        &format!("/no-code-modules/{nc}"),
        Some(json!({"data": {"type": "no-code-modules", "attributes": {"version-pin": "1.1.0"}}})),
    );
    assert_eq!(status, 200, "{body}");
    sb.kubectl_ok(&[
        "patch",
        "nocodemodule",
        "rot",
        "--type=merge",
        "-p",
        r#"{"spec":{"versionPin":"1.1.0"}}"#,
    ]);
    secret(&sb, "rot-region", "us-east-1");
    let (_, mark) = sb.requests("workspaces", 0);
    let _op = Operator::start(&sb, "5m");
    wait_for("upgrade started", WAIT, || {
        sb.get_json("nocodeworkspace", "rot-ws")
            .filter(|o| o["status"]["upgrade"]["toVersion"] == "1.1.0")
    });
    let (_, vars) = api(&sb, "GET", &format!("/workspaces/{ws}/vars"), None);
    let region = vars["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["attributes"]["key"] == "region")
        .cloned()
        .unwrap();
    assert_eq!(
        region["attributes"]["value"], "us-east-1",
        "sent with the upgrade"
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(upgrades(mark), 1);
    assert_eq!(var_writes(mark), 0, "no separate variable write");
}

#[test]
fn an_auto_upgrade_of_a_floating_module_confirms_by_itself_once() {
    let (sb, _op) = env("3s");
    let m = registry_module(&sb, "auto", &["1.0.0"]);
    let nc = module_ready(&sb, "auto", &m, "");
    sb.apply_ok(&ncws(
        "auto-ws",
        &format!("  moduleRef: {{name: auto}}\n  upgrade: {{policy: Auto}}\n  deletionMode: Force\n{REGION_VAR}"),
    ));
    let obj = wait_ready(&sb, "nocodeworkspace", "auto-ws");
    let ws = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    // A floating module: publishing a version is enough.
    publish(&sb, &m, "1.1.0");
    let obj = wait_for("upgrade applied", WAIT, || {
        sb.get_json("nocodeworkspace", "auto-ws").filter(|o| {
            o["status"]["upgrade"]["status"] == "applied" && o["status"]["moduleVersion"] == "1.1.0"
        })
    });
    let run = obj["status"]["upgrade"]["id"].as_str().unwrap().to_string();
    assert_eq!(obj["status"]["upgrade"]["toVersion"], "1.1.0");
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(upgrade_calls(&sb, &nc, &ws, &run), (1, 1));

    // A plan without changes finishes without a confirm.
    admin(
        &sb,
        "POST",
        "/scripts",
        json!({"workspace": ws, "plan": "no-changes"}),
    );
    publish(&sb, &m, "1.2.0");
    let obj = wait_for("no-change upgrade finished", WAIT, || {
        sb.get_json("nocodeworkspace", "auto-ws").filter(|o| {
            o["status"]["upgrade"]["status"] == "planned_and_finished"
                && o["status"]["moduleVersion"] == "1.2.0"
        })
    });
    let run2 = obj["status"]["upgrade"]["id"].as_str().unwrap().to_string();
    assert_ne!(run2, run);
    assert_eq!(obj["status"]["upgrade"]["confirmed"], false);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        upgrade_calls(&sb, &nc, &ws, &run2),
        (2, 0),
        "no confirm for a no-change plan"
    );
    assert!(condition_is(
        &sb.get_json("nocodeworkspace", "auto-ws").unwrap(),
        "UpgradeAvailable",
        "False"
    ));
}

#[test]
fn the_no_code_example_becomes_ready_under_quartet_dev() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(BIN)
        .args([
            "dev",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--secrets-addr",
            "127.0.0.1:0",
            "--workspaces-addr",
            "127.0.0.1:0",
            "--catalog-addr",
            "127.0.0.1:0",
            "--scheduler-addr",
            "127.0.0.1:0",
            "--kube-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--resync-interval",
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("dev.log")).unwrap())
        .spawn()
        .unwrap();
    let _urls = read_ready(&mut child, "Quartet dev is ready");
    let example = repo_root().join("examples/no-code.yaml");
    let out = kubectl(
        &kubeconfig,
        &["apply", "-f", example.to_str().unwrap()],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for what in ["nocodemodule/network", "nocodeworkspace/network-prod"] {
        let out = kubectl(
            &kubeconfig,
            &["wait", "--for=condition=Ready", "--timeout=90s", what],
            None,
        );
        assert!(
            out.status.success(),
            "{what}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(dir.path().join("dev.log")).unwrap_or_default()
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn no_token_or_secret_variable_reaches_logs_events_or_status() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    connect(&sb, "workspaces", &sb.root_token.clone());
    let org_token = admin(
        &sb,
        "POST",
        "/tokens",
        json!({"kind": "organization", "organization": "quartet"}),
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    connect(&sb, "orgtoken", &org_token);
    let op = Operator::start(&sb, "2s");
    let secret_value = unique_token();
    sb.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: var-secret, namespace: default}}\nstringData: {{value: {secret_value}}}\n"
    ));
    let m = registry_module(&sb, "leak", &["1.0.0"]);
    module_ready(&sb, "leak", &m, "");
    sb.apply_ok(&ncws(
        "leak-ws",
        "  moduleRef: {name: leak}\n  deletionMode: Force\n  vars:\n  - {key: region, sensitive: true, valueFrom: {secretKeyRef: {name: var-secret, key: value}}}\n",
    ));
    wait_ready(&sb, "nocodeworkspace", "leak-ws");
    let m2 = registry_module(&sb, "leak2", &["1.0.0"]);
    sb.apply_ok(&ncmod("leak2", &m2, "  connectionRef: {name: orgtoken}\n"));
    wait_for("Forbidden", WAIT, || {
        sb.get_json("nocodemodule", "leak2")
            .filter(|o| condition(o, "Ready").is_some_and(|c| c["reason"] == "Forbidden"))
    });
    sb.kubectl_ok(&[
        "delete",
        "nocodeworkspace",
        "leak-ws",
        "--wait=true",
        "--timeout=60s",
    ]);
    std::thread::sleep(Duration::from_secs(3));
    let log = op.stop();
    assert!(
        log.contains("reconcile"),
        "operator log is unexpectedly empty"
    );
    let everything = [
        log,
        sb.kubectl_ok(&["get", "events", "-A", "-o", "json"]),
        sb.kubectl_ok(&["get", "nocodemodules", "-A", "-o", "json"]),
        sb.kubectl_ok(&["get", "nocodeworkspaces", "-A", "-o", "json"]),
        sb.kubectl_ok(&["get", "connections", "-A", "-o", "json"]),
    ];
    for text in &everything {
        assert!(!text.contains(&sb.root_token), "the token leaked");
        assert!(!text.contains(&org_token), "the organization token leaked");
        assert!(!text.contains(&secret_value), "the secret variable leaked");
    }
}

#[test]
fn every_no_code_field_of_the_issue_reaches_the_service_under_its_name() {
    let (sb, _op) = env("5m");
    let m = registry_module(&sb, "every", &["1.0.0"]);
    let nc = module_ready(
        &sb,
        "every",
        &m,
        &format!("  organization: quartet\n  enabled: true\n  versionPin: \"1.0.0\"\n{REGION_OPTIONS}  deletionPolicy: Retain\n"),
    );
    let module = nocode_module(&sb, &nc);
    assert_eq!(module["data"]["attributes"]["enabled"], true);
    assert_eq!(module["data"]["attributes"]["version-pin"], "1.0.0");
    sb.apply_ok(&ncws(
        "every-ws",
        "  moduleRef: {name: every}\n  name: every-field-ws\n  description: every field of the issue\n  \
         executionMode: remote\n  autoApply: true\n  sourceName: quartet-audit\n  sourceUrl: https://example.com/audit\n  \
         vars:\n  - {key: region, value: eu-west-1, category: terraform, description: where}\n  \
         - {key: TF_CLI_ARGS, category: env, value: \"-no-color\", hcl: false, description: engine flags}\n  \
         upgrade: {policy: Manual}\n  deletionPolicy: Retain\n",
    ));
    let obj = wait_ready(&sb, "nocodeworkspace", "every-ws");
    let ws = obj["status"]["workspaceId"].as_str().unwrap().to_string();
    assert_eq!(obj["status"]["moduleVersion"], "1.0.0");
    let w = workspace(&sb, &ws).unwrap();
    let a = &w["attributes"];
    for (k, v) in [
        ("name", json!("every-field-ws")),
        ("description", json!("every field of the issue")),
        ("execution-mode", json!("remote")),
        ("auto-apply", json!(true)),
        ("source-name", json!("quartet-audit")),
        ("source-url", json!("https://example.com/audit")),
        ("source-module-id", json!("private/quartet/every/aws/1.0.0")),
    ] {
        assert_eq!(a[k], v, "{k}");
    }
    let (_, vars) = api(&sb, "GET", &format!("/workspaces/{ws}/vars"), None);
    let env_var = vars["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["attributes"]["key"] == "TF_CLI_ARGS")
        .cloned()
        .unwrap();
    assert_eq!(env_var["attributes"]["category"], "env");
    assert_eq!(env_var["attributes"]["value"], "-no-color");
    assert_eq!(env_var["attributes"]["description"], "engine flags");
    // Retain: deleting the resources leaves the workspace and the module enabled.
    sb.kubectl_ok(&[
        "delete",
        "nocodeworkspace",
        "every-ws",
        "--wait=true",
        "--timeout=60s",
    ]);
    sb.kubectl_ok(&[
        "delete",
        "nocodemodule",
        "every",
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(workspace(&sb, &ws).is_some(), "retained workspace deleted");
    assert_eq!(
        nocode_module(&sb, &nc)["data"]["attributes"]["enabled"],
        true
    );
}
