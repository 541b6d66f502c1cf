//! Build script: gives the shared library its SONAME, generates the C header,
//! and records which MPI's mpi.h the library is compiled against.
//!
//! The header is written to `$OUT_DIR/ddstore.h` on every build; a unit test
//! (`capi::header_is_current`) compares it with the committed `include/ddstore.h`.
//! `make header` (DDSTORE_UPDATE_HEADER=1) copies it over the committed one.

use std::io::Write;
use std::process::{Command, Stdio};
use std::{env, path::PathBuf};

/// The MPI family and version that `$MPICC`'s mpi.h declares (the compiler
/// mpi-sys also uses), as "MPICH 4.0.2", "Open MPI 4.1.4", ...; empty when
/// the wrapper cannot preprocess. dds_create compares it with the MPI that
/// answers at run time (src/mpi.rs), to name a mismatch instead of failing
/// inside MPI.
fn mpi_header_family() -> String {
    let cc = env::var("MPICC").unwrap_or_else(|_| "mpicc".to_string());
    let Ok(mut child) = Command::new(&cc)
        .args(["-E", "-dM", "-x", "c", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        return String::new();
    };
    let _ = child.stdin.take().map(|mut i| i.write_all(b"#include <mpi.h>\n"));
    let Ok(out) = child.wait_with_output() else { return String::new() };
    let text = String::from_utf8_lossy(&out.stdout);
    let def = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    if let (Some(a), Some(b), Some(c)) =
        (def("OMPI_MAJOR_VERSION"), def("OMPI_MINOR_VERSION"), def("OMPI_RELEASE_VERSION"))
    {
        format!("Open MPI {a}.{b}.{c}")
    } else if let Some(v) = def("I_MPI_VERSION") {
        format!("Intel MPI {v}")
    } else if let Some(v) = def("MVAPICH2_VERSION") {
        format!("MVAPICH {v}")
    } else if let Some(v) = def("MPICH_VERSION") {
        format!("MPICH {v}")
    } else {
        String::new()
    }
}

fn main() {
    let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    // ABI version 0 while the crate is 0.x: bump the SONAME with breaking changes.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libddstore.so.{major}");

    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rustc-env=DDSTORE_MPI_HEADER={}", mpi_header_family());

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
        .with_src(root.join("src/capi/ragged.rs"))
        .with_src(root.join("src/capi/snapshot.rs"))
        .with_src(root.join("src/capi/blob.rs"))
        .generate()
        .expect("cbindgen could not generate include/ddstore.h");
    bindings.write_to_file(&out);
    if env::var_os("DDSTORE_UPDATE_HEADER").is_some() {
        bindings.write_to_file(root.join("include/ddstore.h"));
    }
}
