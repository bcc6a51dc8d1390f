//! Device lifetime and information exports.

use std::cell::Cell;

use napi::bindgen_prelude::{Either, FnArgs, Function, JsObjectValue, Object, Unknown};
use napi::{Env, JsGlobal};
use napi_derive::napi;

use crate::api::args::{opt_object, path};
use crate::api::guard;
use crate::api::types::{device_info, DeviceInfo, InitOptions};
use crate::error::{ErrorCode, HeliosError, HeliosResult};
use crate::runtime::context::InitOptions as RtInit;
use crate::runtime::global;

/// Picks the best Vulkan 1.3 device (discrete > integrated > virtual > cpu; `device` or
/// HELIOS_DEVICE = index or name substring) and enables what it supports. Idempotent: returns
/// the current device's info when already initialized.
#[napi(ts_args_type = "opts?: InitOptions | undefined | null")]
pub fn init_device(env: Env, opts: Option<Unknown<'_>>) -> napi::Result<DeviceInfo, ErrorCode> {
    guard("initDevice", || {
        let opts: Option<InitOptions> = opt_object(opts, "opts")?;
        watch_exit(&env)?;
        let opts = match opts {
            None => RtInit::default(),
            Some(o) => RtInit {
                device: o.device.map(|d| match d {
                    Either::A(i) => i.to_string(),
                    Either::B(s) => s,
                }),
                validation: o.validation,
                shareable: o.shareable.unwrap_or(false),
                pipeline_seed_dir: o.pipeline_seed_dir.map(|d| path(d, "opts.pipelineSeedDir")).transpose()?,
            },
        };
        let (info, caps, flags) = global::init(&opts)?;
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
/// throw ERR_HELIOS_DESTROYED until initDevice is called again. Only the JS thread that
/// created the device may (ERR_HELIOS_ISOLATE elsewhere).
#[napi]
pub fn destroy() -> napi::Result<(), ErrorCode> {
    guard("destroy", global::destroy)
}

/// `process.on(event, listener)`.
type ProcessOn<'a> = Function<'a, FnArgs<(&'a str, Function<'a, (), ()>)>, Object<'a>>;

thread_local! {
    /// Whether this JS thread's exit hooks are registered (once per isolate, not per device).
    static EXIT_WATCHED: Cell<bool> = const { Cell::new(false) };
}

/// Makes the exit of this JS thread (process exit or worker end) drain and free the device it
/// owns: a `process.on("exit")` listener waits for the queue (process.exit() runs no env
/// cleanup hooks), and the env cleanup hook frees everything after the last listener ran.
/// Without them the process exits with work in flight on driver threads.
fn watch_exit(env: &Env) -> HeliosResult<()> {
    if EXIT_WATCHED.with(Cell::get) {
        return Ok(());
    }
    let thread = global::this_thread();
    let failed = |e: napi::Error| HeliosError::internal(format!("cannot register the exit hooks: {}", e.reason));
    env.add_env_cleanup_hook(thread, global::release_at_exit).map_err(failed)?;
    let register = || -> napi::Result<()> {
        let drain = env.create_function_from_closure::<(), (), _>("heliosDrainAtExit", move |_| {
            global::drain_at_exit(thread);
            Ok(())
        })?;
        let global_obj: JsGlobal = env.get_global()?;
        let process: Object = global_obj.get_named_property("process")?;
        let on: ProcessOn = process.get_named_property("on")?;
        on.apply(process, FnArgs::from(("exit", drain)))?;
        Ok(())
    };
    register().map_err(failed)?;
    EXIT_WATCHED.with(|w| w.set(true));
    Ok(())
}

/// Drains the validation messages (warnings and errors) collected so far.
#[napi]
pub fn take_validation_messages() -> Vec<String> {
    global::take_messages()
}
