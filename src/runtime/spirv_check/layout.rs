//! Explicit layout of the blocks a dispatch binds: every storage-buffer and push-constant
//! variable points to a struct decorated Block, whose members (and the structs and arrays inside
//! them) carry Offset and ArrayStride decorations obeying the scalar block layout: offsets and
//! strides aligned to the scalar they hold, members in increasing, non-overlapping order.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Module, Operand};
use rspirv::spirv::{Decoration, Op, StorageClass, Word};

use super::facts::{Facts, Ty};
use super::{fail, Res};

struct Decor {
    blocks: HashSet<Word>,
    strides: HashMap<Word, u64>,
    offsets: HashMap<(Word, u32), u64>,
}

fn decor(module: &Module) -> Decor {
    let mut d = Decor { blocks: HashSet::new(), strides: HashMap::new(), offsets: HashMap::new() };
    for a in &module.annotations {
        match (a.class.opcode, a.operands.as_slice()) {
            (Op::Decorate, [Operand::IdRef(t), Operand::Decoration(Decoration::Block)]) => {
                d.blocks.insert(*t);
            }
            (Op::Decorate, [Operand::IdRef(t), Operand::Decoration(Decoration::ArrayStride), Operand::LiteralBit32(s)]) => {
                d.strides.insert(*t, u64::from(*s));
            }
            (Op::MemberDecorate, [Operand::IdRef(t), Operand::LiteralBit32(m), Operand::Decoration(Decoration::Offset), Operand::LiteralBit32(o)]) => {
                d.offsets.insert((*t, *m), u64::from(*o));
            }
            _ => {}
        }
    }
    d
}

/// (size, alignment) of `t` under the scalar block layout; size `None` for a runtime array.
fn measure(f: &Facts, d: &Decor, t: Word, depth: u32) -> Res<(Option<u64>, u64)> {
    if depth > 16 {
        return fail("blocks nested too deep".into());
    }
    match f.ty(t)? {
        Ty::Int { width, .. } | Ty::Float { width } => Ok((Some(u64::from(*width / 8)), u64::from(*width / 8))),
        Ty::Bool => fail("bool in an explicitly laid out block".into()),
        Ty::Vector { comp, n } => {
            let (s, a) = measure(f, d, *comp, depth + 1)?;
            Ok((s.map(|s| s * u64::from(*n)), a))
        }
        Ty::Array { elem, .. } | Ty::RuntimeArray { elem } => {
            let (s, a) = measure(f, d, *elem, depth + 1)?;
            let Some(&stride) = d.strides.get(&t) else { return fail(format!("array %{t} in a block has no ArrayStride")) };
            if stride % a != 0 || s.is_none_or(|s| stride < s) {
                return fail(format!("ArrayStride {stride} of %{t} does not fit its {s:?}-byte, {a}-aligned elements"));
            }
            Ok((match f.ty(t)? { Ty::Array { len, .. } => Some(stride * len), _ => None }, a))
        }
        Ty::Struct(members) => {
            if depth > 0 && d.blocks.contains(&t) {
                return fail(format!("Block struct %{t} nested inside another block"));
            }
            let mut end = 0u64;
            let mut align = 1u64;
            for (i, &m) in members.iter().enumerate() {
                let Some(&off) = d.offsets.get(&(t, i as u32)) else { return fail(format!("member {i} of block %{t} has no Offset")) };
                let (s, a) = measure(f, d, m, depth + 1)?;
                if off % a != 0 || off < end {
                    return fail(format!("member {i} of block %{t} at offset {off} is misaligned or overlaps the member before"));
                }
                align = align.max(a);
                end = match s {
                    Some(s) => off + s,
                    None => u64::MAX, // a runtime array is the last member (checked with the types)
                };
            }
            Ok(((end != u64::MAX).then_some(end), align))
        }
        other => fail(format!("{other:?} in an explicitly laid out block")),
    }
}

pub fn check(module: &Module, f: &Facts) -> Res<()> {
    let d = decor(module);
    for ins in &module.types_global_values {
        if ins.class.opcode != Op::Variable {
            continue;
        }
        let (class, pointee) = f.pointer(ins.result_type.unwrap_or(0))?;
        if !matches!(class, StorageClass::StorageBuffer | StorageClass::PushConstant) {
            continue;
        }
        if !matches!(f.ty(pointee)?, Ty::Struct(_)) || !d.blocks.contains(&pointee) {
            return fail(format!("{class:?} variable %{} must point to a struct decorated Block", ins.result_id.unwrap_or(0)));
        }
        let (size, _) = measure(f, &d, pointee, 0)?;
        if class == StorageClass::PushConstant && size.is_none() {
            return fail("a push-constant block cannot hold a runtime array".into());
        }
    }
    Ok(())
}

/// Bytes of a Workgroup variable's type (no explicit layout: tightly packed).
fn natural_size(f: &Facts, t: Word, depth: u32) -> Res<u64> {
    if depth > 16 {
        return fail("types nested too deep".into());
    }
    Ok(match f.ty(t)? {
        Ty::Bool => 4,
        Ty::Int { width, .. } | Ty::Float { width } => u64::from(*width / 8),
        Ty::Vector { comp, n } => natural_size(f, *comp, depth + 1)? * u64::from(*n),
        Ty::Array { elem, len } => natural_size(f, *elem, depth + 1)?.saturating_mul(*len),
        Ty::Struct(m) => m.iter().map(|&x| natural_size(f, x, depth + 1)).sum::<Res<u64>>()?,
        other => return fail(format!("{other:?} in workgroup memory")),
    })
}

/// The Workgroup variables fit the device's shared memory.
pub fn shared_memory(module: &Module, f: &Facts, caps: &crate::caps::DeviceCaps) -> Res<()> {
    let mut total = 0u64;
    for ins in module.types_global_values.iter().filter(|i| i.class.opcode == Op::Variable) {
        let (class, pointee) = f.pointer(ins.result_type.unwrap_or(0))?;
        // Runtime arrays live only in storage buffers; natural_size refuses them elsewhere.
        match class {
            StorageClass::Workgroup => total = total.saturating_add(natural_size(f, pointee, 0)?),
            StorageClass::Private | StorageClass::Function => {
                natural_size(f, pointee, 0)?;
            }
            _ => {}
        }
    }
    if total > u64::from(caps.max_shared_memory_bytes) {
        return fail(format!("{total} bytes of shared memory, over the device's {}", caps.max_shared_memory_bytes));
    }
    Ok(())
}
