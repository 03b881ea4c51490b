//! Label selectors (`a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`) and field selectors
//! (`metadata.name=x`, `metadata.namespace!=y`, plus a few per-kind fields).

use serde_json::Value;

use super::error::ApiError;

#[derive(Clone, Debug)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default)]
pub struct LabelSelector(Vec<Req>);

/// Split on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn set_values(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let bad = || {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{s}', expected: valid label selector"
            ))
        };
        let mut reqs = Vec::new();
        for part in split_top(s) {
            if let Some(k) = part.strip_prefix('!') {
                reqs.push(Req::NotExists(k.trim().to_string()));
            } else if let Some((k, v)) = part.split_once("!=") {
                reqs.push(Req::Ne(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = part.split_once("==") {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = part.split_once('=') {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some(i) = part.find(" notin ") {
                reqs.push(Req::NotIn(
                    part[..i].trim().into(),
                    set_values(&part[i + 7..]).ok_or_else(bad)?,
                ));
            } else if let Some(i) = part.find(" in ") {
                reqs.push(Req::In(
                    part[..i].trim().into(),
                    set_values(&part[i + 4..]).ok_or_else(bad)?,
                ));
            } else if part.contains(char::is_whitespace) || part.contains('(') {
                return Err(bad());
            } else {
                reqs.push(Req::Exists(part));
            }
        }
        Ok(Self(reqs))
    }

    pub fn matches(&self, labels: &Value) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: `(path, negated, value)` terms.
#[derive(Clone, Debug, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// `allowed` lists the extra fields this resource supports besides metadata.name/namespace.
    pub fn parse(s: &str, allowed: &[&str]) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for part in split_top(s) {
            let (k, neg, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, false, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let k = k.trim();
            if k != "metadata.name" && k != "metadata.namespace" && !allowed.contains(&k) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {k}"
                )));
            }
            terms.push((k.to_string(), neg, v.trim().to_string()));
        }
        Ok(Self(terms))
    }

    /// Map field paths to where they are stored.
    pub fn rename(&mut self, f: impl Fn(&str) -> String) {
        for t in &mut self.0 {
            t.0 = f(&t.0);
        }
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, neg, want)| {
            let mut cur = obj;
            for seg in path.split('.') {
                cur = &cur[seg];
            }
            let got = match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (got == *want) != *neg
        })
    }
}

/// Extra field selectors the real server supports for the built-in kinds we serve.
pub fn allowed_fields(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "reportingController",
            "type",
        ],
        _ => &[],
    }
}
