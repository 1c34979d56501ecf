//! The export archive against checked-in bytes.
//!
//! `tests/golden/export-handrolled.zip` is what the hand-rolled zip writer
//! (before `core::zip` moved to the `zip` crate) made of [`entries`]; it stays
//! as the record that the move changed no name, order or byte of what an
//! export extracts to. `tests/golden/export.zip` is what the writer makes of
//! them today, so any change to the archive itself shows up here (since
//! exports stream, each entry's CRC and sizes follow its data in a data
//! descriptor, flag bit 3).
//!
//! To rewrite `export.zip` after a deliberate change:
//! `DIALECTIC_BLESS=1 cargo test -p dialectic-core --test golden_export`,
//! then review it (`unzip -lv`).

use std::io::{Cursor, Read};

const HANDROLLED: &[u8] = include_bytes!("golden/export-handrolled.zip");
const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/export.zip");

/// A UTF-8 name, an empty file, a nested path and binary bytes (zip
/// signatures, NULs, CR LF, every byte value), below a project folder as the
/// gateway writes them.
fn entries() -> Vec<(&'static str, Vec<u8>)> {
    let mut binary: Vec<u8> = (0..=255u8).collect();
    binary.extend_from_slice(b"PK\x03\x04PK\x01\x02PK\x05\x06\0\0\r\n\x1a\xff\xfe");
    vec![
        (
            "my-project/README.md",
            b"# Export\n\nPlain text, CRLF next:\r\nend\n".to_vec(),
        ),
        (
            "my-project/s\u{e9}ance/\u{dc}berblick \u{2013} gr\u{fc}\u{df}e \u{4e16}\u{754c}.md",
            "Grüße, 世界 — ünïcødé\n".as_bytes().to_vec(),
        ),
        ("my-project/empty.txt", Vec::new()),
        (
            "my-project/session_1/iteration_1/thesis/raw_responses/deep/chunk.json",
            b"{\"content\": \"nested\", \"n\": [1, 2, 3]}\n".to_vec(),
        ),
        ("my-project/blob.bin", binary),
    ]
}

fn export(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    dialectic_core::zip::write(entries.iter().map(|(n, b)| (*n, b.as_slice()))).expect("zip")
}

/// Names, in archive order, and bytes, as the zip crate's reader sees them.
fn extract(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(Cursor::new(archive)).expect("a zip archive");
    (0..zip.len())
        .map(|i| {
            let mut file = zip.by_index(i).expect("entry");
            assert_eq!(file.compression(), zip::CompressionMethod::Stored);
            assert_eq!(file.last_modified(), Some(zip::DateTime::DEFAULT));
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).expect("read (CRC checked)");
            (file.name().expect("a UTF-8 name").to_string(), bytes)
        })
        .collect()
}

fn owned(entries: &[(&str, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
    entries
        .iter()
        .map(|(n, b)| (n.to_string(), b.clone()))
        .collect()
}

#[test]
fn the_export_extracts_to_what_the_handrolled_writer_wrote() {
    let entries = entries();
    assert_eq!(extract(HANDROLLED), owned(&entries), "the record itself");
    assert_eq!(extract(&export(&entries)), extract(HANDROLLED));
}

#[test]
fn the_export_archive_is_byte_identical_to_its_golden_file() {
    let archive = export(&entries());
    assert_eq!(archive, export(&entries()), "deterministic");
    if std::env::var_os("DIALECTIC_BLESS").is_some() {
        std::fs::write(GOLDEN, &archive).expect("write golden");
    }
    let golden = std::fs::read(GOLDEN).expect("tests/golden/export.zip");
    assert!(
        archive == golden,
        "the export archive changed ({} bytes, golden {}); if that is deliberate, rewrite \
         tests/golden/export.zip with DIALECTIC_BLESS=1",
        archive.len(),
        golden.len()
    );
    assert_eq!(extract(&golden), owned(&entries()));
}
