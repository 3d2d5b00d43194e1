import assert from "node:assert/strict";
import { test } from "node:test";
import { attemptsHtml, attemptsOf, isVerified, verdictCounts, verdictText } from "../src/attempts";

import { attempts } from "./fixtures";

test("the records as the page shows them: a missing reward is 0", () => {
  const list = attemptsOf(attempts);
  assert.deepEqual(list.map((a) => a.index), [0, 1, 2, 3]);
  assert.equal(list[1].firstBadIndex, 4097);
  assert.equal(list[3].firstBadIndex, -1);
  assert.deepEqual(list.map(isVerified), [true, false, false, false]);
  assert.equal(attemptsOf([{ ...attempts[1], reward: undefined }])[0].reward, 0);
});

test("each verdict in words: speedup with its range, where a compile failed, where outputs differ", () => {
  const list = attemptsOf(attempts);
  assert.equal(verdictText(list[0]), "verified, 2.01× (1.98×–2.05×)");
  assert.equal(verdictText(list[1]), "mismatch, first bad index 4097, error 12.5× its bound");
  assert.equal(verdictText(list[2]), "compile_error, line 12:5");
  assert.equal(verdictText(list[3]), "mismatch, rule output-unchanged");
  assert.equal(verdictCounts(list), "2 mismatch · 1 compile_error · 1 ok");
});

test("the list expands to message and log, all escaped", () => {
  const html = attemptsHtml(attemptsOf(attempts));
  assert.match(html, /<summary>Attempts: 2 mismatch · 1 compile_error · 1 ok<\/summary>/);
  assert.equal((html.match(/<li><details>/g) ?? []).length, 4);
  assert.match(html, /identifier &#34;j&#34; is undefined/);
  assert.match(html, /unroll &#60;x&#62;/);
  assert.doesNotMatch(html, /<x>/);
  assert.match(html, /0\.2500 ms median · 16 registers · 12 B spilled · reward 1\.20/);
  assert.equal(attemptsHtml([]), "");
});
