//! Command pools and the few commands Helios records: barriers, dispatches with push or
//! pooled descriptors, copies, fills and timestamps. Callers hold the runtime lock.

use ash::vk;

use crate::error::HeliosResult;
use crate::vk::device::Device;
use crate::vk::sync::vk_error;

/// Most storage buffers one dispatch may bind (keeps descriptor scratch on the stack).
pub const MAX_BINDINGS: usize = 32;

pub fn create_pool(device: &Device, family: u32) -> HeliosResult<vk::CommandPool> {
    let info = vk::CommandPoolCreateInfo::default()
        .queue_family_index(family)
        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
    // SAFETY: valid create info on a live device.
    unsafe { device.raw.create_command_pool(&info, None) }.map_err(|e| vk_error("vkCreateCommandPool", e))
}

pub fn destroy_pool(device: &Device, pool: vk::CommandPool) {
    // SAFETY: the caller waited for every command buffer of the pool to complete.
    unsafe { device.raw.destroy_command_pool(pool, None) };
}

pub fn allocate(device: &Device, pool: vk::CommandPool) -> HeliosResult<vk::CommandBuffer> {
    let info = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .level(vk::CommandBufferLevel::PRIMARY)
        .command_buffer_count(1);
    // SAFETY: the pool is externally synchronised by the runtime lock.
    let bufs = unsafe { device.raw.allocate_command_buffers(&info) }.map_err(|e| vk_error("vkAllocateCommandBuffers", e))?;
    Ok(bufs[0])
}

pub fn free(device: &Device, pool: vk::CommandPool, cmd: vk::CommandBuffer) {
    // SAFETY: the command buffer is not pending (caller contract).
    unsafe { device.raw.free_command_buffers(pool, &[cmd]) };
}

/// Begins recording (implicitly resetting). SIMULTANEOUS_USE lets a captured batch be
/// replayed while an earlier replay is still pending.
pub fn begin(device: &Device, cmd: vk::CommandBuffer) -> HeliosResult<()> {
    let info = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
    // SAFETY: `cmd` is not pending (recycled only after its timeline value completed).
    unsafe { device.raw.begin_command_buffer(cmd, &info) }.map_err(|e| vk_error("vkBeginCommandBuffer", e))
}

/// Begins a command buffer that is submitted exactly once (transfer-lane copies): drivers may
/// skip the bookkeeping SIMULTANEOUS_USE implies.
pub fn begin_once(device: &Device, cmd: vk::CommandBuffer) -> HeliosResult<()> {
    let info = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    // SAFETY: `cmd` is not pending (recycled only after its timeline value completed).
    unsafe { device.raw.begin_command_buffer(cmd, &info) }.map_err(|e| vk_error("vkBeginCommandBuffer", e))
}

pub fn end(device: &Device, cmd: vk::CommandBuffer) -> HeliosResult<()> {
    // SAFETY: `cmd` is in the recording state.
    unsafe { device.raw.end_command_buffer(cmd) }.map_err(|e| vk_error("vkEndCommandBuffer", e))
}

const GPU_STAGES: vk::PipelineStageFlags2 =
    vk::PipelineStageFlags2::from_raw(vk::PipelineStageFlags2::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags2::ALL_TRANSFER.as_raw());
const GPU_WRITES: vk::AccessFlags2 =
    vk::AccessFlags2::from_raw(vk::AccessFlags2::SHADER_WRITE.as_raw() | vk::AccessFlags2::TRANSFER_WRITE.as_raw());
const GPU_ACCESS: vk::AccessFlags2 = vk::AccessFlags2::from_raw(
    vk::AccessFlags2::SHADER_READ.as_raw()
        | vk::AccessFlags2::SHADER_WRITE.as_raw()
        | vk::AccessFlags2::TRANSFER_READ.as_raw()
        | vk::AccessFlags2::TRANSFER_WRITE.as_raw(),
);

fn memory_barrier(device: &Device, cmd: vk::CommandBuffer, barrier: vk::MemoryBarrier2<'_>) {
    let barriers = [barrier];
    let dep = vk::DependencyInfo::default().memory_barriers(&barriers);
    // SAFETY: `cmd` is recording; the dependency info only references locals.
    unsafe { device.raw.cmd_pipeline_barrier2(cmd, &dep) };
}

/// One global barrier: every earlier compute/transfer access before every later one (RAW, WAW, WAR).
pub fn global_barrier(device: &Device, cmd: vk::CommandBuffer) {
    memory_barrier(
        device,
        cmd,
        vk::MemoryBarrier2::default()
            .src_stage_mask(GPU_STAGES)
            .src_access_mask(GPU_WRITES)
            .dst_stage_mask(GPU_STAGES)
            .dst_access_mask(GPU_ACCESS),
    );
}

