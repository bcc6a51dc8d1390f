// Order statistics shared by the matmul tuner and the bench tools (bench/stats.ts re-exports them).

/** The median; the mean of the middle two for an even count; NaN when empty. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}
