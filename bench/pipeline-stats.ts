// Reading the driver's pipeline statistics (VK_KHR_pipeline_executable_properties, with
// HELIOS_PIPELINE_STATS=1; bench/kernel-stats.ts): "spill" as the sum of the statistics named spill
// or stack. Not NVIDIA's "Local Memory Size": it is no spill count (2^36 for every flash backward
// kernel on the H200, whose "Stack Size" was 0; bench/FLASH_NOTES.md, the dK/dV race).

/** The sum of the statistics named spill or stack (0 when none is reported). */
export function spillOf(stats: Record<string, number>): number {
  return Object.entries(stats).filter(([n]) => /spill|stack/i.test(n)).reduce((a, [, v]) => a + v, 0);
}