/// What one hazard barrier between commands of a command buffer must order.
#[derive(Debug, Clone, Copy)]
pub struct HazardScope {
    /// RAW/WAW (or writes pending): make writes available and visible. Otherwise the
    /// barrier is an execution dependency only (WAR), which needs no cache maintenance.
    pub memory: bool,
    /// A copy or fill ran since the last barrier (adds transfer source stages).
    pub after_transfer: bool,
    /// The next command is a copy or fill rather than a dispatch.
    pub before_transfer: bool,
}

const STORAGE_ACCESS: vk::AccessFlags2 =
    vk::AccessFlags2::from_raw(vk::AccessFlags2::SHADER_STORAGE_READ.as_raw() | vk::AccessFlags2::SHADER_STORAGE_WRITE.as_raw());

/// Stage and access masks of a hazard barrier: only the stages that ran and the stage that
/// follows, and only storage (or transfer) access bits, so the driver waits on and flushes
/// no more than the hazard needs. Before a dispatch the second scope is compute only; the
/// runtime then puts a full barrier before the next copy or fill (see `apply_access`).
fn hazard_masks(h: HazardScope) -> (vk::PipelineStageFlags2, vk::AccessFlags2, vk::PipelineStageFlags2, vk::AccessFlags2) {
    let (src_stage, src_access) = if h.after_transfer {
        (GPU_STAGES, vk::AccessFlags2::SHADER_STORAGE_WRITE | vk::AccessFlags2::TRANSFER_WRITE)
    } else {
        (vk::PipelineStageFlags2::COMPUTE_SHADER, vk::AccessFlags2::SHADER_STORAGE_WRITE)
    };
    let (dst_stage, dst_access) = if h.before_transfer {
        (GPU_STAGES, GPU_ACCESS)
    } else {
        (vk::PipelineStageFlags2::COMPUTE_SHADER, STORAGE_ACCESS)
    };
    if h.memory {
        (src_stage, src_access, dst_stage, dst_access)
    } else {
        (src_stage, vk::AccessFlags2::NONE, dst_stage, vk::AccessFlags2::NONE)
    }
}

/// The barrier the tracker asks for, as one global VkMemoryBarrier2 (`HELIOS_BARRIER=global`).
pub fn hazard_barrier(device: &Device, cmd: vk::CommandBuffer, h: HazardScope) {
    let (src_stage, src_access, dst_stage, dst_access) = hazard_masks(h);
    memory_barrier(
        device,
        cmd,
        vk::MemoryBarrier2::default()
            .src_stage_mask(src_stage)
            .src_access_mask(src_access)
            .dst_stage_mask(dst_stage)
            .dst_access_mask(dst_access),
    );
}

/// Most buffers one VkBufferMemoryBarrier2 list names; beyond, a global barrier is cheaper to record.
pub const MAX_BUFFER_BARRIERS: usize = 16;

/// The same dependency as `hazard_barrier`, as one VkBufferMemoryBarrier2 per buffer written
/// since the last barrier (`HELIOS_BARRIER=buffer`). `written` must name every such buffer
/// (at most MAX_BUFFER_BARRIERS): memory visibility is given only for the buffers named.
pub fn hazard_buffer_barrier(device: &Device, cmd: vk::CommandBuffer, h: HazardScope, written: &[vk::Buffer]) {
    let (src_stage, src_access, dst_stage, dst_access) = hazard_masks(h);
    if !h.memory || written.is_empty() {
        return hazard_barrier(device, cmd, h);
    }
    let mut barriers = [vk::BufferMemoryBarrier2::default(); MAX_BUFFER_BARRIERS];
    let n = written.len().min(MAX_BUFFER_BARRIERS);
    for (b, &buffer) in barriers.iter_mut().zip(written) {
        *b = vk::BufferMemoryBarrier2::default()
            .src_stage_mask(src_stage)
            .src_access_mask(src_access)
            .dst_stage_mask(dst_stage)
            .dst_access_mask(dst_access)
            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .buffer(buffer)
            .offset(0)
            .size(vk::WHOLE_SIZE);
    }
    // Plus an execution-only global barrier: write-after-read on buffers not named here
    // needs ordering (no access bits, so no cache work); validation scopes buffer barriers'
    // execution dependency to their buffer.
    let exec = [vk::MemoryBarrier2::default().src_stage_mask(src_stage).dst_stage_mask(dst_stage)];
    let dep = vk::DependencyInfo::default().memory_barriers(&exec).buffer_memory_barriers(&barriers[..n]);
    // SAFETY: `cmd` is recording; every buffer is alive (the runtime keeps written buffers
    // until their use completes) and the dependency info only references locals.
    unsafe { device.raw.cmd_pipeline_barrier2(cmd, &dep) };
}

