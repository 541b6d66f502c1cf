//! Staging rows through host memory: chunk planning (pure, any build) and,
//! with CUDA, the pool of pinned bounce buffers and the staged copy.
//!
//! A read into device memory lands, chunk by chunk, in a pinned host buffer;
//! each chunk is then queued as an asynchronous host-to-device copy followed
//! by an event. A buffer goes back to the pool with its event and is handed
//! out again only once that event has completed, so the next read can fill
//! another buffer while the previous copy is still running.

/// Splits `rows` rows of `row_bytes` bytes into consecutive chunks of at most
/// `cap` bytes, as `(first_row, rows)`. A row larger than `cap` is a chunk of
/// its own (the bounce buffer grows for it). No rows: no chunks.
pub fn plan_chunks(rows: usize, row_bytes: usize, cap: usize) -> Vec<(usize, usize)> {
    if rows == 0 {
        return Vec::new();
    }
    let per = cap.checked_div(row_bytes).map_or(rows, |p| p.max(1));
    (0..rows).step_by(per).map(|first| (first, per.min(rows - first))).collect()
}

#[cfg(feature = "cuda")]
pub use with_cuda::*;

#[cfg(feature = "cuda")]
mod with_cuda {
    use parking_lot::Mutex;

    use super::plan_chunks;
    use crate::error::Result;
    use crate::gpu::cuda::{Driver, Event};
    use crate::gpu::Stream;

    /// Most buffers the pool keeps between reads; more may exist while
    /// threads read at once, and the extra ones are freed afterwards.
    const KEEP: usize = 8;

    struct Bounce {
        ptr: *mut u8,
        cap: usize,
        /// The copy that last read this buffer.
        busy: Option<Event>,
    }

    // SAFETY: pinned host memory and an event handle, owned by one holder at a time.
    unsafe impl Send for Bounce {}

    static POOL: Mutex<Vec<Bounce>> = Mutex::new(Vec::new());

    impl Bounce {
        fn idle(&self) -> bool {
            // A failed query counts as busy; `wait` will report it.
            self.busy.as_ref().map_or(true, |e| e.done().unwrap_or(false))
        }
    }

    /// A buffer of at least `bytes`: an idle pooled one, else a new one, else
    /// (when the pool is full of busy buffers) the first large enough after
    /// its copy completes.
    fn acquire(d: &Driver, bytes: usize) -> Result<Bounce> {
        let mut pool = POOL.lock();
        if let Some(i) = pool.iter().position(|b| b.cap >= bytes && b.idle()) {
            return Ok(pool.swap_remove(i));
        }
        let waitable = pool.iter().position(|b| b.cap >= bytes);
        if let (true, Some(i)) = (pool.len() >= KEEP, waitable) {
            let b = pool.swap_remove(i);
            drop(pool);
            if let Some(e) = &b.busy {
                e.wait()?;
            }
            return Ok(b);
        }
        drop(pool);
        Ok(Bounce { ptr: d.host_alloc(bytes)?, cap: bytes, busy: None })
    }

    /// Returns a buffer; beyond `KEEP` buffers the smallest is freed once idle.
    fn release(d: &Driver, b: Bounce) {
        let mut pool = POOL.lock();
        pool.push(b);
        if pool.len() > KEEP {
            let i = (0..pool.len()).min_by_key(|&i| pool[i].cap).unwrap_or(0);
            let old = pool.swap_remove(i);
            drop(pool);
            if let Some(e) = &old.busy {
                let _ = e.wait();
            }
            // SAFETY: the copy reading it has completed.
            unsafe { d.host_free(old.ptr) };
        }
    }

    /// Reads `rows` rows of `row_bytes` into device memory at `dst` (device
    /// `dev`), chunk by chunk: `fill(host, first_row, rows)` writes a chunk
    /// into a bounce buffer, which is then copied on `stream` (NULL: the
    /// legacy default stream). Without a stream the call returns once the
    /// copies have completed; with one it returns at once and the copies run
    /// in the stream's order.
    #[allow(clippy::too_many_arguments)] // the chunk plan's inputs, the device and the fill callback
    pub fn read_staged(
        d: &Driver,
        dev: i32,
        dst: *mut u8,
        rows: usize,
        row_bytes: usize,
        cap: usize,
        stream: Option<Stream>,
        mut fill: impl FnMut(*mut u8, usize, usize) -> Result<()>,
    ) -> Result<()> {
        d.on_device(dev, || {
            for (first, n) in plan_chunks(rows, row_bytes, cap) {
                let bytes = n * row_bytes;
                let mut b = acquire(d, bytes)?;
                let copied = fill(b.ptr, first, n).and_then(|_| {
                    // SAFETY: dst holds rows x row_bytes device bytes (checked
                    // by the caller); b leaves the pool until the event completes.
                    unsafe { d.copy_to_device(dst.add(first * row_bytes), b.ptr, bytes, stream) }
                });
                let failed = copied.as_ref().err().cloned();
                b.busy = copied.ok();
                release(d, b);
                if let Some(e) = failed {
                    return Err(e);
                }
            }
            if stream.is_none() {
                // Copies on one stream run in order: this waits for all of
                // them, and for nothing else on the device.
                d.record(None)?.wait()?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::plan_chunks;

    #[test]
    fn chunks_cover_every_row_once_within_the_cap() {
        for &(rows, rb, cap) in
            &[(10, 8, 32), (10, 8, 80), (10, 8, 81), (1, 8, 4), (7, 3, 10), (1000, 24, 4096), (5, 0, 16)]
        {
            let plan = plan_chunks(rows, rb, cap);
            let mut next = 0;
            for &(first, n) in &plan {
                assert_eq!(first, next, "{rows} rows x {rb} B, cap {cap}: {plan:?}");
                assert!(n >= 1);
                assert!(n * rb <= cap.max(rb), "chunk of {n} rows exceeds cap {cap}");
                next += n;
            }
            assert_eq!(next, rows);
        }
    }

    #[test]
    fn chunk_counts() {
        assert_eq!(plan_chunks(0, 8, 64), vec![]);
        assert_eq!(plan_chunks(10, 8, 32), vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(plan_chunks(3, 100, 10), vec![(0, 1), (1, 1), (2, 1)]);
        assert_eq!(plan_chunks(4, 16, 1 << 20), vec![(0, 4)]);
    }
}
