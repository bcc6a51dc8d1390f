//! Uploads, fills and buffer-to-buffer copies in program order.
//!
//! An upload into a buffer the open segment uses is recorded into the batch (from a
//! batch-owned staging buffer). Otherwise a host-visible buffer with no pending GPU use is
//! written directly, and anything else goes through the staging ring on the transfer lane,
//! in chunks (memcpy of chunk i+1 overlaps the DMA of chunk i), waiting only on the compute
//! value of the buffer's last use; the next compute submission waits on the transfer value.

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::context::Runtime;
use crate::runtime::lane::Keep;
use crate::runtime::ring::Region;
use crate::runtime::timeline::Point;
use crate::vk::command;
use crate::vk::memory::Placement;
use crate::vk::raw as vk;

/// Largest piece one ring copy moves.
const MAX_CHUNK: u64 = 32 << 20;

/// Checks `offset`/`len` (JS numbers) against a buffer of `size` bytes.
pub fn check_range(offset: f64, len: f64, size: u64) -> HeliosResult<(u64, u64)> {
    for (what, v) in [("byteOffset", offset), ("byteLength", len)] {
        if !(v.is_finite() && v.fract() == 0.0 && v >= 0.0) {
            return Err(HeliosError::invalid_argument(format!("{what} {v} is not a non-negative integer")));
        }
    }
    let (o, n) = (offset as u64, len as u64);
    if o.checked_add(n).is_none_or(|end| end > size) {
        return Err(HeliosError::out_of_range(format!("range {o}+{n} exceeds the buffer's {size} bytes")));
    }
    Ok((o, n))
}

impl Runtime {
    /// Two chunks fit the ring (double buffering: the host copies one while the DMA moves
    /// the other); large chunks also amortise the per-chunk submit and copy-thread start-up.
    pub fn chunk_bytes(&self) -> u64 {
        (self.ring.capacity() / 2).min(MAX_CHUNK)
    }

    /// A ring region, reclaiming completed ones and waiting for the oldest if the ring is full.
    pub fn ring_alloc(&mut self, len: u64) -> HeliosResult<Region> {
        loop {
            if let Some(r) = self.ring.alloc(len) {
                return Ok(r);
            }
            let done = self.completed()?;
            self.ring.reclaim(done);
            if let Some(r) = self.ring.alloc(len) {
                return Ok(r);
            }
            match self.ring.oldest_point() {
                Some(p) => self.wait_point(p)?,
                None => return Err(HeliosError::internal("staging ring is held by the host and cannot be reclaimed")),
            }
        }
    }

    /// Records one copy on the transfer lane, waiting on the compute timeline at `after`.
    pub fn transfer_copy(&mut self, src: vk::Buffer, dst: vk::Buffer, region: vk::BufferCopy, after: u64, keep: Keep) -> HeliosResult<u64> {
        let dev = self.dev.clone();
        let cmd = self.transfer.acquire(&dev)?;
        if let Err(e) = command::begin_once(&dev, cmd) {
            self.transfer.give_back(cmd);
            return Err(e);
        }
        command::transfer_barrier(&dev, cmd);
        command::copy(&dev, cmd, src, dst, region);
        command::transfer_host_barrier(&dev, cmd);
        command::end(&dev, cmd)?;
        let waits: Vec<_> = if after > self.compute.completed { vec![(dev.compute_sem, after)] } else { Vec::new() };
        let value = self.transfer.submit(&dev, cmd, &waits, Keep { cmd: Some(cmd), ..keep })?;
        self.transfer_pending = value;
        Ok(value)
    }

    pub fn upload(&mut self, handle: f64, data: &[u8], offset: f64) -> HeliosResult<()> {
        let (id, r) = self.buffer(handle)?;
        let (off, len) = check_range(offset, data.len() as f64, r.len)?;
        if len == 0 {
            return Ok(());
        }
        if self.open_seg() == Some(r.seg) {
            return self.upload_in_batch(id, off, data);
        }
        if r.direct {
            let mut done = self.completed_cached();
            if !r.last_use.reached_by(done) {
                done = self.completed()?;
            }
            let (_, r) = self.buffer(handle)?;
            if r.last_use.reached_by(done) {
                return r.gpu.write(off, data);
            }
        }
        self.upload_via_ring(id, off, data)
    }

