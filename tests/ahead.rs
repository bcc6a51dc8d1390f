//! Buffers allocated ahead (`runtime::ahead`) count against the dedicated-allocation cap
//! (`Device::dedicated_live`, half of maxMemoryAllocationCount) from the moment they exist, and
//! every one is freed: leased, released and trimmed, or freed as an unused spare.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;

const BYTES: f64 = (8 << 20) as f64;

fn live() -> u32 {
    rt(|rt| Ok(rt.dev.dedicated_live.load(Ordering::Relaxed)))
}

#[test]
fn spares_count_as_dedicated_allocations_until_freed() {
    let _s = session();
    assert_eq!(live(), 0);
    let leases: Vec<f64> = (0..10)
        .map(|_| {
            let h = rt(|rt| rt.lease_buffer(BYTES));
            // The thread gets time to make spares between leases, as a recording loop gives it.
            std::thread::sleep(Duration::from_millis(2));
            h
        })
        .collect();
    let stats = rt(|rt| Ok(rt.pool_stats()));
    assert!(stats.allocated_ahead > 0, "{stats:?}");
    let spares = (stats.ahead_bytes / BYTES as u64) as u32;
    // A spare being made right now counts before it shows in `ahead_bytes`.
    let now = live();
    assert!(now == 10 + spares || now == 11 + spares, "{now} live, 10 leases and {spares} spares");
    for h in leases {
        rt(|rt| rt.release_buffer(h));
    }
    rt(|rt| rt.trim_pool());
    // Whatever was being made at the trim lands as a spare: trim once more after it did.
    std::thread::sleep(Duration::from_millis(50));
    rt(|rt| rt.trim_pool());
    assert_eq!(live(), 0, "every dedicated allocation was freed");
    assert_eq!(rt(|rt| Ok(rt.pool_stats())).ahead_bytes, 0);
}
