//! Pipeline exports.

use napi::bindgen_prelude::Unknown;
use napi_derive::napi;

use crate::api::args::{num, object, path, text, u32_array};
use crate::api::guard;
use crate::api::types::{PipelineLayout, PipelineStatistic};
use crate::caps::{Access, PipelineLayoutDesc};
use crate::error::{ErrorCode, HeliosError, HeliosResult};
use crate::runtime::global;

fn parse_layout(layout: PipelineLayout) -> HeliosResult<PipelineLayoutDesc> {
    let bindings = layout
        .bindings
        .iter()
        .enumerate()
        .map(|(i, b)| {
            Access::parse(b).ok_or_else(|| {
                HeliosError::invalid_argument(format!("bindings[{i}] is {b:?}; expected 'read', 'write' or 'readwrite'"))
            })
        })
        .collect::<HeliosResult<Vec<_>>>()?;
    Ok(PipelineLayoutDesc {
        bindings,
        push_constant_bytes: layout.push_constant_bytes.unwrap_or(0),
        entry_point: layout.entry_point.unwrap_or_else(|| "main".to_string()),
        label: layout.label.unwrap_or_else(|| "kernel".to_string()),
        specialization: Vec::new(),
        required_subgroup_size: None,
    })
}

/// Builds a compute pipeline. Binding i is the storage buffer at set 0, binding i, and
/// receives `buffers[i]` of a dispatch; push constants start at offset 0.
#[napi(ts_args_type = "spirv: Uint32Array, layout: PipelineLayout")]
pub fn create_pipeline(spirv: Unknown<'_>, layout: Unknown<'_>) -> napi::Result<f64, ErrorCode> {
    guard("createPipeline", || {
        let spirv = u32_array(spirv, "spirv")?;
        let desc = parse_layout(object::<PipelineLayout>(layout, "layout")?)?;
        global::create_pipeline(&spirv, &desc)
    })
}

/// Destroys a pipeline; batches and captures that use it keep it alive until they finish.
#[napi(ts_args_type = "handle: number")]
pub fn destroy_pipeline(handle: Unknown<'_>) -> napi::Result<(), ErrorCode> {
    guard("destroyPipeline", || {
        let handle = num(handle, "handle")?;
        global::with(|rt| rt.destroy_pipeline(handle))
    })
}

/// Driver statistics of a pipeline (register counts, spills, shared memory, ...), as reported
/// by VK_KHR_pipeline_executable_properties. Needs HELIOS_PIPELINE_STATS=1 at initDevice.
#[napi(ts_args_type = "handle: number")]
pub fn pipeline_statistics(handle: Unknown<'_>) -> napi::Result<Vec<PipelineStatistic>, ErrorCode> {
    guard("pipelineStatistics", || {
        let handle = num(handle, "handle")?;
        let stats = global::pipeline_statistics(handle)?;
        Ok(stats.into_iter().map(|(name, value)| PipelineStatistic { name, value }).collect())
    })
}

/// Writes the device's pipeline cache (vkGetPipelineCacheData, HELIOSPC-wrapped) as a seed in
/// `dir` (created if missing), named `<vendorID>-<deviceID>-<pipelineCacheUUID>.bin` from the
/// data's own Vulkan header; returns the file's path. Run it after the kernels a job needs were
/// compiled (`helios warmup --export-pipeline-seed=DIR`); ship the file in the package's
/// `data/pipeline-cache`, where a machine with the same GPU model and driver build starts from it.
#[napi(ts_args_type = "dir: string")]
pub fn export_pipeline_seed(dir: Unknown<'_>) -> napi::Result<String, ErrorCode> {
    guard("exportPipelineSeed", || {
        let dir = path(text(dir, "dir")?, "dir")?;
        let file = global::with(|rt| rt.export_pipeline_seed(&dir))?;
        Ok(file.to_string_lossy().into_owned())
    })
}
