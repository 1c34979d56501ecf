//! What a page's fonts tell the text placement: how shown bytes decode to
//! text, how wide each glyph is, and whether the face is bold.

use crate::pdf::refusal;
use crate::{ConvertError, Limits};
use lopdf::{DecompressError, Dictionary, Document, Encoding, Object};
use std::collections::BTreeMap;

/// Glyph width assumed when a font lists none (the standard 14 fonts), in
/// thousandths of the font size: about a proportional face's average.
const DEFAULT_WIDTH: f64 = 500.0;

/// Typesetting ligatures, spelled out so "misfits" reads and quotes as it
/// is typed.
const LIGATURES: [(char, &str); 5] = [
    ('\u{FB00}', "ff"),
    ('\u{FB01}', "fi"),
    ('\u{FB02}', "fl"),
    ('\u{FB03}', "ffi"),
    ('\u{FB04}', "ffl"),
];

pub(crate) struct Font<'a> {
    encoding: Encoding<'a>,
    /// Two-byte codes (a Type0 font): widths are not read, each code counts
    /// as one default glyph.
    two_byte: bool,
    first_char: i64,
    widths: Vec<f64>,
    pub(crate) bold: bool,
}

impl Font<'_> {
    pub(crate) fn decode(&self, bytes: &[u8]) -> String {
        let text = self.encoding.bytes_to_string(bytes).unwrap_or_default();
        if text.contains(|c| LIGATURES.iter().any(|(ligature, _)| *ligature == c)) {
            text.chars().fold(String::new(), |mut out, c| {
                match LIGATURES.iter().find(|(ligature, _)| *ligature == c) {
                    Some((_, letters)) => out.push_str(letters),
                    None => out.push(c),
                }
                out
            })
        } else {
            text
        }
    }

    /// The advance of showing `bytes`, in thousandths of the font size.
    pub(crate) fn advance(&self, bytes: &[u8]) -> f64 {
        if self.two_byte {
            return DEFAULT_WIDTH * bytes.len().div_ceil(2) as f64;
        }
        bytes.iter().map(|code| self.width(i64::from(*code))).sum()
    }

    fn width(&self, code: i64) -> f64 {
        usize::try_from(code - self.first_char)
            .ok()
            .and_then(|index| self.widths.get(index))
            .copied()
            .filter(|width| *width > 0.0)
            .unwrap_or(DEFAULT_WIDTH)
    }
}

/// The fonts a page's resources name, by resource name. A font whose
/// encoding cannot be read is left out (its text is skipped); one whose
/// encoding would expand past the budget refuses the file.
pub(crate) fn page_fonts<'a>(
    document: &'a Document,
    page_id: lopdf::ObjectId,
    budget: usize,
    limits: &Limits,
) -> Result<BTreeMap<Vec<u8>, Font<'a>>, ConvertError> {
    let mut fonts = BTreeMap::new();
    let Ok(dictionaries) = document.get_page_fonts(page_id) else {
        return Ok(fonts);
    };
    for (name, dictionary) in dictionaries {
        match dictionary.get_font_encoding_with_limit(document, budget) {
            Ok(encoding) => {
                fonts.insert(name, font(document, dictionary, encoding));
            }
            Err(error @ lopdf::Error::Decompress(DecompressError::MemoryLimitExceeded { .. })) => {
                return Err(refusal(error, limits));
            }
            Err(_) => {}
        }
    }
    Ok(fonts)
}

fn font<'a>(
    document: &'a Document,
    dictionary: &'a Dictionary,
    encoding: Encoding<'a>,
) -> Font<'a> {
    let name = |key: &[u8]| {
        dictionary
            .get(key)
            .and_then(Object::as_name)
            .map(|name| String::from_utf8_lossy(name).to_ascii_lowercase())
            .unwrap_or_default()
    };
    let widths = dictionary
        .get_deref(b"Widths", document)
        .and_then(Object::as_array)
        .map(|widths| {
            widths
                .iter()
                .map(|width| number(width).unwrap_or(0.0))
                .collect()
        })
        .unwrap_or_default();
    Font {
        encoding,
        two_byte: name(b"Subtype") == "type0",
        first_char: dictionary
            .get(b"FirstChar")
            .and_then(Object::as_i64)
            .unwrap_or(0),
        widths,
        bold: name(b"BaseFont").contains("bold"),
    }
}

/// A PDF number (integer or real) as a float.
pub(crate) fn number(object: &Object) -> Option<f64> {
    match object {
        Object::Integer(value) => Some(*value as f64),
        Object::Real(value) => Some(f64::from(*value)),
        _ => None,
    }
}
