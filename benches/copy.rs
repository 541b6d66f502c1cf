//! Row copies across source/destination alignments: glibc's memcpy, the
//! library's `copy::copy_rows`, and the candidates it was chosen from. Run with
//! `cargo bench --bench copy` (`-- --quick` for fewer sizes and repeats). For
//! each row size and each (source, destination) offset past a page boundary
//! it copies a batch of distinct rows (about 32 MiB on each side, page-strided
//! so every row keeps the offsets) and prints GB/s (median of repeats) and
//! the ratio of each routine's worst offset pair to the best figure of any
//! routine at that size. `--hot` copies about 512 KiB a side instead (the
//! rows stay in cache). See docs/dev/performance.md ("Row copies").

use std::hint::black_box;
use std::time::Instant;

const PAGE: usize = 4096;
const OFFSETS: [usize; 6] = [0, 16, 64, 512, 2048, 4000];

type CopyFn = unsafe fn(*mut u8, *const u8, usize);

unsafe fn glibc(dst: *mut u8, src: *const u8, n: usize) {
    libc::memcpy(dst.cast(), src.cast(), n);
}

unsafe fn library(dst: *mut u8, src: *const u8, n: usize) {
    ddstore::copy::copy_rows(dst, src, n);
}

#[cfg(target_arch = "x86_64")]
mod cand {
    use std::arch::x86_64::*;

    /// `rep movsb` as is (what glibc runs for 2 KiB..1 MiB on this CPU).
    pub unsafe fn movsb(dst: *mut u8, src: *const u8, n: usize) {
        std::arch::asm!("rep movsb", inout("rcx") n => _, inout("rdi") dst => _, inout("rsi") src => _,
            options(nostack, preserves_flags));
    }

