//! Physical-device choice and the capabilities that do not need a logical device:
//! properties, limits, extensions, queue families and cooperative-matrix shapes.

use std::collections::HashSet;
use std::ffi::{CStr, CString};

use ash::{khr, vk};

use crate::caps::{CoopComponent, CoopMatShape, CoopScope};
use crate::error::{HeliosError, HeliosResult};
use crate::vk::ext;
use crate::vk::instance::Instance;

/// Plain facts about the chosen device, reported by `getDeviceInfo()`.
#[derive(Debug, Clone, Default)]
pub struct AdapterInfo {
    pub device_name: String,
    pub vendor_id: u32,
    pub device_id: u32,
    pub device_type: &'static str,
    pub driver_name: String,
    pub driver_info: String,
    pub driver_version: String,
    pub api_version: String,
    pub device_uuid: String,
    pub timestamp_period_ns: f64,
    /// VkPhysicalDeviceLimits::maxStorageBufferRange as reported.
    pub max_storage_buffer_range: u64,
    /// VkPhysicalDeviceMaintenance4Properties::maxBufferSize (core in 1.3).
    pub max_buffer_size: u64,
    /// The largest storage buffer a dispatch may bind: see `max_binding_bytes`.
    pub max_binding_bytes: u64,
    /// VkPhysicalDeviceLimits::maxComputeWorkGroupCount (x, y, z).
    pub max_workgroup_count: [u32; 3],
}

/// Bindings past 2^31 - 1 bytes fail silently on NVIDIA (H100, driver advertising 4 GiB - 1:
/// every access of such a binding reads 0 and writes nothing — wgpu caps at i32::MAX for the
/// same reason), so the usable limit is min(maxStorageBufferRange, 2^31 - 1), lowered further
/// by HELIOS_MAX_BINDING_BYTES (tests use it to reach the limit with small buffers).
pub fn max_binding_bytes(max_storage_buffer_range: u64, override_bytes: Option<u64>) -> u64 {
    let hw = max_storage_buffer_range.min(i32::MAX as u64);
    override_bytes.map_or(hw, |o| o.clamp(4, hw))
}

pub struct Adapter {
    pub raw: vk::PhysicalDevice,
    pub info: AdapterInfo,
    pub limits: vk::PhysicalDeviceLimits,
    pub extensions: HashSet<CString>,
    pub subgroup_size: u32,
    pub subgroup_ops: vk::SubgroupFeatureFlags,
    pub min_subgroup_size: u32,
    pub max_subgroup_size: u32,
    pub compute_family: u32,
    /// A transfer-only family (DMA engine) when the device has one.
    pub transfer_family: Option<u32>,
    pub timestamp_valid_bits: u32,
    pub coop_shapes: Vec<CoopMatShape>,
    pub driver_version_raw: u32,
    pub uuid: [u8; 16],
    /// VkPhysicalDeviceProperties::pipelineCacheUUID: changes with the driver build.
    pub pipeline_cache_uuid: [u8; 16],
}

impl Adapter {
    pub fn has(&self, name: &CStr) -> bool {
        self.extensions.contains(name)
    }
}

fn type_rank(t: vk::PhysicalDeviceType) -> u32 {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    }
}

fn type_name(t: vk::PhysicalDeviceType) -> &'static str {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
        vk::PhysicalDeviceType::CPU => "cpu",
        _ => "other",
    }
}

fn version_string(v: u32) -> String {
    format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
}

/// The device UUID as 32 hex digits (CUDA reports the same bytes for the same GPU).
fn uuid_hex(instance: &Instance, pd: vk::PhysicalDevice) -> String {
    let mut p11 = vk::PhysicalDeviceVulkan11Properties::default();
    let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut p11);
    // SAFETY: `pd` belongs to this instance; the chain outlives the call.
    unsafe { instance.raw.get_physical_device_properties2(pd, &mut props2) };
    p11.device_uuid.iter().map(|b| format!("{b:02x}")).collect()
}

