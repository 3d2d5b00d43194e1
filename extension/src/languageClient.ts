// A `ServerClient` (lifecycle.ts) over vscode-languageclient: `cuda-agent serve` on stdio, the
// settings in the server's shape, work-done progress as a notification with a Cancel button, the
// server's `workspace/applyEdit` through the rewrite flow, its log lines in the output channel.

import * as vscode from "vscode";
import {
  ApplyWorkspaceEditRequest,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  LogMessageNotification,
  MessageType,
  type Middleware,
  type ProgressToken,
  State,
  type StaticFeature,
  WorkDoneProgress,
  type WorkDoneProgressBegin,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
  type WorkDoneProgressReport,
} from "vscode-languageclient/node";
import type { LspWorkspaceEdit } from "./edits";
import { serverCommand } from "./interpreter";
import type { ClientEvents, ServerClient } from "./lifecycle";
import { ProgressSteps } from "./progress";
import { APPLY_REWRITE_COMMAND, type ApplyResult, RESULTS_REQUEST, type Results, type ResultsParams, REWRITE_REQUEST, type Rewrite, RUN_FINISHED_NOTIFICATION, type RunFinished, type RunRef, STATUS_NOTIFICATION } from "./protocol";
import type { EditAnswer, RewriteServer } from "./rewrites";
import { SECTION, serverSettings } from "./settings";

export const LANGUAGE = "cuda-cpp";

/** What the client hands on to the rest of the extension. */
export interface ClientHandlers extends ClientEvents {
  finished(run: RunFinished): void;
  applyEdit(edit: LspWorkspaceEdit, otherwise: () => Promise<boolean>): Promise<EditAnswer>;
  executeCommand: Middleware["executeCommand"];
}

export interface ClientOptions {
  python: string;
  /** The server's environment (secrets included). */
  env: NodeJS.ProcessEnv;
  /** The server's working folder (the extension's: keeps the workspace off `sys.path`). */
  cwd: string;
  log: vscode.LogOutputChannel;
  /** `cudaAgent.unsafeNoIsolation` from the user's settings: the server compiles unconfined. */
  unsafeNoIsolation: boolean;
}

/** A `cudaAgent` setting's user-level value (user or remote machine settings; never a workspace's). */
function userValue(key: string): unknown {
  return vscode.workspace.getConfiguration(SECTION).inspect(key)?.globalValue;
}

/** The `cudaAgent` settings in the server's shape. */
function settings(): Record<string, unknown> {
  return serverSettings(vscode.workspace.getConfiguration(SECTION), userValue);
}

/** A feature that only installs handlers once the connection is up (on every start). */
function onInitialize(initialize: () => void): StaticFeature {
  return {
    fillClientCapabilities: () => undefined,
    initialize,
    getState: () => ({ kind: "static" }),
    clear: () => undefined,
  };
}

export class LspServerClient implements ServerClient, RewriteServer {
  private readonly client: LanguageClient;

  constructor(options: ClientOptions, handlers: ClientHandlers) {
    const { command, args } = serverCommand(options.python, options.unsafeNoIsolation);
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: LANGUAGE },
        { scheme: "untitled", language: LANGUAGE },
      ],
      outputChannel: options.log,
      initializationOptions: settings,
      middleware: {
        workspace: {
          configuration: async (params, token, next) => {
            const values = await next(params, token);
            if (!Array.isArray(values)) {
              return values;
            }
            return values.map((value, i) => (params.items[i]?.section === SECTION ? serverSettings(value, userValue) : value));
          },
        },
        executeCommand: handlers.executeCommand,
      },
    };
    // No `transport` option: vscode-languageclient would add a `--stdio` argument; `serve` speaks stdio by default.
    const client = new LanguageClient("cudaAgent", "CUDA Agent", { command, args, options: { cwd: options.cwd, env: options.env } }, clientOptions);
    client.onNotification(STATUS_NOTIFICATION, (status) => handlers.status(status));
    client.onNotification(RUN_FINISHED_NOTIFICATION, (finished: RunFinished) => handlers.finished(finished));
    // vscode-languageclient shows the server's work-done progress in the status bar, where VS Code
    // offers no cancel button; this shows it as a notification with one. A feature registered
    // after the built-in ones is initialized after them, so its handler replaces theirs.
    client.registerFeature(onInitialize(() => client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => this.trackProgress(token))));
    client.registerFeature(
      onInitialize(() => {
        client.onRequest(ApplyWorkspaceEditRequest.type, (params) =>
          handlers.applyEdit(params.edit as LspWorkspaceEdit, async () => vscode.workspace.applyEdit(await client.protocol2CodeConverter.asWorkspaceEdit(params.edit))),
        );
        // The output channel stamps each line itself: the server's log lines go in at their level,
        // without the client's own "[Info - 10:42:07 AM]" prefix (two timestamps per line).
        client.onNotification(LogMessageNotification.type, ({ type, message }) => {
          const log = options.log;
          if (type === MessageType.Error) {
            log.error(message);
          } else if (type === MessageType.Warning) {
            log.warn(message);
          } else if (type === MessageType.Info) {
            log.info(message);
          } else {
            log.debug(message);
          }
        });
      }),
    );
    client.onDidChangeState((e) => {
      if (e.newState === State.Running) {
        handlers.running(true);
      } else if (e.newState === State.Stopped) {
        handlers.running(false);
      }
    });
    this.client = client;
  }

  start(): Promise<void> {
    return this.client.start();
  }

  stop(): Promise<void> {
    return this.client.dispose(2000);
  }

  isRunning(): boolean {
    return this.client.isRunning();
  }

  sendSettings(): void {
    void this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings() } });
  }

  rewrite(runId: string): Promise<Rewrite | null> {
    return this.client.sendRequest<Rewrite | null>(REWRITE_REQUEST, { runId } satisfies RunRef);
  }

  async apply(runId: string): Promise<ApplyResult | null> {
    return (await this.client.sendRequest(ExecuteCommandRequest.type, { command: APPLY_REWRITE_COMMAND, arguments: [{ runId } satisfies RunRef] })) as ApplyResult | null;
  }

  results(): Promise<Results | null> {
    return this.client.sendRequest<Results | null>(RESULTS_REQUEST, {} satisfies ResultsParams);
  }

  private trackProgress(token: ProgressToken): void {
    const client = this.client;
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
}
