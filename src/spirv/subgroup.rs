//! Subgroup operations: reductions and scans, shuffles and broadcasts (votes and elect are
//! one instruction each, in expr.rs).

use rspirv::spirv::{self, GroupOperation, Word};

use crate::error::HeliosResult;
use crate::ir::ast::{Expr, LaneOp, SubgroupFn, SubgroupMode};
use crate::ir::types::{Scalar, Type};

use super::compiler::Compiler;

impl Compiler<'_> {
    pub(crate) fn lower_subgroup(&mut self, f: SubgroupFn, mode: SubgroupMode, a: &Expr, ty: Type) -> HeliosResult<Word> {
        let v = self.expr(a)?;
        let t = self.ty(ty);
        let sg = self.u32_const(spirv::Scope::Subgroup as u32);
        let op = match mode {
            SubgroupMode::Reduce => GroupOperation::Reduce,
            SubgroupMode::Inclusive => GroupOperation::InclusiveScan,
            SubgroupMode::Exclusive => GroupOperation::ExclusiveScan,
        };
        let s = ty.scalar();
        let (float, signed, boolean) = (s.is_float(), s == Scalar::I32, s == Scalar::Bool);
        let r = match f {
            SubgroupFn::Add if float => self.group_non_uniform_f_add(t, None, sg, op, v, None)?,
            SubgroupFn::Add => self.group_non_uniform_i_add(t, None, sg, op, v, None)?,
            SubgroupFn::Mul if float => self.group_non_uniform_f_mul(t, None, sg, op, v, None)?,
            SubgroupFn::Mul => self.group_non_uniform_i_mul(t, None, sg, op, v, None)?,
            SubgroupFn::Min if float => self.group_non_uniform_f_min(t, None, sg, op, v, None)?,
            SubgroupFn::Min if signed => self.group_non_uniform_s_min(t, None, sg, op, v, None)?,
            SubgroupFn::Min => self.group_non_uniform_u_min(t, None, sg, op, v, None)?,
            SubgroupFn::Max if float => self.group_non_uniform_f_max(t, None, sg, op, v, None)?,
            SubgroupFn::Max if signed => self.group_non_uniform_s_max(t, None, sg, op, v, None)?,
            SubgroupFn::Max => self.group_non_uniform_u_max(t, None, sg, op, v, None)?,
            SubgroupFn::And if boolean => self.group_non_uniform_logical_and(t, None, sg, op, v, None)?,
            SubgroupFn::And => self.group_non_uniform_bitwise_and(t, None, sg, op, v, None)?,
            SubgroupFn::Or if boolean => self.group_non_uniform_logical_or(t, None, sg, op, v, None)?,
            SubgroupFn::Or => self.group_non_uniform_bitwise_or(t, None, sg, op, v, None)?,
            SubgroupFn::Xor if boolean => self.group_non_uniform_logical_xor(t, None, sg, op, v, None)?,
            SubgroupFn::Xor => self.group_non_uniform_bitwise_xor(t, None, sg, op, v, None)?,
        };
        Ok(r)
    }

    pub(crate) fn lower_lane(&mut self, op: LaneOp, a: &Expr, b: &Expr, ty: Type) -> HeliosResult<Word> {
        let v = self.expr(a)?;
        let lane = self.expr(b)?;
        let t = self.ty(ty);
        let sg = self.u32_const(spirv::Scope::Subgroup as u32);
        let r = match op {
            LaneOp::Shuffle => self.group_non_uniform_shuffle(t, None, sg, v, lane)?,
            LaneOp::ShuffleXor => self.group_non_uniform_shuffle_xor(t, None, sg, v, lane)?,
            LaneOp::Broadcast => self.group_non_uniform_broadcast(t, None, sg, v, lane)?,
        };
        Ok(r)
    }
}
