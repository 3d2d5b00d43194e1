// A fake of the `Host` wrapper (src/host.ts): records what the extension shows and asks, answers
// with scripted choices. Not a test file (importing a *.test.ts would run its tests again).

import type { EditorHost, Host, InstallHost, Level, Notice, UriParts } from "../src/host";
import type { TextEdit } from "../src/protocol";
import type { StatusView } from "../src/status";

export class FakeHost implements Host, EditorHost, InstallHost {
  readonly logged: string[] = [];
  readonly messages: { level: Level; text: string; buttons: string[] }[] = [];
  /** The button the next messages answer with, in order (then undefined: dismissed). */
  readonly answers: (string | undefined)[] = [];
  readonly notices: { title: string; open: boolean; cancel: () => void }[] = [];
  readonly progress: string[] = [];
  readonly context = new Map<string, boolean>();
  readonly settings = new Map<string, unknown>();
  readonly userSettings = new Map<string, string>();
  readonly diffs: { original: string; rewritten: string; title: string }[] = [];
  /** The right sides of the open diff editors. */
  openDiffs: UriParts[] = [];
  active: UriParts | undefined;
  readonly versions = new Map<string, number>();
  readonly edited: { uri: string; edits: TextEdit[] }[] = [];
  editorRefuses = false;
  picked: string | undefined;
  status: { view: StatusView; command: string } | undefined;
  shownLog = false;

  readonly log = {
    info: (m: string) => this.logged.push(`info: ${m}`),
    warn: (m: string) => this.logged.push(`warn: ${m}`),
    error: (m: string) => this.logged.push(`error: ${m}`),
    show: () => (this.shownLog = true),
  };

  async message(level: Level, text: string, ...buttons: string[]): Promise<string | undefined> {
    this.messages.push({ level, text, buttons });
    return this.answers.shift();
  }

  async withProgress<T>(title: string, work: () => Promise<T>): Promise<T> {
    this.progress.push(title);
    return work();
  }

  notice(title: string, onCancel: () => void): Notice {
    const entry = { title, open: true, cancel: onCancel };
    this.notices.push(entry);
    return { close: () => (entry.open = false) };
  }

  async setContext(key: string, value: boolean): Promise<void> {
    this.context.set(key, value);
  }

  setting<T>(section: string, key: string, scope?: string): T | undefined {
    return (this.settings.get(`${section}.${key}@${scope}`) ?? this.settings.get(`${section}.${key}`)) as T | undefined;
  }

  showStatus(view: StatusView, command: string): void {
    this.status = { view, command };
  }

  async openDiff(original: string, rewritten: string, title: string): Promise<void> {
    this.diffs.push({ original, rewritten, title });
    const [scheme, ...rest] = rewritten.split(":");
    this.active = { scheme, path: decodeURIComponent(rest.join(":")) };
    this.openDiffs.push(this.active);
  }

  activeDiff(): UriParts | undefined {
    return this.active;
  }

  async closeDiffs(matches: (modified: UriParts) => boolean): Promise<void> {
    this.openDiffs = this.openDiffs.filter((d) => !matches(d));
    if (this.active && !this.openDiffs.includes(this.active)) {
      this.active = undefined;
    }
  }

  async documentVersion(uri: string): Promise<number> {
    return this.versions.get(uri) ?? 1;
  }

  async editInEditor(uri: string, edits: TextEdit[]): Promise<boolean> {
    if (this.editorRefuses) {
      return false;
    }
    this.edited.push({ uri, edits });
    return true;
  }

  async pickFile(): Promise<string | undefined> {
    return this.picked;
  }

  userSetting(section: string, key: string): string | undefined {
    return this.userSettings.get(`${section}.${key}`);
  }

  async setUserSetting(section: string, key: string, value: string): Promise<void> {
    this.userSettings.set(`${section}.${key}`, value);
  }
}
