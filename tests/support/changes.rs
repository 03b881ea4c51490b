//! The change log (`--change-log PATH`, one JSON record per write) checked against the
//! sandbox's request log: every write the sandbox received has exactly one record with its
//! method, status and path (the record's template, `{name}` the resource's name and `{id}` any
//! id), and no record is left over; and no value of any Secret of the cluster is in any record.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;

use super::{http, kubectl};

/// One request the sandbox logged.
#[derive(Clone, Debug)]
pub struct Logged {
    pub service: String,
    pub method: String,
    pub path: String,
    pub status: u16,
}

/// The requests every service of the sandbox logged from `since` on (one log for all of them,
/// served on each listener), and the next mark.
pub fn logged(url: &str, since: u64) -> (Vec<Logged>, u64) {
    let (_, body) = http(
        "GET",
        &format!("{url}/_sandbox/requests?since={since}"),
        None,
        None,
    );
    let items = body["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| Logged {
            service: r["service"].as_str().unwrap_or_default().to_string(),
            method: r["method"].as_str().unwrap_or_default().to_string(),
            path: r["path"].as_str().unwrap_or_default().to_string(),
            status: r["status"].as_u64().unwrap_or_default() as u16,
        })
        .collect();
    (items, body["next"].as_u64().unwrap_or(since))
}

/// The records of the change-log file.
pub fn records(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON record: {e}: {l}")))
        .collect()
}

/// Why a logged request that is not a read is not a change of a resource, or `None` when it
/// must have a record.
fn not_a_change(r: &Logged) -> Option<&'static str> {
    let p = r.path.as_str();
    if ["GET", "HEAD", "LIST"].contains(&r.method.as_str()) {
        return Some("a read");
    }
    // A Connection's login session (log in, renew, revoke its own token): calls of the
    // Connection made outside any reconcile of a resource, counted in quartet_logins_total.
    if r.service == "secrets"
        && ((p.starts_with("/v1/auth/") && p.ends_with("/login"))
            || p == "/v1/auth/token/renew-self"
            || p == "/v1/auth/token/revoke-self")
    {
        return Some("a Connection's login session");
    }
    // Only looks a lease up (AdCheckout, each pass): a read sent as PUT, as the service's API
    // wants it; the client marks it a read (`Http::call_read`).
    if r.service == "secrets" && p == "/v1/sys/leases/lookup" {
        return Some("a lease lookup");
    }
    None
}

/// Whether the record's path template matches a logged path: `{name}` is the resource's name,
/// `{id}` any one segment.
fn matches(record: &Value, r: &Logged) -> bool {
    let template = record["path"].as_str().unwrap_or_default();
    let name = record["resource"]["name"].as_str().unwrap_or_default();
    let (t, p): (Vec<_>, Vec<_>) = (template.split('/').collect(), r.path.split('/').collect());
    record["service"] == r.service.as_str()
        && record["method"] == r.method.as_str()
        && record["status"].as_u64() == Some(u64::from(r.status))
        && t.len() == p.len()
        && t.iter().zip(&p).all(|(t, p)| match *t {
            "{name}" => *p == name,
            "{id}" => !p.is_empty(),
            t => t == *p,
        })
}

/// What a comparison found: writes without a record, records without a write, and the records
/// matched, by `Kind/name`.
#[derive(Debug, Default)]
pub struct Comparison {
    pub unrecorded: Vec<Logged>,
    pub unmatched: Vec<Value>,
    pub per_resource: HashMap<String, usize>,
    pub skipped: HashMap<&'static str, usize>,
}

fn compare(writes: &[Logged], records: &[Value]) -> Comparison {
    let mut used = vec![false; records.len()];
    let mut c = Comparison::default();
    for w in writes {
        if let Some(why) = not_a_change(w) {
            *c.skipped.entry(why).or_default() += 1;
            continue;
        }
        // Records are appended as the answers come: the first unused one that fits.
        match (0..records.len()).find(|i| !used[*i] && matches(&records[*i], w)) {
            Some(i) => {
                used[i] = true;
                let r = &records[i]["resource"];
                *c.per_resource
                    .entry(format!(
                        "{}/{}",
                        r["kind"].as_str().unwrap_or_default(),
                        r["name"].as_str().unwrap_or_default()
                    ))
                    .or_default() += 1;
            }
            None => c.unrecorded.push(w.clone()),
        }
    }
    c.unmatched = records
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(r, _)| r.clone())
        .collect();
    c
}

/// One record per write: every write the sandbox logged from `since` on (but reads, logins and
/// lookups, see [`not_a_change`]) has its record in `file`, and every record its write. Waits
/// for calls in flight to settle (a record is appended once the answer is read, the request is
/// logged once it is answered). Returns the writes matched, by `Kind/name`.
pub fn assert_one_record_per_write(url: &str, since: u64, file: &Path) -> HashMap<String, usize> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (writes, _) = logged(url, since);
        let c = compare(&writes, &records(file));
        if c.unrecorded.is_empty() && c.unmatched.is_empty() {
            eprintln!(
                "change log: {} write(s) recorded, by resource {:?}; not changes: {:?}",
                c.per_resource.values().sum::<usize>(),
                c.per_resource,
                c.skipped
            );
            return c.per_resource;
        }
        assert!(
            Instant::now() < deadline,
            "writes without a record: {:#?}\nrecords without a write: {:#?}",
            c.unrecorded,
            c.unmatched
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// No value of any Secret in the cluster (every namespace, every key) is in the change-log file.
/// Values shorter than 6 characters (a port, `true`) are left out: they would be found by chance
/// in ids and uids.
pub fn assert_no_secret_value(kubeconfig: &Path, file: &Path) {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let out = kubectl(kubeconfig, &["get", "secrets", "-A", "-o", "json"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut checked = 0;
    for s in list["items"].as_array().into_iter().flatten() {
        for (key, v) in s["data"].as_object().into_iter().flatten() {
            let Some(bytes) = v
                .as_str()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            else {
                continue;
            };
            let value = String::from_utf8_lossy(&bytes);
            for part in value.lines().map(str::trim).filter(|p| p.len() >= 6) {
                checked += 1;
                assert!(
                    !text.contains(part),
                    "the value of Secret {}/{} key {key} is in the change log",
                    s["metadata"]["namespace"].as_str().unwrap_or_default(),
                    s["metadata"]["name"].as_str().unwrap_or_default()
                );
            }
        }
    }
    assert!(checked > 0, "no Secret value to look for");
}
