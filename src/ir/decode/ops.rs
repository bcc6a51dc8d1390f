//! Typing rules for arithmetic, comparison, logic, bit ops, math, select and conversions.
//! No implicit conversions: mixed types are errors (`f16 + f32`).

use crate::error::HeliosResult;

use super::super::ast::{BinOp, Expr, ExprKind, TernOp, UnOp};
use super::super::path::Path;
use super::super::types::{CoopUse, Scalar, Type};
use crate::caps::CoopScope;
use super::{Decoder, Obj};

fn bin_op(op: &str) -> Option<BinOp> {
    Some(match op {
        "add" => BinOp::Add, "sub" => BinOp::Sub, "mul" => BinOp::Mul, "div" => BinOp::Div, "rem" => BinOp::Rem,
        "lt" => BinOp::Lt, "le" => BinOp::Le, "gt" => BinOp::Gt, "ge" => BinOp::Ge, "eq" => BinOp::Eq, "ne" => BinOp::Ne,
        "and" => BinOp::And, "or" => BinOp::Or, "xor" => BinOp::Xor,
        "band" => BinOp::BAnd, "bor" => BinOp::BOr, "bxor" => BinOp::BXor, "shl" => BinOp::Shl, "shr" => BinOp::Shr,
        "pow" => BinOp::Pow, "atan2" => BinOp::Atan2, "min" => BinOp::Min, "max" => BinOp::Max, "step" => BinOp::Step,
        "dot" => BinOp::Dot,
        _ => return None,
    })
}

fn un_op(op: &str) -> Option<UnOp> {
    Some(match op {
        "neg" => UnOp::Neg, "not" => UnOp::Not, "bnot" => UnOp::BNot,
        "exp" => UnOp::Exp, "exp2" => UnOp::Exp2, "log" => UnOp::Log, "log2" => UnOp::Log2,
        "sqrt" => UnOp::Sqrt, "rsqrt" => UnOp::Rsqrt, "tanh" => UnOp::Tanh, "sin" => UnOp::Sin, "cos" => UnOp::Cos,
        "abs" => UnOp::Abs, "floor" => UnOp::Floor, "ceil" => UnOp::Ceil, "round" => UnOp::Round,
        "trunc" => UnOp::Trunc, "fract" => UnOp::Fract, "sign" => UnOp::Sign,
        _ => return None,
    })
}

fn op_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+", BinOp::Sub => "-", BinOp::Mul => "*", BinOp::Div => "/", BinOp::Rem => "%",
        BinOp::Lt => "<", BinOp::Le => "<=", BinOp::Gt => ">", BinOp::Ge => ">=", BinOp::Eq => "==", BinOp::Ne => "!=",
        BinOp::And => "&&", BinOp::Or => "||", BinOp::Xor => "^^",
        BinOp::BAnd => "&", BinOp::BOr => "|", BinOp::BXor => "^", BinOp::Shl => "<<", BinOp::Shr => ">>",
        BinOp::Pow => "pow", BinOp::Atan2 => "atan2", BinOp::Min => "min", BinOp::Max => "max",
        BinOp::Step => "step", BinOp::Dot => "dot",
    }
}

/// Float scalar/vector types that support arithmetic (bf16 has none in SPV_KHR_bfloat16).
fn is_float_value(t: Type) -> bool {
    !t.is_coopmat() && matches!(t.scalar(), Scalar::F32 | Scalar::F16)
}

fn is_arith_value(t: Type) -> bool {
    !t.is_coopmat() && t.scalar().is_numeric() && t.scalar() != Scalar::Bf16
}

fn is_int_value(t: Type) -> bool {
    !t.is_coopmat() && t.scalar().is_int()
}

