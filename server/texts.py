"""The display text of results: wording shared by the CLI and every editor view, so one result reads the same everywhere.

The hover, the inlay hints, the code lenses and the status line all take their text from here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sandbox.profile import report_lines
from sandbox.timing import spread_text

if TYPE_CHECKING:
    from agent.records import BenchmarkRecord, CompareRecord, OptimizeRecord, ProfileRecord
    from cudasrc.source import Document
    from cudasrc.syntax import Kernel
    from sandbox.executors import ExecutorSettings

# what every number from the simulated GPU (sandbox.testing, ``executor.kind test``) says with it
SIMULATED = "simulated GPU, not measured"

_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~])")


def plural(n: int, word: str) -> str:
    """``1 candidate``, ``2 candidates``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def markdown_text(text: str) -> str:
    """``text`` shown literally in Markdown (``__restrict__`` stays ``__restrict__``, not bold)."""
    return _MARKDOWN.sub(r"\\\1", text)


def describe_executor(s: ExecutorSettings) -> str:
    return {
        "local": f"local GPU{'s' if len(s.gpus) > 1 else ''} {','.join(map(str, s.gpus or (s.gpu,)))}",
        "remote": f"remote {s.url}",
        "ray": f"ray {s.ray_address or '(auto)'}",
        "test": "test (simulated GPU)",
    }[s.kind]


def signature(doc: Document, kernel: Kernel) -> str:
    """``__global__ void name(params)`` with the parameters as written, and a ``template <...>`` line."""
    params = ", ".join(
        " ".join(doc.data[p.span.start_byte : p.span.end_byte].decode("utf-8", "replace").split())
        for p in kernel.params
    )
    head = ""
    if kernel.template_params:
        tps = ", ".join(
            f"{'typename' if t.kind == 'type' else t.type_text} {t.name}" for t in kernel.template_params
        )
        head = f"template <{tps}>\n"
    return f"{head}__global__ void {kernel.qualified_name}({params})"


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


def compare_label(rec: CompareRecord, current_hash: str) -> str:
    """``⇄ vadd_x4: 2.10× verified`` on the original, ``⇄ vs vadd: ...`` on the rewrite."""
    verdict = f"{rec.speedup:.2f}× verified" if rec.verified else rec.status
    verdict += f" ({SIMULATED})" if rec.simulated else ""
    label = f"⇄ {rec.other}: {verdict}" if rec.role == "original" else f"⇄ vs {rec.other}: {verdict}"
    return label + (" (edited since)" if current_hash != rec.kernel_hash else "")


def compare_details(rec: CompareRecord) -> str:
    """Markdown for hovers and hint tooltips."""
    pair = (
        f"compared with the rewrite **{markdown_text(rec.other)}**"
        if rec.role == "original"
        else f"as a rewrite of **{markdown_text(rec.other)}**"
    )
    simulated = f" **{SIMULATED}**:" if rec.simulated else ""
    lines = [f"**Compare** ({pair}):{simulated} {markdown_text(rec.headline)}"]
    if rec.rewrite_ms:
        lines.append(f"- original {rec.original_ms:.4g} ms, rewrite {rec.rewrite_ms:.4g} ms median")
    lines.append(f"- {markdown_text(rec.device)}, {rec.date}")
    return "\n".join(lines)


def profile_summary(rec: ProfileRecord) -> str:
    """One line per run's end: each kernel's speed of light and occupancy, or why it has none."""
    return "; ".join(f"{k.label}: {', '.join(report_lines(k.profile)[:2])}" for k in rec.kernels)


def profile_details(rec: ProfileRecord, current_hash: str) -> str:
    """Markdown for the hover: each kernel's metrics, with where and when they were taken."""
    edited = " (edited since)" if rec.kernel_hash and current_hash != rec.kernel_hash else ""
    lines = [f"**Last profile**{edited} (Nsight Compute, one launch at {markdown_text(rec.problem)})"]
    for k in rec.kernels:
        head = f"{k.label}: {k.description}" if k.description and k.label != "original" else k.label
        lines.append(f"- {markdown_text(head)}")
        lines += [f"  - {markdown_text(line)}" for line in report_lines(k.profile)]
    lines.append(f"- {markdown_text(rec.device)}, {rec.date}")
    return "\n".join(lines)
