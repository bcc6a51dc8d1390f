//! The leasing pool's bookkeeping: size buckets and reuse rules (no Vulkan here).
//!
//! Sizes round up to one of four steps per power of two (1, 1.25, 1.5, 1.75 × 2^k), so a
//! bucket wastes at most 25%. A lease prefers a released buffer whose last-use point has
//! completed (checked against semaphore counters, never by waiting); failing that, one whose
//! pending uses are ordered before anything recorded from now on (`BufferRes::reusable_in_batch`),
//! so a step's temporaries recycle inside one batch or capture and the pool's peak is the
//! step's live set rather than everything it leased.

use std::collections::HashMap;

const MIN_BUCKET: u64 = 256;

/// The size a lease of `len` bytes is rounded up to.
pub fn bucket_size(len: u64) -> u64 {
    let len = len.max(MIN_BUCKET);
    let pow = len.next_power_of_two();
    if pow == len {
        return len;
    }
    let base = pow / 2;
    let step = (base / 4).max(1);
    let steps = (len - base).div_ceil(step);
    base + steps * step
}

/// `poolStats()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub leased_bytes: u64,
    pub free_bytes: u64,
    /// High-water mark of leased + free bytes (what the pool holds from the driver) since the
    /// last trim.
    pub peak_bytes: u64,
    /// High-water mark of leased bytes since the last trim: the live set in bucket bytes, the
    /// floor `peak_bytes` would reach if every release could serve every later lease.
    pub peak_leased_bytes: u64,
    pub allocations: u64,
    pub reuses: u64,
    /// Reuses of a buffer whose last use was still pending (counted in `reuses` too).
    pub in_batch_reuses: u64,
    /// Idle buffers the pool holds now (every bucket).
    pub free_buffers: u64,
    /// Allocations that took a buffer made ahead (`runtime::ahead`; counted in `allocations` too).
    pub allocated_ahead: u64,
    /// Bytes of buffers made ahead and not leased yet (device memory beside leased + free).
    pub ahead_bytes: u64,
}

/// Idle pooled buffers by bucket size. Whether one is ready (its last use completed and no
/// open batch or capture holds it) is the resource table's knowledge, passed in as `ready`.
#[derive(Debug)]
pub struct Pool<R: Copy> {
    idle: HashMap<u64, Vec<R>>,
    pub stats: PoolStats,
}

impl<R: Copy> Default for Pool<R> {
    fn default() -> Self {
        Pool { idle: HashMap::new(), stats: PoolStats::default() }
    }
}

impl<R: Copy> Pool<R> {
    /// Takes an idle buffer of `bucket` bytes that is `ready`, if any: the longest-released
    /// one, whose last use is the least likely to need a barrier before the new holder's.
    pub fn acquire(&mut self, bucket: u64, mut ready: impl FnMut(R) -> bool) -> Option<R> {
        let list = self.idle.get_mut(&bucket)?;
        let pos = list.iter().position(|&id| ready(id))?;
        let id = list.remove(pos);
        self.stats.free_bytes -= bucket;
        self.stats.leased_bytes += bucket;
        self.stats.peak_leased_bytes = self.stats.peak_leased_bytes.max(self.stats.leased_bytes);
        self.stats.reuses += 1;
        Some(id)
    }

    /// `acquire` of a buffer whose last use may still be pending (counted apart).
    pub fn acquire_in_batch(&mut self, bucket: u64, ready: impl FnMut(R) -> bool) -> Option<R> {
        let id = self.acquire(bucket, ready)?;
        self.stats.in_batch_reuses += 1;
        Some(id)
    }

    /// Counts a fresh allocation of `bucket` bytes that is now leased.
    pub fn note_allocation(&mut self, bucket: u64) {
        self.stats.allocations += 1;
        self.stats.leased_bytes += bucket;
        self.stats.peak_leased_bytes = self.stats.peak_leased_bytes.max(self.stats.leased_bytes);
        self.stats.peak_bytes = self.stats.peak_bytes.max(self.stats.leased_bytes + self.stats.free_bytes);
    }

    /// Counts an allocation served by a buffer made ahead (`note_allocation` counts it too).
    pub fn note_allocated_ahead(&mut self) {
        self.stats.allocated_ahead += 1;
    }

    /// The statistics with the current count of idle buffers.
    pub fn snapshot(&self) -> PoolStats {
        PoolStats { free_buffers: self.idle.values().map(|l| l.len() as u64).sum(), ..self.stats }
    }

    /// Returns a leased buffer to the pool.
    pub fn release(&mut self, bucket: u64, id: R) {
        self.stats.leased_bytes -= bucket;
        self.stats.free_bytes += bucket;
        self.idle.entry(bucket).or_default().push(id);
    }

