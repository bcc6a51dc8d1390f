//! The logical device: every supported feature that compute kernels can use is enabled, buffer
//! robustness as `HELIOS_ROBUSTNESS` asks (robustBufferAccess by default) where the device has
//! it, one compute queue, one transfer queue (the DMA family when there is one), and one
//! timeline semaphore per queue.

use std::ffi::CStr;

use ash::{ext as ash_ext, khr, vk};

use crate::caps::DeviceCaps;
use crate::config::Robustness;
use crate::error::{HeliosError, HeliosResult};
use crate::vk::adapter::Adapter;
use crate::vk::ext;
use crate::vk::external::{self, Sharing};
use crate::vk::instance::Instance;

/// What was enabled at device creation (a subset of what the adapter supports).
#[derive(Debug, Clone, Copy, Default)]
pub struct Enabled {
    pub push_descriptor: bool,
    pub bda: bool,
    pub coop_mat: bool,
    pub coop_mat2: bool,
    pub bf16: bool,
    pub atomic_float: bool,
    pub pipeline_executable_info: bool,
    pub subgroup_size_control: bool,
    /// The robustness actually enabled (at most what was asked for).
    pub robustness: Robustness,
}

pub struct Device {
    pub raw: ash::Device,
    pub adapter: Adapter,
    pub caps: DeviceCaps,
    pub enabled: Enabled,
    pub push_desc: Option<khr::push_descriptor::Device>,
    pub compute_queue: vk::Queue,
    pub transfer_queue: vk::Queue,
    pub transfer_family: u32,
    pub compute_sem: vk::Semaphore,
    pub transfer_sem: vk::Semaphore,
    /// How long host waits poll before blocking (HELIOS_SPIN_US).
    pub spin_ns: u64,
    /// Device buffers of at least this size get memory of their own (HELIOS_DEDICATED_MIB; 0: never).
    pub dedicated_min_bytes: u64,
    /// Live buffers with a dedicated allocation (bounded by `maxMemoryAllocationCount`).
    pub dedicated_live: std::sync::atomic::AtomicU32,
    /// Set when pipelines capture driver statistics (HELIOS_PIPELINE_STATS and the extension).
    pub exec_props: Option<khr::pipeline_executable_properties::Device>,
    /// Memory and semaphore export (VK_KHR_external_memory_fd / _semaphore_fd), when the device
    /// was created shareable and has both: the distributed layer shares buffers with CUDA.
    pub sharing: Option<Sharing>,
    /// A timeline signalled from outside (CUDA, after a collective): compute submissions that use
    /// a buffer a collective writes wait on it. Null unless shareable; `compute_sem` is then
    /// exportable too (CUDA waits on it for a buffer's inputs).
    pub external_sem: vk::Semaphore,
    /// Dropped after the device (field order), see Drop.
    pub instance: Instance,
}

/// Every feature struct we query and then enable, kept together so the chain can be built twice.
#[derive(Default)]
struct Features {
    v11: vk::PhysicalDeviceVulkan11Features<'static>,
    v12: vk::PhysicalDeviceVulkan12Features<'static>,
    v13: vk::PhysicalDeviceVulkan13Features<'static>,
    coop: vk::PhysicalDeviceCooperativeMatrixFeaturesKHR<'static>,
    coop2: ext::CooperativeMatrix2FeaturesNV,
    bf16: ext::ShaderBfloat16FeaturesKHR,
    atomic: vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT<'static>,
    exec: vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR<'static>,
    robust2: vk::PhysicalDeviceRobustness2FeaturesEXT<'static>,
}

fn optional_extensions(adapter: &Adapter) -> Vec<&'static CStr> {
    let wanted: [&'static CStr; 7] = [
        ash_ext::robustness2::NAME,
        khr::push_descriptor::NAME,
        khr::cooperative_matrix::NAME,
        ext::NV_COOPMAT2,
        ext::KHR_BFLOAT16,
        ash_ext::shader_atomic_float::NAME,
        khr::pipeline_executable_properties::NAME,
    ];
    wanted.into_iter().filter(|n| adapter.has(n)).collect()
}

/// Links the feature structs for the enabled extensions into `base` (query or create).
macro_rules! chain_features {
    ($base:expr, $f:expr, $exts:expr) => {{
        let mut base = $base.push_next(&mut $f.v11).push_next(&mut $f.v12).push_next(&mut $f.v13);
        if $exts.contains(&khr::cooperative_matrix::NAME) {
            base = base.push_next(&mut $f.coop);
        }
        if $exts.contains(&ext::NV_COOPMAT2) {
            base = base.push_next(&mut $f.coop2);
        }
        if $exts.contains(&ext::KHR_BFLOAT16) {
            base = base.push_next(&mut $f.bf16);
        }
        if $exts.contains(&ash_ext::shader_atomic_float::NAME) {
            base = base.push_next(&mut $f.atomic);
        }
        if $exts.contains(&khr::pipeline_executable_properties::NAME) {
            base = base.push_next(&mut $f.exec);
        }
        if $exts.contains(&ash_ext::robustness2::NAME) {
            base = base.push_next(&mut $f.robust2);
        }
        base
    }};
}

