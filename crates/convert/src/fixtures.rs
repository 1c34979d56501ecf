//! Writers of small PDF and DOCX files for tests (feature `fixtures`): a
//! contract stack's base agreement with a budget table, and an amendment.

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use std::io::{Cursor, Write};
use zip::ZipWriter;
use zip::write::SimpleFileOptions;

pub type FixtureResult = Result<Vec<u8>, Box<dyn std::error::Error + Send + Sync>>;

/// Text placed on a PDF page (points from the bottom left, Helvetica).
#[derive(Debug, Clone)]
pub struct Placed {
    pub x: f32,
    pub y: f32,
    pub size: f32,
    pub bold: bool,
    pub text: String,
}

pub fn placed(x: f32, y: f32, size: f32, bold: bool, text: &str) -> Placed {
    Placed {
        x,
        y,
        size,
        bold,
        text: text.into(),
    }
}

/// A PDF whose pages show `pages`' text, compressed as writers usually do.
pub fn pdf(pages: &[Vec<Placed>]) -> FixtureResult {
    let mut document = Document::with_version("1.5");
    let pages_id = document.new_object_id();
    let regular = document.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
    });
    let bold = document.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica-Bold",
    });
    let resources = document.add_object(dictionary! {
        "Font" => dictionary! { "F1" => regular, "F2" => bold },
    });
    let mut kids = Vec::new();
    for texts in pages {
        let content = Content {
            operations: page_operations(texts),
        };
        let stream = document.add_object(Stream::new(dictionary! {}, content.encode()?));
        let page = document.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "Contents" => stream,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        });
        kids.push(Object::from(page));
    }
    let count = i64::try_from(kids.len())?;
    document.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count, "Resources" => resources,
        }),
    );
    let catalog = document.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    document.trailer.set("Root", catalog);
    document.compress();
    let mut bytes = Vec::new();
    document.save_to(&mut bytes)?;
    Ok(bytes)
}

fn page_operations(texts: &[Placed]) -> Vec<Operation> {
    let mut operations = vec![Operation::new("BT", vec![])];
    for text in texts {
        let font = if text.bold { "F2" } else { "F1" };
        operations.push(Operation::new("Tf", vec![font.into(), text.size.into()]));
        operations.push(Operation::new(
            "Tm",
            vec![
                1.into(),
                0.into(),
                0.into(),
                1.into(),
                text.x.into(),
                text.y.into(),
            ],
        ));
        operations.push(Operation::new(
            "Tj",
            vec![Object::string_literal(text.text.as_str())],
        ));
    }
    operations.push(Operation::new("ET", vec![]));
    operations
}

/// A two-page master agreement: a title, bold numbered sections, and on
/// page 2 section 7's budget table (Exhibit B).
pub fn base_agreement_pdf() -> FixtureResult {
    let body = |y: f32, text: &str| placed(72.0, y, 11.0, false, text);
    let row = |y: f32, item: &str, amount: &str| {
        vec![
            placed(72.0, y, 11.0, false, item),
            placed(360.0, y, 11.0, false, amount),
        ]
    };
    let first = vec![
        placed(72.0, 780.0, 18.0, true, "Master Services Agreement"),
        body(750.0, "Effective Date: 1 March 2021"),
        placed(72.0, 720.0, 11.0, true, "1. Definitions"),
        body(
            704.0,
            "Services means the clinical work described in Exhibit A.",
        ),
        placed(72.0, 680.0, 11.0, true, "2. Term"),
        body(
            664.0,
            "This Agreement runs for three years from the Effective Date.",
        ),
    ];
    let mut second = vec![
        placed(72.0, 780.0, 11.0, true, "7. Budget"),
        body(
            764.0,
            "The Sponsor pays the amounts in Exhibit B, net 45 days.",
        ),
    ];
    for (y, item, amount) in [
        (730.0, "Item", "Amount (USD)"),
        (714.0, "Personnel", "$120,000"),
        (698.0, "Site fees", "$15,500"),
        (682.0, "Total", "$135,500"),
    ] {
        second.extend(row(y, item, amount));
    }
    second.push(body(650.0, "Invoices are payable in US dollars."));
    pdf(&[first, second])
}

