//! Converts an uploaded PDF or DOCX to markdown the analysis can read:
//! headings stay sections (with their numbers), tables become markdown
//! tables, and each PDF page starts with an anchor (`<!-- page 3 -->`) a
//! citation can name. A file that cannot be read is refused with a reason the
//! user can act on; refusing never reads past the configured limits.

mod docx;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
mod markdown;
mod pdf;

use std::panic::{AssertUnwindSafe, catch_unwind};

pub use markdown::page_anchor;

/// The formats converted here (plain text and markdown need no conversion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pdf,
    Docx,
}

impl Kind {
    /// The kind a file name's extension names, if it is one converted here.
    pub fn from_file_name(file_name: &str) -> Option<Self> {
        let (_, extension) = file_name.rsplit_once('.')?;
        match extension.to_ascii_lowercase().as_str() {
            "pdf" => Some(Self::Pdf),
            "docx" => Some(Self::Docx),
            _ => None,
        }
    }

    /// The media type the original file is stored with.
    pub fn mime_type(self) -> &'static str {
        match self {
            Self::Pdf => "application/pdf",
            Self::Docx => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        }
    }
}

/// Bounds on what one file may cost to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest file taken, in bytes.
    pub max_bytes: usize,
    /// The most pages a PDF may have.
    pub max_pages: u32,
    /// The most bytes a file may expand to: a PDF's decompressed page
    /// content, or a DOCX's unzipped parts, counted as they are read.
    pub max_expanded_bytes: usize,
    /// The most entries a DOCX's zip may list.
    pub max_zip_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 50 * 1024 * 1024,
            max_pages: 1000,
            max_expanded_bytes: 200 * 1024 * 1024,
            max_zip_entries: 10_000,
        }
    }
}

/// A converted file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    pub markdown: String,
    /// A PDF's page count; for a DOCX, which has no fixed pages, the pages
    /// its page breaks mark (explicit, or where Word last laid pages out),
    /// `None` when it has none.
    pub pages: Option<u32>,
}

/// Why a file was refused; each message says what the user can do about it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConvertError {
    #[error("it is {bytes} bytes; the limit is {limit} bytes")]
    TooLarge { bytes: usize, limit: usize },
    #[error("it has {pages} pages; the limit is {limit}: split it and upload the parts")]
    TooManyPages { pages: u32, limit: u32 },
    #[error("it is not a {expected} file ({found}); upload the document itself")]
    WrongFormat {
        expected: &'static str,
        found: &'static str,
    },
    #[error(
        "it is password-protected; save a copy without a password (or without encryption) and upload that"
    )]
    Encrypted,
    #[error(
        "it has no text layer (a scan or images of text); run OCR on it or upload the document it was made from"
    )]
    NoTextLayer,
    #[error("it holds no text")]
    NoText,
    #[error("it is truncated or damaged ({0}); upload an intact copy")]
    Corrupt(String),
    #[error(
        "it expands past the limit of {limit} bytes when unpacked (a zip bomb, or too large a file to take)"
    )]
    ExpandsTooFar { limit: usize },
    #[error("its zip lists more than {limit} entries; a Word document has far fewer")]
    TooManyEntries { limit: usize },
}

/// Converts `bytes` of `kind` to markdown.
pub fn to_markdown(bytes: &[u8], kind: Kind, limits: &Limits) -> Result<Converted, ConvertError> {
    to_markdown_with_progress(bytes, kind, limits, &mut |_, _| {})
}

/// [`to_markdown`], calling `progress(done, total)` as PDF pages are read (a
/// DOCX is read in one step: `progress(1, 1)`).
pub fn to_markdown_with_progress(
    bytes: &[u8],
    kind: Kind,
    limits: &Limits,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<Converted, ConvertError> {
    if bytes.len() > limits.max_bytes {
        return Err(ConvertError::TooLarge {
            bytes: bytes.len(),
            limit: limits.max_bytes,
        });
    }
    // The parsers are third-party code reading hostile bytes: a panic in
    // them is a file that cannot be read, not a crashed worker.
    let converted = catch_unwind(AssertUnwindSafe(|| match kind {
        Kind::Pdf => pdf::convert(bytes, limits, progress),
        Kind::Docx => docx::convert(bytes, limits, progress),
    }));
    converted.unwrap_or_else(|_| Err(ConvertError::Corrupt("the parser could not read it".into())))
}

/// What a file that is not the expected format looks like, for the refusal.
fn sniff(bytes: &[u8]) -> &'static str {
    if bytes.starts_with(b"PK\x03\x04") {
        "it is a zip archive"
    } else if bytes.starts_with(b"%PDF-") {
        "it is a PDF"
    } else if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
        "it is an OLE file: an old .doc or a password-protected document"
    } else if std::str::from_utf8(&bytes[..bytes.len().min(512)]).is_ok() {
        "it is plain text"
    } else {
        "its first bytes match neither"
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn kinds_come_from_extensions() {
        assert_eq!(Kind::from_file_name("Base.PDF"), Some(Kind::Pdf));
        assert_eq!(Kind::from_file_name("amendment 2.docx"), Some(Kind::Docx));
        assert_eq!(Kind::from_file_name("notes.md"), None);
        assert_eq!(Kind::from_file_name("pdf"), None);
    }

    #[test]
    fn a_file_over_the_byte_limit_is_refused_before_parsing() {
        let limits = Limits {
            max_bytes: 4,
            ..Limits::default()
        };
        assert_eq!(
            to_markdown(b"%PDF-1.7", Kind::Pdf, &limits),
            Err(ConvertError::TooLarge { bytes: 8, limit: 4 })
        );
    }
}
