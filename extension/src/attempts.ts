// The attempts of a run (every candidate's verdict: the server's AttemptRecord, camelCase on the
// wire) as the results page lists them: one line each, expandable (<details>, no script) to its
// message and compile log. Plain functions: no vscode import.

import { escapeHtml } from "./html";
import type { AttemptRecord } from "./protocol";
import { formatSpeedup } from "./preview";

/** A candidate's verdict as the results page shows it: the server's AttemptRecord (generated in
 * ./protocol.generated), its reward 0 when the server had none (a cancelled candidate). */
export type Attempt = Required<AttemptRecord>;

/** The attempts a record carries (an optimize run's `history`). */
export function attemptsOf(records: AttemptRecord[]): Attempt[] {
  return records.map((a) => ({ ...a, reward: a.reward ?? 0 }));
}

/** Verified and timed: a point on the roofline. */
export function isVerified(a: Attempt): boolean {
  return a.status === "ok" && a.speedup > 0;
}

/** `5 ok · 3 mismatch · 1 compile_error`, most frequent first. */
export function verdictCounts(attempts: Attempt[]): string {
  const counts = new Map<string, number>();
  for (const a of attempts) {
    counts.set(a.status, (counts.get(a.status) ?? 0) + 1);
  }
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([status, n]) => `${n} ${status}`)
    .join(" · ");
}

/** One line: what was tried and its verdict. */
export function verdictText(a: Attempt): string {
  if (isVerified(a)) {
    const range = a.speedupLow > 0 ? ` (${formatSpeedup(a.speedupLow)}–${formatSpeedup(a.speedupHigh)})` : "";
    return `verified, ${formatSpeedup(a.speedup)}${range}`;
  }
  const parts: string[] = [a.status];
  if (a.compileLine > 0) {
    parts.push(`line ${a.compileLine}${a.compileColumn > 0 ? `:${a.compileColumn}` : ""}`);
  }
  if (a.firstBadIndex >= 0 && a.status === "mismatch") {
    parts.push(`first bad index ${a.firstBadIndex}`);
  }
  if (a.errorRatio > 0 && a.status === "mismatch") {
    parts.push(`error ${a.errorRatio.toPrecision(3)}× its bound`);
  }
  if (a.rule) {
    parts.push(`rule ${a.rule}`);
  }
  return parts.join(", ");
}

/** The list, each attempt expandable to its message, compile log and resources. */
export function attemptsHtml(attempts: Attempt[]): string {
  if (!attempts.length) {
    return "";
  }
  const items = attempts.map((a) => {
    const cls = isVerified(a) ? "ok" : "failed";
    const what = a.description || a.candidateId || `attempt ${a.index}`;
    const body: string[] = [];
    if (a.message) {
      body.push(`<pre>${escapeHtml(a.message)}</pre>`);
    }
    if (a.compileLog) {
      body.push(`<pre class="log">${escapeHtml(a.compileLog)}</pre>`);
    }
    const facts = [
      a.medianMs > 0 ? `${a.medianMs.toFixed(4)} ms median` : "",
      a.registers > 0 ? `${a.registers} registers` : "",
      a.spillStores + a.spillLoads > 0 ? `${a.spillStores + a.spillLoads} B spilled` : "",
      a.reward !== 0 ? `reward ${a.reward.toFixed(2)}` : "",
    ].filter(Boolean);
    if (facts.length) {
      body.push(`<p class="muted">${escapeHtml(facts.join(" · "))}</p>`);
    }
    return `<li><details><summary class="${cls}">#${a.index} ${escapeHtml(what)}: ${escapeHtml(verdictText(a))}</summary>${body.join("")}</details></li>`;
  });
  return `<details class="attempts"><summary>Attempts: ${escapeHtml(verdictCounts(attempts))}</summary><ol>${items.join("")}</ol></details>`;
}
