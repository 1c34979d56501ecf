//! Runs a page's content stream far enough to know where each piece of text
//! is shown: the text and graphics matrices, fonts and sizes. Drawing is
//! ignored.

use crate::pdf::fonts::{self, Font, number};
use crate::pdf::layout::{self, Fragment, Line};
use crate::pdf::refusal;
use crate::{ConvertError, Limits};
use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, ObjectId};
use std::collections::BTreeMap;

/// Nested graphics states kept; deeper saves are ignored rather than grown
/// without bound by a hostile stream.
const MAX_SAVED_STATES: usize = 64;
/// A TJ adjustment wider than this (thousandths of the font size) stands for
/// a space between words.
const WORD_GAP: f64 = 200.0;

/// The text lines of one page, charging its decompressed content to
/// `budget` (what is left of the file's expansion limit).
pub(crate) fn page_lines(
    document: &Document,
    page_id: ObjectId,
    budget: &mut usize,
    limits: &Limits,
) -> Result<Vec<Line>, ConvertError> {
    let content = document
        .get_page_content_with_limit(page_id, *budget)
        .map_err(|error| refusal(error, limits))?;
    *budget = budget.saturating_sub(content.len());
    let fonts = fonts::page_fonts(document, page_id, *budget, limits)?;
    let mut state = State::new(&fonts);
    // A stream that stops parsing keeps the text shown before the damage.
    for operation in Content::decode_iter(&content).map_while(Result::ok) {
        state.apply(&operation);
    }
    let fragments = match media_box(document, page_id) {
        Some(visible) => state
            .fragments
            .into_iter()
            .filter(|fragment| visible.shows(fragment))
            .collect(),
        None => state.fragments,
    };
    Ok(layout::lines(fragments))
}

/// How many `Parent` links are followed for an inherited page attribute.
const MAX_PAGE_TREE_DEPTH: usize = 32;

/// A page's visible area, `[x0 y0 x1 y1]`.
struct MediaBox([f64; 4]);

impl MediaBox {
    /// Text placed off the page is not part of it (image-to-PDF tools leave
    /// labels there on pages that are only a scan).
    fn shows(&self, fragment: &Fragment) -> bool {
        let [x0, y0, x1, y1] = self.0;
        let margin = fragment.size;
        let (left, right) = (x0.min(x1) - margin, x0.max(x1) + margin);
        let (bottom, top) = (y0.min(y1) - margin, y0.max(y1) + margin);
        fragment.end >= left && fragment.x <= right && fragment.y >= bottom && fragment.y <= top
    }
}

/// The page's media box, which it may inherit from the page tree.
fn media_box(document: &Document, page_id: ObjectId) -> Option<MediaBox> {
    let mut node = document.get_dictionary(page_id).ok()?;
    for _ in 0..MAX_PAGE_TREE_DEPTH {
        if let Ok(Object::Array(corners)) = node.get_deref(b"MediaBox", document) {
            let corners: Vec<f64> = corners.iter().filter_map(number).collect();
            return corners.try_into().ok().map(MediaBox);
        }
        let parent = node.get(b"Parent").and_then(Object::as_reference).ok()?;
        node = document.get_dictionary(parent).ok()?;
    }
    None
}

/// A PDF transformation matrix `[a b c d e f]`.
#[derive(Debug, Clone, Copy)]
struct Matrix([f64; 6]);

impl Matrix {
    const IDENTITY: Self = Self([1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);

    fn translation(x: f64, y: f64) -> Self {
        Self([1.0, 0.0, 0.0, 1.0, x, y])
    }

    /// `self × other`: apply `self`, then `other`.
    fn then(self, other: Self) -> Self {
        let [a, b, c, d, e, f] = self.0;
        let [a2, b2, c2, d2, e2, f2] = other.0;
        Self([
            a * a2 + b * c2,
            a * b2 + b * d2,
            c * a2 + d * c2,
            c * b2 + d * d2,
            e * a2 + f * c2 + e2,
            e * b2 + f * d2 + f2,
        ])
    }

    fn from_operands(operands: &[Object]) -> Option<Self> {
        let values: Vec<f64> = operands.iter().filter_map(number).collect();
        let values: [f64; 6] = values.try_into().ok()?;
        values.iter().all(|v| v.is_finite()).then_some(Self(values))
    }
}

struct State<'f, 'd> {
    fonts: &'f BTreeMap<Vec<u8>, Font<'d>>,
    font: Option<&'f Font<'d>>,
    size: f64,
    leading: f64,
    ctm: Matrix,
    saved: Vec<Matrix>,
    text: Matrix,
    line: Matrix,
    fragments: Vec<Fragment>,
}

impl<'f, 'd> State<'f, 'd> {
    fn new(fonts: &'f BTreeMap<Vec<u8>, Font<'d>>) -> Self {
        Self {
            fonts,
            font: None,
            size: 0.0,
            leading: 0.0,
            ctm: Matrix::IDENTITY,
            saved: Vec::new(),
            text: Matrix::IDENTITY,
            line: Matrix::IDENTITY,
            fragments: Vec::new(),
        }
    }

