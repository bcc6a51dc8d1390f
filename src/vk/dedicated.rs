//! Device buffers with a dedicated allocation made without gpu-allocator: vkCreateBuffer,
//! vkAllocateMemory (VkMemoryDedicatedAllocateInfo) and vkBindBufferMemory on nothing but the
//! device. The allocator needs `&mut` (the runtime lock), these calls do not, so another thread
//! may make them while the recording thread works: the buffers allocated ahead of leases
//! (`runtime::ahead`). The result matches what `memory::create_buffer` gives a device buffer of
//! that size: the memory type gpu-allocator picks for `GpuOnly`, mapped where it is
//! host-coherent, counted in `Device::dedicated_live`.

use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use ash::vk;

use crate::error::{HeliosError, HeliosResult};
use crate::vk::device::Device;
use crate::vk::memory::{self, GpuBuffer, Placement};
use crate::vk::sync::vk_error;

/// The first device-local memory type `bits` allows: gpu-allocator's choice for `GpuOnly`.
pub fn device_local_type(device: &Device, bits: u32) -> Option<(u32, vk::MemoryPropertyFlags, u64)> {
    // SAFETY: plain query on the device's physical device.
    let props = unsafe { device.instance.raw.get_physical_device_memory_properties(device.adapter.raw) };
    (0..props.memory_type_count).find_map(|i| {
        let t = props.memory_types[i as usize];
        let ok = bits & (1 << i) != 0 && t.property_flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL);
        ok.then(|| (i, t.property_flags, props.memory_heaps[t.heap_index as usize].size))
    })
}

/// The size of the heap device buffers come from (0 when no memory type is device-local).
pub fn device_heap_bytes(device: &Device) -> u64 {
    device_local_type(device, u32::MAX).map_or(0, |(_, _, heap)| heap)
}

/// A device buffer of `size` bytes with a dedicated allocation; an error (never a panic) when
/// the driver is out of memory or the dedicated-allocation cap (`memory::wants_dedicated`) is
/// reached, so the caller can leave the allocation to the recording thread.
pub fn create_device_buffer(device: &Device, size: u64) -> HeliosResult<GpuBuffer> {
    // Reserve the slot first: the recording thread checks the same counter concurrently.
    if device.dedicated_live.fetch_add(1, Ordering::Relaxed) >= memory::dedicated_cap(device) || !memory::wants_dedicated_size(device, size, Placement::Device) {
        device.dedicated_live.fetch_sub(1, Ordering::Relaxed);
        return Err(HeliosError::out_of_memory(format!("no dedicated allocation for {size} bytes (cap or threshold)")));
    }
    bind_new(device, size).inspect_err(|_| {
        device.dedicated_live.fetch_sub(1, Ordering::Relaxed);
    })
}

fn bind_new(device: &Device, size: u64) -> HeliosResult<GpuBuffer> {
    let raw = memory::create_raw_buffer(device, size)?;
    let destroy = |e: HeliosError| {
        // SAFETY: the buffer is unused and has no memory bound.
        unsafe { device.raw.destroy_buffer(raw, None) };
        e
    };
    // SAFETY: `raw` was just created on this device.
    let req = unsafe { device.raw.get_buffer_memory_requirements(raw) };
    let Some((type_index, flags, heap)) = device_local_type(device, req.memory_type_bits) else {
        return Err(destroy(HeliosError::out_of_memory("no device-local memory type".to_string())));
    };
    if req.size > heap {
        return Err(destroy(HeliosError::out_of_memory(format!("{size} bytes exceed the device heap"))));
    }
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(raw);
    let mut address = vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
    let mut info = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(type_index).push_next(&mut dedicated);
    // As gpu-allocator does: a buffer with SHADER_DEVICE_ADDRESS usage needs memory that allows it.
    if device.enabled.bda {
        info = info.push_next(&mut address);
    }
    // SAFETY: valid allocate info for this device (the chained structs outlive the call); the
    // memory is freed with the buffer (`memory::destroy_buffer`) or below on failure.
    let mem = unsafe { device.raw.allocate_memory(&info, None) }.map_err(|e| destroy(vk_error("vkAllocateMemory", e)))?;
    let free = |e: HeliosError| {
        // SAFETY: nothing uses the memory; the buffer bound to it (if any) is destroyed next.
        unsafe { device.raw.free_memory(mem, None) };
        destroy(e)
    };
    // SAFETY: the dedicated allocation was made for this buffer and is bound once.
    if let Err(e) = unsafe { device.raw.bind_buffer_memory(raw, mem, 0) } {
        return Err(free(vk_error("vkBindBufferMemory", e)));
    }
    // Mapped for good where coherent, as gpu-allocator maps its host-visible memory: the
    // runtime then reads and writes such a buffer directly (UMA devices, lavapipe).
    let mut mapped = None;
    if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT) {
        // SAFETY: host-visible memory, mapped once whole; vkFreeMemory unmaps it.
        let ptr = unsafe { device.raw.map_memory(mem, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) };
        match ptr {
            Ok(p) => mapped = NonNull::new(p.cast::<u8>()),
            Err(e) => return Err(free(vk_error("vkMapMemory", e))),
        }
    }
    Ok(GpuBuffer::with_counted_dedicated(raw, size, mem, mapped))
}