/// Transfer-queue flavour of the global barrier (a DMA queue supports only transfer stages).
pub fn transfer_barrier(device: &Device, cmd: vk::CommandBuffer) {
    memory_barrier(
        device,
        cmd,
        vk::MemoryBarrier2::default()
            .src_stage_mask(vk::PipelineStageFlags2::ALL_TRANSFER)
            .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
            .dst_stage_mask(vk::PipelineStageFlags2::ALL_TRANSFER)
            .dst_access_mask(vk::AccessFlags2::TRANSFER_READ | vk::AccessFlags2::TRANSFER_WRITE),
    );
}

/// Transfer-queue flavour of `host_read_barrier`.
pub fn transfer_host_barrier(device: &Device, cmd: vk::CommandBuffer) {
    memory_barrier(
        device,
        cmd,
        vk::MemoryBarrier2::default()
            .src_stage_mask(vk::PipelineStageFlags2::ALL_TRANSFER)
            .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
            .dst_stage_mask(vk::PipelineStageFlags2::HOST)
            .dst_access_mask(vk::AccessFlags2::HOST_READ),
    );
}

/// Makes GPU writes visible to host reads once the submission's semaphore is observed.
pub fn host_read_barrier(device: &Device, cmd: vk::CommandBuffer) {
    memory_barrier(
        device,
        cmd,
        vk::MemoryBarrier2::default()
            .src_stage_mask(GPU_STAGES)
            .src_access_mask(GPU_WRITES)
            .dst_stage_mask(vk::PipelineStageFlags2::HOST)
            .dst_access_mask(vk::AccessFlags2::HOST_READ),
    );
}

pub fn bind_pipeline(device: &Device, cmd: vk::CommandBuffer, pipeline: vk::Pipeline) {
    // SAFETY: `cmd` is recording and `pipeline` outlives its execution (runtime keeps it alive).
    unsafe { device.raw.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline) };
}

/// A storage-buffer binding: the buffer and its bound range (clamped to maxStorageBufferRange).
pub type Binding = (vk::Buffer, u64);

fn buffer_infos(buffers: &[Binding]) -> [vk::DescriptorBufferInfo; MAX_BINDINGS] {
    let mut infos = [vk::DescriptorBufferInfo::default(); MAX_BINDINGS];
    for (info, &(buffer, range)) in infos.iter_mut().zip(buffers) {
        *info = vk::DescriptorBufferInfo { buffer, offset: 0, range };
    }
    infos
}

/// Binds `buffers` to set 0, bindings 0.. with VK_KHR_push_descriptor.
pub fn push_descriptors(device: &Device, cmd: vk::CommandBuffer, layout: vk::PipelineLayout, buffers: &[Binding]) {
    let Some(push) = device.push_desc.as_ref() else { return };
    if buffers.is_empty() {
        return;
    }
    let n = buffers.len().min(MAX_BINDINGS);
    let infos = buffer_infos(buffers);
    let writes = [vk::WriteDescriptorSet::default()
        .dst_binding(0)
        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
        .buffer_info(&infos[..n])];
    // SAFETY: consecutive bindings 0..n of one type; buffers outlive execution (runtime tracks use).
    unsafe { push.cmd_push_descriptor_set(cmd, vk::PipelineBindPoint::COMPUTE, layout, 0, &writes) };
}

/// Writes `buffers` into a pooled descriptor set (fallback without push descriptors).
pub fn write_set(device: &Device, set: vk::DescriptorSet, buffers: &[Binding]) {
    if buffers.is_empty() {
        return;
    }
    let n = buffers.len().min(MAX_BINDINGS);
    let infos = buffer_infos(buffers);
    let writes = [vk::WriteDescriptorSet::default()
        .dst_set(set)
        .dst_binding(0)
        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
        .buffer_info(&infos[..n])];
    // SAFETY: `set` is freshly allocated and not in use by any pending command buffer.
    unsafe { device.raw.update_descriptor_sets(&writes, &[]) };
}

pub fn bind_set(device: &Device, cmd: vk::CommandBuffer, layout: vk::PipelineLayout, set: vk::DescriptorSet) {
    // SAFETY: `cmd` is recording; `set` stays alive until the batch's timeline value completes.
    unsafe { device.raw.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]) };
}

pub fn push_constants(device: &Device, cmd: vk::CommandBuffer, layout: vk::PipelineLayout, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    // SAFETY: the size was checked against the layout's push-constant range by the caller.
    unsafe { device.raw.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, bytes) };
}

