//! Uploaded PDFs are hostile bytes: converting one must refuse garbage with
//! a reason (never panic or hang), stay within its limits, and what it
//! accepts must name every page it read.
#![no_main]

use dialectic_convert::{Kind, Limits, page_anchor, to_markdown};
use libfuzzer_sys::fuzz_target;

/// Small limits keep each run fast while still crossing every bound.
const LIMITS: Limits = Limits {
    max_bytes: 1024 * 1024,
    max_pages: 20,
    max_expanded_bytes: 4 * 1024 * 1024,
    max_zip_entries: 100,
};

fuzz_target!(|data: &[u8]| {
    match to_markdown(data, Kind::Pdf, &LIMITS) {
        Ok(converted) => {
            let pages = converted.pages.expect("a PDF counts its pages");
            assert!((1..=LIMITS.max_pages).contains(&pages));
            assert!(converted.markdown.starts_with(&page_anchor(1)));
            assert!(converted.markdown.contains(&page_anchor(pages)));
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
});
