//! The on-disk format of a snapshot (store/snapshot.rs writes and reads it).
//!
//! A snapshot directory holds `MANIFEST` and, per variable `i` and saving
//! rank `r`, `v<i>.r<r>.data` (the rank's shard: its rows back to back) and,
//! for a ragged variable, `v<i>.r<r>.index` (one 16-byte entry per local
//! sample: first row in that shard, row count, two little-endian u64s).
//! The manifest is text, one record per line, sealed by the FNV-1a-64 of
//! every byte before its last line:
//!
//! ```text
//! ddstore-snapshot 1
//! library 0.9.0
//! chunk 4194304
//! ranks 2
//! var <name in hex> fixed|ragged <row_elems> <item_size>
//! rows <rows of shard 0> <rows of shard 1> ...
//! samples <samples of shard 0> ...          (ragged only)
//! data <r> <chunk sums in hex> ...          (one line per shard)
//! index <r> <chunk sums in hex> ...         (ragged only, one per shard)
//! seal <hex>
//! ```
//!
//! Every file is checksummed per `chunk` bytes (the last chunk may be
//! shorter), so a loader verifies exactly the chunks it reads.

use crate::error::{bail, err, Result};
use crate::hash::fnv1a;

/// Bumped whenever the layout above changes; a loader accepts only its own.
pub const FORMAT_VERSION: u32 = 1;
pub const MANIFEST: &str = "MANIFEST";
const MAGIC: &str = "ddstore-snapshot";

/// One saved variable.
#[derive(Clone, Debug, PartialEq)]
pub struct VarEntry {
    pub name: String,
    pub ragged: bool,
    pub row_elems: i64,
    pub item_size: i32,
    /// Rows held by each saving rank (a ragged variable's payload rows).
    pub rows: Vec<i64>,
    /// Ragged: samples held by each saving rank; empty for fixed rows.
    pub samples: Vec<i64>,
    /// Per saving rank: checksums of its data file's chunks.
    pub data_sums: Vec<Vec<u64>>,
    /// Ragged, per saving rank: checksums of its index file's chunks.
    pub index_sums: Vec<Vec<u64>>,
}

