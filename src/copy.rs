//! The copy every row takes when it travels by memory copy: node-local reads
//! (this rank's shard or a same-node peer's mapped segment), the unpacking
//! of method-0 exchanges, and the chunks staged for device buffers.
//!
//! Why not plain `memcpy`: glibc 2.36 on AMD Zen (this project's test machine,
//! Frontier, Perlmutter) copies 2 KiB..1 MiB with `rep movsb`, and that
//! instruction runs several times slower when the destination sits a few
//! bytes past the source's position in a page (e.g. a page-aligned shard
//! row into a numpy array, whose data starts 16 bytes past a page). A vector
//! loop with unaligned loads and aligned stores runs at the same speed at
//! every alignment. docs/dev/performance.md ("Row copies") has the measured
//! matrix (`cargo bench --bench copy`) this choice rests on.

/// Below this many bytes glibc's memcpy does not use `rep movsb` on any CPU
/// glibc knows (its smallest threshold is 2 KiB), so it is used as is.
const VECTOR_MIN: usize = 2048;

/// Copies `n` bytes from `src` to `dst`, as fast at every alignment.
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`: `src` readable and `dst` writable for
/// `n` bytes, the two ranges disjoint. Nothing outside them is touched.
#[inline]
pub unsafe fn copy_rows(dst: *mut u8, src: *const u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if n >= VECTOR_MIN && x86::is_amd() {
        // SAFETY: the caller's contract; n >= 16.
        return unsafe { x86::copy_vector(dst, src, n) };
    }
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    /// True on AMD CPUs, where glibc's `rep movsb` path was measured slow at
    /// some alignments. Elsewhere (Intel, whose `rep movsb` glibc tunes for)
    /// the library's memcpy is kept.
    #[inline]
    pub fn is_amd() -> bool {
        static AMD: OnceLock<bool> = OnceLock::new();
        *AMD.get_or_init(|| {
            // SAFETY: cpuid leaf 0 exists on every x86_64 CPU (a safe fn in newer Rust).
            #[allow(unused_unsafe)]
            let r = unsafe { __cpuid(0) };
            [r.ebx, r.edx, r.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163] // "AuthenticAMD"
        })
    }

    /// Unaligned 16-byte loads, 16-byte aligned stores, four a step (SSE2,
    /// which every x86_64 CPU has). The unaligned first and last 16 bytes
    /// are stored apart; they may overlap aligned stores, with the same
    /// bytes, since the ranges are disjoint. 16-byte loads measured faster
    /// than 32-byte ones at the offsets rows and numpy arrays have (multiples
    /// of 16): they never split a cache line there.
    ///
    /// # Safety
    /// `n` >= 16; as `copy_rows` otherwise.
    pub unsafe fn copy_vector(dst: *mut u8, src: *const u8, n: usize) {
        debug_assert!(n >= 16);
        let first = _mm_loadu_si128(src.cast());
        let last = _mm_loadu_si128(src.add(n - 16).cast());
        // 1..=16: the first aligned store covers [i, i + 16).
        let mut i = 16 - (dst as usize & 15);
        while i + 64 <= n {
            let s = src.add(i);
            let a = _mm_loadu_si128(s.cast());
            let b = _mm_loadu_si128(s.add(16).cast());
            let c = _mm_loadu_si128(s.add(32).cast());
            let d = _mm_loadu_si128(s.add(48).cast());
            let o = dst.add(i);
            _mm_store_si128(o.cast(), a);
            _mm_store_si128(o.add(16).cast(), b);
            _mm_store_si128(o.add(32).cast(), c);
            _mm_store_si128(o.add(48).cast(), d);
            i += 64;
        }
        while i + 16 <= n {
            _mm_store_si128(dst.add(i).cast(), _mm_loadu_si128(src.add(i).cast()));
            i += 16;
        }
        // [i, n) lies inside [n - 16, n), and [0, head) inside [0, 16).
        _mm_storeu_si128(dst.cast(), first);
        _mm_storeu_si128(dst.add(n - 16).cast(), last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern that differs at every byte position within a page.
    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[3] ^ seed).collect()
    }

    /// Copies `n` bytes from offset `so` of a source to offset `doff` of a
    /// destination with 64 sentinel bytes on each side, through `f`, and
    /// checks the bytes and the sentinels.
    fn check(f: Copy, n: usize, so: usize, doff: usize) {
        let src = pattern(so + n, 0x5a);
        let mut dst = vec![0xa5u8; 64 + doff + n + 64];
        // SAFETY: both ranges lie inside their vectors and are disjoint.
        unsafe { f(dst.as_mut_ptr().add(64 + doff), src.as_ptr().add(so), n) };
        assert_eq!(&dst[64 + doff..64 + doff + n], &src[so..], "n {n}, src +{so}, dst +{doff}");
        assert!(dst[..64 + doff].iter().all(|&b| b == 0xa5), "written before dst: n {n}, src +{so}, dst +{doff}");
        assert!(dst[64 + doff + n..].iter().all(|&b| b == 0xa5), "written past dst: n {n}, src +{so}, dst +{doff}");
    }

    type Copy = unsafe fn(*mut u8, *const u8, usize);

    /// `copy_rows`, and its vector loop forced at every length it takes
    /// (copy_rows picks it only on AMD), so both are tested on any x86_64.
    fn routines() -> Vec<Copy> {
        #[cfg(target_arch = "x86_64")]
        {
            unsafe fn vector(dst: *mut u8, src: *const u8, n: usize) {
                // SAFETY: the caller's ranges; n >= 16 for the loop.
                unsafe {
                    if n >= 16 {
                        x86::copy_vector(dst, src, n)
                    } else {
                        std::ptr::copy_nonoverlapping(src, dst, n)
                    }
                }
            }
            vec![copy_rows, vector]
        }
        #[cfg(not(target_arch = "x86_64"))]
        vec![copy_rows]
    }

    #[test]
    fn short_lengths_at_every_alignment() {
        for n in 0..=300 {
            for so in 0..64 {
                for doff in 0..64 {
                    check(copy_rows, n, so, doff);
                }
            }
        }
    }

    #[test]
    fn lengths_around_the_vector_threshold() {
        for n in VECTOR_MIN - 40..VECTOR_MIN + 300 {
            for so in (0..64).step_by(5) {
                for doff in (0..64).step_by(3) {
                    for f in routines() {
                        check(f, n, so, doff);
                    }
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_loop_from_its_smallest_length() {
        // The loop itself (copy_rows calls it from VECTOR_MIN on, on AMD
        // only): every length it accepts up to a few steps, at every alignment.
        unsafe fn vector(dst: *mut u8, src: *const u8, n: usize) {
            // SAFETY: n >= 16; the ranges come from `check`.
            unsafe { x86::copy_vector(dst, src, n) }
        }
        for n in 16..=400 {
            for so in 0..32 {
                for doff in 0..32 {
                    check(vector, n, so, doff);
                }
            }
        }
    }

    #[test]
    fn large_rows_at_page_offsets() {
        for n in [3072, 12800, 204800, 1 << 20, (1 << 20) + 13] {
            for so in [0, 16, 64, 512, 2048, 4000, 4095] {
                for doff in [0, 16, 64, 512, 2048, 4000, 4095] {
                    for f in routines() {
                        check(f, n, so, doff);
                    }
                }
            }
        }
    }

    /// Source and destination against inaccessible pages: a read or write
    /// one byte outside either range faults.
    #[test]
    fn touches_nothing_outside_the_ranges() {
        const PAGE: usize = 4096;
        // [guard][data: 4 pages][guard]
        unsafe fn fenced() -> *mut u8 {
            // SAFETY: a fresh mapping whose outer pages are then made inaccessible.
            unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    6 * PAGE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert!(p != libc::MAP_FAILED);
                let p = p as *mut u8;
                assert_eq!(libc::mprotect(p.cast(), PAGE, libc::PROT_NONE), 0);
                assert_eq!(libc::mprotect(p.add(5 * PAGE).cast(), PAGE, libc::PROT_NONE), 0);
                p.add(PAGE)
            }
        }
        // SAFETY: the data pages of two fenced mappings, freed at the end.
        unsafe {
            let (s, d) = (fenced(), fenced());
            let pat = pattern(4 * PAGE, 7);
            std::ptr::copy_nonoverlapping(pat.as_ptr(), s, 4 * PAGE);
            for n in (0..=300).chain([2047, 2048, 2049, 3000, 4 * PAGE - 1, 4 * PAGE]) {
                // Both ranges flush against the front guard, then the back one.
                for (so, doff) in [(0, 0), (4 * PAGE - n, 4 * PAGE - n), (0, 4 * PAGE - n), (4 * PAGE - n, 0)] {
                    for f in routines() {
                        std::ptr::write_bytes(d, 0, 4 * PAGE);
                        f(d.add(doff), s.add(so), n);
                        assert_eq!(std::slice::from_raw_parts(d.add(doff), n), &pat[so..so + n], "n {n}");
                    }
                }
            }
            libc::munmap(s.sub(PAGE).cast(), 6 * PAGE);
            libc::munmap(d.sub(PAGE).cast(), 6 * PAGE);
        }
    }
}
