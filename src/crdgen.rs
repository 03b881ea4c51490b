//! `quartet crd`: the CRDs as YAML, generated from the Rust types (the single source).

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

use crate::cli::CrdArgs;

/// The CRDs as installed: the Rust types' schemas with their descriptions reflowed
/// ([`reflow`]), so `kubectl explain` prints whole sentences.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = crate::controllers::crds();
    for crd in &mut crds {
        for v in &mut crd.spec.versions {
            if let Some(s) = v
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                reflow_schema(s);
            }
        }
    }
    crds
}

fn reflow_schema(s: &mut JSONSchemaProps) {
    if let Some(d) = s.description.as_mut() {
        *d = reflow(d);
    }
    let maps = [
        s.properties.as_mut(),
        s.pattern_properties.as_mut(),
        s.definitions.as_mut(),
    ];
    for m in maps.into_iter().flatten() {
        m.values_mut().for_each(reflow_schema);
    }
    for list in [s.all_of.as_mut(), s.any_of.as_mut(), s.one_of.as_mut()]
        .into_iter()
        .flatten()
    {
        list.iter_mut().for_each(reflow_schema);
    }
    if let Some(n) = s.not.as_mut() {
        reflow_schema(n);
    }
    match s.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(x)) => reflow_schema(x),
        Some(JSONSchemaPropsOrArray::Schemas(xs)) => xs.iter_mut().for_each(reflow_schema),
        None => {}
    }
    for x in [
        s.additional_properties.as_mut(),
        s.additional_items.as_mut(),
    ]
    .into_iter()
    .flatten()
    {
        if let JSONSchemaPropsOrBool::Schema(x) = x {
            reflow_schema(x);
        }
    }
}

/// Joins the lines of each paragraph of a doc comment into one line, the way `kubectl
/// explain` wants it (it wraps text itself and prints a source line break as a line break).
/// Kept: blank-line paragraph breaks, list items (`- `, `* `, `+ `, `1. `, `1) `) each on
/// their own line (their continuation lines joined to them), table rows (`|`), and fenced
/// code blocks verbatim. A pure function of the text.
pub fn reflow(doc: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    // Whether the last line of `out` may take a continuation line.
    let mut open = false;
    let mut fenced = false;
    for line in doc.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            fenced = !fenced;
            out.push(line.trim_end().to_string());
            open = false;
            continue;
        }
        if fenced {
            out.push(line.trim_end().to_string());
            continue;
        }
        if t.is_empty() {
            out.push(String::new());
            open = false;
        } else if is_list_item(t) || t.starts_with('|') || !open {
            out.push(line.trim_end().to_string());
            open = !t.starts_with('|');
        } else if let Some(last) = out.last_mut() {
            last.push(' ');
            last.push_str(t);
        }
    }
    out.join("\n")
}

fn is_list_item(t: &str) -> bool {
    if t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ") {
        return true;
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") "))
}

/// All CRDs as one multi-document YAML stream.
pub fn yaml_stream() -> anyhow::Result<String> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

/// `(file name, YAML)` per CRD: `<plural>.<group>.yaml`.
pub fn files() -> anyhow::Result<Vec<(String, String)>> {
    crds()
        .into_iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            Ok((format!("{name}.yaml"), serde_yaml::to_string(&crd)?))
        })
        .collect()
}

pub fn write_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, yaml) in files()? {
        std::fs::write(dir.join(name), yaml)?;
    }
    Ok(())
}

/// Each CRD's CEL rule costs as kube-apiserver 1.36 estimates them at CRD creation (the dev
/// API server's estimator), as a table for people, and what is over budget: a rule over the
/// per-rule limit, or a schema whose rules use half or more of the whole-schema budget (half,
/// so the next field does not tip a CRD over).
#[cfg(feature = "sandbox")]
pub fn cel_cost_report() -> anyhow::Result<(String, Vec<String>)> {
    use quartet_sandbox::apiserver::schema::{
        crd_rule_costs, format_rule_costs, PER_RULE_LIMIT, SCHEMA_LIMIT,
    };
    let mut table = String::new();
    let mut over = Vec::new();
    for crd in crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let costs = crd_rule_costs(&serde_json::to_value(&crd)?);
        table.push_str(&format_rule_costs(&name, &costs));
        for schema in &costs {
            if schema.total >= SCHEMA_LIMIT / 2 {
                over.push(format!(
                    "{name}: the rules of {} cost {} in all, not under half of the {SCHEMA_LIMIT} budget",
                    schema.path, schema.total
                ));
            }
            for rule in schema.rules.iter().filter(|r| r.cost > PER_RULE_LIMIT) {
                over.push(format!(
                    "{name}: {} costs {}, over the per-rule limit of {PER_RULE_LIMIT}",
                    rule.path, rule.cost
                ));
            }
        }
    }
    Ok((table, over))
}

#[cfg(feature = "sandbox")]
fn check() -> anyhow::Result<()> {
    let (table, over) = cel_cost_report()?;
    print!("{table}");
    if over.is_empty() {
        println!("Every CRD's CEL rules are under the per-rule limit and under half of the whole-schema budget.");
        return Ok(());
    }
    anyhow::bail!(
        "CEL rules over budget (a real API server refuses rules over the limits):\n{}",
        over.join("\n")
    )
}

#[cfg(not(feature = "sandbox"))]
fn check() -> anyhow::Result<()> {
    anyhow::bail!(
        "`quartet crd --check` is not in this build: it prices CEL rules with the dev API \
         server's estimator, which comes with the `sandbox` feature. Use a development build, \
         which has it by default: `cargo run -- crd --check`"
    )
}

pub fn crd(args: CrdArgs) -> anyhow::Result<()> {
    if args.check {
        return check();
    }
    if args.out.is_empty() {
        print!("{}", yaml_stream()?);
        return Ok(());
    }
    for dir in &args.out {
        write_dir(dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::reflow;

    #[test]
    fn joins_paragraph_lines_and_keeps_breaks_and_lists() {
        let doc = "How Quartet reaches one service. Managed resources\nname it in `spec.connectionRef`.\n\nValues:\n- `Delete` removes it\n  from the service;\n- `Retain` keeps it.\n1. first\n2) second";
        assert_eq!(
            reflow(doc),
            "How Quartet reaches one service. Managed resources name it in `spec.connectionRef`.\n\nValues:\n- `Delete` removes it from the service;\n- `Retain` keeps it.\n1. first\n2) second"
        );
    }

    #[test]
    fn keeps_fenced_code_and_tables_and_single_lines() {
        assert_eq!(reflow("one line"), "one line");
        let doc = "Example:\n```\na:\n  b: 1\n```\n| x | y |\n| 1 | 2 |";
        assert_eq!(reflow(doc), doc);
        assert_eq!(reflow(&reflow("a\nb\n\nc")), "a b\n\nc");
    }
}
