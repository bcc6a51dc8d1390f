//! The module's declarations: capabilities the device has, known extensions, the GLSL.std.450
//! import, GLCompute entry points with a workgroup size within the device limits, and
//! decorations from a short list, each on the kind of id it applies to.

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel, Op, StorageClass, Word};

use crate::caps::DeviceCaps;

use super::facts::{id_at, lit_at, Facts, Ty};
use super::{fail, Res};

/// Capabilities a Helios kernel may declare, each with whether the device supports it.
fn capability_ok(c: Capability, caps: &DeviceCaps) -> bool {
    use Capability::*;
    match c {
        Shader | Int8 | StorageBuffer8BitAccess | VulkanMemoryModel | VulkanMemoryModelDeviceScope
        | GroupNonUniform | GroupNonUniformVote | GroupNonUniformBallot => true,
        Float16 => caps.f16,
        Int16 => caps.int16,
        Int64 => caps.int64,
        StorageBuffer16BitAccess => caps.storage_16bit,
        GroupNonUniformArithmetic => caps.subgroup_arithmetic,
        GroupNonUniformShuffle => caps.subgroup_shuffle,
        AtomicFloat32AddEXT => caps.atomic_float_add,
        CooperativeMatrixKHR => caps.coop_mat,
        BFloat16TypeKHR | BFloat16CooperativeMatrixKHR => caps.bf16,
        CooperativeMatrixTensorAddressingNV | TensorAddressingNV | CooperativeMatrixConversionsNV
        | CooperativeMatrixBlockLoadsNV | CooperativeMatrixReductionsNV | CooperativeMatrixPerElementOperationsNV => {
            caps.coop_mat2
        }
        _ => false,
    }
}

pub fn header(module: &Module, caps: &DeviceCaps) -> Res<Option<Word>> {
    for ins in &module.capabilities {
        let Some(Operand::Capability(c)) = ins.operands.first() else { return fail("OpCapability".into()) };
        if !capability_ok(*c, caps) {
            return fail(format!("capability {c:?} is not supported on this device"));
        }
    }
    const EXTENSIONS: [&str; 8] = [
        "SPV_KHR_cooperative_matrix", "SPV_NV_cooperative_matrix2", "SPV_NV_tensor_addressing", "SPV_KHR_bfloat16",
        "SPV_EXT_shader_atomic_float_add", "SPV_KHR_vulkan_memory_model", "SPV_KHR_storage_buffer_storage_class",
        "SPV_KHR_16bit_storage",
    ];
    for ins in &module.extensions {
        match ins.operands.first() {
            Some(Operand::LiteralString(s)) if EXTENSIONS.contains(&s.as_str()) => {}
            other => return fail(format!("extension {other:?} is not supported")),
        }
    }
    if !module.capabilities.iter().any(|c| matches!(c.operands.first(), Some(Operand::Capability(Capability::Shader)))) {
        return fail("the module does not declare the Shader capability".into());
    }
    let mut glsl = None;
    for ins in &module.ext_inst_imports {
        match ins.operands.first() {
            Some(Operand::LiteralString(s)) if s == "GLSL.std.450" => glsl = ins.result_id,
            other => return fail(format!("extended instruction set {other:?} is not supported")),
        }
    }
    let Some(mm) = &module.memory_model else { return fail("no OpMemoryModel".into()) };
    let vulkan_cap = module.capabilities.iter().any(|c| matches!(c.operands.first(), Some(Operand::Capability(Capability::VulkanMemoryModel))));
    if matches!(mm.operands.get(1), Some(Operand::MemoryModel(rspirv::spirv::MemoryModel::Vulkan))) != vulkan_cap {
        return fail("the Vulkan memory model and the VulkanMemoryModel capability go together".into());
    }
    use rspirv::spirv::{AddressingModel, MemoryModel};
    let logical = matches!(mm.operands.first(), Some(Operand::AddressingModel(AddressingModel::Logical)));
    let glsl_or_vulkan = matches!(mm.operands.get(1), Some(Operand::MemoryModel(MemoryModel::GLSL450 | MemoryModel::Vulkan)));
    if !logical || !glsl_or_vulkan {
        return fail("the memory model must be Logical GLSL450 or Logical Vulkan".into());
    }
    Ok(glsl)
}

