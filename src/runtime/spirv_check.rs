//! A small SPIR-V reader that checks a module against its pipeline layout before the driver
//! sees it: the entry point must exist as a GLCompute entry, and every storage buffer the
//! module declares must sit in set 0 at a binding the layout declares. Drivers may crash or
//! misbehave on such mismatches instead of failing cleanly.

use std::collections::HashMap;

use crate::error::{HeliosError, HeliosResult};

const MAGIC: u32 = 0x0723_0203;
const OP_ENTRY_POINT: u32 = 15;
const OP_VARIABLE: u32 = 59;
const OP_DECORATE: u32 = 71;
const EXEC_GLCOMPUTE: u32 = 5;
const DECORATION_BINDING: u32 = 33;
const DECORATION_DESCRIPTOR_SET: u32 = 34;
const STORAGE_UNIFORM: u32 = 2;
const STORAGE_BUFFER: u32 = 12;

fn literal_string(words: &[u32]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Checks `spirv` for a GLCompute entry point `entry` and buffers within `bindings` slots.
pub fn check(spirv: &[u32], entry: &str, bindings: usize) -> HeliosResult<()> {
    if spirv.len() < 5 || spirv[0] != MAGIC {
        return Err(HeliosError::invalid_argument(format!(
            "spirv is not a SPIR-V module ({} words, magic {:#x})",
            spirv.len(),
            spirv.first().copied().unwrap_or(0)
        )));
    }
    let mut entries = Vec::new();
    let mut sets: HashMap<u32, u32> = HashMap::new();
    let mut slots: HashMap<u32, u32> = HashMap::new();
    let mut buffers = Vec::new();
    let mut at = 5;
    while at < spirv.len() {
        let count = (spirv[at] >> 16) as usize;
        let op = spirv[at] & 0xffff;
        if count == 0 || at + count > spirv.len() {
            return Err(HeliosError::invalid_argument(format!("spirv is malformed at word {at}")));
        }
        let ins = &spirv[at..at + count];
        match op {
            OP_ENTRY_POINT if count >= 4 => entries.push((ins[1], literal_string(&ins[3..]))),
            OP_DECORATE if count >= 4 && ins[2] == DECORATION_BINDING => {
                slots.insert(ins[1], ins[3]);
            }
            OP_DECORATE if count >= 4 && ins[2] == DECORATION_DESCRIPTOR_SET => {
                sets.insert(ins[1], ins[3]);
            }
            OP_VARIABLE if count >= 4 && (ins[3] == STORAGE_BUFFER || ins[3] == STORAGE_UNIFORM) => buffers.push(ins[2]),
            _ => {}
        }
        at += count;
    }
    if !entries.iter().any(|(model, name)| *model == EXEC_GLCOMPUTE && name == entry) {
        let found: Vec<_> = entries.iter().map(|(_, n)| n.as_str()).collect();
        return Err(HeliosError::invalid_kernel(format!(
            "entryPoint {entry:?} is not a GLCompute entry point of the module (it has {found:?})"
        )));
    }
    for id in buffers {
        let (set, slot) = (sets.get(&id).copied().unwrap_or(0), slots.get(&id).copied());
        if let Some(slot) = slot {
            if set != 0 || slot as usize >= bindings {
                return Err(HeliosError::invalid_kernel(format!(
                    "the shader uses a buffer at set {set}, binding {slot}, but the layout declares {bindings} bindings in set 0"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(entry: &str, binding: u32) -> Vec<u32> {
        let mut name: Vec<u32> = entry.as_bytes().chunks(4).map(|c| {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(b)
        }).collect();
        if entry.len() % 4 == 0 {
            name.push(0);
        }
        let mut m = vec![MAGIC, 0x0001_0600, 0, 100, 0];
        m.push(((3 + name.len() as u32) << 16) | OP_ENTRY_POINT);
        m.extend([EXEC_GLCOMPUTE, 1]);
        m.extend(name);
        m.extend([(4 << 16) | OP_DECORATE, 7, DECORATION_DESCRIPTOR_SET, 0]);
        m.extend([(4 << 16) | OP_DECORATE, 7, DECORATION_BINDING, binding]);
        m.extend([(4 << 16) | OP_VARIABLE, 6, 7, STORAGE_BUFFER]);
        m
    }

    #[test]
    fn accepts_a_matching_module() {
        assert!(check(&module("main", 1), "main", 2).is_ok());
        assert!(check(&module("mainx", 0), "mainx", 1).is_ok());
    }

    #[test]
    fn rejects_missing_entry_and_undeclared_binding() {
        let e = check(&module("main", 0), "nope", 1).unwrap_err();
        assert!(e.message.contains("nope"));
        let e = check(&module("main", 1), "main", 1).unwrap_err();
        assert!(e.message.contains("binding 1"));
        assert!(check(&[1, 2, 3], "main", 0).is_err());
        let mut truncated = module("main", 0);
        truncated.truncate(7);
        assert!(check(&truncated, "main", 1).is_err());
    }
}
