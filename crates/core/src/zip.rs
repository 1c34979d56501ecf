//! The zip archive of an export, written with the `zip` crate. Entries are
//! stored (not compressed), so every document comes out byte for byte; every
//! entry carries the same fixed time (1980-01-01 00:00) and attributes, so one
//! export of the same objects is byte-identical to the next; names are UTF-8
//! (flagged as such when not ASCII); the archive switches to zip64 by itself
//! when it holds 65,535 entries or more or grows past 4 GiB, and an entry of
//! 4 GiB or more gets zip64 sizes.
//!
//! The archive is written front to back and never revised ([`StreamingZip`]):
//! each entry's CRC and sizes follow its data in a data descriptor, so the
//! caller can ship the bytes as they are made, holding no more than a chunk,
//! and [`archive_size`] tells the archive's exact size from the entries'
//! names and lengths before any byte exists. Pure: the caller brings the
//! bytes and ships the archive.

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use zip::write::{SimpleFileOptions, StreamWriter};
use zip::{CompressionMethod, DateTime, System, ZipWriter};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipError {
    #[error("file name {0:?} is empty, absolute, too long or climbs out of the archive")]
    BadName(String),
    #[error("file name {0:?} appears twice in the export")]
    DuplicateName(String),
    #[error("{name} was announced as {declared} bytes but {written} came")]
    LengthMismatch {
        name: String,
        declared: u64,
        written: u64,
    },
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

/// Where the zip format runs out of 32-bit sizes and offsets.
const ZIP64_THRESHOLD: u64 = u32::MAX as u64;

/// Entries a plain end of central directory record counts.
const ZIP64_ENTRIES: usize = u16::MAX as usize;

/// An entry this long needs zip64 sizes, decided before its data: a stream
/// cannot go back and widen its header.
fn large(len: u64) -> bool {
    len >= ZIP64_THRESHOLD
}

/// The options of every entry: stored, fixed time, plain file attributes of
/// a fixed host system; zip64 sizes only for an entry that needs them.
fn options(len: u64) -> SimpleFileOptions {
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .last_modified_time(DateTime::DEFAULT)
        .system(System::Unix)
        .unix_permissions(0o644)
        .large_file(large(len))
}

/// Checks names as [`StreamingZip`] does, so a size is only ever told for an
/// archive that can be written.
#[derive(Default)]
struct Names(HashSet<String>);

impl Names {
    fn admit(&mut self, name: &str) -> Result<(), ZipError> {
        if !safe_name(name) {
            return Err(ZipError::BadName(name.to_string()));
        }
        if !self.0.insert(name.to_string()) {
            return Err(ZipError::DuplicateName(name.to_string()));
        }
        Ok(())
    }
}

/// The exact size of the archive [`StreamingZip`] writes of entries of these
/// names and lengths, in this order; the same errors for names it refuses.
///
/// The layout, per entry: a local header (30 bytes, the name, and a 20-byte
/// zip64 field when the entry is large), the data, a data descriptor (16
/// bytes, 24 with zip64 sizes); then per entry a central header (46 bytes,
/// the name, and a zip64 field of 4 bytes plus 16 for large sizes and 8 for an
/// offset past 4 GiB); then the zip64 end record and locator (56 + 20 bytes)
/// when the archive needs them, and the end record (22 bytes).
pub fn archive_size<'a>(
    entries: impl IntoIterator<Item = (&'a str, u64)>,
) -> Result<u64, ZipError> {
    let mut names = Names::default();
    let mut offset = 0u64;
    let mut central = 0u64;
    let mut count = 0usize;
    for (name, len) in entries {
        names.admit(name)?;
        let name_len = name.len() as u64;
        let large = large(len);
        let mut zip64_central = 0;
        if large {
            zip64_central += 16;
        }
        if offset >= ZIP64_THRESHOLD {
            zip64_central += 8;
        }
        if zip64_central > 0 {
            zip64_central += 4;
        }
        central = central.saturating_add(46 + name_len + zip64_central);
        let local = 30 + name_len + if large { 20 } else { 0 };
        let descriptor = if large { 24 } else { 16 };
        // Saturating: sizes come from object listings, and a saturated total
        // is past any cap all the same.
        offset = offset
            .saturating_add(local)
            .saturating_add(len)
            .saturating_add(descriptor);
        count += 1;
    }
    let zip64_end = count > ZIP64_ENTRIES || central.max(offset) > ZIP64_THRESHOLD;
    Ok(offset
        .saturating_add(central)
        .saturating_add(if zip64_end { 56 + 20 } else { 0 })
        .saturating_add(22))
}

/// The bytes the zip writer has made and the caller has not taken yet.
#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl Output {
    fn take(&self) -> Vec<u8> {
        // A panic while the writer held the lock leaves whole bytes behind.
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The entry being written: its name, announced length and bytes so far.
struct Open {
    name: String,
    declared: u64,
    written: u64,
}

/// An export archive written entry by entry: [`start_entry`] announces a
/// name and length, [`write_data`] brings the bytes, [`take_output`] hands
/// out what has been made so far, [`finish`] the rest. Only the entries'
/// headers stay in memory, so an archive of any size streams through a few
/// chunks' worth. Each entry must bring exactly the length it announced, so
/// the archive is exactly [`archive_size`] long. Dropped unfinished, the
/// archive never gets its central directory: nothing a reader would take for
/// a whole archive comes out of one that was cut short.
///
/// [`start_entry`]: StreamingZip::start_entry
/// [`write_data`]: StreamingZip::write_data
/// [`take_output`]: StreamingZip::take_output
/// [`finish`]: StreamingZip::finish
pub struct StreamingZip {
    zip: ZipWriter<StreamWriter<Output>>,
    output: Output,
    names: Names,
    open: Option<Open>,
}

impl Default for StreamingZip {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamingZip {
    pub fn new() -> Self {
        let output = Output::default();
        Self {
            zip: ZipWriter::new_stream(output.clone()),
            output,
            names: Names::default(),
            open: None,
        }
    }

    /// Ends the open entry, refusing one that came short of its length.
    fn close_entry(&mut self) -> Result<(), ZipError> {
        match self.open.take() {
            Some(open) if open.written != open.declared => Err(ZipError::LengthMismatch {
                name: open.name,
                declared: open.declared,
                written: open.written,
            }),
            _ => Ok(()),
        }
    }

    /// Starts the next entry, `len` bytes long.
    pub fn start_entry(&mut self, name: &str, len: u64) -> Result<(), ZipError> {
        self.close_entry()?;
        self.names.admit(name)?;
        self.zip
            .start_file(name, options(len))
            .map_err(|e| ZipError::Archive(e.to_string()))?;
        self.open = Some(Open {
            name: name.to_string(),
            declared: len,
            written: 0,
        });
        Ok(())
    }

    /// More of the open entry's bytes; refused past its announced length.
    pub fn write_data(&mut self, data: &[u8]) -> Result<(), ZipError> {
        let Some(open) = self.open.as_mut() else {
            return Err(ZipError::Archive("data before any entry".into()));
        };
        let written = open.written.saturating_add(data.len() as u64);
        if written > open.declared {
            return Err(ZipError::LengthMismatch {
                name: open.name.clone(),
                declared: open.declared,
                written,
            });
        }
        open.written = written;
        self.zip
            .write_all(data)
            .map_err(|e| ZipError::Archive(e.to_string()))
    }

    /// Bytes made and not yet taken.
    pub fn pending(&self) -> usize {
        self.output.len()
    }

    /// The archive's bytes made since the last call.
    pub fn take_output(&mut self) -> Vec<u8> {
        self.output.take()
    }

    /// Ends the archive (central directory and end records); gives the bytes
    /// not yet taken.
    pub fn finish(mut self) -> Result<Vec<u8>, ZipError> {
        self.close_entry()?;
        self.zip
            .finish()
            .map_err(|e| ZipError::Archive(e.to_string()))?;
        Ok(self.output.take())
    }
}

/// Builds a stored zip of `(path, bytes)` entries, in the given order: the
/// same bytes [`StreamingZip`] streams.
pub fn write<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Vec<u8>, ZipError> {
    let mut zip = StreamingZip::new();
    let mut archive = Vec::new();
    for (name, data) in entries {
        zip.start_entry(name, data.len() as u64)?;
        zip.write_data(data)?;
        archive.extend(zip.take_output());
    }
    archive.extend(zip.finish()?);
    Ok(archive)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Read};

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
        assert_eq!(
            archive_size(names.iter().map(|n| (n.as_str(), 1))),
            Ok(archive.len() as u64)
        );
        // The zip64 end of central directory record is there.
        assert!(archive.windows(4).any(|w| w == b"PK\x06\x06"));
        let back = read_back(&archive);
        assert_eq!(back.len(), 70_000);
        assert_eq!(back[69_999], ("p/69999.md".to_string(), b"x".to_vec()));
    }

    fn sized<'a>(entries: &'a [(&'a str, Vec<u8>)]) -> Vec<(&'a str, u64)> {
        entries.iter().map(|(n, b)| (*n, b.len() as u64)).collect()
    }

    #[test]
    fn the_size_told_up_front_is_the_archive_written() {
        let cases: Vec<Vec<(&str, Vec<u8>)>> = vec![
            Vec::new(),
            vec![("p/empty.txt", Vec::new())],
            vec![
                ("p/a.md", b"hello".to_vec()),
                (
                    "p/s\u{e9}ance/\u{4e16}\u{754c}.md",
                    "ünïcødé".as_bytes().to_vec(),
                ),
                ("p/deep/er/still/x.json", vec![0u8; 100_000]),
                ("p/blob.bin", (0..=255u8).collect()),
            ],
        ];
        for entries in &cases {
            let archive = write(entries.iter().map(|(n, b)| (*n, b.as_slice()))).expect("zip");
            assert_eq!(
                archive_size(sized(entries)),
                Ok(archive.len() as u64),
                "{:?}",
                sized(entries)
            );
            assert_eq!(
                read_back(&archive),
                entries
                    .iter()
                    .map(|(n, b)| (n.to_string(), b.clone()))
                    .collect::<Vec<_>>()
            );
        }
        assert_eq!(
            archive_size([("p/a", 1), ("p/a", 1)]),
            Err(ZipError::DuplicateName("p/a".into()))
        );
        assert_eq!(
            archive_size([("../a", 1)]),
            Err(ZipError::BadName("../a".into()))
        );
    }

    #[test]
    fn streamed_in_pieces_it_is_the_same_archive() {
        let body: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let whole = write([("p/a.bin", body.as_slice()), ("p/b.md", b"b")]).expect("zip");
        let mut zip = StreamingZip::new();
        let mut streamed = Vec::new();
        zip.start_entry("p/a.bin", body.len() as u64)
            .expect("start");
        for piece in body.chunks(777) {
            zip.write_data(piece).expect("data");
            assert!(zip.pending() <= 777 + 200, "only what was just made waits");
            streamed.extend(zip.take_output());
        }
        zip.start_entry("p/b.md", 1).expect("start");
        zip.write_data(b"b").expect("data");
        streamed.extend(zip.finish().expect("finish"));
        assert!(streamed == whole);
    }

    #[test]
    fn an_entry_brings_exactly_the_length_it_announced() {
        let mut zip = StreamingZip::new();
        zip.start_entry("p/a", 3).expect("start");
        zip.write_data(b"ab").expect("within");
        assert_eq!(
            zip.write_data(b"cd"),
            Err(ZipError::LengthMismatch {
                name: "p/a".into(),
                declared: 3,
                written: 4
            })
        );
        let mut short = StreamingZip::new();
        short.start_entry("p/a", 3).expect("start");
        short.write_data(b"ab").expect("within");
        assert!(matches!(
            short.start_entry("p/b", 1),
            Err(ZipError::LengthMismatch { written: 2, .. })
        ));
        let mut short = StreamingZip::new();
        short.start_entry("p/a", 3).expect("start");
        assert!(matches!(
            short.finish(),
            Err(ZipError::LengthMismatch { written: 0, .. })
        ));
    }

    #[test]
    fn an_archive_dropped_unfinished_gets_no_central_directory() {
        let mut zip = StreamingZip::new();
        zip.start_entry("p/a", 5).expect("start");
        zip.write_data(b"hello").expect("data");
        let taken = zip.take_output();
        drop(zip);
        assert!(
            !taken
                .windows(4)
                .any(|w| w == b"PK\x01\x02" || w == b"PK\x05\x06")
        );
        assert!(zip::ZipArchive::new(Cursor::new(taken)).is_err());
    }

    /// Zip64 sizes (an entry past 4 GiB) and a zip64 offset (the entry after
    /// it), the branches small archives never reach: 4 GiB of CRC, a few
    /// seconds, and the output taken as it comes, so memory stays at a chunk.
    #[test]
    fn the_size_of_an_archive_past_4_gib_is_told_too() {
        let big = ZIP64_THRESHOLD + 10;
        let mut zip = StreamingZip::new();
        let mut len = 0u64;
        zip.start_entry("p/big.bin", big).expect("start");
        let zeros = vec![0u8; 1 << 20];
        let mut left = big;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            zip.write_data(&zeros[..n]).expect("data");
            len += zip.take_output().len() as u64;
            left -= n as u64;
        }
        zip.start_entry("p/after.md", 2).expect("start");
        zip.write_data(b"ok").expect("data");
        let tail = zip.finish().expect("finish");
        len += tail.len() as u64;
        assert!(
            tail.windows(4).any(|w| w == b"PK\x06\x06"),
            "zip64 end record"
        );
        assert_eq!(
            archive_size([("p/big.bin", big), ("p/after.md", 2)]),
            Ok(len)
        );
    }
}
