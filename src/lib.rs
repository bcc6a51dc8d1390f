#![deny(clippy::undocumented_unsafe_blocks)]
//! Helios native addon: a Vulkan runtime (`vk`, `runtime`) and a kernel assembler
//! (`ir`, `spirv`) behind a thin napi-rs API (`api`).
//!
//! Layers, one direction: `api` parses and validates JS values and calls plain Rust;
//! `runtime` owns handles, batches, hazards and pools; `vk` and the CUDA/NCCL bindings in
//! `dist` are the only places with `unsafe`; `ir` + `spirv` turn a kernel description into SPIR-V words.

pub mod api;
pub mod caps;
pub mod config;
pub mod dist;
pub mod error;
pub mod ir;
pub mod runtime;
pub mod spirv;
pub mod vk;

#[napi_derive::napi]
pub fn helios_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
