//! Server-side `meta.k8s.io/v1` `Table` rendering: kube's CRD table convertor
//! (`additionalPrinterColumns`, JSONPath, Name first) and the built-in printers of
//! `pkg/printers/internalversion` for the kinds the dev server serves.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::jsonpath;

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATION_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// `duration.HumanDuration` of apimachinery: `5m3s`, `3h`, `2d4h`, `3y`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince`: `<unknown>` for a missing timestamp.
fn since(ts: &Value, now: DateTime<Utc>) -> Value {
    match ts
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
    {
        Some(t) => Value::String(human_duration((now - t.with_timezone(&Utc)).num_seconds())),
        None => Value::String("<unknown>".into()),
    }
}

fn col(name: &str, ty: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

fn name_col() -> Value {
    col("Name", "string", "name", NAME_DESCRIPTION, 0)
}

fn age_col() -> Value {
    col("Age", "string", "", CREATION_DESCRIPTION, 0)
}

/// Go's jsonpath text printing of one value (strings raw, others as JSON).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `cellForJSONValue` of the CRD table convertor.
fn cell_for(ty: &str, v: &Value, now: DateTime<Utc>) -> Value {
    match (ty, v) {
        (_, Value::Null) => Value::Null,
        ("integer", Value::Number(n)) => n
            .as_i64()
            .map(Value::from)
            .or_else(|| n.as_f64().map(|f| Value::from(f as i64)))
            .unwrap_or(Value::Null),
        ("number", Value::Number(n)) => n.as_f64().map(Value::from).unwrap_or(Value::Null),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("string", Value::String(s)) => Value::String(s.clone()),
        ("date", Value::String(s)) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) => Value::String(human_duration((now - t.with_timezone(&Utc)).num_seconds())),
            Err(_) => Value::String("<invalid>".into()),
        },
        _ => Value::Null,
    }
}

/// Columns of a CRD version: its `additionalPrinterColumns`, or kube's default `Age`.
fn crd_columns(crd: &Value, version: &str) -> Vec<Value> {
    let v = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"].as_str() == Some(version)));
    let cols = v
        .and_then(|v| v["additionalPrinterColumns"].as_array())
        .cloned()
        .unwrap_or_default();
    if cols.is_empty() {
        vec![json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})]
    } else {
        cols
    }
}

fn crd_table(
    crd: &Value,
    version: &str,
    objects: &[Value],
    now: DateTime<Utc>,
) -> (Vec<Value>, Vec<Vec<Value>>) {
    let columns = crd_columns(crd, version);
    let mut defs = vec![name_col()];
    let mut parsed = Vec::new();
    for c in &columns {
        let jp = c["jsonPath"].as_str().unwrap_or("");
        let description = c["description"]
            .as_str()
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| {
                format!("Custom resource definition column (in JSONPath format): {jp}")
            });
        defs.push(json!({
            "name": c["name"].as_str().unwrap_or(""),
            "type": c["type"].as_str().unwrap_or("string"),
            "format": c["format"].as_str().unwrap_or(""),
            "description": description,
            "priority": c["priority"].as_i64().unwrap_or(0),
        }));
        parsed.push((
            c["type"].as_str().unwrap_or("string").to_string(),
            jsonpath::parse(jp).ok(),
        ));
    }
    let rows = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o["metadata"]["name"].clone()];
            for (ty, path) in &parsed {
                let found = path
                    .as_ref()
                    .map(|p| jsonpath::find(p, o))
                    .unwrap_or_default();
                cells.push(match found.first() {
                    None => Value::Null,
                    Some(v) if ty == "string" => Value::String(text(v)),
                    Some(v) => cell_for(ty, v, now),
                });
            }
            cells
        })
        .collect();
    (defs, rows)
}

fn count(v: &Value) -> i64 {
    v.as_object()
        .map(|m| m.len() as i64)
        .or_else(|| v.as_array().map(|a| a.len() as i64))
        .unwrap_or(0)
}

fn str_of(v: &Value) -> Value {
    Value::String(v.as_str().unwrap_or("").to_string())
}

/// Last-seen column of events: `lastTimestamp`, else `eventTime`; with a series,
/// `<last> (x<count> over <first>)`.
fn event_last_seen(o: &Value, now: DateTime<Utc>) -> Value {
    let last = ["lastTimestamp", "deprecatedLastTimestamp", "eventTime"]
        .iter()
        .map(|k| &o[*k])
        .find(|v| v.is_string())
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(series) = o.get("series").filter(|s| s.is_object()) {
        let observed = series
            .get("lastObservedTime")
            .cloned()
            .unwrap_or(Value::Null);
        let first = ["eventTime", "firstTimestamp", "deprecatedFirstTimestamp"]
            .iter()
            .map(|k| &o[*k])
            .find(|v| v.is_string())
            .cloned()
            .unwrap_or(Value::Null);
        let count = series["count"].as_i64().unwrap_or(0);
        return Value::String(format!(
            "{} (x{count} over {})",
            text(&since(&observed, now)),
            text(&since(&first, now))
        ));
    }
    since(&last, now)
}