impl Decoder<'_> {
    /// Decodes the node if `op` is one of this file's ops.
    pub(super) fn arith_op(&mut self, op: &str, o: &Obj, path: &Path) -> HeliosResult<Option<Expr>> {
        if let Some(b) = bin_op(op) {
            self.check_fields(o, path, &["op", "a", "b"])?;
            let a = self.operand(o, "a", path)?;
            let bb = self.operand(o, "b", path)?;
            let ty = self.binary_type(b, &a, &bb, path)?;
            return Ok(Some(Expr { kind: ExprKind::Binary { op: b, a, b: bb }, ty }));
        }
        if let Some(u) = un_op(op) {
            self.check_fields(o, path, &["op", "a"])?;
            let a = self.operand(o, "a", path)?;
            let ok = match u {
                UnOp::Neg => is_arith_value(a.ty) || a.ty.coopmat().is_some_and(|c| c.elem != Scalar::Bf16),
                UnOp::Not => a.ty.scalar() == Scalar::Bool && !a.ty.is_coopmat(),
                UnOp::BNot => is_int_value(a.ty),
                UnOp::Abs | UnOp::Sign => is_float_value(a.ty) || (!a.ty.is_coopmat() && a.ty.scalar() == Scalar::I32),
                _ => is_float_value(a.ty),
            };
            if !ok {
                return Err(self.err(path, format!("{op} is not defined on {}", a.ty)));
            }
            if !matches!(u, UnOp::Neg | UnOp::Not | UnOp::BNot) {
                self.kernel.uses.glsl = true;
            }
            let ty = a.ty;
            return Ok(Some(Expr { kind: ExprKind::Unary { op: u, a }, ty }));
        }
        let tern = match op {
            "fma" => TernOp::Fma,
            "mix" => TernOp::Mix,
            "clamp" => TernOp::Clamp,
            "select" => return self.select(o, path).map(Some),
            "cast" | "bitcast" => return self.convert(op == "bitcast", o, path).map(Some),
            _ => return Ok(None),
        };
        self.check_fields(o, path, &["op", "a", "b", "c"])?;
        let a = self.operand(o, "a", path)?;
        let b = self.operand(o, "b", path)?;
        let c = self.operand(o, "c", path)?;
        let kind_ok = if tern == TernOp::Clamp { is_arith_value(a.ty) } else { is_float_value(a.ty) };
        if !kind_ok || a.ty != b.ty || a.ty != c.ty {
            return Err(self.err(path, format!("{op}({}, {}, {}) is not defined", a.ty, b.ty, c.ty)));
        }
        self.kernel.uses.glsl = true;
        let ty = a.ty;
        Ok(Some(Expr { kind: ExprKind::Ternary { op: tern, a, b, c }, ty }))
    }

    fn binary_type(&mut self, op: BinOp, a: &Expr, b: &Expr, path: &Path) -> HeliosResult<Type> {
        let (ta, tb) = (a.ty, b.ty);
        let mismatch = || self.err(path, format!("{ta} {} {tb}", op_symbol(op)));
        match op {
            BinOp::Add | BinOp::Sub | BinOp::Div | BinOp::Rem | BinOp::Mul => {
                if let Some(c) = ta.coopmat() {
                    if c.elem == Scalar::Bf16 {
                        return Err(self.err(path, "bf16 cooperative matrices only take part in cmmuladd and cast"));
                    }
                    return match op {
                        BinOp::Add | BinOp::Sub | BinOp::Div if ta == tb => Ok(ta),
                        BinOp::Mul if tb == Type::Scalar(c.elem) => Ok(ta),
                        _ => Err(mismatch()),
                    };
                }
                if !is_arith_value(ta) || !is_arith_value(tb) {
                    if ta.scalar() == Scalar::Bf16 || tb.scalar() == Scalar::Bf16 {
                        return Err(self.err(path, format!("{ta} {} {tb}: bf16 has no arithmetic, cast to f32 first", op_symbol(op))));
                    }
                    return Err(mismatch());
                }
                if ta == tb {
                    return Ok(ta);
                }
                // vector ⊗ scalar of the same component type (either order for mul)
                let scalar_ok = ta.scalar() == tb.scalar();
                match op {
                    BinOp::Mul | BinOp::Div if scalar_ok && tb.width() == 1 => Ok(ta),
                    BinOp::Mul if scalar_ok && ta.width() == 1 => Ok(tb),
                    _ => Err(mismatch()),
                }
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                if ta != tb || !is_arith_value(ta) {
                    return Err(mismatch());
                }
                Ok(ta.with_scalar(Scalar::Bool))
            }
            BinOp::Eq | BinOp::Ne => {
                if ta != tb || ta.is_coopmat() || ta.scalar() == Scalar::Bf16 {
                    return Err(mismatch());
                }
                Ok(ta.with_scalar(Scalar::Bool))
            }
            BinOp::And | BinOp::Or | BinOp::Xor => {
                if ta != tb || ta.is_coopmat() || ta.scalar() != Scalar::Bool {
                    return Err(mismatch());
                }
                Ok(ta)
            }
            BinOp::BAnd | BinOp::BOr | BinOp::BXor => {
                if ta != tb || !is_int_value(ta) {
                    return Err(mismatch());
                }
                Ok(ta)
            }
            BinOp::Shl | BinOp::Shr => {
                if !is_int_value(ta) || !is_int_value(tb) || ta.width() != tb.width() {
                    return Err(mismatch());
                }
                Ok(ta)
            }
            BinOp::Pow | BinOp::Atan2 | BinOp::Step => {
                if ta != tb || !is_float_value(ta) {
                    return Err(mismatch());
                }
                self.kernel.uses.glsl = true;
                Ok(ta)
            }
            BinOp::Min | BinOp::Max => {
                if ta != tb || !is_arith_value(ta) {
                    return Err(mismatch());
                }
                self.kernel.uses.glsl = true;
                Ok(ta)
            }
            BinOp::Dot => {
                if ta != tb || !is_float_value(ta) || ta.width() == 1 {
                    return Err(mismatch());
                }
                Ok(Type::Scalar(ta.scalar()))
            }
        }
    }

    fn select(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "c", "a", "b"])?;
        let c = self.operand(o, "c", path)?;
        let a = self.operand(o, "a", path)?;
        let b = self.operand(o, "b", path)?;
        let cond_ok = !c.ty.is_coopmat() && c.ty.scalar() == Scalar::Bool && (c.ty.width() == 1 || c.ty.width() == a.ty.width());
        if !cond_ok || a.ty != b.ty || a.ty.is_coopmat() {
            return Err(self.err(path, format!("select({}, {}, {}) is not defined", c.ty, a.ty, b.ty)));
        }
        let ty = a.ty;
        Ok(Expr { kind: ExprKind::Select { c, a, b }, ty })
    }

    fn convert(&mut self, bitcast: bool, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "t", "a"])?;
        let t = self.any_type(self.req(o, "t", path)?, &path.key("t"))?;
        let a = self.operand(o, "a", path)?;
        let (from, to) = (a.ty, t);
        if bitcast {
            let ok = !from.is_coopmat() && !to.is_coopmat() && from.scalar() != Scalar::Bool && to.scalar() != Scalar::Bool
                && from.scalar().bits() * u32::from(from.width()) == to.scalar().bits() * u32::from(to.width());
            if !ok {
                return Err(self.err(path, format!("bitcast {from} -> {to} needs equal bit widths")));
            }
            return Ok(Expr { kind: ExprKind::Bitcast(a), ty: t });
        }
        match (from, to) {
            (Type::CoopMat(f), Type::CoopMat(g)) => {
                if f.rows != g.rows || f.cols != g.cols || f.scope != g.scope {
                    return Err(self.err(path, format!("cast {from} -> {to} must keep shape and scope")));
                }
                if f.use_ != g.use_ {
                    // acc -> a/b (P·V in attention) is OpCooperativeMatrixConvertNV, coopmat2
                    // only; subgroup-scope kernels round-trip through shared memory instead.
                    let to_ab = f.use_ == CoopUse::Acc && matches!(g.use_, CoopUse::A | CoopUse::B) && f.elem.is_float() && g.elem.is_float();
                    if !to_ab || f.scope != CoopScope::Workgroup {
                        return Err(self.err(path, format!(
                            "cast {from} -> {to}: only acc -> a/b changes the use, and only at workgroup scope (coopmat2); at subgroup scope cmstore the accumulator to shared memory and cmload it back"
                        )));
                    }
                    if !self.caps.coop_mat2_conversions {
                        return Err(self.err(path, format!("cast {from} -> {to} needs the cooperativeMatrixConversions feature of VK_NV_cooperative_matrix2, which this device lacks")));
                    }
                    self.kernel.uses.coop_convert = true;
                }
                if !(f.elem.is_float() == g.elem.is_float() || (f.elem.is_numeric() && g.elem.is_numeric())) {
                    return Err(self.err(path, format!("cast {from} -> {to} is not defined")));
                }
            }
            (Type::CoopMat(_), _) | (_, Type::CoopMat(_)) => {
                return Err(self.err(path, format!("cast {from} -> {to} is not defined")));
            }
            _ => {
                if from.width() != to.width() {
                    return Err(self.err(path, format!("cast {from} -> {to} must keep the width")));
                }
                let bf = |s: Scalar| s == Scalar::Bf16;
                if (bf(from.scalar()) && !to.scalar().is_float()) || (bf(to.scalar()) && !from.scalar().is_float()) {
                    return Err(self.err(path, format!("cast {from} -> {to}: bf16 converts only to and from floats")));
                }
            }
        }
        Ok(Expr { kind: ExprKind::Cast(a), ty: t })
    }
}
