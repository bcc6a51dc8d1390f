//! JS object shapes (`#[napi(object)]`), exactly as issue 2 names them.

use napi_derive::napi;

use crate::caps::{CoopComponent, CoopScope, DeviceCaps};
use crate::runtime::global::DeviceFlags;
use crate::vk::adapter::AdapterInfo;

#[napi(object)]
pub struct InitOptions {
    /// Physical-device index or name substring (overrides HELIOS_DEVICE).
    pub device: Option<napi::bindgen_prelude::Either<u32, String>>,
    /// Enable VK_LAYER_KHRONOS_validation with synchronization validation (overrides HELIOS_VALIDATION).
    pub validation: Option<bool>,
    /// Create the device able to share buffers and timelines with CUDA where it has
    /// VK_KHR_external_memory_fd and VK_KHR_external_semaphore_fd (the distributed layer sets it;
    /// `DeviceInfo.shareable` says whether it took).
    pub shareable: Option<bool>,
    /// Directory of shipped pipeline-cache seeds (`<vendorID>-<deviceID>-<pipelineCacheUUID>.bin`),
    /// read when the device has no usable cache file of its own (`HELIOS_PIPELINE_SEED=0`: never).
    /// The package passes its `data/pipeline-cache`.
    pub pipeline_seed_dir: Option<String>,
}

#[napi(object, js_name = "CoopMatShape")]
pub struct JsCoopMatShape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    #[napi(ts_type = "'f16' | 'f32' | 'bf16' | 'f64' | 'i8' | 'u8' | 'i32' | 'u32' | 'other'")]
    pub a: String,
    #[napi(ts_type = "'f16' | 'f32' | 'bf16' | 'f64' | 'i8' | 'u8' | 'i32' | 'u32' | 'other'")]
    pub b: String,
    #[napi(ts_type = "'f16' | 'f32' | 'bf16' | 'f64' | 'i8' | 'u8' | 'i32' | 'u32' | 'other'")]
    pub c: String,
    #[napi(ts_type = "'f16' | 'f32' | 'bf16' | 'f64' | 'i8' | 'u8' | 'i32' | 'u32' | 'other'")]
    pub result: String,
    #[napi(ts_type = "'subgroup' | 'workgroup'")]
    pub scope: String,
    pub saturating: bool,
}

#[napi(object)]
pub struct DeviceInfo {
    pub device_name: String,
    pub vendor_id: u32,
    pub device_id: u32,
    #[napi(ts_type = "'discrete' | 'integrated' | 'virtual' | 'cpu' | 'other'")]
    pub device_type: String,
    pub driver_name: String,
    pub driver_info: String,
    pub driver_version: String,
    /// "1.3.x".
    pub api_version: String,
    pub device_uuid: String,
    pub f16_supported: bool,
    pub bf16_supported: bool,
    pub coop_mat_supported: bool,
    pub coop_mat2_supported: bool,
    pub coop_mat_shapes: Vec<JsCoopMatShape>,
    /// Preferred f16-input, f32-accumulator subgroup shape (0 when there is none).
    pub coop_mat_m: u32,
    pub coop_mat_n: u32,
    pub coop_mat_k: u32,
    pub subgroup_size: u32,
    /// Maximum invocations per workgroup.
    pub max_workgroup_size: u32,
    /// Most workgroups one dispatch may have along x, y and z (maxComputeWorkGroupCount; NVIDIA
    /// allows 2^31 - 1 along x, lavapipe 65535): larger `groups` fail with ERR_HELIOS_OUT_OF_RANGE.
    pub max_workgroup_count: Vec<u32>,
    pub max_shared_memory_bytes: u32,
    /// maxStorageBufferRange as the driver reports it (bytes).
    pub max_storage_buffer_range: f64,
    /// maxBufferSize (maintenance4, bytes).
    pub max_buffer_size: f64,
    /// The largest buffer a dispatch may bind (bytes): min(maxStorageBufferRange, 2^31 - 1,
    /// HELIOS_MAX_BINDING_BYTES). A dispatch binding a larger buffer fails with ERR_HELIOS_OUT_OF_RANGE.
    pub max_binding_bytes: f64,
    pub has_async_transfer: bool,
    pub has_push_descriptors: bool,
    #[napi(js_name = "hasBDA")]
    pub has_bda: bool,
    pub timestamp_period_ns: f64,
    pub atomic_float_add_supported: bool,
    pub validation: bool,
    /// How hazard barriers are recorded: "global" or "buffer" (`HELIOS_BARRIER`).
    pub barrier_mode: String,
    /// Bounds behaviour of shader buffer accesses (`HELIOS_ROBUSTNESS`, where the device has it):
    /// "robustBufferAccess2", "robustBufferAccess" or "off".
    #[napi(ts_type = "'robustBufferAccess2' | 'robustBufferAccess' | 'off'")]
    pub robustness: String,
    /// Whether buffers can be shared (initDevice `shareable` on a device with
    /// VK_KHR_external_memory_fd), and timelines too (VK_KHR_external_semaphore_fd): CUDA
    /// interop (distributed training) needs both.
    pub shareable: bool,
    pub shareable_timelines: bool,
    /// Where the driver's pipeline cache started from at initDevice: this device's own cache
    /// file, a seed shipped for its GPU model and driver build (data/pipeline-cache), or empty.
    #[napi(ts_type = "'own' | 'seed' | 'empty'")]
    pub pipeline_cache_source: String,
}

#[napi(object)]
pub struct BufferOptions {
    /// Host-visible memory (mapped; preferring device-local).
    pub host_visible: Option<bool>,
}

