//! Batches: recording dispatches (the hot path), hazard barriers from declared access, and
//! submission in segments on the compute timeline.
//!
//! Barriers come from the tracker, whose state spans command buffers: a segment starts
//! with no barrier (a hazard with earlier submissions gets one where it occurs, and
//! independent work none, which matters for short submit+wait round trips), and ends
//! with a GPU-write -> host-read barrier only when it wrote host-visible memory. Replays
//! run behind a pre-recorded global barrier (`replay_batch`), and after a capture or a
//! replay the next command gets a full barrier (`barrier_owed`).

use std::sync::Arc;

use crate::caps::Access;
use crate::config::BarrierMode;
use crate::error::{HeliosError, HeliosResult};
use crate::runtime::context::Runtime;
use crate::runtime::lane::Keep;
use crate::runtime::pipelines::PipelineObj;
use crate::runtime::profile::ProfileBuilder;
use crate::runtime::timeline::Point;
use crate::runtime::tracker::Hazard;
use crate::vk::command::{self, Binding};
use crate::vk::raw as vk;

const SETS_PER_POOL: u32 = 256;

pub struct OpenBatch {
    pub cmd: vk::CommandBuffer,
    pub keep: Keep,
    pub profile: Option<ProfileBuilder>,
    /// Part of the batch was already submitted (a read or replay forced it).
    pub split: bool,
    /// Resources used by the open segment.
    pub touched: Vec<u32>,
    pub dispatches: u32,
    /// BatchOptions.overlapAllocations: a fresh allocation may submit the open segment first.
    pub overlap_allocations: bool,
    last_pipeline: Option<Arc<PipelineObj>>,
    scratch_access: Vec<(u32, bool, bool)>,
    scratch_binds: Vec<Binding>,
}

impl Runtime {
    pub fn begin_batch(&mut self, profile: bool, overlap_allocations: bool) -> HeliosResult<()> {
        if self.batch.is_some() {
            return Err(HeliosError::invalid_argument("a batch is already open (nested beginBatch); submitBatch or captureBatch it first"));
        }
        self.maintain()?;
        self.save_cache_debounced();
        let cmd = self.start_segment_cmd()?;
        self.batch = Some(OpenBatch {
            cmd,
            keep: Keep::default(),
            profile: profile.then(ProfileBuilder::default),
            split: false,
            touched: Vec::with_capacity(64),
            dispatches: 0,
            overlap_allocations,
            last_pipeline: None,
            scratch_access: Vec::with_capacity(16),
            scratch_binds: Vec::with_capacity(16),
        });
        Ok(())
    }

    fn start_segment_cmd(&mut self) -> HeliosResult<vk::CommandBuffer> {
        let cmd = self.compute.acquire(&self.dev)?;
        if let Err(e) = command::begin(&self.dev, cmd) {
            self.compute.give_back(cmd);
            return Err(e);
        }
        self.host_visible_write = false;
        Ok(cmd)
    }

    pub fn batch_mut(&mut self) -> HeliosResult<&mut OpenBatch> {
        self.batch.as_mut().ok_or_else(|| HeliosError::invalid_argument("no open batch (call beginBatch first)"))
    }

