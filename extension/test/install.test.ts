import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { CHOOSE, INSTALL, Installer, type InstallPorts } from "../src/install";
import { type Probe, type RunResult, venvPython } from "../src/interpreter";
import { FakeHost } from "./fakeHost";

function setup(over: Partial<InstallPorts> = {}, wheel = true) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "cuda-agent-install-"));
  const extensionPath = path.join(root, "extension");
  fs.mkdirSync(path.join(extensionPath, "python"), { recursive: true });
  if (wheel) {
    fs.writeFileSync(path.join(extensionPath, "python", "cuda_agent-0.1.0-py3-none-any.whl"), "");
  }
  const host = new FakeHost();
  const ran: string[][] = [];
  let restarts = 0;
  const ports: InstallPorts = {
    storage: path.join(root, "storage"),
    extensionPath,
    pythonExtension: async () => undefined,
    probe: async (python): Promise<Probe> => ({ ok: false, reason: `no cuda-agent in ${python}` }),
    run: async (command, args): Promise<RunResult> => (ran.push([command, ...args]), { code: 0, stdout: "ok\n", stderr: "" }),
    restart: async () => void restarts++,
    ...over,
  };
  const installer = new Installer(host, ports);
  const cleanup = () => fs.rmSync(root, { recursive: true, force: true });
  return { root, host, ran, installer, ports, restarts: () => restarts, cleanup };
}

test("resolve reads the setting through the host and falls back to the managed environment", async (t) => {
  const { host, installer, ports, cleanup } = setup({ probe: async (python) => (python.includes(`${path.sep}venv${path.sep}`) ? { ok: true, version: "0.2.0" } : { ok: false, reason: "no" }) });
  t.after(cleanup);
  assert.deepEqual(await installer.resolve(), { ready: true, python: venvPython(path.join(ports.storage, "venv")), source: "managed", version: "0.2.0" });
  host.settings.set("cudaAgent.python", "/opt/py");
  const chosen = await installer.resolve();
  assert.equal(chosen.ready, false);
  assert.equal(chosen.python, "/opt/py");
});

test("Install creates the managed environment from the bundled wheel, then restarts the server", async (t) => {
  const { host, ran, installer, ports, restarts, cleanup } = setup();
  t.after(cleanup);
  host.answers.push(INSTALL);
  await installer.offerInstall({ ready: false, python: "python3", source: "default", reason: "cuda-agent is not importable with python3" });
  assert.deepEqual(host.messages[0], { level: "warning", text: "CUDA Agent: cuda-agent is not importable with python3", buttons: [INSTALL, CHOOSE] });
  const venv = path.join(ports.storage, "venv");
  const wheel = path.join(ports.extensionPath, "python", "cuda_agent-0.1.0-py3-none-any.whl");
  assert.deepEqual(ran, [
    ["python3", "-m", "venv", venv],
    [venvPython(venv), "-m", "pip", "install", "--upgrade", "pip"],
    [venvPython(venv), "-m", "pip", "install", wheel],
  ]);
  assert.equal(fs.existsSync(ports.storage), true);
  assert.deepEqual(host.progress, [`CUDA Agent: installing ${wheel} into ${venv}`]);
  assert.equal(restarts(), 1);
});

test("a failed step stops the install, shows the output and says so; no restart", async (t) => {
  const { host, ran, installer, restarts, cleanup } = setup({
    run: async (command, args) => (ran.push([command, ...args]), { code: 1, stdout: "", stderr: "No module named venv", error: undefined }),
  });
  t.after(cleanup);
  host.settings.set("cudaAgent.serverPackage", "/src/cuda-agent");
  await installer.installManaged("python3");
  assert.equal(ran.length, 1);
  assert.equal(host.shownLog, true);
  assert.ok(host.logged.includes("error: exit status 1"));
  assert.deepEqual(host.messages.at(-1), { level: "error", text: "CUDA Agent: installing /src/cuda-agent failed; the output has the details.", buttons: [] });
  assert.equal(restarts(), 0);
});

test("without a bundled wheel or a serverPackage setting, nothing runs and the setting is named", async (t) => {
  const { host, ran, installer, cleanup } = setup({}, false);
  t.after(cleanup);
  await installer.installManaged("python3");
  assert.deepEqual(ran, []);
  assert.match(host.messages[0].text, /carries no server wheel; set cudaAgent\.serverPackage/);
});

test("Choose interpreter stores the pick in User settings, or restarts when it is already the setting", async (t) => {
  const { host, installer, restarts, cleanup } = setup();
  t.after(cleanup);
  host.answers.push(CHOOSE);
  host.picked = "/opt/py/bin/python";
  await installer.offerInstall({ ready: false, python: "python3", source: "default", reason: "no" });
  assert.equal(host.userSetting("cudaAgent", "python"), "/opt/py/bin/python");
  assert.equal(restarts(), 0); // the setting's change restarts it
  await installer.chooseInterpreter();
  assert.equal(restarts(), 1);
  host.picked = undefined;
  await installer.chooseInterpreter();
  assert.equal(restarts(), 1);
});