#[napi(object)]
pub struct PipelineLayout {
    /// Access per binding i (the storage buffer at set 0, binding i).
    #[napi(ts_type = "Array<'read' | 'write' | 'readwrite'>")]
    pub bindings: Vec<String>,
    pub push_constant_bytes: Option<u32>,
    pub entry_point: Option<String>,
    pub label: Option<String>,
}

#[napi(object)]
pub struct BatchOptions {
    /// Write GPU timestamps around each dispatch (read them with batchProfile).
    pub profile: Option<bool>,
    /// Let the runtime submit the part of this batch recorded so far before a lease allocates
    /// fresh device memory (1 MiB or more), so the GPU runs it while the driver allocates
    /// (NVIDIA: ~23 ms per GiB). Such a batch may be split, and a split batch cannot be captured.
    pub overlap_allocations: Option<bool>,
}

#[napi(object)]
pub struct PoolStats {
    pub leased_bytes: f64,
    pub free_bytes: f64,
    /// High-water mark of leased + free bytes since the last trimPool.
    pub peak_bytes: f64,
    /// High-water mark of leased bytes (the live set, bucket-rounded) since the last trimPool.
    pub peak_leased_bytes: f64,
    pub allocations: f64,
    pub reuses: f64,
    /// Reuses of a buffer whose last GPU use was still pending, inside an open batch (in `reuses` too).
    pub in_batch_reuses: f64,
    /// Idle buffers the pool holds now.
    pub free_buffers: f64,
    /// Allocations served by a buffer a background thread made ahead (in `allocations` too).
    pub allocated_ahead: f64,
    /// Device bytes made ahead and not leased yet (beside leased + free).
    pub ahead_bytes: f64,
}

#[napi(object)]
pub struct ProfileEntry {
    pub label: String,
    /// End minus start stamp of this dispatch.
    pub gpu_ns: f64,
    /// Start stamp in ns on the queue's clock, from an origin the runtime fixes at its first
    /// profile read (shared by all batches; absolute stamps would exceed f64's exact integers);
    /// top of pipe, so it can be written before earlier, unrelated work finishes.
    pub start_ns: f64,
    /// End stamp on the same clock: the GPU time of a set of batches is max(endNs) - min(startNs).
    pub end_ns: f64,
}

fn component(c: CoopComponent) -> String {
    c.as_str().to_string()
}

/// The preferred f16 x f16 + f32 subgroup shape: 16x16x16 when offered, else the first.
fn preferred_shape(caps: &DeviceCaps) -> (u32, u32, u32) {
    let f16 = caps.coop_mat_shapes.iter().filter(|s| {
        s.a == CoopComponent::F16
            && s.b == CoopComponent::F16
            && s.c == CoopComponent::F32
            && s.result == CoopComponent::F32
            && s.scope == CoopScope::Subgroup
    });
    let all: Vec<_> = f16.collect();
    all.iter()
        .find(|s| (s.m, s.n, s.k) == (16, 16, 16))
        .or(all.first())
        .map(|s| (s.m, s.n, s.k))
        .unwrap_or((0, 0, 0))
}

pub fn device_info(info: AdapterInfo, caps: DeviceCaps, flags: DeviceFlags) -> DeviceInfo {
    let (m, n, k) = preferred_shape(&caps);
    DeviceInfo {
        device_name: info.device_name,
        vendor_id: info.vendor_id,
        device_id: info.device_id,
        device_type: info.device_type.to_string(),
        driver_name: info.driver_name,
        driver_info: info.driver_info,
        driver_version: info.driver_version,
        api_version: info.api_version,
        device_uuid: info.device_uuid,
        f16_supported: caps.f16,
        bf16_supported: caps.bf16,
        coop_mat_supported: caps.coop_mat,
        coop_mat2_supported: caps.coop_mat2,
        coop_mat_shapes: caps
            .coop_mat_shapes
            .iter()
            .map(|s| JsCoopMatShape {
                m: s.m,
                n: s.n,
                k: s.k,
                a: component(s.a),
                b: component(s.b),
                c: component(s.c),
                result: component(s.result),
                scope: if s.scope == CoopScope::Subgroup { "subgroup" } else { "workgroup" }.to_string(),
                saturating: s.saturating,
            })
            .collect(),
        coop_mat_m: m,
        coop_mat_n: n,
        coop_mat_k: k,
        subgroup_size: caps.subgroup_size,
        max_workgroup_size: caps.max_workgroup_invocations,
        max_workgroup_count: info.max_workgroup_count.to_vec(),
        max_shared_memory_bytes: caps.max_shared_memory_bytes,
        max_storage_buffer_range: info.max_storage_buffer_range as f64,
        max_buffer_size: info.max_buffer_size as f64,
        max_binding_bytes: info.max_binding_bytes as f64,
        has_async_transfer: flags.has_async_transfer,
        has_push_descriptors: flags.has_push_descriptors,
        has_bda: flags.has_bda,
        timestamp_period_ns: info.timestamp_period_ns,
        atomic_float_add_supported: caps.atomic_float_add,
        validation: flags.validation,
        barrier_mode: flags.barrier_mode.as_str().to_string(),
        robustness: flags.robustness.as_str().to_string(),
        shareable: flags.shareable,
        shareable_timelines: flags.shareable_timelines,
        pipeline_cache_source: flags.pipeline_cache_source.as_str().to_string(),
    }
}

/// One driver statistic of a pipeline executable.
#[napi(object)]
pub struct PipelineStatistic {
    pub name: String,
    pub value: f64,
}
