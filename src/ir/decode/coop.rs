//! Cooperative-matrix types and operations: parsing the type object and checking shapes and
//! component types against `DeviceCaps::coop_mat_shapes`.

use crate::ir::json::Value;

use crate::caps::{CoopMatShape, CoopScope};
use crate::error::HeliosResult;

use super::super::ast::{Expr, ExprKind, Layout, TensorAccess, TensorClamp};
use super::super::path::Path;
use super::super::types::{CoopMatType, CoopUse, Scalar, Type};
use super::{truncate, Decoder, Obj};

/// Largest rows/cols accepted for workgroup-scope (coopmat2) matrices.
const MAX_WORKGROUP_DIM: u32 = 256;

impl Decoder<'_> {
    /// Parses `{"coopmat": "acc", "elem": "f32", "rows": 16, "cols": 16, "scope": "subgroup"}`.
    pub(super) fn coop_type(&mut self, o: &Obj, path: &Path) -> HeliosResult<CoopMatType> {
        self.check_fields(o, path, &["coopmat", "elem", "rows", "cols", "scope"])?;
        let use_s = self.req_str(o, "coopmat", path)?;
        let use_ = match use_s {
            "a" => CoopUse::A,
            "b" => CoopUse::B,
            "acc" => CoopUse::Acc,
            _ => return Err(self.err(&path.key("coopmat"), format!("coopmat use must be a, b or acc, got '{}'", truncate(use_s, 20)))),
        };
        let es = self.req_str(o, "elem", path)?;
        let elem = match Scalar::parse(es) {
            Some(s) if s != Scalar::Bool => s,
            _ => return Err(self.err(&path.key("elem"), format!("bad coopmat element type '{}'", truncate(es, 20)))),
        };
        let rows = self.u32_of(self.req(o, "rows", path)?, &path.key("rows"))?;
        let cols = self.u32_of(self.req(o, "cols", path)?, &path.key("cols"))?;
        let scope = match o.get("scope").map(|v| v.as_str()) {
            None | Some(Some("subgroup")) => CoopScope::Subgroup,
            Some(Some("workgroup")) => CoopScope::Workgroup,
            Some(_) => return Err(self.err(&path.key("scope"), "coopmat scope must be subgroup or workgroup")),
        };
        Ok(CoopMatType { use_, elem, rows, cols, scope })
    }

    /// Parses a type written as a string (`f32x4`) or a coopmat object.
    pub(super) fn any_type(&mut self, v: &Value, path: &Path) -> HeliosResult<Type> {
        let t = match v {
            Value::String(s) => Type::parse_value(s).ok_or_else(|| self.err(path, format!("unknown type '{}'", truncate(s, 30))))?,
            Value::Object(o) => Type::CoopMat(self.coop_type(o, path)?),
            _ => return Err(self.err(path, "a type is a string like \"f32x4\" or a coopmat object")),
        };
        self.note_type(t, path)?;
        Ok(t)
    }

    pub(super) fn check_coop_type(&self, c: CoopMatType, path: &Path) -> HeliosResult<()> {
        let shapes = &self.caps.coop_mat_shapes;
        let comp = c.elem.coop_component();
        let fits_exact = |e: &CoopMatShape| match c.use_ {
            CoopUse::A => e.m == c.rows && e.k == c.cols && e.a == comp,
            CoopUse::B => e.k == c.rows && e.n == c.cols && e.b == comp,
            CoopUse::Acc => e.m == c.rows && e.n == c.cols && (e.c == comp || e.result == comp),
        };
        let fits_multiple = |e: &CoopMatShape| {
            let (r, k) = match c.use_ {
                CoopUse::A => (e.m, e.k),
                CoopUse::B => (e.k, e.n),
                CoopUse::Acc => (e.m, e.n),
            };
            let comp_ok = match c.use_ {
                CoopUse::A => e.a == comp,
                CoopUse::B => e.b == comp,
                CoopUse::Acc => e.c == comp || e.result == comp,
            };
            comp_ok && r > 0 && k > 0 && c.rows.is_multiple_of(r) && c.cols.is_multiple_of(k)
        };
        match c.scope {
            CoopScope::Subgroup => {
                if !self.caps.coop_mat {
                    return Err(self.err(path, "cooperative matrices need VK_KHR_cooperative_matrix, which this device lacks"));
                }
                if !shapes.iter().any(|e| e.scope == CoopScope::Subgroup && fits_exact(e)) {
                    return Err(self.err(path, format!("{} is not a cooperative-matrix shape this device lists", Type::CoopMat(c))));
                }
            }
            CoopScope::Workgroup => {
                if !self.caps.coop_mat2 {
                    return Err(self.err(path, "workgroup-scope cooperative matrices need VK_NV_cooperative_matrix2, which this device lacks"));
                }
                if c.rows > MAX_WORKGROUP_DIM || c.cols > MAX_WORKGROUP_DIM || !shapes.iter().any(fits_multiple) {
                    return Err(self.err(path, format!("{} is not a multiple of a cooperative-matrix shape this device lists", Type::CoopMat(c))));
                }
            }
        }
        Ok(())
    }

    /// Types `a × b + c` and checks the (M, N, K, types) combination against the device.
    pub(super) fn coop_muladd(&self, a: &Expr, b: &Expr, c: &Expr, sat: bool, path: &Path) -> HeliosResult<Type> {
        let (Some(ta), Some(tb), Some(tc)) = (a.ty.coopmat(), b.ty.coopmat(), c.ty.coopmat()) else {
            return Err(self.err(path, format!("cmmuladd needs cooperative matrices, got {} × {} + {}", a.ty, b.ty, c.ty)));
        };
        if ta.use_ != CoopUse::A || tb.use_ != CoopUse::B || tc.use_ != CoopUse::Acc {
            return Err(self.err(path, "cmmuladd operands must have uses a, b and acc"));
        }
        if ta.scope != tb.scope || ta.scope != tc.scope {
            return Err(self.err(path, "cmmuladd operands must have the same scope"));
        }
        let (m, k, n) = (ta.rows, ta.cols, tb.cols);
        if tb.rows != k || tc.rows != m || tc.cols != n {
            return Err(self.err(path, format!("cmmuladd shapes do not agree: {}x{} × {}x{} + {}x{}", ta.rows, ta.cols, tb.rows, tb.cols, tc.rows, tc.cols)));
        }
        let (ca, cb, cc) = (ta.elem.coop_component(), tb.elem.coop_component(), tc.elem.coop_component());
        let listed = self.caps.coop_mat_shapes.iter().any(|e| match ta.scope {
            CoopScope::Subgroup => {
                e.scope == CoopScope::Subgroup && e.m == m && e.n == n && e.k == k && e.a == ca && e.b == cb && e.c == cc && e.result == cc && (!sat || e.saturating)
            }
            CoopScope::Workgroup => e.a == ca && e.b == cb && e.c == cc && m.is_multiple_of(e.m) && n.is_multiple_of(e.n) && k.is_multiple_of(e.k),
        });
        if !listed {
            return Err(self.err(path, format!("this device lists no cooperative-matrix multiply {}x{}x{} with {} × {} + {}", m, n, k, ta.elem.name(), tb.elem.name(), tc.elem.name())));
        }
        Ok(c.ty)
    }

    pub(super) fn layout(&self, o: &Obj, path: &Path) -> HeliosResult<Layout> {
        match self.req_str(o, "layout", path)? {
            "row" => Ok(Layout::Row),
            "col" => Ok(Layout::Col),
            other => Err(self.err(&path.key("layout"), format!("layout must be row or col, got '{}'", truncate(other, 20)))),
        }
    }

    /// Checks the element type of the memory a coopmat is loaded from or stored to: its own
    /// component type, or any numeric scalar/vector whose bits are reinterpreted (e.g. an f16
    /// matrix from a u32x4 shared array filled by 128-bit copies); `idx` and `stride` then count
    /// those memory elements, as in SPV_KHR_cooperative_matrix.
    pub(super) fn check_coop_mem(&self, mem_elem: Type, c: CoopMatType, path: &Path) -> HeliosResult<()> {
        if mem_elem.is_coopmat() || mem_elem.scalar() == Scalar::Bool {
            return Err(self.err(path, format!("{} cannot be loaded from or stored to {} memory", Type::CoopMat(c), mem_elem)));
        }
        Ok(())
    }

    /// The optional `tensor` field of cmload/cmstore: `{"dims": [rows, cols], "at": [row, col],
    /// "clamp": "zero" | "edge"}`, u32 expressions; needs coopmat2 and row layout.
    pub(super) fn tensor_access(&mut self, o: &Obj, layout: Layout, path: &Path) -> HeliosResult<Option<Box<TensorAccess>>> {
        let Some(v) = o.get("tensor") else { return Ok(None) };
        let p = path.key("tensor");
        if !self.caps.coop_mat2 {
            return Err(self.err(&p, "tensor layouts need VK_NV_cooperative_matrix2, which this device lacks"));
        }
        if layout != Layout::Row {
            return Err(self.err(&p, "tensor layouts address row-major tensors (layout must be row)"));
        }
        let t = self.obj(v, &p)?;
        self.check_fields(t, &p, &["dims", "at", "clamp"])?;
        let mut pair = |key: &'static str| -> HeliosResult<[Expr; 2]> {
            let items = self.req_array(t, key, &p)?;
            let kp = p.key(key);
            if items.len() != 2 {
                return Err(self.err(&kp, "expected 2 entries (rows, cols)"));
            }
            let a = self.expr(&items[0], &kp.index(0))?;
            let b = self.expr(&items[1], &kp.index(1))?;
            for (i, e) in [&a, &b].into_iter().enumerate() {
                if e.ty != Type::U32 {
                    return Err(self.err(&kp.index(i), format!("expected u32, got {}", e.ty)));
                }
            }
            Ok([a, b])
        };
        let dims = pair("dims")?;
        let at = pair("at")?;
        let clamp = match t.get("clamp").map(|c| c.as_str()) {
            None | Some(Some("zero")) => TensorClamp::Zero,
            Some(Some("edge")) => TensorClamp::Edge,
            Some(_) => return Err(self.err(&p.key("clamp"), "clamp must be zero or edge")),
        };
        self.kernel.uses.tensor_addressing = true;
        Ok(Some(Box::new(TensorAccess { dims, at, clamp })))
    }

    /// `cmlen` node.
    pub(super) fn coop_len(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        let t = self.any_type(self.req(o, "t", path)?, &path.key("t"))?;
        let c = t.coopmat().ok_or_else(|| self.err(&path.key("t"), format!("cmlen needs a coopmat type, got {t}")))?;
        Ok(Expr { kind: ExprKind::CmLen(c), ty: Type::U32 })
    }
}
