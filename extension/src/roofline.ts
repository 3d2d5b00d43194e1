// The roofline of one kernel: the device's measured ceilings (copy bandwidth, FP32 and tensor-core
// GEMM rates, from the sandbox's own measurements) and the kernel's measured points (the original,
// each verified candidate, the winner) at the arithmetic intensity of the spec's `work`. Plain math
// and SVG text: no vscode import (unit-tested under node).

import { escapeHtml } from "./html";
import type { Roofline } from "./protocol";

/** The device's ceilings of a stored record's roofline (the wire's Roofline; 0: not measured). */
export type Ceilings = Pick<Roofline, "peakGbps" | "peakGflops" | "peakTensorGflops">;

export type PointRole = "original" | "candidate" | "winner";

export interface RooflinePoint {
  label: string;
  role: PointRole;
  gflops: number;
}

export interface RooflineModel {
  ceilings: Ceilings;
  /** Flops per byte of the bench problem (the spec's `work`). */
  intensity: number;
  points: RooflinePoint[];
}

/** Flops per byte: the spec's work; 0 when either is unknown. */
export function arithmeticIntensity(flops: number, bytes: number): number {
  return flops > 0 && bytes > 0 ? flops / bytes : 0;
}

/** The best rate a kernel of this intensity can reach under a compute ceiling of `peak` GFLOP/s. */
export function attainableGflops(c: Ceilings, intensity: number, peak: number = c.peakGflops): number {
  return Math.min(peak, intensity * c.peakGbps);
}

/** The intensity where the bandwidth slope meets the compute ceiling `peak`. */
export function ridgeIntensity(c: Ceilings, peak: number = c.peakGflops): number {
  return peak / c.peakGbps;
}

/** What bounds a kernel of this intensity on this device (against the FP32 ceiling). */
export function boundBy(c: Ceilings, intensity: number): "memory" | "compute" {
  return intensity < ridgeIntensity(c) ? "memory" : "compute";
}

/** A point's share of what its intensity allows under the FP32 ceiling, in percent. */
export function pctOfRoof(c: Ceilings, intensity: number, gflops: number): number {
  const roof = attainableGflops(c, intensity);
  return roof > 0 ? (100 * gflops) / roof : 0;
}

/** A log10 axis from `lo` to `hi` (whole decades around them) onto pixels `a`..`b`. */
export function logAxis(lo: number, hi: number, a: number, b: number): { at: (v: number) => number; decades: number[] } {
  const d0 = Math.floor(Math.log10(lo));
  const d1 = Math.max(d0 + 1, Math.ceil(Math.log10(hi)));
  const at = (v: number) => a + ((Math.log10(v) - d0) / (d1 - d0)) * (b - a);
  const decades: number[] = [];
  for (let d = d0; d <= d1; d++) {
    decades.push(10 ** d);
  }
  return { at, decades };
}

const W = 460;
const H = 240;
const PAD = { left: 62, right: 16, top: 14, bottom: 36 };

function tick(v: number): string {
  return v >= 1000 ? `${v / 1000}k` : `${v}`;
}

