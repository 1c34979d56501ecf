//! From placed text to markdown: fragments at one height form a line, wide
//! gaps split a line into cells, runs of multi-cell lines become tables, and
//! larger or bold numbered lines become headings.

use crate::markdown::{heading, one_line, page_anchor, table};

/// Text shown at one point of a page (PDF user space: y grows upwards).
#[derive(Debug, Clone)]
pub(crate) struct Fragment {
    pub(crate) x: f64,
    /// Where the text ends, from its glyph widths.
    pub(crate) end: f64,
    pub(crate) y: f64,
    pub(crate) size: f64,
    pub(crate) bold: bool,
    pub(crate) text: String,
}

/// One line of a page, split into cells at wide gaps.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Line {
    y: f64,
    size: f64,
    bold: bool,
    cells: Vec<String>,
}

/// Fragments whose baselines differ by less than this share a line
/// (fraction of the font size): subscripts and rounding stay on it.
const SAME_LINE: f64 = 0.4;
/// A gap wider than this between fragments splits cells (in font sizes).
const CELL_GAP: f64 = 2.0;
/// A gap wider than this between fragments is a space (in font sizes).
const SPACE_GAP: f64 = 0.15;
/// A line this much larger than the body text is a heading.
const HEADING_SCALE: f64 = 1.15;
/// Headings are short; a long large line is display text.
const MAX_HEADING_CHARS: usize = 120;

pub(crate) fn lines(mut fragments: Vec<Fragment>) -> Vec<Line> {
    fragments.sort_by(|a, b| b.y.total_cmp(&a.y).then(a.x.total_cmp(&b.x)));
    let mut lines: Vec<Vec<Fragment>> = Vec::new();
    for fragment in fragments {
        match lines.last_mut() {
            Some(line) if same_line(&line[0], &fragment) => line.push(fragment),
            _ => lines.push(vec![fragment]),
        }
    }
    lines.into_iter().map(line).collect()
}

fn same_line(first: &Fragment, other: &Fragment) -> bool {
    (first.y - other.y).abs() <= SAME_LINE * first.size.max(other.size).max(1.0)
}

fn line(mut fragments: Vec<Fragment>) -> Line {
    fragments.sort_by(|a, b| a.x.total_cmp(&b.x));
    let size = fragments.iter().map(|f| f.size).fold(0.0, f64::max);
    let mut cells: Vec<String> = vec![String::new()];
    let mut previous_end: Option<f64> = None;
    for fragment in &fragments {
        let gap = previous_end.map_or(0.0, |end| fragment.x - end);
        let unit = fragment.size.max(1.0);
        let cell = cells.last_mut().filter(|_| gap <= CELL_GAP * unit);
        match cell {
            Some(cell) => {
                if gap > SPACE_GAP * unit && !cell.ends_with(' ') && !fragment.text.starts_with(' ')
                {
                    cell.push(' ');
                }
                cell.push_str(&fragment.text);
            }
            None => cells.push(fragment.text.clone()),
        }
        previous_end = Some(previous_end.map_or(fragment.end, |end| end.max(fragment.end)));
    }
    Line {
        y: fragments.first().map_or(0.0, |f| f.y),
        size,
        bold: fragments.iter().all(|f| f.bold),
        cells: cells.iter().map(|cell| one_line(cell)).collect(),
    }
}

/// The markdown of a document's pages, each after its page anchor.
pub(crate) fn render(pages: &[Vec<Line>]) -> String {
    let sizes = Sizes::of(pages);
    let mut out = String::new();
    for (number, lines) in (1..).zip(pages) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&page_anchor(number));
        out.push_str("\n\n");
        let mut page = String::new();
        render_page(lines, &sizes, &mut page);
        out.push_str(page.trim_end());
        out.push('\n');
    }
    out
}

