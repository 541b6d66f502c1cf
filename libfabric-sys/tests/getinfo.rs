//! fi_getinfo with RMA-read hints finds the loopback providers we rely on.
mod common;

use common::*;
use libfabric_sys::*;

#[test]
fn finds_tcp_rxm_on_lo_and_shm() {
    let (major, minor) = lib_version();
    let (hmajor, hminor) = header_version();
    println!("libfabric runtime {major}.{minor}, headers {hmajor}.{hminor}");

    let info = getinfo_rma(None)
        .unwrap_or_else(|e| panic!("fi_getinfo(RDM, RMA|READ|REMOTE_READ) failed: {e} ({})", errstr(e)));
    let list = entries(info);
    for &fi in &list {
        println!("{}", describe(fi));
    }

    let tcp: Vec<_> = list.iter().copied().filter(|&fi| prov_name(fi) == "tcp;ofi_rxm").collect();
    assert!(!tcp.is_empty(), "provider tcp;ofi_rxm not found (is libfabric built with tcp and rxm?)");
    assert!(tcp.iter().any(|&fi| domain_name(fi) == "lo"), "tcp;ofi_rxm has no domain 'lo' although FI_TCP_IFACE=lo");
    for &fi in &tcp {
        assert_eq!(domain_name(fi), "lo", "tcp;ofi_rxm offered a non-loopback domain: {}", describe(fi));
    }
    assert!(
        list.iter().any(|&fi| prov_name(fi) == "shm"),
        "provider shm not found (is libfabric built with shm, and /dev/shm usable?)"
    );

    // Asking for one provider by name returns only that provider.
    for prov in ["tcp;ofi_rxm", "shm"] {
        let only = getinfo_rma(Some(prov)).unwrap_or_else(|e| panic!("fi_getinfo for {prov} failed: {}", errstr(e)));
        let got = entries(only);
        assert!(!got.is_empty());
        assert!(got.iter().all(|&fi| prov_name(fi) == prov));
        unsafe { ddsfi_freeinfo(only) };
    }
    unsafe { ddsfi_freeinfo(info) };
}
