//! In-batch reuse: a buffer released while GPU work that used it is still pending (recorded in
//! the open batch, or submitted) is leased again inside the open batch, and every access of
//! the new holder stays ordered after the old holder's (checked against host references with
//! synchronization validation on: a missing barrier is a validation message, failing the test).

mod common;

use common::*;

const N: u32 = 2048;
const BYTES: f64 = (N * 4) as f64;

fn axpb(x: &[f32], a: f32, b: f32) -> Vec<f32> {
    x.iter().map(|v| a * v + b).collect()
}

fn stats() -> helios::runtime::pool::PoolStats {
    rt(|rt| Ok(rt.pool_stats()))
}

/// t = 2x + 1 in a lease; out1 = 3t (the last read of t); t is released; the next lease of the
/// same size gets t's buffer and writes -x + 0.5 into it (write-after-read on out1's read);
/// out2 = 1 * that. Returns the lease handles (old, new).
fn record_chain(p: f64, x: f64, out1: f64, out2: f64) -> (f64, f64) {
    rt(|rt| {
        let t = rt.lease_buffer(BYTES)?;
        rt.record_dispatch(p, &[x, t], groups(N), &axpb_push(N, 2.0, 1.0))?;
        rt.record_dispatch(p, &[t, out1], groups(N), &axpb_push(N, 3.0, 0.0))?;
        rt.release_buffer(t)?;
        let u = rt.lease_buffer(BYTES)?;
        rt.record_dispatch(p, &[x, u], groups(N), &axpb_push(N, -1.0, 0.5))?;
        rt.record_dispatch(p, &[u, out2], groups(N), &axpb_push(N, 1.0, 0.0))?;
        rt.release_buffer(u)?;
        Ok((t, u))
    })
}

fn want_chain(x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    (axpb(&axpb(x, 2.0, 1.0), 3.0, 0.0), axpb(x, -1.0, 0.5))
}

#[test]
fn released_buffer_is_reused_in_the_open_batch_in_program_order() {
    let _s = session();
    let p = axpb_pipeline();
    let input = random_f32(N as usize, 1);
    let [x, out1, out2] = [0; 3].map(|_| rt(|rt| rt.create_buffer(BYTES, false)));
    rt(|rt| rt.upload(x, &f32_bytes(&input), 0.0));
    let before = stats();
    rt(|rt| rt.begin_batch(false, false));
    record_chain(p, x, out1, out2);
    rt(|rt| rt.submit_batch());
    let after = stats();
    assert_eq!(after.allocations - before.allocations, 1, "the second lease must reuse the first's buffer: {after:?}");
    assert_eq!(after.in_batch_reuses - before.in_batch_reuses, 1, "{after:?}");
    let (w1, w2) = want_chain(&input);
    assert_close(&to_f32(&rt(|rt| rt.read(out1, None, None))), &w1);
    assert_close(&to_f32(&rt(|rt| rt.read(out2, None, None))), &w2);
}

#[test]
fn kill_switch_turns_inbatch_reuse_off() {
    let _s = session_with(&[("HELIOS_INBATCH_REUSE", "0")]);
    let p = axpb_pipeline();
    let [x, out1, out2] = [0; 3].map(|_| rt(|rt| rt.create_buffer(BYTES, false)));
    rt(|rt| rt.begin_batch(false, false));
    record_chain(p, x, out1, out2);
    rt(|rt| rt.submit_batch());
    let s = stats();
    assert_eq!((s.allocations, s.in_batch_reuses), (2, 0), "{s:?}");
}

