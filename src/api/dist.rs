//! Distributed-training exports (`crate::dist`; ts/distributed/nccl.ts is the caller). The CUDA
//! driver and NCCL are loaded by the first of these that needs them, never before; where they
//! are missing the error is ERR_HELIOS_DIST_UNAVAILABLE naming what was tried.

use napi::bindgen_prelude::{Uint8Array, Unknown};
use napi_derive::napi;

use crate::api::args::{count, js_number, num, object};
use crate::api::guard;
use crate::dist::comm::Collective;
use crate::dist::nccl::{DataType, RedOp};
use crate::dist::{self, InitArgs};
use crate::error::{ErrorCode, HeliosError, HeliosResult};
use crate::runtime::global;

#[napi(object)]
pub struct DistInitOptions {
    /// The job's NCCL unique id (128 bytes from rank 0's distUniqueId).
    pub unique_id: Uint8Array,
    pub rank: u32,
    pub world_size: u32,
    /// The CUDA device of this process (its GPU on the host).
    pub local_rank: u32,
    /// A collective unfinished this long after this rank's inputs were ready ends the process.
    pub timeout_ms: u32,
}

fn byte_count(v: Unknown<'_>, what: &str) -> HeliosResult<u64> {
    let n = num(v, what)?;
    if !(n.is_finite() && n.fract() == 0.0 && n >= 0.0 && n <= (1u64 << 53) as f64) {
        return Err(HeliosError::invalid_argument(format!("{what} = {} is not a whole number of bytes", js_number(n))));
    }
    Ok(n as u64)
}

fn dtype(s: &str) -> HeliosResult<DataType> {
    match s {
        "f32" => Ok(DataType::F32),
        "f16" => Ok(DataType::F16),
        "bf16" => Ok(DataType::Bf16),
        "i32" => Ok(DataType::I32),
        _ => Err(HeliosError::invalid_argument(format!("dtype \"{s}\" is not one of f32, f16, bf16, i32"))),
    }
}

fn red_op(s: &str) -> HeliosResult<RedOp> {
    match s {
        "sum" => Ok(RedOp::Sum),
        "avg" => Ok(RedOp::Avg),
        "max" => Ok(RedOp::Max),
        "min" => Ok(RedOp::Min),
        _ => Err(HeliosError::invalid_argument(format!("op \"{s}\" is not one of sum, avg, max, min"))),
    }
}

/// The UUID (32 hex digits) of CUDA device `localRank`: initDevice({device: "uuid:" + it}) picks
/// the same GPU in Vulkan. Loads the CUDA driver.
#[napi(ts_args_type = "localRank: number")]
pub fn dist_device_uuid(local_rank: Unknown<'_>) -> napi::Result<String, ErrorCode> {
    guard("distDeviceUuid", || dist::device_uuid(count(local_rank, "localRank")? as i32))
}

/// Which NCCL library would be used, with its version. Loads NCCL.
#[napi]
pub fn dist_library() -> napi::Result<String, ErrorCode> {
    guard("distLibrary", dist::describe)
}

/// A new NCCL unique id (128 bytes), made by rank 0 and given to every rank's distInit.
#[napi]
pub fn dist_unique_id() -> napi::Result<Uint8Array, ErrorCode> {
    guard("distUniqueId", || dist::unique_id().map(Uint8Array::from))
}

/// Joins the NCCL communicator on the current device (created with initDevice({shareable:
/// true}) on the GPU CUDA calls `localRank`). Blocks until every rank has joined.
#[napi(ts_args_type = "opts: DistInitOptions")]
pub fn dist_init(opts: Unknown<'_>) -> napi::Result<(), ErrorCode> {
    guard("distInit", || {
        let o: DistInitOptions = object(opts, "opts")?;
        dist::init(InitArgs {
            id: o.unique_id.to_vec(),
            rank: o.rank as i32,
            world: o.world_size as i32,
            local_rank: o.local_rank as i32,
            timeout_ms: u64::from(o.timeout_ms.max(1000)),
        })
    })
}

