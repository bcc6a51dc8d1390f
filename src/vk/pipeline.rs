//! Compute pipelines from SPIR-V words: set 0 holds one storage buffer per binding
//! (a push-descriptor set when VK_KHR_push_descriptor is enabled), push constants at offset 0.

use std::ffi::CString;

use ash::vk;

use crate::caps::PipelineLayoutDesc;
use crate::error::{HeliosError, HeliosResult};
use crate::vk::device::Device;
use crate::vk::sync::vk_error;

#[derive(Debug, Clone, Copy)]
pub struct Pipeline {
    pub raw: vk::Pipeline,
    pub layout: vk::PipelineLayout,
    pub set_layout: vk::DescriptorSetLayout,
}

fn set_layout(device: &Device, bindings: usize, push: bool) -> HeliosResult<vk::DescriptorSetLayout> {
    let list: Vec<_> = (0..bindings as u32)
        .map(|i| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(i)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        })
        .collect();
    let flags = if push { vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR } else { Default::default() };
    let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&list).flags(flags);
    // SAFETY: valid create info on a live device.
    unsafe { device.raw.create_descriptor_set_layout(&info, None) }.map_err(|e| vk_error("vkCreateDescriptorSetLayout", e))
}

fn shader_module(device: &Device, spirv: &[u32]) -> HeliosResult<vk::ShaderModule> {
    if spirv.len() < 5 || spirv[0] != 0x0723_0203 {
        return Err(HeliosError::invalid_argument(format!(
            "spirv is not a SPIR-V module ({} words, magic {:#x})",
            spirv.len(),
            spirv.first().copied().unwrap_or(0)
        )));
    }
    let info = vk::ShaderModuleCreateInfo::default().code(spirv);
    // SAFETY: the words start with the SPIR-V magic; the driver validates the rest.
    unsafe { device.raw.create_shader_module(&info, None) }.map_err(|e| vk_error("vkCreateShaderModule", e))
}

/// Builds the pipeline; `push_descriptors` selects the push-descriptor set layout.
pub fn create(
    device: &Device,
    cache: vk::PipelineCache,
    spirv: &[u32],
    desc: &PipelineLayoutDesc,
    push_descriptors: bool,
) -> HeliosResult<Pipeline> {
    let entry = CString::new(desc.entry_point.as_str())
        .map_err(|_| HeliosError::invalid_argument(format!("entryPoint {:?} contains a NUL byte", desc.entry_point)))?;
    let module = shader_module(device, spirv)?;
    let result = build(device, cache, module, &entry, desc, push_descriptors);
    // SAFETY: the module is no longer needed once the pipeline exists (or failed).
    unsafe { device.raw.destroy_shader_module(module, None) };
    result
}

fn build(
    device: &Device,
    cache: vk::PipelineCache,
    module: vk::ShaderModule,
    entry: &CString,
    desc: &PipelineLayoutDesc,
    push_descriptors: bool,
) -> HeliosResult<Pipeline> {
    let set_layout = set_layout(device, desc.bindings.len(), push_descriptors)?;
    let ranges = [vk::PushConstantRange::default()
        .stage_flags(vk::ShaderStageFlags::COMPUTE)
        .offset(0)
        .size(desc.push_constant_bytes)];
    let set_layouts = [set_layout];
    let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
    if desc.push_constant_bytes > 0 {
        layout_info = layout_info.push_constant_ranges(&ranges);
    }
    // SAFETY: valid create info; destroyed with the pipeline.
    let layout = match unsafe { device.raw.create_pipeline_layout(&layout_info, None) } {
        Ok(l) => l,
        Err(e) => {
            // SAFETY: unused set layout created above.
            unsafe { device.raw.destroy_descriptor_set_layout(set_layout, None) };
            return Err(vk_error("vkCreatePipelineLayout", e));
        }
    };
    let entries: Vec<_> = desc
        .specialization
        .iter()
        .enumerate()
        .map(|(i, &(id, _))| vk::SpecializationMapEntry { constant_id: id, offset: (i * 4) as u32, size: 4 })
        .collect();
    let data: Vec<u8> = desc.specialization.iter().flat_map(|&(_, v)| v.to_le_bytes()).collect();
    let spec = vk::SpecializationInfo::default().map_entries(&entries).data(&data);
    let mut subgroup = vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default()
        .required_subgroup_size(desc.required_subgroup_size.unwrap_or(0));
    let mut stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(entry);
    if !entries.is_empty() {
        stage = stage.specialization_info(&spec);
    }
    if desc.required_subgroup_size.is_some() && device.enabled.subgroup_size_control {
        stage = stage.push_next(&mut subgroup);
    }
    let mut info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout);
    if device.exec_props.is_some() {
        info = info.flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR);
    }
    // SAFETY: all referenced objects are alive; the cache is externally synchronised by the runtime lock.
    let created = unsafe { device.raw.create_compute_pipelines(cache, &[info], None) };
    match created {
        Ok(p) => Ok(Pipeline { raw: p[0], layout, set_layout }),
        Err((_, e)) => {
            // SAFETY: unused layouts created above.
            unsafe {
                device.raw.destroy_pipeline_layout(layout, None);
                device.raw.destroy_descriptor_set_layout(set_layout, None);
            }
            Err(HeliosError::invalid_kernel(format!("vkCreateComputePipelines failed for {:?}: {e}", desc.label)))
        }
    }
}

