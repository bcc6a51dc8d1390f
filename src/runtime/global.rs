//! The one global runtime behind a lock, and the plain-Rust entry points other modules use
//! (`device_caps`, `create_pipeline`). Every access checks that a device exists, refuses
//! work after a device loss, and records a loss when a call reports one.
//!
//! One device per process, owned by the JS thread that created it (the main thread or one
//! worker_thread: each isolate runs its JS on its own OS thread). Calls from any other JS thread
//! get ERR_HELIOS_ISOLATE while the owner holds the device, so one worker can neither record
//! into another's batch nor destroy its handles. Work that runs off the runtime lock (parallel
//! pipeline builds) holds `OFF_LOCK`, which `destroy` takes first.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::caps::{DeviceCaps, PipelineLayoutDesc};
use crate::error::{ErrorCode, HeliosError, HeliosResult};
use crate::runtime::context::{InitOptions, Runtime};
use crate::runtime::handles::MAX_EPOCH;
use crate::vk::adapter::AdapterInfo;
use crate::vk::device::Device;
use crate::vk::instance::MessageSink;

static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);
/// Validation messages of the current (or last) device, readable even after destroy().
static MESSAGES: Mutex<Option<MessageSink>> = Mutex::new(None);
/// The epoch of the next device; advanced only when a device was created, under RUNTIME's lock.
static NEXT_EPOCH: AtomicU32 = AtomicU32::new(1);
/// The JS thread that owns the live runtime (0: none); written under RUNTIME's lock.
static OWNER: AtomicU64 = AtomicU64::new(0);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
/// Held (shared) by work that uses the device without the runtime lock; `destroy` takes it
/// exclusively, so the pipeline cache and device outlive every build in progress.
static OFF_LOCK: RwLock<()> = RwLock::new(());