    fn upload_in_batch(&mut self, id: u32, off: u64, data: &[u8]) -> HeliosResult<()> {
        let staging = self.allocate_buffer(data.len() as u64, Placement::Staging)?;
        staging.write(0, data)?;
        let dst = self.res.get(id).map(|r| r.gpu.raw).ok_or_else(|| HeliosError::internal("upload target vanished"))?;
        let region = vk::BufferCopy { src_offset: 0, dst_offset: off, size: data.len() as u64 };
        let Some(mut batch) = self.batch.take() else { return Err(HeliosError::internal("no open batch")) };
        self.apply_access(batch.cmd, &[(id, false, true)], true, &mut batch.touched);
        command::copy(&self.dev, batch.cmd, staging.raw, dst, region);
        batch.keep.staging.push(staging);
        self.batch = Some(batch);
        Ok(())
    }

    fn upload_via_ring(&mut self, id: u32, off: u64, data: &[u8]) -> HeliosResult<()> {
        let (dst, after) = self
            .res
            .get(id)
            .map(|r| (r.gpu.raw, r.last_use.compute))
            .ok_or_else(|| HeliosError::internal("upload target vanished"))?;
        let chunk = self.chunk_bytes() as usize;
        let mut last = 0;
        for (i, piece) in data.chunks(chunk).enumerate() {
            let region = self.ring_alloc(piece.len() as u64)?;
            let ring = self.ring_buf.as_ref().ok_or_else(|| HeliosError::internal("no staging ring"))?;
            ring.write(region.offset, piece)?;
            let copy = vk::BufferCopy { src_offset: region.offset, dst_offset: off + (i * chunk) as u64, size: piece.len() as u64 };
            let ring_raw = ring.raw;
            last = self.transfer_copy(ring_raw, dst, copy, after, Keep::default()).inspect_err(|_| {
                // Never submitted: the region is free again.
                self.ring.set_point(region.offset, Point::ZERO);
            })?;
            self.ring.set_point(region.offset, Point::transfer(last));
        }
        if let Some(r) = self.res.get_mut(id) {
            r.last_use = r.last_use.max(Point::transfer(last));
            r.last_write = r.last_write.max(Point::transfer(last));
        }
        Ok(())
    }

    /// Runs `record` in the open batch, or in a batch of its own submitted right away.
    fn in_batch(&mut self, record: impl FnOnce(&mut Runtime) -> HeliosResult<()>) -> HeliosResult<()> {
        if self.batch.is_some() {
            return record(self);
        }
        self.begin_batch(false, false)?;
        let result = record(self);
        self.submit_batch()?;
        result
    }

    pub fn fill(&mut self, handle: f64, pattern: u32, offset: f64, len: Option<f64>) -> HeliosResult<()> {
        let (id, r) = self.buffer(handle)?;
        let size = r.len.next_multiple_of(4);
        if len.is_none() && offset >= size as f64 {
            return Err(HeliosError::out_of_range(format!("byteOffset {offset} is at or past the end of the buffer ({size} bytes)")));
        }
        let len = len.unwrap_or((size as f64 - offset).max(0.0));
        let (off, n) = check_range(offset, len, size)?;
        if off % 4 != 0 || n % 4 != 0 {
            return Err(HeliosError::invalid_argument(format!("byteOffset {off} and byteLength {n} must be multiples of 4")));
        }
        if n == 0 {
            return Ok(());
        }
        let dst = r.gpu.raw;
        self.in_batch(|rt| {
            let Some(mut batch) = rt.batch.take() else { return Ok(()) };
            rt.apply_access(batch.cmd, &[(id, false, true)], true, &mut batch.touched);
            command::fill(&rt.dev, batch.cmd, dst, off, n, pattern);
            rt.batch = Some(batch);
            Ok(())
        })
    }

    pub fn copy(&mut self, src: f64, dst: f64, src_offset: f64, dst_offset: f64, len: f64) -> HeliosResult<()> {
        let (sid, s) = self.buffer(src)?;
        let (so, n) = check_range(src_offset, len, s.len)?;
        let sraw = s.gpu.raw;
        let (did, d) = self.buffer(dst)?;
        let (dof, _) = check_range(dst_offset, len, d.len)?;
        let draw = d.gpu.raw;
        if sid == did && so < dof + n && dof < so + n {
            return Err(HeliosError::invalid_argument(format!("source {so}+{n} and destination {dof}+{n} overlap")));
        }
        if n == 0 {
            return Ok(());
        }
        self.in_batch(|rt| {
            let Some(mut batch) = rt.batch.take() else { return Ok(()) };
            rt.apply_access(batch.cmd, &[(sid, true, false), (did, false, true)], true, &mut batch.touched);
            command::copy(&rt.dev, batch.cmd, sraw, draw, vk::BufferCopy { src_offset: so, dst_offset: dof, size: n });
            rt.batch = Some(batch);
            Ok(())
        })
    }
}
