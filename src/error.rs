//! One error type for the whole addon, mapped to JS errors with stable `code`s.
//!
//! Every `#[napi]` export returns `JsResult<T>`; `?` on a `HeliosError` converts it.
//! Messages always name the call and the offending value, e.g.
//! `uploadBuffer: handle 0x1000000002 is stale (buffer was destroyed)`.

use std::fmt;

/// The stable error codes JS callers match on (`err.code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    NoDevice,
    InvalidHandle,
    OutOfRange,
    InvalidArgument,
    OutOfMemory,
    Timeout,
    DeviceLost,
    Destroyed,
    InvalidKernel,
    /// A second JS thread (worker_thread isolate) used the device another one owns.
    Isolate,
    /// The CUDA driver or NCCL is absent or unusable (distributed training).
    DistUnavailable,
    /// A collective failed or was aborted (a peer died or hung): the job is over.
    DistAborted,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NoDevice => "ERR_HELIOS_NO_DEVICE",
            ErrorCode::InvalidHandle => "ERR_HELIOS_INVALID_HANDLE",
            ErrorCode::OutOfRange => "ERR_HELIOS_OUT_OF_RANGE",
            ErrorCode::InvalidArgument => "ERR_HELIOS_INVALID_ARGUMENT",
            ErrorCode::OutOfMemory => "ERR_HELIOS_OUT_OF_MEMORY",
            ErrorCode::Timeout => "ERR_HELIOS_TIMEOUT",
            ErrorCode::DeviceLost => "ERR_HELIOS_DEVICE_LOST",
            ErrorCode::Destroyed => "ERR_HELIOS_DESTROYED",
            ErrorCode::InvalidKernel => "ERR_HELIOS_INVALID_KERNEL",
            ErrorCode::Isolate => "ERR_HELIOS_ISOLATE",
            ErrorCode::DistUnavailable => "ERR_HELIOS_DIST_UNAVAILABLE",
            ErrorCode::DistAborted => "ERR_HELIOS_DIST_ABORTED",
            ErrorCode::Internal => "ERR_HELIOS_INTERNAL",
        }
    }
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// A failure with its code and a message that names the call and the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeliosError {
    pub code: ErrorCode,
    pub message: String,
}

impl HeliosError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        HeliosError { code, message: message.into() }
    }
    pub fn no_device(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::NoDevice, msg)
    }
    pub fn invalid_handle(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidHandle, msg)
    }
    pub fn out_of_range(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::OutOfRange, msg)
    }
    pub fn invalid_argument(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, msg)
    }
    pub fn out_of_memory(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::OutOfMemory, msg)
    }
    pub fn timeout(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::Timeout, msg)
    }
    pub fn device_lost(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::DeviceLost, msg)
    }
    pub fn destroyed(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::Destroyed, msg)
    }
    pub fn invalid_kernel(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidKernel, msg)
    }
    pub fn isolate(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::Isolate, msg)
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, msg)
    }

    /// Prefixes the message with the JS call name: `uploadBuffer: ...`.
    pub fn in_call(mut self, call: &str) -> Self {
        if !self.message.starts_with(call) {
            self.message = format!("{call}: {}", self.message);
        }
        self
    }
}

impl fmt::Display for HeliosError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code.as_str())
    }
}

impl std::error::Error for HeliosError {}

pub type HeliosResult<T> = Result<T, HeliosError>;

/// What every `#[napi]` export returns: JS sees `err.code == "ERR_HELIOS_..."`.
pub type JsResult<T> = napi::Result<T, ErrorCode>;

impl From<HeliosError> for napi::Error<ErrorCode> {
    fn from(e: HeliosError) -> Self {
        napi::Error::new(e.code, e.message)
    }
}

/// Extension to attach the JS call name while converting to a JS error.
pub trait InCall<T> {
    fn in_call(self, call: &str) -> JsResult<T>;
}

impl<T> InCall<T> for HeliosResult<T> {
    fn in_call(self, call: &str) -> JsResult<T> {
        self.map_err(|e| e.in_call(call).into())
    }
}
