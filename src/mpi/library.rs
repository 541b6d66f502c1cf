//! Which MPI library is loaded, and whether it is initialised and running.

use std::os::raw::{c_int, c_void};

use mpi_sys as ffi;

use crate::error::{err, Error, Result};

pub fn initialized() -> bool {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Initialized may be called at any time.
    unsafe { ffi::MPI_Initialized(&mut flag) };
    flag != 0
}

pub fn finalized() -> bool {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Finalized may be called at any time.
    unsafe { ffi::MPI_Finalized(&mut flag) };
    flag != 0
}

/// True when MPI is usable now (initialised and not yet finalised).
pub fn running() -> bool {
    initialized() && !finalized()
}

/// True when MPI was initialised with `MPI_THREAD_MULTIPLE`.
pub fn thread_multiple() -> bool {
    let mut level: c_int = 0;
    // SAFETY: called only while MPI is running.
    unsafe { ffi::MPI_Query_thread(&mut level) };
    level >= ffi::MPI_THREAD_MULTIPLE as c_int
}

/// `MPI_Get_library_version` of the MPI this library is linked against, first
/// line only (MPI allows the call before `MPI_Init`).
pub fn library_version() -> String {
    let mut buf = vec![0u8; ffi::MPI_MAX_LIBRARY_VERSION_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_LIBRARY_VERSION_STRING bytes as the standard requires.
    unsafe { ffi::MPI_Get_library_version(buf.as_mut_ptr().cast(), &mut len) };
    buf.truncate(len.clamp(0, buf.len() as c_int) as usize);
    let text = String::from_utf8_lossy(&buf);
    text.lines().next().unwrap_or("").trim_matches(|c: char| c.is_whitespace() || c == '\0').to_string()
}

/// The shared object that provides our MPI symbols, and every other MPI
/// library loaded in the process. A second one means the caller (mpi4py,
/// or the program) was built against a different MPI than libddstore: the
/// two keep separate states, so MPI looks uninitialised to us. Paths are
/// canonical, so aliases of one file (libmpi.so.12 -> libmpich.so.12) match.
pub fn loaded_mpi_libraries() -> (Option<String>, Vec<String>) {
    let canonical = |p: &str| std::fs::canonicalize(p).map(|c| c.display().to_string()).unwrap_or(p.to_string());
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let sym = ffi::MPI_Initialized as *const c_void;
    // SAFETY: dladdr only reads the loader's tables; info outlives the call.
    let ours = if unsafe { libc::dladdr(sym, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
        Some(canonical(&unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy()))
    } else {
        None
    };
    unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _: libc::size_t, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid entry; data is the Vec below.
        let (info, names) = unsafe { (&*info, &mut *(data as *mut Vec<String>)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned();
            if is_mpi_library(&name) {
                names.push(name);
            }
        }
        0
    }
    let mut names: Vec<String> = Vec::new();
    // SAFETY: visit matches the callback type and only touches `names`.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut names as *mut Vec<String>).cast()) };
    let mut others: Vec<String> = names.iter().map(|n| canonical(n)).filter(|n| Some(n) != ours.as_ref()).collect();
    others.sort();
    others.dedup();
    (ours, others)
}

/// True for the core library of an MPI implementation (not its Fortran or
/// C++ companions): Open MPI's libmpi, MPICH's libmpich or libmpi, Cray
/// MPICH's libmpi_cray and compiler-specific libmpi_gnu_NNN and the like.
fn is_mpi_library(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    let Some(stem) = base.split(".so").next().filter(|_| base.contains(".so")) else {
        return false;
    };
    const CRAY: [&str; 6] = ["libmpi_cray", "libmpi_gnu", "libmpi_intel", "libmpi_amd", "libmpi_nvidia", "libmpi_aocc"];
    stem == "libmpi" || stem == "libmpich" || CRAY.iter().any(|c| stem.starts_with(c))
}

/// The MPI family a version text names ("Open MPI", "MPICH", ...), for
/// both the build's mpi.h ("MPICH 4.0.2") and `MPI_Get_library_version`
/// ("MPICH Version: 4.0.2", "CRAY MPICH version 8.1", "Open MPI v4.1.4").
fn family(text: &str) -> Option<&'static str> {
    let t = text.to_ascii_lowercase();
    // Order matters: Intel MPI and MVAPICH are MPICH derivatives.
    [("intel", "Intel MPI"), ("mvapich", "MVAPICH"), ("open mpi", "Open MPI"), ("mpich", "MPICH")]
        .into_iter()
        .find(|(word, _)| t.contains(word))
        .map(|(_, name)| name)
}

/// The binary interface a family's mpi.h defines: MPICH, Intel MPI, MVAPICH
/// and Cray MPICH share MPICH's (integer handles, the same constants; the
/// MPICH ABI compatibility initiative), Open MPI has its own.
fn abi(family: &str) -> &str {
    match family {
        "Intel MPI" | "MVAPICH" => "MPICH",
        f => f,
    }
}

/// Whether a library built against the mpi.h named `built` may run on the
/// MPI whose version text is `running` (unknown on either side: yes).
fn abi_compatible(built: &str, running: &str) -> bool {
    match (family(built), family(running)) {
        (Some(b), Some(r)) => abi(b) == abi(r),
        _ => true,
    }
}

/// Fails when the MPI answering our calls does not have the binary interface
/// of the mpi.h we were compiled against: the caller loaded another MPI
/// first and the dynamic linker bound our MPI symbols to it (handles and
/// constants then mean nothing to it). An MPICH build runs on Intel MPI or
/// Cray MPICH (same ABI). Nothing is checked when either side is unknown.
pub fn check_same_mpi() -> Result<()> {
    let built = env!("DDSTORE_MPI_HEADER");
    let running = library_version();
    if abi_compatible(built, &running) {
        return Ok(());
    }
    let (ours, others) = loaded_mpi_libraries();
    let loaded: Vec<String> = ours.into_iter().chain(others).collect();
    Err(err!(
        BadState,
        "libddstore was built against {built} (its mpi.h), but another MPI library is loaded in this \
         process and answers its MPI calls: {running} (MPI libraries loaded: {}): the caller (mpi4py or \
         the program) was built against a different MPI. Build mpi4py against libddstore's MPI, or \
         libddstore against the caller's (docs/troubleshooting.md)",
        loaded.join(", ")
    ))
}

/// The error for `dds_create` when MPI is not initialised: names the other
/// MPI library when one is loaded, since that is the usual cause.
pub fn not_initialized_error() -> Error {
    let (ours, others) = loaded_mpi_libraries();
    let ours = ours.unwrap_or_else(|| "its MPI library".to_string());
    if others.is_empty() {
        return err!(
            BadState,
            "MPI is not initialized: call MPI_Init (or import mpi4py.MPI) before dds_create \
             (libddstore uses {ours}: {})",
            library_version()
        );
    }
    err!(
        BadState,
        "MPI is not initialized in the MPI that libddstore uses ({ours}: {}), but another MPI library is \
         loaded in this process ({}): the caller (mpi4py or the program) was built against a different MPI. \
         Build mpi4py against libddstore's MPI, or libddstore against the caller's (docs/troubleshooting.md)",
        library_version(),
        others.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_core_libraries_are_told_from_their_companions() {
        let core = [
            "/usr/lib/x86_64-linux-gnu/libmpi.so.40",
            "/usr/lib/x86_64-linux-gnu/libmpich.so.12",
            "libmpi.so.12.1.8",
            "/opt/cray/pe/lib64/libmpi_cray.so.12",
            "/opt/cray/pe/mpich/8.1.28/ofi/gnu/12.3/lib/libmpi_gnu_123.so.12",
            "/opt/cray/pe/lib64/libmpi_amd.so",
        ];
        let other = [
            "/usr/lib/x86_64-linux-gnu/libmpi_mpifh.so.40",
            "/usr/lib/x86_64-linux-gnu/libmpi_usempif08.so.40",
            "libmpi_cxx.so.40",
            "libmpicxx.so.12",
            "libmpifort.so.12",
            "libmpichfort.so.12",
            "/usr/lib/libddstore.so.0",
            "libmpi",
            "/home/u/libmpi.a",
            "",
        ];
        for p in core {
            assert!(is_mpi_library(p), "{p} is an MPI core library");
        }
        for p in other {
            assert!(!is_mpi_library(p), "{p} is not an MPI core library");
        }
    }

    #[test]
    fn mpi_families_are_named_alike_in_headers_and_version_strings() {
        let cases = [
            ("MPICH 4.0.2", Some("MPICH")),
            ("MPICH Version:\t4.0.2", Some("MPICH")),
            ("MPI VERSION    : CRAY MPICH version 8.1.28.2 (ANL base 3.4a2)", Some("MPICH")),
            ("Open MPI 4.1.4", Some("Open MPI")),
            ("Open MPI v4.1.4, package: Debian OpenMPI", Some("Open MPI")),
            ("Intel(R) MPI Library 2021.10 for Linux* OS", Some("Intel MPI")),
            ("Intel MPI 2021.10", Some("Intel MPI")),
            ("MVAPICH2 Version      :\t2.3.7", Some("MVAPICH")),
            ("", None),
            ("Some MPI 1.0", None),
        ];
        for (text, want) in cases {
            assert_eq!(family(text), want, "{text:?}");
        }
        // MPICH-ABI libraries run an MPICH build (the claim Cray and Intel MPI
        // users rely on; make test-mpis runs it under Intel MPI); Open MPI
        // does not, either way.
        assert!(abi_compatible("MPICH 4.0.2", "Intel(R) MPI Library 2021.19.0 for Linux* OS"));
        assert!(abi_compatible("MPICH 4.0.2", "MPI VERSION    : CRAY MPICH version 8.1.28.2"));
        assert!(abi_compatible("MPICH 4.0.2", "MPICH Version:      5.0.2"));
        assert!(abi_compatible("Intel MPI 2021.19", "MPICH Version:\t4.0.2"));
        assert!(!abi_compatible("MPICH 4.0.2", "Open MPI v5.0.11"));
        assert!(!abi_compatible("Open MPI 4.1.4", "Intel(R) MPI Library 2021.19.0"));
        assert!(abi_compatible("Some MPI 1.0", "Open MPI v5.0.11"));
        // The build recorded the MPI of this build, and it is the one running here.
        assert_eq!(family(env!("DDSTORE_MPI_HEADER")), family(&library_version()));
        check_same_mpi().unwrap();
    }

    #[test]
    fn our_mpi_library_is_found_and_named() {
        let (ours, _) = loaded_mpi_libraries();
        let ours = ours.expect("dladdr finds the object that defines MPI_Initialized");
        assert!(is_mpi_library(&ours), "{ours} is an MPI core library");
        assert!(!library_version().is_empty());
    }
}
