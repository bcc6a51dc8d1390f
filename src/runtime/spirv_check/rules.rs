//! Operand types of every instruction a Helios kernel may contain. Each opcode allowed in a
//! function body has a rule here; any other opcode is refused, so whatever reaches the driver
//! has had its operand kinds, types and constant indices checked.

use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{Op, StorageClass, Word};

use super::facts::{id_at, lit_at, Class, Facts, Ty};
use super::{fail, Res};

pub fn is_terminator(op: Op) -> bool {
    matches!(op, Op::Branch | Op::BranchConditional | Op::Switch | Op::Return | Op::ReturnValue | Op::Unreachable)
}

const SCOPE_WORKGROUP: u64 = 2;
const SCOPE_SUBGROUP: u64 = 3;

/// Operand `i` must be a value of type `t`.
fn want(f: &Facts, ins: &Instruction, i: usize, t: Word) -> Res<()> {
    let v = id_at(ins, i)?;
    let got = f.ty_of(v)?;
    if got != t {
        return fail(format!("{:?} operand {i} (%{v}) has type %{got}, expected %{t}", ins.class.opcode));
    }
    Ok(())
}

fn result(ins: &Instruction) -> Res<Word> {
    ins.result_type.ok_or_else(|| super::malformed(format!("{:?} without a result type", ins.class.opcode)))
}

fn class_is(f: &Facts, ins: &Instruction, t: Word, c: Class) -> Res<()> {
    if f.class(t)? != c {
        return fail(format!("{:?} on %{t}, which is not {c:?}", ins.class.opcode));
    }
    Ok(())
}

fn scope(f: &Facts, ins: &Instruction, i: usize, allowed: &[u64]) -> Res<()> {
    let s = f.int_const(id_at(ins, i)?)?;
    if !allowed.contains(&s) {
        return fail(format!("{:?}: scope {s} is not allowed here", ins.class.opcode));
    }
    Ok(())
}

/// Operands `from..` all of the result type, of class `c`.
fn same_type(f: &Facts, ins: &Instruction, from: usize, c: Option<Class>) -> Res<()> {
    let r = result(ins)?;
    if let Some(c) = c {
        class_is(f, ins, r, c)?;
    }
    let n = ins.operands.len();
    if n <= from {
        return fail(format!("{:?} lacks operands", ins.class.opcode));
    }
    (from..n).try_for_each(|i| want(f, ins, i, r))
}

fn compare(f: &Facts, ins: &Instruction, c: Class) -> Res<()> {
    let a = f.ty_of(id_at(ins, 0)?)?;
    class_is(f, ins, a, c)?;
    if ins.operands.len() > 1 {
        want(f, ins, 1, a)?;
    }
    let (rc, rn) = f.shape(result(ins)?)?;
    if f.ty(rc)? != &Ty::Bool || rn != f.shape(a)?.1 {
        return fail(format!("{:?} must produce bool of the operands' width", ins.class.opcode));
    }
    Ok(())
}

fn convert(f: &Facts, ins: &Instruction, from: Class, to: Class) -> Res<()> {
    let (r, a) = (result(ins)?, f.ty_of(id_at(ins, 0)?)?);
    class_is(f, ins, r, to)?;
    class_is(f, ins, a, from)?;
    let same_shape = match (f.ty(r)?, f.ty(a)?) {
        (Ty::CoopMat { rows, cols, usage, scope, .. }, Ty::CoopMat { rows: r2, cols: c2, usage: u2, scope: s2, .. }) => {
            (rows, cols, usage, scope) == (r2, c2, u2, s2)
        }
        _ => f.shape(r)?.1 == f.shape(a)?.1,
    };
    if !same_shape {
        return fail(format!("{:?} changes the component count", ins.class.opcode));
    }
    Ok(())
}

fn shift(f: &Facts, ins: &Instruction) -> Res<()> {
    let r = result(ins)?;
    class_is(f, ins, r, Class::Int)?;
    want(f, ins, 0, r)?;
    let s = f.ty_of(id_at(ins, 1)?)?;
    class_is(f, ins, s, Class::Int)?;
    if f.shape(s)?.1 != f.shape(r)?.1 {
        return fail("shift amount of another width".into());
    }
    Ok(())
}

