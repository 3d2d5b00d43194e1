"""``bench``, ``compare`` and ``profile``: measure a kernel, or a rewrite against it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from server.cli import common
from server.cli.common import (
    BuildFlags,
    JobFailed,
    build_flags,
    executor_failed,
    json_option,
    memory_option,
    simulate_option,
    unsafe_isolation_option,
)
from server.cli.files import read_source
from server.cli.render import emit_json, print_bench, print_compare, print_profile

if TYPE_CHECKING:
    from sandbox.contract import Budget


@click.command()
@click.argument("file")
@click.option("--kernel", "-k", "kernel", help="Kernel name (default: the only kernel in FILE).")
@click.option("--gpu", default=0, show_default=True, type=click.IntRange(min=0), help="GPU index.")
@simulate_option
@json_option
@build_flags
@memory_option
@unsafe_isolation_option
def bench(
    file: str,
    kernel: str | None,
    gpu: int,
    simulate: bool,
    build: BuildFlags,
    as_json: bool,
    eval_budget: Budget | None,
) -> None:
    """Time a kernel under its spec on the local GPU: median, spread, GB/s, % of peak."""
    from agent.target import target_for
    from cudasrc.source import Document
    from sandbox.executor import ExecutorError
    from sandbox.local import bench_request
    from server.cli.reports import bench_report

    path, text = read_source(file)
    target = target_for(Document(text, str(path)), kernel, build.options(path))
    try:
        with common.open_executor(gpu, simulate=simulate) as executor:
            result = executor.evaluate(
                bench_request(target.baseline, target.bench_problem, budget=eval_budget)
            )
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    r = result.baseline
    if as_json:
        emit_json(bench_report(str(path), target, result))
    else:
        print_bench(target, result)
    if r.status.value != "ok":
        raise JobFailed(f"{target.kernel} did not pass its own checks: {r.status.value}")


@click.command()
@click.argument("file")
@click.option("--kernel", "-k", "kernel", help="The original kernel (default: the only kernel in FILE).")
@click.option(
    "--with",
    "-w",
    "with_",
    required=True,
    metavar="KERNEL|OTHER.cu[:KERNEL]",
    help="The rewrite: another kernel of FILE, or a kernel of another file.",
)
@click.option(
    "--launch",
    metavar="'grid=.. block=.. smem=..'",
    help="The rewrite's launch, in the spec's vocabulary (default: its own `launch` line, else the original's).",
)
@click.option("--seed", default=0, show_default=True, help="Random seed for the verification inputs.")
@click.option("--gpu", default=0, show_default=True, type=click.IntRange(min=0), help="GPU index.")
@click.option("--no-sanitize", is_flag=True, help="Skip compute-sanitizer on a verified rewrite.")
@simulate_option
@json_option
@build_flags
@unsafe_isolation_option
def compare(
    file: str,
    kernel: str | None,
    with_: str,
    launch: str | None,
    seed: int,
    gpu: int,
    no_sanitize: bool,
    simulate: bool,
    build: BuildFlags,
    as_json: bool,
) -> None:
    """Verify a rewrite you already have against a kernel and measure the speedup.

    Sizes, arguments and tolerance come from the original's spec; exit status 0 when the rewrite
    verified, 1 when it did not, 2 for mistakes."""
    import random

    from agent import compare as cmp
    from cudasrc.source import Document
    from sandbox.executor import ExecutorError
    from server.cli.reports import compare_report

    path, text = read_source(file)

    def open_document(name: str) -> Document:
        cand_path, cand_text = read_source(name)
        return Document(cand_text, str(cand_path))

    target, proposal, cand_doc = cmp.prepare(
        Document(text, str(path)), kernel, with_, launch, open_document, build.options(path)
    )
    rng = random.Random(seed)
    seeds = tuple(rng.randrange(1, 2**31) for _ in range(3))
    try:
        with common.open_executor(gpu, simulate=simulate) as executor:
            found = cmp.compare(
                target,
                proposal,
                executor,
                candidate_path=cand_doc.path,
                seeds=seeds,
                sanitize=not no_sanitize,
            )
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    if as_json:
        emit_json(compare_report(found))
    else:
        print_compare(found)
    if not found.verified:
        raise JobFailed(
            f"{proposal.kernel} did not verify against {target.kernel}: {found.candidate.status.value}"
        )


@click.command()
@click.argument("file")
@click.option("--kernel", "-k", "kernel", help="Kernel name (default: the only kernel in FILE).")
@click.option(
    "--with",
    "with_",
    metavar="NAME|FILE|FILE:NAME",
    help="Also profile this rewrite of the kernel (verified against it first), e.g. a winner written out.",
)
@click.option("--gpu", default=0, show_default=True, type=click.IntRange(0), help="GPU index.")
@json_option
@build_flags
@unsafe_isolation_option
def profile(
    file: str, kernel: str | None, with_: str | None, gpu: int, build: BuildFlags, as_json: bool
) -> None:
    """Profile a kernel under Nsight Compute on its spec's bench problem: speed of light (memory,
    compute), achieved occupancy and its limiter, top stall reasons, DRAM and L2 bytes.

    Exit status 1 when no metrics came back (no GPU, no `ncu`, counters not permitted)."""
    from agent import compare as cmp
    from agent import profile as prof
    from agent.target import target_for
    from cudasrc.source import Document
    from sandbox.executor import ExecutorError

    path, text = read_source(file)
    doc = Document(text, str(path))

    def open_document(name: str) -> Document:
        other_path, other_text = read_source(name)
        return Document(other_text, str(other_path))

    if with_ is None:
        target, rewrite = target_for(doc, kernel, build.options(path)), None
    else:
        target, rewrite, _ = cmp.prepare(doc, kernel, with_, None, open_document, build.options(path))
    try:
        with common.open_executor(gpu) as executor:
            report = prof.profile(target, executor, rewrite=rewrite)
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    if as_json:
        emit_json(report)
    else:
        print_profile(report)
    if not report.available:
        why = next(k.profile.message for k in report.kernels if not k.profile.available)
        raise JobFailed(f"no Nsight Compute metrics for {report.kernel}: {why}")
