//! No-code provisioning (spec B §2.5, §4.5).

use axum::Router;

use super::model::*;
use super::Svc;

pub fn routes() -> Router<Svc> {
    Router::new()
}

/// The concrete module version a no-code module pins.
pub fn pinned_version(_state: &State, m: &NoCodeModule) -> Option<String> {
    Some(m.version_pin.clone())
}
