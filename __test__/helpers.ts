// Shared test plumbing: device set-up with validation (any validation message fails
// the test that produced it), seeded random data that is never zero, error-code
// assertions, and small wrappers for the packed dispatch format.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, afterEach } from "node:test";
import { Mulberry32 } from "../ts/random.js";
import { native } from "../ts/native.js";
import type { DeviceInfo, Handle, HeliosErrorCode, HeliosNative } from "./api.js";
import { KERNELS, type TestKernel } from "./kernels/index.js";

// No cast: index.d.ts must stay assignable to issue 2's API (see api.ts).
export const rt: HeliosNative = native;

/** Fails with every message the validation layer collected since the last drain. */
export function assertNoValidationMessages(when: string): void {
  const messages = rt.takeValidationMessages();
  assert.deepEqual(messages, [], `validation messages ${when}:\n${messages.join("\n")}`);
}

/**
 * Initializes the device with Khronos validation (synchronization validation
 * included) for this test file, checks after every test that validation stayed
 * silent, and destroys the device when the file is done.
 */
export function useDevice(): DeviceInfo {
  const info = rt.initDevice({ validation: true });
  // HELIOS_TEST_NO_LAYER=1: a GPU host whose Vulkan loader has no validation layer that knows the
  // device's extensions (the host runs the suite for the device's own behaviour; CI validates)
  if (process.env.HELIOS_TEST_NO_LAYER !== "1") {
    assert.notEqual(info.validation, false, "initDevice({validation: true}) must enable the validation layer");
  }
  afterEach((t) => assertNoValidationMessages(`after "${t.name}"`));
  after(() => {
    assertNoValidationMessages("at the end of the file");
    rt.destroy();
  });
  return info;
}

/**
 * Whether the runtime was told to never map device buffers directly (HELIOS_FORCE_STAGING,
 * read by src/config.rs); the test suite reruns the transfer-heavy files that way.
 */
export function forcedStaging(): boolean {
  return ["1", "true", "yes", "on"].includes(process.env.HELIOS_FORCE_STAGING ?? "");
}

const pipelineCache = new Map<keyof typeof KERNELS, Handle>();

/** The pipeline of a test kernel, created once per device lifetime. */
export function pipeline(name: keyof typeof KERNELS): Handle {
  let h = pipelineCache.get(name);
  if (h === undefined) {
    const k: TestKernel = KERNELS[name];
    h = rt.createPipeline(k.spirv, k.layout);
    pipelineCache.set(name, h);
  }
  return h;
}

/** Forgets cached pipelines (after `destroy()`, their handles are dead). */
export function forgetPipelines(): void {
  pipelineCache.clear();
}

export function groupsFor(n: number, localSize = 64): number {
  return Math.ceil(n / localSize);
}

/** mulberry32: small, fast, and reproducible from its seed. */
export function rng(seed: number): () => number {
  const m = new Mulberry32(seed);
  return () => m.next();
}

/** Uniform integer in [lo, hi]. */
export function randInt(r: () => number, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

/** Random u32 words in [1, max], never zero (so a missed write cannot look right). */
export function randomU32(n: number, r: () => number, max = 0x7fffffff): Uint32Array {
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) out[i] = 1 + Math.floor(r() * max);
  return out;
}

/** Random f32 values with magnitude in [0.25, 4) and random sign: never zero, never tiny. */
export function randomF32(n: number, r: () => number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (r() < 0.5 ? -1 : 1) * (0.25 + r() * 3.75);
  return out;
}

export function readU32(h: Handle, byteOffset?: number, byteLength?: number): Uint32Array {
  return new Uint32Array(rt.readBuffer(h, byteOffset, byteLength));
}

export function readF32(h: Handle, byteOffset?: number, byteLength?: number): Float32Array {
  return new Float32Array(rt.readBuffer(h, byteOffset, byteLength));
}

/** A buffer holding `data` (uploaded in program order). */
export function bufferWith(data: Uint32Array | Float32Array): Handle {
  const h = rt.createBuffer(data.byteLength);
  rt.uploadBuffer(h, data);
  return h;
}

