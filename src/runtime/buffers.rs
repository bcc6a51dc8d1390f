//! Buffer lifetime: create/destroy, lease/release through the pool, and deferred frees
//! (a destroyed buffer is freed once no open batch, capture or in-flight GPU work uses it).

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::context::Runtime;
use crate::runtime::pool::{bucket_size, PoolStats};
use crate::runtime::resources::{BufferRes, Owner};
use crate::runtime::timeline::Point;
use crate::vk::memory::{self, GpuBuffer, Placement};

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

    fn check_len(&self, len: f64, what: &str) -> HeliosResult<u64> {
        if !(len.is_finite() && len.fract() == 0.0 && len >= 1.0) {
            return Err(HeliosError::invalid_argument(format!("{what} {len} is not a positive integer")));
        }
        let max = self.dev.adapter.limits.max_storage_buffer_range as u64 * 64;
        let max = max.max(1 << 34);
        if len > max as f64 {
            return Err(HeliosError::out_of_range(format!("{what} {len} exceeds the {max}-byte limit")));
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
        // A buffer longer than the limit keeps a valid (clamped) range but `len > bind_range`
        // marks it unbindable: record_dispatch rejects it instead of letting the driver drop it.
        let range = self.dev.adapter.info.max_binding_bytes.min(gpu.size);
        let direct = gpu.is_mapped() && (placement == Placement::HostVisible || !self.cfg.force_staging);
        Ok(self.res.insert(BufferRes::new(gpu, len, range, direct, owner)))
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

    /// Leases a pooled buffer (never waits: only buffers whose last use completed are reused).
    pub fn lease_buffer(&mut self, len: f64) -> HeliosResult<f64> {
        let len = self.check_len(len, "byteLength")?;
        let bucket = bucket_size(len);
        let open = self.open_seg();
        let mut done = self.completed_cached();
        let res = &self.res;
        let mut found = self.pool.acquire(bucket, |id| res.get(id).is_some_and(|r| r.idle(open, done)));
        if found.is_none() {
            done = self.completed()?;
            let res = &self.res;
            found = self.pool.acquire(bucket, |id| res.get(id).is_some_and(|r| r.idle(open, done)));
        }
        let id = match found {
            Some(id) => id,
            None => {
                let id = self.new_res(len, bucket, Placement::Device, Owner::Leased(bucket))?;
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
        self.pool.stats
    }

    /// Frees idle pooled buffers whose last use completed.
    pub fn trim_pool(&mut self) -> HeliosResult<()> {
        self.maintain()?;
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
