"""Every command's output: the text a person reads and the JSON a script reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from agent import profile as prof
    from agent.attempts import AttemptRecord
    from agent.capture import CaptureEdit
    from agent.check import KernelCheck
    from agent.compare import Comparison
    from agent.loop import OptimizeResult
    from agent.suite import SuiteEntry
    from agent.target import Target
    from cudasrc.source import Document
    from cudasrc.syntax import Issue
    from learning.wire import Scored
    from sandbox.capture import CaptureRun
    from sandbox.contract import Diagnostic, EvalResult
    from server.cli.reports import KernelsReport, SuiteReport


def emit_json(report: object) -> None:
    """A command's typed report (:mod:`server.cli.reports`) as JSON, through the contract's converter."""
    from sandbox.contract import to_dict

    click.echo(json.dumps(to_dict(report), indent=2))


def _echo(text: str) -> None:
    """A line that quotes the user's file: its control characters escaped, never sent to the terminal."""
    from cudasrc.syntax import printable

    click.echo(printable(text))


def print_kernels(doc: Document, report: KernelsReport) -> None:
    path = report.path
    _echo(f"{path}: {len(doc.kernels)} kernel(s), {len(doc.launches)} launch site(s)")
    for listing in report.kernels:
        k, spec = listing.kernel, listing.spec
        params = ", ".join(f"{p.type_text} {p.name}".strip() for p in k.params)
        templ = f"template <{', '.join(t.name for t in k.template_params)}> " if k.template_params else ""
        _echo(f"\n{templ}{k.qualified_name}({params})  lines {k.span.start_line + 1}-{k.span.end_line + 1}")
        if k.launch_bounds:
            _echo(
                f"  __launch_bounds__({k.launch_bounds.max_threads}{', ' + k.launch_bounds.min_blocks if k.launch_bounds.min_blocks else ''})"
            )
        for site in listing.launches:
            config = ", ".join(e.text for e in (site.grid, site.block, site.shared, site.stream) if e)
            targs = f"<{', '.join(site.template_args)}>" if site.template_args else ""
            args = ", ".join(a.text for a in site.args)
            _echo(
                f"  launched at line {site.span.start_line + 1}: {site.kernel}{targs}<<<{config}>>>({args})"
            )
        how = "parsed" if spec.source == "parsed" else f"inferred, {spec.confidence} confidence"
        _echo(f"  spec ({how}):")
        for line in spec.text.splitlines():
            _echo(f"    {line}")
        for reason in spec.reasons:
            _echo(f"    - {reason}")
        for e in spec.errors:
            _echo(f"  spec error, line {e.line + 1}: {e.message}")
    for issue in report.issues:
        _echo(f"{path}:{issue.line + 1}: {issue.severity}: {issue.message}")


def print_issues(path: Path, issues: Sequence[Issue]) -> None:
    """What the parser could not read in the file, one line each."""
    for issue in issues:
        _echo(f"{path}:{issue.line + 1}: {issue.severity}: {issue.message}")


def print_kernel_check(path: Path, k: KernelCheck, shown: set[Diagnostic]) -> None:
    """One kernel's compile, as soon as it is done: its diagnostics (those not ``shown`` for an
    earlier kernel: kernels share helpers), its spec's errors, then its verdict and resources."""
    for d in k.diagnostics:
        if d not in shown:
            shown.add(d)
            _echo(f"{d.file}:{d.line}:{d.column}: {d.severity}: {d.message}")
    for e in k.spec_errors:
        _echo(f"{path}:{e.line + 1}: error: spec of {k.kernel}: {e.message}")
    r = k.resources
    usage = (
        f"{r.registers} registers, {r.spill_stores}/{r.spill_loads} bytes spilled (st/ld), "
        f"{r.shared_bytes} bytes smem, {r.stack_bytes} bytes stack"
        if r
        else "no resource report"
    )
    name = k.name_expression or k.kernel
    _echo(
        f"{'ok  ' if k.ok and not k.spec_errors else 'FAIL'} {name}: {usage}"
        + (f" ({k.note})" if k.note else "")
    )


def print_bench(target: Target, result: EvalResult) -> None:
    from sandbox.timing import measured_text
    from server.texts import SIMULATED

    r = result.baseline
    device = result.device.name if result.device else "GPU"
    device = f"the {SIMULATED}" if result.device is not None and result.device.simulated else device
    click.echo(f"{target.kernel} at {target.bench_problem.label} on {device}: {r.status.value}")
    click.echo(f"  {measured_text(r, detail=True)}")
    if r.message:
        click.echo(f"  {target.located(r)}")


def print_profile(report: prof.ProfileReport) -> None:
    click.echo("\n".join(report.lines()))


