//! The change log: one structured record per call that changes something in a service, on the
//! log target `quartet::changes` and, with `--change-log PATH`, as a JSON line appended to a
//! file. A record names the resource and why it was reconciled (carried from the reconcile
//! framework in a task-local), the service and Connection, the method and path template (ids
//! as placeholders), the names of the fields sent (never their values), the status code and
//! the service's request id. The reconcile framework also sums a pass's records up in one
//! `Changed` Event.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

use serde::Serialize;
use serde_json::Value;

/// Why the resource was reconciled when it wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// The resource was created and its remote object made.
    Create,
    /// The spec changed since the last pass.
    SpecChange,
    /// The service differed from an unchanged spec (a periodic resync found it).
    DriftRepair,
    /// The resource is being deleted.
    Deletion,
    /// An earlier pass failed and this one tries again.
    Retry,
    /// A Secret the spec references holds a new value (a token, password, key or sensitive
    /// variable), sent at an unchanged spec. Not `drift-repair`: a write-only value cannot be
    /// read back from the service, so this is someone changing the Secret, not the service.
    SecretChange,
    /// A `...Request` field of the spec not handled yet (the record's `request` names it).
    Request,
    /// An object already in the service, found by name, taken over and brought to the spec.
    Adoption,
    /// A replacement or renewal due by time at an unchanged spec: a token or password older
    /// than its interval (and the logout of the one it replaced), a lease past half its life.
    /// Set by the kind around those writes ([`rotation`]).
    Rotation,
    /// The next step of an operation already under way, at an unchanged spec: a run's action
    /// once the run allows it, a gate's promotion once its canaries are healthy, a failover's
    /// next stage, an upgrade the module published. None of the other triggers fits
    /// such a write (the spec did not change, nothing is repaired, nothing was due by time),
    /// and it is the operation the resource was created for going on, so it keeps a name of
    /// its own rather than borrowing one that would mislead.
    Step,
}

impl Trigger {
    /// Its name in a record (`spec-change`, `drift-repair`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Create => "create",
            Trigger::SpecChange => "spec-change",
            Trigger::DriftRepair => "drift-repair",
            Trigger::Deletion => "deletion",
            Trigger::Retry => "retry",
            Trigger::SecretChange => "secret-change",
            Trigger::Request => "request",
            Trigger::Adoption => "adoption",
            Trigger::Rotation => "rotation",
            Trigger::Step => "step",
        }
    }
}

/// The log target of the change records.
pub const TARGET: &str = crate::traces::CHANGE_LOG_TARGET;

/// The resource a reconcile pass is for.
#[derive(Clone, Debug, Serialize)]
pub struct Resource {
    /// Its kind, e.g. `SecretsPolicy`.
    pub kind: String,
    /// Its namespace (empty for a cluster-scoped kind).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its `metadata.uid`.
    pub uid: String,
    /// Its `metadata.generation` at the time of the pass.
    pub generation: Option<i64>,
}

/// One write to a service.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    /// The resource whose pass made the call.
    pub resource: Resource,
    /// Why the pass ran.
    pub trigger: Trigger,
    /// With trigger `request`: the spec field that asked (e.g. `rotateRequest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The service called (`secrets`, `workspaces`, `catalog`, `scheduler`).
    pub service: String,
    /// The Connection the call went through (`namespace/name`).
    pub connection: String,
    /// The HTTP method.
    pub method: String,
    /// The request path as a template: ids as `{id}`, the resource's name as `{name}`.
    pub path: String,
    /// The names of the fields sent (never their values).
    pub fields: Vec<String>,
    /// The HTTP status (0: no answer).
    pub status: u16,
    /// The service's request id, when it sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Asked before each write a pass sends: `Err(why)` stops the write unsent. The reconcile
/// framework's gate refuses once the pass's resource has moved to another shard, so a pass under
/// way at the move writes nothing more, whatever its kind does between its calls.
pub type Gate = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The pass's resource and trigger, and the records of its writes so far.
pub struct Pass {
    resource: Resource,
    gate: Option<Gate>,
    /// The trigger and, for a request, the field that asked; the framework may refine it
    /// during the pass (an adoption is known only once the service answered).
    trigger: Mutex<(Trigger, Option<String>)>,
    records: Mutex<Vec<Record>>,
    /// How many of `records` an Event has listed already.
    reported: Mutex<usize>,
    /// Calls (any method) per service, for `quartet_calls_per_reconcile`.
    calls: Mutex<std::collections::BTreeMap<String, u64>>,
    /// The category of a failure the pass recorded in the resource's status ([`failed`]).
    failure: Mutex<Option<&'static str>>,
}

