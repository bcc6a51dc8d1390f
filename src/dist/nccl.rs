//! NCCL (or RCCL: the same API), opened at run time. The library is found by `loader`; the
//! entry points are the communicator's lifetime, its asynchronous error, and the two collectives
//! the data-parallel trainer needs.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;

use libloading::Library;

use crate::dist::cuda::CuStream;
use crate::error::{ErrorCode, HeliosError, HeliosResult};

pub type NcclResult = c_int;
pub type NcclComm = *mut c_void;
/// ncclInProgress: a non-blocking call is still running.
pub const IN_PROGRESS: NcclResult = 7;

/// `ncclUniqueId`: 128 opaque bytes that rank 0 makes and every rank passes to init.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    pub internal: [u8; 128],
}

/// ncclDataType_t values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    I32 = 2,
    F16 = 6,
    F32 = 7,
    Bf16 = 9,
}

/// ncclRedOp_t values (ncclAvg since NCCL 2.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedOp {
    Sum = 0,
    Max = 2,
    Min = 3,
    Avg = 4,
}

/// The entry points (the library stays loaded while this lives).
pub struct Nccl {
    pub get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult,
    pub get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
    pub comm_init_rank: unsafe extern "C" fn(*mut NcclComm, c_int, UniqueId, c_int) -> NcclResult,
    pub comm_abort: unsafe extern "C" fn(NcclComm) -> NcclResult,
    pub comm_destroy: unsafe extern "C" fn(NcclComm) -> NcclResult,
    pub comm_get_async_error: unsafe extern "C" fn(NcclComm, *mut NcclResult) -> NcclResult,
    pub get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    pub all_reduce: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, NcclComm, CuStream) -> NcclResult,
    pub broadcast: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, NcclComm, CuStream) -> NcclResult,
    pub path: String,
    _lib: Library,
}

impl Nccl {
    /// Opens the library at `path` and resolves every entry point.
    pub fn open(path: &Path) -> HeliosResult<Nccl> {
        let shown = path.display().to_string();
        let lib = crate::dist::loader::open_resident(path).map_err(|e| HeliosError::new(ErrorCode::DistUnavailable, format!("{shown}: {e}")))?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is looked up by its documented name and typed as `nccl.h`
                // declares it; the library outlives the pointer (`_lib`).
                *unsafe { lib.get($name) }.map_err(|e| {
                    HeliosError::new(ErrorCode::DistUnavailable, format!("{shown} has no {} ({e})", String::from_utf8_lossy($name)))
                })?
            };
        }
        Ok(Nccl {
            get_version: sym!(b"ncclGetVersion"),
            get_unique_id: sym!(b"ncclGetUniqueId"),
            comm_init_rank: sym!(b"ncclCommInitRank"),
            comm_abort: sym!(b"ncclCommAbort"),
            comm_destroy: sym!(b"ncclCommDestroy"),
            comm_get_async_error: sym!(b"ncclCommGetAsyncError"),
            get_error_string: sym!(b"ncclGetErrorString"),
            all_reduce: sym!(b"ncclAllReduce"),
            broadcast: sym!(b"ncclBroadcast"),
            path: shown,
            _lib: lib,
        })
    }

    pub fn version(&self) -> i32 {
        let mut v = 0;
        // SAFETY: writes one int.
        unsafe { (self.get_version)(&mut v) };
        v
    }

    /// Maps a result to an error naming `call` and NCCL's description.
    pub fn check(&self, call: &str, r: NcclResult) -> HeliosResult<()> {
        if r == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string (or null).
        let p = unsafe { (self.get_error_string)(r) };
        // SAFETY: non-null strings from NCCL are NUL-terminated and static.
        let what = if p.is_null() { "unknown error".to_string() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() };
        Err(HeliosError::new(ErrorCode::DistAborted, format!("{call} failed: NCCL error {r} ({what})")))
    }
}
