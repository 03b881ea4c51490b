//! `quartet crd`: the CRDs as YAML, generated from the Rust types (the single source).

use std::path::Path;

use crate::cli::CrdArgs;

/// All CRDs as one multi-document YAML stream.
pub fn yaml_stream() -> anyhow::Result<String> {
    let mut out = String::new();
    for crd in crate::controllers::crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

/// `(file name, YAML)` per CRD: `<plural>.<group>.yaml`.
pub fn files() -> anyhow::Result<Vec<(String, String)>> {
    crate::controllers::crds()
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
