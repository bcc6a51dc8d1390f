// Parses `helios bench --suite=cuda ...` arguments into typed options. Pure: no I/O, so it is
// unit-tested and shared by the CLI and by Alpha's CLI delegating to runCudaSuite().

export type BenchDtype = "float16" | "bfloat16" | "float32";

export interface Shape {
  m: number;
  n: number;
  k: number;
}

export interface CudaSuiteOptions {
  suite: "cuda";
  iters: number;
  warmup: number;
  /** Timed repeats of `iters` iterations each; the reported time is the median of their medians. */
  repeats: number;
  /**
   * Sustained load (ms) before timing, after the warm-up iterations: ramps the GPU clocks from
   * idle. At 8192³ it also brings the board to its power cap, so what follows is the sustained rate.
   */
  warmMs: number;
  /**
   * Idle seconds before each timed repeat, on both sides (0: none). With a short warmMs every repeat
   * then starts from a rested board: the rate of a short burst rather than the sustained one.
   */
  rest: number;
  dtype: BenchDtype;
  shapes: Shape[];
  check: boolean;
  checkShape: Shape;
  out?: string;
  plot?: string;
  /** Run the PyTorch reference (python3 subprocess) when available. */
  torch: boolean;
  python: string;
  /** Accumulate in f16 (opt-in variant; 16-bit inputs only). */
  accF16: boolean;
  /** Fused epilogue benchmarked with the matmul: none, bias, bias+gelu, ... */
  epilogue: EpilogueArg;
  /** Force one matmul variant by name (same as HELIOS_MATMUL_VARIANT). */
  variant?: string;
  quiet: boolean;
}

export type EpilogueArg = "none" | "bias" | "bias_gelu" | "bias_relu" | "bias_silu";

export const DEFAULT_SHAPES: Shape[] = [2048, 3072, 4096].map((s) => ({ m: s, n: s, k: s }));

export const DEFAULTS: Omit<CudaSuiteOptions, "shapes" | "checkShape"> = {
  suite: "cuda",
  iters: 40,
  warmup: 8,
  repeats: 3,
  warmMs: 400,
  rest: 0,
  dtype: "float16",
  check: true,
  torch: true,
  python: "python3",
  accF16: false,
  epilogue: "none",
  quiet: false,
};

export class ArgError extends Error {
  readonly code = "ERR_HELIOS_INVALID_ARGUMENT";
}

export function parseShape(s: string): Shape {
  const parts = s.trim().toLowerCase().split("x");
  if (parts.length !== 3 && parts.length !== 1) {
    throw new ArgError(`shape '${s}': expected MxNxK (e.g. 2048x2048x2048) or a single size`);
  }
  const nums = parts.map((p) => Number(p));
  for (const v of nums) {
    if (!Number.isInteger(v) || v < 1 || v > 1 << 20) {
      throw new ArgError(`shape '${s}': sizes must be integers in [1, 1048576]`);
    }
  }
  const [m, n, k] = nums.length === 1 ? [nums[0], nums[0], nums[0]] : nums;
  return { m, n, k };
}

export function shapeName(s: Shape): string {
  return `${s.m}x${s.n}x${s.k}`;
}

function parseBool(name: string, v: string): boolean {
  const x = v.toLowerCase();
  if (x === "true" || x === "1" || x === "yes" || x === "on" || x === "") return true;
  if (x === "false" || x === "0" || x === "no" || x === "off") return false;
  throw new ArgError(`--${name}=${v}: expected true or false`);
}

function parseInt(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ArgError(`--${name}=${v}: expected an integer in [${min}, ${max}]`);
  }
  return n;
}

function parseSeconds(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n) || n < min || n > max) {
    throw new ArgError(`--${name}=${v}: expected seconds in [${min}, ${max}]`);
  }
  return n;
}

const DTYPE_ALIASES: Record<string, BenchDtype> = {
  float16: "float16", f16: "float16", fp16: "float16", half: "float16",
  bfloat16: "bfloat16", bf16: "bfloat16",
  float32: "float32", f32: "float32", fp32: "float32", float: "float32",
};

const EPILOGUES: readonly EpilogueArg[] = ["none", "bias", "bias_gelu", "bias_relu", "bias_silu"];

/**
 * Parses `--key=value` / `--key value` / `--flag` arguments (everything after `bench`).
 * Unknown keys are errors: a typo must not silently benchmark the wrong thing.
 */
