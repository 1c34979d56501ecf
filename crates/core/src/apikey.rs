//! API keys: how a key looks, how it is hashed for storage, and how it is read
//! from an `authorization: Bearer …` header. The key itself is shown once, at
//! creation; only its SHA-256 is stored. A fast hash is enough because keys are
//! random (244 bits), not passwords: nothing can be guessed from a dictionary.

/// Every key starts with this, so a leaked one is easy to recognise and grep for.
pub const KEY_PREFIX: &str = "dlk_";

/// How much of a key is kept in clear beside its hash, to tell keys apart in lists.
pub const SHOWN_CHARS: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BearerError {
    #[error("no authorization metadata; send `authorization: Bearer <api key>`")]
    Missing,
    #[error("authorization metadata must be `Bearer <api key>`")]
    Malformed,
}

/// A new random key: the prefix and two v4 UUIDs' worth of randomness.
pub fn generate() -> String {
    format!("{KEY_PREFIX}{}", crate::ids::random_secret())
}

/// Hex SHA-256 of the key: what the database stores and looks up.
pub fn hash(key: &str) -> String {
    crate::digest::sha256_hex(key.as_bytes())
}

/// The start of a key that may be shown (e.g. `dlk_1a2b3c4d`).
pub fn shown_part(key: &str) -> String {
    key.chars().take(SHOWN_CHARS).collect()
}

/// The key in an `authorization` header value (`Bearer <key>`, scheme case-insensitive).
pub fn from_bearer(header: Option<&str>) -> Result<&str, BearerError> {
    let value = header.ok_or(BearerError::Missing)?.trim();
    let (scheme, key) = value.split_once(' ').ok_or(BearerError::Malformed)?;
    let key = key.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || key.is_empty() {
        return Err(BearerError::Malformed);
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_prefixed_and_hash_stably() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        assert!(a.starts_with(KEY_PREFIX) && a.len() == KEY_PREFIX.len() + 64);
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash(&a).len(), 64);
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(shown_part(&a).len(), SHOWN_CHARS);
    }

    #[test]
    fn bearer_header_is_parsed() {
        assert_eq!(from_bearer(Some("Bearer dlk_x")), Ok("dlk_x"));
        assert_eq!(from_bearer(Some("bearer  dlk_x ")), Ok("dlk_x"));
        assert_eq!(from_bearer(None), Err(BearerError::Missing));
        assert_eq!(from_bearer(Some("dlk_x")), Err(BearerError::Malformed));
        assert_eq!(
            from_bearer(Some("Basic dlk_x")),
            Err(BearerError::Malformed)
        );
        assert_eq!(from_bearer(Some("Bearer ")), Err(BearerError::Malformed));
    }
}
