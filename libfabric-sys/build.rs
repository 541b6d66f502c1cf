//! Finds libfabric, compiles the C shim and generates the bindings. The
//! library is not linked: the shim loads it at run time, and fi_versions.h
//! tells it the soname and the symbol versions this build's library has.
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
    Libfabric { include_dirs: vec![prefix.join("include")], lib_dirs, how: format!("{how} ({})", prefix.display()) }
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

/// The exported functions the shim loads with dlvsym (fi_shim.c).
const LOADED: [&str; 7] =
    ["fi_getinfo", "fi_freeinfo", "fi_dupinfo", "fi_version", "fi_strerror", "fi_tostr", "fi_fabric"];

/// The build's `libfabric.so` (what `-lfabric` would link): in the library
/// directories found, then the linker's usual ones.
fn shared_object(fabric: &Libfabric) -> Option<PathBuf> {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let usual =
        ["/usr/lib64".to_string(), "/usr/lib".to_string(), format!("/usr/lib/{arch}-linux-gnu"), "/lib64".into()];
    fabric
        .lib_dirs
        .iter()
        .cloned()
        .chain(usual.iter().map(PathBuf::from))
        .map(|d| d.join("libfabric.so"))
        .find(|p| p.exists())
}

/// fi_versions.h: the soname and directory of the build's libfabric, and
/// `DDSFI_LOADED(X)`, `X(name, version)` for each function of LOADED with the
/// symbol version a link would bind (its default, `name@@VERSION` in
/// `readelf --dyn-syms`; "" for an unversioned library: plain dlsym).
fn symbol_versions(fabric: &Libfabric) -> String {
    let so = shared_object(fabric).unwrap_or_else(|| {
        panic!("libfabric-sys: no libfabric.so in {:?} or the usual library directories", fabric.lib_dirs)
    });
    println!("cargo:rerun-if-changed={}", so.display());
    let readelf = env::var("READELF").unwrap_or_else(|_| "readelf".into());
    let run = |args: &[&str]| -> String {
        let out = std::process::Command::new(&readelf)
            .args(args)
            .arg(&so)
            .output()
            .unwrap_or_else(|e| panic!("libfabric-sys: cannot run {readelf} (binutils; or set READELF): {e}"));
        assert!(out.status.success(), "libfabric-sys: {readelf} {args:?} {} failed", so.display());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dynamic = run(&["-d", "-W"]);
    let soname = dynamic
        .lines()
        .find_map(|l| l.split("Library soname: [").nth(1).and_then(|r| r.split(']').next()))
        .unwrap_or("libfabric.so.1")
        .to_string();
    let syms = run(&["--dyn-syms", "-W"]);
    let dir = so.canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_default();
    let mut h = format!(
        "/* Generated by libfabric-sys/build.rs from {}. */\n#define DDSFI_SONAME \"{soname}\"\n#define DDSFI_LIBDIR \"{}\"\n",
        so.display(),
        dir.display()
    );
    // X(name, version) for each: the shim declares, finds and sets them all
    // from this one list.
    h += "#define DDSFI_LOADED(X)";
    for name in LOADED {
        let version =
            syms.split_whitespace().find_map(|w| w.strip_prefix(name).and_then(|r| r.strip_prefix("@@"))).unwrap_or("");
        let unversioned = syms.split_whitespace().any(|w| w == name);
        assert!(!version.is_empty() || unversioned, "libfabric-sys: {} exports no {name}", so.display());
        h += &format!(" \\\n\tX({name}, \"{version}\")");
    }
    h + "\n"
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
    let versions = symbol_versions(&fabric);
    std::fs::write(out_dir.join("fi_versions.h"), versions).expect("cannot write fi_versions.h");

    // 1. The shim: real symbols for the static inline API.
    let mut cc = cc::Build::new();
    cc.file(shim_dir.join("fi_shim.c")).include(&shim_dir).include(&out_dir).warnings(true);
    // The shim wraps calls that 2.x headers mark deprecated (fi_wait); that is intended.
    cc.flag_if_supported("-Wno-deprecated-declarations");
    for dir in &fabric.include_dirs {
        cc.include(dir);
    }
    cc.compile("ddsfi_shim");

    // 2. libfabric is not linked: the shim opens it at run time (dlopen;
    // in libc since glibc 2.34, in libdl before).
    println!("cargo:rustc-link-lib=dl");
    // Exposed to dependents as DEP_FABRIC_INCLUDE (`links = "fabric"`).
    let includes: Vec<String> = fabric.include_dirs.iter().map(|d| d.display().to_string()).collect();
    println!("cargo:include={}", env::join_paths(&includes).unwrap().to_string_lossy());

    // 3. Bindings for the types and constants (no functions: libfabric is
    // not linked, so every call goes through a ddsfi_* function of the shim).
    let mut builder = bindgen::Builder::default()
        .header(shim_dir.join("wrapper.h").to_string_lossy())
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
