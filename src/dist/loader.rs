//! Where NCCL is looked for, in order: `HELIOS_NCCL_LIB` (a path; only it is tried), the dynamic
//! linker's own search for `libnccl.so.2`, then the `nvidia/nccl/lib/libnccl.so.2` that PyTorch's
//! wheels install in a Python environment — every site-packages directory `python3` reports.
//! Nothing here runs unless distributed training over NCCL is asked for.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::dist::nccl::Nccl;
use crate::error::{ErrorCode, HeliosError, HeliosResult};

pub const NCCL_SONAME: &str = "libnccl.so.2";

/// Opens a library that is never unloaded. NCCL and the CUDA driver start threads that outlive
/// any handle to them (`ncclGetUniqueId` starts NCCL's bootstrap root, which waits for the ranks
/// to connect); unmapping the library under such a thread crashed the process the moment the
/// thread returned into it (every distributed run after a host's first, on 2 × H200).
pub fn open_resident(path: impl AsRef<OsStr>) -> Result<libloading::Library, libloading::Error> {
    // SAFETY: loading runs the library's initialisers, which expect dlopen; NODELETE keeps its
    // code mapped for the life of the process whatever handles are dropped.
    unsafe { libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_NODELETE) }.map(Into::into)
}

/// The candidates after the explicit path: the soname, then each site-packages copy.
pub fn candidates(site_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from(NCCL_SONAME)];
    for d in site_dirs {
        let p = d.join("nvidia").join("nccl").join("lib").join(NCCL_SONAME);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The directories `python3` imports packages from (empty when there is no python3).
pub fn python_site_dirs() -> Vec<PathBuf> {
    let code = "import site,sys\nfor p in site.getsitepackages()+[site.getusersitepackages()]+sys.path: print(p)";
    let Ok(out) = Command::new("python3").args(["-c", code]).output() else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(PathBuf::from).filter(|p| p.is_dir()).collect()
}

/// Opens NCCL; the error lists every place tried and why each failed.
pub fn open_nccl(explicit: Option<&str>) -> HeliosResult<Nccl> {
    if let Some(p) = explicit {
        return Nccl::open(Path::new(p)).map_err(|e| {
            HeliosError::new(ErrorCode::DistUnavailable, format!("NCCL could not be loaded from HELIOS_NCCL_LIB={p}: {}", e.message))
        });
    }
    let mut tried = Vec::new();
    for c in candidates(&python_site_dirs()) {
        if c.is_absolute() && !c.exists() {
            continue;
        }
        match Nccl::open(&c) {
            Ok(n) => return Ok(n),
            Err(e) => tried.push(e.message),
        }
    }
    Err(HeliosError::new(
        ErrorCode::DistUnavailable,
        format!(
            "NCCL ({NCCL_SONAME}) was not found: tried {}; install it (PyTorch's CUDA wheels ship it as nvidia-nccl-cu12) or set HELIOS_NCCL_LIB to its path",
            tried.join("; ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_start_with_the_soname_then_each_wheel_copy_once() {
        let dirs = [PathBuf::from("/v/lib/python3.12/site-packages"), PathBuf::from("/v/lib/python3.12/site-packages")];
        let c = candidates(&dirs);
        assert_eq!(c, vec![PathBuf::from(NCCL_SONAME), PathBuf::from("/v/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2")]);
    }

    /// Whether `name` is mapped in this process (RTLD_NOLOAD opens nothing new).
    fn loaded(name: &std::ffi::CStr) -> bool {
        // SAFETY: RTLD_NOLOAD only looks the library up; the handle it returns is closed at once.
        unsafe {
            let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            if !h.is_null() {
                libc::dlclose(h);
            }
            !h.is_null()
        }
    }

    #[test]
    fn a_resident_library_stays_mapped_after_its_handle_is_dropped() {
        // libresolv: part of glibc everywhere, loaded by nothing else in this test binary.
        let name = c"libresolv.so.2";
        // SAFETY: libresolv's initialisers are plain glibc ones.
        let plain = unsafe { libloading::Library::new("libresolv.so.2") };
        assert!(plain.is_ok(), "libresolv.so.2 should exist on any glibc system");
        drop(plain);
        assert!(!loaded(name), "control: an ordinary handle unloads the library when dropped");
        let resident = open_resident("libresolv.so.2");
        assert!(resident.is_ok());
        drop(resident);
        assert!(loaded(name), "a resident library must stay mapped after its handle is dropped");
    }

    #[test]
    fn a_bad_explicit_path_is_a_coded_error_naming_it() {
        let e = open_nccl(Some("/nonexistent/libnccl.so.2")).err().map(|e| (e.code, e.message));
        let (code, msg) = e.unwrap_or((ErrorCode::Internal, String::new()));
        assert_eq!(code, ErrorCode::DistUnavailable);
        assert!(msg.contains("HELIOS_NCCL_LIB=/nonexistent/libnccl.so.2"), "{msg}");
    }
}
