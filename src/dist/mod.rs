//! Distributed training over NCCL (issue 28; docs/distributed.md). The CUDA driver and NCCL are
//! opened at run time, only when a process asks for them (`cuda`, `nccl`, `loader`); a process
//! that never calls `dist` never loads either. `comm` binds one communicator to the Helios
//! device; this module holds it, runs the collectives the JS layer asks for, and watches them:
//! an NCCL error, or a collective unfinished `timeout` after this rank's inputs were ready,
//! ends the process with a message (PyTorch's NCCL watchdog does the same), since a collective
//! stuck on a dead peer would otherwise hang the next host wait forever.

pub mod comm;
pub mod cuda;
pub mod loader;
pub mod nccl;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::dist::comm::{Comm, CommInit, Collective};
use crate::dist::cuda::Cuda;
use crate::dist::nccl::{DataType, NcclComm, UniqueId};
use crate::error::{ErrorCode, HeliosError, HeliosResult};
use crate::runtime::global;

static STATE: Mutex<Option<Comm>> = Mutex::new(None);

/// What an abort from another thread needs without taking `STATE` (its holder may be blocked).
struct AbortTarget {
    abort: unsafe extern "C" fn(NcclComm) -> crate::dist::nccl::NcclResult,
    comm: NcclComm,
}
// SAFETY: ncclCommAbort may be called from any thread on a live communicator; the target is
// cleared before the communicator is destroyed.
unsafe impl Send for AbortTarget {}

static ABORT_TARGET: Mutex<Option<AbortTarget>> = Mutex::new(None);
static ABORTED: Mutex<Option<String>> = Mutex::new(None);
static WATCHING: AtomicBool = AtomicBool::new(false);

fn unavailable(msg: impl Into<String>) -> HeliosError {
    HeliosError::new(ErrorCode::DistUnavailable, msg)
}

/// The CUDA device `local_rank` and its UUID (32 hex digits, as Vulkan's deviceUUID).
pub fn device_uuid(local_rank: i32) -> HeliosResult<String> {
    let cuda = Cuda::load()?;
    // SAFETY: cuInit may be called more than once.
    cuda.check("cuInit", unsafe { (cuda.init)(0) })?;
    let mut n = 0;
    // SAFETY: writes one int.
    cuda.check("cuDeviceGetCount", unsafe { (cuda.device_get_count)(&mut n) })?;
    if local_rank < 0 || local_rank >= n {
        return Err(unavailable(format!("LOCAL_RANK {local_rank} has no GPU: CUDA sees {n} device(s) (CUDA_VISIBLE_DEVICES?)")));
    }
    let mut dev = 0;
    // SAFETY: ordinal checked above.
    cuda.check("cuDeviceGet", unsafe { (cuda.device_get)(&mut dev, local_rank) })?;
    let mut uuid = [0u8; 16];
    // SAFETY: writes 16 bytes.
    cuda.check("cuDeviceGetUuid", unsafe { (cuda.device_get_uuid)(&mut uuid, dev) })?;
    Ok(uuid.iter().map(|b| format!("{b:02x}")).collect())
}

/// A fresh NCCL unique id (rank 0 makes it; the rendezvous hands it to the others).
pub fn unique_id() -> HeliosResult<Vec<u8>> {
    let nccl = loader::open_nccl(crate::config::nccl_lib().as_deref())?;
    let mut id = UniqueId { internal: [0; 128] };
    // SAFETY: writes the 128-byte id.
    nccl.check("ncclGetUniqueId", unsafe { (nccl.get_unique_id)(&mut id) })?;
    Ok(id.internal.to_vec())
}

/// Which NCCL would be used and its version ("path (NCCL x.y.z)").
pub fn describe() -> HeliosResult<String> {
    let nccl = loader::open_nccl(crate::config::nccl_lib().as_deref())?;
    let v = nccl.version();
    Ok(format!("{} (NCCL {}.{}.{})", nccl.path, v / 10000, (v / 100) % 100, v % 100))
}

pub struct InitArgs {
    pub id: Vec<u8>,
    pub rank: i32,
    pub world: i32,
    pub local_rank: i32,
    pub timeout_ms: u64,
}

/// Joins the job's communicator on the Helios device (which must be shareable and the GPU
/// CUDA calls `local_rank`).
pub fn init(a: InitArgs) -> HeliosResult<()> {
    if STATE.lock().is_some() {
        return Err(HeliosError::invalid_argument("a communicator already exists (distDestroy first)"));
    }
    let internal: [u8; 128] = a.id.as_slice().try_into().map_err(|_| HeliosError::invalid_argument(format!("the unique id has {} bytes, not 128", a.id.len())))?;
    if a.world < 1 || a.rank < 0 || a.rank >= a.world {
        return Err(HeliosError::invalid_argument(format!("rank {} is not in a world of {}", a.rank, a.world)));
    }
    let uuid = device_uuid(a.local_rank)?;
    let (dev, (compute_fd, external_fd)) = global::with(|rt| {
        if !rt.dev.sharing.as_ref().is_some_and(|s| s.timelines()) {
            return Err(unavailable(format!(
                "{} cannot share memory with CUDA (initDevice({{shareable: true}}) before anything else initializes it, on a driver with VK_KHR_external_memory_fd and VK_KHR_external_semaphore_fd)",
                rt.info().device_name
            )));
        }
        if rt.info().device_uuid != uuid {
            return Err(unavailable(format!("the Helios device {} ({}) is not CUDA device {} ({uuid})", rt.info().device_name, rt.info().device_uuid, a.local_rank)));
        }
        Ok((rt.dev.clone(), rt.export_timelines()?))
    })?;
    let cuda = Cuda::load()?;
    let nccl = loader::open_nccl(crate::config::nccl_lib().as_deref())?;
    let mut device = 0;
    // SAFETY: the ordinal was checked by device_uuid.
    cuda.check("cuDeviceGet", unsafe { (cuda.device_get)(&mut device, a.local_rank) })?;
    let abort = nccl.comm_abort;
    let c = Comm::new(cuda, nccl, CommInit { id: UniqueId { internal }, rank: a.rank, world: a.world, device, timeout: Duration::from_millis(a.timeout_ms), dev, compute_fd, external_fd })?;
    *ABORT_TARGET.lock() = Some(AbortTarget { abort, comm: c.comm });
    *ABORTED.lock() = None;
    *STATE.lock() = Some(c);
    start_watchdog();
    Ok(())
}

