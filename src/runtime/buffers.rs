//! Buffer lifetime: create/destroy, lease/release through the pool, and deferred frees
//! (a destroyed buffer is freed once no open batch, capture or in-flight GPU work uses it).

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::ahead::Ahead;
use crate::runtime::context::Runtime;
use crate::runtime::pool::{bucket_size, PoolStats};
use crate::runtime::resources::{BufferRes, Owner};
use crate::runtime::timeline::Point;
use crate::vk::memory::{self, GpuBuffer, Placement};

/// Fresh allocations below this size come out of gpu-allocator's existing blocks more often
/// than not; submitting ahead of them would only cut batches.
const OVERLAP_MIN_BYTES: u64 = 1 << 20;

impl Runtime {
    /// The open segment, if a batch is open.
    pub fn open_seg(&self) -> Option<u64> {
        self.batch.as_ref().map(|_| self.seg)
    }

    /// Resolves a buffer handle to its resource id.
    pub fn buffer_id(&self, handle: f64) -> HeliosResult<u32> {
        self.buffers.get(handle).copied()
    }

    pub fn buffer(&self, handle: f64) -> HeliosResult<(u32, &BufferRes)> {
        let id = self.buffer_id(handle)?;
        let r = self.res.get(id).ok_or_else(|| HeliosError::internal(format!("buffer {handle} lost its resource")))?;
        Ok((id, r))
    }

    /// The largest buffer this device may create: see `max_alloc_bytes`.
    pub fn max_alloc_bytes(&self) -> u64 {
        max_alloc_bytes(self.dev.adapter.info.max_buffer_size)
    }

    /// Checks a byte length from JS before anything is allocated: a whole number of bytes the
    /// device can hold in one buffer (not a size taken modulo anything).
    fn check_len(&self, len: f64, what: &str) -> HeliosResult<u64> {
        if !(len.is_finite() && len.fract() == 0.0 && len >= 1.0) {
            return Err(HeliosError::invalid_argument(format!("{what} {len} is not a positive integer")));
        }
        let max = self.max_alloc_bytes();
        if len > max as f64 {
            return Err(HeliosError::out_of_range(format!(
                "{what} {len} exceeds the device's largest buffer ({max} bytes: maxBufferSize, rounded down to 4)"
            )));
        }
        Ok(len as u64)
    }

    /// Allocates device memory; on OOM trims the pool, frees what completed, retries once.
    pub fn allocate_buffer(&mut self, size: u64, placement: Placement) -> HeliosResult<GpuBuffer> {
        match memory::create_buffer(&self.dev, &mut self.alloc, size, placement) {
            Err(e) if e.code == crate::error::ErrorCode::OutOfMemory => {
                self.trim_pool()?;
                memory::create_buffer(&self.dev, &mut self.alloc, size, placement)
                    .map_err(|e| HeliosError::out_of_memory(format!("{} (after trimming the pool)", e.message)))
            }
            other => other,
        }
    }

    fn new_res(&mut self, len: u64, alloc_size: u64, placement: Placement, owner: Owner) -> HeliosResult<u32> {
        // Code that allocates without ever beginning a batch still gets its frees done.
        if self.res.zombies.len() > 256 {
            self.maintain()?;
        }
        let gpu = self.allocate_buffer(alloc_size, placement)?;
        Ok(self.insert_res(gpu, len, placement, owner))
    }

    /// Registers fresh device memory (allocated here or ahead) as a resource.
    fn insert_res(&mut self, gpu: GpuBuffer, len: u64, placement: Placement, owner: Owner) -> u32 {
        // A buffer longer than the limit keeps a valid (clamped) range but `len > bind_range`
        // marks it unbindable: record_dispatch rejects it instead of letting the driver drop it.
        let range = self.dev.adapter.info.max_binding_bytes.min(gpu.size);
        let direct = gpu.is_mapped() && (placement == Placement::HostVisible || !self.cfg.force_staging);
        self.res.insert(BufferRes::new(gpu, len, range, direct, owner))
    }

    pub fn create_buffer(&mut self, len: f64, host_visible: bool) -> HeliosResult<f64> {
        let len = self.check_len(len, "byteLength")?;
        let placement = if host_visible { Placement::HostVisible } else { Placement::Device };
        let id = self.new_res(len, len.next_multiple_of(4), placement, Owner::Handle)?;
        self.buffers.insert(id).inspect_err(|_| {
            if let Some(r) = self.res.take(id) {
                memory::destroy_buffer(&self.dev, &mut self.alloc, r.gpu);
            }
        })
    }

