//! Arithmetic, comparison, logic and bit operations, and GLSL.std.450 math.

use rspirv::dr::Operand;
use rspirv::spirv::Word;

use crate::error::HeliosResult;
use crate::ir::ast::{BinOp, Expr, TernOp, UnOp};
use crate::ir::types::{Scalar, Type};

use super::compiler::Compiler;

/// GLSL.std.450 instruction numbers.
mod glsl {
    pub const ROUND: u32 = 1;
    pub const TRUNC: u32 = 3;
    pub const FABS: u32 = 4;
    pub const SABS: u32 = 5;
    pub const FSIGN: u32 = 6;
    pub const SSIGN: u32 = 7;
    pub const FLOOR: u32 = 8;
    pub const CEIL: u32 = 9;
    pub const FRACT: u32 = 10;
    pub const SIN: u32 = 13;
    pub const COS: u32 = 14;
    pub const TANH: u32 = 21;
    pub const ATAN2: u32 = 25;
    pub const POW: u32 = 26;
    pub const EXP: u32 = 27;
    pub const LOG: u32 = 28;
    pub const EXP2: u32 = 29;
    pub const LOG2: u32 = 30;
    pub const SQRT: u32 = 31;
    pub const INVERSE_SQRT: u32 = 32;
    pub const FMIN: u32 = 37;
    pub const UMIN: u32 = 38;
    pub const SMIN: u32 = 39;
    pub const FMAX: u32 = 40;
    pub const UMAX: u32 = 41;
    pub const SMAX: u32 = 42;
    pub const FCLAMP: u32 = 43;
    pub const UCLAMP: u32 = 44;
    pub const SCLAMP: u32 = 45;
    pub const FMIX: u32 = 46;
    pub const STEP: u32 = 48;
    pub const FMA: u32 = 50;
}

