//! Buffers allocated with gpu-allocator (large device buffers with memory of their own, the rest
//! sub-allocated from shared blocks), and host copies into/out of mapped memory.

use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, OnceLock};

use parking_lot::Mutex;

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme, Allocator, AllocatorCreateDesc};
use gpu_allocator::{AllocationError, MemoryLocation};

use crate::error::{HeliosError, HeliosResult};
use crate::vk::device::Device;
use crate::vk::sync::vk_error;

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Device-local; may still be host-visible (UMA, ReBAR).
    Device,
    /// Host-visible, preferring device-local (createBuffer `hostVisible`).
    HostVisible,
    /// Host memory (cached, coherent) for staging uploads and downloads: CPU copies run at
    /// memory speed and the DMA engine crosses the bus, instead of CPU writes into the BAR.
    Staging,
}

pub struct GpuBuffer {
    pub raw: vk::Buffer,
    pub size: u64,
    alloc: Option<Allocation>,
    /// Its memory is a dedicated allocation counted in `Device::dedicated_live`.
    counted: bool,
    /// Memory of its own, allocated without gpu-allocator (a buffer shared with CUDA:
    /// `vk::external`; a buffer allocated ahead: `vk::dedicated`), freed with it.
    dedicated: Option<vk::DeviceMemory>,
    /// `dedicated` was allocated exportable (a shared buffer CUDA may import).
    exportable: bool,
    mapped: Option<NonNull<u8>>,
}

// SAFETY: the mapped pointer refers to persistently mapped device memory that is only
// accessed through `&self`/`&mut self` methods under the runtime lock or a pinned readback.
unsafe impl Send for GpuBuffer {}
// SAFETY: see above; reads of mapped memory do not mutate Rust-visible state.
unsafe impl Sync for GpuBuffer {}

pub fn create_allocator(device: &Device) -> HeliosResult<Allocator> {
    Allocator::new(&AllocatorCreateDesc {
        instance: device.instance.raw.clone(),
        device: device.raw.clone(),
        physical_device: device.adapter.raw,
        debug_settings: Default::default(),
        buffer_device_address: device.enabled.bda,
        allocation_sizes: Default::default(),
    })
    .map_err(|e| HeliosError::internal(format!("gpu-allocator init: {e}")))
}

fn location(p: Placement) -> MemoryLocation {
    match p {
        Placement::Device => MemoryLocation::GpuOnly,
        Placement::HostVisible => MemoryLocation::CpuToGpu,
        Placement::Staging => MemoryLocation::GpuToCpu,
    }
}

/// A buffer (no memory bound yet) usable as storage and as copy source/destination on both
/// queues: what every Helios buffer is, whoever allocates its memory.
pub(crate) fn create_raw_buffer(device: &Device, size: u64) -> HeliosResult<vk::Buffer> {
    let families = device.families();
    let mut usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
    if device.enabled.bda {
        usage |= vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS;
    }
    let mut info = vk::BufferCreateInfo::default().size(size.max(4)).usage(usage);
    info = if families.len() > 1 {
        info.sharing_mode(vk::SharingMode::CONCURRENT).queue_family_indices(&families)
    } else {
        info.sharing_mode(vk::SharingMode::EXCLUSIVE)
    };
    // SAFETY: valid create info; the caller destroys the buffer (`destroy_buffer` once wrapped).
    unsafe { device.raw.create_buffer(&info, None) }.map_err(|e| vk_error("vkCreateBuffer", e))
}

/// Creates a buffer usable as storage and as copy source/destination on both queues.
pub fn create_buffer(device: &Device, alloc: &mut Allocator, size: u64, placement: Placement) -> HeliosResult<GpuBuffer> {
    let raw = create_raw_buffer(device, size)?;
    // SAFETY: `raw` was just created on this device.
    let requirements = unsafe { device.raw.get_buffer_memory_requirements(raw) };
    let dedicated = wants_dedicated(device, size, placement);
    let desc = AllocationCreateDesc {
        name: "helios",
        requirements,
        location: location(placement),
        linear: true,
        allocation_scheme: if dedicated { AllocationScheme::DedicatedBuffer(raw) } else { AllocationScheme::GpuAllocatorManaged },
    };
    let allocation = match alloc.allocate(&desc) {
        Ok(a) => a,
        Err(e) => {
            // SAFETY: the buffer has no memory bound and is not in use.
            unsafe { device.raw.destroy_buffer(raw, None) };
            return Err(match e {
                AllocationError::OutOfMemory => HeliosError::out_of_memory(format!("out of GPU memory allocating {size} bytes")),
                e => HeliosError::internal(format!("allocating {size} bytes: {e}")),
            });
        }
    };
    // SAFETY: the allocation satisfies `requirements` and is bound once.
    let bound = unsafe { device.raw.bind_buffer_memory(raw, allocation.memory(), allocation.offset()) };
    if let Err(e) = bound {
        let _ = alloc.free(allocation);
        // SAFETY: as above, unused buffer.
        unsafe { device.raw.destroy_buffer(raw, None) };
        return Err(vk_error("vkBindBufferMemory", e));
    }
    // Direct host access needs coherent memory (no flush/invalidate calls in the hot path).
    let coherent = allocation.memory_properties().contains(vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT);
    let mapped = allocation.mapped_ptr().filter(|_| coherent).map(|p| p.cast::<u8>());
    if dedicated {
        device.dedicated_live.fetch_add(1, Ordering::Relaxed);
    }
    Ok(GpuBuffer { raw, size, alloc: Some(allocation), counted: dedicated, dedicated: None, exportable: false, mapped })
}

