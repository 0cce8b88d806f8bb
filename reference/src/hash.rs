//! Hashing: the SHA-256 identity of sent content (seed 000, "Format and discovery": "its
//! SHA-256 is the identity half of the module's dedupe key"), below everything that hashes.

use sha2::{Digest, Sha256};

/// The lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        // Every module is hashed on every discovery: no formatting machinery per byte.
        for nibble in [b >> 4, b & 0xf] {
            out.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
        }
    }
    out
}
