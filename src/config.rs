//! Every `HELIOS_*` environment variable the native runtime reads, in one place.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `HELIOS_DEVICE` | best device | physical-device index or name substring |
//! | `HELIOS_VALIDATION` | `0` | `1` enables VK_LAYER_KHRONOS_validation + sync validation |
//! | `HELIOS_CACHE_DIR` | `$XDG_CACHE_HOME/helios` or `~/.cache/helios` | VkPipelineCache directory (`off` disables) |
//! | `HELIOS_STAGING_MIB` | `64` | size of the upload/download staging ring |
//! | `HELIOS_FORCE_STAGING` | `0` | `1` never maps device buffers directly (tests the staging paths on UMA devices) |
//! | `HELIOS_NO_PUSH_DESCRIPTORS` | `0` | `1` uses descriptor pools even when VK_KHR_push_descriptor exists (tests the fallback) |
//! | `HELIOS_PIPELINE_STATS` | `0` | `1` captures driver statistics per pipeline (VK_KHR_pipeline_executable_properties) for `pipelineStatistics(handle)` |
//! | `HELIOS_SPIN_US` | `200` | microseconds a host wait polls the timeline before blocking (0 = block at once) |
//! | `HELIOS_BARRIER` | `global` | hazard barriers between dispatches: `global` (one VkMemoryBarrier2) or `buffer` (one VkBufferMemoryBarrier2 per written buffer) |
//! | `HELIOS_DUMP_SPIRV` | unset | directory where every newly compiled kernel module is written |
//! | `HELIOS_TRACE_READS` | `0` | `1` prints the phases of each large read (DMA submit, prefault, waits, copies) to stderr |
//! | `HELIOS_MAX_BINDING_BYTES` | device limit | lowers the largest bindable storage buffer (tests of the over-limit errors) |
//! | `HELIOS_INBATCH_REUSE` | `1` | `0` hands a released pooled buffer out again only once its last GPU use completed (no reuse inside the open batch) |
//! | `HELIOS_COOPMAT` | `1` | `0` leaves VK_KHR_cooperative_matrix, VK_NV_cooperative_matrix2 and VK_KHR_shader_bfloat16 disabled (SIMT paths only; for validation layers older than those extensions) |

use std::path::PathBuf;

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

/// Runtime settings, read once per `initDevice`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub device: Option<String>,
    pub validation: bool,
    pub cache_dir: Option<PathBuf>,
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
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn flag(name: &str) -> bool {
    matches!(env(name).as_deref(), Some("1" | "true" | "yes" | "on"))
}

/// A switch that is on unless set to an explicit "off" value.
fn flag_on(name: &str) -> bool {
    !matches!(env(name).as_deref(), Some("0" | "false" | "no" | "off"))
}

impl Config {
    pub fn from_env() -> Config {
        let staging_mib = env("HELIOS_STAGING_MIB").and_then(|v| v.parse::<u64>().ok()).unwrap_or(64);
        Config {
            device: env("HELIOS_DEVICE"),
            validation: flag("HELIOS_VALIDATION"),
            cache_dir: cache_dir(),
            staging_bytes: staging_mib.clamp(4, 4096) << 20,
            force_staging: flag("HELIOS_FORCE_STAGING"),
            no_push_descriptors: flag("HELIOS_NO_PUSH_DESCRIPTORS"),
            no_coopmat: !flag_on("HELIOS_COOPMAT"),
            pipeline_stats: flag("HELIOS_PIPELINE_STATS"),
            spin_us: env("HELIOS_SPIN_US").and_then(|v| v.parse().ok()).unwrap_or(200),
            // Anything but `buffer` (unset, typos) keeps the default.
            barrier: match env("HELIOS_BARRIER").as_deref() {
                Some("buffer") => BarrierMode::Buffer,
                _ => BarrierMode::Global,
            },
            inbatch_reuse: flag_on("HELIOS_INBATCH_REUSE"),
            trace_reads: flag("HELIOS_TRACE_READS"),
        }
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
/// initDevice; an unparsable value is ignored).
pub fn max_binding_override() -> Option<u64> {
    env("HELIOS_MAX_BINDING_BYTES").and_then(|v| v.trim().parse::<u64>().ok())
}
