//! core/v1 and events.k8s.io/v1 Events share one storage, as on a real cluster, so events a
//! controller records through events.k8s.io (kube-rs' `Recorder`) show in `kubectl describe`
//! and `kubectl get events`. Objects are stored in the core/v1 shape and converted.

use serde_json::{Map, Value};

use super::schema::FieldError;

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

// What kube-apiserver checks on an Event (`pkg/apis/core/validation/events.go`), on the stored
// core/v1 shape, so the field paths are core/v1's (`message`, `reportingController` as Go names
// it) whichever API the write came through.
const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// The errors kube-apiserver gives an Event write. `new_api`: the write came through
/// events.k8s.io/v1, which adds the strict checks (core/v1 keeps the legacy ones only, for old
/// clients); `old`: the stored Event of an update.
pub fn validate(event: &Value, old: Option<&Value>, new_api: bool) -> Vec<FieldError> {
    let mut errs = legacy(event);
    if !new_api {
        return errs;
    }
    let set = |k: &str| !event[k].is_null() && event[k] != "" && event[k] != 0;
    match old {
        None => {
            errs.extend(series(event));
            if !set("eventTime") {
                errs.push(required("eventTime"));
            }
            let type_ = event["type"].as_str().unwrap_or_default();
            if type_ != "Normal" && type_ != "Warning" {
                errs.push(invalid(
                    "type",
                    &"".into(),
                    &format!("has invalid value: {type_}"),
                ));
            }
            for k in ["firstTimestamp", "lastTimestamp", "count"] {
                if set(k) {
                    errs.push(invalid(k, &"".into(), "needs to be unset"));
                }
            }
            let source = &event["source"];
            if source["component"].as_str().is_some_and(|s| !s.is_empty())
                || source["host"].as_str().is_some_and(|s| !s.is_empty())
            {
                errs.push(invalid("source", &"".into(), "needs to be unset"));
            }
        }
        Some(old) => {
            if event["series"] != old["series"] {
                errs.extend(series(event));
            }
            for (k, path) in [
                ("involvedObject", "involvedObject"),
                ("reason", "reason"),
                ("message", "message"),
                ("source", "source"),
                ("firstTimestamp", "firstTimestamp"),
                ("lastTimestamp", "lastTimestamp"),
                ("count", "count"),
                ("type", "type"),
                ("eventTime", "eventTime"),
                ("action", "action"),
                ("related", "related"),
                ("reportingComponent", "reportingController"),
                ("reportingInstance", "reportingInstance"),
            ] {
                if event[k] != old[k] {
                    errs.push(invalid(path, &event[k], "field is immutable"));
                }
            }
        }
    }
    errs
}

/// `legacyValidateEvent`: what every Event write passes, through either API.
fn legacy(event: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let text = |k: &str| event[k].as_str().unwrap_or_default();
    let ns = event["metadata"]["namespace"].as_str().unwrap_or_default();
    let involved_ns = event["involvedObject"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let mismatch = || {
        invalid(
            "involvedObject.namespace",
            &involved_ns.into(),
            "does not match event.namespace",
        )
    };
    let new_style = !event["eventTime"].is_null() && event["eventTime"] != "";
    if !new_style {
        let ok = if involved_ns.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            ns == involved_ns
        };
        if !ok {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let controller = text("reportingComponent");
        if controller.is_empty() {
            errs.push(required("reportingController"));
        }
        for msg in super::schema::label_key_errors(controller) {
            errs.push(invalid("reportingController", &controller.into(), &msg));
        }
        for (k, path, limit) in [
            (
                "reportingInstance",
                "reportingInstance",
                REPORTING_INSTANCE_LIMIT,
            ),
            ("action", "action", ACTION_LIMIT),
            ("reason", "reason", REASON_LIMIT),
        ] {
            if text(k).is_empty() {
                errs.push(required(path));
            }
            if text(k).len() > limit {
                errs.push(invalid(
                    path,
                    &"".into(),
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
        if text("message").len() > NOTE_LIMIT {
            errs.push(invalid(
                "message",
                &"".into(),
                &format!("can have at most {NOTE_LIMIT} characters"),
            ));
        }
    }
    for msg in super::schema::dns1123_subdomain_errors(ns) {
        errs.push(invalid("namespace", &ns.into(), &msg));
    }
    errs
}

/// `validateV1EventSeries`.
fn series(event: &Value) -> Vec<FieldError> {
    let s = &event["series"];
    if s.is_null() {
        return Vec::new();
    }
    let mut errs = Vec::new();
    if s["count"].as_i64().unwrap_or(0) < 2 {
        errs.push(invalid("series.count", &"".into(), "should be at least 2"));
    }
    if s["lastObservedTime"].is_null() || s["lastObservedTime"] == "" {
        errs.push(required("series.lastObservedTime"));
    }
    errs
}

fn required(field: &str) -> FieldError {
    FieldError::required(field, "")
}

fn invalid(field: &str, value: &Value, detail: &str) -> FieldError {
    FieldError::invalid(field, value, detail)
}
