//! `quartet crd`: the CRDs as YAML, generated from the Rust types (the single source).

use std::path::{Path, PathBuf};

use clap::Args;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// The CRDs as installed: the Rust types' schemas with their descriptions reflowed
/// ([`reflow`]), so `kubectl explain` prints whole sentences, and made fit for a real API
/// server by [`finish_schema`].
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = crate::runtime::controllers::crds();
    for crd in &mut crds {
        finish_crd(crd);
    }
    crds
}

/// Applies [`finish_schema`] and [`reflow`] to every version's schema of one CRD.
pub fn finish_crd(crd: &mut CustomResourceDefinition) {
    for v in &mut crd.spec.versions {
        if let Some(s) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            for (name, prop) in s.properties.iter_mut().flatten() {
                // apiVersion, kind and metadata belong to the API server.
                if name != "apiVersion" && name != "kind" && name != "metadata" {
                    finish_schema(prop);
                }
            }
            reflow_schema(s);
        }
    }
}

/// Longest string a field takes when its type names no tighter limit (64 KiB: more than any
/// description, PEM bundle or policy document the services keep).
pub const DEFAULT_MAX_LENGTH: i64 = 65_536;
/// Most items of a list, or entries of a map, when its type names no tighter limit.
pub const DEFAULT_MAX_ITEMS: i64 = 1_024;

/// Makes one schema what a real kube-apiserver takes without warnings and prices cheaply:
///
/// - integer formats become the two Kubernetes knows (`int32`, `int64`); schemars derives
///   `uint32`, `uint64`, `uint8`, ... from Rust types and the API server warns on each;
/// - every string, list and map gets a bound (`maxLength`, `maxItems`, `maxProperties`): the
///   API server prices CEL rules from them and takes an unbounded string as 3 MiB and an
///   unbounded list as a million items. A bound the type sets is kept; the others get
///   [`DEFAULT_MAX_LENGTH`] or [`DEFAULT_MAX_ITEMS`]. Each bound is stated in the field's
///   description (the `kubectl explain` text) unless the description already names it.
pub fn finish_schema(s: &mut JSONSchemaProps) {
    finish(s, true)
}

/// [`finish_schema`]; `describe` is false for list items and map values, whose bound the list's
/// or map's own description states.
fn finish(s: &mut JSONSchemaProps, describe: bool) {
    normalize_format(s);
    let mut notes: Vec<String> = Vec::new();
    match s.type_.as_deref() {
        Some("string") if needs_length(s) => {
            let n = *s.max_length.get_or_insert(DEFAULT_MAX_LENGTH);
            notes.push(format!("At most {n} characters."));
        }
        Some("array") => {
            let n = *s.max_items.get_or_insert(DEFAULT_MAX_ITEMS);
            notes.push(format!("At most {n} items."));
            if let Some(JSONSchemaPropsOrArray::Schema(items)) = s.items.as_mut() {
                finish(items, false);
                if items.type_.as_deref() == Some("string") {
                    if let Some(m) = items.max_length {
                        notes.push(format!("Each at most {m} characters."));
                    }
                }
            }
        }
        Some("object") => {
            if let Some(JSONSchemaPropsOrBool::Schema(values)) = s.additional_properties.as_mut() {
                let n = *s.max_properties.get_or_insert(DEFAULT_MAX_ITEMS);
                notes.push(format!("At most {n} entries."));
                finish(values, false);
                if values.type_.as_deref() == Some("string") {
                    if let Some(m) = values.max_length {
                        notes.push(format!("Values at most {m} characters."));
                    }
                }
            }
        }
        _ => {}
    }
    for p in s.properties.iter_mut().flat_map(|m| m.values_mut()) {
        finish_schema(p);
    }
    for list in [s.all_of.as_mut(), s.any_of.as_mut(), s.one_of.as_mut()]
        .into_iter()
        .flatten()
    {
        list.iter_mut().for_each(finish_schema);
    }
    if !describe && s.type_.as_deref() == Some("string") {
        return;
    }
    for note in notes {
        let number = note
            .split(' ')
            .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
            .unwrap_or_default();
        let d = s.description.get_or_insert_with(String::new);
        if !names_number(d, number) {
            if !d.is_empty() {
                d.push(if d.ends_with('\n') { '\n' } else { ' ' });
            }
            d.push_str(&note);
        }
    }
}

