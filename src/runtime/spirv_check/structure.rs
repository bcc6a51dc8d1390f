//! Module structure: it parses under the SPIR-V grammar (rspirv), re-assembles to the same words
//! (so its sections are in the logical layout order), every id is in bounds, defined once and
//! defined before use (labels, phi operands and annotations may refer forward), and its types
//! and constants are well formed.

use std::collections::{HashMap, HashSet};

use rspirv::binary::Assemble;
use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, StorageClass, Word};

use super::facts::{id_at, lit_at, Facts, Ty};
use super::{fail, Res};

/// Ids a module may declare: drivers size tables by the bound, so a mutated bound must not
/// become a huge allocation.
const MAX_BOUND: u32 = 1 << 22;
/// SPIR-V 1.3 (Vulkan 1.1) has the StorageBuffer class and subgroup operations without extensions.
/// Words of a module: 16 MiB, far above any Helios kernel (the largest is under 400 KiB), so
/// that the validator's work stays bounded.
const MAX_WORDS: usize = 1 << 22;
/// Blocks of one function (Helios kernels have under 1,000).
pub const MAX_BLOCKS: usize = 8192;
const MIN_VERSION: u32 = 0x0001_0300;
const MAX_VERSION: u32 = 0x0001_0600;

pub fn load(words: &[u32]) -> Res<Module> {
    if words.len() < 5 || words.len() > MAX_WORDS {
        return fail(format!("{} words is not a SPIR-V module of at most {MAX_WORDS} words", words.len()));
    }
    if words[1] > MAX_VERSION || words[1] < MIN_VERSION || words[1] & 0xff00_00ff != 0 || words[4] != 0 {
        return fail(format!("SPIR-V version word {:#x} is not 1.3 to 1.6, or the schema word {:#x} is not 0", words[1], words[4]));
    }
    if words[3] == 0 || words[3] > MAX_BOUND {
        return fail(format!("id bound {} is not in 1..={MAX_BOUND}", words[3]));
    }
    // rspirv's decoder slices by the declared word count, so frame the stream first.
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        if count == 0 || at + count > words.len() {
            return fail(format!("instruction at word {at} runs past the end of the module"));
        }
        at += count;
    }
    let words = &execution_mode_id_as_execution_mode(words);
    let module = rspirv::dr::load_words(words).map_err(|e| super::malformed(format!("does not parse: {e}")))?;
    // The loader files instructions into sections; re-assembling gives the input back only if it
    // already was in that order (and every operand encoded canonically).
    if module.assemble().get(5..) != words.get(5..) {
        return fail("instructions are not in the logical layout order of SPIR-V modules".to_string());
    }
    Ok(module)
}

/// rspirv's loader does not place OpExecutionModeId (Helios uses it for LocalSizeId), so it reads
/// them as OpExecutionMode, whose grammar parses LocalSizeId's operands as ids all the same.
fn execution_mode_id_as_execution_mode(words: &[u32]) -> Vec<u32> {
    const EXECUTION_MODE: u32 = 16;
    const EXECUTION_MODE_ID: u32 = 331;
    let mut out = words.to_vec();
    let mut at = 5;
    while at < out.len() {
        let count = (out[at] >> 16) as usize;
        if out[at] & 0xffff == EXECUTION_MODE_ID {
            out[at] = (out[at] & 0xffff_0000) | EXECUTION_MODE;
        }
        at += count.max(1);
    }
    out
}

/// May `ins` refer to `id` before its definition? Labels (branches, merges, phi parents), phi
/// values (back edges), and annotations, names and entry points, which precede everything.
fn forward_ok(ins: &Instruction, operand: usize) -> bool {
    match ins.class.opcode {
        Op::Name | Op::MemberName | Op::Decorate | Op::MemberDecorate | Op::DecorateId | Op::EntryPoint
        | Op::ExecutionMode | Op::ExecutionModeId | Op::Branch | Op::BranchConditional | Op::Switch
        | Op::SelectionMerge | Op::LoopMerge | Op::Phi => true,
        Op::FunctionCall => operand == 0,
        _ => false,
    }
}

