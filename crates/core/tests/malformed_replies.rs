//! A corpus of real-looking model replies (tests/fixtures/malformed_replies.json):
//! what the sanitizer makes of each, and whether the result parses.

use dialectic_core::sanitize::{parse_model_json, sanitize_json};

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    raw: String,
    parses: bool,
    sanitized: bool,
    fixed: bool,
    content: Option<String>,
}

#[test]
fn the_corpus_sanitizes_as_recorded() {
    let corpus: Vec<Case> =
        serde_json::from_str(include_str!("fixtures/malformed_replies.json")).expect("corpus");
    assert!(corpus.len() >= 10);
    for case in corpus {
        let result = sanitize_json(&case.raw);
        assert_eq!(result.original_length, case.raw.len(), "{}", case.name);
        let parsed = parse_model_json(&case.raw);
        assert_eq!(parsed.is_ok(), case.parses, "{}: {:?}", case.name, result);
        if case.parses {
            assert_eq!(result.was_sanitized, case.sanitized, "{}", case.name);
            assert_eq!(result.was_structurally_fixed, case.fixed, "{}", case.name);
        }
        match (parsed, &case.content) {
            (Ok((value, _)), Some(content)) => {
                assert_eq!(
                    value["content"].as_str(),
                    Some(content.as_str()),
                    "{}",
                    case.name
                )
            }
            (Err(e), _) => {
                assert_eq!(e.original_length, case.raw.len(), "{}", case.name);
                assert!(e.excerpt.len() <= 200 * 4, "{}", case.name);
            }
            _ => {}
        }
    }
}