export function parseBenchArgs(argv: readonly string[]): CudaSuiteOptions {
  const o: CudaSuiteOptions = {
    ...DEFAULTS,
    shapes: DEFAULT_SHAPES,
    checkShape: { m: 384, n: 384, k: 384 },
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) throw new ArgError(`unexpected argument '${a}'`);
    const eq = a.indexOf("=");
    let key: string;
    let val: string;
    const KNOWN = ["suite", "iters", "warmup", "repeats", "warmMs", "warm-ms", "rest", "dtype", "shapes", "check", "checkShape", "check-shape", "out", "plot", "torch", "python", "accF16", "acc-f16", "epilogue", "variant", "quiet"];
    const name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
    if (!KNOWN.includes(name)) throw new ArgError(`unknown option --${name}`);
    if (eq >= 0) {
      key = a.slice(2, eq);
      val = a.slice(eq + 1);
    } else {
      key = a.slice(2);
      const next = argv[i + 1];
      const boolish = ["check", "torch", "accF16", "acc-f16", "quiet"].includes(key);
      if (next !== undefined && !next.startsWith("--") && (!boolish || /^(true|false|0|1)$/i.test(next))) {
        val = next;
        i++;
      } else if (boolish) {
        val = "true";
      } else {
        throw new ArgError(`--${key}: missing value`);
      }
    }
    switch (key) {
      case "suite":
        if (val !== "cuda") throw new ArgError(`--suite=${val}: expected cuda or train`);
        break;
      case "iters": o.iters = parseInt(key, val, 1, 100000); break;
      case "warmup": o.warmup = parseInt(key, val, 0, 100000); break;
      case "repeats": o.repeats = parseInt(key, val, 1, 100); break;
      case "warmMs": case "warm-ms": o.warmMs = parseInt(key, val, 0, 600000); break;
      case "rest": o.rest = parseSeconds(key, val, 0, 600); break;
      case "dtype": {
        const d = DTYPE_ALIASES[val.toLowerCase()];
        if (!d) throw new ArgError(`--dtype=${val}: expected float16, bfloat16 or float32`);
        o.dtype = d;
        break;
      }
      case "shapes":
        o.shapes = val.split(",").filter((s) => s.trim() !== "").map(parseShape);
        if (o.shapes.length === 0) throw new ArgError("--shapes: at least one shape");
        break;
      case "check": o.check = parseBool(key, val); break;
      case "checkShape": case "check-shape": o.checkShape = parseShape(val); break;
      case "out": o.out = val; break;
      case "plot": o.plot = val; break;
      case "torch": o.torch = parseBool(key, val); break;
      case "python": o.python = val; break;
      case "accF16": case "acc-f16": o.accF16 = parseBool(key, val); break;
      case "epilogue":
        if (!EPILOGUES.includes(val as EpilogueArg)) {
          throw new ArgError(`--epilogue=${val}: expected one of ${EPILOGUES.join(", ")}`);
        }
        o.epilogue = val as EpilogueArg;
        break;
      case "variant": o.variant = val; break;
      case "quiet": o.quiet = parseBool(key, val); break;
      default:
        throw new ArgError(`unknown option --${key}`);
    }
  }
  if (o.accF16 && o.dtype === "float32") {
    throw new ArgError("--accF16 needs --dtype=float16 (f16 accumulation of f32 inputs is not offered)");
  }
  return o;
}

export const USAGE = `usage: helios bench --suite=cuda [options]
  --iters=40 --warmup=8 --repeats=3     timing protocol (median of per-repeat medians)
  --warmMs=400 --rest=0                 sustained load (ms) before timing; idle seconds before
                                        each repeat (--rest=3 --warmMs=0: a rested board's burst)
  --dtype=float16|bfloat16|float32      input dtype (f32 accumulation)
  --shapes=2048x2048x2048,...           MxNxK list (a single number means a cube)
  --check=true --checkShape=384x384x384 correctness gate vs a CPU fp64 reference
  --out=perf/run.json --plot=out.svg    JSON report and SVG plot
  --accF16=true                         f16 accumulation variant (float16 only)
  --epilogue=none|bias|bias_gelu|...    fused epilogue timed with the matmul
  --variant=NAME                        force a matmul variant (as HELIOS_MATMUL_VARIANT)
  --torch=false --python=python3        PyTorch reference control
  --quiet                               no progress on stderr
usage: helios bench --suite=train [options]   GPT-2 training, Helios vs PyTorch (bench/train/suite.ts)
  --steps=50 --batch=16 --seq=1024      run length and shape (GPT-2 124M unless --tiny / --layers=...)
  --helios-modes=f32,matmul16 --torch-modes=...   sides to run; --no-torch, --python=python3
  --max-seconds=S --work-dir=D --out=perf/train.json`;
