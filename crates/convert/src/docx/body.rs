//! `word/document.xml`: paragraphs (with their style and numbering) and
//! tables, in order, then rendered as markdown.
//!
//! A DOCX has no fixed pages, but it says where pages began: an explicit
//! page break (`w:br w:type="page"`) and, in a file Word saved, where each
//! page began when Word last laid it out (`w:lastRenderedPageBreak`). Both
//! become `<!-- page N -->` anchors, as a PDF's pages do, so a citation can
//! name a page. Anchors fall between blocks: a page that begins inside a
//! paragraph or table is marked after it (the block is cited on the page it
//! starts on). A file with neither kind of break gets no anchors: its pages
//! are unknown, and "page 1" for all of it would be wrong.

use crate::ConvertError;
use crate::docx::numbering::{Label, Numbering};
use crate::docx::styles::Styles;
use crate::docx::xml::{attribute, local, malformed, reference};
use crate::markdown::{heading, one_line, page_anchor, table};
use quick_xml::Reader;
use quick_xml::events::Event;

#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Paragraph {
    style: Option<String>,
    num_id: Option<String>,
    level: Option<usize>,
    outline: Option<usize>,
    text: String,
    /// Pages that began before any of its text: anchored before it.
    breaks_before: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    Paragraph(Paragraph),
    Table(Vec<Vec<String>>),
    /// A new page begins here.
    PageBreak,
}

/// Where the walk is: open paragraphs (a text box nests one in another),
/// open tables (a table may sit in a cell), and a skipped subtree.
#[derive(Default)]
struct Walk {
    blocks: Vec<Block>,
    paragraphs: Vec<Paragraph>,
    tables: Vec<Vec<Vec<String>>>,
    in_text: bool,
    in_run: bool,
    /// Depth inside `mc:Fallback`, which repeats the chosen content.
    skipping: usize,
    /// Text was read since the last page break counted: Word marks the page
    /// an explicit break starts again with a rendered break, which must not
    /// count twice, and a rendered break before any text starts no page.
    text_since_break: bool,
    /// Pages that began inside the open top-level block, anchored after it.
    breaks_after: u32,
}

pub(crate) fn parse(part: &[u8]) -> Result<Vec<Block>, ConvertError> {
    let mut reader = Reader::from_reader(part);
    let mut walk = Walk::default();
    loop {
        let event = reader
            .read_event()
            .map_err(|error| malformed("word/document.xml", error))?;
        match event {
            Event::Start(element) => {
                let name = local(&element);
                if walk.skipping > 0 || name == b"Fallback" {
                    walk.skipping += 1;
                    continue;
                }
                walk.open(&name, |key| attribute(&element, key));
            }
            Event::Empty(element) if walk.skipping == 0 => {
                let name = local(&element);
                walk.open(&name, |key| attribute(&element, key));
                walk.close(&name);
            }
            Event::End(element) => {
                if walk.skipping > 0 {
                    walk.skipping -= 1;
                    continue;
                }
                walk.close(element.local_name().as_ref().as_bytes());
            }
            Event::Text(text) if walk.in_text && walk.skipping == 0 => {
                walk.push_text(&text.xml10_content());
            }
            Event::GeneralRef(entity) if walk.in_text && walk.skipping == 0 => {
                walk.push_text(&reference(&entity));
            }
            Event::Eof => return Ok(walk.blocks),
            _ => {}
        }
    }
}

impl Walk {
    fn open(&mut self, name: &[u8], attribute: impl Fn(&[u8]) -> Option<String>) {
        let value = || attribute(b"val");
        let paragraph = self.paragraphs.last_mut();
        match (name, paragraph) {
            (b"p", _) => self.paragraphs.push(Paragraph::default()),
            (b"pStyle", Some(p)) => p.style = value(),
            (b"numId", Some(p)) => p.num_id = value(),
            (b"ilvl", Some(p)) => p.level = value().and_then(|v| v.parse().ok()),
            (b"outlineLvl", Some(p)) => {
                p.outline = value().and_then(|v| v.parse().ok()).filter(|l| *l < 9);
            }
            (b"r", _) => self.in_run = true,
            (b"t", _) => self.in_text = true,
            (b"br", _) if self.in_run && attribute(b"type").as_deref() == Some("page") => {
                self.page_break();
                self.push_text(" ");
            }
            (b"lastRenderedPageBreak", _) if self.text_since_break => self.page_break(),
            (b"tab" | b"br" | b"cr", _) if self.in_run => self.push_text(" "),
            (b"tbl", _) => self.tables.push(Vec::new()),
            (b"tr", _) => {
                if let Some(table) = self.tables.last_mut() {
                    table.push(Vec::new());
                }
            }
            (b"tc", _) => {
                if let Some(row) = self.tables.last_mut().and_then(|t| t.last_mut()) {
                    row.push(String::new());
                }
            }
            _ => {}
        }
    }

    fn close(&mut self, name: &[u8]) {
        match name {
            b"t" => self.in_text = false,
            b"r" => self.in_run = false,
            b"p" => {
                if let Some(paragraph) = self.paragraphs.pop() {
                    self.finish_paragraph(paragraph);
                }
            }
            b"tbl" => {
                if let Some(rows) = self.tables.pop() {
                    self.finish_table(rows);
                }
            }
            _ => {}
        }
    }

    fn push_text(&mut self, text: &str) {
        if let Some(paragraph) = self.paragraphs.last_mut() {
            paragraph.text.push_str(text);
            self.text_since_break |= !text.trim().is_empty();
        }
    }

    /// A page begins here: before the open paragraph when none of its text
    /// came yet and it is not in a table, else after the open block.
    fn page_break(&mut self) {
        self.text_since_break = false;
        match self.paragraphs.last_mut() {
            Some(p) if self.tables.is_empty() && p.text.trim().is_empty() => p.breaks_before += 1,
            _ => self.breaks_after += 1,
        }
    }

