// A dependency-free grouped bar chart: Helios vs CUDA TFLOP/s per shape.
import type { BenchReport } from "./report.js";

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function niceMax(x: number): number {
  if (!(x > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const f of [1, 2, 2.5, 5, 10]) if (f * p >= x) return f * p;
  return 10 * p;
}

export function renderSvg(report: BenchReport): string {
  const rows = report.rows;
  const W = Math.max(480, 120 + rows.length * 110);
  const H = 360;
  const left = 60, right = 20, top = 50, bottom = 70;
  const plotW = W - left - right, plotH = H - top - bottom;
  const vmax = niceMax(Math.max(1e-9, ...rows.flatMap((r) => [r.heliosTflops, r.cudaTflops ?? 0].filter(Number.isFinite))));
  const y = (v: number) => top + plotH - (v / vmax) * plotH;
  const group = rows.length ? plotW / rows.length : plotW;
  const bw = Math.min(36, group / 3);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  const title = `matmul ${report.meta.dtype}${report.meta.accF16 ? " (f16 acc)" : ""} — ${report.meta.device}`;
  out.push(`<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`);
  for (let i = 0; i <= 5; i++) {
    const v = (vmax * i) / 5;
    out.push(`<line x1="${left}" x2="${W - right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#ddd"/>`);
    out.push(`<text x="${left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${+v.toFixed(1)}</text>`);
  }
  out.push(`<text transform="translate(16 ${top + plotH / 2}) rotate(-90)" text-anchor="middle">TFLOP/s</text>`);
  rows.forEach((r, i) => {
    const cx = left + group * (i + 0.5);
    const bars: [number | null, string, string][] = [
      [r.heliosTflops, "#d9822b", "helios"],
      [r.cudaTflops, "#4a7ebb", "cuda"],
    ];
    bars.forEach(([v, color, who], j) => {
      const x = cx - bw + j * bw;
      if (v === null || !Number.isFinite(v)) return;
      const yy = y(v);
      out.push(`<rect class="${who}" x="${x.toFixed(1)}" y="${yy.toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${(top + plotH - yy).toFixed(1)}" fill="${color}"><title>${esc(`${who} ${r.shape}: ${v.toFixed(1)} TFLOP/s`)}</title></rect>`);
      out.push(`<text x="${(x + bw / 2 - 1).toFixed(1)}" y="${(yy - 3).toFixed(1)}" text-anchor="middle" font-size="9">${v.toFixed(0)}</text>`);
    });
    out.push(`<text x="${cx.toFixed(1)}" y="${top + plotH + 16}" text-anchor="middle">${esc(r.shape)}</text>`);
    if (r.ratio !== null) out.push(`<text x="${cx.toFixed(1)}" y="${top + plotH + 30}" text-anchor="middle" fill="#555">ratio ${r.ratio.toFixed(2)}</text>`);
  });
  out.push(`<rect x="${W - right - 150}" y="30" width="10" height="10" fill="#d9822b"/><text x="${W - right - 136}" y="39">Helios</text>`);
  out.push(`<rect x="${W - right - 80}" y="30" width="10" height="10" fill="#4a7ebb"/><text x="${W - right - 66}" y="39">CUDA (PyTorch)</text>`);
  if (report.meta.note) out.push(`<text x="${left}" y="${H - 10}" fill="#a00">${esc(report.meta.note)}</text>`);
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}
