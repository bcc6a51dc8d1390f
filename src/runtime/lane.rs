//! One queue's submission lane: its command pool, recycled command buffers, the timeline
//! semaphore it signals, and what each in-flight submission keeps alive until it completes.

use std::collections::VecDeque;
use std::sync::Arc;

use gpu_allocator::vulkan::Allocator;

use crate::error::HeliosResult;
use crate::runtime::pipelines::PipelineObj;
use crate::vk::device::Device;
use crate::vk::memory::{self, GpuBuffer};
use crate::vk::raw as vk;
use crate::vk::{command, sync};

/// Resources a submission (or a captured batch) keeps alive until its timeline value completes.
#[derive(Default)]
pub struct Keep {
    /// Returned to the lane's free list (None for captured command buffers owned elsewhere).
    pub cmd: Option<vk::CommandBuffer>,
    pub staging: Vec<GpuBuffer>,
    pub desc_pools: Vec<vk::DescriptorPool>,
    pub pipelines: Vec<Arc<PipelineObj>>,
    pub queries: Vec<vk::QueryPool>,
    /// A captured command buffer to free (destroyCapture while a replay was in flight).
    pub owned_cmd: Option<vk::CommandBuffer>,
}

impl Keep {
    pub fn is_empty(&self) -> bool {
        self.cmd.is_none()
            && self.staging.is_empty()
            && self.desc_pools.is_empty()
            && self.pipelines.is_empty()
            && self.queries.is_empty()
            && self.owned_cmd.is_none()
    }
}

pub struct Lane {
    pub queue: vk::Queue,
    pub sem: vk::Semaphore,
    pub pool: vk::CommandPool,
    free: Vec<vk::CommandBuffer>,
    inflight: VecDeque<(u64, Keep)>,
    /// Highest value submitted (signalled once complete).
    pub submitted: u64,
    /// Highest value known complete (cached counter).
    pub completed: u64,
}

impl Lane {
    pub fn new(device: &Device, family: u32, queue: vk::Queue, sem: vk::Semaphore) -> HeliosResult<Lane> {
        Ok(Lane {
            queue,
            sem,
            pool: command::create_pool(device, family)?,
            free: Vec::new(),
            inflight: VecDeque::new(),
            submitted: 0,
            completed: 0,
        })
    }

    /// A command buffer ready to begin (recycled when one completed).
    pub fn acquire(&mut self, device: &Device) -> HeliosResult<vk::CommandBuffer> {
        match self.free.pop() {
            Some(c) => Ok(c),
            None => command::allocate(device, self.pool),
        }
    }

    /// Returns a command buffer that was never submitted.
    pub fn give_back(&mut self, cmd: vk::CommandBuffer) {
        self.free.push(cmd);
    }

    /// Reads the semaphore counter.
    pub fn refresh(&mut self, device: &Device) -> HeliosResult<u64> {
        self.completed = self.completed.max(sync::counter(device, self.sem)?);
        Ok(self.completed)
    }

    /// Submits `cmd` signalling the next value; `keep` lives until that value completes.
    pub fn submit(&mut self, device: &Device, cmd: vk::CommandBuffer, waits: &[(vk::Semaphore, u64)], keep: Keep) -> HeliosResult<u64> {
        self.submit_cmds(device, &[cmd], waits, keep)
    }

    /// Like `submit`, with up to two command buffers executed in order.
    pub fn submit_cmds(&mut self, device: &Device, cmds: &[vk::CommandBuffer], waits: &[(vk::Semaphore, u64)], keep: Keep) -> HeliosResult<u64> {
        let value = self.submitted + 1;
        sync::submit(device, &sync::Submit { queue: self.queue, cmds, waits, signal: (self.sem, value) })?;
        self.submitted = value;
        if !keep.is_empty() {
            self.inflight.push_back((value, keep));
        }
        Ok(value)
    }

    /// Keeps `keep` alive until `value` (already submitted) completes.
    pub fn keep_until(&mut self, value: u64, keep: Keep) {
        if keep.is_empty() {
            return;
        }
        let pos = self.inflight.iter().position(|(v, _)| *v > value).unwrap_or(self.inflight.len());
        self.inflight.insert(pos, (value, keep));
    }

    /// Recycles everything whose value completed; descriptor pools go to `desc_free`.
    pub fn retire(&mut self, device: &Device, alloc: &mut Allocator, desc_free: &mut Vec<vk::DescriptorPool>) {
        while self.inflight.front().is_some_and(|(v, _)| *v <= self.completed) {
            if let Some((_, keep)) = self.inflight.pop_front() {
                self.release(device, alloc, desc_free, keep);
            }
        }
    }

    fn release(&mut self, device: &Device, alloc: &mut Allocator, desc_free: &mut Vec<vk::DescriptorPool>, keep: Keep) {
        if let Some(c) = keep.cmd {
            self.free.push(c);
        }
        if let Some(c) = keep.owned_cmd {
            command::free(device, self.pool, c);
        }
        for b in keep.staging {
            memory::destroy_buffer(device, alloc, b);
        }
        for p in keep.desc_pools {
            command::reset_descriptor_pool(device, p);
            desc_free.push(p);
        }
        for q in keep.queries {
            command::destroy_query_pool(device, q);
        }
    }

    /// Frees everything; the caller waited for the device to go idle.
    pub fn destroy(&mut self, device: &Device, alloc: &mut Allocator, desc_free: &mut Vec<vk::DescriptorPool>) {
        self.completed = u64::MAX;
        self.retire(device, alloc, desc_free);
        command::destroy_pool(device, self.pool);
        self.free.clear();
    }
}
