// Parameter layout (nanoGPT's names and PyTorch nn.Linear's [out, in] weight layout, so the
// PyTorch reference loads the same file without renaming) and GPT-2 initialisation on the host.
import type { TensorData } from "../ts/types.js";
import type { GPTConfig } from "./config.js";
import type { TrainBackend } from "./backend.js";
import { Rng } from "./rng.js";

export type Init = "normal" | "residual" | "zeros" | "ones";

export interface ParamSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly init: Init;
  /** AdamW weight decay applies to matrices only (not biases, LayerNorm, or position table). */
  readonly decay: boolean;
}

export interface BlockParams {
  ln1w: TensorData; ln1b: TensorData;
  qkvW: TensorData; qkvB: TensorData;
  projW: TensorData; projB: TensorData;
  ln2w: TensorData; ln2b: TensorData;
  fcW: TensorData; fcB: TensorData;
  mlpW: TensorData; mlpB: TensorData;
}

/** Parameters by name, in `paramSpecs` order. */
export type Params = Map<string, TensorData>;

export function paramSpecs(c: GPTConfig): ParamSpec[] {
  const C = c.dim;
  const specs: ParamSpec[] = [
    { name: "transformer.wte.weight", shape: [c.vocab, C], init: "normal", decay: true },
    { name: "transformer.wpe.weight", shape: [c.blockSize, C], init: "normal", decay: true },
  ];
  for (let l = 0; l < c.layers; l++) {
    const p = `transformer.h.${l}.`;
    specs.push(
      { name: p + "ln_1.weight", shape: [C], init: "ones", decay: false },
      { name: p + "ln_1.bias", shape: [C], init: "zeros", decay: false },
      { name: p + "attn.c_attn.weight", shape: [3 * C, C], init: "normal", decay: true },
      { name: p + "attn.c_attn.bias", shape: [3 * C], init: "zeros", decay: false },
      { name: p + "attn.c_proj.weight", shape: [C, C], init: "residual", decay: true },
      { name: p + "attn.c_proj.bias", shape: [C], init: "zeros", decay: false },
      { name: p + "ln_2.weight", shape: [C], init: "ones", decay: false },
      { name: p + "ln_2.bias", shape: [C], init: "zeros", decay: false },
      { name: p + "mlp.c_fc.weight", shape: [4 * C, C], init: "normal", decay: true },
      { name: p + "mlp.c_fc.bias", shape: [4 * C], init: "zeros", decay: false },
      { name: p + "mlp.c_proj.weight", shape: [C, 4 * C], init: "residual", decay: true },
      { name: p + "mlp.c_proj.bias", shape: [C], init: "zeros", decay: false },
    );
  }
  specs.push(
    { name: "transformer.ln_f.weight", shape: [C], init: "ones", decay: false },
    { name: "transformer.ln_f.bias", shape: [C], init: "zeros", decay: false },
  );
  return specs;
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function paramCount(c: GPTConfig): number {
  return paramSpecs(c).reduce((n, s) => n + numel(s.shape), 0);
}

/** GPT-2 init: N(0, 0.02); residual projections N(0, 0.02/sqrt(2L)); LayerNorm 1/0; biases 0. */
export function initHostParams(c: GPTConfig, seed: number): Map<string, Float32Array> {
  const rng = new Rng(seed);
  const out = new Map<string, Float32Array>();
  const resid = 0.02 / Math.sqrt(2 * c.layers);
  for (const s of paramSpecs(c)) {
    const a = new Float32Array(numel(s.shape));
    if (s.init === "ones") a.fill(1);
    else if (s.init === "normal" || s.init === "residual") {
      const std = s.init === "normal" ? 0.02 : resid;
      for (let i = 0; i < a.length; i++) a[i] = rng.normal() * std;
    }
    out.set(s.name, a);
  }
  return out;
}

/** Uploads host arrays (Float32Array passed where Backend declares number[]: both are array-likes). */
export function upload(B: TrainBackend, host: Map<string, Float32Array>, specs: ParamSpec[]): Params {
  const p: Params = new Map();
  for (const s of specs) {
    const a = host.get(s.name);
    if (!a) throw new Error(`missing parameter ${s.name}`);
    if (a.length !== numel(s.shape)) throw new Error(`parameter ${s.name}: ${a.length} values for shape [${s.shape}]`);
    p.set(s.name, B.fromArray(a as unknown as number[], s.shape, "f32"));
  }
  return p;
}

export function block(p: Params, l: number): BlockParams {
  const g = (n: string): TensorData => {
    const t = p.get(`transformer.h.${l}.${n}`);
    if (!t) throw new Error(`missing parameter transformer.h.${l}.${n}`);
    return t;
  };
  return {
    ln1w: g("ln_1.weight"), ln1b: g("ln_1.bias"), qkvW: g("attn.c_attn.weight"), qkvB: g("attn.c_attn.bias"),
    projW: g("attn.c_proj.weight"), projB: g("attn.c_proj.bias"), ln2w: g("ln_2.weight"), ln2b: g("ln_2.bias"),
    fcW: g("mlp.c_fc.weight"), fcB: g("mlp.c_fc.bias"), mlpW: g("mlp.c_proj.weight"), mlpB: g("mlp.c_proj.bias"),
  };
}

export function get(p: Params, name: string): TensorData {
  const t = p.get(name);
  if (!t) throw new Error(`missing parameter ${name}`);
  return t;
}
