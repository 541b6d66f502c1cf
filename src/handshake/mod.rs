//! Method 2 hand-shake files: how a core job tells separate extra jobs where
//! its variables live, and how extras tell the core they are done.
//!
//! Pure file and format code (no MPI, no libfabric), unit-tested below.
//!
//! ## Record file (one per variable)
//!
//! `<dir>/<safe>.<hash>.ddsrec`, where `<safe>` is the variable name with
//! every byte outside `[A-Za-z0-9_-]` replaced by `_` (truncated to 120
//! bytes) and `<hash>` is the FNV-1a-64 of the exact name in 16 hex digits,
//! so `a.b`, `a/b` and `a_b` get different files. The record also stores the
//! exact name, and a reader checks it.
//!
//! All integers little-endian. The envelope (magic, version, length,
//! trailing checksum) is the same for every format version, so a reader can
//! tell "another version" from "corrupt":
//!
//! | field | bytes |
//! |---|---|
//! | magic `"DDSHAKE\n"` | 8 |
//! | format version (`FORMAT_VERSION`) | u32 |
//! | state: 1 published, 2 withdrawn (the core freed it) | u32 |
//! | total file length, checksum included | u64 |
//! | session id of the core store | u64 |
//! | time written, ns since the Unix epoch | u64 |
//! | n_core (ranks of the core store) | u32 |
//! | libfabric address format (`fi_info.addr_format`) | u32 |
//! | elements per row | i64 |
//! | item size | i32, then 4 reserved bytes |
//! | variable name, provider name, domain name | each u16 length + bytes |
//! | per core rank, in rank order: address length (u16) + address bytes, MR key (u64), remote base (u64), row count (i64) | |
//! | FNV-1a-64 of every byte before it | u64 |
//!
//! Files are written to `<final>.tmp.<pid>`, fsynced, renamed over the final
//! name, and the directory is fsynced. Files are 0600; a directory we create
//! is 0700. A reader refuses a file that another user owns, that group or
//! others may write, or that is a symbolic link; both sides refuse a
//! directory that another user owns or that other users may write.
//! Nothing here formats a key or a base address into a message (they grant
//! read access to the core's memory), and `RankRecord`'s `Debug` hides them.
//!
//! ## Done files
//!
//! An extra member announces it has finished reading the variables of a core
//! store (identified by its session id) with
//! `<dir>/ddsdone.<session hex>.<host>.<pid>.<n>`; the core counts them.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{bail, err, Result};

pub const MAGIC: &[u8; 8] = b"DDSHAKE\n";
pub const FORMAT_VERSION: u32 = 1;
pub const STATE_PUBLISHED: u32 = 1;
pub const STATE_WITHDRAWN: u32 = 2;
/// magic + version + state + length.
const ENVELOPE_HEAD: usize = 8 + 4 + 4 + 8;
const CHECKSUM: usize = 8;
const SAFE_MAX: usize = 120;
/// Smallest rank entry: empty address (u16 length) + key + base + rows.
const RANK_MIN: usize = 2 + 8 + 8 + 8;
pub const RECORD_SUFFIX: &str = ".ddsrec";
pub const DONE_PREFIX: &str = "ddsdone.";

use crate::hash::fnv1a;

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

/// What a joining extra member expects of a record.
#[derive(Clone, Debug, Default)]
pub struct Expect {
    pub name: String,
    pub n_core: usize,
    /// The provider the extra uses (already open) or asked for; None: any.
    pub provider: Option<String>,
    /// Elements per row and item size; None: any.
    pub row: Option<(i64, i32)>,
}

