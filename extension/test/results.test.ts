import assert from "node:assert/strict";
import { test } from "node:test";
import { attempts } from "./fixtures";
import type { BenchmarkRecord, CompareRecord, KernelEntry, KernelResults, OptimizeRecord, Profile, ProfileRecord, Results } from "../src/protocol";
import { bandwidthSvg, chartPoints, kernelRows, resultsHtml, rooflineModel, sameFile } from "../src/results";

// What `cudaAgent/results` returns: the records of the server's result store (agent/records.py), camelCase keys.
const benchmark: BenchmarkRecord = {
  medianMs: 0.5,
  q1Ms: 0.49,
  q3Ms: 0.51,
  relSpread: 0.04,
  gbps: 1290,
  pctPeak: 30,
  problem: "n=16777216",
  device: "NVIDIA H200",
  date: "2026-12-02T10:00:00Z",
  registers: 16,
  spillBytes: 0,
  gflops: 0,
  simulated: false,
};
const optimize: OptimizeRecord = {
  runId: "r1",
  outcome: "improved",
  speedup: 2.5,
  speedupLow: 2.4,
  speedupHigh: 2.6,
  baselineMs: 0.5,
  baselineSpread: 0.02,
  candidateMs: 0.2,
  candidateSpread: 0.02,
  sizes: ["n=16777216", "n=1000"],
  seeds: 3,
  tolerance: "calibrated",
  summary: "block 32 -> 256",
  device: "NVIDIA H200",
  date: "2026-12-02T10:05:00Z",
  attempts: 4,
  stopReason: "budget",
  stopKind: "candidates",
  originalHash: "",
  rewrittenHash: "",
  launchTodo: "",
  baselineGbps: 1290,
  baselineGflops: 0,
  simulated: false,
  history: [],
};
function entry(file: string, kernel: string, results: KernelResults): KernelEntry {
  return { file, kernel, results };
}
function page(...entries: KernelEntry[]): Results {
  return { results: entries };
}
const store = page(entry("src/vadd.cu", "vadd", { benchmark, optimize }), entry("src/a.cu", "scale", {}));

test("rows from the store, sorted by file and kernel", () => {
  const rows = kernelRows(store);
  assert.deepEqual(rows.map((r) => `${r.file}:${r.kernel}`), ["src/a.cu:scale", "src/vadd.cu:vadd"]);
  assert.equal(rows[0].benchmark, undefined);
  assert.equal(rows[1].benchmark?.gbps, 1290);
  assert.equal(rows[1].optimize?.speedupHigh, 2.6);
  assert.deepEqual(kernelRows(null), []);
});

test("the ceiling comes from the measured share of peak; after = same bytes in 1/speedup the time", () => {
  const points = chartPoints(kernelRows(store)[1]);
  assert.ok(points);
  assert.equal(Math.round(points.ceilingGbps), 4300);
  assert.equal(points.beforeGbps, 1290);
  assert.equal(points.afterGbps, 1290 * 2.5);
  const unverified = kernelRows(page(entry("f", "k", { benchmark, optimize: { ...optimize, speedup: 0, outcome: "not_improved" } })))[0];
  assert.equal(chartPoints(unverified)?.afterGbps, undefined);
  assert.equal(chartPoints(kernelRows(store)[0]), undefined);
});

test("bars are proportional to bandwidth and the ceiling is drawn", () => {
  const row = kernelRows(store)[1];
  const svg = bandwidthSvg(row, { ceilingGbps: 4000, beforeGbps: 1000, afterGbps: 3000 });
  const heights = [...svg.matchAll(/<rect class="(before|after)"[^>]* height="([\d.]+)"/g)].map((m) => Number(m[2]));
  assert.equal(heights.length, 2);
  assert.ok(Math.abs(heights[1] / heights[0] - 3) < 0.01, `heights ${heights}`);
  assert.match(svg, /class="ceiling"/);
  assert.match(svg, /device ceiling 4000 GB\/s/);
  assert.match(svg, /3000 GB\/s · 75%/);
});