/// A string needs a length bound unless an enum or a Kubernetes date format already bounds it
/// (the API server prices those from the format) or it is an int-or-string.
fn needs_length(s: &JSONSchemaProps) -> bool {
    s.enum_.is_none()
        && s.x_kubernetes_int_or_string != Some(true)
        && !matches!(s.format.as_deref(), Some("date-time" | "date" | "duration"))
}

/// Whether `text` already states `number` (as a whole number, not part of a longer one).
fn names_number(text: &str, number: &str) -> bool {
    text.split(|c: char| !c.is_ascii_digit() && c != ',')
        .any(|w| w.replace(',', "") == number)
}

/// schemars names the Rust integer type in `format`; Kubernetes knows `int32` and `int64` for
/// integers and `float` and `double` for numbers, and warns on anything else.
fn normalize_format(s: &mut JSONSchemaProps) {
    let fmt = match (s.type_.as_deref(), s.format.as_deref()) {
        (Some("integer"), Some("int8" | "int16" | "int32" | "uint8" | "uint16")) => Some("int32"),
        (Some("integer"), Some(_)) => Some("int64"),
        (Some("number"), Some(f @ ("float" | "double"))) => Some(f),
        (Some("number"), Some(_)) => None,
        _ => return,
    };
    s.format = fmt.map(str::to_string);
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

/// Writes one YAML file per CRD into `dir`, creating it if needed.
pub fn write_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, yaml) in files()? {
        std::fs::write(dir.join(name), yaml)?;
    }
    Ok(())
}

/// `(file name, Helm template)` per CRD, for the chart's `templates/crds/`. Helm installs
/// `crds/` once and never upgrades it, so the chart ships its CRDs as templates: installed
/// only with `crds.install`, and with `crds.keep` annotated `helm.sh/resource-policy: keep`
/// so an uninstall leaves them (and with them every custom resource) in place.
pub fn chart_templates() -> anyhow::Result<Vec<(String, String)>> {
    files()?
        .into_iter()
        .map(|(name, yaml)| Ok((name, chart_template(&yaml)?)))
        .collect()
}

