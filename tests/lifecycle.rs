//! Leasing, captures, profiles, handle churn and error codes.

mod common;

use common::*;
use helios::error::ErrorCode;
use helios::runtime::context::Runtime;
use helios::runtime::global;

fn err_code<T: std::fmt::Debug>(f: impl FnOnce(&mut Runtime) -> helios::error::HeliosResult<T>) -> ErrorCode {
    global::with(f).expect_err("expected an error").code
}

#[test]
fn leasing_stress_with_batches_in_flight() {
    let _s = session();
    let inc = inc_pipeline();
    let mut seed = 99u64;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seed >> 33
    };
    // Each live lease holds a distinct value; reuse before completion would corrupt a checksum.
    let mut live: Vec<(f64, u32, u32)> = Vec::new();
    for step in 0..2000u32 {
        let words = 16 + (next() % 512) as u32;
        rt(|rt| {
            let h = rt.lease_buffer(words as f64 * 4.0)?;
            rt.fill(h, step, 0.0, Some(words as f64 * 4.0))?;
            rt.begin_batch(false, false)?;
            rt.record_dispatch(inc, &[h], groups(words), &words.to_le_bytes())?;
            rt.submit_batch()?;
            live.push((h, words, step + 1));
            Ok(())
        });
        if live.len() > 8 || next() % 3 == 0 {
            let (h, words, want) = live.remove((next() % live.len() as u64) as usize);
            if next() % 4 == 0 {
                let got = to_u32(&rt(|rt| rt.read(h, None, Some(words as f64 * 4.0))));
                assert!(got.iter().all(|&v| v == want), "lease {h} corrupted at step {step}");
            }
            rt(|rt| rt.release_buffer(h));
        }
    }
    for (h, words, want) in live.drain(..) {
        let got = to_u32(&rt(|rt| rt.read(h, None, Some(words as f64 * 4.0))));
        assert!(got.iter().all(|&v| v == want));
        rt(|rt| rt.release_buffer(h));
    }
    let stats = rt(|rt| Ok(rt.pool_stats()));
    assert_eq!(stats.leased_bytes, 0);
    assert!(stats.reuses > 0 && stats.allocations < 2000, "{stats:?}");
    rt(|rt| rt.trim_pool());
    assert_eq!(rt(|rt| Ok(rt.pool_stats())).free_bytes, 0);
}

#[test]
fn released_buffer_is_not_reused_before_its_batch_completes_without_inbatch_reuse() {
    // The kill switch restores the old rule (tests/reuse.rs covers the default).
    let _s = session_with(&[("HELIOS_INBATCH_REUSE", "0")]);
    let inc = inc_pipeline();
    let (first, second) = rt(|rt| {
        let h = rt.lease_buffer(4096.0)?;
        rt.begin_batch(false, false)?;
        rt.record_dispatch(inc, &[h], groups(1024), &1024u32.to_le_bytes())?;
        rt.release_buffer(h)?;
        // Still in the open batch: a new lease must not get it.
        let h2 = rt.lease_buffer(4096.0)?;
        rt.submit_batch()?;
        Ok((h, h2))
    });
    assert_ne!(first, second);
    assert_eq!(rt(|rt| Ok(rt.pool_stats())).allocations, 2);
    assert_eq!(err_code(|rt| rt.release_buffer(first)), ErrorCode::InvalidHandle);
}

#[test]
fn captured_batch_replays_with_new_inputs() {
    let _s = session();
    let n = 256u32;
    let p = axpb_pipeline();
    let (x, y) = rt(|rt| Ok((rt.create_buffer(1024.0, false)?, rt.create_buffer(1024.0, false)?)));
    let graph = rt(|rt| {
        rt.begin_batch(false, false)?;
        rt.record_dispatch(p, &[x, y], groups(n), &axpb_push(n, -2.0, 0.25))?;
        rt.capture_batch()
    });
    // The pipeline handle may go away; the capture keeps the pipeline alive.
    rt(|rt| rt.destroy_pipeline(p));
    for seed in 0..5 {
        let input = random_f32(n as usize, 10 + seed);
        rt(|rt| rt.upload(x, &f32_bytes(&input), 0.0));
        rt(|rt| rt.replay_batch(graph).map(|_| ()));
        let want: Vec<f32> = input.iter().map(|v| -2.0 * v + 0.25).collect();
        assert_close(&to_f32(&rt(|rt| rt.read(y, None, None))), &want);
    }
    // Destroying a pinned buffer defers the free until the capture is gone.
    rt(|rt| rt.destroy_buffer(x));
    let last = rt(|rt| rt.replay_batch(graph));
    rt(|rt| rt.destroy_capture(graph));
    rt(|rt| rt.wait_compute(last, u64::MAX));
    assert_eq!(err_code(|rt| rt.replay_batch(graph)), ErrorCode::InvalidHandle);
    rt(|rt| rt.maintain());
    assert_eq!(rt(|rt| Ok(rt.res.live())), 1, "only y is left");
}

