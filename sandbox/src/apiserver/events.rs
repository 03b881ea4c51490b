//! core/v1 and events.k8s.io/v1 Events share one storage, as on a real cluster, so events a
//! controller records through events.k8s.io (kube-rs' `Recorder`) show in `kubectl describe`
//! and `kubectl get events`. Objects are stored in the core/v1 shape and converted.

use serde_json::{Map, Value};

/// `(events.k8s.io name, core/v1 name)` of the fields that differ.
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(v: &Value, from_new: bool) -> Value {
    let Value::Object(m) = v else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, val) in m {
        let name = RENAMES
            .iter()
            .find(|(n, c)| if from_new { n == k } else { c == k })
            .map(|(n, c)| if from_new { *c } else { *n })
            .unwrap_or(k.as_str());
        out.insert(name.to_string(), val.clone());
    }
    Value::Object(out)
}

/// events.k8s.io/v1 shape → stored core/v1 shape.
pub fn to_core(v: &Value) -> Value {
    rename(v, true)
}

/// Stored core/v1 shape → events.k8s.io/v1 shape.
pub fn from_core(v: &Value) -> Value {
    rename(v, false)
}

/// A field selector path of events.k8s.io in the stored shape (`regarding.name` →
/// `involvedObject.name`).
pub fn field_to_core(path: &str) -> String {
    let (head, tail) = path
        .split_once('.')
        .map(|(h, t)| (h, Some(t)))
        .unwrap_or((path, None));
    let head = RENAMES
        .iter()
        .find(|(n, _)| *n == head)
        .map(|(_, c)| *c)
        .unwrap_or(head);
    match tail {
        Some(t) => format!("{head}.{t}"),
        None => head.to_string(),
    }
}
