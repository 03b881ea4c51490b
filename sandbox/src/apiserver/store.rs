//! In-memory object storage with one cluster-wide resourceVersion counter (like etcd's revision),
//! a bounded event history for watches (older resourceVersions are "compacted": 410 Gone), and
//! snapshots to a directory so a restart keeps objects and resourceVersions stay monotonic.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::registry::{Registry, ResKey};

/// Events kept for watches resuming from an older resourceVersion.
const HISTORY: usize = 20_000;

/// Events a watch may fall behind by before it is ended (the client then watches again from its
/// last resourceVersion).
const WATCH_BUFFER: usize = 8192;

/// One change, as watches see it.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub key: ResKey,
    pub ns: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub etype: &'static str,
    pub obj: Value,
    /// The object before the change (for selector transitions).
    pub old: Option<Value>,
}

pub type ObjKey = (String, String);

pub struct State {
    pub rv: u64,
    /// Watches must start at or after this resourceVersion.
    pub compacted: u64,
    pub objects: HashMap<ResKey, BTreeMap<ObjKey, Value>>,
    pub history: VecDeque<Arc<Event>>,
    pub registry: Registry,
    /// Live events for the watches of each resource. Like kube-apiserver's watch cache, which
    /// is one per resource, a write wakes only the watches of its own resource: one channel for
    /// all made every watch of every kind wake up (and filter) on every write in the cluster,
    /// so a client watching 30 kinds cost the server 30 wake-ups per write.
    watchers: HashMap<ResKey, broadcast::Sender<Arc<Event>>>,
    pub dirty: bool,
    /// How many watches were refused with 410 Gone (tests check clients really relisted).
    pub expired_watches: u64,
    /// Objects garbage collection must look at (with ownerReferences, or being deleted) and the
    /// uids of all stored objects, kept up to date by every write: GC runs after each write, and
    /// scanning (and copying the uid of) every stored object there made each write O(objects),
    /// so filling the server took quadratic time (the converge benchmark at N = 1,000).
    pub gc_candidates: BTreeSet<(ResKey, ObjKey)>,
    pub uids: HashMap<String, u32>,
    /// A ClusterRole was written since the last aggregation ([`super::rbac_objects::aggregate`]).
    pub cluster_roles_changed: bool,
}

