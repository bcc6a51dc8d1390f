//! Timeline-semaphore waits, counters and queue submission (synchronization2).

use ash::vk;

use crate::error::{HeliosError, HeliosResult};
use crate::vk::device::Device;

fn map_err(call: &str, e: vk::Result) -> HeliosError {
    match e {
        vk::Result::ERROR_DEVICE_LOST => HeliosError::device_lost(format!("{call}: the GPU device was lost")),
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
            HeliosError::out_of_memory(format!("{call}: {e}"))
        }
        e => HeliosError::internal(format!("{call}: {e}")),
    }
}

/// Maps a `vk::Result` from anywhere in the Vulkan layer to our error type.
pub fn vk_error(call: &str, e: vk::Result) -> HeliosError {
    map_err(call, e)
}

/// Current value of a timeline semaphore (the highest completed submission).
pub fn counter(device: &Device, sem: vk::Semaphore) -> HeliosResult<u64> {
    // SAFETY: `sem` is a timeline semaphore of `device`.
    unsafe { device.raw.get_semaphore_counter_value(sem) }.map_err(|e| map_err("vkGetSemaphoreCounterValue", e))
}

/// Waits until `sem` reaches `value`; `Ok(false)` on timeout. Polls the counter for up to
/// `device.spin_ns` first: a blocking wait pays an OS wake-up (tens of µs), which would
/// dominate short submit+wait round trips.
pub fn wait(device: &Device, sem: vk::Semaphore, value: u64, timeout_ns: u64) -> HeliosResult<bool> {
    let start = std::time::Instant::now();
    let spin = device.spin_ns.min(timeout_ns);
    loop {
        if counter(device, sem)? >= value {
            return Ok(true);
        }
        let waited = start.elapsed().as_nanos() as u64;
        if waited >= spin {
            if waited >= timeout_ns {
                return Ok(false);
            }
            return block(device, sem, value, timeout_ns - waited);
        }
        std::hint::spin_loop();
    }
}

fn block(device: &Device, sem: vk::Semaphore, value: u64, timeout_ns: u64) -> HeliosResult<bool> {
    let sems = [sem];
    let values = [value];
    let info = vk::SemaphoreWaitInfo::default().semaphores(&sems).values(&values);
    // SAFETY: `sem` belongs to `device`; waiting is thread-safe for semaphores.
    match unsafe { device.raw.wait_semaphores(&info, timeout_ns) } {
        Ok(()) => Ok(true),
        Err(vk::Result::TIMEOUT) => Ok(false),
        Err(e) => Err(map_err("vkWaitSemaphores", e)),
    }
}

/// One submission: command buffers (at most 2) that wait on timeline points (at most 3) and
/// signal one.
pub struct Submit<'a> {
    pub queue: vk::Queue,
    pub cmds: &'a [vk::CommandBuffer],
    pub waits: &'a [(vk::Semaphore, u64)],
    pub signal: (vk::Semaphore, u64),
}

pub fn submit(device: &Device, s: &Submit<'_>) -> HeliosResult<()> {
    let mut waits = [vk::SemaphoreSubmitInfo::default(); 3];
    let n = s.waits.len().min(3);
    for (slot, &(sem, value)) in waits.iter_mut().zip(s.waits) {
        *slot = vk::SemaphoreSubmitInfo::default()
            .semaphore(sem)
            .value(value)
            .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS);
    }
    let signals = [vk::SemaphoreSubmitInfo::default()
        .semaphore(s.signal.0)
        .value(s.signal.1)
        .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
    let mut cmds = [vk::CommandBufferSubmitInfo::default(); 2];
    let m = s.cmds.len().min(2);
    for (slot, &cmd) in cmds.iter_mut().zip(s.cmds) {
        *slot = vk::CommandBufferSubmitInfo::default().command_buffer(cmd);
    }
    let info = vk::SubmitInfo2::default()
        .wait_semaphore_infos(&waits[..n])
        .command_buffer_infos(&cmds[..m])
        .signal_semaphore_infos(&signals);
    // SAFETY: the caller holds the runtime lock (external queue synchronisation); the command
    // buffer is fully recorded and every referenced object stays alive until `signal` completes.
    unsafe { device.raw.queue_submit2(s.queue, &[info], vk::Fence::null()) }.map_err(|e| map_err("vkQueueSubmit2", e))
}
