//! Field ownership (`metadata.managedFields`, `FieldsV1`) and server-side apply's structured
//! merge, in the spirit of structured-merge-diff: field sets per manager, conflicts between
//! managers, removal of fields a manager stops applying.
//!
//! List semantics come from the CRD schema (`x-kubernetes-list-type`/`-list-map-keys`, atomic
//! by default as for CRDs) and for metadata from the built-in rules (`ownerReferences` keyed by
//! `uid`, `finalizers` a set).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

/// One step of a field path, as FieldsV1 encodes it (`f:`, `k:`, `v:`, `i:`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pe {
    Field(String),
    /// Canonical JSON of the key fields of an associative-list item.
    Key(String),
    /// Canonical JSON of a set-list value.
    Value(String),
    Index(usize),
}

pub type Path = Vec<Pe>;
pub type FieldSet = BTreeSet<Path>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// Schema oracle: how lists and maps at a path merge.
#[derive(Clone, Debug, Default)]
pub struct Shape<'a> {
    /// `openAPIV3Schema` of the custom resource version, if any, borrowed from the stored CRD
    /// (copies of the schema on every write were a visible part of the sandbox's CPU profile).
    pub root: Option<&'a Value>,
}

impl<'a> Shape<'a> {
    pub fn new(root: Option<&'a Value>) -> Self {
        Self { root }
    }

    fn node(&self, path: &[Pe]) -> Option<&'a Value> {
        let mut node = self.root?;
        for pe in path {
            node = match pe {
                Pe::Field(f) => match node.get("properties").and_then(|p| p.get(f)) {
                    Some(n) => n,
                    None => match node.get("additionalProperties") {
                        Some(a) if a.is_object() => a,
                        _ => return None,
                    },
                },
                _ => node.get("items")?,
            };
        }
        Some(node)
    }

    pub fn list_kind(&self, path: &[Pe]) -> ListKind {
        if path.len() == 2 && path[0] == Pe::Field("metadata".into()) {
            match &path[1] {
                Pe::Field(f) if f == "ownerReferences" => return ListKind::Map(vec!["uid".into()]),
                Pe::Field(f) if f == "finalizers" => return ListKind::Set,
                _ => return ListKind::Atomic,
            }
        }
        let Some(n) = self.node(path) else {
            return ListKind::Atomic;
        };
        match n.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys: Vec<String> = n
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|k| k.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }

    /// A granular map (as opposed to a struct): its own path is a member of field sets, which
    /// FieldsV1 shows as `".": {}` (labels, annotations, Secret/ConfigMap data,
    /// `additionalProperties` objects of a CRD schema).
    pub fn is_map(&self, path: &[Pe]) -> bool {
        let f = |s: &str| Pe::Field(s.to_string());
        if path.len() == 2 && path[0] == f("metadata") {
            return path[1] == f("labels") || path[1] == f("annotations");
        }
        if path.first() == Some(&f("metadata")) {
            return false;
        }
        if self.root.is_none() {
            return path.len() == 1
                && (path[0] == f("data")
                    || path[0] == f("stringData")
                    || path[0] == f("binaryData"));
        }
        match self.node(path) {
            Some(n) => {
                n.get("properties").is_none()
                    && (n
                        .get("additionalProperties")
                        .is_some_and(|a| a.is_object() || a == &Value::Bool(true))
                        || n.get("x-kubernetes-preserve-unknown-fields")
                            == Some(&Value::Bool(true)))
            }
            None => false,
        }
    }

    pub fn atomic_map(&self, path: &[Pe]) -> bool {
        if path.first() == Some(&Pe::Field("metadata".into())) {
            return false;
        }
        self.node(path)
            .and_then(|n| n.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            .is_some_and(|t| t == "atomic")
    }
}

/// Canonical JSON of the key fields of `item` (sorted by field name), or `None` if a key is missing.
fn item_key(item: &Value, keys: &[String]) -> Option<String> {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let mut parts = Vec::new();
    for k in sorted {
        let v = item.get(k)?;
        parts.push(format!(
            "{}:{}",
            serde_json::to_string(k).ok()?,
            serde_json::to_string(v).ok()?
        ));
    }
    Some(format!("{{{}}}", parts.join(",")))
}

