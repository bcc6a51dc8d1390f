//! NV tensor layouts (SPV_NV_tensor_addressing, with coopmat2): bounds-checked cooperative
//! matrix loads and stores. A 2-D layout is built per access (dimension, stride, slice); the
//! driver folds the arithmetic, and out-of-range elements are clamped on load, skipped on store.

use rspirv::spirv::{MemoryAccess, TensorAddressingOperands, TensorClampMode, Word};

use crate::error::HeliosResult;
use crate::ir::ast::{Expr, MemRef, TensorAccess, TensorClamp};
use crate::ir::types::Type;

use super::compiler::Compiler;

impl Compiler<'_> {
    /// The tensor layout of `t`: dims, row stride `stride` (elements), sliced to the matrix.
    fn tensor_layout(&mut self, t: &TensorAccess, stride: Word, rows: u32, cols: u32) -> HeliosResult<Word> {
        let two = self.u32_const(2);
        let mode = self.u32_const(match t.clamp {
            TensorClamp::Zero => TensorClampMode::Constant as u32,
            TensorClamp::Edge => TensorClampMode::ClampToEdge as u32,
        });
        let ty = self.type_tensor_layout_nv(two, mode);
        let d0 = self.expr(&t.dims[0])?;
        let d1 = self.expr(&t.dims[1])?;
        let r0 = self.expr(&t.at[0])?;
        let c0 = self.expr(&t.at[1])?;
        let one = self.u32_const(1);
        let nr = self.u32_const(rows);
        let nc = self.u32_const(cols);
        let l = self.create_tensor_layout_nv(ty, None)?;
        let l = self.tensor_layout_set_dimension_nv(ty, None, l, [d0, d1])?;
        let l = self.tensor_layout_set_stride_nv(ty, None, l, [stride, one])?;
        Ok(self.tensor_layout_slice_nv(ty, None, l, [r0, nr, c0, nc])?)
    }

    pub(crate) fn lower_tensor_load(&mut self, mem: MemRef, idx: &Expr, stride: &Expr, t: &TensorAccess, view: Type, ty: Type) -> HeliosResult<Word> {
        let i = self.expr(idx)?;
        let s = self.expr(stride)?;
        let c = ty.coopmat().map(|c| (c.rows, c.cols)).unwrap_or((0, 0));
        let layout = self.tensor_layout(t, s, c.0, c.1)?;
        let (p, _) = self.element_ptr(mem, i, view)?;
        let mt = self.ty(ty);
        let zero = self.scalar_const(ty.scalar(), crate::ir::ast::LitScalar::Num(0.0));
        let init = self.composite_construct(mt, None, [zero])?;
        Ok(self.cooperative_matrix_load_tensor_nv(mt, None, p, init, layout, MemoryAccess::NONE, TensorAddressingOperands::NONE, [])?)
    }

    pub(crate) fn lower_tensor_store(&mut self, mem: MemRef, idx: &Expr, stride: &Expr, t: &TensorAccess, value: &Expr, view: Type) -> HeliosResult<()> {
        let i = self.expr(idx)?;
        let s = self.expr(stride)?;
        let v = self.expr(value)?;
        let c = value.ty.coopmat().map(|c| (c.rows, c.cols)).unwrap_or((0, 0));
        let layout = self.tensor_layout(t, s, c.0, c.1)?;
        let (p, _) = self.element_ptr(mem, i, view)?;
        self.cooperative_matrix_store_tensor_nv(p, v, layout, MemoryAccess::NONE, TensorAddressingOperands::NONE, [])?;
        Ok(())
    }
}
