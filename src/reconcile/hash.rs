//! Keyed hashes of write-only inputs (API tokens, bind passwords, store passwords).
//!
//! The service never reads these back, so change is detected by comparing a hash of the source
//! with the one kept in status. A plain hash of a low-entropy password kept in status could be
//! brute-forced by anyone who can read the resource; HMAC-SHA256 under an operator-held key
//! cannot be without that key.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// HMAC-SHA256 of `parts` (length-prefixed so `["ab","c"]` and `["a","bc"]` differ), as
/// `hmac-sha256:<hex>`.
pub fn keyed_hash(key: &[u8], parts: &[&[u8]]) -> String {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    for p in parts {
        mac.update(&(p.len() as u64).to_be_bytes());
        mac.update(p);
    }
    format!("hmac-sha256:{}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_hash_depends_on_key_and_input() {
        let a = keyed_hash(b"k1", &[b"password"]);
        assert_ne!(a, keyed_hash(b"k2", &[b"password"]));
        assert_ne!(a, keyed_hash(b"k1", &[b"passwore"]));
        assert_eq!(a, keyed_hash(b"k1", &[b"password"]));
        assert!(!a.contains("password"));
    }

    #[test]
    fn keyed_hash_separates_parts() {
        assert_ne!(
            keyed_hash(b"k", &[b"ab", b"c"]),
            keyed_hash(b"k", &[b"a", b"bc"])
        );
    }
}