/// Picks the device: `selector` is an index, `uuid:<32 hex digits>` (the distributed layer
/// names the GPU CUDA uses that way) or a case-insensitive name substring; otherwise
/// discrete > integrated > virtual > cpu among Vulkan 1.3 devices.
pub fn choose(instance: &Instance, selector: Option<&str>) -> HeliosResult<Adapter> {
    // SAFETY: plain enumeration on a live instance.
    let devices = unsafe { instance.raw.enumerate_physical_devices() }
        .map_err(|e| HeliosError::no_device(format!("vkEnumeratePhysicalDevices failed: {e}")))?;
    let mut seen = Vec::new();
    let mut candidates = Vec::new();
    for (index, &pd) in devices.iter().enumerate() {
        // SAFETY: `pd` comes from this instance.
        let props = unsafe { instance.raw.get_physical_device_properties(pd) };
        let name = props.device_name_as_c_str().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        seen.push(format!("#{index} {name} (Vulkan {})", version_string(props.api_version)));
        if props.api_version >= vk::API_VERSION_1_3 {
            candidates.push((index, pd, name, props.device_type));
        }
    }
    let picked = match selector {
        Some(sel) => {
            let by_index = sel.parse::<usize>().ok();
            let lower = sel.to_lowercase();
            let uuid = lower.strip_prefix("uuid:").map(str::to_string);
            candidates.iter().find(|c| match (&uuid, by_index) {
                (Some(u), _) => uuid_hex(instance, c.1) == *u,
                (None, Some(i)) => c.0 == i,
                (None, None) => c.2.to_lowercase().contains(&lower),
            })
        }
        None => candidates.iter().min_by_key(|c| (type_rank(c.3), c.0)),
    };
    let Some(&(_, pd, _, _)) = picked else {
        let wanted = selector.map(|s| format!(" matching \"{s}\"")).unwrap_or_default();
        return Err(HeliosError::no_device(format!(
            "no Vulkan 1.3 device{wanted}; found: [{}]",
            if seen.is_empty() { "no devices (is a Vulkan ICD installed?)".to_string() } else { seen.join(", ") }
        )));
    };
    probe(instance, pd)
}

fn probe(instance: &Instance, pd: vk::PhysicalDevice) -> HeliosResult<Adapter> {
    // SAFETY: `pd` is a valid physical device of this instance.
    let ext_props = unsafe { instance.raw.enumerate_device_extension_properties(pd) }
        .map_err(|e| HeliosError::no_device(format!("vkEnumerateDeviceExtensionProperties failed: {e}")))?;
    let extensions: HashSet<CString> =
        ext_props.iter().filter_map(|e| e.extension_name_as_c_str().ok().map(CString::from)).collect();
    let mut p11 = vk::PhysicalDeviceVulkan11Properties::default();
    let mut p12 = vk::PhysicalDeviceVulkan12Properties::default();
    let mut p13 = vk::PhysicalDeviceVulkan13Properties::default();
    let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut p11).push_next(&mut p12).push_next(&mut p13);
    // SAFETY: the chain holds structs the 1.3 device knows; all outlive the call.
    unsafe { instance.raw.get_physical_device_properties2(pd, &mut props2) };
    let props = props2.properties;
    // SAFETY: as above.
    let families = unsafe { instance.raw.get_physical_device_queue_family_properties(pd) };
    let compute_family = pick_compute_family(&families)
        .ok_or_else(|| HeliosError::no_device("the chosen device has no compute queue".to_string()))?;
    let transfer_family = families.iter().position(|f| {
        f.queue_flags.contains(vk::QueueFlags::TRANSFER)
            && !f.queue_flags.intersects(vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS)
            && f.queue_count > 0
    });
    let info = AdapterInfo {
        device_name: props.device_name_as_c_str().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        device_type: type_name(props.device_type),
        driver_name: p12.driver_name_as_c_str().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        driver_info: p12.driver_info_as_c_str().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        driver_version: driver_version_string(props.vendor_id, props.driver_version),
        api_version: version_string(props.api_version),
        device_uuid: p11.device_uuid.iter().map(|b| format!("{b:02x}")).collect(),
        timestamp_period_ns: props.limits.timestamp_period as f64,
        max_storage_buffer_range: u64::from(props.limits.max_storage_buffer_range),
        max_buffer_size: p13.max_buffer_size,
        max_binding_bytes: max_binding_bytes(
            u64::from(props.limits.max_storage_buffer_range),
            crate::config::max_binding_override(),
        ),
        max_workgroup_count: props.limits.max_compute_work_group_count,
    };
    let mut adapter = Adapter {
        raw: pd,
        info,
        limits: props.limits,
        extensions,
        subgroup_size: p11.subgroup_size,
        subgroup_ops: p11.subgroup_supported_operations,
        min_subgroup_size: p13.min_subgroup_size,
        max_subgroup_size: p13.max_subgroup_size,
        compute_family: compute_family as u32,
        transfer_family: transfer_family.map(|f| f as u32),
        timestamp_valid_bits: families[compute_family].timestamp_valid_bits,
        coop_shapes: Vec::new(),
        driver_version_raw: props.driver_version,
        uuid: p11.device_uuid,
        pipeline_cache_uuid: props.pipeline_cache_uuid,
    };
    adapter.coop_shapes = coop_shapes(instance, &adapter);
    Ok(adapter)
}

