//! PDF: the text layer of each page, placed by its positions so lines, table
//! columns and larger or bold numbered headings can be told apart.

mod fonts;
mod layout;
mod text;

use crate::{ConvertError, Converted, Limits};
use lopdf::{DecompressError, Document, Error, LoadOptions};

/// Where a PDF's header may start: readers accept junk before it.
const HEADER_WINDOW: usize = 1024;
/// Where the end-of-file marker must be: a little trailing junk is common.
const TRAILER_WINDOW: usize = 2048;

pub(crate) fn convert(
    bytes: &[u8],
    limits: &Limits,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<Converted, ConvertError> {
    check_framing(bytes)?;
    let document = load(bytes, limits)?;
    let pages = document.get_pages();
    let count = u32::try_from(pages.len()).unwrap_or(u32::MAX);
    if count == 0 {
        return Err(ConvertError::Corrupt("it has no pages".into()));
    }
    if count > limits.max_pages {
        return Err(ConvertError::TooManyPages {
            pages: count,
            limit: limits.max_pages,
        });
    }
    let mut budget = limits.max_expanded_bytes;
    let mut extracted = Vec::with_capacity(pages.len());
    for (done, page_id) in (1..).zip(pages.values()) {
        extracted.push(text::page_lines(&document, *page_id, &mut budget, limits)?);
        progress(done, count);
    }
    if extracted.iter().all(Vec::is_empty) {
        return Err(ConvertError::NoTextLayer);
    }
    Ok(Converted {
        markdown: layout::render(&extracted),
        pages: Some(count),
    })
}

/// A PDF starts with `%PDF-` and ends with `%%EOF`: a file cut short in
/// transit lacks the end, and lenient parsing would otherwise read what is
/// left as if it were whole.
fn check_framing(bytes: &[u8]) -> Result<(), ConvertError> {
    let head = &bytes[..bytes.len().min(HEADER_WINDOW)];
    if !contains(head, b"%PDF-") {
        return Err(ConvertError::WrongFormat {
            expected: "PDF",
            found: crate::sniff(bytes),
        });
    }
    let tail = &bytes[bytes.len().saturating_sub(TRAILER_WINDOW)..];
    if !contains(tail, b"%%EOF") {
        return Err(ConvertError::Corrupt(
            "it does not end with the %%EOF marker".into(),
        ));
    }
    Ok(())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

fn load(bytes: &[u8], limits: &Limits) -> Result<Document, ConvertError> {
    let options = LoadOptions {
        max_decompressed_size: Some(limits.max_expanded_bytes),
        ..LoadOptions::default()
    };
    let document =
        Document::load_mem_with_options(bytes, options).map_err(|error| refusal(error, limits))?;
    // A file that opens with the empty user password (owner restrictions
    // only) is decrypted on load; one that needs a password stays encrypted.
    if document.is_encrypted() && document.encryption_state.is_none() {
        return Err(ConvertError::Encrypted);
    }
    Ok(document)
}

pub(crate) fn refusal(error: Error, limits: &Limits) -> ConvertError {
    match error {
        Error::InvalidPassword | Error::Decryption(_) | Error::UnsupportedSecurityHandler(_) => {
            ConvertError::Encrypted
        }
        Error::Decompress(DecompressError::MemoryLimitExceeded { .. }) => {
            ConvertError::ExpandsTooFar {
                limit: limits.max_expanded_bytes,
            }
        }
        other => ConvertError::Corrupt(other.to_string()),
    }
}
