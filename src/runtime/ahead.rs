//! Large device buffers allocated ahead of the leases that will need them, on a thread of
//! their own (`HELIOS_ALLOC_AHEAD`).
//!
//! A fresh dedicated allocation costs the recording thread 0.07-0.18 ms on NVIDIA (16-64 MiB).
//! A loop that keeps its outputs (Alpha's bench keeps 40 matmul products of 16 MiB) misses the
//! pool on every lease of the same bucket, so recording those allocations made it host-bound.
//! After `MIN_STREAK` misses of one bucket with no pool hit between them, this thread keeps up
//! to `MAX_READY` spares of it ready (`vk::dedicated`: no gpu-allocator, which only the runtime
//! lock may touch); the next miss takes one instead of allocating. Spares nobody took within
//! `IDLE` are freed, as are all of them at `trimPool` and at teardown (joined first).

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::vk::dedicated;
use crate::vk::device::Device;
use crate::vk::memory::{self, GpuBuffer};

/// Misses of one bucket in a row before spares are made: one miss is any first lease.
const MIN_STREAK: u32 = 2;
/// Spares kept ready per bucket, at most: with ~0.1 ms per allocation the thread refills
/// faster than a loop leases, so a few cover a burst.
const MAX_READY: usize = 4;
/// Bytes of spares (ready or being made) across all buckets, at most: 4 of 64 MiB.
const MAX_BYTES: u64 = 256 << 20;
/// Nor more than this share of the device heap (small or shared-memory devices).
const HEAP_SHARE: u64 = 8;
/// A spare untaken this long is freed: the loop that wanted it has ended.
const IDLE: Duration = Duration::from_millis(300);

/// Spares to keep ready for a bucket that missed the pool `streak` times in a row: one after
/// `MIN_STREAK` misses, one more per further miss, up to `MAX_READY`.
pub fn wanted(streak: u32) -> usize {
    if streak < MIN_STREAK {
        return 0;
    }
    ((streak - MIN_STREAK + 1) as usize).min(MAX_READY)
}

/// The byte cap on spares for a device whose buffers come from a heap of `heap` bytes.
pub fn cap_bytes(heap: u64) -> u64 {
    MAX_BYTES.min(heap / HEAP_SHARE)
}

/// The next bucket to make a spare of: the smallest whose ready count is below what is wanted
/// and whose size still fits under `cap` beside the `held` bytes.
pub fn next_job(want: &HashMap<u64, usize>, have: impl Fn(u64) -> usize, held: u64, cap: u64) -> Option<u64> {
    want.iter()
        .filter(|&(&bucket, &n)| have(bucket) < n && held.saturating_add(bucket) <= cap)
        .map(|(&bucket, _)| bucket)
        .min()
}

struct Spare {
    buf: GpuBuffer,
    made: Instant,
}

#[derive(Default)]
struct State {
    /// Misses in a row by bucket (a pool hit or a dropped request clears one).
    streaks: HashMap<u64, u32>,
    /// Spares wanted by bucket.
    want: HashMap<u64, usize>,
    /// Ready spares by bucket, oldest first.
    ready: HashMap<u64, Vec<Spare>>,
    /// Bytes of ready spares.
    ready_bytes: u64,
    /// Bytes of ready spares and of the one being made (what the cap bounds).
    held: u64,
    stop: bool,
}

impl State {
    /// Forgets a bucket's request (its spares stay until taken or idle).
    fn drop_request(&mut self, bucket: u64) {
        self.want.remove(&bucket);
        self.streaks.remove(&bucket);
    }
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// The recording thread's handle on the allocator thread (started at the first request).
pub struct Ahead {
    dev: Arc<Device>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    cap: u64,
    /// No thread (it could not start, or was shut down): leases allocate as without this module.
    off: bool,
}

impl Ahead {
    pub fn new(dev: Arc<Device>) -> Ahead {
        let cap = cap_bytes(dedicated::device_heap_bytes(&dev));
        Ahead { dev, shared: Arc::new(Shared { state: Mutex::new(State::default()), wake: Condvar::new() }), thread: None, cap, off: false }
    }

    /// A lease of `bucket` missed the pool: counts the miss, asks for spares once the streak is
    /// long enough, and hands out the oldest ready spare if there is one.
    pub fn take(&mut self, bucket: u64) -> Option<GpuBuffer> {
        if self.off {
            return None;
        }
        let mut st = self.shared.state.lock();
        let streak = st.streaks.entry(bucket).or_insert(0);
        *streak = streak.saturating_add(1);
        let want = wanted(*streak);
        if want > 0 {
            st.want.insert(bucket, want);
        }
        let spare = st.ready.get_mut(&bucket).filter(|l| !l.is_empty()).map(|l| l.remove(0));
        if let Some(s) = &spare {
            st.ready_bytes -= s.buf.size;
            st.held -= s.buf.size;
        }
        if want > 0 {
            drop(st);
            self.ensure_thread();
            self.shared.wake.notify_one();
        }
        spare.map(|s| s.buf)
    }

    /// A lease of `bucket` was served by the pool: the streak ends and no more spares are made.
    pub fn hit(&mut self, bucket: u64) {
        let mut st = self.shared.state.lock();
        if st.streaks.contains_key(&bucket) {
            st.drop_request(bucket);
        }
    }

    /// Bytes of spares ready now (device memory the pool's own totals do not hold).
    pub fn ready_bytes(&self) -> u64 {
        self.shared.state.lock().ready_bytes
    }