test("the page is self-contained, CSP-tagged and escapes what it shows", () => {
  const hostile = page(entry("<img src=x>.cu", "k<script>alert(1)</script>", { benchmark, optimize: { ...optimize, summary: "<b>x</b>" } }));
  const html = resultsHtml(hostile, "NONCE123");
  assert.match(html, /Content-Security-Policy" content="default-src 'none'; style-src 'nonce-NONCE123'/);
  assert.match(html, /<style nonce="NONCE123">/);
  assert.equal(/<script|<img|<b>/i.test(html), false);
  assert.equal(/https?:\/\//.test(html), false);
  assert.match(html, /2\.50× faster, verified/);
  assert.match(resultsHtml(page(), "n"), /No results yet/);
});

test("a Compare with… result shows on both kernels of the pair", () => {
  const compare: Omit<CompareRecord, "role" | "other"> = {
    runId: "c1",
    verified: true,
    status: "ok",
    headline: "verified, 2.10x [2.05-2.15x]",
    speedup: 2.1,
    speedupLow: 2.05,
    speedupHigh: 2.15,
    originalMs: 0.5,
    rewriteMs: 0.24,
    device: "NVIDIA H200",
    date: "2026-12-03",
    kernelHash: "",
    simulated: false,
  };
  const rows = kernelRows(
    page(
      entry("a.cu", "vadd", { compare: { ...compare, role: "original", other: "vadd_x4" } }),
      entry("a.cu", "vadd_x4", { compare: { ...compare, role: "rewrite", other: "vadd" } }),
      entry("b.cu", "k", { compare: { ...compare, role: "original", other: "<i>x</i>", verified: false, status: "mismatch", headline: "mismatch: output `c`" } }),
    ),
  );
  assert.equal(rows[0].compare?.verified, true);
  assert.equal(rows[2].compare?.verified, false);
  const html = resultsHtml(page(entry("a.cu", "vadd_x4", { compare: { ...compare, role: "rewrite", other: "vadd" } })), "n");
  assert.match(html, /Compare as a rewrite of vadd: verified, 2\.10x \[2\.05-2\.15x\]/);
  const hostile = resultsHtml(page(entry("b.cu", "k", { compare: { ...compare, role: "original", other: "<i>x</i>" } })), "n");
  assert.equal(/<i>/.test(hostile), false);
  assert.match(hostile, /Compare with &#60;i&#62;x&#60;\/i&#62;: verified/);
});

test("with the spec's flops and the device's ceilings, the kernel is on the roofline with each verified candidate", () => {
  const roofline = { peakGbps: 4300, peakGflops: 60_000, peakTensorGflops: 0, bytesMoved: 12 * 2 ** 24, flops: 2 * 2 ** 24 };
  const withRoof = page(entry("src/vadd.cu", "vadd", { benchmark: { ...benchmark, gflops: 215, roofline }, optimize: { ...optimize, baselineGflops: 200, roofline, history: attempts } }));
  const [row] = kernelRows(withRoof);
  const model = rooflineModel(row);
  assert.ok(model);
  assert.ok(Math.abs(model.intensity - 1 / 6) < 1e-12);
  // the optimize run's baseline (its speedups are against it), one verified candidate, the winner
  assert.deepEqual(
    model.points.map((p) => [p.role, Math.round(p.gflops)]),
    [["original", 200], ["candidate", 402], ["winner", 500]],
  );
  const html = resultsHtml(withRoof, "n");
  assert.match(html, /<circle class="winner"/);
  assert.match(html, /memory-bound at 0\.167 flop\/byte/);
  assert.match(html, /Attempts: 2 mismatch · 1 compile_error · 1 ok/);
  // without flops in the spec: the bandwidth chart, and how to get the roofline
  const noFlops = page(entry("src/vadd.cu", "vadd", { benchmark: { ...benchmark, roofline: { ...roofline, flops: 0 } } }));
  assert.equal(rooflineModel(kernelRows(noFlops)[0]), undefined);
  assert.match(resultsHtml(noFlops, "n"), /rect class="before".*add `work flops=\.\.\.` to its spec/s);
});

test("this session's run gives the attempts and the simulated label when the store has none", () => {
  const runs = [{ uri: "file:///home/u/ws/src/vadd.cu", kernel: "vadd", optimize: { ...optimize, history: attempts }, simulated: true }];
  const [row] = kernelRows(store, runs).filter((r) => r.kernel === "vadd");
  assert.equal(row.attempts.length, 4);
  assert.equal(row.simulated, true);
  const html = resultsHtml(store, "n", runs);
  assert.match(html, /vadd <span class="muted">src\/vadd\.cu<\/span> <span class="simulated">simulated GPU, not measured<\/span>/);
  // the optimize line says where its number comes from, as the hint and the hover say it
  assert.match(html, /Optimize: 2\.50× faster, simulated GPU, not measured \(/);
  assert.doesNotMatch(html, /faster, verified/);
  assert.equal(kernelRows(store, [{ ...runs[0], uri: "file:///elsewhere/vadd.cu" }])[1].attempts.length, 0);
  assert.equal(sameFile("file:///home/u/ws/src/my%20k.cu", "src/my k.cu"), true);
  assert.equal(sameFile("file:///home/u/ws/xsrc/vadd.cu", "src/vadd.cu"), false);
  const simulatedDevice = page(entry("a.cu", "k", { benchmark: { ...benchmark, device: "simulated GPU" } }));
  assert.equal(kernelRows(simulatedDevice)[0].simulated, true);
  assert.equal(kernelRows(store)[1].simulated, false);
});

test("the last profile is a table per profiled kernel, or says why there are no metrics", () => {
  const metrics: Profile = { available: true, message: "", memoryPct: 88.4, dramPct: 88.4, computePct: 14.7, achievedOccupancyPct: 83.3, theoreticalOccupancyPct: 100, occupancyLimiter: "warps (block size)", l2HitPct: 50, durationUs: 121.95, dramBytes: 402_735_104, l2Bytes: 811_452_416, stalls: [{ reason: "long_scoreboard", perIssue: 21.64 }] };
  const unavailable: Profile = { ...metrics, available: false, message: "not profiled: mismatch", memoryPct: 0, stalls: [] };
  const profile: ProfileRecord = { runId: "p", problem: "n=33554432", device: "NVIDIA H200", date: "2026-12-04", kernelHash: "", kernels: [{ label: "original", description: "saxpy", profile: metrics, status: "ok", message: "" }, { label: "rewrite", description: "float4", profile: unavailable, status: "mismatch", message: "y[3] differs" }] };
  const html = resultsHtml(page(entry("a.cu", "saxpy", { profile })), "n");
  assert.match(html, /<th>original<\/th><th>rewrite<\/th>/);
  assert.match(html, /<td>SOL memory<\/td><td>88% \(DRAM 88%\)<\/td><td>–<\/td>/);
  assert.match(html, /<td>limited by<\/td><td>warps \(block size\)<\/td>/);
  assert.match(html, /<td>occupancy<\/td><td>83% of 100% theoretical<\/td>/);
  assert.match(html, /<td>DRAM \/ L2 bytes<\/td><td>403 MB \/ 811 MB \(L2 hit 50%\)<\/td>/);
  assert.match(html, /long_scoreboard 21\.64/);
  assert.match(html, /rewrite: no metrics: not profiled: mismatch/);
  const none = resultsHtml(page(entry("a.cu", "saxpy", { profile: { ...profile, kernels: [profile.kernels[1]] } })), "n");
  assert.doesNotMatch(none, /<table class="profile">/);
});