tokio::task_local! {
    static PASS: std::sync::Arc<Pass>;
}

impl Pass {
    /// A pass for `resource`, woken by `trigger` (`request`: the spec field that asked, for
    /// [`Trigger::Request`]), whose writes are sent only while `gate` allows them.
    pub fn new(
        resource: Resource,
        trigger: Trigger,
        request: Option<String>,
        gate: Option<Gate>,
    ) -> std::sync::Arc<Pass> {
        std::sync::Arc::new(Pass {
            resource,
            gate,
            trigger: Mutex::new((trigger, request)),
            records: Mutex::new(Vec::new()),
            reported: Mutex::new(0),
            calls: Mutex::default(),
            failure: Mutex::default(),
        })
    }

    /// Run `fut` with this pass as the context of the writes it makes.
    pub async fn scope<F: std::future::Future>(self: &std::sync::Arc<Self>, fut: F) -> F::Output {
        PASS.scope(self.clone(), fut).await
    }

    /// The records of the pass's writes.
    pub fn records(&self) -> Vec<Record> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The writes the service accepted that no Event has listed yet; they count as listed now.
    pub fn take_unreported(&self) -> Vec<Record> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        let new = records
            .iter()
            .skip(*reported)
            .filter(|r| (200..300).contains(&r.status))
            .cloned()
            .collect();
        *reported = records.len();
        new
    }

    /// The calls of the pass so far, by service.
    pub fn calls(&self) -> Vec<(String, u64)> {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.iter().map(|(s, n)| (s.clone(), *n)).collect()
    }

    /// The category of the failure the pass recorded in status, if it did ([`failed`]).
    pub fn failure(&self) -> Option<&'static str> {
        *self.failure.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the pass's calls are spent on a resync (a pass at an unchanged, synced spec:
    /// it only compares, and repairs drift or takes a scheduled step) or on a change.
    fn trigger(&self) -> (Trigger, Option<String>) {
        self.trigger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn cause(&self) -> &'static str {
        match self.trigger().0 {
            Trigger::DriftRepair | Trigger::Step | Trigger::Rotation => "resync",
            _ => "change",
        }
    }
}

/// Count one call to `service` (any method) in the current pass and say what it is spent on:
/// `resync`, `change`, or `other` outside a reconcile pass (logins, lease commands).
pub fn count_call(service: &str) -> &'static str {
    PASS.try_with(|p| {
        *p.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(service.to_string())
            .or_default() += 1;
        p.cause()
    })
    .unwrap_or("other")
}

/// The current pass failed with an error of `category` and recorded it in the resource's status
/// (no-op outside a pass). Such a pass ends without an error, so that the retry delay is the
/// one the failure chose; its trace and `quartet_reconciles_total` still say it failed.
pub fn failed(category: &'static str) {
    let _ = PASS.try_with(|p| {
        *p.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(category);
    });
}

/// Whether the current pass may send a write now (`Err(why)`: it may not, see [`Gate`]); a write
/// outside a pass (a login, a lease command) always may.
pub fn may_write() -> Result<(), String> {
    PASS.try_with(|p| p.gate.as_ref().map_or(Ok(()), |gate| gate()))
        .unwrap_or(Ok(()))
}

/// The current pass's accepted writes not listed by an Event yet (none outside a pass), for the
/// Event about to be published: one Event per write, not a second one next to it.
pub fn unreported() -> Vec<Record> {
    PASS.try_with(|p| p.take_unreported()).unwrap_or_default()
}

/// `records` as one line for an Event: how many writes, to which service through which
/// Connection, why, and each write's method, path template and status (`None`: no records).
pub fn summary(records: &[Record]) -> Option<String> {
    let first = records.first()?;
    let writes: Vec<String> = records
        .iter()
        .map(|r| format!("{} {} {}", r.method, r.path, r.status))
        .collect();
    Some(format!(
        "{} write(s) to {} through {} ({}): {}",
        records.len(),
        first.service,
        first.connection,
        first.trigger.as_str(),
        writes.join("; ")
    ))
}