/// Walks `indices` (constant values where known) from type `t`.
fn walk(f: &Facts, mut t: Word, indices: impl Iterator<Item = Res<Option<u64>>>) -> Res<Word> {
    for i in indices {
        t = f.step_into(t, i?)?;
    }
    Ok(t)
}

fn access_chain(f: &Facts, ins: &Instruction) -> Res<()> {
    let base = f.ty_of(id_at(ins, 0)?)?;
    let (class, pointee) = f.pointer(base)?;
    let idx = (1..ins.operands.len()).map(|i| {
        let v = id_at(ins, i)?;
        class_is(f, ins, f.ty_of(v)?, Class::Int)?;
        if f.shape(f.ty_of(v)?)?.1 != 1 {
            return fail("an access-chain index must be a scalar".into());
        }
        Ok(f.ints.get(&v).copied())
    });
    let end = walk(f, pointee, idx)?;
    if f.pointer(result(ins)?)? != (class, end) {
        return fail(format!("OpAccessChain result %{} is not a {class:?} pointer to %{end}", result(ins)?));
    }
    Ok(())
}

fn composite(f: &Facts, ins: &Instruction, insert: bool) -> Res<()> {
    let (obj, first) = if insert { (Some(0), 2) } else { (None, 1) };
    let comp = f.ty_of(id_at(ins, first - 1)?)?;
    let end = walk(f, comp, (first..ins.operands.len()).map(|i| lit_at(ins, i).map(|v| Some(u64::from(v)))))?;
    match obj {
        Some(o) => {
            want(f, ins, o, end)?;
            if result(ins)? != comp {
                return fail("OpCompositeInsert result is not the composite's type".into());
            }
        }
        None if result(ins)? != end => return fail("OpCompositeExtract result is not the element's type".into()),
        None => {}
    }
    Ok(())
}

/// OpCompositeConstruct and constant composites: constituents match the result type.
pub fn construct(f: &Facts, ins: &Instruction, from: usize) -> Res<()> {
    let r = result(ins)?;
    let parts: Vec<Word> = (from..ins.operands.len()).map(|i| id_at(ins, i).and_then(|v| f.ty_of(v))).collect::<Res<_>>()?;
    let ok = match f.ty(r)? {
        Ty::Vector { comp, n } => {
            let mut total = 0;
            for &p in &parts {
                let (pc, pn) = f.shape(p)?;
                if pc != *comp || pn == 0 {
                    return fail("a vector constituent of another component type".into());
                }
                total += pn;
            }
            total == *n
        }
        Ty::Array { elem, len } => parts.len() as u64 == *len && parts.iter().all(|p| p == elem),
        Ty::Struct(members) => parts == *members,
        Ty::CoopMat { comp, .. } => parts == [*comp],
        other => return fail(format!("cannot construct {other:?}")),
    };
    if !ok {
        return fail(format!("{:?} constituents do not match %{r}", ins.class.opcode));
    }
    Ok(())
}

/// Spec-constant operations: integer arithmetic on integer scalars only.
pub fn spec_op(f: &Facts, ins: &Instruction) -> Res<()> {
    let op = lit_at(ins, 0)?;
    const ALLOWED: [Op; 10] = [Op::IAdd, Op::ISub, Op::IMul, Op::UDiv, Op::SDiv, Op::UMod, Op::SRem, Op::ShiftLeftLogical, Op::ShiftRightLogical, Op::BitwiseAnd];
    if !ALLOWED.iter().any(|o| *o as u32 == op) {
        return fail(format!("OpSpecConstantOp {op} is not supported"));
    }
    let r = result(ins)?;
    if !matches!(f.ty(r)?, Ty::Int { .. }) {
        return fail("OpSpecConstantOp must be integer".into());
    }
    (1..ins.operands.len()).try_for_each(|i| want(f, ins, i, r))
}

