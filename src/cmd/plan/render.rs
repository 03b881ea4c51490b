//! The three shapes of a plan: a table for people, Markdown for a pull-request comment, JSON
//! for programs. None of them ever holds a write-only value: [`super::Change::sensitive`]
//! entries carry no value to print.

use std::fmt::Write;

use super::{Change, Entry, Outcome, Plan};

/// `N to create, N to update, N to adopt, N to delete, N unchanged` (and blocked, when any).
pub fn summary(plan: &Plan) -> String {
    let s = &plan.summary;
    let mut line = format!(
        "{} to create, {} to update, {} to adopt, {} to delete, {} unchanged",
        s.create, s.update, s.adopt, s.delete, s.unchanged
    );
    if s.blocked > 0 {
        let _ = write!(line, ", {} blocked", s.blocked);
    }
    line
}

fn sign(o: Outcome) -> char {
    match o {
        Outcome::Create => '+',
        Outcome::Update => '~',
        Outcome::Adopt => '>',
        Outcome::NoChange => '=',
        Outcome::Blocked => '!',
        Outcome::Delete => '-',
    }
}

fn title(e: &Entry) -> String {
    let mut t = format!(
        "{} {} {}/{}",
        e.outcome.as_str(),
        e.kind,
        e.namespace,
        e.name
    );
    if let Some(p) = &e.deletion_policy {
        let _ = write!(t, " (deletionPolicy {p})");
    }
    t
}

/// The lines under a resource: changed fields, triggers, destructive effects, the message.
fn details(e: &Entry) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(m) = &e.message {
        out.push(m.clone());
    }
    for c in &e.changes {
        out.extend(change_lines(c));
    }
    for t in &e.triggers {
        out.push(format!("triggers: {t}"));
    }
    for d in &e.destructive {
        out.push(format!("DESTRUCTIVE: {d}"));
    }
    out
}

fn change_lines(c: &Change) -> Vec<String> {
    if let Some(s) = c.sensitive {
        return vec![format!("{}: (sensitive: {s})", c.field)];
    }
    match (&c.old, &c.new) {
        (Some(old), Some(new)) if old.contains('\n') || new.contains('\n') => {
            let mut v = vec![format!("{}:", c.field)];
            v.extend(old.lines().map(|l| format!("  - {l}")));
            v.extend(new.lines().map(|l| format!("  + {l}")));
            v
        }
        (old, new) if old.is_some() || new.is_some() => vec![format!(
            "{}: {} → {}",
            c.field,
            quoted(old.as_deref()),
            quoted(new.as_deref())
        )],
        _ => vec![format!("{}: changed", c.field)],
    }
}

fn quoted(v: Option<&str>) -> String {
    match v {
        None => "(unset)".into(),
        Some(s) => format!("{s:?}"),
    }
}

/// The plan as a table for people: one line per resource, its details indented under it, then the
/// summary.
pub fn table(plan: &Plan) -> String {
    let mut out = String::new();
    if plan.resources.is_empty() {
        out.push_str("No Quartet resources in the manifests.\n");
    }
    for e in &plan.resources {
        let _ = writeln!(out, "{} {}", sign(e.outcome), title(e));
        for l in details(e) {
            let _ = writeln!(out, "      {l}");
        }
    }
    let _ = writeln!(out, "\nPlan: {}.", summary(plan));
    out
}

/// The plan as Markdown, for a pull-request comment.
pub fn markdown(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "**Quartet plan:** {}\n", summary(plan));
    for e in &plan.resources {
        let lines = details(e);
        if lines.is_empty() {
            let _ = writeln!(out, "- `{}` {}", sign(e.outcome), title(e));
            continue;
        }
        let _ = writeln!(
            out,
            "<details><summary><code>{}</code> {}</summary>\n\n```\n{}\n```\n</details>\n",
            sign(e.outcome),
            html_escape(&title(e)),
            lines.join("\n").replace("```", "'''")
        );
    }
    out
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The plan as pretty-printed JSON, one line at the end.
pub fn json(plan: &Plan) -> String {
    let mut s = serde_json::to_string_pretty(plan).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sensitive_change_prints_no_value() {
        let c = Change {
            field: "write-only fields".into(),
            sensitive: Some("would be sent"),
            ..Default::default()
        };
        assert_eq!(
            change_lines(&c),
            vec!["write-only fields: (sensitive: would be sent)"]
        );
    }

    #[test]
    fn a_change_shows_old_and_new() {
        let c = Change {
            field: "description".into(),
            old: Some("a".into()),
            new: Some("b".into()),
            sensitive: None,
        };
        assert_eq!(change_lines(&c), vec![r#"description: "a" → "b""#]);
    }
}