#[test]
fn profile_reports_each_dispatch() {
    let _s = session();
    let n = 4096u32;
    let p = axpb_pipeline();
    let inc = inc_pipeline();
    let (a, b) = rt(|rt| Ok((rt.create_buffer(16384.0, false)?, rt.create_buffer(16384.0, false)?)));
    let value = rt(|rt| {
        rt.begin_batch(true, false)?;
        rt.record_dispatch(p, &[a, b], groups(n), &axpb_push(n, 1.0, 0.0))?;
        rt.record_dispatch(inc, &[a], groups(n), &n.to_le_bytes())?;
        rt.record_dispatch(p, &[a, b], groups(n), &axpb_push(n, 1.0, 0.0))?;
        rt.submit_batch()
    });
    let profile = rt(|rt| rt.batch_profile(value));
    let labels: Vec<&str> = profile.iter().map(|d| &*d.label).collect();
    assert_eq!(labels, ["axpb", "inc", "axpb"]);
    assert!(profile.iter().all(|d| d.gpu_ns >= 0.0 && d.gpu_ns.is_finite()));
    // Dependent dispatches: start stamps in order on one clock, each end = start + duration.
    for w in profile.windows(2) {
        assert!(w[1].start_ns >= w[0].start_ns, "start stamps in order");
    }
    assert!(profile.iter().all(|d| (d.end_ns - d.start_ns - d.gpu_ns).abs() < 1.0));
    assert_eq!(rt(|rt| rt.batch_profile(value)), profile, "asking again returns the same figures");
    assert_eq!(err_code(|rt| rt.batch_profile(value + 100)), ErrorCode::InvalidArgument);
}

#[test]
fn create_destroy_churn_holds_steady() {
    let _s = session();
    let inc = inc_pipeline();
    for i in 0..100_000u32 {
        rt(|rt| {
            let h = rt.create_buffer(256.0 + (i % 7) as f64 * 4.0, false)?;
            if i % 5000 == 0 {
                rt.begin_batch(false, false)?;
                rt.record_dispatch(inc, &[h], [1, 1, 1], &4u32.to_le_bytes())?;
                rt.submit_batch()?;
            }
            rt.destroy_buffer(h)
        });
    }
    rt(|rt| {
        rt.maintain()?;
        assert_eq!(rt.res.live(), 0);
        assert_eq!(rt.buffers.len(), 0);
        Ok(())
    });
}