/// GLSL.std.450 instructions whose operands all have the result's type.
fn ext_inst(f: &Facts, ins: &Instruction, glsl: Option<Word>) -> Res<()> {
    if Some(id_at(ins, 0)?) != glsl {
        return fail("OpExtInst from a set other than GLSL.std.450".into());
    }
    let n = lit_at(ins, 1)?;
    let class = match n {
        1..=4 | 6 | 8..=32 | 37 | 40 | 43 | 46 | 48..=50 | 79..=81 => Class::Float,
        5 | 7 | 38 | 39 | 41 | 42 | 44 | 45 => Class::Int,
        _ => return fail(format!("GLSL.std.450 instruction {n} is not supported")),
    };
    // Drivers read operands by the instruction's arity, not by the word count.
    let arity = match n {
        25 | 26 | 37..=42 | 48 | 79 | 80 => 2,
        43..=46 | 49 | 50 | 81 => 3,
        _ => 1,
    };
    if ins.operands.len() != 2 + arity {
        return fail(format!("GLSL.std.450 instruction {n} takes {arity} operands, got {}", ins.operands.len() - 2));
    }
    same_type(f, ins, 2, Some(class))
}

fn coop(f: &Facts, t: Word) -> Res<(Word, u64, u64, u64, u64)> {
    match f.ty(t)? {
        Ty::CoopMat { comp, scope, rows, cols, usage } => Ok((*comp, *scope, *rows, *cols, *usage)),
        other => fail(format!("%{t} ({other:?}) is not a cooperative matrix")),
    }
}

fn coop_mem(f: &Facts, ins: &Instruction, ptr: usize, layout: usize) -> Res<()> {
    let (class, pointee) = f.pointer(f.ty_of(id_at(ins, ptr)?)?)?;
    if !matches!(class, StorageClass::StorageBuffer | StorageClass::Workgroup) {
        return fail(format!("cooperative matrix memory in {class:?}"));
    }
    f.shape(pointee)?;
    if f.int_const(id_at(ins, layout)?)? > 1 {
        return fail("cooperative matrix layout must be RowMajor or ColumnMajor".into());
    }
    if let Some(Operand::IdRef(stride)) = ins.operands.get(layout + 1) {
        class_is(f, ins, f.ty_of(*stride)?, Class::Int)?;
    }
    Ok(())
}

fn mul_add(f: &Facts, ins: &Instruction) -> Res<()> {
    let [a, b, c] = [0, 1, 2].map(|i| id_at(ins, i).and_then(|v| f.ty_of(v)).and_then(|t| coop(f, t)));
    let (a, b, c) = (a?, b?, c?);
    let ok = a.4 == 0 && b.4 == 1 && c.4 == 2 && a.2 == c.2 && b.3 == c.3 && a.3 == b.2 && a.1 == b.1 && b.1 == c.1;
    if !ok || result(ins)? != f.ty_of(id_at(ins, 2)?)? {
        return fail("OpCooperativeMatrixMulAddKHR operand shapes do not agree".into());
    }
    Ok(())
}

/// Memory semantics: known bits only, at most one ordering.
fn semantics(f: &Facts, ins: &Instruction, i: usize) -> Res<()> {
    const ORDERING: u64 = 0x2 | 0x4 | 0x8 | 0x10;
    const KNOWN: u64 = ORDERING | 0x40 | 0x100 | 0x800;
    const VULKAN_MM: u64 = 0x2000 | 0x4000 | 0x8000;
    let known = if f.vulkan_memory_model { KNOWN | VULKAN_MM } else { KNOWN };
    let s = f.int_const(id_at(ins, i)?)?;
    if s & !known != 0 || (s & ORDERING).count_ones() > 1 {
        return fail(format!("{:?}: memory semantics {s:#x}", ins.class.opcode));
    }
    Ok(())
}

