//! Reads in program order. A buffer the open segment writes is copied inside the batch and
//! the work recorded so far is submitted (the batch continues in a new segment); otherwise
//! the read waits only for the buffer's last write: a direct memcpy for host-visible memory,
//! or chunked copies through the staging ring. `readBufferAsync` snapshots into a dedicated
//! staging buffer at call time and a libuv worker waits for it.

use std::collections::VecDeque;

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::context::Runtime;
use crate::runtime::lane::Keep;
use crate::runtime::ring::Region;
use crate::runtime::timeline::Point;
use crate::runtime::transfer::check_range;
use crate::vk::command;
use crate::vk::host_result::{self, HostResult};
use crate::vk::memory::{self, GpuBuffer, Placement};
use crate::vk::raw as vk;

/// Reads from this size up go through one staging buffer holding the whole range (bigger
/// than the ring, whose two chunks in flight make the DMA wait for the host copy).
const WHOLE_READ_MIN: u64 = 16 << 20;
/// Reads above this use the ring (the whole-range staging stays bounded).
const WHOLE_READ_MAX: u64 = 1 << 30;
/// One DMA submission: small enough that copying out starts early, large enough that 16
/// submissions for 256 MiB cost nothing next to the transfer.
const WHOLE_READ_CHUNK: u64 = 16 << 20;

/// What a worker thread waits for before `finish_readback`.
#[derive(Debug, Clone, Copy)]
pub struct PendingRead {
    pub runtime_id: u64,
    pub readback: u64,
    pub compute: bool,
    pub value: u64,
    pub len: u64,
}

pub enum ReadTicket {
    Ready(HostResult),
    Pending(PendingRead),
}

impl Runtime {
    fn read_range(&self, handle: f64, offset: Option<f64>, len: Option<f64>) -> HeliosResult<(u32, u64, u64)> {
        let (id, r) = self.buffer(handle)?;
        let offset = offset.unwrap_or(0.0);
        let len = len.unwrap_or((r.len as f64 - offset).max(0.0));
        let (o, n) = check_range(offset, len, r.len)?;
        Ok((id, o, n))
    }

    fn written_by_open_segment(&self, id: u32) -> bool {
        self.res.get(id).is_some_and(|r| self.open_seg() == Some(r.seg_write))
    }

    /// Records a copy of `id` into `staging` in the open batch and submits what was recorded.
    fn snapshot_in_batch(&mut self, id: u32, off: u64, len: u64, staging: &GpuBuffer) -> HeliosResult<u64> {
        let src = self.res.get(id).map(|r| r.gpu.raw).ok_or_else(|| HeliosError::internal("read source vanished"))?;
        let Some(mut batch) = self.batch.take() else { return Err(HeliosError::internal("no open batch")) };
        self.apply_access(batch.cmd, &[(id, true, false)], true, &mut batch.touched);
        command::copy(&self.dev, batch.cmd, src, staging.raw, vk::BufferCopy { src_offset: off, dst_offset: 0, size: len });
        self.host_visible_write = true;
        self.batch = Some(batch);
        self.submit_segment(true)
    }

    pub fn read(&mut self, handle: f64, offset: Option<f64>, len: Option<f64>) -> HeliosResult<HostResult> {
        let (id, off, len) = self.read_range(handle, offset, len)?;
        let mut out = host_result::result_buffer(len as usize);
        let resident = out.resident;
        self.read_id_into(id, off, out.as_mut_slice(), resident)?;
        Ok(out)
    }

    /// Reads `out.len()` bytes at `offset` into caller memory (readBufferInto): no allocation.
    pub fn read_into(&mut self, handle: f64, offset: Option<f64>, out: &mut [u8]) -> HeliosResult<()> {
        let (id, off, _) = self.read_range(handle, offset, Some(out.len() as f64))?;
        self.read_id_into(id, off, out, true)
    }

