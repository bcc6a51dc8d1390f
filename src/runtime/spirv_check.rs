//! Checks a SPIR-V module before the driver sees it. Drivers (and the validation layer) crash on
//! malformed modules instead of failing cleanly, and `createPipeline` takes words from anyone, so
//! every module — raw or assembled from the kernel IR — passes two stages:
//!
//! 1. `validate`: a validator for the SPIR-V subset Helios kernels use (docs/architecture.md,
//!    *SPIR-V checking*): grammar and layout order (`structure`), ids in bounds, defined once and
//!    before use, well-formed types and constants; an allowlist of capabilities (gated on the
//!    device), extensions, decorations and opcodes, each opcode with the operand types it needs
//!    and constant indices in bounds (`rules`, `decorations`); structured control flow and SSA
//!    dominance (`cfg`); declared binding access against the shader's reads and writes (`access`).
//! 2. the layout checks below: a GLCompute entry point of the layout's name, buffers within the
//!    layout's set-0 bindings, a push-constant block within `pushConstantBytes`.

mod access;
mod cfg;
mod coop2;
mod decorations;
mod facts;
mod layout;
mod rules;
mod structure;
#[cfg(test)]
mod fuzz_tests;

use std::collections::{HashMap, HashSet};

use crate::caps::{DeviceCaps, PipelineLayoutDesc};
use crate::error::{HeliosError, HeliosResult};

/// Results of the validator's stages; every failure is a "spirv is malformed" argument error.
type Res<T> = HeliosResult<T>;

fn fail<T>(msg: String) -> Res<T> {
    Err(malformed(msg))
}

/// Stage 1 (see the module comment). Runs inside `catch_unwind`: a panic in the parser or a
/// rule is a bug, reported as an internal error rather than taking the process down.
pub fn validate(spirv: &[u32], desc: &PipelineLayoutDesc, caps: &DeviceCaps) -> HeliosResult<()> {
    let run = || -> HeliosResult<()> {
        let module = structure::load(spirv)?;
        let mut facts = structure::ids(&module, spirv[3])?;
        facts.declared = module
            .capabilities
            .iter()
            .filter_map(|c| match c.operands.first() {
                Some(rspirv::dr::Operand::Capability(c)) => Some(*c),
                _ => None,
            })
            .collect();
        structure::globals(&module, &mut facts)?;
        let glsl = decorations::header(&module, caps)?;
        facts.vulkan_memory_model = facts.declared.contains(&rspirv::spirv::Capability::VulkanMemoryModel);
        decorations::names(&module, &facts)?;
        layout::shared_memory(&module, &facts, caps)?;
        decorations::entry_points(&module, &facts, caps)?;
        decorations::annotations(&module, &facts)?;
        layout::check(&module, &facts)?;
        structure::functions(&module, &facts)?;
        for f in &module.functions {
            let ret = f.def.as_ref().and_then(|d| d.result_type).unwrap_or(0);
            for ins in f.all_inst_iter().filter(|i| !matches!(i.class.opcode, rspirv::spirv::Op::Function | rspirv::spirv::Op::FunctionEnd | rspirv::spirv::Op::Label | rspirv::spirv::Op::FunctionParameter)) {
                rules::body(&facts, ins, ret, glsl)?;
            }
            cfg::function(f)?;
        }
        access::check(&module, &desc.bindings, &desc.label)
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(r) => r,
        Err(_) => Err(HeliosError::internal("the SPIR-V validator panicked on this module (a Helios bug; please report it)")),
    }
}

/// Both stages: the whole check `createPipeline` and `compileKernel` run before the driver.
pub fn check_module(spirv: &[u32], desc: &PipelineLayoutDesc, caps: &DeviceCaps) -> HeliosResult<()> {
    validate(spirv, desc, caps)?;
    check(spirv, &desc.entry_point, desc.bindings.len(), desc.push_constant_bytes)
}

const MAGIC: u32 = 0x0723_0203;

