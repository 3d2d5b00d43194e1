import assert from "node:assert/strict";
import { test } from "node:test";
import { chartPoints, kernelRows, resultsHtml, rooflineSvg } from "../src/results";

// What `cudaAgent/results` returns: the records of the server's result store (server/store.py).
const benchmark = {
  median_ms: 0.5,
  q1_ms: 0.49,
  q3_ms: 0.51,
  rel_spread: 0.04,
  gbps: 1290,
  pct_peak: 30,
  problem: "n=16777216",
  device: "NVIDIA H200",
  date: "2026-12-02T10:00:00Z",
};
const optimize = {
  run_id: "r1",
  outcome: "improved",
  speedup: 2.5,
  speedup_low: 2.4,
  speedup_high: 2.6,
  baseline_ms: 0.5,
  candidate_ms: 0.2,
  summary: "block 32 -> 256",
  device: "NVIDIA H200",
  date: "2026-12-02T10:05:00Z",
};
const store = {
  results: [
    { file: "src/vadd.cu", kernel: "vadd", benchmark, optimize },
    { file: "src/a.cu", kernel: "scale", benchmark: null, optimize: null },
    { file: 3, kernel: "malformed" },
  ],
};

test("rows from the store, sorted by file and kernel", () => {
  const rows = kernelRows(store);
  assert.deepEqual(rows.map((r) => `${r.file}:${r.kernel}`), ["src/a.cu:scale", "src/vadd.cu:vadd"]);
  assert.equal(rows[0].benchmark, undefined);
  assert.equal(rows[1].benchmark?.gbps, 1290);
  assert.equal(rows[1].optimize?.speedupHigh, 2.6);
  assert.deepEqual(kernelRows(undefined), []);
  assert.deepEqual(kernelRows({ results: { a: 1 } }), []);
});

test("the ceiling comes from the measured share of peak; after = same bytes in 1/speedup the time", () => {
  const points = chartPoints(kernelRows(store)[1]);
  assert.ok(points);
  assert.equal(Math.round(points.ceilingGbps), 4300);
  assert.equal(points.beforeGbps, 1290);
  assert.equal(points.afterGbps, 1290 * 2.5);
  const unverified = kernelRows({ results: [{ file: "f", kernel: "k", benchmark, optimize: { ...optimize, speedup: 0, outcome: "not_improved" } }] })[0];
  assert.equal(chartPoints(unverified)?.afterGbps, undefined);
  assert.equal(chartPoints(kernelRows(store)[0]), undefined);
});

test("bars are proportional to bandwidth and the ceiling is drawn", () => {
  const row = kernelRows(store)[1];
  const svg = rooflineSvg(row, { ceilingGbps: 4000, beforeGbps: 1000, afterGbps: 3000 });
  const heights = [...svg.matchAll(/<rect class="(before|after)"[^>]* height="([\d.]+)"/g)].map((m) => Number(m[2]));
  assert.equal(heights.length, 2);
  assert.ok(Math.abs(heights[1] / heights[0] - 3) < 0.01, `heights ${heights}`);
  assert.match(svg, /class="ceiling"/);
  assert.match(svg, /device ceiling 4000 GB\/s/);
  assert.match(svg, /3000 GB\/s · 75%/);
});

test("the page is self-contained, CSP-tagged and escapes what it shows", () => {
  const hostile = { results: [{ file: "<img src=x>.cu", kernel: "k<script>alert(1)</script>", benchmark, optimize: { ...optimize, summary: "<b>x</b>" } }] };
  const html = resultsHtml(hostile, "NONCE123");
  assert.match(html, /Content-Security-Policy" content="default-src 'none'; style-src 'nonce-NONCE123'/);
  assert.match(html, /<style nonce="NONCE123">/);
  assert.equal(/<script|<img|<b>/i.test(html), false);
  assert.equal(/https?:\/\//.test(html), false);
  assert.match(html, /2\.50× faster, verified/);
  assert.match(resultsHtml({ results: [] }, "n"), /No results yet/);
});

test("a Compare with… result shows on both kernels of the pair", () => {
  const compare = { run_id: "c1", verified: true, status: "ok", headline: "verified, 2.10x [2.05-2.15x]", speedup: 2.1, device: "NVIDIA H200", date: "2026-12-03" };
  const rows = kernelRows({
    results: [
      { file: "a.cu", kernel: "vadd", compare: { ...compare, role: "original", other: "vadd_x4" } },
      { file: "a.cu", kernel: "vadd_x4", compare: { ...compare, role: "rewrite", other: "vadd" } },
      { file: "b.cu", kernel: "k", compare: { ...compare, role: "original", other: "<i>x</i>", verified: false, status: "mismatch", headline: "mismatch: output `c`" } },
    ],
  });
  assert.equal(rows[0].compare?.verified, true);
  assert.equal(rows[2].compare?.verified, false);
  const html = resultsHtml({ results: [{ file: "a.cu", kernel: "vadd_x4", compare: { ...compare, role: "rewrite", other: "vadd" } }] }, "n");
  assert.match(html, /Compare as a rewrite of vadd: verified, 2\.10x \[2\.05-2\.15x\]/);
  const hostile = resultsHtml({ results: [{ file: "b.cu", kernel: "k", compare: { ...compare, role: "original", other: "<i>x</i>" } }] }, "n");
  assert.equal(/<i>/.test(hostile), false);
  assert.match(hostile, /Compare with &#60;i&#62;x&#60;\/i&#62;: verified/);
});
