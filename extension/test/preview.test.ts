import assert from "node:assert/strict";
import { test } from "node:test";
import { baseName, diffTitle, parsePreviewPath, PendingRewrites, previewUris, speedupText } from "../src/preview";
import { type Rewrite, SIMULATED } from "../src/protocol";

const original = "__global__ void vadd(const float* a, const float* b, float* c, int n) {\n  int i = threadIdx.x;\n}\n";
const rewritten = original.replace("const float* a", "const float* __restrict__ a");
const rewrite: Rewrite = {
  runId: "r1",
  uri: "file:///work/src/my%20kernels/vadd.cu",
  version: 7,
  kernel: "vadd",
  original,
  rewritten,
  speedup: 2.4321,
  summary: "__restrict__ on a, b, c",
  simulated: false,
};

// VS Code hands the content provider the URI's decoded path.
const pathOf = (uri: string) => decodeURIComponent(uri.slice("cuda-agent-rewrite:".length));

test("virtual URIs end in the file's name and round-trip to run and side", () => {
  const uris = previewUris("run/1 b", rewrite.uri);
  assert.equal(uris.original, "cuda-agent-rewrite:/run%2F1%20b/original/vadd.cu");
  assert.equal(uris.rewritten, "cuda-agent-rewrite:/run%2F1%20b/rewritten/vadd.cu");
  assert.deepEqual(parsePreviewPath(pathOf(uris.rewritten)), { runId: "run/1 b", side: "rewritten" });
  assert.deepEqual(parsePreviewPath(pathOf(uris.original)), { runId: "run/1 b", side: "original" });
  assert.equal(parsePreviewPath("/x/sideways/vadd.cu"), undefined);
  assert.equal(baseName("file:///a/b/c.cuh?x=1"), "c.cuh");
  assert.equal(baseName(rewrite.uri), "vadd.cu");
});

test("the diff title names the file and the measured speedup", () => {
  assert.equal(diffTitle(rewrite), "vadd.cu: original ↔ rewrite (2.43× faster, verified)");
  assert.match(diffTitle({ ...rewrite, speedup: 12.4 }), /\(12× faster/);
});

test("the simulated GPU's speedup is labelled as the server labels it, never as verified", () => {
  assert.equal(SIMULATED, "simulated GPU, not measured");
  assert.equal(speedupText({ speedup: 2, simulated: true }), `2.00× faster, ${SIMULATED}`);
  assert.equal(diffTitle({ ...rewrite, speedup: 2, simulated: true }), "vadd.cu: original ↔ rewrite (2.00× faster, simulated GPU, not measured)");
  assert.doesNotMatch(diffTitle({ ...rewrite, simulated: true }), /verified/);
});

test("pending rewrites serve both sides until settled", () => {
  const pending = new PendingRewrites();
  const uris = pending.add("r1", rewrite);
  assert.equal(pending.content(pathOf(uris.original)), original);
  assert.equal(pending.content(pathOf(uris.rewritten)), rewritten);
  assert.equal(pending.runOf(pathOf(uris.rewritten)), "r1");
  assert.equal(pending.size, 1);
  assert.equal(pending.settle("r1"), rewrite);
  assert.equal(pending.settle("r1"), undefined); // Accept after Discard does nothing
  assert.equal(pending.content(pathOf(uris.original)), undefined);
  assert.equal(pending.runOf(pathOf(uris.original)), undefined);
});
