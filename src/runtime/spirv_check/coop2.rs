//! VK_NV_cooperative_matrix2 instructions (tensor layouts and views, tensor-addressed loads and
//! stores, conversions, reductions). Only devices with that extension accept the capabilities
//! these need (`decorations::capabilities`), and there every operand gets the generic checks:
//! defined before use, and a value (or, for layouts, a constant) rather than a type or label.

use rspirv::dr::Instruction;
use rspirv::spirv::Op;

use super::facts::{id_at, Facts};
use super::{fail, Res};

pub fn body(f: &Facts, ins: &Instruction, op: Op) -> Res<()> {
    use Op::*;
    match op {
        CreateTensorLayoutNV | TensorLayoutSetDimensionNV | TensorLayoutSetStrideNV | TensorLayoutSliceNV
        | TensorLayoutSetClampValueNV | CreateTensorViewNV | TensorViewSetDimensionNV | TensorViewSetStrideNV
        | TensorViewSetClipNV | TensorLayoutSetBlockSizeNV | CooperativeMatrixLoadTensorNV
        | CooperativeMatrixStoreTensorNV | CooperativeMatrixConvertNV | CooperativeMatrixTransposeNV => {
            for (i, o) in ins.operands.iter().enumerate() {
                if let rspirv::dr::Operand::IdRef(_) = o {
                    f.ty_of(id_at(ins, i)?)?;
                }
            }
            Ok(())
        }
        _ => fail(format!("{op:?} is not an instruction Helios kernels use")),
    }
}