/// The rest of the current pass's writes are for `trigger` (no-op outside a pass).
pub fn set_trigger(trigger: Trigger) {
    let _ = PASS.try_with(|p| {
        *p.trigger.lock().unwrap_or_else(|e| e.into_inner()) = (trigger, None);
    });
}

/// Restores the pass's trigger when dropped (see [`rotation`]).
#[must_use = "the trigger is restored when the guard is dropped"]
pub struct Restore(Option<(Trigger, Option<String>)>);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(previous) = self.0.take() {
            let _ = PASS.try_with(|p| {
                *p.trigger.lock().unwrap_or_else(|e| e.into_inner()) = previous;
            });
        }
    }
}

/// The writes made while the returned guard lives are a rotation due by time (trigger
/// `rotation`), when the pass is a resync or a retry. A pass for a create, a spec change, a
/// request, an adoption or a deletion keeps its trigger: that is why it wrote.
pub fn rotation() -> Restore {
    instead_of(
        &[Trigger::DriftRepair, Trigger::Step, Trigger::Retry],
        Trigger::Rotation,
    )
}

/// The writes made while the returned guard lives send a referenced Secret's new value
/// (trigger `secret-change`) when the pass is a resync at an unchanged spec; a pass for any
/// other reason keeps its trigger.
pub fn secret_change() -> Restore {
    instead_of(&[Trigger::DriftRepair], Trigger::SecretChange)
}

/// The writes made while the returned guard lives restore what changed outside (trigger
/// `drift-repair`) when an operated kind's pass at an unchanged spec makes them (a token
/// the service stopped accepting, replaced): a repair, not the next step of an operation.
pub fn repair() -> Restore {
    instead_of(&[Trigger::Step], Trigger::DriftRepair)
}

fn instead_of(these: &[Trigger], trigger: Trigger) -> Restore {
    let previous = PASS
        .try_with(|p| {
            let mut t = p.trigger.lock().unwrap_or_else(|e| e.into_inner());
            these
                .contains(&t.0)
                .then(|| std::mem::replace(&mut *t, (trigger, None)))
        })
        .ok()
        .flatten();
    Restore(previous)
}

/// `path` as a template: ids as `{id}`, and the current pass's resource name as `{name}`.
pub fn path_template(path: &str) -> String {
    let name = PASS
        .try_with(|p| p.resource.name.clone())
        .unwrap_or_default();
    template(path, &name)
}

static FILE: OnceLock<Mutex<std::fs::File>> = OnceLock::new();

/// Append every record to `path` as a JSON line too.
pub fn to_file(path: &std::path::Path) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let _ = FILE.set(Mutex::new(f));
    Ok(())
}

/// Record a write made in a reconcile pass (calls outside one, e.g. logins, are not changes
/// of a resource and are not recorded).
pub fn record(
    service: &str,
    connection: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    status: u16,
    request_id: Option<String>,
) {
    let Ok(pass) = PASS.try_with(|p| p.clone()) else {
        return;
    };
    let (trigger, request) = pass.trigger();
    let record = Record {
        path: template(path, &pass.resource.name),
        resource: pass.resource.clone(),
        trigger,
        request,
        service: service.to_string(),
        connection: connection.to_string(),
        method: method.to_ascii_uppercase(),
        fields: field_names(body),
        status,
        request_id,
    };
    let line = serde_json::to_string(&record).unwrap_or_default();
    tracing::info!(target: TARGET, change = %line, "{} {} {} for {} {}/{} ({})", record.method, record.path, record.status, record.resource.kind, record.resource.namespace, record.resource.name, record.trigger.as_str());
    if let Some(f) = FILE.get() {
        let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = writeln!(f, "{line}") {
            tracing::warn!(error = %e, "cannot append to the change log file");
        }
    }
    pass.records
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(record);
}

