//! Device lifetime and information exports.

use napi::bindgen_prelude::Either;
use napi_derive::napi;

use crate::api::guard;
use crate::api::types::{device_info, DeviceInfo, InitOptions};
use crate::error::ErrorCode;
use crate::runtime::context::InitOptions as RtInit;
use crate::runtime::global;

/// Picks the best Vulkan 1.3 device (discrete > integrated > virtual > cpu; `device` or
/// HELIOS_DEVICE = index or name substring) and enables what it supports. Idempotent: returns
/// the current device's info when already initialized.
#[napi]
pub fn init_device(opts: Option<InitOptions>) -> napi::Result<DeviceInfo, ErrorCode> {
    guard("initDevice", || {
        let opts = opts.map(|o| RtInit {
            device: o.device.map(|d| match d {
                Either::A(i) => i.to_string(),
                Either::B(s) => s,
            }),
            validation: o.validation,
        });
        let (info, caps, flags) = global::init(&opts.unwrap_or_default())?;
        Ok(device_info(info, caps, flags))
    })
}

#[napi]
pub fn get_device_info() -> napi::Result<DeviceInfo, ErrorCode> {
    guard("getDeviceInfo", || {
        let (info, caps, flags) = global::info()?;
        Ok(device_info(info, caps, flags))
    })
}

/// Waits for the GPU, frees everything and releases the device. Idempotent; other calls
/// throw ERR_HELIOS_DESTROYED until initDevice is called again.
#[napi]
pub fn destroy() -> napi::Result<(), ErrorCode> {
    guard("destroy", || {
        global::destroy();
        Ok(())
    })
}

/// Drains the validation messages (warnings and errors) collected so far.
#[napi]
pub fn take_validation_messages() -> Vec<String> {
    global::take_messages()
}
