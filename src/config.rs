//! Every HELIOS_* environment variable the native side reads, in one place (README lists them).

use std::path::PathBuf;

/// `HELIOS_DUMP_SPIRV=<dir>`: write every compiled SPIR-V module there (`<name>-<hash>.spv`).
pub fn dump_spirv_dir() -> Option<PathBuf> {
    std::env::var_os("HELIOS_DUMP_SPIRV").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// `HELIOS_CACHE_DIR`: the runtime's cache dir (default `$XDG_CACHE_HOME/helios` or
/// `~/.cache/helios`); compiled SPIR-V lives under its `spirv/` subdirectory.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("HELIOS_CACHE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("helios");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache").join("helios"),
        None => std::env::temp_dir().join("helios-cache"),
    }
}