    /// Applies the tracker to `list` of (resource, reads, writes) of one command (`transfer`:
    /// a copy or fill rather than a dispatch): one barrier if any access conflicts (an
    /// execution-only one when the hazard is only write-after-read), then records the
    /// accesses and marks the resources as used by the open segment.
    pub fn apply_access(&mut self, cmd: vk::CommandBuffer, list: &[(u32, bool, bool)], transfer: bool, touched: &mut Vec<u32>) {
        let mut hazard = Hazard::None;
        for &(id, r, w) in list {
            if let Some(res) = self.res.get(id) {
                hazard = hazard.max(self.tracker.hazard(&res.access, r, w));
            }
        }
        if self.barrier_owed || (transfer && self.compute_only_barrier) {
            // A stale tracker, or earlier compute-only barriers that did not order work
            // before them with transfers: a full barrier.
            self.barrier_owed = false;
            command::global_barrier(&self.dev, cmd);
            self.tracker.barrier();
            self.transfer_since_barrier = false;
            self.compute_only_barrier = false;
        } else if hazard != Hazard::None {
            self.hazard_barrier(cmd, hazard == Hazard::Memory, transfer);
        }
        self.transfer_since_barrier |= transfer;
        // Reading entries first: a buffer both read and written by this command counts as read
        // first (see BufferRes::reusable_in_batch).
        let reads_first = list.iter().filter(|e| e.1).chain(list.iter().filter(|e| !e.1));
        for &(id, r, w) in reads_first {
            if let Some(res) = self.res.get_mut(id) {
                self.ext_owed = self.ext_owed.max(res.ext_wait);
                self.tracker.record(id, &mut res.access, r, w);
                if res.seg != self.seg {
                    res.seg = self.seg;
                    res.seg_fresh = if r { 0 } else { self.seg };
                    touched.push(id);
                }
                if w {
                    res.seg_write = self.seg;
                    if res.direct {
                        self.host_visible_write = true;
                    }
                }
            }
        }
    }

    fn hazard_barrier(&mut self, cmd: vk::CommandBuffer, memory: bool, before_transfer: bool) {
        let scope = command::HazardScope { memory, after_transfer: self.transfer_since_barrier, before_transfer };
        let written = self.tracker.written();
        let named = match self.cfg.barrier {
            BarrierMode::Buffer if memory && written.len() <= command::MAX_BUFFER_BARRIERS => {
                let mut raw = [vk::Buffer::null(); command::MAX_BUFFER_BARRIERS];
                let mut all = true;
                for (slot, id) in raw.iter_mut().zip(written) {
                    match self.res.get(*id) {
                        Some(r) => *slot = r.gpu.raw,
                        None => all = false,
                    }
                }
                all.then_some((raw, written.len()))
            }
            _ => None,
        };
        match named {
            Some((raw, n)) => command::hazard_buffer_barrier(&self.dev, cmd, scope, &raw[..n]),
            None => command::hazard_barrier(&self.dev, cmd, scope),
        }
        self.tracker.barrier();
        self.transfer_since_barrier = false;
        self.compute_only_barrier |= !before_transfer;
    }

    /// Binding count, push-constant size and group counts of one dispatch against `pipe`.
    fn check_shape(&self, pipe: &PipelineObj, buffers: usize, groups: [u32; 3], push: usize) -> HeliosResult<()> {
        if buffers != pipe.bindings.len() {
            return Err(HeliosError::invalid_argument(format!(
                "pipeline {:?} has {} bindings but {buffers} buffers were given",
                pipe.label,
                pipe.bindings.len()
            )));
        }
        if push != pipe.push_bytes as usize {
            return Err(HeliosError::invalid_argument(format!(
                "pipeline {:?} takes {} push-constant bytes but {push} were given",
                pipe.label, pipe.push_bytes
            )));
        }
        let max = self.dev.adapter.limits.max_compute_work_group_count;
        if groups.iter().zip(max.iter()).any(|(g, m)| g > m) {
            return Err(HeliosError::out_of_range(format!("groups {groups:?} exceed maxComputeWorkGroupCount {max:?}")));
        }
        Ok(())
    }

    /// Every check `record_dispatch` makes, without recording (recordDispatchMany validates
    /// all entries before recording any, so a rejected call records nothing).
    pub fn check_dispatch(&self, pipeline: f64, buffers: &[f64], groups: [u32; 3], push: &[u8]) -> HeliosResult<()> {
        if self.batch.is_none() {
            return Err(HeliosError::invalid_argument("no open batch (call beginBatch first)"));
        }
        self.check_shape(self.pipelines.get(pipeline)?, buffers.len(), groups, push.len())?;
        let pipe = self.pipelines.get(pipeline)?;
        for (i, &h) in buffers.iter().enumerate() {
            let (_, r) = self.buffer(h).map_err(|e| HeliosError::new(e.code, format!("buffers[{i}]: {}", e.message)))?;
            binding_range(&pipe.label, i, r)?;
        }
        Ok(())
    }