/** Runs `record` inside a batch, submits it and waits for it. */
export function runBatch(record: () => void, opts?: { profile?: boolean }): number {
  rt.beginBatch(opts);
  record();
  const value = rt.submitBatch();
  rt.waitTimeline(value);
  return value;
}

/** First index where two arrays differ, with both values, for readable failures. */
export function assertArrayEqual(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    if (!Object.is(actual[i], expected[i])) {
      assert.fail(`${what}: first mismatch at [${i}]: got ${actual[i]}, expected ${expected[i]}`);
    }
  }
}

export interface Expectation {
  /** The message must name this call (e.g. "uploadBuffer"). */
  call?: string;
  /** The message must mention this value (an offset, a length, ...). */
  mentions?: string | number;
  /** The message must mention this handle, in decimal or hex. */
  handle?: number;
}

function checkError(err: unknown, codes: HeliosErrorCode[], exp: Expectation): true {
  assert.ok(err instanceof Error, `expected an Error, got ${String(err)}`);
  const code = (err as Error & { code?: unknown }).code;
  assert.ok(
    codes.includes(code as HeliosErrorCode),
    `expected code ${codes.join(" or ")}, got ${String(code)}: ${err.message}`,
  );
  if (exp.call !== undefined) assert.ok(err.message.includes(exp.call), `message should name ${exp.call}: ${err.message}`);
  if (exp.mentions !== undefined) {
    assert.ok(err.message.includes(String(exp.mentions)), `message should mention ${exp.mentions}: ${err.message}`);
  }
  if (exp.handle !== undefined) {
    const forms = [String(exp.handle), `0x${exp.handle.toString(16)}`];
    const text = err.message.toLowerCase();
    assert.ok(forms.some((f) => text.includes(f)), `message should mention handle ${forms.join(" / ")}: ${err.message}`);
  }
  return true;
}

/** Asserts that `fn` throws a Helios error with one of `codes`. */
export function assertThrowsCode(fn: () => unknown, codes: HeliosErrorCode | HeliosErrorCode[], exp: Expectation = {}): void {
  const list = Array.isArray(codes) ? codes : [codes];
  assert.throws(fn, (err) => checkError(err, list, exp));
}

/** Asserts that the promise (or the promise `fn` returns) rejects with one of `codes`. */
export async function assertRejectsCode(
  p: Promise<unknown> | (() => Promise<unknown>),
  codes: HeliosErrorCode | HeliosErrorCode[],
  exp: Expectation = {},
): Promise<void> {
  const list = Array.isArray(codes) ? codes : [codes];
  await assert.rejects(p, (err) => checkError(err, list, exp));
}

/** Splits a handle (< 2^53) into the two u32 words recordDispatchMany expects. */
export function splitHandle(h: Handle): [number, number] {
  return [h >>> 0, Math.floor(h / 0x100000000)];
}

export interface PackedDispatch {
  pipeline: Handle;
  buffers: Handle[];
  groups: [number, number?, number?];
  push?: Uint32Array;
}

/**
 * Packs dispatches for recordDispatchMany: per entry [pipelineLo, pipelineHi, gx, gy, gz,
 * nBuffers, nPushWords, (bufLo, bufHi) x nBuffers, push words x nPushWords].
 */
