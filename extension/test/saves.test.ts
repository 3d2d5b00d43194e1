import assert from "node:assert/strict";
import { test } from "node:test";
import { acceptedMessage, autoSaves } from "../src/saves";

test("with auto-save off (VS Code desktop's default), Accept says the edit is not saved", () => {
  for (const value of ["off", undefined, "bogus"]) {
    assert.equal(autoSaves(value), false);
    assert.equal(acceptedMessage(value, 2), "CUDA Agent: applied the verified rewrite (2.00× faster), not saved. Undo reverts it in one step.");
  }
});

test("under an auto-save setting (code-server's default afterDelay), Accept says the setting will write it", () => {
  assert.equal(autoSaves("afterDelay"), true);
  assert.equal(
    acceptedMessage("afterDelay", 2.5),
    "CUDA Agent: applied the verified rewrite (2.50× faster); your auto-save setting (files.autoSave: afterDelay) will write it to disk after its delay. Undo reverts it in one step.",
  );
  assert.match(acceptedMessage("onFocusChange", 12), /\(12× faster\); .* when the editor loses focus\./);
  assert.match(acceptedMessage("onWindowChange", 1.5), /when the window loses focus\./);
  assert.doesNotMatch(acceptedMessage("onWindowChange", 1.5), /not saved/);
});
