//! Error strings, version helpers and the constant getters.
mod common;

use libfabric_sys::*;

#[test]
fn strerror_for_eagain() {
    let s = errstr(-(FI_EAGAIN as i32));
    println!("-FI_EAGAIN: {s}");
    assert!(!s.is_empty());
    assert_eq!(s, errstr(FI_EAGAIN as i32), "sign of the code must not matter");
    assert!(!errstr(FI_EAVAIL as i32).is_empty());
}

#[test]
fn versions_and_constants() {
    common::init_env();
    unsafe {
        let v = ddsfi_version(1, 17);
        assert_eq!(v, (1 << 16) | 17);
        assert_eq!((ddsfi_major(v), ddsfi_minor(v)), (1, 17));
        assert_eq!(ddsfi_header_version(), ddsfi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION));
        assert_eq!(ddsfi_addr_unspec(), u64::MAX);
        assert_eq!(ddsfi_addr_notavail(), u64::MAX);
        assert_eq!(ddsfi_key_notavail(), u64::MAX);
        if FI_MAJOR_VERSION < 2 {
            assert_eq!((ddsfi_mr_basic(), ddsfi_mr_scalable()), (1, 2));
        } else {
            assert_eq!((ddsfi_mr_basic(), ddsfi_mr_scalable()), (0, 0));
        }
    }
    let (major, _) = lib_version();
    assert!(major >= 1);
}
