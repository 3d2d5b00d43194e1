// "Show last results": the stored results of `cudaAgent/results` as a static HTML page with a
// roofline-style chart per kernel (the device's ceiling, the kernel before and after), in plain SVG.
// No scripts, no external resources: the page's CSP allows only its own nonce-tagged style.

import { formatSpeedup } from "./preview";

export interface BenchmarkRow {
  medianMs: number;
  relSpread: number;
  gbps: number;
  pctPeak: number;
  problem: string;
  device: string;
  date: string;
}

export interface OptimizeRow {
  outcome: string;
  speedup: number;
  speedupLow: number;
  speedupHigh: number;
  baselineMs: number;
  candidateMs: number;
  summary: string;
  device: string;
  date: string;
}

/** The last "Compare with…" this kernel took part in (server/store.py CompareRecord). */
export interface CompareRow {
  role: string; // "original" or "rewrite"
  other: string;
  verified: boolean;
  status: string;
  headline: string;
  speedup: number;
  device: string;
  date: string;
}

export interface KernelRow {
  file: string;
  kernel: string;
  benchmark?: BenchmarkRow;
  optimize?: OptimizeRow;
  compare?: CompareRow;
}

type Json = Record<string, unknown>;

function obj(value: unknown): Json | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}
function num(record: Json, ...keys: string[]): number {
  for (const key of keys) {
    const value = record[key];
    if (typeof value === "number" && Number.isFinite(value)) {
      return value;
    }
  }
  return 0;
}
function str(record: Json, ...keys: string[]): string {
  for (const key of keys) {
    const value = record[key];
    if (typeof value === "string") {
      return value;
    }
  }
  return "";
}

function benchmarkRow(data: unknown): BenchmarkRow | undefined {
  const r = obj(data);
  return (
    r && {
      medianMs: num(r, "median_ms", "medianMs"),
      relSpread: num(r, "rel_spread", "relSpread"),
      gbps: num(r, "gbps"),
      pctPeak: num(r, "pct_peak", "pctPeak"),
      problem: str(r, "problem"),
      device: str(r, "device"),
      date: str(r, "date"),
    }
  );
}

function optimizeRow(data: unknown): OptimizeRow | undefined {
  const r = obj(data);
  return (
    r && {
      outcome: str(r, "outcome", "status"),
      speedup: num(r, "speedup"),
      speedupLow: num(r, "speedup_low", "speedupLow"),
      speedupHigh: num(r, "speedup_high", "speedupHigh"),
      baselineMs: num(r, "baseline_ms", "baselineMs"),
      candidateMs: num(r, "candidate_ms", "candidateMs"),
      summary: str(r, "summary"),
      device: str(r, "device"),
      date: str(r, "date"),
    }
  );
}

function compareRow(data: unknown): CompareRow | undefined {
  const r = obj(data);
  return (
    r && {
      role: str(r, "role"),
      other: str(r, "other"),
      verified: r.verified === true,
      status: str(r, "status"),
      headline: str(r, "headline"),
      speedup: num(r, "speedup"),
      device: str(r, "device"),
      date: str(r, "date"),
    }
  );
}

/**
 * Rows from the `cudaAgent/results` answer, `{results: [{file, kernel, benchmark, optimize}]}`,
 * sorted by file and kernel. Entries of another shape are skipped.
 */
export function kernelRows(response: unknown): KernelRow[] {
  const entries = obj(response)?.results;
  const rows: KernelRow[] = [];
  for (const entry of Array.isArray(entries) ? entries : []) {
    const r = obj(entry);
    if (r && typeof r.file === "string" && typeof r.kernel === "string") {
      rows.push({
        file: r.file,
        kernel: r.kernel,
        benchmark: benchmarkRow(r.benchmark),
        optimize: optimizeRow(r.optimize),
        compare: compareRow(r.compare),
      });
    }
  }
  return rows.sort((a, b) => a.file.localeCompare(b.file) || a.kernel.localeCompare(b.kernel));
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Whether the optimize run found a verified, faster rewrite (the loop's outcome "improved"). */
function verified(o: OptimizeRow): boolean {
  return o.outcome === "improved" && o.speedup > 0;
}

export interface ChartPoints {
  /** The device's copy bandwidth (the ceiling), GB/s. */
  ceilingGbps: number;
  beforeGbps: number;
  /** The verified rewrite moves the same bytes in 1/speedup of the time. */
  afterGbps?: number;
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

/** One kernel's chart: achieved bandwidth before and after against the device's ceiling. */
export function rooflineSvg(row: KernelRow, points: ChartPoints): string {
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

function timing(b: BenchmarkRow): string {
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
      `Optimize: ${formatSpeedup(o.speedup)} faster, verified (${formatSpeedup(o.speedupLow)}–${formatSpeedup(o.speedupHigh)}): ${o.baselineMs.toFixed(3)} → ${o.candidateMs.toFixed(3)} ms`,
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
  const points = chartPoints(row);
  const chart = points ? rooflineSvg(row, points) : `<p class="muted">No benchmark with a bandwidth yet: run Benchmark.</p>`;
  return `<section><h2>${escapeHtml(row.kernel)} <span class="muted">${escapeHtml(row.file)}</span></h2><ul>${facts.map((f) => `<li>${f}</li>`).join("")}</ul>${chart}</section>`;
}

/** The whole page. `nonce` tags the one style element the CSP allows. */
export function resultsHtml(response: unknown, nonce: string): string {
  const rows = kernelRows(response);
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
</style></head>
<body><h1>CUDA Agent: last results</h1>${body}</body></html>`;
}
