//! Conversions of whole files: ours (written by `fixtures`), others' (in
//! tests/fixtures, see its README), and hostile ones.

use crate::fixtures::{self, HEADING_NUMBERING, HEADING_STYLES, paragraph, placed};
use crate::{ConvertError, Kind, Limits, to_markdown, to_markdown_with_progress};
use std::io::{Cursor, Write};
use std::time::{Duration, Instant};

const CRAZYONES: &[u8] = include_bytes!("../tests/fixtures/pypdf-crazyones.pdf");
const IMAGES_ONLY: &[u8] = include_bytes!("../tests/fixtures/pypdf-imagemagick-images.pdf");
const PASSWORD: &[u8] = include_bytes!("../tests/fixtures/pypdf-libreoffice-writer-password.pdf");
const PARAS_AND_TABLES: &[u8] =
    include_bytes!("../tests/fixtures/python-docx-blk-paras-and-tables.docx");
const KNOWN_STYLES: &[u8] = include_bytes!("../tests/fixtures/python-docx-par-known-styles.docx");

/// Refusals must come fast; debug builds are slower than the worker's.
const QUICK: Duration = Duration::from_secs(2);

fn convert(bytes: &[u8], kind: Kind) -> Result<String, ConvertError> {
    to_markdown(bytes, kind, &Limits::default()).map(|converted| converted.markdown)
}

fn refused(bytes: &[u8], kind: Kind, limits: &Limits) -> ConvertError {
    let started = Instant::now();
    let error = match to_markdown(bytes, kind, limits) {
        Ok(converted) => panic!("converted instead of refused:\n{}", converted.markdown),
        Err(error) => error,
    };
    assert!(
        started.elapsed() < QUICK,
        "refusing took {:?}",
        started.elapsed()
    );
    error
}

#[test]
fn a_pdf_keeps_pages_headings_and_its_budget_table() {
    let bytes = fixtures::base_agreement_pdf().expect("fixture");
    let mut seen = Vec::new();
    let converted =
        to_markdown_with_progress(&bytes, Kind::Pdf, &Limits::default(), &mut |d, t| {
            seen.push((d, t))
        })
        .expect("converts");
    let markdown = converted.markdown;
    assert_eq!(converted.pages, Some(2));
    assert_eq!(seen, vec![(1, 2), (2, 2)]);
    assert!(
        markdown.starts_with("<!-- page 1 -->\n\n# Master Services Agreement\n"),
        "{markdown}"
    );
    assert!(markdown.contains("## 1. Definitions\n"), "{markdown}");
    let page_two = markdown.find("<!-- page 2 -->").expect("page 2 anchor");
    let budget = markdown.find("## 7. Budget").expect("section 7 heading");
    let table = markdown
        .find("| Item | Amount (USD) |\n| --- | --- |\n| Personnel | $120,000 |\n| Site fees | $15,500 |\n| Total | $135,500 |\n")
        .unwrap_or_else(|| panic!("budget table missing:\n{markdown}"));
    assert!(page_two < budget && budget < table);
    assert!(markdown.contains("Effective Date: 1 March 2021\n"));
}

#[test]
fn a_pdf_no_code_of_ours_wrote_converts() {
    // pdfTeX output with embedded fonts, widths and ligatures.
    let markdown = convert(CRAZYONES, Kind::Pdf).expect("converts");
    assert!(markdown.starts_with("<!-- page 1 -->\n\n"), "{markdown}");
    assert!(markdown.contains("# The Crazy Ones\n"), "{markdown}");
    assert!(
        markdown.contains("The misfits."),
        "ligatures are letters: {markdown}"
    );
    assert!(markdown.contains("the crazy ones"), "{markdown}");
    assert!(
        markdown.contains("push the human race forward"),
        "{markdown}"
    );
}

#[test]
fn a_docx_keeps_numbered_headings_and_tables() {
    let markdown =
        convert(&fixtures::amendment_docx().expect("fixture"), Kind::Docx).expect("converts");
    let expected = "# Amendment No. 1 to the Master Services Agreement\n\n\
        Effective Date: 1 June 2022\n\n\
        # 1. Scope\n\n\
        This Amendment changes Section 7 (Budget) of the Agreement.\n\n\
        # 2. Budget\n\n\
        ## 2.1 Revised Exhibit B\n\n\
        | Item | Amount (USD) |\n| --- | --- |\n| Personnel | $140,000 |\n| Site fees | $15,500 |\n| Total | $155,500 |\n\n\
        # 3. Payment\n\n\
        Invoices are payable net 30 days & in US dollars.\n";
    assert_eq!(markdown, expected);
}

