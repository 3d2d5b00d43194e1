// The one module that talks to VS Code and vscode-languageclient. It wires the editor to the
// vscode-free logic in the other modules (unit-tested under node) and to `cuda-agent serve`,
// where all the intelligence lives.

import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { PythonExtension } from "@vscode/python-extension";
import * as vscode from "vscode";
import {
  ApplyWorkspaceEditRequest,
  type ApplyWorkspaceEditParams,
  type ApplyWorkspaceEditResult,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  LogMessageNotification,
  MessageType,
  type ProgressToken,
  type ServerOptions,
  State,
  WorkDoneProgress,
  type WorkDoneProgressBegin,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
  type WorkDoneProgressReport,
} from "vscode-languageclient/node";
import { installSteps, probeInterpreter, type Resolution, resolveInterpreter, run, serverCommand, serverPackage, venvPython } from "./interpreter";
import { kernelAt, kernelSymbols } from "./kernels";
import { ProgressSteps } from "./progress";
import { type LspWorkspaceEdit, singleDocumentEdits, versionConflict } from "./edits";
import { baseName, diffTitle, formatSpeedup, PendingRewrites, PREVIEW_SCHEME, parsePreviewPath } from "./preview";
import {
  type ApplyResult,
  APPLY_REWRITE_COMMAND,
  BENCHMARK_COMMAND,
  CAPTURE_COMMAND,
  type CaptureRef,
  type KernelRef,
  OPTIMIZE_COMMAND,
  PROFILE_COMMAND,
  RESULTS_REQUEST,
  REWRITE_REQUEST,
  type Rewrite,
  RUN_FINISHED_NOTIFICATION,
  type RunFinished,
  type RunRef,
  type RunStarted,
  STATUS_NOTIFICATION,
  type ServerStatus,
} from "./protocol";
import { resultsHtml, type SessionRun, spreadText } from "./results";
import { shellWords } from "./shellwords";
import { acceptedMessage } from "./saves";
import { LLM_API_KEY, SECRETS, SECTION, type SecretSpec, serverEnvironment, serverSettings, WORKER_TOKEN } from "./settings";
import { type ServerState, statusView } from "./status";

const LANGUAGE = "cuda-cpp";
const PREVIEW_CONTEXT = "cudaAgent.previewOpen";
/** The workspace's last "Capture spec from a run…" command line (the input box starts with it). */
const LAST_CAPTURE = "cudaAgent.lastCaptureCommand";
/** Settings whose change needs a new server process rather than a configuration update. */
const RESTART_SETTINGS = ["python", "serverPackage"].map((key) => `${SECTION}.${key}`);
/** Run results kept for the results view (attempts, the simulated label), latest last. */
const SESSION_RUNS = 50;

/** A run's end with what newer servers add to it (the attempts list, the simulated label). */
type FinishedRun = RunFinished & { attempts?: unknown; simulated?: unknown };

let agent: Agent | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  agent = new Agent(context);
  await agent.start();
}

export async function deactivate(): Promise<void> {
  await agent?.stopServer();
  agent = undefined;
}

class Agent {
  private readonly output = vscode.window.createOutputChannel("CUDA Agent", { log: true });
  private readonly statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  private readonly pending = new PendingRewrites();
  private readonly previewChanged = new vscode.EventEmitter<vscode.Uri>();
  private client: LanguageClient | undefined;
  private state: ServerState = "stopped";
  private serverStatus: ServerStatus | undefined;
  private resultsPanel: vscode.WebviewPanel | undefined;
  private starting: Promise<void> | undefined;
  private readonly sessionRuns: SessionRun[] = [];
  /** Closes the notification of a rewrite preview (by run id) once it is accepted or discarded. */
  private readonly notices = new Map<string, () => void>();