    /// Takes every ready spare and forgets every request (`trimPool`, out of memory); the
    /// caller frees them. One being made arrives later and goes idle.
    pub fn drain(&mut self) -> Vec<GpuBuffer> {
        let mut st = self.shared.state.lock();
        st.want.clear();
        st.streaks.clear();
        take_all(&mut st)
    }

    /// Stops and joins the thread for good (it finishes an allocation in progress), then hands
    /// over every spare for the caller to free before the device goes.
    pub fn shutdown(&mut self) -> Vec<GpuBuffer> {
        self.off = true;
        self.shared.state.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        take_all(&mut self.shared.state.lock())
    }

    fn ensure_thread(&mut self) {
        if self.thread.is_some() {
            return;
        }
        let (shared, dev, cap) = (self.shared.clone(), self.dev.clone(), self.cap);
        match std::thread::Builder::new().name("helios-ahead".into()).spawn(move || run(&shared, &dev, cap)) {
            Ok(t) => self.thread = Some(t),
            Err(_) => self.off = true,
        }
    }
}

impl Drop for Ahead {
    /// The runtime's teardown already took the spares (`shutdown`); this covers any other
    /// drop, while `dev` still holds the device.
    fn drop(&mut self) {
        let leftover = self.shutdown();
        for b in leftover {
            memory::destroy_own(&self.dev, b);
        }
    }
}

fn take_all(st: &mut State) -> Vec<GpuBuffer> {
    st.held -= st.ready_bytes;
    st.ready_bytes = 0;
    st.ready.drain().flat_map(|(_, l)| l).map(|s| s.buf).collect()
}

/// The allocator thread: makes what is wanted while the cap allows, frees idle spares, sleeps.
fn run(shared: &Shared, dev: &Device, cap: u64) {
    let mut st = shared.state.lock();
    loop {
        if st.stop {
            return;
        }
        free_idle(&mut st, dev);
        let job = {
            let ready = &st.ready;
            next_job(&st.want, |b| ready.get(&b).map_or(0, Vec::len), st.held, cap)
        };
        let Some(bucket) = job else {
            if st.ready_bytes == 0 {
                shared.wake.wait(&mut st);
            } else {
                shared.wake.wait_for(&mut st, IDLE);
            }
            continue;
        };
        st.held += bucket;
        let made = MutexGuard::unlocked(&mut st, || dedicated::create_device_buffer(dev, bucket));
        match made {
            Ok(buf) => {
                st.ready_bytes += bucket;
                st.ready.entry(bucket).or_default().push(Spare { buf, made: Instant::now() });
            }
            // Out of memory or at the allocation cap: the recording thread allocates this
            // bucket itself (and reports its own error) until a new streak asks again.
            Err(_) => {
                st.held -= bucket;
                st.drop_request(bucket);
            }
        }
    }
}

/// Frees spares untaken for `IDLE` (with the lock released while the driver frees them) and
/// forgets their buckets' requests.
fn free_idle(st: &mut MutexGuard<'_, State>, dev: &Device) {
    let now = Instant::now();
    let mut idle = Vec::new();
    let mut buckets = Vec::new();
    for (&bucket, list) in st.ready.iter_mut() {
        // Oldest first: the idle ones are a prefix.
        let n = list.iter().take_while(|s| now.duration_since(s.made) >= IDLE).count();
        if n > 0 {
            idle.extend(list.drain(..n).map(|s| s.buf));
            buckets.push(bucket);
        }
    }
    if idle.is_empty() {
        return;
    }
    let bytes: u64 = idle.iter().map(|b| b.size).sum();
    st.ready_bytes -= bytes;
    st.held -= bytes;
    for b in buckets {
        st.drop_request(b);
    }
    MutexGuard::unlocked(st, || idle.into_iter().for_each(|b| memory::destroy_own(dev, b)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_grow_with_the_streak_up_to_four() {
        let got: Vec<usize> = (0..8).map(wanted).collect();
        assert_eq!(got, [0, 0, 1, 2, 3, 4, 4, 4]);
        assert_eq!(wanted(u32::MAX), MAX_READY);
    }

    #[test]
    fn the_byte_cap_is_256_mib_or_an_eighth_of_the_heap() {
        assert_eq!(cap_bytes(80 << 30), 256 << 20);
        assert_eq!(cap_bytes(1 << 30), 128 << 20);
        assert_eq!(cap_bytes(0), 0);
    }

    #[test]
    fn jobs_respect_want_and_cap() {
        const MIB: u64 = 1 << 20;
        let want = HashMap::from([(16 * MIB, 2), (64 * MIB, 4)]);
        let none = |_| 0;
        assert_eq!(next_job(&want, none, 0, 256 * MIB), Some(16 * MIB), "the smallest bucket first");
        assert_eq!(next_job(&want, |b| if b == 16 * MIB { 2 } else { 0 }, 32 * MIB, 256 * MIB), Some(64 * MIB));
        assert_eq!(next_job(&want, |b| if b == 16 * MIB { 2 } else { 3 }, 224 * MIB, 256 * MIB), None, "a fourth 64 MiB spare would pass the cap");
        assert_eq!(next_job(&want, |b| if b == 16 * MIB { 2 } else { 4 }, 0, 256 * MIB), None, "everything wanted is ready");
        assert_eq!(next_job(&HashMap::new(), none, 0, 256 * MIB), None);
        assert_eq!(next_job(&want, none, u64::MAX - 1, u64::MAX - 1), None, "no overflow");
    }
}
