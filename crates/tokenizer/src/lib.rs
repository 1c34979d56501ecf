//! Token counting with the model's own tokenizer. A model row names its
//! tokenizer (`cl100k_base`, `o200k_base`, or `estimate` for providers whose
//! tokenizer we do not ship); counts of longer texts are cached in Redis under
//! the text's SHA-256, so a document counted by one executor is free for every
//! other one and for every later turn.

use dialectic_cache::Cache;
use dialectic_core::prompt::ChatRequest;
use dialectic_core::tokens::{MESSAGE_OVERHEAD, REPLY_PRIMING, estimate_tokens};
use sha2::{Digest, Sha256};
use std::sync::{Arc, OnceLock};
use tiktoken_rs::CoreBPE;

/// Texts shorter than this are counted on the spot: a Redis round trip costs more.
const CACHE_MIN_BYTES: usize = 512;
/// Misses adding up to this many bytes are counted on the blocking pool.
const BLOCKING_MIN_BYTES: usize = 64 * 1024;
/// Counts are content-addressed and never stale; the TTL only bounds Redis memory.
const CACHE_TTL_SECS: u64 = 7 * 24 * 3600;

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("unknown tokenizer {0:?} (known: cl100k_base, o200k_base, estimate)")]
    Unknown(String),
    #[error("tokenizer {0} could not be loaded: {1}")]
    Load(&'static str, String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Cl100k,
    O200k,
    /// One token per four bytes: for providers whose tokenizer we do not ship.
    Estimate,
}

static CL100K: OnceLock<Result<CoreBPE, String>> = OnceLock::new();
static O200K: OnceLock<Result<CoreBPE, String>> = OnceLock::new();

impl Encoding {
    /// The tokenizer a model row names; empty means the default (cl100k_base).
    pub fn from_name(name: &str) -> Result<Self, TokenizerError> {
        match name.trim() {
            "" | "cl100k_base" | "cl100k" => Ok(Self::Cl100k),
            "o200k_base" | "o200k" => Ok(Self::O200k),
            "estimate" => Ok(Self::Estimate),
            other => Err(TokenizerError::Unknown(other.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Cl100k => "cl100k_base",
            Self::O200k => "o200k_base",
            Self::Estimate => "estimate",
        }
    }

    fn bpe(self) -> Result<Option<&'static CoreBPE>, TokenizerError> {
        let cell = match self {
            Self::Cl100k => {
                CL100K.get_or_init(|| tiktoken_rs::cl100k_base().map_err(|e| e.to_string()))
            }
            Self::O200k => {
                O200K.get_or_init(|| tiktoken_rs::o200k_base().map_err(|e| e.to_string()))
            }
            Self::Estimate => return Ok(None),
        };
        cell.as_ref()
            .map(Some)
            .map_err(|e| TokenizerError::Load(self.name(), e.clone()))
    }

    /// Exact count of one text (special-token strings count as ordinary text,
    /// which is what a provider does with user content).
    pub fn count(self, text: &str) -> Result<u64, TokenizerError> {
        Ok(match self.bpe()? {
            Some(bpe) => bpe.encode_ordinary(text).len() as u64,
            None => estimate_tokens(text),
        })
    }
}

/// The Redis key a text's count lives under.
pub fn cache_key(encoding: Encoding, text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    format!("tokens:{}:{hex}", encoding.name())
}

/// Counts texts, consulting and filling the Redis cache when one is given.
/// A cache that does not answer is skipped, never an error: counting is local.
#[derive(Clone, Default)]
pub struct TokenCounter {
    /// Filled once Redis answers (services connect in the background).
    cache: Arc<OnceLock<Cache>>,
}

impl TokenCounter {
    pub fn new(cache: Arc<OnceLock<Cache>>) -> Self {
        Self { cache }
    }

