// The attempts of a run (every candidate's verdict: the server's AttemptRecord, camelCase on the
// wire) as the results page lists them: one line each, expandable (<details>, no script) to its
// message, compile log and diff. Plain functions: no vscode import.

import { escapeHtml } from "./html";
import type { AttemptRecord } from "./protocol";
import { formatSpeedup } from "./preview";

/** The wire's AttemptRecord (generated in ./protocol), every number present, plus the candidate's
 * diff against the original when the server sends one. */
export type Attempt = Required<AttemptRecord> & { diff: string };

type Json = Record<string, unknown>;

function num(r: Json, key: string, absent = 0): number {
  const v = r[key];
  return typeof v === "number" && Number.isFinite(v) ? v : absent;
}
function str(r: Json, key: string): string {
  const v = r[key];
  return typeof v === "string" ? v : "";
}

/** The attempts of a run result or stored record (`attempts: [...]`); entries of another shape are skipped. */
export function parseAttempts(value: unknown): Attempt[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const out: Attempt[] = [];
  for (const item of value) {
    if (typeof item !== "object" || item === null || typeof (item as Json).status !== "string") {
      continue;
    }
    const r = item as Json;
    out.push({
      index: num(r, "index", out.length),
      candidateId: str(r, "candidateId"),
      description: str(r, "description"),
      status: str(r, "status"),
      message: str(r, "message"),
      rule: str(r, "rule"),
      duplicateOf: str(r, "duplicateOf"),
      problem: str(r, "problem"),
      output: str(r, "output"),
      firstBadIndex: num(r, "firstBadIndex", -1),
      values: str(r, "values"),
      errorRatio: num(r, "errorRatio"),
      compileLine: num(r, "compileLine"),
      compileColumn: num(r, "compileColumn"),
      compileLog: str(r, "compileLog"),
      speedup: num(r, "speedup"),
      speedupLow: num(r, "speedupLow"),
      speedupHigh: num(r, "speedupHigh"),
      medianMs: num(r, "medianMs"),
      registers: num(r, "registers"),
      spillStores: num(r, "spillStores"),
      spillLoads: num(r, "spillLoads"),
      reward: num(r, "reward"),
      diff: str(r, "diff"),
    });
  }
  return out;
}

/** The attempts a stored record carries (typed on the wire: every field present but `reward`). */
export function attemptsOf(records: AttemptRecord[]): Attempt[] {
  return records.map((a) => ({ ...a, reward: a.reward ?? 0, diff: "" }));
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
  const parts = [a.status];
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

function diffHtml(diff: string): string {
  const lines = diff.split("\n").map((line) => {
    const cls = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : "";
    return cls ? `<span class="${cls}">${escapeHtml(line)}</span>` : escapeHtml(line);
  });
  return `<pre class="diff">${lines.join("\n")}</pre>`;
}

/** The list, each attempt expandable to its message, compile log, resources and diff. */
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
    body.push(a.diff ? diffHtml(a.diff) : `<p class="muted">No diff in this result.</p>`);
    return `<li><details><summary class="${cls}">#${a.index} ${escapeHtml(what)}: ${escapeHtml(verdictText(a))}</summary>${body.join("")}</details></li>`;
  });
  return `<details class="attempts"><summary>Attempts: ${escapeHtml(verdictCounts(attempts))}</summary><ol>${items.join("")}</ol></details>`;
}
