//! Declared binding access against what the shader does. The hazard tracker orders dispatches by
//! the layout's `read`/`write`/`readwrite`, so a binding declared `read` that the shader writes
//! (or declared `write` that it reads) would lose its barriers: both are refused. A binding
//! counts as written when it is decorated NonReadable or any store, atomic or cooperative-matrix
//! store reaches it through access chains; read likewise (NonWritable, loads, atomics).

use std::collections::HashMap;

use rspirv::dr::{Module, Operand};
use rspirv::spirv::{Decoration, Op, Word};

use crate::caps::Access;
use crate::error::{HeliosError, HeliosResult};

use super::facts::id_at;

fn name(a: Access) -> &'static str {
    match a {
        Access::Read => "read",
        Access::Write => "write",
        Access::ReadWrite => "readwrite",
    }
}

#[derive(Default, Clone, Copy)]
struct Use {
    reads: bool,
    writes: bool,
}

/// Storage-buffer variable -> binding slot (set 0 is checked by the layout checks).
fn slots(module: &Module) -> HashMap<Word, u32> {
    module
        .annotations
        .iter()
        .filter_map(|a| match (a.operands.first(), a.operands.get(1), a.operands.get(2)) {
            (Some(Operand::IdRef(v)), Some(Operand::Decoration(Decoration::Binding)), Some(Operand::LiteralBit32(s))) => Some((*v, *s)),
            _ => None,
        })
        .collect()
}

fn uses(module: &Module, vars: &HashMap<Word, u32>) -> HashMap<Word, Use> {
    let mut out: HashMap<Word, Use> = HashMap::new();
    for a in &module.annotations {
        if let (Some(Operand::IdRef(v)), Some(Operand::Decoration(d))) = (a.operands.first(), a.operands.get(1)) {
            let u = out.entry(*v).or_default();
            match d {
                Decoration::NonReadable => u.writes = true,
                Decoration::NonWritable => u.reads = true,
                _ => {}
            }
        }
    }
    // Pointer ids -> the variable they were derived from (access chains only: the rules refuse
    // every other way of producing a storage-buffer pointer).
    let mut root: HashMap<Word, Word> = vars.keys().map(|v| (*v, *v)).collect();
    for ins in module.functions.iter().flat_map(|fun| fun.all_inst_iter()) {
        let op = ins.class.opcode;
        let base = id_at(ins, 0).ok().and_then(|p| root.get(&p).copied());
        let Some(var) = base else { continue };
        let u = out.entry(var).or_default();
        match op {
            Op::AccessChain | Op::InBoundsAccessChain => {
                if let Some(r) = ins.result_id {
                    root.insert(r, var);
                }
            }
            Op::Load | Op::CooperativeMatrixLoadKHR | Op::CooperativeMatrixLoadTensorNV | Op::AtomicLoad => u.reads = true,
            Op::Store | Op::CooperativeMatrixStoreKHR | Op::CooperativeMatrixStoreTensorNV => u.writes = true,
            op if format!("{op:?}").starts_with("Atomic") => {
                u.reads = true;
                u.writes = true;
            }
            _ => {}
        }
    }
    out
}

pub fn check(module: &Module, bindings: &[Access], label: &str) -> HeliosResult<()> {
    let vars = slots(module);
    let used = uses(module, &vars);
    for (var, slot) in &vars {
        let (Some(declared), Some(u)) = (bindings.get(*slot as usize), used.get(var)) else { continue };
        let bad = if u.writes && !declared.writes() {
            Some("writes")
        } else if u.reads && !declared.reads() {
            Some("reads")
        } else {
            None
        };
        if let Some(what) = bad {
            return Err(HeliosError::invalid_kernel(format!(
                "pipeline {label:?}: the shader {what} binding {slot}, which the layout declares {:?}; \
                 declare it 'readwrite' (the hazard tracker derives barriers from declared access)",
                name(*declared)
            )));
        }
    }
    Ok(())
}