/** The chart: log-log, intensity (flop/byte) across, GFLOP/s up; ceilings as lines, points as dots. */
export function rooflineSvg(kernel: string, m: RooflineModel): string {
  const c = m.ceilings;
  const top = Math.max(c.peakGflops, c.peakTensorGflops);
  const ridges = [ridgeIntensity(c), c.peakTensorGflops > 0 ? ridgeIntensity(c, c.peakTensorGflops) : 0];
  const x = logAxis(Math.min(m.intensity, ridges[0]) / 4, Math.max(m.intensity, ...ridges) * 4, PAD.left, W - PAD.right);
  const lowest = Math.min(...m.points.map((p) => p.gflops).filter((g) => g > 0), attainableGflops(c, x.decades[0]));
  const y = logAxis(lowest / 2, top * 2, H - PAD.bottom, PAD.top);
  const xs = x.decades;
  const [x0, x1] = [xs[0], xs[xs.length - 1]];
  const parts: string[] = [];
  for (const d of xs) {
    parts.push(`<text class="tick" x="${x.at(d).toFixed(1)}" y="${H - PAD.bottom + 14}" text-anchor="middle">${tick(d)}</text>`);
  }
  for (const d of y.decades) {
    parts.push(`<text class="tick" x="${PAD.left - 6}" y="${(y.at(d) + 4).toFixed(1)}" text-anchor="end">${tick(d)}</text>`);
  }
  parts.push(`<text class="tick" x="${(PAD.left + W - PAD.right) / 2}" y="${H - 4}" text-anchor="middle">arithmetic intensity (flop/byte)</text>`);
  parts.push(`<text class="tick" x="12" y="${(PAD.top + H - PAD.bottom) / 2}" text-anchor="middle" transform="rotate(-90 12 ${(PAD.top + H - PAD.bottom) / 2})">GFLOP/s</text>`);
  parts.push(`<line class="axis" x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${H - PAD.bottom}"/>`);
  parts.push(`<line class="axis" x1="${PAD.left}" y1="${H - PAD.bottom}" x2="${W - PAD.right}" y2="${H - PAD.bottom}"/>`);
  const line = (cls: string, peak: number, label: string) => {
    const ridge = ridgeIntensity(c, peak);
    const start = Math.max(x0, ridge);
    // the bandwidth slope up to this ceiling's ridge, then the ceiling
    const path = [
      [x0, attainableGflops(c, x0, peak)],
      [start, attainableGflops(c, start, peak)],
      [x1, peak],
    ]
      .map(([i, g], n) => `${n ? "L" : "M"}${x.at(i).toFixed(1)},${y.at(g).toFixed(1)}`)
      .join(" ");
    parts.push(`<path class="${cls}" d="${path}" fill="none"><title>${escapeHtml(label)}</title></path>`);
    parts.push(`<text class="label" x="${W - PAD.right}" y="${(y.at(peak) - 4).toFixed(1)}" text-anchor="end">${escapeHtml(label)}</text>`);
  };
  if (c.peakTensorGflops > 0) {
    line("tensor", c.peakTensorGflops, `tensor cores ${c.peakTensorGflops.toFixed(0)} GFLOP/s`);
  }
  line("ceiling", c.peakGflops, `FP32 ${c.peakGflops.toFixed(0)} GFLOP/s`);
  const slopeAt = x.at(x0) + 4;
  parts.push(
    `<text class="label" x="${slopeAt.toFixed(1)}" y="${(y.at(attainableGflops(c, x0)) - 6).toFixed(1)}">copy ${c.peakGbps.toFixed(0)} GB/s</text>`,
  );
  const px = x.at(m.intensity);
  parts.push(`<line class="intensity" x1="${px.toFixed(1)}" y1="${PAD.top}" x2="${px.toFixed(1)}" y2="${H - PAD.bottom}"/>`);
  for (const p of m.points.filter((q) => q.gflops > 0)) {
    const pct = pctOfRoof(c, m.intensity, p.gflops);
    const r = p.role === "candidate" ? 3 : 5;
    parts.push(
      `<circle class="${p.role}" cx="${px.toFixed(1)}" cy="${y.at(p.gflops).toFixed(1)}" r="${r}"><title>${escapeHtml(p.label)}: ${p.gflops.toFixed(0)} GFLOP/s, ${pct.toFixed(0)}% of the roof at ${m.intensity.toPrecision(3)} flop/byte</title></circle>`,
    );
  }
  const title = `${escapeHtml(kernel)}: roofline (${boundBy(c, m.intensity)}-bound at ${m.intensity.toPrecision(3)} flop/byte)`;
  return `<svg role="img" aria-label="${title}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${parts.join("")}</svg>`;
}
