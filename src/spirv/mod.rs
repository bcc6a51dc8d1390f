//! Lowering of validated kernels (`crate::ir`) to SPIR-V with rspirv, one file per op family,
//! mirroring `ir/decode`. `compile` is the whole pipeline: JSON → validated AST → SPIR-V words
//! plus the pipeline layout the runtime needs.

mod arith;
pub mod cache;
mod compiler;
mod control;
mod convert;
mod coopmat;
mod expr;
mod memory;
mod module;
mod subgroup;
mod tensor;

use crate::caps::{DeviceCaps, PipelineLayoutDesc};
use crate::error::{HeliosError, HeliosResult};
use crate::ir::ast::Kernel;

pub use compiler::Compiler;
pub use module::{assemble, build_module};

impl From<rspirv::dr::Error> for HeliosError {
    fn from(e: rspirv::dr::Error) -> Self {
        HeliosError::internal(format!("SPIR-V builder: {e}"))
    }
}

/// SPIR-V words and the layout the runtime builds the pipeline from.
#[derive(Debug, Clone)]
pub struct CompiledKernel {
    pub name: String,
    pub words: Vec<u32>,
    pub layout: PipelineLayoutDesc,
}

/// Parses, validates and assembles a kernel description for a device with `caps`.
pub fn compile(desc_json: &str, caps: &DeviceCaps) -> HeliosResult<CompiledKernel> {
    let k = crate::ir::decode(desc_json, caps)?;
    compile_kernel(&k)
}

/// Assembles an already validated kernel.
pub fn compile_kernel(k: &Kernel) -> HeliosResult<CompiledKernel> {
    let words = assemble(k)?;
    Ok(CompiledKernel { name: k.name.clone(), words, layout: layout_of(k) })
}

pub fn layout_of(k: &Kernel) -> PipelineLayoutDesc {
    let push_bytes = k.push.last().map(|f| f.offset + f.ty.bytes()).unwrap_or(0);
    PipelineLayoutDesc {
        bindings: k.bindings.iter().map(|b| b.access).collect(),
        push_constant_bytes: push_bytes.div_ceil(4) * 4,
        entry_point: "main".to_string(),
        label: k.name.clone(),
        specialization: k.spec.iter().map(|s| (s.id, s.bits)).collect(),
        required_subgroup_size: k.subgroup_size,
    }
}

/// Human-readable SPIR-V of a description (rspirv's disassembler on the built module: its
/// binary loader does not accept OpExecutionModeId, which spec-sized workgroups use).
pub fn disassemble_desc(desc_json: &str, caps: &DeviceCaps) -> HeliosResult<String> {
    use rspirv::binary::Disassemble;
    let k = crate::ir::decode(desc_json, caps)?;
    Ok(build_module(&k)?.disassemble())
}

/// Human-readable SPIR-V from words (fails on modules with OpExecutionModeId; see above).
pub fn disassemble(words: &[u32]) -> HeliosResult<String> {
    use rspirv::binary::Disassemble;
    let module = rspirv::dr::load_words(words).map_err(|e| HeliosError::internal(format!("reloading SPIR-V: {e}")))?;
    Ok(module.disassemble())
}

#[cfg(test)]
mod tests;