def print_optimize(
    target: Target,
    result: OptimizeResult,
    show_diff: bool,
    written: Path | None,
    backup: Path | None,
    write: bool,
    show_attempts: bool = False,
) -> None:
    from agent.attempts import verdict_summary
    from agent.loop import RunOutcome
    from sandbox.timing import measured_text
    from server.texts import SIMULATED, plural

    device = result.device.name if result.device else "unknown device"
    device = f"the {SIMULATED}: every number below is made up" if result.simulated else device
    click.echo(f"{target.kernel} in {target.path} on {device}")
    click.echo(f"  original: {measured_text(result.baseline)}")
    best = result.best
    if result.outcome is RunOutcome.BASELINE_FAILED:
        click.echo(f"  the original failed its own checks: {result.stop}")
    elif best is None:
        click.echo("  no candidate passed verification")
    else:
        verdict = "faster" if result.outcome is RunOutcome.IMPROVED else "best verified, not reliably faster"
        click.echo(
            f"  {verdict}: {measured_text(best.result)}: {result.speedup:.2f}x "
            f"[{result.speedup_low:.2f}x-{result.speedup_high:.2f}x] ({best.proposal.description})"
        )
        sizes = ", ".join(
            f"{c.label} ({c.seeds} seed{'s' if c.seeds != 1 else ''}, max error {c.error_ratio:.2g} of its bound)"
            for c in result.verification
        )
        click.echo(f"  verified on: {sizes}")
        if best.result.precision:
            click.echo(f"  lower precision: {best.result.precision}")
        if best.result.sanitizer:
            click.echo(f"  compute-sanitizer: {best.result.sanitizer}")
        for a in result.assumptions:
            click.echo(f"  assumes: {a}")
        if result.launch is not None:
            change = ", ".join(
                f"{k}={v}"
                for k, v in (
                    ("grid", result.launch.grid),
                    ("block", result.launch.block),
                    ("smem", result.launch.shared),
                )
                if v
            )
            sites = plural(result.launch_sites, "launch site")
            click.echo(f"  launch: {change} (the spec's launch line and {sites} in this file updated)")
            if result.launch_todo:
                click.echo(f"  to do: {result.launch_todo}")
    tokens = f", {result.tokens} tokens" if result.tokens else ""
    click.echo(
        f"  {verdict_summary(result.records)} in {result.seconds:.1f} s{tokens} (measuring the original: "
        f"{result.baseline_seconds:.1f} s); stopped: {result.stop}"
    )
    if show_attempts:
        click.echo(attempts_table(result.records))
    if show_diff and result.diff:
        click.echo(result.diff, nl=False)
    if written is not None:
        click.echo(f"wrote {written} (backup: {backup})")
    elif write:
        click.echo(f"{target.path}: not changed (no verified faster rewrite)")


def attempts_table(records: Sequence[AttemptRecord]) -> str:
    """Every attempt's verdict, one row each: id, status, speedup, registers, what went wrong."""
    rows = [("#", "candidate", "status", "speedup", "regs", "verdict")]
    for a in records:
        if a.status == "ok":
            detail = a.description
        elif a.compile_line:
            detail = f"line {a.compile_line}:{a.compile_column}: {a.message.split(': ', 1)[-1]}"
        elif a.values or a.first_bad_index >= 0:
            at = f"[{a.first_bad_index}]" if a.first_bad_index >= 0 else ""
            detail = f"{a.output}{at} at {a.problem}: {a.values or a.message}"
        else:
            detail = a.message
        if a.rule:
            detail = f"[{a.rule}] {detail}"
        if a.duplicate_of:
            detail = f"same as {a.duplicate_of}: {detail}"
        speed = f"{a.speedup:.2f}x" if a.speedup else "-"
        regs = str(a.registers) if a.registers else "-"
        rows.append((str(a.index), a.candidate_id, a.status, speed, regs, " ".join(detail.split())[:100]))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5] for r in rows
    )


def print_compare(found: Comparison) -> None:
    from agent.attempts import size_checks
    from agent.compare import reason_text
    from sandbox.timing import measured_text
    from server.texts import SIMULATED

    t, c, base = found.target, found.candidate, found.result.baseline
    device = found.result.device.name if found.result.device else "unknown device"
    if found.result.device is not None and found.result.device.simulated:
        device = f"the {SIMULATED}: every number below is made up"
    where = "the same file" if found.candidate_path == t.path else found.candidate_path
    click.echo(f"{t.kernel} ({t.path}) against {found.proposal.kernel} ({where}) on {device}")
    if base.status.value != "ok":
        click.echo(f"  {reason_text(found)}")
        return
    click.echo(f"  verdict: {'verified' if found.verified else reason_text(found)}")
    for check in size_checks(c):
        mark = "ok" if check.ok else "FAILED"
        click.echo(
            f"    {check.label}: {mark} on {check.seeds} seed(s), max abs err {check.max_abs_err:.3g}, "
            f"max rel err {check.max_rel_err:.3g}"
        )
    click.echo(f"  original:  {measured_text(base, detail=True)}")
    if found.verified:
        click.echo(f"  rewrite:   {measured_text(c, detail=True)}")
        click.echo(f"  speedup:   {c.speedup:.2f}x [{c.speedup_low:.2f}x-{c.speedup_high:.2f}x]")
        if c.note:
            click.echo(f"  note: {c.note}")
    elif c.resources:
        click.echo(f"  rewrite:   {c.resources.registers} registers, {c.resources.spill_stores} B spilled")
    if found.proposal.precision or c.precision:
        claimed = ", ".join(found.proposal.precision) or "none"
        click.echo(f"  precision: claimed {claimed}; detected {c.precision or 'none'}")
    if c.sanitizer:
        click.echo(f"  compute-sanitizer: {c.sanitizer}")
    elif found.verified:
        click.echo("  compute-sanitizer: not run")
    if found.proposal.launch is not None:
        lc = found.proposal.launch
        parts = ", ".join(
            f"{k}={v}" for k, v in (("grid", lc.grid), ("block", lc.block), ("smem", lc.shared)) if v
        )
        click.echo(f"  rewrite launched with {parts}")


