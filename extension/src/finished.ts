// What the editor does when a run ends (`cudaAgent/runFinished`), decided on the run's kind and
// `RunStatus`: open the rewrite's preview, or one notification in the server's words. The
// simulated GPU's numbers carry its label (the server's messages have it already).

import type { Level } from "./host";
import { type RunFinished, SIMULATED } from "./protocol";
import { spreadText } from "./results";

export type FinishedAction =
  | { preview: true }
  | {
      preview: false;
      level: Level;
      text: string;
      /** Offer a "Show results" button. */
      showResults: boolean;
    };

function say(level: Level, text: string, showResults = false): FinishedAction {
  return { preview: false, level, text: `CUDA Agent: ${text}`, showResults };
}

export function finishedAction(run: RunFinished): FinishedAction {
  if (run.kind === "optimize" && run.rewriteReady) {
    return { preview: true };
  }
  const b = run.benchmark;
  if (run.kind === "benchmark" && run.status === "ok" && b) {
    const simulated = run.simulated ? ` (${SIMULATED})` : "";
    return say("info", `${run.kernel}: ${b.medianMs.toFixed(3)} ms (${spreadText(b.relSpread)}), ${b.gbps.toFixed(0)} GB/s (${b.pctPeak.toFixed(0)}% of peak)${simulated}`);
  }
  if (run.kind === "profile") {
    return say(run.status === "ok" ? "info" : "warning", `profile ${run.kernel}: ${run.message}`, true);
  }
  const level = run.status === "ok" || run.status === "not_improved" ? "info" : "warning";
  return say(level, `${run.kind} ${run.kernel}: ${run.message || run.status}`);
}
