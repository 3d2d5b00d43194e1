"""Inlay hints: the last verified speedup at each kernel's name ("⚡ 2.4× verified")."""

from __future__ import annotations

from lsprotocol import types as lsp

from cudasrc.syntax import Kernel
from server.compare import details as compare_details
from server.compare import hint_label as compare_label
from server.lsp import CudaLanguageServer, OpenDocument
from server.store import OptimizeRecord, kernel_hash
from server.texts import SIMULATED, markdown_text, plural, spread_text


def speedup_label(rec: OptimizeRecord, current_hash: str) -> str:
    """``⚡ 2.40× verified``; marked when the kernel changed since the run (the claim is about other code)."""
    label = f"⚡ {rec.speedup:.2f}× ({SIMULATED})" if rec.simulated else f"⚡ {rec.speedup:.2f}× verified"
    if current_hash not in (rec.original_hash, rec.rewritten_hash):
        label += " (kernel edited since)"
    return label


def speedup_details(rec: OptimizeRecord, current_hash: str = "") -> str:
    """Markdown: timings with spread, sizes checked, tolerance, device, date."""
    state = {
        rec.rewritten_hash: "This kernel is the verified rewrite.",
        rec.original_hash: "A verified rewrite of this kernel is available (Apply on the code lens).",
    }.get(current_hash, "The kernel changed since this run; the result is about the code it ran on.")
    source = SIMULATED if rec.simulated else "verified"
    head = f"**{rec.speedup:.2f}× faster, {source}** (between {rec.speedup_low:.2f}× and {rec.speedup_high:.2f}×)"
    return "\n\n".join(
        [
            head,
            f"- original: {rec.baseline_ms:.4g} ms median ({spread_text(rec.baseline_spread)})\n"
            f"- rewrite: {rec.candidate_ms:.4g} ms median ({spread_text(rec.candidate_spread)})\n"
            f"- checked on {', '.join(rec.sizes) or 'the bench size'} × {rec.seeds} seeds, tolerance {rec.tolerance}\n"
            f"- {markdown_text(rec.device)}, {rec.date}, {plural(rec.attempts, 'candidate')} "
            f"({markdown_text(rec.stop_reason)})",
            markdown_text(rec.summary),
            state if current_hash else "",
        ]
    ).strip()


def inlay_hints(ls: CudaLanguageServer, od: OpenDocument, first: int, last: int) -> list[lsp.InlayHint]:
    """At each kernel's name in ``first..last``: its verified speedup (optimize), then its latest
    comparison (Compare with…)."""
    if od.doc is None:
        return []
    results = ls.store.for_file(od.path)
    hints = []
    for k in od.kernels:
        rec = results.get(k.qualified_name)
        if rec is None or not first <= k.name_span.end_line <= last:
            continue
        h = kernel_hash(od.doc, k)
        if rec.optimize is not None and rec.optimize.outcome == "improved":
            hints.append(_hint(k, speedup_label(rec.optimize, h), speedup_details(rec.optimize, h)))
        if rec.compare is not None:
            hints.append(_hint(k, compare_label(rec.compare, h), compare_details(rec.compare)))
    return hints


def _hint(k: Kernel, label: str, tooltip: str) -> lsp.InlayHint:
    return lsp.InlayHint(
        position=lsp.Position(k.name_span.end_line, k.name_span.end_col),
        label=label,
        padding_left=True,
        tooltip=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=tooltip),
    )


def setup(ls: CudaLanguageServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
    def hints(ls: CudaLanguageServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        od = ls.document(params.text_document.uri)
        if od is None:
            return []
        return inlay_hints(ls, od, params.range.start.line, params.range.end.line)
