import assert from "node:assert/strict";
import { test } from "node:test";
import { finishedAction } from "../src/finished";
import type { BenchmarkRecord, RunFinished } from "../src/protocol";

const base: RunFinished = {
  runId: "r1",
  kind: "optimize",
  uri: "file:///ws/vadd.cu",
  kernel: "vadd",
  status: "ok",
  message: "",
  cancelled: false,
  rewriteReady: false,
  simulated: false,
};
const record: BenchmarkRecord = { medianMs: 1, q1Ms: 0.99, q3Ms: 1.01, relSpread: 0.02, gbps: 1234.4, pctPeak: 29.2, problem: "n=16", device: "H200", date: "", registers: 0, spillBytes: 0, gflops: 0, simulated: false };

test("an optimize run with a rewrite ready opens its preview", () => {
  assert.deepEqual(finishedAction({ ...base, rewriteReady: true }), { preview: true });
});

test("a benchmark's numbers, labelled when they come from the simulated GPU", () => {
  const bench = { ...base, kind: "benchmark" as const, benchmark: record };
  assert.deepEqual(finishedAction(bench), { preview: false, level: "info", text: "CUDA Agent: vadd: 1.000 ms (IQR ±1.0%), 1234 GB/s (29% of peak)", showResults: false });
  const simulated = finishedAction({ ...bench, simulated: true });
  assert.equal(simulated.preview === false && simulated.text, "CUDA Agent: vadd: 1.000 ms (IQR ±1.0%), 1234 GB/s (29% of peak) (simulated GPU, not measured)");
});

test("other ends are one message in the server's words, a warning unless the run went as it should", () => {
  const said = (run: Partial<RunFinished>) => {
    const action = finishedAction({ ...base, ...run });
    return action.preview ? "preview" : `${action.level}: ${action.text}${action.showResults ? " [Show results]" : ""}`;
  };
  // the server's message already carries the simulated label: not added twice
  assert.equal(said({ status: "not_improved", message: "simulated GPU, not measured: no reliably faster candidate", simulated: true }), "info: CUDA Agent: optimize vadd: simulated GPU, not measured: no reliably faster candidate");
  assert.equal(said({ status: "baseline_failed", message: "vadd.cu:3:1: error" }), "warning: CUDA Agent: optimize vadd: vadd.cu:3:1: error");
  assert.equal(said({ kind: "benchmark", status: "compile_error", message: "" }), "warning: CUDA Agent: benchmark vadd: compile_error");
  assert.equal(said({ kind: "compare", status: "mismatch", message: "vadd_x4 against vadd: mismatch" }), "warning: CUDA Agent: compare vadd: vadd_x4 against vadd: mismatch");
  assert.equal(said({ kind: "compare", status: "ok", message: "verified" }), "info: CUDA Agent: compare vadd: verified");
  assert.equal(said({ kind: "capture", status: "error", message: "program not found" }), "warning: CUDA Agent: capture vadd: program not found");
  assert.equal(said({ kind: "profile", status: "ok", message: "original: SOL 80%" }), "info: CUDA Agent: profile vadd: original: SOL 80% [Show results]");
  assert.equal(said({ kind: "profile", status: "unavailable", message: "no counters" }), "warning: CUDA Agent: profile vadd: no counters [Show results]");
});
