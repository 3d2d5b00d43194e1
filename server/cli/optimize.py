"""``optimize`` and ``suite``: search for faster kernels."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent.proposers import PROPOSER_KINDS, ProposerKind
from base.errors import CudaAgentError
from server.cli import common
from server.cli.common import (
    BuildFlags,
    JobFailed,
    UserError,
    build_flags,
    executor_failed,
    json_option,
    memory_option,
    simulate_option,
    unsafe_isolation_option,
)
from server.cli.files import read_only, read_regular_file, read_source, write_rewrite
from server.cli.render import emit_json, print_optimize, print_suite, print_suite_entry

if TYPE_CHECKING:
    from agent.llm import LLMSettings
    from agent.loop import LoopEvent
    from agent.proposer import Proposer
    from sandbox.contract import Budget


@click.command()
@click.argument("file")
@click.option("--kernel", "-k", "kernel", help="Kernel name (default: the only kernel in FILE).")
@click.option("--proposer", type=click.Choice(PROPOSER_KINDS), default="builtin", show_default=True)
@click.option("--llm-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vllm serve).")
@click.option("--model", help="Model name at the endpoint.")
@click.option("--api-key-file", type=click.Path(), help="File holding the endpoint's API key.")
@click.option("--samples", type=click.IntRange(1, 64), help="Parallel LLM conversations (default 4).")
@click.option("--max-turns", type=click.IntRange(1, 200), help="Replies per LLM conversation (default 8).")
@click.option("--temperature", type=click.FloatRange(0, 2), help="LLM sampling temperature (default 0.7).")
@click.option(
    "--budget",
    default="60s",
    show_default=True,
    help="Budget: wall time (60s, 5m), candidates (40c) and/or tokens (200k), comma-separated.",
)
@click.option("--seed", default=0, show_default=True, help="Random seed (runs are reproducible).")
@click.option("--gpu", default=0, show_default=True, type=click.IntRange(min=0), help="GPU index.")
@click.option(
    "--trajectory",
    metavar="PATH|off",
    help="Append every attempt to this JSONL file (default $XDG_DATA_HOME/cuda-agent/trajectories.jsonl).",
)
@click.option("--diff", "show_diff", is_flag=True, help="Print the verified rewrite as a unified diff.")
@click.option("--write", is_flag=True, help="Apply the verified rewrite to FILE (a backup is kept).")
@click.option("--force", is_flag=True, help="With --write: write FILE even if it is read-only (mode 444).")
@click.option("--attempts", "show_attempts", is_flag=True, help="List every candidate's verdict in a table.")
@simulate_option
@json_option
@build_flags
@memory_option
@unsafe_isolation_option
def optimize(
    file: str,
    kernel: str | None,
    proposer: ProposerKind,
    llm_url: str | None,
    model: str | None,
    api_key_file: str | None,
    samples: int | None,
    max_turns: int | None,
    temperature: float | None,
    budget: str,
    seed: int,
    gpu: int,
    trajectory: str | None,
    show_diff: bool,
    write: bool,
    force: bool,
    show_attempts: bool,
    simulate: bool,
    build: BuildFlags,
    as_json: bool,
    eval_budget: Budget | None,
) -> None:
    """Search for a faster kernel, verify it against the original, and report the speedup."""
    import threading

    from agent import loop
    from agent.proposer import BudgetError, parse_budget
    from agent.target import target_for
    from agent.trajectory import TrajectoryLog, default_path
    from cudasrc.source import Document
    from sandbox.executor import ExecutorError
    from server.cli.reports import optimize_report

    path, text = read_source(file)
    if write and not force and (why := read_only(path)):
        raise UserError(why)
    try:
        limits = parse_budget(budget)
    except BudgetError as exc:
        raise UserError(f"--budget {budget}: {exc}") from exc
    target = target_for(Document(text, str(path)), kernel, build.options(path))
    if proposer == "llm":
        from agent.llm import LLMSettings

        llm = LLMSettings.from_env(
            base_url=llm_url,
            model=model,
            api_key_file=api_key_file,
            samples=samples,
            max_turns=max_turns,
            temperature=temperature,
        )
        if not llm.model:
            raise UserError("--proposer llm needs --model (or CUDA_AGENT_LLM_MODEL)")
        if llm.api_key_file:  # a missing or odd key file: one line now, not a failed run later
            read_regular_file(os.path.expanduser(llm.api_key_file), "a file holding the API key", 64 << 10)
    log_path = None if trajectory == "off" else Path(trajectory) if trajectory else default_path()
    cancel = threading.Event()
    outcome: list[loop.OptimizeResult | BaseException] = []
    with _progress_bar(enabled=not as_json and sys.stderr.isatty()) as on_event:

        def work() -> None:
            try:
                with common.open_executor(gpu, simulate=simulate) as executor:
                    search = _make_proposer(proposer, llm if proposer == "llm" else None)
                    try:
                        outcome.append(
                            loop.optimize(
                                target,
                                search,
                                executor,
                                budget=limits,
                                seed=seed,
                                settings=loop.LoopSettings(eval_budget=eval_budget) if eval_budget else None,
                                on_event=on_event,
                                cancel=cancel,
                                trajectory=TrajectoryLog(log_path) if log_path else None,
                            )
                        )
                    finally:
                        search.close()
            except BaseException as exc:  # handed to the main thread, which reports it
                outcome.append(exc)
            finally:
                finished.set()

        # The search runs in a thread so that Ctrl-C (delivered to this thread) can cancel it
        # and still report the best candidate so far.
        finished = threading.Event()
        threading.Thread(target=work, name="optimize", daemon=True).start()
        try:
            while not finished.wait(0.1):
                pass
        except KeyboardInterrupt:
            click.echo("cuda-agent: cancelling (the best candidate so far is kept)", err=True)
            cancel.set()
            finished.wait()
    result = outcome[0]
    if isinstance(result, ExecutorError):
        raise executor_failed(result)
    if isinstance(result, CudaAgentError | click.ClickException):  # its exit status is its own
        raise result
    if isinstance(result, BaseException):  # unexpected: one line, never a traceback
        raise JobFailed(f"{type(result).__name__}: {result}")
    written = backup = None
    if write and result.outcome is loop.RunOutcome.IMPROVED:
        written, backup = write_rewrite(path, text, result.rewritten, force=force)
    if as_json:
        emit_json(optimize_report(target, result, written, backup, log_path))
    else:
        print_optimize(target, result, show_diff, written, backup, write, show_attempts)
    if result.outcome is loop.RunOutcome.BASELINE_FAILED:
        raise JobFailed(f"the original kernel failed its own checks ({result.stop})")
    if result.attempts == 0 and result.stop.failed:
        raise JobFailed(str(result.stop))


def _make_proposer(kind: ProposerKind, llm: LLMSettings | None) -> Proposer:
    from agent.proposers import make_proposer
    from sandbox.compile_pool import CompilePool

    try:
        return make_proposer(kind, llm, lambda: CompilePool(workers=2))
    except ImportError as exc:
        raise JobFailed(f"the {kind} proposer is not available ({exc})") from exc


@contextlib.contextmanager
def _progress_bar(enabled: bool) -> Iterator[Callable[[LoopEvent], None] | None]:
    """A progress bar on stderr (a terminal only), fed by loop events from any thread."""
    if not enabled:
        yield None
        return
    import threading

    lock = threading.Lock()
    with click.progressbar(length=1000, label="optimizing", file=sys.stderr, show_eta=False) as bar:

        def on_event(ev: LoopEvent) -> None:
            with lock:
                if ev.fraction is not None:
                    bar.update(max(0, int(ev.fraction * 1000) - bar.pos))
                best = f", best {ev.best_speedup:.2f}x" if ev.best_speedup else ""
                bar.label = f"{ev.evaluated} candidates{best}"
                bar.render_progress()

        yield on_event


@click.command()
@click.argument("directory")
@click.option("--budget", default="60s", show_default=True, help="Budget per kernel (see optimize).")
@click.option("--seed", default=0, show_default=True, help="Random seed (runs are reproducible).")
@click.option("--gpu", type=click.IntRange(min=0), help="Only this GPU (same as --gpus N).")
@click.option(
    "--gpus",
    help="GPUs to use, one worker and one kernel at a time each: 0,1 or all (default: all visible).",
)
@click.option("--match", default="*", show_default=True, help="Only the files whose name matches this glob.")
@click.option(
    "--jsonl",
    type=click.Path(dir_okay=False),
    help="Append each kernel's result to this file as it finishes.",
)
@click.option(
    "--deadline",
    type=click.FloatRange(min=1.0),
    help="Seconds per kernel, everything included (default: the budget's wall time, then as long again, at least 60 s).",
)
@simulate_option
@json_option
@build_flags
@memory_option
@unsafe_isolation_option
def suite(
    directory: str,
    budget: str,
    seed: int,
    gpu: int | None,
    gpus: str | None,
    match: str,
    jsonl: str | None,
    deadline: float | None,
    simulate: bool,
    build: BuildFlags,
    as_json: bool,
    eval_budget: Budget | None,
) -> None:
    """Optimize every kernel with a spec in DIRECTORY and print a table with fast_1, fast_1.5, geomean.
    One progress line per kernel goes to stderr as it finishes."""

    from agent import loop
    from agent.proposer import BudgetError, parse_budget
    from agent.suite import families, find_targets, run_suite, summarize
    from sandbox.executor import ExecutorError
    from sandbox.scheduler import GpuListError, parse_gpus
    from server.cli.reports import SuiteReport

    if gpu is not None and gpus is not None:
        raise UserError("give --gpu or --gpus, not both")
    try:
        devices = (gpu,) if gpu is not None else parse_gpus(gpus or "all")
    except GpuListError as exc:
        raise UserError(f"--gpus {gpus}: {exc}") from exc
    root = Path(directory)
    if not root.is_dir():
        raise UserError(f"{directory}: no such directory")
    try:
        limits = parse_budget(budget)
    except BudgetError as exc:
        raise UserError(f"--budget {budget}: {exc}") from exc
    if next(find_targets(root, match, build.options), None) is None:
        which = "" if match == "*" else f" matching {match!r}"
        raise UserError(f"{directory}: no kernel with a `// @cuda-agent` spec in its .cu/.cuh files{which}")

    try:
        with common.open_executor(devices[0], devices, simulate=simulate) as executor:
            info = executor.device_info()
            device, simulated = info.name, info.simulated
            entries = run_suite(
                root,
                executor,
                budget=limits,
                seed=seed,
                match=match,
                on_entry=print_suite_entry,
                jsonl=Path(jsonl) if jsonl else None,
                deadline_s=deadline,
                options=build.options,
                settings=loop.LoopSettings(eval_budget=eval_budget) if eval_budget else None,
            )
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    report = SuiteReport(
        directory=str(root),
        device=device,
        simulated=simulated,
        gpus=tuple(sorted({g for e in entries for g in e.gpus})),
        budget=budget,
        seed=seed,
        match=match,
        kernels=tuple(entries),
        summary=summarize(entries),
        families=tuple(families(entries, root)),
    )
    if as_json:
        emit_json(report)
    else:
        print_suite(report)