fn workgroup_size(f: &Facts, ins: &Instruction, caps: &DeviceCaps) -> Res<()> {
    let dims: Vec<u64> = match ins.operands.get(1) {
        Some(Operand::ExecutionMode(ExecutionMode::LocalSize)) => (2..5).map(|i| lit_at(ins, i).map(u64::from)).collect::<Res<_>>()?,
        Some(Operand::ExecutionMode(ExecutionMode::LocalSizeId)) => (2..5).map(|i| f.int_const(id_at(ins, i)?)).collect::<Res<_>>()?,
        other => return fail(format!("execution mode {other:?} is not supported")),
    };
    let within = dims.iter().zip(caps.max_workgroup_size).all(|(&d, m)| d >= 1 && d <= u64::from(m));
    if !within || dims.iter().product::<u64>() > u64::from(caps.max_workgroup_invocations) {
        return fail(format!(
            "workgroup size {dims:?} exceeds the device's {:?} / {} invocations",
            caps.max_workgroup_size, caps.max_workgroup_invocations
        ));
    }
    Ok(())
}

pub fn entry_points(module: &Module, f: &Facts, caps: &DeviceCaps) -> Res<()> {
    let globals: std::collections::HashSet<Word> =
        module.types_global_values.iter().filter(|g| g.class.opcode == Op::Variable).filter_map(|g| g.result_id).collect();
    if module.entry_points.len() > 64 {
        return fail(format!("{} entry points (at most 64)", module.entry_points.len()));
    }
    for ep in &module.entry_points {
        if !matches!(ep.operands.first(), Some(Operand::ExecutionModel(ExecutionModel::GLCompute))) {
            return fail("only GLCompute entry points are supported".into());
        }
        let func = id_at(ep, 1)?;
        let def = f.defs.get(&func).filter(|d| d.class.opcode == Op::Function);
        let Some(def) = def else { return fail(format!("entry point %{func} is not a function")) };
        match f.ty(id_at(def, 1)?)? {
            Ty::Function { ret, params } if params.is_empty() && f.ty(*ret)? == &Ty::Void => {}
            _ => return fail("an entry point must be a void function without parameters".into()),
        }
        let mut interface = std::collections::HashSet::new();
        for i in 3..ep.operands.len() {
            let v = id_at(ep, i)?;
            if !interface.insert(v) {
                return fail(format!("entry point interface lists %{v} twice"));
            }
            if !globals.contains(&v) {
                return fail(format!("entry point interface %{v} is not a global variable"));
            }
        }
        // From SPIR-V 1.4 the interface lists every global variable the entry point uses.
        if module.header.as_ref().is_some_and(|h| h.version >= 0x0001_0400) {
            if let Some(g) = globals.iter().find(|g| !interface.contains(g)) {
                return fail(format!("global variable %{g} is missing from the entry point's interface"));
            }
        }
        let sizes = module.execution_modes.iter().filter(|m| id_at(m, 0).ok() == Some(func)).count();
        if sizes != 1 {
            return fail(format!("entry point %{func} has {sizes} execution modes; it needs exactly one LocalSize or LocalSizeId"));
        }
    }
    for m in &module.execution_modes {
        let target = id_at(m, 0)?;
        if !module.entry_points.iter().any(|ep| id_at(ep, 1).ok() == Some(target)) {
            return fail(format!("execution mode on %{target}, which is no entry point"));
        }
        workgroup_size(f, m, caps)?;
    }
    Ok(())
}

fn variable_class(f: &Facts, id: Word) -> Option<StorageClass> {
    let def = f.defs.get(&id).filter(|d| d.class.opcode == Op::Variable)?;
    f.pointer(def.result_type?).ok().map(|(c, _)| c)
}

/// A builtin variable must be an Input of the builtin's own type.
fn builtin(f: &Facts, id: Word, b: BuiltIn) -> Res<()> {
    use BuiltIn::*;
    let vec3 = matches!(b, GlobalInvocationId | LocalInvocationId | WorkgroupId | NumWorkgroups);
    let scalar = matches!(b, LocalInvocationIndex | SubgroupSize | SubgroupLocalInvocationId | SubgroupId | NumSubgroups);
    let def = f.defs.get(&id).filter(|d| d.class.opcode == Op::Variable);
    let pointee = def.and_then(|d| f.pointer(d.result_type?).ok()).filter(|(c, _)| *c == StorageClass::Input).map(|(_, p)| p);
    let Some(t) = pointee else { return fail(format!("BuiltIn {b:?} on %{id}, which is not an Input variable")) };
    let (comp, n) = f.shape(t)?;
    let u32_comp = matches!(f.ty(comp)?, Ty::Int { width: 32, .. });
    if !u32_comp || !((vec3 && n == 3) || (scalar && n == 1)) {
        return fail(format!("BuiltIn {b:?} on a variable of type %{t}"));
    }
    Ok(())
}

