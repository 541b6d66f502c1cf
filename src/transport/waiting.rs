//! How a batched read waits for its transfers, chosen by the thread it runs
//! on.
//!
//! On the caller's own thread (`dds_get_batch`) a method-0 one-sided batch
//! waits in `MPI_Win_flush`, which MPICH busy-polls: the caller wants the
//! rows and has nothing else to run. On a request thread
//! (`dds_get_batch_start`) the caller is computing, or about to, on the same
//! cores, so the batch uses request-based gets and tests them, yielding the
//! core between tests (`mpi_rma`). A request thread spinning in the flush
//! held the caller's core when the caller's step ended: prefetched 3 KiB
//! one-sided steps took 2.3-7x max(step, read) that way, 1.15-1.7x yielding
//! (2 ranks on 2 cores; docs/dev/performance.md, "The training-loop figure").
//! The fabric engine already yields between empty polls on every thread.

use std::cell::Cell;

thread_local! {
    static ON_REQUEST_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a request thread.
pub fn mark_request_thread() {
    ON_REQUEST_THREAD.with(|p| p.set(true));
}

/// True on a request thread: its reads wait by testing, not by blocking.
pub fn on_request_thread() -> bool {
    ON_REQUEST_THREAD.with(|p| p.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_marked_threads_are_request_threads() {
        assert!(!on_request_thread());
        std::thread::spawn(|| {
            assert!(!on_request_thread());
            mark_request_thread();
            assert!(on_request_thread());
        })
        .join()
        .unwrap();
        assert!(!on_request_thread());
    }
}
