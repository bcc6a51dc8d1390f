//! The CUDA driver API, opened at run time (`libcuda.so.1`, dlopen): the few entry points the
//! distributed layer uses — a device's primary context and UUID, a stream, events, and importing
//! Vulkan memory and timeline semaphores. Struct layouts follow `cuda.h` (the `_v1` external
//! resource descriptors); their sizes are checked at compile time.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

use libloading::Library;

use crate::error::{HeliosError, HeliosResult};

pub type CuResult = c_int;
pub type CuDevice = c_int;
pub type CuContext = *mut c_void;
pub type CuStream = *mut c_void;
pub type CuEvent = *mut c_void;
pub type CuExtMem = *mut c_void;
pub type CuExtSem = *mut c_void;
pub type CuDevicePtr = u64;

/// CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD.
pub const EXT_MEM_OPAQUE_FD: c_int = 1;
/// CUDA_EXTERNAL_MEMORY_DEDICATED.
pub const EXT_MEM_DEDICATED: c_uint = 1;
/// CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD.
pub const EXT_SEM_TIMELINE_FD: c_int = 9;
/// CU_STREAM_NON_BLOCKING.
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// CU_EVENT_DISABLE_TIMING.
pub const EVENT_DISABLE_TIMING: c_uint = 2;
/// CUDA_ERROR_NOT_READY (cuEventQuery / cuStreamQuery: work still pending).
pub const NOT_READY: CuResult = 600;

#[repr(C)]
pub struct ExtMemHandleDesc {
    pub kind: c_int,
    /// The union of `int fd`, `{void *handle; const void *name}` and `const void *nvSciBufObject`.
    pub handle: [u64; 2],
    pub size: u64,
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

#[repr(C)]
pub struct ExtMemBufferDesc {
    pub offset: u64,
    pub size: u64,
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

#[repr(C)]
pub struct ExtSemHandleDesc {
    pub kind: c_int,
    pub handle: [u64; 2],
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

/// CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS and _WAIT_PARAMS share this layout: `params` starts with
/// the fence value; the rest (NvSciSync fence, keyed-mutex key and timeout, reserved) stays zero.
#[repr(C)]
pub struct ExtSemParams {
    pub fence_value: u64,
    pub params_rest: [u64; 8],
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

const _: () = assert!(std::mem::size_of::<ExtMemHandleDesc>() == 104);
const _: () = assert!(std::mem::size_of::<ExtMemBufferDesc>() == 88);
const _: () = assert!(std::mem::size_of::<ExtSemHandleDesc>() == 96);
const _: () = assert!(std::mem::size_of::<ExtSemParams>() == 144);

impl ExtSemParams {
    pub fn value(v: u64) -> ExtSemParams {
        ExtSemParams { fence_value: v, params_rest: [0; 8], flags: 0, reserved: [0; 16] }
    }
}

macro_rules! cuda_fns {
    ($($field:ident = $sym:literal : fn($($arg:ty),*);)*) => {
        /// The driver entry points (the library stays loaded while this lives).
        pub struct Cuda {
            $(pub $field: unsafe extern "C" fn($($arg),*) -> CuResult,)*
            _lib: Library,
        }

        impl Cuda {
            fn from_library(lib: Library, path: &str) -> HeliosResult<Cuda> {
                // SAFETY: each symbol is looked up by its documented name and given the
                // signature `cuda.h` declares for it; the library outlives the pointers (`_lib`).
                unsafe {
                    Ok(Cuda {
                        $($field: *lib.get::<unsafe extern "C" fn($($arg),*) -> CuResult>($sym).map_err(|e| missing(path, $sym, e))?,)*
                        _lib: lib,
                    })
                }
            }
        }
    };
}

cuda_fns! {
    init = b"cuInit\0": fn(c_uint);
    device_get = b"cuDeviceGet\0": fn(*mut CuDevice, c_int);
    device_get_count = b"cuDeviceGetCount\0": fn(*mut c_int);
    device_get_uuid = b"cuDeviceGetUuid\0": fn(*mut [u8; 16], CuDevice);
    primary_ctx_retain = b"cuDevicePrimaryCtxRetain\0": fn(*mut CuContext, CuDevice);
    ctx_set_current = b"cuCtxSetCurrent\0": fn(CuContext);
    stream_create = b"cuStreamCreate\0": fn(*mut CuStream, c_uint);
    stream_synchronize = b"cuStreamSynchronize\0": fn(CuStream);
    stream_destroy = b"cuStreamDestroy_v2\0": fn(CuStream);
    event_create = b"cuEventCreate\0": fn(*mut CuEvent, c_uint);
    event_record = b"cuEventRecord\0": fn(CuEvent, CuStream);
    event_query = b"cuEventQuery\0": fn(CuEvent);
    event_destroy = b"cuEventDestroy_v2\0": fn(CuEvent);
    import_external_memory = b"cuImportExternalMemory\0": fn(*mut CuExtMem, *const ExtMemHandleDesc);
    external_memory_get_mapped_buffer = b"cuExternalMemoryGetMappedBuffer\0": fn(*mut CuDevicePtr, CuExtMem, *const ExtMemBufferDesc);
    destroy_external_memory = b"cuDestroyExternalMemory\0": fn(CuExtMem);
    mem_free = b"cuMemFree_v2\0": fn(CuDevicePtr);
    import_external_semaphore = b"cuImportExternalSemaphore\0": fn(*mut CuExtSem, *const ExtSemHandleDesc);
    signal_external_semaphores = b"cuSignalExternalSemaphoresAsync\0": fn(*const CuExtSem, *const ExtSemParams, c_uint, CuStream);
    wait_external_semaphores = b"cuWaitExternalSemaphoresAsync\0": fn(*const CuExtSem, *const ExtSemParams, c_uint, CuStream);
    destroy_external_semaphore = b"cuDestroyExternalSemaphore\0": fn(CuExtSem);
    get_error_string = b"cuGetErrorString\0": fn(CuResult, *mut *const c_char);
}

fn missing(path: &str, sym: &[u8], e: libloading::Error) -> HeliosError {
    let name = String::from_utf8_lossy(sym.strip_suffix(b"\0").unwrap_or(sym)).into_owned();
    HeliosError::new(crate::error::ErrorCode::DistUnavailable, format!("{path} has no {name} ({e}): the CUDA driver is too old"))
}

impl Cuda {
    /// Opens the driver library (the NVIDIA driver installs it; no toolkit is needed).
    pub fn load() -> HeliosResult<Cuda> {
        const PATH: &str = "libcuda.so.1";
        let lib = crate::dist::loader::open_resident(PATH).map_err(|e| {
            HeliosError::new(
                crate::error::ErrorCode::DistUnavailable,
                format!("the CUDA driver ({PATH}) could not be loaded ({e}): distributed training over NCCL needs an NVIDIA GPU and driver"),
            )
        })?;
        Cuda::from_library(lib, PATH)
    }

    /// Maps a result to an error naming `call` and the driver's description.
    pub fn check(&self, call: &str, r: CuResult) -> HeliosResult<()> {
        if r == 0 {
            return Ok(());
        }
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorString writes a pointer to a static string (or leaves it null).
        let known = unsafe { (self.get_error_string)(r, &mut s) } == 0 && !s.is_null();
        // SAFETY: a non-null result of cuGetErrorString is a NUL-terminated static string.
        let what = if known { unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned() } else { "unknown error".to_string() };
        Err(HeliosError::internal(format!("{call} failed: CUDA error {r} ({what})")))
    }
}
