//! Captured batches (the analogue of CUDA graphs): `captureBatch` ends the open batch
//! without submitting and keeps its command buffer and everything it references (buffers
//! are pinned); `replayBatch` resubmits it with no re-recording. A capture of a profiled
//! batch keeps its timestamp queries: `batchProfile(replayValue)` reads the latest replay's.

use std::sync::Arc;

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::context::Runtime;
use crate::runtime::lane::Keep;
use crate::runtime::timeline::Point;
use crate::vk::command;
use crate::vk::memory;
use crate::vk::raw as vk;

pub struct Capture {
    cmd: vk::CommandBuffer,
    keep: Keep,
    /// (resource, written) for every buffer the batch uses.
    buffers: Vec<(u32, bool)>,
    last_value: u64,
    /// Query pools (also in `keep`) and dispatch labels when the batch was profiled.
    profile: Option<(Vec<vk::QueryPool>, Vec<Arc<str>>)>,
}

impl Runtime {
    pub fn capture_batch(&mut self) -> HeliosResult<f64> {
        let batch = self.batch.as_ref().ok_or_else(|| HeliosError::invalid_argument("no open batch (call beginBatch first)"))?;
        if batch.split {
            return Err(HeliosError::invalid_argument(
                "the open batch was split (a readBuffer of a buffer it writes, a replayBatch, or a fresh allocation in a batch begun with overlapAllocations submitted part of it), so it cannot be captured; capture a batch without such reads",
            ));
        }
        let Some(mut batch) = self.batch.take() else { return Err(HeliosError::internal("batch vanished")) };
        command::host_read_barrier(&self.dev, batch.cmd);
        if let Err(e) = command::end(&self.dev, batch.cmd) {
            self.batch = Some(batch);
            return Err(e);
        }
        let mut keep = std::mem::take(&mut batch.keep);
        let profile = batch.profile.take().map(|p| {
            let (pools, labels) = p.into_parts();
            keep.queries.extend(pools.iter().copied());
            (pools, labels)
        });
        let mut buffers = Vec::with_capacity(batch.touched.len());
        for &id in &batch.touched {
            if let Some(r) = self.res.get_mut(id) {
                r.pins += 1;
                buffers.push((id, r.seg_write == self.seg));
            }
        }
        self.seg += 1;
        // Barriers recorded into the capture have not run: the tracker must not rely on them.
        self.barrier_owed = true;
        let capture = Capture { cmd: batch.cmd, keep, buffers, last_value: 0, profile };
        self.captures.insert(capture)
    }

    pub fn replay_batch(&mut self, graph: f64) -> HeliosResult<u64> {
        let cmd = self.captures.get(graph)?.cmd;
        // Program order: work recorded before the replay runs before it.
        if self.batch.as_ref().is_some_and(|b| b.dispatches > 0 || !b.touched.is_empty()) {
            self.submit_segment(true)?;
        }
        for &(id, _) in &self.captures.get(graph)?.buffers {
            if let Some(r) = self.res.get(id) {
                self.ext_owed = self.ext_owed.max(r.ext_wait);
            }
        }
        let waits = self.submit_waits();
        // The capture was recorded against an older tracker state: a global barrier first.
        let value = self.compute.submit_cmds(&self.dev, &[self.head_cmd, cmd], &waits, Keep::default())?;
        self.waits_done();
        self.barrier_owed = true;
        let capture = self.captures.get_mut(graph)?;
        capture.last_value = value;
        if let Some((pools, labels)) = &capture.profile {
            let (pools, labels) = (pools.clone(), labels.clone());
            self.store_replay_profile(value, graph, &pools, &labels);
        }
        let capture = self.captures.get_mut(graph)?;
        for &(id, written) in &capture.buffers {
            if let Some(r) = self.res.get_mut(id) {
                r.last_use = r.last_use.max(Point::compute(value));
                if written {
                    r.last_write = r.last_write.max(Point::compute(value));
                }
            }
        }
        Ok(value)
    }

    pub fn destroy_capture(&mut self, graph: f64) -> HeliosResult<()> {
        let capture = self.captures.remove(graph)?;
        self.forget_replay_profiles(graph);
        for &(id, _) in &capture.buffers {
            if let Some(r) = self.res.get_mut(id) {
                r.pins = r.pins.saturating_sub(1);
            }
        }
        let done = self.completed()?;
        if capture.last_value <= done.compute {
            self.drop_capture_now(capture);
        } else {
            let keep = Keep { owned_cmd: Some(capture.cmd), ..capture.keep };
            self.compute.keep_until(capture.last_value, keep);
        }
        self.free_zombies(done);
        Ok(())
    }

    /// Frees a capture whose replays completed (or at teardown after wait-idle).
    pub fn drop_capture_now(&mut self, capture: Capture) {
        command::free(&self.dev, self.compute.pool, capture.cmd);
        for b in capture.keep.staging {
            memory::destroy_buffer(&self.dev, &mut self.alloc, b);
        }
        for p in capture.keep.desc_pools {
            command::reset_descriptor_pool(&self.dev, p);
            self.desc_free.push(p);
        }
        for q in capture.keep.queries {
            command::destroy_query_pool(&self.dev, q);
        }
    }
}