#[test]
fn upload_fill_and_copy_into_a_reused_buffer_stay_in_program_order() {
    let _s = session();
    let p = axpb_pipeline();
    let input = random_f32(N as usize, 2);
    let data = random_f32(N as usize, 3);
    let [x, out1, out2, out3] = [0; 4].map(|_| rt(|rt| rt.create_buffer(BYTES, false)));
    rt(|rt| rt.upload(x, &f32_bytes(&input), 0.0));
    rt(|rt| {
        rt.begin_batch(false, false)?;
        let t = rt.lease_buffer(BYTES)?;
        rt.record_dispatch(p, &[x, t], groups(N), &axpb_push(N, 2.0, 1.0))?;
        rt.record_dispatch(p, &[t, out1], groups(N), &axpb_push(N, 3.0, 0.0))?;
        rt.release_buffer(t)?;
        // An upload into the reused buffer must land after out1's read of the old contents.
        let u = rt.lease_buffer(BYTES)?;
        rt.upload(u, &f32_bytes(&data), 0.0)?;
        rt.record_dispatch(p, &[u, out2], groups(N), &axpb_push(N, 1.0, -0.25))?;
        rt.release_buffer(u)?;
        // A fill and a copy into it, again after the last read.
        let v = rt.lease_buffer(BYTES)?;
        rt.fill(v, 1.5f32.to_bits(), 0.0, None)?;
        rt.copy(x, v, 0.0, 0.0, BYTES / 2.0)?;
        rt.record_dispatch(p, &[v, out3], groups(N), &axpb_push(N, 2.0, 0.0))?;
        rt.release_buffer(v)?;
        rt.submit_batch()
    });
    let s = stats();
    assert_eq!((s.allocations, s.in_batch_reuses), (1, 2), "{s:?}");
    let half = N as usize / 2;
    let w3: Vec<f32> = (0..N as usize).map(|i| 2.0 * if i < half { input[i] } else { 1.5 }).collect();
    assert_close(&to_f32(&rt(|rt| rt.read(out1, None, None))), &axpb(&axpb(&input, 2.0, 1.0), 3.0, 0.0));
    assert_close(&to_f32(&rt(|rt| rt.read(out2, None, None))), &axpb(&data, 1.0, -0.25));
    assert_close(&to_f32(&rt(|rt| rt.read(out3, None, None))), &w3);
}

#[test]
fn buffer_used_by_a_submitted_batch_is_reused_by_the_next_one() {
    let _s = session();
    let p = axpb_pipeline();
    let inc = inc_pipeline();
    let input = random_f32(N as usize, 4);
    let data: Vec<u32> = (0..N).map(|i| i * 7 + 3).collect();
    let [x, out1, out2] = [0; 3].map(|_| rt(|rt| rt.create_buffer(BYTES, false)));
    rt(|rt| rt.upload(x, &f32_bytes(&input), 0.0));
    for round in 0..20 {
        let first = rt(|rt| {
            rt.begin_batch(false, false)?;
            let t = rt.lease_buffer(BYTES)?;
            rt.record_dispatch(p, &[x, t], groups(N), &axpb_push(N, 2.0, 1.0))?;
            // Many reads of t keep the batch busy while the next one is recorded.
            for _ in 0..8 {
                rt.record_dispatch(p, &[t, out1], groups(N), &axpb_push(N, 3.0, 0.0))?;
            }
            let v = rt.submit_batch()?;
            rt.release_buffer(t)?;
            Ok(v)
        });
        rt(|rt| {
            rt.begin_batch(false, false)?;
            let u = rt.lease_buffer(BYTES)?;
            // Not used by this batch yet: the upload waits for the previous batch (ring or memcpy).
            rt.upload(u, &u32_bytes(&data), 0.0)?;
            rt.record_dispatch(inc, &[u], groups(N), &N.to_le_bytes())?;
            rt.copy(u, out2, 0.0, 0.0, BYTES)?;
            rt.release_buffer(u)?;
            rt.submit_batch()
        });
        assert!(first > 0);
        let w1 = axpb(&axpb(&input, 2.0, 1.0), 3.0, 0.0);
        assert_close(&to_f32(&rt(|rt| rt.read(out1, None, None))), &w1);
        let got = to_u32(&rt(|rt| rt.read(out2, None, None)));
        assert!(got.iter().zip(&data).all(|(g, d)| *g == d + 1), "round {round}: out2 corrupted");
    }
    assert_eq!(stats().allocations, 1, "{:?}", stats());
}

