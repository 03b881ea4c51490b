//! The docs are tested like code: every fenced block of `README.md`, `CONTRIBUTING.md` and
//! `docs/**/*.md` that a reader would run is checked against the real thing, and every relative
//! link resolves.
//!
//! - A ```` ```yaml ```` block preceded by `<!-- file: PATH -->` is that file (under `examples/`
//!   or `charts/`, which other tests apply) or one of its documents, character for character
//!   (comment lines heading a document aside); any other ```` ```yaml ```` block is applied with
//!   `kubectl apply --dry-run=server` to the dev API server with the CRDs installed, except that
//!   a block preceded by `<!-- chart values -->` is rendered by the real `helm template` with the
//!   chart of `charts/quartet` (it must render), and one preceded by `<!-- fragment -->` (a part
//!   of a resource, e.g. its `spec.connectionRef`) must only parse.
//! - In a ```` ```sh ```` / ```` ```console ```` block, each `quartet ...` or
//!   `cargo run ... -- ...` command is parsed by the real binary with `--help` appended, and the
//!   commands that change nothing (`quartet crd --check`) are run as written.
//! - ```` ```json ```` blocks parse; ```` ```text ````, ```` ```markdown ```` and
//!   ```` ```mermaid ```` blocks are not run; a block without a language is refused, so a
//!   reader's command cannot hide in one.
//!
//! Each failure is a sentence naming the file, the line and the block.

use crate::support;
use crate::support::helm as helm_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

/// The languages a block may be marked with, and whether the test runs it.
const LANGUAGES: [&str; 8] = [
    "yaml", "sh", "console", "json", "text", "markdown", "mermaid", "bash",
];

/// One fenced block: where it is, its language, the HTML comment right before it, its text.
struct Block {
    file: String,
    line: usize,
    lang: String,
    marker: Option<String>,
    body: String,
}

impl Block {
    fn at(&self) -> String {
        format!(
            "{} line {}: the ```{} block",
            self.file, self.line, self.lang
        )
    }
}

/// README.md, CONTRIBUTING.md and every page under docs/, as paths relative to the repository.
fn pages() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let root = repo_root();
    let mut found = Vec::new();
    walk(&root.join("docs"), &mut found);
    let mut pages: Vec<String> = found
        .iter()
        .map(|p| p.strip_prefix(&root).unwrap().to_str().unwrap().to_string())
        .collect();
    pages.sort();
    pages.insert(0, "CONTRIBUTING.md".into());
    pages.insert(0, "README.md".into());
    pages
}

fn read(page: &str) -> String {
    std::fs::read_to_string(repo_root().join(page))
        .unwrap_or_else(|e| panic!("{page} cannot be read: {e}"))
}

/// A fence line (indented or not, as in a list item): its number of backticks and its info
/// string, which holds no backtick (so an inline code span of backticks is not a fence).
fn fence(line: &str) -> Option<(usize, &str)> {
    let l = line.trim();
    let ticks = l.len() - l.trim_start_matches('`').len();
    let info = l[ticks..].trim();
    (ticks >= 3 && !info.contains('`')).then_some((ticks, info))
}

/// The fenced blocks of a page (CommonMark fences of three or more backticks; a longer fence may
/// hold shorter ones, which belong to it).
fn blocks(page: &str) -> Vec<Block> {
    let text = read(page);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some((ticks, lang)) = fence(lines[i]) {
            let lang = lang.to_string();
            let indent = lines[i].len() - lines[i].trim_start().len();
            let marker = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .filter(|l| l.trim_start().starts_with("<!--"))
                .map(|l| l.trim().to_string());
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() {
                if fence(lines[i]).is_some_and(|(n, info)| n >= ticks && info.is_empty()) {
                    break;
                }
                let l = lines[i];
                let spaces = (l.len() - l.trim_start().len()).min(indent);
                body.push(&l[spaces..]);
                i += 1;
            }
            assert!(
                i < lines.len(),
                "{page} line {}: the ```{lang} block is never closed",
                start + 1
            );
            out.push(Block {
                file: page.to_string(),
                line: start + 1,
                lang,
                marker,
                body: body.join("\n") + "\n",
            });
        }
        i += 1;
    }
    out
}

fn all_blocks() -> Vec<Block> {
    pages().iter().flat_map(|p| blocks(p)).collect()
}

