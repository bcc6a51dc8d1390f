//! The lowering context: a `Compiler` derefs to `rspirv::dr::Builder`, so lowering code reads like
//! SPIR-V; types, pointer types and constants are cached so each is declared once.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

use rspirv::dr::{Builder, Instruction, Operand};
use rspirv::spirv::{self, StorageClass, Word};

use crate::caps::CoopScope;
use crate::ir::ast::{Builtin, Kernel, LitScalar};
use crate::ir::types::{Scalar, Type};

/// Value of a slot during lowering.
#[derive(Clone, Copy)]
pub(crate) enum SlotVal {
    /// Not declared yet (or out of scope): never read by well-formed lowering.
    None,
    /// An SSA value (`let`).
    Value(Word),
    /// A Function-storage pointer (`var`, loop counters).
    Ptr(Word),
}

/// The variables of one binding: one per element type it is viewed as.
#[derive(Clone, Default)]
pub(crate) struct BindingVars {
    pub views: Vec<(Type, Word)>,
}

pub(crate) struct LoopTargets {
    pub merge: Word,
    pub cont: Word,
}

pub struct Compiler<'k> {
    b: Builder,
    pub(crate) k: &'k Kernel,
    types: HashMap<Type, Word>,
    ptrs: HashMap<(StorageClass, Word), Word>,
    consts: HashMap<(Word, u32), Word>,
    composites: HashMap<(Word, Vec<Word>), Word>,
    /// Storage-buffer block struct per element type (decorated once).
    pub(crate) sb_structs: HashMap<Type, Word>,
    arrays: HashMap<(Word, u32), Word>,
    /// Function-storage OpVariables, placed at the top of the entry block by `hoist_locals`.
    locals: Vec<Instruction>,
    pub(crate) glsl: Word,
    pub(crate) void: Word,
    pub(crate) bindings: Vec<BindingVars>,
    pub(crate) push_var: Option<Word>,
    pub(crate) spec_ids: Vec<Word>,
    pub(crate) shared_vars: Vec<Word>,
    pub(crate) builtins: HashMap<Builtin, Word>,
    pub(crate) interface: Vec<Word>,
    pub(crate) slots: Vec<SlotVal>,
    pub(crate) loops: Vec<LoopTargets>,
    /// Index of the entry function in the module (for hoisting OpVariables).
    pub(crate) func_index: usize,
}

impl Deref for Compiler<'_> {
    type Target = Builder;
    fn deref(&self) -> &Builder {
        &self.b
    }
}

impl DerefMut for Compiler<'_> {
    fn deref_mut(&mut self) -> &mut Builder {
        &mut self.b
    }
}

impl<'k> Compiler<'k> {
    pub(crate) fn new(k: &'k Kernel) -> Self {
        let mut b = Builder::new();
        b.set_version(1, 6);
        let void = b.type_void();
        Compiler {
            b,
            k,
            types: HashMap::new(),
            ptrs: HashMap::new(),
            consts: HashMap::new(),
            composites: HashMap::new(),
            sb_structs: HashMap::new(),
            arrays: HashMap::new(),
            locals: Vec::new(),
            glsl: 0,
            void,
            bindings: vec![BindingVars::default(); k.bindings.len()],
            push_var: None,
            spec_ids: Vec::new(),
            shared_vars: Vec::new(),
            builtins: HashMap::new(),
            interface: Vec::new(),
            slots: vec![SlotVal::None; k.slots.len()],
            loops: Vec::new(),
            func_index: 0,
        }
    }

    pub(crate) fn into_builder(self) -> Builder {
        self.b
    }

    // ---- types

    pub(crate) fn scalar_ty(&mut self, s: Scalar) -> Word {
        self.ty(Type::Scalar(s))
    }

    pub(crate) fn ty(&mut self, t: Type) -> Word {
        if let Some(&id) = self.types.get(&t) {
            return id;
        }
        let id = match t {
            Type::Scalar(Scalar::Bool) => self.b.type_bool(),
            Type::Scalar(Scalar::F32) => self.b.type_float(32, None),
            Type::Scalar(Scalar::F16) => self.b.type_float(16, None),
            Type::Scalar(Scalar::Bf16) => self.b.type_float(16, Some(spirv::FPEncoding::BFloat16KHR)),
            Type::Scalar(Scalar::I32) => self.b.type_int(32, 1),
            Type::Scalar(Scalar::U32) => self.b.type_int(32, 0),
            Type::Vector(s, n) => {
                let e = self.scalar_ty(s);
                self.b.type_vector(e, u32::from(n))
            }
            Type::CoopMat(c) => {
                let e = self.scalar_ty(c.elem);
                let scope = self.u32_const(match c.scope {
                    CoopScope::Subgroup => spirv::Scope::Subgroup as u32,
                    CoopScope::Workgroup => spirv::Scope::Workgroup as u32,
                });
                let rows = self.u32_const(c.rows);
                let cols = self.u32_const(c.cols);
                let use_ = self.u32_const(c.use_.spirv());
                self.b.type_cooperative_matrix_khr(e, scope, rows, cols, use_)
            }
        };
        self.types.insert(t, id);
        id
    }

