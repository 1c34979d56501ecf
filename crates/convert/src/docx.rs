//! DOCX: a zip of XML parts. The body (`word/document.xml`) gives the
//! paragraphs and tables; the styles say which paragraphs are headings, and
//! the numbering part gives headings and clauses their numbers.

mod body;
mod numbering;
mod styles;
mod xml;

use crate::{ConvertError, Converted, Limits};
use std::io::{Cursor, Read};
use zip::ZipArchive;
use zip::result::ZipError;

const DOCUMENT: &str = "word/document.xml";
const STYLES: &str = "word/styles.xml";
const NUMBERING: &str = "word/numbering.xml";

pub(crate) fn convert(
    bytes: &[u8],
    limits: &Limits,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<Converted, ConvertError> {
    if !bytes.starts_with(b"PK\x03\x04") {
        return Err(ConvertError::WrongFormat {
            expected: "DOCX",
            found: crate::sniff(bytes),
        });
    }
    let mut archive = ZipArchive::new(Cursor::new(bytes)).map_err(corrupt)?;
    if archive.len() > limits.max_zip_entries {
        return Err(ConvertError::TooManyEntries {
            limit: limits.max_zip_entries,
        });
    }
    let mut budget = Budget {
        left: limits.max_expanded_bytes,
        limit: limits.max_expanded_bytes,
    };
    let document = budget
        .read(&mut archive, DOCUMENT)?
        .ok_or(ConvertError::WrongFormat {
            expected: "DOCX",
            found: "it is a zip archive without word/document.xml",
        })?;
    let styles = match budget.read(&mut archive, STYLES)? {
        Some(part) => styles::parse(&part)?,
        None => styles::Styles::default(),
    };
    let numbering = match budget.read(&mut archive, NUMBERING)? {
        Some(part) => numbering::parse(&part)?,
        None => numbering::Numbering::default(),
    };
    let blocks = body::parse(&document)?;
    let (markdown, pages) = body::render(&blocks, &styles, numbering);
    progress(1, 1);
    // Anchors alone are no text.
    if markdown
        .lines()
        .all(|l| l.trim().is_empty() || l.starts_with("<!-- page "))
    {
        return Err(ConvertError::NoText);
    }
    Ok(Converted { markdown, pages })
}

fn corrupt(error: ZipError) -> ConvertError {
    ConvertError::Corrupt(format!("its zip cannot be read: {error}"))
}

/// What is left of the file's expansion limit, charged with the bytes
/// actually inflated: the sizes a zip's headers declare are not trusted.
struct Budget {
    left: usize,
    limit: usize,
}

impl Budget {
    /// The part `name`, or `None` when the zip has no such entry.
    fn read(
        &mut self,
        archive: &mut ZipArchive<Cursor<&[u8]>>,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ConvertError> {
        let entry = match archive.by_name(name) {
            Ok(entry) => entry,
            Err(ZipError::FileNotFound) => return Ok(None),
            Err(error) => return Err(corrupt(error)),
        };
        let mut part = Vec::new();
        // One byte past what is left tells "exactly at the limit" from "over".
        let cap = u64::try_from(self.left)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        entry.take(cap).read_to_end(&mut part).map_err(|error| {
            ConvertError::Corrupt(format!("{name} cannot be unpacked: {error}"))
        })?;
        if part.len() > self.left {
            return Err(ConvertError::ExpandsTooFar { limit: self.limit });
        }
        self.left -= part.len();
        Ok(Some(part))
    }
}