fn ids_of(ins: &Instruction) -> impl Iterator<Item = (usize, Word)> + '_ {
    ins.operands.iter().enumerate().filter_map(|(i, o)| match o {
        Operand::IdRef(id) | Operand::IdScope(id) | Operand::IdMemorySemantics(id) => Some((i, *id)),
        _ => None,
    })
}

/// Ids: in bounds, defined once, defined before use where SPIR-V requires it.
pub fn ids<'m>(module: &'m Module, bound: Word) -> Res<Facts<'m>> {
    let mut facts = Facts::default();
    for ins in module.all_inst_iter() {
        if let Some(id) = ins.result_id {
            if id == 0 || id >= bound {
                return fail(format!("result id %{id} is outside the id bound {bound}"));
            }
            if facts.defs.insert(id, ins).is_some() {
                return fail(format!("%{id} is defined twice"));
            }
        }
    }
    let mut seen: HashSet<Word> = HashSet::with_capacity(facts.defs.len());
    for ins in module.all_inst_iter() {
        if let Some(t) = ins.result_type {
            if !seen.contains(&t) || !facts.defs.get(&t).is_some_and(|d| is_type(d.class.opcode)) {
                return fail(format!("{:?} has result type %{t}, which is not a type defined before it", ins.class.opcode));
            }
        }
        for (i, id) in ids_of(ins) {
            if !facts.defs.contains_key(&id) {
                return fail(format!("{:?} uses %{id}, which is never defined", ins.class.opcode));
            }
            if !seen.contains(&id) && !forward_ok(ins, i) {
                return fail(format!("{:?} uses %{id} before its definition", ins.class.opcode));
            }
        }
        if let Some(id) = ins.result_id {
            seen.insert(id);
        }
    }
    Ok(facts)
}

pub fn is_type(op: Op) -> bool {
    matches!(
        op,
        Op::TypeVoid | Op::TypeBool | Op::TypeInt | Op::TypeFloat | Op::TypeVector | Op::TypeArray
            | Op::TypeRuntimeArray | Op::TypeStruct | Op::TypePointer | Op::TypeFunction
            | Op::TypeCooperativeMatrixKHR | Op::TypeTensorLayoutNV | Op::TypeTensorViewNV
    )
}

fn data_type(facts: &Facts, t: Word) -> Res<()> {
    match facts.ty(t)? {
        Ty::Void | Ty::Function { .. } | Ty::Opaque => fail(format!("%{t} cannot be a member, element or pointee")),
        _ => Ok(()),
    }
}

