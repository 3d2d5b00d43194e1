// Which Python runs the language server, whether `cuda-agent` is importable there, and how the
// extension installs it into an environment of its own when it is not.

import { execFile } from "node:child_process";
import * as path from "node:path";

/** Where the interpreter came from, for messages and the output channel. */
export type Source = "setting" | "python-extension" | "default" | "managed";

export type Probe = { ok: true; version: string } | { ok: false; reason: string };

export type Resolution =
  | { ready: true; python: string; source: Source; version: string }
  | { ready: false; python: string; source: Source; reason: string };

export interface InterpreterPorts {
  /** The `cudaAgent.python` setting ("" when unset). */
  configured(): string;
  /** The Python extension's active environment, when that extension is installed. */
  pythonExtension(): Promise<string | undefined>;
  /** The interpreter of the extension-managed environment. */
  managedPython: string;
  /** Whether `cuda-agent` is importable with this interpreter. */
  probe(python: string): Promise<Probe>;
}

/**
 * The setting, else the Python extension's environment, else `python3`. When an interpreter that
 * was not chosen explicitly lacks `cuda-agent`, the extension-managed environment is tried next.
 */
export async function resolveInterpreter(ports: InterpreterPorts): Promise<Resolution> {
  const configured = ports.configured().trim();
  let python: string;
  let source: Source;
  if (configured) {
    [python, source] = [configured, "setting"];
  } else {
    const fromExtension = await ports.pythonExtension();
    [python, source] = fromExtension ? [fromExtension, "python-extension"] : ["python3", "default"];
  }
  const probe = await ports.probe(python);
  if (probe.ok) {
    return { ready: true, python, source, version: probe.version };
  }
  if (source !== "setting") {
    const managed = await ports.probe(ports.managedPython);
    if (managed.ok) {
      return { ready: true, python: ports.managedPython, source: "managed", version: managed.version };
    }
  }
  return { ready: false, python, source, reason: probe.reason };
}

/** The command line that starts the language server on stdio. */
export function serverCommand(python: string, unsafeNoIsolation = false): { command: string; args: string[] } {
  return { command: python, args: ["-m", "server", "serve", ...(unsafeNoIsolation ? ["--unsafe-no-isolation"] : [])] };
}

// Prints the installed version; fails when `cuda-agent` or its server cannot be imported.
const PROBE_SCRIPT = [
  "import importlib.metadata as m",
  "import server.cli",
  "print(m.version('cuda-agent'))",
].join("; ");

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Set when the program could not be started at all (ENOENT, EACCES...). */
  error?: string;
}

/** Runs a program to completion without a shell. `cwd` keeps the workspace off `sys.path`. */
export function run(command: string, args: string[], cwd: string, timeoutMs = 600_000): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const spawnError = err && typeof err.code === "string" ? `${err.code}: ${err.message}` : undefined;
      const code = err ? (typeof err.code === "number" ? err.code : null) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr), error: spawnError });
    });
  });
}

/** Whether `python` can run the server (and which `cuda-agent` version it has). */
export async function probeInterpreter(python: string, cwd: string): Promise<Probe> {
  const result = await run(python, ["-c", PROBE_SCRIPT], cwd, 30_000);
  if (result.error) {
    return { ok: false, reason: `cannot run ${python} (${result.error})` };
  }
  if (result.code !== 0) {
    const lines = result.stderr.trim().split("\n");
    return { ok: false, reason: `cuda-agent is not importable with ${python}: ${lines[lines.length - 1]}` };
  }
  return { ok: true, version: result.stdout.trim() };
}

/** The interpreter inside a virtual environment folder. */
export function venvPython(venv: string, platform: NodeJS.Platform = process.platform): string {
  return platform === "win32" ? path.join(venv, "Scripts", "python.exe") : path.join(venv, "bin", "python");
}

/**
 * What the managed environment installs: the `serverPackage` setting when set, else the
 * `cuda-agent` wheel shipped in the extension's `python/` folder (`files`: that folder's names).
 * Never a bare package name: `cuda-agent` is on no package index.
 */
export function serverPackage(configured: string, bundledDir: string, files: string[]): string | undefined {
  if (configured.trim()) {
    return configured.trim();
  }
  const wheel = files.filter((f) => /^cuda_agent-[^-]+-.+\.whl$/.test(f)).sort().pop();
  return wheel && path.join(bundledDir, wheel);
}

/** The commands that create the managed environment from `basePython` and install `pkg` into it. */
export function installSteps(basePython: string, venv: string, pkg: string, platform: NodeJS.Platform = process.platform): string[][] {
  const python = venvPython(venv, platform);
  return [
    [basePython, "-m", "venv", venv],
    [python, "-m", "pip", "install", "--upgrade", "pip"],
    [python, "-m", "pip", "install", pkg],
  ];
}
