//! Dispatch correctness, barriers (1000-dispatch chains), program order, fills and copies.

mod common;

use common::*;
use helios::error::ErrorCode;

#[test]
fn axpb_matches_cpu_reference() {
    let _s = session();
    let n = 1000u32;
    let x = random_f32(n as usize, 1);
    let p = axpb_pipeline();
    let (src, dst) = rt(|rt| Ok((rt.create_buffer(4000.0, false)?, rt.create_buffer(4000.0, false)?)));
    rt(|rt| {
        rt.upload(src, &f32_bytes(&x), 0.0)?;
        rt.begin_batch(false, false)?;
        rt.record_dispatch(p, &[src, dst], groups(n), &axpb_push(n, 2.5, -0.5))?;
        let v = rt.submit_batch()?;
        assert!(rt.wait_compute(v, u64::MAX)?);
        Ok(())
    });
    let want: Vec<f32> = x.iter().map(|v| 2.5 * v - 0.5).collect();
    assert_close(&to_f32(&rt(|rt| rt.read(dst, None, None))), &want);
}

#[test]
fn chain_of_1000_dependent_dispatches() {
    let _s = session();
    let n = 256u32;
    let inc = inc_pipeline();
    let p = axpb_pipeline();
    let start: Vec<u32> = (0..n).map(|i| i * 7).collect();
    let x = random_f32(n as usize, 2);
    let (data, a, b) = rt(|rt| Ok((rt.create_buffer(1024.0, false)?, rt.create_buffer(1024.0, false)?, rt.create_buffer(1024.0, false)?)));
    rt(|rt| {
        rt.upload(data, &u32_bytes(&start), 0.0)?;
        rt.upload(a, &f32_bytes(&x), 0.0)?;
        rt.begin_batch(false, false)?;
        for _ in 0..1000 {
            rt.record_dispatch(inc, &[data], groups(n), &n.to_le_bytes())?;
        }
        // Ping-pong a -> b -> a: read-after-write and write-after-read every step.
        for i in 0..200 {
            let (s, d) = if i % 2 == 0 { (a, b) } else { (b, a) };
            rt.record_dispatch(p, &[s, d], groups(n), &axpb_push(n, 1.0, 1.0))?;
        }
        rt.submit_batch()?;
        Ok(())
    });
    let got = to_u32(&rt(|rt| rt.read(data, None, None)));
    let want: Vec<u32> = start.iter().map(|v| v + 1000).collect();
    assert_eq!(got, want);
    let want_a: Vec<f32> = x.iter().map(|v| v + 200.0).collect();
    assert_close(&to_f32(&rt(|rt| rt.read(a, None, None))), &want_a);
}

#[test]
fn uploads_and_reads_follow_program_order() {
    let _s = session();
    let n = 128u32;
    let p = axpb_pipeline();
    let x1 = random_f32(n as usize, 3);
    let x2 = random_f32(n as usize, 4);
    let (x, y, z) = rt(|rt| Ok((rt.create_buffer(512.0, false)?, rt.create_buffer(512.0, false)?, rt.create_buffer(512.0, false)?)));
    rt(|rt| {
        rt.upload(x, &f32_bytes(&x1), 0.0)?;
        rt.begin_batch(false, false)?;
        rt.record_dispatch(p, &[x, y], groups(n), &axpb_push(n, 1.0, 0.0))?;
        // x is used by the open batch: this upload is recorded into it, after the dispatch.
        rt.upload(x, &f32_bytes(&x2), 0.0)?;
        rt.record_dispatch(p, &[x, z], groups(n), &axpb_push(n, 1.0, 0.0))?;
        Ok(())
    });
    // Reading y while the batch is open submits what was recorded and sees the first upload.
    assert_close(&to_f32(&rt(|rt| rt.read(y, None, None))), &x1);
    let err = global_err(|rt| rt.capture_batch().map(|_| ()));
    assert_eq!(err, ErrorCode::InvalidArgument, "a split batch cannot be captured");
    rt(|rt| rt.submit_batch().map(|_| ()));
    assert_close(&to_f32(&rt(|rt| rt.read(z, None, None))), &x2);
    // Partial ranges.
    let part = to_f32(&rt(|rt| rt.read(z, Some(16.0), Some(32.0))));
    assert_close(&part, &x2[4..12]);
}

fn global_err(f: impl FnOnce(&mut helios::runtime::context::Runtime) -> helios::error::HeliosResult<()>) -> ErrorCode {
    helios::runtime::global::with(f).expect_err("expected an error").code
}