  constructor(private readonly context: vscode.ExtensionContext) {
    const reg = (id: string, fn: (...args: any[]) => unknown) =>
      context.subscriptions.push(vscode.commands.registerCommand(id, fn));
    reg("cudaAgent.optimizeKernel", () => this.runOnKernel(OPTIMIZE_COMMAND));
    reg("cudaAgent.benchmarkKernel", () => this.runOnKernel(BENCHMARK_COMMAND));
    reg("cudaAgent.profileKernel", () => this.runOnKernel(PROFILE_COMMAND));
    reg("cudaAgent.captureSpec", () => this.captureSpec());
    reg("cudaAgent.showResults", () => this.showResults());
    reg("cudaAgent.restartServer", () => this.restart());
    reg("cudaAgent.setWorkerToken", () => this.setSecret(WORKER_TOKEN));
    reg("cudaAgent.setLlmApiKey", () => this.setSecret(LLM_API_KEY));
    reg("cudaAgent.acceptRewrite", (uri?: vscode.Uri) => this.settle(uri, true));
    reg("cudaAgent.discardRewrite", (uri?: vscode.Uri) => this.settle(uri, false));
    context.subscriptions.push(
      this.output,
      this.statusItem,
      this.previewChanged,
      vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, {
        onDidChange: this.previewChanged.event,
        provideTextDocumentContent: (uri) => this.pending.content(uri.path) ?? "",
      }),
      vscode.workspace.onDidChangeConfiguration((e) => this.configurationChanged(e)),
    );
    this.watchPythonExtension();
    this.render();
    this.statusItem.show();
  }

  // ------------------------------------------------------------------ server lifecycle

  async start(): Promise<void> {
    this.starting ??= this.startServer().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async startServer(): Promise<void> {
    this.setState("starting");
    const resolution = await resolveInterpreter({
      configured: () => vscode.workspace.getConfiguration(SECTION).get<string>("python", ""),
      pythonExtension: () => this.pythonExtensionInterpreter(),
      managedPython: venvPython(this.managedVenv()),
      probe: (python) => probeInterpreter(python, this.context.extensionPath),
    });
    if (!resolution.ready) {
      this.output.error(resolution.reason);
      this.setState("failed");
      void this.offerInstall(resolution);
      return;
    }
    this.output.info(`starting the server with ${resolution.python} (${resolution.source}, cuda-agent ${resolution.version})`);
    const { command, args } = serverCommand(resolution.python);
    // No `transport` option: vscode-languageclient would add a `--stdio` argument; `serve` speaks stdio by default.
    const serverOptions: ServerOptions = {
      command,
      args,
      options: { cwd: this.context.extensionPath, env: serverEnvironment(process.env, await this.storedSecrets()) },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: LANGUAGE },
        { scheme: "untitled", language: LANGUAGE },
      ],
      outputChannel: this.output,
      initializationOptions: () => this.serverSettings(),
      middleware: {
        workspace: {
          configuration: async (params, token, next) => {
            const values = await next(params, token);
            if (!Array.isArray(values)) {
              return values;
            }
            return values.map((value, i) => (params.items[i]?.section === SECTION ? serverSettings(value) : value));
          },
        },
        executeCommand: (command, args, next) => this.executeCommand(command, args, next),
      },
    };
    const client = new LanguageClient("cudaAgent", "CUDA Agent", serverOptions, clientOptions);
    client.onNotification(STATUS_NOTIFICATION, (status: ServerStatus) => {
      this.serverStatus = status;
      this.render();
    });
    client.onNotification(RUN_FINISHED_NOTIFICATION, (finished: RunFinished) => void this.finished(finished));
    this.showProgressWithCancel(client);
    this.applyEditsInTheEditor(client);
    client.onDidChangeState((e) => {
      if (e.newState === State.Running) {
        this.setState("running");
      } else if (e.newState === State.Stopped) {
        this.serverStatus = undefined;
        this.setState(this.state === "starting" ? "failed" : "stopped");
      }
    });
    this.client = client;
    try {
      await client.start();
    } catch (err) {
      this.output.error(`the server did not start: ${String(err)}`);
      this.setState("failed");
      void vscode.window.showErrorMessage("CUDA Agent: the language server did not start. See the output for details.", "Show output").then((choice) => {
        if (choice) {
          this.output.show();
        }
      });
    }
  }

  async stopServer(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.dispose(2000);
      } catch (err) {
        this.output.warn(`stopping the server: ${String(err)}`);
      }
    }
  }

  /**
   * vscode-languageclient shows the server's work-done progress in the status bar, where VS Code
   * offers no cancel button; this shows it as a notification with one. A feature registered after
   * the built-in ones is initialized after them (on every start), so its handler replaces theirs.
   */
  private showProgressWithCancel(client: LanguageClient): void {
    client.registerFeature({
      fillClientCapabilities: () => undefined, // window.workDoneProgress is already announced
      initialize: () => {
        client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => this.trackProgress(client, token));
      },
      getState: () => ({ kind: "static" }),
      clear: () => undefined,
    });
  }

  /**
   * The server's `workspace/applyEdit` (Accept, Add benchmark spec): edits of one document go into
   * its editor as one undo step, after a version check, and are never saved (VS Code's bulk edit
   * would save them under `files.refactoring.autoSave`). Other edits get VS Code's own handling.
   */
  private applyEditsInTheEditor(client: LanguageClient): void {
    client.registerFeature({
      fillClientCapabilities: () => undefined,
      initialize: () => {
        client.onRequest(ApplyWorkspaceEditRequest.type, (params) => this.applyEdit(client, params));
        // The output channel stamps each line itself: the server's log lines go in at their level,
        // without the client's own "[Info - 10:42:07 AM]" prefix (two timestamps per line).
        client.onNotification(LogMessageNotification.type, ({ type, message }) => {
          if (type === MessageType.Error) {
            this.output.error(message);
          } else if (type === MessageType.Warning) {
            this.output.warn(message);
          } else if (type === MessageType.Info) {
            this.output.info(message);
          } else {
            this.output.debug(message);
          }
        });
      },
      getState: () => ({ kind: "static" }),
      clear: () => undefined,
    });
  }

  private async applyEdit(client: LanguageClient, params: ApplyWorkspaceEditParams): Promise<ApplyWorkspaceEditResult> {
    const edits = singleDocumentEdits(params.edit as LspWorkspaceEdit);
    if (!edits) {
      const workspaceEdit = await client.protocol2CodeConverter.asWorkspaceEdit(params.edit);
      return { applied: await vscode.workspace.applyEdit(workspaceEdit) };
    }
    const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(edits.uri));
    const conflict = versionConflict(edits, document.version, baseName(edits.uri));
    if (conflict) {
      return { applied: false, failureReason: conflict };
    }
    const editor = await vscode.window.showTextDocument(document, { preview: false });
    const ranges = await Promise.all(edits.edits.map((e) => client.protocol2CodeConverter.asRange(e.range)));
    const applied = await editor.edit((builder) => edits.edits.forEach((e, i) => builder.replace(ranges[i], e.newText)));
    return applied ? { applied } : { applied, failureReason: "the editor refused the edit" };
  }

  private trackProgress(client: LanguageClient, token: ProgressToken): void {
    const steps = new ProgressSteps();
    let latest: WorkDoneProgressBegin | WorkDoneProgressReport | undefined;
    let show: ((value: WorkDoneProgressBegin | WorkDoneProgressReport) => void) | undefined;
    let finish = () => {};
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const subscription = client.onProgress(WorkDoneProgress.type, token, (value) => {
      if (value.kind === "end") {
        subscription.dispose();
        finish();
      } else if (show) {
        show(value);
      } else if (value.kind === "begin") {
        latest = value;
        void vscode.window.withProgress(
          { location: vscode.ProgressLocation.Notification, title: value.title, cancellable: value.cancellable === true },
          (progress, cancel) => {
            cancel.onCancellationRequested(() => void client.sendNotification(WorkDoneProgressCancelNotification.type, { token }));
            show = (v) => progress.report(steps.step(v));
            if (latest) {
              show(latest);
            }
            return finished;
          },
        );
      } else {
        latest = value; // a report before the notification is up: shown when it is
      }
    });
  }

  private async restart(): Promise<void> {
    await this.starting;
    await this.stopServer();
    await this.start();
  }

  private serverSettings(): Record<string, unknown> {
    return serverSettings(vscode.workspace.getConfiguration(SECTION));
  }

  private configurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (RESTART_SETTINGS.some((key) => e.affectsConfiguration(key))) {
      void this.restart();
    } else if (e.affectsConfiguration(SECTION) && this.client?.isRunning()) {
      void this.client.sendNotification(DidChangeConfigurationNotification.type, {
        settings: { [SECTION]: this.serverSettings() },
      });
    }
  }

  // ------------------------------------------------------------------ interpreter

  private managedVenv(): string {
    return vscode.Uri.joinPath(this.context.globalStorageUri, "venv").fsPath;
  }

  private async pythonExtensionInterpreter(): Promise<string | undefined> {
    if (!vscode.extensions.getExtension("ms-python.python")) {
      return undefined;
    }
    try {
      const api = await PythonExtension.api();
      const active = api.environments.getActiveEnvironmentPath(vscode.workspace.workspaceFolders?.[0]?.uri);
      const env = await api.environments.resolveEnvironment(active);
      return env?.executable.uri?.fsPath;
    } catch (err) {
      this.output.warn(`the Python extension did not give an interpreter: ${String(err)}`);
      return undefined;
    }
  }

  private watchPythonExtension(): void {
    if (!vscode.extensions.getExtension("ms-python.python")) {
      return;
    }
    void PythonExtension.api().then(
      (api) =>
        this.context.subscriptions.push(
          api.environments.onDidChangeActiveEnvironmentPath(() => {
            if (!vscode.workspace.getConfiguration(SECTION).get<string>("python")) {
              void this.restart();
            }
          }),
        ),
      (err) => this.output.warn(`the Python extension is not available: ${String(err)}`),
    );
  }

  private async offerInstall(resolution: Resolution & { ready: false }): Promise<void> {
    const install = "Install into a managed environment";
    const choose = "Choose interpreter";
    const choice = await vscode.window.showWarningMessage(`CUDA Agent: ${resolution.reason}`, install, choose);
    if (choice === choose) {
      await this.chooseInterpreter();
    } else if (choice === install) {
      await this.installManaged(resolution.python);
    }
  }

  /** Asks for a Python executable and stores it as `cudaAgent.python` in User settings (which restarts the server). */
  private async chooseInterpreter(): Promise<void> {
    const picked = await vscode.window.showOpenDialog({
      title: "CUDA Agent: the Python interpreter that has cuda-agent installed",
      openLabel: "Use this interpreter",
      canSelectFiles: true,
      canSelectFolders: false,
      canSelectMany: false,
    });
    if (!picked?.[0]) {
      return;
    }
    const config = vscode.workspace.getConfiguration(SECTION);
    if (config.inspect<string>("python")?.globalValue === picked[0].fsPath) {
      await this.restart(); // the same value again: no configuration change to restart on
    } else {
      await config.update("python", picked[0].fsPath, vscode.ConfigurationTarget.Global);
    }
  }

  private async installManaged(basePython: string): Promise<void> {
    const venv = this.managedVenv();
    const bundled = vscode.Uri.joinPath(this.context.extensionUri, "python").fsPath;
    const files = fs.existsSync(bundled) ? fs.readdirSync(bundled) : [];
    const pkg = serverPackage(vscode.workspace.getConfiguration(SECTION).get<string>("serverPackage", ""), bundled, files);
    if (!pkg) {
      void vscode.window.showErrorMessage(
        "CUDA Agent: this build of the extension carries no server wheel; set cudaAgent.serverPackage to a cuda-agent checkout or wheel.",
      );
      return;
    }
    fs.mkdirSync(this.context.globalStorageUri.fsPath, { recursive: true });
    const ok = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `CUDA Agent: installing ${pkg} into ${venv}` },
      async () => {
        for (const [command, ...args] of installSteps(basePython, venv, pkg)) {
          this.output.info(`$ ${command} ${args.join(" ")}`);
          const result = await run(command, args, this.context.globalStorageUri.fsPath);
          this.output.info(result.stdout + result.stderr);
          if (result.code !== 0) {
            this.output.error(result.error ?? `exit status ${result.code}`);
            return false;
          }
        }
        return true;
      },
    );
    if (ok) {
      await this.restart();
    } else {
      this.output.show();
      void vscode.window.showErrorMessage(`CUDA Agent: installing ${pkg} failed; the output has the details.`);
    }
  }

  // ------------------------------------------------------------------ secrets

  private async storedSecrets(): Promise<Map<string, string | undefined>> {
    const entries = await Promise.all(SECRETS.map(async (s) => [s.id, await this.context.secrets.get(s.id)] as const));
    return new Map(entries);
  }

  private async setSecret(secret: SecretSpec): Promise<void> {
    const value = await vscode.window.showInputBox({
      prompt: `${secret.prompt}. Leave empty to remove it.`,
      password: true,
      ignoreFocusOut: true,
    });
    if (value === undefined) {
      return;
    }
    if (value) {
      await this.context.secrets.store(secret.id, value);
    } else {
      await this.context.secrets.delete(secret.id);
    }
    this.output.info(`${secret.id} ${value ? "stored" : "removed"}; restarting the server to pass it on`);
    await this.restart();
  }

  // ------------------------------------------------------------------ commands

  /** Palette commands: the kernel under the cursor (or picked), then the server's command. */
  /** The active CUDA editor, with the server running (undefined, after telling the user why not). */
  private cudaEditor(): vscode.TextEditor | undefined {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== LANGUAGE) {
      void vscode.window.showInformationMessage("CUDA Agent: open a .cu file and put the cursor in a kernel.");
      return undefined;
    }
    if (!this.client?.isRunning()) {
      void vscode.window.showErrorMessage("CUDA Agent: the language server is not running.", "Restart server").then((c) => c && this.restart());
      return undefined;
    }
    return editor;
  }

  private async kernelSymbols(editor: vscode.TextEditor): Promise<vscode.DocumentSymbol[]> {
    return (await vscode.commands.executeCommand<vscode.DocumentSymbol[] | undefined>("vscode.executeDocumentSymbolProvider", editor.document.uri)) ?? [];
  }

  private async runOnKernel(command: string): Promise<unknown> {
    const editor = this.cudaEditor();
    if (!editor) {
      return undefined;
    }
    const symbols = await this.kernelSymbols(editor);
    let kernel = kernelAt(symbols, editor.selection.active.line);
    if (!kernel) {
      const names = kernelSymbols(symbols).map((s) => s.name);
      kernel = names.length === 1 ? names[0] : await vscode.window.showQuickPick(names, { placeHolder: "Which kernel?" });
    }
    if (!kernel) {
      return undefined;
    }
    const ref: KernelRef = { uri: editor.document.uri.toString(), kernel };
    return vscode.commands.executeCommand(command, ref);
  }

  /**
   * "Capture spec from a run…": asks for the command line that runs the user's program (the last
   * one is offered again), splits it into words as a shell would (no shell runs it), and has the
   * server run it and insert the spec of the kernel under the cursor (of the first launched kernel
   * when the cursor is in none), which arrives as an edit (see applyEdit).
   */
  private async captureSpec(): Promise<unknown> {
    const editor = this.cudaEditor();
    if (!editor) {
      return undefined;
    }
    const kernel = kernelAt(await this.kernelSymbols(editor), editor.selection.active.line);
    const line = await vscode.window.showInputBox({
      title: `Capture spec from a run${kernel ? ` (${kernel})` : ""}`,
      prompt: "The command that runs your program on this machine's GPU (run without a shell, in the workspace folder)",
      placeHolder: "./app --n 4096   or   python train.py",
      value: this.context.workspaceState.get<string>(LAST_CAPTURE, ""),
      ignoreFocusOut: true,
      validateInput: (value) => {
        const split = shellWords(value);
        return "error" in split ? split.error : undefined;
      },
    });
    const split = line === undefined ? undefined : shellWords(line);
    if (!split || "error" in split) {
      return undefined;
    }
    await this.context.workspaceState.update(LAST_CAPTURE, line);
    const ref: CaptureRef = { uri: editor.document.uri.toString(), command: split.argv, ...(kernel ? { kernel } : {}) };
    return vscode.commands.executeCommand(CAPTURE_COMMAND, ref);
  }

  /**
   * Every server command (code lens, code action or palette) passes here. Optimize and Benchmark
   * answer at once (their result comes as `cudaAgent/runFinished`); Apply opens the diff preview,
   * whose Accept asks the server to apply.
   */
  private async executeCommand(command: string, args: any[], next: (command: string, args: any[]) => any): Promise<unknown> {
    if (command === APPLY_REWRITE_COMMAND) {
      const runId = (args[0] as RunRef | undefined)?.runId;
      return runId ? this.preview(runId) : undefined;
    }
    const result = await next(command, args);
    this.output.info(`${command}: ${JSON.stringify(result)}`);
    if (command === OPTIMIZE_COMMAND || command === BENCHMARK_COMMAND || command === PROFILE_COMMAND || command === CAPTURE_COMMAND) {
      const started = result as RunStarted | undefined;
      if (started && started.status !== "started") {
        void vscode.window.showWarningMessage(`CUDA Agent: ${started.message}`);
      }
    }
    return result;
  }

  private async finished(run: FinishedRun): Promise<void> {
    this.output.info(`${run.kind} ${run.kernel} (run ${run.runId}): ${run.message}`);
    this.sessionRuns.push({ uri: run.uri, kernel: run.kernel, attempts: run.attempts, simulated: run.simulated });
    this.sessionRuns.splice(0, Math.max(0, this.sessionRuns.length - SESSION_RUNS));
    if (this.resultsPanel) {
      void this.showResults(false);
    }
    const simulated = run.simulated === true ? " (simulated GPU, not a measurement)" : "";
    if (run.kind === "optimize" && run.rewriteReady) {
      await this.preview(run.runId);
    } else if (run.kind === "benchmark" && run.status === "ok") {
      void vscode.window.showInformationMessage(
        `CUDA Agent: ${run.kernel}: ${run.medianMs.toFixed(3)} ms (${spreadText(run.relSpread)}), ${run.gbps.toFixed(0)} GB/s (${run.pctPeak.toFixed(0)}% of peak)${simulated}`,
      );
    } else if (run.kind === "profile") {
      const text = `CUDA Agent: profile ${run.kernel}: ${run.message}`;
      const shown = run.status === "ok" ? vscode.window.showInformationMessage(text, "Show results") : vscode.window.showWarningMessage(text, "Show results");
      void shown.then((choice) => choice && this.showResults());
    } else if (run.status === "error" || run.kind === "benchmark" || (run.kind === "compare" && run.status !== "ok")) {
      void vscode.window.showWarningMessage(`CUDA Agent: ${run.kind} ${run.kernel}: ${run.message || run.status}`);
    } else {
      void vscode.window.showInformationMessage(`CUDA Agent: ${run.kind} ${run.kernel}: ${run.message}${simulated}`);
    }
  }

  // ------------------------------------------------------------------ preview

  /** The side-by-side diff of a run's verified rewrite, with Accept and Discard. */
  private async preview(runId: string): Promise<void> {
    const rewrite = await this.client?.sendRequest<Rewrite | null>(REWRITE_REQUEST, { runId } satisfies RunRef);
    if (!rewrite) {
      void vscode.window.showWarningMessage(`CUDA Agent: the rewrite of run ${runId} is no longer available.`);
      return;
    }
    const uris = this.pending.add(runId, rewrite);
    const original = vscode.Uri.parse(uris.original);
    const rewritten = vscode.Uri.parse(uris.rewritten);
    this.previewChanged.fire(original);
    this.previewChanged.fire(rewritten);
    await vscode.commands.executeCommand("setContext", PREVIEW_CONTEXT, true);
    await vscode.commands.executeCommand("vscode.diff", original, rewritten, diffTitle(rewrite), { preview: false });
    // the summary is a sentence of its own (the server's has no full stop)
    const summary = rewrite.summary ? ` ${rewrite.summary}${rewrite.summary.endsWith(".") ? "" : "."}` : "";
    // A progress notification, not a message with buttons: it can be closed from here, so it goes
    // when the rewrite is accepted or discarded from anywhere (the diff's title bar, the palette).
    void vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: `CUDA Agent: verified rewrite, ${formatSpeedup(rewrite.speedup)} faster.${summary} Accept (✓) or Discard (✕) in the diff's title bar; Cancel discards it.`,
        cancellable: true,
      },
      (_progress, cancel) =>
        new Promise<void>((resolve) => {
          this.notices.get(runId)?.();
          this.notices.set(runId, resolve);
          cancel.onCancellationRequested(() => void this.settleRun(runId, false));
        }),
    );
  }

  /** Accept or Discard from the diff editor's title (its URI) or the palette (the active diff, else the only one). */
  private async settle(uri: vscode.Uri | undefined, accept: boolean): Promise<void> {
    const fromTab = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    const candidates = [uri, fromTab instanceof vscode.TabInputTextDiff ? fromTab.modified : undefined];
    const runId = candidates.map((u) => u?.scheme === PREVIEW_SCHEME && this.pending.runOf(u.path)).find(Boolean);
    if (runId) {
      await this.settleRun(runId, accept);
    } else {
      void vscode.window.showInformationMessage("CUDA Agent: no rewrite preview is open.");
    }
  }

  private async settleRun(runId: string, accept: boolean): Promise<void> {
    this.notices.get(runId)?.();
    this.notices.delete(runId);
    const rewrite = this.pending.settle(runId);
    if (!rewrite) {
      return; // already accepted or discarded from the other control
    }
    await vscode.commands.executeCommand("setContext", PREVIEW_CONTEXT, this.pending.size > 0);
    await this.closePreview(runId);
    if (!accept) {
      return;
    }
    if (!this.client?.isRunning()) {
      void vscode.window.showErrorMessage("CUDA Agent: the language server is not running; the rewrite was not applied.");
      return;
    }
    // The one apply path: the server checks the document and sends the edit (see applyEdit).
    const result = (await this.client.sendRequest(ExecuteCommandRequest.type, {
      command: APPLY_REWRITE_COMMAND,
      arguments: [{ runId } satisfies RunRef],
    })) as ApplyResult | null;
    if (result?.applied) {
      const autoSave = vscode.workspace.getConfiguration("files", vscode.Uri.parse(rewrite.uri)).get<string>("autoSave");
      void vscode.window.showInformationMessage(acceptedMessage(autoSave, rewrite.speedup));
    } else if (result && !result.message.startsWith("Not applied")) {
      void vscode.window.showErrorMessage(`CUDA Agent: the rewrite was not applied: ${result.message}`);
    }
  }

  private async closePreview(runId: string): Promise<void> {
    const tabs = vscode.window.tabGroups.all
      .flatMap((group) => group.tabs)
      .filter((tab) => tab.input instanceof vscode.TabInputTextDiff && parsePreviewPath(tab.input.modified.path)?.runId === runId);
    await vscode.window.tabGroups.close(tabs);
  }

  // ------------------------------------------------------------------ results and status

  /** The results view; `reveal` false: refresh it where it is (after a run ends). */
  private async showResults(reveal = true): Promise<void> {
    if (!this.client?.isRunning()) {
      if (reveal) {
        void vscode.window.showErrorMessage("CUDA Agent: the language server is not running.");
      }
      return;
    }
    const results = await this.client.sendRequest<unknown>(RESULTS_REQUEST, {});
    if (!this.resultsPanel) {
      this.resultsPanel = vscode.window.createWebviewPanel("cudaAgent.results", "CUDA Agent results", vscode.ViewColumn.Beside, {
        enableScripts: false,
        localResourceRoots: [],
      });
      this.resultsPanel.onDidDispose(() => (this.resultsPanel = undefined));
    }
    this.resultsPanel.webview.html = resultsHtml(results, randomBytes(16).toString("base64"), this.sessionRuns);
    if (reveal) {
      this.resultsPanel.reveal();
    }
  }

  private setState(state: ServerState): void {
    this.state = state;
    this.render();
  }

  private render(): void {
    const view = statusView(this.state, this.serverStatus);
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    this.statusItem.command = this.state === "running" ? "cudaAgent.showResults" : "cudaAgent.restartServer";
  }
}
