"""Benchmark from the editor: the kernel timed as its spec says, through the configured executor.

``cudaAgent.benchmark`` ``[KernelRef]`` (the **Benchmark** code lens) answers at once with a
:class:`~server.protocol.RunStarted` and ends with ``cudaAgent/runFinished`` (kind ``benchmark``:
median time, spread, bandwidth); the result, an :class:`agent.records.BenchmarkRecord`, is stored, sent with the end and
shown above the kernel and in its hover.
"""

from __future__ import annotations

from agent.records import benchmark_record
from agent.target import Target
from sandbox.contract import CandidateResult, DeviceInfo
from server import protocol as wire
from server.lsp import CudaLanguageServer, OpenDocument
from server.protocol import RunKind, RunStatus
from server.runs import (
    ActiveRun,
    Plan,
    Report,
    RunProgress,
    Runs,
    RunType,
    add_run_type,
    run_finished,
    run_with_progress,
    target_of,
)
from server.texts import SIMULATED, describe_executor, spread_text


def plan_benchmark(ls: CudaLanguageServer, ref: wire.KernelRef) -> Plan:
    """Time the kernel as its spec says."""
    od, k = ls.kernel_ref(ref)
    target = target_of(ls, od, k.qualified_name)
    return Plan(
        od.uri,
        k.qualified_name,
        f"Benchmarking {k.qualified_name}",
        lambda run, p: _benchmark(ls, run, od, target, p),
    )


async def _benchmark(
    ls: CudaLanguageServer, run: ActiveRun, od: OpenDocument, target: Target, progress: RunProgress
) -> wire.RunFinished:
    runs = ls.need(Runs)
    settings = ls.settings
    request = target.request(run.run_id, ())

    def work(report: Report) -> tuple[CandidateResult, DeviceInfo | None]:
        result = runs.executor(settings.executor).evaluate(request, cancel=run.cancel)
        return result.baseline, result.device

    baseline, info = await run_with_progress(ls, run, progress, describe_executor(settings.executor), work)
    device, simulated = (info.name, info.simulated) if info is not None else ("", False)
    runs.device = device or runs.device
    if baseline.timing is None:
        message = f"{baseline.status.value}: {target.located(baseline)}".strip(": ")
        return run_finished(run, RunStatus(baseline.status.value), message)
    record = benchmark_record(target, baseline, info)
    ls.store.put(od.path, run.kernel, benchmark=record)
    message = (
        f"{record.median_ms:.4g} ms ({spread_text(record.rel_spread)}) · {record.gbps:.0f} GB/s · "
        f"{record.pct_peak:.0f}% of peak"
    )
    return run_finished(
        run,
        RunStatus(baseline.status.value),
        f"{SIMULATED}: {message}" if simulated else message,
        simulated=simulated,
        benchmark=record,
    )


def setup(ls: CudaLanguageServer) -> None:
    add_run_type(ls, RunType(RunKind.BENCHMARK, wire.BENCHMARK_COMMAND, wire.KernelRef, plan_benchmark))
