// The `Host` wrapper (host.ts) over the `vscode` API: the only implementation; the unit tests use
// fakes. Owns the status-bar item, the output channel and the diff editor's content provider.

import * as vscode from "vscode";
import type { EditorHost, Host, InstallHost, Level, Log, Notice, UriParts } from "./host";
import { PREVIEW_SCHEME } from "./preview";
import type { TextEdit } from "./protocol";
import type { StatusView } from "./status";

export class VscodeHost implements Host, EditorHost, InstallHost, vscode.Disposable {
  readonly log: Log & vscode.LogOutputChannel = vscode.window.createOutputChannel("CUDA Agent", { log: true });
  private readonly statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  private readonly previewChanged = new vscode.EventEmitter<vscode.Uri>();
  private readonly provider: vscode.Disposable;

  /** `content`: the text of each virtual document of the diff editor, by its URI's path. */
  constructor(content: (uriPath: string) => string) {
    this.provider = vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, {
      onDidChange: this.previewChanged.event,
      provideTextDocumentContent: (uri) => content(uri.path),
    });
    this.statusItem.show();
  }

  dispose(): void {
    for (const d of [this.provider, this.previewChanged, this.statusItem, this.log]) {
      d.dispose();
    }
  }

  message(level: Level, text: string, ...buttons: string[]): Promise<string | undefined> {
    const shown =
      level === "error"
        ? vscode.window.showErrorMessage(text, ...buttons)
        : level === "warning"
          ? vscode.window.showWarningMessage(text, ...buttons)
          : vscode.window.showInformationMessage(text, ...buttons);
    return Promise.resolve(shown);
  }

  withProgress<T>(title: string, work: () => Promise<T>): Promise<T> {
    return Promise.resolve(vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title }, work));
  }

  notice(title: string, onCancel: () => void): Notice {
    let close = () => {};
    const closed = new Promise<void>((resolve) => (close = resolve));
    void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (_progress, cancel) => {
      cancel.onCancellationRequested(onCancel);
      return closed;
    });
    return { close };
  }

  async setContext(key: string, value: boolean): Promise<void> {
    await vscode.commands.executeCommand("setContext", key, value);
  }

  setting<T>(section: string, key: string, scope?: string): T | undefined {
    return vscode.workspace.getConfiguration(section, scope === undefined ? undefined : vscode.Uri.parse(scope)).get<T>(key);
  }

  showStatus(view: StatusView, command: string): void {
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    this.statusItem.command = command;
  }

  async openDiff(original: string, rewritten: string, title: string): Promise<void> {
    const [left, right] = [vscode.Uri.parse(original), vscode.Uri.parse(rewritten)];
    this.previewChanged.fire(left);
    this.previewChanged.fire(right);
    await vscode.commands.executeCommand("vscode.diff", left, right, title, { preview: false });
  }

  activeDiff(): UriParts | undefined {
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    return input instanceof vscode.TabInputTextDiff ? input.modified : undefined;
  }

  async closeDiffs(matches: (modified: UriParts) => boolean): Promise<void> {
    const tabs = vscode.window.tabGroups.all
      .flatMap((group) => group.tabs)
      .filter((tab) => tab.input instanceof vscode.TabInputTextDiff && matches(tab.input.modified));
    await vscode.window.tabGroups.close(tabs);
  }

  async documentVersion(uri: string): Promise<number> {
    return (await vscode.workspace.openTextDocument(vscode.Uri.parse(uri))).version;
  }

  async editInEditor(uri: string, edits: TextEdit[]): Promise<boolean> {
    const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
    const editor = await vscode.window.showTextDocument(document, { preview: false });
    const range = ({ start, end }: TextEdit["range"]) => new vscode.Range(start.line, start.character, end.line, end.character);
    return editor.edit((builder) => edits.forEach((e) => builder.replace(range(e.range), e.newText)));
  }

  async pickFile(title: string, openLabel: string): Promise<string | undefined> {
    const picked = await vscode.window.showOpenDialog({ title, openLabel, canSelectFiles: true, canSelectFolders: false, canSelectMany: false });
    return picked?.[0]?.fsPath;
  }

  userSetting(section: string, key: string): string | undefined {
    return vscode.workspace.getConfiguration(section).inspect<string>(key)?.globalValue;
  }

  async setUserSetting(section: string, key: string, value: string): Promise<void> {
    await vscode.workspace.getConfiguration(section).update(key, value, vscode.ConfigurationTarget.Global);
  }
}
