//! Batch, timeline, capture and profile exports.

use napi::bindgen_prelude::{AsyncTask, Unknown};
use napi_derive::napi;

use crate::api::tasks::WaitTask;
use crate::api::types::{BatchOptions, ProfileEntry};
use crate::api::args::{count as count_arg, num, nums_into, opt_byte_view, opt_num, opt_object, u32_array};
use crate::vk::command::MAX_BINDINGS;
use crate::api::guard;
use crate::error::{ErrorCode, HeliosError, HeliosResult};
use crate::runtime::global;
use crate::vk::sync;

fn parse_groups(groups: &[f64]) -> HeliosResult<[u32; 3]> {
    if groups.is_empty() || groups.len() > 3 {
        return Err(HeliosError::invalid_argument(format!("groups must have 1 to 3 entries, got {}", groups.len())));
    }
    let mut out = [1u32; 3];
    for (i, &g) in groups.iter().enumerate() {
        if !(g.is_finite() && g.fract() == 0.0 && g >= 0.0) {
            return Err(HeliosError::invalid_argument(format!("groups[{i}] = {g} is not a non-negative integer")));
        }
        if g > u32::MAX as f64 {
            return Err(HeliosError::out_of_range(format!("groups[{i}] = {g} exceeds maxComputeWorkGroupCount")));
        }
        out[i] = g as u32;
    }
    Ok(out)
}

fn timeline_value(value: f64) -> HeliosResult<u64> {
    if !(value.is_finite() && value.fract() == 0.0 && value >= 0.0) {
        return Err(HeliosError::invalid_argument(format!("timeline value {value} is not a non-negative integer")));
    }
    Ok(value as u64)
}

/// Opens a batch; dispatches are recorded into it until submitBatch or captureBatch.
#[napi(ts_args_type = "opts?: BatchOptions | undefined | null")]
pub fn begin_batch(opts: Option<Unknown<'_>>) -> napi::Result<(), ErrorCode> {
    guard("beginBatch", || {
        let opts: Option<BatchOptions> = opt_object(opts, "opts")?;
        let profile = opts.as_ref().and_then(|o| o.profile).unwrap_or(false);
        let overlap = opts.as_ref().and_then(|o| o.overlap_allocations).unwrap_or(false);
        global::with(|rt| rt.begin_batch(profile, overlap))
    })
}

/// Records one dispatch: `buffers[i]` binds to binding i; `groups` is [x, y?, z?].
#[napi(ts_args_type = "pipeline: number, buffers: number[], groups: number[], pushConstants?: ArrayBuffer | ArrayBufferView")]
pub fn record_dispatch(
    pipeline: Unknown<'_>,
    buffers: Unknown<'_>,
    groups: Unknown<'_>,
    push_constants: Option<Unknown<'_>>,
) -> napi::Result<(), ErrorCode> {
    guard("recordDispatch", || {
        let pipeline = num(pipeline, "pipeline")?;
        let mut handles = [0f64; MAX_BINDINGS];
        let nb = nums_into(buffers, "buffers", &mut handles)?;
        let mut g = [0f64; 3];
        let ng = nums_into(groups, "groups", &mut g)?;
        let groups = parse_groups(&g[..ng])?;
        let push = opt_byte_view(push_constants, "pushConstants")?;
        global::with(|rt| rt.record_dispatch(pipeline, &handles[..nb], groups, push.as_slice()))
    })
}

/// Records `count` dispatches from one packed Uint32Array (one N-API crossing).
/// Per entry, in 32-bit words:
/// `[pipelineLo, pipelineHi, groupsX, groupsY, groupsZ, nBuffers, nPushWords,
///   (bufLo, bufHi) x nBuffers, push words x nPushWords]`.
/// Handles are JS numbers below 2^53 split into their low and high 32 bits
/// (`lo = h % 2**32`, `hi = Math.floor(h / 2**32)`). On an error, entries before the
/// failing one stay recorded and the message names the failing entry.
/// One decoded entry of the packed recordDispatchMany layout.
struct Entry<'a> {
    pipeline: f64,
    handles: &'a [u32],
    groups: [u32; 3],
    push: &'a [u32],
}

/// Decodes entry `index` starting at word `at`; returns it and the next entry's word.
fn decode_entry(words: &[u32], at: usize, index: u32) -> HeliosResult<(Entry<'_>, usize)> {
    let bad = |why: String| HeliosError::invalid_argument(format!("entry {index}: {why}"));
    let head = words.get(at..at + 7).ok_or_else(|| bad(format!("the packed array ends at word {at}")))?;
    let (nb, np) = (head[5] as usize, head[6] as usize);
    let end = at + 7 + 2 * nb + np;
    let body = words.get(at + 7..end).ok_or_else(|| bad(format!("needs words up to {end}, the array has {}", words.len())))?;
    let entry = Entry {
        pipeline: ((head[1] as u64) << 32 | head[0] as u64) as f64,
        handles: &body[..2 * nb],
        groups: [head[2], head[3], head[4]],
        push: &body[2 * nb..],
    };
    Ok((entry, end))
}

