//! The typed kernel AST produced by `decode` (which also validates it): every expression carries
//! its type and every name is resolved to a slot, so lowering never looks anything up by string.

use crate::caps::Access;

use super::types::{CoopMatType, Scalar, Type};

/// Index into `Kernel::slots`: a `let`, `var` or `for` variable.
pub type Slot = u32;

#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub workgroup: [WorkgroupDim; 3],
    pub bindings: Vec<Binding>,
    pub push: Vec<PushField>,
    pub spec: Vec<SpecConst>,
    pub shared: Vec<SharedArray>,
    pub subgroup_size: Option<u32>,
    pub slots: Vec<SlotInfo>,
    pub body: Vec<Stmt>,
    /// Features the body uses, collected while decoding (capabilities to declare).
    pub uses: Uses,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkgroupDim {
    Fixed(u32),
    /// Index into `Kernel::spec`.
    Spec(u32),
}

#[derive(Debug, Clone)]
pub struct Binding {
    pub name: String,
    pub elem: Scalar,
    pub access: Access,
    /// Element types the body reads or writes the buffer as (`elem`, its x2/x4 vectors, or a
    /// reinterpretation with `as`); each gets its own aliased variable.
    pub views: Vec<Type>,
}

#[derive(Debug, Clone)]
pub struct PushField {
    pub name: String,
    pub ty: Type,
    pub offset: u32,
}

#[derive(Debug, Clone)]
pub struct SpecConst {
    pub name: String,
    pub id: u32,
    pub ty: Scalar,
    /// Raw 32-bit value (f32 bits for f32, 0/1 for bool).
    pub bits: u32,
}

