// Activation: wires the three parts (lifecycle.ts: the server's life; rewrites.ts: preview and
// apply; install.ts: the Python environment) to VS Code through the `Host` wrapper (vscodeHost.ts)
// and to `cuda-agent serve` through vscode-languageclient (languageClient.ts), and registers the
// commands. Also here, being thin glue over the vscode API: the kernel commands, the run's end,
// the results view and the secrets.

import { randomBytes } from "node:crypto";
import { PythonExtension } from "@vscode/python-extension";
import * as vscode from "vscode";
import { finishedAction } from "./finished";
import { Installer } from "./install";
import { probeInterpreter, run } from "./interpreter";
import { kernelAt, kernelSymbols } from "./kernels";
import { LANGUAGE, LspServerClient } from "./languageClient";
import { ServerLifecycle } from "./lifecycle";
import {
  APPLY_REWRITE_COMMAND,
  BENCHMARK_COMMAND,
  CAPTURE_COMMAND,
  type CaptureRef,
  type KernelRef,
  OPTIMIZE_COMMAND,
  PROFILE_COMMAND,
  type RunFinished,
  SPEEDUP_COMMAND,
  type SpeedupRef,
  type RunRef,
  type RunStarted,
} from "./protocol";
import { resultsHtml, type SessionRun } from "./results";
import { RewriteFlow } from "./rewrites";
import { LLM_API_KEY, SECRETS, SECTION, type SecretSpec, serverEnvironment, WORKER_TOKEN } from "./settings";
import { shellWords } from "./shellwords";
import { VscodeHost } from "./vscodeHost";

/** The workspace's last "Capture spec from a run…" command line (the input box starts with it). */
const LAST_CAPTURE = "cudaAgent.lastCaptureCommand";
/** Run results kept for the results view (attempts, the simulated label), latest last. */
const SESSION_RUNS = 50;
/** Commands whose answer is a `RunStarted` (the run's end comes as `cudaAgent/runFinished`). */
const RUN_COMMANDS = [OPTIMIZE_COMMAND, BENCHMARK_COMMAND, PROFILE_COMMAND, CAPTURE_COMMAND, SPEEDUP_COMMAND];
/** The workspace's last "Make my program faster…" answers (the input boxes start with them). */
const LAST_SPEEDUP = "cudaAgent.lastSpeedup";

let agent: Agent | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  agent = new Agent(context);
  await agent.lifecycle.start();
}

export async function deactivate(): Promise<void> {
  await agent?.lifecycle.stop();
  agent = undefined;
}

class Agent {
  private readonly host: VscodeHost;
  private readonly flow: RewriteFlow;
  private readonly installer: Installer;
  readonly lifecycle: ServerLifecycle;
  private client: LspServerClient | undefined;
  private resultsPanel: vscode.WebviewPanel | undefined;
  private readonly sessionRuns: SessionRun[] = [];