mod op {
    pub const ENTRY_POINT: u32 = 15;
    pub const TYPE_INT: u32 = 21;
    pub const TYPE_FLOAT: u32 = 22;
    pub const TYPE_VECTOR: u32 = 23;
    pub const TYPE_MATRIX: u32 = 24;
    pub const TYPE_ARRAY: u32 = 28;
    pub const TYPE_STRUCT: u32 = 30;
    pub const TYPE_POINTER: u32 = 32;
    pub const CONSTANT: u32 = 43;
    pub const FUNCTION: u32 = 54;
    pub const FUNCTION_END: u32 = 56;
    pub const VARIABLE: u32 = 59;
    pub const DECORATE: u32 = 71;
    pub const MEMBER_DECORATE: u32 = 72;
    /// OpBranch, OpBranchConditional, OpSwitch, OpKill, OpReturn, OpReturnValue,
    /// OpUnreachable, OpTerminateInvocation.
    pub const TERMINATORS: [u32; 8] = [249, 250, 251, 252, 253, 254, 255, 4416];
}

const EXEC_GLCOMPUTE: u32 = 5;
const DECORATION_ARRAY_STRIDE: u32 = 6;
const DECORATION_BINDING: u32 = 33;
const DECORATION_DESCRIPTOR_SET: u32 = 34;
const DECORATION_OFFSET: u32 = 35;
const STORAGE_UNIFORM: u32 = 2;
const STORAGE_PUSH_CONSTANT: u32 = 9;
const STORAGE_BUFFER: u32 = 12;

