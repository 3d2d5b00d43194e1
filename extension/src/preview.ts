// Preview-before-accept of a verified rewrite: the virtual documents of the diff editor and its
// title with the measured speedup. Accept asks the server, which checks the document's version.

import { type Rewrite, SIMULATED } from "./protocol";

/** URI scheme of the read-only documents shown in the diff editor. */
export const PREVIEW_SCHEME = "cuda-agent-rewrite";

export type Side = "original" | "rewritten";

export interface PreviewUris {
  original: string;
  rewritten: string;
}

/** The file name at the end of a URI (`file:///src/vadd.cu` -> `vadd.cu`). */
export function baseName(uri: string): string {
  const tail = uri.split(/[?#]/)[0].replace(/\/+$/, "");
  return decodeURIComponent(tail.slice(tail.lastIndexOf("/") + 1)) || uri;
}

/** Virtual URIs of both sides; the path ends in the file's name so the editor picks its language. */
export function previewUris(runId: string, fileUri: string): PreviewUris {
  const name = encodeURIComponent(baseName(fileUri));
  const run = encodeURIComponent(runId);
  return {
    original: `${PREVIEW_SCHEME}:/${run}/original/${name}`,
    rewritten: `${PREVIEW_SCHEME}:/${run}/rewritten/${name}`,
  };
}

/** The run and side a virtual URI's decoded path (`/<runId>/<side>/<name>`) stands for. */
export function parsePreviewPath(uriPath: string): { runId: string; side: Side } | undefined {
  const match = /^\/(.+)\/(original|rewritten)\/[^/]+$/.exec(uriPath);
  return match ? { runId: match[1], side: match[2] as Side } : undefined;
}

export function formatSpeedup(speedup: number): string {
  return `${speedup >= 10 ? speedup.toFixed(0) : speedup.toFixed(2)}×`;
}

/** A rewrite's speedup with where it comes from: `2.43× faster, verified`, or the simulated GPU's label. */
export function speedupText(rewrite: Pick<Rewrite, "speedup" | "simulated">): string {
  return `${formatSpeedup(rewrite.speedup)} faster, ${rewrite.simulated ? SIMULATED : "verified"}`;
}

/** Title of the diff editor: which file, and the speedup of the verified rewrite. */
export function diffTitle(rewrite: Rewrite): string {
  return `${baseName(rewrite.uri)}: original ↔ rewrite (${speedupText(rewrite)})`;
}

/** The rewrites waiting for Accept or Discard, by run id. */
export class PendingRewrites {
  private readonly byRun = new Map<string, Rewrite>();

  add(runId: string, rewrite: Rewrite): PreviewUris {
    this.byRun.set(runId, rewrite);
    return previewUris(runId, rewrite.uri);
  }

  /** Text of a virtual document (path `/<runId>/<side>/<name>`); undefined once settled. */
  content(uriPath: string): string | undefined {
    const parsed = parsePreviewPath(uriPath);
    const rewrite = parsed && this.byRun.get(parsed.runId);
    return rewrite && (parsed.side === "original" ? rewrite.original : rewrite.rewritten);
  }

  /** Removes a rewrite once accepted or discarded. */
  settle(runId: string): Rewrite | undefined {
    const rewrite = this.byRun.get(runId);
    this.byRun.delete(runId);
    return rewrite;
  }

  /** The run a diff editor belongs to, from the URI path of either side. */
  runOf(uriPath: string): string | undefined {
    const parsed = parsePreviewPath(uriPath);
    return parsed && this.byRun.has(parsed.runId) ? parsed.runId : undefined;
  }

  get size(): number {
    return this.byRun.size;
  }
}
