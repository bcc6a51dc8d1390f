//! Expression dispatch and the value-producing leaves: literals, names, push constants, spec
//! constants, builtins, swizzles, vector construction and select.

use rspirv::dr::Operand;
use rspirv::spirv::{self, Decoration, StorageClass, Word};

use crate::error::{HeliosError, HeliosResult};
use crate::ir::ast::{Builtin, Expr, ExprKind};
use crate::ir::types::{Scalar, Type};

use super::compiler::{Compiler, SlotVal};

impl Compiler<'_> {
    pub(crate) fn expr(&mut self, e: &Expr) -> HeliosResult<Word> {
        match &e.kind {
            ExprKind::Lit(lanes) => Ok(self.value_const(e.ty, lanes)),
            ExprKind::Get { slot, idx } => self.lower_get(*slot, idx.as_deref(), e.ty),
            ExprKind::Push(i) => self.lower_push(*i, e.ty),
            ExprKind::Spec(i) => Ok(self.spec_ids[*i as usize]),
            ExprKind::Builtin(b) => self.lower_builtin(*b, e.ty),
            ExprKind::Load { mem, idx, vec } => self.lower_load(*mem, idx, *vec, e.ty),
            ExprKind::Swizzle { a, comps, n } => {
                let v = self.expr(a)?;
                let t = self.ty(e.ty);
                if *n == 1 {
                    Ok(self.composite_extract(t, None, v, [u32::from(comps[0])])?)
                } else {
                    let cs: Vec<u32> = comps[..usize::from(*n)].iter().map(|&c| u32::from(c)).collect();
                    Ok(self.vector_shuffle(t, None, v, v, cs)?)
                }
            }
            ExprKind::Construct(args) => {
                let mut ids = Vec::with_capacity(4);
                for a in args {
                    ids.push(self.expr(a)?);
                }
                if ids.len() == 1 && args[0].ty.width() == 1 {
                    ids = vec![ids[0]; usize::from(e.ty.width())];
                }
                let t = self.ty(e.ty);
                Ok(self.composite_construct(t, None, ids)?)
            }
            ExprKind::Binary { op, a, b } => self.lower_binary(*op, a, b, e.ty),
            ExprKind::Unary { op, a } => self.lower_unary(*op, a, e.ty),
            ExprKind::Ternary { op, a, b, c } => self.lower_ternary(*op, a, b, c, e.ty),
            ExprKind::Select { c, a, b } => {
                let cv = self.expr(c)?;
                let av = self.expr(a)?;
                let bv = self.expr(b)?;
                let t = self.ty(e.ty);
                Ok(self.select(t, None, cv, av, bv)?)
            }
            ExprKind::Cast(a) => self.lower_cast(a, e.ty),
            ExprKind::Bitcast(a) => {
                let v = self.expr(a)?;
                let t = self.ty(e.ty);
                Ok(self.bitcast(t, None, v)?)
            }
            ExprKind::Subgroup { f, mode, a } => self.lower_subgroup(*f, *mode, a, e.ty),
            ExprKind::Lane { op, a, b } => self.lower_lane(*op, a, b, e.ty),
            ExprKind::BroadcastFirst(a) => {
                let v = self.expr(a)?;
                let t = self.ty(e.ty);
                let sg = self.u32_const(spirv::Scope::Subgroup as u32);
                Ok(self.group_non_uniform_broadcast_first(t, None, sg, v)?)
            }
            ExprKind::Elect => {
                let t = self.ty(Type::BOOL);
                let sg = self.u32_const(spirv::Scope::Subgroup as u32);
                Ok(self.group_non_uniform_elect(t, None, sg)?)
            }
            ExprKind::Vote { all, a } => {
                let v = self.expr(a)?;
                let t = self.ty(Type::BOOL);
                let sg = self.u32_const(spirv::Scope::Subgroup as u32);
                if *all {
                    Ok(self.group_non_uniform_all(t, None, sg, v)?)
                } else {
                    Ok(self.group_non_uniform_any(t, None, sg, v)?)
                }
            }
            ExprKind::Atomic { f, mem, idx, a, cmp } => self.lower_atomic(*f, *mem, idx, a, cmp.as_deref(), e.ty),
            ExprKind::CmFill(a) => {
                let v = self.expr(a)?;
                let t = self.ty(e.ty);
                Ok(self.composite_construct(t, None, [v])?)
            }
            ExprKind::CmLoad { mem, idx, stride, layout, view, tensor } => match tensor {
                Some(t) => self.lower_tensor_load(*mem, idx, stride, t, *view, e.ty),
                None => self.lower_coop_load(*mem, idx, stride, *layout, *view, e.ty),
            },
            ExprKind::CmMulAdd { a, b, c, sat } => self.lower_coop_muladd(a, b, c, *sat, e.ty),
            ExprKind::CmLen(c) => {
                let ct = self.ty(Type::CoopMat(*c));
                let u = self.scalar_ty(Scalar::U32);
                Ok(self.cooperative_matrix_length_khr(u, None, ct)?)
            }
        }
    }

    fn lower_get(&mut self, slot: u32, idx: Option<&Expr>, ty: Type) -> HeliosResult<Word> {
        match (self.slots[slot as usize], idx) {
            (SlotVal::Value(v), None) => Ok(v),
            (SlotVal::Value(v), Some(i)) => {
                // dynamic lane of an SSA vector
                let iv = self.expr(i)?;
                let t = self.ty(ty);
                Ok(self.vector_extract_dynamic(t, None, v, iv)?)
            }
            (SlotVal::Ptr(_), _) => {
                let p = self.slot_ptr(slot, idx, ty)?;
                let t = self.ty(ty);
                Ok(self.load(t, None, p, None, [])?)
            }
            (SlotVal::None, _) => Err(HeliosError::internal(format!("{}: slot {slot} read before definition (lowering bug)", self.k.name))),
        }
    }

    fn lower_push(&mut self, field: u32, ty: Type) -> HeliosResult<Word> {
        let var = match self.push_var {
            Some(v) => v,
            None => self.declare_push_block(),
        };
        let t = self.ty(ty);
        let p = self.ptr(StorageClass::PushConstant, t);
        let i = self.u32_const(field);
        let fp = self.access_chain(p, None, var, [i])?;
        Ok(self.load(t, None, fp, None, [])?)
    }

    fn declare_push_block(&mut self) -> Word {
        let fields: Vec<(Type, u32)> = self.k.push.iter().map(|f| (f.ty, f.offset)).collect();
        let members: Vec<Word> = fields.iter().map(|(t, _)| self.ty(*t)).collect();
        let st = self.type_struct(members);
        self.decorate(st, Decoration::Block, []);
        for (i, (_, off)) in fields.iter().enumerate() {
            self.member_decorate(st, i as u32, Decoration::Offset, [Operand::LiteralBit32(*off)]);
        }
        let p = self.ptr(StorageClass::PushConstant, st);
        let v = self.global_var(p, StorageClass::PushConstant);
        self.name(v, "push");
        self.push_var = Some(v);
        v
    }

    fn lower_builtin(&mut self, b: Builtin, ty: Type) -> HeliosResult<Word> {
        let var = match self.builtins.get(&b) {
            Some(&v) => v,
            None => {
                let t = self.ty(ty);
                let p = self.ptr(StorageClass::Input, t);
                let v = self.global_var(p, StorageClass::Input);
                let bi = match b {
                    Builtin::GlobalId => spirv::BuiltIn::GlobalInvocationId,
                    Builtin::LocalId => spirv::BuiltIn::LocalInvocationId,
                    Builtin::WorkgroupId => spirv::BuiltIn::WorkgroupId,
                    Builtin::NumWorkgroups => spirv::BuiltIn::NumWorkgroups,
                    Builtin::LocalIndex => spirv::BuiltIn::LocalInvocationIndex,
                    Builtin::SubgroupId => spirv::BuiltIn::SubgroupId,
                    Builtin::SubgroupSize => spirv::BuiltIn::SubgroupSize,
                    Builtin::SubgroupInvocation => spirv::BuiltIn::SubgroupLocalInvocationId,
                    Builtin::NumSubgroups => spirv::BuiltIn::NumSubgroups,
                };
                self.decorate(v, Decoration::BuiltIn, [Operand::BuiltIn(bi)]);
                self.builtins.insert(b, v);
                v
            }
        };
        let t = self.ty(ty);
        Ok(self.load(t, None, var, None, [])?)
    }
}
