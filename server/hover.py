"""Hover on a kernel (its name, or a launch of it): signature, spec, last benchmark, registers/spills,
the last optimize, compare and Nsight Compute profile."""

from __future__ import annotations

from lsprotocol import types as lsp

from agent.records import kernel_hash
from cudasrc import specs as specs
from cudasrc.syntax import Kernel
from server.lsp import CudaLanguageServer, OpenDocument, lsp_range
from server.texts import benchmark_line, compare_details, profile_details, signature, speedup_details


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
    compiled = ls.last_check.get(od.uri)  # the last check of this document (any version)
    res = compiled.resources.get(k.qualified_name) if compiled is not None else None
    if compiled is not None and res is not None:
        arch = compiled.arch
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
