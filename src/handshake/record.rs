//! The record format of a published variable (see the module docs above):
//! serialisation, parsing and the checks a joining extra member makes.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{bail, err, Result};
use crate::hash::fnv1a;

pub const MAGIC: &[u8; 8] = b"DDSHAKE\n";
pub const FORMAT_VERSION: u32 = 1;
pub const STATE_PUBLISHED: u32 = 1;
pub const STATE_WITHDRAWN: u32 = 2;
/// magic + version + state + length.
const ENVELOPE_HEAD: usize = 8 + 4 + 4 + 8;
pub(super) const CHECKSUM: usize = 8;
const SAFE_MAX: usize = 120;
/// Smallest rank entry: empty address (u16 length) + key + base + rows.
const RANK_MIN: usize = 2 + 8 + 8 + 8;
pub const RECORD_SUFFIX: &str = ".ddsrec";

/// One core rank's entry.
#[derive(Clone, PartialEq, Eq)]
pub struct RankRecord {
    pub addr: Vec<u8>,
    pub key: u64,
    pub base: u64,
    pub rows: i64,
}

// The key and base give read access to the core's memory: a `{:?}` in a
// message or a failed assertion must not reveal them.
impl std::fmt::Debug for RankRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankRecord")
            .field("addr_len", &self.addr.len())
            .field("key", &"<redacted>")
            .field("base", &"<redacted>")
            .field("rows", &self.rows)
            .finish()
    }
}

/// A variable as published by a core store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub state: u32,
    pub session: u64,
    pub written_ns: u64,
    pub name: String,
    pub provider: String,
    pub domain: String,
    pub addr_format: u32,
    pub row_elems: i64,
    pub item_size: i32,
    pub ranks: Vec<RankRecord>,
}

/// The provider an extra member reads with, and the transport's rule for
/// whether a record's provider is the same one (the format does not know
/// provider names).
#[derive(Clone, Debug)]
pub struct ProviderCheck {
    pub name: String,
    pub matches: fn(want: &str, record: &str) -> bool,
}

/// What a joining extra member expects of a record.
#[derive(Clone, Debug, Default)]
pub struct Expect {
    pub name: String,
    pub n_core: usize,
    /// The provider the extra uses (already open) or asked for; None: any.
    pub provider: Option<ProviderCheck>,
    /// Elements per row and item size; None: any.
    pub row: Option<(i64, i32)>,
}

/// The record file name of variable `name` (no directory).
pub fn record_file_name(name: &str) -> String {
    format!("{}{RECORD_SUFFIX}", file_stem(name))
}

/// `<safe>.<hash>`: the stem of a record's or a blob's file name.
pub(super) fn file_stem(name: &str) -> String {
    let mut safe: String = name
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' { b as char } else { '_' })
        .collect();
    safe.truncate(SAFE_MAX);
    format!("{safe}.{:016x}", fnv1a(name.as_bytes()))
}

pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s);
}

/// Serialises a record (the format in the module docs).
pub fn serialize(r: &Record) -> Result<Vec<u8>> {
    for (what, s) in [("variable name", &r.name), ("provider name", &r.provider), ("domain name", &r.domain)] {
        if s.len() > u16::MAX as usize {
            bail!(InvalidArgument, "{what} is too long for a hand-shake record ({} bytes)", s.len());
        }
    }
    let mut out = Vec::with_capacity(128 + r.ranks.len() * 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&r.state.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // length, patched below
    out.extend_from_slice(&r.session.to_le_bytes());
    out.extend_from_slice(&r.written_ns.to_le_bytes());
    out.extend_from_slice(&(r.ranks.len() as u32).to_le_bytes());
    out.extend_from_slice(&r.addr_format.to_le_bytes());
    out.extend_from_slice(&r.row_elems.to_le_bytes());
    out.extend_from_slice(&r.item_size.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    put_str(&mut out, r.name.as_bytes());
    put_str(&mut out, r.provider.as_bytes());
    put_str(&mut out, r.domain.as_bytes());
    for k in &r.ranks {
        if k.addr.len() > u16::MAX as usize {
            bail!(Fabric, "endpoint address of {} bytes is too long for a hand-shake record", k.addr.len());
        }
        put_str(&mut out, &k.addr);
        out.extend_from_slice(&k.key.to_le_bytes());
        out.extend_from_slice(&k.base.to_le_bytes());
        out.extend_from_slice(&k.rows.to_le_bytes());
    }
    let total = (out.len() + CHECKSUM) as u64;
    out[16..24].copy_from_slice(&total.to_le_bytes());
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    Ok(out)
}

/// A bounds-checked reader over the body.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
    what: &'a str,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() - self.at < n {
            bail!(Io, "{}: corrupt (a field runs past the end of the record)", self.what);
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u16()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Result<String> {
        let what = self.what;
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| err!(Io, "{what}: corrupt (a name is not UTF-8)"))
    }
}

