//! Hostile input for the pure parsers: random and mutated bytes never panic,
//! and whatever parses keeps the parsers' promises.

use dialectic_core::paths::PathContext;
use dialectic_core::sanitize::{parse_model_json, sanitize_json};

/// A deterministic generator, so a failure reproduces.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn text(&mut self, alphabet: &[char], max: usize) -> String {
        let len = (self.next() as usize) % max;
        (0..len)
            .map(|_| alphabet[(self.next() as usize) % alphabet.len()])
            .collect()
    }
}

const JSONISH: &[char] = &[
    '{', '}', '[', ']', '"', '\'', '`', ':', ',', '\\', ' ', '\n', 'a', 'j', 's', 'o', 'n', '1',
    '-', 'é', '€', 't', 'r', 'u', 'e',
];

#[test]
fn the_sanitizer_never_panics_and_only_claims_what_parses() {
    let mut rng = Lcg(7);
    for _ in 0..20_000 {
        let raw = rng.text(JSONISH, 64);
        let result = sanitize_json(&raw);
        assert_eq!(result.original_length, raw.len());
        if let Ok((value, _)) = parse_model_json(&raw) {
            // What parses re-serialises and parses again.
            let again: serde_json::Value =
                serde_json::from_str(&value.to_string()).expect("round trip");
            assert_eq!(again, value);
        }
    }
}

const KEYISH: &[char] = &[
    'p', 'r', 'o', 'j', 'e', 'c', 't', 's', '/', '_', '.', 'm', 'd', 'j', 's', 'o', 'n', '0', '1',
    '9', 'a', 'f', '-', '+', 'w', 'k', ' ', '%',
];

#[test]
fn the_path_deconstructor_never_panics_and_only_accepts_what_it_would_write() {
    let mut rng = Lcg(11);
    let prefix = "projects/01a2051b-0d29-7309-8ae0-a15e27bb96b8/";
    for case in 0..20_000 {
        let tail = rng.text(KEYISH, 90);
        let key = if case % 2 == 0 {
            format!("{prefix}{tail}")
        } else {
            tail
        };
        if let Ok(context) = PathContext::deconstruct(&key) {
            assert_eq!(context.construct().as_deref(), Ok(key.as_str()));
        }
    }
}