    /// `resident`: `out`'s pages are already mapped (no prefault before the DMA lands).
    fn read_id_into(&mut self, id: u32, off: u64, out: &mut [u8], resident: bool) -> HeliosResult<()> {
        let len = out.len() as u64;
        if len == 0 {
            return Ok(());
        }
        let direct = self.res.get(id).is_some_and(|r| r.direct);
        if self.written_by_open_segment(id) && direct {
            // Submit what was recorded, wait for it, then copy straight out of the buffer.
            let value = self.submit_segment(true)?;
            self.wait_compute(value, u64::MAX)?;
        } else if self.written_by_open_segment(id) {
            let staging = self.allocate_buffer(len, Placement::Staging)?;
            let result = self.snapshot_in_batch(id, off, len, &staging).and_then(|v| self.wait_compute(v, u64::MAX));
            let copied = result.and_then(|_| staging.read(0, out));
            memory::destroy_buffer(&self.dev, &mut self.alloc, staging);
            return copied;
        }
        let last_write = self.res.get(id).map(|r| r.last_write).unwrap_or(Point::ZERO);
        if direct {
            self.wait_point(last_write)?;
            let r = self.res.get(id).ok_or_else(|| HeliosError::internal("read source vanished"))?;
            return r.gpu.read(off, out);
        }
        if (WHOLE_READ_MIN..=WHOLE_READ_MAX).contains(&len) {
            self.read_via_whole_staging(id, off, out, resident)
        } else {
            self.read_via_ring(id, off, out)
        }
    }

    /// Large reads: every chunk's DMA is queued at once into one host staging buffer that
    /// holds the whole range (kept for the next large read), so the copy engine never waits
    /// for the host. While the DMA runs, the copy threads fault in the fresh result pages
    /// (first touch, which otherwise dominates: ~65k page faults for 256 MiB); then each
    /// chunk is copied out in parallel as soon as its DMA completed.
    fn read_via_whole_staging(&mut self, id: u32, off: u64, out: &mut [u8], resident: bool) -> HeliosResult<()> {
        let trace = self.cfg.trace_reads.then(std::time::Instant::now);
        let (src, after) = self
            .res
            .get(id)
            .map(|r| (r.gpu.raw, r.last_write.compute))
            .ok_or_else(|| HeliosError::internal("read source vanished"))?;
        let total = out.len() as u64;
        let staging = match self.read_staging.take() {
            Some(b) if b.size >= total => b,
            old => {
                if let Some(b) = old {
                    memory::destroy_buffer(&self.dev, &mut self.alloc, b);
                }
                // Powers of two: a few growing reads do not reallocate every time.
                self.allocate_buffer(total.next_power_of_two().min(WHOLE_READ_MAX), Placement::Staging)?
            }
        };
        let mut chunks: Vec<(u64, u64, u64)> = Vec::with_capacity(total.div_ceil(WHOLE_READ_CHUNK) as usize);
        let mut pos = 0u64;
        let mut submitted = Ok(());
        while pos < total {
            let n = WHOLE_READ_CHUNK.min(total - pos);
            let copy = vk::BufferCopy { src_offset: off + pos, dst_offset: pos, size: n };
            match self.transfer_copy(src, staging.raw, copy, after, Keep::default()) {
                Ok(value) => chunks.push((value, pos, n)),
                Err(e) => {
                    submitted = Err(e);
                    break;
                }
            }
            pos += n;
        }
        if let Err(e) = submitted {
            // Copies already queued still write the staging: free it only after them.
            let last = self.transfer.submitted;
            self.transfer.keep_until(last, Keep { staging: vec![staging], ..Keep::default() });
            return Err(e);
        }
        if let (Some(r), Some(&(last, _, _))) = (self.res.get_mut(id), chunks.last()) {
            // The DMA reads the source until `last` (matters only if a wait below fails).
            r.last_use = r.last_use.max(Point::transfer(last));
        }
        let submitted_at = trace.map(|t| t.elapsed());
        if !resident {
            memory::prefault_for_overwrite(out);
        }
        let prefaulted_at = trace.map(|t| t.elapsed());
        let (mut waiting, mut copying) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        let mut result = Ok(());
        for &(value, at, n) in &chunks {
            let t0 = std::time::Instant::now();
            result = self.wait_point(Point::transfer(value));
            let t1 = std::time::Instant::now();
            result = result.and_then(|_| staging.read(at, &mut out[at as usize..(at + n) as usize]));
            waiting += t1 - t0;
            copying += t1.elapsed();
            if result.is_err() {
                break;
            }
        }
        if let (Some(t), Some(s), Some(p)) = (trace, submitted_at, prefaulted_at) {
            eprintln!(
                "helios read {} MiB: submit {:?}, prefault {:?} (resident {resident}), DMA waits {waiting:?}, copies {copying:?}, total {:?}",
                total >> 20, s, p - s, t.elapsed()
            );
        }
        self.read_staging = Some(staging);
        result
    }

