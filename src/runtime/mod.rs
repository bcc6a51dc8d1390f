//! Safe runtime logic over the `vk` layer: generational handles, buffer table, leasing pool,
//! hazard tracker, batches, timelines, captures and profiles. All state sits behind one
//! global lock (`global`); JS calls and the kernel assembler reach it through `global`.

pub mod ahead;
pub mod batch;
pub mod buffers;
pub mod cache_file;
pub mod capture;
pub mod context;
pub mod external;
pub mod global;
pub mod handles;
pub mod lane;
pub mod parallel;
pub mod pipeline_seed;
pub mod pipelines;
pub mod pool;
pub mod profile;
pub mod readback;
pub mod resources;
pub mod ring;
pub mod spirv_check;
pub mod timeline;
pub mod tracker;
pub mod transfer;

pub use global::{create_pipeline, create_pipelines, device_caps};
