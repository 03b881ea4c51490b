//! Leases (`sys/leases/...`, spec A §4.4).

use super::{Store, TokenEntry};

/// Records the lease of a token issued by a login.
pub fn register_token(_store: &mut Store, _t: &TokenEntry) {}

/// Revokes the leases owned by a token.
pub fn revoke_for_token(_store: &mut Store, _token: &str) {}
