//! Whether a file may be trusted (a leaf: the hand-shake records and blobs
//! of handshake/dir.rs and the snapshot's shard files check it the same
//! way): opened without following a symbolic link, owned by this process's
//! user, written by no one else.

use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{bail, err, Result};

/// This process's user, the owner every trusted file and directory must have.
pub fn my_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// Opens `path` for reading, never through a symbolic link, with its
/// metadata; `Ok(None)` when it does not exist. `link_note` ends the
/// message that refuses a link (e.g. " (records are plain files)").
pub fn open_no_link(path: &Path, link_note: &str) -> Result<Option<(File, Metadata)>> {
    let f = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            bail!(Io, "{} is a symbolic link: refusing to trust it{link_note}", path.display())
        }
        Err(e) => bail!(Io, "cannot open {}: {e}", path.display()),
    };
    let m = f.metadata().map_err(|e| err!(Io, "cannot stat {}: {e}", path.display()))?;
    Ok(Some((f, m)))
}

/// Refuses a file (`m`, the metadata of `path`) owned by another user or
/// writable by group or others. `mode_note` ends the message that refuses
/// its mode (e.g. " (records are 0600)").
pub fn check_private(path: &Path, m: &Metadata, mode_note: &str) -> Result<()> {
    let me = my_uid();
    if m.uid() != me {
        bail!(Io, "{} is owned by uid {}, not by this user (uid {me}): refusing to trust it", path.display(), m.uid());
    }
    if m.mode() & 0o022 != 0 {
        bail!(
            Io,
            "{} may be written by group or others (mode {:o}): refusing to trust it{mode_note}",
            path.display(),
            m.mode() & 0o777
        );
    }
    Ok(())
}