/// Records `count` dispatches from one packed Uint32Array (one N-API crossing).
/// Per entry, in 32-bit words:
/// `[pipelineLo, pipelineHi, groupsX, groupsY, groupsZ, nBuffers, nPushWords,
///   (bufLo, bufHi) x nBuffers, push words x nPushWords]`.
/// Handles are JS numbers below 2^53 split into their low and high 32 bits
/// (`lo = h % 2**32`, `hi = Math.floor(h / 2**32)`). Every entry is validated before any is
/// recorded, so a rejected call records nothing; the message names the failing entry.
#[napi(ts_args_type = "packed: Uint32Array, count: number")]
pub fn record_dispatch_many(packed: Unknown<'_>, count: Unknown<'_>) -> napi::Result<(), ErrorCode> {
    guard("recordDispatchMany", || {
        let packed = u32_array(packed, "packed")?;
        let count = count_arg(count, "count")?;
        let words: &[u32] = &packed;
        global::with(|rt| {
            let mut bufs: Vec<f64> = Vec::with_capacity(16);
            let mut push: Vec<u8> = Vec::with_capacity(256);
            for pass in [false, true] {
                let mut at = 0usize;
                for index in 0..count {
                    let (e, next) = decode_entry(words, at, index)?;
                    bufs.clear();
                    bufs.extend(e.handles.chunks_exact(2).map(|p| ((p[1] as u64) << 32 | p[0] as u64) as f64));
                    push.clear();
                    push.extend(e.push.iter().flat_map(|w| w.to_le_bytes()));
                    let result = if pass {
                        rt.record_dispatch(e.pipeline, &bufs, e.groups, &push)
                    } else {
                        rt.check_dispatch(e.pipeline, &bufs, e.groups, &push)
                    };
                    result.map_err(|err| HeliosError::new(err.code, format!("entry {index}: {}", err.message)))?;
                    at = next;
                }
            }
            Ok(())
        })
    })
}

/// Submits the open batch; returns the compute timeline value it signals.
#[napi]
pub fn submit_batch() -> napi::Result<f64, ErrorCode> {
    guard("submitBatch", || global::with(|rt| rt.submit_batch()).map(|v| v as f64))
}

/// Waits (blocking) until the timeline reaches `value`; ERR_HELIOS_TIMEOUT after `timeoutMs`.
#[napi(ts_args_type = "value: number, timeoutMs?: number")]
pub fn wait_timeline(value: Unknown<'_>, timeout_ms: Option<Unknown<'_>>) -> napi::Result<(), ErrorCode> {
    guard("waitTimeline", || {
        let value = timeline_value(num(value, "value")?)?;
        let timeout_ms = opt_num(timeout_ms, "timeoutMs")?;
        let timeout_ns = match timeout_ms {
            Some(ms) if ms.is_finite() && ms >= 0.0 => (ms * 1e6) as u64,
            Some(ms) if ms.is_infinite() && ms > 0.0 => u64::MAX,
            Some(ms) => return Err(HeliosError::invalid_argument(format!("timeoutMs {ms} is not a non-negative number"))),
            None => u64::MAX,
        };
        // Validate and fetch the device under the lock, then wait without holding it. A value
        // not submitted yet can only time out; without a timeout it would hang, so refuse it.
        let dev = global::with(|rt| {
            if timeout_ns == u64::MAX {
                rt.check_submitted(value)?;
            }
            Ok(rt.dev.clone())
        })?;
        if !sync::wait(&dev, dev.compute_sem, value, timeout_ns)? {
            return Err(HeliosError::timeout(format!("timeline value {value} not reached within {} ms", timeout_ms.unwrap_or(f64::INFINITY))));
        }
        Ok(())
    })
}

/// Resolves once the timeline reaches `value` (waits on a libuv worker).
#[napi(ts_args_type = "value: number", ts_return_type = "Promise<void>")]
pub fn wait_timeline_async(value: Unknown<'_>) -> napi::Result<AsyncTask<WaitTask>, ErrorCode> {
    guard("waitTimelineAsync", || {
        let value = timeline_value(num(value, "value")?)?;
        let dev = global::with(|rt| {
            rt.check_submitted(value)?;
            Ok(rt.dev.clone())
        })?;
        Ok(AsyncTask::new(WaitTask::new(dev, value)))
    })
}

/// The highest completed compute timeline value.
#[napi]
pub fn get_completed() -> napi::Result<f64, ErrorCode> {
    guard("getCompleted", || global::with(|rt| rt.completed()).map(|p| p.compute as f64))
}

/// Ends the open batch without submitting it and keeps it for replayBatch.
#[napi]
pub fn capture_batch() -> napi::Result<f64, ErrorCode> {
    guard("captureBatch", || global::with(|rt| rt.capture_batch()))
}

/// Resubmits a captured batch without re-recording; returns its timeline value.
#[napi(ts_args_type = "graph: number")]
pub fn replay_batch(graph: Unknown<'_>) -> napi::Result<f64, ErrorCode> {
    guard("replayBatch", || {
        let graph = num(graph, "graph")?;
        global::with(|rt| rt.replay_batch(graph)).map(|v| v as f64)
    })
}

/// Frees a captured batch (after its last replay completes) and unpins its buffers.
#[napi(ts_args_type = "graph: number")]
pub fn destroy_capture(graph: Unknown<'_>) -> napi::Result<(), ErrorCode> {
    guard("destroyCapture", || {
        let graph = num(graph, "graph")?;
        global::with(|rt| rt.destroy_capture(graph))
    })
}

/// Per-dispatch GPU times of a batch begun with `{profile: true}` (waits for it to complete).
#[napi(ts_args_type = "value: number")]
pub fn batch_profile(value: Unknown<'_>) -> napi::Result<Vec<ProfileEntry>, ErrorCode> {
    guard("batchProfile", || {
        let value = timeline_value(num(value, "value")?)?;
        let entries = global::with(|rt| rt.batch_profile(value))?;
        Ok(entries
            .into_iter()
            .map(|d| ProfileEntry { label: d.label.to_string(), gpu_ns: d.gpu_ns, start_ns: d.start_ns, end_ns: d.end_ns })
            .collect())
    })
}