fn with_comm<T>(call: &str, f: impl FnOnce(&mut Comm) -> HeliosResult<T>) -> HeliosResult<T> {
    if let Some(r) = ABORTED.lock().clone() {
        return Err(HeliosError::new(ErrorCode::DistAborted, format!("{call}: the communicator was aborted: {r}")));
    }
    let mut g = STATE.lock();
    let c = g.as_mut().ok_or_else(|| HeliosError::invalid_argument(format!("{call}: no communicator (distInit first)")))?;
    c.make_current()?;
    f(c)
}

/// A buffer shared with CUDA (a buffer handle: destroyBuffer frees it after distDestroy).
pub fn shared_buffer(bytes: f64) -> HeliosResult<f64> {
    with_comm("distSharedBuffer", |_| Ok(()))?;
    // The runtime lock before the communicator's, as in `collective`.
    let (handle, ex) = global::with(|rt| rt.create_shared_buffer(bytes))?;
    let mut handed = false;
    let mapped = with_comm("distSharedBuffer", |c| {
        handed = true;
        c.map(handle, ex.fd, ex.size)
    });
    if let Err(e) = mapped {
        if !handed {
            crate::vk::external::close_fd(ex.fd);
        }
        let _ = global::with(|rt| rt.destroy_buffer(handle));
        return Err(e);
    }
    Ok(handle)
}

/// Enqueues a collective on `count` elements at `offset` bytes of a shared buffer, ordered after
/// every compute submission so far; compute work using the buffer later waits for it.
pub fn collective(c: Collective, handle: f64, offset: u64, count: u64, dtype: DataType) -> HeliosResult<u64> {
    global::with(|rt| {
        if !rt.is_shared(handle)? {
            return Err(HeliosError::invalid_argument(format!("{}: buffer {handle} is not shared with CUDA (make it with distSharedBuffer)", c.name())));
        }
        let after = rt.flush_for_external()?;
        let done = with_comm(c.name(), |comm| comm.enqueue(c, handle, offset, count, dtype, after))?;
        rt.order_after_external(handle, done)?;
        Ok(done)
    })
}

/// Waits on the host until every collective enqueued so far finished.
pub fn synchronize() -> HeliosResult<()> {
    with_comm("distSynchronize", |c| c.synchronize())
}

/// Aborts the communicator from any thread; later calls fail with ERR_HELIOS_DIST_ABORTED.
pub fn abort(reason: &str) {
    let mut a = ABORTED.lock();
    if a.is_some() {
        return;
    }
    *a = Some(reason.to_string());
    drop(a);
    if let Some(t) = ABORT_TARGET.lock().take() {
        // SAFETY: see AbortTarget.
        unsafe { (t.abort)(t.comm) };
    }
}

/// Destroys the communicator (draining its stream unless it was aborted).
pub fn destroy() {
    WATCHING.store(false, Ordering::SeqCst);
    let taken = ABORT_TARGET.lock().take();
    let aborted = taken.is_none() || ABORTED.lock().is_some();
    if let Some(c) = STATE.lock().take() {
        let _ = c.make_current();
        c.destroy(aborted);
    }
}

/// Ends the process: a collective can no longer finish, and every host wait would hang.
fn fatal(msg: &str) -> ! {
    eprintln!("helios dist: {msg}; aborting NCCL and exiting");
    abort(msg);
    // SAFETY: _exit ends the process at once (no atexit handlers that could wait on the GPU).
    unsafe { libc::_exit(1) }
}

fn start_watchdog() {
    if WATCHING.swap(true, Ordering::SeqCst) {
        return;
    }
    let spawned = std::thread::Builder::new().name("helios-dist-watchdog".into()).spawn(|| {
        let mut current = false;
        while WATCHING.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
            // After an abort the communicator is gone (ncclCommAbort frees it): asking it for
            // errors read freed memory and reported a spurious "invalid argument".
            if ABORTED.lock().is_some() {
                return;
            }
            let Some(mut g) = STATE.try_lock() else { continue };
            let Some(c) = g.as_mut() else { return };
            if !current {
                current = c.make_current().is_ok();
            }
            if let Some(e) = c.async_error() {
                fatal(&format!("rank {}: {e}", c.rank));
            }
            let dev: Arc<crate::vk::device::Device> = c.dev.clone();
            let done = crate::vk::sync::counter(&dev, dev.compute_sem).unwrap_or(0);
            if let Some(label) = c.poll(done) {
                fatal(&format!("rank {}: {label} did not finish within {} s after this rank's inputs were ready (a peer rank died or hung)", c.rank, c.timeout.as_secs()));
            }
        }
    });
    if spawned.is_err() {
        WATCHING.store(false, Ordering::SeqCst);
    }
}
