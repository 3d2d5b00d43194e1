import assert from "node:assert/strict";
import { test } from "node:test";
import { shellWords } from "../src/shellwords";

test("blanks separate words; runs of blanks are one separator", () => {
  assert.deepEqual(shellWords("  ./app   --n 4096\t-v "), { argv: ["./app", "--n", "4096", "-v"] });
  assert.deepEqual(shellWords("python train.py"), { argv: ["python", "train.py"] });
});

test("quotes keep blanks and join with adjacent text", () => {
  assert.deepEqual(shellWords(`python "my script.py" --name='a b' x"y"'z'`), {
    argv: ["python", "my script.py", "--name=a b", "xyz"],
  });
  assert.deepEqual(shellWords(`prog '' ""`), { argv: ["prog", "", ""] });
});

test("single quotes are literal; double quotes escape only \" \\ $ and `", () => {
  assert.deepEqual(shellWords(String.raw`p 'a\"b' "c\"d" "e\nf" "g\\h" "\$HOME"`), {
    argv: ["p", String.raw`a\"b`, 'c"d', String.raw`e\nf`, String.raw`g\h`, "$HOME"],
  });
});

test("a backslash outside quotes escapes the next character", () => {
  assert.deepEqual(shellWords(String.raw`./my\ app a\;b \'x`), { argv: ["./my app", "a;b", "'x"] });
});

test("nothing is expanded", () => {
  assert.deepEqual(shellWords("prog $HOME ~/data *.cu"), { argv: ["prog", "$HOME", "~/data", "*.cu"] });
});

test("unclosed quotes, a trailing backslash, shell operators and an empty line are errors", () => {
  assert.ok("error" in shellWords(`prog "open`));
  assert.ok("error" in shellWords(`prog 'open`));
  assert.ok("error" in shellWords("prog \\"));
  for (const line of ["a | b", "a > out", "a; b", "a && b", "a `b`"]) {
    const split = shellWords(line);
    assert.ok("error" in split && split.error.includes("shell operator"), line);
  }
  assert.deepEqual(shellWords("   "), { error: "no program given" });
  assert.deepEqual(shellWords("prog 'a | b'"), { argv: ["prog", "a | b"] });
});
