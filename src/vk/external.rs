//! Memory and timeline semaphores shared with CUDA (the distributed layer, `crate::dist`):
//! VK_KHR_external_memory_fd and VK_KHR_external_semaphore_fd, opaque file descriptors. A shared
//! buffer has memory of its own (a dedicated allocation, as CUDA's import of a dedicated
//! Vulkan allocation expects), allocated exportable; a shared timeline is created exportable.
//! Exported descriptors pass to the importer, which owns (and closes) them on success.

use ash::{khr, vk};

use crate::error::{HeliosError, HeliosResult};
use crate::vk::device::Device;
use crate::vk::memory::GpuBuffer;
use crate::vk::sync::vk_error;

const OPAQUE_FD_MEM: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
const OPAQUE_FD_SEM: vk::ExternalSemaphoreHandleTypeFlags = vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;

/// The device extensions sharing needs: memory, then timelines.
pub const EXTENSIONS: [&std::ffi::CStr; 2] = [khr::external_memory_fd::NAME, khr::external_semaphore_fd::NAME];

/// The loaded extension entry points (present when the device was created shareable). Memory
/// export alone is enough for shared buffers and host-signalled ordering (lavapipe of Mesa
/// 22.3 has only that); CUDA interop needs the timelines too.
pub struct Sharing {
    mem: khr::external_memory_fd::Device,
    sem: Option<khr::external_semaphore_fd::Device>,
}

impl Sharing {
    pub fn new(instance: &ash::Instance, device: &ash::Device, timelines: bool) -> Sharing {
        Sharing {
            mem: khr::external_memory_fd::Device::new(instance, device),
            sem: timelines.then(|| khr::external_semaphore_fd::Device::new(instance, device)),
        }
    }

    /// Whether timelines can be exported (VK_KHR_external_semaphore_fd with timeline support).
    pub fn timelines(&self) -> bool {
        self.sem.is_some()
    }
}

/// Whether timeline semaphores of this device can be exported as opaque fds.
pub fn timeline_exportable(instance: &ash::Instance, pd: vk::PhysicalDevice) -> bool {
    let mut kind = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    let info = vk::PhysicalDeviceExternalSemaphoreInfo::default().handle_type(OPAQUE_FD_SEM).push_next(&mut kind);
    let mut props = vk::ExternalSemaphoreProperties::default();
    // SAFETY: core 1.1 query on a valid physical device; the structs outlive the call.
    unsafe { instance.get_physical_device_external_semaphore_properties(pd, &info, &mut props) };
    props.external_semaphore_features.contains(vk::ExternalSemaphoreFeatureFlags::EXPORTABLE)
}

/// A timeline semaphore (initial value 0), exportable as an opaque fd when `exportable`.
pub fn create_timeline(raw: &ash::Device, exportable: bool) -> HeliosResult<vk::Semaphore> {
    let mut kind = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
    let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(OPAQUE_FD_SEM);
    let mut info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
    if exportable {
        info = info.push_next(&mut export);
    }
    // SAFETY: valid device and create info; the chained structs outlive the call.
    unsafe { raw.create_semaphore(&info, None) }.map_err(|e| vk_error("vkCreateSemaphore", e))
}

fn sharing(device: &Device) -> HeliosResult<&Sharing> {
    device.sharing.as_ref().ok_or_else(|| {
        HeliosError::invalid_argument(format!(
            "{} was not created shareable (initDevice({{shareable: true}}) on a device with VK_KHR_external_memory_fd)",
            device.adapter.info.device_name
        ))
    })
}

/// An opaque fd for `sem` (a timeline created exportable). The caller owns the fd.
pub fn semaphore_fd(device: &Device, sem: vk::Semaphore) -> HeliosResult<i32> {
    let s = sharing(device)?.sem.as_ref().ok_or_else(|| {
        HeliosError::invalid_argument(format!("{} cannot export timeline semaphores (VK_KHR_external_semaphore_fd)", device.adapter.info.device_name))
    })?;
    let info = vk::SemaphoreGetFdInfoKHR::default().semaphore(sem).handle_type(OPAQUE_FD_SEM);
    // SAFETY: `sem` belongs to `device` and was created with export info for opaque fds.
    unsafe { s.get_semaphore_fd(&info) }.map_err(|e| vk_error("vkGetSemaphoreFdKHR", e))
}

