"""``speedup``: make a program faster, end to end, with its outputs checked (:mod:`agent.program`).

Named like ``capture`` (``cuda-agent speedup -- PROGRAM ARGS``): the program is what the user
runs every day, unchanged, and the command's promise is its result: the program, faster, with the
same outputs, or nothing changed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from server.cli.common import JobFailed, UserError, executor_failed, json_option, open_executor
from server.cli.render import emit_json

if TYPE_CHECKING:
    from agent.program import Machine, ProgramReport, ProgramSettings
    from agent.program_steps import Step

SIMULATED_PROGRAM_ENV = "CUDA_AGENT_TEST_PROGRAM"  # a simulated program's kernel table (agent.program_sim)


@click.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--build",
    "build_cmd",
    default="",
    metavar="CMD",
    help="Rebuild command, run in a shell: 'make', 'cmake --build build'.",
)
@click.option(
    "--output",
    "outputs",
    multiple=True,
    metavar="FILE[:KIND]",
    help="A file the program writes, compared before/after (repeatable). KIND: auto (text if UTF-8, "
    "else bytes), text, bytes, float32, float64, float16, int32, int64, uint8.",
)
@click.option(
    "--rtol",
    default=1e-5,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Relative tolerance of numbers in the outputs.",
)
@click.option(
    "--atol",
    default=1e-8,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Absolute tolerance of numbers in the outputs.",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="REGEX",
    help="Standard output lines matching REGEX are not compared (timings: 'msec|GB/s'); repeatable.",
)
@click.option(
    "--top", default=3, show_default=True, type=click.IntRange(1, 64), help="Kernels optimized at most."
)
@click.option(
    "--share",
    default=0.8,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True),
    help="Take the hottest kernels until they make up this share of GPU time.",
)
@click.option(
    "--budget",
    default="120s",
    show_default=True,
    help="Optimization wall time in all (split by time share): 120s, 10m.",
)
@click.option(
    "--runs",
    default=3,
    show_default=True,
    type=click.IntRange(1, 50),
    help="Runs of the program before and after.",
)
@click.option(
    "--source",
    "sources",
    multiple=True,
    metavar="PATH",
    help="A file or folder holding the kernels' sources (repeatable; default: the current folder).",
)
@click.option(
    "--patch",
    "patch_path",
    default="cuda-agent-speedup.patch",
    show_default=True,
    metavar="FILE",
    help="Where the unified diff is written.",
)
@click.option(
    "--apply",
    "apply_patch",
    is_flag=True,
    help="Apply the patch, rebuild, re-run and compare; reverted if the outputs differ.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600,
    show_default=True,
    help="Seconds one run or build may take.",
)
@click.option(
    "--proposer",
    type=click.Choice(["builtin", "llm"]),
    default="builtin",
    show_default=True,
    help="Who proposes rewrites; llm: the endpoint of CUDA_AGENT_LLM_URL / CUDA_AGENT_LLM_MODEL.",
)
@click.option("--seed", default=0, show_default=True, help="Random seed of the search.")
@click.option(
    "--gpu",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="GPU index for evaluating rewrites.",
)
@json_option
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED)
def speedup(
    build_cmd: str,
    outputs: tuple[str, ...],
    rtol: float,
    atol: float,
    ignore: tuple[str, ...],
    top: int,
    share: float,
    budget: str,
    runs: int,
    sources: tuple[str, ...],
    patch_path: str,
    apply_patch: bool,
    timeout: float,
    proposer: str,
    seed: int,
    gpu: int,
    as_json: bool,
    program: tuple[str, ...],
) -> None:
    """Make PROGRAM faster: time its kernels, optimize the hottest, verify them on the program's
    own inputs, patch the project, rebuild, re-run and compare what it produced.

    cuda-agent speedup [OPTIONS] -- PROGRAM [ARGS]...  Without --apply only the patch is written;
    with it, files change, and are restored byte for byte if the program's outputs differ.  Each
    step is told on standard error as it ends, with the seconds since the start (with --json, as
    one JSON line each)."""
    from agent import program as prog
    from agent.outputs import OutputFile, OutputTolerance
    from agent.proposer import BudgetError, parse_budget
    from agent.proposers import ProposerKind, make_proposer
    from sandbox.compile_pool import CompilePool
    from sandbox.executor import ExecutorError

    try:
        wall = parse_budget(budget).wall_s or 120.0
    except BudgetError as exc:
        raise UserError(f"--budget {budget}: {exc}") from exc
    for pattern in ignore:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UserError(f"--ignore {pattern}: not a regular expression ({exc})") from exc
    try:
        files = tuple(OutputFile.parse(o) for o in outputs)
    except ValueError as exc:
        raise UserError(f"--output: {exc}") from exc
    settings = prog.ProgramSettings(
        argv=program,
        cwd=os.getcwd(),
        sources=sources or (".",),
        build=build_cmd,
        outputs=files,
        tolerance=OutputTolerance(rtol, atol),
        ignore=ignore,
        top=top,
        share=share,
        budget_s=wall,
        runs=runs,
        timeout_s=timeout,
        apply=apply_patch,
        seed=seed,
    )
    machine = _machine(settings)
    kind: ProposerKind = "llm" if proposer == "llm" else "builtin"
    llm = None
    if kind == "llm":
        from agent.llm import LLMSettings

        llm = LLMSettings.from_env()
        if not llm.model:
            raise UserError("--proposer llm needs CUDA_AGENT_LLM_MODEL (and CUDA_AGENT_LLM_URL)")
    cancel = threading.Event()
    say = _json_step if as_json else _print_step
    try:
        with open_executor(gpu) as executor:
            report = prog.speedup(
                settings,
                machine,
                executor,
                lambda: make_proposer(kind, llm, lambda: CompilePool(workers=2)),
                progress=say,
                cancel=cancel,
            )
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    except KeyboardInterrupt:
        cancel.set()
        raise
    if report.patch:
        Path(patch_path).write_text(report.patch)
    if as_json:
        emit_json(report_dict(report, patch_path if report.patch else ""))
    else:
        _print(report, patch_path if report.patch else "")
    if report.outcome.failed:
        raise JobFailed(f"{report.outcome.value}: {report.message}")


def _print_step(step: Step) -> None:
    click.echo(f"cuda-agent: [{step.elapsed_s:6.1f} s] {step.message}", err=True)


def _json_step(step: Step) -> None:
    """With --json, each step as one JSON line on standard error as it ends (standard output
    keeps the one report): a run stopped by a time limit still shows how far it got."""
    click.echo(json.dumps(step.to_json()), err=True)


def _machine(settings: ProgramSettings) -> Machine:
    """Where the program runs (:func:`agent.program_remote.program_machine`): the worker's GPU when
    ``CUDA_AGENT_WORKER_URL`` names one (the project uploaded, the program built and run there,
    its outputs brought back); else this machine's; the simulated one for tests and demos
    (``CUDA_AGENT_TEST_EXECUTOR=1`` with ``CUDA_AGENT_TEST_PROGRAM`` naming a kernel table)."""
    from agent.program_remote import MachineError, program_machine
    from sandbox.executors import ExecutorSettings, from_environment

    def local() -> Machine:
        from agent.program import LocalMachine

        table = os.environ.get(SIMULATED_PROGRAM_ENV)
        if os.environ.get("CUDA_AGENT_TEST_EXECUTOR") == "1" and table:
            from agent.program_sim import SimulatedMachine, load_kernels

            return SimulatedMachine(load_kernels(table), settings.sources)
        return LocalMachine()

    remote, _ = from_environment(ExecutorSettings(), named=False)
    try:
        return program_machine(remote, settings, local)
    except MachineError as exc:
        raise UserError(str(exc)) from exc


def report_dict(report: ProgramReport, patch_file: str) -> dict[str, Any]:
    """The report as JSON: its fields, and what is derived from them."""
    from sandbox.contract import to_dict

    out: dict[str, Any] = to_dict(report)
    low, high = report.measured_range
    out.update(
        patch_file=patch_file,
        faster=report.faster,
        measured=report.measured,
        measured_low=low,
        measured_high=high,
        measured_gpu=report.measured_gpu,
    )
    return out


def _print(r: ProgramReport, patch_file: str) -> None:
    echo = click.echo
    echo(f"program: {' '.join(r.argv)}")
    if r.before is not None:
        echo(
            f"  before: wall {r.before.wall:.3f} s (median of {len(r.before.wall_s)}), kernels {r.before.gpu:.3f} s"
        )
    if r.kernels:
        echo("kernels by share of GPU time:")
        for k in r.kernels:
            mark = "*" if k.chosen else " "
            echo(
                f" {mark} {k.share:6.1%} {k.ns / 1e6:10.3f} ms {k.launches:7d} launches "
                f"{k.wall_fraction:6.1%} of wall  {k.kernel}"
            )
    for w in r.rewrites:
        if w.applied:
            echo(
                f"  rewrite {w.kernel}: {w.speedup:.2f}x [{w.speedup_low:.2f}, {w.speedup_high:.2f}] "
                f"verified at {', '.join(w.verified)} ({w.path})"
            )
        else:
            echo(f"  refused {w.kernel}: {w.reason}")
        for n in w.notes:
            echo(f"      note: {n}")
    if r.patch:
        echo(f"patch: {patch_file} ({len(r.files)} file(s): {', '.join(r.files)})")
        echo(f"  predicted (Amdahl): {r.predicted:.3f}x end to end, {r.predicted_gpu:.3f}x GPU time")
    if r.after is not None and not r.compared_equal:
        echo(f"  after (outputs not equal, not a speedup): wall {r.after.wall:.3f} s")
    elif r.after is not None:
        low, high = r.measured_range
        echo(
            f"  after: wall {r.after.wall:.3f} s, kernels {r.after.gpu:.3f} s; measured {r.measured:.3f}x "
            f"[{low:.3f}, {high:.3f}] end to end, {r.measured_gpu:.3f}x GPU time"
        )
    for d in r.differences:
        echo(f"  differs: {d}")
    verdict = {True: "FASTER", False: r.outcome.value.upper().replace("_", " ")}[r.faster]
    echo(f"{verdict}: {r.message}" + (" (files restored)" if r.reverted else ""))
    if sys.stdout.isatty() and r.outcome.value == "patch_only":
        echo(f"  review it: git apply --stat {patch_file}; apply it: rerun with --apply")
