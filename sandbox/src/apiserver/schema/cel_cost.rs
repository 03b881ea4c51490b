//! Static cost of `x-kubernetes-validations` rules, estimated at CRD create and update the way
//! kube-apiserver 1.36 does it, so the dev API server refuses the CRDs a real one refuses.
//!
//! Three layers, each following its Kubernetes source (read, not copied):
//! * **Sizes from the schema** (k8s.io/apiserver `pkg/cel/common/schemas.go`, `SchemaDeclType`):
//!   every schema node becomes a CEL declaration with a maximum size: `maxLength`×4 for strings
//!   (bytes per code point), `maxItems`, `maxProperties`, and when unbounded what fits in the
//!   3 MiB request limit given the smallest serialized item (`estimateMaxStringLengthPerRequest`,
//!   `estimateMaxArrayItemsFromMinSize`, `estimateMaxAdditionalPropertiesFromMinSize`).
//! * **The estimator over the expression** (cel-go `checker/cost.go` at v0.26, the version 1.36
//!   ships): identifiers and selects cost 1, `has()` 0 (Kubernetes sets
//!   `PresenceTestHasCost(false)`), comprehensions cost their range size times the step, string
//!   comparisons and concatenations cost 0.1 per character, `matches` the string times a
//!   quarter of the regex length, `in` on a list its size.
//! * **The Kubernetes library's costs** (k8s.io/apiserver `pkg/cel/library/cost.go`):
//!   `lowerAscii`, `join`, `split`, `replace`, `url`, `quantity`, `indexOf`, ... .
//!
//! A rule's cost is multiplied by how many times its node can occur (the product of the
//! `maxItems`/`maxProperties` above it, or what fits in a request when one is unbounded:
//! apiextensions' `CELSchemaContext` and `maxCardinality`). apiextensions-apiserver's
//! `validation.go` then refuses a rule over 10,000,000 (`StaticEstimatedCostLimit`) and a
//! schema whose rules sum over 100,000,000 (`StaticEstimatedCRDCostLimit`), naming the four
//! most expensive rules.
//!
//! Type checking is what the estimator needs and no more: the static type of every
//! subexpression (to pick an overload and to know whether a select reads a struct or a map).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

use super::FieldError;

/// `StaticEstimatedCostLimit`: the most one rule (times its cardinality) may cost.
pub const PER_RULE_LIMIT: u64 = 10_000_000;
/// `StaticEstimatedCRDCostLimit`: the most all rules of one schema may cost together.
pub const SCHEMA_LIMIT: u64 = 100_000_000;

/// `celconfig.MaxRequestSizeBytes`: the size every unbounded estimate is derived from.
const MAX_REQUEST_SIZE: i64 = 3 * 1024 * 1024;
const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;
/// `cel.MaxFormatSize`, `cel.MaxNameFormatRegexSize` (the format library).
const MAX_FORMAT_SIZE: u64 = 64;
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;

// ------------------------------------------------------------------------------------------
// Estimates
// ------------------------------------------------------------------------------------------

/// A size or cost range (cel-go's `SizeEstimate` / `CostEstimate`, which compute alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Est {
    min: u64,
    max: u64,
}

const UNKNOWN: Est = Est {
    min: 0,
    max: u64::MAX,
};

