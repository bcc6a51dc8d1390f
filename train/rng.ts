// Seeded host RNG (mulberry32 + Box-Muller) for weight init, batch sampling and text sampling.
// The PyTorch reference never re-derives these: the suite exports weights and batches to files.

import { Mulberry32 } from "../ts/random.js";

export class Rng extends Mulberry32 {
  private spare: number | null = null;
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  normal(): number {
    if (this.spare !== null) {
      const s = this.spare;
      this.spare = null;
      return s;
    }
    const u1 = Math.max(this.next(), 1e-12), u2 = this.next();
    const r = Math.sqrt(-2 * Math.log(u1));
    this.spare = r * Math.sin(2 * Math.PI * u2);
    return r * Math.cos(2 * Math.PI * u2);
  }
}