/// Driver statistics of every executable of `p` as (name, value), e.g. register counts;
/// `None` unless statistics capture was enabled when the pipeline was created.
pub fn statistics(device: &Device, p: &Pipeline) -> HeliosResult<Option<Vec<(String, f64)>>> {
    let Some(ext) = device.exec_props.as_ref() else { return Ok(None) };
    let info = vk::PipelineInfoKHR::default().pipeline(p.raw);
    // SAFETY: the pipeline is alive and was created with CAPTURE_STATISTICS (exec_props set).
    let executables = unsafe { ext.get_pipeline_executable_properties(&info) }.map_err(|e| vk_error("vkGetPipelineExecutablePropertiesKHR", e))?;
    let mut out = Vec::new();
    for index in 0..executables.len() as u32 {
        let exec = vk::PipelineExecutableInfoKHR::default().pipeline(p.raw).executable_index(index);
        // SAFETY: `index` is below the executable count the driver reported.
        let stats = unsafe { ext.get_pipeline_executable_statistics(&exec) }.map_err(|e| vk_error("vkGetPipelineExecutableStatisticsKHR", e))?;
        for s in &stats {
            let name = s.name_as_c_str().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            // SAFETY: `format` says which union member the driver wrote.
            let value = unsafe {
                match s.format {
                    vk::PipelineExecutableStatisticFormatKHR::BOOL32 => s.value.b32 as f64,
                    vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64 as f64,
                    vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64 as f64,
                    _ => s.value.f64,
                }
            };
            out.push((if executables.len() > 1 { format!("{index}:{name}") } else { name }, value));
        }
    }
    Ok(Some(out))
}

/// Destroys a pipeline; the caller guarantees no pending GPU use.
pub fn destroy(device: &Device, p: Pipeline) {
    // SAFETY: no pending use (caller contract); each object destroyed once.
    unsafe {
        device.raw.destroy_pipeline(p.raw, None);
        device.raw.destroy_pipeline_layout(p.layout, None);
        device.raw.destroy_descriptor_set_layout(p.set_layout, None);
    }
}

/// Creates a VkPipelineCache seeded with `initial` (already validated by our header and its
/// Vulkan header checked against the device); the flag says whether `initial` was taken.
pub fn create_cache(device: &Device, initial: &[u8]) -> (vk::PipelineCache, bool) {
    let info = vk::PipelineCacheCreateInfo::default().initial_data(initial);
    // SAFETY: the driver validates its own header inside `initial` and ignores mismatches.
    match unsafe { device.raw.create_pipeline_cache(&info, None) } {
        Ok(cache) => (cache, !initial.is_empty()),
        Err(_) => {
            let empty = vk::PipelineCacheCreateInfo::default();
            // SAFETY: empty cache; on failure we run without a cache.
            let cache = unsafe { device.raw.create_pipeline_cache(&empty, None) }.unwrap_or(vk::PipelineCache::null());
            (cache, false)
        }
    }
}

pub fn cache_data(device: &Device, cache: vk::PipelineCache) -> Vec<u8> {
    if cache == vk::PipelineCache::null() {
        return Vec::new();
    }
    // SAFETY: the cache belongs to this device.
    unsafe { device.raw.get_pipeline_cache_data(cache) }.unwrap_or_default()
}

pub fn destroy_cache(device: &Device, cache: vk::PipelineCache) {
    if cache != vk::PipelineCache::null() {
        // SAFETY: no pipeline creation is in progress (runtime lock held).
        unsafe { device.raw.destroy_pipeline_cache(cache, None) };
    }
}