    /// The pages that began inside the block just finished, once the
    /// outermost block is done.
    fn flush_breaks(&mut self) {
        if self.tables.is_empty() && self.paragraphs.is_empty() {
            for _ in 0..std::mem::take(&mut self.breaks_after) {
                self.blocks.push(Block::PageBreak);
            }
        }
    }

    /// A paragraph in a table cell is part of the cell's text; one outside
    /// any table is a block of its own.
    fn finish_paragraph(&mut self, paragraph: Paragraph) {
        match self
            .tables
            .last_mut()
            .and_then(|t| t.last_mut())
            .and_then(|r| r.last_mut())
        {
            Some(cell) => {
                if !cell.is_empty() && !paragraph.text.trim().is_empty() {
                    cell.push(' ');
                }
                cell.push_str(paragraph.text.trim());
            }
            None => {
                for _ in 0..paragraph.breaks_before {
                    self.blocks.push(Block::PageBreak);
                }
                self.blocks.push(Block::Paragraph(paragraph));
                self.flush_breaks();
            }
        }
    }

    /// A table inside a cell is flattened into that cell's text.
    fn finish_table(&mut self, rows: Vec<Vec<String>>) {
        let rows: Vec<Vec<String>> = rows.into_iter().filter(|row| !row.is_empty()).collect();
        match self
            .tables
            .last_mut()
            .and_then(|t| t.last_mut())
            .and_then(|r| r.last_mut())
        {
            Some(cell) => {
                let text: Vec<String> = rows.iter().map(|row| row.join(" ")).collect();
                cell.push(' ');
                cell.push_str(&text.join("; "));
            }
            None if !rows.is_empty() => self.blocks.push(Block::Table(rows)),
            None => {}
        }
        self.flush_breaks();
    }
}

/// The blocks as markdown, separated by blank lines, and the pages their
/// page breaks mark (None when they have none). Numbering is counted as Word
/// counts it, empty paragraphs included.
pub(crate) fn render(
    blocks: &[Block],
    styles: &Styles,
    mut numbering: Numbering,
) -> (String, Option<u32>) {
    let paged = blocks.iter().any(|b| matches!(b, Block::PageBreak));
    let mut page = 1;
    let mut out: Vec<String> = Vec::new();
    if paged {
        out.push(page_anchor(page));
    }
    for block in blocks {
        match block {
            Block::PageBreak => {
                // A page with nothing on it needs no anchor of its own.
                if out.last().is_some_and(|l| l.starts_with("<!-- page ")) {
                    out.pop();
                }
                page += 1;
                out.push(page_anchor(page));
            }
            // Layout tables with nothing in them say nothing.
            Block::Table(rows) if rows.iter().flatten().all(|cell| cell.trim().is_empty()) => {}
            Block::Table(rows) => out.push(table(rows).trim_end().to_string()),
            Block::Paragraph(paragraph) => {
                if let Some(line) = paragraph_line(paragraph, styles, &mut numbering) {
                    out.push(line);
                }
            }
        }
    }
    let mut markdown = out.join("\n\n");
    markdown.push('\n');
    (markdown, paged.then_some(page))
}

fn paragraph_line(
    paragraph: &Paragraph,
    styles: &Styles,
    numbering: &mut Numbering,
) -> Option<String> {
    let style = paragraph.style.as_deref().unwrap_or("");
    let numbered = match (&paragraph.num_id, paragraph.level) {
        (Some(id), level) => Some((id.clone(), level.unwrap_or(0))),
        (None, level) => styles
            .numbering(style)
            .map(|(id, style_level)| (id, level.unwrap_or(style_level))),
    };
    let label = numbered
        .filter(|(id, _)| id != "0")
        .and_then(|(id, level)| numbering.next(&id, level));
    let text = one_line(&paragraph.text);
    if text.is_empty() {
        return None;
    }
    let level = paragraph
        .outline
        .map(|level| level + 1)
        .or_else(|| styles.heading_level(style));
    let text = match label {
        Some(Label::Number(number)) => format!("{number} {text}"),
        Some(Label::Bullet) if level.is_none() => format!("- {text}"),
        _ => text,
    };
    Some(match level {
        Some(level) => heading(level, &text),
        None => text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_boxes_fallbacks_and_nested_tables_are_read_once() {
        let part = br#"<w:document xmlns:w="w" xmlns:mc="mc"><w:body>
            <w:p><w:r><w:t xml:space="preserve">Fees &amp; costs</w:t></w:r>
              <mc:AlternateContent><mc:Choice><w:p><w:r><w:t>Box</w:t></w:r></w:p></mc:Choice>
              <mc:Fallback><w:p><w:r><w:t>Box</w:t></w:r></w:p></mc:Fallback></mc:AlternateContent></w:p>
            <w:tbl><w:tr><w:tc><w:p><w:r><w:t>A</w:t></w:r></w:p>
              <w:tbl><w:tr><w:tc><w:p><w:r><w:t>x</w:t></w:r></w:p></w:tc></w:tr></w:tbl></w:tc>
              <w:tc><w:p><w:r><w:t>B</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
        </w:body></w:document>"#;
        let blocks = parse(part).expect("document parses");
        let texts: Vec<String> = blocks
            .iter()
            .map(|block| match block {
                Block::Paragraph(p) => p.text.clone(),
                Block::Table(rows) => format!("{rows:?}"),
                Block::PageBreak => "page break".to_string(),
            })
            .collect();
        assert_eq!(texts, vec!["Box", "Fees & costs", r#"[["A x", "B"]]"#]);
    }
}