    pub(crate) fn ptr(&mut self, sc: StorageClass, pointee: Word) -> Word {
        if let Some(&id) = self.ptrs.get(&(sc, pointee)) {
            return id;
        }
        let id = self.b.type_pointer(None, sc, pointee);
        self.ptrs.insert((sc, pointee), id);
        id
    }

    /// A fixed-size array type (Function and Workgroup storage: no explicit layout).
    pub(crate) fn array_ty(&mut self, elem: Word, len: u32) -> Word {
        if let Some(&id) = self.arrays.get(&(elem, len)) {
            return id;
        }
        let n = self.u32_const(len);
        let id = self.b.type_array(elem, n);
        self.arrays.insert((elem, len), id);
        id
    }

    // ---- constants

    /// A 32-bit (or narrower) constant of type `ty` with raw bits `bits`, declared once.
    pub(crate) fn const_bits(&mut self, ty: Word, bits: u32) -> Word {
        if let Some(&id) = self.consts.get(&(ty, bits)) {
            return id;
        }
        let id = self.b.constant_bit32(ty, bits);
        self.consts.insert((ty, bits), id);
        id
    }

    pub(crate) fn u32_const(&mut self, v: u32) -> Word {
        let t = self.scalar_ty(Scalar::U32);
        self.const_bits(t, v)
    }

    pub(crate) fn bool_const(&mut self, v: bool) -> Word {
        let t = self.scalar_ty(Scalar::Bool);
        // bits 2/3 keep bools apart from numeric constants in the cache
        if let Some(&id) = self.consts.get(&(t, 2 + u32::from(v))) {
            return id;
        }
        let id = if v { self.b.constant_true(t) } else { self.b.constant_false(t) };
        self.consts.insert((t, 2 + u32::from(v)), id);
        id
    }

    /// A scalar constant of scalar type `s` from an IR literal.
    pub(crate) fn scalar_const(&mut self, s: Scalar, v: LitScalar) -> Word {
        match (s, v) {
            (Scalar::Bool, LitScalar::Bool(b)) => self.bool_const(b),
            (Scalar::Bool, LitScalar::Num(x)) => self.bool_const(x != 0.0),
            (_, LitScalar::Bool(b)) => self.scalar_const(s, LitScalar::Num(if b { 1.0 } else { 0.0 })),
            (_, LitScalar::Num(x)) => {
                let bits = match s {
                    Scalar::F32 => (x as f32).to_bits(),
                    Scalar::F16 => u32::from(half::f16::from_f64(x).to_bits()),
                    Scalar::Bf16 => u32::from(half::bf16::from_f64(x).to_bits()),
                    Scalar::I32 => (x as i64 as i32) as u32,
                    Scalar::U32 => x as i64 as u32,
                    Scalar::Bool => 0,
                };
                let t = self.scalar_ty(s);
                self.const_bits(t, bits)
            }
        }
    }

    /// A constant of scalar or vector type `t` with every lane `v`.
    pub(crate) fn splat_const(&mut self, t: Type, v: LitScalar) -> Word {
        let lanes = vec![v; usize::from(t.width())];
        self.value_const(t, &lanes)
    }

    pub(crate) fn value_const(&mut self, t: Type, lanes: &[LitScalar]) -> Word {
        let s = t.scalar();
        if t.width() == 1 {
            return self.scalar_const(s, lanes[0]);
        }
        let parts: Vec<Word> = lanes.iter().map(|&l| self.scalar_const(s, l)).collect();
        let ty = self.ty(t);
        if let Some(&id) = self.composites.get(&(ty, parts.clone())) {
            return id;
        }
        let id = self.b.constant_composite(ty, parts.iter().copied());
        self.composites.insert((ty, parts), id);
        id
    }

    // ---- variables

    /// A module-scope variable (pushed straight into the globals so no block captures it).
    pub(crate) fn global_var(&mut self, ptr_ty: Word, sc: StorageClass) -> Word {
        let id = self.b.id();
        let inst = Instruction::new(spirv::Op::Variable, Some(ptr_ty), Some(id), vec![Operand::StorageClass(sc)]);
        self.b.module_mut().types_global_values.push(inst);
        self.interface.push(id);
        id
    }

    /// A Function-storage variable; `hoist_locals` moves it to the top of the entry block, as
    /// SPIR-V requires (collected, then spliced once: inserting each at the front is quadratic).
    pub(crate) fn local_var(&mut self, ptr_ty: Word) -> Word {
        let id = self.b.id();
        self.locals.push(Instruction::new(
            spirv::Op::Variable,
            Some(ptr_ty),
            Some(id),
            vec![Operand::StorageClass(StorageClass::Function)],
        ));
        id
    }

    /// Places the collected OpVariables at the start of the entry block.
    pub(crate) fn hoist_locals(&mut self) {
        let locals = std::mem::take(&mut self.locals);
        let fi = self.func_index;
        if let Some(block) = self.b.module_mut().functions.get_mut(fi).and_then(|f| f.blocks.first_mut()) {
            block.instructions.splice(0..0, locals);
        }
    }

    /// Whether the current block is still open (not ended by a terminator).
    pub(crate) fn in_block(&self) -> bool {
        self.b.selected_block().is_some()
    }
}
