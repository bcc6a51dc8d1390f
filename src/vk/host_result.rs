//! Host memory that large downloads land in, recycled through JS garbage collection.
//!
//! A fresh 256 MiB result costs the kernel 65,536 page faults (or 128 huge-page zeroings) the
//! first time the copy touches it, which bounded download speed more than the DMA did. Large
//! results are therefore handed to JS as *external* ArrayBuffers whose finalizer returns the
//! memory to a process-wide pool (not tied to a device: the memory outlives `destroy()`), and
//! the next large read reuses resident pages. Small results stay plain `Vec`s.

use napi::bindgen_prelude::ArrayBuffer;
use napi::Env;
use parking_lot::Mutex;

/// Results from this size up are pooled (smaller ones fault in cheaply).
pub const POOLED_MIN: usize = 16 << 20;
/// Idle pooled memory kept at most; past it, returned buffers are freed.
const POOL_IDLE_MAX: usize = 2 << 30;

/// A result buffer: `data.len()` is the result length; `full` the length it was created with
/// (every byte up to `full` was initialised then, so it may be restored after a truncate).
#[derive(Debug)]
pub struct HostResult {
    data: Vec<u8>,
    full: usize,
    /// Its pages are resident (recycled): no prefault needed before overwriting.
    pub resident: bool,
}

impl HostResult {
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.data
    }
}

impl std::ops::Deref for HostResult {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl PartialEq<[u8]> for HostResult {
    fn eq(&self, other: &[u8]) -> bool {
        self.data == other
    }
}

impl PartialEq<Vec<u8>> for HostResult {
    fn eq(&self, other: &Vec<u8>) -> bool {
        &self.data == other
    }
}

static POOL: Mutex<Vec<HostResult>> = Mutex::new(Vec::new());

/// A buffer of `len` bytes whose contents the caller overwrites entirely: recycled when the
/// pool has one of at least `len` and at most `2 * len` bytes, fresh (zeroed) otherwise.
pub fn result_buffer(len: usize) -> HostResult {
    if len >= POOLED_MIN {
        let mut pool = POOL.lock();
        let best = pool
            .iter()
            .enumerate()
            .filter(|(_, r)| r.full >= len && r.full <= 2 * len)
            .min_by_key(|(_, r)| r.full)
            .map(|(i, _)| i);
        if let Some(i) = best {
            let mut r = pool.swap_remove(i);
            r.data.truncate(len);
            r.resident = true;
            return r;
        }
    }
    let data = crate::vk::memory::download_vec(len);
    HostResult { full: data.len(), data, resident: false }
}

fn give_back(mut r: HostResult) {
    // SAFETY: bytes [0, full) were initialised when the Vec was created with that length and
    // `truncate` never frees or uninitialises them; capacity >= full since it never shrank.
    unsafe { r.data.set_len(r.full) };
    let mut pool = POOL.lock();
    let idle: usize = pool.iter().map(|x| x.full).sum();
    if idle + r.full <= POOL_IDLE_MAX {
        pool.push(r);
    }
}

/// Frees the idle pooled results (`trimPool`).
pub fn trim() {
    POOL.lock().clear();
}

/// Hands `r` to JS as an ArrayBuffer. Pooled sizes are external buffers that return to the
/// pool when collected; smaller ones are plain `from_data` buffers.
pub fn into_array_buffer(env: &Env, r: HostResult) -> napi::Result<ArrayBuffer<'static>> {
    if r.len() < POOLED_MIN {
        return ArrayBuffer::from_data(env, r.into_vec());
    }
    let mut r = r;
    let (ptr, len) = (r.data.as_mut_ptr(), r.data.len());
    // SAFETY: `ptr` points at `len` initialised bytes owned by `r`'s Vec, which the finalizer
    // receives and keeps alive until V8 collects the ArrayBuffer (moving the Vec struct does
    // not move its heap allocation); nothing else references that allocation meanwhile.
    unsafe { ArrayBuffer::from_external(env, ptr, len, r, |_, r| give_back(r)) }
}

/// The bytes of a JS ArrayBuffer (or a typed array's view of one), writable: readBufferInto's
/// destination.
pub fn writable<'a>(b: &'a mut ArrayBuffer<'_>) -> &'a mut [u8] {
    // SAFETY: exports run synchronously on the JS thread while the caller holds the value, so
    // V8 neither frees nor moves the backing store and no JS code runs that could alias it.
    unsafe { b.as_mut() }
}
