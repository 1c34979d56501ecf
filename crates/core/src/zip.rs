//! A minimal zip writer for exports: entries are stored (not compressed), so
//! every document comes out byte for byte, and any unzip tool reads it. Pure:
//! the caller gathers the bytes and ships the archive. No zip64, so an archive
//! holds fewer than 65,535 entries and under 4 GiB, which exports never reach;
//! larger input is refused rather than written corrupt.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipError {
    #[error("an export holds at most 65535 files")]
    TooManyEntries,
    #[error("an export is limited to 4 GiB")]
    TooLarge,
    #[error("file name {0:?} is empty, absolute or climbs out of the archive")]
    BadName(String),
}

/// CRC-32 (IEEE), as zip requires.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// 1980-01-01 00:00 in DOS format: a fixed date makes one export of the same
/// objects byte-identical to the next.
const DOS_TIME: u16 = 0;
const DOS_DATE: u16 = (1 << 5) | 1;
/// Bit 11: names are UTF-8.
const FLAGS: u16 = 0x0800;

/// Builds a stored zip of `(path, bytes)` entries, in the given order.
pub fn write<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Vec<u8>, ZipError> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    let mut count: u16 = 0;
    for (name, data) in entries {
        if name.is_empty()
            || name.starts_with('/')
            || name.split('/').any(|part| part == ".." || part.is_empty())
        {
            return Err(ZipError::BadName(name.to_string()));
        }
        count = count.checked_add(1).ok_or(ZipError::TooManyEntries)?;
        if count == u16::MAX {
            return Err(ZipError::TooManyEntries);
        }
        let size = u32::try_from(data.len()).map_err(|_| ZipError::TooLarge)?;
        let name_len = u16::try_from(name.len()).map_err(|_| ZipError::BadName(name.into()))?;
        let offset = u32::try_from(out.len()).map_err(|_| ZipError::TooLarge)?;
        let crc = crc32(data);
        // Local file header.
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        for v in [20u16, FLAGS, 0, DOS_TIME, DOS_DATE] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, size, size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&name_len.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        // Central directory record.
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        for v in [20u16, 20, FLAGS, 0, DOS_TIME, DOS_DATE] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, size, size] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [name_len, 0, 0, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        central.extend_from_slice(&0u32.to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let central_offset = u32::try_from(out.len()).map_err(|_| ZipError::TooLarge)?;
    let central_size = u32::try_from(central.len()).map_err(|_| ZipError::TooLarge)?;
    out.extend_from_slice(&central);
    // End of central directory.
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    for v in [0u16, 0, count, count] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&central_size.to_le_bytes());
    out.extend_from_slice(&central_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    if u32::try_from(out.len()).is_err() {
        return Err(ZipError::TooLarge);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn archive_layout_is_stored_and_deterministic() {
        let a = write([("p/a.md", b"hello".as_slice()), ("p/b/c.json", b"{}")]).expect("zip");
        let b = write([("p/a.md", b"hello".as_slice()), ("p/b/c.json", b"{}")]).expect("zip");
        assert_eq!(a, b);
        assert_eq!(&a[..4], b"PK\x03\x04");
        // The stored bytes appear verbatim after the first header and its name.
        assert_eq!(&a[30..36], b"p/a.md");
        assert_eq!(&a[36..41], b"hello");
        let eocd = &a[a.len() - 22..];
        assert_eq!(&eocd[..4], b"PK\x05\x06");
        assert_eq!(u16::from_le_bytes([eocd[10], eocd[11]]), 2);
    }

    #[test]
    fn unsafe_names_are_refused() {
        for name in ["", "/etc/passwd", "p/../x", "p//x"] {
            assert!(matches!(
                write([(name, b"x".as_slice())]),
                Err(ZipError::BadName(_))
            ));
        }
    }
}
