// "Show last results": the stored results of `cudaAgent/results` as a static HTML page: per kernel,
// its roofline (the device's measured ceilings; the original, each verified candidate and the
// winner at the spec's arithmetic intensity) or, without the spec's flops, its bandwidth against
// the copy ceiling; the attempts of its last run; its last Nsight Compute profile. Plain SVG and
// <details>: no scripts, no external resources; the page's CSP allows only its own nonce-tagged style.

import { type Attempt, attemptsHtml, attemptsOf, isVerified } from "./attempts";
import { escapeHtml } from "./html";
import { formatSpeedup } from "./preview";
import { SIMULATED } from "./protocol";
import type { BenchmarkRecord, KernelResults, OptimizeRecord, Profile, ProfileRecord, Results, Roofline } from "./protocol";
import { arithmeticIntensity, boundBy, pctOfRoof, type RooflineModel, type RooflinePoint, rooflineSvg } from "./roofline";

/** What this session saw of a kernel's last run (its `cudaAgent/runFinished`). */
export interface SessionRun {
  uri: string;
  kernel: string;
  optimize?: OptimizeRecord;
  simulated: boolean;
}

/** One kernel's stored records (the server's KernelResults, generated in ./protocol.generated) with
 * the attempts of its last run and whether any number came from the simulated GPU. */
export type KernelRow = KernelResults & {
  file: string;
  kernel: string;
  /** The last run's attempts: the stored ones, else this session's. */
  attempts: Attempt[];
  /** Measured on the simulated GPU: the numbers are not measurements. */
  simulated: boolean;
};

