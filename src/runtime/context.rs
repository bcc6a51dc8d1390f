//! The runtime state behind the global lock: device, allocator, handle tables, lanes,
//! the open batch, and the deferred-free machinery. Creation and teardown live here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use gpu_allocator::vulkan::Allocator;

use crate::caps::DeviceCaps;
use crate::config::Config;
use crate::error::{HeliosError, HeliosResult};
use crate::runtime::ahead::Ahead;
use crate::runtime::batch::OpenBatch;
use crate::runtime::capture::Capture;
use crate::runtime::handles::{HandleTable, Kind};
use crate::runtime::lane::Lane;
use crate::runtime::pipelines::PipelineObj;
use crate::runtime::pool::Pool;
use crate::runtime::profile::ProfileRecord;
use crate::runtime::resources::Resources;
use crate::runtime::ring::Ring;
use crate::runtime::timeline::Point;
use crate::runtime::tracker::Tracker;
use crate::runtime::pipeline_seed::{self, CacheKey, CacheSource};
use crate::runtime::{cache_file, pipelines};
use crate::vk::adapter::{self, AdapterInfo};
use crate::vk::device::Device;
use crate::vk::instance::{Instance, MessageSink};
use crate::vk::memory::{self, GpuBuffer, Placement};
use crate::vk::raw as vk;
use crate::vk::{command, pipeline};

/// `initDevice` options after parsing.
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    pub device: Option<String>,
    pub validation: Option<bool>,
    /// Create the device able to share buffers and timelines with CUDA (distributed training).
    pub shareable: bool,
    /// Where shipped pipeline-cache seeds are (the package's data/pipeline-cache).
    pub pipeline_seed_dir: Option<PathBuf>,
}

pub struct PipelineCacheState {
    pub raw: vk::PipelineCache,
    pub path: Option<PathBuf>,
    pub dirty: bool,
    pub last_save: Instant,
    pub source: CacheSource,
}

/// Everything the runtime owns. Field order matters for Drop: `alloc` before `dev`.
pub struct Runtime {
    pub alloc: Allocator,
    pub cfg: Config,
    pub buffers: HandleTable<u32>,
    pub res: Resources,
    pub pool: Pool<u32>,
    /// Spare dedicated-size device buffers made on a thread of their own (None: HELIOS_ALLOC_AHEAD=0).
    pub ahead: Option<Ahead>,
    pub pipelines: HandleTable<Arc<PipelineObj>>,
    pub captures: HandleTable<Capture>,
    pub tracker: Tracker,
    pub batch: Option<OpenBatch>,
    /// Current segment sequence: buffers with `seg == self.seg` are used by the open segment.
    pub seg: u64,
    pub compute: Lane,
    pub transfer: Lane,
    /// Highest transfer value submitted; the next compute submission waits for it.
    pub transfer_pending: u64,
    pub transfer_waited: u64,
    /// Highest external-timeline value that work recorded so far must wait for, and the highest
    /// a compute submission already waited for (see `submit_waits`).
    pub ext_owed: u64,
    pub ext_waited: u64,
    pub ring: Ring,
    pub ring_buf: Option<GpuBuffer>,
    /// Host staging for large synchronous reads, sized to the largest one so far (see readback.rs).
    pub read_staging: Option<GpuBuffer>,
    pub desc_free: Vec<vk::DescriptorPool>,
    pub profiles: HashMap<u64, ProfileRecord>,
    /// Origin of the profile stamps' clock, fixed at the first batch profile read (see `profile`).
    pub stamp_origin: Option<u64>,
    pub readbacks: HashMap<u64, GpuBuffer>,
    pub next_readback: u64,
    pub cache: PipelineCacheState,
    pub lost: bool,
    pub use_push_descriptors: bool,
    /// A copy or fill was recorded since the last barrier (selects the barrier's source stages).
    pub transfer_since_barrier: bool,
    /// A hazard barrier since the last full one had a compute-only second scope: the next
    /// copy or fill first gets a full barrier.
    pub compute_only_barrier: bool,
    /// The open segment writes host-visible memory (a direct buffer or a readback staging
    /// buffer): only then does it end with a GPU-write -> host-read barrier.
    pub host_visible_write: bool,
    /// The tracker's view of the queue is stale (a batch was captured, whose recorded
    /// barriers never ran, or a capture was replayed, whose accesses it never saw): the
    /// next recorded command first gets a full barrier.
    pub barrier_owed: bool,
    /// A pre-recorded command buffer holding one global barrier, submitted ahead of every
    /// replay so a captured batch is safe to run after any work.
    pub head_cmd: vk::CommandBuffer,
    /// The device epoch (1..=handles::MAX_EPOCH): distinguishes runtimes across
    /// destroy/initDevice for async tasks, and is part of every handle this runtime hands out.
    pub id: u64,
    pub dev: Arc<Device>,
}