/// Whether a buffer gets memory of its own. NVIDIA's driver (580, H100/H200) takes ~20 ms per
/// GiB to allocate a shared 256 MiB block but 1.2–4.7 ms per GiB for a dedicated allocation of
/// 16 MiB–1 GiB (bench/RESULTS.md, session 21): a loop that keeps fresh large outputs alive
/// (Alpha's bench) would otherwise pay the slow path inside its timing. Bounded to half of
/// `maxMemoryAllocationCount` so the blocks always have room.
pub fn wants_dedicated(device: &Device, size: u64, placement: Placement) -> bool {
    wants_dedicated_size(device, size, placement) && device.dedicated_live.load(Ordering::Relaxed) < dedicated_cap(device)
}

/// Live dedicated allocations allowed at once: half of `maxMemoryAllocationCount`.
pub fn dedicated_cap(device: &Device) -> u32 {
    device.adapter.limits.max_memory_allocation_count / 2
}

/// `wants_dedicated` before the cap: a device buffer of at least HELIOS_DEDICATED_MIB.
pub fn wants_dedicated_size(device: &Device, size: u64, placement: Placement) -> bool {
    let min = device.dedicated_min_bytes;
    placement == Placement::Device && min > 0 && size >= min
}

/// Frees a buffer; the caller guarantees the GPU no longer uses it.
pub fn destroy_buffer(device: &Device, alloc: &mut Allocator, mut buf: GpuBuffer) {
    if let Some(a) = buf.alloc.take() {
        let _ = alloc.free(a);
    }
    destroy_own(device, buf);
}

/// Frees a buffer whose memory is its own (`vk::dedicated`, `vk::external`): no allocator
/// needed, so the thread that made it may free it. The caller guarantees the GPU no longer
/// uses it.
pub(crate) fn destroy_own(device: &Device, mut buf: GpuBuffer) {
    debug_assert!(buf.alloc.is_none(), "a gpu-allocator buffer goes through destroy_buffer");
    if buf.counted {
        device.dedicated_live.fetch_sub(1, Ordering::Relaxed);
    }
    // SAFETY: no pending GPU use (caller contract); destroyed exactly once, before its memory.
    unsafe { device.raw.destroy_buffer(buf.raw, None) };
    if let Some(m) = buf.dedicated.take() {
        // SAFETY: the only buffer bound to this memory was destroyed above.
        unsafe { device.raw.free_memory(m, None) };
    }
}

/// Below this size a single thread copies; above, a few threads share the copy.
const PARALLEL_COPY_BYTES: usize = 8 << 20;

/// One piece of a parallel copy. `done` is dropped when the piece was copied (or dropped
/// unexecuted), which is how the submitting thread knows the pointers are no longer used.
struct Span {
    dst: *mut u8,
    /// Null: only touch `dst` once per page (first-touch page faults, see `prefault`).
    src: *const u8,
    len: usize,
    done: mpsc::Sender<()>,
}

// SAFETY: the submitting thread keeps both buffers alive and untouched until every Span's
// `done` sender is gone (see `parallel_copy`), and the spans are disjoint.
unsafe impl Send for Span {}

impl Span {
    fn run(self) {
        if self.src.is_null() {
            for at in (0..self.len).step_by(PAGE) {
                // SAFETY: `at < len`, inside the caller's buffer. Write only: a read first
                // would map the shared zero page and fault a second time on the write.
                unsafe { std::ptr::write_volatile(self.dst.add(at), 0) };
            }
        } else {
            // SAFETY: the span lies inside the caller's buffers, which do not overlap each other.
            unsafe { std::ptr::copy_nonoverlapping(self.src, self.dst, self.len) };
        }
        let _ = self.done.send(());
    }
}

/// Persistent copy threads (spawning threads per transfer chunk would cost more than the copy
/// saves on fast machines).
struct CopyPool {
    tx: Mutex<mpsc::Sender<Span>>,
    threads: usize,
}

fn copy_pool() -> &'static CopyPool {
    static POOL: OnceLock<CopyPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 8) - 1;
        let (tx, rx) = mpsc::channel::<Span>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new().name(format!("helios-copy-{i}")).spawn(move || loop {
                let job = rx.lock().recv();
                match job {
                    Ok(span) => span.run(),
                    Err(_) => return,
                }
            });
            if spawned.is_err() {
                break;
            }
        }
        CopyPool { tx: Mutex::new(tx), threads }
    })
}

