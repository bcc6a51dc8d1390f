//! GPU timestamps around each dispatch of a `profile: true` batch, read back by
//! `batchProfile(value)` once the batch completed. A batch captured while profiled keeps its
//! query pools: each replay rewrites the stamps, readable under the replay's value until the
//! next replay of that capture.

use std::sync::Arc;

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::context::Runtime;
use crate::runtime::lane::Keep;
use crate::vk::command;
use crate::vk::device::Device;
use crate::vk::raw as vk;

/// Timestamps per query pool (two per dispatch).
const QUERIES_PER_POOL: u32 = 512;
/// Unclaimed profiles kept before the oldest is dropped.
const MAX_PROFILES: usize = 256;

#[derive(Default)]
pub struct ProfileBuilder {
    pools: Vec<vk::QueryPool>,
    labels: Vec<Arc<str>>,
    used: u32,
}

pub struct ProfileRecord {
    pub pools: Vec<vk::QueryPool>,
    labels: Vec<Arc<str>>,
    /// The captured batch (its handle) whose pools these are: read here, freed with the capture.
    pub capture: Option<f64>,
    /// Filled (and the query pools freed) by the first batchProfile after completion.
    result: Option<Vec<DispatchTime>>,
}

/// One profiled dispatch. `start_ns`/`end_ns` are the stamps on the queue's clock (an
/// arbitrary origin shared by every batch of the queue), so the GPU time of several batches
/// is max(end) - min(start): dispatches, and whole batches, without a barrier between them
/// overlap, which makes the sum of `gpu_ns` exceed the time they took together.
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchTime {
    pub label: Arc<str>,
    pub gpu_ns: f64,
    pub start_ns: f64,
    pub end_ns: f64,
}

impl ProfileBuilder {
    /// Writes the start timestamp of the next dispatch (opening a pool when needed).
    pub fn before(&mut self, dev: &Device, cmd: vk::CommandBuffer, label: &Arc<str>) -> HeliosResult<()> {
        if self.used.is_multiple_of(QUERIES_PER_POOL) {
            let pool = command::create_query_pool(dev, QUERIES_PER_POOL)?;
            command::reset_queries(dev, cmd, pool, QUERIES_PER_POOL);
            self.pools.push(pool);
        }
        let pool = self.pools[self.pools.len() - 1];
        command::timestamp(dev, cmd, pool, self.used % QUERIES_PER_POOL, false);
        self.labels.push(label.clone());
        self.used += 1;
        Ok(())
    }

    pub fn after(&mut self, dev: &Device, cmd: vk::CommandBuffer) {
        let pool = self.pools[self.pools.len() - 1];
        command::timestamp(dev, cmd, pool, self.used % QUERIES_PER_POOL, true);
        self.used += 1;
    }
}

impl Runtime {
    pub fn store_profile(&mut self, value: u64, p: ProfileBuilder) {
        if self.profiles.len() >= MAX_PROFILES {
            if let Some(&oldest) = self.profiles.keys().min() {
                if let Some(rec) = self.profiles.remove(&oldest) {
                    if rec.capture.is_none() {
                        self.compute.keep_until(oldest, Keep { queries: rec.pools, ..Keep::default() });
                    }
                }
            }
        }
        self.profiles.insert(value, ProfileRecord { pools: p.pools, labels: p.labels, capture: None, result: None });
    }

    /// Registers the replay `value` of the profiled capture `graph`: its stamps replace those of
    /// the capture's earlier replays (they share the queries), so only the latest stays readable.
    pub fn store_replay_profile(&mut self, value: u64, graph: f64, pools: &[vk::QueryPool], labels: &[Arc<str>]) {
        self.profiles.retain(|_, r| r.capture != Some(graph));
        self.profiles.insert(value, ProfileRecord { pools: pools.to_vec(), labels: labels.to_vec(), capture: Some(graph), result: None });
    }

    /// Forgets the replay profiles of a capture being destroyed (its query pools go with it).
    pub fn forget_replay_profiles(&mut self, graph: f64) {
        self.profiles.retain(|_, r| r.capture != Some(graph));
    }