/** Whether `uri` (a document's) is the store's `file` (workspace-relative or absolute path). */
export function sameFile(uri: string, file: string): boolean {
  const path = decodeURIComponent(uri.replace(/^[a-z-]+:\/\/[^/]*/i, "").split(/[?#]/)[0]);
  return path === file || path.endsWith(`/${file}`);
}

/**
 * Rows from the `cudaAgent/results` answer (`Results`: each kernel's stored records by file), sorted
 * by file and kernel; `runs`: what this session's runs said (their optimize record, the simulated
 * label), latest last.
 */
export function kernelRows(response: Results | null | undefined, runs: SessionRun[] = []): KernelRow[] {
  const rows: KernelRow[] = [];
  for (const { file, kernel, results } of response?.results ?? []) {
    const { benchmark, optimize, compare, profile } = results;
    const run = runs.filter((s) => s.kernel === kernel && sameFile(s.uri, file)).pop();
    const history = optimize?.history.length ? optimize.history : (run?.optimize?.history ?? []);
    const devices = [benchmark?.device, optimize?.device, compare?.device, profile?.device];
    rows.push({
      file,
      kernel,
      ...results,
      attempts: attemptsOf(history),
      simulated: run?.simulated === true || [benchmark, optimize, compare].some((r) => r?.simulated) || devices.some((d) => d?.toLowerCase().includes("simulated")),
    });
  }
  return rows.sort((a, b) => a.file.localeCompare(b.file) || a.kernel.localeCompare(b.kernel));
}

/** Whether the optimize run found a verified, faster rewrite (the loop's outcome "improved"). */
function verified(o: OptimizeRecord): boolean {
  return o.outcome === "improved" && o.speedup > 0;
}

export interface ChartPoints {
  /** The device's copy bandwidth (the ceiling), GB/s. */
  ceilingGbps: number;
  beforeGbps: number;
  /** The verified rewrite moves the same bytes in 1/speedup of the time. */
  afterGbps?: number;
}

/**
 * The roofline of a kernel: the ceilings its records carry, its intensity from the spec's work, the
 * original's rate (the optimize run's baseline, else the benchmark's) and each verified candidate
 * and the winner at the original's rate times their speedup (the same flops in less time).
 * Undefined without ceilings, flops or a measured rate: the bandwidth chart stands in.
 */
export function rooflineModel(row: KernelRow): RooflineModel | undefined {
  const o = row.optimize;
  const b = row.benchmark;
  const roof = o?.roofline ?? b?.roofline;
  if (!roof || roof.peakGbps <= 0 || roof.peakGflops <= 0) {
    return undefined;
  }
  const intensity = arithmeticIntensity(roof.flops, roof.bytesMoved);
  const base = o?.baselineGflops || b?.gflops || 0;
  if (intensity <= 0 || base <= 0) {
    return undefined;
  }
  const points: RooflinePoint[] = [{ label: "original", role: "original", gflops: base }];
  for (const a of row.attempts.filter(isVerified)) {
    points.push({ label: `#${a.index} ${a.description || a.candidateId}`, role: "candidate", gflops: base * a.speedup });
  }
  if (o && verified(o)) {
    points.push({ label: `winner (${formatSpeedup(o.speedup)})`, role: "winner", gflops: base * o.speedup });
  }
  return { ceilings: roof, intensity, points };
}

/** The chart's numbers, or undefined when the kernel has no benchmark with a bandwidth. */
export function chartPoints(row: KernelRow): ChartPoints | undefined {
  const b = row.benchmark;
  if (!b || b.gbps <= 0 || b.pctPeak <= 0) {
    return undefined;
  }
  const o = row.optimize;
  return {
    ceilingGbps: b.gbps / (b.pctPeak / 100),
    beforeGbps: b.gbps,
    afterGbps: o && verified(o) ? b.gbps * o.speedup : undefined,
  };
}

const W = 420;
const H = 170;
const PAD = { left: 52, right: 16, top: 14, bottom: 30 };

/** One kernel's chart without the spec's flops: achieved bandwidth before and after against the copy ceiling. */
export function bandwidthSvg(row: KernelRow, points: ChartPoints): string {
  const top = Math.max(points.ceilingGbps, points.beforeGbps, points.afterGbps ?? 0) * 1.1;
  const plotH = H - PAD.top - PAD.bottom;
  const y = (gbps: number) => PAD.top + plotH * (1 - gbps / top);
  const bars: [string, number, string][] = [["before", points.beforeGbps, "before"]];
  if (points.afterGbps !== undefined) {
    bars.push(["after", points.afterGbps, "after"]);
  }
  const slot = (W - PAD.left - PAD.right) / 2;
  const parts: string[] = [];
  parts.push(`<line class="axis" x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${H - PAD.bottom}"/>`);
  parts.push(`<line class="axis" x1="${PAD.left}" y1="${H - PAD.bottom}" x2="${W - PAD.right}" y2="${H - PAD.bottom}"/>`);
  for (const tick of [0, 0.5, 1]) {
    const value = points.ceilingGbps * tick;
    parts.push(`<text class="tick" x="${PAD.left - 6}" y="${y(value) + 4}" text-anchor="end">${value.toFixed(0)}</text>`);
  }
  const cy = y(points.ceilingGbps).toFixed(1);
  parts.push(`<line class="ceiling" x1="${PAD.left}" y1="${cy}" x2="${W - PAD.right}" y2="${cy}"/>`);
  parts.push(
    `<text class="label" x="${W - PAD.right}" y="${Number(cy) - 4}" text-anchor="end">device ceiling ${points.ceilingGbps.toFixed(0)} GB/s</text>`,
  );
  bars.forEach(([name, gbps, cls], i) => {
    const x = PAD.left + slot * i + slot * 0.25;
    const by = y(gbps);
    const pct = (100 * gbps) / points.ceilingGbps;
    parts.push(
      `<rect class="${cls}" x="${x.toFixed(1)}" y="${by.toFixed(1)}" width="${(slot * 0.5).toFixed(1)}" height="${(H - PAD.bottom - by).toFixed(1)}"><title>${name}: ${gbps.toFixed(0)} GB/s (${pct.toFixed(0)}% of ceiling)</title></rect>`,
    );
    parts.push(`<text class="label" x="${(x + slot * 0.25).toFixed(1)}" y="${(by - 4).toFixed(1)}" text-anchor="middle">${gbps.toFixed(0)} GB/s · ${pct.toFixed(0)}%</text>`);
    parts.push(`<text class="tick" x="${(x + slot * 0.25).toFixed(1)}" y="${H - PAD.bottom + 16}" text-anchor="middle">${name}</text>`);
  });
  const title = `${escapeHtml(row.kernel)}: achieved bandwidth against the device ceiling`;
  return `<svg role="img" aria-label="${title}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${parts.join("")}</svg>`;
}

/** A timing's spread as every view shows it (server/texts.py spread_text): half the IQR over the median. */
export function spreadText(relSpread: number): string {
  return `IQR ±${(50 * relSpread).toFixed(1)}%`;
}

function timing(b: BenchmarkRecord): string {
  return `${b.medianMs.toFixed(3)} ms (${spreadText(b.relSpread)})`;
}

function kernelSection(row: KernelRow): string {
  const facts: string[] = [];
  const b = row.benchmark;
  if (b) {
    facts.push(`Benchmark (${escapeHtml(b.problem)}): ${timing(b)}, ${b.gbps.toFixed(0)} GB/s, ${b.pctPeak.toFixed(0)}% of peak`);
  }
  const o = row.optimize;
  if (o && verified(o)) {
    facts.push(
      `Optimize: ${formatSpeedup(o.speedup)} faster, ${row.simulated ? SIMULATED : "verified"} (${formatSpeedup(o.speedupLow)}–${formatSpeedup(o.speedupHigh)}): ${o.baselineMs.toFixed(3)} → ${o.candidateMs.toFixed(3)} ms`,
    );
  } else if (o) {
    facts.push(`Optimize: ${escapeHtml(o.outcome || "no verified rewrite")}`);
  }
  if (o?.summary) {
    facts.push(escapeHtml(o.summary));
  }
  const c = row.compare;
  if (c) {
    const pair = c.role === "rewrite" ? `as a rewrite of ${c.other}` : `with ${c.other}`;
    facts.push(`Compare ${escapeHtml(pair)}: ${escapeHtml(c.headline || c.status)}`);
  }
  const device = b?.device || o?.device;
  const date = o?.date || b?.date;
  if (device || date) {
    facts.push(`<span class="muted">${escapeHtml([device, date].filter(Boolean).join(" · "))}</span>`);
  }
  const simulated = row.simulated ? ` <span class="simulated">${SIMULATED}</span>` : "";
  return `<section><h2>${escapeHtml(row.kernel)} <span class="muted">${escapeHtml(row.file)}</span>${simulated}</h2><ul>${facts.map((f) => `<li>${f}</li>`).join("")}</ul>${chart(row)}${attemptsHtml(row.attempts)}${row.profile ? profileHtml(row.profile) : ""}</section>`;
}

function chart(row: KernelRow): string {
  const model = rooflineModel(row);
  if (model) {
    const c = model.ceilings;
    const best = Math.max(...model.points.map((p) => p.gflops));
    const note = `${boundBy(c, model.intensity)}-bound at ${model.intensity.toPrecision(3)} flop/byte; best point ${pctOfRoof(c, model.intensity, best).toFixed(0)}% of its roof`;
    return `${rooflineSvg(row.kernel, model)}<p class="muted">${escapeHtml(note)}</p>`;
  }
  const points = chartPoints(row);
  if (!points) {
    return `<p class="muted">No benchmark with a bandwidth yet: run Benchmark.</p>`;
  }
  const why = rooflineRowOf(row) ? "add `work flops=...` to its spec to place it on the roofline" : "";
  return bandwidthSvg(row, points) + (why ? `<p class="muted">${escapeHtml(why)}</p>` : "");
}

function rooflineRowOf(row: KernelRow): Roofline | undefined {
  return row.optimize?.roofline ?? row.benchmark?.roofline;
}

function bytes(n: number): string {
  for (const [unit, scale] of [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]] as const) {
    if (n >= scale) {
      return `${(n / scale).toPrecision(3)} ${unit}`;
    }
  }
  return `${n.toFixed(0)} B`;
}

/** The last profile as a table: one column per profiled kernel (original, rewrite). */
export function profileHtml(p: ProfileRecord): string {
  const pct = (v: number) => `${v.toFixed(0)}%`;
  const rows: [string, (m: Profile) => string][] = [
    ["SOL memory", (m) => `${pct(m.memoryPct)} (DRAM ${pct(m.dramPct)})`],
    ["SOL compute", (m) => pct(m.computePct)],
    ["occupancy", (m) => pct(m.achievedOccupancyPct) + (m.theoreticalOccupancyPct ? ` of ${pct(m.theoreticalOccupancyPct)} theoretical` : "")],
    ["limited by", (m) => m.occupancyLimiter || "?"],
    ["top stalls", (m) => m.stalls.map((s) => `${s.reason} ${s.perIssue.toFixed(2)}`).join(", ") || "none"],
    ["DRAM / L2 bytes", (m) => `${bytes(m.dramBytes)} / ${bytes(m.l2Bytes)} (L2 hit ${pct(m.l2HitPct)})`],
    ["duration", (m) => `${m.durationUs.toPrecision(4)} µs`],
  ];
  const head = `<tr><th></th>${p.kernels.map((k) => `<th>${escapeHtml(k.label)}</th>`).join("")}</tr>`;
  const body = p.kernels.every((k) => !k.profile.available)
    ? ""
    : rows.map(([name, cell]) => `<tr><td>${name}</td>${p.kernels.map((k) => `<td>${k.profile.available ? escapeHtml(cell(k.profile)) : "–"}</td>`).join("")}</tr>`).join("");
  const missing = p.kernels
    .filter((k) => !k.profile.available)
    .map((k) => `<p class="muted">${escapeHtml(k.label)}: no metrics: ${escapeHtml(k.profile.message)}</p>`)
    .join("");
  const where = `<span class="muted">${escapeHtml([p.problem, p.device, p.date].filter(Boolean).join(" · "))}</span>`;
  return `<h3>Nsight Compute profile ${where}</h3>${body ? `<table class="profile">${head}${body}</table>` : ""}${missing}`;
}

/** The whole page. `nonce` tags the one style element the CSP allows; `runs`: this session's run results. */
export function resultsHtml(response: Results | null | undefined, nonce: string, runs: SessionRun[] = []): string {
  const rows = kernelRows(response, runs);
  const body = rows.length
    ? rows.map(kernelSection).join("")
    : `<p class="muted">No results yet: use Benchmark or Optimize above a kernel.</p>`;
  const csp = `default-src 'none'; style-src 'nonce-${nonce}'; img-src data:;`;
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<title>CUDA Agent results</title>
<style nonce="${nonce}">
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); }
h2 { font-size: 1.1em; margin-bottom: 0.2em; }
.muted { color: var(--vscode-descriptionForeground); font-weight: normal; }
svg text { fill: var(--vscode-foreground); font-size: 11px; }
svg .axis { stroke: var(--vscode-foreground); stroke-opacity: 0.5; }
svg .ceiling { stroke: var(--vscode-charts-red, #d33); stroke-dasharray: 5 3; stroke-width: 1.5; }
svg .before { fill: var(--vscode-charts-blue, #37c); }
svg .after { fill: var(--vscode-charts-green, #3a3); }
svg .tensor { stroke: var(--vscode-charts-purple, #93c); stroke-dasharray: 2 3; stroke-width: 1.5; }
svg path.ceiling { stroke-dasharray: none; }
svg .intensity { stroke: var(--vscode-foreground); stroke-opacity: 0.2; }
svg circle.original { fill: var(--vscode-charts-blue, #37c); }
svg circle.candidate { fill: var(--vscode-charts-yellow, #cb3); fill-opacity: 0.8; }
svg circle.winner { fill: var(--vscode-charts-green, #3a3); }
.simulated { color: var(--vscode-editorWarning-foreground, #c90); font-size: 0.8em; font-weight: normal; border: 1px solid currentColor; border-radius: 3px; padding: 0 4px; }
summary.ok { color: var(--vscode-charts-green, #3a3); }
summary.failed { color: var(--vscode-descriptionForeground); }
pre { white-space: pre-wrap; font-family: var(--vscode-editor-font-family); font-size: 0.9em; }
pre .add { color: var(--vscode-charts-green, #3a3); }
pre .del { color: var(--vscode-charts-red, #d33); }
table.profile td, table.profile th { text-align: left; padding: 1px 10px 1px 0; }
</style></head>
<body><h1>CUDA Agent: last results</h1>${body}</body></html>`;
}
