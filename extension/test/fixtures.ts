// Shared test data (not a test file: importing a *.test.ts would run its tests again).

import type { AttemptRecord } from "../src/protocol";

// The server's AttemptRecord, camelCase on the wire.
const base = { candidateId: "c", description: "", message: "", rule: "", duplicateOf: "", problem: "", output: "", values: "", firstBadIndex: -1, errorRatio: 0, compileLine: 0, compileColumn: 0, compileLog: "", speedup: 0, speedupLow: 0, speedupHigh: 0, medianMs: 0, registers: 0, spillStores: 0, spillLoads: 0, reward: 0 };
export const attempts: AttemptRecord[] = [
  { ...base, index: 0, candidateId: "block-256", description: "block 32 → 256", status: "ok", speedup: 2.01, speedupLow: 1.98, speedupHigh: 2.05, medianMs: 0.25, registers: 16, spillStores: 8, spillLoads: 4, reward: 1.2 },
  { ...base, index: 1, description: "float4 loads", status: "mismatch", message: "y[4097] = 3 (expected 1)", firstBadIndex: 4097, errorRatio: 12.5 },
  { ...base, index: 2, description: "unroll <x>", status: "compile_error", compileLine: 12, compileColumn: 5, compileLog: "saxpy.cu(12): error: identifier \"j\" is undefined" },
  { ...base, index: 3, description: "reuse output", status: "mismatch", rule: "output-unchanged" },
];