/// Pages begin at an explicit page break and where Word last laid a page
/// out; the rendered break Word writes after an explicit one is the same
/// page, a page beginning inside a paragraph or table is anchored after it,
/// and a DOCX without breaks has no page anchors.
#[test]
fn docx_page_breaks_become_page_anchors() {
    let body = [
        paragraph(Some("Title"), "Amendment No. 2"),
        paragraph(None, "Effective Date: 1 June 2023"),
        // An explicit break in its own paragraph; Word then marks the next
        // paragraph's start as rendered on a new page: one page, not two.
        r#"<w:p><w:r><w:br w:type="page"/></w:r></w:p>"#.to_string(),
        r#"<w:p><w:r><w:lastRenderedPageBreak/><w:t>Budget on page two.</w:t></w:r></w:p>"#
            .to_string(),
        // Word wrapped this paragraph onto page three.
        r#"<w:p><w:r><w:t>A long clause that</w:t></w:r><w:r><w:lastRenderedPageBreak/><w:t xml:space="preserve"> runs over.</w:t></w:r></w:p>"#
            .to_string(),
        r#"<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Item</w:t></w:r></w:p></w:tc></w:tr><w:tr><w:tc><w:p><w:r><w:lastRenderedPageBreak/><w:t>Fees</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"#
            .to_string(),
        // An explicit break with no rendered one (a file no Word saved);
        // page 4, begun in the table, holds nothing after it: no anchor.
        r#"<w:p><w:r><w:br w:type="page"/><w:t>Schedule</w:t></w:r></w:p>"#.to_string(),
        // A line break that is not a page break starts no page.
        r#"<w:p><w:r><w:t>Signed</w:t><w:br/><w:t>by both</w:t></w:r></w:p>"#.to_string(),
    ]
    .concat();
    let bytes = fixtures::docx(&body, Some(HEADING_STYLES), None).expect("fixture");
    let converted = to_markdown(&bytes, Kind::Docx, &Limits::default()).expect("converts");
    let expected = "<!-- page 1 -->\n\n\
        # Amendment No. 2\n\n\
        Effective Date: 1 June 2023\n\n\
        <!-- page 2 -->\n\n\
        Budget on page two.\n\n\
        A long clause that runs over.\n\n\
        <!-- page 3 -->\n\n\
        | Item |\n| --- |\n| Fees |\n\n\
        <!-- page 5 -->\n\n\
        Schedule\n\n\
        Signed by both\n";
    assert_eq!(converted.markdown, expected);
    assert_eq!(converted.pages, Some(5));

    let unpaged = to_markdown(
        &fixtures::amendment_docx().expect("fixture"),
        Kind::Docx,
        &Limits::default(),
    )
    .expect("converts");
    assert!(
        !unpaged.markdown.contains("<!-- page"),
        "{}",
        unpaged.markdown
    );
    assert_eq!(unpaged.pages, None);
}

#[test]
fn docx_files_no_code_of_ours_wrote_convert() {
    // Its tables hold a nested table and empty cells: the empty ones go.
    let markdown = convert(PARAS_AND_TABLES, Kind::Docx).expect("converts");
    assert_eq!(
        markdown,
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n\n\
         | Text before Table; Between Text after |\n| --- |\n\n\
         Donec semper facilisis metus finibus malesuada.\n"
    );
    let markdown = convert(KNOWN_STYLES, Kind::Docx).expect("converts");
    assert!(markdown.contains("# Heading 1\n"), "{markdown}");
    assert!(markdown.contains("\nBody Text\n"), "{markdown}");
}

#[test]
fn a_pdf_without_a_text_layer_is_refused() {
    assert_eq!(
        refused(IMAGES_ONLY, Kind::Pdf, &Limits::default()),
        ConvertError::NoTextLayer
    );
    let blank = fixtures::pdf(&[vec![], vec![]]).expect("fixture");
    assert_eq!(
        refused(&blank, Kind::Pdf, &Limits::default()),
        ConvertError::NoTextLayer
    );
}

#[test]
fn a_password_protected_pdf_is_refused() {
    assert_eq!(
        refused(PASSWORD, Kind::Pdf, &Limits::default()),
        ConvertError::Encrypted
    );
}

#[test]
fn truncated_and_damaged_files_are_refused() {
    let pdf = fixtures::base_agreement_pdf().expect("fixture");
    let cut = &pdf[..pdf.len() / 2];
    assert!(matches!(
        refused(cut, Kind::Pdf, &Limits::default()),
        ConvertError::Corrupt(_)
    ));
    let mut damaged = b"%PDF-1.5\n".to_vec();
    damaged.extend(std::iter::repeat_n(0xAB_u8, 4096));
    damaged.extend_from_slice(b"\n%%EOF\n");
    assert!(matches!(
        refused(&damaged, Kind::Pdf, &Limits::default()),
        ConvertError::Corrupt(_)
    ));
    let docx = fixtures::amendment_docx().expect("fixture");
    let cut = &docx[..docx.len() - 40];
    assert!(matches!(
        refused(cut, Kind::Docx, &Limits::default()),
        ConvertError::Corrupt(_)
    ));
}