/// The record file name of variable `name` (no directory).
pub fn record_file_name(name: &str) -> String {
    let mut safe: String = name
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' { b as char } else { '_' })
        .collect();
    safe.truncate(SAFE_MAX);
    format!("{safe}.{:016x}{RECORD_SUFFIX}", fnv1a(name.as_bytes()))
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
    let (body, sum) = bytes.split_at(bytes.len() - CHECKSUM);
    if fnv1a(body) != u64::from_le_bytes(sum.try_into().unwrap()) {
        bail!(Io, "{what}: corrupt (checksum mismatch)");
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
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
    if let Some(p) = &want.provider {
        let p = crate::transport::fabric::select::normalize_provider(p);
        if !crate::transport::fabric::select::provider_matches(&p, &r.provider) {
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

/// The hand-shake directory: the option, else DDSTORE_HANDSHAKE_DIR, else the default.
pub fn resolve_dir(option: Option<&str>, env: Option<&str>) -> PathBuf {
    PathBuf::from(option.or(env).unwrap_or(crate::config::DEFAULT_HANDSHAKE_DIR))
}

/// Creates the directory (and missing parents) with mode 0700 if missing,
/// and refuses one that this user could not trust (see `check_dir`).
pub fn ensure_dir(dir: &Path) -> Result<()> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => check_dir(dir, &m),
        Ok(_) => bail!(Io, "hand-shake directory {} exists but is not a directory", dir.display()),
        Err(_) => {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| err!(Io, "cannot create the hand-shake directory {}: {e}", dir.display()))?;
            let m = fs::metadata(dir)
                .map_err(|e| err!(Io, "cannot stat the hand-shake directory {}: {e}", dir.display()))?;
            check_dir(dir, &m)
        }
    }
}

fn my_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// Refuses a directory owned by another user or writable by group or
/// others: whoever else may write there could remove our records, plant
/// links where we write, or fill the directory.
pub fn check_dir(dir: &Path, m: &fs::Metadata) -> Result<()> {
    let me = my_uid();
    if m.uid() != me {
        bail!(
            Io,
            "hand-shake directory {} is owned by uid {}, not by this user (uid {me}): refusing to use it \
             (use a directory of your own, e.g. created with mode 0700)",
            dir.display(),
            m.uid()
        );
    }
    // Group-writable is allowed: project directories on HPC systems often
    // are (umask 002), and a group member can at worst delete records; a
    // record they plant is refused by its owner check.
    if m.mode() & 0o002 != 0 {
        bail!(
            Io,
            "hand-shake directory {} may be written by other users (mode {:o}): refusing to use it \
             (chmod o-w it, or use a fresh directory, which libddstore creates with mode 0700)",
            dir.display(),
            m.mode() & 0o777
        );
    }
    Ok(())
}

/// Writes `bytes` to `dir/name` atomically (temporary file, fsync, rename,
/// fsync of the directory), mode 0600. The temporary file is created
/// exclusively and never through a symbolic link.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let final_path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp.{}", std::process::id()));
    let io = |what: &str, e: std::io::Error| err!(Io, "{what} {}: {e}", tmp.display());
    // A leftover of a crashed process that had our pid.
    let _ = fs::remove_file(&tmp);
    let res = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(|e| io("cannot create", e))?;
        f.write_all(bytes).map_err(|e| io("cannot write", e))?;
        f.sync_all().map_err(|e| io("cannot fsync", e))?;
        drop(f);
        fs::rename(&tmp, &final_path)
            .map_err(|e| err!(Io, "cannot rename {} to {}: {e}", tmp.display(), final_path.display()))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// Reads a hand-shake file: None when it does not exist. Refuses a file
/// owned by another user or writable by group or others, and a symbolic link.
pub fn read_checked(path: &Path) -> Result<Option<Vec<u8>>> {
    let f = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            bail!(Io, "{} is a symbolic link: refusing to trust it (records are plain files)", path.display())
        }
        Err(e) => bail!(Io, "cannot open {}: {e}", path.display()),
    };
    let m = f.metadata().map_err(|e| err!(Io, "cannot stat {}: {e}", path.display()))?;
    let me = my_uid();
    if m.uid() != me {
        bail!(Io, "{} is owned by uid {}, not by this user (uid {me}): refusing to trust it", path.display(), m.uid());
    }
    if m.mode() & 0o022 != 0 {
        bail!(
            Io,
            "{} may be written by group or others (mode {:o}): refusing to trust it (records are 0600)",
            path.display(),
            m.mode() & 0o777
        );
    }
    let mut buf = Vec::with_capacity(m.len() as usize);
    use std::io::Read;
    let mut f = f;
    f.read_to_end(&mut buf).map_err(|e| err!(Io, "cannot read {}: {e}", path.display()))?;
    Ok(Some(buf))
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf holds its length.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let h = if ok { String::from_utf8_lossy(&buf[..end]).into_owned() } else { "host".into() };
    h.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

