//! Numeric conversions (`cast`): float↔int, width changes, bool↔number, and coopmat component
//! conversions. `bitcast` is a single OpBitcast in expr.rs.

use rspirv::spirv::Word;

use crate::error::{HeliosError, HeliosResult};
use crate::ir::ast::{Expr, LitScalar};
use crate::ir::types::{CoopMatType, Scalar, Type};

use super::compiler::Compiler;

impl Compiler<'_> {
    pub(crate) fn lower_cast(&mut self, a: &Expr, to: Type) -> HeliosResult<Word> {
        let mut v = self.expr(a)?;
        let (fs, ts) = (a.ty.scalar(), to.scalar());
        if a.ty == to {
            return Ok(v);
        }
        if let (Some(f), Some(g)) = (a.ty.coopmat(), to.coopmat()) {
            if f.use_ != g.use_ {
                // Component type first (acc f32 -> acc f16), then the use (acc -> a/b).
                let mid = Type::CoopMat(CoopMatType { use_: f.use_, ..g });
                if mid != a.ty {
                    let tm = self.ty(mid);
                    v = if fs.is_float() && ts.is_float() { self.f_convert(tm, None, v)? } else { return Err(HeliosError::internal("non-float coopmat use conversion (decoder bug)")) };
                }
                let t = self.ty(to);
                return Ok(self.cooperative_matrix_convert_nv(t, None, v)?);
            }
        }
        let t = self.ty(to);
        let r = match (fs, ts) {
            (Scalar::Bool, _) => {
                let one = self.splat_const(to, LitScalar::Num(1.0));
                let zero = self.splat_const(to, LitScalar::Num(0.0));
                self.select(t, None, v, one, zero)?
            }
            (f, Scalar::Bool) => {
                let zero = self.splat_const(a.ty, LitScalar::Num(0.0));
                if f.is_float() {
                    // NaN is truthy, as in C: unordered not-equal.
                    self.f_unord_not_equal(t, None, v, zero)?
                } else {
                    self.i_not_equal(t, None, v, zero)?
                }
            }
            (f, g) if f.is_float() && g.is_float() => self.f_convert(t, None, v)?,
            (f, Scalar::I32) if f.is_float() => self.convert_f_to_s(t, None, v)?,
            (f, _) if f.is_float() => self.convert_f_to_u(t, None, v)?,
            (Scalar::I32, g) if g.is_float() => self.convert_s_to_f(t, None, v)?,
            (_, g) if g.is_float() => self.convert_u_to_f(t, None, v)?,
            // i32 <-> u32: same bits (coopmats need a component conversion, not a bitcast)
            _ if to.is_coopmat() && fs == Scalar::I32 => self.s_convert(t, None, v)?,
            _ if to.is_coopmat() => self.u_convert(t, None, v)?,
            _ => self.bitcast(t, None, v)?,
        };
        Ok(r)
    }
}