fn builtin_table(
    resource: &str,
    objects: &[Value],
    now: DateTime<Utc>,
) -> (Vec<Value>, Vec<Vec<Value>>) {
    let created = |o: &Value| since(&o["metadata"]["creationTimestamp"], now);
    match resource {
        "namespaces" => (
            vec![name_col(), col("Status", "string", "", "The status of the namespace", 0), age_col()],
            objects
                .iter()
                .map(|o| vec![o["metadata"]["name"].clone(), str_of(&o["status"]["phase"]), created(o)])
                .collect(),
        ),
        "secrets" => (
            vec![
                name_col(),
                col("Type", "string", "", "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types", 0),
                col("Data", "string", "", "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4", 0),
                age_col(),
            ],
            objects
                .iter()
                .map(|o| {
                    let ty = o["type"].as_str().unwrap_or("Opaque");
                    vec![o["metadata"]["name"].clone(), json!(ty), json!(count(&o["data"])), created(o)]
                })
                .collect(),
        ),
        "configmaps" => (
            vec![
                name_col(),
                col("Data", "string", "", "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.", 0),
                age_col(),
            ],
            objects
                .iter()
                .map(|o| {
                    let n = count(&o["data"]) + count(&o["binaryData"]);
                    vec![o["metadata"]["name"].clone(), json!(n), created(o)]
                })
                .collect(),
        ),
        "serviceaccounts" => (
            vec![
                name_col(),
                col("Secrets", "string", "", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.", 0),
                age_col(),
            ],
            objects
                .iter()
                .map(|o| vec![o["metadata"]["name"].clone(), json!(count(&o["secrets"])), created(o)])
                .collect(),
        ),
        "leases" => (
            vec![name_col(), col("Holder", "string", "", "holderIdentity contains the identity of the holder of a current lease.", 0), age_col()],
            objects
                .iter()
                .map(|o| vec![o["metadata"]["name"].clone(), str_of(&o["spec"]["holderIdentity"]), created(o)])
                .collect(),
        ),
        "events" => (
            vec![
                col("Last Seen", "string", "", "The time at which the most recent occurrence of this event was recorded.", 0),
                col("Type", "string", "", "Type of this event (Normal, Warning), new types could be added in the future", 0),
                col("Reason", "string", "", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0),
                col("Object", "string", "", "The object that this event is about.", 0),
                col("Subobject", "string", "", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.", 1),
                col("Source", "string", "", "The component reporting this event. Should be a short machine understandable string.", 1),
                col("Message", "string", "", "A human-readable description of the status of this operation.", 0),
                col("First Seen", "string", "", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1),
                col("Count", "string", "", "The number of times this event has occurred.", 1),
                col("Name", "string", "name", NAME_DESCRIPTION, 1),
            ],
            objects
                .iter()
                .map(|o| {
                    // core/v1 and events.k8s.io/v1 field names.
                    let involved = if o["regarding"].is_object() { &o["regarding"] } else { &o["involvedObject"] };
                    let object = format!(
                        "{}/{}",
                        involved["kind"].as_str().unwrap_or("").to_lowercase(),
                        involved["name"].as_str().unwrap_or("")
                    );
                    let message = o["message"].as_str().or(o["note"].as_str()).unwrap_or("");
                    let source = match (
                        o["source"]["component"].as_str().or(o["reportingController"].as_str()),
                        o["source"]["host"].as_str(),
                    ) {
                        (Some(c), Some(h)) if !h.is_empty() => format!("{c}, {h}"),
                        (Some(c), _) => c.to_string(),
                        _ => String::new(),
                    };
                    let first = ["firstTimestamp", "deprecatedFirstTimestamp", "eventTime"]
                        .iter()
                        .map(|k| &o[*k])
                        .find(|v| v.is_string())
                        .cloned()
                        .unwrap_or(Value::Null);
                    let count = o["count"].as_i64().or(o["deprecatedCount"].as_i64()).unwrap_or(1);
                    vec![
                        event_last_seen(o, now),
                        str_of(&o["type"]),
                        str_of(&o["reason"]),
                        json!(object),
                        str_of(&involved["fieldPath"]),
                        json!(source),
                        json!(message),
                        since(&first, now),
                        json!(count),
                        o["metadata"]["name"].clone(),
                    ]
                })
                .collect(),
        ),
        // customresourcedefinitions and anything without a printer: kube's default convertor.
        _ => (
            vec![name_col(), col("Created At", "date", "", CREATION_DESCRIPTION, 0)],
            objects
                .iter()
                .map(|o| vec![o["metadata"]["name"].clone(), o["metadata"]["creationTimestamp"].clone()])
                .collect(),
        ),
    }
}

/// `table` with an explicit clock (for Age cells).
pub fn table_at(
    now: DateTime<Utc>,
    crd: Option<&Value>,
    version: &str,
    resource: &str,
    objects: &[Value],
    list_meta: Value,
    include_object: &str,
) -> Value {
    let (defs, cells) = match crd {
        Some(crd) => crd_table(crd, version, objects, now),
        None => builtin_table(resource, objects, now),
    };
    let rows: Vec<Value> = objects
        .iter()
        .zip(cells)
        .map(|(o, cells)| {
            let mut row = json!({"cells": cells});
            match include_object {
                "None" => {}
                "Object" => row["object"] = o.clone(),
                _ => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": o["metadata"].clone(),
                    })
                }
            }
            row
        })
        .collect();
    let metadata = if list_meta.is_object() {
        list_meta
    } else {
        json!({})
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": defs,
        "rows": rows,
    })
}