/// The body of a sealed hand-shake file (a record or a blob: every byte
/// before the trailing FNV-1a-64) once that checksum matches, and the
/// format version the envelope names. The caller has checked the magic and
/// the length.
pub(super) fn unseal<'a>(bytes: &'a [u8], what: &str) -> Result<(&'a [u8], u32)> {
    let (body, sum) = bytes.split_at(bytes.len() - CHECKSUM);
    if fnv1a(body) != u64::from_le_bytes(sum.try_into().unwrap()) {
        bail!(Io, "{what}: corrupt (checksum mismatch)");
    }
    Ok((body, u32::from_le_bytes(bytes[8..12].try_into().unwrap())))
}

/// Parses and checks a record file's bytes; `what` names the file in messages.
pub fn parse(bytes: &[u8], what: &str, want: &Expect) -> Result<Record> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
            bail!(Io, "{what}: truncated ({} bytes)", bytes.len());
        }
        bail!(Io, "{what}: not a libddstore hand-shake record (bad magic)");
    }
    if bytes.len() < ENVELOPE_HEAD + CHECKSUM {
        bail!(Io, "{what}: truncated ({} bytes, a record has at least {})", bytes.len(), ENVELOPE_HEAD + CHECKSUM);
    }
    let total = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    if (bytes.len() as u64) < total {
        bail!(Io, "{what}: truncated ({} of {total} bytes)", bytes.len());
    }
    if bytes.len() as u64 != total {
        bail!(Io, "{what}: corrupt ({} bytes but its header says {total})", bytes.len());
    }
    let (body, version) = unseal(bytes, what)?;
    if version != FORMAT_VERSION {
        bail!(
            Unsupported,
            "{what}: hand-shake format version {version}, but this libddstore reads version {FORMAT_VERSION} \
             (core and extra jobs must use compatible libddstore versions)"
        );
    }
    let state = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
    let mut c = Cursor { buf: body, at: ENVELOPE_HEAD, what };
    let session = c.u64()?;
    let written_ns = c.u64()?;
    let n_core = c.u32()? as usize;
    let addr_format = c.u32()?;
    let row_elems = c.u64()? as i64;
    let item_size = c.u32()? as i32;
    // Zero in version 1: anything else is damage the checksum did not catch
    // (or a writer we do not know), and accepting it would hide that.
    if c.u32()? != 0 {
        bail!(Io, "{what}: corrupt (reserved bytes are not zero)");
    }
    let name = c.string()?;
    let provider = c.string()?;
    let domain = c.string()?;
    // Each rank entry takes at least RANK_MIN bytes: a corrupt n_core cannot
    // make us reserve more than the file could hold.
    let mut ranks = Vec::with_capacity(n_core.min((body.len() - c.at) / RANK_MIN));
    for _ in 0..n_core {
        let addr = c.bytes()?.to_vec();
        let key = c.u64()?;
        let base = c.u64()?;
        let rows = c.u64()? as i64;
        if rows < 0 {
            bail!(Io, "{what}: corrupt (negative row count)");
        }
        ranks.push(RankRecord { addr, key, base, rows });
    }
    if c.at != body.len() {
        bail!(Io, "{what}: corrupt ({} unexpected bytes after the last rank)", body.len() - c.at);
    }
    if !(state == STATE_PUBLISHED || state == STATE_WITHDRAWN) {
        bail!(Io, "{what}: corrupt (state {state})");
    }
    let rec = Record { state, session, written_ns, name, provider, domain, addr_format, row_elems, item_size, ranks };
    check(&rec, what, want)?;
    Ok(rec)
}

