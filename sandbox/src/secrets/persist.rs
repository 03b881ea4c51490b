//! `--state-dir` persistence: a JSON snapshot of everything the secrets clusters hold (each
//! cluster's storage and DR state, the identity provider's users, the emulated directory, the
//! unseal key shares and the transform wrapping key), written atomically after every request and
//! loaded at start. Pending push challenges and number-challenge nonces are not kept (they live
//! for one login). Listener addresses are learnt again after a restart.
//!
//! The snapshot holds secrets (tokens, passwords, keys) in clear text: it is a development tool's
//! state, like the real service's dev-mode storage, and must not be shared.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{directory, dr, provider, transform, Cluster, Store, World};

pub const FILE: &str = "secrets-state.json";

#[derive(Serialize, Deserialize)]
struct ClusterSnap {
    store: Store,
    dr: dr::DrState,
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    clusters: Vec<ClusterSnap>,
    provider: provider::Provider,
    directory: directory::Directory,
    key_shares: Vec<String>,
    #[serde(default)]
    wrapping_key_pem: Option<String>,
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Restores a saved snapshot into `world` (created fresh from the options); missing clusters
/// keep their fresh state, extra saved ones are dropped.
pub fn load(world: &mut World, file: &Path, root_token: &str) -> anyhow::Result<()> {
    if !file.exists() {
        return Ok(());
    }
    let text = std::fs::read_to_string(file)?;
    let snap: Snapshot = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("secrets: cannot read state {}: {e}", file.display()))?;
    for (i, c) in snap.clusters.into_iter().enumerate() {
        if let Some(slot) = world.clusters.get_mut(i) {
            *slot = Cluster {
                store: c.store,
                dr: c.dr,
                host: String::new(),
            };
            // The root token given now always works.
            if !slot.store.tokens.contains_key(root_token) {
                let fresh = Store::initial(root_token);
                if let Some(t) = fresh.tokens.get(root_token) {
                    slot.store.tokens.insert(root_token.to_string(), t.clone());
                }
            }
        }
    }
    world.provider = snap.provider;
    world.directory = snap.directory;
    if !snap.key_shares.is_empty() {
        world.key_shares = snap.key_shares;
    }
    if let Some(pem) = snap.wrapping_key_pem {
        transform::restore_wrapping_key(&pem);
    }
    Ok(())
}

/// Writes the snapshot (to a temporary file, then renamed over the old one).
pub fn save(world: &World, file: &Path) {
    let snap = Snapshot {
        clusters: world
            .clusters
            .iter()
            .map(|c| ClusterSnap {
                store: c.store.clone(),
                dr: c.dr.clone(),
            })
            .collect(),
        provider: world.provider.clone(),
        directory: world.directory.clone(),
        key_shares: world.key_shares.clone(),
        wrapping_key_pem: transform::wrapping_key_pem(),
    };
    let Ok(text) = serde_json::to_vec(&snap) else {
        return;
    };
    let tmp = file.with_extension("json.tmp");
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, file)) {
        tracing::warn!(error = %e, "secrets: cannot save state");
    }
}
