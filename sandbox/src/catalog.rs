//! The emulated catalog service. Filled in by its sandbox issue.

use axum::Router;

use crate::SandboxOptions;

pub fn router(_opts: &SandboxOptions) -> anyhow::Result<Router> {
    Ok(Router::new())
}