impl Features {
    /// Clears the `p_next` links left by a previous chain so the structs can be chained again.
    fn unlink(&mut self) {
        self.v11.p_next = std::ptr::null_mut();
        self.v12.p_next = std::ptr::null_mut();
        self.v13.p_next = std::ptr::null_mut();
        self.coop.p_next = std::ptr::null_mut();
        self.coop2.p_next = std::ptr::null_mut();
        self.bf16.p_next = std::ptr::null_mut();
        self.atomic.p_next = std::ptr::null_mut();
        self.exec.p_next = std::ptr::null_mut();
        self.robust2.p_next = std::ptr::null_mut();
    }
}

/// Features that cost speed or need extra setup and nothing uses; never enabled.
fn sanitize(f: &mut Features) {
    f.v11.protected_memory = vk::FALSE;
    f.v12.buffer_device_address_capture_replay = vk::FALSE;
    f.v12.buffer_device_address_multi_device = vk::FALSE;
    f.v13.robust_image_access = vk::FALSE;
    f.v13.inline_uniform_block = vk::FALSE;
    f.v13.descriptor_binding_inline_uniform_block_update_after_bind = vk::FALSE;
    f.robust2.robust_image_access2 = vk::FALSE;
    f.robust2.null_descriptor = vk::FALSE;
}

/// Keeps the buffer-robustness features up to `wanted` (of those supported) and says which
/// level that is. Cooperative-matrix loads and stores follow robustBufferAccess where the
/// device can (cooperativeMatrixRobustBufferAccess); otherwise they stay unchecked, which
/// docs/architecture.md records.
fn robustness(core: &mut vk::PhysicalDeviceFeatures, f: &mut Features, wanted: Robustness) -> Robustness {
    let core_on = wanted >= Robustness::Buffer && core.robust_buffer_access != 0;
    let two_on = core_on && wanted >= Robustness::Buffer2 && f.robust2.robust_buffer_access2 != 0;
    core.robust_buffer_access = vk::Bool32::from(core_on);
    f.robust2.robust_buffer_access2 = vk::Bool32::from(two_on);
    if !core_on {
        f.coop.cooperative_matrix_robust_buffer_access = vk::FALSE;
    }
    match (core_on, two_on) {
        (_, true) => Robustness::Buffer2,
        (true, false) => Robustness::Buffer,
        _ => Robustness::Off,
    }
}

fn fill_caps(adapter: &Adapter, core: &vk::PhysicalDeviceFeatures, f: &Features) -> DeviceCaps {
    let l = &adapter.limits;
    DeviceCaps {
        f16: f.v12.shader_float16 != 0,
        bf16: f.bf16.shader_bfloat16_type != 0,
        int16: core.shader_int16 != 0,
        int64: core.shader_int64 != 0,
        storage_16bit: f.v11.storage_buffer16_bit_access != 0,
        coop_mat: f.coop.cooperative_matrix != 0,
        coop_mat2: f.coop2.workgroup_scope != 0 || f.coop2.flexible_dimensions != 0,
        coop_mat2_conversions: f.coop2.conversions != 0,
        coop_mat_shapes: if f.coop.cooperative_matrix != 0 { adapter.coop_shapes.clone() } else { Vec::new() },
        subgroup_size: adapter.subgroup_size,
        max_workgroup_invocations: l.max_compute_work_group_invocations,
        max_workgroup_size: l.max_compute_work_group_size,
        max_shared_memory_bytes: l.max_compute_shared_memory_size,
        max_push_constant_bytes: l.max_push_constants_size,
        atomic_float_add: f.atomic.shader_buffer_float32_atomic_add != 0,
        subgroup_arithmetic: adapter.subgroup_ops.contains(vk::SubgroupFeatureFlags::ARITHMETIC),
        subgroup_shuffle: adapter.subgroup_ops.contains(vk::SubgroupFeatureFlags::SHUFFLE),
    }
}