#[test]
fn errors_leave_the_batch_usable() {
    let _s = session();
    let n = 64u32;
    let p = axpb_pipeline();
    let (a, b) = rt(|rt| Ok((rt.create_buffer(256.0, false)?, rt.create_buffer(256.0, false)?)));
    rt(|rt| rt.upload(a, &f32_bytes(&random_f32(64, 5)), 0.0));
    assert_eq!(err_code(|rt| rt.record_dispatch(p, &[a, b], groups(n), &axpb_push(n, 1.0, 0.0))), ErrorCode::InvalidArgument);
    assert_eq!(err_code(|rt| rt.submit_batch()), ErrorCode::InvalidArgument);
    rt(|rt| rt.begin_batch(false, false));
    assert_eq!(err_code(|rt| rt.begin_batch(false, false)), ErrorCode::InvalidArgument);
    assert_eq!(err_code(|rt| rt.record_dispatch(p, &[a], groups(n), &axpb_push(n, 1.0, 0.0))), ErrorCode::InvalidArgument);
    assert_eq!(err_code(|rt| rt.record_dispatch(p, &[a, b], groups(n), &[0; 8])), ErrorCode::InvalidArgument);
    assert_eq!(err_code(|rt| rt.record_dispatch(p, &[a, b], [1 << 30, 1, 1], &axpb_push(n, 1.0, 0.0))), ErrorCode::OutOfRange);
    assert_eq!(err_code(|rt| rt.record_dispatch(a, &[a, b], groups(n), &axpb_push(n, 1.0, 0.0))), ErrorCode::InvalidHandle);
    assert_eq!(err_code(|rt| rt.record_dispatch(p, &[a, p], groups(n), &axpb_push(n, 1.0, 0.0))), ErrorCode::InvalidHandle);
    assert_eq!(err_code(|rt| rt.upload(a, &[0; 8], 252.0)), ErrorCode::OutOfRange);
    assert_eq!(err_code(|rt| rt.read(a, Some(-1.0), None)), ErrorCode::InvalidArgument);
    assert_eq!(err_code(|rt| rt.fill(a, 1, 2.0, Some(4.0))), ErrorCode::InvalidArgument);
    assert_eq!(err_code(|rt| rt.copy(a, a, 0.0, 8.0, 16.0)), ErrorCode::InvalidArgument);
    assert_eq!(err_code(|rt| rt.create_buffer(0.0, false)), ErrorCode::InvalidArgument);
    assert_eq!(err_code(|rt| rt.create_buffer(1e18, false)), ErrorCode::OutOfRange);
    assert_eq!(err_code(|rt| rt.wait_compute(1_000_000, 0)), ErrorCode::OutOfRange);
    assert_eq!(err_code(|rt| rt.destroy_capture(p)), ErrorCode::InvalidHandle);
    // After all that, the batch still records and runs correctly.
    rt(|rt| {
        rt.record_dispatch(p, &[a, b], groups(n), &axpb_push(n, 3.0, 0.0))?;
        rt.submit_batch()
    });
    let a_data = to_f32(&rt(|rt| rt.read(a, None, None)));
    let want: Vec<f32> = a_data.iter().map(|v| 3.0 * v).collect();
    assert_close(&to_f32(&rt(|rt| rt.read(b, None, None))), &want);
    let bad = helios::caps::PipelineLayoutDesc {
        bindings: vec![],
        push_constant_bytes: 0,
        entry_point: "main".into(),
        label: "garbage".into(),
        specialization: vec![],
        required_subgroup_size: None,
    };
    assert_eq!(helios::runtime::create_pipeline(&[1, 2, 3], &bad).expect_err("not SPIR-V").code, ErrorCode::InvalidArgument);
}

#[test]
fn timeline_waits_and_timeouts() {
    let _s = session();
    let inc = inc_pipeline();
    let h = rt(|rt| rt.create_buffer((1u32 << 20) as f64, false));
    let v = rt(|rt| {
        rt.begin_batch(false, false)?;
        for _ in 0..50 {
            rt.record_dispatch(inc, &[h], groups(1 << 18), &(1u32 << 18).to_le_bytes())?;
        }
        rt.submit_batch()
    });
    // Zero timeout either succeeds (already done) or reports a timeout, never blocks.
    let _ = rt(|rt| rt.wait_compute(v, 0));
    assert!(rt(|rt| rt.wait_compute(v, u64::MAX)));
    assert!(rt(|rt| rt.completed()).compute >= v);
}

#[test]
fn pipeline_statistics_need_the_extension() {
    let _s = session_with(&[("HELIOS_PIPELINE_STATS", "1")]);
    let p = inc_pipeline();
    let has_ext = rt(|rt| Ok(rt.dev.exec_props.is_some()));
    match helios::runtime::global::pipeline_statistics(p) {
        Ok(stats) => assert!(has_ext && !stats.is_empty()),
        Err(e) => assert!(!has_ext && e.code == ErrorCode::InvalidArgument, "{e}"),
    }
    let bogus = helios::runtime::global::pipeline_statistics(12345.0).expect_err("not a handle");
    assert_eq!(bogus.code, ErrorCode::InvalidHandle);
}
