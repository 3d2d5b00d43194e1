// What Accept does to the file on disk. The server never saves: Accept edits the buffer, and the
// user's own `files.autoSave` decides whether (and when) the edit reaches the disk. VS Code's
// desktop default is "off"; its web builds (code-server, vscode.dev) default to "afterDelay".

import { speedupText } from "./preview";
import type { Rewrite } from "./protocol";

/** When an edit made by Accept gets written, under each `files.autoSave` value. */
const WRITES: Record<string, string> = {
  afterDelay: "after its delay",
  onFocusChange: "when the editor loses focus",
  onWindowChange: "when the window loses focus",
};

/** Whether an unsaved edit reaches the disk without the user saving, under this `files.autoSave`. */
export function autoSaves(autoSave: string | undefined): boolean {
  return autoSave !== undefined && autoSave in WRITES;
}

/** The notification after Accept, true to what happens to the file under `files.autoSave`. */
export function acceptedMessage(autoSave: string | undefined, rewrite: Pick<Rewrite, "speedup" | "simulated">): string {
  const head = `CUDA Agent: applied the rewrite (${speedupText(rewrite)})`;
  const disk = autoSaves(autoSave)
    ? `; your auto-save setting (files.autoSave: ${autoSave}) will write it to disk ${WRITES[autoSave as string]}`
    : ", not saved";
  return `${head}${disk}. Undo reverts it in one step.`;
}