fn key_matches(item: &Value, key: &str) -> bool {
    let Ok(Value::Object(k)) = serde_json::from_str::<Value>(key) else {
        return false;
    };
    k.iter().all(|(f, v)| item.get(f) == Some(v))
}

/// Metadata fields the server sets; never owned by a manager.
const UNTRACKED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// Which part of an object an operation may touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything (no status subresource).
    All,
    /// The main resource of a kind with a status subresource: everything but `status`.
    Main,
    /// The status subresource: only `status`.
    Status,
}

/// The part of `obj` whose fields are tracked for `scope`.
pub fn tracked(obj: &Value, scope: Scope) -> Value {
    let mut out = Map::new();
    if let Value::Object(m) = obj {
        for (k, v) in m {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            match scope {
                Scope::Status if k != "status" => continue,
                Scope::Main if k == "status" => continue,
                _ => {}
            }
            if k == "metadata" {
                let mut meta = v.clone();
                if let Value::Object(mm) = &mut meta {
                    for u in UNTRACKED_META {
                        mm.remove(*u);
                    }
                }
                if meta.as_object().is_some_and(|m| !m.is_empty()) {
                    out.insert(k.clone(), meta);
                }
                continue;
            }
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

fn collect(v: &Value, path: &mut Path, shape: &Shape<'_>, out: &mut FieldSet) {
    match v {
        Value::Object(m) => {
            if !path.is_empty() && (m.is_empty() || shape.atomic_map(path)) {
                out.insert(path.clone());
                return;
            }
            if !path.is_empty() && shape.is_map(path) {
                out.insert(path.clone());
            }
            for (k, c) in m {
                path.push(Pe::Field(k.clone()));
                collect(c, path, shape, out);
                path.pop();
            }
        }
        Value::Array(a) => match shape.list_kind(path) {
            ListKind::Atomic => {
                out.insert(path.clone());
            }
            ListKind::Set => {
                if a.is_empty() || a.iter().any(|i| i.is_object() || i.is_array()) {
                    out.insert(path.clone());
                    return;
                }
                for i in a {
                    let mut p = path.clone();
                    p.push(Pe::Value(i.to_string()));
                    out.insert(p);
                }
            }
            ListKind::Map(keys) => {
                let ks: Option<Vec<String>> = a.iter().map(|i| item_key(i, &keys)).collect();
                match ks {
                    Some(ks) if !a.is_empty() => {
                        for (item, k) in a.iter().zip(ks) {
                            path.push(Pe::Key(k));
                            out.insert(path.clone());
                            if let Value::Object(m) = item {
                                for (f, c) in m {
                                    path.push(Pe::Field(f.clone()));
                                    collect(c, path, shape, out);
                                    path.pop();
                                }
                            }
                            path.pop();
                        }
                    }
                    _ => {
                        out.insert(path.clone());
                    }
                }
            }
        },
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

/// The set of fields `v` (already passed through [`tracked`]) sets.
pub fn field_set(v: &Value, shape: &Shape<'_>) -> FieldSet {
    let mut out = FieldSet::new();
    collect(v, &mut Vec::new(), shape, &mut out);
    out
}

pub fn get_at<'a>(v: &'a Value, path: &[Pe]) -> Option<&'a Value> {
    let mut cur = v;
    for pe in path {
        cur = match pe {
            Pe::Field(f) => cur.get(f)?,
            Pe::Key(k) => cur.as_array()?.iter().find(|i| key_matches(i, k))?,
            Pe::Value(j) => {
                let want: Value = serde_json::from_str(j).ok()?;
                cur.as_array()?.iter().find(|i| **i == want)?
            }
            Pe::Index(i) => cur.as_array()?.get(*i)?,
        };
    }
    Some(cur)
}

/// Remove the node at `path` (a map key, a list item or a set value).
pub fn remove_at(v: &mut Value, path: &[Pe]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for pe in parent_path {
        let next = match pe {
            Pe::Field(f) => cur.get_mut(f),
            Pe::Key(k) => cur
                .as_array_mut()
                .and_then(|a| a.iter_mut().find(|i| key_matches(i, k))),
            Pe::Value(_) => None,
            Pe::Index(i) => cur.as_array_mut().and_then(|a| a.get_mut(*i)),
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match last {
        Pe::Field(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        Pe::Key(k) => {
            if let Some(a) = cur.as_array_mut() {
                a.retain(|i| !key_matches(i, k));
            }
        }
        Pe::Value(j) => {
            if let (Some(a), Ok(want)) = (cur.as_array_mut(), serde_json::from_str::<Value>(j)) {
                a.retain(|i| *i != want);
            }
        }
        Pe::Index(i) => {
            if let Some(a) = cur.as_array_mut() {
                if *i < a.len() {
                    a.remove(*i);
                }
            }
        }
    }
}

/// A key field of an associative-list item (`...[type=Ready].type`): never removed on its
/// own, or the item would lose its identity.
fn is_key_field(p: &[Pe]) -> bool {
    match p {
        [.., Pe::Key(k), Pe::Field(f)] => {
            matches!(serde_json::from_str::<Value>(k), Ok(Value::Object(m)) if m.contains_key(f))
        }
        _ => false,
    }
}

/// Whether `set` holds a path below `p` (descendants sort right after `p`).
fn has_children(set: &FieldSet, p: &Path) -> bool {
    use std::ops::Bound::{Excluded, Unbounded};
    set.range::<Path, _>((Excluded(p), Unbounded))
        .next()
        .is_some_and(|q| q.starts_with(p))
}

/// Fields set or changed going from `old` to `new`, and fields removed.
pub fn diff(old: &Value, new: &Value, shape: &Shape<'_>) -> (FieldSet, FieldSet) {
    let fo = field_set(old, shape);
    let fnew = field_set(new, shape);
    let changed = fnew
        .iter()
        .filter(|p| {
            if !fo.contains(*p) {
                return true;
            }
            // A container's own path (list item, granular map) changes only when it appears;
            // its fields say the rest.
            if has_children(&fnew, p) {
                return false;
            }
            get_at(old, p) != get_at(new, p)
        })
        .cloned()
        .collect();
    let removed = fo.difference(&fnew).cloned().collect();
    (changed, removed)
}

/// Structured merge of an applied configuration into the live object.
pub fn merge(live: &mut Value, applied: &Value, path: &mut Path, shape: &Shape<'_>) {
    match (&mut *live, applied) {
        (Value::Object(l), Value::Object(a)) if !shape.atomic_map(path) => {
            for (k, av) in a {
                if av.is_null() {
                    l.remove(k);
                    continue;
                }
                path.push(Pe::Field(k.clone()));
                match l.get_mut(k) {
                    Some(lv) => merge(lv, av, path, shape),
                    None => {
                        l.insert(k.clone(), av.clone());
                    }
                }
                path.pop();
            }
        }
        (Value::Array(l), Value::Array(a)) => match shape.list_kind(path) {
            ListKind::Atomic => *live = applied.clone(),
            ListKind::Set => {
                for i in a {
                    if !l.contains(i) {
                        l.push(i.clone());
                    }
                }
            }
            ListKind::Map(keys) => {
                for item in a {
                    let Some(k) = item_key(item, &keys) else {
                        *live = applied.clone();
                        return;
                    };
                    path.push(Pe::Key(k.clone()));
                    match l.iter_mut().find(|i| key_matches(i, &k)) {
                        Some(li) => merge(li, item, path, shape),
                        None => l.push(item.clone()),
                    }
                    path.pop();
                }
            }
        },
        _ => *live = applied.clone(),
    }
}

// ---- FieldsV1 encoding ----

#[derive(Default)]
struct Node {
    member: bool,
    children: BTreeMap<String, Node>,
}

fn pe_str(pe: &Pe) -> String {
    match pe {
        Pe::Field(f) => format!("f:{f}"),
        Pe::Key(k) => format!("k:{k}"),
        Pe::Value(v) => format!("v:{v}"),
        Pe::Index(i) => format!("i:{i}"),
    }
}

fn node_json(n: &Node) -> Value {
    let mut m = Map::new();
    if n.member && !n.children.is_empty() {
        m.insert(".".into(), json!({}));
    }
    for (k, c) in &n.children {
        m.insert(k.clone(), node_json(c));
    }
    Value::Object(m)
}

pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Node::default();
    for p in set {
        let mut n = &mut root;
        for pe in p {
            n = n.children.entry(pe_str(pe)).or_default();
        }
        n.member = true;
    }
    node_json(&root)
}

fn canonical(j: &str) -> String {
    match serde_json::from_str::<Value>(j) {
        Ok(Value::Object(m)) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            item_key(&Value::Object(m), &keys).unwrap_or_else(|| j.to_string())
        }
        Ok(v) => v.to_string(),
        Err(_) => j.to_string(),
    }
}

fn from_node(v: &Value, path: &mut Path, out: &mut FieldSet) {
    let Value::Object(m) = v else { return };
    if m.is_empty() && !path.is_empty() {
        out.insert(path.clone());
        return;
    }
    for (k, c) in m {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        let pe = if let Some(f) = k.strip_prefix("f:") {
            Pe::Field(f.to_string())
        } else if let Some(j) = k.strip_prefix("k:") {
            Pe::Key(canonical(j))
        } else if let Some(j) = k.strip_prefix("v:") {
            Pe::Value(canonical(j))
        } else if let Some(i) = k.strip_prefix("i:") {
            match i.parse() {
                Ok(i) => Pe::Index(i),
                Err(_) => continue,
            }
        } else {
            continue;
        };
        path.push(pe);
        from_node(c, path, out);
        path.pop();
    }
}

pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    from_node(v, &mut Vec::new(), &mut out);
    out
}

/// `.spec.replicas`, `.spec.list[name="a"].x`: how structured-merge-diff prints paths.
pub fn path_string(p: &Path) -> String {
    let mut s = String::new();
    for pe in p {
        match pe {
            Pe::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            Pe::Key(k) => {
                let inner = match serde_json::from_str::<Value>(k) {
                    Ok(Value::Object(m)) => m
                        .iter()
                        .map(|(f, v)| format!("{f}={v}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    _ => k.clone(),
                };
                s.push_str(&format!("[{inner}]"));
            }
            Pe::Value(v) => s.push_str(&format!("[={v}]")),
            Pe::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

// ---- managedFields ----

/// One `managedFields` entry.
#[derive(Clone, Debug)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub set: FieldSet,
}

impl Entry {
    fn same(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    /// How conflicts name the manager: `"m"`, `"m" using v1 at <time>` for updaters.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
            if !self.time.is_empty() {
                s.push_str(&format!(" at {}", self.time));
            }
        }
        s
    }
}

pub fn parse_managed(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["manager"].is_string() || e["fieldsV1"].is_object())
                .map(|e| Entry {
                    manager: e["manager"].as_str().unwrap_or_default().to_string(),
                    operation: e["operation"].as_str().unwrap_or("Update").to_string(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                    time: e["time"].as_str().unwrap_or_default().to_string(),
                    subresource: e["subresource"].as_str().unwrap_or_default().to_string(),
                    set: from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn write_managed(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.set),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Who is writing and how.
#[derive(Clone, Debug)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub subresource: &'a str,
    pub api_version: &'a str,
    pub now: &'a str,
    pub scope: Scope,
}

/// Record a non-apply write (create, update, patch) from `old` to `new` in `new`'s managedFields:
/// the writer owns what it changed, others lose it; removed fields lose all owners.
pub fn track_update(
    entries: &mut Vec<Entry>,
    w: &Writer,
    old: Option<&Value>,
    new: &Value,
    shape: &Shape<'_>,
) {
    let empty = json!({});
    let old_t = tracked(old.unwrap_or(&empty), w.scope);
    let new_t = tracked(new, w.scope);
    let (changed, removed) = diff(&old_t, &new_t, shape);
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    for e in entries.iter_mut() {
        e.set
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    if !changed.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.same(w.manager, "Update", w.subresource))
        {
            Some(e) => {
                e.set.extend(changed);
                e.time = w.now.to_string();
                e.api_version = w.api_version.to_string();
            }
            None => entries.push(Entry {
                manager: w.manager.to_string(),
                operation: "Update".into(),
                api_version: w.api_version.to_string(),
                time: w.now.to_string(),
                subresource: w.subresource.to_string(),
                set: changed,
            }),
        }
    }
    entries.retain(|e| !e.set.is_empty());
}

/// A conflict: another manager owns a field the apply would change.
#[derive(Clone, Debug)]
pub struct Conflict {
    pub manager: String,
    pub path: Path,
}

/// Server-side apply of `applied` onto `live` (`None` when creating). Returns the merged object
/// (managedFields updated) or the conflicts when not forced.
pub fn apply(
    live: &Value,
    applied: &Value,
    w: &Writer,
    force: bool,
    shape: &Shape<'_>,
) -> Result<Value, Vec<Conflict>> {
    let mut entries = parse_managed(live);
    let applied_t = tracked(applied, w.scope);
    let set_a = field_set(&applied_t, shape);
    let prev_a: FieldSet = entries
        .iter()
        .find(|e| e.same(w.manager, "Apply", w.subresource))
        .map(|e| e.set.clone())
        .unwrap_or_default();

    let mut merged = live.clone();
    merge(&mut merged, &applied_t, &mut Vec::new(), shape);

    let live_t = tracked(live, w.scope);
    let merged_t = tracked(&merged, w.scope);
    let (changed, removed) = diff(&live_t, &merged_t, shape);
    let touched: FieldSet = changed.union(&removed).cloned().collect();

    let mut conflicts = Vec::new();
    for e in entries.iter() {
        if e.same(w.manager, "Apply", w.subresource) {
            continue;
        }
        for p in e.set.intersection(&touched) {
            conflicts.push(Conflict {
                manager: e.describe(),
                path: p.clone(),
            });
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    // Forced (or no conflicts): the applier takes the fields it set.
    for e in entries.iter_mut() {
        if !e.same(w.manager, "Apply", w.subresource) {
            e.set.retain(|p| !touched.contains(p) || !set_a.contains(p));
        }
    }
    // Fields this manager applied before but no longer does, owned by no one else, go away.
    // Containers first: an item or map nobody else has a stake in goes as a whole.
    let mut gone: Vec<&Path> = prev_a.difference(&set_a).collect();
    gone.sort_by_key(|p| p.len());
    for p in gone {
        if is_key_field(p) {
            continue;
        }
        let owned_elsewhere = entries.iter().any(|e| {
            !e.same(w.manager, "Apply", w.subresource) && e.set.iter().any(|q| q.starts_with(p))
        });
        if !owned_elsewhere {
            remove_at(&mut merged, p);
        }
    }
    match entries
        .iter_mut()
        .find(|e| e.same(w.manager, "Apply", w.subresource))
    {
        Some(e) => {
            e.set = set_a;
            e.time = w.now.to_string();
            e.api_version = w.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: w.manager.to_string(),
            operation: "Apply".into(),
            api_version: w.api_version.to_string(),
            time: w.now.to_string(),
            subresource: w.subresource.to_string(),
            set: set_a,
        }),
    }
    // Fields removed by the apply lose every owner.
    let merged_t = tracked(&merged, w.scope);
    let present = field_set(&merged_t, shape);
    let final_removed: FieldSet = field_set(&live_t, shape)
        .difference(&present)
        .cloned()
        .collect();
    for e in entries.iter_mut() {
        e.set.retain(|p| !final_removed.contains(p));
    }
    entries.retain(|e| !e.set.is_empty());
    write_managed(&mut merged, &entries);
    Ok(merged)
}

/// The 409 body message for apply conflicts, worded like kube-apiserver.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if conflicts.len() == 1 {
        let c = &conflicts[0];
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager,
            path_string(&c.path)
        );
    }
    let mut by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for c in conflicts {
        by.entry(&c.manager).or_default().push(path_string(&c.path));
    }
    let mut lines = Vec::new();
    for (m, paths) in by {
        lines.push(format!("conflicts with {m}:"));
        for p in paths {
            lines.push(format!("- {p}"));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(m: &'static str) -> Writer<'static> {
        Writer {
            manager: m,
            subresource: "",
            api_version: "v1",
            now: "t",
            scope: Scope::All,
        }
    }

    #[test]
    fn apply_removes_fields_a_manager_stops_applying() {
        let shape = Shape::default();
        let live = json!({"metadata": {"name": "x"}});
        let a = apply(
            &live,
            &json!({"spec": {"a": 1, "b": 2}}),
            &w("m"),
            false,
            &shape,
        )
        .unwrap();
        let b = apply(&a, &json!({"spec": {"a": 1}}), &w("m"), false, &shape).unwrap();
        assert_eq!(b["spec"], json!({"a": 1}));
    }

    #[test]
    fn apply_conflicts_with_other_manager_unless_forced() {
        let shape = Shape::default();
        let live = json!({"metadata": {"name": "x"}});
        let a = apply(&live, &json!({"spec": {"a": 1}}), &w("m"), false, &shape).unwrap();
        let err = apply(&a, &json!({"spec": {"a": 2}}), &w("n"), false, &shape).unwrap_err();
        assert_eq!(
            conflict_message(&err),
            "Apply failed with 1 conflict: conflict with \"m\": .spec.a"
        );
        let b = apply(&a, &json!({"spec": {"a": 2}}), &w("n"), true, &shape).unwrap();
        assert_eq!(b["spec"]["a"], 2);
        // m no longer owns spec.a, so dropping it from m's config keeps n's value.
        let c = apply(&b, &json!({"spec": {}}), &w("m"), false, &shape).unwrap();
        assert_eq!(c["spec"]["a"], 2);
    }

    #[test]
    fn managers_share_a_map_and_keep_their_own_keys() {
        let shape = Shape::default();
        let live = json!({"metadata": {"name": "x"}});
        let a = apply(
            &live,
            &json!({"metadata": {"labels": {"a": "1"}}}),
            &w("m"),
            false,
            &shape,
        )
        .unwrap();
        let b = apply(
            &a,
            &json!({"metadata": {"labels": {"b": "2"}}}),
            &w("n"),
            false,
            &shape,
        )
        .unwrap();
        assert_eq!(b["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        let mf = &b["metadata"]["managedFields"];
        assert_eq!(
            mf[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
        );
        // m stops applying labels: its key goes, the other one stays.
        let c = apply(&b, &json!({"metadata": {}}), &w("m"), false, &shape).unwrap();
        assert_eq!(c["metadata"]["labels"], json!({"b": "2"}));
    }

    #[test]
    fn associative_lists_merge_by_key_and_items_belong_to_their_appliers() {
        let schema = json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}}}}});
        let shape = Shape::new(Some(&schema));
        let live = json!({"metadata": {"name": "x"}});
        let cond = |t: &str, s: &str| json!({"type": t, "status": s});
        let a = apply(
            &live,
            &json!({"status": {"conditions": [cond("Ready", "True")]}}),
            &w("m"),
            false,
            &shape,
        )
        .unwrap();
        let b = apply(
            &a,
            &json!({"status": {"conditions": [cond("Synced", "False")]}}),
            &w("n"),
            false,
            &shape,
        )
        .unwrap();
        assert_eq!(
            b["status"]["conditions"],
            json!([cond("Ready", "True"), cond("Synced", "False")])
        );
        assert_eq!(
            b["metadata"]["managedFields"][1]["fieldsV1"],
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Synced\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
        );
        // n changing m's item conflicts; dropping its own item removes only that one.
        assert!(apply(
            &b,
            &json!({"status": {"conditions": [cond("Ready", "False")]}}),
            &w("n"),
            false,
            &shape
        )
        .is_err());
        let c = apply(
            &b,
            &json!({"status": {"conditions": []}}),
            &w("n"),
            false,
            &shape,
        )
        .unwrap();
        assert_eq!(c["status"]["conditions"], json!([cond("Ready", "True")]));
    }

    #[test]
    fn fields_v1_roundtrip() {
        let shape = Shape::default();
        let v = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["x"], "ownerReferences": [{"uid": "u", "name": "n"}]}, "spec": {"l": [1, 2]}});
        let s = field_set(&tracked(&v, Scope::All), &shape);
        assert_eq!(from_fields_v1(&to_fields_v1(&s)), s);
    }
}
