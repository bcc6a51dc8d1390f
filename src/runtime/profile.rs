//! GPU timestamps around each dispatch of a `profile: true` batch, read back by
//! `batchProfile(value)` once the batch completed.

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
}

impl ProfileBuilder {
    /// Writes the start timestamp of the next dispatch (opening a pool when needed).
    pub fn before(&mut self, dev: &Device, cmd: vk::CommandBuffer, label: &Arc<str>) -> HeliosResult<()> {
        if self.used % QUERIES_PER_POOL == 0 {
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
                    self.compute.keep_until(oldest, Keep { queries: rec.pools, ..Keep::default() });
                }
            }
        }
        self.profiles.insert(value, ProfileRecord { pools: p.pools, labels: p.labels });
    }

    /// Waits for `value`, then returns (label, GPU ns) per dispatch and frees the queries.
    pub fn batch_profile(&mut self, value: u64) -> HeliosResult<Vec<(Arc<str>, f64)>> {
        if !self.profiles.contains_key(&value) {
            return Err(HeliosError::invalid_argument(format!(
                "no profile for timeline value {value} (begin the batch with {{profile: true}}; each profile is returned once)"
            )));
        }
        self.wait_compute(value, u64::MAX)?;
        let Some(rec) = self.profiles.remove(&value) else { return Ok(Vec::new()) };
        let period = self.dev.adapter.info.timestamp_period_ns;
        let bits = self.dev.adapter.timestamp_valid_bits;
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let mut stamps = Vec::with_capacity(rec.labels.len() * 2);
        let mut result = Ok(());
        for &pool in &rec.pools {
            let remaining = (rec.labels.len() * 2 - stamps.len()).min(QUERIES_PER_POOL as usize) as u32;
            match command::query_results(&self.dev, pool, remaining) {
                Ok(mut v) => stamps.append(&mut v),
                Err(e) => result = Err(e),
            }
            command::destroy_query_pool(&self.dev, pool);
        }
        result?;
        Ok(rec
            .labels
            .iter()
            .enumerate()
            .map(|(i, label)| {
                let (start, end) = (stamps[2 * i] & mask, stamps[2 * i + 1] & mask);
                let ticks = end.wrapping_sub(start) & mask;
                (label.clone(), if bits == 0 { 0.0 } else { ticks as f64 * period })
            })
            .collect())
    }
}

impl ProfileBuilder {
    /// The query pools, for a captured batch that keeps them (replays are not profiled).
    pub fn into_pools(self) -> Vec<vk::QueryPool> {
        self.pools
    }
}