    /// Removes idle buffers that are `ready` (for freeing); in-flight ones stay. Both peaks
    /// restart from what remains, so a benchmark can measure one phase after a trim.
    pub fn trim(&mut self, mut ready: impl FnMut(R) -> bool) -> Vec<R> {
        let mut out = Vec::new();
        for (&bucket, list) in self.idle.iter_mut() {
            list.retain(|&id| {
                let done = ready(id);
                if done {
                    out.push(id);
                    self.stats.free_bytes -= bucket;
                }
                !done
            });
        }
        self.idle.retain(|_, l| !l.is_empty());
        self.stats.peak_bytes = self.stats.leased_bytes + self.stats.free_bytes;
        self.stats.peak_leased_bytes = self.stats.leased_bytes;
        out
    }

    /// Everything idle (destroy()).
    pub fn drain(&mut self) -> Vec<R> {
        self.stats.free_bytes = 0;
        self.idle.drain().flat_map(|(_, l)| l).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::timeline::Point;

    #[test]
    fn buckets_round_up_at_most_25_percent() {
        assert_eq!(bucket_size(1), 256);
        assert_eq!(bucket_size(1024), 1024);
        assert_eq!(bucket_size(1025), 1280);
        assert_eq!(bucket_size(1280), 1280);
        assert_eq!(bucket_size(1281), 1536);
        assert_eq!(bucket_size(1793), 2048);
        let mut seed = 12345u64;
        for _ in 0..10_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = (seed >> 20) % (1 << 30) + 1;
            let b = bucket_size(len);
            assert!(b >= len && (b as f64) <= (len.max(256) as f64) * 1.25 + 1.0, "{len} -> {b}");
        }
    }

    /// Last-use points by id, as the resource table would report them (None = open batch).
    fn ready(uses: &[Option<Point>], completed: Point) -> impl FnMut(u32) -> bool + '_ {
        move |id| uses[id as usize].is_some_and(|p| p.reached_by(completed))
    }

    #[test]
    fn no_reuse_before_completion() {
        let mut p: Pool<u32> = Pool::default();
        let uses = [None, None, None, None, None, None, None, Some(Point::compute(5))];
        p.note_allocation(1024);
        p.release(1024, 7);
        assert_eq!(p.acquire(1024, ready(&uses, Point::compute(4))), None);
        assert_eq!(p.acquire(2048, ready(&uses, Point::compute(9))), None, "wrong bucket");
        assert_eq!(p.acquire(1024, ready(&uses, Point::compute(5))), Some(7));
        assert_eq!(p.stats.reuses, 1);
        assert_eq!(p.stats.leased_bytes, 1024);
    }

    #[test]
    fn released_inside_open_batch_waits_for_submit() {
        let mut p: Pool<u32> = Pool::default();
        let mut uses = [None, None];
        p.note_allocation(256);
        p.release(256, 1);
        assert_eq!(p.acquire(256, ready(&uses, Point::compute(u64::MAX))), None);
        uses[1] = Some(Point::compute(3));
        assert_eq!(p.acquire(256, ready(&uses, Point::compute(2))), None);
        assert_eq!(p.acquire(256, ready(&uses, Point::compute(3))), Some(1));
    }

    #[test]
    fn transfer_use_counts_too() {
        let mut p: Pool<u32> = Pool::default();
        let uses = [None, Some(Point { compute: 1, transfer: 4 })];
        p.note_allocation(256);
        p.release(256, 1);
        assert_eq!(p.acquire(256, ready(&uses, Point { compute: 9, transfer: 3 })), None);
        assert_eq!(p.acquire(256, ready(&uses, Point { compute: 9, transfer: 4 })), Some(1));
    }

    #[test]
    fn trim_frees_only_completed() {
        let mut p: Pool<u32> = Pool::default();
        let uses = [Some(Point::compute(1)), Some(Point::compute(2)), Some(Point::compute(3))];
        for id in 0..3 {
            p.note_allocation(512);
            p.release(512, id);
        }
        assert_eq!(p.stats.peak_bytes, 1536);
        let freed = p.trim(ready(&uses, Point::compute(2)));
        assert_eq!(freed.len(), 2);
        assert_eq!(p.stats.free_bytes, 512);
        assert_eq!(p.stats.peak_bytes, 512, "the peak restarts at a trim");
    }

    #[test]
    fn peak_leased_is_the_live_set() {
        let mut p: Pool<u32> = Pool::default();
        let uses = [Some(Point::ZERO); 4];
        // Two leases live at once, then a third of another bucket after both went back.
        p.note_allocation(1024);
        p.note_allocation(1024);
        p.release(1024, 0);
        p.release(1024, 1);
        assert_eq!(p.acquire(1024, ready(&uses, Point::ZERO)), Some(0));
        p.release(1024, 0);
        p.note_allocation(2048);
        assert_eq!(p.stats.peak_leased_bytes, 2048);
        assert_eq!(p.stats.peak_bytes, 4096, "the 1024-byte buffers cannot serve a 2048-byte lease");
    }
}