impl Device {
    pub fn new(
        instance: Instance,
        adapter: Adapter,
        no_push_descriptors: bool,
        no_coopmat: bool,
        wanted_robustness: Robustness,
        shareable: bool,
    ) -> HeliosResult<Device> {
        let mut exts = optional_extensions(&adapter);
        let [mem_ext, sem_ext] = external::EXTENSIONS;
        let sharing = shareable && adapter.has(mem_ext);
        let timelines = sharing && adapter.has(sem_ext) && external::timeline_exportable(&instance.raw, adapter.raw);
        if sharing {
            exts.push(mem_ext);
        }
        if timelines {
            exts.push(sem_ext);
        }
        if no_push_descriptors {
            exts.retain(|n| *n != khr::push_descriptor::NAME);
        }
        if no_coopmat {
            // their feature structs stay unchained, so the caps report them absent
            exts.retain(|n| ![khr::cooperative_matrix::NAME, ext::NV_COOPMAT2, ext::KHR_BFLOAT16].contains(n));
        }
        let mut f = Features::default();
        let mut query = chain_features!(vk::PhysicalDeviceFeatures2::default(), f, exts);
        // SAFETY: the chain only contains structs for supported extensions; all outlive the call.
        unsafe { instance.raw.get_physical_device_features2(adapter.raw, &mut query) };
        let mut core = query.features;
        f.unlink();
        sanitize(&mut f);
        let robustness = robustness(&mut core, &mut f, wanted_robustness);
        if robustness < Robustness::Buffer2 {
            // robustness2's struct stays chained (its other features are off); drop the
            // extension when nothing of it is used.
            exts.retain(|n| *n != ash_ext::robustness2::NAME);
        }
        if f.v12.timeline_semaphore == 0 || f.v13.synchronization2 == 0 {
            return Err(HeliosError::no_device(format!(
                "{} lacks timeline semaphores or synchronization2 (Vulkan 1.3 core)",
                adapter.info.device_name
            )));
        }
        let caps = fill_caps(&adapter, &core, &f);
        let enabled = Enabled {
            push_descriptor: exts.contains(&khr::push_descriptor::NAME),
            bda: f.v12.buffer_device_address != 0,
            coop_mat: caps.coop_mat,
            coop_mat2: caps.coop_mat2,
            bf16: caps.bf16,
            atomic_float: exts.contains(&ash_ext::shader_atomic_float::NAME),
            pipeline_executable_info: f.exec.pipeline_executable_info != 0,
            subgroup_size_control: f.v13.subgroup_size_control != 0,
            robustness,
        };
        let priorities = [1.0f32];
        let mut queues = vec![vk::DeviceQueueCreateInfo::default()
            .queue_family_index(adapter.compute_family)
            .queue_priorities(&priorities)];
        if let Some(tf) = adapter.transfer_family {
            queues.push(vk::DeviceQueueCreateInfo::default().queue_family_index(tf).queue_priorities(&priorities));
        }
        let ext_ptrs: Vec<_> = exts.iter().map(|n| n.as_ptr()).collect();
        let mut features2 = chain_features!(vk::PhysicalDeviceFeatures2::default().features(core), f, exts);
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&ext_ptrs)
            .push_next(&mut features2);
        // SAFETY: everything in `info` is supported (queried above) and outlives the call.
        let raw = unsafe { instance.raw.create_device(adapter.raw, &info, None) }
            .map_err(|e| HeliosError::no_device(format!("vkCreateDevice on {} failed: {e}", adapter.info.device_name)))?;
        // SAFETY: the queues were requested in `info`.
        let compute_queue = unsafe { raw.get_device_queue(adapter.compute_family, 0) };
        let transfer_family = adapter.transfer_family.unwrap_or(adapter.compute_family);
        // SAFETY: as above (same queue when there is no transfer family).
        let transfer_queue = unsafe { raw.get_device_queue(transfer_family, 0) };
        let push_desc = enabled.push_descriptor.then(|| khr::push_descriptor::Device::new(&instance.raw, &raw));
        let compute_sem = external::create_timeline(&raw, timelines)?;
        let transfer_sem = external::create_timeline(&raw, false)?;
        let external_sem = if sharing { external::create_timeline(&raw, timelines)? } else { vk::Semaphore::null() };
        let sharing = sharing.then(|| Sharing::new(&instance.raw, &raw, timelines));
        Ok(Device {
            raw,
            adapter,
            caps,
            enabled,
            push_desc,
            compute_queue,
            transfer_queue,
            transfer_family,
            compute_sem,
            transfer_sem,
            spin_ns: 0,
            dedicated_min_bytes: 0,
            dedicated_live: std::sync::atomic::AtomicU32::new(0),
            exec_props: None,
            sharing,
            external_sem,
            instance,
        })
    }

    /// Turns on statistics capture for pipelines created from now on, if the driver can.
    pub fn enable_pipeline_statistics(&mut self) {
        if self.enabled.pipeline_executable_info {
            self.exec_props = Some(khr::pipeline_executable_properties::Device::new(&self.instance.raw, &self.raw));
        }
    }

    pub fn has_async_transfer(&self) -> bool {
        self.adapter.transfer_family.is_some()
    }

    /// Both queue families, for CONCURRENT buffers (one entry when they coincide).
    pub fn families(&self) -> Vec<u32> {
        let mut f = vec![self.adapter.compute_family];
        if self.transfer_family != self.adapter.compute_family {
            f.push(self.transfer_family);
        }
        f
    }

    pub fn wait_idle(&self) {
        // SAFETY: no other thread submits while the runtime lock is held by the caller.
        let _ = unsafe { self.raw.device_wait_idle() };
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: nothing is in flight after wait_idle; the semaphores belong to this device.
        unsafe {
            let _ = self.raw.device_wait_idle();
            self.raw.destroy_semaphore(self.compute_sem, None);
            self.raw.destroy_semaphore(self.transfer_sem, None);
            if self.external_sem != vk::Semaphore::null() {
                self.raw.destroy_semaphore(self.external_sem, None);
            }
            self.raw.destroy_device(None);
        }
    }
}
