//! Buffer exports: create/destroy, transfers, leasing.

use napi::bindgen_prelude::{ArrayBuffer, AsyncTask, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::api::tasks::ReadTask;
use crate::api::types::{BufferOptions, PoolStats};
use crate::api::args::{byte_view, num, opt_num, opt_object};
use crate::api::guard;
use crate::error::{ErrorCode, HeliosError};
use crate::runtime::global;
use crate::runtime::readback::ReadTicket;
use crate::vk::host_result;

/// Creates a device-local storage buffer of `byteLength` bytes; returns its handle.
#[napi(ts_args_type = "byteLength: number, opts?: BufferOptions")]
pub fn create_buffer(byte_length: Unknown<'_>, opts: Option<Unknown<'_>>) -> napi::Result<f64, ErrorCode> {
    guard("createBuffer", || {
        let len = num(byte_length, "byteLength")?;
        let opts: Option<BufferOptions> = opt_object(opts, "opts")?;
        let host_visible = opts.and_then(|o| o.host_visible).unwrap_or(false);
        global::with(|rt| rt.create_buffer(len, host_visible))
    })
}

/// Frees the buffer once the GPU is done with it; the handle becomes invalid now.
#[napi(ts_args_type = "handle: number")]
pub fn destroy_buffer(handle: Unknown<'_>) -> napi::Result<(), ErrorCode> {
    guard("destroyBuffer", || {
        let handle = num(handle, "handle")?;
        global::with(|rt| rt.destroy_buffer(handle))
    })
}

/// Copies `data` into the buffer at `byteOffset`, in program order.
#[napi(ts_args_type = "handle: number, data: ArrayBuffer | ArrayBufferView, byteOffset?: number")]
pub fn upload_buffer(handle: Unknown<'_>, data: Unknown<'_>, byte_offset: Option<Unknown<'_>>) -> napi::Result<(), ErrorCode> {
    guard("uploadBuffer", || {
        let handle = num(handle, "handle")?;
        let data = byte_view(data, "data")?;
        let offset = opt_num(byte_offset, "byteOffset")?.unwrap_or(0.0);
        global::with(|rt| rt.upload(handle, data.as_slice(), offset))
    })
}

/// Reads the buffer after everything recorded before this call.
#[napi(ts_args_type = "handle: number, byteOffset?: number, byteLength?: number")]
pub fn read_buffer(
    env: Env,
    handle: Unknown<'_>,
    byte_offset: Option<Unknown<'_>>,
    byte_length: Option<Unknown<'_>>,
) -> napi::Result<ArrayBuffer<'static>, ErrorCode> {
    let data = guard("readBuffer", || {
        let (handle, offset, len) = (num(handle, "handle")?, opt_num(byte_offset, "byteOffset")?, opt_num(byte_length, "byteLength")?);
        global::with(|rt| rt.read(handle, offset, len))
    })?;
    guard("readBuffer", || {
        host_result::into_array_buffer(&env, data).map_err(|e| HeliosError::internal(format!("creating the ArrayBuffer: {e}")))
    })
}

/// Reads `dst.byteLength` bytes at `byteOffset` into `dst` (an ArrayBuffer or typed array), in
/// program order like readBuffer, without allocating a result (reuse one host array).
#[napi(ts_args_type = "handle: number, dst: ArrayBuffer | ArrayBufferView, byteOffset?: number")]
pub fn read_buffer_into(handle: Unknown<'_>, dst: Unknown<'_>, byte_offset: Option<Unknown<'_>>) -> napi::Result<(), ErrorCode> {
    guard("readBufferInto", || {
        let handle = num(handle, "handle")?;
        let mut dst = byte_view(dst, "dst")?;
        let offset = opt_num(byte_offset, "byteOffset")?;
        let out = dst.as_mut_slice();
        global::with(|rt| rt.read_into(handle, offset, out))
    })
}