    pub async fn count_many(
        &self,
        encoding: Encoding,
        texts: &[&str],
    ) -> Result<Vec<u64>, TokenizerError> {
        let mut counts = vec![None; texts.len()];
        let long: Vec<usize> = (0..texts.len())
            .filter(|&i| texts[i].len() >= CACHE_MIN_BYTES && encoding != Encoding::Estimate)
            .collect();
        let keys: Vec<String> = long
            .iter()
            .map(|&i| cache_key(encoding, texts[i]))
            .collect();
        if let (Some(cache), false) = (self.cache.get(), keys.is_empty()) {
            match cache.get_counts(&keys).await {
                Ok(found) => {
                    for (&i, value) in long.iter().zip(found) {
                        counts[i] = value;
                    }
                }
                Err(e) => tracing::debug!(error = %e, "token count cache unavailable"),
            }
        }
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| counts[i].is_none()).collect();
        let missing_bytes: usize = missing.iter().map(|&i| texts[i].len()).sum();
        let computed: Vec<u64> = if missing_bytes >= BLOCKING_MIN_BYTES {
            // Tokenizing a large text takes long enough to stall other tasks:
            // do it on the blocking pool.
            let owned: Vec<String> = missing.iter().map(|&i| texts[i].to_string()).collect();
            tokio::task::spawn_blocking(move || {
                owned
                    .iter()
                    .map(|t| encoding.count(t))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|e| TokenizerError::Load(encoding.name(), e.to_string()))??
        } else {
            missing
                .iter()
                .map(|&i| encoding.count(texts[i]))
                .collect::<Result<Vec<_>, _>>()?
        };
        let mut fresh = Vec::new();
        for (&i, n) in missing.iter().zip(computed) {
            counts[i] = Some(n);
            if let Some(pos) = long.iter().position(|&l| l == i) {
                fresh.push((keys[pos].clone(), n));
            }
        }
        if let (Some(cache), false) = (self.cache.get(), fresh.is_empty())
            && let Err(e) = cache.set_counts(&fresh, CACHE_TTL_SECS).await
        {
            tracing::debug!(error = %e, "could not cache token counts");
        }
        Ok(counts.into_iter().map(|c| c.unwrap_or(0)).collect())
    }

    pub async fn count(&self, encoding: Encoding, text: &str) -> Result<u64, TokenizerError> {
        Ok(self
            .count_many(encoding, &[text])
            .await?
            .first()
            .copied()
            .unwrap_or(0))
    }

    /// The whole request as the provider sees it: system instruction, every
    /// message (resource documents are folded into the user turn by assembly),
    /// plus the per-message framing the chat format adds.
    pub async fn count_request(
        &self,
        encoding: Encoding,
        request: &ChatRequest,
    ) -> Result<u64, TokenizerError> {
        let mut texts: Vec<&str> = request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        if let Some(system) = request.system_instruction.as_deref() {
            texts.push(system);
        }
        let framed = texts.len() as u64;
        let counts = self.count_many(encoding, &texts).await?;
        Ok(counts.iter().sum::<u64>() + framed * MESSAGE_OVERHEAD + REPLY_PRIMING)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_exact_counts() {
        assert_eq!(Encoding::from_name("").unwrap(), Encoding::Cl100k);
        assert!(Encoding::from_name("gpt2-ish").is_err());
        // Known cl100k_base encodings: "hello world" is two tokens.
        assert_eq!(Encoding::Cl100k.count("hello world").unwrap(), 2);
        assert_eq!(Encoding::O200k.count("hello world").unwrap(), 2);
        assert_eq!(Encoding::Estimate.count("hello world").unwrap(), 3);
        assert_eq!(Encoding::Cl100k.count("").unwrap(), 0);
    }

    #[test]
    fn keys_differ_by_encoding_and_content() {
        let a = cache_key(Encoding::Cl100k, "x");
        assert_ne!(a, cache_key(Encoding::O200k, "x"));
        assert_ne!(a, cache_key(Encoding::Cl100k, "y"));
        assert!(a.starts_with("tokens:cl100k_base:"));
    }

    #[tokio::test]
    async fn large_and_small_texts_count_the_same_without_a_cache() {
        let counter = TokenCounter::default();
        let big = "pricing and staffing plans. ".repeat(4000);
        let texts = [big.as_str(), "hello world", ""];
        let counts = counter.count_many(Encoding::Cl100k, &texts).await.unwrap();
        assert_eq!(counts[0], Encoding::Cl100k.count(&big).unwrap());
        assert_eq!(&counts[1..], &[2, 0]);
    }
}
