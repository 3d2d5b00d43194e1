import assert from "node:assert/strict";
import { test } from "node:test";
import { type ApplyReason, type ApplyResult, PROGRAM_ANNOTATION, type Rewrite } from "../src/protocol";
import { appliedNotice, PREVIEW_CONTEXT, RewriteFlow, type RewriteServer } from "../src/rewrites";
import { FakeHost } from "./fakeHost";

const original = "__global__ void vadd(float* c) {\n  c[0] = 1;\n}\n";
const rewrite: Rewrite = {
  runId: "r1",
  uri: "file:///ws/vadd.cu",
  version: 3,
  kernel: "vadd",
  original,
  rewritten: original.replace("float*", "float* __restrict__"),
  speedup: 2,
  summary: "__restrict__ on c",
  simulated: true,
};

class FakeServer implements RewriteServer {
  readonly applied: string[] = [];
  constructor(
    public answer: ApplyResult | null = { applied: true, reason: "applied", message: "applied" },
    public rewrites = new Map([["r1", rewrite]]),
  ) {}
  async rewrite(runId: string): Promise<Rewrite | null> {
    return this.rewrites.get(runId) ?? null;
  }
  async apply(runId: string): Promise<ApplyResult | null> {
    this.applied.push(runId);
    return this.answer;
  }
}

function setup(server: FakeServer | undefined = new FakeServer()) {
  const host = new FakeHost();
  const flow = new RewriteFlow(host, () => server);
  return { host, flow, server };
}

test("a preview opens the diff, labelled as the simulated GPU's, with a notification that stays", async () => {
  const { host, flow } = setup();
  await flow.preview("r1");
  const [diff] = host.diffs;
  assert.equal(diff.title, "vadd.cu: original ↔ rewrite (2.00× faster, simulated GPU, not measured)");
  assert.equal(flow.content(decodeURIComponent(diff.original.slice("cuda-agent-rewrite:".length))), original);
  assert.equal(flow.content(decodeURIComponent(diff.rewritten.slice("cuda-agent-rewrite:".length))), rewrite.rewritten);
  assert.equal(host.context.get(PREVIEW_CONTEXT), true);
  const [notice] = host.notices;
  assert.equal(notice.open, true);
  assert.match(notice.title, /^CUDA Agent: rewrite of vadd, 2\.00× faster, simulated GPU, not measured\. __restrict__ on c\. Accept/);
  assert.doesNotMatch(notice.title, /verified/);
});

test("Accept from the diff's title asks the server, closes diff and notification, and says what happens on disk", async () => {
  const { host, flow, server } = setup();
  host.settings.set("files.autoSave@file:///ws/vadd.cu", "afterDelay");
  await flow.preview("r1");
  await flow.settle(host.active, true);
  assert.deepEqual(server.applied, ["r1"]);
  assert.equal(host.notices[0].open, false);
  assert.deepEqual(host.openDiffs, []);
  assert.equal(host.context.get(PREVIEW_CONTEXT), false);
  assert.deepEqual(host.messages, [
    {
      level: "info",
      text: "CUDA Agent: applied the rewrite (2.00× faster, simulated GPU, not measured); your auto-save setting (files.autoSave: afterDelay) will write it to disk after its delay. Undo reverts it in one step.",
      buttons: [],
    },
  ]);
  await flow.settle(undefined, true); // nothing open any more
  assert.deepEqual(server.applied, ["r1"]);
  assert.equal(host.messages[1].text, "CUDA Agent: no rewrite preview is open.");
});

test("Discard, and Cancel on the notification, apply nothing; a later Accept does nothing", async () => {
  const { host, flow, server } = setup();
  await flow.preview("r1");
  await flow.settle(undefined, false); // the palette: the active diff
  assert.deepEqual(server.applied, []);
  assert.equal(host.notices[0].open, false);
  await flow.settleRun("r1", true);
  assert.deepEqual(server.applied, []);

  await flow.preview("r1");
  host.notices[1].cancel();
  await flow.settleRun("r1", true);
  assert.deepEqual(server.applied, []);
  assert.deepEqual(host.messages, []);
});

