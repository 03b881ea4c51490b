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

pub fn crd(args: CrdArgs) -> anyhow::Result<()> {
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