    /// The hot path: validate everything first (a rejected call changes nothing), then record.
    pub fn record_dispatch(&mut self, pipeline: f64, buffers: &[f64], groups: [u32; 3], push: &[u8]) -> HeliosResult<()> {
        if self.batch.is_none() {
            return Err(HeliosError::invalid_argument("no open batch (call beginBatch first)"));
        }
        let pipe = self.pipelines.get(pipeline)?;
        self.check_shape(pipe, buffers.len(), groups, push.len())?;
        let Some(batch) = self.batch.as_mut() else { return Ok(()) };
        let mut access = std::mem::take(&mut batch.scratch_access);
        let mut binds = std::mem::take(&mut batch.scratch_binds);
        access.clear();
        binds.clear();
        for (i, (&h, acc)) in buffers.iter().zip(pipe.bindings.iter()).enumerate() {
            let found = self.buffers.get(h).ok().and_then(|&id| self.res.get(id).map(|r| (id, r)));
            let Some((id, r)) = found else {
                let why = self.buffers.get(h).err().map(|e| e.message).unwrap_or_default();
                if let Some(b) = self.batch.as_mut() {
                    b.scratch_access = access;
                    b.scratch_binds = binds;
                }
                return Err(HeliosError::invalid_handle(format!("buffers[{i}]: {why}")));
            };
            let range = match binding_range(&pipe.label, i, r) {
                Ok(range) => range,
                Err(err) => {
                    if let Some(b) = self.batch.as_mut() {
                        b.scratch_access = access;
                        b.scratch_binds = binds;
                    }
                    return Err(err);
                }
            };
            access.push((id, acc.reads(), acc.writes()));
            binds.push((r.gpu.raw, range));
        }
        let pipe = pipe.clone();
        self.record_prepared(&pipe, &access, &binds, groups, push)?;
        if let Some(b) = self.batch.as_mut() {
            b.scratch_access = access;
            b.scratch_binds = binds;
        }
        Ok(())
    }

