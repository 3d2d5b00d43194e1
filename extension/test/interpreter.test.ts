import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { type InterpreterPorts, installSteps, type Probe, probeInterpreter, resolveInterpreter, serverCommand, venvPython, serverPackage } from "../src/interpreter";

function ports(over: Partial<InterpreterPorts> & { working?: string[] }): InterpreterPorts & { probed: string[] } {
  const probed: string[] = [];
  const working = over.working ?? [];
  return {
    configured: () => "",
    pythonExtension: async () => undefined,
    managedPython: "/storage/venv/bin/python",
    probe: async (python: string): Promise<Probe> => {
      probed.push(python);
      return working.includes(python) ? { ok: true, version: "0.1.0" } : { ok: false, reason: `no cuda-agent in ${python}` };
    },
    ...over,
    probed,
  };
}

test("the setting wins, and is never silently replaced", async () => {
  const p = ports({ configured: () => " /opt/py/bin/python ", pythonExtension: async () => "/ext/python", working: ["/opt/py/bin/python"] });
  assert.deepEqual(await resolveInterpreter(p), { ready: true, python: "/opt/py/bin/python", source: "setting", version: "0.1.0" });
  const broken = ports({ configured: () => "/opt/py/bin/python", working: ["/storage/venv/bin/python"] });
  const r = await resolveInterpreter(broken);
  assert.equal(r.ready, false);
  assert.equal(r.python, "/opt/py/bin/python");
  assert.deepEqual(broken.probed, ["/opt/py/bin/python"]);
});

test("then the Python extension's environment, then python3", async () => {
  const fromExt = await resolveInterpreter(ports({ pythonExtension: async () => "/ext/python", working: ["/ext/python"] }));
  assert.equal(fromExt.ready && fromExt.source, "python-extension");
  const fallback = await resolveInterpreter(ports({ working: ["python3"] }));
  assert.deepEqual(fallback, { ready: true, python: "python3", source: "default", version: "0.1.0" });
});

test("an automatic choice without cuda-agent falls back to the managed environment", async () => {
  const p = ports({ pythonExtension: async () => "/ext/python", working: ["/storage/venv/bin/python"] });
  const r = await resolveInterpreter(p);
  assert.deepEqual(r, { ready: true, python: "/storage/venv/bin/python", source: "managed", version: "0.1.0" });
  const none = await resolveInterpreter(ports({}));
  assert.deepEqual(none, { ready: false, python: "python3", source: "default", reason: "no cuda-agent in python3" });
});

test("server command, venv layout and install steps", () => {
  assert.deepEqual(serverCommand("/py"), { command: "/py", args: ["-m", "server", "serve"] });
  assert.deepEqual(serverCommand("/py", true), { command: "/py", args: ["-m", "server", "serve", "--unsafe-no-isolation"] });
  assert.equal(venvPython("/s/venv", "linux"), path.join("/s/venv", "bin", "python"));
  assert.equal(venvPython("C:\\s\\venv", "win32"), path.join("C:\\s\\venv", "Scripts", "python.exe"));
  const steps = installSteps("python3", "/s/venv", "/src/cuda-agent", "linux");
  assert.deepEqual(steps[0], ["python3", "-m", "venv", "/s/venv"]);
  assert.deepEqual(steps[steps.length - 1], [path.join("/s/venv", "bin", "python"), "-m", "pip", "install", "/src/cuda-agent"]);
});

// Real interpreters: a program that does not exist, a fresh venv without cuda-agent, and the
// project's own environment (CI: $VIRTUAL_ENV; locally: CUDA_AGENT_PYTHON or the repo's .venv).

test("probe: a missing program", async () => {
  const r = await probeInterpreter("/nonexistent/python3", os.tmpdir());
  assert.equal(r.ok, false);
  assert.match(!r.ok ? r.reason : "", /cannot run \/nonexistent\/python3 \(ENOENT/);
});

test("probe: a Python without cuda-agent", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cuda-agent-probe-"));
  try {
    execFileSync("python3", ["-m", "venv", "--without-pip", path.join(dir, "venv")]);
    const r = await probeInterpreter(venvPython(path.join(dir, "venv")), dir);
    assert.equal(r.ok, false);
    assert.match(!r.ok ? r.reason : "", /cuda-agent is not importable with .*: (ModuleNotFoundError|importlib\.metadata\.PackageNotFoundError)/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

function projectPython(): string | undefined {
  const candidates = [
    process.env.CUDA_AGENT_PYTHON,
    process.env.VIRTUAL_ENV && venvPython(process.env.VIRTUAL_ENV),
    venvPython(path.resolve(__dirname, "..", "..", "..", ".venv")),
  ];
  return candidates.find((p): p is string => !!p && fs.existsSync(p));
}

test("probe: the project's environment has the server", async (t) => {
  const python = projectPython();
  if (!python) {
    t.skip("no Python with cuda-agent installed (set CUDA_AGENT_PYTHON)");
    return;
  }
  const r = await probeInterpreter(python, os.tmpdir());
  assert.deepEqual(r.ok, true, !r.ok ? r.reason : "");
  assert.match(r.ok ? r.version : "", /^\d+\.\d+/);
});

test("the managed install takes the setting, else the wheel shipped in the extension, never an index name", () => {
  const dir = path.join("ext", "python");
  assert.equal(serverPackage(" /src/cuda-agent ", dir, ["cuda_agent-0.1.0-py3-none-any.whl"]), "/src/cuda-agent");
  assert.equal(serverPackage("", dir, ["README", "cuda_agent-0.1.0-py3-none-any.whl"]), path.join(dir, "cuda_agent-0.1.0-py3-none-any.whl"));
  assert.equal(serverPackage("", dir, ["other-1.0-py3-none-any.whl"]), undefined);
  assert.equal(serverPackage("", dir, []), undefined);
});