fn atomic(f: &Facts, ins: &Instruction, values: usize) -> Res<()> {
    let (class, pointee) = f.pointer(f.ty_of(id_at(ins, 0)?)?)?;
    if !matches!(class, StorageClass::StorageBuffer | StorageClass::Workgroup) {
        return fail(format!("atomic on {class:?} memory"));
    }
    let r = result(ins)?;
    if pointee != r || f.shape(r)?.1 != 1 || f.class(r)? == Class::Bool {
        return fail("atomic result must be the pointee's scalar type".into());
    }
    scope(f, ins, 1, &[1, SCOPE_WORKGROUP, SCOPE_SUBGROUP])?;
    semantics(f, ins, 2)?;
    let first = ins.operands.len() - values;
    if ins.class.opcode == Op::AtomicCompareExchange {
        semantics(f, ins, 3)?;
    }
    (first..ins.operands.len()).try_for_each(|i| want(f, ins, i, r))
}

fn group(f: &Facts, ins: &Instruction) -> Res<()> {
    use Op::*;
    scope(f, ins, 0, &[SCOPE_SUBGROUP])?;
    let r = result(ins)?;
    use rspirv::spirv::Capability as C;
    let cap = match ins.class.opcode {
        GroupNonUniformElect => C::GroupNonUniform,
        GroupNonUniformAll | GroupNonUniformAny => C::GroupNonUniformVote,
        GroupNonUniformBroadcast | GroupNonUniformBroadcastFirst => C::GroupNonUniformBallot,
        GroupNonUniformShuffle | GroupNonUniformShuffleXor => C::GroupNonUniformShuffle,
        _ => C::GroupNonUniformArithmetic,
    };
    f.needs(&format!("{:?}", ins.class.opcode), &[cap])?;
    match ins.class.opcode {
        GroupNonUniformElect => class_is(f, ins, r, Class::Bool),
        GroupNonUniformAll | GroupNonUniformAny => class_is(f, ins, r, Class::Bool).and_then(|_| want(f, ins, 1, r)),
        GroupNonUniformBroadcastFirst => want(f, ins, 1, r),
        GroupNonUniformBroadcast | GroupNonUniformShuffle | GroupNonUniformShuffleXor => {
            want(f, ins, 1, r)?;
            let lane = f.ty_of(id_at(ins, 2)?)?;
            class_is(f, ins, lane, Class::Int)?;
            if f.shape(lane)?.1 != 1 {
                return fail("a lane index must be a scalar".into());
            }
            Ok(())
        }
        _ => {
            if !matches!(ins.operands.get(1), Some(Operand::GroupOperation(g)) if (*g as u32) <= 2) || ins.operands.len() != 3 {
                return fail(format!("{:?} needs Reduce, InclusiveScan or ExclusiveScan", ins.class.opcode));
            }
            want(f, ins, 2, r)
        }
    }
}

