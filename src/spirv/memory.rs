//! Storage buffers (one aliased variable per vector view), shared arrays, loads, stores and
//! atomics.

use rspirv::dr::Operand;
use rspirv::spirv::{self, Decoration, StorageClass, Word};

use crate::error::HeliosResult;
use crate::ir::ast::{AtomicFn, Expr, MemRef};
use crate::ir::types::{Scalar, Type};

use super::compiler::Compiler;

impl Compiler<'_> {
    /// The variable of binding `b` seen as an array of `elem`, declared on first use.
    pub(crate) fn binding_var(&mut self, b: u32, elem: Type) -> Word {
        if let Some(&(_, v)) = self.bindings[b as usize].views.iter().find(|(t, _)| *t == elem) {
            return v;
        }
        let info = &self.k.bindings[b as usize];
        let (access, views, name) = (info.access, info.views.len(), info.name.clone());
        let st = match self.sb_structs.get(&elem) {
            Some(&s) => s,
            None => {
                let et = self.ty(elem);
                let arr = self.type_runtime_array(et);
                self.decorate(arr, Decoration::ArrayStride, [Operand::LiteralBit32(elem.bytes())]);
                let s = self.type_struct([arr]);
                self.decorate(s, Decoration::Block, []);
                self.member_decorate(s, 0, Decoration::Offset, [Operand::LiteralBit32(0)]);
                self.sb_structs.insert(elem, s);
                s
            }
        };
        let p = self.ptr(StorageClass::StorageBuffer, st);
        let v = self.global_var(p, StorageClass::StorageBuffer);
        self.decorate(v, Decoration::DescriptorSet, [Operand::LiteralBit32(0)]);
        self.decorate(v, Decoration::Binding, [Operand::LiteralBit32(b)]);
        if !access.writes() {
            self.decorate(v, Decoration::NonWritable, []);
        }
        if !access.reads() {
            self.decorate(v, Decoration::NonReadable, []);
        }
        if views > 1 {
            // Several views of one buffer alias each other.
            self.decorate(v, Decoration::Aliased, []);
        }
        self.name(v, name);
        self.bindings[b as usize].views.push((elem, v));
        v
    }

    pub(crate) fn shared_var(&mut self, i: u32) -> Word {
        if let Some(&v) = self.shared_vars.get(i as usize).filter(|&&v| v != 0) {
            return v;
        }
        if self.shared_vars.len() < self.k.shared.len() {
            self.shared_vars.resize(self.k.shared.len(), 0);
        }
        let sh = &self.k.shared[i as usize];
        let (elem, len, name, w) = (sh.elem, sh.len, sh.name.clone(), sh.vec);
        // With vector views the array holds `elem x w` (len is a multiple of w, checked in the
        // decoder), so a w-wide view is one wide access; scalars are component pointers.
        let et = if w > 1 { self.ty(Type::vector_of(elem.scalar(), w)) } else { self.ty(elem) };
        let arr = self.array_ty(et, len / u32::from(w.max(1)));
        let p = self.ptr(StorageClass::Workgroup, arr);
        let v = self.global_var(p, StorageClass::Workgroup);
        self.name(v, name);
        self.shared_vars[i as usize] = v;
        v
    }

    /// Pointer to element `idx` of a binding view or shared array, and its storage class.
    pub(crate) fn element_ptr(&mut self, mem: MemRef, idx: Word, elem: Type) -> HeliosResult<(Word, StorageClass)> {
        let et = self.ty(elem);
        match mem {
            MemRef::Binding(b) => {
                let var = self.binding_var(b, elem);
                let p = self.ptr(StorageClass::StorageBuffer, et);
                let zero = self.u32_const(0);
                Ok((self.access_chain(p, None, var, [zero, idx])?, StorageClass::StorageBuffer))
            }
            MemRef::Shared(i) => {
                let var = self.shared_var(i);
                let p = self.ptr(StorageClass::Workgroup, et);
                let w = self.shared_width(i);
                let chain = if w > 1 && elem.width() == 1 {
                    // Scalar inside a w-wide element: [idx / w][idx % w] (w is 2 or 4).
                    let u = self.scalar_ty(Scalar::U32);
                    let sh = self.u32_const(w.trailing_zeros());
                    let mask = self.u32_const(w - 1);
                    let hi = self.shift_right_logical(u, None, idx, sh)?;
                    let lo = self.bitwise_and(u, None, idx, mask)?;
                    self.access_chain(p, None, var, [hi, lo])?
                } else {
                    self.access_chain(p, None, var, [idx])?
                };
                Ok((chain, StorageClass::Workgroup))
            }
        }
    }

    /// Width of the elements shared array `i` is declared with (its widest vector view).
    fn shared_width(&self, i: u32) -> u32 {
        let sh = &self.k.shared[i as usize];
        if sh.elem.width() == 1 { u32::from(sh.vec.max(1)) } else { 1 }
    }

    /// True when a `ty` access to `mem` is narrower than the declared vector elements but not a
    /// scalar (a 2-wide view of a 4-wide shared array): it is split into scalar accesses.
    fn split_access(&self, mem: MemRef, ty: Type) -> bool {
        match mem {
            MemRef::Shared(i) => ty.width() > 1 && u32::from(ty.width()) < self.shared_width(i),
            MemRef::Binding(_) => false,
        }
    }

    /// Index of component `c` of vector `i` of a `w`-wide view, in scalars.
    fn component_index(&mut self, i: Word, w: u8, c: u8) -> HeliosResult<Word> {
        let u = self.scalar_ty(Scalar::U32);
        let wc = self.u32_const(u32::from(w));
        let base = self.i_mul(u, None, i, wc)?;
        if c == 0 {
            return Ok(base);
        }
        let cc = self.u32_const(u32::from(c));
        Ok(self.i_add(u, None, base, cc)?)
    }

    pub(crate) fn lower_load(&mut self, mem: MemRef, idx: &Expr, _vec: u8, ty: Type) -> HeliosResult<Word> {
        let i = self.expr(idx)?;
        let t = self.ty(ty);
        if self.split_access(mem, ty) {
            let st = Type::Scalar(ty.scalar());
            let stw = self.ty(st);
            let mut parts = Vec::with_capacity(usize::from(ty.width()));
            for c in 0..ty.width() {
                let j = self.component_index(i, ty.width(), c)?;
                let (p, _) = self.element_ptr(mem, j, st)?;
                parts.push(self.load(stw, None, p, None, [])?);
            }
            return Ok(self.composite_construct(t, None, parts)?);
        }
        let (p, _) = self.element_ptr(mem, i, ty)?;
        Ok(self.load(t, None, p, None, [])?)
    }

    pub(crate) fn lower_store(&mut self, mem: MemRef, idx: &Expr, value: &Expr) -> HeliosResult<()> {
        let i = self.expr(idx)?;
        let v = self.expr(value)?;
        if self.split_access(mem, value.ty) {
            let st = Type::Scalar(value.ty.scalar());
            let stw = self.ty(st);
            for c in 0..value.ty.width() {
                let j = self.component_index(i, value.ty.width(), c)?;
                let (p, _) = self.element_ptr(mem, j, st)?;
                let x = self.composite_extract(stw, None, v, [u32::from(c)])?;
                self.store(p, x, None, [])?;
            }
            return Ok(());
        }
        let (p, _) = self.element_ptr(mem, i, value.ty)?;
        self.store(p, v, None, [])?;
        Ok(())
    }

    pub(crate) fn lower_atomic(
        &mut self,
        f: AtomicFn,
        mem: MemRef,
        idx: &Expr,
        a: &Expr,
        cmp: Option<&Expr>,
        ty: Type,
    ) -> HeliosResult<Word> {
        let i = self.expr(idx)?;
        let v = self.expr(a)?;
        let (p, sc) = self.element_ptr(mem, i, ty)?;
        let t = self.ty(ty);
        let scope = self.u32_const(match sc {
            StorageClass::Workgroup => spirv::Scope::Workgroup as u32,
            // Device scope needs vulkanMemoryModelDeviceScope under the Vulkan memory model
            // (coopmat kernels); QueueFamily covers every invocation of the dispatch there.
            _ if self.k.uses.coopmat => spirv::Scope::QueueFamily as u32,
            _ => spirv::Scope::Device as u32,
        });
        // Relaxed: atomics here are counters and accumulators; ordering comes from barriers.
        let sem = self.u32_const(0);
        let signed = ty.scalar() == Scalar::I32;
        let r = match f {
            AtomicFn::Add if ty.scalar() == Scalar::F32 => self.atomic_f_add_ext(t, None, p, scope, sem, v)?,
            AtomicFn::Add => self.atomic_i_add(t, None, p, scope, sem, v)?,
            AtomicFn::Sub => self.atomic_i_sub(t, None, p, scope, sem, v)?,
            AtomicFn::Min if signed => self.atomic_s_min(t, None, p, scope, sem, v)?,
            AtomicFn::Min => self.atomic_u_min(t, None, p, scope, sem, v)?,
            AtomicFn::Max if signed => self.atomic_s_max(t, None, p, scope, sem, v)?,
            AtomicFn::Max => self.atomic_u_max(t, None, p, scope, sem, v)?,
            AtomicFn::And => self.atomic_and(t, None, p, scope, sem, v)?,
            AtomicFn::Or => self.atomic_or(t, None, p, scope, sem, v)?,
            AtomicFn::Xor => self.atomic_xor(t, None, p, scope, sem, v)?,
            AtomicFn::Exchange => self.atomic_exchange(t, None, p, scope, sem, v)?,
            AtomicFn::Cas => {
                let c = match cmp {
                    Some(c) => self.expr(c)?,
                    None => return Err(crate::error::HeliosError::internal("cas without comparand (lowering bug)")),
                };
                self.atomic_compare_exchange(t, None, p, scope, sem, sem, v, c)?
            }
        };
        Ok(r)
    }
}