impl Est {
    fn fixed(v: u64) -> Self {
        Self { min: v, max: v }
    }
    fn add(self, o: Est) -> Est {
        Est {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }
    fn mul(self, o: Est) -> Est {
        Est {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }
    /// Multiplies by a float factor rounding up, as `multiplyByCostFactor` does.
    fn factor(self, f: f64) -> Est {
        Est {
            min: mul_factor(self.min, f),
            max: mul_factor(self.max, f),
        }
    }
    fn union(self, o: Est) -> Est {
        Est {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

fn mul_factor(x: u64, y: f64) -> u64 {
    let xf = x as f64;
    if xf > 0.0 && y > 0.0 && xf > u64::MAX as f64 / y {
        return u64::MAX;
    }
    let ceil = (xf * y).ceil();
    if ceil >= 18_446_744_073_709_551_616.0 {
        return u64::MAX;
    }
    ceil as u64
}

// ------------------------------------------------------------------------------------------
// Declarations from the schema
// ------------------------------------------------------------------------------------------

/// A schema node as CEL sees it (`DeclType`): its kind, maximum size and smallest JSON form.
#[derive(Debug)]
struct Decl {
    kind: DeclKind,
    max_elements: i64,
    min_size: i64,
}

#[derive(Debug)]
enum DeclKind {
    Object(BTreeMap<String, Rc<Decl>>),
    List(Rc<Decl>),
    /// Values; keys are strings of unknown (zero) maximum size, as `NewMapType(StringType, ..)`.
    Map(Rc<Decl>),
    Str,
    Bytes,
    Int,
    Double,
    Bool,
    Duration,
    Timestamp,
    Dyn,
}

fn scalar(kind: DeclKind, min_size: i64, max_elements: i64) -> Rc<Decl> {
    Rc::new(Decl {
        kind,
        max_elements,
        min_size,
    })
}

fn flag(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool) == Some(true)
}

fn int_of(s: &Value, key: &str) -> Option<i64> {
    s.get(key)
        .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

fn zero_if_negative(v: i64) -> i64 {
    v.max(0)
}

/// `WithTypeAndObjectMeta`: `apiVersion`, `kind` and `metadata.name`/`generateName` are
/// always there at the root of a resource (as unbounded strings).
fn with_type_and_object_meta(s: &Value) -> Value {
    let ty = |v: &Value, p: &str| {
        v.get("properties")
            .and_then(|x| x.get(p))
            .and_then(|x| x.get("type"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let meta = s.get("properties").and_then(|p| p.get("metadata"));
    let complete = ty(s, "kind").as_deref() == Some("string")
        && ty(s, "apiVersion").as_deref() == Some("string")
        && meta.and_then(|m| m.get("type")).and_then(Value::as_str) == Some("object")
        && meta.is_some_and(|m| {
            ty(m, "name").as_deref() == Some("string")
                && ty(m, "generateName").as_deref() == Some("string")
        });
    if complete {
        return s.clone();
    }
    let mut out = s.clone();
    let string = serde_json::json!({"type": "string"});
    let props = out.as_object_mut().map(|o| {
        o.entry("properties")
            .or_insert_with(|| serde_json::json!({}))
    });
    if let Some(Value::Object(p)) = props {
        p.insert("kind".into(), string.clone());
        p.insert("apiVersion".into(), string.clone());
        p.insert(
            "metadata".into(),
            serde_json::json!({"type": "object", "properties": {"name": string, "generateName": string}}),
        );
    }
    out
}

/// `SchemaDeclType`; `None` for nodes CEL cannot see (no type, not int-or-string).
fn decl_of(s: &Value, resource_root: bool) -> Option<Rc<Decl>> {
    if flag(s, "x-kubernetes-int-or-string") {
        let max = match int_of(s, "maxLength") {
            Some(l) => zero_if_negative(l) * 4,
            None => MAX_REQUEST_SIZE - 2,
        };
        return Some(scalar(DeclKind::Dyn, 1, max));
    }
    let rooted;
    let s = if resource_root {
        rooted = with_type_and_object_meta(s);
        &rooted
    } else {
        s
    };
    let embedded = |v: &Value| flag(v, "x-kubernetes-embedded-resource");
    match s.get("type").and_then(Value::as_str).unwrap_or("") {
        "array" => {
            let items = s.get("items").filter(|i| i.is_object())?;
            let item = decl_of(items, embedded(items))?;
            let max = match int_of(s, "maxItems") {
                Some(m) => zero_if_negative(m),
                None => (MAX_REQUEST_SIZE - 2) / (item.min_size + 1),
            };
            Some(Rc::new(Decl {
                kind: DeclKind::List(item),
                max_elements: max,
                min_size: 2,
            }))
        }
        "object" => {
            if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                let value = decl_of(ap, embedded(ap))?;
                let max = match int_of(s, "maxProperties") {
                    Some(m) => zero_if_negative(m),
                    None => (MAX_REQUEST_SIZE - 2) / (value.min_size + 6),
                };
                return Some(Rc::new(Decl {
                    kind: DeclKind::Map(value),
                    max_elements: max,
                    min_size: 2,
                }));
            }
            let required: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut fields = BTreeMap::new();
            let mut min_size = 2;
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (name, prop) in props {
                    let Some(field) = decl_of(prop, embedded(prop)) else {
                        continue;
                    };
                    let has_default = prop.get("default").is_some_and(|d| !d.is_null());
                    if required.contains(&name.as_str()) && !has_default {
                        min_size += name.len() as i64 + field.min_size + 4;
                    }
                    if let Some(escaped) = escape(name) {
                        fields.insert(escaped, field);
                    }
                }
            }
            Some(Rc::new(Decl {
                kind: DeclKind::Object(fields),
                max_elements: 0,
                min_size,
            }))
        }
        "string" => {
            let format = s.get("format").and_then(Value::as_str).unwrap_or("");
            let max_length = int_of(s, "maxLength");
            Some(match format {
                "byte" => scalar(
                    DeclKind::Bytes,
                    2,
                    max_length.map_or(MAX_REQUEST_SIZE - 2, zero_if_negative),
                ),
                "duration" => scalar(DeclKind::Duration, 3, 32),
                "date" => scalar(DeclKind::Timestamp, 12, 12),
                "date-time" => scalar(DeclKind::Timestamp, 21, 32),
                _ => {
                    let max = match max_length {
                        Some(l) => zero_if_negative(l) * 4,
                        None => match s.get("enum").and_then(Value::as_array) {
                            Some(e) if !e.is_empty() => e
                                .iter()
                                .filter_map(Value::as_str)
                                .map(|v| v.len() as i64)
                                .max()
                                .unwrap_or(0),
                            _ => MAX_REQUEST_SIZE - 2,
                        },
                    };
                    scalar(DeclKind::Str, 2, max)
                }
            })
        }
        "boolean" => Some(scalar(DeclKind::Bool, 4, 0)),
        "number" => Some(scalar(DeclKind::Double, 1, 0)),
        "integer" => Some(scalar(DeclKind::Int, 1, 0)),
        _ => None,
    }
}

/// `cel.Escape`: property names as CEL identifiers; `None` when a name cannot be one.
fn escape(ident: &str) -> Option<String> {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if ident.is_empty() || ident.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&ident) {
        return Some(format!("__{ident}__"));
    }
    let mut out = String::new();
    let mut chars = ident.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

// ------------------------------------------------------------------------------------------
// Types
// ------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    Str,
    Bytes,
    Null,
    Duration,
    Timestamp,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Object(Rc<Decl>),
    /// Kubernetes library types: `quantity`, `url`, `ip`, `cidr`, `semver`, `format`.
    Opaque(&'static str),
    Optional(Box<Ty>),
    Type,
    Dyn,
}

impl Ty {
    fn of_decl(d: &Rc<Decl>) -> Ty {
        match &d.kind {
            DeclKind::Object(_) => Ty::Object(d.clone()),
            DeclKind::List(e) => Ty::List(Box::new(Ty::of_decl(e))),
            DeclKind::Map(v) => Ty::Map(Box::new(Ty::Str), Box::new(Ty::of_decl(v))),
            DeclKind::Str => Ty::Str,
            DeclKind::Bytes => Ty::Bytes,
            DeclKind::Int => Ty::Int,
            DeclKind::Double => Ty::Double,
            DeclKind::Bool => Ty::Bool,
            DeclKind::Duration => Ty::Duration,
            DeclKind::Timestamp => Ty::Timestamp,
            DeclKind::Dyn => Ty::Dyn,
        }
    }

    fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn)
    }

    /// `isScalar`: values of a constant size.
    fn is_scalar(&self) -> bool {
        match self {
            Ty::Bool | Ty::Double | Ty::Duration | Ty::Int | Ty::Timestamp | Ty::Uint => true,
            Ty::Optional(t) => t.is_scalar(),
            _ => false,
        }
    }

    /// The first type parameter (`list(T)` → T, `map(K, V)` → K), as `listElementNode` uses.
    fn first_param(&self) -> Option<Ty> {
        match self {
            Ty::List(e) => Some((**e).clone()),
            Ty::Map(k, _) => Some((**k).clone()),
            Ty::Optional(t) => Some((**t).clone()),
            _ => None,
        }
    }
}

/// Namespaces of global functions the parser reads as a member call on an identifier.
const NAMESPACES: &[&str] = &[
    "cel", "strings", "sets", "lists", "math", "optional", "base64", "format", "ip",
];

/// The function name and target after resolving `strings.quote(x)`-style namespaced calls.
fn call_name<'a>(
    func: &str,
    target: Option<&'a IdedExpr>,
    bound: &dyn Fn(&str) -> bool,
) -> (String, Option<&'a IdedExpr>) {
    if let Some(t) = target {
        if let Expr::Ident(ns) = &t.expr {
            if NAMESPACES.contains(&ns.as_str()) && !bound(ns) {
                return (format!("{ns}.{func}"), None);
            }
        }
    }
    (func.to_string(), target)
}

struct Checker {
    types: HashMap<u64, Ty>,
    scopes: Vec<(String, Ty)>,
    self_ty: Ty,
    old_self_ty: Ty,
}

impl Checker {
    fn bound(&self, name: &str) -> bool {
        self.scopes.iter().any(|(n, _)| n == name) || name == "self" || name == "oldSelf"
    }

    fn check(&mut self, e: &IdedExpr) -> Ty {
        let ty = self.check_inner(e);
        self.types.insert(e.id, ty.clone());
        ty
    }

    fn check_inner(&mut self, e: &IdedExpr) -> Ty {
        match &e.expr {
            Expr::Unspecified => Ty::Dyn,
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::Str,
                LiteralValue::UInt(_) => Ty::Uint,
            },
            Expr::Ident(name) => {
                if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
                    return t.clone();
                }
                match name.as_str() {
                    "self" => self.self_ty.clone(),
                    "oldSelf" => self.old_self_ty.clone(),
                    _ => Ty::Dyn,
                }
            }
            Expr::Select(sel) => {
                let operand = self.check(&sel.operand);
                if sel.test {
                    return Ty::Bool;
                }
                field_type(&operand, &sel.field)
            }
            Expr::List(list) => {
                let mut elem = Ty::Dyn;
                for el in &list.elements {
                    let t = self.check(el);
                    if elem.is_dyn() {
                        elem = t;
                    }
                }
                Ty::List(Box::new(elem))
            }
            Expr::Map(map) => {
                let (mut k, mut v) = (Ty::Dyn, Ty::Dyn);
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        let kt = self.check(&me.key);
                        let vt = self.check(&me.value);
                        if k.is_dyn() {
                            k = kt;
                        }
                        if v.is_dyn() {
                            v = vt;
                        }
                    }
                }
                Ty::Map(Box::new(k), Box::new(v))
            }
            Expr::Struct(st) => {
                for entry in &st.entries {
                    match &entry.expr {
                        EntryExpr::StructField(f) => {
                            self.check(&f.value);
                        }
                        EntryExpr::MapEntry(me) => {
                            self.check(&me.key);
                            self.check(&me.value);
                        }
                    }
                }
                Ty::Dyn
            }
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                let mut accu = self.check(&c.accu_init);
                let (first, second) = match (&range, &c.iter_var2) {
                    (Ty::List(e), None) => ((**e).clone(), None),
                    (Ty::List(e), Some(_)) => (Ty::Int, Some((**e).clone())),
                    (Ty::Map(k, _), None) => ((**k).clone(), None),
                    (Ty::Map(k, v), Some(_)) => ((**k).clone(), Some((**v).clone())),
                    (_, None) => (Ty::Dyn, None),
                    (_, Some(_)) => (Ty::Dyn, Some(Ty::Dyn)),
                };
                for round in 0..2 {
                    self.scopes.push((c.accu_var.clone(), accu.clone()));
                    self.scopes.push((c.iter_var.clone(), first.clone()));
                    if let (Some(v2), Some(t2)) = (&c.iter_var2, &second) {
                        self.scopes.push((v2.clone(), t2.clone()));
                    }
                    self.check(&c.loop_cond);
                    let step = self.check(&c.loop_step);
                    if c.iter_var2.is_some() {
                        self.scopes.pop();
                    }
                    self.scopes.pop();
                    self.scopes.pop();
                    // `map`/`filter` start from `[]`: the step says what the list holds.
                    match (&accu, step) {
                        (Ty::List(e), Ty::List(s)) if round == 0 && e.is_dyn() && !s.is_dyn() => {
                            accu = Ty::List(s);
                        }
                        _ => break,
                    }
                }
                self.scopes.push((c.accu_var.clone(), accu));
                let result = self.check(&c.result);
                self.scopes.pop();
                result
            }
            Expr::Call(call) => {
                let bound = |n: &str| self.bound(n);
                let (name, target) = call_name(&call.func_name, call.target.as_deref(), &bound);
                if name == "cel.bind" && call.args.len() == 3 {
                    if let Expr::Ident(var) = &call.args[0].expr {
                        let init = self.check(&call.args[1]);
                        self.scopes.push((var.clone(), init));
                        let body = self.check(&call.args[2]);
                        self.scopes.pop();
                        return body;
                    }
                }
                let target_ty = target.map(|t| self.check(t));
                let arg_tys: Vec<Ty> = call.args.iter().map(|a| self.check(a)).collect();
                call_type(&name, target_ty.as_ref(), &arg_tys)
            }
        }
    }
}

fn field_type(operand: &Ty, field: &str) -> Ty {
    match operand {
        Ty::Object(d) => match &d.kind {
            DeclKind::Object(fields) => fields.get(field).map_or(Ty::Dyn, Ty::of_decl),
            _ => Ty::Dyn,
        },
        Ty::Map(_, v) => (**v).clone(),
        _ => Ty::Dyn,
    }
}

