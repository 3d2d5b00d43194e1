"""Profile: Nsight Compute on a kernel (and on its verified rewrite waiting to be applied) from the
editor.

- ``cudaAgent.profile`` ``[KernelRef]`` (the **Profile** code lens): :func:`agent.profile.profile`
  run in the background like Optimize (:func:`server.runs.start_run`: the executor is called
  off the event loop in the runs' thread pool; progress the user can cancel); answers
  ``RunStarted`` at once and ends with ``cudaAgent/runFinished`` (kind ``profile``; ``status``
  ``ok`` when every kernel has metrics, else ``unavailable`` with the reason in ``message``).
- The result is stored (:class:`agent.records.ProfileRecord`): the hover of the kernel shows it
  (speed of light, occupancy and its limiter, top stalls, DRAM/L2 bytes), and so does the results
  view (``cudaAgent/results``).

No GPU library is imported here: the work happens in the sandbox's worker, behind the executor.
"""

from __future__ import annotations

from agent import profile as prof
from agent.proposal import Proposal
from agent.records import ProfileRecord, kernel_hash, record_date
from agent.target import Target, TargetError
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
    evaluation_steps,
    run_finished,
    run_with_progress,
    target_of,
)
from server.texts import describe_executor, profile_summary


def plan_profile(ls: CudaLanguageServer, ref: wire.KernelRef) -> Plan:
    """Profile the kernel (and the verified rewrite of it waiting for this text of the document, if any)."""
    od, k = ls.kernel_ref(ref)
    kernel = k.qualified_name
    target = target_of(ls, od, kernel)
    runs = ls.part(Runs)
    pending = runs.pending(od, kernel) if runs is not None else None
    rewrite = pending.proposal if pending is not None else None
    return Plan(
        od.uri,
        kernel,
        f"Profiling {kernel}" + (" and its verified rewrite" if rewrite is not None else ""),
        lambda run, progress: _profile(ls, run, od, target, rewrite, progress),
    )


async def _profile(
    ls: CudaLanguageServer,
    run: ActiveRun,
    od: OpenDocument,
    target: Target,
    rewrite: Proposal | None,
    progress: RunProgress,
) -> wire.RunFinished:
    runs = ls.need(Runs)
    settings = ls.settings

    def work(report: Report) -> prof.ProfileReport:
        executor = runs.executor(settings.executor)
        steps = evaluation_steps(report)
        return prof.profile(target, executor, rewrite=rewrite, progress=steps, cancel=run.cancel)

    try:
        begin = f"{describe_executor(settings.executor)}: compiling"
        report = await run_with_progress(ls, run, progress, begin, work)
    except TargetError as exc:
        return run_finished(run, RunStatus.ERROR, str(exc))
    if report.device is not None:
        runs.device = report.device.name
    assert od.doc is not None
    k = od.doc.kernel(run.kernel)
    record = ProfileRecord(
        run_id=run.run_id,
        problem=report.problem,
        device=report.device.name if report.device else "",
        date=record_date(),
        kernels=report.kernels,
        kernel_hash=kernel_hash(od.doc, k) if k is not None else "",
    )
    ls.store.put(od.path, run.kernel, profile=record)
    status = RunStatus.OK if report.available else RunStatus.UNAVAILABLE
    return run_finished(run, status, profile_summary(record), profile=record)


def setup(ls: CudaLanguageServer) -> None:
    add_run_type(ls, RunType(RunKind.PROFILE, wire.PROFILE_COMMAND, wire.KernelRef, plan_profile))
