//! Cooperative matrices (SPV_KHR_cooperative_matrix; workgroup scope for NV coopmat2): load and
//! store from storage buffers and shared memory, multiply-add. Fill, length and element-wise
//! arithmetic reuse the generic paths (OpCompositeConstruct, OpFAdd, OpMatrixTimesScalar).

use rspirv::spirv::{CooperativeMatrixLayout, CooperativeMatrixOperands, Word};

use crate::error::HeliosResult;
use crate::ir::ast::{Expr, Layout, MemRef};
use crate::ir::types::{Scalar, Type};

use super::compiler::Compiler;

impl Compiler<'_> {
    fn layout_id(&mut self, layout: Layout) -> Word {
        self.u32_const(match layout {
            Layout::Row => CooperativeMatrixLayout::RowMajorKHR as u32,
            Layout::Col => CooperativeMatrixLayout::ColumnMajorKHR as u32,
        })
    }

    pub(crate) fn lower_coop_load(&mut self, mem: MemRef, idx: &Expr, stride: &Expr, layout: Layout, view: Type, ty: Type) -> HeliosResult<Word> {
        let i = self.expr(idx)?;
        let s = self.expr(stride)?;
        let (p, _) = self.element_ptr(mem, i, view)?;
        let l = self.layout_id(layout);
        let t = self.ty(ty);
        Ok(self.cooperative_matrix_load_khr(t, None, p, l, Some(s), None, [])?)
    }

    pub(crate) fn lower_coop_store(&mut self, mem: MemRef, idx: &Expr, stride: &Expr, layout: Layout, value: &Expr, view: Type) -> HeliosResult<()> {
        let i = self.expr(idx)?;
        let s = self.expr(stride)?;
        let v = self.expr(value)?;
        let (p, _) = self.element_ptr(mem, i, view)?;
        let l = self.layout_id(layout);
        self.cooperative_matrix_store_khr(p, v, l, Some(s), None, [])?;
        Ok(())
    }

    pub(crate) fn lower_coop_muladd(&mut self, a: &Expr, b: &Expr, c: &Expr, sat: bool, ty: Type) -> HeliosResult<Word> {
        let av = self.expr(a)?;
        let bv = self.expr(b)?;
        let cv = self.expr(c)?;
        let mut ops = CooperativeMatrixOperands::NONE_KHR;
        if a.ty.scalar() == Scalar::I32 {
            ops |= CooperativeMatrixOperands::MATRIX_A_SIGNED_COMPONENTS_KHR;
        }
        if b.ty.scalar() == Scalar::I32 {
            ops |= CooperativeMatrixOperands::MATRIX_B_SIGNED_COMPONENTS_KHR;
        }
        if c.ty.scalar() == Scalar::I32 {
            ops |= CooperativeMatrixOperands::MATRIX_C_SIGNED_COMPONENTS_KHR
                | CooperativeMatrixOperands::MATRIX_RESULT_SIGNED_COMPONENTS_KHR;
        }
        if sat {
            ops |= CooperativeMatrixOperands::SATURATING_ACCUMULATION_KHR;
        }
        let t = self.ty(ty);
        let operands = if ops.is_empty() { None } else { Some(ops) };
        Ok(self.cooperative_matrix_mul_add_khr(t, None, av, bv, cv, operands)?)
    }
}