/// The result type of a call, for the functions CRD rules use.
fn call_type(name: &str, target: Option<&Ty>, args: &[Ty]) -> Ty {
    let first = target.or(args.first());
    match name {
        "_&&_"
        | "_||_"
        | "!_"
        | "@not_strictly_false"
        | "_==_"
        | "_!=_"
        | "_<_"
        | "_<=_"
        | "_>_"
        | "_>=_"
        | "@in"
        | "matches"
        | "startsWith"
        | "endsWith"
        | "contains"
        | "isSorted"
        | "isQuantity"
        | "isURL"
        | "isIP"
        | "isCIDR"
        | "isSemver"
        | "isInteger"
        | "isGreaterThan"
        | "isLessThan"
        | "containsIP"
        | "containsCIDR"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast"
        | "ip.isCanonical"
        | "hasValue"
        | "sets.contains"
        | "sets.equivalent"
        | "sets.intersects"
        | "all"
        | "exists"
        | "exists_one"
        | "existsOne"
        | "allowed"
        | "errored" => Ty::Bool,
        "size" | "indexOf" | "lastIndexOf" | "int" | "sign" | "asInteger" | "compareTo"
        | "prefixLength" | "family" | "major" | "minor" | "patch" => Ty::Int,
        "lowerAscii"
        | "upperAscii"
        | "trim"
        | "substring"
        | "replace"
        | "join"
        | "charAt"
        | "format"
        | "string"
        | "strings.quote"
        | "getScheme"
        | "getHost"
        | "getHostname"
        | "getPort"
        | "getEscapedPath"
        | "jsonpatch.escapeKey"
        | "find"
        | "reason" => Ty::Str,
        "split" | "findAll" => Ty::List(Box::new(Ty::Str)),
        "double" | "asApproximateFloat" => Ty::Double,
        "uint" => Ty::Uint,
        "bytes" => Ty::Bytes,
        "duration" => Ty::Duration,
        "timestamp" => Ty::Timestamp,
        "quantity" => Ty::Opaque("quantity"),
        "add" | "sub" if matches!(target, Some(Ty::Opaque("quantity"))) => Ty::Opaque("quantity"),
        "url" => Ty::Opaque("url"),
        "ip" => Ty::Opaque("ip"),
        "cidr" | "masked" => Ty::Opaque("cidr"),
        "semver" => Ty::Opaque("semver"),
        "format.named" => Ty::Opaque("format"),
        "cel.@mapInsert" => args.first().cloned().unwrap_or(Ty::Dyn),
        "getQuery" => Ty::Map(Box::new(Ty::Str), Box::new(Ty::List(Box::new(Ty::Str)))),
        "type" => Ty::Type,
        "dyn" => Ty::Dyn,
        "optional.of" | "optional.ofNonZeroValue" => {
            Ty::Optional(Box::new(args.first().cloned().unwrap_or(Ty::Dyn)))
        }
        "optional.none" => Ty::Optional(Box::new(Ty::Dyn)),
        "value" | "orValue" => match target {
            Some(Ty::Optional(t)) => (**t).clone(),
            _ => Ty::Dyn,
        },
        "_?._" => match args.first() {
            Some(Ty::Optional(t)) => Ty::Optional(Box::new(field_type(t, ""))),
            Some(t) => Ty::Optional(Box::new(t.clone())),
            None => Ty::Dyn,
        },
        "_+_" => match (args.first(), args.get(1)) {
            (Some(Ty::Dyn), Some(b)) => b.clone(),
            (Some(Ty::List(a)), Some(Ty::List(b))) if a.is_dyn() => Ty::List(b.clone()),
            (Some(a), _) => a.clone(),
            _ => Ty::Dyn,
        },
        "_-_" | "_*_" | "_/_" | "_%_" | "-_" => first.cloned().unwrap_or(Ty::Dyn),
        "_[_]" => match args.first() {
            Some(Ty::List(e)) => (**e).clone(),
            Some(Ty::Map(_, v)) => (**v).clone(),
            _ => Ty::Dyn,
        },
        "_?_:_" => match (args.get(1), args.get(2)) {
            (Some(a), Some(b)) if a.is_dyn() => b.clone(),
            (Some(a), _) => a.clone(),
            _ => Ty::Dyn,
        },
        "max" | "min" | "sum" => match target {
            Some(Ty::List(e)) => (**e).clone(),
            _ => Ty::Dyn,
        },
        "sort" | "distinct" | "slice" | "reverse" => match target {
            Some(t @ Ty::List(_)) => t.clone(),
            Some(Ty::Str) => Ty::Str,
            _ => Ty::Dyn,
        },
        _ => Ty::Dyn,
    }
}

// ------------------------------------------------------------------------------------------
// The estimator
// ------------------------------------------------------------------------------------------

/// Overloads whose cost cel-go computes specially (`functionCost`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Overload {
    Other,
    AddString,
    AddBytes,
    AddList,
    InList,
    InMap,
    IndexList,
    IndexMap,
    MatchesString,
    ContainsString,
    StartsOrEndsWith,
    EqualsOrNotEquals,
    CompareStringOrBytes,
    Logical,
    Conditional,
    FormatString,
    StringToBytes,
    BytesToString,
    QuoteString,
    CidrIp,
    ContainsString2,
}

