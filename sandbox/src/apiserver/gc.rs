//! What kube-controller-manager would do for us: garbage collection through ownerReferences
//! (background, foreground, orphan), namespace termination, and CRD instance cleanup. Runs
//! synchronously after every write, so tests see a settled state.

use std::collections::HashMap;

use serde_json::Value;

use super::ops::{delete_object, DeleteOpts, Propagation};
use super::registry::ResourceInfo;
use super::store::{crd_key, name_of, ns_of, State};

fn owner_uids(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["uid"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn has_finalizer(obj: &Value, f: &str) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x == f))
}

fn deleting(obj: &Value) -> bool {
    !obj["metadata"]["deletionTimestamp"].is_null()
}

/// The objects GC must act on: those being deleted, and those with an owner that is gone
/// (cloned, from the store's index of objects with owners or being deleted), and an owner-uid
/// → dependents index for the owners being deleted (orphan and foreground deletion read it).
///
/// It runs after every write, so it clones nothing in the settled case (every owner present,
/// nothing being deleted): cloning every owned object per write made a create cost O(owned
/// objects), and thousands of owned Secrets made the dev API server the bottleneck of a
/// benchmark. The uids of all objects are the store's own index ([`State::uids`]).
struct View {
    interesting: Vec<(ResourceInfo, Value)>,
    dependents: HashMap<String, Vec<(ResourceInfo, Value)>>,
}

fn view(st: &State) -> View {
    let mut v = View {
        interesting: Vec::new(),
        dependents: HashMap::new(),
    };
    let mut deleted_owners: Vec<String> = Vec::new();
    for (key, k) in &st.gc_candidates {
        let Some(info) = st.registry.resources.get(key) else {
            continue;
        };
        if let Some(o) = st.objects.get(key).and_then(|m| m.get(k)) {
            let owners = owner_uids(o);
            let orphaned = !owners.is_empty() && owners.iter().all(|u| !st.uids.contains_key(u));
            let acts = deleting(o) && acts_on_deletion(info, o);
            if acts || orphaned {
                v.interesting.push((info.clone(), o.clone()));
            }
            if acts {
                if let Some(uid) = o["metadata"]["uid"].as_str() {
                    deleted_owners.push(uid.to_string());
                }
            }
        }
    }
    if deleted_owners.is_empty() {
        return v;
    }
    for (key, k) in &st.gc_candidates {
        let Some(info) = st.registry.resources.get(key) else {
            continue;
        };
        if let Some(o) = st.objects.get(key).and_then(|m| m.get(k)) {
            for u in owner_uids(o) {
                if deleted_owners.contains(&u) {
                    v.dependents
                        .entry(u)
                        .or_default()
                        .push((info.clone(), o.clone()));
                }
            }
        }
    }
    v
}

/// Whether GC has anything to do for this object being deleted: propagate its deletion to its
/// dependents (`orphan`, `foregroundDeletion`), or empty it first (a namespace, a CRD). An
/// object held only by a controller's finalizer waits for that controller, as in
/// kube-controller-manager: copying each of those after every write made N resources deleted
/// at once cost N² copies (minutes for 1,000 while their controller released them).
fn acts_on_deletion(info: &ResourceInfo, o: &Value) -> bool {
    has_finalizer(o, "orphan")
        || has_finalizer(o, "foregroundDeletion")
        || info.key() == (String::new(), "namespaces".to_string())
        || info.key() == crd_key()
}

/// Objects of a namespace, or of a CRD's kind (only when such a deletion is pending).
fn objects_where(
    st: &State,
    pred: impl Fn(&ResourceInfo, &Value) -> bool,
) -> Vec<(ResourceInfo, Value)> {
    let mut out = Vec::new();
    for (key, m) in &st.objects {
        let Some(info) = st.registry.resources.get(key) else {
            continue;
        };
        for o in m.values() {
            if pred(info, o) {
                out.push((info.clone(), o.clone()));
            }
        }
    }
    out
}

fn background() -> DeleteOpts {
    DeleteOpts {
        propagation: Propagation::Background,
        uid: None,
        resource_version: None,
    }
}

