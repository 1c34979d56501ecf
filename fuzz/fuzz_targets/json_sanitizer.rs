//! Model replies are hostile text: sanitizing must never panic or loop, must
//! keep valid JSON's meaning, and must only claim a structural fix that parses.
#![no_main]

use dialectic_core::sanitize::{parse_cut_off_json, parse_model_json, sanitize_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let result = sanitize_json(raw);
    assert_eq!(result.original_length, raw.len());
    // Sanitizing peels wrappers, escapes a raw control character in a string
    // as at most six bytes, and adds at most one closer per opener.
    assert!(result.sanitized.len() <= 6 * raw.len() + 2);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(raw) {
        // Valid JSON may lose surrounding whitespace, never meaning.
        assert_eq!(result.sanitized, raw.trim());
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&result.sanitized).ok(),
            Some(value)
        );
        assert!(!result.was_structurally_fixed);
    }
    if result.was_structurally_fixed {
        assert!(serde_json::from_str::<serde_json::Value>(&result.sanitized).is_ok());
    }
    if let Err(error) = parse_model_json(raw) {
        assert!(error.excerpt.chars().count() <= 200);
    }
    // Closing a cut-off reply never panics, loops or grows without bound.
    match parse_cut_off_json(raw) {
        Ok((_, result)) => assert!(result.sanitized.len() <= 6 * raw.len() + 2),
        Err(error) => assert!(error.excerpt.chars().count() <= 200),
    }
});
