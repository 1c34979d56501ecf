//! `word/styles.xml`: which paragraph styles are headings (and of what level)
//! and which carry numbering.

use crate::ConvertError;
use crate::docx::xml::{attribute, local, malformed};
use quick_xml::Reader;
use quick_xml::events::Event;
use std::collections::HashMap;

/// How many `basedOn` links are followed: a hostile cycle ends here.
const MAX_INHERITANCE: usize = 16;

#[derive(Debug, Default, Clone)]
struct Style {
    name: String,
    based_on: Option<String>,
    outline: Option<usize>,
    numbering: Option<(String, usize)>,
}

#[derive(Debug, Default)]
pub(crate) struct Styles {
    by_id: HashMap<String, Style>,
}

impl Styles {
    /// The heading level (1-based) of paragraphs in style `id`.
    pub(crate) fn heading_level(&self, id: &str) -> Option<usize> {
        self.inherited(id, |style| {
            style
                .outline
                .map(|level| level + 1)
                .or_else(|| named_level(&style.name))
        })
        .or_else(|| named_level(id))
    }

    /// The numbering (`numId`, level) paragraphs in style `id` take.
    pub(crate) fn numbering(&self, id: &str) -> Option<(String, usize)> {
        self.inherited(id, |style| style.numbering.clone())
    }

    fn inherited<T>(&self, id: &str, read: impl Fn(&Style) -> Option<T>) -> Option<T> {
        let mut id = id.to_string();
        for _ in 0..MAX_INHERITANCE {
            let style = self.by_id.get(&id)?;
            if let Some(found) = read(style) {
                return Some(found);
            }
            id = style.based_on.clone()?;
        }
        None
    }
}

/// "heading 2" (Word's built-in name) or "Heading2" (its id) is level 2;
/// "Title" is level 1.
fn named_level(name: &str) -> Option<usize> {
    let name = name.to_ascii_lowercase().replace(' ', "");
    if name == "title" {
        return Some(1);
    }
    let level: usize = name.strip_prefix("heading")?.parse().ok()?;
    (1..=9).contains(&level).then_some(level)
}

pub(crate) fn parse(part: &[u8]) -> Result<Styles, ConvertError> {
    let mut reader = Reader::from_reader(part);
    let mut styles = Styles::default();
    let mut current: Option<(String, Style)> = None;
    loop {
        let event = reader
            .read_event()
            .map_err(|error| malformed("word/styles.xml", error))?;
        match event {
            Event::Start(element) | Event::Empty(element) => {
                let name = local(&element);
                let value = || attribute(&element, b"val");
                match (name.as_slice(), current.as_mut()) {
                    (b"style", _) => {
                        current = attribute(&element, b"styleId").map(|id| (id, Style::default()));
                    }
                    (b"name", Some((_, style))) => style.name = value().unwrap_or_default(),
                    (b"basedOn", Some((_, style))) => style.based_on = value(),
                    (b"outlineLvl", Some((_, style))) => {
                        style.outline = value().and_then(|v| v.parse().ok()).filter(|l| *l < 9);
                    }
                    (b"numId", Some((_, style))) => {
                        let level = style.numbering.as_ref().map_or(0, |(_, level)| *level);
                        style.numbering = value().map(|id| (id, level));
                    }
                    (b"ilvl", Some((_, style))) => {
                        let level = value().and_then(|v| v.parse().ok()).unwrap_or(0);
                        let id = style.numbering.take().map(|(id, _)| id).unwrap_or_default();
                        style.numbering = Some((id, level));
                    }
                    _ => {}
                }
            }
            Event::End(element) if element.local_name().as_ref() == "style" => {
                if let Some((id, style)) = current.take() {
                    styles.by_id.insert(id, style);
                }
            }
            Event::Eof => return Ok(styles),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_come_from_outline_levels_names_and_inheritance() {
        let part = br#"<w:styles xmlns:w="w">
            <w:style w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>
            <w:style w:styleId="Kop2"><w:name w:val="Kop 2"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>
            <w:style w:styleId="Clause"><w:basedOn w:val="Kop2"/><w:pPr><w:numPr><w:ilvl w:val="1"/><w:numId w:val="4"/></w:numPr></w:pPr></w:style>
        </w:styles>"#;
        let styles = parse(part).expect("styles parse");
        assert_eq!(styles.heading_level("Heading1"), Some(1));
        assert_eq!(styles.heading_level("Clause"), Some(2));
        assert_eq!(styles.numbering("Clause"), Some(("4".into(), 1)));
        assert_eq!(styles.heading_level("Heading3"), Some(3));
        assert_eq!(styles.heading_level("BodyText"), None);
    }
}
