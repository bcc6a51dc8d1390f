//! Compiled-kernel memo: descriptions are keyed by a hash of their JSON text (and the caps they
//! were validated against), so JIT-fused kernels recompiled every step cost a hash lookup. Each
//! new module is also written to the on-disk cache and, with HELIOS_DUMP_SPIRV, to the dump dir.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::caps::DeviceCaps;
use crate::error::HeliosResult;

use super::CompiledKernel;

struct Entry {
    json: String,
    kernel: Arc<CompiledKernel>,
    /// Written to the on-disk cache (a module assembled first by kernelSpirv is written when
    /// compileKernel(s) first takes it: the engine assembles at the op, compiles later).
    on_disk: bool,
}

#[derive(Default)]
pub struct KernelCache {
    entries: Mutex<HashMap<u64, Entry>>,
}

/// Content hash of a description for a given device.
pub fn content_hash(json: &str, caps: &DeviceCaps) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    json.hash(&mut h);
    format!("{caps:?}").hash(&mut h);
    h.finish()
}

impl KernelCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns the memoized module for `json`, compiling it on a miss. `to_disk` also writes a
    /// new module to the on-disk cache (pipelines); every new module goes to HELIOS_DUMP_SPIRV.
    pub fn get_or_compile(&self, json: &str, caps: &DeviceCaps, to_disk: bool) -> HeliosResult<(u64, Arc<CompiledKernel>)> {
        let key = content_hash(json, caps);
        let hit = match self.entries.lock().get_mut(&key) {
            Some(e) if e.json == json => {
                let write = to_disk && !e.on_disk;
                e.on_disk |= to_disk;
                Some((e.kernel.clone(), write))
            }
            _ => None,
        };
        if let Some((kernel, write)) = hit {
            if write {
                persist(&kernel, key, true, false);
            }
            return Ok((key, kernel));
        }
        let kernel = Arc::new(super::compile(json, caps)?);
        persist(&kernel, key, to_disk, true);
        self.entries.lock().insert(key, Entry { json: json.to_string(), kernel: kernel.clone(), on_disk: to_disk });
        Ok((key, kernel))
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes the module to the cache dir (`to_disk`) and the dump dir (`dump`: a new module). Best
/// effort: a read-only cache dir must not fail a compile, so write errors are ignored.
fn persist(k: &CompiledKernel, key: u64, to_disk: bool, dump: bool) {
    let file = format!("{}-{key:016x}.spv", k.name);
    let bytes: Vec<u8> = k.words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let write = |dir: &Path| {
        // never through a symlink planted in the cache dir (runtime/cache_file.rs)
        let _ = crate::runtime::cache_file::write_atomic(&dir.join(&file), &bytes);
    };
    if to_disk {
        if let Some(dir) = crate::config::cache_dir() {
            write(&dir.join("spirv"));
        }
    }
    if let (true, Some(d)) = (dump, crate::config::dump_spirv_dir()) {
        write(&d);
    }
}
