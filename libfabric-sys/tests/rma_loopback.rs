//! One-sided RMA read between two RDM endpoints of one process, per provider.
//!
//! A serves a registered 64 KiB buffer (FI_REMOTE_READ); B reads pieces of it
//! with fi_read. The test honours the mr_mode bits the provider reports and
//! polls both CQs while waiting (manual-progress providers only move the
//! target's side when its CQ is read). Waits are bounded: 10 s, then fail.
mod common;

use common::*;
use libfabric_sys::*;
use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SRC_LEN: usize = 64 * 1024;
const LIMIT: Duration = Duration::from_secs(10);
/// (offset in A's buffer, length): includes 1 byte, 4 KiB and 60000 bytes.
const PIECES: [(usize, usize); 6] = [(0, 1), (100, 4096), (5000, 60000), (SRC_LEN - 1, 1), (0, SRC_LEN), (777, 12345)];

/// Keeps the two provider tests from running at the same time (readable
/// output, timings not disturbed by the other test on 2 cores).
static SERIAL: Mutex<()> = Mutex::new(());

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 8)) as u8
}

unsafe fn as_fid<T>(obj: *mut T) -> *mut fid {
    // Every fid_* struct begins with `struct fid`.
    obj.cast()
}

/// One endpoint with its own CQ and AV.
struct Side {
    ep: *mut fid_ep,
    cq: *mut fid_cq,
    av: *mut fid_av,
}

impl Side {
    unsafe fn open(domain: *mut fid_domain, fi: *mut fi_info, cq_wait: fi_wait_obj) -> Side {
        let mut cq_attr =
            fi_cq_attr { size: 128, format: FI_CQ_FORMAT_CONTEXT, wait_obj: cq_wait, ..Default::default() };
        let mut cq = ptr::null_mut();
        check!(ddsfi_cq_open(domain, &mut cq_attr, &mut cq, ptr::null_mut()), "fi_cq_open");
        let mut av_attr = fi_av_attr { type_: FI_AV_TABLE, count: 4, ..Default::default() };
        let mut av = ptr::null_mut();
        check!(ddsfi_av_open(domain, &mut av_attr, &mut av, ptr::null_mut()), "fi_av_open");
        let mut ep = ptr::null_mut();
        check!(ddsfi_endpoint(domain, fi, &mut ep, ptr::null_mut()), "fi_endpoint");
        check!(ddsfi_ep_bind(ep, as_fid(av), 0), "fi_ep_bind(av)");
        check!(ddsfi_ep_bind(ep, as_fid(cq), FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
        check!(ddsfi_enable(ep), "fi_enable");
        Side { ep, cq, av }
    }

    unsafe fn name(&self) -> Vec<u8> {
        let mut buf = vec![0u8; 256];
        let mut len = buf.len();
        let mut ret = ddsfi_getname(as_fid(self.ep), buf.as_mut_ptr().cast(), &mut len);
        if ret == -(FI_ETOOSMALL as i32) {
            buf.resize(len, 0);
            ret = ddsfi_getname(as_fid(self.ep), buf.as_mut_ptr().cast(), &mut len);
        }
        check!(ret, "fi_getname");
        buf.truncate(len);
        buf
    }

    unsafe fn insert(&self, name: &[u8]) -> fi_addr_t {
        let mut addr: fi_addr_t = addr_unspec();
        let n =
            check!(ddsfi_av_insert(self.av, name.as_ptr().cast(), 1, &mut addr, 0, ptr::null_mut()), "fi_av_insert");
        assert_eq!(n, 1, "fi_av_insert inserted {n} addresses");
        addr
    }

    /// Reads available completions; returns their op_context values.
    unsafe fn poll(&self, who: &str) -> Vec<*mut c_void> {
        let mut entries = [fi_cq_entry::default(); 16];
        let n = ddsfi_cq_read(self.cq, entries.as_mut_ptr().cast(), entries.len());
        if n > 0 {
            return entries[..n as usize].iter().map(|e| e.op_context).collect();
        }
        if n == -(FI_EAGAIN as isize) {
            return Vec::new();
        }
        if n == -(FI_EAVAIL as isize) {
            let mut err = fi_cq_err_entry::default();
            ddsfi_cq_readerr(self.cq, &mut err, 0);
            let mut buf = [0 as std::os::raw::c_char; 256];
            let text = ddsfi_cq_strerror(self.cq, err.prov_errno, err.err_data, buf.as_mut_ptr(), buf.len());
            panic!("{who}: completion error {} ({}), provider: {}", err.err, errstr(err.err), cstr_or(text, "?"));
        }
        panic!("{who}: fi_cq_read failed: {n} ({})", errstr(n as i32));
    }

    unsafe fn close(self) {
        check!(ddsfi_close(as_fid(self.ep)), "fi_close(ep)");
        check!(ddsfi_close(as_fid(self.av)), "fi_close(av)");
        check!(ddsfi_close(as_fid(self.cq)), "fi_close(cq)");
    }
}

/// Registers `len` bytes at `buf`; binds/enables for FI_MR_ENDPOINT.
unsafe fn register(
    domain: *mut fid_domain,
    ep: *mut fid_ep,
    mr_mode: i32,
    buf: *const u8,
    len: usize,
    access: u64,
    wanted_key: u64,
) -> *mut fid_mr {
    let key = if mr_mode & FI_MR_PROV_KEY != 0 { 0 } else { wanted_key };
    let mut mr = ptr::null_mut();
    check!(ddsfi_mr_reg(domain, buf.cast(), len, access, 0, key, 0, &mut mr, ptr::null_mut()), "fi_mr_reg");
    if mr_mode & FI_MR_ENDPOINT != 0 {
        check!(ddsfi_mr_bind(mr, as_fid(ep), 0), "fi_mr_bind");
        check!(ddsfi_mr_enable(mr), "fi_mr_enable");
    }
    mr
}

/// B's reads of A's registered buffer, with one fi_context2 per slot.
struct Reader<'a> {
    prov: &'a str,
    a: &'a Side,
    b: &'a Side,
    peer: fi_addr_t,
    base: u64,
    key: u64,
    desc: *mut c_void,
    ctx: Vec<fi_context2>,
    busy: Vec<bool>,
    deadline: Instant,
}

impl Reader<'_> {
    fn check_deadline(&self, what: &str) {
        if Instant::now() > self.deadline {
            panic!("[{}] timed out after {LIMIT:?} {what}", self.prov);
        }
    }

