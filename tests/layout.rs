//! The source tree keeps the shape `docs/layout.md` describes: the top-level modules form layers
//! that only use the layers below them (so no import cycle), no subcommand imports the parser of
//! `cmd/mod.rs`, and each service has the same module names in `api/`, `clients/` and `kinds/`
//! (and in the sandbox). Every file of the library and of the sandbox opens with a module doc.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, lowest first: a module may use itself and the modules before it.
const LAYERS: [&str; 10] = [
    "api",
    "metrics",
    "traces",
    "shard",
    "changes",
    "clients",
    "reconcile",
    "kinds",
    "runtime",
    "cmd",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Code lines only: comments (doc links name other modules freely) are left out.
fn code(path: &Path) -> String {
    std::fs::read_to_string(path)
        .expect("a source file")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment of every `crate::` path in `text`.
fn crate_uses(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        if text[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        let name: String = text[i + "crate::".len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

fn top_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("a file under src/");
    let first = rel.components().next().expect("a path");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

#[test]
fn each_top_level_module_uses_only_the_layers_below_it() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let top = top_module(&src, file);
        if top == "lib" || top == "main" {
            continue;
        }
        let Some(level) = LAYERS.iter().position(|l| *l == top) else {
            wrong.push(format!(
                "{}: `{top}` is in no layer of this test and docs/layout.md",
                file.display()
            ));
            continue;
        };
        for used in crate_uses(&code(file)) {
            match LAYERS.iter().position(|l| *l == used) {
                Some(u) if u <= level => {}
                Some(_) => wrong.push(format!(
                    "{}: `{top}` uses `crate::{used}`, a layer above it",
                    file.display()
                )),
                None => wrong.push(format!(
                    "{}: `crate::{used}` is in no layer",
                    file.display()
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_subcommand_imports_the_parser() {
    let cmd = root().join("src/cmd");
    let mut files = Vec::new();
    rust_files(&cmd, &mut files);
    let mut wrong = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("cmd/mod.rs")) {
        let text = code(file);
        // The parser's items are `crate::cmd::Cli`, `Command`, `main`, ...: a command reaches
        // other commands only through their own modules (`crate::cmd::run::...`).
        for (i, _) in text.match_indices("crate::cmd::") {
            let rest = &text[i + "crate::cmd::".len()..];
            if rest.starts_with(|c: char| c.is_uppercase()) || rest.starts_with("main") {
                wrong.push(format!("{}: uses the parser", file.display()));
            }
        }
        let in_cmd_root = file.parent() == Some(cmd.as_path());
        if in_cmd_root && (text.contains("super::Cli") || text.contains("super::Command")) {
            wrong.push(format!("{}: uses the parser", file.display()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Module names (files and folders) directly under `dir`, `mod.rs` left out.
fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let name = e.expect("a directory entry").file_name();
            name.to_string_lossy().trim_end_matches(".rs").to_string()
        })
        .filter(|n| n != "mod")
        .collect()
}

#[test]
fn each_service_has_the_same_module_names_in_every_layer() {
    let src = root().join("src");
    let services: BTreeSet<String> = ["catalog", "scheduler", "secrets", "workspaces"]
        .map(String::from)
        .into();
    for layer in ["api", "clients", "kinds"] {
        let dir = src.join(layer);
        for service in &services {
            assert!(
                dir.join(service).join("mod.rs").exists(),
                "src/{layer}/{service}/mod.rs is missing: every layer has one folder per service"
            );
        }
    }
    // The secrets engines: the kinds and their types go by the same names; a client exists for
    // each engine with calls of its own (policies are among the core calls of the service's
    // client), plus the Connection's login.
    let api = names(&src.join("api/secrets"));
    let kinds = names(&src.join("kinds/secrets"));
    assert_eq!(
        api, kinds,
        "src/api/secrets and src/kinds/secrets name different engines"
    );
    let clients = names(&src.join("clients/secrets"));
    let extra: Vec<_> = clients.difference(&api).filter(|n| *n != "login").collect();
    assert!(
        extra.is_empty(),
        "src/clients/secrets has engines the other layers lack: {extra:?}"
    );
    let sandbox = names(&root().join("sandbox/src/secrets"));
    let missing: Vec<_> = api.difference(&sandbox).collect();
    assert!(
        missing.is_empty(),
        "sandbox/src/secrets lacks engines named {missing:?}"
    );
    for (layer, service) in [("api", "workspaces"), ("kinds", "workspaces")] {
        let here = names(&src.join(layer).join(service));
        let sandbox = names(&root().join("sandbox/src").join(service));
        for n in ["nocode", "run", "workspace"] {
            assert!(here.contains(n), "src/{layer}/{service} has no `{n}`");
            assert!(sandbox.contains(n), "sandbox/src/{service} has no `{n}`");
        }
    }
}

/// The module doc of a file: its leading `//!` lines, inner attributes and blank lines skipped.
fn module_doc(path: &Path) -> String {
    std::fs::read_to_string(path)
        .expect("a source file")
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty() || l.starts_with("#!["))
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").trim())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_source_file_opens_with_a_module_doc_saying_what_it_is_for() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    rust_files(&root().join("sandbox/src"), &mut files);
    let missing: Vec<_> = files
        .iter()
        // A few words at least: a file's name re-worded is not what it is for.
        .filter(|f| module_doc(f).split_whitespace().count() < 4)
        .map(|f| f.strip_prefix(root()).unwrap_or(f).display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not open with a module doc (`//!`, a sentence on what the file is for): \
         {missing:?}"
    );
}