fn literal_string(words: &[u32]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn malformed(msg: String) -> HeliosError {
    HeliosError::invalid_argument(format!("spirv is malformed: {msg}"))
}

/// Types the push-constant size computation understands; anything else is `Opaque`.
#[derive(Debug, Clone)]
enum Ty {
    Scalar(u32),
    Vector(u32, u32),
    Array { elem: u32, len: u32 },
    Struct(Vec<u32>),
    Pointer { pointee: u32 },
}

/// What one pass over the module collects.
#[derive(Default)]
struct Module {
    entries: Vec<(u32, u32, String)>,
    functions: HashSet<u32>,
    types: HashMap<u32, Ty>,
    constants: HashMap<u32, u32>,
    sets: HashMap<u32, u32>,
    slots: HashMap<u32, u32>,
    strides: HashMap<u32, u32>,
    offsets: HashMap<(u32, u32), u32>,
    /// (variable id, pointer type id, storage class)
    variables: Vec<(u32, u32, u32)>,
}

impl Module {
    fn read(spirv: &[u32]) -> HeliosResult<Module> {
        if spirv.len() < 5 || spirv[0] != MAGIC {
            return Err(HeliosError::invalid_argument(format!(
                "spirv is not a SPIR-V module ({} words, magic {:#x})",
                spirv.len(),
                spirv.first().copied().unwrap_or(0)
            )));
        }
        let mut m = Module::default();
        let mut open_function: Option<usize> = None;
        let mut last_op = 0;
        let mut at = 5;
        while at < spirv.len() {
            let count = (spirv[at] >> 16) as usize;
            let opcode = spirv[at] & 0xffff;
            if count == 0 || at + count > spirv.len() {
                return Err(malformed(format!("instruction at word {at} runs past the end of the module")));
            }
            let ins = &spirv[at..at + count];
            match opcode {
                op::FUNCTION => {
                    if open_function.is_some() {
                        return Err(malformed(format!("OpFunction at word {at} inside another function")));
                    }
                    if count >= 3 {
                        m.functions.insert(ins[2]);
                    }
                    open_function = Some(at);
                }
                op::FUNCTION_END => {
                    if open_function.take().is_none() {
                        return Err(malformed(format!("OpFunctionEnd at word {at} outside a function")));
                    }
                    if !op::TERMINATORS.contains(&last_op) {
                        return Err(malformed(format!("the function ending at word {at} does not end with a block terminator")));
                    }
                }
                _ => m.note(opcode, ins),
            }
            last_op = opcode;
            at += count;
        }
        if let Some(start) = open_function {
            return Err(malformed(format!("the function starting at word {start} never ends (truncated module?)")));
        }
        Ok(m)
    }

    fn note(&mut self, opcode: u32, ins: &[u32]) {
        let n = ins.len();
        match opcode {
            op::ENTRY_POINT if n >= 4 => self.entries.push((ins[1], ins[2], literal_string(&ins[3..]))),
            op::DECORATE if n >= 4 => {
                let map = match ins[2] {
                    DECORATION_BINDING => &mut self.slots,
                    DECORATION_DESCRIPTOR_SET => &mut self.sets,
                    DECORATION_ARRAY_STRIDE => &mut self.strides,
                    _ => return,
                };
                map.insert(ins[1], ins[3]);
            }
            op::MEMBER_DECORATE if n >= 5 && ins[3] == DECORATION_OFFSET => {
                self.offsets.insert((ins[1], ins[2]), ins[4]);
            }
            op::TYPE_INT | op::TYPE_FLOAT if n >= 3 => {
                self.types.insert(ins[1], Ty::Scalar(ins[2] / 8));
            }
            op::TYPE_VECTOR | op::TYPE_MATRIX if n >= 4 => {
                self.types.insert(ins[1], Ty::Vector(ins[2], ins[3]));
            }
            op::TYPE_ARRAY if n >= 4 => {
                let len = self.constants.get(&ins[3]).copied().unwrap_or(0);
                self.types.insert(ins[1], Ty::Array { elem: ins[2], len });
            }
            op::TYPE_STRUCT if n >= 2 => {
                self.types.insert(ins[1], Ty::Struct(ins[2..].to_vec()));
            }
            op::TYPE_POINTER if n >= 4 => {
                self.types.insert(ins[1], Ty::Pointer { pointee: ins[3] });
            }
            op::CONSTANT if n >= 4 => {
                self.constants.insert(ins[2], ins[3]);
            }
            op::VARIABLE if n >= 4 => self.variables.push((ins[2], ins[1], ins[3])),
            _ => {}
        }
    }

    /// Bytes a value of type `id` occupies, if the type is one this reader understands.
    fn size_of(&self, id: u32, depth: u32) -> Option<u64> {
        if depth > 16 {
            return None;
        }
        match self.types.get(&id)? {
            Ty::Scalar(bytes) => Some(u64::from(*bytes)),
            Ty::Vector(comp, count) => Some(self.size_of(*comp, depth + 1)? * u64::from(*count)),
            Ty::Array { elem, len } => {
                let stride = match self.strides.get(&id) {
                    Some(s) => u64::from(*s),
                    None => self.size_of(*elem, depth + 1)?,
                };
                Some(stride * u64::from(*len))
            }
            Ty::Struct(members) => {
                let mut end = 0;
                for (i, &member) in members.iter().enumerate() {
                    let offset = u64::from(*self.offsets.get(&(id, i as u32))?);
                    end = end.max(offset + self.size_of(member, depth + 1)?);
                }
                Some(end)
            }
            Ty::Pointer { .. } => None,
        }
    }
}

/// Checks `spirv` against the layout: a GLCompute entry point `entry` naming a function of the
/// module, buffers within `bindings` slots of set 0, push constants within `push_bytes`.
pub fn check(spirv: &[u32], entry: &str, bindings: usize, push_bytes: u32) -> HeliosResult<()> {
    let m = Module::read(spirv)?;
    let Some((_, function, _)) = m.entries.iter().find(|(model, _, name)| *model == EXEC_GLCOMPUTE && name == entry) else {
        let found: Vec<_> = m.entries.iter().map(|(_, _, n)| n.as_str()).collect();
        return Err(HeliosError::invalid_kernel(format!(
            "entryPoint {entry:?} is not a GLCompute entry point of the module (it has {found:?})"
        )));
    };
    if !m.functions.contains(function) {
        return Err(malformed(format!("entry point {entry:?} names function %{function}, which the module does not define")));
    }
    for &(var, ptr, storage) in &m.variables {
        match storage {
            STORAGE_BUFFER | STORAGE_UNIFORM => {
                let set = m.sets.get(&var).copied().unwrap_or(0);
                if let Some(&slot) = m.slots.get(&var) {
                    if set != 0 || slot as usize >= bindings {
                        return Err(HeliosError::invalid_kernel(format!(
                            "the shader uses a buffer at set {set}, binding {slot}, but the layout declares {bindings} bindings in set 0"
                        )));
                    }
                }
            }
            STORAGE_PUSH_CONSTANT => {
                let Some(Ty::Pointer { pointee, .. }) = m.types.get(&ptr) else { continue };
                if let Some(size) = m.size_of(*pointee, 0) {
                    if size > u64::from(push_bytes) {
                        return Err(HeliosError::invalid_kernel(format!(
                            "the shader's push-constant block is {size} bytes, but the layout declares pushConstantBytes {push_bytes}"
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_words(entry: &str) -> Vec<u32> {
        let mut name: Vec<u32> = entry
            .as_bytes()
            .chunks(4)
            .map(|c| {
                let mut b = [0u8; 4];
                b[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(b)
            })
            .collect();
        if entry.len().is_multiple_of(4) {
            name.push(0);
        }
        name
    }

    /// A skeletal module: entry `entry` -> function %1, a storage buffer %6 at `binding`, a
    /// push block of three u32 (12 bytes), one function body `OpLabel; OpReturn`.
    fn module(entry: &str, binding: u32) -> Vec<u32> {
        let name = name_words(entry);
        let mut m = vec![MAGIC, 0x0001_0600, 0, 100, 0];
        m.push(((3 + name.len() as u32) << 16) | op::ENTRY_POINT);
        m.extend([EXEC_GLCOMPUTE, 1]);
        m.extend(name);
        m.extend([(4 << 16) | op::DECORATE, 6, DECORATION_DESCRIPTOR_SET, 0]);
        m.extend([(4 << 16) | op::DECORATE, 6, DECORATION_BINDING, binding]);
        for (i, off) in [0u32, 4, 8].iter().enumerate() {
            m.extend([(5 << 16) | op::MEMBER_DECORATE, 20, i as u32, DECORATION_OFFSET, *off]);
        }
        m.extend([(4 << 16) | op::TYPE_INT, 10, 32, 0]);
        m.extend([(5 << 16) | op::TYPE_STRUCT, 20, 10, 10, 10]);
        m.extend([(4 << 16) | op::TYPE_POINTER, 21, STORAGE_PUSH_CONSTANT, 20]);
        m.extend([(4 << 16) | op::VARIABLE, 21, 22, STORAGE_PUSH_CONSTANT]);
        m.extend([(4 << 16) | op::VARIABLE, 7, 6, STORAGE_BUFFER]);
        m.extend([(5 << 16) | op::FUNCTION, 2, 1, 0, 3]);
        m.extend([(2 << 16) | 248, 4]); // OpLabel
        m.extend([(1 << 16) | 253]); // OpReturn
        m.extend([(1 << 16) | op::FUNCTION_END]);
        m
    }

    #[test]
    fn accepts_a_matching_module() {
        assert!(check(&module("main", 1), "main", 2, 12).is_ok());
        assert!(check(&module("mainx", 0), "mainx", 1, 16).is_ok());
    }

    #[test]
    fn rejects_missing_entry_and_undeclared_binding() {
        let e = check(&module("main", 0), "nope", 1, 12).unwrap_err();
        assert!(e.message.contains("nope"));
        let e = check(&module("main", 1), "main", 1, 12).unwrap_err();
        assert!(e.message.contains("binding 1"));
        assert!(check(&[1, 2, 3], "main", 0, 0).is_err());
    }

    #[test]
    fn rejects_truncation_anywhere() {
        let whole = module("main", 0);
        for len in 5..whole.len() {
            assert!(check(&whole[..len], "main", 1, 12).is_err(), "truncated to {len} words was accepted");
        }
    }

    #[test]
    fn rejects_a_push_block_larger_than_the_layout() {
        let e = check(&module("main", 0), "main", 1, 8).unwrap_err();
        assert!(e.message.contains("12 bytes"), "{}", e.message);
    }
}