    /// Posts fi_read(len bytes at remote offset `off`) into `dst` using slot `slot`.
    unsafe fn post(&mut self, slot: usize, dst: *mut u8, off: usize, len: usize) {
        assert!(!self.busy[slot]);
        self.busy[slot] = true;
        let context: *mut c_void = (&mut self.ctx[slot] as *mut fi_context2).cast();
        loop {
            let ret =
                ddsfi_read(self.b.ep, dst.cast(), len, self.desc, self.peer, self.base + off as u64, self.key, context);
            if ret == 0 {
                return;
            }
            assert_eq!(
                ret,
                -(FI_EAGAIN as isize),
                "[{}] fi_read(off {off}, len {len}): {}",
                self.prov,
                errstr(ret as i32)
            );
            self.reap(true);
            self.check_deadline("posting a read");
            std::thread::yield_now();
        }
    }

    /// Polls B's CQ (and A's if `poll_a`); returns the number of completions.
    unsafe fn reap(&mut self, poll_a: bool) -> usize {
        let got = self.b.poll("B");
        for c in &got {
            let slot = self.ctx.iter().position(|x| x as *const fi_context2 as *mut c_void == *c);
            let slot = slot.expect("completion with an unknown op_context");
            assert!(self.busy[slot], "duplicate completion for slot {slot}");
            self.busy[slot] = false;
        }
        if poll_a {
            let extra = self.a.poll("A");
            assert!(extra.is_empty(), "serving CQ reported {} unexpected completions", extra.len());
        }
        got.len()
    }

