// Text generation from a trained byte-level model: temperature sampling over the last
// position's logits, one forward per byte over a window of at most blockSize bytes.
import type { Trainer } from "./trainer.js";
import { Rng } from "./rng.js";

export function sampleText(tr: Trainer, prompt: string, length: number, temperature: number, seed: number, window: number): string {
  const rng = new Rng(seed);
  const bytes = [...Buffer.from(prompt, "latin1")];
  const V = tr.cfg.vocab;
  for (let i = 0; i < length; i++) {
    const ctx = bytes.slice(-window);
    const T = ctx.length;
    const idx = Int32Array.from(ctx);
    const logits = tr.lastLogits({ idx, targets: new Int32Array(T), B: 1, T });
    let m = -Infinity;
    for (let j = 0; j < V; j++) m = Math.max(m, logits[j] / temperature);
    const p = new Float64Array(V);
    let z = 0;
    for (let j = 0; j < V; j++) z += p[j] = Math.exp(logits[j] / temperature - m);
    let u = rng.next() * z, next = V - 1;
    for (let j = 0; j < V; j++) {
      u -= p[j];
      if (u <= 0) {
        next = j;
        break;
      }
    }
    bytes.push(next);
  }
  return Buffer.from(bytes).toString("latin1");
}