/// One CRD's YAML as a chart template (see [`chart_templates`]).
fn chart_template(yaml: &str) -> anyhow::Result<String> {
    // Text that looks like a template action (a rule's `{{username}}`) is printed as is.
    let escaped = yaml.replace("{{", "{{ \"{{\" }}");
    let (head, rest) = escaped
        .split_once("\nmetadata:\n")
        .ok_or_else(|| anyhow::anyhow!("a CRD's YAML has no top-level metadata"))?;
    let mut t = String::new();
    t.push_str("{{- /* Generated by `quartet crd --chart charts/quartet/templates/crds`: do not edit. */}}\n");
    t.push_str("{{- if .Values.crds.install }}\n");
    t.push_str(head);
    t.push_str("\nmetadata:\n");
    t.push_str("  {{- if .Values.crds.keep }}\n");
    t.push_str("  annotations:\n    helm.sh/resource-policy: keep\n");
    t.push_str("  {{- end }}\n");
    t.push_str("  labels:\n    {{- include \"quartet.labels\" . | nindent 4 }}\n");
    t.push_str(rest);
    t.push_str("{{- end }}\n");
    Ok(t)
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

#[derive(Args, Debug)]
// The arguments of `quartet crd` (no doc comment: clap would print it in --help).
#[allow(missing_docs)]
pub struct CrdArgs {
    /// Write one file per CRD into this directory instead of printing.
    #[arg(long)]
    pub out: Vec<PathBuf>,
    /// Write one Helm template per CRD into this directory (the chart's `templates/crds`),
    /// installed with `crds.install` and kept on uninstall with `crds.keep`.
    #[arg(long)]
    pub chart: Vec<PathBuf>,
    /// Print each CRD's CEL rule costs as kube-apiserver 1.36 estimates them, against its
    /// limits; fail when a rule is over the per-rule limit or a CRD's rules use half or more
    /// of the whole-schema budget. Needs the `sandbox` feature (the estimator lives there).
    #[arg(long, conflicts_with_all = ["out", "chart"])]
    pub check: bool,
}

/// `quartet crd`: prints the CRDs or writes them as files or chart templates (`--check`: prices
/// their CEL rules instead).
pub fn crd(args: CrdArgs) -> anyhow::Result<()> {
    if args.check {
        return check();
    }
    if args.out.is_empty() && args.chart.is_empty() {
        print!("{}", yaml_stream()?);
        return Ok(());
    }
    for dir in &args.out {
        write_dir(dir)?;
    }
    for dir in &args.chart {
        std::fs::create_dir_all(dir)?;
        for (name, yaml) in chart_templates()? {
            std::fs::write(dir.join(name), yaml)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{finish_schema, reflow, DEFAULT_MAX_ITEMS, DEFAULT_MAX_LENGTH};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

    fn schema(v: serde_json::Value) -> JSONSchemaProps {
        serde_json::from_value(v).expect("a schema")
    }

    #[test]
    fn integer_formats_become_the_two_kubernetes_knows() {
        let mut s = schema(serde_json::json!({"type": "object", "properties": {
            "a": {"type": "integer", "format": "uint32"},
            "b": {"type": "integer", "format": "uint8"},
            "c": {"type": "integer", "format": "int64"},
            "d": {"type": "number", "format": "double"},
            "e": {"type": "number", "format": "decimal"},
            "f": {"type": "string", "format": "date-time"},
        }}));
        finish_schema(&mut s);
        let p = s.properties.unwrap();
        let fmt = |k: &str| p[k].format.clone();
        assert_eq!(fmt("a").as_deref(), Some("int64"));
        assert_eq!(fmt("b").as_deref(), Some("int32"));
        assert_eq!(fmt("c").as_deref(), Some("int64"));
        assert_eq!(fmt("d").as_deref(), Some("double"));
        assert_eq!(fmt("e"), None);
        assert_eq!(fmt("f").as_deref(), Some("date-time"));
        assert_eq!(
            p["f"].max_length, None,
            "a date-time is priced from its format"
        );
    }

    #[test]
    fn unbounded_strings_lists_and_maps_get_a_bound_stated_once_in_their_description() {
        let mut s = schema(serde_json::json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "Name.", "maxLength": 90},
            "note": {"type": "string", "description": "Free text."},
            "tags": {"type": "array", "description": "Tags, at most 100.", "maxItems": 100,
                     "items": {"type": "string", "maxLength": 255}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "mode": {"type": "string", "enum": ["a", "b"]},
        }}));
        finish_schema(&mut s);
        let p = s.properties.unwrap();
        let d = |k: &str| p[k].description.clone().unwrap_or_default();
        assert_eq!(d("name"), "Name. At most 90 characters.");
        assert_eq!(p["note"].max_length, Some(DEFAULT_MAX_LENGTH));
        assert_eq!(
            d("note"),
            format!("Free text. At most {DEFAULT_MAX_LENGTH} characters.")
        );
        assert_eq!(d("tags"), "Tags, at most 100. Each at most 255 characters.");
        assert_eq!(p["labels"].max_properties, Some(DEFAULT_MAX_ITEMS));
        assert_eq!(
            d("labels"),
            format!("At most {DEFAULT_MAX_ITEMS} entries. Values at most {DEFAULT_MAX_LENGTH} characters.")
        );
        assert_eq!(p["mode"].max_length, None);
        assert!(p["mode"].description.is_none());
    }

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
