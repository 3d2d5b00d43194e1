import assert from "node:assert/strict";
import { test } from "node:test";
import { statusView } from "../src/status";

test("idle: executor and device", () => {
  const view = statusView("running", { executor: "local", device: "NVIDIA H200", running: null });
  assert.equal(view.text, "$(chip) CUDA: local · NVIDIA H200");
  const named = statusView("running", { executor: "test (simulated GPU)", device: "simulated GPU", running: null });
  assert.equal(named.text, "$(chip) CUDA: test (simulated GPU)");
});

test("a run in progress shows the kernel and a clamped percent", () => {
  const view = statusView("running", { executor: "remote", device: "", running: { runId: "r", kind: "optimize", kernel: "vadd", percent: 41.6 } });
  assert.equal(view.text, "$(sync~spin) CUDA: vadd 42%");
  assert.match(view.tooltip, /optimizing vadd \(42%\) on remote$/);
  const bench = statusView("running", { executor: "local", device: "", running: { runId: "r", kernel: "vadd", kind: "benchmark", percent: 0 } });
  assert.match(bench.tooltip, /benchmarking vadd/);
  const capture = statusView("running", { executor: "local", device: "", running: { runId: "r", kernel: "vadd", kind: "capture", percent: 0 } });
  assert.match(capture.tooltip, /capturing a spec for vadd/);
  assert.equal(statusView("running", { executor: "x", device: "", running: { runId: "r", kind: "optimize", kernel: "k", percent: 250 } }).text, "$(sync~spin) CUDA: k 100%");
});

test("server states before any status notification", () => {
  assert.match(statusView("starting", undefined).text, /loading~spin/);
  assert.match(statusView("failed", undefined).tooltip, /could not start/);
  assert.match(statusView("stopped", { executor: "local", device: "", running: null }).tooltip, /is stopped/);
  assert.equal(statusView("running", undefined).text, "$(chip) CUDA Agent");
});
