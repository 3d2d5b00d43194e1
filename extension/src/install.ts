// Which Python runs the server, and installing it into an environment of the extension's own
// when none has it: the offer, the interpreter picker, the managed environment's install. Through
// the `Host` wrapper and injected processes: unit-tested without VS Code (interpreter.ts has the
// pure parts).

import * as fs from "node:fs";
import * as path from "node:path";
import type { Host, InstallHost } from "./host";
import { installSteps, type Probe, type Resolution, resolveInterpreter, type RunResult, serverPackage, venvPython } from "./interpreter";
import { SECTION } from "./settings";

export const INSTALL = "Install into a managed environment";
export const CHOOSE = "Choose interpreter";

export interface InstallPorts {
  /** The extension's global storage folder: the managed environment goes in it. */
  storage: string;
  /** The extension's folder: the server wheel it carries is in its `python/`. */
  extensionPath: string;
  /** The Python extension's active environment, when that extension is installed. */
  pythonExtension(): Promise<string | undefined>;
  /** Whether `cuda-agent` is importable with this interpreter. */
  probe(python: string): Promise<Probe>;
  /** Runs a program to completion (no shell) in `cwd`. */
  run(command: string, args: string[], cwd: string): Promise<RunResult>;
  /** Restarts the server (after an install, or when the same interpreter is chosen again). */
  restart(): Promise<void>;
}

export class Installer {
  constructor(
    private readonly host: Host & InstallHost,
    private readonly ports: InstallPorts,
  ) {}

  /** The managed environment's folder. */
  get venv(): string {
    return path.join(this.ports.storage, "venv");
  }

  /** The setting, else the Python extension's environment, else `python3`; then the managed one. */
  resolve(): Promise<Resolution> {
    return resolveInterpreter({
      configured: () => this.host.setting<string>(SECTION, "python") ?? "",
      pythonExtension: () => this.ports.pythonExtension(),
      managedPython: venvPython(this.venv),
      probe: (python) => this.ports.probe(python),
    });
  }

  async offerInstall(resolution: Resolution & { ready: false }): Promise<void> {
    const choice = await this.host.message("warning", `CUDA Agent: ${resolution.reason}`, INSTALL, CHOOSE);
    if (choice === CHOOSE) {
      await this.chooseInterpreter();
    } else if (choice === INSTALL) {
      await this.installManaged(resolution.python);
    }
  }

  /** Asks for a Python executable and stores it as `cudaAgent.python` in User settings (which restarts the server). */
  async chooseInterpreter(): Promise<void> {
    const picked = await this.host.pickFile("CUDA Agent: the Python interpreter that has cuda-agent installed", "Use this interpreter");
    if (!picked) {
      return;
    }
    if (this.host.userSetting(SECTION, "python") === picked) {
      await this.ports.restart(); // the same value again: no configuration change to restart on
    } else {
      await this.host.setUserSetting(SECTION, "python", picked);
    }
  }

  /** Creates the managed environment from `basePython`, installs the server into it, restarts. */
  async installManaged(basePython: string): Promise<void> {
    const bundled = path.join(this.ports.extensionPath, "python");
    const files = fs.existsSync(bundled) ? fs.readdirSync(bundled) : [];
    const pkg = serverPackage(this.host.setting<string>(SECTION, "serverPackage") ?? "", bundled, files);
    if (!pkg) {
      void this.host.message(
        "error",
        "CUDA Agent: this build of the extension carries no server wheel; set cudaAgent.serverPackage to a cuda-agent checkout or wheel.",
      );
      return;
    }
    fs.mkdirSync(this.ports.storage, { recursive: true });
    const ok = await this.host.withProgress(`CUDA Agent: installing ${pkg} into ${this.venv}`, async () => {
      for (const [command, ...args] of installSteps(basePython, this.venv, pkg)) {
        this.host.log.info(`$ ${command} ${args.join(" ")}`);
        const result = await this.ports.run(command, args, this.ports.storage);
        this.host.log.info(result.stdout + result.stderr);
        if (result.code !== 0) {
          this.host.log.error(result.error ?? `exit status ${result.code}`);
          return false;
        }
      }
      return true;
    });
    if (ok) {
      await this.ports.restart();
    } else {
      this.host.log.show();
      void this.host.message("error", `CUDA Agent: installing ${pkg} failed; the output has the details.`);
    }
  }
}
