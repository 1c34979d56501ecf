//! `word/numbering.xml` and the counters it drives: the "7.2" Word shows
//! before a numbered heading or clause exists only here, not in the text.

use crate::ConvertError;
use crate::docx::xml::{attribute, local, malformed};
use quick_xml::Reader;
use quick_xml::events::Event;
use std::collections::HashMap;

/// Word's list levels: 0 to 8.
const LEVELS: usize = 9;

#[derive(Debug, Clone, Default)]
struct Level {
    start: u32,
    format: String,
    text: String,
}

#[derive(Debug, Default)]
pub(crate) struct Numbering {
    /// `numId` to its abstract numbering.
    instances: HashMap<String, String>,
    levels: HashMap<(String, usize), Level>,
    /// Per abstract numbering: each level's current value, `None` until used
    /// (or after a shallower level moved on).
    counters: HashMap<String, [Option<u32>; LEVELS]>,
}

/// What goes before a numbered paragraph's text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Label {
    Bullet,
    Number(String),
}

impl Numbering {
    /// Counts one more paragraph at `level` of list `num_id`, giving its label.
    pub(crate) fn next(&mut self, num_id: &str, level: usize) -> Option<Label> {
        let abstract_id = self.instances.get(num_id)?.clone();
        let level = level.min(LEVELS - 1);
        let definition = self.levels.get(&(abstract_id.clone(), level))?.clone();
        let counters = self.counters.entry(abstract_id.clone()).or_default();
        counters[level] = Some(counters[level].map_or(definition.start, |n| n.saturating_add(1)));
        for deeper in counters.iter_mut().skip(level + 1) {
            *deeper = None;
        }
        let counters = *counters;
        match definition.format.as_str() {
            "bullet" => Some(Label::Bullet),
            "none" => None,
            _ => {
                let label = self.label(&abstract_id, &definition.text, &counters);
                (!label.trim().is_empty()).then(|| Label::Number(label.trim().to_string()))
            }
        }
    }

    /// `text` (such as "%1.%2") with each `%n` replaced by level n's value.
    fn label(&self, abstract_id: &str, text: &str, counters: &[Option<u32>; LEVELS]) -> String {
        let mut out = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let level = chars
                .peek()
                .and_then(|d| d.to_digit(10))
                .map(|d| d as usize);
            match level {
                Some(n) if c == '%' && (1..=LEVELS).contains(&n) => {
                    chars.next();
                    let definition = self.levels.get(&(abstract_id.to_string(), n - 1));
                    let start = definition.map_or(1, |d| d.start);
                    let format = definition.map_or("decimal", |d| d.format.as_str());
                    out.push_str(&formatted(counters[n - 1].unwrap_or(start), format));
                }
                _ => out.push(c),
            }
        }
        out
    }
}

fn formatted(value: u32, format: &str) -> String {
    match format {
        "lowerLetter" => letter(value).to_ascii_lowercase(),
        "upperLetter" => letter(value),
        "lowerRoman" => roman(value).to_ascii_lowercase(),
        "upperRoman" => roman(value),
        "decimalZero" => format!("{value:02}"),
        _ => value.to_string(),
    }
}

/// 1 is A, 26 is Z, 27 is AA (Word repeats the letter).
fn letter(value: u32) -> String {
    let index = value.saturating_sub(1);
    let glyph = char::from(b'A' + u8::try_from(index % 26).unwrap_or(0));
    glyph
        .to_string()
        .repeat(usize::try_from(index / 26 + 1).unwrap_or(1).min(8))
}

fn roman(mut value: u32) -> String {
    const NUMERALS: [(u32, &str); 13] = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    if value == 0 || value > 3999 {
        return value.to_string();
    }
    let mut out = String::new();
    for (amount, numeral) in NUMERALS {
        while value >= amount {
            out.push_str(numeral);
            value -= amount;
        }
    }
    out
}

/// Where the parser is inside numbering.xml.
#[derive(Default)]
struct Cursor {
    abstract_id: Option<String>,
    level: Option<(usize, Level)>,
    num_id: Option<String>,
}

pub(crate) fn parse(part: &[u8]) -> Result<Numbering, ConvertError> {
    let mut reader = Reader::from_reader(part);
    let mut numbering = Numbering::default();
    let mut at = Cursor::default();
    loop {
        let event = reader
            .read_event()
            .map_err(|error| malformed("word/numbering.xml", error))?;
        match event {
            Event::Start(element) | Event::Empty(element) => {
                let value = attribute(&element, b"val");
                match local(&element).as_slice() {
                    b"abstractNum" => at.abstract_id = attribute(&element, b"abstractNumId"),
                    b"lvl" => {
                        let ilvl = attribute(&element, b"ilvl").and_then(|v| v.parse().ok());
                        at.level = ilvl.filter(|l| *l < LEVELS).map(|l| {
                            (
                                l,
                                Level {
                                    start: 1,
                                    format: "decimal".into(),
                                    text: String::new(),
                                },
                            )
                        });
                    }
                    b"start" => set(&mut at.level, |l| l.start = parsed(&value, 1)),
                    b"numFmt" => set(&mut at.level, |l| l.format = value.unwrap_or_default()),
                    b"lvlText" => set(&mut at.level, |l| l.text = value.unwrap_or_default()),
                    b"num" => at.num_id = attribute(&element, b"numId"),
                    b"abstractNumId" => {
                        if let (Some(num_id), Some(abstract_id)) = (at.num_id.clone(), value) {
                            numbering.instances.insert(num_id, abstract_id);
                        }
                    }
                    _ => {}
                }
            }
            Event::End(element) if element.local_name().as_ref() == "lvl" => {
                if let (Some(abstract_id), Some((level, definition))) =
                    (at.abstract_id.clone(), at.level.take())
                {
                    numbering.levels.insert((abstract_id, level), definition);
                }
            }
            Event::Eof => return Ok(numbering),
            _ => {}
        }
    }
}

fn set(level: &mut Option<(usize, Level)>, change: impl FnOnce(&mut Level)) {
    if let Some((_, definition)) = level.as_mut() {
        change(definition);
    }
}

fn parsed(value: &Option<String>, default: u32) -> u32 {
    value
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PART: &[u8] = br#"<w:numbering xmlns:w="w">
        <w:abstractNum w:abstractNumId="7">
          <w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>
          <w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2"/></w:lvl>
          <w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="(%3)"/></w:lvl>
        </w:abstractNum>
        <w:num w:numId="3"><w:abstractNumId w:val="7"/></w:num>
    </w:numbering>"#;

    #[test]
    fn counters_nest_and_restart_under_a_new_parent() {
        let mut numbering = parse(PART).expect("numbering parses");
        let mut next = |level| match numbering.next("3", level) {
            Some(Label::Number(label)) => label,
            other => format!("{other:?}"),
        };
        assert_eq!(next(0), "1.");
        assert_eq!(next(1), "1.1");
        assert_eq!(next(1), "1.2");
        assert_eq!(next(2), "(a)");
        assert_eq!(next(0), "2.");
        assert_eq!(next(1), "2.1");
        assert_eq!(numbering.next("99", 0), None);
    }

    #[test]
    fn roman_and_letters() {
        assert_eq!(roman(14), "XIV");
        assert_eq!(letter(28), "BB");
    }
}
