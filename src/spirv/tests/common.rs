//! Helpers shared by the lowering tests.
#![allow(dead_code)]


use std::path::PathBuf;
use std::process::Command;

use crate::caps::DeviceCaps;
use crate::spirv::{compile, CompiledKernel};

/// spirv-val with cooperative-matrix support (scripts/install-spirv-tools.sh), else the one on PATH.
pub fn spirv_val_path() -> Option<PathBuf> {
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/spirv/bin/spirv-val");
    if local.exists() {
        return Some(local);
    }
    Command::new("spirv-val").arg("--version").output().ok().map(|_| PathBuf::from("spirv-val"))
}

/// Runs spirv-val --target-env vulkan1.3 on the words; Err(message) when invalid.
pub fn spirv_val(name: &str, words: &[u32]) -> Result<(), String> {
    let Some(tool) = spirv_val_path() else {
        eprintln!("spirv-val not found: skipping validation of {name}");
        return Ok(());
    };
    let dir = std::env::temp_dir().join(format!("helios-spv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join(format!("{name}.spv"));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    let out = Command::new(tool).args(["--target-env", "vulkan1.3"]).arg(&file).output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

pub fn compile_ok(desc: &serde_json::Value, caps: &DeviceCaps) -> CompiledKernel {
    match compile(&desc.to_string(), caps) {
        Ok(k) => k,
        Err(e) => panic!("compile failed: {e}"),
    }
}

/// Compiles and validates; panics with the disassembly on failure.
pub fn compile_and_validate(desc: &serde_json::Value, caps: &DeviceCaps) -> CompiledKernel {
    let k = compile_ok(desc, caps);
    if let Err(msg) = spirv_val(&k.name, &k.words) {
        let dis = crate::spirv::disassemble(&k.words).unwrap_or_default();
        panic!("{}: spirv-val failed:\n{msg}\n{dis}", k.name);
    }
    k
}

pub fn kernel(name: &str, bindings: serde_json::Value, push: serde_json::Value, body: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "version": 1, "name": name, "workgroup": [64],
        "bindings": bindings, "push": push, "body": body
    })
}
