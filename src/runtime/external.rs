//! Buffers and timelines shared with CUDA (the distributed layer: `crate::dist`). A shared
//! buffer is an ordinary buffer handle (dispatches, copies and reads use it) whose memory CUDA
//! imports. Ordering crosses the two APIs on timelines, never through the host: CUDA waits on
//! the compute timeline for a collective's inputs (`flush_for_external` gives the value), and
//! signals the device's external timeline when the collective is done; compute work that uses
//! the buffer after that waits for the value (`BufferRes::ext_wait`, see `submit_waits`).

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::context::Runtime;
use crate::runtime::resources::{BufferRes, Owner};
use crate::vk::external;

/// What CUDA needs to import a shared buffer: an fd the importer owns, and the memory size.
pub struct BufferExport {
    pub fd: i32,
    pub size: u64,
}

impl Runtime {
    /// Creates a shared buffer of `len` bytes (a handle for destroyBuffer) and exports its memory.
    pub fn create_shared_buffer(&mut self, len: f64) -> HeliosResult<(f64, BufferExport)> {
        if !(len.is_finite() && len.fract() == 0.0 && len >= 4.0 && len <= self.max_alloc_bytes() as f64) {
            return Err(HeliosError::invalid_argument(format!("byteLength {len} is not an integer from 4 to {}", self.max_alloc_bytes())));
        }
        let gpu = external::create_shared_buffer(&self.dev, (len as u64).next_multiple_of(4))?;
        let fd = match external::memory_fd(&self.dev, &gpu) {
            Ok(fd) => fd,
            Err(e) => {
                crate::vk::memory::destroy_buffer(&self.dev, &mut self.alloc, gpu);
                return Err(e);
            }
        };
        let size = gpu.size;
        let range = self.dev.adapter.info.max_binding_bytes.min(size);
        let id = self.res.insert(BufferRes::new(gpu, len as u64, range, false, Owner::Handle));
        match self.buffers.insert(id) {
            Ok(handle) => Ok((handle, BufferExport { fd, size })),
            Err(e) => {
                external::close_fd(fd);
                if let Some(r) = self.res.take(id) {
                    crate::vk::memory::destroy_buffer(&self.dev, &mut self.alloc, r.gpu);
                }
                Err(e)
            }
        }
    }

    /// Opaque fds of the compute timeline (CUDA waits on it) and the external timeline (CUDA
    /// signals it); the caller owns both.
    pub fn export_timelines(&self) -> HeliosResult<(i32, i32)> {
        let compute = external::semaphore_fd(&self.dev, self.dev.compute_sem)?;
        match external::semaphore_fd(&self.dev, self.dev.external_sem) {
            Ok(ext) => Ok((compute, ext)),
            Err(e) => {
                external::close_fd(compute);
                Err(e)
            }
        }
    }

    /// Submits recorded work (if any) and returns the compute timeline value after which all of
    /// it has completed: what a collective on the buffers it wrote waits for.
    pub fn flush_for_external(&mut self) -> HeliosResult<u64> {
        if self.batch.as_ref().is_some_and(|b| b.dispatches > 0 || !b.touched.is_empty()) {
            self.submit_segment(true)?;
        }
        Ok(self.compute.submitted)
    }

    /// Compute work that uses `handle` from now on waits for the external timeline to reach `value`.
    pub fn order_after_external(&mut self, handle: f64, value: u64) -> HeliosResult<()> {
        let (id, _) = self.buffer(handle)?;
        if let Some(r) = self.res.get_mut(id) {
            r.ext_wait = r.ext_wait.max(value);
        }
        Ok(())
    }

    /// Whether `handle` is a shared buffer (memory CUDA may import).
    pub fn is_shared(&self, handle: f64) -> HeliosResult<bool> {
        Ok(self.buffer(handle)?.1.gpu.dedicated_memory().is_some())
    }

    /// Signals the external timeline from the host (to at least `value`): what CUDA does after a
    /// collective (tests).
    pub fn signal_external(&mut self, value: u64) -> HeliosResult<()> {
        if self.dev.sharing.is_none() {
            return Err(HeliosError::invalid_argument("the device was not created shareable".to_string()));
        }
        // A timeline only moves forward: a value it already reached is a no-op, not an error.
        if crate::vk::sync::counter(&self.dev, self.dev.external_sem)? >= value {
            return Ok(());
        }
        external::signal(&self.dev, self.dev.external_sem, value)
    }
}