pub fn dispatch(device: &Device, cmd: vk::CommandBuffer, groups: [u32; 3]) {
    // SAFETY: `cmd` is recording with a compute pipeline bound; counts were range-checked.
    unsafe { device.raw.cmd_dispatch(cmd, groups[0], groups[1], groups[2]) };
}

pub fn copy(device: &Device, cmd: vk::CommandBuffer, src: vk::Buffer, dst: vk::Buffer, region: vk::BufferCopy) {
    // SAFETY: the region was bounds-checked by the caller; both buffers outlive execution.
    unsafe { device.raw.cmd_copy_buffer(cmd, src, dst, &[region]) };
}

pub fn fill(device: &Device, cmd: vk::CommandBuffer, dst: vk::Buffer, offset: u64, size: u64, pattern: u32) {
    // SAFETY: offset and size are multiples of 4 within the buffer (checked by the caller).
    unsafe { device.raw.cmd_fill_buffer(cmd, dst, offset, size, pattern) };
}

pub fn create_query_pool(device: &Device, count: u32) -> HeliosResult<vk::QueryPool> {
    let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(count);
    // SAFETY: valid create info.
    unsafe { device.raw.create_query_pool(&info, None) }.map_err(|e| vk_error("vkCreateQueryPool", e))
}

pub fn destroy_query_pool(device: &Device, pool: vk::QueryPool) {
    // SAFETY: no pending command buffer writes this pool (caller contract).
    unsafe { device.raw.destroy_query_pool(pool, None) };
}

pub fn reset_queries(device: &Device, cmd: vk::CommandBuffer, pool: vk::QueryPool, count: u32) {
    // SAFETY: `cmd` is recording, outside a render pass.
    unsafe { device.raw.cmd_reset_query_pool(cmd, pool, 0, count) };
}

pub fn timestamp(device: &Device, cmd: vk::CommandBuffer, pool: vk::QueryPool, index: u32, end: bool) {
    let stage = if end { vk::PipelineStageFlags2::COMPUTE_SHADER } else { vk::PipelineStageFlags2::TOP_OF_PIPE };
    // SAFETY: `index` < the pool's query count (caller contract).
    unsafe { device.raw.cmd_write_timestamp2(cmd, stage, pool, index) };
}

/// Reads `count` 64-bit timestamps; the caller waited for the batch to complete.
pub fn query_results(device: &Device, pool: vk::QueryPool, count: u32) -> HeliosResult<Vec<u64>> {
    let mut out = vec![0u64; count as usize];
    // SAFETY: the results are available (batch completed); `out` holds `count` u64s.
    unsafe { device.raw.get_query_pool_results(pool, 0, &mut out, vk::QueryResultFlags::TYPE_64) }
        .map_err(|e| vk_error("vkGetQueryPoolResults", e))?;
    Ok(out)
}

pub fn create_descriptor_pool(device: &Device, sets: u32) -> HeliosResult<vk::DescriptorPool> {
    let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: sets * 8 }];
    let info = vk::DescriptorPoolCreateInfo::default().max_sets(sets).pool_sizes(&sizes);
    // SAFETY: valid create info.
    unsafe { device.raw.create_descriptor_pool(&info, None) }.map_err(|e| vk_error("vkCreateDescriptorPool", e))
}

/// Allocates one set; `Ok(None)` when the pool is exhausted (the caller opens another pool).
pub fn allocate_set(
    device: &Device,
    pool: vk::DescriptorPool,
    layout: vk::DescriptorSetLayout,
) -> HeliosResult<Option<vk::DescriptorSet>> {
    let layouts = [layout];
    let info = vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
    // SAFETY: the pool is externally synchronised by the runtime lock.
    match unsafe { device.raw.allocate_descriptor_sets(&info) } {
        Ok(sets) => Ok(Some(sets[0])),
        Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY) | Err(vk::Result::ERROR_FRAGMENTED_POOL) => Ok(None),
        Err(e) => Err(vk_error("vkAllocateDescriptorSets", e)),
    }
}

pub fn reset_descriptor_pool(device: &Device, pool: vk::DescriptorPool) {
    // SAFETY: no pending command buffer uses sets of this pool (recycled by timeline value).
    let _ = unsafe { device.raw.reset_descriptor_pool(pool, vk::DescriptorPoolResetFlags::empty()) };
}

pub fn destroy_descriptor_pool(device: &Device, pool: vk::DescriptorPool) {
    // SAFETY: as above.
    unsafe { device.raw.destroy_descriptor_pool(pool, None) };
}
