//! Statements and blocks: scoping, control flow, stores and barriers.

use crate::ir::json::Value;

use crate::error::HeliosResult;

use super::super::ast::{ExecScope, ExprKind, LitScalar, MemClasses, MemRef, SlotKind, Stmt};
use super::super::limits;
use super::super::path::Path;
use super::super::types::{Scalar, Type};
use super::{truncate, Decoder, Obj};

impl Decoder<'_> {
    /// A block: its own scope; names declared inside are invisible after it.
    pub(crate) fn block(&mut self, items: &[Value], path: &Path) -> HeliosResult<Vec<Stmt>> {
        self.open_scope();
        let r = self.block_items(items, path);
        self.close_scope();
        r
    }

    fn block_items(&mut self, items: &[Value], path: &Path) -> HeliosResult<Vec<Stmt>> {
        let mut out = Vec::with_capacity(items.len());
        for (i, v) in items.iter().enumerate() {
            let p = path.index(i);
            self.enter_stmt(&p)?;
            let o = self.obj(v, &p)?;
            let s = self.req_str(o, "s", &p)?;
            out.push(self.stmt(s, o, &p)?);
            self.leave_stmt();
        }
        Ok(out)
    }

    fn sub_block(&mut self, o: &Obj, key: &'static str, path: &Path) -> HeliosResult<Vec<Stmt>> {
        let items = self.req_array(o, key, path)?;
        self.block(items, &path.key(key))
    }

    fn loop_body(&mut self, o: &Obj, path: &Path) -> HeliosResult<Vec<Stmt>> {
        self.loop_depth += 1;
        let r = self.sub_block(o, "body", path);
        self.loop_depth -= 1;
        r
    }

    fn cond(&mut self, o: &Obj, key: &'static str, path: &Path) -> HeliosResult<super::super::ast::Expr> {
        let c = self.operand(o, key, path)?;
        if c.ty != Type::BOOL {
            return Err(self.err(&path.key(key), format!("condition must be bool, got {}", c.ty)));
        }
        Ok(*c)
    }

    fn stmt(&mut self, s: &str, o: &Obj, path: &Path) -> HeliosResult<Stmt> {
        match s {
            "let" => {
                self.check_fields(o, path, &["s", "name", "value"])?;
                let name = self.req_str(o, "name", path)?;
                // The value is decoded before the name exists: `let x = x + 1` is an undefined value.
                let value = *self.operand(o, "value", path)?;
                let slot = self.declare(name, SlotKind::Let, value.ty, None, &path.key("name"))?;
                Ok(Stmt::Let { slot, value })
            }
            "var" => self.var(o, path),
            "set" => self.set(o, path),
            "store" => {
                self.check_fields(o, path, &["s", "b", "sh", "idx", "value", "as"])?;
                let (mem, elem) = self.mem_ref(o, path)?;
                self.check_access(mem, false, true, path)?;
                let idx = *self.index(o, "idx", path)?;
                let value = *self.operand(o, "value", path)?;
                // The value's width picks the vector view; `as` allows another scalar type.
                let scalar = match (o.get("as"), mem) {
                    (None, _) => elem.scalar(),
                    (Some(v), MemRef::Binding(_)) => match v.as_str().and_then(Scalar::parse) {
                        Some(s) if s != Scalar::Bool => s,
                        _ => return Err(self.err(&path.key("as"), "as must be f32, f16, bf16, i32 or u32")),
                    },
                    (Some(_), MemRef::Shared(_)) => return Err(self.err(&path.key("as"), "as applies to bindings; declare the shared array with the element type you need (e.g. u32x4) and bitcast")),
                };
                // A 2- or 4-wide vector into a shared array of its scalars is a vector view.
                let shared_vec = elem.width() == 1 && !value.ty.is_coopmat() && value.ty.scalar() == elem.scalar() && matches!(value.ty.width(), 2 | 4);
                if shared_vec {
                    self.note_shared_width(mem, value.ty.width());
                }
                let ok = match mem {
                    MemRef::Shared(_) => value.ty == elem || shared_vec,
                    MemRef::Binding(_) => !value.ty.is_coopmat() && value.ty.scalar() == scalar && matches!(value.ty.width(), 1 | 2 | 4),
                };
                if !ok {
                    return Err(self.err(&path.key("value"), format!("cannot store {} into {} memory", value.ty, Type::Scalar(scalar))));
                }
                if let MemRef::Binding(i) = mem {
                    self.note_view(i, value.ty, path)?;
                }
                Ok(Stmt::Store { mem, idx, value })
            }
            "if" => {
                self.check_fields(o, path, &["s", "cond", "then", "else"])?;
                let cond = self.cond(o, "cond", path)?;
                let then = self.sub_block(o, "then", path)?;
                let els = if o.contains_key("else") { self.sub_block(o, "else", path)? } else { Vec::new() };
                Ok(Stmt::If { cond, then, els })
            }
            "for" => self.for_loop(o, path),
            "while" => {
                self.check_fields(o, path, &["s", "cond", "body"])?;
                let cond = self.cond(o, "cond", path)?;
                let body = self.loop_body(o, path)?;
                Ok(Stmt::While { cond, body })
            }
            "loop" => {
                self.check_fields(o, path, &["s", "body"])?;
                Ok(Stmt::Loop { body: self.loop_body(o, path)? })
            }
            "break" | "continue" => {
                self.check_fields(o, path, &["s"])?;
                if self.loop_depth == 0 {
                    return Err(self.err(path, format!("{s} outside a loop")));
                }
                Ok(if s == "break" { Stmt::Break } else { Stmt::Continue })
            }
            "return" => {
                self.check_fields(o, path, &["s"])?;
                Ok(Stmt::Return)
            }
            "barrier" | "fence" => {
                self.check_fields(o, path, &["s", "scope", "mem"])?;
                let scope = match o.get("scope").map(|v| v.as_str()) {
                    None | Some(Some("workgroup")) => ExecScope::Workgroup,
                    Some(Some("subgroup")) => ExecScope::Subgroup,
                    Some(_) => return Err(self.err(&path.key("scope"), "scope must be workgroup or subgroup")),
                };
                let mem = match o.get("mem") {
                    None if s == "barrier" => MemClasses { workgroup: true, storage: false },
                    None => return Err(self.err(path, "missing field 'mem'")),
                    Some(v) => self.mem_classes(v, &path.key("mem"))?,
                };
                Ok(if s == "barrier" { Stmt::Barrier { scope, mem } } else { Stmt::Fence { scope, mem } })
            }
            "eval" => {
                self.check_fields(o, path, &["s", "value"])?;
                Ok(Stmt::Eval(*self.operand(o, "value", path)?))
            }
            "cmstore" => {
                self.check_fields(o, path, &["s", "b", "sh", "idx", "stride", "layout", "value", "vec", "as", "tensor"])?;
                let (mem, elem) = self.mem_ref(o, path)?;
                self.check_access(mem, false, true, path)?;
                let view = self.view_type(o, mem, elem, path)?;
                let idx = *self.index(o, "idx", path)?;
                let stride = *self.index(o, "stride", path)?;
                let layout = self.layout(o, path)?;
                let tensor = self.tensor_access(o, layout, path)?;
                let value = *self.operand(o, "value", path)?;
                let c = value.ty.coopmat().ok_or_else(|| self.err(&path.key("value"), format!("cmstore needs a coopmat, got {}", value.ty)))?;
                self.check_coop_mem(view, c, path)?;
                self.note_coop_view(mem, view, path);
                Ok(Stmt::CmStore { mem, idx, stride, layout, value, view, tensor })
            }
            _ => Err(self.err(&path.key("s"), format!("unknown statement '{}'", truncate(s, 40)))),
        }
    }

    fn var(&mut self, o: &Obj, path: &Path) -> HeliosResult<Stmt> {
        self.check_fields(o, path, &["s", "name", "type", "init", "len"])?;
        let name = self.req_str(o, "name", path)?;
        let ty = self.any_type(self.req(o, "type", path)?, &path.key("type"))?;
        let len = match o.get("len") {
            Some(v) => {
                let n = self.u32_of(v, &path.key("len"))?;
                if n == 0 || n > limits::MAX_ARRAY_LEN {
                    return Err(self.err(&path.key("len"), format!("length must be in 1..={}", limits::MAX_ARRAY_LEN)));
                }
                Some(n)
            }
            None => None,
        };
        let init = match o.get("init") {
            Some(_) if len.is_some() => return Err(self.err(&path.key("init"), "array vars cannot have an init")),
            Some(_) => {
                let e = *self.operand(o, "init", path)?;
                if e.ty != ty {
                    return Err(self.err(&path.key("init"), format!("init of a {ty} var is {}", e.ty)));
                }
                Some(e)
            }
            None => None,
        };
        let slot = self.declare(name, SlotKind::Var, ty, len, &path.key("name"))?;
        Ok(Stmt::Var { slot, init })
    }

    fn set(&mut self, o: &Obj, path: &Path) -> HeliosResult<Stmt> {
        self.check_fields(o, path, &["s", "name", "idx", "value"])?;
        let name = self.req_str(o, "name", path)?;
        let slot = self.lookup(name, &path.key("name"))?;
        let info = &self.kernel.slots[slot as usize];
        let (ty, kind, len) = (info.ty, info.kind, info.len);
        if kind != SlotKind::Var {
            return Err(self.err(&path.key("name"), format!("'{name}' is not a var")));
        }
        let (idx, target) = if o.contains_key("idx") {
            let idx = *self.index(o, "idx", path)?;
            (Some(idx), self.element_type(ty, len, kind, name, path)?)
        } else {
            if len.is_some() {
                return Err(self.err(path, format!("'{name}' is an array: set an element with idx")));
            }
            (None, ty)
        };
        let value = *self.operand(o, "value", path)?;
        if value.ty != target {
            return Err(self.err(&path.key("value"), format!("cannot assign {} to '{name}' ({target})", value.ty)));
        }
        Ok(Stmt::Set { slot, idx, value })
    }

    fn for_loop(&mut self, o: &Obj, path: &Path) -> HeliosResult<Stmt> {
        self.check_fields(o, path, &["s", "var", "from", "to", "step", "unroll", "body"])?;
        let from = *self.operand(o, "from", path)?;
        if !matches!(from.ty, Type::Scalar(Scalar::U32 | Scalar::I32)) {
            return Err(self.err(&path.key("from"), format!("loop counter must be u32 or i32, got {}", from.ty)));
        }
        let to = *self.operand(o, "to", path)?;
        if to.ty != from.ty {
            return Err(self.err(&path.key("to"), format!("loop bound is {}, counter is {}", to.ty, from.ty)));
        }
        let step = if o.contains_key("step") {
            let s = *self.operand(o, "step", path)?;
            if s.ty != from.ty {
                return Err(self.err(&path.key("step"), format!("loop step is {}, counter is {}", s.ty, from.ty)));
            }
            // A literal step that cannot advance the counter is a hang, not a kernel.
            if let ExprKind::Lit(v) = &s.kind {
                if matches!(v.first(), Some(LitScalar::Num(x)) if *x <= 0.0) {
                    return Err(self.err(&path.key("step"), "loop step must be positive"));
                }
            }
            Some(s)
        } else {
            None
        };
        let unroll = match o.get("unroll") {
            Some(v) => Some(self.bool_of(v, &path.key("unroll"))?),
            None => None,
        };
        let weight = match unroll {
            Some(true) => self.unroll_weight(&from, &to, step.as_ref(), path)?,
            _ => 1,
        };
        let name = self.req_str(o, "var", path)?;
        // The counter is visible only in the body.
        self.open_scope();
        let r = self.declare(name, SlotKind::LoopVar, from.ty, None, &path.key("var")).and_then(|slot| {
            let body = self.with_unroll(weight, |d| d.loop_body(o, path))?;
            Ok((slot, body))
        });
        self.close_scope();
        let (slot, body) = r?;
        Ok(Stmt::For { slot, from, to, step, unroll, body })
    }

    fn mem_classes(&self, v: &Value, path: &Path) -> HeliosResult<MemClasses> {
        let mut m = MemClasses::default();
        for (i, x) in self.array(v, path)?.iter().enumerate() {
            match x.as_str() {
                Some("workgroup") => m.workgroup = true,
                Some("storage") => m.storage = true,
                _ => return Err(self.err(&path.index(i), "memory class must be workgroup or storage")),
            }
        }
        Ok(m)
    }
}