#[derive(Debug, Clone)]
pub struct SharedArray {
    pub name: String,
    pub elem: Type,
    pub len: u32,
    /// Widest vector view (`vec: 2|4`) the body uses on a scalar-element array; the lowering
    /// declares the array with `elem x vec` elements so those views are single wide accesses.
    pub vec: u8,
    /// Widths of the views cooperative-matrix loads/stores use, with their node paths: they must
    /// equal `vec` (checked once the body is decoded, when `vec` is final).
    pub coop_views: Vec<(u8, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    Let,
    Var,
    LoopVar,
}

#[derive(Debug, Clone)]
pub struct SlotInfo {
    pub name: String,
    pub kind: SlotKind,
    pub ty: Type,
    /// Array length for `var` arrays.
    pub len: Option<u32>,
}

/// Features used by the kernel body, so the module declares only what it needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Uses {
    pub f16: bool,
    pub bf16: bool,
    pub storage16: bool,
    pub coopmat: bool,
    pub coopmat2: bool,
    pub subgroup_basic: bool,
    pub subgroup_vote: bool,
    pub subgroup_arith: bool,
    pub subgroup_ballot: bool,
    pub subgroup_shuffle: bool,
    pub atomic_float_add: bool,
    pub glsl: bool,
    pub tensor_addressing: bool,
    /// A coopmat cast that changes the use (acc -> a/b): CooperativeMatrixConversionsNV.
    pub coop_convert: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemRef {
    Binding(u32),
    Shared(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Row,
    Col,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecScope {
    Workgroup,
    Subgroup,
}

/// Memory classes a barrier or fence orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemClasses {
    pub workgroup: bool,
    pub storage: bool,
}

/// A bounds-checked coopmat access through an NV tensor layout (coopmat2): the matrix is the
/// slice at (`at[0]`, `at[1]`) of a row-major `dims[0]` x `dims[1]` tensor whose rows are
/// `stride` elements apart, starting at element `idx`. Loads fill out-of-range elements per
/// `clamp`; stores skip them.
#[derive(Debug, Clone)]
pub struct TensorAccess {
    pub dims: [Expr; 2],
    pub at: [Expr; 2],
    pub clamp: TensorClamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorClamp {
    /// Out-of-range elements read as zero.
    Zero,
    /// Out-of-range elements read as the nearest in-range one.
    Edge,
}

#[derive(Debug, Clone)]
pub enum Stmt {
    Let { slot: Slot, value: Expr },
    Var { slot: Slot, init: Option<Expr> },
    Set { slot: Slot, idx: Option<Expr>, value: Expr },
    Store { mem: MemRef, idx: Expr, value: Expr },
    If { cond: Expr, then: Vec<Stmt>, els: Vec<Stmt> },
    For { slot: Slot, from: Expr, to: Expr, step: Option<Expr>, unroll: Option<bool>, body: Vec<Stmt> },
    While { cond: Expr, body: Vec<Stmt> },
    Loop { body: Vec<Stmt> },
    Break,
    Continue,
    Return,
    Barrier { scope: ExecScope, mem: MemClasses },
    Fence { scope: ExecScope, mem: MemClasses },
    Eval(Expr),
    CmStore { mem: MemRef, idx: Expr, stride: Expr, layout: Layout, value: Expr, view: Type, tensor: Option<Box<TensorAccess>> },
}

#[derive(Debug, Clone)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Type,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LitScalar {
    /// Any number; converted to the literal's type at lowering.
    Num(f64),
    Bool(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    GlobalId,
    LocalId,
    WorkgroupId,
    NumWorkgroups,
    LocalIndex,
    SubgroupId,
    SubgroupSize,
    SubgroupInvocation,
    NumSubgroups,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add, Sub, Mul, Div, Rem,
    Lt, Le, Gt, Ge, Eq, Ne,
    And, Or, Xor,
    BAnd, BOr, BXor, Shl, Shr,
    Pow, Atan2, Min, Max, Step, Dot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Neg, Not, BNot,
    Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Tanh, Sin, Cos,
    Abs, Floor, Ceil, Round, Trunc, Fract, Sign,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TernOp {
    Fma,
    Mix,
    Clamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubgroupFn {
    Add, Mul, Min, Max, And, Or, Xor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubgroupMode {
    Reduce,
    Inclusive,
    Exclusive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneOp {
    Shuffle,
    ShuffleXor,
    Broadcast,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicFn {
    Add, Sub, Min, Max, And, Or, Xor, Exchange, Cas,
}

#[derive(Debug, Clone)]
pub enum ExprKind {
    Lit(Vec<LitScalar>),
    Get { slot: Slot, idx: Option<Box<Expr>> },
    Push(u32),
    Spec(u32),
    Builtin(Builtin),
    Load { mem: MemRef, idx: Box<Expr>, vec: u8 },
    Swizzle { a: Box<Expr>, comps: [u8; 4], n: u8 },
    Construct(Vec<Expr>),
    Binary { op: BinOp, a: Box<Expr>, b: Box<Expr> },
    Unary { op: UnOp, a: Box<Expr> },
    Ternary { op: TernOp, a: Box<Expr>, b: Box<Expr>, c: Box<Expr> },
    Select { c: Box<Expr>, a: Box<Expr>, b: Box<Expr> },
    Cast(Box<Expr>),
    Bitcast(Box<Expr>),
    Subgroup { f: SubgroupFn, mode: SubgroupMode, a: Box<Expr> },
    Lane { op: LaneOp, a: Box<Expr>, b: Box<Expr> },
    BroadcastFirst(Box<Expr>),
    Elect,
    Vote { all: bool, a: Box<Expr> },
    Atomic { f: AtomicFn, mem: MemRef, idx: Box<Expr>, a: Box<Expr>, cmp: Option<Box<Expr>> },
    CmFill(Box<Expr>),
    /// `view`: the memory element type the pointer is formed with (idx and stride count it).
    CmLoad { mem: MemRef, idx: Box<Expr>, stride: Box<Expr>, layout: Layout, view: Type, tensor: Option<Box<TensorAccess>> },
    CmMulAdd { a: Box<Expr>, b: Box<Expr>, c: Box<Expr>, sat: bool },
    CmLen(CoopMatType),
}