    pub fn destroy_buffer(&mut self, handle: f64) -> HeliosResult<()> {
        let (_, r) = self.buffer(handle)?;
        if matches!(r.owner, Owner::Leased(_)) {
            return Err(HeliosError::invalid_argument(format!(
                "buffer {handle} is leased; return it with releaseBuffer"
            )));
        }
        let id = self.buffers.remove(handle)?;
        if let Some(r) = self.res.get_mut(id) {
            r.owner = Owner::Dead;
        }
        self.free_or_defer(id);
        Ok(())
    }

    /// Frees a dead resource now if it is idle, otherwise queues it.
    fn free_or_defer(&mut self, id: u32) {
        let open = self.open_seg();
        let done = self.completed_cached();
        let idle = self.res.get(id).is_some_and(|r| r.idle(open, done));
        if idle {
            if let Some(r) = self.res.take(id) {
                memory::destroy_buffer(&self.dev, &mut self.alloc, r.gpu);
            }
        } else {
            self.res.zombies.push(id);
        }
    }

    /// Frees queued dead resources whose GPU use ended.
    pub fn free_zombies(&mut self, done: Point) {
        if self.res.zombies.is_empty() {
            return;
        }
        let open = self.open_seg();
        let zombies = std::mem::take(&mut self.res.zombies);
        for id in zombies {
            let idle = self.res.get(id).is_some_and(|r| r.owner == Owner::Dead && r.idle(open, done));
            if idle {
                if let Some(r) = self.res.take(id) {
                    memory::destroy_buffer(&self.dev, &mut self.alloc, r.gpu);
                }
            } else if self.res.get(id).is_some() {
                self.res.zombies.push(id);
            }
        }
    }

    /// Leases a pooled buffer, never waiting: one whose last use completed, else one whose
    /// pending uses run before anything recorded from now on.
    pub fn lease_buffer(&mut self, len: f64) -> HeliosResult<f64> {
        let len = self.check_len(len, "byteLength")?;
        // Near the limit a bucket may round past it: such a lease gets its own exact size.
        let bucket = Some(bucket_size(len)).filter(|&b| b <= self.max_alloc_bytes()).unwrap_or(len.next_multiple_of(4));
        let open = self.open_seg();
        let mut done = self.completed_cached();
        let res = &self.res;
        let mut found = self.pool.acquire(bucket, |id| res.get(id).is_some_and(|r| r.idle(open, done)));
        if found.is_none() {
            done = self.completed()?;
            let res = &self.res;
            found = self.pool.acquire(bucket, |id| res.get(id).is_some_and(|r| r.idle(open, done)));
        }
        // Also with no batch open (right after a submit): whatever the new holder does next
        // is ordered after the pending work exactly as inside a batch (dispatches, fills and
        // copies go to the next batch, uploads wait on the last compute use, reads on the last
        // write). Requiring an open batch made the first lease after every submit allocate
        // whenever the GPU lagged, so the pool grew by about a buffer per batch (issue 24).
        if found.is_none() && self.cfg.inbatch_reuse {
            let res = &self.res;
            found = self.pool.acquire_in_batch(bucket, |id| res.get(id).is_some_and(|r| r.reusable_in_batch(open, done)));
        }
        // Buckets that get a dedicated allocation are the ones worth allocating ahead.
        let ahead = self.ahead.as_mut().filter(|_| memory::wants_dedicated_size(&self.dev, bucket, Placement::Device));
        let id = match found {
            Some(id) => {
                if let Some(a) = ahead {
                    a.hit(bucket);
                }
                id
            }
            None => {
                let id = match ahead.and_then(|a| a.take(bucket)) {
                    // Its memory is ready: nothing to overlap, so the batch is not cut.
                    Some(gpu) => {
                        self.pool.note_allocated_ahead();
                        self.insert_res(gpu, len, Placement::Device, Owner::Leased(bucket))
                    }
                    None => {
                        self.submit_before_allocating(bucket)?;
                        self.new_res(len, bucket, Placement::Device, Owner::Leased(bucket))?
                    }
                };
                self.pool.note_allocation(bucket);
                id
            }
        };
        if let Some(r) = self.res.get_mut(id) {
            r.owner = Owner::Leased(bucket);
            r.len = len;
        }
        self.buffers.insert(id)
    }