impl Runtime {
    pub fn new(opts: &InitOptions, epoch: u32) -> HeliosResult<Runtime> {
        let mut cfg = Config::from_env()?;
        if let Some(v) = opts.validation {
            cfg.validation = v;
        }
        let selector = opts.device.clone().or_else(|| cfg.device.clone());
        let instance = Instance::new(cfg.validation)?;
        let adapter = adapter::choose(&instance, selector.as_deref())?;
        let mut dev = Device::new(instance, adapter, cfg.no_push_descriptors, cfg.no_coopmat, cfg.robustness, opts.shareable)?;
        dev.spin_ns = cfg.spin_us.saturating_mul(1000);
        dev.dedicated_min_bytes = cfg.dedicated_min_bytes;
        if cfg.pipeline_stats {
            dev.enable_pipeline_statistics();
        }
        let dev = Arc::new(dev);
        let mut alloc = memory::create_allocator(&dev)?;
        let mut compute = Lane::new(&dev, dev.adapter.compute_family, dev.compute_queue, dev.compute_sem)?;
        let head_cmd = compute.acquire(&dev)?;
        command::begin(&dev, head_cmd)?;
        command::global_barrier(&dev, head_cmd);
        command::end(&dev, head_cmd)?;
        let transfer = Lane::new(&dev, dev.transfer_family, dev.transfer_queue, dev.transfer_sem)?;
        let ring_buf = memory::create_buffer(&dev, &mut alloc, cfg.staging_bytes, Placement::Staging)?;
        let cache = open_cache(&dev, &cfg, opts.pipeline_seed_dir.as_deref());
        Ok(Runtime {
            alloc,
            buffers: HandleTable::new(Kind::Buffer, epoch),
            res: Resources::default(),
            pool: Pool::default(),
            ahead: (cfg.alloc_ahead && cfg.dedicated_min_bytes > 0).then(|| Ahead::new(dev.clone())),
            pipelines: HandleTable::new(Kind::Pipeline, epoch),
            captures: HandleTable::new(Kind::Capture, epoch),
            tracker: Tracker::default(),
            batch: None,
            seg: 1,
            compute,
            transfer,
            transfer_pending: 0,
            transfer_waited: 0,
            ext_owed: 0,
            ext_waited: 0,
            ring: Ring::new(cfg.staging_bytes),
            ring_buf: Some(ring_buf),
            read_staging: None,
            desc_free: Vec::new(),
            profiles: HashMap::new(),
            stamp_origin: None,
            readbacks: HashMap::new(),
            next_readback: 1,
            cache,
            lost: false,
            transfer_since_barrier: true,
            compute_only_barrier: false,
            host_visible_write: false,
            barrier_owed: false,
            head_cmd,
            use_push_descriptors: dev.push_desc.is_some(),
            id: epoch as u64,
            cfg,
            dev,
        })
    }

    pub fn info(&self) -> &AdapterInfo {
        &self.dev.adapter.info
    }

