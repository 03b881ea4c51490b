//! Helpers shared by the converge and per-kind benchmarks: load averages, and the Kubernetes
//! calls a Quartet process counted in its metrics, per resource.

use std::collections::BTreeMap;

/// Run blocking work (a kubectl call, a file read) on a worker of the multi-threaded runtime.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// The three load averages of `/proc/loadavg`.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `verb resource` → count, from the `quartet_kube_api_calls_total` lines of a scrape.
pub fn kube_calls(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("quartet_kube_api_calls_total"))
    {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let label = |k: &str| {
            labels
                .split(&format!("{k}=\""))
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("")
                .to_string()
        };
        let resource = label("resource");
        // `secretspolicies.secrets.quartet.dev/status` → `secretspolicies/status`
        let short = match resource.split_once('/') {
            Some((r, sub)) => format!("{}/{sub}", r.split('.').next().unwrap_or(r)),
            None => resource.split('.').next().unwrap_or(&resource).to_string(),
        };
        *out.entry(format!("{} {short}", label("verb")))
            .or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    out
}

/// The counts that grew from `before` to `after`, by how much.
pub fn delta(
    after: &BTreeMap<String, f64>,
    before: &BTreeMap<String, f64>,
) -> BTreeMap<String, usize> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d > 0.0).then(|| (k.clone(), d as usize))
        })
        .collect()
}

/// The text of `http://ADDR/metrics` (empty when it cannot be read).
pub fn scrape(addr: &str) -> String {
    reqwest::blocking::get(format!("http://{addr}/metrics"))
        .and_then(|r| r.text())
        .unwrap_or_default()
}

/// Each count of `m` per resource (of `n`), as `key 1.00, ...`.
pub fn per(m: &BTreeMap<String, usize>, n: usize) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {:.2}", *v as f64 / n as f64))
        .collect::<Vec<_>>()
        .join(", ")
}
