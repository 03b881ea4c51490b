//! OpenPGP encryption of DR operation tokens to a caller-supplied public key (the real service's
//! `pgp_key`: base64 of a binary OpenPGP public key), using the `pgp` crate.

use base64::Engine;
use pgp::composed::{Deserializable, MessageBuilder, SignedPublicKey};
use pgp::crypto::sym::SymmetricKeyAlgorithm;
use pgp::types::KeyDetails;

fn load(bytes: &[u8]) -> Result<SignedPublicKey, String> {
    if let Ok(k) = SignedPublicKey::from_bytes(bytes) {
        return Ok(k);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| format!("error parsing PGP key: {e}"))?;
    SignedPublicKey::from_string(text)
        .map(|(k, _)| k)
        .map_err(|e| format!("error parsing PGP key: {e}"))
}

/// Decodes and parses a base64 public key; returns its bytes and lower-case hex fingerprint.
pub fn parse_public_key(b64: &str) -> Result<(Vec<u8>, String), String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("error decoding given PGP key: {e}"))?;
    let key = load(&bytes)?;
    Ok((bytes, format!("{:x}", key.fingerprint())))
}

/// Encrypts `msg` to the key (its first encryption-capable subkey, else the primary key) and
/// returns the base64 of the binary OpenPGP message.
pub fn encrypt_to(key_bytes: &[u8], msg: &[u8]) -> Result<String, String> {
    let key = load(key_bytes)?;
    let mut rng = rand08::thread_rng();
    let mut builder = MessageBuilder::from_bytes("", msg.to_vec())
        .seipd_v1(&mut rng, SymmetricKeyAlgorithm::AES256);
    match key
        .public_subkeys
        .iter()
        .find(|k| k.algorithm().can_encrypt())
    {
        Some(sub) => builder.encrypt_to_key(&mut rng, sub),
        None => builder.encrypt_to_key(&mut rng, &key),
    }
    .map_err(|e| format!("error encrypting to PGP key: {e}"))?;
    let out = builder
        .to_vec(&mut rng)
        .map_err(|e| format!("error encrypting to PGP key: {e}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(out))
}
