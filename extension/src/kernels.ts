// Which kernel a palette command means: the one under the cursor, from the server's document symbols.

export interface SymbolLike {
  name: string;
  detail?: string;
  range: { start: { line: number }; end: { line: number } };
  children?: SymbolLike[];
}

function isKernel(symbol: SymbolLike): boolean {
  return /__global__|kernel/i.test(symbol.detail ?? "");
}

/** The kernels among the top-level symbols (all of them when the server marks none as kernels). */
export function kernelSymbols(symbols: readonly SymbolLike[]): SymbolLike[] {
  const marked = symbols.filter(isKernel);
  return marked.length > 0 ? marked : [...symbols];
}

/** The kernel whose range holds `line`, if any. */
export function kernelAt(symbols: readonly SymbolLike[], line: number): string | undefined {
  return kernelSymbols(symbols).find((s) => s.range.start.line <= line && line <= s.range.end.line)?.name;
}