/// Remove finalizer `f` from a stored object; removes the object if it was the last one.
fn drop_finalizer(st: &mut State, info: &ResourceInfo, obj: &Value, f: &str) {
    let mut o = obj.clone();
    if let Some(a) = o["metadata"]["finalizers"].as_array_mut() {
        a.retain(|x| x != f);
    }
    let empty = o["metadata"]["finalizers"]
        .as_array()
        .is_none_or(|a| a.is_empty());
    if empty {
        if let Some(m) = o["metadata"].as_object_mut() {
            m.remove("finalizers");
        }
    }
    let key = info.key();
    if empty && deleting(&o) && info.key() != (String::new(), "namespaces".to_string()) {
        if let Some(m) = st.objects.get_mut(&key) {
            m.insert((ns_of(&o), name_of(&o)), o.clone());
        }
        st.remove(&key, &ns_of(&o), &name_of(&o));
    } else {
        st.put(&key, o);
    }
}

/// One pass; returns whether anything changed.
fn pass(st: &mut State) -> bool {
    let v = view(st);
    let mut changed = false;
    for (info, o) in &v.interesting {
        let uid = o["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let no_deps = Vec::new();
        let dependents = v.dependents.get(&uid).unwrap_or(&no_deps);
        if deleting(o) && has_finalizer(o, "orphan") {
            for (dinfo, d) in dependents {
                let mut d2 = d.clone();
                if let Some(a) = d2["metadata"]["ownerReferences"].as_array_mut() {
                    a.retain(|r| r["uid"] != uid.as_str());
                }
                st.put(&dinfo.key(), d2);
            }
            drop_finalizer(st, info, o, "orphan");
            return true;
        }
        if deleting(o) && has_finalizer(o, "foregroundDeletion") {
            if dependents.is_empty() {
                drop_finalizer(st, info, o, "foregroundDeletion");
                return true;
            }
            for (dinfo, d) in dependents {
                if !deleting(d) {
                    let opts = DeleteOpts {
                        propagation: Propagation::Foreground,
                        ..background()
                    };
                    let _ = delete_object(st, dinfo, &ns_of(d), &name_of(d), &opts, false);
                    changed = true;
                }
            }
            if changed {
                return true;
            }
        }
        // Dependents whose owners are all gone are deleted (background propagation).
        let owners = owner_uids(o);
        // (Nothing was written in this pass yet: the store's uids are those the view saw.)
        if !owners.is_empty() && !deleting(o) && owners.iter().all(|u| !st.uids.contains_key(u)) {
            let _ = delete_object(st, info, &ns_of(o), &name_of(o), &background(), false);
            return true;
        }
        // Namespace termination: delete the contents, then the namespace.
        if deleting(o) && info.key() == (String::new(), "namespaces".to_string()) {
            let ns = name_of(o);
            let contents = objects_where(st, |i, c| i.namespaced && ns_of(c) == ns);
            if contents.is_empty() {
                if has_finalizer(o, "kubernetes") {
                    drop_finalizer(st, info, o, "kubernetes");
                    return true;
                }
                if o["metadata"]["finalizers"]
                    .as_array()
                    .is_none_or(|a| a.is_empty())
                {
                    st.remove(&info.key(), "", &ns);
                    return true;
                }
            } else {
                for (ci, c) in &contents {
                    if !deleting(c) {
                        let _ = delete_object(st, ci, &ns_of(c), &name_of(c), &background(), false);
                        changed = true;
                    }
                }
                if changed {
                    return true;
                }
            }
        }
        // CRD deletion: delete all instances, then release the CRD.
        if deleting(o)
            && info.key() == crd_key()
            && has_finalizer(o, "customresourcecleanup.apiextensions.k8s.io")
        {
            let crd_name = name_of(o);
            let instances = objects_where(st, |i, _| i.crd.as_deref() == Some(crd_name.as_str()));
            if instances.is_empty() {
                drop_finalizer(st, info, o, "customresourcecleanup.apiextensions.k8s.io");
                return true;
            }
            for (ci, c) in &instances {
                if !deleting(c) {
                    let _ = delete_object(st, ci, &ns_of(c), &name_of(c), &background(), false);
                    changed = true;
                }
            }
            if changed {
                return true;
            }
        }
    }
    changed
}

/// Run passes until nothing changes (bounded, so a cycle cannot hang a request).
pub fn sweep(st: &mut State) {
    for _ in 0..1000 {
        if !pass(st) {
            break;
        }
    }
    super::rbac_objects::aggregate(st);
}
