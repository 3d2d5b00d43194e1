import assert from "node:assert/strict";
import { test } from "node:test";
import { acceptedMessage, autoSaves } from "../src/saves";

const measured = (speedup: number) => ({ speedup, simulated: false });

test("with auto-save off (VS Code desktop's default), Accept says the edit is not saved", () => {
  for (const value of ["off", undefined, "bogus"]) {
    assert.equal(autoSaves(value), false);
    assert.equal(acceptedMessage(value, measured(2)), "CUDA Agent: applied the rewrite (2.00× faster, verified), not saved. Undo reverts it in one step.");
  }
});

test("under an auto-save setting (code-server's default afterDelay), Accept says the setting will write it", () => {
  assert.equal(autoSaves("afterDelay"), true);
  assert.equal(
    acceptedMessage("afterDelay", measured(2.5)),
    "CUDA Agent: applied the rewrite (2.50× faster, verified); your auto-save setting (files.autoSave: afterDelay) will write it to disk after its delay. Undo reverts it in one step.",
  );
  assert.match(acceptedMessage("onFocusChange", measured(12)), /\(12× faster, verified\); .* when the editor loses focus\./);
  assert.match(acceptedMessage("onWindowChange", measured(1.5)), /when the window loses focus\./);
  assert.doesNotMatch(acceptedMessage("onWindowChange", measured(1.5)), /not saved/);
});

test("a rewrite timed on the simulated GPU is applied with the simulated GPU's label", () => {
  assert.equal(
    acceptedMessage("off", { speedup: 2, simulated: true }),
    "CUDA Agent: applied the rewrite (2.00× faster, simulated GPU, not measured), not saved. Undo reverts it in one step.",
  );
});
