import assert from "node:assert/strict";
import { test } from "node:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { LLM_API_KEY, ROUTES, serverEnvironment, serverSettings, WORKER_TOKEN } from "../src/settings";

// What VS Code's getConfiguration("cudaAgent") serialises to.
const section = {
  python: "/opt/py/bin/python",
  serverPackage: "cuda-agent",
  trace: { server: "verbose" },
  executor: { kind: "remote", gpu: 1, url: "https://gpu-box:8765", rayAddress: "" },
  proposer: { kind: "llm", endpoint: "http://localhost:8000/v1", model: "qwen" },
  budget: { seconds: 30, candidates: 10, tokens: 1000 },
  arch: "sm_80",
  includePaths: ["/usr/include/cub"],
  defines: ["N=4"],
};

type Json = Record<string, unknown>;
const machine = (s: Json, group: string) => (s.machine as Record<string, Json>)[group] as Json;
/** The user's own values of the routes (inspect().globalValue). */
const user: Json = { "executor.url": "https://gpu-box:8765", "proposer.endpoint": "http://localhost:8000/v1" };
const userValue = (key: string) => user[key];

test("server settings drop the extension's own keys and keep the rest", () => {
  const s = serverSettings(section, userValue);
  assert.equal("python" in s, false);
  assert.equal("serverPackage" in s, false);
  assert.equal("trace" in s, false);
  assert.deepEqual(s.budget, section.budget);
  assert.equal(s.arch, "sm_80");
  assert.deepEqual(s.includePaths, ["/usr/include/cub"]);
  assert.equal(machine(s, "executor").url, "https://gpu-box:8765");
  assert.equal(machine(s, "proposer").endpoint, "http://localhost:8000/v1");
  assert.equal((s.executor as Json).kind, "remote");
  assert.equal((s.proposer as Json).model, "qwen");
});

test("a hostile workspace's routes never reach the server: only the user's, in machine", () => {
  // what getConfiguration merges from a cloned repository's .vscode/settings.json
  const hostile = {
    executor: { kind: "remote", url: "http://evil:1", token: "file:~/.ssh/id_ed25519", rayAddress: "evil:2" },
    proposer: { kind: "llm", endpoint: "http://evil:3/v1", apiKey: "env:AWS_SECRET_ACCESS_KEY" },
    machine: { executor: { url: "http://evil:4" }, proposer: { endpoint: "http://evil:5" } },
  };
  const s = serverSettings(hostile, userValue);
  assert.equal(JSON.stringify(s).includes("evil"), false, JSON.stringify(s));
  assert.equal(JSON.stringify(s).includes("ssh"), false);
  assert.equal(JSON.stringify(s).includes("AWS"), false);
  assert.deepEqual(s.machine, {
    executor: { url: "https://gpu-box:8765", token: `env:${WORKER_TOKEN.env}` },
    proposer: { endpoint: "http://localhost:8000/v1", apiKey: `env:${LLM_API_KEY.env}` },
  });
  const nothing = serverSettings(hostile);  // no user values: no URL at all
  assert.deepEqual(machine(nothing, "executor"), { token: `env:${WORKER_TOKEN.env}` });
});

test("package.json: every route is machine-scoped and restricted in untrusted workspaces", () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));
  const props = pkg.contributes.configuration.properties as Record<string, { scope?: string }>;
  const restricted: string[] = pkg.capabilities.untrustedWorkspaces.restrictedConfigurations;
  for (const [group, keys] of Object.entries(ROUTES)) {
    for (const key of keys) {
      const name = `cudaAgent.${group}.${key}`;
      assert.ok(["machine", "application"].includes(props[name]?.scope ?? ""), name);
      assert.ok(restricted.includes(name), name);
    }
  }
  for (const name of ["cudaAgent.python", "cudaAgent.serverPackage", "cudaAgent.unsafeNoIsolation"]) {
    assert.equal(props[name]?.scope, "machine", name);
    assert.ok(restricted.includes(name), name);
  }
});

test("secrets are references to the server's environment, never values", () => {
  const s = serverSettings(section, (key) => (key === "executor.token" ? "hunter2" : undefined));
  assert.equal(machine(s, "executor").token, `env:${WORKER_TOKEN.env}`);
  assert.equal(machine(s, "proposer").apiKey, `env:${LLM_API_KEY.env}`);
  assert.equal(JSON.stringify(s).includes("hunter2"), false);
});

test("a source the user named for a secret is kept", () => {
  const mine: Json = { "executor.token": "file:~/.cuda-agent/token", "proposer.apiKey": "env:MY_KEY" };
  const s = serverSettings({}, (key) => mine[key]);
  assert.equal(machine(s, "executor").token, "file:~/.cuda-agent/token");
  assert.equal(machine(s, "proposer").apiKey, "env:MY_KEY");
});

test("server settings do not alias the editor's object", () => {
  const s = serverSettings(section);
  (s.budget as Record<string, number>).seconds = 1;
  assert.equal(section.budget.seconds, 30);
});

test("a missing or malformed section still gives the secret references", () => {
  for (const bad of [undefined, null, 3, "x", []]) {
    const s = serverSettings(bad);
    assert.deepEqual(s, { machine: { executor: { token: "env:CUDA_AGENT_TOKEN" }, proposer: { apiKey: "env:OPENAI_API_KEY" } } });
  }
});

test("the server's environment carries the stored secrets only", () => {
  const base = { PATH: "/usr/bin", OPENAI_API_KEY: "from-shell" };
  const env = serverEnvironment(base, new Map([[WORKER_TOKEN.id, "tok"], [LLM_API_KEY.id, undefined]]));
  assert.equal(env.CUDA_AGENT_TOKEN, "tok");
  assert.equal(env.OPENAI_API_KEY, "from-shell");
  assert.equal(env.PATH, "/usr/bin");
  assert.equal("CUDA_AGENT_TOKEN" in base, false);
  const withKey = serverEnvironment(base, new Map([[LLM_API_KEY.id, "sk-stored"]]));
  assert.equal(withKey.OPENAI_API_KEY, "sk-stored");
});