#[test]
fn a_file_of_the_other_format_is_refused_by_name() {
    let docx = fixtures::amendment_docx().expect("fixture");
    let error = refused(&docx, Kind::Pdf, &Limits::default());
    assert_eq!(
        error.to_string(),
        "it is not a PDF file (it is a zip archive); upload the document itself"
    );
    assert!(matches!(
        refused(CRAZYONES, Kind::Docx, &Limits::default()),
        ConvertError::WrongFormat {
            expected: "DOCX",
            ..
        }
    ));
}

#[test]
fn pdfs_over_the_page_limit_are_refused() {
    let bytes = fixtures::base_agreement_pdf().expect("fixture");
    let limits = Limits {
        max_pages: 1,
        ..Limits::default()
    };
    assert_eq!(
        refused(&bytes, Kind::Pdf, &limits),
        ConvertError::TooManyPages { pages: 2, limit: 1 }
    );
}

/// A zip whose one deflated document part is `size` bytes of one letter.
fn bomb(size: usize) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file(
        "word/document.xml",
        zip::write::SimpleFileOptions::default(),
    )
    .expect("entry");
    let chunk = vec![b'a'; 64 * 1024];
    for _ in 0..size / chunk.len() {
        zip.write_all(&chunk).expect("write");
    }
    zip.finish().expect("zip").into_inner()
}

#[test]
fn a_docx_zip_bomb_is_refused_while_it_inflates() {
    let limits = Limits {
        max_expanded_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let bytes = bomb(16 * 1024 * 1024);
    assert!(bytes.len() < 64 * 1024, "a bomb is small: {}", bytes.len());
    assert_eq!(
        refused(&bytes, Kind::Docx, &limits),
        ConvertError::ExpandsTooFar { limit: 1024 * 1024 }
    );
}

#[test]
fn a_zip_that_understates_its_sizes_is_still_refused() {
    let limits = Limits {
        max_expanded_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let mut bytes = bomb(4 * 1024 * 1024);
    // Both headers say the part inflates to 100 bytes.
    let local = 0;
    let central = find(&bytes, b"PK\x01\x02").expect("central directory");
    bytes[local + 22..local + 26].copy_from_slice(&100u32.to_le_bytes());
    bytes[central + 24..central + 28].copy_from_slice(&100u32.to_le_bytes());
    let error = refused(&bytes, Kind::Docx, &limits);
    assert!(
        matches!(
            error,
            ConvertError::ExpandsTooFar { .. } | ConvertError::Corrupt(_)
        ),
        "{error:?}"
    );
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[test]
fn a_docx_listing_too_many_entries_is_refused() {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for index in 0..50 {
        zip.start_file(
            format!("junk/{index}"),
            zip::write::SimpleFileOptions::default(),
        )
        .expect("entry");
    }
    let bytes = zip.finish().expect("zip").into_inner();
    let limits = Limits {
        max_zip_entries: 20,
        ..Limits::default()
    };
    assert_eq!(
        refused(&bytes, Kind::Docx, &limits),
        ConvertError::TooManyEntries { limit: 20 }
    );
}

#[test]
fn a_docx_without_text_or_document_part_is_refused() {
    let empty = fixtures::docx(
        &paragraph(None, " "),
        Some(HEADING_STYLES),
        Some(HEADING_NUMBERING),
    )
    .expect("fixture");
    assert_eq!(
        refused(&empty, Kind::Docx, &Limits::default()),
        ConvertError::NoText
    );
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("content.xml", zip::write::SimpleFileOptions::default())
        .expect("entry");
    let odt = zip.finish().expect("zip").into_inner();
    assert!(matches!(
        refused(&odt, Kind::Docx, &Limits::default()),
        ConvertError::WrongFormat { .. }
    ));
}

#[test]
fn malformed_docx_xml_is_refused() {
    let bytes = fixtures::docx("<w:p><w:r><w:t>open", None, None).expect("fixture");
    assert!(matches!(
        refused(&bytes, Kind::Docx, &Limits::default()),
        ConvertError::Corrupt(_)
    ));
}

#[test]
fn a_pdf_page_whose_content_expands_too_far_is_refused() {
    let texts: Vec<_> = (0..200)
        .map(|row| {
            placed(
                72.0,
                800.0 - row as f32,
                11.0,
                false,
                "padding text of a long page",
            )
        })
        .collect();
    let bytes = fixtures::pdf(&[texts]).expect("fixture");
    let limits = Limits {
        max_expanded_bytes: 2048,
        ..Limits::default()
    };
    assert_eq!(
        refused(&bytes, Kind::Pdf, &limits),
        ConvertError::ExpandsTooFar { limit: 2048 }
    );
}
