// The preview-before-accept flow of a verified rewrite: the diff editor with Accept and Discard,
// the server's apply (decided on its `ApplyReason`), the edits the server sends back, and what the
// notification says about saving. Through the `Host` wrapper only: unit-tested with a fake.

import { type LspWorkspaceEdit, singleDocumentEdits, versionConflict } from "./edits";
import type { EditorHost, Host, Level, Notice, UriParts } from "./host";
import { baseName, diffTitle, PendingRewrites, PREVIEW_SCHEME, parsePreviewPath, speedupText } from "./preview";
import { type ApplyResult, PROGRAM_ANNOTATION, type Rewrite } from "./protocol";
import { acceptedMessage } from "./saves";

/** The `when`-clause key that shows Accept and Discard in the palette. */
export const PREVIEW_CONTEXT = "cudaAgent.previewOpen";

/** What the flow asks of the language server (undefined from `RewriteFlow`'s getter: not running). */
export interface RewriteServer {
  rewrite(runId: string): Promise<Rewrite | null>;
  apply(runId: string): Promise<ApplyResult | null>;
}

/** The answer to the server's `workspace/applyEdit`. */
export interface EditAnswer {
  applied: boolean;
  failureReason?: string;
}

/** What to tell the user after Accept, from the server's answer (undefined: nothing, the server said it). */
export function appliedNotice(result: ApplyResult | null, rewrite: Rewrite, autoSave: string | undefined): { level: Level; text: string } | undefined {
  if (result === null) {
    return { level: "error", text: "CUDA Agent: the server gave no answer; the rewrite was not applied." };
  }
  switch (result.reason) {
    case "applied":
      return { level: "info", text: acceptedMessage(autoSave, rewrite) };
    case "stale":
      return undefined; // the server's own warning says what changed
    case "no_rewrite":
      return { level: "warning", text: `CUDA Agent: the rewrite was not applied: ${result.message}` };
    case "declined":
    case "too_large":
      return { level: "error", text: `CUDA Agent: the rewrite was not applied: ${result.message}` };
  }
}

/** The text of the notification that stays up while a preview is open. */
export function previewNotice(rewrite: Rewrite): string {
  // the summary is a sentence of its own (the server's has no full stop)
  const summary = rewrite.summary ? ` ${rewrite.summary}${rewrite.summary.endsWith(".") ? "" : "."}` : "";
  return `CUDA Agent: rewrite of ${rewrite.kernel}, ${speedupText(rewrite)}.${summary} Accept (✓) or Discard (✕) in the diff's title bar; Cancel discards it.`;
}

export class RewriteFlow {
  private readonly pending = new PendingRewrites();
  /** The notification of each open preview (by run id), closed once accepted or discarded. */
  private readonly notices = new Map<string, Notice>();

  constructor(
    private readonly host: Host & EditorHost,
    private readonly server: () => RewriteServer | undefined,
  ) {}

  /** Text of a virtual document of the diff editor ("" once settled). */
  content(uriPath: string): string {
    return this.pending.content(uriPath) ?? "";
  }

  /** The side-by-side diff of a run's verified rewrite, with Accept and Discard. */
  async preview(runId: string): Promise<void> {
    const rewrite = await this.server()?.rewrite(runId);
    if (!rewrite) {
      void this.host.message("warning", `CUDA Agent: the rewrite of run ${runId} is no longer available.`);
      return;
    }
    const uris = this.pending.add(runId, rewrite);
    await this.host.setContext(PREVIEW_CONTEXT, true);
    await this.host.openDiff(uris.original, uris.rewritten, diffTitle(rewrite));
    // A notification that can be closed from here: it goes when the rewrite is accepted or
    // discarded from anywhere (the diff's title bar, the palette).
    this.notices.get(runId)?.close();
    this.notices.set(runId, this.host.notice(previewNotice(rewrite), () => void this.settleRun(runId, false)));
  }

  /** Accept or Discard from the diff editor's title (its URI) or the palette (the active diff). */
  async settle(uri: UriParts | undefined, accept: boolean): Promise<void> {
    const runId = [uri, this.host.activeDiff()].map((u) => (u?.scheme === PREVIEW_SCHEME ? this.pending.runOf(u.path) : undefined)).find(Boolean);
    if (runId) {
      await this.settleRun(runId, accept);
    } else {
      void this.host.message("info", "CUDA Agent: no rewrite preview is open.");
    }
  }

  async settleRun(runId: string, accept: boolean): Promise<void> {
    this.notices.get(runId)?.close();
    this.notices.delete(runId);
    const rewrite = this.pending.settle(runId);
    if (!rewrite) {
      return; // already accepted or discarded from the other control
    }
    await this.host.setContext(PREVIEW_CONTEXT, this.pending.size > 0);
    await this.host.closeDiffs((modified) => modified.scheme === PREVIEW_SCHEME && parsePreviewPath(modified.path)?.runId === runId);
    if (!accept) {
      return;
    }
    const server = this.server();
    if (!server) {
      void this.host.message("error", "CUDA Agent: the language server is not running; the rewrite was not applied.");
      return;
    }
    // The one apply path: the server checks the document and sends the edit (see applyEdit).
    const notice = appliedNotice(await server.apply(runId), rewrite, this.host.setting<string>("files", "autoSave", rewrite.uri));
    if (notice) {
      void this.host.message(notice.level, notice.text);
    }
  }

  /**
   * The server's `workspace/applyEdit` (Accept, Add benchmark spec): edits of one document go into
   * its editor as one undo step, after a version check, and are never saved (VS Code's bulk edit
   * would save them under `files.refactoring.autoSave`). Other edits go to `otherwise` (VS Code's
   * own handling).
   */
  async applyEdit(edit: LspWorkspaceEdit, otherwise: () => Promise<boolean>): Promise<EditAnswer> {
    if (edit.changeAnnotations?.[PROGRAM_ANNOTATION]) {
      return { applied: await otherwise() }; // a program's rewrites: always VS Code's Refactor Preview
    }
    const edits = singleDocumentEdits(edit);
    if (!edits) {
      return { applied: await otherwise() };
    }
    const conflict = versionConflict(edits, await this.host.documentVersion(edits.uri), baseName(edits.uri));
    if (conflict) {
      return { applied: false, failureReason: conflict };
    }
    const applied = await this.host.editInEditor(edits.uri, edits.edits);
    return applied ? { applied } : { applied, failureReason: "the editor refused the edit" };
  }
}