    /// Waits for `value`, then returns the GPU times of each dispatch. The timestamps are read
    /// once (freeing the queries); later calls return the same figures until evicted.
    pub fn batch_profile(&mut self, value: u64) -> HeliosResult<Vec<DispatchTime>> {
        let Some(rec) = self.profiles.get(&value) else {
            return Err(HeliosError::invalid_argument(format!(
                "no profile for timeline value {value} (begin the batch with {{profile: true}}; the last {MAX_PROFILES} are kept)"
            )));
        };
        if let Some(result) = &rec.result {
            return Ok(result.clone());
        }
        self.wait_compute(value, u64::MAX)?;
        let Some(rec) = self.profiles.get_mut(&value) else { return Ok(Vec::new()) };
        let pools = std::mem::take(&mut rec.pools);
        let stamps = read_stamps(&self.dev, &pools, rec.labels.len());
        if rec.capture.is_none() {
            for pool in pools {
                command::destroy_query_pool(&self.dev, pool);
            }
        }
        let stamps = stamps?;
        let period = self.dev.adapter.info.timestamp_period_ns;
        let bits = self.dev.adapter.timestamp_valid_bits;
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let ns = |ticks: u64| if bits == 0 { 0.0 } else { (ticks & mask) as f64 * period };
        // Absolute stamps exceed f64's exact integers (NVIDIA counts ns since boot, ~10^15 and
        // more: end - start of the f64 stamps then missed gpuNs by up to a few hundred ns), so
        // they are reported from an origin fixed at the first read; a batch read later but run
        // earlier gets negative stamps, and every difference stays exact.
        let first = (0..rec.labels.len()).map(|i| stamps[2 * i] & mask).min().unwrap_or(0);
        let origin = *self.stamp_origin.get_or_insert(first);
        let since = |ticks: u64| if bits == 0 { 0.0 } else { stamp_ns(ticks & mask, origin, period) };
        let result: Vec<_> = rec
            .labels
            .iter()
            .enumerate()
            .map(|(i, label)| {
                let (start, end) = (stamps[2 * i] & mask, stamps[2 * i + 1] & mask);
                DispatchTime {
                    label: label.clone(),
                    gpu_ns: ns(end.wrapping_sub(start)),
                    start_ns: since(start),
                    end_ns: since(end),
                }
            })
            .collect();
        rec.result = Some(result.clone());
        Ok(result)
    }
}

/// Two timestamps per dispatch, from consecutive pools.
fn read_stamps(dev: &Device, pools: &[vk::QueryPool], dispatches: usize) -> HeliosResult<Vec<u64>> {
    let mut stamps = Vec::with_capacity(dispatches * 2);
    for &pool in pools {
        let remaining = (dispatches * 2 - stamps.len()).min(QUERIES_PER_POOL as usize) as u32;
        stamps.append(&mut command::query_results(dev, pool, remaining)?);
    }
    Ok(stamps)
}

impl ProfileBuilder {
    /// The query pools and dispatch labels, for a captured batch that keeps them.
    pub fn into_parts(self) -> (Vec<vk::QueryPool>, Vec<Arc<str>>) {
        (self.pools, self.labels)
    }
}

/// Nanoseconds from `origin` to `ticks` on a clock of `period` ns per tick (negative before it).
fn stamp_ns(ticks: u64, origin: u64, period: f64) -> f64 {
    (ticks as i128 - origin as i128) as f64 * period
}

#[cfg(test)]
mod stamp_tests {
    use super::stamp_ns;

    #[test]
    fn stamps_far_past_f64_integers_keep_exact_differences() {
        // NVIDIA-sized absolute stamps: as f64 directly, 3 ns apart would round to the same value
        let (origin, start) = ((1u64 << 60) + 5, (1u64 << 60) + 1_000_001);
        let end = start + 3;
        assert_eq!((end as f64 - start as f64), 0.0, "control: absolute stamps lose the difference");
        assert_eq!(stamp_ns(end, origin, 1.0) - stamp_ns(start, origin, 1.0), 3.0);
        assert_eq!(stamp_ns(origin - 10, origin, 1.0), -10.0);
    }
}
