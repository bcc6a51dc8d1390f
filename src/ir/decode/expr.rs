//! Expression nodes: parse each `op`, decode its operands and infer its type.

use crate::ir::json::Value;

use crate::error::HeliosResult;

use super::super::ast::{
    AtomicFn, Builtin, Expr, ExprKind, LaneOp, LitScalar, MemRef, SlotKind, SubgroupFn, SubgroupMode,
};
use super::super::path::Path;
use super::super::types::{Scalar, Type};
use super::{kind_of, truncate, Decoder, Obj};

impl Decoder<'_> {
    pub(crate) fn expr(&mut self, v: &Value, path: &Path) -> HeliosResult<Expr> {
        self.enter_expr(path)?;
        let o = self.obj(v, path)?;
        let op = self.req_str(o, "op", path)?;
        let e = self.expr_op(op, o, path)?;
        self.leave_expr();
        Ok(e)
    }

    pub(crate) fn operand(&mut self, o: &Obj, key: &'static str, path: &Path) -> HeliosResult<Box<Expr>> {
        let v = self.req(o, key, path)?;
        Ok(Box::new(self.expr(v, &path.key(key))?))
    }

    /// An index operand: an integer scalar.
    pub(crate) fn index(&mut self, o: &Obj, key: &'static str, path: &Path) -> HeliosResult<Box<Expr>> {
        let e = self.operand(o, key, path)?;
        if !matches!(e.ty, Type::Scalar(Scalar::U32 | Scalar::I32)) {
            return Err(self.err(&path.key(key), format!("index must be u32 or i32, got {}", e.ty)));
        }
        Ok(e)
    }

    fn expr_op(&mut self, op: &str, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        if let Some(e) = self.arith_op(op, o, path)? {
            return Ok(e);
        }
        match op {
            "lit" => self.lit(o, path),
            "get" => self.get(o, path),
            "push" => {
                self.check_fields(o, path, &["op", "name"])?;
                let i = self.push_index(self.req_str(o, "name", path)?, &path.key("name"))?;
                Ok(Expr { kind: ExprKind::Push(i), ty: self.kernel.push[i as usize].ty })
            }
            "spec" => {
                self.check_fields(o, path, &["op", "name"])?;
                let i = self.spec_index(self.req_str(o, "name", path)?, &path.key("name"))?;
                Ok(Expr { kind: ExprKind::Spec(i), ty: Type::Scalar(self.kernel.spec[i as usize].ty) })
            }
            "builtin" => self.builtin(o, path),
            "load" => self.load(o, path),
            "swz" => self.swizzle(o, path),
            "vec" => self.construct(o, path),
            "sg" => self.subgroup(o, path),
            "shuffle" | "shuffle_xor" | "broadcast" => self.lane(op, o, path),
            "broadcast_first" | "sg_all" | "sg_any" => self.vote(op, o, path),
            "elect" => {
                self.check_fields(o, path, &["op"])?;
                self.need_subgroup(path, false)?;
                self.kernel.uses.subgroup_basic = true;
                Ok(Expr { kind: ExprKind::Elect, ty: Type::BOOL })
            }
            "atomic" => self.atomic(o, path),
            "cmfill" => {
                self.check_fields(o, path, &["op", "t", "a"])?;
                let t = self.any_type(self.req(o, "t", path)?, &path.key("t"))?;
                let c = t.coopmat().ok_or_else(|| self.err(&path.key("t"), format!("cmfill needs a coopmat type, got {t}")))?;
                let a = self.operand(o, "a", path)?;
                if a.ty != Type::Scalar(c.elem) {
                    return Err(self.err(&path.key("a"), format!("cmfill of {t} needs a {} value, got {}", c.elem.name(), a.ty)));
                }
                Ok(Expr { kind: ExprKind::CmFill(a), ty: t })
            }
            "cmload" => self.coop_load(o, path),
            "cmmuladd" => {
                self.check_fields(o, path, &["op", "a", "b", "c", "sat"])?;
                let a = self.operand(o, "a", path)?;
                let b = self.operand(o, "b", path)?;
                let c = self.operand(o, "c", path)?;
                let sat = match o.get("sat") {
                    Some(v) => self.bool_of(v, &path.key("sat"))?,
                    None => false,
                };
                let ty = self.coop_muladd(&a, &b, &c, sat, path)?;
                Ok(Expr { kind: ExprKind::CmMulAdd { a, b, c, sat }, ty })
            }
            "cmlen" => {
                self.check_fields(o, path, &["op", "t"])?;
                self.coop_len(o, path)
            }
            _ => Err(self.err(&path.key("op"), format!("unknown op '{}'", truncate(op, 40)))),
        }
    }

    fn lit(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "t", "v"])?;
        let t = self.any_type(self.req(o, "t", path)?, &path.key("t"))?;
        if t.is_coopmat() {
            return Err(self.err(&path.key("t"), "a literal cannot be a coopmat (use cmfill)"));
        }
        let vp = path.key("v");
        let v = self.req(o, "v", path)?;
        let s = t.scalar();
        let vals = match v {
            Value::Array(items) => {
                if items.len() != usize::from(t.width()) || t.width() == 1 {
                    return Err(self.err(&vp, format!("{t} literal needs {} values, got {}", t.width(), items.len())));
                }
                let mut out = Vec::with_capacity(items.len());
                for (i, x) in items.iter().enumerate() {
                    out.push(self.lit_scalar(s, x, &vp.index(i))?);
                }
                out
            }
            _ => vec![self.lit_scalar(s, v, &vp)?; usize::from(t.width())],
        };
        Ok(Expr { kind: ExprKind::Lit(vals), ty: t })
    }

    fn lit_scalar(&self, s: Scalar, v: &Value, path: &Path) -> HeliosResult<LitScalar> {
        let bad = || self.err(path, format!("not a valid {} literal: {}", s.name(), truncate(&v.to_string(), 40)));
        match (s, v) {
            (Scalar::Bool, Value::Bool(b)) => Ok(LitScalar::Bool(*b)),
            (Scalar::Bool, _) => Err(bad()),
            (_, Value::Number(n)) => {
                let x = n.as_f64().ok_or_else(bad)?;
                let ok = match s {
                    Scalar::U32 => x.fract() == 0.0 && (0.0..=4_294_967_295.0).contains(&x),
                    Scalar::I32 => x.fract() == 0.0 && (-2_147_483_648.0..=2_147_483_647.0).contains(&x),
                    _ => x.is_finite(),
                };
                if ok { Ok(LitScalar::Num(x)) } else { Err(bad()) }
            }
            (s, Value::String(t)) if s.is_float() => match t.as_str() {
                "inf" => Ok(LitScalar::Num(f64::INFINITY)),
                "-inf" => Ok(LitScalar::Num(f64::NEG_INFINITY)),
                "nan" => Ok(LitScalar::Num(f64::NAN)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }

    fn get(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "name", "idx"])?;
        let name = self.req_str(o, "name", path)?;
        let slot = self.lookup(name, &path.key("name"))?;
        let info = &self.kernel.slots[slot as usize];
        let (ty, kind, len) = (info.ty, info.kind, info.len);
        if !o.contains_key("idx") {
            if len.is_some() {
                return Err(self.err(path, format!("'{name}' is an array: read an element with idx")));
            }
            return Ok(Expr { kind: ExprKind::Get { slot, idx: None }, ty });
        }
        let idx = self.index(o, "idx", path)?;
        let elem = self.element_type(ty, len, kind, name, path)?;
        Ok(Expr { kind: ExprKind::Get { slot, idx: Some(idx) }, ty: elem })
    }

    /// Type of `name[idx]`: an array element, a coopmat element (vars only) or a vector lane.
    pub(crate) fn element_type(&self, ty: Type, len: Option<u32>, kind: SlotKind, name: &str, path: &Path) -> HeliosResult<Type> {
        if len.is_some() {
            return Ok(ty);
        }
        match ty {
            Type::Vector(s, _) => Ok(Type::Scalar(s)),
            Type::CoopMat(c) if kind == SlotKind::Var => Ok(Type::Scalar(c.elem)),
            _ => Err(self.err(path, format!("'{name}' ({ty}) cannot be indexed"))),
        }
    }

    fn builtin(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "name"])?;
        let n = self.req_str(o, "name", path)?;
        let (b, ty) = match n {
            "global_id" => (Builtin::GlobalId, Type::Vector(Scalar::U32, 3)),
            "local_id" => (Builtin::LocalId, Type::Vector(Scalar::U32, 3)),
            "workgroup_id" => (Builtin::WorkgroupId, Type::Vector(Scalar::U32, 3)),
            "num_workgroups" => (Builtin::NumWorkgroups, Type::Vector(Scalar::U32, 3)),
            "local_index" => (Builtin::LocalIndex, Type::U32),
            "subgroup_id" => (Builtin::SubgroupId, Type::U32),
            "subgroup_size" => (Builtin::SubgroupSize, Type::U32),
            "subgroup_invocation" => (Builtin::SubgroupInvocation, Type::U32),
            "num_subgroups" => (Builtin::NumSubgroups, Type::U32),
            _ => return Err(self.err(&path.key("name"), format!("unknown builtin '{}'", truncate(n, 40)))),
        };
        if matches!(b, Builtin::SubgroupId | Builtin::SubgroupSize | Builtin::SubgroupInvocation | Builtin::NumSubgroups) {
            self.kernel.uses.subgroup_basic = true;
        }
        Ok(Expr { kind: ExprKind::Builtin(b), ty })
    }

    /// `b` (binding index) or `sh` (shared array name): exactly one.
    pub(crate) fn mem_ref(&self, o: &Obj, path: &Path) -> HeliosResult<(MemRef, Type)> {
        match (o.get("b"), o.get("sh")) {
            (Some(b), None) => {
                let i = self.binding_index(b, &path.key("b"))?;
                Ok((MemRef::Binding(i), Type::Scalar(self.kernel.bindings[i as usize].elem)))
            }
            (None, Some(Value::String(s))) => {
                let i = self.shared_index(s, &path.key("sh"))?;
                Ok((MemRef::Shared(i), self.kernel.shared[i as usize].elem))
            }
            (None, Some(v)) => Err(self.err(&path.key("sh"), format!("expected a shared array name, got {}", kind_of(v)))),
            _ => Err(self.err(path, "needs exactly one of 'b' (binding) or 'sh' (shared array)")),
        }
    }

    /// Checks the binding's declared access allows a read (`write == false`) or a write.
    pub(crate) fn check_access(&self, mem: MemRef, read: bool, write: bool, path: &Path) -> HeliosResult<()> {
        if let MemRef::Binding(i) = mem {
            let b = &self.kernel.bindings[i as usize];
            if (read && !b.access.reads()) || (write && !b.access.writes()) {
                let what = if read && write { "read-modify-write" } else if read { "read" } else { "write" };
                return Err(self.err(path, format!("binding {i} ('{}') is declared {:?} but this node does a {what}", b.name, b.access)));
            }
        }
        Ok(())
    }

    fn load(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "b", "sh", "idx", "vec", "as"])?;
        let (mem, elem) = self.mem_ref(o, path)?;
        self.check_access(mem, true, false, path)?;
        let idx = self.index(o, "idx", path)?;
        let ty = self.view_type(o, mem, elem, path)?;
        Ok(Expr { kind: ExprKind::Load { mem, idx, vec: ty.width() }, ty })
    }

    /// The element type a node sees memory as: the declared element, or for bindings a vector
    /// view (`vec`: 2 or 4) and/or a reinterpretation of the bits (`as`: another scalar type).
    /// Records the view so lowering declares its aliased variable.
    pub(crate) fn view_type(&mut self, o: &Obj, mem: MemRef, elem: Type, path: &Path) -> HeliosResult<Type> {
        let MemRef::Binding(b) = mem else {
            return self.shared_view(o, mem, elem, path);
        };
        let width = match o.get("vec") {
            None => 1u8,
            Some(v) => match v.as_u64() {
                Some(w @ (1 | 2 | 4)) => w as u8,
                _ => return Err(self.err(&path.key("vec"), "vec must be 1, 2 or 4")),
            },
        };
        let scalar = match o.get("as") {
            None => elem.scalar(),
            Some(v) => match v.as_str().and_then(Scalar::parse) {
                Some(s) if s != Scalar::Bool => s,
                _ => return Err(self.err(&path.key("as"), "as must be f32, f16, bf16, i32 or u32")),
            },
        };
        let ty = Type::vector_of(scalar, width);
        self.note_view(b, ty, path)?;
        Ok(ty)
    }

    /// A vector view of a shared array of scalars (`vec`: 2 or 4, idx counts vectors); `as` is
    /// for bindings only (declare the shared array with the element type you need and bitcast).
    fn shared_view(&mut self, o: &Obj, mem: MemRef, elem: Type, path: &Path) -> HeliosResult<Type> {
        if o.contains_key("as") {
            return Err(self.err(&path.key("as"), "as applies to bindings; declare the shared array with the element type you need (e.g. u32x4) and bitcast"));
        }
        let Some(v) = o.get("vec") else { return Ok(elem) };
        let width = match v.as_u64() {
            Some(w @ (1 | 2 | 4)) => w as u8,
            _ => return Err(self.err(&path.key("vec"), "vec must be 1, 2 or 4")),
        };
        if width == 1 {
            return Ok(elem);
        }
        if elem.width() != 1 {
            return Err(self.err(&path.key("vec"), format!("vec views apply to shared arrays of scalars; this one holds {elem}")));
        }
        self.note_shared_width(mem, width);
        Ok(Type::vector_of(elem.scalar(), width))
    }

    /// Records a vector view width on a shared array (the widest one sets its declared layout).
    pub(crate) fn note_shared_width(&mut self, mem: MemRef, width: u8) {
        if let MemRef::Shared(i) = mem {
            let sh = &mut self.kernel.shared[i as usize];
            sh.vec = sh.vec.max(width);
        }
    }

    /// Remembers the view a cooperative-matrix op uses on a shared array (see `finish_checks`).
    pub(crate) fn note_coop_view(&mut self, mem: MemRef, view: Type, path: &Path) {
        if let MemRef::Shared(i) = mem {
            let sh = &mut self.kernel.shared[i as usize];
            if sh.elem.width() == 1 {
                sh.coop_views.push((view.width(), path.to_string()));
            }
        }
    }

    pub(crate) fn note_view(&mut self, b: u32, ty: Type, path: &Path) -> HeliosResult<()> {
        self.note_type(ty, path)?;
        if ty.scalar().bytes() == 2 {
            if !self.caps.storage_16bit {
                return Err(self.err(path, "16-bit storage buffers need storageBuffer16BitAccess, which this device lacks"));
            }
            self.kernel.uses.storage16 = true;
        }
        let views = &mut self.kernel.bindings[b as usize].views;
        if !views.contains(&ty) {
            views.push(ty);
        }
        Ok(())
    }

    fn swizzle(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "a", "c"])?;
        let a = self.operand(o, "a", path)?;
        let c = self.req_str(o, "c", path)?;
        let Type::Vector(s, w) = a.ty else {
            return Err(self.err(&path.key("a"), format!("swizzle needs a vector, got {}", a.ty)));
        };
        if c.is_empty() || c.len() > 4 {
            return Err(self.err(&path.key("c"), "swizzle needs 1 to 4 components"));
        }
        let mut comps = [0u8; 4];
        for (i, ch) in c.bytes().enumerate() {
            let k = match ch {
                b'x' => 0,
                b'y' => 1,
                b'z' => 2,
                b'w' => 3,
                _ => return Err(self.err(&path.key("c"), format!("bad swizzle '{}'", truncate(c, 8)))),
            };
            if k >= w {
                return Err(self.err(&path.key("c"), format!("swizzle '{c}' is out of range for {}", a.ty)));
            }
            comps[i] = k;
        }
        let n = c.len() as u8;
        Ok(Expr { kind: ExprKind::Swizzle { a, comps, n }, ty: Type::vector_of(s, n) })
    }

    fn construct(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "t", "args"])?;
        let t = self.any_type(self.req(o, "t", path)?, &path.key("t"))?;
        let Type::Vector(s, w) = t else {
            return Err(self.err(&path.key("t"), format!("vec needs a vector type, got {t}")));
        };
        let ap = path.key("args");
        let items = self.req_array(o, "args", path)?;
        let mut args = Vec::with_capacity(items.len());
        let mut total = 0u8;
        for (i, v) in items.iter().enumerate() {
            let e = self.expr(v, &ap.index(i))?;
            if e.ty.is_coopmat() || e.ty.scalar() != s {
                return Err(self.err(&ap.index(i), format!("{t} cannot be built from {}", e.ty)));
            }
            total = total.saturating_add(e.ty.width());
            args.push(e);
        }
        if !(total == w || (args.len() == 1 && total == 1)) {
            return Err(self.err(&ap, format!("{t} needs {w} components (or one scalar to splat), got {total}")));
        }
        Ok(Expr { kind: ExprKind::Construct(args), ty: t })
    }

    pub(crate) fn need_subgroup(&self, path: &Path, arith: bool) -> HeliosResult<()> {
        if self.caps.subgroup_size == 0 || (arith && !self.caps.subgroup_arithmetic) {
            return Err(self.err(path, "this device lacks the subgroup operations this node needs"));
        }
        Ok(())
    }

    fn subgroup(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "fn", "mode", "a"])?;
        let f = match self.req_str(o, "fn", path)? {
            "add" => SubgroupFn::Add,
            "mul" => SubgroupFn::Mul,
            "min" => SubgroupFn::Min,
            "max" => SubgroupFn::Max,
            "and" => SubgroupFn::And,
            "or" => SubgroupFn::Or,
            "xor" => SubgroupFn::Xor,
            other => return Err(self.err(&path.key("fn"), format!("unknown subgroup fn '{}'", truncate(other, 20)))),
        };
        let mode = match self.req_str(o, "mode", path)? {
            "reduce" => SubgroupMode::Reduce,
            "inclusive" => SubgroupMode::Inclusive,
            "exclusive" => SubgroupMode::Exclusive,
            other => return Err(self.err(&path.key("mode"), format!("unknown subgroup mode '{}'", truncate(other, 20)))),
        };
        self.need_subgroup(path, true)?;
        let a = self.operand(o, "a", path)?;
        let s = a.ty.scalar();
        let ok = match f {
            SubgroupFn::Add | SubgroupFn::Mul | SubgroupFn::Min | SubgroupFn::Max => s.is_numeric() && s != Scalar::Bf16,
            _ => s.is_int() || s == Scalar::Bool,
        };
        if !ok || a.ty.is_coopmat() {
            return Err(self.err(&path.key("a"), format!("subgroup {f:?} is not defined on {}", a.ty)));
        }
        self.kernel.uses.subgroup_arith = true;
        let ty = a.ty;
        Ok(Expr { kind: ExprKind::Subgroup { f, mode, a }, ty })
    }

    fn lane(&mut self, op: &str, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "a", "b"])?;
        let lop = match op {
            "shuffle" => LaneOp::Shuffle,
            "shuffle_xor" => LaneOp::ShuffleXor,
            _ => LaneOp::Broadcast,
        };
        if lop != LaneOp::Broadcast && !self.caps.subgroup_shuffle {
            return Err(self.err(path, "this device lacks subgroup shuffles"));
        }
        self.need_subgroup(path, false)?;
        let a = self.operand(o, "a", path)?;
        let b = self.operand(o, "b", path)?;
        if a.ty.is_coopmat() || b.ty != Type::U32 {
            return Err(self.err(path, format!("{op} needs a scalar or vector value and a u32 lane, got {} and {}", a.ty, b.ty)));
        }
        match lop {
            LaneOp::Broadcast => self.kernel.uses.subgroup_ballot = true,
            LaneOp::Shuffle | LaneOp::ShuffleXor => self.kernel.uses.subgroup_shuffle = true,
        }
        let ty = a.ty;
        Ok(Expr { kind: ExprKind::Lane { op: lop, a, b }, ty })
    }

    fn vote(&mut self, op: &str, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "a"])?;
        self.need_subgroup(path, false)?;
        let a = self.operand(o, "a", path)?;
        if op == "broadcast_first" {
            if a.ty.is_coopmat() {
                return Err(self.err(&path.key("a"), "broadcast_first needs a scalar or vector"));
            }
            self.kernel.uses.subgroup_ballot = true;
            let ty = a.ty;
            return Ok(Expr { kind: ExprKind::BroadcastFirst(a), ty });
        }
        if a.ty != Type::BOOL {
            return Err(self.err(&path.key("a"), format!("{op} needs a bool, got {}", a.ty)));
        }
        self.kernel.uses.subgroup_vote = true;
        Ok(Expr { kind: ExprKind::Vote { all: op == "sg_all", a }, ty: Type::BOOL })
    }

    fn atomic(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "fn", "b", "sh", "idx", "a", "cmp"])?;
        let f = match self.req_str(o, "fn", path)? {
            "add" => AtomicFn::Add,
            "sub" => AtomicFn::Sub,
            "min" => AtomicFn::Min,
            "max" => AtomicFn::Max,
            "and" => AtomicFn::And,
            "or" => AtomicFn::Or,
            "xor" => AtomicFn::Xor,
            "exchange" => AtomicFn::Exchange,
            "cas" => AtomicFn::Cas,
            other => return Err(self.err(&path.key("fn"), format!("unknown atomic fn '{}'", truncate(other, 20)))),
        };
        let (mem, elem) = self.mem_ref(o, path)?;
        self.check_access(mem, true, true, path)?;
        if let MemRef::Binding(i) = mem {
            self.note_view(i, elem, path)?;
        }
        let ok = match elem {
            Type::Scalar(Scalar::U32 | Scalar::I32) => true,
            Type::Scalar(Scalar::F32) if matches!(f, AtomicFn::Add | AtomicFn::Exchange) => {
                if f == AtomicFn::Add {
                    if !self.caps.atomic_float_add {
                        return Err(self.err(path, "f32 atomic add needs shaderBufferFloat32AtomicAdd, which this device lacks"));
                    }
                    self.kernel.uses.atomic_float_add = true;
                }
                true
            }
            _ => false,
        };
        if !ok {
            return Err(self.err(path, format!("atomic {f:?} is not defined on {elem}")));
        }
        let idx = self.index(o, "idx", path)?;
        let a = self.operand(o, "a", path)?;
        if a.ty != elem {
            return Err(self.err(&path.key("a"), format!("atomic value must be {elem}, got {}", a.ty)));
        }
        let cmp = match (f, o.contains_key("cmp")) {
            (AtomicFn::Cas, true) => {
                let c = self.operand(o, "cmp", path)?;
                if c.ty != elem {
                    return Err(self.err(&path.key("cmp"), format!("cas comparand must be {elem}, got {}", c.ty)));
                }
                Some(c)
            }
            (AtomicFn::Cas, false) => return Err(self.err(path, "missing field 'cmp'")),
            (_, true) => return Err(self.err(&path.key("cmp"), "only cas takes cmp")),
            (_, false) => None,
        };
        Ok(Expr { kind: ExprKind::Atomic { f, mem, idx, a, cmp }, ty: elem })
    }

    fn coop_load(&mut self, o: &Obj, path: &Path) -> HeliosResult<Expr> {
        self.check_fields(o, path, &["op", "t", "b", "sh", "idx", "stride", "layout", "vec", "as", "tensor"])?;
        let t = self.any_type(self.req(o, "t", path)?, &path.key("t"))?;
        let c = t.coopmat().ok_or_else(|| self.err(&path.key("t"), format!("cmload needs a coopmat type, got {t}")))?;
        let (mem, elem) = self.mem_ref(o, path)?;
        self.check_access(mem, true, false, path)?;
        let view = self.view_type(o, mem, elem, path)?;
        self.check_coop_mem(view, c, path)?;
        self.note_coop_view(mem, view, path);
        let idx = self.index(o, "idx", path)?;
        let stride = self.index(o, "stride", path)?;
        let layout = self.layout(o, path)?;
        let tensor = self.tensor_access(o, layout, path)?;
        Ok(Expr { kind: ExprKind::CmLoad { mem, idx, stride, layout, view, tensor }, ty: t })
    }
}
