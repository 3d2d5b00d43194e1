// The language server's life: the interpreter that runs it (install offered when none has
// cuda-agent), start, stop, restart (one at a time), settings changes, and its state in the
// status bar. The client comes from a factory (languageClient.ts, over vscode-languageclient; a
// fake in the unit tests), the editor through the `Host` wrapper.

import type { Host } from "./host";
import type { Resolution } from "./interpreter";
import type { ServerStatus } from "./protocol";
import { SECTION } from "./settings";
import { type ServerState, statusView } from "./status";

/** Settings whose change needs a new server process rather than a configuration update. */
export const RESTART_SETTINGS = ["python", "serverPackage", "unsafeNoIsolation"].map((key) => `${SECTION}.${key}`);

/** One server process and the connection to it. */
export interface ServerClient {
  start(): Promise<void>;
  stop(): Promise<void>;
  isRunning(): boolean;
  /** Sends the current settings (`workspace/didChangeConfiguration`). */
  sendSettings(): void;
}

/** What a client reports to the lifecycle. */
export interface ClientEvents {
  /** The connection is up (true) or the process ended (false). */
  running(up: boolean): void;
  /** The server's `cudaAgent/status`. */
  status(status: ServerStatus): void;
}

export interface LifecyclePorts {
  /** The interpreter to run the server with (install.ts). */
  resolve(): Promise<Resolution>;
  /** Offers to install the server, or to choose an interpreter, when none has it. */
  offerInstall(resolution: Resolution & { ready: false }): Promise<void>;
  /** A client that runs the server with `python`. */
  create(python: string, events: ClientEvents): Promise<ServerClient>;
}

export class ServerLifecycle {
  private client: ServerClient | undefined;
  private state: ServerState = "stopped";
  private serverStatus: ServerStatus | undefined;
  private starting: Promise<void> | undefined;

  constructor(
    private readonly host: Host,
    private readonly ports: LifecyclePorts,
  ) {
    this.render();
  }

  /** The client, while its server is running. */
  running(): ServerClient | undefined {
    return this.client?.isRunning() ? this.client : undefined;
  }

  /** Starts the server; a second call while it starts waits for the same start. */
  start(): Promise<void> {
    this.starting ??= this.startServer().finally(() => (this.starting = undefined));
    return this.starting;
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop();
      } catch (err) {
        this.host.log.warn(`stopping the server: ${String(err)}`);
      }
    }
  }

  async restart(): Promise<void> {
    await this.starting;
    await this.stop();
    await this.start();
  }

  /** A settings change (`affects`: VS Code's `affectsConfiguration`): a restart, or the new settings sent. */
  configurationChanged(affects: (section: string) => boolean): void {
    if (RESTART_SETTINGS.some(affects)) {
      void this.restart();
    } else if (affects(SECTION)) {
      this.running()?.sendSettings();
    }
  }

  private async startServer(): Promise<void> {
    this.setState("starting");
    const resolution = await this.ports.resolve();
    if (!resolution.ready) {
      this.host.log.error(resolution.reason);
      this.setState("failed");
      void this.ports.offerInstall(resolution);
      return;
    }
    this.host.log.info(`starting the server with ${resolution.python} (${resolution.source}, cuda-agent ${resolution.version})`);
    const client = await this.ports.create(resolution.python, {
      running: (up) => {
        if (up) {
          this.setState("running");
        } else {
          this.serverStatus = undefined;
          this.setState(this.state === "starting" ? "failed" : "stopped");
        }
      },
      status: (status) => {
        this.serverStatus = status;
        this.render();
      },
    });
    this.client = client;
    try {
      await client.start();
    } catch (err) {
      this.host.log.error(`the server did not start: ${String(err)}`);
      this.setState("failed");
      void this.host.message("error", "CUDA Agent: the language server did not start. See the output for details.", "Show output").then((choice) => {
        if (choice) {
          this.host.log.show();
        }
      });
    }
  }

  private setState(state: ServerState): void {
    this.state = state;
    this.render();
  }

  private render(): void {
    this.host.showStatus(statusView(this.state, this.serverStatus), this.state === "running" ? "cudaAgent.showResults" : "cudaAgent.restartServer");
  }
}