  constructor(private readonly context: vscode.ExtensionContext) {
    this.host = new VscodeHost((path) => this.flow.content(path));
    this.flow = new RewriteFlow(this.host, () => this.running());
    this.installer = new Installer(this.host, {
      storage: context.globalStorageUri.fsPath,
      extensionPath: context.extensionPath,
      pythonExtension: () => this.pythonExtensionInterpreter(),
      probe: (python) => probeInterpreter(python, context.extensionPath),
      run: (command, args, cwd) => run(command, args, cwd),
      restart: () => this.lifecycle.restart(),
    });
    this.lifecycle = new ServerLifecycle(this.host, {
      resolve: () => this.installer.resolve(),
      offerInstall: (resolution) => this.installer.offerInstall(resolution),
      create: async (python, events) => {
        const env = serverEnvironment(process.env, await this.storedSecrets());
        this.client = new LspServerClient(
          { python, env, cwd: context.extensionPath, log: this.host.log, unsafeNoIsolation: vscode.workspace.getConfiguration(SECTION).inspect<boolean>("unsafeNoIsolation")?.globalValue === true },
          {
            ...events,
            finished: (finished) => void this.finished(finished),
            applyEdit: (edit, otherwise) => this.flow.applyEdit(edit, otherwise),
            executeCommand: (command, args, next) => this.executeCommand(command, args, next),
          },
        );
        return this.client;
      },
    });
    const reg = (id: string, fn: (...args: any[]) => unknown) => context.subscriptions.push(vscode.commands.registerCommand(id, fn));
    reg("cudaAgent.optimizeKernel", () => this.runOnKernel(OPTIMIZE_COMMAND));
    reg("cudaAgent.benchmarkKernel", () => this.runOnKernel(BENCHMARK_COMMAND));
    reg("cudaAgent.profileKernel", () => this.runOnKernel(PROFILE_COMMAND));
    reg("cudaAgent.captureSpec", () => this.captureSpec());
    reg("cudaAgent.makeProgramFaster", () => this.makeProgramFaster());
    reg("cudaAgent.showResults", () => this.showResults());
    reg("cudaAgent.restartServer", () => this.lifecycle.restart());
    reg("cudaAgent.setWorkerToken", () => this.setSecret(WORKER_TOKEN));
    reg("cudaAgent.setLlmApiKey", () => this.setSecret(LLM_API_KEY));
    reg("cudaAgent.acceptRewrite", (uri?: vscode.Uri) => this.flow.settle(uri, true));
    reg("cudaAgent.discardRewrite", (uri?: vscode.Uri) => this.flow.settle(uri, false));
    context.subscriptions.push(
      this.host,
      vscode.workspace.onDidChangeConfiguration((e) => this.lifecycle.configurationChanged((section) => e.affectsConfiguration(section))),
    );
    this.watchPythonExtension();
  }

  /** The client, while its server is running. */
  private running(): LspServerClient | undefined {
    return this.lifecycle.running() ? this.client : undefined;
  }

