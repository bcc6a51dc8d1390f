//! Trip counts of `for` loops with `unroll: true`. Helios only marks such loops (the Unroll
//! loop control); the driver unrolls them, so a long one is code size the driver must hold:
//! a known trip count is capped (`limits::MAX_UNROLL_TRIPS`) and multiplies the weight of the
//! nodes inside (`limits::MAX_UNROLLED_NODES`). A loop whose bounds are only known at run time
//! cannot be unrolled completely and counts once.

use crate::error::HeliosResult;

use super::super::ast::{BinOp, Expr, ExprKind, LitScalar};
use super::super::limits;
use super::super::path::Path;
use super::super::types::{Scalar, Type};
use super::Decoder;

impl Decoder<'_> {
    /// The value of an integer expression made of literals and spec constants.
    fn const_int(&self, e: &Expr) -> Option<i64> {
        let v = match &e.kind {
            ExprKind::Lit(v) => match v.first() {
                Some(LitScalar::Num(x)) if x.fract() == 0.0 && x.abs() < 9.0e15 => *x as i64,
                _ => return None,
            },
            ExprKind::Spec(i) => {
                let s = self.kernel.spec.get(*i as usize)?;
                match s.ty {
                    Scalar::U32 => i64::from(s.bits),
                    Scalar::I32 => i64::from(s.bits as i32),
                    _ => return None,
                }
            }
            ExprKind::Binary { op, a, b } => {
                let (a, b) = (self.const_int(a)?, self.const_int(b)?);
                match op {
                    BinOp::Add => a.checked_add(b)?,
                    BinOp::Sub => a.checked_sub(b)?,
                    BinOp::Mul => a.checked_mul(b)?,
                    BinOp::Div if b != 0 => a / b,
                    BinOp::Min => a.min(b),
                    BinOp::Max => a.max(b),
                    BinOp::Shl if (0..32).contains(&b) => a.checked_shl(b as u32)?,
                    BinOp::Shr if (0..32).contains(&b) => a >> b,
                    _ => return None,
                }
            }
            _ => return None,
        };
        // Wrap as the loop's 32-bit type would.
        Some(match e.ty {
            Type::Scalar(Scalar::U32) => i64::from(v as u32),
            _ => i64::from(v as i32),
        })
    }

    /// Iterations of `for (from; < to; += step)` when the bounds are compile-time constants. An
    /// unknown step counts as 1 (the most iterations the bounds allow).
    fn trip_count(&self, from: &Expr, to: &Expr, step: Option<&Expr>) -> Option<u64> {
        let (from, to) = (self.const_int(from)?, self.const_int(to)?);
        let step = step.and_then(|s| self.const_int(s)).filter(|&s| s > 0).unwrap_or(1);
        let span = u64::try_from(to.saturating_sub(from)).unwrap_or(0);
        Some(span.div_ceil(step as u64))
    }

    /// Checks an unrolled loop's trip count and returns the factor its body's nodes weigh.
    pub(crate) fn unroll_weight(&self, from: &Expr, to: &Expr, step: Option<&Expr>, path: &Path) -> HeliosResult<u64> {
        let Some(trips) = self.trip_count(from, to, step) else { return Ok(1) };
        if trips > limits::MAX_UNROLL_TRIPS {
            return Err(self.err(
                &path.key("unroll"),
                format!(
                    "a loop of {trips} iterations cannot be unrolled (at most {}); drop unroll or unroll an inner loop",
                    limits::MAX_UNROLL_TRIPS
                ),
            ));
        }
        Ok(trips.max(1))
    }

    /// Decodes a loop body with its nodes weighted by `weight` unrolled copies.
    pub(crate) fn with_unroll<T>(&mut self, weight: u64, f: impl FnOnce(&mut Self) -> HeliosResult<T>) -> HeliosResult<T> {
        let saved = self.unroll_factor;
        self.unroll_factor = saved.saturating_mul(weight);
        let r = f(self);
        self.unroll_factor = saved;
        r
    }
}
