//! Blobs on a method-2 store: any member (core or extra) publishes an
//! opaque byte string under a name in the store's hand-shake directory, and
//! any member of another job waits for it. The file format and the trust
//! checks live in `handshake`. Local calls: no collective.

use std::time::Duration;

use super::split::Split;
use super::Store;
use crate::error::{bail, Error, Result};
use crate::handshake as hs;
pub use crate::handshake::BLOB_MAX_BYTES;

impl Store {
    /// The method-2 hand-shake state, or an error naming the call.
    fn blob_split(&self, call: &str, name: &str) -> Result<&Split> {
        self.check_running()?;
        match &self.split {
            Some(sp) => {
                // The directory may have been replaced or opened up since dds_create.
                hs::ensure_dir(&sp.dir)?;
                Ok(sp)
            }
            None => bail!(
                BadState,
                "cannot {call} blob '{name}': blobs live in the hand-shake directory of a method-2 store, \
                 and this store uses method {}",
                self.method.code()
            ),
        }
    }

    /// Writes blob `name` holding `data` (at most `hs::BLOB_MAX_BYTES`)
    /// into the hand-shake directory, replacing an older one atomically.
    pub fn publish_blob(&self, name: &str, data: &[u8]) -> Result<()> {
        hs::check_size(name, data.len())?;
        let sp = self.blob_split("publish", name)?;
        let bytes = hs::serialize_blob(name, data, hs::now_ns())?;
        hs::write_atomic(&sp.dir, &hs::blob_file_name(name), &bytes)
            .map_err(|e| Error::new(e.kind, format!("publishing blob '{name}' in {}: {}", sp.dir.display(), e.msg)))
    }

    /// Waits for blob `name` (polling with a back-off, for `timeout_ms`
    /// milliseconds; negative: DDSTORE_HANDSHAKE_TIMEOUT_S) and returns its
    /// bytes. A file that fails its checks fails at once.
    pub fn wait_blob(&self, name: &str, timeout_ms: i64) -> Result<Vec<u8>> {
        let sp = self.blob_split("wait for", name)?;
        let limit = if timeout_ms < 0 { sp.timeout } else { Duration::from_millis(timeout_ms as u64) };
        let path = sp.dir.join(hs::blob_file_name(name));
        let what = path.display().to_string();
        let found = hs::poll(limit, || match hs::read_checked(&path)? {
            None => Ok(None),
            Some(b) => hs::parse_blob(&b, &what, name).map(Some),
        })?;
        match found {
            Some(blob) => Ok(blob.data),
            None => bail!(
                Timeout,
                "no blob '{name}' was published in hand-shake directory {} within {:.1} s (waited for {what}{}); \
                 check that the publishing job runs and uses the same directory",
                sp.dir.display(),
                limit.as_secs_f64(),
                if timeout_ms < 0 { "; DDSTORE_HANDSHAKE_TIMEOUT_S" } else { "" }
            ),
        }
    }
}