fn overloads(name: &str, has_target: bool, target: Option<&Ty>, args: &[Ty]) -> Vec<Overload> {
    use Overload::*;
    let a0 = args.first();
    let a1 = args.get(1);
    match name {
        "_&&_" | "_||_" => vec![Logical],
        "_?_:_" => vec![Conditional],
        "_==_" | "_!=_" => vec![EqualsOrNotEquals],
        "_+_" => {
            let pick = match (a0, a1) {
                (Some(Ty::Dyn), Some(b)) => b,
                (Some(a), _) => a,
                _ => &Ty::Dyn,
            };
            match pick {
                Ty::Str => vec![AddString],
                Ty::Bytes => vec![AddBytes],
                Ty::List(_) => vec![AddList],
                Ty::Dyn => vec![AddString, AddBytes, AddList, Other],
                _ => vec![Other],
            }
        }
        "_<_" | "_<=_" | "_>_" | "_>=_" => match a0 {
            Some(Ty::Str) | Some(Ty::Bytes) => vec![CompareStringOrBytes],
            Some(Ty::Dyn) => vec![CompareStringOrBytes, Other],
            _ => vec![Other],
        },
        "@in" => match a1 {
            Some(Ty::List(_)) => vec![InList],
            Some(Ty::Map(..)) => vec![InMap],
            _ => vec![InList, InMap],
        },
        "_[_]" => match a0 {
            Some(Ty::List(_)) => vec![IndexList],
            Some(Ty::Map(..)) => vec![IndexMap],
            _ => vec![IndexList, IndexMap],
        },
        "matches" if has_target => vec![MatchesString],
        "contains" if has_target && matches!(target, Some(Ty::Str) | Some(Ty::Dyn)) => {
            vec![ContainsString]
        }
        "startsWith" | "endsWith" if has_target => vec![StartsOrEndsWith],
        "format" if has_target && matches!(target, Some(Ty::Str)) => vec![FormatString],
        "bytes" if matches!(a0, Some(Ty::Str)) => vec![StringToBytes],
        "string" if matches!(a0, Some(Ty::Bytes)) => vec![BytesToString],
        "strings.quote" => vec![QuoteString],
        "ip" if has_target && matches!(target, Some(Ty::Opaque("cidr"))) => vec![CidrIp],
        "containsIP" | "containsCIDR" if matches!(a0, Some(Ty::Str)) => vec![ContainsString2],
        _ => vec![Other],
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Container {
    List,
    Map,
}

/// Sizes of the keys (or indices) and values of a list or map built in the expression.
#[derive(Clone, Copy, Debug)]
struct EntrySize {
    container: Container,
    key: Est,
    val: Est,
}

fn union_entries(a: Option<EntrySize>, b: Option<EntrySize>) -> Option<EntrySize> {
    let (a, b) = (a?, b?);
    Some(EntrySize {
        container: a.container,
        key: a.key.union(b.key),
        val: a.val.union(b.val),
    })
}

#[derive(Clone, Debug)]
struct Local {
    path: Vec<String>,
    size: Option<Est>,
    entry: Option<EntrySize>,
}

/// What a function estimator sees of an operand (cel-go's `AstNode`).
#[derive(Clone, Debug)]
struct Node {
    path: Vec<String>,
    ty: Ty,
    expr: Option<LiteralInt>,
    size: Option<Est>,
}

/// The literal value of an int argument (`split(sep, n)` bounds the result by it).
type LiteralInt = i64;

fn is_accumulator(name: &str) -> bool {
    name == "@result" || name == "__result__"
}

struct Coster<'a> {
    root: &'a Rc<Decl>,
    types: &'a HashMap<u64, Ty>,
    paths: HashMap<u64, Vec<String>>,
    sizes: HashMap<u64, Est>,
    entries: HashMap<u64, EntrySize>,
    locals: HashMap<String, Vec<Local>>,
}

impl<'a> Coster<'a> {
    fn ty(&self, e: &IdedExpr) -> Ty {
        self.types.get(&e.id).cloned().unwrap_or(Ty::Dyn)
    }

    fn local(&self, name: &str) -> Option<&Local> {
        self.locals.get(name).and_then(|v| v.last())
    }

    fn push_local(&mut self, name: &str, local: Local) {
        self.locals.entry(name.to_string()).or_default().push(local);
    }

    fn pop_local(&mut self, name: &str) {
        if let Some(v) = self.locals.get_mut(name) {
            v.pop();
        }
    }

    fn path(&self, e: &IdedExpr) -> Vec<String> {
        if let Expr::Ident(name) = &e.expr {
            if let Some(l) = self.local(name) {
                return l.path.clone();
            }
        }
        self.paths.get(&e.id).cloned().unwrap_or_default()
    }

    /// The Kubernetes size estimator: walk the path from the rule's node.
    fn estimate_size(&self, path: &[String]) -> Option<Est> {
        if path.is_empty() {
            return None;
        }
        let mut node: &Rc<Decl> = self.root;
        for name in &path[1..] {
            match name.as_str() {
                "@items" | "@values" => match &node.kind {
                    DeclKind::List(e) | DeclKind::Map(e) => node = e,
                    _ => return None,
                },
                // Map keys are declared as strings of no known size (`StringType`).
                "@keys" => match &node.kind {
                    DeclKind::Map(_) => return Some(Est::fixed(0)),
                    _ => return None,
                },
                field => match &node.kind {
                    DeclKind::Object(fields) => node = fields.get(field)?,
                    _ => return None,
                },
            }
        }
        Some(Est {
            min: 0,
            max: node.max_elements.max(0) as u64,
        })
    }

    fn compute_size(&mut self, e: &IdedExpr) -> Option<Est> {
        if let Some(s) = self.sizes.get(&e.id) {
            return Some(*s);
        }
        if let Some(s) = expr_size(e) {
            return Some(s);
        }
        let path = self.path(e);
        if let Some(s) = self.estimate_size(&path) {
            self.sizes.insert(e.id, s);
            return Some(s);
        }
        if self.ty(e).is_scalar() {
            return Some(Est::fixed(1));
        }
        if let Expr::Ident(name) = &e.expr {
            if let Some(s) = self.local(name).and_then(|l| l.size) {
                return Some(s);
            }
        }
        None
    }

    fn size_or_unknown(&mut self, e: &IdedExpr) -> Est {
        self.compute_size(e).unwrap_or(UNKNOWN)
    }

    fn entry_size(&self, e: &IdedExpr) -> Option<EntrySize> {
        if let Some(s) = self.entries.get(&e.id) {
            return Some(*s);
        }
        if let Expr::Ident(name) = &e.expr {
            if let Some(s) = self.local(name).and_then(|l| l.entry) {
                return Some(s);
            }
        }
        None
    }

    fn node(&mut self, e: &IdedExpr) -> Node {
        let mut path = self.path(e);
        if path.first().is_some_and(|p| is_accumulator(p)) {
            path.clear();
        }
        let literal = match &e.expr {
            Expr::Literal(LiteralValue::Int(i)) => Some(*i.inner()),
            _ => None,
        };
        Node {
            path,
            ty: self.ty(e),
            expr: literal,
            size: self.compute_size(e),
        }
    }

    /// The Kubernetes library's `sizeEstimate`: computed size, else the schema's.
    fn k8s_size(&self, n: &Node) -> Est {
        n.size
            .or_else(|| self.estimate_size(&n.path))
            .unwrap_or(UNKNOWN)
    }

    /// `listElementNode`: the items of a list (keys of a map), with a path when there is one.
    fn element_node(&self, list: &Node) -> Option<Node> {
        let ty = list.ty.first_param()?;
        let path = if list.path.is_empty() {
            Vec::new()
        } else {
            let mut p = list.path.clone();
            p.push("@items".into());
            p
        };
        Some(Node {
            path,
            ty,
            expr: None,
            size: None,
        })
    }

    fn cost(&mut self, e: &IdedExpr) -> Est {
        match &e.expr {
            Expr::Unspecified => Est::fixed(0),
            Expr::Literal(_) => Est::fixed(0),
            Expr::Ident(name) => {
                let path = match self.local(name) {
                    Some(l) => l.path.clone(),
                    None => vec![name.clone()],
                };
                self.paths.insert(e.id, path);
                Est::fixed(1)
            }
            Expr::Select(sel) => {
                if sel.test {
                    // Kubernetes turns the presence test's own cost off.
                    return self.cost(&sel.operand);
                }
                let mut sum = self.cost(&sel.operand);
                if matches!(self.ty(&sel.operand), Ty::Map(..) | Ty::Object(_)) {
                    sum = sum.add(Est::fixed(1));
                }
                let mut path = self.path(&sel.operand);
                path.push(sel.field.clone());
                self.paths.insert(e.id, path);
                sum
            }
            Expr::List(list) => {
                let mut sum = Est::fixed(0);
                let mut item = Est {
                    min: if list.elements.is_empty() {
                        0
                    } else {
                        u64::MAX
                    },
                    max: 0,
                };
                for el in &list.elements {
                    sum = sum.add(self.cost(el));
                    item = item.union(self.size_or_unknown(el));
                }
                self.entries.insert(
                    e.id,
                    EntrySize {
                        container: Container::List,
                        key: Est::fixed(1),
                        val: item,
                    },
                );
                sum.add(Est::fixed(LIST_CREATE))
            }
            Expr::Map(map) => {
                let mut sum = Est::fixed(0);
                let empty = map.entries.is_empty();
                let mut key = Est {
                    min: if empty { 0 } else { u64::MAX },
                    max: 0,
                };
                let mut val = key;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        sum = sum.add(self.cost(&me.key));
                        sum = sum.add(self.cost(&me.value));
                        key = key.union(self.size_or_unknown(&me.key));
                        val = val.union(self.size_or_unknown(&me.value));
                    }
                }
                self.entries.insert(
                    e.id,
                    EntrySize {
                        container: Container::Map,
                        key,
                        val,
                    },
                );
                sum.add(Est::fixed(MAP_CREATE))
            }
            Expr::Struct(st) => {
                let mut sum = Est::fixed(0);
                for entry in &st.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        sum = sum.add(self.cost(&f.value));
                    }
                }
                sum.add(Est::fixed(STRUCT_CREATE))
            }
            Expr::Comprehension(c) => self.cost_comprehension(e, c),
            Expr::Call(_) => self.cost_call(e),
        }
    }

    fn push_iter(&mut self, var: &str, range: &IdedExpr, want_value: bool, two_vars: bool) {
        let entry = self.entry_size(range);
        let container = entry.map(|s| s.container).or(match self.ty(range) {
            Ty::List(_) => Some(Container::List),
            Ty::Map(..) => Some(Container::Map),
            _ => None,
        });
        let is_list = container == Some(Container::List);
        let (size, sub) = if !two_vars {
            if is_list {
                (entry.map(|s| s.val), "@items")
            } else {
                (entry.map(|s| s.key), "@keys")
            }
        } else if want_value {
            (
                entry.map(|s| s.val),
                if is_list { "@items" } else { "@values" },
            )
        } else {
            (
                entry.map(|s| s.key),
                if is_list { "@indices" } else { "@keys" },
            )
        };
        let mut path = self.path(range);
        path.push(sub.into());
        self.push_local(
            var,
            Local {
                path,
                size,
                entry: None,
            },
        );
    }

    fn push_bound(&mut self, var: &str, init: &IdedExpr) {
        let path = self.path(init);
        let entry = self.entry_size(init);
        let size = self.compute_size(init);
        self.push_local(var, Local { path, size, entry });
    }

    fn cost_comprehension(
        &mut self,
        e: &IdedExpr,
        c: &kube_cel::cel::common::ast::ComprehensionExpr,
    ) -> Est {
        let mut sum = self.cost(&c.iter_range);
        sum = sum.add(self.cost(&c.accu_init));
        self.push_bound(&c.accu_var, &c.accu_init);
        match &c.iter_var2 {
            Some(v2) => {
                self.push_iter(&c.iter_var, &c.iter_range, false, true);
                self.push_iter(v2, &c.iter_range, true, true);
            }
            None => self.push_iter(&c.iter_var, &c.iter_range, false, false),
        }
        let loop_cost = self.cost(&c.loop_cond);
        let step_cost = self.cost(&c.loop_step);
        self.pop_local(&c.iter_var);
        if let Some(v2) = &c.iter_var2 {
            self.pop_local(v2);
        }
        sum = sum.add(self.cost(&c.result));
        self.pop_local(&c.accu_var);
        let range = self.size_or_unknown(&c.iter_range);
        sum = sum.add(range.mul(step_cost.add(loop_cost)));
        match &c.accu_init.expr {
            Expr::Literal(_) => {
                if let Some(s) = self.compute_size(&c.accu_init) {
                    self.sizes.insert(e.id, s);
                }
            }
            Expr::List(_) | Expr::Map(_) => {
                self.sizes.insert(e.id, range);
                if let Some(s) = self.entry_size(&c.loop_step) {
                    self.entries.insert(e.id, s);
                }
            }
            _ => {}
        }
        sum
    }

    fn cost_call(&mut self, e: &IdedExpr) -> Est {
        let Expr::Call(call) = &e.expr else {
            return Est::fixed(0);
        };
        let locals = &self.locals;
        let bound = |n: &str| locals.get(n).is_some_and(|v| !v.is_empty());
        let (name, target) = call_name(&call.func_name, call.target.as_deref(), &bound);
        let args = &call.args;
        if name == "dyn" && args.len() == 1 {
            let c = self.cost(&args[0]);
            if let Some(s) = self.compute_size(&args[0]) {
                self.sizes.insert(e.id, s);
            }
            if let Some(s) = self.entry_size(&args[0]) {
                self.entries.insert(e.id, s);
            }
            return Est::fixed(1).add(c);
        }
        if name == "cel.bind" && args.len() == 3 {
            if let Expr::Ident(var) = &args[0].expr {
                // `cel.bind` expands to a comprehension over `[]`: the empty list is built.
                let mut sum = Est::fixed(LIST_CREATE).add(self.cost(&args[1]));
                self.push_bound(var, &args[1]);
                sum = sum.add(self.cost(&args[2]));
                self.pop_local(var);
                if let Some(s) = self.compute_size(&args[2]) {
                    self.sizes.insert(e.id, s);
                }
                if let Some(s) = self.entry_size(&args[2]) {
                    self.entries.insert(e.id, s);
                }
                return sum;
            }
        }
        let mut arg_costs = Vec::with_capacity(args.len());
        let mut arg_nodes = Vec::with_capacity(args.len());
        for a in args {
            arg_costs.push(self.cost(a));
            arg_nodes.push(self.node(a));
        }
        let mut sum = Est::fixed(0);
        let target_node = match target {
            Some(t) => {
                sum = sum.add(self.cost(t));
                Some(self.node(t))
            }
            None => None,
        };
        let arg_tys: Vec<Ty> = arg_nodes.iter().map(|n| n.ty.clone()).collect();
        let ids = overloads(
            &name,
            target.is_some(),
            target_node.as_ref().map(|n| &n.ty),
            &arg_tys,
        );
        let mut fn_cost = Est {
            min: u64::MAX,
            max: 0,
        };
        let mut result: Option<Est> = None;
        for ov in ids {
            let (c, size) = self.function_cost(
                e,
                &name,
                ov,
                target_node.as_ref(),
                &arg_nodes,
                &arg_costs,
                args,
            );
            fn_cost = fn_cost.union(c);
            if let Some(s) = size {
                result = Some(match result {
                    None => s,
                    Some(r) => r.union(s),
                });
            }
            match ov {
                Overload::IndexList | Overload::IndexMap if !args.is_empty() => {
                    result = self.entry_size(&args[0]).map(|s| s.val);
                    let mut path = self.path(&args[0]);
                    path.push(
                        if ov == Overload::IndexList {
                            "@items"
                        } else {
                            "@values"
                        }
                        .into(),
                    );
                    self.paths.insert(e.id, path);
                }
                _ => {}
            }
            if result.is_none() {
                result = self.compute_size(e);
            }
        }
        if let Some(s) = result {
            self.sizes.insert(e.id, s);
        }
        sum.add(fn_cost)
    }

    #[allow(clippy::too_many_arguments)]
    fn function_cost(
        &mut self,
        e: &IdedExpr,
        name: &str,
        ov: Overload,
        target: Option<&Node>,
        args: &[Node],
        arg_costs: &[Est],
        arg_exprs: &[IdedExpr],
    ) -> (Est, Option<Est>) {
        let arg_sum = arg_costs.iter().fold(Est::fixed(0), |acc, c| acc.add(*c));
        if let Some((c, size)) = self.ext_call_cost(name, target, args) {
            return (c.add(arg_sum), size);
        }
        if let Some((c, size)) = self.k8s_call_cost(name, ov, target, args) {
            return (c.add(arg_sum), size);
        }
        let size = |n: &Node| n.size.unwrap_or(UNKNOWN);
        use Overload::*;
        match ov {
            FormatString => {
                if let Some(t) = target {
                    return (size(t).factor(STRING_TRAVERSAL).add(arg_sum), None);
                }
            }
            StringToBytes if args.len() == 1 => {
                let sz = size(&args[0]);
                return (
                    sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    Some(Est {
                        min: sz.min,
                        max: sz.max.saturating_mul(4),
                    }),
                );
            }
            BytesToString if args.len() == 1 => {
                let sz = size(&args[0]);
                return (
                    sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    Some(Est {
                        min: sz.min / 4,
                        max: sz.max,
                    }),
                );
            }
            QuoteString if args.len() == 1 => {
                let sz = size(&args[0]);
                return (
                    sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    Some(Est {
                        min: sz.min.saturating_add(2),
                        max: sz.max.saturating_mul(2).saturating_add(2),
                    }),
                );
            }
            StartsOrEndsWith if args.len() == 1 => {
                return (size(&args[0]).factor(STRING_TRAVERSAL).add(arg_sum), None);
            }
            InList if args.len() == 2 => {
                return (size(&args[1]).factor(1.0).add(arg_sum), None);
            }
            MatchesString if args.len() == 1 => {
                if let Some(t) = target {
                    let str_cost = size(t).add(Est::fixed(1)).factor(STRING_TRAVERSAL);
                    let regex_cost = size(&args[0]).factor(REGEX_LENGTH);
                    return (str_cost.mul(regex_cost).add(arg_sum), None);
                }
            }
            ContainsString if args.len() == 1 => {
                if let Some(t) = target {
                    let str_cost = size(t).factor(STRING_TRAVERSAL);
                    let sub_cost = size(&args[0]).factor(STRING_TRAVERSAL);
                    return (str_cost.mul(sub_cost).add(arg_sum), None);
                }
            }
            Logical if arg_costs.len() == 2 => {
                let (l, r) = (arg_costs[0], arg_costs[1]);
                return (
                    Est {
                        min: l.min,
                        max: l.add(r).max,
                    },
                    None,
                );
            }
            Conditional if args.len() == 3 => {
                let sz = size(&args[1]).union(size(&args[2]));
                let entry = union_entries(
                    self.entry_size(&arg_exprs[1]),
                    self.entry_size(&arg_exprs[2]),
                );
                if let Some(s) = entry {
                    self.entries.insert(e.id, s);
                }
                let c = arg_costs[0].add(arg_costs[1].union(arg_costs[2]));
                return (c, Some(sz));
            }
            AddString | AddBytes | AddList if args.len() == 2 => {
                let result = size(&args[0]).add(size(&args[1]));
                let entry = union_entries(
                    self.entry_size(&arg_exprs[0]),
                    self.entry_size(&arg_exprs[1]),
                );
                if let Some(s) = entry {
                    self.entries.insert(e.id, s);
                }
                if ov == AddList {
                    return (Est::fixed(1).add(arg_sum), Some(result));
                }
                return (result.factor(STRING_TRAVERSAL).add(arg_sum), Some(result));
            }
            CompareStringOrBytes | EqualsOrNotEquals if args.len() == 2 => {
                let smallest = size(&args[0]).max.min(size(&args[1]).max);
                let min = u64::from(smallest > 0);
                return (
                    Est { min, max: smallest }
                        .factor(STRING_TRAVERSAL)
                        .add(arg_sum),
                    None,
                );
            }
            _ => {}
        }
        (Est::fixed(1).add(arg_sum), None)
    }

    /// The estimators cel-go's `ext` sets and lists (version 3) register for their overloads:
    /// set operations cost the product of both sizes, list operations their result's size,
    /// plus 1 for the call and 10 for a list they allocate.
    fn ext_call_cost(
        &self,
        name: &str,
        target: Option<&Node>,
        args: &[Node],
    ) -> Option<(Est, Option<Est>)> {
        let call = Est::fixed(1);
        let allocating = |factor: f64, size: Est| {
            (
                size.factor(factor).add(call).add(Est::fixed(LIST_CREATE)),
                Some(size),
            )
        };
        let literal = |n: Option<&Node>, default: u64| {
            n.and_then(|n| n.expr).map_or(default, |v| v.max(0) as u64)
        };
        match (name, target) {
            ("sets.contains" | "sets.intersects" | "sets.equivalent", None) if args.len() == 2 => {
                let factor = if name == "sets.equivalent" { 2.0 } else { 1.0 };
                let product = self.k8s_size(&args[0]).mul(self.k8s_size(&args[1]));
                Some((product.factor(factor).add(call), None))
            }
            ("lists.range", None) if args.len() == 1 => {
                Some(allocating(1.0, Est::fixed(literal(args.first(), u64::MAX))))
            }
            (_, Some(t)) if matches!(t.ty, Ty::List(_)) => {
                let size = self.k8s_size(t);
                match (name, args.len()) {
                    ("reverse", 0) => Some(allocating(1.0, size)),
                    ("flatten", 0 | 1) => {
                        let depth =
                            literal(args.first(), if args.is_empty() { 1 } else { u64::MAX });
                        Some(allocating(depth as f64, size))
                    }
                    ("distinct", 0) => Some(allocating(2.0, size.mul(size))),
                    ("sort", 0) => {
                        let factor = match t.ty.first_param() {
                            Some(Ty::Str | Ty::Bytes) => 2.0 + STRING_TRAVERSAL,
                            _ => 2.0,
                        };
                        Some(allocating(factor, size.mul(size)))
                    }
                    ("slice", 2) => {
                        let start = literal(args.first(), 0);
                        let end = literal(args.get(1), size.max);
                        Some(allocating(1.0, Est::fixed(end.saturating_sub(start))))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// k8s.io/apiserver `library.CostEstimator.EstimateCallCost` (and the ext library's
    /// own estimators): `None` leaves the call to cel-go's defaults.
    fn k8s_call_cost(
        &self,
        name: &str,
        ov: Overload,
        target: Option<&Node>,
        args: &[Node],
    ) -> Option<(Est, Option<Est>)> {
        let traversal = |n: &Node| self.k8s_size(n).factor(STRING_TRAVERSAL);
        let one = Est::fixed(1);
        match name {
            "check" => Some((Est::fixed(350_000), None)),
            "serviceAccount" | "path" | "group" | "resource" | "subresource" | "namespace"
            | "name" | "allowed" | "reason" | "error" | "errored" => Some((one, None)),
            "fieldSelector" | "labelSelector" if args.len() == 1 => {
                let len = self.k8s_size(&args[0]);
                let parse = len.factor(STRING_TRAVERSAL);
                let requirements = len.factor(0.5).factor((LIST_CREATE + STRUCT_CREATE) as f64);
                Some((Est::fixed(LIST_CREATE).add(parse).add(requirements), None))
            }
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => {
                let t = target?;
                match self.element_node(t) {
                    Some(el) => {
                        let mut el_cost = one;
                        if matches!(el.ty, Ty::Str | Ty::Bytes) {
                            el_cost = el_cost.add(traversal(&el));
                        }
                        Some((self.k8s_size(t).mul(el_cost), None))
                    }
                    None => Some((traversal(t), None)),
                }
            }
            "url" | "jsonpatch.escapeKey" if args.len() == 1 => {
                let sz = self.k8s_size(&args[0]);
                Some((sz.factor(STRING_TRAVERSAL), Some(sz)))
            }
            "lowerAscii" | "upperAscii" | "substring" | "trim" => {
                let sz = self.k8s_size(target?);
                Some((sz.factor(STRING_TRAVERSAL), Some(sz)))
            }
            "replace" if args.len() >= 2 => {
                let sz = self.k8s_size(target?);
                let from = self.k8s_size(&args[0]);
                let with = self.k8s_size(&args[1]);
                let mut count = Est::fixed(0);
                let mut retained = Est::fixed(0);
                if from.min == 0 {
                    count.max = if sz.max < u64::MAX {
                        sz.max + 1
                    } else {
                        sz.max
                    };
                    retained.max = sz.max;
                } else if with.max <= from.min {
                    retained.max = sz.max;
                } else {
                    count.max = (sz.max as f64 / from.min as f64).ceil() as u64;
                }
                if from.max == 0 {
                    count.min = if sz.min < u64::MAX {
                        sz.min + 1
                    } else {
                        sz.min
                    };
                    retained.min = sz.min;
                } else if from.max <= with.min {
                    retained.min = sz.min;
                } else {
                    count.min = (sz.min as f64 / from.max as f64).ceil() as u64;
                }
                let result = count.mul(with).add(retained);
                Some((sz.factor(2.0 * STRING_TRAVERSAL), Some(result)))
            }
            "split" => {
                let sz = self.k8s_size(target?);
                let max = match args.get(1).and_then(|a| a.expr) {
                    Some(n) => n as u64,
                    None => sz.max,
                };
                Some((sz.factor(2.0 * STRING_TRAVERSAL), Some(Est { min: 0, max })))
            }
            "join" => {
                let t = target?;
                let list = self.k8s_size(t);
                let mut sz = Est::fixed(0);
                if let Some(el) = self.element_node(t) {
                    sz = list.mul(self.k8s_size(&el));
                }
                if let Some(sep) = args.first() {
                    let separators = Est {
                        min: list.min.saturating_sub(1),
                        max: list.max.saturating_sub(1),
                    };
                    sz = sz.add(self.k8s_size(sep).mul(separators));
                }
                Some((sz.factor(STRING_TRAVERSAL), Some(sz)))
            }
            "find" | "findAll" if !args.is_empty() => {
                let sz = self.k8s_size(target?);
                let str_cost = sz.add(one).factor(STRING_TRAVERSAL);
                let regex_cost = self.k8s_size(&args[0]).factor(REGEX_LENGTH);
                Some((
                    str_cost.mul(regex_cost),
                    Some(Est {
                        min: 0,
                        max: sz.max,
                    }),
                ))
            }
            "cidr" | "isIP" | "isCIDR" if !args.is_empty() => Some((traversal(&args[0]), None)),
            "ip" => {
                if ov == Overload::CidrIp {
                    return Some((one, None));
                }
                args.first().map(|a| (traversal(a), None))
            }
            "ip.isCanonical" if !args.is_empty() => {
                Some((self.k8s_size(&args[0]).factor(2.0 * STRING_TRAVERSAL), None))
            }
            "masked"
            | "prefixLength"
            | "family"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast" => Some((one, None)),
            "containsIP" | "containsCIDR" if !args.is_empty() => {
                let sz = Est { min: 4, max: 16 };
                let mut c = sz.add(sz).factor(STRING_TRAVERSAL);
                if name == "containsCIDR" {
                    c = c.add(sz.factor(STRING_TRAVERSAL)).add(one);
                }
                if ov == Overload::ContainsString2 {
                    c = c.add(traversal(&args[0]));
                }
                Some((c, None))
            }
            "quantity" | "isQuantity" | "semver" | "isSemver" if !args.is_empty() => {
                Some((traversal(&args[0]), None))
            }
            "validate" if !args.is_empty() => Some((
                traversal(&args[0]).factor(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH),
                None,
            )),
            "format.named" => Some((one, None)),
            "sign" | "asInteger" | "isInteger" | "asApproximateFloat" | "isGreaterThan"
            | "isLessThan" | "compareTo" | "add" | "sub" | "major" | "minor" | "patch" => {
                Some((one, None))
            }
            "getScheme" | "getHostname" | "getHost" | "getPort" | "getEscapedPath" | "getQuery" => {
                Some((one, None))
            }
            "_==_" if args.len() == 2 => match (&args[0].ty, &args[1].ty) {
                (Ty::Opaque(a), Ty::Opaque(b)) if a == b => match *a {
                    "ip" | "cidr" | "quantity" | "semver" => Some((one, None)),
                    "format" => Some((
                        Est {
                            min: 1,
                            max: MAX_FORMAT_SIZE,
                        }
                        .factor(STRING_TRAVERSAL),
                        None,
                    )),
                    "url" => {
                        // Kubernetes reads the right-hand size twice here; so do we.
                        let max = args[1].size.map_or(1, |s| s.max);
                        Some((Est { min: 1, max }.factor(STRING_TRAVERSAL), None))
                    }
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }
}

/// `computeExprSize`: sizes CEL knows from the expression itself.
fn expr_size(e: &IdedExpr) -> Option<Est> {
    let v = match &e.expr {
        Expr::Literal(l) => match l {
            LiteralValue::String(s) => s.inner().chars().count() as u64,
            LiteralValue::Bytes(b) => b.inner().len() as u64,
            _ => 1,
        },
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        _ => return None,
    };
    Some(Est::fixed(v))
}

fn max_id(e: &IdedExpr) -> u64 {
    let mut m = e.id;
    let mut visit = |x: &IdedExpr| m = m.max(max_id(x));
    match &e.expr {
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                visit(t);
            }
            c.args.iter().for_each(&mut visit);
        }
        Expr::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                visit(x);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(&mut visit),
        Expr::Map(mp) => {
            for en in &mp.entries {
                if let EntryExpr::MapEntry(me) = &en.expr {
                    visit(&me.key);
                    visit(&me.value);
                }
            }
        }
        Expr::Struct(st) => {
            for en in &st.entries {
                match &en.expr {
                    EntryExpr::StructField(f) => visit(&f.value),
                    EntryExpr::MapEntry(me) => {
                        visit(&me.key);
                        visit(&me.value);
                    }
                }
            }
        }
        Expr::Select(sel) => visit(&sel.operand),
        _ => {}
    }
    m
}

/// Expands the two-variable comprehension macros the parser leaves as calls (`all(k, v, p)`,
/// `exists`, `existsOne`, `transformList`, `transformMap`) as cel-go's `ext` package does,
/// so they are priced as the comprehensions they are.
fn desugar(e: &IdedExpr, next: &mut u64) -> IdedExpr {
    use kube_cel::cel::common::ast::{CallExpr, ComprehensionExpr, ListExpr, MapExpr};
    fn fresh(next: &mut u64, expr: Expr) -> IdedExpr {
        *next += 1;
        IdedExpr { id: *next, expr }
    }
    let ident = |n: &str| Expr::Ident(n.to_string());
    let call = |f: &str, args: Vec<IdedExpr>| {
        Expr::Call(CallExpr {
            func_name: f.to_string(),
            target: None,
            args,
        })
    };
    let expr = match &e.expr {
        Expr::Call(c) => {
            let target = c.target.as_ref().map(|t| Box::new(desugar(t, next)));
            let args: Vec<IdedExpr> = c.args.iter().map(|a| desugar(a, next)).collect();
            let vars = match (args.first().map(|a| &a.expr), args.get(1).map(|a| &a.expr)) {
                (Some(Expr::Ident(a)), Some(Expr::Ident(b))) => Some((a.clone(), b.clone())),
                _ => None,
            };
            let macro_name = c.func_name.as_str();
            let two_var = matches!(
                (macro_name, args.len()),
                ("all" | "exists" | "existsOne" | "exists_one", 3)
                    | ("transformList" | "transformMap", 3 | 4)
            );
            match (target, vars) {
                (Some(range), Some((v1, v2))) if two_var => {
                    let accu = "@result";
                    let mut rest = args.into_iter().skip(2);
                    let first = rest.next().expect("three arguments");
                    let second = rest.next();
                    let (init, cond, step, result);
                    match macro_name {
                        "all" | "exists" => {
                            let all = macro_name == "all";
                            init = Expr::Literal(LiteralValue::Boolean(all.into()));
                            let acc = fresh(next, ident(accu));
                            let inner = if all {
                                acc
                            } else {
                                let e = call("!_", vec![acc]);
                                fresh(next, e)
                            };
                            cond = call("@not_strictly_false", vec![inner]);
                            let acc = fresh(next, ident(accu));
                            step = call(if all { "_&&_" } else { "_||_" }, vec![acc, first]);
                            result = ident(accu);
                        }
                        "existsOne" | "exists_one" => {
                            init = Expr::Literal(LiteralValue::Int(0.into()));
                            cond = Expr::Literal(LiteralValue::Boolean(true.into()));
                            let acc = fresh(next, ident(accu));
                            let one = fresh(next, Expr::Literal(LiteralValue::Int(1.into())));
                            let plus = call("_+_", vec![acc, one]);
                            let plus = fresh(next, plus);
                            let acc = fresh(next, ident(accu));
                            step = call("_?_:_", vec![first, plus, acc]);
                            let acc = fresh(next, ident(accu));
                            let one = fresh(next, Expr::Literal(LiteralValue::Int(1.into())));
                            result = call("_==_", vec![acc, one]);
                        }
                        _ => {
                            let (filter, transform) = match second {
                                Some(t) => (Some(first), t),
                                None => (None, first),
                            };
                            let acc = fresh(next, ident(accu));
                            let grown = if macro_name == "transformList" {
                                init = Expr::List(ListExpr::new(Vec::new()));
                                let list = fresh(next, Expr::List(ListExpr::new(vec![transform])));
                                call("_+_", vec![acc, list])
                            } else {
                                init = Expr::Map(MapExpr {
                                    entries: Vec::new(),
                                });
                                let key = fresh(next, ident(&v1));
                                call("cel.@mapInsert", vec![acc, key, transform])
                            };
                            step = match filter {
                                Some(f) => {
                                    let grown = fresh(next, grown);
                                    let acc = fresh(next, ident(accu));
                                    call("_?_:_", vec![f, grown, acc])
                                }
                                None => grown,
                            };
                            cond = Expr::Literal(LiteralValue::Boolean(true.into()));
                            result = ident(accu);
                        }
                    }
                    Expr::Comprehension(Box::new(ComprehensionExpr {
                        iter_range: *range,
                        iter_var: v1,
                        iter_var2: Some(v2),
                        accu_var: accu.to_string(),
                        accu_init: fresh(next, init),
                        loop_cond: fresh(next, cond),
                        loop_step: fresh(next, step),
                        result: fresh(next, result),
                    }))
                }
                (target, _) => Expr::Call(CallExpr {
                    func_name: c.func_name.clone(),
                    target,
                    args,
                }),
            }
        }
        Expr::Comprehension(c) => {
            let mut c = (**c).clone();
            for x in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                *x = desugar(x, next);
            }
            Expr::Comprehension(Box::new(c))
        }
        Expr::List(l) => {
            let mut l = l.clone();
            for x in &mut l.elements {
                *x = desugar(x, next);
            }
            Expr::List(l)
        }
        Expr::Map(mp) => {
            let mut mp = mp.clone();
            for en in &mut mp.entries {
                if let EntryExpr::MapEntry(me) = &mut en.expr {
                    me.key = desugar(&me.key, next);
                    me.value = desugar(&me.value, next);
                }
            }
            Expr::Map(mp)
        }
        Expr::Select(sel) => {
            let mut sel = sel.clone();
            sel.operand = Box::new(desugar(&sel.operand, next));
            Expr::Select(sel)
        }
        other => other.clone(),
    };
    IdedExpr { id: e.id, expr }
}

/// The estimated maximum cost of one CEL expression evaluated on a node declared as `decl`
/// (`None` when it does not parse: compilation errors are reported elsewhere).
fn expression_cost(text: &str, decl: &Rc<Decl>, optional_old_self: bool) -> Option<u64> {
    let parsed = kube_cel::cel::parser::Parser::new().parse(text).ok()?;
    let mut next = max_id(&parsed);
    let ast = desugar(&parsed, &mut next);
    let self_ty = Ty::of_decl(decl);
    let old_self_ty = if optional_old_self {
        Ty::Optional(Box::new(self_ty.clone()))
    } else {
        self_ty.clone()
    };
    let mut checker = Checker {
        types: HashMap::new(),
        scopes: Vec::new(),
        self_ty,
        old_self_ty,
    };
    checker.check(&ast);
    let mut coster = Coster {
        root: decl,
        types: &checker.types,
        paths: HashMap::new(),
        sizes: HashMap::new(),
        entries: HashMap::new(),
        locals: HashMap::new(),
    };
    Some(coster.cost(&ast).max)
}

// ------------------------------------------------------------------------------------------
// Over a schema
// ------------------------------------------------------------------------------------------

/// The estimated cost of one rule (or `messageExpression`) of a CRD schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleCost {
    /// The field path kube-apiserver names it by, e.g.
    /// `spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`.
    pub path: String,
    /// The CEL expression.
    pub expression: String,
    /// The cost of one evaluation (cel-go's `CostEstimate.Max`).
    pub expression_cost: u64,
    /// How many times it can run per object: the product of the `maxItems`/`maxProperties`
    /// above it, or what fits in a 3 MiB request when one of them is unbounded (1 for a
    /// `messageExpression`, which Kubernetes does not multiply).
    pub cardinality: u64,
    /// `expression_cost × cardinality`: what is compared with [`PER_RULE_LIMIT`] and summed.
    pub cost: u64,
}

/// Every rule of one OpenAPI schema with its cost, and their total (kube's `TotalCost`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaCosts {
    /// The schema's path: `spec.validation.openAPIV3Schema` when every version shares one
    /// schema (kube-apiserver then validates it once), else `spec.versions[i].schema.openAPIV3Schema`.
    pub path: String,
    /// In the order kube-apiserver estimates them (children before their parent's rules).
    pub rules: Vec<RuleCost>,
    /// The sum of every rule's cost, saturating.
    pub total: u64,
}

/// `extractMaxElements`: how many times a node's children can occur per occurrence of it.
fn max_elements(schema: &Value) -> Option<u64> {
    match schema.get("type").and_then(Value::as_str).unwrap_or("") {
        "object" if schema.get("additionalProperties").is_some() => {
            int_of(schema, "maxProperties").map(|m| zero_if_negative(m) as u64)
        }
        "array" => int_of(schema, "maxItems").map(|m| zero_if_negative(m) as u64),
        _ => Some(1),
    }
}

/// `multiplyWithOverflowGuard`.
fn times_cardinality(cost: u64, cardinality: u64) -> u64 {
    if cost == 0 {
        0
    } else {
        cost.saturating_mul(cardinality)
    }
}

fn walk(schema: &Value, path: &str, cardinality: Option<u64>, root: bool, out: &mut Vec<RuleCost>) {
    let child_cardinality = match (cardinality, max_elements(schema)) {
        (Some(c), Some(m)) => Some(times_cardinality(c, m)),
        _ => None,
    };
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        walk(
            ap,
            &format!("{path}.additionalProperties"),
            child_cardinality,
            false,
            out,
        );
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            walk(
                prop,
                &format!("{path}.properties[{name}]"),
                child_cardinality,
                false,
                out,
            );
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        walk(
            items,
            &format!("{path}.items"),
            child_cardinality,
            false,
            out,
        );
    }
    let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    else {
        return;
    };
    if rules.is_empty() {
        return;
    }
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    let Some(decl) = decl_of(schema, root || embedded) else {
        return;
    };
    // `maxCardinality`: what fits in one request when the node is under an unbounded list or map.
    let cardinality = cardinality.unwrap_or((MAX_REQUEST_SIZE / (decl.min_size + 1)) as u64);
    for (i, rule) in rules.iter().enumerate() {
        let optional = rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
        let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
        let base = format!("{path}.x-kubernetes-validations[{i}]");
        if !text.trim().is_empty() {
            let expression_cost = expression_cost(text, &decl, optional).unwrap_or(0);
            out.push(RuleCost {
                path: format!("{base}.rule"),
                expression: text.to_string(),
                expression_cost,
                cardinality,
                cost: times_cardinality(expression_cost, cardinality),
            });
        }
        if let Some(message) = rule
            .get("messageExpression")
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty())
        {
            if let Some(c) = expression_cost(message, &decl, optional) {
                out.push(RuleCost {
                    path: format!("{base}.messageExpression"),
                    expression: message.to_string(),
                    expression_cost: c,
                    cardinality: 1,
                    cost: c,
                });
            }
        }
    }
}

