//! The subset of Kubernetes JSONPath (`k8s.io/client-go/util/jsonpath`) that
//! `additionalPrinterColumns` use: `.a.b`, `['a']`, `[0]`, `[-1]`, `[*]`, `..a` and filters
//! `[?(@.type=="Ready")]` (`==`, `!=`, `<`, `<=`, `>`, `>=`, or existence).

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Segment {
    Field(String),
    Index(i64),
    Wildcard,
    Recursive(String),
    Filter {
        path: Vec<Segment>,
        op: Option<(String, Value)>,
    },
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ParseError(pub String);

/// Parses `.status.conditions[?(@.type=="Ready")].status` (optionally wrapped in `{}`).
pub(crate) fn parse(input: &str) -> Result<Vec<Segment>, ParseError> {
    let mut s = input.trim();
    if let Some(inner) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        s = inner.trim();
    }
    if let Some(rest) = s.strip_prefix('$') {
        s = rest;
    }
    let chars: Vec<char> = s.chars().collect();
    let (segs, end) = parse_segments(&chars, 0, false)?;
    if end != chars.len() {
        return Err(ParseError(format!("unexpected character at {end}")));
    }
    Ok(segs)
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '/'
}

fn parse_segments(
    c: &[char],
    mut i: usize,
    in_filter: bool,
) -> Result<(Vec<Segment>, usize), ParseError> {
    let mut out = Vec::new();
    while i < c.len() {
        match c[i] {
            '.' if c.get(i + 1) == Some(&'.') => {
                let start = i + 2;
                let mut j = start;
                while j < c.len() && is_name_char(c[j]) {
                    j += 1;
                }
                if j == start {
                    return Err(ParseError("empty recursive name".into()));
                }
                out.push(Segment::Recursive(c[start..j].iter().collect()));
                i = j;
            }
            '.' => {
                let start = i + 1;
                if c.get(start) == Some(&'*') {
                    out.push(Segment::Wildcard);
                    i = start + 1;
                    continue;
                }
                let mut j = start;
                while j < c.len() && is_name_char(c[j]) {
                    j += 1;
                }
                if j > start {
                    out.push(Segment::Field(c[start..j].iter().collect()));
                }
                i = j;
            }
            '[' => {
                let close = find_close(c, i)?;
                let inner: String = c[i + 1..close].iter().collect();
                out.push(parse_bracket(inner.trim())?);
                i = close + 1;
            }
            _ if in_filter => break,
            other => return Err(ParseError(format!("unrecognized character {other:?}"))),
        }
    }
    Ok((out, i))
}

fn find_close(c: &[char], open: usize) -> Result<usize, ParseError> {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    for (j, ch) in c.iter().enumerate().skip(open) {
        match (quote, *ch) {
            (Some(q), x) if x == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(*ch),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
            _ => {}
        }
    }
    Err(ParseError("unterminated [".into()))
}

fn unquote(s: &str) -> Option<String> {
    let s = s.trim();
    if s.len() >= 2
        && ((s.starts_with('\'') && s.ends_with('\'')) || (s.starts_with('"') && s.ends_with('"')))
    {
        Some(s[1..s.len() - 1].to_string())
    } else {
        None
    }
}

fn parse_bracket(inner: &str) -> Result<Segment, ParseError> {
    if inner == "*" {
        return Ok(Segment::Wildcard);
    }
    if let Some(name) = unquote(inner) {
        return Ok(Segment::Field(name));
    }
    if let Ok(n) = inner.parse::<i64>() {
        return Ok(Segment::Index(n));
    }
    if let Some(f) = inner.strip_prefix('?') {
        let f = f.trim();
        let f = f
            .strip_prefix('(')
            .and_then(|x| x.strip_suffix(')'))
            .unwrap_or(f)
            .trim();
        let f = f
            .strip_prefix('@')
            .ok_or_else(|| ParseError("filter must start with @".into()))?;
        let chars: Vec<char> = f.chars().collect();
        let (path, end) = parse_segments(&chars, 0, true)?;
        let rest: String = chars[end..].iter().collect();
        let rest = rest.trim();
        if rest.is_empty() {
            return Ok(Segment::Filter { path, op: None });
        }
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if let Some(lit) = rest.strip_prefix(op) {
                let lit = lit.trim();
                let value = match unquote(lit) {
                    Some(s) => Value::String(s),
                    None => serde_json::from_str(lit)
                        .map_err(|_| ParseError(format!("bad literal {lit}")))?,
                };
                return Ok(Segment::Filter {
                    path,
                    op: Some((op.to_string(), value)),
                });
            }
        }
        return Err(ParseError(format!("unsupported filter {rest}")));
    }
    Err(ParseError(format!("unsupported [{inner}]")))
}

fn compare(a: &Value, op: &str, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            match op {
                "==" => x == y,
                "!=" => x != y,
                "<" => x < y,
                "<=" => x <= y,
                ">" => x > y,
                ">=" => x >= y,
                _ => false,
            }
        }
        (Value::String(x), Value::String(y)) => match op {
            "==" => x == y,
            "!=" => x != y,
            "<" => x < y,
            "<=" => x <= y,
            ">" => x > y,
            ">=" => x >= y,
            _ => false,
        },
        _ => match op {
            "==" => a == b,
            "!=" => a != b,
            _ => false,
        },
    }
}

fn recurse<'a>(v: &'a Value, name: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            if let Some(x) = m.get(name) {
                out.push(x);
            }
            for x in m.values() {
                recurse(x, name, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                recurse(x, name, out);
            }
        }
        _ => {}
    }
}

/// All values the path selects (empty when a key is missing, as with kube's error case).
pub(crate) fn find<'a>(segments: &[Segment], root: &'a Value) -> Vec<&'a Value> {
    let mut cur: Vec<&'a Value> = vec![root];
    for seg in segments {
        let mut next = Vec::new();
        for v in cur {
            match seg {
                Segment::Field(name) => {
                    if let Some(x) = v.get(name.as_str()) {
                        next.push(x);
                    }
                }
                Segment::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                        if idx >= 0 {
                            if let Some(x) = a.get(idx as usize) {
                                next.push(x);
                            }
                        }
                    }
                }
                Segment::Wildcard => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Segment::Recursive(name) => recurse(v, name, &mut next),
                Segment::Filter { path, op } => {
                    if let Some(a) = v.as_array() {
                        for item in a {
                            let found = find(path, item);
                            let keep = match op {
                                None => !found.is_empty(),
                                Some((op, lit)) => {
                                    found.first().is_some_and(|x| compare(x, op, lit))
                                }
                            };
                            if keep {
                                next.push(item);
                            }
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur
}