    pub fn caps(&self) -> &DeviceCaps {
        &self.dev.caps
    }

    pub fn messages(&self) -> MessageSink {
        self.dev.instance.messages.clone()
    }

    /// Semaphore counters as a point (refreshing both).
    pub fn completed(&mut self) -> HeliosResult<Point> {
        let c = self.compute.refresh(&self.dev)?;
        let t = self.transfer.refresh(&self.dev)?;
        Ok(Point { compute: c, transfer: t })
    }

    /// Cached counters (no Vulkan call).
    pub fn completed_cached(&self) -> Point {
        Point { compute: self.compute.completed, transfer: self.transfer.completed }
    }

    /// Recycles finished submissions and frees destroyed buffers whose GPU use ended.
    pub fn maintain(&mut self) -> HeliosResult<()> {
        let done = self.completed()?;
        self.compute.retire(&self.dev, &mut self.alloc, &mut self.desc_free);
        self.transfer.retire(&self.dev, &mut self.alloc, &mut self.desc_free);
        self.ring.reclaim(done);
        self.free_zombies(done);
        Ok(())
    }

    /// Creates a pipeline (shared by the JS export and the kernel assembler's entry point).
    pub fn create_pipeline(&mut self, spirv: &[u32], layout: &crate::caps::PipelineLayoutDesc) -> HeliosResult<f64> {
        let obj = pipelines::build(&self.dev, self.cache.raw, spirv, layout, self.use_push_descriptors)?;
        self.insert_pipeline(obj)
    }

    /// What building a pipeline off the lock needs (see `global::create_pipelines`).
    pub fn pipeline_builder(&self) -> pipelines::Builder {
        pipelines::Builder { device: self.dev.clone(), cache: self.cache.raw, push_descriptors: self.use_push_descriptors }
    }

    /// Registers a pipeline built by `pipelines::build`; returns its JS handle.
    pub fn insert_pipeline(&mut self, obj: pipelines::PipelineObj) -> HeliosResult<f64> {
        self.cache.dirty = true;
        self.save_cache_debounced();
        self.pipelines.insert(Arc::new(obj))
    }

    pub fn destroy_pipeline(&mut self, handle: f64) -> HeliosResult<()> {
        // In-flight batches and captures hold their own Arc; the last one destroys it.
        self.pipelines.remove(handle).map(drop)
    }

    /// Saves the pipeline cache if new pipelines arrived and the last save is 2 s old.
    pub fn save_cache_debounced(&mut self) {
        if self.cache.dirty && self.cache.last_save.elapsed().as_secs_f64() > 2.0 {
            self.save_cache();
        }
    }

    pub fn save_cache(&mut self) {
        if let (true, Some(path)) = (self.cache.dirty, self.cache.path.as_ref()) {
            cache_file::save(path, &pipeline::cache_data(&self.dev, self.cache.raw));
        }
        self.cache.dirty = false;
        self.cache.last_save = Instant::now();
    }

    /// Writes the pipeline cache's current data as a seed in `dir` (see `pipeline_seed`).
    pub fn export_pipeline_seed(&self, dir: &Path) -> HeliosResult<PathBuf> {
        if self.cache.raw == vk::PipelineCache::null() {
            return Err(HeliosError::internal("the device has no pipeline cache (vkCreatePipelineCache failed)"));
        }
        pipeline_seed::export(dir, &pipeline::cache_data(&self.dev, self.cache.raw))
    }

    /// Rejects a value that was never submitted (waiting for it would hang).
    pub fn check_submitted(&self, value: u64) -> HeliosResult<()> {
        if value > self.compute.submitted {
            return Err(HeliosError::out_of_range(format!(
                "timeline value {value} was never submitted (last submitted: {})",
                self.compute.submitted
            )));
        }
        Ok(())
    }