/// Decodes one type declaration, checking its operands.
fn decode_type(facts: &Facts, ins: &Instruction) -> Res<Ty> {
    let ty = match ins.class.opcode {
        Op::TypeVoid => Ty::Void,
        Op::TypeBool => Ty::Bool,
        Op::TypeInt => {
            let (width, signed) = (lit_at(ins, 0)?, lit_at(ins, 1)?);
            if ![8, 16, 32, 64].contains(&width) || signed > 1 {
                return fail(format!("OpTypeInt {width} {signed}"));
            }
            use rspirv::spirv::Capability as C;
            match width {
                8 => facts.needs("an 8-bit integer", &[C::Int8, C::StorageBuffer8BitAccess])?,
                16 => facts.needs("a 16-bit integer", &[C::Int16, C::StorageBuffer16BitAccess])?,
                64 => facts.needs("a 64-bit integer", &[C::Int64])?,
                _ => {}
            }
            Ty::Int { width, signed: signed == 1 }
        }
        Op::TypeFloat => {
            let width = lit_at(ins, 0)?;
            let bf16 = matches!(ins.operands.get(1), Some(Operand::FPEncoding(_)));
            if ![16, 32].contains(&width) || (bf16 && width != 16) {
                return fail(format!("OpTypeFloat {width}"));
            }
            use rspirv::spirv::Capability as C;
            match (width, bf16) {
                (16, true) => facts.needs("bfloat16", &[C::BFloat16TypeKHR])?,
                (16, false) => facts.needs("a 16-bit float", &[C::Float16, C::StorageBuffer16BitAccess])?,
                _ => {}
            }
            Ty::Float { width }
        }
        Op::TypeVector => {
            let (comp, n) = (id_at(ins, 0)?, lit_at(ins, 1)?);
            if !matches!(facts.ty(comp)?, Ty::Bool | Ty::Int { .. } | Ty::Float { .. }) || !(2..=4).contains(&n) {
                return fail(format!("OpTypeVector %{comp} {n}"));
            }
            Ty::Vector { comp, n }
        }
        Op::TypeArray => {
            let (elem, len_id) = (id_at(ins, 0)?, id_at(ins, 1)?);
            data_type(facts, elem)?;
            let len = facts.int_const(len_id)?;
            if len == 0 || len > 1 << 24 {
                return fail(format!("array length {len}"));
            }
            Ty::Array { elem, len }
        }
        Op::TypeRuntimeArray => {
            let elem = id_at(ins, 0)?;
            data_type(facts, elem)?;
            Ty::RuntimeArray { elem }
        }
        Op::TypeStruct => {
            let members: Vec<Word> = (0..ins.operands.len()).map(|i| id_at(ins, i)).collect::<Res<_>>()?;
            for (i, &m) in members.iter().enumerate() {
                data_type(facts, m)?;
                if matches!(facts.ty(m)?, Ty::RuntimeArray { .. }) && i + 1 != members.len() {
                    return fail("a runtime array must be a struct's last member".to_string());
                }
            }
            Ty::Struct(members)
        }
        Op::TypePointer => {
            let Some(Operand::StorageClass(class)) = ins.operands.first() else { return fail("OpTypePointer".into()) };
            let pointee = id_at(ins, 1)?;
            data_type(facts, pointee)?;
            Ty::Pointer { class: *class, pointee }
        }
        Op::TypeFunction => {
            let ret = id_at(ins, 0)?;
            facts.ty(ret)?;
            let params: Vec<Word> = (1..ins.operands.len()).map(|i| id_at(ins, i)).collect::<Res<_>>()?;
            for &p in &params {
                data_type(facts, p)?;
            }
            Ty::Function { ret, params }
        }
        Op::TypeCooperativeMatrixKHR => {
            facts.needs("a cooperative matrix", &[rspirv::spirv::Capability::CooperativeMatrixKHR])?;
            let comp = id_at(ins, 0)?;
            if !matches!(facts.ty(comp)?, Ty::Int { .. } | Ty::Float { .. }) {
                return fail(format!("cooperative matrix of %{comp}"));
            }
            let [scope, rows, cols, usage] = [1, 2, 3, 4].map(|i| id_at(ins, i).and_then(|id| facts.int_const(id)));
            let (scope, rows, cols, usage) = (scope?, rows?, cols?, usage?);
            if !(2..=3).contains(&scope) || rows == 0 || cols == 0 || rows > 4096 || cols > 4096 || usage > 2 {
                return fail(format!("cooperative matrix scope {scope} {rows}x{cols} use {usage}"));
            }
            Ty::CoopMat { comp, scope, rows, cols, usage }
        }
        _ => Ty::Opaque,
    };
    // Non-aggregate types must be unique, so that comparing ids compares types.
    if !matches!(ty, Ty::Struct(_) | Ty::Opaque) && facts.unique.contains(&ty) {
        return fail(format!("type {ty:?} is declared twice"));
    }
    Ok(ty)
}

fn int_value(facts: &Facts, ins: &Instruction) -> Res<Option<u64>> {
    let t = ins.result_type.unwrap_or(0);
    match (facts.ty(t)?, ins.operands.first()) {
        (Ty::Int { width, .. }, Some(Operand::LiteralBit32(v))) if *width <= 32 => Ok(Some(u64::from(*v))),
        (Ty::Int { .. }, Some(Operand::LiteralBit64(v))) => Ok(Some(*v)),
        (Ty::Float { .. }, Some(Operand::LiteralBit32(_) | Operand::LiteralBit64(_))) => Ok(None),
        (other, _) => fail(format!("{:?} of type {other:?}", ins.class.opcode)),
    }
}

