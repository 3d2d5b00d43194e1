"""Hover on a kernel (its name, or a launch of it): signature, spec, last benchmark, registers/spills,
the last optimize, compare and Nsight Compute profile."""

from __future__ import annotations

from lsprotocol import types as lsp

from cudasrc import specs as specs
from cudasrc.syntax import Kernel
from server.compare import details as compare_details
from server.diagnostics import Checker
from server.hints import speedup_details
from server.lsp import CudaLanguageServer, OpenDocument
from server.profile import details as profile_details
from server.store import BenchmarkRecord, kernel_hash
from server.symbols import lsp_range, signature
from server.texts import SIMULATED, spread_text


def kernel_at(od: OpenDocument, line: int, col: int) -> tuple[Kernel, lsp.Range] | None:
    """The kernel whose name is under (line, col): at its definition or at a launch site."""
    for k in od.kernels:
        s = k.name_span
        if s.start_line == line and s.start_col <= col <= s.end_col:
            return k, lsp_range(s)
    if od.doc is None:
        return None
    for site in od.doc.launches:
        s = site.span
        name = site.kernel.rsplit("::", 1)[-1]
        if s.start_line == line and s.start_col <= col <= s.start_col + len(site.kernel):
            launched = od.kernel(site.kernel) or od.kernel(name)
            if launched is not None:
                end = lsp.Position(line, s.start_col + len(site.kernel))
                return launched, lsp.Range(lsp.Position(line, s.start_col), end)
    return None


def benchmark_title(b: BenchmarkRecord) -> str:
    """The last benchmark as a code lens shows it: short enough for the line above a kernel;
    ``benchmark_line`` (the lens's tooltip and the hover) has the rest."""
    title = f"{b.median_ms:.3g} ms · {b.gbps:.0f} GB/s ({b.pct_peak:.0f}% of peak)"
    return f"{title} · simulated" if b.simulated else title


def benchmark_line(b: BenchmarkRecord) -> str:
    line = (
        f"{b.median_ms:.4g} ms median ({spread_text(b.rel_spread)}) at {b.problem}"
        f" · {b.gbps:.0f} GB/s · {b.pct_peak:.0f}% of peak bandwidth · {b.device}, {b.date}"
    )
    return f"{SIMULATED}: {line}" if b.simulated else line


def inferred_markdown(inference: specs.Inference) -> str:
    """What inference would propose, with its confidence and each field it is not sure of."""
    guesses = inference.guesses()
    lines = [f"**Inferred spec** ({inference.confidence} confidence)"]
    lines += [f"- {field}: {note}" for field, note in guesses.items()]
    return "\n".join(lines) + "\n```\n" + specs.render(inference.spec).rstrip() + "\n```"


def hover_markdown(ls: CudaLanguageServer, od: OpenDocument, k: Kernel) -> str:
    assert od.doc is not None
    parts = [f"```cuda\n{signature(od.doc, k)}\n```"]
    view = od.spec(k)
    if view.spec is not None:
        parts.append("**Spec**\n```\n" + specs.render(view.spec).rstrip() + "\n```")
    elif view.errors:
        parts.append(
            "**Spec errors**\n" + "\n".join(f"- line {e.line + 1}: {e.message}" for e in view.errors)
        )
    else:
        parts.append("_No benchmark spec: use “Add benchmark spec” above the kernel._")
        parts.append(inferred_markdown(specs.infer(od.doc, k)))
    rec = ls.store.get(od.path, k.qualified_name)
    if rec.benchmark is not None:
        parts.append("**Last benchmark** " + benchmark_line(rec.benchmark))
    checks = ls.part(Checker)
    checked = checks.resources(od, k.qualified_name) if checks is not None else None
    if checked is not None:
        res, arch = checked
        spills = res.spill_stores + res.spill_loads
        spill_text = (
            f"**{res.spill_stores} B spill stores, {res.spill_loads} B spill loads**"
            if spills
            else "no spills"
        )
        parts.append(
            f"**Resources** ({arch}) {res.registers} registers · {spill_text}"
            f" · {res.shared_bytes} B static shared · {res.stack_bytes} B stack"
        )
    if rec.optimize is not None and rec.optimize.outcome == "improved":
        parts.append("**Last optimize** " + speedup_details(rec.optimize, kernel_hash(od.doc, k)))
    if rec.compare is not None:
        parts.append(compare_details(rec.compare))
    if rec.profile is not None:
        parts.append(profile_details(rec.profile, kernel_hash(od.doc, k)))
    return "\n\n".join(parts)


def setup(ls: CudaLanguageServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: CudaLanguageServer, params: lsp.HoverParams) -> lsp.Hover | None:
        od = ls.document(params.text_document.uri)
        if od is None:
            return None
        hit = kernel_at(od, params.position.line, params.position.character)
        if hit is None:
            return None
        k, rng = hit
        value = hover_markdown(ls, od, k)
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=value), range=rng)
