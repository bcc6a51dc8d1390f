//! Pipeline objects: shared (`Arc`) between the handle table, in-flight submissions and
//! captures, so a destroyed pipeline lives exactly until its last GPU use completes.

use std::sync::Arc;

use crate::caps::{Access, PipelineLayoutDesc};
use crate::error::{HeliosError, HeliosResult};
use crate::vk::command::MAX_BINDINGS;
use crate::vk::device::Device;
use crate::vk::pipeline::{self, Pipeline};

pub struct PipelineObj {
    pub vk: Pipeline,
    pub bindings: Vec<Access>,
    pub push_bytes: u32,
    pub label: Arc<str>,
    device: Arc<Device>,
}

impl Drop for PipelineObj {
    fn drop(&mut self) {
        pipeline::destroy(&self.device, self.vk);
    }
}

/// Checks a layout against device limits before any Vulkan call.
pub fn validate_layout(device: &Device, desc: &PipelineLayoutDesc) -> HeliosResult<()> {
    if desc.bindings.len() > MAX_BINDINGS {
        return Err(HeliosError::out_of_range(format!(
            "layout has {} bindings; at most {MAX_BINDINGS} are supported",
            desc.bindings.len()
        )));
    }
    let max_push = device.caps.max_push_constant_bytes;
    if !desc.push_constant_bytes.is_multiple_of(4) || desc.push_constant_bytes > max_push {
        return Err(HeliosError::out_of_range(format!(
            "pushConstantBytes {} must be a multiple of 4 and at most {max_push}",
            desc.push_constant_bytes
        )));
    }
    if let Some(size) = desc.required_subgroup_size {
        let a = &device.adapter;
        if !device.enabled.subgroup_size_control || !size.is_power_of_two() || size < a.min_subgroup_size || size > a.max_subgroup_size {
            return Err(HeliosError::out_of_range(format!(
                "requiredSubgroupSize {size} is not supported (device range {}..={})",
                a.min_subgroup_size, a.max_subgroup_size
            )));
        }
    }
    Ok(())
}

/// The device, pipeline cache and descriptor mode a pipeline is built with: cloned out of the
/// runtime so that several threads can build pipelines without holding the runtime lock
/// (vkCreateComputePipelines and the pipeline cache are internally synchronized).
pub struct Builder {
    pub device: Arc<Device>,
    pub cache: crate::vk::raw::PipelineCache,
    pub push_descriptors: bool,
}

impl Builder {
    pub fn build(&self, spirv: &[u32], desc: &PipelineLayoutDesc) -> HeliosResult<PipelineObj> {
        build(&self.device, self.cache, spirv, desc, self.push_descriptors)
    }
}

pub fn build(
    device: &Arc<Device>,
    cache: crate::vk::raw::PipelineCache,
    spirv: &[u32],
    desc: &PipelineLayoutDesc,
    push_descriptors: bool,
) -> HeliosResult<PipelineObj> {
    validate_layout(device, desc)?;
    crate::runtime::spirv_check::check_module(spirv, desc, &device.caps)?;
    let vk = pipeline::create(device, cache, spirv, desc, push_descriptors)?;
    Ok(PipelineObj {
        vk,
        bindings: desc.bindings.clone(),
        push_bytes: desc.push_constant_bytes,
        label: Arc::from(desc.label.as_str()),
        device: device.clone(),
    })
}