thread_local! {
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// A process-unique id of the calling thread (Rust's ThreadId has no stable integer form).
pub fn this_thread() -> u64 {
    THREAD.with(|t| *t)
}

/// ERR_HELIOS_ISOLATE unless the calling thread owns the device (or nobody does).
fn check_owner() -> HeliosResult<()> {
    let owner = OWNER.load(Ordering::Relaxed);
    if owner != 0 && owner != this_thread() {
        return Err(HeliosError::isolate(
            "the device belongs to another JS thread (the main thread or a worker_thread that called initDevice); \
             Helios runs one device per process: call destroy() on that thread first, or use the device only there",
        ));
    }
    Ok(())
}

/// Runs `f` on the live runtime (ERR_HELIOS_DESTROYED when there is none) for the JS thread
/// that owns it (ERR_HELIOS_ISOLATE for any other).
pub fn with<T>(f: impl FnOnce(&mut Runtime) -> HeliosResult<T>) -> HeliosResult<T> {
    with_runtime(true, f)
}

fn with_runtime<T>(owner_only: bool, f: impl FnOnce(&mut Runtime) -> HeliosResult<T>) -> HeliosResult<T> {
    let mut guard = RUNTIME.lock();
    if owner_only {
        check_owner()?;
    }
    let rt = guard
        .as_mut()
        .ok_or_else(|| HeliosError::destroyed("no device: call initDevice() first (or again after destroy())"))?;
    if rt.lost {
        return Err(HeliosError::device_lost("the GPU device was lost; call destroy() and initDevice() to recover"));
    }
    let result = f(rt);
    if let Err(e) = &result {
        if e.code == ErrorCode::DeviceLost {
            rt.lost = true;
        }
    }
    result
}

/// Device facts plus whether validation is on.
pub fn info() -> HeliosResult<(AdapterInfo, DeviceCaps, DeviceFlags)> {
    with(|rt| Ok((rt.info().clone(), rt.caps().clone(), flags(rt))))
}

#[derive(Debug, Clone, Copy)]
pub struct DeviceFlags {
    pub validation: bool,
    pub has_async_transfer: bool,
    pub has_push_descriptors: bool,
    pub has_bda: bool,
    pub barrier_mode: crate::config::BarrierMode,
    pub robustness: crate::config::Robustness,
    pub shareable: bool,
    pub shareable_timelines: bool,
    pub pipeline_cache_source: crate::runtime::pipeline_seed::CacheSource,
}

fn flags(rt: &Runtime) -> DeviceFlags {
    DeviceFlags {
        validation: rt.dev.instance.validation,
        has_async_transfer: rt.dev.has_async_transfer(),
        has_push_descriptors: rt.use_push_descriptors,
        has_bda: rt.dev.enabled.bda,
        barrier_mode: rt.cfg.barrier,
        robustness: rt.dev.enabled.robustness,
        shareable: rt.dev.sharing.is_some(),
        shareable_timelines: rt.dev.sharing.as_ref().is_some_and(|s| s.timelines()),
        pipeline_cache_source: rt.cache.source,
    }
}

/// Creates the runtime if there is none (idempotent).
pub fn init(opts: &InitOptions) -> HeliosResult<(AdapterInfo, DeviceCaps, DeviceFlags)> {
    let mut guard = RUNTIME.lock();
    check_owner()?;
    if guard.is_none() {
        let epoch = NEXT_EPOCH.load(Ordering::Relaxed);
        if epoch > MAX_EPOCH {
            return Err(HeliosError::out_of_range(format!(
                "this process already created {MAX_EPOCH} devices, the most its handles can tell apart; start a new process"
            )));
        }
        let rt = Runtime::new(opts, epoch)?;
        NEXT_EPOCH.store(epoch + 1, Ordering::Relaxed);
        *MESSAGES.lock() = Some(rt.messages());
        *guard = Some(rt);
        OWNER.store(this_thread(), Ordering::Relaxed);
    }
    let rt = guard.as_ref().ok_or_else(|| HeliosError::internal("runtime vanished"))?;
    Ok((rt.info().clone(), rt.caps().clone(), flags(rt)))
}

/// Waits idle and frees everything (idempotent); only the owning JS thread may.
pub fn destroy() -> HeliosResult<()> {
    destroy_if(|| check_owner().map(|_| true))
}

/// At the exit of JS thread `thread` (its env cleanup hook): frees the device if that thread
/// owns it, after the queue drains, so the process or worker never exits with GPU work (and
/// driver threads) in flight. Another thread's device is left alone.
pub fn release_at_exit(thread: u64) {
    let _ = destroy_if(|| Ok(OWNER.load(Ordering::Relaxed) == thread));
}

/// Waits for the queue to drain and saves the pipeline cache (a `process.on("exit")` listener
/// of the owning thread: later listeners may still use the device; the env cleanup hook frees
/// it after them, where it runs: process.exit() runs none).
pub fn drain_at_exit(thread: u64) {
    let mut guard = RUNTIME.lock();
    if let (Some(rt), true) = (guard.as_mut(), OWNER.load(Ordering::Relaxed) == thread) {
        rt.dev.wait_idle();
        rt.save_cache();
        // process.exit() runs no cleanup hook: no thread may be inside the driver as it unloads.
        rt.stop_allocating_ahead();
    }
}

/// Takes and drops the runtime when `allowed` says so. The off-lock gate is taken first, so a
/// pipeline build in progress on other threads finishes before the cache and device go.
fn destroy_if(allowed: impl FnOnce() -> HeliosResult<bool>) -> HeliosResult<()> {
    let _gate = OFF_LOCK.write();
    let mut guard = RUNTIME.lock();
    if guard.is_none() || !allowed()? {
        return Ok(());
    }
    let rt = guard.take();
    OWNER.store(0, Ordering::Relaxed);
    drop(rt);
    Ok(())
}

pub fn take_messages() -> Vec<String> {
    MESSAGES.lock().as_ref().map(|m| std::mem::take(&mut *m.lock())).unwrap_or_default()
}

/// The device (for waits off the JS thread, without holding the lock).
pub fn device() -> HeliosResult<(Arc<Device>, u64)> {
    with(|rt| Ok((rt.dev.clone(), rt.id)))
}

/// Runs `f` only if the runtime `id` is still the live one. For tasks on libuv threads, which
/// act for the owner that started them (so no owner check).
pub fn with_same<T>(id: u64, f: impl FnOnce(&mut Runtime) -> HeliosResult<T>) -> HeliosResult<T> {
    with_runtime(false, |rt| {
        if rt.id != id {
            return Err(HeliosError::destroyed("the device was destroyed while the call was pending"));
        }
        f(rt)
    })
}

/// The device's capabilities, for the kernel assembler.
pub fn device_caps() -> HeliosResult<DeviceCaps> {
    with(|rt| Ok(rt.caps().clone()))
}

/// Driver statistics (register counts, spills, ...) of a pipeline as (name, value) pairs.
/// Needs HELIOS_PIPELINE_STATS=1 and VK_KHR_pipeline_executable_properties.
pub fn pipeline_statistics(handle: f64) -> HeliosResult<Vec<(String, f64)>> {
    with(|rt| {
        let pipe = rt.pipelines.get(handle)?.clone();
        crate::vk::pipeline::statistics(&rt.dev, &pipe.vk)?.ok_or_else(|| {
            HeliosError::invalid_argument(
                "pipeline statistics need HELIOS_PIPELINE_STATS=1 and a driver with VK_KHR_pipeline_executable_properties",
            )
        })
    })
}

/// Builds a compute pipeline from assembled SPIR-V; returns the JS pipeline handle.
pub fn create_pipeline(spirv: &[u32], layout: &PipelineLayoutDesc) -> HeliosResult<f64> {
    with(|rt| rt.create_pipeline(spirv, layout))
}

/// Builds pipelines for `jobs` on up to `threads` threads without holding the runtime lock (the
/// driver's compile of a large kernel takes 0.2-1 s), then registers them. Called from the JS
/// thread; the off-lock gate keeps `destroy` (from an exit hook, say) waiting until the builds
/// are done with the pipeline cache. Returns one handle or error per job, in order.
pub fn create_pipelines(jobs: &[(&[u32], &PipelineLayoutDesc)], threads: usize) -> HeliosResult<Vec<HeliosResult<f64>>> {
    let _gate = OFF_LOCK.read();
    let builder = with(|rt| Ok(rt.pipeline_builder()))?;
    let built = crate::runtime::parallel::map(jobs, threads, |(spirv, layout)| builder.build(spirv, layout));
    with(|rt| Ok(built.into_iter().map(|b| b.and_then(|obj| rt.insert_pipeline(obj))).collect()))
}