/// Prefers a compute family without graphics (the async-compute engine on discrete GPUs is
/// not faster, so any compute family works; the first with COMPUTE keeps it simple).
fn pick_compute_family(families: &[vk::QueueFamilyProperties]) -> Option<usize> {
    families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0)
}

/// NVIDIA packs driver versions as 10.8.8.6 bits; everyone else uses the Vulkan encoding.
fn driver_version_string(vendor: u32, v: u32) -> String {
    if vendor == 0x10de {
        format!("{}.{}.{}.{}", v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff, v & 0x3f)
    } else {
        version_string(v)
    }
}

fn component(t: vk::ComponentTypeKHR) -> CoopComponent {
    match t {
        vk::ComponentTypeKHR::FLOAT16 => CoopComponent::F16,
        vk::ComponentTypeKHR::FLOAT32 => CoopComponent::F32,
        vk::ComponentTypeKHR::FLOAT64 => CoopComponent::F64,
        vk::ComponentTypeKHR::SINT8 => CoopComponent::I8,
        vk::ComponentTypeKHR::UINT8 => CoopComponent::U8,
        vk::ComponentTypeKHR::SINT32 => CoopComponent::I32,
        vk::ComponentTypeKHR::UINT32 => CoopComponent::U32,
        t if t.as_raw() == ext::COMPONENT_TYPE_BFLOAT16 => CoopComponent::Bf16,
        _ => CoopComponent::Other,
    }
}

fn coop_shapes(instance: &Instance, adapter: &Adapter) -> Vec<CoopMatShape> {
    if !adapter.has(khr::cooperative_matrix::NAME) {
        return Vec::new();
    }
    let loader = khr::cooperative_matrix::Instance::new(&instance.entry, &instance.raw);
    // SAFETY: the extension is supported by this physical device.
    let props = unsafe { loader.get_physical_device_cooperative_matrix_properties(adapter.raw) }.unwrap_or_default();
    props
        .iter()
        .map(|p| CoopMatShape {
            m: p.m_size,
            n: p.n_size,
            k: p.k_size,
            a: component(p.a_type),
            b: component(p.b_type),
            c: component(p.c_type),
            result: component(p.result_type),
            saturating: p.saturating_accumulation != 0,
            scope: if p.scope == vk::ScopeKHR::WORKGROUP { CoopScope::Workgroup } else { CoopScope::Subgroup },
        })
        .collect()
}

#[cfg(test)]
mod binding_limit_tests {
    use super::max_binding_bytes;

    #[test]
    fn binding_limit_caps_at_i32_max_and_honours_the_override() {
        // NVIDIA reports 4 GiB - 1 but drops bindings past 2^31 - 1 bytes.
        assert_eq!(max_binding_bytes(u64::from(u32::MAX), None), i32::MAX as u64);
        assert_eq!(max_binding_bytes(1 << 27, None), 1 << 27); // lavapipe: 128 MiB
        assert_eq!(max_binding_bytes(1 << 27, Some(4096)), 4096);
        assert_eq!(max_binding_bytes(1 << 27, Some(1 << 40)), 1 << 27); // only lowers
        assert_eq!(max_binding_bytes(1 << 27, Some(0)), 4);
    }
}
