//! RFC 6238 TOTP codes (used by the sandbox identity provider's verification app and by the
//! TOTP MFA methods).

use hmac::{Hmac, Mac};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Sha1,
    Sha256,
    Sha512,
}

impl Algorithm {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "SHA1" => Some(Self::Sha1),
            "SHA256" => Some(Self::Sha256),
            "SHA512" => Some(Self::Sha512),
            _ => None,
        }
    }
}

fn hmac_bytes(alg: Algorithm, key: &[u8], msg: &[u8]) -> Vec<u8> {
    macro_rules! mac {
        ($d:ty) => {{
            let mut m = <Hmac<$d> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            m.update(msg);
            m.finalize().into_bytes().to_vec()
        }};
    }
    match alg {
        Algorithm::Sha1 => mac!(sha1::Sha1),
        Algorithm::Sha256 => mac!(sha2::Sha256),
        Algorithm::Sha512 => mac!(sha2::Sha512),
    }
}

/// The code for a counter (HOTP, RFC 4226).
pub fn hotp(alg: Algorithm, key: &[u8], counter: u64, digits: u32) -> String {
    let h = hmac_bytes(alg, key, &counter.to_be_bytes());
    let off = (h[h.len() - 1] & 0x0f) as usize;
    let bin = ((u32::from(h[off]) & 0x7f) << 24)
        | (u32::from(h[off + 1]) << 16)
        | (u32::from(h[off + 2]) << 8)
        | u32::from(h[off + 3]);
    let m = 10u32.pow(digits);
    format!("{:0width$}", bin % m, width = digits as usize)
}

/// The code at unix time `t`.
pub fn totp(alg: Algorithm, key: &[u8], t: i64, period: i64, digits: u32) -> String {
    hotp(alg, key, (t.max(0) / period.max(1)) as u64, digits)
}

/// Whether `code` is valid at `t`, allowing `skew` periods either side.
pub fn verify(
    alg: Algorithm,
    key: &[u8],
    code: &str,
    t: i64,
    period: i64,
    digits: u32,
    skew: i64,
) -> bool {
    (-skew..=skew).any(|d| totp(alg, key, t + d * period, period, digits) == code)
}

pub fn base32_encode(b: &[u8]) -> String {
    data_encoding::BASE32_NOPAD.encode(b)
}

pub fn base32_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim().trim_end_matches('=').to_uppercase();
    data_encoding::BASE32_NOPAD.decode(s.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6238_vectors() {
        let key = b"12345678901234567890";
        assert_eq!(totp(Algorithm::Sha1, key, 59, 30, 8), "94287082");
        assert_eq!(totp(Algorithm::Sha1, key, 1111111109, 30, 8), "07081804");
        let key256 = b"12345678901234567890123456789012";
        assert_eq!(totp(Algorithm::Sha256, key256, 59, 30, 8), "46119246");
    }
}
