//! Finds libfabric, compiles the C shim and generates the bindings.
//!
//! Lookup order: pkg-config (`libfabric.pc`; set `LIBFABRIC_NO_PKG_CONFIG=1`
//! to skip it), then `$LIBFABRIC_DIR` (include/ and lib64/, lib/ or
//! lib/<arch>-linux-gnu/), then `/usr`.

use bindgen::callbacks::{IntKind, ParseCallbacks};
use std::env;
use std::path::{Path, PathBuf};

/// Gives `#define` constants the Rust type of the C field they go into, instead
/// of bindgen's "smallest that fits" guess (which made FI_RMA a u32 but
/// FI_SOURCE a u64): capability/mode/flag/order bits are `uint64_t` in the API,
/// `FI_MR_*` mode bits go into `int mr_mode` (but FI_MR_DMABUF and the like are
/// 64-bit registration flags). Error numbers, versions, log levels and offsets
/// keep bindgen's default.
#[derive(Debug)]
struct MacroTypes;

impl ParseCallbacks for MacroTypes {
    fn int_macro(&self, name: &str, value: i64) -> Option<IntKind> {
        let keep_default = !name.starts_with("FI_")
            || value < 0
            || (name.starts_with("FI_E") && value < 1024)
            || name.ends_with("_VERSION")
            || name.ends_with("_OFFSET")
            || name.starts_with("FI_LOG_")
            || name.starts_with("FI_PROV_SPECIFIC");
        if keep_default {
            None
        } else if name.starts_with("FI_MR_") && value <= i64::from(i32::MAX) {
            Some(IntKind::Int)
        } else {
            Some(IntKind::U64)
        }
    }
}

struct Libfabric {
    include_dirs: Vec<PathBuf>,
    lib_dirs: Vec<PathBuf>,
    libs: Vec<String>,
    how: String,
}

fn from_prefix(prefix: &Path, how: &str) -> Libfabric {
    // lib64 (RPM, HPE/Cray), lib, and Debian's multiarch lib/<arch>-linux-gnu.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let lib_dirs = ["lib64".to_string(), "lib".to_string(), format!("lib/{arch}-linux-gnu")]
        .iter()
        .map(|d| prefix.join(d))
        .filter(|d| d.is_dir())
        .collect();
    Libfabric {
        include_dirs: vec![prefix.join("include")],
        lib_dirs,
        libs: vec!["fabric".into()],
        how: format!("{how} ({})", prefix.display()),
    }
}

/// A directory the linker searches anyway (/usr/lib, /lib64, /usr/lib/x86_64-linux-gnu, ...).
fn is_default_lib_dir(dir: &Path) -> bool {
    let d = dir.to_string_lossy();
    let d = d.trim_end_matches('/');
    let rest = d.strip_prefix("/usr").unwrap_or(d);
    match rest.strip_prefix("/lib") {
        Some("") | Some("64") | Some("32") => true,
        Some(sub) => sub.strip_prefix('/').is_some_and(|t| !t.contains('/') && t.contains("-linux-")),
        None => false,
    }
}

fn locate() -> Libfabric {
    println!("cargo:rerun-if-env-changed=LIBFABRIC_DIR");
    // cargo_metadata(false): link lines are printed after the shim so that the
    // static shim archive precedes -lfabric on the linker command line.
    match pkg_config::Config::new().cargo_metadata(false).probe("libfabric") {
        Ok(lib) => {
            return Libfabric {
                include_dirs: lib.include_paths,
                lib_dirs: lib.link_paths,
                libs: lib.libs,
                how: format!("pkg-config, libfabric {}", lib.version),
            }
        }
        Err(_) if env::var_os("LIBFABRIC_NO_PKG_CONFIG").is_some() => {}
        Err(e) => println!("cargo:warning=libfabric not found by pkg-config ({e}); trying LIBFABRIC_DIR, then /usr"),
    }
    if let Some(dir) = env::var_os("LIBFABRIC_DIR") {
        let dir = PathBuf::from(dir);
        if dir.join("include/rdma/fabric.h").is_file() {
            return from_prefix(&dir, "LIBFABRIC_DIR");
        }
        println!("cargo:warning=LIBFABRIC_DIR={} has no include/rdma/fabric.h", dir.display());
    }
    if Path::new("/usr/include/rdma/fabric.h").is_file() {
        return from_prefix(Path::new("/usr"), "default prefix");
    }
    panic!(
        "libfabric not found: install its development package (libfabric-dev / libfabric-devel), \
         put libfabric.pc on PKG_CONFIG_PATH, or set LIBFABRIC_DIR to an install prefix"
    );
}

fn main() {
    let crate_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let shim_dir = crate_dir.join("shim");
    for f in ["wrapper.h", "fi_shim.h", "fi_shim.c"] {
        println!("cargo:rerun-if-changed={}", shim_dir.join(f).display());
    }

    let fabric = locate();
    println!("libfabric-sys: using libfabric via {}", fabric.how);

    // 1. The shim: real symbols for the static inline API.
    let mut cc = cc::Build::new();
    cc.file(shim_dir.join("fi_shim.c")).include(&shim_dir).warnings(true);
    // The shim wraps calls that 2.x headers mark deprecated (fi_wait); that is intended.
    cc.flag_if_supported("-Wno-deprecated-declarations");
    for dir in &fabric.include_dirs {
        cc.include(dir);
    }
    cc.compile("ddsfi_shim");

    // 2. Link libfabric (after the shim archive).
    // The linker's own directories are left out: a -L for them would come
    // before other crates' (mpi-sys's Open MPI directory), so `-lmpi` would
    // find Debian's alternatives link /usr/lib/<triple>/libmpi.so, which may
    // point to MPICH.
    for dir in fabric.lib_dirs.iter().filter(|d| !is_default_lib_dir(d)) {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    for lib in &fabric.libs {
        println!("cargo:rustc-link-lib={lib}");
    }
    // Exposed to dependents as DEP_FABRIC_INCLUDE (`links = "fabric"`).
    let includes: Vec<String> = fabric.include_dirs.iter().map(|d| d.display().to_string()).collect();
    println!("cargo:include={}", env::join_paths(&includes).unwrap().to_string_lossy());

    // 3. Bindings for the types, constants and exported functions.
    let mut builder = bindgen::Builder::default()
        .header(shim_dir.join("wrapper.h").to_string_lossy())
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*|fid_.*|fid")
        .allowlist_var("FI_.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(MacroTypes))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for dir in &fabric.include_dirs {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    builder
        .generate()
        .expect("bindgen failed on the libfabric headers")
        .write_to_file(out_dir.join("bindings.rs"))
        .expect("cannot write bindings.rs");
}
