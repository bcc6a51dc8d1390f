//! Plain-data contracts shared by the runtime (which fills them) and the kernel
//! assembler (which reads them). No Vulkan types here.

/// Scalar component types a cooperative matrix may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoopComponent {
    F16,
    F32,
    Bf16,
    F64,
    I8,
    U8,
    I32,
    U32,
    Other,
}

impl CoopComponent {
    pub fn as_str(self) -> &'static str {
        match self {
            CoopComponent::F16 => "f16",
            CoopComponent::F32 => "f32",
            CoopComponent::Bf16 => "bf16",
            CoopComponent::F64 => "f64",
            CoopComponent::I8 => "i8",
            CoopComponent::U8 => "u8",
            CoopComponent::I32 => "i32",
            CoopComponent::U32 => "u32",
            CoopComponent::Other => "other",
        }
    }
}

/// Whether a cooperative-matrix shape is for one subgroup (KHR) or a workgroup (NV coopmat2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoopScope {
    Subgroup,
    Workgroup,
}

/// One `VkCooperativeMatrixPropertiesKHR` entry: `result = a(MxK) * b(KxN) + c(MxN)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoopMatShape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub a: CoopComponent,
    pub b: CoopComponent,
    pub c: CoopComponent,
    pub result: CoopComponent,
    pub saturating: bool,
    pub scope: CoopScope,
}

/// What the kernel assembler needs to know about the device to accept or reject a kernel.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeviceCaps {
    pub f16: bool,
    pub bf16: bool,
    pub int16: bool,
    pub int64: bool,
    pub storage_16bit: bool,
    pub coop_mat: bool,
    pub coop_mat2: bool,
    /// VK_NV_cooperative_matrix2 `cooperativeMatrixConversions`: acc -> a/b casts.
    pub coop_mat2_conversions: bool,
    pub coop_mat_shapes: Vec<CoopMatShape>,
    pub subgroup_size: u32,
    pub max_workgroup_invocations: u32,
    pub max_workgroup_size: [u32; 3],
    pub max_shared_memory_bytes: u32,
    pub max_push_constant_bytes: u32,
    pub atomic_float_add: bool,
    pub subgroup_arithmetic: bool,
    pub subgroup_shuffle: bool,
}

/// How a kernel touches one of its storage-buffer bindings; barriers are derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub fn parse(s: &str) -> Option<Access> {
        match s {
            "read" => Some(Access::Read),
            "write" => Some(Access::Write),
            "readwrite" => Some(Access::ReadWrite),
            _ => None,
        }
    }
    pub fn reads(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    pub fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
}

/// Everything the runtime needs to build a compute pipeline from SPIR-V words.
/// Binding i is the storage buffer at set 0, binding i; push constants start at offset 0.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineLayoutDesc {
    pub bindings: Vec<Access>,
    pub push_constant_bytes: u32,
    pub entry_point: String,
    pub label: String,
    /// (constant_id, value as raw 32-bit word) pairs for VkSpecializationInfo.
    pub specialization: Vec<(u32, u32)>,
    /// Pin the subgroup size (VK_EXT_subgroup_size_control) when a kernel depends on it.
    pub required_subgroup_size: Option<u32>,
}