fn render_page(lines: &[Line], sizes: &Sizes, out: &mut String) {
    let mut index = 0;
    while index < lines.len() {
        let run = lines[index..]
            .iter()
            .take_while(|line| line.cells.len() >= 2)
            .count();
        if run >= 2 {
            let rows: Vec<Vec<String>> = lines[index..index + run]
                .iter()
                .map(|l| l.cells.clone())
                .collect();
            out.push_str(&table(&rows));
            out.push('\n');
            index += run;
            continue;
        }
        let line = &lines[index];
        let text = line.cells.join("  ");
        match sizes.heading_level(line, &text) {
            Some(level) => {
                out.push_str(&heading(level, &text));
                out.push_str("\n\n");
            }
            None => {
                out.push_str(&text);
                // A gap over one and a half lines ends a paragraph.
                let next = lines.get(index + 1);
                let apart = next.is_some_and(|next| line.y - next.y > 1.6 * line.size.max(1.0));
                out.push_str(if apart || next.is_none() {
                    "\n\n"
                } else {
                    "\n"
                });
            }
        }
        index += 1;
    }
}

/// The body text's size and the larger sizes headings use.
struct Sizes {
    body: f64,
    /// Sizes above the body's, largest first: the first is level 1.
    larger: Vec<f64>,
}

impl Sizes {
    fn of(pages: &[Vec<Line>]) -> Self {
        // The body is the size most characters are set in.
        let mut counts: Vec<(f64, usize)> = Vec::new();
        for line in pages.iter().flatten() {
            let size = (line.size * 2.0).round() / 2.0;
            let chars: usize = line.cells.iter().map(|c| c.chars().count()).sum();
            match counts.iter_mut().find(|(s, _)| *s == size) {
                Some((_, n)) => *n += chars,
                None => counts.push((size, chars)),
            }
        }
        let body = counts
            .iter()
            .max_by_key(|(_, n)| *n)
            .map_or(0.0, |(size, _)| *size);
        let mut larger: Vec<f64> = counts
            .iter()
            .map(|(size, _)| *size)
            .filter(|size| *size > body * HEADING_SCALE)
            .collect();
        larger.sort_by(|a, b| b.total_cmp(a));
        Self { body, larger }
    }

    fn heading_level(&self, line: &Line, text: &str) -> Option<usize> {
        if line.cells.len() != 1 || text.chars().count() > MAX_HEADING_CHARS {
            return None;
        }
        let size = (line.size * 2.0).round() / 2.0;
        if size > self.body * HEADING_SCALE {
            let rank = self.larger.iter().position(|s| *s == size).unwrap_or(0);
            return Some((rank + 1).min(3));
        }
        // Contracts set numbered section titles in bold body text.
        if line.bold {
            return section_depth(text).map(|depth| (depth + 1).min(6));
        }
        None
    }
}

/// How deep a leading section number goes: "7" and "7." are 1, "7.2" is 2;
/// the title must follow and start with a capital.
pub(crate) fn section_depth(text: &str) -> Option<usize> {
    let (number, rest) = text.split_once(' ')?;
    let number = number.trim_end_matches('.');
    let parts: Vec<&str> = number.split('.').collect();
    let numeric = parts.iter().all(|part| {
        !part.is_empty() && part.len() <= 3 && part.bytes().all(|b| b.is_ascii_digit())
    });
    let titled = rest.trim_start().starts_with(|c: char| c.is_uppercase());
    (numeric && titled).then_some(parts.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f64, y: f64, text: &str) -> Fragment {
        Fragment {
            x,
            end: x + 5.0 * text.len() as f64,
            y,
            size: 10.0,
            bold: false,
            text: text.into(),
        }
    }

    #[test]
    fn wide_gaps_split_cells_and_near_ones_join_words() {
        let lines = lines(vec![
            at(300.0, 700.0, "$12,000"),
            at(72.0, 700.0, "Personnel"),
            at(72.0 + 45.0 + 2.0, 700.5, "costs"),
        ]);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].cells, vec!["Personnel costs", "$12,000"]);
    }

    #[test]
    fn section_numbers_need_a_title() {
        assert_eq!(section_depth("7.2 Budget"), Some(2));
        assert_eq!(section_depth("7. Payment Terms"), Some(1));
        assert_eq!(section_depth("2021 was a year"), None);
        assert_eq!(section_depth("12,000 Dollars"), None);
    }
}
