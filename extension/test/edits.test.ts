import assert from "node:assert/strict";
import { test } from "node:test";
import { singleDocumentEdits, versionConflict } from "../src/edits";

const range = { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } };
const a = { range, newText: "a" };
const b = { range, newText: "b" };

test("a versioned, annotated edit of one document is taken whole", () => {
  const edit = {
    documentChanges: [
      { textDocument: { uri: "file:///x.cu", version: 3 }, edits: [{ ...a, annotationId: "cuda-agent.verified-rewrite" }] },
      { textDocument: { uri: "file:///x.cu", version: 3 }, edits: [b] },
    ],
  };
  const found = singleDocumentEdits(edit);
  assert.equal(found?.uri, "file:///x.cu");
  assert.equal(found?.version, 3);
  assert.deepEqual(found?.edits.map((e) => e.newText), ["a", "b"]);
  assert.equal(versionConflict(found!, 3, "x.cu"), undefined);
  assert.match(versionConflict(found!, 4, "x.cu") ?? "", /x\.cu changed .*version 4.*for 3/);
});

test("plain `changes` have no version; several documents, file operations and snippets fall back", () => {
  const plain = singleDocumentEdits({ changes: { "file:///x.cu": [a] } });
  assert.equal(plain?.version, null);
  assert.equal(versionConflict(plain!, 9, "x.cu"), undefined);
  assert.equal(singleDocumentEdits({ changes: { "file:///x.cu": [a], "file:///y.cu": [b] } }), undefined);
  assert.equal(singleDocumentEdits({ documentChanges: [{ kind: "create", uri: "file:///z.cu" }] }), undefined);
  const snippet = { range, snippet: { kind: "snippet", value: "$0" } };
  assert.equal(singleDocumentEdits({ documentChanges: [{ textDocument: { uri: "file:///x.cu", version: 1 }, edits: [snippet] }] }), undefined);
  assert.equal(singleDocumentEdits({}), undefined);
});