/// The costs of every rule of one `openAPIV3Schema`, named under `path`.
pub fn schema_costs(schema: &Value, path: &str) -> SchemaCosts {
    let mut rules = Vec::new();
    walk(schema, path, Some(1), true, &mut rules);
    let total = rules.iter().fold(0u64, |t, r| t.saturating_add(r.cost));
    SchemaCosts {
        path: path.to_string(),
        rules,
        total,
    }
}

/// The schemas of a CRD as kube-apiserver validates them: one `spec.validation` schema when
/// every version has the same `schema` (the v1 → internal conversion hoists it), else one
/// per version. Each comes with the version name whose old schema decides ratcheting.
pub(crate) fn crd_schemas(crd: &Value) -> Vec<(String, String, &Value)> {
    let versions = crd["spec"]["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let Some(first) = versions.first() else {
        return Vec::new();
    };
    let hoisted = versions
        .iter()
        .all(|v| v.get("schema") == first.get("schema"));
    if hoisted {
        return first["schema"]["openAPIV3Schema"]
            .as_object()
            .map(|_| {
                vec![(
                    "spec.validation.openAPIV3Schema".to_string(),
                    first["name"].as_str().unwrap_or("").to_string(),
                    &first["schema"]["openAPIV3Schema"],
                )]
            })
            .unwrap_or_default();
    }
    versions
        .iter()
        .enumerate()
        .filter(|(_, v)| v["schema"]["openAPIV3Schema"].is_object())
        .map(|(i, v)| {
            (
                format!("spec.versions[{i}].schema.openAPIV3Schema"),
                v["name"].as_str().unwrap_or("").to_string(),
                &v["schema"]["openAPIV3Schema"],
            )
        })
        .collect()
}