test("Accept decides on the server's reason, never on its message", async () => {
  const cases: [ApplyReason, string | undefined][] = [
    ["stale", undefined], // the server's own warning says what changed
    ["no_rewrite", "warning"],
    ["declined", "error"],
    ["too_large", "error"],
  ];
  for (const [reason, level] of cases) {
    const server = new FakeServer({ applied: false, reason, message: `Not applied: ${reason}` });
    const { host, flow } = setup(server);
    await flow.preview("r1");
    await flow.settle(host.active, true);
    assert.deepEqual(server.applied, ["r1"]);
    assert.deepEqual(
      host.messages.map((m) => m.level),
      level ? [level] : [],
      reason,
    );
    if (level) {
      assert.equal(host.messages[0].text, `CUDA Agent: the rewrite was not applied: Not applied: ${reason}`);
    }
  }
});

test("without a running server: no preview, and Accept says the rewrite was not applied", async () => {
  const server = new FakeServer();
  let up: FakeServer | undefined = server;
  const host = new FakeHost();
  const flow = new RewriteFlow(host, () => up);
  await flow.preview("gone");
  assert.equal(host.messages[0].text, "CUDA Agent: the rewrite of run gone is no longer available.");
  await flow.preview("r1");
  up = undefined;
  await flow.settle(host.active, true);
  assert.deepEqual(server.applied, []);
  assert.deepEqual(host.messages[1], { level: "error", text: "CUDA Agent: the language server is not running; the rewrite was not applied.", buttons: [] });
});

test("the notice after Accept for a measured rewrite, and for no answer", () => {
  const measured = { ...rewrite, simulated: false };
  assert.deepEqual(appliedNotice({ applied: true, reason: "applied", message: "applied" }, measured, undefined), {
    level: "info",
    text: "CUDA Agent: applied the rewrite (2.00× faster, verified), not saved. Undo reverts it in one step.",
  });
  assert.equal(appliedNotice(null, measured, undefined)?.level, "error");
});

test("the server's edit of one document goes into its editor after a version check; others elsewhere", async () => {
  const { host, flow } = setup();
  const edit = { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: "// x\n" };
  const versioned = (version: number | null) => ({ documentChanges: [{ textDocument: { uri: rewrite.uri, version }, edits: [edit] }] });
  let otherwise = 0;
  const fallback = async () => (otherwise++, true);

  host.versions.set(rewrite.uri, 4);
  const stale = await flow.applyEdit(versioned(3), fallback);
  assert.equal(stale.applied, false);
  assert.match(stale.failureReason ?? "", /vadd\.cu changed since the server computed this edit \(version 4, the edit is for 3\)/);
  assert.deepEqual(host.edited, []);

  assert.deepEqual(await flow.applyEdit(versioned(4), fallback), { applied: true });
  assert.deepEqual(host.edited, [{ uri: rewrite.uri, edits: [edit] }]);

  host.editorRefuses = true;
  assert.deepEqual(await flow.applyEdit(versioned(null), fallback), { applied: false, failureReason: "the editor refused the edit" });

  const twoFiles = { changes: { [rewrite.uri]: [edit], "file:///ws/other.cu": [edit] } };
  assert.deepEqual(await flow.applyEdit(twoFiles, fallback), { applied: true });
  assert.equal(otherwise, 1);
});

test("a program's rewrites always go to VS Code's own handling (its Refactor Preview), even in one file", async () => {
  const { host, flow } = setup();
  const edit = { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: "// x\n" };
  let otherwise = 0;
  const program = {
    documentChanges: [{ textDocument: { uri: rewrite.uri, version: null }, edits: [{ ...edit, annotationId: PROGRAM_ANNOTATION }] }],
    changeAnnotations: { [PROGRAM_ANNOTATION]: { label: "CUDA Agent: 1 kernel rewrite(s) in 1 file(s)", needsConfirmation: true } },
  };
  assert.deepEqual(await flow.applyEdit(program, async () => (otherwise++, true)), { applied: true });
  assert.equal(otherwise, 1);
  assert.deepEqual(host.edited, []);
});
