import assert from "node:assert/strict";
import { test } from "node:test";
import { ProgressSteps } from "../src/progress";

test("absolute percentages become increments that add up to the percentage", () => {
  const steps = new ProgressSteps();
  assert.deepEqual(steps.step({ message: "measuring the original", percentage: 0 }), { message: "measuring the original", increment: 0 });
  assert.deepEqual(steps.step({ percentage: 25 }), { increment: 25 });
  assert.deepEqual(steps.step({ message: "12 candidates tried, best 1.80×", percentage: 60 }), { message: "12 candidates tried, best 1.80×", increment: 35 });
  assert.deepEqual(steps.step({ percentage: 55 }), { increment: 0 }); // never backwards
  assert.deepEqual(steps.step({ percentage: 140 }), { increment: 40 }); // clamped at 100
});

test("message-only reports carry no increment", () => {
  const steps = new ProgressSteps();
  assert.deepEqual(steps.step({ message: "working" }), { message: "working" });
  assert.deepEqual(steps.step({ percentage: Number.NaN }), {});
});