/// Types, constants and global variables, in order.
pub fn globals(module: &Module, facts: &mut Facts) -> Res<()> {
    for ins in &module.types_global_values {
        let op = ins.class.opcode;
        let id = ins.result_id.unwrap_or(0);
        if is_type(op) {
            let ty = decode_type(facts, ins)?;
            if !matches!(ty, Ty::Struct(_) | Ty::Opaque) {
                facts.unique.insert(ty.clone());
            }
            facts.types.insert(id, ty);
            continue;
        }
        match op {
            Op::Constant | Op::SpecConstant => {
                if let Some(v) = int_value(facts, ins)? {
                    facts.ints.insert(id, v);
                }
            }
            Op::ConstantTrue | Op::ConstantFalse | Op::SpecConstantTrue | Op::SpecConstantFalse => {
                if facts.ty(ins.result_type.unwrap_or(0))? != &Ty::Bool {
                    return fail(format!("{op:?} is not of type bool"));
                }
            }
            Op::ConstantComposite | Op::SpecConstantComposite => super::rules::construct(facts, ins, 0)?,
            Op::ConstantNull | Op::Undef => data_type(facts, ins.result_type.unwrap_or(0))?,
            Op::Variable => global_variable(facts, ins)?,
            Op::SpecConstantOp => super::rules::spec_op(facts, ins)?,
            Op::Line | Op::NoLine => {}
            _ => return fail(format!("{op:?} is not allowed among types and global values")),
        }
    }
    Ok(())
}

fn global_variable(facts: &Facts, ins: &Instruction) -> Res<()> {
    let (class, _) = facts.pointer(ins.result_type.unwrap_or(0))?;
    let declared = match ins.operands.first() {
        Some(Operand::StorageClass(c)) => *c,
        _ => return fail("OpVariable without a storage class".into()),
    };
    let allowed = [StorageClass::StorageBuffer, StorageClass::PushConstant, StorageClass::Workgroup, StorageClass::Input, StorageClass::Private];
    if declared != class || !allowed.contains(&class) {
        return fail(format!("global variable in storage class {declared:?} (pointer type {class:?})"));
    }
    if ins.operands.len() > 1 && class != StorageClass::Private {
        return fail(format!("a {class:?} variable cannot have an initializer"));
    }
    Ok(())
}

/// Per function: OpFunction matches its type, parameters match, every block is labelled and
/// ends in its only terminator, phis lead their block, variables lead the first block.
pub fn functions(module: &Module, facts: &Facts) -> Res<HashMap<Word, usize>> {
    let mut label_fn = HashMap::new();
    for (fi, f) in module.functions.iter().enumerate() {
        let Some(def) = &f.def else { return fail("a function without OpFunction".into()) };
        // None, Inline, DontInline, Pure, Const: anything else needs a vendor capability.
        if !matches!(def.operands.first(), Some(Operand::FunctionControl(c)) if c.bits() & !0xf == 0) {
            return fail("function control other than None, Inline, DontInline, Pure or Const".into());
        }
        let fty = id_at(def, 1)?;
        let Ty::Function { ret, params } = facts.ty(fty)? else { return fail(format!("%{fty} is not a function type")) };
        if def.result_type != Some(*ret) || params.len() != f.parameters.len() {
            return fail("OpFunction does not match its function type".into());
        }
        for (p, want) in f.parameters.iter().zip(params) {
            if p.result_type != Some(*want) {
                return fail("a function parameter does not match its function type".into());
            }
        }
        if f.blocks.is_empty() || f.blocks.len() > MAX_BLOCKS || f.end.is_none() {
            return fail(format!("a function of {} blocks (1 to {MAX_BLOCKS}) or without OpFunctionEnd", f.blocks.len()));
        }
        for (bi, b) in f.blocks.iter().enumerate() {
            let Some(label) = b.label.as_ref().and_then(|l| l.result_id) else { return fail("a block without OpLabel".into()) };
            label_fn.insert(label, fi);
            let n = b.instructions.len();
            for (i, ins) in b.instructions.iter().enumerate() {
                let op = ins.class.opcode;
                let last = i + 1 == n;
                if super::rules::is_terminator(op) != last {
                    return fail(format!("block %{label}: {op:?} at position {i} of {n}"));
                }
                let leading = b.instructions[..i].iter().all(|p| p.class.opcode == op);
                if (op == Op::Phi && !leading) || (op == Op::Variable && (bi != 0 || !leading)) {
                    return fail(format!("block %{label}: {op:?} must lead its block"));
                }
                if matches!(op, Op::SelectionMerge | Op::LoopMerge) && i + 2 != n {
                    return fail(format!("block %{label}: {op:?} must precede the terminator"));
                }
            }
        }
    }
    Ok(label_fn)
}