    /// `rep movsb` after a vector head that aligns the destination to 64.
    pub unsafe fn movsb_aligned(dst: *mut u8, src: *const u8, n: usize) {
        if n < 64 {
            return libc::memcpy(dst.cast(), src.cast(), n).cast::<()>().read_volatile();
        }
        std::ptr::copy_nonoverlapping(src, dst, 64);
        let head = 64 - (dst as usize & 63);
        movsb(dst.add(head), src.add(head), n - head);
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn avx2_nt(dst: *mut u8, src: *const u8, n: usize) {
        if n < 256 {
            return libc::memcpy(dst.cast(), src.cast(), n).cast::<()>().read_volatile();
        }
        let first = _mm256_loadu_si256(src.cast());
        let last = _mm256_loadu_si256(src.add(n - 32).cast());
        let head = 32 - (dst as usize & 31);
        let mut i = head;
        while i + 128 <= n {
            let s = src.add(i);
            let a = _mm256_loadu_si256(s.cast());
            let b = _mm256_loadu_si256(s.add(32).cast());
            let c = _mm256_loadu_si256(s.add(64).cast());
            let d = _mm256_loadu_si256(s.add(96).cast());
            let o = dst.add(i);
            _mm256_stream_si256(o.cast(), a);
            _mm256_stream_si256(o.add(32).cast(), b);
            _mm256_stream_si256(o.add(64).cast(), c);
            _mm256_stream_si256(o.add(96).cast(), d);
            i += 128;
        }
        _mm_sfence();
        while i + 32 <= n {
            _mm256_storeu_si256(dst.add(i).cast(), _mm256_loadu_si256(src.add(i).cast()));
            i += 32;
        }
        _mm256_storeu_si256(dst.cast(), first);
        _mm256_storeu_si256(dst.add(n - 32).cast(), last);
    }

    /// 32-byte unaligned loads, aligned stores, 128 bytes a step (AVX2).
    #[target_feature(enable = "avx2")]
    pub unsafe fn avx2(dst: *mut u8, src: *const u8, n: usize) {
        if n < 64 {
            return libc::memcpy(dst.cast(), src.cast(), n).cast::<()>().read_volatile();
        }
        let first = _mm256_loadu_si256(src.cast());
        let last = _mm256_loadu_si256(src.add(n - 32).cast());
        let mut i = 32 - (dst as usize & 31);
        while i + 128 <= n {
            let s = src.add(i);
            let a = _mm256_loadu_si256(s.cast());
            let b = _mm256_loadu_si256(s.add(32).cast());
            let c = _mm256_loadu_si256(s.add(64).cast());
            let d = _mm256_loadu_si256(s.add(96).cast());
            let o = dst.add(i);
            _mm256_store_si256(o.cast(), a);
            _mm256_store_si256(o.add(32).cast(), b);
            _mm256_store_si256(o.add(64).cast(), c);
            _mm256_store_si256(o.add(96).cast(), d);
            i += 128;
        }
        while i + 32 <= n {
            _mm256_store_si256(dst.add(i).cast(), _mm256_loadu_si256(src.add(i).cast()));
            i += 32;
        }
        _mm256_storeu_si256(dst.cast(), first);
        _mm256_storeu_si256(dst.add(n - 32).cast(), last);
    }
}

/// An anonymous page-aligned mapping, touched so no first-touch fault is timed.
struct Map(*mut u8, usize);

impl Map {
    fn new(len: usize) -> Map {
        // SAFETY: a fresh private mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(p != libc::MAP_FAILED, "mmap of {len} bytes");
        // SAFETY: len bytes just mapped.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 1, len) };
        Map(p.cast(), len)
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.0.cast(), self.1) };
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // --hot: a batch of about 512 KiB a side (rows stay in L2) instead of 32 MiB.
    let hot = std::env::args().any(|a| a == "--hot");
    let sizes: &[usize] = if quick { &[3072, 204800] } else { &[3072, 12800, 204800, 1 << 20] };
    let reps = if quick { 3 } else { 7 } * if hot { 30 } else { 1 };
    let mut routines: Vec<(&str, CopyFn)> = vec![("glibc memcpy", glibc), ("copy_rows (sse2)", library)];
    #[cfg(target_arch = "x86_64")]
    {
        routines.push(("rep movsb", cand::movsb));
        routines.push(("movsb, dst 64-aligned", cand::movsb_aligned));
        if is_x86_feature_detected!("avx2") {
            routines.push(("avx2 aligned stores", cand::avx2));
            routines.push(("avx2 non-temporal", cand::avx2_nt));
        }
    }
    println!("row copies: GB/s, median over {reps} passes of the rows; rows are (src offset, dst offset) bytes past a page boundary");
    for &n in sizes {
        let stride = n.div_ceil(PAGE) * PAGE + PAGE;
        let rows = ((if hot { 512 << 10 } else { 32 << 20 }) / stride).max(if hot { 1 } else { 8 });
        let group = ((64 << 10) / n).max(1);
        let src = Map::new(rows * stride);
        let dst = Map::new(rows * stride);
        let pairs = OFFSETS.len() * OFFSETS.len();
        let mut samples = vec![vec![Vec::new(); pairs]; routines.len()];
        // Routines interleave (each pass runs every routine at every pair),
        // so a change of load on a shared machine hits all of them alike.
        // Timed in groups of about 64 KiB: a group fits in a scheduler
        // slice, so most samples are clean and the median skips the rest.
        for _ in 0..reps {
            for p in 0..pairs {
                let (so, doff) = (OFFSETS[p / OFFSETS.len()], OFFSETS[p % OFFSETS.len()]);
                for (k, &(_, f)) in routines.iter().enumerate() {
                    for g in (0..rows).step_by(group) {
                        let end = (g + group).min(rows);
                        let start = Instant::now();
                        for r in g..end {
                            // SAFETY: offset + n <= stride inside both mappings.
                            unsafe { f(dst.0.add(r * stride + doff), src.0.add(r * stride + so), n) };
                        }
                        black_box(dst.0);
                        samples[k][p].push(start.elapsed().as_secs_f64() / (end - g) as f64);
                    }
                }
            }
        }
        let table: Vec<Vec<f64>> =
            samples.iter_mut().map(|s| s.iter_mut().map(|t| n as f64 / median(t) / 1e9).collect()).collect();
        let best = table.iter().flatten().cloned().fold(0.0, f64::max);
        println!("\nrow {n} B ({rows} rows a batch); best of any routine and offsets: {best:.1} GB/s");
        for (k, &(name, _)) in routines.iter().enumerate() {
            let worst = table[k].iter().cloned().fold(f64::MAX, f64::min);
            let own = table[k].iter().cloned().fold(0.0, f64::max);
            let at = table[k].iter().position(|&x| x == worst).unwrap();
            println!(
                "  {name:<22} worst {worst:5.1} GB/s at (src +{}, dst +{}): own best/worst {:.2}x, best of all/worst {:.2}x",
                OFFSETS[at / OFFSETS.len()],
                OFFSETS[at % OFFSETS.len()],
                own / worst,
                best / worst
            );
            print!("    src\\dst");
            for d in OFFSETS {
                print!("{d:>7}");
            }
            println!();
            for (a, so) in OFFSETS.iter().enumerate() {
                print!("    {so:>7}");
                for b in 0..OFFSETS.len() {
                    print!("{:>7.1}", table[k][a * OFFSETS.len() + b]);
                }
                println!();
            }
        }
    }
}
