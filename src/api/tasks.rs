//! Work that waits runs as an AsyncTask on a libuv worker: it holds an `Arc<Device>` (not
//! the runtime lock) while waiting on a timeline semaphore.

use std::sync::Arc;

use napi::bindgen_prelude::{ArrayBuffer, JsObjectValue, JsValue, Object};
use napi::{Env, Status, Task};

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::global;
use crate::runtime::readback::PendingRead;
use crate::vk::host_result::{self, HostResult};
use crate::vk::device::Device;
use crate::vk::sync;

/// A JS error carrying our stable `code` (Task errors otherwise only carry napi statuses).
fn js_error(env: &Env, e: HeliosError) -> napi::Error {
    let build = || -> napi::Result<napi::Error> {
        let mut obj: Object<'_> = env.create_error(napi::Error::new(Status::GenericFailure, e.message.clone()))?;
        obj.set_named_property("code", e.code.as_str())?;
        Ok(napi::Error::from(obj.to_unknown()))
    };
    build().unwrap_or_else(|_| napi::Error::new(Status::GenericFailure, format!("{} ({})", e.message, e.code.as_str())))
}

pub struct WaitTask {
    dev: Arc<Device>,
    value: u64,
}

impl WaitTask {
    pub fn new(dev: Arc<Device>, value: u64) -> Self {
        WaitTask { dev, value }
    }
}

impl Task for WaitTask {
    type Output = HeliosResult<()>;
    type JsValue = ();

    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(sync::wait(&self.dev, self.dev.compute_sem, self.value, u64::MAX).map(|_| ()))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<()> {
        output.map_err(|e| js_error(&env, e.in_call("waitTimelineAsync")))
    }
}

enum ReadState {
    Ready(HostResult),
    Pending(Arc<Device>, PendingRead),
}

pub struct ReadTask {
    state: Option<ReadState>,
}

impl ReadTask {
    pub fn ready(data: HostResult) -> Self {
        ReadTask { state: Some(ReadState::Ready(data)) }
    }

    pub fn pending(dev: Arc<Device>, p: PendingRead) -> Self {
        ReadTask { state: Some(ReadState::Pending(dev, p)) }
    }
}

impl Task for ReadTask {
    type Output = HeliosResult<HostResult>;
    type JsValue = ArrayBuffer<'static>;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let result = match self.state.take() {
            Some(ReadState::Ready(data)) => Ok(data),
            Some(ReadState::Pending(dev, p)) => {
                let sem = if p.compute { dev.compute_sem } else { dev.transfer_sem };
                sync::wait(&dev, sem, p.value, u64::MAX)
                    .and_then(|_| global::with_same(p.runtime_id, |rt| rt.finish_readback(&p)))
            }
            None => Err(HeliosError::internal("read task ran twice")),
        };
        Ok(result)
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<ArrayBuffer<'static>> {
        match output {
            Ok(data) => host_result::into_array_buffer(&env, data),
            Err(e) => Err(js_error(&env, e.in_call("readBufferAsync"))),
        }
    }
}
