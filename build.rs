//! Build script: gives the shared library its SONAME and generates the C header.
//!
//! The header is written to `$OUT_DIR/ddstore.h` on every build; a unit test
//! (`capi::header_is_current`) compares it with the committed `include/ddstore.h`.
//! `make header` (DDSTORE_UPDATE_HEADER=1) copies it over the committed one.

use std::{env, path::PathBuf};

fn main() {
    let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    // ABI version 0 while the crate is 0.x: bump the SONAME with breaking changes.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libddstore.so.{major}");

    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("ddstore.h");
    println!("cargo:rerun-if-changed=src/capi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=DDSTORE_UPDATE_HEADER");

    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/capi/types.rs"))
        .with_src(root.join("src/capi/library.rs"))
        .with_src(root.join("src/capi/store.rs"))
        .with_src(root.join("src/capi/vars.rs"))
        .with_src(root.join("src/capi/reads.rs"))
        .with_src(root.join("src/capi/requests.rs"))
        .generate()
        .expect("cbindgen could not generate include/ddstore.h");
    bindings.write_to_file(&out);
    if env::var_os("DDSTORE_UPDATE_HEADER").is_some() {
        bindings.write_to_file(root.join("include/ddstore.h"));
    }
}
