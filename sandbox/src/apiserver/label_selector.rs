//! Label selectors, read as kube's `labels.Parse` reads them: its lexer (identifiers are runs
//! of anything but whitespace and `=!(),<>`; operators are the longest run of those that is
//! one), its recursive-descent parser with its error messages, key and value validation, and
//! its matching (`in`, `notin`, `=`, `==`, `!=`, `>`, `<`, existence and `!`).
//!
//! The wording of every error is the real server's, so a bad `?labelSelector=` is refused with
//! the 400 a cluster gives (checked against apimachinery's own parser over thousands of
//! selectors, see docs/sandbox.md).

use std::collections::BTreeSet;

use serde_json::Value;

use super::error::ApiError;
use super::schema::{go_quote, label_key_errors, label_value_errors};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    Greater,
    Ident,
    In,
    Less,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The token a literal is, if any (everything else is an identifier).
fn keyword(lit: &[u8]) -> Option<Tok> {
    Some(match lit {
        b")" => Tok::ClosedPar,
        b"," => Tok::Comma,
        b"!" => Tok::DoesNotExist,
        b"==" => Tok::DoubleEquals,
        b"=" => Tok::Equals,
        b">" => Tok::Greater,
        b"in" => Tok::In,
        b"<" => Tok::Less,
        b"!=" => Tok::NotEquals,
        b"notin" => Tok::NotIn,
        b"(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// kube's lexer reads a byte at a time and takes `0` for the end, so a NUL byte inside the
/// input ends a token (or, where a token would start, the selector) just as the end does.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos -= 1;
    }

    fn lex(&mut self) -> (Tok, String) {
        let mut b = self.read();
        while is_space(b) {
            b = self.read();
        }
        if b == 0 {
            return (Tok::End, String::new());
        }
        self.unread();
        let mut buf = Vec::new();
        if is_special(b) {
            // Grow the operator while it stays one; the byte that spoils it is left.
            let mut last = None;
            loop {
                let b = self.read();
                if b == 0 {
                    break;
                }
                if !is_special(b) {
                    self.unread();
                    break;
                }
                buf.push(b);
                match keyword(&buf) {
                    Some(t) => last = Some((t, buf.clone())),
                    None if last.is_some() => {
                        self.unread();
                        break;
                    }
                    None => {}
                }
            }
            // Every single special byte is an operator, so `last` is set.
            let (t, lit) = last.unwrap_or((Tok::End, Vec::new()));
            return (t, String::from_utf8_lossy(&lit).into_owned());
        }
        loop {
            let b = self.read();
            if b == 0 {
                break;
            }
            if is_special(b) || is_space(b) {
                self.unread();
                break;
            }
            buf.push(b);
        }
        let tok = keyword(&buf).unwrap_or(Tok::Ident);
        (tok, String::from_utf8_lossy(&buf).into_owned())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Exists,
    DoesNotExist,
    In,
    NotIn,
    Equals,
    NotEquals,
    Greater,
    Less,
}

#[derive(Clone, Debug)]
struct Requirement {
    key: String,
    op: Op,
    /// Sorted and without repeats, as kube's string set lists them.
    values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &Value) -> bool {
        let got = labels.get(&self.key).and_then(Value::as_str);
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.op {
            Op::Exists => got.is_some(),
            Op::DoesNotExist => got.is_none(),
            Op::In | Op::Equals => got.is_some_and(has),
            Op::NotIn | Op::NotEquals => got.is_none_or(|v| !has(v)),
            Op::Greater | Op::Less => {
                let (Some(Ok(got)), [want]) = (got.map(str::parse::<i64>), self.values.as_slice())
                else {
                    return false;
                };
                let Ok(want) = want.parse::<i64>() else {
                    return false;
                };
                if self.op == Op::Greater {
                    got > want
                } else {
                    got < want
                }
            }
        }
    }
}

/// `NewRequirement`'s checks of the values the parser gives it, as one aggregate message.
fn new_requirement(key: String, op: Op, values: Vec<String>) -> Result<Requirement, String> {
    let mut errs: Vec<String> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        if matches!(op, Op::Greater | Op::Less) && v.parse::<i64>().is_err() {
            errs.push(format!(
                "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                go_quote(v)
            ));
        }
    }
    for (i, v) in values.iter().enumerate() {
        let bad = label_value_errors(v);
        if !bad.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(v),
                bad.join("; ")
            ));
        }
    }
    errs.dedup();
    match errs.len() {
        0 => Ok(Requirement { key, op, values }),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

/// Where a token is read: among values `in` and `notin` are identifiers (`x in (in)`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

impl Parser {
    fn look(&self, ctx: Context) -> (Tok, &str) {
        let (t, lit) = &self.items[self.pos.min(self.items.len() - 1)];
        let t = match t {
            Tok::In | Tok::NotIn if ctx == Context::Values => Tok::Ident,
            t => *t,
        };
        (t, lit.as_str())
    }

    fn take(&mut self, ctx: Context) -> (Tok, String) {
        let (t, lit) = self.look(ctx);
        let lit = lit.to_string();
        self.pos += 1;
        (t, lit)
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (t, lit) = self.look(Context::Values);
            match t {
                Tok::Ident | Tok::DoesNotExist => {
                    reqs.push(
                        self.requirement()
                            .map_err(|e| format!("unable to parse requirement: {e}"))?,
                    );
                    let (t, lit) = self.take(Context::Values);
                    match t {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, lit2) = self.look(Context::Values);
                            if t2 != Tok::Ident && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{lit2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{lit}', expected: ',' or 'end of string'"))
                        }
                    }
                }
                Tok::End => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ))
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.key_and_inferred_operator()?;
        if let Some(op) = inferred {
            return new_requirement(key, op, Vec::new());
        }
        let (t, lit) = self.take(Context::KeyAndOperator);
        let op = match t {
            Tok::In => Op::In,
            Tok::Equals | Tok::DoubleEquals => Op::Equals,
            Tok::Greater => Op::Greater,
            Tok::Less => Op::Less,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ))
            }
        };
        let values = match op {
            Op::In | Op::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        new_requirement(key, op, values.into_iter().collect())
    }

    /// The key, and `Exists` or `DoesNotExist` when nothing but the end or a comma follows it
    /// (a `!key` followed by more keeps `DoesNotExist`, and the caller stumbles on the rest).
    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let (mut t, mut lit) = self.take(Context::Values);
        let mut op = None;
        if t == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (t, lit) = self.take(Context::Values);
        }
        if t != Tok::Ident {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let bad = label_key_errors(&lit);
        if !bad.is_empty() {
            return Err(format!(
                "<nil>: Invalid value: {}: {}",
                go_quote(&lit),
                bad.join("; ")
            ));
        }
        if matches!(self.look(Context::Values).0, Tok::End | Tok::Comma) && op.is_none() {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn value_set(&mut self) -> Result<BTreeSet<String>, String> {
        let (t, lit) = self.take(Context::Values);
        if t != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (t, lit) = self.look(Context::Values);
        let lit = lit.to_string();
        match t {
            Tok::Ident | Tok::Comma => {
                let set = self.identifiers()?;
                if self.take(Context::Values).0 != Tok::ClosedPar {
                    // kube names the token before the list here.
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::ClosedPar => {
                self.take(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A comma-separated list of possibly empty identifiers (`(,a)`, `(a,,b)`, `(a,)`).
    fn identifiers(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (t, lit) = self.take(Context::Values);
            match t {
                Tok::Ident => {
                    set.insert(lit);
                    match self.look(Context::Values) {
                        (Tok::Comma, _) => continue,
                        (Tok::ClosedPar, _) => return Ok(set),
                        (_, lit2) => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.look(Context::Values).0 {
                        Tok::ClosedPar => {
                            set.insert(String::new());
                            return Ok(set);
                        }
                        Tok::Comma => {
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        if matches!(self.look(Context::Values).0, Tok::End | Tok::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        match self.take(Context::Values) {
            (Tok::Ident, lit) => Ok(BTreeSet::from([lit])),
            (_, lit) => Err(format!("found '{lit}', expected: identifier")),
        }
    }
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses as `labels.Parse`; the error is the 400 a real server gives the selector.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut lexer = Lexer {
            s: s.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let end = item.0 == Tok::End;
            items.push(item);
            if end {
                break;
            }
        }
        let mut reqs = Parser { items, pos: 0 }
            .parse()
            .map_err(ApiError::bad_request)?;
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self(reqs))
    }

    pub fn matches(&self, labels: &Value) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(s: &str) -> String {
        LabelSelector::parse(s).unwrap_err().message
    }

    #[test]
    fn operators_are_the_longest_run_of_symbols_that_is_one() {
        let sel = LabelSelector::parse("a!=1,b==2,c>3,d<4,!e").unwrap();
        assert!(sel.matches(&json!({"a": "2", "b": "2", "c": "10", "d": "-1"})));
        assert!(!sel.matches(&json!({"a": "2", "b": "2", "c": "3", "d": "-1"})));
        assert_eq!(
            error("a=!1"),
            "unable to parse requirement: found '!', expected: identifier"
        );
    }

    #[test]
    fn in_and_notin_are_identifiers_among_values() {
        let sel = LabelSelector::parse("in in (in,notin)").unwrap();
        assert!(sel.matches(&json!({"in": "notin"})));
        assert!(LabelSelector::parse("b in ()")
            .unwrap()
            .matches(&json!({"b": ""})));
    }

    #[test]
    fn errors_are_worded_as_kube_words_them() {
        assert_eq!(
            error("a gt 1"),
            "unable to parse requirement: found 'gt', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(error("a=1,,b"), "found ',', expected: identifier after ','");
        assert_eq!(
            error("a in (x y)"),
            "unable to parse requirement: found 'y', expected: ',' or ')'"
        );
        assert!(error("a>x.").starts_with("unable to parse requirement: [values[0]: Invalid value: \"x.\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][a]: Invalid value: \"x.\": "));
    }
}
