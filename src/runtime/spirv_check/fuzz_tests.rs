//! The validator against mutated modules: 1-3 word mutations of valid modules (the hand-written
//! test kernels and kernels assembled from IR descriptions) never panic, and valid modules pass.
//! `__test__/spirv-fuzz.test.ts` sends the mutants that pass through the driver.

use std::path::{Path, PathBuf};

use crate::caps::{Access, DeviceCaps, PipelineLayoutDesc};
use crate::error::ErrorCode;
use crate::ir::presets::permissive_caps;

use super::validate;

/// The hand-written kernels, parsed from the generated `__test__/kernels/spirv.ts`.
fn test_kernels() -> Vec<(String, Vec<u32>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/kernels/spirv.ts");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    for chunk in text.split("export const ").skip(1) {
        let name = chunk.split_whitespace().next().unwrap_or("?").to_string();
        let words = chunk.split("0x").skip(1).filter_map(|w| u32::from_str_radix(&w[..8.min(w.len())], 16).ok()).collect();
        out.push((name, words));
    }
    out
}

/// Kernels assembled from the IR descriptions in `__test__/kernels/ir/` (written by
/// `scripts/gen-test-kernels.sh` from the kernel registry).
fn ir_kernels(caps: &DeviceCaps) -> Vec<(String, Vec<u32>, PipelineLayoutDesc)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/kernels/ir");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter_map(|p| {
            let json = std::fs::read_to_string(p).ok()?;
            let k = crate::spirv::compile(&json, caps).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            Some((k.name.clone(), k.words, k.layout))
        })
        .collect()
}

fn open_layout(bindings: usize) -> PipelineLayoutDesc {
    PipelineLayoutDesc {
        bindings: vec![Access::ReadWrite; bindings],
        push_constant_bytes: 128,
        entry_point: "main".into(),
        label: "fuzz".into(),
        specialization: Vec::new(),
        required_subgroup_size: None,
    }
}

/// xorshift64*: deterministic, so a failure names a reproducible (seed, module, iteration).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to three word mutations: a random word, a flipped bit, a small delta, a word copied from
/// elsewhere in the module (ids, opcodes), or 0 / 0xffffffff.
fn mutate(words: &[u32], rng: &mut Rng) -> Vec<u32> {
    let mut m = words.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(m.len());
        m[at] = match rng.below(6) {
            0 => rng.next() as u32,
            1 => m[at] ^ (1 << rng.below(32)),
            2 => m[at].wrapping_add(rng.below(9) as u32).wrapping_sub(4),
            3 => words[rng.below(words.len())],
            4 => 0,
            _ => u32::MAX,
        };
    }
    m
}

#[test]
fn valid_modules_pass() {
    let caps = permissive_caps();
    let kernels = test_kernels();
    assert!(kernels.len() >= 5, "found {} test kernels", kernels.len());
    for (name, words) in &kernels {
        validate(words, &open_layout(4), &caps).unwrap_or_else(|e| panic!("{name}: {}", e.message));
    }
    let ir = ir_kernels(&caps);
    assert!(ir.len() >= 4, "found {} IR kernels", ir.len());
    for (name, words, layout) in &ir {
        validate(words, layout, &caps).unwrap_or_else(|e| panic!("{name}: {}", e.message));
    }
}

/// 12,000 mutants; none may panic (an internal error), and most must be refused.
#[test]
fn mutated_modules_never_panic() {
    let caps = permissive_caps();
    let mut seeds: Vec<(String, Vec<u32>, PipelineLayoutDesc)> =
        test_kernels().into_iter().map(|(n, w)| (n, w, open_layout(4))).collect();
    seeds.extend(ir_kernels(&caps));
    let per_seed = 12_000 / seeds.len().max(1) + 1;
    let (mut total, mut accepted) = (0, 0);
    for (s, (name, words, layout)) in seeds.iter().enumerate() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ s as u64);
        for i in 0..per_seed {
            let m = mutate(words, &mut rng);
            match validate(&m, layout, &caps) {
                Ok(()) => accepted += 1,
                Err(e) => assert_ne!(e.code, ErrorCode::Internal, "{name} mutant {i}: {}", e.message),
            }
            total += 1;
        }
    }
    assert!(total >= 10_000);
    assert!(accepted < total / 2, "{accepted} of {total} mutants accepted");
}

/// `HELIOS_SPIRV_CORPUS=<dir of .spv>`: every module there passes (dump the registry's kernels
/// with HELIOS_DUMP_SPIRV to check the validator against all of them).
#[test]
fn external_corpus_passes() {
    let Ok(dir) = std::env::var("HELIOS_SPIRV_CORPUS") else { return };
    let caps = permissive_caps();
    let mut failures = Vec::new();
    let entries = std::fs::read_dir(&dir).map(|d| d.filter_map(|e| e.ok()).collect::<Vec<_>>()).unwrap_or_default();
    for e in &entries {
        let bytes = std::fs::read(e.path()).unwrap_or_default();
        let words: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        if let Err(err) = validate(&words, &open_layout(64), &caps) {
            failures.push(format!("{}: {}", e.path().display(), err.message));
        }
    }
    assert!(failures.is_empty(), "{} of {} failed:\n{}", failures.len(), entries.len(), failures[..failures.len().min(30)].join("\n"));
}
