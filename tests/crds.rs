//! The CRD YAML in `crds/` and the chart's CRD templates are generated from the Rust types;
//! they must not go stale. Regenerate with
//! `cargo run -- crd --out crds --chart charts/quartet/templates/crds`.

use std::path::Path;

const REGENERATE: &str = "run `quartet crd --out crds --chart charts/quartet/templates/crds`";

fn assert_dir_holds(dir: &str, generated: &[(String, String)]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .to_string()
        })
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    let mut want: Vec<String> = generated.iter().map(|(n, _)| n.clone()).collect();
    want.sort();
    assert_eq!(
        names, want,
        "{dir} holds other CRD files than the types generate; {REGENERATE}"
    );
    for (name, yaml) in generated {
        let committed = std::fs::read_to_string(root.join(dir).join(name)).expect("read CRD");
        assert!(&committed == yaml, "{dir}/{name} is stale; {REGENERATE}");
    }
}

#[test]
fn committed_crds_match_the_rust_types() {
    assert_dir_holds("crds", &quartet::cmd::crd::files().expect("CRDs serialize"));
    assert_dir_holds(
        "charts/quartet/templates/crds",
        &quartet::cmd::crd::chart_templates().expect("CRDs serialize"),
    );
    // Helm would install a crds/ directory a second time, and never upgrade it.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(!root.join("charts/quartet/crds").exists());
}

/// Kubernetes knows the integer formats `int32` and `int64` only (and warns on the `uint32`,
/// `uint64`, ... schemars derives from Rust types), and prices CEL rules from the bounds of
/// strings, lists and maps: every one of them is bounded.
#[test]
fn crds_carry_only_kubernetes_formats_and_bound_every_string_list_and_map() {
    fn walk(path: &str, s: &serde_json::Value, bad: &mut Vec<String>) {
        match s.get("format").and_then(|f| f.as_str()) {
            Some("int32" | "int64" | "float" | "double" | "date-time" | "date" | "duration")
            | None => {}
            Some(f) => bad.push(format!("{path}: format {f}")),
        }
        let has = |k: &str| s.get(k).is_some();
        match s.get("type").and_then(|t| t.as_str()) {
            Some("string") if !has("maxLength") && !has("enum") && !has("format") => {
                bad.push(format!("{path}: string without maxLength"))
            }
            Some("array") if !has("maxItems") => bad.push(format!("{path}: list without maxItems")),
            Some("object") if s["additionalProperties"].is_object() && !has("maxProperties") => {
                bad.push(format!("{path}: map without maxProperties"))
            }
            _ => {}
        }
        if let Some(props) = s.get("properties").and_then(|p| p.as_object()) {
            for (name, sub) in props {
                walk(&format!("{path}.{name}"), sub, bad);
            }
        }
        if let Some(items) = s.get("items") {
            walk(&format!("{path}[]"), items, bad);
        }
        if s["additionalProperties"].is_object() {
            walk(&format!("{path}{{}}"), &s["additionalProperties"], bad);
        }
    }
    let mut bad = Vec::new();
    for crd in quartet::cmd::crd::crds() {
        for v in &crd.spec.versions {
            let schema = serde_json::to_value(
                v.schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref()),
            )
            .expect("schema");
            for part in ["spec", "status"] {
                walk(
                    &format!("{}.{part}", crd.spec.names.kind),
                    &schema["properties"][part],
                    &mut bad,
                );
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn every_kind_but_cluster_connection_is_namespaced_in_the_quartet_category_with_a_short_name() {
    for crd in quartet::runtime::controllers::crds() {
        let names = &crd.spec.names;
        // A platform team's ClusterConnection is the one cluster-scoped kind.
        let scope = if names.kind == "ClusterConnection" {
            "Cluster"
        } else {
            "Namespaced"
        };
        assert_eq!(crd.spec.scope, scope, "{}", names.kind);
        assert!(
            names
                .categories
                .as_ref()
                .is_some_and(|c| c.iter().any(|c| c == "quartet")),
            "{} not in category quartet",
            names.kind
        );
        assert!(
            names.short_names.as_ref().is_some_and(|s| !s.is_empty()),
            "{} has no short name",
            names.kind
        );
    }
}

/// Every spec field carries a description (it becomes `kubectl explain` text).
#[test]
fn every_spec_field_is_documented() {
    fn walk(path: &str, schema: &serde_json::Value, missing: &mut Vec<String>) {
        if let Some(props) = schema.get("properties").and_then(|p| p.as_object()) {
            for (name, sub) in props {
                let p = format!("{path}.{name}");
                if sub
                    .get("description")
                    .and_then(|d| d.as_str())
                    .is_none_or(str::is_empty)
                {
                    missing.push(p.clone());
                }
                walk(&p, sub, missing);
            }
        }
        if let Some(items) = schema.get("items") {
            walk(&format!("{path}[]"), items, missing);
        }
    }
    let mut missing = Vec::new();
    for crd in quartet::runtime::controllers::crds() {
        for v in &crd.spec.versions {
            let schema = serde_json::to_value(
                v.schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref()),
            )
            .expect("schema");
            walk(
                &format!("{}.spec", crd.spec.names.kind),
                &schema["properties"]["spec"],
                &mut missing,
            );
        }
    }
    assert!(
        missing.is_empty(),
        "spec fields without a description: {missing:?}"
    );
}

/// Every CRD's CEL rules, priced as kube-apiserver 1.36 prices them at CRD creation (the dev
/// API server refuses the same CRDs): each rule under the per-rule limit, and each schema's
/// total under half of the whole-schema budget, so the next field does not tip it over.
/// Prints the table (`cargo test --test integration crds:: -- --nocapture`, or `quartet crd --check`).
#[cfg(feature = "sandbox")]
#[test]
fn every_crd_prices_its_cel_rules_under_half_the_kubernetes_budget() {
    let (table, over) = quartet::cmd::crd::cel_cost_report().expect("CRDs serialize");
    println!("{table}");
    assert!(over.is_empty(), "over budget:\n{}", over.join("\n"));
}

/// Kubernetes knows `int32`/`int64` on integers, `float`/`double` on numbers and a fixed set
/// on strings; anything else (`uint64`, which schemars derives from `u64`) makes the API
/// server answer `Warning: unrecognized format "uint64"` when the CRD is applied.
#[cfg(feature = "sandbox")]
#[test]
fn no_crd_declares_a_format_kubernetes_does_not_know() {
    let mut warnings = Vec::new();
    for crd in quartet::cmd::crd::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let value = serde_json::to_value(&crd).expect("CRD serializes");
        for w in quartet_sandbox::apiserver::schema::crd_warnings(&value, None) {
            warnings.push(format!("{name}: {w}"));
        }
    }
    assert!(warnings.is_empty(), "{}", warnings.join("\n"));
}

/// `quartet crd --check` prints every CRD's rule costs and fails exactly when the report
/// finds a rule or a schema over budget.
#[cfg(feature = "sandbox")]
#[test]
fn quartet_crd_check_prints_the_costs_and_fails_only_when_over_budget() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_quartet"))
        .args(["crd", "--check"])
        .output()
        .expect("quartet runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for crd in quartet::cmd::crd::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        assert!(
            stdout.lines().any(|l| l == name),
            "{name} missing from:\n{stdout}"
        );
    }
    assert!(stdout.contains("total of spec.validation.openAPIV3Schema against 100,000,000"));
    let (_, over) = quartet::cmd::crd::cel_cost_report().expect("CRDs serialize");
    assert_eq!(
        out.status.success(),
        over.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