fn decoration(f: &Facts, ins: &Instruction, d: Decoration, target: Word) -> Res<()> {
    use Decoration::*;
    let def_op = f.defs.get(&target).map(|d| d.class.opcode);
    match d {
        Binding | DescriptorSet => {
            if !matches!(variable_class(f, target), Some(StorageClass::StorageBuffer)) {
                return fail(format!("{d:?} on %{target}, which is not a storage-buffer variable"));
            }
            Ok(())
        }
        BuiltIn => match ins.operands.get(2) {
            Some(Operand::BuiltIn(b)) => builtin(f, target, *b),
            _ => fail("BuiltIn without a builtin".into()),
        },
        Block => match f.types.get(&target) {
            Some(Ty::Struct(_)) => Ok(()),
            _ => fail(format!("Block on %{target}, which is not a struct")),
        },
        ArrayStride => match (f.types.get(&target), lit_at(ins, 2)) {
            (Some(Ty::Array { .. } | Ty::RuntimeArray { .. }), Ok(s)) if s > 0 => Ok(()),
            _ => fail(format!("ArrayStride on %{target}")),
        },
        SpecId => match def_op {
            Some(Op::SpecConstant | Op::SpecConstantTrue | Op::SpecConstantFalse) => Ok(()),
            _ => fail(format!("SpecId on %{target}, which is not a scalar spec constant")),
        },
        NonWritable | NonReadable | Restrict | Aliased | Coherent | Volatile => match variable_class(f, target) {
            Some(StorageClass::StorageBuffer) => Ok(()),
            _ => fail(format!("{d:?} on %{target}, which is not a storage-buffer variable")),
        },
        NoContraction | RelaxedPrecision => match def_op {
            Some(op) if !super::structure::is_type(op) && op != Op::Label && op != Op::Function => Ok(()),
            _ => fail(format!("{d:?} on %{target}, which is not a value")),
        },
        _ => fail(format!("decoration {d:?} is not supported")),
    }
}

fn member_decoration(f: &Facts, ins: &Instruction) -> Res<()> {
    let target = id_at(ins, 0)?;
    let member = lit_at(ins, 1)? as usize;
    let Some(Ty::Struct(members)) = f.types.get(&target) else { return fail(format!("OpMemberDecorate on %{target}")) };
    if member >= members.len() {
        return fail(format!("OpMemberDecorate on member {member} of a {}-member struct", members.len()));
    }
    match ins.operands.get(2) {
        Some(Operand::Decoration(
            Decoration::Offset | Decoration::NonWritable | Decoration::NonReadable | Decoration::Coherent
            | Decoration::Volatile | Decoration::RelaxedPrecision | Decoration::Restrict,
        )) => Ok(()),
        other => fail(format!("member decoration {other:?} is not supported")),
    }
}

/// OpMemberName must name a member of a struct (drivers index member tables by it).
pub fn names(module: &Module, f: &Facts) -> Res<()> {
    for ins in &module.debug_names {
        if ins.class.opcode == Op::MemberName {
            let members = match f.types.get(&id_at(ins, 0)?) {
                Some(Ty::Struct(m)) => m.len(),
                _ => return fail("OpMemberName on a non-struct".into()),
            };
            if lit_at(ins, 1)? as usize >= members {
                return fail("OpMemberName past the struct's members".into());
            }
        }
    }
    Ok(())
}

/// (target, decoration) of every OpDecorate.
fn decorated(module: &Module) -> std::collections::HashSet<(Word, Decoration)> {
    module
        .annotations
        .iter()
        .filter_map(|a| match (a.class.opcode, a.operands.first(), a.operands.get(1)) {
            (Op::Decorate, Some(Operand::IdRef(t)), Some(Operand::Decoration(d))) => Some((*t, *d)),
            _ => None,
        })
        .collect()
}

pub fn annotations(module: &Module, f: &Facts) -> Res<()> {
    for ins in &module.annotations {
        match ins.class.opcode {
            Op::Decorate => match ins.operands.get(1) {
                Some(Operand::Decoration(d)) => decoration(f, ins, *d, id_at(ins, 0)?)?,
                _ => return fail("OpDecorate without a decoration".into()),
            },
            Op::MemberDecorate => member_decoration(f, ins)?,
            op => return fail(format!("{op:?} is not supported")),
        }
    }
    let decorated = decorated(module);
    let has_decoration = |_: &Module, id: Word, d: Decoration| decorated.contains(&(id, d));
    for ins in &module.types_global_values {
        let Some(id) = ins.result_id else { continue };
        match variable_class(f, id) {
            Some(StorageClass::Input) if !has_decoration(module, id, Decoration::BuiltIn) => {
                return fail(format!("Input variable %{id} is not a builtin"));
            }
            Some(StorageClass::StorageBuffer)
                if !has_decoration(module, id, Decoration::Binding) || !has_decoration(module, id, Decoration::DescriptorSet) =>
            {
                return fail(format!("storage-buffer variable %{id} needs DescriptorSet and Binding"));
            }
            _ => {}
        }
    }
    Ok(())
}
