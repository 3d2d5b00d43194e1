// The server's `workspace/applyEdit` as this extension applies it: edits of one open document go
// into its editor as one undo step (never through VS Code's bulk edit, which saves the files a
// "refactoring" touched when `files.refactoring.autoSave` is on), after checking the version the
// server computed them for. Anything else falls back to VS Code's own handling.

import type { TextEdit } from "./protocol";

/** The part of an LSP WorkspaceEdit this module reads. */
export interface LspWorkspaceEdit {
  changes?: Record<string, TextEdit[]>;
  documentChanges?: unknown[];
  changeAnnotations?: Record<string, unknown>;
}

export interface DocumentEdits {
  uri: string;
  /** The document version the edits are for; null: any. */
  version: number | null;
  edits: TextEdit[];
}

function isTextEdit(value: unknown): value is TextEdit {
  const v = value as Partial<TextEdit> | null;
  return typeof v === "object" && v !== null && typeof v.newText === "string" && typeof v.range === "object";
}

/**
 * The edits of a workspace edit that changes the text of exactly one document (plain or annotated
 * text edits, no file operations, no snippets); undefined for anything else.
 */
export function singleDocumentEdits(edit: LspWorkspaceEdit): DocumentEdits | undefined {
  const found: DocumentEdits[] = [];
  for (const change of edit.documentChanges ?? []) {
    const c = change as { textDocument?: { uri?: unknown; version?: unknown }; edits?: unknown[] };
    if (!c.textDocument || typeof c.textDocument.uri !== "string" || !Array.isArray(c.edits) || !c.edits.every(isTextEdit)) {
      return undefined; // a file operation or a snippet edit
    }
    const version = typeof c.textDocument.version === "number" ? c.textDocument.version : null;
    found.push({ uri: c.textDocument.uri, version, edits: c.edits });
  }
  if (!edit.documentChanges) {
    for (const [uri, edits] of Object.entries(edit.changes ?? {})) {
      found.push({ uri, version: null, edits });
    }
  }
  const uris = new Set(found.map((f) => f.uri));
  if (uris.size !== 1) {
    return undefined;
  }
  const versions = new Set(found.map((f) => f.version));
  return { uri: found[0].uri, version: versions.size === 1 ? found[0].version : null, edits: found.flatMap((f) => f.edits) };
}

/** Why edits for `edits.version` must not go into a document now at `current` (undefined: they may). */
export function versionConflict(edits: DocumentEdits, current: number, name: string): string | undefined {
  if (edits.version === null || edits.version === current) {
    return undefined;
  }
  return `${name} changed since the server computed this edit (version ${current}, the edit is for ${edits.version}); nothing was changed.`;
}