    fn idle(&self) -> bool {
        !self.busy.contains(&true)
    }

    /// Polls until no read is outstanding or `until` passes; true when idle.
    unsafe fn wait(&mut self, poll_a: bool, until: Instant) -> bool {
        while !self.idle() {
            if Instant::now() > until {
                return false;
            }
            if self.reap(poll_a) == 0 {
                self.check_deadline("waiting for read completions");
                std::thread::yield_now();
            }
        }
        true
    }

    /// Completions within 200 ms with only B's CQ polled; then finishes with both.
    unsafe fn probe_b_only(&mut self) -> bool {
        let alone = self.wait(false, Instant::now() + Duration::from_millis(200));
        self.wait(true, self.deadline);
        alone
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rma_loopback(prov: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _watchdog = Watchdog::arm(&format!("RMA loopback on {prov}"), Duration::from_secs(60));
    let info = getinfo_rma(Some(prov))
        .unwrap_or_else(|e| panic!("provider {prov} not available for RDM + RMA read: {e} ({})", errstr(e)));
    // For tcp there is one entry per address family; any entry on `lo` works.
    let fi = entries(info)
        .into_iter()
        .find(|&fi| prov != "tcp;ofi_rxm" || domain_name(fi) == "lo")
        .unwrap_or_else(|| panic!("{prov}: no usable fi_info entry"));
    println!("[{prov}] {}", describe(fi));

    unsafe {
        let mr_mode = (*(*fi).domain_attr).mr_mode;
        let t = Instant::now();
        let mut fabric = ptr::null_mut();
        check!(ddsfi_fabric((*fi).fabric_attr, &mut fabric, ptr::null_mut()), "fi_fabric");
        let mut domain = ptr::null_mut();
        check!(ddsfi_domain(fabric, fi, &mut domain, ptr::null_mut()), "fi_domain");
        let t_domain = t.elapsed();

        // A serves (polled CQ); B reads (CQ with a wait object, for fi_cq_sread).
        let a = Side::open(domain, fi, FI_WAIT_NONE);
        let b = Side::open(domain, fi, FI_WAIT_UNSPEC);
        let t_eps = t.elapsed();
        let peer = b.insert(&a.name());
        a.insert(&b.name());

        let src: Vec<u8> = (0..SRC_LEN).map(pattern).collect();
        let src_mr = register(domain, a.ep, mr_mode, src.as_ptr(), SRC_LEN, FI_REMOTE_READ, 1);
        let key = ddsfi_mr_key(src_mr);
        assert_ne!(key, key_notavail(), "fi_mr_key returned FI_KEY_NOTAVAIL");
        let base = if mr_mode & FI_MR_VIRT_ADDR != 0 { src.as_ptr() as u64 } else { 0 };

        let dst_len: usize = PIECES.iter().map(|p| p.1).sum();
        let mut dst = vec![0u8; dst_len];
        let (dst_mr, desc) = if mr_mode & FI_MR_LOCAL != 0 {
            let mr = register(domain, b.ep, mr_mode, dst.as_ptr(), dst_len, FI_READ, 2);
            (mr, ddsfi_mr_desc(mr))
        } else {
            (ptr::null_mut(), ptr::null_mut())
        };
        println!(
            "[{prov}] setup: fabric+domain {:.1} ms, two endpoints {:.1} ms, total {:.1} ms; \
             key {key:#x}, remote base {base:#x}, local desc {}",
            ms(t_domain),
            ms(t_eps - t_domain),
            ms(t.elapsed()),
            if desc.is_null() { "not needed" } else { "registered" }
        );

        let mut rd = Reader {
            prov,
            a: &a,
            b: &b,
            peer,
            base,
            key,
            desc,
            ctx: vec![fi_context2::default(); PIECES.len()],
            busy: vec![false; PIECES.len()],
            deadline: Instant::now() + LIMIT,
        };

        // 1. First read on a fresh pair (includes any connection setup).
        let t = Instant::now();
        rd.post(0, dst.as_mut_ptr(), PIECES[0].0, PIECES[0].1);
        let cold_alone = rd.probe_b_only();
        let t_first = t.elapsed();

        // 2. All pieces outstanding at once; dst slices back to back.
        let t = Instant::now();
        let mut doff = 0;
        for (slot, &(off, len)) in PIECES.iter().enumerate() {
            rd.post(slot, dst.as_mut_ptr().add(doff), off, len);
            doff += len;
        }
        rd.wait(true, rd.deadline);
        let t_batch = t.elapsed();
        let mut doff = 0;
        for (i, &(off, len)) in PIECES.iter().enumerate() {
            let got = &dst[doff..doff + len];
            if got != &src[off..off + len] {
                let bad = got.iter().zip(&src[off..]).position(|(x, y)| x != y).unwrap();
                panic!("[{prov}] piece {i} (offset {off}, len {len}) differs at byte {bad}");
            }
            doff += len;
        }

        // 3. Warm connection: does a read complete with only B's CQ polled?
        dst[..4096].fill(0);
        rd.post(0, dst.as_mut_ptr(), 100, 4096);
        let warm_alone = rd.probe_b_only();
        assert_eq!(&dst[..4096], &src[100..4196]);
        println!(
            "[{prov}] first read {:.2} ms; {} pieces ({dst_len} bytes) in {:.2} ms; \
             with only B's CQ polled: cold read {}, warm read {}",
            ms(t_first),
            PIECES.len(),
            ms(t_batch),
            if cold_alone { "completed" } else { "stalled (serving CQ must be polled)" },
            if warm_alone { "completed" } else { "stalled (serving CQ must be polled)" },
        );

        // 4. Sequential latency per size, both CQs polled.
        for &len in &[1usize, 4096, 60000] {
            let t = Instant::now();
            for _ in 0..20 {
                rd.post(0, dst.as_mut_ptr(), 0, len);
                rd.wait(true, rd.deadline);
            }
            assert_eq!(&dst[..len], &src[..len]);
            println!("[{prov}] read {len:>6} B: {:8.1} us avg over 20", t.elapsed().as_secs_f64() * 1e6 / 20.0);
        }

        // 5. fi_cq_sread on an idle CQ with a wait object times out with -FI_EAGAIN.
        // Not on shm: in libfabric 1.17 its CQ wait object is FI_WAIT_YIELD and
        // fi_cq_sread spins in sched_yield() past the timeout (never returns).
        if prov == "shm" {
            println!("[{prov}] fi_cq_sread not exercised (ignores its timeout on shm 1.17)");
        } else {
            let mut entry = fi_cq_entry::default();
            let t = Instant::now();
            let ret = ddsfi_cq_sread(b.cq, (&mut entry as *mut fi_cq_entry).cast(), 1, ptr::null(), 50);
            println!(
                "[{prov}] fi_cq_sread(idle, 50 ms) -> {ret} ({}) after {:.1} ms",
                errstr(ret as i32),
                ms(t.elapsed())
            );
            assert_eq!(ret, -(FI_EAGAIN as isize), "[{prov}] fi_cq_sread on an idle CQ");
        }

        drop(rd);
        if !dst_mr.is_null() {
            check!(ddsfi_close(as_fid(dst_mr)), "fi_close(dst mr)");
        }
        check!(ddsfi_close(as_fid(src_mr)), "fi_close(src mr)");
        b.close();
        a.close();
        check!(ddsfi_close(as_fid(domain)), "fi_close(domain)");
        check!(ddsfi_close(as_fid(fabric)), "fi_close(fabric)");
        ddsfi_freeinfo(info);
        drop(src);
    }
}

#[test]
fn rma_read_tcp_rxm() {
    rma_loopback("tcp;ofi_rxm");
}

#[test]
fn rma_read_shm() {
    rma_loopback("shm");
}
