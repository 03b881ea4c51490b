//! Reads of the dev API server over its REST API, for the polls of [`super::Sandbox::get_json`].
//!
//! A test waiting for a condition reads the object every 100 ms. Through `kubectl get` each read
//! cost about 0.2 s of CPU (the process's start, its discovery cache, its printer), so a waiting
//! test kept most of a core busy and slowed the operator and the servers it was waiting on. A
//! read here is one HTTPS GET with the kubeconfig's token and CA. Everything a test does to the
//! cluster, and what it asserts about kubectl, still goes through the real kubectl.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

/// Where a resource's objects are: its collection's path, and whether it is namespaced.
#[derive(Clone)]
struct Collection {
    path: String,
    namespaced: bool,
}

/// A client of one dev API server, with the names kubectl accepts for each resource.
pub struct KubeReader {
    server: String,
    token: String,
    namespace: String,
    client: reqwest::blocking::Client,
    /// Plural, singular, short names and kind (all lowercase, each also with `.group`).
    names: Mutex<HashMap<String, Collection>>,
}

impl KubeReader {
    /// A reader for the cluster, user and namespace of `kubeconfig`'s (one) context, as the
    /// sandbox writes it.
    pub fn new(kubeconfig: &Path) -> KubeReader {
        let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
                .unwrap_or_else(|| panic!("kubeconfig has no {name}"))
                .trim()
                .to_string()
        };
        let ca = base64::engine::general_purpose::STANDARD
            .decode(field("certificate-authority-data"))
            .expect("kubeconfig CA");
        let client = reqwest::blocking::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA pem"))
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        KubeReader {
            server: field("server"),
            token: field("token"),
            namespace: field("namespace"),
            client,
            names: Mutex::new(HashMap::new()),
        }
    }

    /// GET `path` (e.g. `/api/v1/namespaces`): the body, or None on any error or non-2xx.
    pub fn get(&self, path: &str) -> Option<Value> {
        let resp = self
            .client
            .get(format!("{}{path}", self.server))
            .bearer_auth(&self.token)
            .send()
            .ok()?;
        if !resp.status().is_success() {
            return None;
        }
        resp.json().ok()
    }

    /// Learn every resource's names from discovery, as kubectl does.
    fn discover(&self) {
        let mut lists = vec![("/api/v1".to_string(), String::new())];
        if let Some(groups) = self.get("/apis") {
            for g in groups["groups"].as_array().into_iter().flatten() {
                let version = &g["preferredVersion"]["groupVersion"];
                if let (Some(v), Some(name)) = (version.as_str(), g["name"].as_str()) {
                    lists.push((format!("/apis/{v}"), name.to_string()));
                }
            }
        }
        let mut names = HashMap::new();
        for (prefix, group) in lists {
            let Some(list) = self.get(&prefix) else {
                continue;
            };
            for r in list["resources"].as_array().into_iter().flatten() {
                let plural = r["name"].as_str().unwrap_or_default();
                if plural.is_empty() || plural.contains('/') {
                    continue; // a subresource
                }
                let collection = Collection {
                    path: format!("{prefix}/{plural}"),
                    namespaced: r["namespaced"].as_bool().unwrap_or(false),
                };
                let mut keys = vec![plural.to_string()];
                keys.extend(
                    [&r["singularName"], &r["kind"]]
                        .into_iter()
                        .filter_map(|v| v.as_str())
                        .filter(|s| !s.is_empty())
                        .map(str::to_lowercase),
                );
                keys.extend(
                    r["shortNames"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_string)),
                );
                for key in keys {
                    if !group.is_empty() {
                        names.insert(format!("{key}.{group}"), collection.clone());
                    }
                    // A core resource wins a bare name, as with kubectl.
                    if group.is_empty() || !names.contains_key(&key) {
                        names.insert(key, collection.clone());
                    }
                }
            }
        }
        *self.names.lock().unwrap() = names;
    }

    fn collection(&self, resource: &str) -> Option<Collection> {
        let resource = resource.to_lowercase();
        let known = self.names.lock().unwrap().get(&resource).cloned();
        known.or_else(|| {
            // Unknown so far (a CRD installed since): look again.
            self.discover();
            self.names.lock().unwrap().get(&resource).cloned()
        })
    }

    /// The object `kubectl get RESOURCE NAME -o json` prints (in the kubeconfig's namespace for
    /// a namespaced resource), or None when it or its resource does not exist.
    pub fn object(&self, resource: &str, name: &str) -> Option<Value> {
        let c = self.collection(resource)?;
        let path = if c.namespaced {
            let (group_path, plural) = c.path.rsplit_once('/').expect("collection path");
            format!("{group_path}/namespaces/{}/{plural}/{name}", self.namespace)
        } else {
            format!("{}/{name}", c.path)
        };
        self.get(&path)
    }
}