/// The estimated cost of every rule of a CRD, schema by schema, as kube-apiserver 1.36
/// computes them at create and update: for developers checking their rules against
/// [`PER_RULE_LIMIT`] and [`SCHEMA_LIMIT`].
pub fn crd_rule_costs(crd: &Value) -> Vec<SchemaCosts> {
    crd_schemas(crd)
        .into_iter()
        .map(|(path, _, schema)| schema_costs(schema, &path))
        .collect()
}

/// A table of a CRD's rule costs against the limits, for people: one line per rule (cost,
/// per-evaluation cost × cardinality, path), then each schema's total against
/// [`SCHEMA_LIMIT`] and the share of it used.
pub fn format_rule_costs(name: &str, costs: &[SchemaCosts]) -> String {
    let mut out = format!("{name}\n");
    for schema in costs {
        for r in &schema.rules {
            let flag = if r.cost > PER_RULE_LIMIT {
                "  OVER the per-rule limit"
            } else {
                ""
            };
            out.push_str(&format!(
                "  {:>20} = {:>14} x {:>9}  {}{flag}\n",
                group_digits(r.cost),
                group_digits(r.expression_cost),
                group_digits(r.cardinality),
                r.path
            ));
        }
        out.push_str(&format!(
            "  {:>20}   total of {} against {} ({:.2}% of the whole-schema budget; per rule at most {})\n",
            group_digits(schema.total),
            schema.path,
            group_digits(SCHEMA_LIMIT),
            schema.total as f64 * 100.0 / SCHEMA_LIMIT as f64,
            group_digits(PER_RULE_LIMIT),
        ));
    }
    out
}

fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `getCostErrorMessage`.
fn over_budget(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!("{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")
}

/// The refusals of `validation.go` for one schema's costs. `unchanged` is true on an update
/// that leaves this schema as it was: the per-rule limit is then not applied (so a control
/// plane upgrade that prices rules higher never locks a CRD), the whole-schema one still is.
pub(crate) fn cost_errors(costs: &SchemaCosts, unchanged: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut most_expensive: Vec<&RuleCost> = Vec::new();
    for r in &costs.rules {
        if !unchanged && r.cost > PER_RULE_LIMIT {
            let what = if r.path.ends_with(".messageExpression") {
                "estimated messageExpression cost"
            } else {
                "estimated rule cost"
            };
            errs.push(FieldError::forbidden(
                r.path.clone(),
                &over_budget(what, r.cost, PER_RULE_LIMIT),
            ));
        }
        // Rules under 1% of the schema budget are never named.
        if r.cost >= SCHEMA_LIMIT / 100 {
            most_expensive.push(r);
            most_expensive.sort_by_key(|r| std::cmp::Reverse(r.cost));
            most_expensive.truncate(4);
        }
    }
    if costs.total > SCHEMA_LIMIT {
        for r in most_expensive {
            errs.push(FieldError::forbidden(
                r.path.clone(),
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        errs.push(FieldError::forbidden(
            costs.path.clone(),
            &over_budget(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                costs.total,
                SCHEMA_LIMIT,
            ),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cost(rule: &str, schema: Value) -> u64 {
        let decl = decl_of(&schema, false).expect("CEL sees the node");
        expression_cost(rule, &decl, false).expect("parses")
    }

    fn root_cost(rule: &str, schema: Value) -> u64 {
        let decl = decl_of(&schema, true).expect("CEL sees the node");
        expression_cost(rule, &decl, false).expect("parses")
    }

    #[test]
    fn cost_factors_round_up_like_go() {
        assert_eq!(mul_factor(1_070_595_074, 0.1), 107_059_508);
        assert_eq!(mul_factor(21, 0.25), 6);
        assert_eq!(mul_factor(0, 0.1), 0);
        assert_eq!(mul_factor(u64::MAX, 2.0), u64::MAX);
    }

    /// Items: `maxLength` 255 → 1020 bytes; unbounded list of strings (2 bytes min) →
    /// (3 MiB − 2) / 3 = 1,048,575 items. `join` (library/cost.go): 1,048,575 × 1020 + 1,048,574
    /// separators = 1,070,595,074 characters, cost ⌈×0.1⌉ = 107,059,508; `lowerAscii` the same;
    /// `==` (cel-go) ⌈min size × 0.1⌉ the same; plus 1 per `self`: 4 × 107,059,508 + 2.
    #[test]
    fn join_over_an_unbounded_list_costs_what_kubernetes_says_42_8x() {
        let schema = json!({"type": "array", "items": {"type": "string", "maxLength": 255}});
        let c = cost("self.join(',') == self.join(',').lowerAscii()", schema);
        assert_eq!(c, 428_238_034);
        assert_eq!(
            over_budget("estimated rule cost", c, PER_RULE_LIMIT),
            "estimated rule cost exceeds budget by factor of 42.8x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        );
    }

    /// `metadata.name` at a resource root is an unbounded string (3,145,726 bytes): `matches`
    /// costs ⌈(3,145,726 + 1) × 0.1⌉ = 314,573 times ⌈21 × 0.25⌉ = 6 for the 21-character
    /// regex, plus 3 for `self.metadata.name` (ident, two struct selects).
    #[test]
    fn matches_costs_string_length_times_a_quarter_of_the_regex() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        assert_eq!(
            root_cost(
                "self.metadata.name.matches('^[A-Za-z0-9_-]{1,90}$')",
                schema
            ),
            1_887_441
        );
    }

    /// `all` over a map of at most 10: range 1 + loop condition 2 (`@not_strictly_false`
    /// and the accumulator) + step (`&&` of the accumulator 1 and `k.size() > 0`: 1 + 1 + 1)
    /// per entry, result 1: 1 + 1 + 10 × (2 + 4) = 62. Map keys have no size estimate (0).
    #[test]
    fn all_over_a_bounded_map_costs_its_entries_times_the_step() {
        let schema = json!({"type": "object", "maxProperties": 10, "additionalProperties": {"type": "string"}});
        assert_eq!(cost("self.all(k, k.size() > 0)", schema), 62);
    }

    /// String equality costs ⌈0.1 × the smaller maximum⌉: 314,573 for two unbounded strings,
    /// plus 2 + 2 for the two selects.
    #[test]
    fn equality_of_unbounded_strings_costs_a_tenth_of_3_mib() {
        let schema = json!({"type": "object", "properties": {"sourceUrl": {"type": "string"}}});
        assert_eq!(
            cost("self.sourceUrl == oldSelf.sourceUrl", schema.clone()),
            314_577
        );
        let bounded = json!({"type": "object", "properties": {"sourceUrl": {"type": "string", "maxLength": 100}}});
        // ⌈400 × 0.1⌉ = 40.
        assert_eq!(cost("self.sourceUrl == oldSelf.sourceUrl", bounded), 44);
    }

    /// `in` a list literal costs its size (3) plus the select (2) and the list creation (10);
    /// `has()` costs only its operand (Kubernetes turns the presence test cost off).
    #[test]
    fn in_a_literal_list_and_has_are_cheap() {
        let schema = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        assert_eq!(cost("self.x in ['a', 'b', 'c']", schema.clone()), 15);
        assert_eq!(cost("has(self.x)", schema), 1);
    }

    /// `contains` multiplies both traversals: ⌈40 × 0.1⌉ × ⌈3 × 0.1⌉ = 4, plus 1 for `self`.
    #[test]
    fn contains_multiplies_both_strings() {
        let schema = json!({"type": "string", "maxLength": 10});
        assert_eq!(cost("self.contains('abc')", schema), 5);
    }

    /// A rule on the items of an unbounded list runs once per item that fits in a request:
    /// an item with one required string `name` is at least `{"name":""}` (2 + 4 + 2 + 4 = 12
    /// bytes), so 3 MiB / 13 = 241,979 times; with `maxItems: 20` it runs 20 times.
    #[test]
    fn a_rule_under_a_list_is_multiplied_by_how_many_items_fit() {
        let items = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.name != 'x'"}]});
        let schema = json!({"type": "object", "properties": {"list": {"type": "array", "items": items.clone()}}});
        let costs = schema_costs(&schema, "s");
        assert_eq!(costs.rules.len(), 1);
        assert_eq!(
            costs.rules[0].path,
            "s.properties[list].items.x-kubernetes-validations[0].rule"
        );
        assert_eq!(costs.rules[0].cardinality, 241_979);
        let bounded = json!({"type": "object", "properties": {"list": {"type": "array", "maxItems": 20, "items": items}}});
        assert_eq!(schema_costs(&bounded, "s").rules[0].cardinality, 20);
    }

    /// `all(k, v, p)` is the two-variable comprehension of cel-go's `ext` package: over a map
    /// of at most 10 it costs 1 (range) + 1 (result) + 10 × (2 + 1 + 2): loop condition 2,
    /// `&&` with the accumulator 1, and `v != 'x'` ⌈min(40, 1) × 0.1⌉ = 1 plus 1 for `v`.
    /// With one variable, `self[k]` costs 3 (index 1, `self` 1, `k` 1): 1 + 1 + 10 × 7.
    #[test]
    fn two_variable_comprehensions_are_priced_as_comprehensions() {
        let schema = json!({"type": "object", "maxProperties": 10,
            "additionalProperties": {"type": "string", "maxLength": 10}});
        assert_eq!(cost("self.all(k, v, v != 'x')", schema.clone()), 52);
        assert_eq!(cost("self.all(k, self[k] != 'x')", schema), 72);
    }

    /// `sets.contains` (cel-go `ext/sets.go`): the product of both list sizes (5 × 4) plus 1
    /// for the call, plus 2 + 2 for the two selects.
    #[test]
    fn set_operations_cost_the_product_of_both_sizes() {
        let list = |n: u64| json!({"type": "array", "maxItems": n, "items": {"type": "integer"}});
        let schema = json!({"type": "object", "properties": {"a": list(5), "b": list(4)}});
        assert_eq!(cost("sets.contains(self.a, self.b)", schema), 25);
    }

    #[test]
    fn factors_under_1_5_are_printed_with_six_decimals() {
        assert!(
            over_budget("estimated rule cost", 11_000_000, PER_RULE_LIMIT)
                .contains("by factor of 1.100000x (try")
        );
    }
}
