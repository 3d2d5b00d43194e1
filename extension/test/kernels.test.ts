import assert from "node:assert/strict";
import { test } from "node:test";
import { kernelAt, kernelSymbols, type SymbolLike } from "../src/kernels";

const sym = (name: string, start: number, end: number, detail = ""): SymbolLike => ({
  name,
  detail,
  range: { start: { line: start }, end: { line: end } },
});

test("the kernel whose range holds the cursor", () => {
  const symbols = [sym("helper", 0, 4, "__device__ float"), sym("vadd", 6, 12, "__global__ void"), sym("scale", 14, 20, "__global__ void")];
  assert.equal(kernelAt(symbols, 8), "vadd");
  assert.equal(kernelAt(symbols, 20), "scale");
  assert.equal(kernelAt(symbols, 2), undefined); // a device function is not a kernel
  assert.equal(kernelAt(symbols, 13), undefined);
  assert.deepEqual(kernelSymbols(symbols).map((s) => s.name), ["vadd", "scale"]);
});

test("without kernel markers every symbol is a candidate", () => {
  const symbols = [sym("a", 0, 3), sym("b", 4, 9)];
  assert.equal(kernelAt(symbols, 5), "b");
  assert.equal(kernelSymbols(symbols).length, 2);
});
