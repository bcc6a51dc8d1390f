//! DeviceCaps presets for validating descriptions without a device (tooling, spirv-val sweeps,
//! cargo tests): every feature on, NVIDIA-like limits and cooperative-matrix shapes.

use crate::caps::{CoopComponent as C, CoopMatShape, CoopScope, DeviceCaps};

fn shape(m: u32, n: u32, k: u32, a: C, c: C, scope: CoopScope) -> CoopMatShape {
    CoopMatShape { m, n, k, a, b: a, c, result: c, saturating: false, scope }
}

/// Caps of a device that has everything the IR can express: used by `kernelSpirv` /
/// `kernelDisassembly` when no device is initialized, so SPIR-V can be produced and checked
/// anywhere. Shapes are the ones NVIDIA Hopper drivers list (16x16x16 and 16x8x16 f16/bf16,
/// f16 or f32 accumulators; 16x8x8 tf32 is not expressible here).
pub fn permissive_caps() -> DeviceCaps {
    let mut shapes = Vec::new();
    for scope in [CoopScope::Subgroup, CoopScope::Workgroup] {
        for (m, n, k) in [(16, 16, 16), (16, 8, 16)] {
            shapes.push(shape(m, n, k, C::F16, C::F16, scope));
            shapes.push(shape(m, n, k, C::F16, C::F32, scope));
            shapes.push(shape(m, n, k, C::Bf16, C::F32, scope));
        }
    }
    DeviceCaps {
        f16: true,
        bf16: true,
        int16: true,
        int64: true,
        storage_16bit: true,
        coop_mat: true,
        coop_mat2: true,
        coop_mat2_conversions: true,
        coop_mat_shapes: shapes,
        subgroup_size: 32,
        max_workgroup_invocations: 1024,
        max_workgroup_size: [1024, 1024, 64],
        max_shared_memory_bytes: 48 * 1024,
        max_push_constant_bytes: 256,
        atomic_float_add: true,
        subgroup_arithmetic: true,
        subgroup_shuffle: true,
    }
}

/// Caps like lavapipe's (no coopmat, no bf16, 32 KiB shared, subgroup size 8): for tests that
/// check what a small device rejects.
pub fn lavapipe_like_caps() -> DeviceCaps {
    DeviceCaps {
        f16: true,
        bf16: false,
        int16: true,
        int64: true,
        storage_16bit: true,
        coop_mat: false,
        coop_mat2: false,
        coop_mat2_conversions: false,
        coop_mat_shapes: Vec::new(),
        subgroup_size: 8,
        max_workgroup_invocations: 1024,
        max_workgroup_size: [1024, 1024, 1024],
        max_shared_memory_bytes: 32 * 1024,
        max_push_constant_bytes: 128,
        atomic_float_add: true,
        subgroup_arithmetic: true,
        subgroup_shuffle: true,
    }
}
