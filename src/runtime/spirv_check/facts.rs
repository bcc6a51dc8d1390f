//! What the validator knows about a module's ids: the defining instruction of every id, the
//! decoded types and the integer values of constants.

use std::collections::HashMap;

use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{Op, StorageClass, Word};

use super::{fail, Res};

/// A decoded type. Non-aggregate types are unique in a valid module, so ids compare as types.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ty {
    Void,
    Bool,
    Int { width: u32, signed: bool },
    Float { width: u32 },
    Vector { comp: Word, n: u32 },
    Array { elem: Word, len: u64 },
    RuntimeArray { elem: Word },
    Struct(Vec<Word>),
    Pointer { class: StorageClass, pointee: Word },
    Function { ret: Word, params: Vec<Word> },
    /// KHR cooperative matrix: component type, scope, rows, cols, use (0 A, 1 B, 2 accumulator).
    CoopMat { comp: Word, scope: u64, rows: u64, cols: u64, usage: u64 },
    /// NV tensor layouts and views (VK_NV_cooperative_matrix2): opaque to these checks.
    Opaque,
}

/// Numeric class of a scalar, vector or cooperative matrix (its component type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Bool,
    Int,
    Float,
}

#[derive(Default)]
pub struct Facts<'m> {
    pub defs: HashMap<Word, &'m Instruction>,
    pub types: HashMap<Word, Ty>,
    /// Values of integer OpConstant / OpSpecConstant (defaults: Helios never overrides them
    /// with other values than the defaults baked into the module).
    pub ints: HashMap<Word, u64>,
    /// The module declares the VulkanMemoryModel capability (Volatile, MakeAvailable and
    /// MakeVisible semantics need it).
    pub vulkan_memory_model: bool,
    /// Capabilities the module declares (types and instructions that need one check it).
    pub declared: Vec<rspirv::spirv::Capability>,
    /// Non-aggregate types seen so far (uniqueness in O(1) per declaration).
    pub unique: std::collections::HashSet<Ty>,
}

pub fn id_at(ins: &Instruction, i: usize) -> Res<Word> {
    match ins.operands.get(i) {
        Some(Operand::IdRef(id) | Operand::IdScope(id) | Operand::IdMemorySemantics(id)) => Ok(*id),
        _ => fail(format!("{:?} lacks id operand {i}", ins.class.opcode)),
    }
}

pub fn lit_at(ins: &Instruction, i: usize) -> Res<u32> {
    match ins.operands.get(i) {
        Some(Operand::LiteralBit32(v) | Operand::LiteralExtInstInteger(v)) => Ok(*v),
        Some(Operand::LiteralSpecConstantOpInteger(op)) => Ok(*op as u32),
        _ => fail(format!("{:?} lacks literal operand {i}", ins.class.opcode)),
    }
}

impl<'m> Facts<'m> {
    /// Fails unless the module declares one of `any`.
    pub fn needs(&self, what: &str, any: &[rspirv::spirv::Capability]) -> Res<()> {
        if any.iter().any(|c| self.declared.contains(c)) {
            return Ok(());
        }
        fail(format!("{what} needs capability {any:?}"))
    }

    pub fn ty(&self, id: Word) -> Res<&Ty> {
        match self.types.get(&id) {
            Some(t) => Ok(t),
            None => fail(format!("%{id} is not a type")),
        }
    }

    /// The type of value `id` (a constant, variable, parameter or instruction result).
    pub fn ty_of(&self, id: Word) -> Res<Word> {
        let Some(def) = self.defs.get(&id) else { return fail(format!("%{id} is not defined")) };
        match (def.class.opcode, def.result_type) {
            (Op::Function | Op::Label, _) | (_, None) => fail(format!("%{id} ({:?}) is not a value", def.class.opcode)),
            (_, Some(t)) => Ok(t),
        }
    }

    pub fn int_const(&self, id: Word) -> Res<u64> {
        match self.ints.get(&id) {
            Some(v) => Ok(*v),
            None => fail(format!("%{id} must be an integer constant")),
        }
    }

    /// Component type and count of a scalar or vector type (count 1 for scalars).
    pub fn shape(&self, t: Word) -> Res<(Word, u32)> {
        match self.ty(t)? {
            Ty::Vector { comp, n } => Ok((*comp, *n)),
            Ty::Bool | Ty::Int { .. } | Ty::Float { .. } => Ok((t, 1)),
            Ty::CoopMat { comp, .. } => Ok((*comp, 0)),
            other => fail(format!("%{t} ({other:?}) is not a scalar, vector or cooperative matrix")),
        }
    }

    pub fn class(&self, t: Word) -> Res<Class> {
        let (comp, _) = self.shape(t)?;
        Ok(match self.ty(comp)? {
            Ty::Bool => Class::Bool,
            Ty::Int { .. } => Class::Int,
            _ => Class::Float,
        })
    }

    pub fn bits(&self, t: Word) -> Res<u64> {
        let (comp, n) = self.shape(t)?;
        let w = match self.ty(comp)? {
            Ty::Int { width, .. } | Ty::Float { width } => *width,
            _ => return fail(format!("%{t} has no bit width")),
        };
        Ok(u64::from(w) * u64::from(n.max(1)))
    }

    pub fn pointer(&self, t: Word) -> Res<(StorageClass, Word)> {
        match self.ty(t)? {
            Ty::Pointer { class, pointee } => Ok((*class, *pointee)),
            other => fail(format!("%{t} ({other:?}) is not a pointer type")),
        }
    }

    /// The type one index further into `t` (`constant`: the index value when it is known).
    pub fn step_into(&self, t: Word, constant: Option<u64>) -> Res<Word> {
        let out_of = |len: u64| match constant {
            Some(i) if i >= len => fail(format!("index {i} is past the {len} elements of %{t}")),
            _ => Ok(()),
        };
        match self.ty(t)? {
            Ty::Vector { comp, n } => out_of(u64::from(*n)).map(|_| *comp),
            Ty::Array { elem, len } => out_of(*len).map(|_| *elem),
            Ty::RuntimeArray { elem } => Ok(*elem),
            Ty::CoopMat { comp, .. } => Ok(*comp),
            Ty::Struct(members) => match constant {
                Some(i) if (i as usize) < members.len() => Ok(members[i as usize]),
                Some(i) => fail(format!("member {i} of %{t}, which has {} members", members.len())),
                None => fail(format!("a struct (%{t}) must be indexed by a constant")),
            },
            other => fail(format!("%{t} ({other:?}) cannot be indexed")),
        }
    }
}
