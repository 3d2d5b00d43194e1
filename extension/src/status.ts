// The status-bar item: executor and device, the run in progress, the server's state.

import type { RunKind, ServerStatus } from "./protocol";

export type ServerState = "starting" | "running" | "stopped" | "failed";

export interface StatusView {
  text: string;
  tooltip: string;
}

/** What a run of each kind is doing, for the tooltip. */
const DOING: Record<RunKind, string> = {
  optimize: "optimizing",
  benchmark: "benchmarking",
  compare: "comparing",
  profile: "profiling",
  capture: "capturing a spec for",
  speedup: "making a program faster:",
};

export function statusView(state: ServerState, status: ServerStatus | undefined): StatusView {
  if (state === "starting") {
    return { text: "$(loading~spin) CUDA Agent", tooltip: "CUDA Agent: starting the language server" };
  }
  if (state !== "running") {
    const what = state === "failed" ? "could not start" : "is stopped";
    return { text: "$(error) CUDA Agent", tooltip: `CUDA Agent: the language server ${what}. Click to restart it; the "CUDA Agent" output has the details.` };
  }
  if (status === undefined) {
    return { text: "$(chip) CUDA Agent", tooltip: "CUDA Agent: language server running" };
  }
  const where = status.device && !status.executor.includes(status.device) ? `${status.executor} · ${status.device}` : status.executor;
  if (status.running) {
    const percent = Math.max(0, Math.min(100, Math.round(status.running.percent)));
    const doing = DOING[status.running.kind] ?? status.running.kind; // a newer server may run other kinds
    return {
      text: `$(sync~spin) CUDA: ${status.running.kernel} ${percent}%`,
      tooltip: `CUDA Agent: ${doing} ${status.running.kernel} (${percent}%) on ${where}`,
    };
  }
  return { text: `$(chip) CUDA: ${where}`, tooltip: `CUDA Agent: executor ${where}. Click for the last results.` };
}