    fn record_prepared(
        &mut self,
        pipe: &Arc<PipelineObj>,
        access: &[(u32, bool, bool)],
        binds: &[Binding],
        groups: [u32; 3],
        push: &[u8],
    ) -> HeliosResult<()> {
        let set = if self.use_push_descriptors { None } else { Some(self.allocate_set(pipe)?) };
        let Some(mut batch) = self.batch.take() else { return Ok(()) };
        let cmd = batch.cmd;
        self.apply_access(cmd, access, false, &mut batch.touched);
        let dev = &self.dev;
        if !batch.last_pipeline.as_ref().is_some_and(|p| Arc::ptr_eq(p, pipe)) {
            command::bind_pipeline(dev, cmd, pipe.vk.raw);
            batch.keep.pipelines.push(pipe.clone());
            batch.last_pipeline = Some(pipe.clone());
        }
        match set {
            Some(set) => {
                command::write_set(dev, set, binds);
                command::bind_set(dev, cmd, pipe.vk.layout, set);
            }
            None => command::push_descriptors(dev, cmd, pipe.vk.layout, binds),
        }
        command::push_constants(dev, cmd, pipe.vk.layout, push);
        let profiled = batch.profile.as_mut().map(|p| p.before(dev, cmd, &pipe.label));
        command::dispatch(dev, cmd, groups);
        if let (Some(p), Some(Ok(()))) = (batch.profile.as_mut(), profiled.as_ref()) {
            p.after(dev, cmd);
        }
        batch.dispatches += 1;
        self.batch = Some(batch);
        match profiled {
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Fallback without push descriptors: a set from the batch's pools (recycled by timeline).
    fn allocate_set(&mut self, pipe: &PipelineObj) -> HeliosResult<vk::DescriptorSet> {
        let layout = pipe.vk.set_layout;
        if let Some(&pool) = self.batch.as_ref().and_then(|b| b.keep.desc_pools.last()) {
            if let Some(set) = command::allocate_set(&self.dev, pool, layout)? {
                return Ok(set);
            }
        }
        let pool = match self.desc_free.pop() {
            Some(p) => p,
            None => command::create_descriptor_pool(&self.dev, SETS_PER_POOL)?,
        };
        self.batch_mut()?.keep.desc_pools.push(pool);
        command::allocate_set(&self.dev, pool, layout)?
            .ok_or_else(|| HeliosError::internal("a fresh descriptor pool could not allocate a set"))
    }

    /// Submits the open segment; with `reopen` the batch continues in a new command buffer.
    pub fn submit_segment(&mut self, reopen: bool) -> HeliosResult<u64> {
        let Some(mut batch) = self.batch.take() else {
            return Err(HeliosError::invalid_argument("no open batch (call beginBatch first)"));
        };
        if std::mem::take(&mut self.host_visible_write) {
            command::host_read_barrier(&self.dev, batch.cmd);
        }
        command::end(&self.dev, batch.cmd)?;
        let waits = self.submit_waits();
        let mut keep = std::mem::take(&mut batch.keep);
        keep.cmd = Some(batch.cmd);
        let value = self.compute.submit(&self.dev, batch.cmd, &waits, keep)?;
        self.waits_done();
        for id in batch.touched.drain(..) {
            if let Some(r) = self.res.get_mut(id) {
                r.last_use = r.last_use.max(Point::compute(value));
                if r.seg_write == self.seg {
                    r.last_write = r.last_write.max(Point::compute(value));
                }
            }
        }
        self.seg += 1;
        batch.last_pipeline = None;
        if reopen {
            batch.cmd = self.start_segment_cmd()?;
            batch.split = true;
            self.batch = Some(batch);
        } else if let Some(p) = batch.profile.take() {
            self.store_profile(value, p);
        }
        Ok(value)
    }

    /// What the next compute submission waits for: transfer-queue uploads it may read, and the
    /// external timeline (a collective writing a buffer it uses: `runtime::external`).
    pub fn submit_waits(&self) -> Vec<(vk::Semaphore, u64)> {
        let mut w = Vec::new();
        if self.transfer_pending > self.transfer_waited {
            w.push((self.dev.transfer_sem, self.transfer_pending));
        }
        if self.ext_owed > self.ext_waited {
            w.push((self.dev.external_sem, self.ext_owed));
        }
        w
    }

    /// Records that a compute submission waited for everything `submit_waits` named.
    pub fn waits_done(&mut self) {
        self.transfer_waited = self.transfer_pending;
        self.ext_waited = self.ext_waited.max(self.ext_owed);
    }

    pub fn submit_batch(&mut self) -> HeliosResult<u64> {
        let value = self.submit_segment(false)?;
        self.free_zombies(self.completed_cached());
        Ok(value)
    }

    /// Access of one binding, for callers outside the dispatch path.
    pub fn access_flags(a: Access) -> (bool, bool) {
        (a.reads(), a.writes())
    }
}

/// The range a dispatch binds, checked against the buffer at record time (every dispatch,
/// recordDispatchMany entry and captured dispatch records through here): it starts at 0, covers
/// the bytes the caller asked for, and lies inside the allocation. Shaders then stay inside the
/// buffer under robustBufferAccess (docs/architecture.md, *Bounds*); a buffer past the
/// storage-binding limit is refused, since drivers drop such bindings silently.
fn binding_range(label: &str, index: usize, r: &crate::runtime::resources::BufferRes) -> HeliosResult<u64> {
    if r.len > r.bind_range {
        return Err(HeliosError::out_of_range(format!(
            "pipeline {label:?} binding {index} is a {}-byte buffer, over the device's \
             {}-byte storage-binding limit (min of maxStorageBufferRange, 2^31 - 1, HELIOS_MAX_BINDING_BYTES)",
            r.len, r.bind_range
        )));
    }
    if r.bind_range == 0 || r.bind_range > r.gpu.size {
        return Err(HeliosError::out_of_range(format!(
            "pipeline {label:?} binding {index}: range 0..{} does not fit the {}-byte buffer",
            r.bind_range, r.gpu.size
        )));
    }
    Ok(r.bind_range)
}
