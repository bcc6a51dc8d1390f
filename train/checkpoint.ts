// Checkpoints: parameters, AdamW moments ("optim.m.<name>", "optim.v.<name>") and the step
// count in one safetensors file, so a run resumes exactly where it stopped.
import type { TensorData } from "../ts/types.js";
import type { GPTConfig } from "./config.js";
import type { TrainBackend } from "./backend.js";
import { upload } from "./params.js";
import { readSafetensors, writeSafetensors, type STensor } from "./safetensors.js";
import type { Trainer } from "./trainer.js";

function host(t: TensorData): Float32Array {
  return Float32Array.from(t.data as ArrayLike<number>);
}

export function saveCheckpoint(path: string, tr: Trainer, extra: Record<string, string> = {}): void {
  const out = new Map<string, STensor>();
  for (const s of tr.specs) {
    out.set(s.name, { shape: s.shape, data: host(tr.params.get(s.name)!) });
    out.set(`optim.m.${s.name}`, { shape: s.shape, data: host(tr.opt.m.get(s.name)!) });
    out.set(`optim.v.${s.name}`, { shape: s.shape, data: host(tr.opt.v.get(s.name)!) });
  }
  writeSafetensors(path, out, { ...extra, step: String(tr.opt.step), config: JSON.stringify(tr.cfg), format: "helios-gpt-v1" });
}

/** Config stored in a checkpoint (to build a Trainer of the right shape before loading). */
export function checkpointConfig(path: string): GPTConfig {
  const { metadata } = readSafetensors(path);
  if (!metadata.config) throw new Error(`${path}: no config in the checkpoint metadata`);
  return JSON.parse(metadata.config) as GPTConfig;
}

/** Replaces the trainer's parameters and optimizer state with the checkpoint's. */
export function loadCheckpoint(path: string, tr: Trainer): Record<string, string> {
  const { tensors, metadata } = readSafetensors(path);
  const B: TrainBackend = tr.B;
  const pick = (prefix: string): Map<string, Float32Array> => {
    const m = new Map<string, Float32Array>();
    for (const s of tr.specs) {
      const t = tensors.get(prefix + s.name);
      if (!t) throw new Error(`${path}: missing ${prefix}${s.name}`);
      if (t.shape.join() !== s.shape.join()) throw new Error(`${path}: ${prefix}${s.name} is [${t.shape}], the model needs [${s.shape}]`);
      m.set(s.name, t.data as Float32Array);
    }
    return m;
  };
  const replace = (old: Map<string, TensorData>, fresh: Map<string, TensorData>) => {
    for (const [k, t] of old) {
      B.releaseGpuTensor?.(t);
      old.set(k, fresh.get(k)!);
    }
  };
  replace(tr.params, upload(B, pick(""), tr.specs));
  replace(tr.opt.m, upload(B, pick("optim.m."), tr.specs));
  replace(tr.opt.v, upload(B, pick("optim.v."), tr.specs));
  tr.opt.step = Number(metadata.step ?? 0);
  return metadata;
}