fn gc_candidate(obj: &Value) -> bool {
    let meta = &obj["metadata"];
    !meta["deletionTimestamp"].is_null()
        || meta["ownerReferences"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
}

pub fn ns_of(obj: &Value) -> String {
    obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub fn name_of(obj: &Value) -> String {
    obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub fn rv_of(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

impl State {
    pub fn new() -> Self {
        Self {
            rv: 1,
            compacted: 0,
            objects: HashMap::new(),
            history: VecDeque::new(),
            registry: Registry::new(),
            watchers: HashMap::new(),
            dirty: false,
            expired_watches: 0,
            gc_candidates: BTreeSet::new(),
            uids: HashMap::new(),
            cluster_roles_changed: true,
        }
    }

    /// Keep [`State::gc_candidates`] and [`State::uids`] in step with a write of `k`.
    fn index(&mut self, key: &ResKey, k: &ObjKey, old: Option<&Value>, new: Option<&Value>) {
        if let Some(u) = old.and_then(|o| o["metadata"]["uid"].as_str()) {
            if let Some(n) = self.uids.get_mut(u) {
                *n -= 1;
                if *n == 0 {
                    self.uids.remove(u);
                }
            }
        }
        if let Some(u) = new.and_then(|o| o["metadata"]["uid"].as_str()) {
            *self.uids.entry(u.to_string()).or_insert(0) += 1;
        }
        let entry = (key.clone(), k.clone());
        if new.is_some_and(gc_candidate) {
            self.gc_candidates.insert(entry);
        } else {
            self.gc_candidates.remove(&entry);
        }
    }

    /// Rebuild both indexes from the stored objects (after a load or a registry change).
    fn reindex(&mut self) {
        self.gc_candidates.clear();
        self.uids.clear();
        let mut entries = Vec::new();
        for (key, m) in &self.objects {
            for (k, o) in m {
                entries.push((key.clone(), k.clone(), o.clone()));
            }
        }
        for (key, k, o) in entries {
            self.index(&key, &k, None, Some(&o));
        }
    }

    pub fn get(&self, key: &ResKey, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(key)?
            .get(&(ns.to_string(), name.to_string()))
    }

    pub fn list(&self, key: &ResKey, ns: Option<&str>) -> Vec<&Value> {
        let Some(m) = self.objects.get(key) else {
            return vec![];
        };
        m.iter()
            .filter(|((n, _), _)| ns.is_none_or(|want| want == n))
            .map(|(_, v)| v)
            .collect()
    }

    fn emit(&mut self, ev: Event) {
        if ev.key.1 == "clusterroles" && ev.key.0 == "rbac.authorization.k8s.io" {
            self.cluster_roles_changed = true;
        }
        let ev = Arc::new(ev);
        self.history.push_back(ev.clone());
        while self.history.len() > HISTORY {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
        if let Some(tx) = self.watchers.get(&ev.key) {
            // An error means no watch of this resource is left: drop its channel.
            if tx.send(ev.clone()).is_err() {
                self.watchers.remove(&ev.key);
            }
        }
        self.dirty = true;
    }

    /// The live events of resource `key`, from the next write on.
    pub fn subscribe(&mut self, key: &ResKey) -> broadcast::Receiver<Arc<Event>> {
        self.watchers
            .entry(key.clone())
            .or_insert_with(|| broadcast::channel(WATCH_BUFFER).0)
            .subscribe()
    }

    /// Store `obj` with a fresh resourceVersion and tell watchers. Returns the stored object.
    pub fn put(&mut self, key: &ResKey, mut obj: Value) -> Value {
        self.rv += 1;
        let rv = self.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        let k = (ns_of(&obj), name_of(&obj));
        let old = self
            .objects
            .entry(key.clone())
            .or_default()
            .insert(k.clone(), obj.clone());
        self.index(key, &k, old.as_ref(), Some(&obj));
        let etype = if old.is_some() { "MODIFIED" } else { "ADDED" };
        self.emit(Event {
            rv,
            key: key.clone(),
            ns: k.0,
            etype,
            obj: obj.clone(),
            old,
        });
        if key.0 == "apiextensions.k8s.io" {
            self.refresh_registry();
        }
        obj
    }

    /// Remove an object for good; the DELETED event carries a fresh resourceVersion.
    pub fn remove(&mut self, key: &ResKey, ns: &str, name: &str) -> Option<Value> {
        let mut obj = self
            .objects
            .get_mut(key)?
            .remove(&(ns.to_string(), name.to_string()))?;
        self.index(key, &(ns.to_string(), name.to_string()), Some(&obj), None);
        self.rv += 1;
        let rv = self.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.emit(Event {
            rv,
            key: key.clone(),
            ns: ns.to_string(),
            etype: "DELETED",
            obj: obj.clone(),
            old: None,
        });
        if key.0 == "apiextensions.k8s.io" {
            self.refresh_registry();
        }
        Some(obj)
    }

    /// Forget history so watches from any resourceVersion seen so far get 410 Gone.
    pub fn compact(&mut self) {
        self.history.clear();
        self.rv += 1;
        self.compacted = self.rv;
    }

    pub fn crds(&self) -> Vec<Value> {
        self.list(&crd_key(), None).into_iter().cloned().collect()
    }

    pub fn crd(&self, name: &str) -> Option<&Value> {
        self.get(&crd_key(), "", name)
    }

    /// Rebuild the served resources: built-ins plus every CRD whose names are accepted.
    pub fn refresh_registry(&mut self) {
        let mut reg = Registry::new();
        for crd in self.crds() {
            if let Some(info) = super::registry::from_crd(&crd) {
                // Never let a CRD shadow a built-in.
                reg.resources.entry(info.id()).or_insert(info);
            }
        }
        // Objects of resources no longer served are dropped (their CRD is gone).
        let served: Vec<ResKey> = reg.resources.keys().cloned().collect();
        self.objects.retain(|k, _| served.contains(k));
        self.registry = reg;
        self.reindex();
    }

    pub fn snapshot(&self) -> Value {
        let mut objs = Vec::new();
        for ((g, p), m) in &self.objects {
            for o in m.values() {
                objs.push(json!({"group": g, "resource": p, "object": o}));
            }
        }
        // CRDs first so loading can serve their kinds.
        objs.sort_by_key(|o| o["group"] != "apiextensions.k8s.io");
        json!({"resourceVersion": self.rv, "objects": objs})
    }

    pub fn load(&mut self, snap: &Value) {
        self.rv = snap["resourceVersion"].as_u64().unwrap_or(1);
        self.compacted = self.rv;
        if let Some(objs) = snap["objects"].as_array() {
            for o in objs {
                let key = (
                    o["group"].as_str().unwrap_or_default().to_string(),
                    o["resource"].as_str().unwrap_or_default().to_string(),
                );
                let obj = o["object"].clone();
                let k = (ns_of(&obj), name_of(&obj));
                self.objects.entry(key).or_default().insert(k, obj);
            }
        }
        self.refresh_registry();
    }
}

impl Default for State {
    fn default() -> Self {
        Self::new()
    }
}

pub fn crd_key() -> ResKey {
    (
        "apiextensions.k8s.io".to_string(),
        "customresourcedefinitions".to_string(),
    )
}

pub fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join("apiserver.json")
}

/// Write atomically: a crash mid-write leaves the previous snapshot.
pub fn write_snapshot(dir: &Path, snap: &Value) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join("apiserver.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(snap)?)?;
    std::fs::rename(tmp, snapshot_path(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(resource: &str) -> ResKey {
        (String::new(), resource.to_string())
    }

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn a_write_reaches_the_watches_of_its_own_resource_only() {
        let mut st = State::new();
        let secrets = st.subscribe(&key("secrets"));
        let mut configmaps = st.subscribe(&key("configmaps"));
        st.put(&key("configmaps"), obj("c"));
        assert!(
            secrets.is_empty(),
            "a Secret watch woke for a ConfigMap write"
        );
        let ev = configmaps
            .try_recv()
            .expect("the ConfigMap watch hears its write");
        assert_eq!((ev.key.clone(), ev.etype), (key("configmaps"), "ADDED"));
    }

    #[test]
    fn a_resource_whose_watches_have_ended_drops_its_channel_at_the_next_write() {
        let mut st = State::new();
        drop(st.subscribe(&key("secrets")));
        st.put(&key("secrets"), obj("s"));
        assert!(st.watchers.is_empty());
        assert_eq!(
            st.history.len(),
            1,
            "history keeps the write for later watches"
        );
    }
}
