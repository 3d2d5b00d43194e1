"""Every command's output: the text a person reads and the JSON a script reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from agent.loop import AttemptRecord, OptimizeResult, Target


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def _print_optimize(
    target: Target,
    result: OptimizeResult,
    show_diff: bool,
    written: Path | None,
    backup: Path | None,
    write: bool,
    show_attempts: bool = False,
) -> None:
    from agent.loop import Outcome, verdict_summary
    from sandbox.timing import measured_text
    from server.texts import SIMULATED, plural

    device = result.device.name if result.device else "unknown device"
    device = f"the {SIMULATED}: every number below is made up" if result.simulated else device
    click.echo(f"{target.kernel} in {target.path} on {device}")
    click.echo(f"  original: {measured_text(result.baseline)}")
    best = result.best
    if result.outcome is Outcome.BASELINE_FAILED:
        click.echo(f"  the original failed its own checks: {result.stop_reason}")
    elif best is None:
        click.echo("  no candidate passed verification")
    else:
        verdict = "faster" if result.outcome is Outcome.IMPROVED else "best verified, not reliably faster"
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
        f"{result.baseline_seconds:.1f} s); stopped: {result.stop_reason}"
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


def _optimize_json(
    target: Target, result: OptimizeResult, written: Path | None, backup: Path | None, log_path: Path | None
) -> dict[str, Any]:
    from agent.loop import verdict_summary
    from sandbox.contract import to_dict

    best = result.best
    return {
        "file": target.path,
        "kernel": target.kernel,
        "outcome": result.outcome.value,
        "stop_reason": result.stop_reason,
        "cancelled": result.cancelled,
        "speedup": result.speedup,
        "speedup_low": result.speedup_low,
        "speedup_high": result.speedup_high,
        "baseline": to_dict(result.baseline),
        "best": None
        if best is None
        else {
            "candidate_id": best.candidate_id,
            "description": best.proposal.description,
            "code": best.proposal.code,
            "kernel": best.proposal.kernel,
            "result": to_dict(best.result),
        },
        "assumptions": list(result.assumptions),
        "verification": to_dict(result.verification),
        "launch": to_dict(result.launch) if result.launch else None,
        "launch_edits": to_dict(result.launch_edits),
        "launch_sites": result.launch_sites,
        "launch_todo": result.launch_todo,
        "diff": result.diff,
        "candidates": result.attempts,
        "verdicts": verdict_summary(result.records),
        "attempts": to_dict(result.records),
        "simulated": result.simulated,
        "tokens": result.tokens,
        "seconds": result.seconds,
        "baseline_seconds": result.baseline_seconds,
        "device": to_dict(result.device) if result.device else None,
        "written": str(written) if written else None,
        "backup": str(backup) if backup else None,
        "trajectory": str(log_path) if log_path else None,
    }


def _compare_json(found: Any) -> dict[str, Any]:
    from agent.compare import reason_text
    from agent.loop import size_checks
    from sandbox.contract import to_dict

    c, base = found.candidate, found.result.baseline
    bad = found.first_failure

    def side(r: Any) -> dict[str, Any]:
        res = r.resources
        return {
            "status": r.status.value,
            "median_ms": r.timing.median_ms if r.timing else None,
            "gbps": r.achieved_gbps,
            "pct_peak_bandwidth": r.pct_peak_bandwidth,
            "pct_peak_flops": r.pct_peak_flops,
            "registers": res.registers if res else None,
            "spill_bytes": (res.spill_stores + res.spill_loads) if res else None,
        }

    return {
        "file": found.target.path,
        "kernel": found.target.kernel,
        "candidate": {"file": found.candidate_path, "kernel": found.proposal.kernel},
        "verified": found.verified,
        "status": c.status.value,
        "message": c.message,
        "reason": reason_text(found),
        "first_failure": to_dict(bad) if bad else None,
        "speedup": c.speedup,
        "speedup_low": c.speedup_low,
        "speedup_high": c.speedup_high,
        "original": side(base),
        "rewrite": side(c),
        "launch": to_dict(found.proposal.launch) if found.proposal.launch else None,
        "precision": {"claimed": list(found.proposal.precision), "detected": c.precision},
        "verification": to_dict(size_checks(c)),
        "sanitizer": c.sanitizer,
        "baseline": to_dict(base),
        "result": to_dict(c),
        "device": to_dict(found.result.device) if found.result.device else None,
        "simulated": found.result.device is not None and found.result.device.simulated,
    }


def _print_compare(found: Any) -> None:
    from agent.compare import reason_text
    from agent.loop import size_checks
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
