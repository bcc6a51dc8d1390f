//! The two things the kernel API needs from the runtime: the device's caps and pipeline
//! creation. Until the runtime branch lands, no device exists here: compileKernel reports
//! NoDevice and kernelSpirv validates against the permissive caps.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::caps::DeviceCaps;
use crate::error::{HeliosError, HeliosResult};
use crate::spirv::CompiledKernel;

pub fn device_caps() -> HeliosResult<DeviceCaps> {
    Err(HeliosError::no_device("no device is initialized (call initDevice first)"))
}

/// The pipeline handle for a compiled kernel, created once per content hash.
pub fn pipeline_for(key: u64, k: &CompiledKernel) -> HeliosResult<f64> {
    static PIPELINES: OnceLock<Mutex<HashMap<u64, f64>>> = OnceLock::new();
    let map = PIPELINES.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(&h) = map.lock().get(&key) {
        return Ok(h);
    }
    let h = create_pipeline(&k.words, &k.layout)?;
    map.lock().insert(key, h);
    Ok(h)
}

fn create_pipeline(_spirv: &[u32], _layout: &crate::caps::PipelineLayoutDesc) -> HeliosResult<f64> {
    Err(HeliosError::no_device("no device is initialized (call initDevice first)"))
}
