import assert from "node:assert/strict";
import { test } from "node:test";
import type { Resolution } from "../src/interpreter";
import { type ClientEvents, RESTART_SETTINGS, type ServerClient, ServerLifecycle } from "../src/lifecycle";
import { FakeHost } from "./fakeHost";

class FakeClient implements ServerClient {
  running = false;
  stopped = false;
  settingsSent = 0;
  constructor(
    readonly python: string,
    readonly events: ClientEvents,
    private readonly fails = false,
  ) {}
  async start(): Promise<void> {
    if (this.fails) {
      this.events.running(false);
      throw new Error("exited with 1");
    }
    this.running = true;
    this.events.running(true);
  }
  async stop(): Promise<void> {
    this.running = false;
    this.stopped = true;
    this.events.running(false);
  }
  isRunning(): boolean {
    return this.running;
  }
  sendSettings(): void {
    this.settingsSent++;
  }
}

const ready: Resolution = { ready: true, python: "/venv/bin/python", source: "managed", version: "0.1.0" };

function setup(options: { resolution?: Resolution; fails?: boolean } = {}) {
  const host = new FakeHost();
  const clients: FakeClient[] = [];
  const offered: Resolution[] = [];
  let resolutions = 0;
  const lifecycle = new ServerLifecycle(host, {
    resolve: async () => (resolutions++, options.resolution ?? ready),
    offerInstall: async (r) => void offered.push(r),
    create: async (python, events) => {
      const client = new FakeClient(python, events, options.fails);
      clients.push(client);
      return client;
    },
  });
  return { host, lifecycle, clients, offered, resolutions: () => resolutions };
}

test("start runs the resolved interpreter; the status bar follows the state and the server's status", async () => {
  const { host, lifecycle, clients } = setup();
  assert.equal(host.status?.command, "cudaAgent.restartServer"); // stopped
  await lifecycle.start();
  assert.equal(clients[0].python, "/venv/bin/python");
  assert.equal(lifecycle.running(), clients[0]);
  assert.deepEqual(host.status, { view: { text: "$(chip) CUDA Agent", tooltip: "CUDA Agent: language server running" }, command: "cudaAgent.showResults" });
  clients[0].events.status({ executor: "test (simulated GPU)", device: "simulated GPU", running: null });
  assert.equal(host.status?.view.text, "$(chip) CUDA: test (simulated GPU)");
  assert.match(host.logged.join("\n"), /starting the server with \/venv\/bin\/python \(managed, cuda-agent 0\.1\.0\)/);
});

test("two starts at once start one server; restart stops it before starting the next", async () => {
  const { lifecycle, clients, resolutions } = setup();
  await Promise.all([lifecycle.start(), lifecycle.start()]);
  assert.equal(clients.length, 1);
  assert.equal(resolutions(), 1);
  await lifecycle.restart();
  assert.equal(clients.length, 2);
  assert.equal(clients[0].stopped, true);
  assert.equal(lifecycle.running(), clients[1]);
  await lifecycle.stop();
  assert.equal(lifecycle.running(), undefined);
});

test("no interpreter with cuda-agent: failed, the reason logged, the install offered", async () => {
  const missing: Resolution = { ready: false, python: "python3", source: "default", reason: "cuda-agent is not importable with python3" };
  const { host, lifecycle, clients, offered } = setup({ resolution: missing });
  await lifecycle.start();
  assert.deepEqual(clients, []);
  assert.deepEqual(offered, [missing]);
  assert.deepEqual(host.logged, ["error: cuda-agent is not importable with python3"]);
  assert.equal(host.status?.view.text, "$(error) CUDA Agent");
  assert.match(host.status?.view.tooltip ?? "", /could not start/);
});

test("a server that does not start: failed, and an error with a way to the output", async () => {
  const { host, lifecycle } = setup({ fails: true });
  host.answers.push("Show output");
  await lifecycle.start();
  assert.equal(lifecycle.running(), undefined);
  assert.match(host.status?.view.tooltip ?? "", /could not start/);
  assert.equal(host.messages[0].level, "error");
  assert.equal(host.messages[0].text, "CUDA Agent: the language server did not start. See the output for details.");
  await new Promise((resolve) => setImmediate(resolve)); // the button's answer
  assert.equal(host.shownLog, true);
});

test("a settings change restarts for the interpreter, else sends the settings to the running server", async () => {
  const { lifecycle, clients } = setup();
  await lifecycle.start();
  lifecycle.configurationChanged((section) => section === "cudaAgent" || section === "cudaAgent.executor.kind");
  assert.equal(clients[0].settingsSent, 1);
  lifecycle.configurationChanged((section) => section === "editor.fontSize");
  assert.equal(clients[0].settingsSent, 1);
  assert.deepEqual(RESTART_SETTINGS, ["cudaAgent.python", "cudaAgent.serverPackage", "cudaAgent.unsafeNoIsolation"]);
  lifecycle.configurationChanged((section) => section === "cudaAgent" || section === "cudaAgent.python");
  await lifecycle.restart(); // waits for the restart the change began
  assert.equal(clients[0].stopped, true);
  assert.equal(clients[0].settingsSent, 1);
  assert.ok(clients.length >= 2);
  assert.equal(lifecycle.running(), clients[clients.length - 1]);
});
