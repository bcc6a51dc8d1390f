//! Kernel IR exports: compileKernel, kernelSpirv, kernelDisassembly, kernelLayout.
//! Each parses the description (string, or object via JSON.stringify), then calls `crate::spirv`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use napi::bindgen_prelude::{Array, Either, FromNapiValue, JsObjectValue, Object, Uint32Array, Unknown};
use napi::{Env, JsGlobal, JSON};
use napi_derive::napi;

use crate::caps::DeviceCaps;
use crate::api::args::{desc as desc_arg, opt_num, opt_object};
use crate::api::guard;
use crate::error::{ErrorCode, HeliosError, HeliosResult};
use crate::runtime::global as runtime;
use crate::spirv::cache::KernelCache;
use crate::spirv::CompiledKernel;

fn cache() -> &'static KernelCache {
    static CACHE: OnceLock<KernelCache> = OnceLock::new();
    CACHE.get_or_init(KernelCache::new)
}

/// The description as JSON text: strings pass through, objects go through JSON.stringify (which
/// throws on cycles; that becomes an InvalidKernel error).
fn desc_json(env: &Env, desc: Either<String, Object>) -> HeliosResult<String> {
    match desc {
        Either::A(s) => Ok(s),
        Either::B(obj) => {
            let stringify = || -> napi::Result<String> {
                let global: JsGlobal = env.get_global()?;
                let json: JSON = global.get_named_property_unchecked("JSON")?;
                json.stringify(obj)
            };
            stringify().map_err(|e| HeliosError::invalid_kernel(format!("kernel description cannot be serialized: {}", e.reason)))
        }
    }
}

/// Caps of the initialized device, or the permissive validation caps when there is none.
fn caps_or_permissive() -> DeviceCaps {
    match runtime::device_caps() {
        Ok(c) => c,
        Err(_) => crate::ir::presets::permissive_caps(),
    }
}

/// Pipeline handles by (content hash, device instance).
fn pipeline_memo() -> &'static Mutex<HashMap<(u64, u64), f64>> {
    static PIPELINES: OnceLock<Mutex<HashMap<(u64, u64), f64>>> = OnceLock::new();
    PIPELINES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The pipeline for a compiled kernel, created once per (content hash, device instance): a
/// re-initialized device gets new pipelines, never another device's handles.
fn pipeline_for(key: u64, k: &CompiledKernel) -> HeliosResult<f64> {
    let device = runtime::device()?.1;
    let map = pipeline_memo();
    if let Some(&h) = map.lock().get(&(key, device)) {
        return Ok(h);
    }
    let h = runtime::create_pipeline(&k.words, &k.layout)?;
    let mut m = map.lock();
    m.retain(|(_, d), _| *d == device);
    m.insert((key, device), h);
    Ok(h)
}

fn compiled(env: &Env, desc: Either<String, Object>) -> HeliosResult<Arc<CompiledKernel>> {
    let json = desc_json(env, desc)?;
    Ok(cache().get_or_compile(&json, &caps_or_permissive(), false)?.1)
}

/// Options of kernelSpirv.
#[napi(object)]
pub struct KernelSpirvOptions {
    /// Skip the in-memory memo: validate and assemble every time (the compile benchmark).
    pub no_cache: Option<bool>,
}

/// Validates and assembles a kernel description and creates its pipeline on the device.
/// Returns the pipeline handle; the same description returns the same handle (memoized, so the
/// handle belongs to the memo: do not destroyPipeline it).
#[napi(ts_args_type = "desc: string | object")]
pub fn compile_kernel(env: Env, desc: Unknown<'_>) -> napi::Result<f64, ErrorCode> {
    let json = guard("compileKernel", || desc_json(&env, desc_arg(desc, "desc")?))?;
    guard("compileKernel", || {
        let caps = runtime::device_caps()?;
        let (key, k) = cache().get_or_compile(&json, &caps, true)?;
        pipeline_for(key, &k)
    })
}

/// Validates, assembles and creates pipelines for many descriptions at once: assembly and the
/// driver's pipeline compiles run on up to `threads` threads (default: the host's cores, at most
/// 16). Returns the handles in order, the same (memoized) handles compileKernel returns. If any
/// description fails, the call throws naming its index (the others are compiled and memoized).
#[napi(ts_args_type = "descs: string[], threads?: number")]
pub fn compile_kernels(descs: Unknown<'_>, threads: Option<Unknown<'_>>) -> napi::Result<Vec<f64>, ErrorCode> {
    guard("compileKernels", || {
        let jsons = strings(descs, "descs")?;
        let threads = match opt_num(threads, "threads")? {
            None => std::thread::available_parallelism().map_or(4, |n| n.get()).min(16),
            Some(t) if t.fract() == 0.0 && (1.0..=256.0).contains(&t) => t as usize,
            Some(t) => return Err(HeliosError::invalid_argument(format!("threads = {t} must be an integer from 1 to 256"))),
        };
        compile_many(&jsons, threads)
    })
}

