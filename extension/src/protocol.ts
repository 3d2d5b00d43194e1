// The custom part of the protocol between this extension and `cuda-agent serve`
// (ARCHITECTURE.md, "Custom LSP methods"). Plain types: no vscode import.

/** LSP position and range (0-based lines and UTF-16 columns). */
export interface Position {
  line: number;
  character: number;
}
export interface Range {
  start: Position;
  end: Position;
}
export interface TextEdit {
  range: Range;
  newText: string;
}

/** Argument of the `cudaAgent.optimize` and `cudaAgent.benchmark` server commands. */
export interface KernelRef {
  uri: string;
  kernel: string;
}

export const OPTIMIZE_COMMAND = "cudaAgent.optimize";
export const BENCHMARK_COMMAND = "cudaAgent.benchmark";

/** `status` of an optimize run that found a verified, faster rewrite (fetch it with `cudaAgent/rewrite`). */
export const REWRITE_READY = "ok";

/** Result of `cudaAgent.optimize`: `status` is "ok", "not_improved", "baseline_failed", "busy" or "error". */
export interface OptimizeResult {
  runId: string;
  status: string;
  speedup: number;
  message: string;
}

/** Result of `cudaAgent.benchmark`. */
export interface BenchmarkResult {
  status: string;
  medianMs: number;
  relSpread: number;
  gbps: number;
  pctPeak: number;
  message: string;
}

/** `cudaAgent/rewrite` request: the verified rewrite of a run, for the side-by-side diff. */
export const REWRITE_REQUEST = "cudaAgent/rewrite";
export interface RewriteParams {
  runId: string;
}
export interface Rewrite {
  uri: string;
  version: number;
  kernel: string;
  original: string;
  rewritten: string;
  edits: TextEdit[];
  speedup: number;
  summary: string;
}

/**
 * `cudaAgent/results` request: the stored results per kernel,
 * `{results: [{file, kernel, benchmark, optimize}]}` (server/store.py records, snake_case).
 */
export const RESULTS_REQUEST = "cudaAgent/results";
export interface ResultsParams {
  uri?: string;
}

/** `cudaAgent/status` notification, server to client. */
export const STATUS_NOTIFICATION = "cudaAgent/status";
export interface ServerStatus {
  executor: string;
  device: string;
  running: { kernel: string; kind?: string; percent: number } | null;
}
