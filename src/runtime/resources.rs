//! The buffer resource table. A resource is the GPU buffer plus its tracking state; JS
//! handles point at resources (a leased buffer gets a fresh handle per lease), so a
//! resource can outlive its handle until the GPU, the open batch and captures are done.

use crate::runtime::timeline::Point;
use crate::runtime::tracker::AccessState;
use crate::vk::memory::GpuBuffer;

/// Who holds a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// createBuffer; freed by destroyBuffer.
    Handle,
    /// Leased from the pool (bucket size); releaseBuffer returns it.
    Leased(u64),
    /// Idle in the pool (bucket size).
    Pooled(u64),
    /// Destroyed by the user; freed once idle.
    Dead,
}

pub struct BufferRes {
    pub gpu: GpuBuffer,
    /// The byte length the user asked for (a lease may be smaller than its bucket).
    pub len: u64,
    /// Range bound to descriptors (clamped to the binding limit); `len > bind_range` means the
    /// buffer is too large to bind (see `BufferRes::unbindable`).
    pub bind_range: u64,
    /// Host may memcpy directly (mapped, coherent, and not forced through staging).
    pub direct: bool,
    pub access: AccessState,
    pub last_use: Point,
    pub last_write: Point,
    /// Segment that last touched / wrote it (== Runtime::seg while the open segment uses it).
    pub seg: u64,
    pub seg_write: u64,
    /// Segment whose first access to it was a write (it holds nothing from before that segment).
    pub seg_fresh: u64,
    /// Captures that reference it.
    pub pins: u32,
    pub owner: Owner,
    /// Value of the device's external timeline (CUDA signals it after a collective that writes
    /// this buffer) that compute work using the buffer must wait for; 0: none.
    pub ext_wait: u64,
}

impl BufferRes {
    pub fn new(gpu: GpuBuffer, len: u64, bind_range: u64, direct: bool, owner: Owner) -> BufferRes {
        BufferRes {
            gpu,
            len,
            bind_range,
            direct,
            access: AccessState::default(),
            last_use: Point::ZERO,
            last_write: Point::ZERO,
            seg: 0,
            seg_write: 0,
            seg_fresh: 0,
            pins: 0,
            owner,
            ext_wait: 0,
        }
    }

    /// Longer than the device's storage-binding limit: a dispatch must not bind it.
    #[inline]
    pub fn unbindable(&self) -> bool {
        self.len > self.bind_range
    }

    /// Not used by the open segment, not pinned, and its last GPU use completed.
    pub fn idle(&self, open_seg: Option<u64>, completed: Point) -> bool {
        self.pins == 0 && open_seg != Some(self.seg) && self.last_use.reached_by(completed)
    }

    /// May be leased again while a batch is open although GPU work that used it is still
    /// pending: that work is on the compute queue (recorded earlier in the open batch, or
    /// submitted), so everything the new holder records runs after it in queue order, and the
    /// hazard tracker, which kept this buffer's access epochs, puts the WAR/WAW barrier in.
    /// Paths that leave program order stay ordered too: an upload into a buffer the open
    /// segment used is recorded into the batch, one into any other buffer waits on its last
    /// compute use, and reads wait for its last write.
    ///
    /// Excluded: pinned buffers (a live capture replays its commands on them); pending
    /// transfer-queue use (the copy engine is ordered only by semaphores); and a buffer the
    /// open segment *read* before writing it. Such a buffer came into the batch holding data
    /// (an input, or a constant written by the host during the batch): if the batch is
    /// captured, every replay reads that data again, so no later command of the batch may
    /// overwrite it. A buffer first written by the segment is a temporary of it.
    pub fn reusable_in_batch(&self, open_seg: Option<u64>, completed: Point) -> bool {
        let fresh = open_seg != Some(self.seg) || self.seg_fresh == self.seg;
        self.pins == 0 && self.last_use.transfer <= completed.transfer && fresh
    }
}

#[derive(Default)]
pub struct Resources {
    slots: Vec<Option<BufferRes>>,
    free: Vec<u32>,
    /// Dead resources waiting for the GPU (checked on maintenance).
    pub zombies: Vec<u32>,
}

impl Resources {
    pub fn insert(&mut self, r: BufferRes) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(r);
                i
            }
            None => {
                self.slots.push(Some(r));
                (self.slots.len() - 1) as u32
            }
        }
    }

    pub fn get(&self, id: u32) -> Option<&BufferRes> {
        self.slots.get(id as usize).and_then(|s| s.as_ref())
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut BufferRes> {
        self.slots.get_mut(id as usize).and_then(|s| s.as_mut())
    }

    pub fn take(&mut self, id: u32) -> Option<BufferRes> {
        let r = self.slots.get_mut(id as usize)?.take();
        if r.is_some() {
            self.free.push(id);
        }
        r
    }

    pub fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn drain_all(&mut self) -> Vec<GpuBuffer> {
        self.zombies.clear();
        self.free.clear();
        self.slots.drain(..).flatten().map(|r| r.gpu).collect()
    }
}
