//! Feature structs that ash 0.38 predates, declared from the Vulkan registry.
//! They are chained through `p_next` like any other feature struct.

use std::ffi::c_void;

use ash::vk;

/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV` (VK_NV_cooperative_matrix2).
pub const STYPE_COOPMAT2_FEATURES_NV: i32 = 1_000_593_000;
/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR` (VK_KHR_shader_bfloat16).
pub const STYPE_BFLOAT16_FEATURES_KHR: i32 = 1_000_141_000;
/// `VK_COMPONENT_TYPE_BFLOAT16_KHR`.
pub const COMPONENT_TYPE_BFLOAT16: i32 = 1_000_141_000;

pub const NV_COOPMAT2: &std::ffi::CStr = c"VK_NV_cooperative_matrix2";
pub const KHR_BFLOAT16: &std::ffi::CStr = c"VK_KHR_shader_bfloat16";

/// `VkPhysicalDeviceCooperativeMatrix2FeaturesNV`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CooperativeMatrix2FeaturesNV {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub workgroup_scope: vk::Bool32,
    pub flexible_dimensions: vk::Bool32,
    pub reductions: vk::Bool32,
    pub conversions: vk::Bool32,
    pub per_element_operations: vk::Bool32,
    pub tensor_addressing: vk::Bool32,
    pub block_loads: vk::Bool32,
}

impl Default for CooperativeMatrix2FeaturesNV {
    fn default() -> Self {
        CooperativeMatrix2FeaturesNV {
            s_type: vk::StructureType::from_raw(STYPE_COOPMAT2_FEATURES_NV),
            p_next: std::ptr::null_mut(),
            workgroup_scope: 0,
            flexible_dimensions: 0,
            reductions: 0,
            conversions: 0,
            per_element_operations: 0,
            tensor_addressing: 0,
            block_loads: 0,
        }
    }
}

/// `VkPhysicalDeviceShaderBfloat16FeaturesKHR`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ShaderBfloat16FeaturesKHR {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub shader_bfloat16_type: vk::Bool32,
    pub shader_bfloat16_dot_product: vk::Bool32,
    pub shader_bfloat16_cooperative_matrix: vk::Bool32,
}

impl Default for ShaderBfloat16FeaturesKHR {
    fn default() -> Self {
        ShaderBfloat16FeaturesKHR {
            s_type: vk::StructureType::from_raw(STYPE_BFLOAT16_FEATURES_KHR),
            p_next: std::ptr::null_mut(),
            shader_bfloat16_type: 0,
            shader_bfloat16_dot_product: 0,
            shader_bfloat16_cooperative_matrix: 0,
        }
    }
}

// SAFETY: both structs are #[repr(C)] with the registry layout (sType, pNext first), and the
// registry lists them as extending VkPhysicalDeviceFeatures2 and VkDeviceCreateInfo.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for CooperativeMatrix2FeaturesNV {}
// SAFETY: see above.
unsafe impl vk::ExtendsDeviceCreateInfo for CooperativeMatrix2FeaturesNV {}
// SAFETY: see above.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for ShaderBfloat16FeaturesKHR {}
// SAFETY: see above.
unsafe impl vk::ExtendsDeviceCreateInfo for ShaderBfloat16FeaturesKHR {}