#[test]
fn every_block_names_a_known_language_and_json_blocks_parse() {
    let mut problems = Vec::new();
    for b in all_blocks() {
        if !LANGUAGES.contains(&b.lang.as_str()) {
            problems.push(format!(
                "{}: a block must say what it is (one of {LANGUAGES:?}; ```text for one not to be run)",
                b.at()
            ));
        }
        if b.lang == "json" {
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&b.body) {
                problems.push(format!("{} is not JSON: {e}", b.at()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The documents of a YAML file, each with its heading comment lines removed and trailing
/// whitespace trimmed, and the whole file trimmed the same way.
fn yaml_documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else {
            let d = docs.last_mut().unwrap();
            d.push_str(line.trim_end());
            d.push('\n');
        }
    }
    let strip = |d: &str| {
        d.lines()
            .skip_while(|l| l.starts_with('#') || l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_string()
    };
    let mut all: Vec<String> = docs.iter().map(|d| strip(d)).collect();
    all.push(strip(text));
    all
}

#[test]
fn every_yaml_block_is_an_example_file_or_is_accepted_by_the_api_server() {
    /// `helm template` of the chart with `values`; the reason when it does not render.
    fn chart_renders_with(values: &str) -> Option<String> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("values.yaml");
        std::fs::write(&file, values).expect("the values file");
        let out = Command::new(helm_support::helm_bin())
            .args(["template", "quartet"])
            .arg(repo_root().join("charts/quartet"))
            .arg("--values")
            .arg(&file)
            .env("HELM_CONFIG_HOME", dir.path())
            .env("HELM_CACHE_HOME", dir.path())
            .env("HELM_DATA_HOME", dir.path())
            .output()
            .expect("helm runs");
        (!out.status.success()).then(|| {
            format!(
                "the chart values do not render with `helm template`: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
    }

    let yaml: Vec<Block> = all_blocks()
        .into_iter()
        .filter(|b| b.lang == "yaml")
        .collect();
    assert!(yaml.len() >= 10, "only {} yaml blocks found", yaml.len());
    let mut problems = Vec::new();
    let mut to_apply = Vec::new();
    for b in yaml {
        let named = b.marker.as_deref().and_then(|m| {
            m.strip_prefix("<!-- file:")
                .and_then(|m| m.strip_suffix("-->"))
                .map(|f| f.trim().to_string())
        });
        match b.marker.as_deref() {
            Some("<!-- fragment -->") => {
                if let Err(e) = serde_yaml::from_str::<serde_json::Value>(&b.body) {
                    problems.push(format!("{} is not YAML: {e}", b.at()));
                }
                continue;
            }
            Some("<!-- chart values -->") => {
                if let Some(problem) = chart_renders_with(&b.body) {
                    problems.push(format!("{}: {problem}", b.at()));
                }
                continue;
            }
            _ => {}
        }
        let Some(file) = named else {
            to_apply.push(b);
            continue;
        };
        if !(file.starts_with("examples/") || file.starts_with("charts/")) {
            problems.push(format!(
                "{} names {file}, which is not under examples/ or charts/ (the files the tests apply)",
                b.at()
            ));
            continue;
        }
        let Ok(text) = std::fs::read_to_string(repo_root().join(&file)) else {
            problems.push(format!("{} names {file}, which does not exist", b.at()));
            continue;
        };
        let block = b
            .body
            .lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n");
        if !yaml_documents(&text).contains(&block.trim_end().to_string()) {
            problems.push(format!(
                "{} differs from {file} (it must be the file or one of its documents, as written there)",
                b.at()
            ));
        }
    }

    let sb = Sandbox::start(&[]);
    sb.install_crds();
    let mut namespaces = BTreeSet::new();
    for b in &to_apply {
        for doc in serde_yaml::Deserializer::from_str(&b.body) {
            let v: serde_json::Value = match serde::Deserialize::deserialize(doc) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(format!("{} is not YAML: {e}", b.at()));
                    continue;
                }
            };
            if let Some(ns) = v["metadata"]["namespace"].as_str() {
                namespaces.insert(ns.to_string());
            }
        }
    }
    for ns in namespaces.iter().filter(|n| *n != "default") {
        sb.kubectl_ok(&["create", "namespace", ns]);
    }
    for b in &to_apply {
        let out = kubectl(
            &sb.kubeconfig,
            &["apply", "--dry-run=server", "-f", "-"],
            Some(&b.body),
        );
        if !out.status.success() {
            problems.push(format!(
                "{} was refused by `kubectl apply --dry-run=server` on the dev API server with the CRDs installed: {}",
                b.at(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A command line split as a POSIX shell splits words (quotes, backslashes, comments), stopping
/// at the first operator (`&&`, `|`, `;`, `&`, `>`): the first simple command.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => cur.extend(chars.next()),
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.extend(chars.next());
            }
            '#' if !in_word => break,
            '&' | '|' | ';' | '>' | '<' => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// The `quartet` arguments of a command line, if it runs quartet (directly, after environment
/// assignments, or through `cargo run ... --`); shell expansions become a placeholder.
fn quartet_args(line: &str) -> Option<Vec<String>> {
    let words = shell_words(line);
    let mut rest = words
        .iter()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
        .map(|w| {
            if w.contains('$') {
                "placeholder".to_string()
            } else {
                w.clone()
            }
        });
    let first = rest.next()?;
    let rest: Vec<String> = rest.collect();
    if first == "quartet" {
        return Some(rest);
    }
    if first == "cargo" && rest.first().is_some_and(|w| w == "run") {
        let dash = rest.iter().position(|w| w == "--")?;
        return Some(rest[dash + 1..].to_vec());
    }
    None
}

/// Commands that change nothing and need nothing: run as written.
fn safe_to_run(args: &[String]) -> bool {
    args == ["crd", "--check"] || args == ["crd"] || args == ["--version"]
}

#[test]
fn every_quartet_command_in_a_shell_block_is_accepted_by_the_binary() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for b in all_blocks() {
        if !matches!(b.lang.as_str(), "sh" | "console" | "bash") {
            continue;
        }
        // Continuation lines are one command.
        let joined = b.body.replace("\\\n", " ");
        for line in joined.lines() {
            let line = line.trim().trim_start_matches("$ ");
            let Some(args) = quartet_args(line) else {
                continue;
            };
            checked += 1;
            let run_as_written = safe_to_run(&args);
            let mut cmd = Command::new(BIN);
            cmd.args(&args);
            if !run_as_written {
                cmd.arg("--help");
            }
            let out = cmd
                .env_remove("KUBECONFIG")
                .output()
                .expect("run the quartet binary");
            if !out.status.success() {
                problems.push(format!(
                    "{}: `{line}` {}: {}",
                    b.at(),
                    if run_as_written {
                        "failed"
                    } else {
                        "is not accepted by `quartet` (checked with --help appended)"
                    },
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(checked >= 10, "only {checked} quartet commands found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(page: &str) -> BTreeSet<String> {
    prose_lines(page)
        .into_iter()
        .filter(|(_, l)| l.starts_with('#'))
        .map(|(_, l)| anchor(l.trim_start_matches('#')))
        .collect()
}

/// The lines of a page outside fenced blocks, numbered from 1.
fn prose_lines(page: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence_open = 0;
    for (n, l) in read(page).lines().enumerate() {
        if let Some((ticks, info)) = fence(l) {
            if fence_open == 0 {
                fence_open = ticks;
            } else if ticks >= fence_open && info.is_empty() {
                fence_open = 0;
            }
            continue;
        }
        if fence_open == 0 {
            out.push((n + 1, l.to_string()));
        }
    }
    out
}

/// The `(target)` of every `[text](target)` outside code blocks and inline code, with its line.
fn links(page: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, l) in prose_lines(page) {
        // Inline code spans hold no links.
        let prose: String = l
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_points_to_an_existing_file_and_heading() {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let dir = Path::new(&page).parent().unwrap().to_path_buf();
        for (line, target) in links(&page) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, frag) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                PathBuf::from(&page)
            } else {
                normalize(&dir.join(path))
            };
            let rel = resolved.to_str().unwrap().to_string();
            if !root.join(&resolved).exists() {
                problems.push(format!(
                    "{page} line {line}: the link ({target}) points to {rel}, which does not exist"
                ));
                continue;
            }
            if let Some(f) = frag {
                if rel.ends_with(".md") && !anchors(&rel).contains(f) {
                    problems.push(format!(
                        "{page} line {line}: the link ({target}) names #{f}, which is no heading of {rel}"
                    ));
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} relative links found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `a/b/../c` as `a/c`, relative to the repository.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn the_readme_is_short_links_every_docs_page_and_shows_the_command_ci_runs() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines: keep it at most 200 and move the rest under docs/"
    );

    let linked: BTreeSet<String> = links("README.md")
        .into_iter()
        .map(|(_, t)| t.split('#').next().unwrap().to_string())
        .collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .filter(|p| p.starts_with("docs/") && !linked.contains(p))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md does not link these docs pages (add them to \"Read next\"): {missing:?}"
    );

    // The README's test command is the one `.ci/run` runs, word for word.
    let block = blocks("README.md")
        .into_iter()
        .find(|b| b.body.trim_start().starts_with("cargo test"))
        .expect("README.md shows the command that runs the tests in a ```sh block");
    let command = block.body.trim();
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim_start().starts_with(command)),
        "README.md line {}: the test command `{command}` is not the one .ci/run runs",
        block.line
    );
}

#[test]
fn every_kind_of_the_crds_has_a_section_in_the_docs() {
    // Any page of docs/ may hold it (a kind of the framework, like a ClusterConnection, may live
    // beside the topic it serves), though a service's kinds belong in docs/kinds/<service>.md.
    let mut headings = String::new();
    for page in pages().iter().filter(|p| p.starts_with("docs/")) {
        for (_, l) in prose_lines(page) {
            if l.starts_with('#') {
                headings.push_str(&l);
                headings.push('\n');
            }
        }
    }
    let mut missing = Vec::new();
    for e in std::fs::read_dir(repo_root().join("crds")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let crd: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
        let named = headings
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w == kind);
        if !named {
            missing.push(kind);
        }
    }
    assert!(
        missing.is_empty(),
        "no heading of docs/ names these kinds (give each a section in docs/kinds/<service>.md): {missing:?}"
    );
}
