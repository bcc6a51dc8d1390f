//! Transfer paths: the staging ring (forced on this UMA device), chunking, asynchronous
//! snapshots, the descriptor-pool fallback, specialization and the pipeline-cache file.

mod common;

use common::*;
use helios::caps::{Access, PipelineLayoutDesc};
use helios::runtime::readback::ReadTicket;
use helios::vk::sync;

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    f32_bytes(&random_f32(len.div_ceil(4), seed))[..len].to_vec()
}

#[test]
fn staging_ring_round_trips_in_chunks() {
    let _s = session_with(&[("HELIOS_FORCE_STAGING", "1"), ("HELIOS_STAGING_MIB", "4")]);
    let len = 10 * (1 << 20) + 12;
    let data = random_bytes(len, 21);
    let h = rt(|rt| rt.create_buffer(len as f64, false));
    assert!(!rt(|rt| Ok(rt.buffer(h)?.1.direct)), "forced through staging");
    rt(|rt| rt.upload(h, &data, 0.0));
    assert_eq!(rt(|rt| rt.read(h, None, None)), data);
    // Unaligned partial ranges.
    let patch = random_bytes(3 * (1 << 20) + 5, 22);
    rt(|rt| rt.upload(h, &patch, 1_000_001.0));
    let mut want = data.clone();
    want[1_000_001..1_000_001 + patch.len()].copy_from_slice(&patch);
    assert_eq!(rt(|rt| rt.read(h, Some(999_999.0), Some(4_000_000.0))), want[999_999..4_999_999]);
}

#[test]
fn staged_uploads_keep_program_order_with_dispatches() {
    let _s = session_with(&[("HELIOS_FORCE_STAGING", "1")]);
    let n = 512u32;
    let p = axpb_pipeline();
    let (x, y, z) = rt(|rt| Ok((rt.create_buffer(2048.0, false)?, rt.create_buffer(2048.0, false)?, rt.create_buffer(2048.0, false)?)));
    let v1 = random_f32(n as usize, 31);
    let v2 = random_f32(n as usize, 32);
    rt(|rt| {
        rt.upload(x, &f32_bytes(&v1), 0.0)?;
        rt.begin_batch(false, false)?;
        rt.record_dispatch(p, &[x, y], groups(n), &axpb_push(n, 1.0, 0.0))?;
        rt.submit_batch()?;
        // x's last use is in flight: this upload waits for it on the GPU, not on the host.
        rt.upload(x, &f32_bytes(&v2), 0.0)?;
        rt.begin_batch(false, false)?;
        rt.record_dispatch(p, &[x, z], groups(n), &axpb_push(n, 1.0, 0.0))?;
        rt.submit_batch()?;
        Ok(())
    });
    assert_close(&to_f32(&rt(|rt| rt.read(y, None, None))), &v1);
    assert_close(&to_f32(&rt(|rt| rt.read(z, None, None))), &v2);
}

fn finish_async(ticket: ReadTicket) -> Vec<u8> {
    match ticket {
        ReadTicket::Ready(d) => d.into_vec(),
        ReadTicket::Pending(p) => {
            let (dev, _) = helios::runtime::global::device().expect("device");
            let sem = if p.compute { dev.compute_sem } else { dev.transfer_sem };
            assert!(sync::wait(&dev, sem, p.value, u64::MAX).expect("wait"));
            rt(|rt| rt.finish_readback(&p)).into_vec()
        }
    }
}

#[test]
fn async_reads_snapshot_at_call_time() {
    let _s = session_with(&[("HELIOS_FORCE_STAGING", "1")]);
    let n = 256u32;
    let p = axpb_pipeline();
    let (x, y) = rt(|rt| Ok((rt.create_buffer(1024.0, false)?, rt.create_buffer(1024.0, false)?)));
    let v1 = random_f32(n as usize, 41);
    let v2 = random_f32(n as usize, 42);
    let (in_batch, after_submit) = rt(|rt| {
        rt.upload(x, &f32_bytes(&v1), 0.0)?;
        rt.begin_batch(false, false)?;
        rt.record_dispatch(p, &[x, y], groups(n), &axpb_push(n, 2.0, 0.0))?;
        let t1 = rt.read_async(y, None, None)?;
        rt.record_dispatch(p, &[x, y], groups(n), &axpb_push(n, 4.0, 0.0))?;
        rt.submit_batch()?;
        let t2 = rt.read_async(y, None, None)?;
        rt.upload(x, &f32_bytes(&v2), 0.0)?;
        Ok((t1, t2))
    });
    let want1: Vec<f32> = v1.iter().map(|v| 2.0 * v).collect();
    let want2: Vec<f32> = v1.iter().map(|v| 4.0 * v).collect();
    assert_close(&to_f32(&finish_async(in_batch)), &want1);
    assert_close(&to_f32(&finish_async(after_submit)), &want2);
}