export function packDispatches(entries: PackedDispatch[]): Uint32Array {
  const words: number[] = [];
  for (const e of entries) {
    const push = e.push ?? new Uint32Array(0);
    words.push(...splitHandle(e.pipeline), e.groups[0], e.groups[1] ?? 1, e.groups[2] ?? 1, e.buffers.length, push.length);
    for (const b of e.buffers) words.push(...splitHandle(b));
    words.push(...push);
  }
  return Uint32Array.from(words);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** CPU reference of the `slow` kernel on one word. */
export function slowReference(v: number, iters: number): number {
  let x = v;
  for (let k = 0; k < iters; k++) x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
  return x;
}

export interface SlowShape {
  n: number;
  iters: number;
}

/** Loop trip count of every `slow` dispatch: llvmpipe caps loops at 65535 iterations. */
export const SLOW_ITERS = 40_000;
/** Largest `slow` dispatch, in elements (64 MiB). */
const SLOW_MAX_N = 16 * 1024 * 1024;
let slowPerElementMs: number | undefined;

/**
 * A `slow` dispatch shape that keeps the GPU busy for roughly `ms` milliseconds on this
 * device (measured once per file), so tests can observe work that is still in flight.
 * The work scales with the element count; the trip count stays at SLOW_ITERS.
 */
export function slowShapeFor(ms: number): SlowShape {
  if (slowPerElementMs === undefined) {
    // Grow the probe until it fills the device (a GPU runs small probes in one wave, which
    // would make the per-element cost look far higher than it is at scale).
    let probeN = 2048;
    for (;;) {
      const h = bufferWith(randomU32(probeN, rng(7)));
      runBatch(() => rt.recordDispatch(pipeline("slow"), [h], [groupsFor(probeN)], Uint32Array.of(probeN, 10)));
      const t0 = performance.now();
      runBatch(() => rt.recordDispatch(pipeline("slow"), [h], [groupsFor(probeN)], Uint32Array.of(probeN, SLOW_ITERS)));
      const elapsed = performance.now() - t0;
      rt.destroyBuffer(h);
      if (elapsed >= 20 || probeN >= SLOW_MAX_N) {
        slowPerElementMs = Math.max(elapsed, 0.01) / probeN;
        break;
      }
      probeN = Math.min(probeN * 8, SLOW_MAX_N);
    }
  }
  const n = Math.min(Math.max(64 * Math.ceil(ms / slowPerElementMs / 64), 64), SLOW_MAX_N);
  return { n, iters: SLOW_ITERS };
}

/** Checks a `slow` result on a spread of sampled elements (the full CPU reference is costly). */
export function assertSlowResult(got: Uint32Array, input: Uint32Array, iters: number, what: string): void {
  assert.equal(got.length, input.length, `${what}: length`);
  const step = Math.max(1, Math.floor(input.length / 97));
  for (let i = 0; i < input.length; i += step) {
    assert.equal(got[i], slowReference(input[i], iters), `${what}: element ${i}`);
  }
  const last = input.length - 1;
  assert.equal(got[last], slowReference(input[last], iters), `${what}: element ${last}`);
}

/** Records one `slow` dispatch over the first `shape.n` words of `h`. */
export function recordSlow(h: Handle, shape: SlowShape): void {
  rt.recordDispatch(pipeline("slow"), [h], [groupsFor(shape.n)], Uint32Array.of(shape.n, shape.iters));
}

export interface ChildResult {
  ok?: boolean;
  code?: string;
  message?: string;
  /** Everything the child wrote to stderr (warnings, validation output). */
  stderr: string;
}

/**
 * Runs `body` in a fresh Node process with extra `env`; `body` sees `native` (the addon)
 * and `KERNELS`. Returns {ok: true} or the {code, message} of what it threw.
 */
export function inChild(body: string, env: Record<string, string>, timeoutMs = 60_000): ChildResult {
  const nativeUrl = new URL("../ts/native.js", import.meta.url).href;
  const kernelsUrl = new URL("./kernels/index.js", import.meta.url).href;
  const script = `
    const { native } = await import(${JSON.stringify(nativeUrl)});
    const { KERNELS } = await import(${JSON.stringify(kernelsUrl)});
    try { ${body}; console.log(JSON.stringify({ ok: true })); }
    catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }
    try { native.destroy(); } catch {}`;
  const res = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: timeoutMs,
  });
  assert.equal(res.status, 0, `child process failed (${res.signal ?? res.status}): ${res.stderr}`);
  const last = res.stdout.trim().split("\n").pop() ?? "";
  if (!last.startsWith("{")) assert.fail(`child printed no result:\n${res.stdout}\n${res.stderr}`);
  return { ...JSON.parse(last), stderr: res.stderr };
}