    /// Fresh device memory is slow to get (NVIDIA H100/H200: ~6 ms for 256 MiB, the driver's
    /// cost per byte, CPU time) and the GPU idles meanwhile if the work recorded before it is
    /// still unsubmitted. A batch begun with `overlapAllocations` submits that work first, so a
    /// loop that keeps its outputs (Alpha's bench keeps 40) runs at the GPU's pace.
    fn submit_before_allocating(&mut self, bytes: u64) -> HeliosResult<()> {
        let worth = bytes >= OVERLAP_MIN_BYTES && self.batch.as_ref().is_some_and(|b| b.overlap_allocations && !b.touched.is_empty());
        if worth {
            self.submit_segment(true)?;
        }
        Ok(())
    }

    pub fn release_buffer(&mut self, handle: f64) -> HeliosResult<()> {
        let (_, r) = self.buffer(handle)?;
        let Owner::Leased(bucket) = r.owner else {
            return Err(HeliosError::invalid_argument(format!(
                "buffer {handle} was not leased; free it with destroyBuffer"
            )));
        };
        let id = self.buffers.remove(handle)?;
        if let Some(r) = self.res.get_mut(id) {
            r.owner = Owner::Pooled(bucket);
        }
        self.pool.release(bucket, id);
        Ok(())
    }

    pub fn pool_stats(&self) -> PoolStats {
        PoolStats { ahead_bytes: self.ahead.as_ref().map_or(0, Ahead::ready_bytes), ..self.pool.snapshot() }
    }

    /// Joins the thread that allocates ahead and frees its spares; later leases allocate here.
    pub fn stop_allocating_ahead(&mut self) {
        for b in self.ahead.as_mut().map(Ahead::shutdown).unwrap_or_default() {
            memory::destroy_buffer(&self.dev, &mut self.alloc, b);
        }
    }

    /// Frees the spares made ahead (they are device memory nobody leased) and ends their streaks.
    fn free_spares(&mut self) {
        for b in self.ahead.as_mut().map(Ahead::drain).unwrap_or_default() {
            memory::destroy_buffer(&self.dev, &mut self.alloc, b);
        }
    }

    /// Frees idle pooled buffers whose last use completed, and every spare made ahead.
    pub fn trim_pool(&mut self) -> HeliosResult<()> {
        self.maintain()?;
        self.free_spares();
        // Synchronous reads waited for their copies, so the read staging is idle here.
        if let Some(b) = self.read_staging.take() {
            memory::destroy_buffer(&self.dev, &mut self.alloc, b);
        }
        crate::vk::host_result::trim();
        let open = self.open_seg();
        let done = self.completed_cached();
        let res = &self.res;
        let freed = self.pool.trim(|id| res.get(id).is_some_and(|r| r.idle(open, done)));
        for id in freed {
            if let Some(r) = self.res.take(id) {
                memory::destroy_buffer(&self.dev, &mut self.alloc, r.gpu);
            }
        }
        Ok(())
    }
}

/// `VkPhysicalDeviceMaintenance4Properties::maxBufferSize` rounded down to 4 (buffers are
/// whole u32 words, so a length rounded up to 4 still fits), and no larger than 2^53: a JS
/// number past that is not an exact byte count. A driver without maintenance4 reports 0: then
/// 2^32 - 4, below what drivers report (lavapipe and RADV: 2^32 - 1).
pub fn max_alloc_bytes(max_buffer_size: u64) -> u64 {
    const SAFE: u64 = (1 << 53) - 1;
    let max = if max_buffer_size == 0 { u64::from(u32::MAX) } else { max_buffer_size };
    max.min(SAFE) & !3
}

#[cfg(test)]
mod tests {
    use super::max_alloc_bytes;

    #[test]
    fn alloc_limit_is_whole_words_and_exact_in_js() {
        assert_eq!(max_alloc_bytes(u64::from(u32::MAX)), (1 << 32) - 4);
        assert_eq!(max_alloc_bytes(1 << 40), 1 << 40);
        assert_eq!(max_alloc_bytes(u64::MAX), (1 << 53) - 4);
        assert_eq!(max_alloc_bytes(0), (1 << 32) - 4);
    }
}
