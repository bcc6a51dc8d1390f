//! One rank's NCCL communicator bound to the Helios device: the CUDA stream collectives run on,
//! the Vulkan timelines imported into CUDA, and the shared buffers CUDA mapped. A collective is
//! enqueued with no host wait: the stream waits on the compute timeline for the value after
//! which the buffer's inputs are written, runs the NCCL kernel, and signals the external
//! timeline, which Vulkan work using the buffer afterwards waits for (`runtime::external`).

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::dist::cuda::{self, Cuda, CuContext, CuDevicePtr, CuEvent, CuExtMem, CuExtSem, CuStream};
use crate::dist::nccl::{DataType, Nccl, NcclComm, RedOp, UniqueId};
use crate::error::{HeliosError, HeliosResult};
use crate::vk::device::Device;
use crate::vk::external::close_fd;

/// A shared buffer as CUDA sees it.
struct Mapped {
    mem: CuExtMem,
    ptr: CuDevicePtr,
    size: u64,
}

/// A collective in flight: done when its event completes. `ready`: when this rank's inputs
/// were complete (the compute timeline reached `after`); the timeout runs from then.
pub struct InFlight {
    event: CuEvent,
    label: String,
    after: u64,
    ready: Option<Instant>,
}

pub struct Comm {
    pub cuda: Cuda,
    pub nccl: Nccl,
    pub ctx: CuContext,
    stream: CuStream,
    pub comm: NcclComm,
    compute: CuExtSem,
    external: CuExtSem,
    /// Last value this rank's stream signals on the external timeline.
    next_external: u64,
    mapped: HashMap<u64, Mapped>,
    pub inflight: VecDeque<InFlight>,
    pub rank: i32,
    pub timeout: Duration,
    pub dev: Arc<Device>,
    seq: u64,
}

// SAFETY: CUDA driver and NCCL handles may be used from any thread (the context is made current
// on each thread that calls the driver); every use goes through the `dist` mutex.
unsafe impl Send for Comm {}

/// What `Comm::new` needs besides the libraries.
pub struct CommInit {
    pub id: UniqueId,
    pub rank: i32,
    pub world: i32,
    pub device: cuda::CuDevice,
    pub timeout: Duration,
    pub dev: Arc<Device>,
    /// Opaque fds of the compute and external timelines (ownership passes here).
    pub compute_fd: i32,
    pub external_fd: i32,
}

fn import_timeline(c: &Cuda, fd: i32, what: &str) -> HeliosResult<CuExtSem> {
    let desc = cuda::ExtSemHandleDesc { kind: cuda::EXT_SEM_TIMELINE_FD, handle: [fd as u32 as u64, 0], flags: 0, reserved: [0; 16] };
    let mut sem = std::ptr::null_mut();
    // SAFETY: `desc` describes an opaque timeline fd exported by Vulkan; CUDA takes the fd on success.
    let r = unsafe { (c.import_external_semaphore)(&mut sem, &desc) };
    if r != 0 {
        close_fd(fd);
    }
    c.check(&format!("cuImportExternalSemaphore ({what} timeline)"), r)?;
    Ok(sem)
}

impl Comm {
    /// Joins the communicator (blocks until every rank has called ncclCommInitRank).
    pub fn new(cuda: Cuda, nccl: Nccl, o: CommInit) -> HeliosResult<Comm> {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: `o.device` came from cuDeviceGet; the out pointer is valid.
        cuda.check("cuDevicePrimaryCtxRetain", unsafe { (cuda.primary_ctx_retain)(&mut ctx, o.device) })?;
        // SAFETY: a retained primary context.
        cuda.check("cuCtxSetCurrent", unsafe { (cuda.ctx_set_current)(ctx) })?;
        let compute = import_timeline(&cuda, o.compute_fd, "compute");
        let external = import_timeline(&cuda, o.external_fd, "external");
        let (compute, external) = match (compute, external) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        let mut stream = std::ptr::null_mut();
        // SAFETY: the context is current on this thread.
        cuda.check("cuStreamCreate", unsafe { (cuda.stream_create)(&mut stream, cuda::STREAM_NON_BLOCKING) })?;
        let mut comm = std::ptr::null_mut();
        // SAFETY: `id` is the job's unique id from rank 0; rank and world were checked by the caller.
        let r = unsafe { (nccl.comm_init_rank)(&mut comm, o.world, o.id, o.rank) };
        nccl.check("ncclCommInitRank", r)?;
        Ok(Comm {
            cuda,
            nccl,
            ctx,
            stream,
            comm,
            compute,
            external,
            next_external: 0,
            mapped: HashMap::new(),
            inflight: VecDeque::new(),
            rank: o.rank,
            timeout: o.timeout,
            dev: o.dev,
            seq: 0,
        })
    }

