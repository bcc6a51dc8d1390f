//! Every `HELIOS_*` environment variable the native runtime reads, in one place.
//!
//! An invalid value (`abc`, `-1`, out of range) fails initDevice with ERR_HELIOS_INVALID_ARGUMENT
//! naming the variable and what it accepts; switches take 0/1, true/false, on/off, yes/no.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `HELIOS_DEVICE` | best device | physical-device index or name substring |
//! | `HELIOS_VALIDATION` | `0` | `1` enables VK_LAYER_KHRONOS_validation + sync validation |
//! | `HELIOS_CACHE_DIR` | `$XDG_CACHE_HOME/helios` or `~/.cache/helios` | VkPipelineCache directory (`off` disables) |
//! | `HELIOS_PIPELINE_SEED` | `1` | `0` never starts the pipeline cache from a shipped seed (`data/pipeline-cache`) when the device has no cache file of its own |
//! | `HELIOS_STAGING_MIB` | `64` | size of the upload/download staging ring (4 to 4096) |
//! | `HELIOS_FORCE_STAGING` | `0` | `1` never maps device buffers directly (tests the staging paths on UMA devices) |
//! | `HELIOS_NO_PUSH_DESCRIPTORS` | `0` | `1` uses descriptor pools even when VK_KHR_push_descriptor exists (tests the fallback) |
//! | `HELIOS_PIPELINE_STATS` | `0` | `1` captures driver statistics per pipeline (VK_KHR_pipeline_executable_properties) for `pipelineStatistics(handle)` |
//! | `HELIOS_SPIN_US` | `200` | microseconds a host wait polls the timeline before blocking (0 = block at once; at most 1000000) |
//! | `HELIOS_BARRIER` | `global` | hazard barriers between dispatches: `global` (one VkMemoryBarrier2) or `buffer` (one VkBufferMemoryBarrier2 per written buffer) |
//! | `HELIOS_DUMP_SPIRV` | unset | directory where every newly compiled kernel module is written |
//! | `HELIOS_TRACE_READS` | `0` | `1` prints the phases of each large read (DMA submit, prefault, waits, copies) to stderr |
//! | `HELIOS_MAX_BINDING_BYTES` | device limit | lowers the largest bindable storage buffer (tests of the over-limit errors) |
//! | `HELIOS_INBATCH_REUSE` | `1` | `0` hands a released pooled buffer out again only once its last GPU use completed (no reuse inside the open batch) |
//! | `HELIOS_ROBUSTNESS` | `1` | bounds behaviour of shader buffer accesses: `1` robustBufferAccess (out-of-bounds reads return values from the buffer or zero, writes are dropped), `2` also robustBufferAccess2 (VK_EXT_robustness2: reads return zero), `0` off (undefined, like C); enabled only where the device supports it |
//! | `HELIOS_NCCL_LIB` | unset | path of `libnccl.so.2` for distributed training (else the linker's search, then PyTorch's wheel copy in `python3`'s site-packages) |
//! | `HELIOS_DEDICATED_MIB` | `8` | device buffers of at least this many MiB get memory of their own (a dedicated allocation) instead of a range of a shared 256 MiB block; `0` never |
//! | `HELIOS_ALLOC_AHEAD` | `1` | `0` never allocates device buffers of the dedicated size (`HELIOS_DEDICATED_MIB`) ahead on a thread of their own, for a bucket whose leases keep missing the pool |
//! | `HELIOS_COOPMAT` | `1` | `0` leaves VK_KHR_cooperative_matrix, VK_NV_cooperative_matrix2 and VK_KHR_shader_bfloat16 disabled (SIMT paths only; for validation layers older than those extensions) |

use std::path::PathBuf;

use crate::error::{HeliosError, HeliosResult};

/// How hazard barriers are expressed (both carry the same narrow stage and access masks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BarrierMode {
    /// One VkMemoryBarrier2: NVIDIA's driver treats buffer ranges as global anyway, so the
    /// global form records less and costs the GPU the same.
    #[default]
    Global,
    /// One VkBufferMemoryBarrier2 per buffer written since the last barrier (falls back to
    /// global above `MAX_BUFFER_BARRIERS` buffers).
    Buffer,
}

impl BarrierMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BarrierMode::Global => "global",
            BarrierMode::Buffer => "buffer",
        }
    }
}

/// How out-of-bounds shader accesses to storage buffers behave (`HELIOS_ROBUSTNESS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Robustness {
    /// Undefined behaviour, as in C: only the record-time range checks hold.
    Off,
    /// robustBufferAccess: accesses stay inside the bound range (reads may return any value
    /// from it, writes outside are dropped).
    #[default]
    Buffer,
    /// robustBufferAccess2 (VK_EXT_robustness2): as Buffer, and out-of-bounds reads return zero.
    Buffer2,
}

impl Robustness {
    pub fn as_str(self) -> &'static str {
        match self {
            Robustness::Off => "off",
            Robustness::Buffer => "robustBufferAccess",
            Robustness::Buffer2 => "robustBufferAccess2",
        }
    }
}

