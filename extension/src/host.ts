// The thin wrapper of the `vscode` API that the server lifecycle (lifecycle.ts), the rewrite
// preview and apply flow (rewrites.ts) and the install (install.ts) go through. Plain types, no
// vscode import: vscodeHost.ts implements it over VS Code, the unit tests with a fake. URIs are
// strings here (`UriParts` where the scheme and path are read).

import type { TextEdit } from "./protocol";
import type { StatusView } from "./status";

export type Level = "info" | "warning" | "error";

/** The extension's output channel. */
export interface Log {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  show(): void;
}

/** What is read of a URI (VS Code's `Uri` has both). */
export interface UriParts {
  scheme: string;
  path: string;
}

/** A notification that stays up until closed from the code. */
export interface Notice {
  close(): void;
}

export interface Host {
  readonly log: Log;
  /** A message with buttons; resolves to the button chosen (undefined: dismissed). */
  message(level: Level, text: string, ...buttons: string[]): Promise<string | undefined>;
  /** A notification (no cancel button) while `work` runs. */
  withProgress<T>(title: string, work: () => Promise<T>): Promise<T>;
  /** A notification with a Cancel button that stays until closed; `onCancel` when Cancel is pressed. */
  notice(title: string, onCancel: () => void): Notice;
  /** A `when`-clause context key. */
  setContext(key: string, value: boolean): Promise<void>;
  /** A setting (`section`.`key`), as it applies to the resource `scope` when given. */
  setting<T>(section: string, key: string, scope?: string): T | undefined;
  /** The status-bar item; clicking it runs `command`. */
  showStatus(view: StatusView, command: string): void;
}

/** The editor side of a rewrite: the diff editor and the document it changes. */
export interface EditorHost {
  /** Opens (or refreshes) the diff editor of two virtual documents. */
  openDiff(original: string, rewritten: string, title: string): Promise<void>;
  /** The right side of the active tab when it is a diff editor. */
  activeDiff(): UriParts | undefined;
  /** Closes every diff editor whose right side `matches`. */
  closeDiffs(matches: (modified: UriParts) => boolean): Promise<void>;
  /** The version of a document (opened, not shown, when it is not open). */
  documentVersion(uri: string): Promise<number>;
  /** The edits in the document's editor (shown), one undo step, unsaved; false when the editor refused. */
  editInEditor(uri: string, edits: TextEdit[]): Promise<boolean>;
}

/** What the install asks of the editor beyond messages and progress. */
export interface InstallHost {
  /** A file picked by the user (undefined: cancelled). */
  pickFile(title: string, openLabel: string): Promise<string | undefined>;
  /** The User-settings value of `section`.`key`. */
  userSetting(section: string, key: string): string | undefined;
  /** Stores `section`.`key` in the User settings. */
  setUserSetting(section: string, key: string, value: string): Promise<void>;
}