#[test]
fn capture_reuses_inside_itself_and_pins_what_it_reused() {
    let _s = session();
    let p = axpb_pipeline();
    let [x, out1, out2] = [0; 3].map(|_| rt(|rt| rt.create_buffer(BYTES, false)));
    rt(|rt| rt.begin_batch(false, false));
    record_chain(p, x, out1, out2);
    let graph = rt(|rt| rt.capture_batch());
    let s = stats();
    assert_eq!((s.allocations, s.in_batch_reuses), (1, 1), "{s:?}");
    // The reused buffer is pinned by the capture: other work must not get it.
    let other = rt(|rt| {
        rt.begin_batch(false, false)?;
        let h = rt.lease_buffer(BYTES)?;
        rt.fill(h, 0, 0.0, None)?;
        rt.submit_batch()?;
        Ok(h)
    });
    assert_eq!(stats().allocations, 2, "a pinned buffer was handed to other work");
    for seed in 0..5 {
        let input = random_f32(N as usize, 10 + seed);
        rt(|rt| rt.upload(x, &f32_bytes(&input), 0.0));
        // Replays back to back: replay k+1's first write of the reused buffer follows replay k's reads.
        rt(|rt| rt.replay_batch(graph).map(|_| ()));
        rt(|rt| rt.replay_batch(graph).map(|_| ()));
        let (w1, w2) = want_chain(&input);
        assert_close(&to_f32(&rt(|rt| rt.read(out1, None, None))), &w1);
        assert_close(&to_f32(&rt(|rt| rt.read(out2, None, None))), &w2);
    }
    assert_eq!(stats().allocations, 2, "replays must not allocate");
    rt(|rt| rt.release_buffer(other));
    let last = rt(|rt| rt.replay_batch(graph));
    rt(|rt| rt.destroy_capture(graph));
    rt(|rt| rt.wait_compute(last, u64::MAX));
    // Unpinned and complete: both pooled buffers are reusable again.
    let (a, b) = rt(|rt| Ok((rt.lease_buffer(BYTES)?, rt.lease_buffer(BYTES)?)));
    assert_eq!(stats().allocations, 2);
    rt(|rt| rt.release_buffer(a));
    rt(|rt| rt.release_buffer(b));
}

#[test]
fn buffer_read_before_written_in_a_batch_is_not_reused_by_it() {
    // k holds data written by the host while the batch is open (not a command of the batch):
    // if a later command of the captured batch overwrote it, every replay after the first
    // would read the overwritten values.
    let _s = session();
    let p = axpb_pipeline();
    let konst = random_f32(N as usize, 6);
    let [x, out1, out2] = [0; 3].map(|_| rt(|rt| rt.create_buffer(BYTES, false)));
    let graph = rt(|rt| {
        rt.begin_batch(false, false)?;
        let k = rt.lease_buffer(BYTES)?;
        rt.upload(k, &f32_bytes(&konst), 0.0)?;
        rt.record_dispatch(p, &[k, out1], groups(N), &axpb_push(N, 2.0, 0.0))?;
        rt.release_buffer(k)?;
        let u = rt.lease_buffer(BYTES)?;
        rt.record_dispatch(p, &[x, u], groups(N), &axpb_push(N, -1.0, 0.5))?;
        rt.record_dispatch(p, &[u, out2], groups(N), &axpb_push(N, 1.0, 0.0))?;
        rt.release_buffer(u)?;
        rt.capture_batch()
    });
    let s = stats();
    assert_eq!((s.allocations, s.in_batch_reuses), (2, 0), "{s:?}");
    for seed in 0..3 {
        let input = random_f32(N as usize, 20 + seed);
        rt(|rt| rt.upload(x, &f32_bytes(&input), 0.0));
        rt(|rt| rt.replay_batch(graph).map(|_| ()));
        assert_close(&to_f32(&rt(|rt| rt.read(out1, None, None))), &axpb(&konst, 2.0, 0.0));
        assert_close(&to_f32(&rt(|rt| rt.read(out2, None, None))), &axpb(&input, -1.0, 0.5));
    }
    rt(|rt| rt.destroy_capture(graph));
}