    /// Host-waits for a compute timeline value (with a timeout in ns); Ok(false) on timeout.
    pub fn wait_compute(&mut self, value: u64, timeout_ns: u64) -> HeliosResult<bool> {
        self.check_submitted(value)?;
        if value <= self.compute.completed {
            return Ok(true);
        }
        let reached = crate::vk::sync::wait(&self.dev, self.dev.compute_sem, value, timeout_ns)?;
        if reached {
            self.compute.completed = self.compute.completed.max(value);
        }
        Ok(reached)
    }

    /// Host-waits until `point` completed on both timelines.
    pub fn wait_point(&mut self, point: Point) -> HeliosResult<()> {
        if point.compute > self.compute.completed {
            crate::vk::sync::wait(&self.dev, self.dev.compute_sem, point.compute, u64::MAX)?;
            self.compute.completed = point.compute;
        }
        if point.transfer > self.transfer.completed {
            crate::vk::sync::wait(&self.dev, self.dev.transfer_sem, point.transfer, u64::MAX)?;
            self.transfer.completed = point.transfer;
        }
        Ok(())
    }

    /// Frees every GPU object; called by destroy() and Drop.
    fn teardown(&mut self) {
        self.dev.wait_idle();
        self.save_cache();
        // Joined before anything else goes: its thread uses the device.
        self.stop_allocating_ahead();
        if let Some(batch) = self.batch.take() {
            self.compute.give_back(batch.cmd);
            for b in batch.keep.staging {
                memory::destroy_buffer(&self.dev, &mut self.alloc, b);
            }
            for p in batch.keep.desc_pools {
                command::destroy_descriptor_pool(&self.dev, p);
            }
            for q in batch.keep.queries {
                command::destroy_query_pool(&self.dev, q);
            }
        }
        for cap in self.captures.drain() {
            self.drop_capture_now(cap);
        }
        for (_, rec) in self.profiles.drain() {
            if rec.capture.is_some() {
                continue; // a capture's pools went with it above
            }
            for q in rec.pools {
                command::destroy_query_pool(&self.dev, q);
            }
        }
        drop(self.pipelines.drain());
        self.compute.destroy(&self.dev, &mut self.alloc, &mut self.desc_free);
        self.transfer.destroy(&self.dev, &mut self.alloc, &mut self.desc_free);
        for p in self.desc_free.drain(..) {
            command::destroy_descriptor_pool(&self.dev, p);
        }
        for b in self.res.drain_all() {
            memory::destroy_buffer(&self.dev, &mut self.alloc, b);
        }
        for (_, b) in self.readbacks.drain() {
            memory::destroy_buffer(&self.dev, &mut self.alloc, b);
        }
        for b in [self.ring_buf.take(), self.read_staging.take()].into_iter().flatten() {
            memory::destroy_buffer(&self.dev, &mut self.alloc, b);
        }
        pipeline::destroy_cache(&self.dev, self.cache.raw);
        self.cache.raw = vk::PipelineCache::null();
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The device's own cache file if usable, else the shipped seed for its GPU model and driver
/// build (unless HELIOS_PIPELINE_SEED=0), else an empty cache.
fn open_cache(dev: &Device, cfg: &Config, seed_dir: Option<&Path>) -> PipelineCacheState {
    let path = cfg
        .cache_dir
        .as_ref()
        .map(|d| cache_file::file_path(d, &dev.adapter.uuid, dev.adapter.driver_version_raw));
    let key = CacheKey {
        vendor_id: dev.adapter.info.vendor_id,
        device_id: dev.adapter.info.device_id,
        uuid: dev.adapter.pipeline_cache_uuid,
    };
    let seed_dir = seed_dir.filter(|_| cfg.pipeline_seed);
    let (initial, source) = pipeline_seed::initial_data(path.as_deref(), seed_dir, &key);
    let (raw, taken) = pipeline::create_cache(dev, &initial);
    let source = if taken { source } else { CacheSource::Empty };
    PipelineCacheState { raw, path, dirty: false, last_save: Instant::now(), source }
}
