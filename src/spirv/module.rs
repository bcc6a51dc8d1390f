//! Module assembly: capabilities and extensions from what the kernel uses, the entry point,
//! workgroup size (fixed or spec-constant), spec constants, and the entry function.

use rspirv::binary::Assemble;
use rspirv::dr::Operand;
use rspirv::spirv::{self, Capability, Decoration, ExecutionMode, ExecutionModel, FunctionControl};

use crate::error::HeliosResult;
use crate::ir::ast::{Kernel, WorkgroupDim};
use crate::ir::types::Scalar;

use super::compiler::Compiler;

/// Lowers a validated kernel to SPIR-V 1.6 words.
pub fn assemble(k: &Kernel) -> HeliosResult<Vec<u32>> {
    Ok(build_module(k)?.assemble())
}

/// Lowers a validated kernel to an rspirv module (words via `assemble`, text via `disassemble`).
pub fn build_module(k: &Kernel) -> HeliosResult<rspirv::dr::Module> {
    let mut c = Compiler::new(k);
    declare_capabilities(&mut c, k);
    if k.uses.glsl {
        c.glsl = c.ext_inst_import("GLSL.std.450");
    }
    // Cooperative matrices require the Vulkan memory model; everything else keeps GLSL450,
    // which needs no device feature.
    let model = if k.uses.coopmat { spirv::MemoryModel::Vulkan } else { spirv::MemoryModel::GLSL450 };
    c.memory_model(spirv::AddressingModel::Logical, model);
    declare_spec_constants(&mut c, k);

    let void = c.void;
    let fn_ty = c.type_function(void, []);
    let main = c.begin_function(void, None, FunctionControl::NONE, fn_ty)?;
    c.func_index = c.module_ref().functions.len() - 1;
    c.begin_block(None)?;
    c.lower_block(&k.body)?;
    if c.in_block() {
        c.ret()?;
    }
    c.end_function()?;
    c.hoist_locals();

    let interface = c.interface.clone();
    c.entry_point(ExecutionModel::GLCompute, main, "main", interface);
    declare_workgroup_size(&mut c, k, main);
    c.name(main, k.name.clone());
    for (i, s) in k.slots.iter().enumerate() {
        if let super::compiler::SlotVal::Value(id) | super::compiler::SlotVal::Ptr(id) = c.slots[i] {
            c.name(id, s.name.clone());
        }
    }
    Ok(c.into_builder().module())
}

fn declare_capabilities(c: &mut Compiler, k: &Kernel) {
    let u = k.uses;
    c.capability(Capability::Shader);
    if u.f16 {
        c.capability(Capability::Float16);
    }
    if u.storage16 {
        c.capability(Capability::StorageBuffer16BitAccess);
    }
    let subgroup = u.subgroup_basic || u.subgroup_arith || u.subgroup_vote || u.subgroup_ballot || u.subgroup_shuffle;
    if subgroup {
        c.capability(Capability::GroupNonUniform);
    }
    if u.subgroup_arith {
        c.capability(Capability::GroupNonUniformArithmetic);
    }
    if u.subgroup_vote {
        c.capability(Capability::GroupNonUniformVote);
    }
    if u.subgroup_ballot {
        c.capability(Capability::GroupNonUniformBallot);
    }
    if u.subgroup_shuffle {
        c.capability(Capability::GroupNonUniformShuffle);
    }
    if u.coopmat {
        c.capability(Capability::VulkanMemoryModel);
        c.capability(Capability::CooperativeMatrixKHR);
        c.extension("SPV_KHR_cooperative_matrix");
    }
    if u.coopmat2 || u.tensor_addressing || u.coop_convert {
        c.extension("SPV_NV_cooperative_matrix2");
    }
    if u.coop_convert {
        c.capability(Capability::CooperativeMatrixConversionsNV);
    }
    if u.tensor_addressing {
        c.capability(Capability::TensorAddressingNV);
        c.capability(Capability::CooperativeMatrixTensorAddressingNV);
        c.extension("SPV_NV_tensor_addressing");
    }
    if u.bf16 {
        c.capability(Capability::BFloat16TypeKHR);
        if u.coopmat {
            c.capability(Capability::BFloat16CooperativeMatrixKHR);
        }
        c.extension("SPV_KHR_bfloat16");
    }
    if u.atomic_float_add {
        c.capability(Capability::AtomicFloat32AddEXT);
        c.extension("SPV_EXT_shader_atomic_float_add");
    }
}

fn declare_spec_constants(c: &mut Compiler, k: &Kernel) {
    for s in &k.spec {
        let ty = c.scalar_ty(s.ty);
        let id = match s.ty {
            Scalar::Bool if s.bits != 0 => c.spec_constant_true(ty),
            Scalar::Bool => c.spec_constant_false(ty),
            _ => c.spec_constant_bit32(ty, s.bits),
        };
        c.decorate(id, Decoration::SpecId, [Operand::LiteralBit32(s.id)]);
        c.name(id, s.name.clone());
        c.spec_ids.push(id);
    }
}

fn declare_workgroup_size(c: &mut Compiler, k: &Kernel, main: u32) {
    let fixed: Option<Vec<u32>> = k
        .workgroup
        .iter()
        .map(|d| match d {
            WorkgroupDim::Fixed(n) => Some(*n),
            WorkgroupDim::Spec(_) => None,
        })
        .collect();
    match fixed {
        Some(dims) => c.execution_mode(main, ExecutionMode::LocalSize, dims),
        None => {
            // LocalSizeId takes constant or spec-constant ids (Vulkan 1.3, maintenance4).
            let ids: Vec<u32> = k
                .workgroup
                .iter()
                .map(|d| match d {
                    WorkgroupDim::Fixed(n) => c.u32_const(*n),
                    WorkgroupDim::Spec(i) => c.spec_ids[*i as usize],
                })
                .collect();
            c.execution_mode_id(main, ExecutionMode::LocalSizeId, ids);
        }
    }
}