#[test]
fn fill_and_copy_in_program_order() {
    let _s = session();
    let (a, b) = rt(|rt| Ok((rt.create_buffer(256.0, false)?, rt.create_buffer(256.0, false)?)));
    rt(|rt| {
        rt.fill(a, 0xdead_beef, 0.0, None)?;
        rt.begin_batch(false, false)?;
        rt.copy(a, b, 0.0, 64.0, 128.0)?;
        rt.fill(a, 7, 0.0, Some(64.0))?;
        rt.submit_batch()?;
        Ok(())
    });
    let a_got = to_u32(&rt(|rt| rt.read(a, None, None)));
    assert!(a_got[..16].iter().all(|&v| v == 7) && a_got[16..].iter().all(|&v| v == 0xdead_beef));
    let b_got = to_u32(&rt(|rt| rt.read(b, Some(64.0), Some(128.0))));
    assert!(b_got.iter().all(|&v| v == 0xdead_beef));
}

#[test]
fn many_batches_in_flight_and_out_of_order_waits() {
    let _s = session();
    let n = 64u32;
    let inc = inc_pipeline();
    let bufs: Vec<f64> = (0..8).map(|_| rt(|rt| rt.create_buffer(256.0, false))).collect();
    let mut values = Vec::new();
    for (i, &b) in bufs.iter().enumerate() {
        rt(|rt| {
            rt.fill(b, i as u32, 0.0, None)?;
            rt.begin_batch(false, false)?;
            for _ in 0..=i {
                rt.record_dispatch(inc, &[b], groups(n), &n.to_le_bytes())?;
            }
            values.push(rt.submit_batch()?);
            Ok(())
        });
    }
    for (i, &b) in bufs.iter().enumerate().rev() {
        let got = to_u32(&rt(|rt| rt.read(b, None, None)));
        assert!(got.iter().all(|&v| v == 2 * i as u32 + 1), "buffer {i}: {:?}", &got[..4]);
    }
    let last = *values.last().unwrap_or(&0);
    assert!(rt(|rt| rt.wait_compute(last, 0)));
}

#[test]
fn device_info_and_lifecycle() {
    let _s = session();
    let (info, caps, flags) = helios::runtime::global::info().expect("info");
    assert!(flags.validation, "tests run with validation on");
    assert!(info.api_version.starts_with("1.3"), "{}", info.api_version);
    assert!(!info.device_name.is_empty() && !info.driver_name.is_empty());
    assert_eq!(info.device_uuid.len(), 32);
    assert!(caps.subgroup_size > 0 && caps.max_workgroup_invocations >= 128);
    assert!(caps.max_shared_memory_bytes >= 16384);
    let again = helios::runtime::global::init(&Default::default()).expect("idempotent init");
    assert_eq!(again.0.device_uuid, info.device_uuid);
    assert_eq!(helios::runtime::device_caps().expect("caps"), caps);
    helios::runtime::global::destroy();
    helios::runtime::global::destroy();
    let err = helios::runtime::device_caps().expect_err("destroyed");
    assert_eq!(err.code, ErrorCode::Destroyed);
    helios::runtime::global::init(&helios::runtime::context::InitOptions { device: None, validation: Some(true), shareable: false, ..Default::default() })
        .expect("re-init after destroy");
}

#[test]
fn no_matching_device_is_no_device() {
    let _s = session();
    let name = helios::runtime::global::info().expect("info").0.device_name;
    helios::runtime::global::destroy();
    let opts = helios::runtime::context::InitOptions { device: Some("no-such-gpu".into()), validation: Some(false), shareable: false, ..Default::default() };
    let err = helios::runtime::global::init(&opts).expect_err("no device matches");
    assert_eq!(err.code, ErrorCode::NoDevice);
    assert!(err.message.contains("no-such-gpu") && err.message.contains("found"), "{}", err.message);
    let err = helios::runtime::device_caps().expect_err("still no device");
    assert_eq!(err.code, ErrorCode::Destroyed);
    // Selecting by a (case-insensitive) name substring works.
    let pick = name.to_uppercase()[..4].to_string();
    let again = helios::runtime::global::init(&helios::runtime::context::InitOptions { device: Some(pick), validation: Some(true), shareable: false, ..Default::default() });
    assert_eq!(again.expect("init by name").0.device_name, name);
}