  // ------------------------------------------------------------------ the Python extension

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
      this.host.log.warn(`the Python extension did not give an interpreter: ${String(err)}`);
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
              void this.lifecycle.restart();
            }
          }),
        ),
      (err) => this.host.log.warn(`the Python extension is not available: ${String(err)}`),
    );
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
    this.host.log.info(`${secret.id} ${value ? "stored" : "removed"}; restarting the server to pass it on`);
    await this.lifecycle.restart();
  }

  // ------------------------------------------------------------------ commands

  /** The active CUDA editor, with the server running (undefined, after telling the user why not). */
  private cudaEditor(): vscode.TextEditor | undefined {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== LANGUAGE) {
      void vscode.window.showInformationMessage("CUDA Agent: open a .cu file and put the cursor in a kernel.");
      return undefined;
    }
    if (!this.running()) {
      void vscode.window.showErrorMessage("CUDA Agent: the language server is not running.", "Restart server").then((c) => c && this.lifecycle.restart());
      return undefined;
    }
    return editor;
  }

  private async kernelSymbols(editor: vscode.TextEditor): Promise<vscode.DocumentSymbol[]> {
    return (await vscode.commands.executeCommand<vscode.DocumentSymbol[] | undefined>("vscode.executeDocumentSymbolProvider", editor.document.uri)) ?? [];
  }

  /** Palette commands: the kernel under the cursor (or picked), then the server's command. */
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
   * when the cursor is in none), which arrives as an edit (see RewriteFlow.applyEdit).
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
   * "Make my program faster…": asks for the command line that runs the program, its build command
   * and the files it writes (each answer remembered for the workspace), and has the server run the
   * whole flow. Its rewrites arrive as one workspace edit that VS Code shows in its Refactor
   * Preview (see RewriteFlow.applyEdit); the report comes with `cudaAgent/runFinished`. The server
   * runs the program where `cuda-agent speedup` would: on the worker of the user's settings (the
   * `machine` object of the configuration, never a workspace's values), else on this machine.
   */
  private async makeProgramFaster(): Promise<unknown> {
    const editor = vscode.window.activeTextEditor;
    const folder = vscode.workspace.workspaceFolders?.[0];
    const uri = editor?.document.uri.toString() ?? folder?.uri.toString();
    if (!uri) {
      void vscode.window.showWarningMessage("CUDA Agent: open a folder (or a file of the program) first.");
      return undefined;
    }
    const last = this.context.workspaceState.get<{ command: string; build: string; outputs: string }>(LAST_SPEEDUP, {
      command: "",
      build: "",
      outputs: "",
    });
    const ask = (title: string, prompt: string, value: string, placeHolder: string, words: boolean) =>
      vscode.window.showInputBox({
        title,
        prompt,
        value,
        placeHolder,
        ignoreFocusOut: true,
        validateInput: (text) => {
          const split = words ? shellWords(text) : undefined;
          return split && "error" in split ? split.error : undefined;
        },
      });
    const command = await ask("Make my program faster (1/3)", "The command that runs your program (no shell, in the workspace folder)", last.command, "./app --steps 100", true);
    const split = command === undefined ? undefined : shellWords(command);
    if (!command || !split || "error" in split || split.argv.length === 0) {
      return undefined;
    }
    const build = await ask("Make my program faster (2/3)", "The build command (run in a shell); empty: rewrites are proposed without an end-to-end check", last.build, "make   or   cmake --build build", false);
    if (build === undefined) {
      return undefined;
    }
    const outputs = await ask("Make my program faster (3/3)", "Files the program writes, compared before and after (FILE or FILE:float32, space-separated)", last.outputs, "out.bin:float32 result.txt", true);
    const files = outputs === undefined ? undefined : shellWords(outputs);
    if (!files || "error" in files) {
      return undefined;
    }
    await this.context.workspaceState.update(LAST_SPEEDUP, { command, build, outputs });
    const ref: SpeedupRef = {
      uri,
      command: split.argv,
      ...(build.trim() ? { build } : {}),
      outputs: files.argv,
      ignore: ["(?i)\\btime\\b|msec|\\bms\\b|GB/s"],
      rtol: 1e-5,
      atol: 1e-8,
      top: 3,
      share: 0.8,
      budgetS: 120,
      runs: 3,
    };
    return vscode.commands.executeCommand(SPEEDUP_COMMAND, ref);
  }

  /**
   * Every server command (code lens, code action or palette) passes here. Optimize and Benchmark
   * answer at once (their result comes as `cudaAgent/runFinished`); Apply opens the diff preview,
   * whose Accept asks the server to apply.
   */
  private async executeCommand(command: string, args: any[], next: (command: string, args: any[]) => any): Promise<unknown> {
    if (command === APPLY_REWRITE_COMMAND) {
      const runId = (args[0] as RunRef | undefined)?.runId;
      return runId ? this.flow.preview(runId) : undefined;
    }
    const result = await next(command, args);
    this.host.log.info(`${command}: ${JSON.stringify(result)}`);
    const started = RUN_COMMANDS.includes(command) ? (result as RunStarted | undefined) : undefined;
    if (started && started.status !== "started") {
      void vscode.window.showWarningMessage(`CUDA Agent: ${started.message}`);
    }
    return result;
  }

  private async finished(run: RunFinished): Promise<void> {
    this.host.log.info(`${run.kind} ${run.kernel} (run ${run.runId}): ${run.message}`);
    this.sessionRuns.push({ uri: run.uri, kernel: run.kernel, optimize: run.optimize, simulated: run.simulated });
    this.sessionRuns.splice(0, Math.max(0, this.sessionRuns.length - SESSION_RUNS));
    if (this.resultsPanel) {
      void this.showResults(false);
    }
    const action = finishedAction(run);
    if (action.preview) {
      await this.flow.preview(run.runId);
    } else {
      const buttons = action.showResults ? ["Show results"] : [];
      void this.host.message(action.level, action.text, ...buttons).then((choice) => {
        if (choice) {
          void this.showResults();
        }
      });
    }
  }

  // ------------------------------------------------------------------ results

  /** The results view; `reveal` false: refresh it where it is (after a run ends). */
  private async showResults(reveal = true): Promise<void> {
    const client = this.running();
    if (!client) {
      if (reveal) {
        void vscode.window.showErrorMessage("CUDA Agent: the language server is not running.");
      }
      return;
    }
    const results = await client.results();
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
}
