//! Blob files: an opaque byte string published under a name in the
//! hand-shake directory (a binding's metadata, e.g. pyddstore.torch's
//! dataset schema), so that it travels with the same trust checks, atomic
//! writes and checksum as the variable records.
//!
//! `<dir>/<safe>.<hash>.ddsblob` (the stem as for records). All integers
//! little-endian:
//!
//! | field | bytes |
//! |---|---|
//! | magic `"DDSBLOB\n"` | 8 |
//! | format version (`BLOB_VERSION`) | u32 |
//! | reserved, zero | u32 |
//! | total file length, checksum included | u64 |
//! | time written, ns since the Unix epoch | u64 |
//! | blob name | u16 length + bytes |
//! | data | u32 length + bytes |
//! | FNV-1a-64 of every byte before it | u64 |

use super::record::{unseal, CHECKSUM};
use crate::error::{bail, err, Result};
use crate::hash::fnv1a;

pub const BLOB_MAGIC: &[u8; 8] = b"DDSBLOB\n";
pub const BLOB_VERSION: u32 = 1;
pub const BLOB_SUFFIX: &str = ".ddsblob";
/// Largest blob, in bytes: hand-shake directories sit on shared file
/// systems, and a blob is metadata, not data (data goes in variables).
pub const BLOB_MAX_BYTES: usize = 1 << 20;
/// magic + version + reserved + length + time.
const HEAD: usize = 8 + 4 + 4 + 8 + 8;

/// A parsed blob file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub name: String,
    pub written_ns: u64,
    pub data: Vec<u8>,
}

/// The blob file name of `name` (no directory).
pub fn blob_file_name(name: &str) -> String {
    format!("{}{BLOB_SUFFIX}", super::record::file_stem(name))
}

/// Refuses data over `BLOB_MAX_BYTES`, naming the blob and both sizes.
pub fn check_size(name: &str, len: usize) -> Result<()> {
    if len > BLOB_MAX_BYTES {
        bail!(
            InvalidArgument,
            "blob '{name}' is {len} bytes, more than DDS_BLOB_MAX_BYTES ({BLOB_MAX_BYTES}); \
             publish large data as a variable"
        );
    }
    Ok(())
}

/// Serialises blob `name` holding `data` (the format in the module docs).
pub fn serialize_blob(name: &str, data: &[u8], written_ns: u64) -> Result<Vec<u8>> {
    check_size(name, data.len())?;
    if name.len() > u16::MAX as usize {
        bail!(InvalidArgument, "blob name is too long ({} bytes)", name.len());
    }
    let mut out = Vec::with_capacity(HEAD + 2 + name.len() + 4 + data.len() + CHECKSUM);
    out.extend_from_slice(BLOB_MAGIC);
    out.extend_from_slice(&BLOB_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let total = (HEAD + 2 + name.len() + 4 + data.len() + CHECKSUM) as u64;
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(&written_ns.to_le_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    debug_assert_eq!(out.len() as u64, total);
    Ok(out)
}

/// Parses and checks a blob file's bytes: it must hold blob `name`; `what`
/// names the file in messages.
pub fn parse_blob(bytes: &[u8], what: &str, name: &str) -> Result<Blob> {
    if bytes.len() < BLOB_MAGIC.len() || &bytes[..BLOB_MAGIC.len()] != BLOB_MAGIC {
        bail!(Io, "{what}: not a libddstore blob (bad magic)");
    }
    if bytes.len() < HEAD + CHECKSUM {
        bail!(Io, "{what}: truncated ({} bytes, a blob file has at least {})", bytes.len(), HEAD + CHECKSUM);
    }
    let total = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    if bytes.len() as u64 != total {
        bail!(Io, "{what}: corrupt or truncated ({} bytes but its header says {total})", bytes.len());
    }
    let (body, version) = unseal(bytes, what)?;
    if version != BLOB_VERSION {
        bail!(
            Unsupported,
            "{what}: blob format version {version}, but this libddstore reads version {BLOB_VERSION} \
             (the publishing and the waiting job must use compatible libddstore versions)"
        );
    }
    if bytes[12..16] != [0; 4] {
        bail!(Io, "{what}: corrupt (reserved bytes are not zero)");
    }
    let written_ns = u64::from_le_bytes(bytes[24..32].try_into().unwrap());
    let mut at = HEAD;
    let mut take = |n: usize| -> Result<&[u8]> {
        if body.len() - at < n {
            bail!(Io, "{what}: corrupt (a field runs past the end of the blob)");
        }
        at += n;
        Ok(&body[at - n..at])
    };
    let n = u16::from_le_bytes(take(2)?.try_into().unwrap()) as usize;
    let found = std::str::from_utf8(take(n)?).map_err(|_| err!(Io, "{what}: corrupt (the name is not UTF-8)"))?;
    if found != name {
        bail!(Io, "{what}: holds blob '{found}', not '{name}' (a file-name collision?)");
    }
    let len = u32::from_le_bytes(take(4)?.try_into().unwrap()) as usize;
    let data = take(len)?.to_vec();
    if at != body.len() {
        bail!(Io, "{what}: corrupt ({} unexpected bytes after the data)", body.len() - at);
    }
    check_size(name, len).map_err(|e| err!(Io, "{what}: corrupt ({})", e.msg))?;
    Ok(Blob { name: name.to_string(), written_ns, data })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    #[test]
    fn round_trip_at_the_size_bounds() {
        for len in [0, 1, 4096, BLOB_MAX_BYTES] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let b = serialize_blob("ds/__schema__", &data, 9).unwrap();
            let got = parse_blob(&b, "f", "ds/__schema__").unwrap();
            assert_eq!((got.data, got.written_ns), (data, 9));
        }
        let e = serialize_blob("big", &vec![0; BLOB_MAX_BYTES + 1], 0).unwrap_err();
        assert_eq!(e.kind, Kind::InvalidArgument);
        assert!(e.msg.contains("'big'") && e.msg.contains(&format!("{}", BLOB_MAX_BYTES + 1)), "{e}");
    }

    #[test]
    fn damage_is_named() {
        let good = serialize_blob("a.b", b"{\"x\": 1}", 5).unwrap();
        let e = parse_blob(&good, "f", "a_b").unwrap_err();
        assert!(e.msg.contains("holds blob 'a.b', not 'a_b'"), "{e}");
        // Every flipped byte is caught: by magic, length, checksum or version.
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            let e = parse_blob(&bad, "f", "a.b").unwrap_err();
            assert!(matches!(e.kind, Kind::Io | Kind::Unsupported), "byte {i}: {e}");
        }
        let mut bad = good.clone();
        bad[40] ^= 1;
        assert!(parse_blob(&bad, "f", "a.b").unwrap_err().msg.contains("checksum mismatch"));
        for n in 0..good.len() {
            assert_eq!(parse_blob(&good[..n], "f", "a.b").unwrap_err().kind, Kind::Io, "{n} bytes");
        }
        // A variable record is not a blob.
        assert!(parse_blob(b"DDSHAKE\n0000000000000000000000000", "f", "a.b").unwrap_err().msg.contains("bad magic"));
    }

    #[test]
    fn file_names_differ_from_records_and_each_other() {
        assert_ne!(blob_file_name("a.b"), blob_file_name("a_b"));
        assert!(blob_file_name("ds/__schema__").ends_with(BLOB_SUFFIX));
        assert_ne!(blob_file_name("x"), super::super::record_file_name("x"));
    }
}
