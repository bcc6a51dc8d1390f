//! Thin `#[napi]` exports: parse and validate JS values, call the runtime, map errors.
//! Every export goes through `guard`, which names the call in error messages and turns a
//! panic into an `ERR_HELIOS_INTERNAL` error instead of letting it cross N-API.

pub mod args;
pub mod batch;
pub mod buffer;
pub mod device;
pub mod dist;
pub mod kernels;
pub mod pipeline;
pub mod tasks;
pub mod types;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{ErrorCode, HeliosError, HeliosResult, InCall};

/// Runs an export body, attaching the call name to errors and catching panics.
pub fn guard<T>(call: &str, f: impl FnOnce() -> HeliosResult<T>) -> napi::Result<T, ErrorCode> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.in_call(call),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(HeliosError::internal(format!("{call}: internal error (panic: {what})")).into())
        }
    }
}