/// Checks a parsed record against what the extra expects.
fn check(r: &Record, what: &str, want: &Expect) -> Result<()> {
    if r.name != want.name {
        bail!(Io, "{what}: holds variable '{}', not '{}' (a file-name collision?)", r.name, want.name);
    }
    if r.state == STATE_WITHDRAWN {
        // Nothing else matters for a tombstone.
        return Ok(());
    }
    if r.ranks.len() != want.n_core {
        bail!(
            Mismatch,
            "{what}: variable '{}' was published by a core job of {} rank(s), but this extra member was \
             created with n_core = {}",
            r.name,
            r.ranks.len(),
            want.n_core
        );
    }
    if let Some(ProviderCheck { name: p, matches }) = &want.provider {
        if !matches(p, &r.provider) {
            bail!(
                Fabric,
                "{what}: variable '{}' is served by libfabric provider '{}', but this extra member uses '{p}' \
                 (set DDSTORE_FABRIC to the core job's provider)",
                r.name,
                r.provider
            );
        }
    }
    if let Some((elems, item)) = want.row {
        if (elems, item) != (r.row_elems, r.item_size) {
            bail!(
                Mismatch,
                "{what}: variable '{}' has rows of {} elements x {} bytes, expected {elems} x {item}",
                r.name,
                r.row_elems,
                r.item_size
            );
        }
    }
    if r.row_elems <= 0 || ![1, 2, 4, 8].contains(&r.item_size) {
        bail!(Io, "{what}: corrupt (row shape {} x {})", r.row_elems, r.item_size);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    fn sample() -> Record {
        Record {
            state: STATE_PUBLISHED,
            session: 0x1234_5678_9abc_def0,
            written_ns: 42,
            name: "data/x.v".into(),
            provider: "tcp;ofi_rxm".into(),
            domain: "lo".into(),
            addr_format: 2,
            row_elems: 3,
            item_size: 8,
            ranks: vec![
                RankRecord { addr: vec![1, 2, 3, 4], key: 7, base: 0x1000, rows: 4 },
                RankRecord { addr: vec![5, 6, 7, 8], key: 9, base: 0x2000, rows: 0 },
            ],
        }
    }

    fn expect() -> Expect {
        Expect { name: "data/x.v".into(), n_core: 2, provider: None, row: None }
    }

    fn reseal(b: &mut [u8]) {
        let n = b.len() - CHECKSUM;
        let s = fnv1a(&b[..n]);
        b[n..].copy_from_slice(&s.to_le_bytes());
    }

    #[test]
    fn round_trip() {
        let r = sample();
        let b = serialize(&r).unwrap();
        assert_eq!(parse(&b, "f", &expect()).unwrap(), r);
        let mut want = expect();
        // The rule is the transport's; here: the record's first provider.
        want.provider = Some(ProviderCheck { name: "tcp".into(), matches: |w, r| r.split(';').next() == Some(w) });
        want.row = Some((3, 8));
        assert_eq!(parse(&b, "f", &want).unwrap(), r);
    }

    #[test]
    fn file_names_are_safe_and_distinct() {
        let a = record_file_name("a.b");
        let b = record_file_name("a/b");
        let c = record_file_name("a_b");
        assert!(a.starts_with("a_b.") && a.ends_with(RECORD_SUFFIX));
        assert!(a != b && b != c && a != c);
        assert!(!record_file_name("../../etc/passwd").contains('/'));
        assert!(record_file_name(&"x".repeat(255)).len() < 160);
    }

    #[test]
    fn rejects_other_version() {
        let mut b = serialize(&sample()).unwrap();
        b[8..12].copy_from_slice(&7u32.to_le_bytes());
        reseal(&mut b);
        let e = parse(&b, "f", &expect()).unwrap_err();
        assert_eq!(e.kind, Kind::Unsupported);
        assert!(e.msg.contains("version 7"), "{e}");
    }

    #[test]
    fn rejects_other_provider() {
        let b = serialize(&sample()).unwrap();
        let mut want = expect();
        want.provider = Some(ProviderCheck { name: "shm".into(), matches: |a, b| a == b });
        let e = parse(&b, "f", &want).unwrap_err();
        assert_eq!(e.kind, Kind::Fabric);
        assert!(e.msg.contains("'tcp;ofi_rxm'") && e.msg.contains("'shm'"), "{e}");
    }

    #[test]
    fn rejects_wrong_n_core() {
        let b = serialize(&sample()).unwrap();
        let mut want = expect();
        want.n_core = 4;
        let e = parse(&b, "f", &want).unwrap_err();
        assert_eq!(e.kind, Kind::Mismatch);
        assert!(e.msg.contains("n_core = 4") && e.msg.contains("2 rank"), "{e}");
    }

    #[test]
    fn rejects_truncated() {
        let b = serialize(&sample()).unwrap();
        for n in [0, 3, 8, 20, 40, b.len() - 1] {
            let e = parse(&b[..n], "f", &expect()).unwrap_err();
            assert_eq!(e.kind, Kind::Io);
            assert!(e.msg.contains("truncated"), "{n}: {e}");
        }
    }

    #[test]
    fn rejects_corrupt() {
        let b = serialize(&sample()).unwrap();
        for i in [24, 40, 60, b.len() - 9, b.len() - 1] {
            let mut c = b.clone();
            c[i] ^= 0x40;
            let e = parse(&c, "f", &expect()).unwrap_err();
            assert_eq!(e.kind, Kind::Io);
            assert!(e.msg.contains("checksum"), "{i}: {e}");
        }
        let mut c = b.clone();
        c[0] = b'X';
        assert!(parse(&c, "f", &expect()).unwrap_err().msg.contains("bad magic"));
        let mut c = b.clone();
        c.push(0);
        assert!(parse(&c, "f", &expect()).unwrap_err().msg.contains("corrupt"));
    }

    #[test]
    fn rejects_other_row_width_and_name() {
        let b = serialize(&sample()).unwrap();
        let mut want = expect();
        want.row = Some((4, 8));
        let e = parse(&b, "f", &want).unwrap_err();
        assert_eq!(e.kind, Kind::Mismatch);
        assert!(e.msg.contains("3 elements x 8 bytes, expected 4 x 8"), "{e}");
        let mut want = expect();
        want.name = "other".into();
        assert!(parse(&b, "f", &want).unwrap_err().msg.contains("collision"));
    }

    #[test]
    fn rejects_nonzero_reserved_bytes() {
        // Found by the split_record fuzz target: such a record parsed, and
        // did not serialise back to the same bytes.
        let mut b = serialize(&sample()).unwrap();
        b[60] = 2; // the 4 reserved bytes after the item size
        reseal(&mut b);
        let e = parse(&b, "f", &expect()).unwrap_err();
        assert_eq!(e.kind, Kind::Io);
        assert!(e.msg.contains("reserved"), "{e}");
    }

    #[test]
    fn huge_rank_count_is_refused_without_reserving_it() {
        let mut b = serialize(&sample()).unwrap();
        // n_core is at offset 40 (envelope 24, session 8, time 8).
        b[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        reseal(&mut b);
        let mut want = expect();
        want.n_core = u32::MAX as usize;
        let e = parse(&b, "f", &want).unwrap_err();
        assert!(e.msg.contains("runs past the end"), "{e}");
    }

    #[test]
    fn debug_hides_keys_and_bases() {
        let mut r = sample();
        for (i, k) in r.ranks.iter_mut().enumerate() {
            k.key = 0xdead_beef_1234 + i as u64;
            k.base = 0x7f00_1234_5678 + i as u64;
        }
        let text = format!("{r:?}");
        for k in &r.ranks {
            assert!(!text.contains(&k.key.to_string()) && !text.contains(&format!("{:x}", k.key)), "{text}");
            assert!(!text.contains(&k.base.to_string()) && !text.contains(&format!("{:x}", k.base)), "{text}");
        }
        assert!(text.contains("<redacted>"));
    }

    #[test]
    fn withdrawn_records_parse() {
        let mut r = sample();
        r.state = STATE_WITHDRAWN;
        let b = serialize(&r).unwrap();
        let mut want = expect();
        want.n_core = 9; // not checked for a tombstone
        assert_eq!(parse(&b, "f", &want).unwrap().state, STATE_WITHDRAWN);
    }
}