def print_capture(
    run: CaptureRun, found: CaptureEdit, written: Path | None, backup: Path | None, write: bool
) -> None:
    launch, captured = found.launch, found.captured
    g, b = launch.grid, launch.block
    click.echo(
        f"{launch.kernel}: launch {launch.index} of {run.kernels.get(launch.kernel, 1)}, grid {g}, "
        f"block {b}, smem {launch.smem} ({run.seconds:.1f} s, exit status {run.returncode})"
    )
    for note in captured.notes:
        click.echo(f"  note: {note}")
    for name, file in captured.saved.items():
        click.echo(f"  input {name} saved: {Path(run.save_dir) / file}")
    for err in found.errors:
        click.echo(f"  spec error: {err}")
    click.echo(found.diff, nl=False)
    if written is not None:
        click.echo(f"wrote {written} (backup: {backup})")
    elif not write:
        click.echo(f"(not written: --write applies it to {found.doc.path or ''})")


def print_suite_entry(done: int, total: int, e: SuiteEntry) -> None:
    """One kernel's line on stderr as it finishes."""
    speed = f" {e.speedup:.2f}x [{e.speedup_low:.2f}-{e.speedup_high:.2f}]" if e.status != "error" else ""
    why = f" ({e.description})" if e.status == "error" or "deadline" in e.description else ""
    on = f" on GPU {','.join(map(str, e.gpus))}" if e.gpus else ""
    click.echo(
        f"[{done}/{total}] {Path(e.file).name} {e.kernel}: {e.status}{speed} in {e.seconds:.1f} s{on}{why}",
        err=True,
    )


def print_suite(report: SuiteReport) -> None:
    from agent.loop import RunOutcome
    from server.texts import SIMULATED

    header = (
        f"{'kernel':<28} {'status':<15} {'speedup':>22} {'% peak before':>14} {'% peak after':>13} {'gpu':>4}"
        " ceiling"
    )
    used = report.gpus
    where = f" (GPU{'s' if len(used) > 1 else ''} {','.join(map(str, used))})" if used else ""
    device = f"the {SIMULATED} (every number below is made up)" if report.simulated else report.device
    click.echo(
        f"{report.directory} on {device}{where}, budget {report.budget} per kernel, seed {report.seed}"
    )
    click.echo(header)
    for e in report.kernels:
        name = f"{Path(e.file).stem}:{e.kernel}" if Path(e.file).stem != e.kernel else e.kernel
        spread = (
            f"{e.speedup:.2f}x [{e.speedup_low:.2f}-{e.speedup_high:.2f}]" if e.status != "error" else "-"
        )
        gpu_col = ",".join(map(str, e.gpus)) or "-"
        click.echo(
            f"{name[:28]:<28} {e.status:<15} {spread:>22} {e.pct_peak_before:>13.0f}% {e.pct_peak_after:>12.0f}%"
            f" {gpu_col:>4} {e.ceiling or '-'}"
        )
    summary = report.summary
    click.echo(
        f"fast_1 {summary.fast_1:.0%}  fast_1.5 {summary.fast_1_5:.0%}  geomean {summary.geomean:.2f}x  "
        f"({summary.improved}/{summary.kernels} improved, {summary.errors} not run)"
    )
    for g in report.families if len(report.families) > 1 else ():
        s = g.summary
        click.echo(
            f"  {g.family:<26} fast_1.5 {s.fast_1_5:>4.0%}  geomean {s.geomean:6.2f}x  % of {'+'.join(g.ceilings) or '-'}"
            f" {g.pct_peak_before:.0f}% -> {g.pct_peak_after:.0f}%  ({s.kernels} kernels)"
        )
    for e in report.kernels:
        if e.status == "error" or e.status == RunOutcome.BASELINE_FAILED.value:
            click.echo(f"  {e.kernel}: {e.description}")


def print_score(scored: Scored) -> None:
    value = "none" if scored.reward is None else f"{scored.reward:+.3f}"
    rule = f" ({scored.rule})" if scored.rule else ""
    speed = f", speedup {scored.speedup:.2f}x (low {scored.speedup_low:.2f}x)" if scored.speedup else ""
    reached = scored.milestone.value if scored.milestone else "not scored"
    click.echo(f"{scored.task}: reward {value}, {reached}{rule}{speed}")
    if scored.message or scored.reason:
        click.echo(f"  {scored.message or scored.reason}")