/// A device buffer shared with CUDA (for collectives); free it with destroyBuffer after distDestroy.
#[napi(ts_args_type = "byteLength: number")]
pub fn dist_shared_buffer(byte_length: Unknown<'_>) -> napi::Result<f64, ErrorCode> {
    guard("distSharedBuffer", || dist::shared_buffer(num(byte_length, "byteLength")?))
}

/// Enqueues an in-place all-reduce of `count` elements at `byteOffset` of a shared buffer after
/// all work submitted so far; later work on the buffer waits for it. Returns its external
/// timeline value.
#[napi(ts_args_type = "handle: number, byteOffset: number, count: number, dtype: 'f32' | 'f16' | 'bf16' | 'i32', op: 'sum' | 'avg' | 'max' | 'min'")]
pub fn dist_all_reduce(handle: Unknown<'_>, byte_offset: Unknown<'_>, elements: Unknown<'_>, dt: String, op: String) -> napi::Result<f64, ErrorCode> {
    guard("distAllReduce", || {
        let c = Collective::AllReduce(red_op(&op)?);
        let v = dist::collective(c, num(handle, "handle")?, byte_count(byte_offset, "byteOffset")?, byte_count(elements, "count")?, dtype(&dt)?)?;
        Ok(v as f64)
    })
}

/// Enqueues an in-place broadcast from rank `root`, ordered like distAllReduce.
#[napi(ts_args_type = "handle: number, byteOffset: number, count: number, dtype: 'f32' | 'f16' | 'bf16' | 'i32', root: number")]
pub fn dist_broadcast(handle: Unknown<'_>, byte_offset: Unknown<'_>, elements: Unknown<'_>, dt: String, root: Unknown<'_>) -> napi::Result<f64, ErrorCode> {
    guard("distBroadcast", || {
        let c = Collective::Broadcast(count(root, "root")? as i32);
        let v = dist::collective(c, num(handle, "handle")?, byte_count(byte_offset, "byteOffset")?, byte_count(elements, "count")?, dtype(&dt)?)?;
        Ok(v as f64)
    })
}

/// Waits on the host until every enqueued collective finished.
#[napi]
pub fn dist_synchronize() -> napi::Result<(), ErrorCode> {
    guard("distSynchronize", dist::synchronize)
}

/// Aborts the communicator (any thread; a peer is gone): collectives stuck on it return, and
/// later calls fail with ERR_HELIOS_DIST_ABORTED.
#[napi]
pub fn dist_abort(reason: String) {
    dist::abort(&reason);
}

/// Destroys the communicator (waits for its collectives unless it was aborted).
#[napi]
pub fn dist_destroy() {
    dist::destroy();
}

/// A buffer whose memory is exported (opaque fd, closed here: the export itself is what this
/// checks). Shared buffers order against the external timeline like distSharedBuffer's.
#[napi(ts_args_type = "byteLength: number")]
pub fn create_shared_buffer(byte_length: Unknown<'_>) -> napi::Result<f64, ErrorCode> {
    guard("createSharedBuffer", || {
        let len = num(byte_length, "byteLength")?;
        let (handle, ex) = global::with(|rt| rt.create_shared_buffer(len))?;
        crate::vk::external::close_fd(ex.fd);
        Ok(handle)
    })
}

/// Compute work that uses `handle` from now on waits until the external timeline reaches `value`
/// (what a collective's completion does; for interop and tests).
#[napi(ts_args_type = "handle: number, value: number")]
pub fn order_after_external(handle: Unknown<'_>, value: Unknown<'_>) -> napi::Result<(), ErrorCode> {
    guard("orderAfterExternal", || {
        let (h, v) = (num(handle, "handle")?, count(value, "value")?);
        global::with(|rt| rt.order_after_external(h, u64::from(v)))
    })
}

/// Signals the external timeline from the host (what CUDA does after a collective; tests).
#[napi(ts_args_type = "value: number")]
pub fn signal_external(value: Unknown<'_>) -> napi::Result<(), ErrorCode> {
    guard("signalExternal", || {
        let v = count(value, "value")?;
        global::with(|rt| rt.signal_external(u64::from(v)))
    })
}
