//! The `#[napi]` exports: thin wrappers that parse JS values, call plain Rust and map errors.

pub mod kernels;
pub mod kernel_bridge;
