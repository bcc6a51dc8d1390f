import assert from "node:assert/strict";
import { test } from "node:test";
import { formatTable, makeRow, type BenchReport } from "../bench/report.js";
import { summarize } from "../bench/stats.js";
import { renderSvg } from "../bench/svg.js";
import { parseTorchOutput } from "../bench/torch.js";

function report(withCuda: boolean): BenchReport {
  const rows = [2048, 4096].map((s) =>
    makeRow({ m: s, n: s, k: s }, 1, "float16", "cm_128x128x32_w2x2", summarize([[0.1, 0.1], [0.09, 0.11], [0.1, 0.3]]),
      withCuda ? summarize([[0.05, 0.05]]) : null));
  return {
    meta: {
      suite: "cuda", device: "Test <GPU> & co", driver: "1.0", gitCommit: "abc", env: {}, timestamp: "t",
      dtype: "float16", accF16: false, epilogue: "none", iters: 2, warmup: 0, repeats: 3, warmMs: 400, rest: 0, protocol: "p",
      note: withCuda ? undefined : "Helios-only rows: no torch",
    },
    rows,
  };
}

test("rows carry the documented fields and ratio = cudaMs / heliosMs", () => {
  const r = report(true).rows[0];
  for (const key of ["shape", "heliosMs", "heliosP95Ms", "heliosCv", "cudaMs", "heliosTflops", "cudaTflops", "ratio", "variant"]) {
    assert.ok(key in r, key);
  }
  assert.equal(r.shape, "2048x2048x2048");
  assert.equal(r.heliosMs, 0.1);
  assert.equal(r.cudaMs, 0.05);
  assert.equal(r.ratio, 0.5);
  assert.ok(Math.abs(r.heliosTflops - (2 * 2048 ** 3) / 1e-4 / 1e12) < 1e-9);
  const json = JSON.parse(JSON.stringify(report(true)));
  assert.equal(json.rows.length, 2);
  assert.equal(json.meta.suite, "cuda");
});

test("Helios-only rows have null CUDA fields", () => {
  const r = report(false).rows[0];
  assert.equal(r.cudaMs, null);
  assert.equal(r.ratio, null);
  assert.match(formatTable(report(false).rows), /2048x2048x2048.*-/);
});

test("SVG is well-formed, escaped, with one bar per value", () => {
  const svg = renderSvg(report(true));
  assert.ok(svg.startsWith("<svg") && svg.trim().endsWith("</svg>"));
  assert.ok(svg.includes("Test &lt;GPU&gt; &amp; co"));
  assert.equal((svg.match(/class="helios"/g) ?? []).length, 2);
  assert.equal((svg.match(/class="cuda"/g) ?? []).length, 2);
  const only = renderSvg(report(false));
  assert.equal((only.match(/class="cuda"/g) ?? []).length, 0);
  assert.ok(only.includes("Helios-only"));
  // every opened tag is closed or self-closed
  const opens = (svg.match(/<(rect|text|line|svg|title)\b([^>]*[^/])?>/g) ?? []).length;
  const closes = (svg.match(/<\/(rect|text|line|svg|title)>/g) ?? []).length;
  assert.equal(opens, closes);
});

test("torch output parsing: rows, errors, garbage", () => {
  const ok = parseTorchOutput('noise\n{"ok":true,"device":"H200","torch":"2.11","rows":[{"shape":"8x8x8","repeats":[[1,2,3],[2,2,2],[3,3,3]]}]}');
  assert.equal(ok.ok, true);
  assert.equal(ok.byShape.get("8x8x8")?.ms, 2);
  const no = parseTorchOutput('{"ok":false,"error":"torch not importable: x","rows":[]}');
  assert.equal(no.ok, false);
  assert.match(no.note ?? "", /torch not importable/);
  assert.equal(parseTorchOutput("Traceback ...").ok, false);
});
