//! The Argo CD health checks and actions in `argocd/resource_customizations/` (Argo CD's own
//! layout), run with a real Lua 5.1 interpreter (Debian's `lua5.1`; Argo CD runs gopher-lua, a
//! Lua 5.1): every kind has a health check; each check gives the expected health on the
//! statuses in its `testdata/`, which were captured from real operator runs
//! (`QUARTET_CAPTURE_DIR`, see `argocd/README.md`); each action's discovery and output match
//! `actions/action_test.yaml`, and each action's output is accepted by the dev API server. The
//! health check is one script, `argocd/health.lua`, copied into each kind's directory (Argo CD
//! reads one per kind): the copies are checked to be the same.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Map, Value};
use support::*;

fn customizations() -> PathBuf {
    repo_root().join("argocd/resource_customizations")
}

/// A JSON value as a Lua 5.1 table constructor.
fn lua_literal(v: &Value) -> String {
    match v {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => lua_string(s),
        Value::Array(a) => format!(
            "{{{}}}",
            a.iter().map(lua_literal).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("[{}] = {}", lua_string(k), lua_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn lua_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\{:03}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Lua that writes a table as JSON (an empty table as `{}`).
const TO_JSON: &str = r#"
local function to_json(v)
  local t = type(v)
  if t == "nil" then return "null" end
  if t == "boolean" then return tostring(v) end
  if t == "number" then return tostring(v) end
  if t == "string" then
    return '"' .. v:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
  end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  if n > 0 and n == #v then
    local parts = {}
    for _, x in ipairs(v) do parts[#parts + 1] = to_json(x) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local parts = {}
  for k, x in pairs(v) do parts[#parts + 1] = to_json(tostring(k)) .. ":" .. to_json(x) end
  return "{" .. table.concat(parts, ",") .. "}"
end
"#;

/// Run `script` (a health check or action, a chunk that returns a table) with `obj` set to
/// `input`, and return what it returned, as JSON.
fn run_lua(script: &Path, input: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main.lua");
    let program = format!(
        "{TO_JSON}\nobj = {}\nlocal result = dofile({})\nio.write(to_json(result))\n",
        lua_literal(input),
        lua_string(script.to_str().unwrap())
    );
    std::fs::write(&main, program).unwrap();
    let out = Command::new(std::env::var("QUARTET_LUA_BIN").unwrap_or("lua5.1".into()))
        .arg(&main)
        .output()
        .expect("run lua5.1 (apt-get install lua5.1)");
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: not JSON ({e}): {}",
            script.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (group, kind) of every CRD in `crds/`.
fn crd_kinds() -> Vec<(String, String)> {
    let mut kinds = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("crds")).unwrap() {
        let crd = yaml_file(&entry.unwrap().path());
        kinds.push((
            crd["spec"]["group"].as_str().unwrap().to_string(),
            crd["spec"]["names"]["kind"].as_str().unwrap().to_string(),
        ));
    }
    kinds.sort();
    kinds
}

/// The one health check every kind's `health.lua` is a copy of.
fn health_source() -> PathBuf {
    repo_root().join("argocd/health.lua")
}

#[test]
fn every_kinds_health_check_is_a_copy_of_the_one_health_script() {
    let want = std::fs::read_to_string(health_source()).unwrap();
    let update = std::env::var_os("QUARTET_UPDATE_ARGOCD_CM").is_some();
    let mut stale = Vec::new();
    for (group, kind) in crd_kinds() {
        let path = customizations().join(&group).join(&kind).join("health.lua");
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
        }
        if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
            stale.push(format!("{group}/{kind}"));
        }
    }
    assert!(
        stale.is_empty(),
        "health.lua differs from argocd/health.lua for {stale:?}: edit argocd/health.lua and run QUARTET_UPDATE_ARGOCD_CM=1 cargo test --test integration argocd::"
    );
}

#[test]
fn every_kind_has_a_health_check_that_gives_the_expected_health_on_captured_statuses() {
    let mut checked = 0;
    for (group, kind) in crd_kinds() {
        let dir = customizations().join(&group).join(&kind);
        let tests = yaml_file(&dir.join("health_test.yaml"));
        let tests = tests["tests"].as_array().cloned().unwrap_or_default();
        assert!(!tests.is_empty(), "{group}/{kind}: no health tests");
        for t in tests {
            let input = yaml_file(&dir.join(t["inputPath"].as_str().unwrap()));
            let hs = run_lua(&dir.join("health.lua"), &input);
            assert_eq!(
                hs["status"], t["healthStatus"]["status"],
                "{group}/{kind} {}: {hs}",
                t["inputPath"]
            );
            assert_eq!(
                hs["message"], t["healthStatus"]["message"],
                "{group}/{kind} {}",
                t["inputPath"]
            );
            checked += 1;
        }
    }
    assert!(checked >= 24, "only {checked} health tests");
}

/// The keys of `after` that differ from `before` (a merge patch of what an action changed).
fn changed(before: &Value, after: &Value) -> Map<String, Value> {
    let (b, a) = (
        before.as_object().cloned().unwrap_or_default(),
        after.as_object().cloned().unwrap_or_default(),
    );
    a.into_iter().filter(|(k, v)| b.get(k) != Some(v)).collect()
}

/// `obj` as a user would create it: no status, no server-set metadata.
fn manifest(obj: &Value, name: &str) -> Value {
    json!({
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": name, "namespace": "default"},
        "spec": obj["spec"],
    })
}

#[test]
fn every_action_is_discovered_as_its_test_says_and_its_output_is_accepted_by_the_api_server() {
    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let mut applied = 0;
    for (group, kind) in crd_kinds() {
        let dir = customizations().join(&group).join(&kind).join("actions");
        let tests = yaml_file(&dir.join("action_test.yaml"));
        for t in tests["discoveryTests"].as_array().unwrap() {
            let input = yaml_file(&dir.join(t["inputPath"].as_str().unwrap()));
            let found = run_lua(&dir.join("discovery.lua"), &input);
            for want in t["result"].as_array().unwrap() {
                let name = want["name"].as_str().unwrap();
                assert_eq!(
                    found[name]["disabled"], want["disabled"],
                    "{kind} {name} on {}: {found}",
                    t["inputPath"]
                );
            }
            assert_eq!(
                found.as_object().unwrap().len(),
                t["result"].as_array().unwrap().len(),
                "{kind}: {found}"
            );
        }
        for t in tests["actionTests"].as_array().unwrap() {
            let action = t["action"].as_str().unwrap();
            let input = yaml_file(&dir.join(t["inputPath"].as_str().unwrap()));
            let want = yaml_file(&dir.join(t["expectedOutputPath"].as_str().unwrap()));
            let out = run_lua(&dir.join(action).join("action.lua"), &input);
            assert_eq!(out["spec"], want["spec"], "{kind} {action}");
            assert_eq!(
                out["metadata"]["annotations"],
                want["metadata"]["annotations"]
            );
        }
        // Every action (those with a timestamp too): what it changes is accepted by the API
        // server as a merge patch, as Argo CD applies it.
        let input = yaml_file(&dir.join(tests["discoveryTests"][0]["inputPath"].as_str().unwrap()));
        let name = format!("argocd-{}", kind.to_lowercase());
        sb.apply_ok(&serde_json::to_string(&manifest(&input, &name)).unwrap());
        let offered = run_lua(&dir.join("discovery.lua"), &input);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let script = path.join("action.lua");
            if !script.exists() {
                continue;
            }
            let action = path.file_name().unwrap().to_str().unwrap().to_string();
            let out = run_lua(&script, &input);
            let spec = changed(&input["spec"], &out["spec"]);
            let annotations = changed(
                &input["metadata"]["annotations"],
                &out["metadata"]["annotations"],
            );
            if spec.is_empty() && annotations.is_empty() {
                // Only an action discovery offers disabled here may change nothing (resuming a
                // deployment that is not paused).
                assert_eq!(
                    offered[&action]["disabled"], true,
                    "{kind} {action} changes nothing"
                );
                continue;
            }
            if action == "reconcile" {
                let at = annotations["reconcile.quartet.dev/requestedAt"]
                    .as_str()
                    .unwrap();
                assert!(chrono_like(at), "{at}");
            }
            let patch = json!({"metadata": {"annotations": annotations}, "spec": spec});
            sb.kubectl_ok(&[
                "patch",
                &format!("{}.{group}/{name}", kind.to_lowercase()),
                "--type=merge",
                "-p",
                &patch.to_string(),
            ]);
            let now = sb
                .get_json(&format!("{}.{group}", kind.to_lowercase()), &name)
                .unwrap();
            for (k, v) in &spec {
                assert_eq!(&now["spec"][k], v, "{kind} {action}: spec.{k}");
            }
            applied += 1;
        }
    }
    assert!(applied >= 24 * 3, "only {applied} actions applied");
}

#[test]
fn the_deployment_gates_fail_action_sets_a_new_fail_request_offered_only_for_an_active_deployment()
{
    let dir = customizations().join("scheduler.quartet.dev/DeploymentGate/actions");
    let captured = yaml_file(&dir.join("testdata/healthy_example-web.yaml"));
    assert_eq!(captured["status"]["deploymentStatus"], "successful");
    let offered = run_lua(&dir.join("discovery.lua"), &captured);
    assert_eq!(
        offered["fail"]["disabled"], true,
        "nothing to fail: {offered}"
    );
    for active in ["running", "paused", "blocked"] {
        let mut input = captured.clone();
        input["status"]["deploymentStatus"] = json!(active);
        let offered = run_lua(&dir.join("discovery.lua"), &input);
        assert_eq!(offered["fail"]["disabled"], false, "{active}: {offered}");
    }
    let out = run_lua(&dir.join("fail/action.lua"), &captured);
    let spec = changed(&captured["spec"], &out["spec"]);
    assert_eq!(spec.keys().collect::<Vec<_>>(), ["failRequest"], "{spec:?}");
    assert!(chrono_like(spec["failRequest"].as_str().unwrap()));
    assert_eq!(out["metadata"], captured["metadata"]);
}

/// `2026-01-01T00:00:00Z`.
fn chrono_like(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 20 && b[4] == b'-' && b[10] == b'T' && b[19] == b'Z'
}

/// A `|` block of the chart's snippet: the file's text.
fn same_text(snippet: &str, file: &Path) {
    let text = std::fs::read_to_string(file).unwrap();
    assert_eq!(
        snippet.trim_end(),
        text.trim_end(),
        "charts/quartet/argocd-cm.yaml is stale for {} (regenerate it, see argocd/README.md)",
        file.display()
    );
}

#[test]
fn the_charts_argocd_cm_snippet_holds_exactly_the_health_checks_and_actions() {
    let cm = yaml_file(&repo_root().join("charts/quartet/argocd-cm.yaml"));
    let data = cm["data"].as_object().unwrap();
    let mut expected = 0;
    for (group, kind) in crd_kinds() {
        let dir = customizations().join(&group).join(&kind);
        let key = format!("{group}_{kind}");
        let health = data[&format!("resource.customizations.health.{key}")]
            .as_str()
            .unwrap_or_else(|| panic!("no health check for {key}"));
        same_text(health, &dir.join("health.lua"));
        expected += 1;
        let actions_dir = dir.join("actions");
        if !actions_dir.exists() {
            continue;
        }
        expected += 1;
        let actions: Value = serde_yaml::from_str(
            data[&format!("resource.customizations.actions.{key}")]
                .as_str()
                .unwrap_or_else(|| panic!("no actions for {key}")),
        )
        .unwrap();
        same_text(
            actions["discovery.lua"].as_str().unwrap(),
            &actions_dir.join("discovery.lua"),
        );
        let definitions = actions["definitions"].as_array().unwrap();
        let on_disk = std::fs::read_dir(&actions_dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().join("action.lua").exists())
            .count();
        assert_eq!(definitions.len(), on_disk, "{key}");
        for d in definitions {
            let name = d["name"].as_str().unwrap();
            same_text(
                d["action.lua"].as_str().unwrap(),
                &actions_dir.join(name).join("action.lua"),
            );
        }
    }
    assert_eq!(data.len(), expected, "keys for kinds that do not exist");
}

/// `text` as a YAML `|` block indented by `indent`.
fn block(text: &str, indent: usize) -> String {
    text.trim_end_matches('\n')
        .lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{}{l}", " ".repeat(indent))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The chart's `argocd-cm.yaml`, built from `argocd/resource_customizations`.
fn argocd_cm() -> String {
    let mut out = vec![
        "# Argo CD health checks and actions for every Quartet kind, as `argocd-cm` data keys.".to_string(),
        "# Generated from argocd/resource_customizations (tests/argocd.rs checks they are the same).".into(),
        "# Merge into Argo CD's ConfigMap:".into(),
        "#   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file argocd-cm.yaml".into(),
        "# or, with Argo CD's Helm chart, put the `data` keys under `configs.cm`.".into(),
        "# `helm pull quartet --untar` puts this file in quartet/argocd-cm.yaml.".into(),
        "data:".into(),
    ];
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(customizations())
        .unwrap()
        .flat_map(|g| std::fs::read_dir(g.unwrap().path()).unwrap())
        .map(|k| k.unwrap().path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let kind = dir.file_name().unwrap().to_str().unwrap();
        let group = dir.parent().unwrap().file_name().unwrap().to_str().unwrap();
        let key = format!("{group}_{kind}");
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        out.push(format!("  resource.customizations.health.{key}: |"));
        out.push(block(&read(dir.join("health.lua")), 4));
        let actions = dir.join("actions");
        if actions.is_dir() {
            out.push(format!("  resource.customizations.actions.{key}: |"));
            out.push("    discovery.lua: |".into());
            out.push(block(&read(actions.join("discovery.lua")), 6));
            out.push("    definitions:".into());
            let mut names: Vec<String> = std::fs::read_dir(&actions)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.join("action.lua").exists())
                .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
                .collect();
            names.sort();
            for name in names {
                out.push(format!("    - name: {name}"));
                out.push("      action.lua: |".into());
                out.push(block(&read(actions.join(&name).join("action.lua")), 8));
            }
        }
    }
    out.join("\n") + "\n"
}

#[test]
fn the_charts_argocd_cm_snippet_is_generated_from_the_lua_files() {
    let path = repo_root().join("charts/quartet/argocd-cm.yaml");
    let want = argocd_cm();
    if std::env::var_os("QUARTET_UPDATE_ARGOCD_CM").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    assert!(
        std::fs::read_to_string(&path).unwrap() == want,
        "charts/quartet/argocd-cm.yaml is stale: QUARTET_UPDATE_ARGOCD_CM=1 cargo test --test integration argocd::"
    );
}
