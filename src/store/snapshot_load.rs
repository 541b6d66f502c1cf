//! `dds_load`: a snapshot read back, collectively, into newly registered
//! variables (each rank reads its rows of every variable; snapshot_read.rs
//! checks and reads the files, snapshot.rs writes them).

use super::snapshot::{check_trusted_dir, even_split, refuse_partial, same_everywhere};
use super::snapshot_format::{self as format, Manifest, MANIFEST};
use super::snapshot_read::{read_rows, read_samples};
use super::{Collective, RaggedSpec, Shape, Store};
use crate::error::{bail, err, Result};
use crate::mpi::agree;
use std::path::{Path, PathBuf};

impl Store {
    /// Collective: registers the variables `names` (empty: all) of the
    /// snapshot in `dir`, re-sharded evenly over this store's ranks. On an
    /// error no variable of the call stays registered.
    pub fn load(&self, dir: Result<&str>, names: Result<Vec<String>>) -> Result<()> {
        self.check_running()?;
        self.refuse_extra("load", "")?;
        self.drain_requests();
        let local = (|| {
            let dir = PathBuf::from(dir?);
            let names = names?;
            refuse_partial(&dir)?;
            if !dir.exists() {
                bail!(Io, "snapshot directory {} is missing", dir.display());
            }
            check_trusted_dir(&dir, "snapshot directory")?;
            let path = dir.join(MANIFEST);
            let bytes = crate::handshake::read_checked(&path)?.ok_or_else(|| {
                err!(Io, "{}: missing manifest (not a snapshot, or an unfinished one)", path.display())
            })?;
            let m = format::parse(&bytes, &path.display().to_string())?;
            let chosen: Vec<usize> = if names.is_empty() {
                (0..m.vars.len()).collect()
            } else {
                let mut c = Vec::new();
                for n in &names {
                    match m.vars.iter().position(|v| &v.name == n) {
                        Some(i) if !c.contains(&i) => c.push(i),
                        Some(_) => bail!(InvalidArgument, "variable '{n}' is named twice"),
                        None => bail!(UnknownVariable, "no variable named '{n}' in snapshot {}", dir.display()),
                    }
                }
                c
            };
            let vars = self.vars.read();
            if let Some(&i) = chosen.iter().find(|&&i| vars.contains_key(&m.vars[i].name)) {
                bail!(DuplicateVariable, "variable '{}' already exists in this store", m.vars[i].name);
            }
            Ok((dir, m, chosen, crate::hash::fnv1a(&bytes) as i64))
        })();
        let (dir, m, chosen, fp) = self.enter(Collective::Load, "", local)?;
        if !same_everywhere(&self.comm, fp ^ chosen.len() as i64)? {
            bail!(InvalidArgument, "dds_load: ranks read different manifests or named different variables");
        }
        let mut added: Vec<String> = Vec::new();
        for &i in &chosen {
            let v = &m.vars[i];
            let res = self.load_var(&dir, &m, i);
            if let Err(e) = res {
                for n in added {
                    let _ = self.remove(Ok(&n));
                }
                return Err(e);
            }
            added.push(v.name.clone());
        }
        Ok(())
    }

    pub(super) fn load_var(&self, dir: &Path, m: &Manifest, i: usize) -> Result<()> {
        let v = &m.vars[i];
        let (p, me) = (self.comm.size(), self.comm.rank());
        if !v.ragged {
            let (lo, hi) = even_split(v.rows.iter().sum(), p, me);
            // Read straight into the new shard (no buffer of up to GiBs).
            let shape = Shape { local_rows: hi - lo, row_elems: v.row_elems, item_size: v.item_size };
            return self
                .register_filled(Collective::Add, &v.name, Ok(shape), None, |dst| read_rows(dir, m, i, (lo, hi), dst));
        }
        let (lo, hi) = even_split(v.samples.iter().sum(), p, me);
        let part = read_samples(dir, m, i, lo, hi);
        let (payload, lengths) = agree(&self.comm, part)?;
        self.register_ragged(
            &v.name,
            Ok(RaggedSpec { row_elems: v.row_elems, item_size: v.item_size }),
            &payload,
            &lengths,
        )
    }
}
