//! The zip archive of an export, written with the `zip` crate. Entries are
//! stored (not compressed), so every document comes out byte for byte; every
//! entry carries the same fixed time (1980-01-01 00:00) and attributes, so one
//! export of the same objects is byte-identical to the next; names are UTF-8
//! (flagged as such when not ASCII); the archive switches to zip64 by itself
//! when it holds 65,535 entries or more or grows past 4 GiB, and an entry of
//! 4 GiB or more gets zip64 sizes. Pure: the caller gathers the bytes and
//! ships the archive.

use std::io::{Cursor, Write};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, System, ZipWriter};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipError {
    #[error("file name {0:?} is empty, absolute, too long or climbs out of the archive")]
    BadName(String),
    #[error("file name {0:?} appears twice in the export")]
    DuplicateName(String),
    #[error("the export archive could not be written: {0}")]
    Archive(String),
}

/// Relative, with no empty or `..` parts (nothing an unzip tool could place
/// outside the folder it extracts into), and short enough for a zip header.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && !name.split('/').any(|part| part == ".." || part.is_empty())
        && name.len() < usize::from(u16::MAX) - 64
}

/// The options of every entry: stored, fixed time, plain file attributes of
/// a fixed host system; zip64 sizes only for an entry that needs them.
fn options(len: usize) -> SimpleFileOptions {
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .last_modified_time(DateTime::DEFAULT)
        .system(System::Unix)
        .unix_permissions(0o644)
        .large_file(len as u64 >= u64::from(u32::MAX))
}

/// Builds a stored zip of `(path, bytes)` entries, in the given order.
pub fn write<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Vec<u8>, ZipError> {
    let archive_error = |e: zip::result::ZipError| ZipError::Archive(e.to_string());
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let mut names = std::collections::HashSet::new();
    for (name, data) in entries {
        if !safe_name(name) {
            return Err(ZipError::BadName(name.to_string()));
        }
        if !names.insert(name) {
            return Err(ZipError::DuplicateName(name.to_string()));
        }
        zip.start_file(name, options(data.len()))
            .map_err(archive_error)?;
        zip.write_all(data)
            .map_err(|e| ZipError::Archive(e.to_string()))?;
    }
    Ok(zip.finish().map_err(archive_error)?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn read_back(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut zip = zip::ZipArchive::new(Cursor::new(archive)).expect("a zip");
        (0..zip.len())
            .map(|i| {
                let mut file = zip.by_index(i).expect("entry");
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).expect("read");
                (file.name().expect("a UTF-8 name").to_string(), bytes)
            })
            .collect()
    }

    #[test]
    fn archive_layout_is_stored_and_deterministic() {
        let a = write([("p/a.md", b"hello".as_slice()), ("p/b/c.json", b"{}")]).expect("zip");
        let b = write([("p/a.md", b"hello".as_slice()), ("p/b/c.json", b"{}")]).expect("zip");
        assert_eq!(a, b);
        assert_eq!(&a[..4], b"PK\x03\x04");
        // Stored: the bytes appear verbatim after the first header and its name.
        assert_eq!(&a[30..36], b"p/a.md");
        assert_eq!(&a[36..41], b"hello");
        let eocd = &a[a.len() - 22..];
        assert_eq!(&eocd[..4], b"PK\x05\x06");
        assert_eq!(u16::from_le_bytes([eocd[10], eocd[11]]), 2);
        let mut zip = zip::ZipArchive::new(Cursor::new(&a)).expect("a zip");
        let file = zip.by_index(0).expect("entry");
        assert_eq!(file.compression(), CompressionMethod::Stored);
        assert_eq!(file.last_modified(), Some(DateTime::DEFAULT));
    }

    #[test]
    fn unsafe_and_repeated_names_are_refused() {
        let long = "x".repeat(70_000);
        for name in ["", "/etc/passwd", "p/../x", "../x", "p//x", "p/", &long] {
            assert!(
                matches!(write([(name, b"x".as_slice())]), Err(ZipError::BadName(_))),
                "{name:.20}"
            );
        }
        assert_eq!(
            write([("a", b"1".as_slice()), ("a", b"2")]),
            Err(ZipError::DuplicateName("a".into()))
        );
    }

    #[test]
    fn more_entries_than_a_plain_zip_holds_switch_to_zip64() {
        let names: Vec<String> = (0..70_000).map(|i| format!("p/{i:05}.md")).collect();
        let archive = write(names.iter().map(|n| (n.as_str(), b"x".as_slice()))).expect("zip64");
        // The zip64 end of central directory record is there.
        assert!(archive.windows(4).any(|w| w == b"PK\x06\x06"));
        let back = read_back(&archive);
        assert_eq!(back.len(), 70_000);
        assert_eq!(back[69_999], ("p/69999.md".to_string(), b"x".to_vec()));
    }
}
