import assert from "node:assert/strict";
import { test } from "node:test";
import { arithmeticIntensity, attainableGflops, boundBy, logAxis, pctOfRoof, ridgeIntensity, rooflineSvg } from "../src/roofline";

// An H200 as the sandbox measured it: copy 4224 GB/s, FP32 GEMM 51,000 GFLOP/s, FP16 tensor 700,000.
const h200 = { peakGbps: 4224, peakGflops: 51_000, peakTensorGflops: 700_000 };

test("intensity is the spec's flops over its bytes, unknown (0) without either", () => {
  assert.equal(arithmeticIntensity(2 * 2048 ** 3, 3 * 4 * 2048 ** 2), 2048 / 6);
  assert.equal(arithmeticIntensity(0, 1000), 0);
  assert.equal(arithmeticIntensity(1000, 0), 0);
});

test("the roof is the bandwidth slope up to the ridge, then the compute ceiling", () => {
  const ridge = ridgeIntensity(h200);
  assert.ok(Math.abs(ridge - 51_000 / 4224) < 1e-9);
  assert.equal(attainableGflops(h200, 0.25), 0.25 * 4224); // saxpy-like: 2 flops per 8 bytes
  assert.equal(attainableGflops(h200, ridge * 10), 51_000);
  assert.ok(Math.abs(attainableGflops(h200, ridge) - 51_000) < 1e-6);
  assert.equal(attainableGflops(h200, 100, h200.peakTensorGflops), 100 * 4224); // the tensor ridge is further out
  assert.equal(boundBy(h200, 0.25), "memory");
  assert.equal(boundBy(h200, 341), "compute");
  assert.equal(pctOfRoof(h200, 0.25, 528), 50);
  assert.equal(pctOfRoof(h200, 1000, 25_500), 50);
});

test("a log axis spans whole decades and maps them evenly", () => {
  const axis = logAxis(0.05, 300, 0, 500);
  assert.deepEqual(axis.decades, [0.01, 0.1, 1, 10, 100, 1000]);
  assert.equal(axis.at(0.01), 0);
  assert.equal(axis.at(1000), 500);
  assert.ok(Math.abs(axis.at(1) - 200) < 1e-9);
});

test("the chart draws both ceilings and one dot per point, on the intensity's vertical", () => {
  const svg = rooflineSvg("sgemm<float>", {
    ceilings: h200,
    intensity: 341,
    points: [
      { label: "original", role: "original", gflops: 600 },
      { label: "#3 tile 64", role: "candidate", gflops: 9000 },
      { label: "winner (30×)", role: "winner", gflops: 18_000 },
    ],
  });
  assert.match(svg, /class="ceiling"/);
  assert.match(svg, /class="tensor"/);
  assert.match(svg, /FP32 51000 GFLOP\/s/);
  assert.match(svg, /copy 4224 GB\/s/);
  const dots = [...svg.matchAll(/<circle class="(\w+)" cx="([\d.]+)" cy="([\d.]+)"/g)];
  assert.deepEqual(dots.map((d) => d[1]), ["original", "candidate", "winner"]);
  assert.equal(new Set(dots.map((d) => d[2])).size, 1, "one intensity: one x");
  const ys = dots.map((d) => Number(d[3]));
  assert.ok(ys[0] > ys[1] && ys[1] > ys[2], `faster is higher: ${ys}`);
  assert.match(svg, /winner \(30×\): 18000 GFLOP\/s, 35% of the roof/);
  assert.match(svg, /sgemm&#60;float&#62;: roofline \(compute-bound/);
  const noTensor = rooflineSvg("k", { ceilings: { ...h200, peakTensorGflops: 0 }, intensity: 0.25, points: [{ label: "original", role: "original", gflops: 500 }] });
  assert.doesNotMatch(noTensor, /class="tensor"/);
  assert.match(noTensor, /memory-bound at 0\.250 flop\/byte/);
});