/// A device-local storage buffer with exportable memory of its own (its allocation size may
/// exceed `size`: `GpuBuffer::size` is what the memory holds, the size CUDA must import).
pub fn create_shared_buffer(device: &Device, size: u64) -> HeliosResult<GpuBuffer> {
    sharing(device)?;
    let families = device.families();
    let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
    let mut ext = vk::ExternalMemoryBufferCreateInfo::default().handle_types(OPAQUE_FD_MEM);
    let mut info = vk::BufferCreateInfo::default().size(size.max(4)).usage(usage).push_next(&mut ext);
    info = if families.len() > 1 {
        info.sharing_mode(vk::SharingMode::CONCURRENT).queue_family_indices(&families)
    } else {
        info.sharing_mode(vk::SharingMode::EXCLUSIVE)
    };
    // SAFETY: valid create info (the chained struct outlives the call).
    let raw = unsafe { device.raw.create_buffer(&info, None) }.map_err(|e| vk_error("vkCreateBuffer", e))?;
    let destroy = |e: HeliosError| {
        // SAFETY: the buffer is unused and has no memory bound.
        unsafe { device.raw.destroy_buffer(raw, None) };
        e
    };
    // SAFETY: `raw` was just created on this device.
    let req = unsafe { device.raw.get_buffer_memory_requirements(raw) };
    let Some((type_index, _, _)) = crate::vk::dedicated::device_local_type(device, req.memory_type_bits) else {
        return Err(destroy(HeliosError::out_of_memory("no device-local memory type for a shared buffer".to_string())));
    };
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(raw);
    let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(OPAQUE_FD_MEM);
    let alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(req.size)
        .memory_type_index(type_index)
        .push_next(&mut dedicated)
        .push_next(&mut export);
    // SAFETY: valid allocate info for this device; freed with the buffer (`destroy_buffer`).
    let memory = unsafe { device.raw.allocate_memory(&alloc, None) }.map_err(|e| destroy(vk_error("vkAllocateMemory", e)))?;
    // SAFETY: the dedicated allocation was made for this buffer and is bound once.
    if let Err(e) = unsafe { device.raw.bind_buffer_memory(raw, memory, 0) } {
        // SAFETY: nothing uses the memory yet.
        unsafe { device.raw.free_memory(memory, None) };
        return Err(destroy(vk_error("vkBindBufferMemory", e)));
    }
    Ok(GpuBuffer::with_dedicated(raw, req.size, memory))
}

/// An opaque fd for a shared buffer's memory. The caller owns the fd.
pub fn memory_fd(device: &Device, buf: &GpuBuffer) -> HeliosResult<i32> {
    let s = sharing(device)?;
    let memory = buf.dedicated_memory().ok_or_else(|| HeliosError::invalid_argument("the buffer is not a shared buffer".to_string()))?;
    let info = vk::MemoryGetFdInfoKHR::default().memory(memory).handle_type(OPAQUE_FD_MEM);
    // SAFETY: `memory` was allocated on this device with export info for opaque fds.
    unsafe { s.mem.get_memory_fd(&info) }.map_err(|e| vk_error("vkGetMemoryFdKHR", e))
}

/// Signals a timeline from the host (tests stand in for CUDA's signal with it).
pub fn signal(device: &Device, sem: vk::Semaphore, value: u64) -> HeliosResult<()> {
    let info = vk::SemaphoreSignalInfo::default().semaphore(sem).value(value);
    // SAFETY: `sem` is a timeline of `device`; a value above its current one is valid.
    unsafe { device.raw.signal_semaphore(&info) }.map_err(|e| vk_error("vkSignalSemaphore", e))
}

/// Closes an fd that was exported but not handed to an importer.
pub fn close_fd(fd: i32) {
    if fd >= 0 {
        // SAFETY: the caller owns `fd` and does not use it afterwards.
        unsafe { libc::close(fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vk::{adapter, instance::Instance};

    /// What the test machine's driver offers for sharing (lavapipe: printed, not required).
    #[test]
    fn sharing_support_is_probed_without_failing() {
        let Ok(inst) = Instance::new(false) else { return };
        let Ok(a) = adapter::choose(&inst, None) else { return };
        let exts: Vec<bool> = EXTENSIONS.iter().map(|n| a.has(n)).collect();
        let timeline = timeline_exportable(&inst.raw, a.raw);
        eprintln!("{}: external fd extensions {exts:?}, exportable timeline {timeline}", a.info.device_name);
    }
}