impl Compiler<'_> {
    pub(crate) fn glsl_call(&mut self, ty: Type, inst: u32, args: &[Word]) -> HeliosResult<Word> {
        let t = self.ty(ty);
        let set = self.glsl;
        let ops: Vec<Operand> = args.iter().map(|&a| Operand::IdRef(a)).collect();
        Ok(self.ext_inst(t, None, set, inst, ops)?)
    }

    /// Widens a scalar operand to the vector type `to` (vector ⊗ scalar forms without an opcode).
    fn splat(&mut self, v: Word, from: Type, to: Type) -> HeliosResult<Word> {
        if from == to || to.is_coopmat() {
            return Ok(v);
        }
        let t = self.ty(to);
        Ok(self.composite_construct(t, None, vec![v; usize::from(to.width())])?)
    }

    pub(crate) fn lower_binary(&mut self, op: BinOp, a: &Expr, b: &Expr, ty: Type) -> HeliosResult<Word> {
        let mut av = self.expr(a)?;
        let mut bv = self.expr(b)?;
        let s = a.ty.scalar();
        let t = self.ty(ty);
        let bool_t = ty;
        let float = s.is_float();
        let signed = s == Scalar::I32;
        // Vector/coopmat times scalar.
        if op == BinOp::Mul && a.ty != b.ty {
            if ty.is_coopmat() {
                return Ok(self.matrix_times_scalar(t, None, av, bv)?);
            }
            let (vec, sc) = if a.ty.width() > 1 { (av, bv) } else { (bv, av) };
            if float {
                return Ok(self.vector_times_scalar(t, None, vec, sc)?);
            }
            let wide = self.splat(sc, Type::Scalar(s), ty)?;
            return Ok(self.i_mul(t, None, vec, wide)?);
        }
        if op == BinOp::Div && a.ty != b.ty {
            bv = self.splat(bv, b.ty, a.ty)?;
        }
        if matches!(op, BinOp::Shl | BinOp::Shr) && a.ty.width() != b.ty.width() {
            av = self.splat(av, a.ty, ty)?;
        }
        let r = match op {
            BinOp::Add if float => self.f_add(t, None, av, bv)?,
            BinOp::Add => self.i_add(t, None, av, bv)?,
            BinOp::Sub if float => self.f_sub(t, None, av, bv)?,
            BinOp::Sub => self.i_sub(t, None, av, bv)?,
            BinOp::Mul if float => self.f_mul(t, None, av, bv)?,
            BinOp::Mul => self.i_mul(t, None, av, bv)?,
            BinOp::Div if float => self.f_div(t, None, av, bv)?,
            BinOp::Div if signed => self.s_div(t, None, av, bv)?,
            BinOp::Div => self.u_div(t, None, av, bv)?,
            BinOp::Rem if float => self.f_rem(t, None, av, bv)?,
            // x - y * (x / y), not OpSRem: NVIDIA's driver (580, H200) computes OpSRem of a negative
            // operand as an unsigned remainder (-7 rem 3 gave 0); OpSDiv truncates correctly there.
            BinOp::Rem if signed => {
                let q = self.s_div(t, None, av, bv)?;
                let yq = self.i_mul(t, None, bv, q)?;
                self.i_sub(t, None, av, yq)?
            }
            BinOp::Rem => self.u_mod(t, None, av, bv)?,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                return self.lower_compare(op, s, av, bv, bool_t);
            }
            BinOp::And => self.logical_and(t, None, av, bv)?,
            BinOp::Or => self.logical_or(t, None, av, bv)?,
            BinOp::Xor => self.logical_not_equal(t, None, av, bv)?,
            BinOp::BAnd => self.bitwise_and(t, None, av, bv)?,
            BinOp::BOr => self.bitwise_or(t, None, av, bv)?,
            BinOp::BXor => self.bitwise_xor(t, None, av, bv)?,
            BinOp::Shl => self.shift_left_logical(t, None, av, bv)?,
            BinOp::Shr if signed => self.shift_right_arithmetic(t, None, av, bv)?,
            BinOp::Shr => self.shift_right_logical(t, None, av, bv)?,
            BinOp::Pow => self.glsl_call(ty, glsl::POW, &[av, bv])?,
            BinOp::Atan2 => self.glsl_call(ty, glsl::ATAN2, &[av, bv])?,
            BinOp::Step => self.glsl_call(ty, glsl::STEP, &[av, bv])?,
            BinOp::Min => {
                let i = if float { glsl::FMIN } else if signed { glsl::SMIN } else { glsl::UMIN };
                self.glsl_call(ty, i, &[av, bv])?
            }
            BinOp::Max => {
                let i = if float { glsl::FMAX } else if signed { glsl::SMAX } else { glsl::UMAX };
                self.glsl_call(ty, i, &[av, bv])?
            }
            BinOp::Dot => self.dot(t, None, av, bv)?,
        };
        Ok(r)
    }

    fn lower_compare(&mut self, op: BinOp, s: Scalar, a: Word, b: Word, ty: Type) -> HeliosResult<Word> {
        let t = self.ty(ty);
        let r = match (s, op) {
            (Scalar::Bool, BinOp::Eq) => self.logical_equal(t, None, a, b)?,
            (Scalar::Bool, _) => self.logical_not_equal(t, None, a, b)?,
            // Ordered comparisons (false with NaN), except != which is true with NaN, like C.
            (s, BinOp::Lt) if s.is_float() => self.f_ord_less_than(t, None, a, b)?,
            (s, BinOp::Le) if s.is_float() => self.f_ord_less_than_equal(t, None, a, b)?,
            (s, BinOp::Gt) if s.is_float() => self.f_ord_greater_than(t, None, a, b)?,
            (s, BinOp::Ge) if s.is_float() => self.f_ord_greater_than_equal(t, None, a, b)?,
            (s, BinOp::Eq) if s.is_float() => self.f_ord_equal(t, None, a, b)?,
            (s, BinOp::Ne) if s.is_float() => self.f_unord_not_equal(t, None, a, b)?,
            (Scalar::I32, BinOp::Lt) => self.s_less_than(t, None, a, b)?,
            (Scalar::I32, BinOp::Le) => self.s_less_than_equal(t, None, a, b)?,
            (Scalar::I32, BinOp::Gt) => self.s_greater_than(t, None, a, b)?,
            (Scalar::I32, BinOp::Ge) => self.s_greater_than_equal(t, None, a, b)?,
            (_, BinOp::Lt) => self.u_less_than(t, None, a, b)?,
            (_, BinOp::Le) => self.u_less_than_equal(t, None, a, b)?,
            (_, BinOp::Gt) => self.u_greater_than(t, None, a, b)?,
            (_, BinOp::Ge) => self.u_greater_than_equal(t, None, a, b)?,
            (_, BinOp::Eq) => self.i_equal(t, None, a, b)?,
            (_, _) => self.i_not_equal(t, None, a, b)?,
        };
        Ok(r)
    }

    pub(crate) fn lower_unary(&mut self, op: UnOp, a: &Expr, ty: Type) -> HeliosResult<Word> {
        let v = self.expr(a)?;
        let t = self.ty(ty);
        let s = ty.scalar();
        let float = s.is_float();
        let g = |i: u32| i;
        let inst = match op {
            UnOp::Neg if float => return Ok(self.f_negate(t, None, v)?),
            UnOp::Neg => return Ok(self.s_negate(t, None, v)?),
            UnOp::Not => return Ok(self.logical_not(t, None, v)?),
            UnOp::BNot => return Ok(self.not(t, None, v)?),
            UnOp::Exp => g(glsl::EXP),
            UnOp::Exp2 => g(glsl::EXP2),
            UnOp::Log => g(glsl::LOG),
            UnOp::Log2 => g(glsl::LOG2),
            UnOp::Sqrt => g(glsl::SQRT),
            UnOp::Rsqrt => g(glsl::INVERSE_SQRT),
            UnOp::Tanh => g(glsl::TANH),
            UnOp::Sin => g(glsl::SIN),
            UnOp::Cos => g(glsl::COS),
            UnOp::Abs => if float { glsl::FABS } else { glsl::SABS },
            UnOp::Sign => if float { glsl::FSIGN } else { glsl::SSIGN },
            UnOp::Floor => glsl::FLOOR,
            UnOp::Ceil => glsl::CEIL,
            UnOp::Round => glsl::ROUND,
            UnOp::Trunc => glsl::TRUNC,
            UnOp::Fract => glsl::FRACT,
        };
        self.glsl_call(ty, inst, &[v])
    }

    pub(crate) fn lower_ternary(&mut self, op: TernOp, a: &Expr, b: &Expr, c: &Expr, ty: Type) -> HeliosResult<Word> {
        let av = self.expr(a)?;
        let bv = self.expr(b)?;
        let cv = self.expr(c)?;
        let s = ty.scalar();
        let inst = match op {
            TernOp::Fma => glsl::FMA,
            TernOp::Mix => glsl::FMIX,
            TernOp::Clamp if s.is_float() => glsl::FCLAMP,
            TernOp::Clamp if s == Scalar::I32 => glsl::SCLAMP,
            TernOp::Clamp => glsl::UCLAMP,
        };
        self.glsl_call(ty, inst, &[av, bv, cv])
    }
}