impl VarEntry {
    pub fn row_bytes(&self) -> u64 {
        self.row_elems as u64 * self.item_size as u64
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub library: String,
    pub chunk: u64,
    pub ranks: usize,
    pub vars: Vec<VarEntry>,
}

pub fn data_file(var: usize, rank: usize) -> String {
    format!("v{var}.r{rank}.data")
}

pub fn index_file(var: usize, rank: usize) -> String {
    format!("v{var}.r{rank}.index")
}

/// Chunks of a file of `len` bytes.
pub fn n_chunks(len: u64, chunk: u64) -> usize {
    len.div_ceil(chunk) as usize
}

/// Checksums of `bytes` (a whole file) per `chunk` bytes.
pub fn chunk_sums(bytes: &[u8], chunk: u64) -> Vec<u64> {
    bytes.chunks(chunk as usize).map(crate::hash::fnv1a_wide).collect()
}

/// The part of the library version that must match for a snapshot to load:
/// the major version, or for 0.x the minor one (semantic versioning's
/// compatibility rule).
pub fn compat_key(version: &str) -> String {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some("0"), Some(minor)) => format!("0.{minor}"),
        (Some(major), _) => major.to_string(),
        _ => version.to_string(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn join<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ")
}

fn sums_line(word: &str, r: usize, sums: &[u64]) -> String {
    let s: Vec<String> = sums.iter().map(|x| format!("{x:016x}")).collect();
    format!("{word} {r} {}\n", s.join(" ")).replace(" \n", "\n")
}

pub fn serialize(m: &Manifest) -> Vec<u8> {
    let mut t = format!("{MAGIC} {FORMAT_VERSION}\nlibrary {}\nchunk {}\nranks {}\n", m.library, m.chunk, m.ranks);
    for v in &m.vars {
        let kind = if v.ragged { "ragged" } else { "fixed" };
        t += &format!("var {} {kind} {} {}\n", hex(v.name.as_bytes()), v.row_elems, v.item_size);
        t += &format!("rows {}\n", join(&v.rows));
        if v.ragged {
            t += &format!("samples {}\n", join(&v.samples));
        }
        for (r, s) in v.data_sums.iter().enumerate() {
            t += &sums_line("data", r, s);
        }
        for (r, s) in v.index_sums.iter().enumerate() {
            t += &sums_line("index", r, s);
        }
    }
    t += &format!("seal {:016x}\n", fnv1a(t.as_bytes()));
    t.into_bytes()
}

/// Parses and checks a manifest (`what` names it in messages): the seal,
/// the format version, the library's compatibility, and that every count
/// and checksum list is consistent with the shapes it describes.
pub fn parse(bytes: &[u8], what: &str) -> Result<Manifest> {
    let corrupt = |why: String| err!(Io, "{what}: corrupt manifest ({why})");
    let text = std::str::from_utf8(bytes).map_err(|_| corrupt("not UTF-8".into()))?;
    let body_end = text.trim_end_matches('\n').rfind('\n').map_or(0, |i| i + 1);
    let (body, last) = text.split_at(body_end);
    let seal = last.trim_end().strip_prefix("seal ").ok_or_else(|| corrupt("no seal line: truncated?".into()))?;
    if u64::from_str_radix(seal, 16).ok() != Some(fnv1a(body.as_bytes())) {
        bail!(Io, "{what}: checksum mismatch (the manifest's seal does not match its contents)");
    }
    let mut lines = body.lines().map(|l| l.split(' ').collect::<Vec<&str>>());
    let mut next = |word: &str| -> Result<Vec<&str>> {
        match lines.next() {
            Some(l) if l[0] == word => Ok(l[1..].to_vec()),
            Some(l) => Err(corrupt(format!("expected '{word}', found '{}'", l[0]))),
            None => Err(corrupt(format!("expected '{word}', found the end"))),
        }
    };
    let num = |s: &str| s.parse::<i64>().map_err(|_| corrupt(format!("'{s}' is not a number")));
    let head = next(MAGIC)?;
    let format = head.first().and_then(|s| s.parse::<u32>().ok()).ok_or_else(|| corrupt("no format version".into()))?;
    if format != FORMAT_VERSION {
        bail!(
            Mismatch,
            "{what}: format version mismatch: snapshot format {format}, this library reads format {FORMAT_VERSION}"
        );
    }
    let library = next("library")?.first().map(|s| s.to_string()).unwrap_or_default();
    let ours = env!("CARGO_PKG_VERSION");
    if compat_key(&library) != compat_key(ours) {
        bail!(
            Mismatch,
            "{what}: library version mismatch: written by libddstore {library}, which this libddstore {ours} does not read"
        );
    }
    let chunk = num(next("chunk")?.first().copied().unwrap_or(""))?;
    let ranks = num(next("ranks")?.first().copied().unwrap_or(""))?;
    if !(1..=crate::config::MAX_SNAPSHOT_CHUNK_BYTES as i64).contains(&chunk) || !(1..=1 << 24).contains(&ranks) {
        bail!(Io, "{what}: corrupt manifest (chunk {chunk}, ranks {ranks})");
    }
    let (chunk, ranks) = (chunk as u64, ranks as usize);
    let mut vars = Vec::new();
    while let Ok(v) = next("var") {
        let (name, kind, row_elems, item_size) = match v.as_slice() {
            [n, k, e, i] => (*n, *k, num(e)?, num(i)?),
            _ => return Err(corrupt("bad 'var' line".into())),
        };
        let name = unhex(name).and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| corrupt("bad name".into()))?;
        let ragged = match kind {
            "fixed" => false,
            "ragged" => true,
            _ => return Err(corrupt(format!("variable '{name}': kind '{kind}'"))),
        };
        if row_elems <= 0 || ![1, 2, 4, 8].contains(&item_size) {
            return Err(corrupt(format!("variable '{name}': row shape {row_elems} x {item_size}")));
        }
        let counts = |l: Vec<&str>| -> Result<Vec<i64>> {
            let c: Vec<i64> = l.iter().map(|s| num(s)).collect::<Result<_>>()?;
            if c.len() != ranks || c.iter().any(|&x| x < 0) {
                return Err(corrupt(format!("variable '{name}': {} counts for {ranks} ranks", c.len())));
            }
            Ok(c)
        };
        let rows = counts(next("rows")?)?;
        let samples = if ragged { counts(next("samples")?)? } else { Vec::new() };
        let row_bytes = row_elems as u64 * item_size as u64;
        let mut sums = |word: &str, sizes: Vec<u64>| -> Result<Vec<Vec<u64>>> {
            let mut all = Vec::with_capacity(ranks);
            for (r, len) in sizes.into_iter().enumerate() {
                let l = next(word)?;
                let s: Option<Vec<u64>> = l.iter().skip(1).map(|x| u64::from_str_radix(x, 16).ok()).collect();
                match s {
                    Some(s) if l.first() == Some(&r.to_string().as_str()) && s.len() == n_chunks(len, chunk) => {
                        all.push(s)
                    }
                    _ => return Err(corrupt(format!("variable '{name}': bad '{word}' line for rank {r}"))),
                }
            }
            Ok(all)
        };
        let data_sums = sums("data", rows.iter().map(|&n| n as u64 * row_bytes).collect())?;
        let index_sums =
            if ragged { sums("index", samples.iter().map(|&n| n as u64 * 16).collect())? } else { Vec::new() };
        vars.push(VarEntry {
            name,
            ragged,
            row_elems,
            item_size: item_size as i32,
            rows,
            samples,
            data_sums,
            index_sums,
        });
    }
    Ok(Manifest { library, chunk, ranks, vars })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            library: env!("CARGO_PKG_VERSION").into(),
            chunk: 8,
            ranks: 2,
            vars: vec![VarEntry {
                name: "a b".into(),
                ragged: true,
                row_elems: 1,
                item_size: 4,
                rows: vec![3, 0],
                samples: vec![2, 0],
                data_sums: vec![vec![1, 2], vec![]],
                index_sums: vec![vec![3, 4, 5, 6], vec![]],
            }],
        }
    }

    #[test]
    fn round_trip_and_seal() {
        let m = sample();
        let mut b = serialize(&m);
        assert_eq!(parse(&b, "m").unwrap(), m);
        b[30] ^= 1;
        assert!(parse(&b, "m").unwrap_err().msg.contains("checksum mismatch"));
        let cut = &serialize(&m)[..40];
        assert!(parse(cut, "m").is_err());
    }

    #[test]
    fn versions() {
        assert_eq!(compat_key("0.9.1"), "0.9");
        assert_eq!(compat_key("2.1.0"), "2");
        let mut m = sample();
        m.library = "0.0.1-old".into();
        if compat_key(env!("CARGO_PKG_VERSION")) != "0.0" {
            assert!(parse(&serialize(&m), "m").unwrap_err().msg.contains("library version mismatch"));
        }
    }
}