    /// Chunked copies into the ring; each chunk is copied out as soon as its DMA finished.
    fn read_via_ring(&mut self, id: u32, off: u64, out: &mut [u8]) -> HeliosResult<()> {
        let (src, after) = self
            .res
            .get(id)
            .map(|r| (r.gpu.raw, r.last_write.compute))
            .ok_or_else(|| HeliosError::internal("read source vanished"))?;
        let ring_raw = self.ring_buf.as_ref().map(|b| b.raw).ok_or_else(|| HeliosError::internal("no staging ring"))?;
        let chunk = self.chunk_bytes();
        let total = out.len() as u64;
        let mut pending: VecDeque<(Region, u64, u64, u64)> = VecDeque::new();
        let mut pos = 0u64;
        let result = (|| {
            while pos < total || !pending.is_empty() {
                let n = chunk.min(total - pos);
                let region = if pos < total { self.ring.alloc(n) } else { None };
                if let Some(region) = region {
                    let copy = vk::BufferCopy { src_offset: off + pos, dst_offset: region.offset, size: n };
                    let value = self.transfer_copy(src, ring_raw, copy, after, Keep::default()).inspect_err(|_| {
                        // Never submitted: the region is free again.
                        self.ring.set_point(region.offset, Point::ZERO);
                    })?;
                    pending.push_back((region, value, pos, n));
                    pos += n;
                } else if let Some((region, value, at, n)) = pending.pop_front() {
                    self.wait_point(Point::transfer(value))?;
                    let ring = self.ring_buf.as_ref().ok_or_else(|| HeliosError::internal("no staging ring"))?;
                    ring.read(region.offset, &mut out[at as usize..(at + n) as usize])?;
                    self.ring.set_point(region.offset, Point::ZERO);
                    self.ring.reclaim(self.completed_cached());
                } else {
                    // The ring is full of earlier uploads: wait for the oldest, then retry.
                    let region = self.ring_alloc(n)?;
                    self.ring.set_point(region.offset, Point::ZERO);
                    self.ring.reclaim(self.completed_cached());
                }
            }
            Ok(())
        })();
        // On error, release held regions once their copies finish (never reuse them early).
        for (region, value, _, _) in pending {
            self.ring.set_point(region.offset, Point::transfer(value));
        }
        result
    }

    /// Starts an asynchronous read: a snapshot now, the wait and memcpy on a worker.
    pub fn read_async(&mut self, handle: f64, offset: Option<f64>, len: Option<f64>) -> HeliosResult<ReadTicket> {
        let (id, off, len) = self.read_range(handle, offset, len)?;
        if len == 0 {
            return Ok(ReadTicket::Ready(host_result::result_buffer(0)));
        }
        let open_write = self.written_by_open_segment(id);
        let r = self.res.get(id).ok_or_else(|| HeliosError::internal("read source vanished"))?;
        let (direct, last_write, src) = (r.direct, r.last_write, r.gpu.raw);
        if !open_write && direct && last_write.reached_by(self.completed()?) {
            return self.read(handle, Some(off as f64), Some(len as f64)).map(ReadTicket::Ready);
        }
        let staging = self.allocate_buffer(len, Placement::Staging)?;
        let submitted = if open_write {
            self.snapshot_in_batch(id, off, len, &staging).map(|v| (true, v))
        } else {
            let copy = vk::BufferCopy { src_offset: off, dst_offset: 0, size: len };
            self.transfer_copy(src, staging.raw, copy, last_write.compute, Keep::default()).map(|v| {
                // The DMA still reads the buffer: it must not be freed or reused before that.
                if let Some(r) = self.res.get_mut(id) {
                    r.last_use = r.last_use.max(Point::transfer(v));
                }
                (false, v)
            })
        };
        let (compute, value) = match submitted {
            Ok(x) => x,
            Err(e) => {
                self.compute.keep_until(self.compute.submitted, Keep { staging: vec![staging], ..Keep::default() });
                return Err(e);
            }
        };
        let readback = self.next_readback;
        self.next_readback += 1;
        self.readbacks.insert(readback, staging);
        Ok(ReadTicket::Pending(PendingRead { runtime_id: self.id, readback, compute, value, len }))
    }

    /// Called (under the lock) by the worker after the copy completed.
    pub fn finish_readback(&mut self, p: &PendingRead) -> HeliosResult<HostResult> {
        let staging = self
            .readbacks
            .remove(&p.readback)
            .ok_or_else(|| HeliosError::destroyed("the device was destroyed while the read was pending"))?;
        if p.compute {
            self.compute.completed = self.compute.completed.max(p.value);
        } else {
            self.transfer.completed = self.transfer.completed.max(p.value);
        }
        let mut out = host_result::result_buffer(p.len as usize);
        let result = staging.read(0, out.as_mut_slice());
        memory::destroy_buffer(&self.dev, &mut self.alloc, staging);
        result.map(|_| out)
    }
}
