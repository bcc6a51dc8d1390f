//! Shared helpers for the lavapipe integration tests: one runtime at a time (the runtime is
//! a process-wide singleton), validation on, and zero validation messages at the end.

#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard};

use helios::caps::{Access, PipelineLayoutDesc};
use helios::error::HeliosResult;
use helios::runtime::context::{InitOptions, Runtime};
use helios::runtime::global;

static SERIAL: Mutex<()> = Mutex::new(());

pub struct Session {
    _guard: MutexGuard<'static, ()>,
}

/// Initializes a validated device; the returned session checks messages and destroys on drop.
pub fn session() -> Session {
    session_with(&[])
}

/// Like `session`, with extra HELIOS_* environment variables set for this init only.
pub fn session_with(env: &[(&str, &str)]) -> Session {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    global::destroy();
    for (k, v) in env {
        std::env::set_var(k, v);
    }
    std::env::set_var("HELIOS_CACHE_DIR", std::env::temp_dir().join("helios-test-cache"));
    let init = global::init(&InitOptions { device: None, validation: Some(true), shareable: false, ..Default::default() });
    for (k, _) in env {
        std::env::remove_var(k);
    }
    init.expect("initDevice on lavapipe");
    global::take_messages();
    Session { _guard: guard }
}

impl Drop for Session {
    fn drop(&mut self) {
        global::destroy();
        let messages = global::take_messages();
        if !std::thread::panicking() {
            assert!(messages.is_empty(), "validation messages:\n{}", messages.join("\n"));
        }
    }
}

pub fn rt<T>(f: impl FnOnce(&mut Runtime) -> HeliosResult<T>) -> T {
    global::with(f).unwrap_or_else(|e| panic!("{e}"))
}

pub fn words(spv: &[u8]) -> Vec<u32> {
    spv.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

pub const AXPB: &[u8] = include_bytes!("../shaders/axpb.spv");
pub const INC: &[u8] = include_bytes!("../shaders/inc.spv");

/// axpb: bindings [src read, dst write], push { n: u32, a: f32, b: f32 }.
pub fn axpb_pipeline() -> f64 {
    let layout = PipelineLayoutDesc {
        bindings: vec![Access::Read, Access::Write],
        push_constant_bytes: 12,
        entry_point: "main".into(),
        label: "axpb".into(),
        specialization: vec![],
        required_subgroup_size: None,
    };
    helios::runtime::create_pipeline(&words(AXPB), &layout).expect("axpb pipeline")
}

/// inc: bindings [data readwrite], push { n: u32 }.
pub fn inc_pipeline() -> f64 {
    let layout = PipelineLayoutDesc {
        bindings: vec![Access::ReadWrite],
        push_constant_bytes: 4,
        entry_point: "main".into(),
        label: "inc".into(),
        specialization: vec![],
        required_subgroup_size: None,
    };
    helios::runtime::create_pipeline(&words(INC), &layout).expect("inc pipeline")
}

pub fn axpb_push(n: u32, a: f32, b: f32) -> Vec<u8> {
    [n.to_le_bytes(), a.to_le_bytes(), b.to_le_bytes()].concat()
}

pub fn groups(n: u32) -> [u32; 3] {
    [n.div_ceil(64), 1, 1]
}

/// Deterministic pseudo-random floats in [-1, 1).
pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn to_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

pub fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn to_u32(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

pub fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "element {i}: got {g}, want {w}");
    }
}