/// Runtime settings, read once per `initDevice`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub device: Option<String>,
    pub validation: bool,
    pub cache_dir: Option<PathBuf>,
    /// Start the pipeline cache from a shipped seed when the device has none (`HELIOS_PIPELINE_SEED`).
    pub pipeline_seed: bool,
    pub staging_bytes: u64,
    pub force_staging: bool,
    pub no_push_descriptors: bool,
    /// Leave the cooperative-matrix and bf16 extensions disabled (`HELIOS_COOPMAT=0`).
    pub no_coopmat: bool,
    pub spin_us: u64,
    pub pipeline_stats: bool,
    pub barrier: BarrierMode,
    /// Leases may take pooled buffers whose last use is still pending on the compute queue
    /// (recorded in the open batch or submitted): see `BufferRes::reusable_in_batch`.
    pub inbatch_reuse: bool,
    pub trace_reads: bool,
    pub robustness: Robustness,
    /// Device buffers of at least this size get a dedicated allocation (0: never); see
    /// `vk::memory::create_buffer`.
    pub dedicated_min_bytes: u64,
    /// A thread prepares spare dedicated-size device buffers for a bucket whose leases keep
    /// missing the pool (`runtime::ahead`).
    pub alloc_ahead: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A bad value is an error naming the variable, the value and what is accepted: a typo must not
/// silently run with the default (issue 24 item 7).
fn bad(name: &str, value: &str, accepted: &str) -> HeliosError {
    HeliosError::invalid_argument(format!("{name}={value}: expected {accepted}"))
}

/// A 0/1/true/false/on/off/yes/no switch; unset or empty reads as `default`.
fn switch(name: &str, default: bool) -> HeliosResult<bool> {
    let Some(raw) = env(name) else { return Ok(default) };
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad(name, &raw, "0 or 1 (or true/false, on/off, yes/no)")),
    }
}

/// An integer in `lo..=hi`; unset or empty reads as `default`.
fn int_in(name: &str, default: u64, lo: u64, hi: u64) -> HeliosResult<u64> {
    let Some(raw) = env(name) else { return Ok(default) };
    match raw.trim().parse::<u64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(bad(name, &raw, &format!("an integer from {lo} to {hi}"))),
    }
}

/// HELIOS_MAX_BINDING_BYTES's accepted range (a storage binding of at least one u32 word).
const MAX_BINDING_RANGE: (u64, u64) = (4, 1 << 53);

impl Config {
    /// Reads every native HELIOS_* variable; an invalid value fails initDevice with
    /// ERR_HELIOS_INVALID_ARGUMENT naming it.
    pub fn from_env() -> HeliosResult<Config> {
        let barrier = match env("HELIOS_BARRIER") {
            None => BarrierMode::Global,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "global" => BarrierMode::Global,
                "buffer" => BarrierMode::Buffer,
                _ => return Err(bad("HELIOS_BARRIER", &v, "global or buffer")),
            },
        };
        let robustness = match env("HELIOS_ROBUSTNESS") {
            None => Robustness::Buffer,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "0" | "off" => Robustness::Off,
                "1" | "on" => Robustness::Buffer,
                "2" => Robustness::Buffer2,
                _ => return Err(bad("HELIOS_ROBUSTNESS", &v, "0 (off), 1 (robustBufferAccess) or 2 (robustBufferAccess2)")),
            },
        };
        let (lo, hi) = MAX_BINDING_RANGE;
        int_in("HELIOS_MAX_BINDING_BYTES", lo, lo, hi)?;
        Ok(Config {
            device: env("HELIOS_DEVICE"),
            validation: switch("HELIOS_VALIDATION", false)?,
            cache_dir: cache_dir(),
            pipeline_seed: switch("HELIOS_PIPELINE_SEED", true)?,
            staging_bytes: int_in("HELIOS_STAGING_MIB", 64, 4, 4096)? << 20,
            force_staging: switch("HELIOS_FORCE_STAGING", false)?,
            no_push_descriptors: switch("HELIOS_NO_PUSH_DESCRIPTORS", false)?,
            no_coopmat: !switch("HELIOS_COOPMAT", true)?,
            pipeline_stats: switch("HELIOS_PIPELINE_STATS", false)?,
            spin_us: int_in("HELIOS_SPIN_US", 200, 0, 1_000_000)?,
            barrier,
            inbatch_reuse: switch("HELIOS_INBATCH_REUSE", true)?,
            trace_reads: switch("HELIOS_TRACE_READS", false)?,
            robustness,
            dedicated_min_bytes: int_in("HELIOS_DEDICATED_MIB", 8, 0, 1 << 20)? << 20,
            alloc_ahead: switch("HELIOS_ALLOC_AHEAD", true)?,
        })
    }
}

/// `$HELIOS_CACHE_DIR`, else `$XDG_CACHE_HOME/helios`, else `$HOME/.cache/helios`; `off` disables.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = env("HELIOS_CACHE_DIR") {
        return (dir != "off").then(|| PathBuf::from(dir));
    }
    if let Some(xdg) = env("XDG_CACHE_HOME") {
        return Some(PathBuf::from(xdg).join("helios"));
    }
    env("HOME").map(|home| PathBuf::from(home).join(".cache").join("helios"))
}

/// `HELIOS_DUMP_SPIRV=<dir>`: write every newly compiled kernel module there
/// (`<name>-<hash>.spv`). Read per compile so tests and tools can set it at any time.
pub fn dump_spirv_dir() -> Option<PathBuf> {
    env("HELIOS_DUMP_SPIRV").map(PathBuf::from)
}

/// `HELIOS_MAX_BINDING_BYTES=<n>`: lower the storage-binding limit below the device's (read at
/// initDevice, after `Config::from_env` rejected a value outside MAX_BINDING_RANGE).
pub fn max_binding_override() -> Option<u64> {
    let (lo, hi) = MAX_BINDING_RANGE;
    env("HELIOS_MAX_BINDING_BYTES").and_then(|v| v.trim().parse::<u64>().ok()).filter(|v| (lo..=hi).contains(v))
}

/// `HELIOS_NCCL_LIB`: where NCCL is, when the caller names it (read only by `crate::dist`).
pub fn nccl_lib() -> Option<String> {
    env("HELIOS_NCCL_LIB")
}