    /// Imports a shared buffer's memory (the fd passes to CUDA) and maps it whole.
    pub fn map(&mut self, handle: f64, fd: i32, size: u64) -> HeliosResult<()> {
        let desc = cuda::ExtMemHandleDesc { kind: cuda::EXT_MEM_OPAQUE_FD, handle: [fd as u32 as u64, 0], size, flags: cuda::EXT_MEM_DEDICATED, reserved: [0; 16] };
        let mut mem = std::ptr::null_mut();
        // SAFETY: `desc` names an opaque fd of a dedicated Vulkan allocation of `size` bytes.
        let r = unsafe { (self.cuda.import_external_memory)(&mut mem, &desc) };
        if r != 0 {
            close_fd(fd);
        }
        self.cuda.check("cuImportExternalMemory", r)?;
        let bdesc = cuda::ExtMemBufferDesc { offset: 0, size, flags: 0, reserved: [0; 16] };
        let mut ptr = 0;
        // SAFETY: maps the whole imported range.
        let r = unsafe { (self.cuda.external_memory_get_mapped_buffer)(&mut ptr, mem, &bdesc) };
        if let Err(e) = self.cuda.check("cuExternalMemoryGetMappedBuffer", r) {
            // SAFETY: nothing maps `mem`.
            unsafe { (self.cuda.destroy_external_memory)(mem) };
            return Err(e);
        }
        self.mapped.insert(handle.to_bits(), Mapped { mem, ptr, size });
        Ok(())
    }

    fn pointer(&self, call: &str, handle: f64, offset: u64, bytes: u64) -> HeliosResult<*mut c_void> {
        let m = self.mapped.get(&handle.to_bits()).ok_or_else(|| {
            HeliosError::invalid_argument(format!("{call}: buffer {handle} is not shared with CUDA (make it with distSharedBuffer)"))
        })?;
        if offset.checked_add(bytes).is_none_or(|end| end > m.size) {
            return Err(HeliosError::out_of_range(format!("{call}: bytes {offset}..{} lie outside the shared buffer ({} bytes)", offset.saturating_add(bytes), m.size)));
        }
        Ok((m.ptr + offset) as *mut c_void)
    }

    /// Enqueues one collective on `handle` after compute value `after`; returns the external
    /// timeline value that marks it done.
    pub fn enqueue(&mut self, c: Collective, handle: f64, offset: u64, count: u64, dtype: DataType, after: u64) -> HeliosResult<u64> {
        let elem = if matches!(dtype, DataType::F16 | DataType::Bf16) { 2 } else { 4 };
        let ptr = self.pointer(c.name(), handle, offset, count * elem)?;
        let wait = cuda::ExtSemParams::value(after);
        // SAFETY: the imported compute timeline and a stream of the current context.
        self.cuda.check("cuWaitExternalSemaphoresAsync", unsafe { (self.cuda.wait_external_semaphores)(&self.compute, &wait, 1, self.stream) })?;
        let r = match c {
            // SAFETY: in place on `count` elements inside the mapped buffer (checked above).
            Collective::AllReduce(op) => unsafe { (self.nccl.all_reduce)(ptr, ptr, count as usize, dtype as i32, op as i32, self.comm, self.stream) },
            // SAFETY: as above; `root` was checked against the world size by the caller.
            Collective::Broadcast(root) => unsafe { (self.nccl.broadcast)(ptr, ptr, count as usize, dtype as i32, root, self.comm, self.stream) },
        };
        self.nccl.check(c.name(), r)?;
        self.next_external += 1;
        let signal = cuda::ExtSemParams::value(self.next_external);
        // SAFETY: the imported external timeline; values only grow.
        self.cuda.check("cuSignalExternalSemaphoresAsync", unsafe { (self.cuda.signal_external_semaphores)(&self.external, &signal, 1, self.stream) })?;
        let mut event = std::ptr::null_mut();
        // SAFETY: the context is current (set by the caller).
        self.cuda.check("cuEventCreate", unsafe { (self.cuda.event_create)(&mut event, cuda::EVENT_DISABLE_TIMING) })?;
        // SAFETY: a fresh event on this context's stream.
        self.cuda.check("cuEventRecord", unsafe { (self.cuda.event_record)(event, self.stream) })?;
        self.seq += 1;
        let label = format!("{} #{} ({} bytes)", c.name(), self.seq, count * elem);
        self.inflight.push_back(InFlight { event, label, after, ready: None });
        Ok(self.next_external)
    }