#[test]
fn descriptor_pool_fallback_matches_push_descriptors() {
    let _s = session_with(&[("HELIOS_NO_PUSH_DESCRIPTORS", "1")]);
    assert!(!rt(|rt| Ok(rt.use_push_descriptors)));
    let n = 300u32;
    let p = axpb_pipeline();
    let inc = inc_pipeline();
    let x = random_f32(n as usize, 51);
    let (a, b, c) = rt(|rt| Ok((rt.create_buffer(1200.0, false)?, rt.create_buffer(1200.0, false)?, rt.create_buffer(1200.0, false)?)));
    for round in 0..3 {
        rt(|rt| {
            rt.upload(a, &f32_bytes(&x), 0.0)?;
            rt.fill(c, 0, 0.0, None)?;
            rt.begin_batch(false, false)?;
            for _ in 0..300 {
                rt.record_dispatch(p, &[a, b], groups(n), &axpb_push(n, 0.5, 1.0))?;
                rt.record_dispatch(inc, &[c], groups(n), &n.to_le_bytes())?;
            }
            rt.submit_batch()?;
            Ok(())
        });
        let want: Vec<f32> = x.iter().map(|v| 0.5 * v + 1.0).collect();
        assert_close(&to_f32(&rt(|rt| rt.read(b, None, None))), &want);
        assert!(to_u32(&rt(|rt| rt.read(c, None, None))).iter().all(|&v| v == 300), "round {round}");
    }
}

#[test]
fn specialization_constants_and_subgroup_size() {
    let _s = session();
    let subgroup = rt(|rt| Ok(rt.caps().subgroup_size));
    let n = 100u32;
    let layout = PipelineLayoutDesc {
        bindings: vec![Access::Read, Access::Write],
        push_constant_bytes: 4,
        entry_point: "main".into(),
        label: "scale".into(),
        specialization: vec![(0, 3.5f32.to_bits())],
        required_subgroup_size: Some(subgroup),
    };
    let p = helios::runtime::create_pipeline(&words(include_bytes!("shaders/scale_spec.spv")), &layout).expect("pipeline");
    let x = random_f32(n as usize, 61);
    let (a, b) = rt(|rt| Ok((rt.create_buffer(400.0, false)?, rt.create_buffer(400.0, false)?)));
    rt(|rt| {
        rt.upload(a, &f32_bytes(&x), 0.0)?;
        rt.begin_batch(false, false)?;
        rt.record_dispatch(p, &[a, b], groups(n), &n.to_le_bytes())?;
        rt.submit_batch()?;
        Ok(())
    });
    let want: Vec<f32> = x.iter().map(|v| 3.5 * v).collect();
    assert_close(&to_f32(&rt(|rt| rt.read(b, None, None))), &want);
    let bad = PipelineLayoutDesc { required_subgroup_size: Some(3), ..layout };
    let err = helios::runtime::create_pipeline(&words(include_bytes!("shaders/scale_spec.spv")), &bad).expect_err("size 3");
    assert_eq!(err.code, helios::error::ErrorCode::OutOfRange);
}

#[test]
fn pipeline_cache_is_saved_and_corruption_ignored() {
    let dir = std::env::temp_dir().join(format!("helios-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let _s = session();
        let path = rt(|rt| Ok(rt.cache.path.clone()));
        let path = path.expect("cache path");
        axpb_pipeline();
        rt(|rt| {
            rt.cache.path = Some(dir.join(path.file_name().expect("file name")));
            rt.cache.dirty = true;
            rt.save_cache();
            Ok(())
        });
    }
    let files: Vec<_> = std::fs::read_dir(&dir).expect("cache dir").flatten().collect();
    assert_eq!(files.len(), 1);
    let file = files[0].path();
    assert!(helios::runtime::cache_file::decode(&std::fs::read(&file).expect("read")).is_ok());
    std::fs::write(&file, b"HELIOSPC corrupt").expect("write");
    assert!(helios::runtime::cache_file::decode(&std::fs::read(&file).expect("read")).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn destroying_a_buffer_during_an_async_read_is_safe() {
    let _s = session_with(&[("HELIOS_FORCE_STAGING", "1")]);
    let data = random_bytes(1 << 20, 71);
    let h = rt(|rt| rt.create_buffer(data.len() as f64, false));
    rt(|rt| rt.upload(h, &data, 0.0));
    let ticket = rt(|rt| rt.read_async(h, None, None));
    rt(|rt| rt.destroy_buffer(h));
    assert!(rt(|rt| Ok(rt.res.live())) >= 1, "freed only after the copy");
    assert_eq!(finish_async(ticket), data);
    rt(|rt| rt.maintain());
    assert_eq!(rt(|rt| Ok(rt.res.live())), 0);
}

#[test]
fn large_direct_transfers_use_parallel_copies() {
    let _s = session();
    let len = 24 * (1 << 20) + 8;
    let data = random_bytes(len, 81);
    let h = rt(|rt| rt.create_buffer(len as f64, false));
    rt(|rt| rt.upload(h, &data, 0.0));
    assert!(rt(|rt| rt.read(h, None, None)) == data);
    assert!(rt(|rt| rt.read(h, Some(5.0), Some(20_000_001.0))) == data[5..20_000_006]);
}
