//! Statements: locals, structured control flow (if, counted loops, while, loop, break,
//! continue, early return) and barriers.

use rspirv::spirv::{self, LoopControl, SelectionControl, StorageClass, Word};

use crate::error::HeliosResult;
use crate::ir::ast::{ExecScope, Expr, MemClasses, Slot, Stmt};
use crate::ir::types::{Scalar, Type};

use super::compiler::{Compiler, LoopTargets, SlotVal};

impl Compiler<'_> {
    /// Lowers a block; statements after a terminator (break/continue/return) are dead and skipped.
    pub(crate) fn lower_block(&mut self, stmts: &[Stmt]) -> HeliosResult<()> {
        for s in stmts {
            if !self.in_block() {
                break;
            }
            self.lower_stmt(s)?;
        }
        Ok(())
    }

    fn lower_stmt(&mut self, s: &Stmt) -> HeliosResult<()> {
        match s {
            Stmt::Let { slot, value } => {
                let v = self.expr(value)?;
                self.slots[*slot as usize] = SlotVal::Value(v);
            }
            Stmt::Var { slot, init } => {
                let ptr = self.declare_local(*slot);
                if let Some(e) = init {
                    let v = self.expr(e)?;
                    self.store(ptr, v, None, [])?;
                }
            }
            Stmt::Set { slot, idx, value } => {
                let v = self.expr(value)?;
                let ptr = self.slot_ptr(*slot, idx.as_ref(), value.ty)?;
                self.store(ptr, v, None, [])?;
            }
            Stmt::Store { mem, idx, value } => self.lower_store(*mem, idx, value)?,
            Stmt::If { cond, then, els } => self.lower_if(cond, then, els)?,
            Stmt::For { slot, from, to, step, unroll, body } => {
                self.lower_for(*slot, from, to, step.as_ref(), *unroll, body)?
            }
            Stmt::While { cond, body } => self.lower_loop(Some(cond), body, LoopControl::NONE)?,
            Stmt::Loop { body } => self.lower_loop(None, body, LoopControl::NONE)?,
            Stmt::Break => {
                if let Some(t) = self.loops.last() {
                    let m = t.merge;
                    self.branch(m)?;
                }
            }
            Stmt::Continue => {
                if let Some(t) = self.loops.last() {
                    let c = t.cont;
                    self.branch(c)?;
                }
            }
            Stmt::Return => self.ret()?,
            Stmt::Barrier { scope, mem } => {
                let (exec, memscope, sem) = self.barrier_operands(*scope, *mem);
                self.control_barrier(exec, memscope, sem)?;
            }
            Stmt::Fence { scope, mem } => {
                let (_, memscope, sem) = self.barrier_operands(*scope, *mem);
                self.memory_barrier(memscope, sem)?;
            }
            Stmt::Eval(e) => {
                self.expr(e)?;
            }
            Stmt::CmStore { mem, idx, stride, layout, value, view, tensor } => match tensor {
                Some(t) => self.lower_tensor_store(*mem, idx, stride, t, value, *view)?,
                None => self.lower_coop_store(*mem, idx, stride, *layout, value, *view)?,
            },
        }
        Ok(())
    }

    /// Declares the Function variable of a `var` or loop counter.
    fn declare_local(&mut self, slot: Slot) -> Word {
        let info = &self.k.slots[slot as usize];
        let (ty, len) = (info.ty, info.len);
        let mut t = self.ty(ty);
        if let Some(n) = len {
            t = self.array_ty(t, n);
        }
        let p = self.ptr(StorageClass::Function, t);
        let v = self.local_var(p);
        self.slots[slot as usize] = SlotVal::Ptr(v);
        v
    }

    /// Pointer to a var, or to its element `idx` (array element, coopmat element, vector lane).
    pub(crate) fn slot_ptr(&mut self, slot: Slot, idx: Option<&Expr>, elem_ty: Type) -> HeliosResult<Word> {
        let SlotVal::Ptr(base) = self.slots[slot as usize] else {
            return Err(crate::error::HeliosError::internal(format!(
                "{}: slot {slot} has no storage (lowering bug)",
                self.k.name
            )));
        };
        let Some(i) = idx else { return Ok(base) };
        let iv = self.expr(i)?;
        let et = self.ty(elem_ty);
        let p = self.ptr(StorageClass::Function, et);
        Ok(self.access_chain(p, None, base, [iv])?)
    }

    fn lower_if(&mut self, cond: &Expr, then: &[Stmt], els: &[Stmt]) -> HeliosResult<()> {
        let c = self.expr(cond)?;
        let then_l = self.id();
        let merge = self.id();
        let else_l = if els.is_empty() { merge } else { self.id() };
        self.selection_merge(merge, SelectionControl::NONE)?;
        self.branch_conditional(c, then_l, else_l, [])?;
        self.begin_block(Some(then_l))?;
        self.lower_block(then)?;
        if self.in_block() {
            self.branch(merge)?;
        }
        if !els.is_empty() {
            self.begin_block(Some(else_l))?;
            self.lower_block(els)?;
            if self.in_block() {
                self.branch(merge)?;
            }
        }
        self.begin_block(Some(merge))?;
        Ok(())
    }

    fn lower_for(
        &mut self,
        slot: Slot,
        from: &Expr,
        to: &Expr,
        step: Option<&Expr>,
        unroll: Option<bool>,
        body: &[Stmt],
    ) -> HeliosResult<()> {
        // Bounds and step are evaluated once, before the loop (docs/kernel-ir.md).
        let f = self.expr(from)?;
        let t = self.expr(to)?;
        let st = match step {
            Some(s) => self.expr(s)?,
            None => self.scalar_const(from.ty.scalar(), crate::ir::ast::LitScalar::Num(1.0)),
        };
        let counter = self.declare_local(slot);
        self.store(counter, f, None, [])?;
        let control = match unroll {
            Some(true) => LoopControl::UNROLL,
            Some(false) => LoopControl::DONT_UNROLL,
            None => LoopControl::NONE,
        };
        let ity = self.ty(from.ty);
        let bool_ty = self.scalar_ty(Scalar::Bool);
        let signed = from.ty.scalar() == Scalar::I32;
        let header = self.id();
        let body_l = self.id();
        let cont = self.id();
        let merge = self.id();
        self.branch(header)?;
        self.begin_block(Some(header))?;
        let i = self.load(ity, None, counter, None, [])?;
        let c = if signed {
            self.s_less_than(bool_ty, None, i, t)?
        } else {
            self.u_less_than(bool_ty, None, i, t)?
        };
        self.loop_merge(merge, cont, control, [])?;
        self.branch_conditional(c, body_l, merge, [])?;
        self.begin_block(Some(body_l))?;
        self.loops.push(LoopTargets { merge, cont });
        let r = self.lower_block(body);
        self.loops.pop();
        r?;
        if self.in_block() {
            self.branch(cont)?;
        }
        self.begin_block(Some(cont))?;
        let i2 = self.load(ity, None, counter, None, [])?;
        let next = self.i_add(ity, None, i2, st)?;
        self.store(counter, next, None, [])?;
        self.branch(header)?;
        self.begin_block(Some(merge))?;
        Ok(())
    }

    /// `while (cond) body` (cond re-evaluated in the header) or `loop { body }` when cond is None.
    fn lower_loop(&mut self, cond: Option<&Expr>, body: &[Stmt], control: LoopControl) -> HeliosResult<()> {
        let header = self.id();
        let body_l = self.id();
        let cont = self.id();
        let merge = self.id();
        self.branch(header)?;
        self.begin_block(Some(header))?;
        match cond {
            Some(e) => {
                // The condition needs its own block: the header holds only the merge and branch.
                let check = self.id();
                self.loop_merge(merge, cont, control, [])?;
                self.branch(check)?;
                self.begin_block(Some(check))?;
                let c = self.expr(e)?;
                self.branch_conditional(c, body_l, merge, [])?;
            }
            None => {
                self.loop_merge(merge, cont, control, [])?;
                self.branch(body_l)?;
            }
        }
        self.begin_block(Some(body_l))?;
        self.loops.push(LoopTargets { merge, cont });
        let r = self.lower_block(body);
        self.loops.pop();
        r?;
        if self.in_block() {
            self.branch(cont)?;
        }
        self.begin_block(Some(cont))?;
        self.branch(header)?;
        self.begin_block(Some(merge))?;
        Ok(())
    }

    /// (execution scope, memory scope, semantics) ids for a barrier.
    fn barrier_operands(&mut self, scope: ExecScope, mem: MemClasses) -> (Word, Word, Word) {
        let exec = match scope {
            ExecScope::Workgroup => spirv::Scope::Workgroup,
            ExecScope::Subgroup => spirv::Scope::Subgroup,
        };
        // The barrier orders memory among the invocations it synchronizes, so the memory scope
        // is the execution scope, for storage buffers too (Device scope would need the
        // vulkanMemoryModelDeviceScope feature in coopmat kernels and buys nothing here).
        let memscope = exec;
        let mut sem = spirv::MemorySemantics::ACQUIRE_RELEASE;
        if mem.workgroup {
            sem |= spirv::MemorySemantics::WORKGROUP_MEMORY;
        }
        if mem.storage {
            sem |= spirv::MemorySemantics::UNIFORM_MEMORY;
        }
        if !mem.workgroup && !mem.storage {
            sem = spirv::MemorySemantics::RELAXED;
        }
        let e = self.u32_const(exec as u32);
        let m = self.u32_const(memscope as u32);
        let s = self.u32_const(sem.bits());
        (e, m, s)
    }
}