    /// Makes the context current on the calling thread.
    pub fn make_current(&self) -> HeliosResult<()> {
        // SAFETY: the context was retained by `new` and lives until `destroy`.
        self.cuda.check("cuCtxSetCurrent", unsafe { (self.cuda.ctx_set_current)(self.ctx) })
    }

    /// Retires finished collectives; the label of one past its timeout, if any.
    pub fn poll(&mut self, compute_done: u64) -> Option<String> {
        while let Some(f) = self.inflight.front_mut() {
            // SAFETY: a recorded event of this context.
            let r = unsafe { (self.cuda.event_query)(f.event) };
            if r == cuda::NOT_READY {
                if f.ready.is_none() && compute_done >= f.after {
                    f.ready = Some(Instant::now());
                }
                return f.ready.filter(|t| t.elapsed() > self.timeout).map(|_| f.label.clone());
            }
            // SAFETY: the event completed (or failed) and nothing waits on it.
            unsafe { (self.cuda.event_destroy)(f.event) };
            self.inflight.pop_front();
        }
        None
    }

    /// NCCL's asynchronous error, if the communicator has one.
    pub fn async_error(&self) -> Option<String> {
        let mut e = 0;
        // SAFETY: a live communicator; writes one result.
        let r = unsafe { (self.nccl.comm_get_async_error)(self.comm, &mut e) };
        let bad = if r != 0 { r } else { e };
        if bad == 0 || bad == crate::dist::nccl::IN_PROGRESS {
            return None;
        }
        self.nccl.check("NCCL", bad).err().map(|x| x.message)
    }

    /// Waits until every enqueued collective finished.
    pub fn synchronize(&mut self) -> HeliosResult<()> {
        // SAFETY: this context's stream.
        self.cuda.check("cuStreamSynchronize", unsafe { (self.cuda.stream_synchronize)(self.stream) })?;
        let _ = self.poll(u64::MAX);
        Ok(())
    }

    /// Frees everything (after `abort`, without waiting for the stream).
    pub fn destroy(mut self, aborted: bool) {
        // SAFETY: teardown in reverse order of creation; after an abort NCCL's kernels returned,
        // otherwise the stream is drained first. Each handle is released once.
        unsafe {
            if !aborted {
                (self.cuda.stream_synchronize)(self.stream);
                (self.nccl.comm_destroy)(self.comm);
            }
            for f in self.inflight.drain(..) {
                (self.cuda.event_destroy)(f.event);
            }
            for (_, m) in self.mapped.drain() {
                (self.cuda.mem_free)(m.ptr);
                (self.cuda.destroy_external_memory)(m.mem);
            }
            (self.cuda.destroy_external_semaphore)(self.compute);
            (self.cuda.destroy_external_semaphore)(self.external);
            (self.cuda.stream_destroy)(self.stream);
        }
    }
}

/// The collectives, with what each needs beyond the buffer.
#[derive(Debug, Clone, Copy)]
pub enum Collective {
    AllReduce(RedOp),
    Broadcast(i32),
}

impl Collective {
    pub fn name(&self) -> &'static str {
        match self {
            Collective::AllReduce(_) => "allReduce",
            Collective::Broadcast(_) => "broadcast",
        }
    }
}
