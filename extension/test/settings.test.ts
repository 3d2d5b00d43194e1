import assert from "node:assert/strict";
import { test } from "node:test";
import { LLM_API_KEY, serverEnvironment, serverSettings, WORKER_TOKEN } from "../src/settings";

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

test("server settings drop the extension's own keys and keep the rest", () => {
  const s = serverSettings(section);
  assert.equal("python" in s, false);
  assert.equal("serverPackage" in s, false);
  assert.equal("trace" in s, false);
  assert.deepEqual(s.budget, section.budget);
  assert.equal(s.arch, "sm_80");
  assert.deepEqual(s.includePaths, ["/usr/include/cub"]);
  assert.equal((s.executor as Record<string, unknown>).url, "https://gpu-box:8765");
  assert.equal((s.proposer as Record<string, unknown>).model, "qwen");
});

test("secrets are references to the server's environment, never values", () => {
  const s = serverSettings({ ...section, executor: { kind: "remote", token: "hunter2" } });
  assert.equal((s.executor as Record<string, unknown>).token, `env:${WORKER_TOKEN.env}`);
  assert.equal((s.proposer as Record<string, unknown>).apiKey, `env:${LLM_API_KEY.env}`);
  assert.equal(JSON.stringify(s).includes("hunter2"), false);
});

test("a source the user named for a secret is kept", () => {
  const s = serverSettings({ executor: { token: "file:~/.cuda-agent/token" }, proposer: { apiKey: "env:MY_KEY" } });
  assert.equal((s.executor as Record<string, unknown>).token, "file:~/.cuda-agent/token");
  assert.equal((s.proposer as Record<string, unknown>).apiKey, "env:MY_KEY");
});

test("server settings do not alias the editor's object", () => {
  const s = serverSettings(section);
  (s.budget as Record<string, number>).seconds = 1;
  assert.equal(section.budget.seconds, 30);
});

test("a missing or malformed section still gives the secret references", () => {
  for (const bad of [undefined, null, 3, "x", []]) {
    const s = serverSettings(bad);
    assert.deepEqual(s, { executor: { token: "env:CUDA_AGENT_TOKEN" }, proposer: { apiKey: "env:OPENAI_API_KEY" } });
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
