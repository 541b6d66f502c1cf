//! The hand-shake directory: who may be trusted, atomic private writes,
//! checked reads, done files and polling.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::now_ns;
use crate::error::{bail, err, Result};
use crate::trust::{check_private, my_uid, open_no_link};

pub const DONE_PREFIX: &str = "ddsdone.";

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
    let Some((f, m)) = open_no_link(path, " (records are plain files)")? else { return Ok(None) };
    check_private(path, &m, " (records are 0600)")?;
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

    #[test]
    fn files_atomic_private_and_checked() {
        let base = std::env::temp_dir().join(format!("dds-split-test-{}", std::process::id()));
        let dir = base.join("hs");
        ensure_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let b = b"a record's bytes".to_vec();
        let name = "x.ddsrec";
        write_atomic(&dir, name, &b).unwrap();
        let p = dir.join(name);
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