const PAGE: usize = 4096;

/// Faults in every page of `out` from all copy threads, writing a zero at each page start:
/// only for a buffer about to be overwritten whole. A fresh large result is backed by
/// untouched pages: the first write to each costs a page fault (zeroing included), and one
/// thread faulting 256 MiB bounds a download far below the DMA rate; faulting in parallel
/// while the DMA runs takes that off the critical path.
pub fn prefault_for_overwrite(out: &mut [u8]) {
    parallel_copy(out.as_mut_ptr(), std::ptr::null(), out.len());
}

/// Copies `len` bytes from `src` to `dst` (or, with a null `src`, touches each page of `dst`).
fn parallel_copy(dst: *mut u8, src: *const u8, len: usize) {
    let pool = copy_pool();
    let (done_tx, done_rx) = mpsc::channel();
    let pieces = if len < PARALLEL_COPY_BYTES { 1 } else { pool.threads + 1 };
    let per = len.div_ceil(pieces).next_multiple_of(4096);
    let mut mine = None;
    let mut off = 0;
    while off < len {
        let n = per.min(len - off);
        // SAFETY: `off + n <= len`, so both pointers stay inside their buffers.
        let span = unsafe { Span { dst: dst.add(off), src: if src.is_null() { src } else { src.add(off) }, len: n, done: done_tx.clone() } };
        if mine.is_none() {
            mine = Some(span);
        } else if let Err(mpsc::SendError(span)) = pool.tx.lock().send(span) {
            span.run();
        }
        off += n;
    }
    drop(done_tx);
    if let Some(span) = mine {
        span.run();
    }
    // Returns once every span ran or was dropped: no thread touches the buffers afterwards.
    while done_rx.recv().is_ok() {}
}

/// A zeroed host buffer for a download of `len` bytes. Large ones ask for transparent huge
/// pages first: a fresh 256 MiB result otherwise costs 65,536 page faults when the copy first
/// touches it, which (not the DMA) bounds download speed.
pub fn download_vec(len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    if len >= 4 << 20 {
        const HUGE: usize = 2 << 20;
        let start = (out.as_mut_ptr() as usize).next_multiple_of(HUGE);
        let end = (out.as_mut_ptr() as usize + len) & !(HUGE - 1);
        if end > start {
            // SAFETY: [start, end) lies inside `out`'s allocation; MADV_HUGEPAGE only changes
            // how the kernel backs those pages (their contents stay zero), and failure is harmless.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    out
}

impl GpuBuffer {
    /// A buffer bound to exportable memory of its own (`vk::external`); `destroy_buffer` frees both.
    pub fn with_dedicated(raw: vk::Buffer, size: u64, memory: vk::DeviceMemory) -> GpuBuffer {
        GpuBuffer { raw, size, alloc: None, counted: false, dedicated: Some(memory), exportable: true, mapped: None }
    }

    /// A buffer bound to a dedicated allocation of its own that already counts in
    /// `Device::dedicated_live` (`vk::dedicated`), mapped when its memory is host-coherent,
    /// as gpu-allocator's dedicated buffers are; `destroy_buffer` frees both and uncounts it.
    pub(crate) fn with_counted_dedicated(raw: vk::Buffer, size: u64, memory: vk::DeviceMemory, mapped: Option<NonNull<u8>>) -> GpuBuffer {
        GpuBuffer { raw, size, alloc: None, counted: true, dedicated: Some(memory), exportable: false, mapped }
    }

    /// The exportable memory of a buffer made by `with_dedicated` (a shared buffer).
    pub fn dedicated_memory(&self) -> Option<vk::DeviceMemory> {
        self.dedicated.filter(|_| self.exportable)
    }

    pub fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Copies `data` into mapped memory at `offset`; the caller ensures no GPU access overlaps.
    pub fn write(&self, offset: u64, data: &[u8]) -> HeliosResult<()> {
        let ptr = self.mapped_range(offset, data.len() as u64)?;
        parallel_copy(ptr, data.as_ptr(), data.len());
        Ok(())
    }

    /// Copies mapped memory at `offset` into `out`; the caller ensures GPU writes completed.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> HeliosResult<()> {
        let ptr = self.mapped_range(offset, out.len() as u64)?;
        parallel_copy(out.as_mut_ptr(), ptr, out.len());
        Ok(())
    }

    fn mapped_range(&self, offset: u64, len: u64) -> HeliosResult<*mut u8> {
        let base = self.mapped.ok_or_else(|| HeliosError::internal("buffer is not host-visible".to_string()))?;
        if offset.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(HeliosError::internal(format!("mapped range {offset}+{len} beyond {}", self.size)));
        }
        // SAFETY: the range was checked against the allocation size above.
        Ok(unsafe { base.as_ptr().add(offset as usize) })
    }
}