fn strings(v: Unknown<'_>, what: &str) -> HeliosResult<Vec<String>> {
    let arr = Array::from_unknown(v).map_err(|_| HeliosError::invalid_argument(format!("{what} must be an array of strings")))?;
    (0..arr.len())
        .map(|i| match arr.get::<String>(i) {
            Ok(Some(s)) => Ok(s),
            _ => Err(HeliosError::invalid_argument(format!("{what}[{i}] must be a string (a JSON kernel description)"))),
        })
        .collect()
}

/// Assembles every description, then builds the pipelines not yet memoized, all in parallel.
fn compile_many(jsons: &[String], threads: usize) -> HeliosResult<Vec<f64>> {
    let caps = runtime::device_caps()?;
    let device = runtime::device()?.1;
    let assembled = crate::runtime::parallel::map(jsons, threads, |j| cache().get_or_compile(j, &caps, true));
    let mut kernels = Vec::with_capacity(jsons.len());
    for (i, a) in assembled.into_iter().enumerate() {
        kernels.push(a.map_err(|e| HeliosError::new(e.code, format!("descs[{i}]: {}", e.message)))?);
    }
    // one build per distinct kernel missing from the memo
    let map = pipeline_memo();
    let mut todo: Vec<(u64, &CompiledKernel)> = Vec::new();
    {
        let memo = map.lock();
        let mut queued = HashSet::new();
        for (key, k) in &kernels {
            if !memo.contains_key(&(*key, device)) && queued.insert(*key) {
                todo.push((*key, k));
            }
        }
    }
    let jobs: Vec<(&[u32], &crate::caps::PipelineLayoutDesc)> = todo.iter().map(|(_, k)| (k.words.as_slice(), &k.layout)).collect();
    let built = runtime::create_pipelines(&jobs, threads)?;
    // memoize every pipeline that was built before reporting the first one that was not
    let mut first_error = None;
    {
        let mut memo = map.lock();
        memo.retain(|(_, d), _| *d == device);
        for ((key, _), h) in todo.iter().zip(built) {
            match h {
                Ok(h) => {
                    memo.insert((*key, device), h);
                }
                Err(e) if first_error.is_none() => {
                    let i = kernels.iter().position(|(k, _)| k == key).unwrap_or(0);
                    first_error = Some(HeliosError::new(e.code, format!("descs[{i}]: {}", e.message)));
                }
                Err(_) => {}
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let memo = map.lock();
    kernels
        .iter()
        .map(|(key, _)| memo.get(&(*key, device)).copied().ok_or_else(|| HeliosError::internal("compiled pipeline missing from the memo")))
        .collect()
}

/// SPIR-V words of a description (validated against the device, or permissive caps without one).
#[napi(ts_args_type = "desc: string | object, opts?: KernelSpirvOptions | undefined | null")]
pub fn kernel_spirv(env: Env, desc: Unknown<'_>, opts: Option<Unknown<'_>>) -> napi::Result<Uint32Array, ErrorCode> {
    let run = || -> HeliosResult<Uint32Array> {
        let desc = desc_arg(desc, "desc")?;
        let opts: Option<KernelSpirvOptions> = opt_object(opts, "opts")?;
        if opts.and_then(|o| o.no_cache).unwrap_or(false) {
            let json = desc_json(&env, desc)?;
            let k = crate::spirv::compile(&json, &caps_or_permissive())?;
            return Ok(Uint32Array::new(k.words));
        }
        Ok(Uint32Array::new(compiled(&env, desc)?.words.clone()))
    };
    guard("kernelSpirv", run)
}

/// Human-readable SPIR-V of a description.
#[napi(ts_args_type = "desc: string | object")]
pub fn kernel_disassembly(env: Env, desc: Unknown<'_>) -> napi::Result<String, ErrorCode> {
    let run = || -> HeliosResult<String> {
        let json = desc_json(&env, desc_arg(desc, "desc")?)?;
        crate::spirv::disassemble_desc(&json, &caps_or_permissive())
    };
    guard("kernelDisassembly", run)
}


/// The pipeline layout of a description: binding accesses, push-constant bytes, spec constants.
#[napi(object)]
pub struct KernelLayout {
    pub name: String,
    pub bindings: Vec<String>,
    pub push_constant_bytes: u32,
    pub specialization: Vec<Vec<u32>>,
    pub required_subgroup_size: Option<u32>,
}

#[napi(ts_args_type = "desc: string | object")]
pub fn kernel_layout(env: Env, desc: Unknown<'_>) -> napi::Result<KernelLayout, ErrorCode> {
    let run = || -> HeliosResult<KernelLayout> {
        let k = compiled(&env, desc_arg(desc, "desc")?)?;
        let l = &k.layout;
        Ok(KernelLayout {
            name: k.name.clone(),
            bindings: l
                .bindings
                .iter()
                .map(|a| match a {
                    crate::caps::Access::Read => "read",
                    crate::caps::Access::Write => "write",
                    crate::caps::Access::ReadWrite => "readwrite",
                })
                .map(String::from)
                .collect(),
            push_constant_bytes: l.push_constant_bytes,
            specialization: l.specialization.iter().map(|(a, b)| vec![*a, *b]).collect(),
            required_subgroup_size: l.required_subgroup_size,
        })
    };
    guard("kernelLayout", run)
}