/// A DOCX of the given body XML (the children of `w:body`), styles and
/// numbering parts.
pub fn docx(body: &str, styles: Option<&str>, numbering: Option<&str>) -> FixtureResult {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default();
    zip.start_file("[Content_Types].xml", options)?;
    zip.write_all(CONTENT_TYPES.as_bytes())?;
    zip.start_file("word/document.xml", options)?;
    write!(
        zip,
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>"#
    )?;
    if let Some(styles) = styles {
        zip.start_file("word/styles.xml", options)?;
        write!(zip, r#"<w:styles xmlns:w="{W}">{styles}</w:styles>"#)?;
    }
    if let Some(numbering) = numbering {
        zip.start_file("word/numbering.xml", options)?;
        write!(
            zip,
            r#"<w:numbering xmlns:w="{W}">{numbering}</w:numbering>"#
        )?;
    }
    Ok(zip.finish()?.into_inner())
}

const W: &str = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
const CONTENT_TYPES: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;

/// A paragraph of `text` (XML: `&` written `&amp;`) in `style` (none for
/// body text).
pub fn paragraph(style: Option<&str>, text: &str) -> String {
    let style = style.map_or(String::new(), |s| {
        format!(r#"<w:pPr><w:pStyle w:val="{s}"/></w:pPr>"#)
    });
    format!(r#"<w:p>{style}<w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>"#)
}

/// A table of `rows` of cell texts.
pub fn table(rows: &[&[&str]]) -> String {
    let rows: String = rows
        .iter()
        .map(|cells| {
            let cells: String = cells
                .iter()
                .map(|text| format!("<w:tc>{}</w:tc>", paragraph(None, text)))
                .collect();
            format!("<w:tr>{cells}</w:tr>")
        })
        .collect();
    format!("<w:tbl>{rows}</w:tbl>")
}

/// Word's built-in heading styles, numbered by list 1 ("1." then "1.1").
pub const HEADING_STYLES: &str = r#"<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/><w:pPr><w:numPr><w:numId w:val="1"/></w:numPr><w:outlineLvl w:val="0"/></w:pPr></w:style><w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/><w:basedOn w:val="Heading1"/><w:pPr><w:numPr><w:ilvl w:val="1"/><w:numId w:val="1"/></w:numPr><w:outlineLvl w:val="1"/></w:pPr></w:style><w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>"#;

pub const HEADING_NUMBERING: &str = r#"<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl><w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2"/></w:lvl></w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>"#;

/// Amendment No. 1: its sections numbered by Word (1. to 3., with 2.1), and
/// a revised budget table.
pub fn amendment_docx() -> FixtureResult {
    let body = [
        paragraph(
            Some("Title"),
            "Amendment No. 1 to the Master Services Agreement",
        ),
        paragraph(None, "Effective Date: 1 June 2022"),
        paragraph(Some("Heading1"), "Scope"),
        paragraph(
            None,
            "This Amendment changes Section 7 (Budget) of the Agreement.",
        ),
        paragraph(Some("Heading1"), "Budget"),
        paragraph(Some("Heading2"), "Revised Exhibit B"),
        table(&[
            &["Item", "Amount (USD)"],
            &["Personnel", "$140,000"],
            &["Site fees", "$15,500"],
            &["Total", "$155,500"],
        ]),
        paragraph(Some("Heading1"), "Payment"),
        paragraph(
            None,
            "Invoices are payable net 30 days &amp; in US dollars.",
        ),
    ]
    .concat();
    docx(&body, Some(HEADING_STYLES), Some(HEADING_NUMBERING))
}