    fn apply(&mut self, operation: &Operation) {
        let operands = operation.operands.as_slice();
        let at = |index: usize| operands.get(index).and_then(number).unwrap_or(0.0);
        match operation.operator.as_str() {
            "q" if self.saved.len() < MAX_SAVED_STATES => self.saved.push(self.ctm),
            "Q" => self.ctm = self.saved.pop().unwrap_or(self.ctm),
            "cm" => {
                if let Some(matrix) = Matrix::from_operands(operands) {
                    self.ctm = matrix.then(self.ctm);
                }
            }
            "BT" => {
                self.text = Matrix::IDENTITY;
                self.line = Matrix::IDENTITY;
            }
            "Tf" => self.set_font(operands),
            "TL" => self.leading = at(0),
            "Td" => self.move_line(at(0), at(1)),
            "TD" => {
                self.leading = -at(1);
                self.move_line(at(0), at(1));
            }
            "Tm" => {
                if let Some(matrix) = Matrix::from_operands(operands) {
                    self.line = matrix;
                    self.text = matrix;
                }
            }
            "T*" => self.next_line(),
            "Tj" => self.show(operands.first()),
            "'" => {
                self.next_line();
                self.show(operands.first());
            }
            "\"" => {
                self.next_line();
                self.show(operands.get(2));
            }
            "TJ" => self.show_array(operands.first()),
            _ => {}
        }
    }

    fn set_font(&mut self, operands: &[Object]) {
        self.font = operands
            .first()
            .and_then(|name| name.as_name().ok())
            .and_then(|name| self.fonts.get(name));
        self.size = operands.get(1).and_then(number).unwrap_or(0.0);
    }

    fn move_line(&mut self, x: f64, y: f64) {
        if x.is_finite() && y.is_finite() {
            self.line = Matrix::translation(x, y).then(self.line);
            self.text = self.line;
        }
    }

    fn next_line(&mut self) {
        self.move_line(0.0, -self.leading);
    }

    fn show(&mut self, operand: Option<&Object>) {
        if let (Some(font), Some(Object::String(bytes, _))) = (self.font, operand) {
            let text = font.decode(bytes);
            self.emit(text, font.advance(bytes), font.bold);
        }
    }

    /// A TJ array is one fragment: its strings in order, a wide adjustment
    /// read as a space, its width the glyphs' advances less the adjustments.
    fn show_array(&mut self, operand: Option<&Object>) {
        let (Some(font), Some(Object::Array(items))) = (self.font, operand) else {
            return;
        };
        let mut text = String::new();
        let mut advance = 0.0;
        for item in items {
            match item {
                Object::String(bytes, _) => {
                    text.push_str(&font.decode(bytes));
                    advance += font.advance(bytes);
                }
                other => {
                    let adjustment = number(other).unwrap_or(0.0);
                    if adjustment < -WORD_GAP && !text.ends_with(' ') {
                        text.push(' ');
                    }
                    advance -= adjustment;
                }
            }
        }
        self.emit(text, advance, font.bold);
    }

    /// Places `text` at the current point and moves the point past it by
    /// `advance` thousandths of the font size.
    fn emit(&mut self, text: String, advance: f64, bold: bool) {
        let width = advance / 1000.0 * self.size;
        let placed = self.text.then(self.ctm);
        let [a, _, c, d, e, f] = placed.0;
        let scale = c.hypot(d);
        let size = (self.size * if scale > 0.0 { scale } else { 1.0 }).abs();
        if !text.trim().is_empty() && e.is_finite() && f.is_finite() && size.is_finite() {
            self.fragments.push(Fragment {
                x: e,
                end: e + width * a,
                y: f,
                size,
                bold,
                text,
            });
        }
        if width.is_finite() {
            self.text = Matrix::translation(width, 0.0).then(self.text);
        }
    }
}
