//! IR types (docs/kernel-ir.md "Types"): scalars, vectors of 2–4 and cooperative matrices.

use std::fmt;

use crate::caps::{CoopComponent, CoopScope};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scalar {
    F32,
    F16,
    Bf16,
    I32,
    U32,
    Bool,
}

impl Scalar {
    pub fn parse(s: &str) -> Option<Scalar> {
        Some(match s {
            "f32" => Scalar::F32,
            "f16" => Scalar::F16,
            "bf16" => Scalar::Bf16,
            "i32" => Scalar::I32,
            "u32" => Scalar::U32,
            "bool" => Scalar::Bool,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Scalar::F32 => "f32",
            Scalar::F16 => "f16",
            Scalar::Bf16 => "bf16",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::Bool => "bool",
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::F16 | Scalar::Bf16)
    }
    pub fn is_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::U32)
    }
    pub fn is_numeric(self) -> bool {
        self != Scalar::Bool
    }
    /// Bytes in memory (bool has no memory layout in the IR).
    pub fn bytes(self) -> u32 {
        match self {
            Scalar::F16 | Scalar::Bf16 => 2,
            _ => 4,
        }
    }
    pub fn bits(self) -> u32 {
        self.bytes() * 8
    }
    pub fn coop_component(self) -> CoopComponent {
        match self {
            Scalar::F32 => CoopComponent::F32,
            Scalar::F16 => CoopComponent::F16,
            Scalar::Bf16 => CoopComponent::Bf16,
            Scalar::I32 => CoopComponent::I32,
            Scalar::U32 => CoopComponent::U32,
            Scalar::Bool => CoopComponent::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoopUse {
    A,
    B,
    Acc,
}

impl CoopUse {
    /// The `CooperativeMatrixUse` operand value.
    pub fn spirv(self) -> u32 {
        match self {
            CoopUse::A => 0,
            CoopUse::B => 1,
            CoopUse::Acc => 2,
        }
    }
    fn name(self) -> &'static str {
        match self {
            CoopUse::A => "a",
            CoopUse::B => "b",
            CoopUse::Acc => "acc",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoopMatType {
    pub use_: CoopUse,
    pub elem: Scalar,
    pub rows: u32,
    pub cols: u32,
    pub scope: CoopScope,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    Scalar(Scalar),
    Vector(Scalar, u8),
    CoopMat(CoopMatType),
}

impl Type {
    pub const BOOL: Type = Type::Scalar(Scalar::Bool);
    pub const U32: Type = Type::Scalar(Scalar::U32);
    pub const I32: Type = Type::Scalar(Scalar::I32);
    pub const F32: Type = Type::Scalar(Scalar::F32);

    /// Parses `f32`, `u32x4`, ... (coopmats are objects, parsed in decode).
    pub fn parse_value(s: &str) -> Option<Type> {
        if let Some((sc, n)) = s.split_once('x') {
            let sc = Scalar::parse(sc)?;
            let n: u8 = match n {
                "2" => 2,
                "3" => 3,
                "4" => 4,
                _ => return None,
            };
            return Some(Type::Vector(sc, n));
        }
        Scalar::parse(s).map(Type::Scalar)
    }
    pub fn scalar(self) -> Scalar {
        match self {
            Type::Scalar(s) | Type::Vector(s, _) => s,
            Type::CoopMat(c) => c.elem,
        }
    }
    /// Lanes of a scalar/vector (1 for scalars and coopmats).
    pub fn width(self) -> u8 {
        match self {
            Type::Vector(_, n) => n,
            _ => 1,
        }
    }
    pub fn is_coopmat(self) -> bool {
        matches!(self, Type::CoopMat(_))
    }
    pub fn coopmat(self) -> Option<CoopMatType> {
        match self {
            Type::CoopMat(c) => Some(c),
            _ => None,
        }
    }
    /// Same shape with another scalar component.
    pub fn with_scalar(self, s: Scalar) -> Type {
        match self {
            Type::Scalar(_) => Type::Scalar(s),
            Type::Vector(_, n) => Type::Vector(s, n),
            Type::CoopMat(c) => Type::CoopMat(CoopMatType { elem: s, ..c }),
        }
    }
    pub fn vector_of(s: Scalar, n: u8) -> Type {
        if n == 1 {
            Type::Scalar(s)
        } else {
            Type::Vector(s, n)
        }
    }
    /// Bytes of one element in memory (vec3 padded to vec4, std430).
    pub fn bytes(self) -> u32 {
        match self {
            Type::Scalar(s) => s.bytes(),
            Type::Vector(s, n) => s.bytes() * if n == 3 { 4 } else { u32::from(n) },
            Type::CoopMat(_) => 0,
        }
    }
    pub fn align(self) -> u32 {
        self.bytes()
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(s) => f.write_str(s.name()),
            Type::Vector(s, n) => write!(f, "{}x{}", s.name(), n),
            Type::CoopMat(c) => write!(
                f,
                "coopmat<{},{},{}x{},{}>",
                c.use_.name(),
                c.elem.name(),
                c.rows,
                c.cols,
                match c.scope {
                    CoopScope::Subgroup => "subgroup",
                    CoopScope::Workgroup => "workgroup",
                }
            ),
        }
    }
}
