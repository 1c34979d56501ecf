//! Uploaded DOCX files are hostile zips: converting one must refuse garbage
//! and zip bombs with a reason (never panic, hang or inflate past the
//! limit), and what it accepts holds text.
#![no_main]

use dialectic_convert::{Kind, Limits, to_markdown};
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits {
    max_bytes: 1024 * 1024,
    max_pages: 20,
    max_expanded_bytes: 4 * 1024 * 1024,
    max_zip_entries: 100,
};

fuzz_target!(|data: &[u8]| {
    match to_markdown(data, Kind::Docx, &LIMITS) {
        Ok(converted) => {
            assert_eq!(converted.pages, None);
            assert!(!converted.markdown.trim().is_empty());
            // Markdown is never longer than what was unpacked to make it,
            // give or take table pipes and heading marks.
            assert!(converted.markdown.len() <= 4 * LIMITS.max_expanded_bytes);
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
});