/// Checks one instruction of a function body (`ret`: the function's return type).
pub fn body(f: &Facts, ins: &Instruction, ret: Word, glsl: Option<Word>) -> Res<()> {
    use Class::*;
    use Op::*;
    match ins.class.opcode {
        ConvertFToU | UConvert | UDiv | UMod if matches!(f.ty(f.shape(result(ins)?)?.0)?, Ty::Int { signed: true, .. }) => {
            fail(format!("{:?} must produce an unsigned integer", ins.class.opcode))
        }
        FAdd | FSub | FMul | FDiv | FRem | FMod | FNegate => same_type(f, ins, 0, Some(Float)),
        IAdd | ISub | IMul | UDiv | SDiv | UMod | SRem | SMod | BitwiseAnd | BitwiseOr | BitwiseXor | SNegate | Not => {
            same_type(f, ins, 0, Some(Int))
        }
        LogicalAnd | LogicalOr | LogicalEqual | LogicalNotEqual | LogicalNot => same_type(f, ins, 0, Some(Bool)),
        ShiftLeftLogical | ShiftRightLogical | ShiftRightArithmetic => shift(f, ins),
        FOrdEqual | FOrdNotEqual | FOrdLessThan | FOrdGreaterThan | FOrdLessThanEqual | FOrdGreaterThanEqual
        | FUnordEqual | FUnordNotEqual | FUnordLessThan | FUnordGreaterThan | FUnordLessThanEqual
        | FUnordGreaterThanEqual | IsNan | IsInf => compare(f, ins, Float),
        IEqual | INotEqual | ULessThan | UGreaterThan | ULessThanEqual | UGreaterThanEqual | SLessThan
        | SGreaterThan | SLessThanEqual | SGreaterThanEqual => compare(f, ins, Int),
        Select => {
            let (cc, cn) = f.shape(f.ty_of(id_at(ins, 0)?)?)?;
            let r = result(ins)?;
            if f.ty(cc)? != &Ty::Bool || (cn != 1 && cn != f.shape(r)?.1) {
                return fail("OpSelect condition must be bool of the result's width".into());
            }
            want(f, ins, 1, r).and_then(|_| want(f, ins, 2, r))
        }
        ConvertFToU | ConvertFToS => convert(f, ins, Float, Int),
        ConvertUToF | ConvertSToF => convert(f, ins, Int, Float),
        UConvert | SConvert => convert(f, ins, Int, Int),
        FConvert => convert(f, ins, Float, Float),
        Bitcast => {
            let a = f.ty_of(id_at(ins, 0)?)?;
            if f.bits(a)? != f.bits(result(ins)?)? {
                return fail("OpBitcast between types of different bit widths".into());
            }
            Ok(())
        }
        CopyObject => same_type(f, ins, 0, None),
        Dot => {
            let a = f.ty_of(id_at(ins, 0)?)?;
            class_is(f, ins, a, Float)?;
            want(f, ins, 1, a)?;
            if f.shape(a)?.0 != result(ins)? {
                return fail("OpDot result must be the component type".into());
            }
            Ok(())
        }
        VectorTimesScalar | MatrixTimesScalar => {
            let r = result(ins)?;
            want(f, ins, 0, r)?;
            class_is(f, ins, r, Float)?;
            want(f, ins, 1, f.shape(r)?.0)
        }
        CompositeExtract => composite(f, ins, false),
        CompositeInsert => composite(f, ins, true),
        CompositeConstruct => construct(f, ins, 0),
        VectorExtractDynamic => {
            let v = f.ty_of(id_at(ins, 0)?)?;
            let (comp, n) = f.shape(v)?;
            class_is(f, ins, f.ty_of(id_at(ins, 1)?)?, Int)?;
            if n < 2 || result(ins)? != comp {
                return fail("OpVectorExtractDynamic".into());
            }
            Ok(())
        }
        VectorShuffle => {
            let r = result(ins)?;
            let (rc, rn) = f.shape(r)?;
            let (ac, an) = f.shape(f.ty_of(id_at(ins, 0)?)?)?;
            let (bc, bn) = f.shape(f.ty_of(id_at(ins, 1)?)?)?;
            let lanes: Vec<u32> = (2..ins.operands.len()).map(|i| lit_at(ins, i)).collect::<Res<_>>()?;
            if rc != ac || ac != bc || an < 2 || bn < 2 || lanes.len() as u32 != rn || lanes.iter().any(|&l| l >= an + bn && l != u32::MAX) {
                return fail("OpVectorShuffle operands do not fit".into());
            }
            Ok(())
        }
        Load => {
            let (class, pointee) = f.pointer(f.ty_of(id_at(ins, 0)?)?)?;
            if pointee != result(ins)? || class == StorageClass::Output {
                return fail("OpLoad result is not the pointee type".into());
            }
            Ok(())
        }
        Store => {
            let (class, pointee) = f.pointer(f.ty_of(id_at(ins, 0)?)?)?;
            if matches!(class, StorageClass::Input | StorageClass::PushConstant | StorageClass::Uniform) {
                return fail(format!("OpStore to {class:?} memory"));
            }
            want(f, ins, 1, pointee)
        }
        AccessChain | InBoundsAccessChain => access_chain(f, ins),
        ArrayLength => {
            let (_, pointee) = f.pointer(f.ty_of(id_at(ins, 0)?)?)?;
            let Ty::Struct(m) = f.ty(pointee)? else { return fail("OpArrayLength of a non-struct".into()) };
            let last = lit_at(ins, 1)? as usize;
            if last + 1 != m.len() || !matches!(f.ty(m[last])?, Ty::RuntimeArray { .. }) {
                return fail("OpArrayLength must name the struct's last, runtime-array member".into());
            }
            class_is(f, ins, result(ins)?, Int)
        }
        Variable => {
            let (class, pointee) = f.pointer(result(ins)?)?;
            if class != StorageClass::Function || !matches!(ins.operands.first(), Some(Operand::StorageClass(StorageClass::Function))) {
                return fail("a function-local OpVariable must be in the Function storage class".into());
            }
            match ins.operands.len() {
                1 => Ok(()),
                _ => want(f, ins, 1, pointee),
            }
        }
        Undef => Ok(()),
        Phi => {
            let r = result(ins)?;
            if !ins.operands.len().is_multiple_of(2) || ins.operands.is_empty() {
                return fail("OpPhi operands must be value/parent pairs".into());
            }
            (0..ins.operands.len()).step_by(2).try_for_each(|i| want(f, ins, i, r))
        }
        ExtInst => ext_inst(f, ins, glsl),
        AtomicIAdd | AtomicISub | AtomicSMin | AtomicUMin | AtomicSMax | AtomicUMax | AtomicAnd | AtomicOr | AtomicXor
        | AtomicExchange => atomic(f, ins, 1),
        AtomicFAddEXT => {
            f.needs("OpAtomicFAddEXT", &[rspirv::spirv::Capability::AtomicFloat32AddEXT])?;
            atomic(f, ins, 1)
        }
        AtomicCompareExchange => atomic(f, ins, 2),
        AtomicLoad => atomic(f, ins, 0),
        ControlBarrier => {
            scope(f, ins, 0, &[SCOPE_WORKGROUP, SCOPE_SUBGROUP])?;
            scope(f, ins, 1, &[1, SCOPE_WORKGROUP, SCOPE_SUBGROUP])?;
            semantics(f, ins, 2)
        }
        MemoryBarrier => {
            scope(f, ins, 0, &[1, SCOPE_WORKGROUP, SCOPE_SUBGROUP])?;
            semantics(f, ins, 1)
        }
        GroupNonUniformElect | GroupNonUniformAll | GroupNonUniformAny | GroupNonUniformBroadcast
        | GroupNonUniformBroadcastFirst | GroupNonUniformShuffle | GroupNonUniformShuffleXor | GroupNonUniformIAdd
        | GroupNonUniformFAdd | GroupNonUniformIMul | GroupNonUniformFMul | GroupNonUniformSMin | GroupNonUniformUMin
        | GroupNonUniformFMin | GroupNonUniformSMax | GroupNonUniformUMax | GroupNonUniformFMax
        | GroupNonUniformBitwiseAnd | GroupNonUniformBitwiseOr | GroupNonUniformBitwiseXor
        | GroupNonUniformLogicalAnd | GroupNonUniformLogicalOr | GroupNonUniformLogicalXor => group(f, ins),
        CooperativeMatrixLoadKHR => {
            coop(f, result(ins)?)?;
            coop_mem(f, ins, 0, 1)
        }
        CooperativeMatrixStoreKHR => {
            coop(f, f.ty_of(id_at(ins, 1)?)?)?;
            coop_mem(f, ins, 0, 2)
        }
        CooperativeMatrixMulAddKHR => mul_add(f, ins),
        CooperativeMatrixLengthKHR => {
            coop(f, id_at(ins, 0)?)?;
            class_is(f, ins, result(ins)?, Int)
        }
        SelectionMerge | LoopMerge | Branch | Switch | Unreachable | Line | NoLine => Ok(()),
        BranchConditional => {
            let c = f.ty_of(id_at(ins, 0)?)?;
            if f.ty(c)? != &Ty::Bool || id_at(ins, 1)? == id_at(ins, 2)? {
                return fail("OpBranchConditional needs a bool scalar condition and two different labels".into());
            }
            Ok(())
        }
        Return if f.ty(ret)? == &Ty::Void => Ok(()),
        ReturnValue => want(f, ins, 0, ret),
        op => super::coop2::body(f, ins, op),
    }
}