/// The path without its query, the resource's name as `{name}` and id-like segments (numbers,
/// UUIDs, service ids such as `ws-AbC123` or `nocode-RXo77Nwjj`) as `{id}`.
///
/// Only the last segment equal to the name is the name: a resource may be named like a route
/// segment (`acl`, `v1`), and the route before its name must stay as it is. Nor is the segment
/// after the API version ever the name: it is the mount or the collection (an AdEngine named
/// `ad` on the mount `ad` writes `/v1/ad/config`, not `/v1/{name}/config`).
fn template(path: &str, name: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    let segments: Vec<&str> = path.split('/').collect();
    let named = (!name.is_empty())
        .then(|| segments.iter().rposition(|seg| *seg == name))
        .flatten()
        .filter(|&i| i > 2);
    segments
        .iter()
        .enumerate()
        .map(|(i, seg)| {
            if Some(i) == named {
                "{name}"
            } else if is_id(seg) {
                "{id}"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn is_id(seg: &str) -> bool {
    let digits = seg.chars().filter(char::is_ascii_digit).count();
    let uuid = seg.len() == 36 && seg.chars().filter(|c| *c == '-').count() == 4;
    // A short lowercase prefix and a generated part: mixed case or digits, never a word such
    // as `admin-generate` or `check-out`.
    let prefixed = seg.split_once('-').is_some_and(|(p, rest)| {
        (1..=8).contains(&p.len())
            && p.chars().all(|c| c.is_ascii_lowercase())
            && rest.len() >= 8
            && rest.chars().all(|c| c.is_ascii_alphanumeric())
            && rest
                .chars()
                .any(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
    });
    (!seg.is_empty() && digits == seg.len()) || uuid || prefixed
}

/// The names of the fields a body sets: top-level keys, or a JSON:API document's attributes
/// and relationships.
fn field_names(body: Option<&Value>) -> Vec<String> {
    let Some(Value::Object(o)) = body else {
        return Vec::new();
    };
    if let Some(data) = o.get("data").and_then(Value::as_object) {
        let mut names: Vec<String> = ["attributes", "relationships"]
            .iter()
            .filter_map(|k| data.get(*k).and_then(Value::as_object))
            .flat_map(|m| m.keys().cloned())
            .collect();
        if !names.is_empty() {
            names.sort();
            return names;
        }
    }
    let mut names: Vec<String> = o.keys().cloned().collect();
    names.sort();
    names
}

/// The first `...Request` field of a spec that its status has not handled yet (status
/// `handled<Field>` differs): a request the pass acts on. Requests of a list's members (a
/// DrReplication's `secondaries[].reindexRequest`) are handled per member id in status
/// `handledRequests.<id>.<field without Request>`, and named `secondaries[<id>].reindexRequest`.
pub fn pending_request(obj: &Value) -> Option<String> {
    let spec = obj.get("spec")?.as_object()?;
    let status = obj.get("status").and_then(Value::as_object);
    if let Some(member) = pending_member_request(spec, status) {
        return Some(member);
    }
    spec.iter()
        .filter(|(k, v)| k.ends_with("Request") && v.as_str().is_some_and(|v| !v.is_empty()))
        .find(|(k, v)| {
            let mut handled = String::from("handled");
            let mut chars = k.chars();
            if let Some(c) = chars.next() {
                handled.extend(c.to_uppercase());
                handled.push_str(chars.as_str());
            }
            status.and_then(|s| s.get(&handled)) != Some(*v)
        })
        .map(|(k, _)| k.clone())
}

fn pending_member_request(
    spec: &serde_json::Map<String, Value>,
    status: Option<&serde_json::Map<String, Value>>,
) -> Option<String> {
    let handled = status.and_then(|s| s.get("handledRequests"));
    spec.iter()
        .filter_map(|(list, v)| Some((list, v.as_array()?)))
        .flat_map(|(list, members)| members.iter().map(move |m| (list, m)))
        .find_map(|(list, member)| {
            let id = member.get("id")?.as_str()?;
            let (field, _) = member.as_object()?.iter().find(|(k, v)| {
                let Some(asked) = v.as_str().filter(|v| !v.is_empty()) else {
                    return false;
                };
                let Some(key) = k.strip_suffix("Request") else {
                    return false;
                };
                handled
                    .and_then(|h| h.get(id))
                    .and_then(|h| h.get(key))
                    .and_then(Value::as_str)
                    != Some(asked)
            })?;
            Some(format!("{list}[{id}].{field}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_triggers_name_in_the_log_line_is_its_name_in_the_record() {
        for t in [
            Trigger::Create,
            Trigger::SpecChange,
            Trigger::DriftRepair,
            Trigger::Deletion,
            Trigger::Retry,
            Trigger::SecretChange,
            Trigger::Request,
            Trigger::Adoption,
            Trigger::Rotation,
            Trigger::Step,
        ] {
            assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
        }
    }

    #[test]
    fn a_path_template_keeps_the_route_and_hides_ids_and_the_name() {
        assert_eq!(
            template("/v1/sys/policies/acl/app-read?x=1", "app-read"),
            "/v1/sys/policies/acl/{name}"
        );
        assert_eq!(
            template("/api/v2/workspaces/ws-AbCdEf123456/vars/42", "w"),
            "/api/v2/workspaces/{id}/vars/{id}"
        );
        assert_eq!(
            template(
                "/api/v2/no-code-modules/nocode-RXoNwjjBscXpVa/workspaces",
                "w"
            ),
            "/api/v2/no-code-modules/{id}/workspaces"
        );
        assert_eq!(
            template("/v1/identity/mfa/method/totp/admin-generate", "w"),
            "/v1/identity/mfa/method/totp/admin-generate"
        );
    }

    #[test]
    fn a_resource_named_like_its_mount_leaves_the_mount_alone() {
        assert_eq!(template("/v1/ad/config", "ad"), "/v1/ad/config");
        assert_eq!(template("/v1/ad/rotate-root", "ad"), "/v1/ad/rotate-root");
        assert_eq!(template("/v1/ad/roles/ad", "ad"), "/v1/ad/roles/{name}");
    }

    #[test]
    fn a_resource_named_like_a_route_segment_leaves_the_route_alone() {
        assert_eq!(
            template("/v1/sys/policies/acl/acl", "acl"),
            "/v1/sys/policies/acl/{name}"
        );
        assert_eq!(
            template("/v1/sys/policies/acl/v1", "v1"),
            "/v1/sys/policies/acl/{name}"
        );
        // The name is not always last: an action on the named object follows it.
        assert_eq!(
            template("/v1/ad/library/team/check-out", "team"),
            "/v1/ad/library/{name}/check-out"
        );
    }

    #[test]
    fn a_request_is_pending_until_the_status_names_it_handled() {
        let obj = serde_json::json!({
            "spec": {"rotateRequest": "r2", "unrelated": "x"},
            "status": {"handledRotateRequest": "r1"}
        });
        assert_eq!(pending_request(&obj).as_deref(), Some("rotateRequest"));
        let done = serde_json::json!({
            "spec": {"rotateRequest": "r2"},
            "status": {"handledRotateRequest": "r2"}
        });
        assert_eq!(pending_request(&done), None);
    }

    #[test]
    fn a_members_request_is_pending_until_handled_for_that_member() {
        let obj = serde_json::json!({
            "spec": {"secondaries": [
                {"id": "east", "reindexRequest": "r1"},
                {"id": "west", "merkleCheckRequest": "m2"}
            ]},
            "status": {"handledRequests": {"east": {"reindex": "r1"}, "west": {"merkleCheck": "m1"}}}
        });
        assert_eq!(
            pending_request(&obj).as_deref(),
            Some("secondaries[west].merkleCheckRequest")
        );
        let fresh =
            serde_json::json!({"spec": {"secondaries": [{"id": "east", "reindexRequest": "r1"}]}});
        assert_eq!(
            pending_request(&fresh).as_deref(),
            Some("secondaries[east].reindexRequest")
        );
        let done = serde_json::json!({
            "spec": {"secondaries": [{"id": "east", "reindexRequest": "r1"}]},
            "status": {"handledRequests": {"east": {"reindex": "r1"}}}
        });
        assert_eq!(pending_request(&done), None);
    }

    #[test]
    fn field_names_never_carry_values() {
        let body = serde_json::json!({"policy": "path \"x\" {}", "password": "hunter2"});
        assert_eq!(field_names(Some(&body)), vec!["password", "policy"]);
        let api = serde_json::json!({"data": {"type": "workspaces", "attributes": {"name": "w", "auto-apply": true}}});
        assert_eq!(field_names(Some(&api)), vec!["auto-apply", "name"]);
    }
}