/// Like readBuffer, but snapshots now and waits off the JS thread.
#[napi(ts_args_type = "handle: number, byteOffset?: number, byteLength?: number", ts_return_type = "Promise<ArrayBuffer>")]
pub fn read_buffer_async(
    handle: Unknown<'_>,
    byte_offset: Option<Unknown<'_>>,
    byte_length: Option<Unknown<'_>>,
) -> napi::Result<AsyncTask<ReadTask>, ErrorCode> {
    let ticket = guard("readBufferAsync", || {
        let (handle, offset, len) = (num(handle, "handle")?, opt_num(byte_offset, "byteOffset")?, opt_num(byte_length, "byteLength")?);
        global::with(|rt| rt.read_async(handle, offset, len))
    })?;
    let task = match ticket {
        ReadTicket::Ready(data) => ReadTask::ready(data),
        ReadTicket::Pending(p) => {
            let (dev, _) = guard("readBufferAsync", global::device)?;
            ReadTask::pending(dev, p)
        }
    };
    Ok(AsyncTask::new(task))
}

/// Fills `byteLength` bytes at `byteOffset` (multiples of 4) with a repeated u32 pattern.
#[napi(ts_args_type = "handle: number, u32Pattern: number, byteOffset?: number, byteLength?: number")]
pub fn fill_buffer(
    handle: Unknown<'_>,
    u32_pattern: Unknown<'_>,
    byte_offset: Option<Unknown<'_>>,
    byte_length: Option<Unknown<'_>>,
) -> napi::Result<(), ErrorCode> {
    guard("fillBuffer", || {
        let handle = num(handle, "handle")?;
        let pattern = num(u32_pattern, "u32Pattern")?;
        if !(pattern.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&pattern)) {
            return Err(HeliosError::invalid_argument(format!("u32Pattern {pattern} is not a 32-bit unsigned integer")));
        }
        let offset = opt_num(byte_offset, "byteOffset")?.unwrap_or(0.0);
        let len = opt_num(byte_length, "byteLength")?;
        global::with(|rt| rt.fill(handle, pattern as u32, offset, len))
    })
}

/// Copies `byteLength` bytes between buffers, in program order.
#[napi(ts_args_type = "src: number, dst: number, srcOffset: number, dstOffset: number, byteLength: number")]
pub fn copy_buffer(
    src: Unknown<'_>,
    dst: Unknown<'_>,
    src_offset: Unknown<'_>,
    dst_offset: Unknown<'_>,
    byte_length: Unknown<'_>,
) -> napi::Result<(), ErrorCode> {
    guard("copyBuffer", || {
        let (s, d) = (num(src, "src")?, num(dst, "dst")?);
        let (so, dof, n) = (num(src_offset, "srcOffset")?, num(dst_offset, "dstOffset")?, num(byte_length, "byteLength")?);
        global::with(|rt| rt.copy(s, d, so, dof, n))
    })
}

/// Leases a buffer of at least `byteLength` bytes from the size-bucketed pool.
#[napi(ts_args_type = "byteLength: number")]
pub fn lease_buffer(byte_length: Unknown<'_>) -> napi::Result<f64, ErrorCode> {
    guard("leaseBuffer", || {
        let len = num(byte_length, "byteLength")?;
        global::with(|rt| rt.lease_buffer(len))
    })
}

/// Returns a leased buffer; it is handed out again only after its last GPU use completed.
#[napi(ts_args_type = "handle: number")]
pub fn release_buffer(handle: Unknown<'_>) -> napi::Result<(), ErrorCode> {
    guard("releaseBuffer", || {
        let handle = num(handle, "handle")?;
        global::with(|rt| rt.release_buffer(handle))
    })
}

#[napi]
pub fn pool_stats() -> napi::Result<PoolStats, ErrorCode> {
    guard("poolStats", || {
        global::with(|rt| {
            let s = rt.pool_stats();
            Ok(PoolStats {
                leased_bytes: s.leased_bytes as f64,
                free_bytes: s.free_bytes as f64,
                peak_bytes: s.peak_bytes as f64,
                peak_leased_bytes: s.peak_leased_bytes as f64,
                allocations: s.allocations as f64,
                reuses: s.reuses as f64,
                in_batch_reuses: s.in_batch_reuses as f64,
                free_buffers: s.free_buffers as f64,
                allocated_ahead: s.allocated_ahead as f64,
                ahead_bytes: s.ahead_bytes as f64,
            })
        })
    })
}

/// Frees idle pooled buffers whose last use completed; poolStats' peaks restart from what remains.
#[napi]
pub fn trim_pool() -> napi::Result<(), ErrorCode> {
    guard("trimPool", || global::with(|rt| rt.trim_pool()))
}
