//! The Vulkan layer: the only module with `unsafe`. Every function here is safe to call
//! given the runtime's invariants (the runtime lock serialises queue and pool access, and
//! objects are destroyed only after the timeline value of their last use completed).
//!
//! - `instance`: loader (dlopen), VkInstance, validation messenger.
//! - `adapter`: device choice and capability probing.
//! - `ext`: feature structs newer than ash 0.38 (NV coopmat2, KHR bfloat16).
//! - `dedicated`: device buffers with a dedicated allocation made without gpu-allocator (off the
//!   runtime lock: buffers allocated ahead of leases).
//! - `external`: memory and timeline semaphores exported as fds for CUDA (distributed training).
//! - `device`: logical device, enabled features, queues, timeline semaphores.
//! - `memory`: gpu-allocator buffers, host copies (multithreaded when large) and the
//!   huge-page advice for download results (the one `unsafe` here that is not a Vulkan call).
//! - `host_result`: large download results recycled through JS GC (external ArrayBuffers).
//! - `pipeline`: compute pipelines and the VkPipelineCache.
//! - `command`: command pools and recorded commands.
//! - `sync`: timeline waits and queue submission.

pub mod adapter;
pub mod command;
pub mod dedicated;
pub mod device;
pub mod ext;
pub mod external;
pub mod host_result;
pub mod instance;
pub mod memory;
pub mod pipeline;
pub mod sync;

pub use ash::vk as raw;