/// Announces that this process (its `n`-th store) is done with session `session`.
pub fn write_done(dir: &Path, session: u64, n: u64) -> Result<()> {
    ensure_dir(dir)?;
    let name = format!("{DONE_PREFIX}{session:016x}.{}.{}.{n}", host_name(), std::process::id());
    write_atomic(dir, &name, format!("done {}\n", now_ns()).as_bytes())
}

/// Counts the done files of session `session`.
pub fn count_done(dir: &Path, session: u64) -> Result<usize> {
    let prefix = format!("{DONE_PREFIX}{session:016x}.");
    let rd = fs::read_dir(dir).map_err(|e| err!(Io, "cannot list the hand-shake directory {}: {e}", dir.display()))?;
    Ok(rd
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with(&prefix) && !n.contains(".tmp.")
        })
        .count())
}

/// Calls `f` until it returns Some, sleeping 10 ms doubling to 500 ms
/// between calls, for at most `timeout`. Returns None on timeout.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Result<Option<T>>) -> Result<Option<T>> {
    let start = Instant::now();
    let mut wait = Duration::from_millis(10);
    loop {
        if let Some(v) = f()? {
            return Ok(Some(v));
        }
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Ok(None);
        }
        std::thread::sleep(wait.min(left));
        wait = (wait * 2).min(Duration::from_millis(500));
    }
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
        want.provider = Some("tcp".into());
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
        want.provider = Some("shm".into());
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

    #[test]
    fn files_atomic_private_and_checked() {
        let base = std::env::temp_dir().join(format!("dds-split-test-{}", std::process::id()));
        let dir = base.join("hs");
        ensure_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let b = serialize(&sample()).unwrap();
        let name = record_file_name("data/x.v");
        write_atomic(&dir, &name, &b).unwrap();
        let p = dir.join(&name);
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        assert_eq!(read_checked(&p).unwrap().unwrap(), b);
        assert!(read_checked(&dir.join("absent")).unwrap().is_none());
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o622)).unwrap();
        assert!(read_checked(&p).unwrap_err().msg.contains("group or others"));
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        // A link to a record is refused, even to one of ours.
        let link = dir.join("link.ddsrec");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(read_checked(&link).unwrap_err().msg.contains("symbolic link"));
        // A planted link where the writer puts its temporary file is not followed.
        let victim = base.join("victim");
        fs::write(&victim, b"keep").unwrap();
        let tmp_name = format!("planted.tmp.{}", std::process::id());
        std::os::unix::fs::symlink(&victim, dir.join(&tmp_name)).unwrap();
        write_atomic(&dir, "planted", &b).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        assert_eq!(read_checked(&dir.join("planted")).unwrap().unwrap(), b);
        // Directories others may write are refused, by both sides.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let e = ensure_dir(&dir).unwrap_err();
        assert!(e.msg.contains("may be written by other users (mode 777)") && e.msg.contains("hs"), "{e}");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o702)).unwrap();
        assert!(ensure_dir(&dir).is_err());
        // A group-writable project directory is fine.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o770)).unwrap();
        ensure_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        ensure_dir(&dir).unwrap();
        // Done files.
        assert_eq!(count_done(&dir, 5).unwrap(), 0);
        write_done(&dir, 5, 0).unwrap();
        write_done(&dir, 5, 1).unwrap();
        write_done(&dir, 6, 0).unwrap();
        assert_eq!(count_done(&dir, 5).unwrap(), 2);
        fs::remove_dir_all(&base).unwrap();
        // Polling gives up after the timeout.
        let t = Instant::now();
        assert!(poll(Duration::from_millis(100), || Ok(None::<()>)).unwrap().is_none());
        assert!(t.elapsed() >= Duration::from_millis(100));
        let mut n = 0;
        assert_eq!(
            poll(Duration::from_secs(5), || {
                n += 1;
                Ok((n == 3).then_some(n))
            })
            .unwrap(),
            Some(3)
        );
    }
}
