//! The emulated secrets service (spec A, and spec C §4.1–4.2: transform and directory engines).
//! Filled in by the secrets-sandbox work; see issue 4.

use axum::Router;

use crate::SandboxOptions;

/// One router per secrets cluster (`opts.secrets_clusters`), sharing the DR replication world.
pub fn routers(opts: &SandboxOptions) -> anyhow::Result<Vec<Router>> {
    Ok((0..opts.secrets_clusters.max(1)).map(|_| Router::new()).collect())
}
