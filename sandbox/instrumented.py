"""Re-runs of a verified candidate under compute-sanitizer and Nsight Compute, in the worker's sandbox."""

from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from sandbox.contract import Budget, CandidateResult, EvalRequest, Profile, Status
from sandbox.isolation import PACKAGE_ROOT, clean_env
from sandbox.process import WorkerProcess
from sandbox.wire import EvalJob, Reply

SANITIZER_TOOLS = ("memcheck", "racecheck")


def sanitize(
    worker: WorkerProcess,
    job: EvalJob,
    result: CandidateResult,
    budget: Budget,
    cancel: threading.Event | None = None,
) -> CandidateResult:
    """Re-run an ``ok`` candidate under compute-sanitizer memcheck and racecheck
    (:func:`sanitizer_request`: alone, on the verification sizes, first seed), checked against
    itself as ``cuda-agent bench`` checks a kernel (guards, inputs untouched, every output written,
    run-twice determinism): its outputs were compared with the original's already, and the
    original's runs under the tools would only add their instrumented time.  Fails closed: the
    result's ``sanitizer`` says ``passed: ...`` only when
    every tool ran to its summary with no error; ``skipped: ...`` without the tool, or when
    ``cancel`` is set before the tools are done (the result is then ``cancelled``: not checked, not
    passed); otherwise ``failed: ...`` and the candidate is ``rejected`` (errors found, or the check
    could not be made)."""
    exe = shutil.which("compute-sanitizer")
    if not exe:
        return replace(result, sanitizer="skipped: compute-sanitizer not found")
    cancel = cancel or threading.Event()
    assert job.candidate is not None
    alone = EvalJob(sanitizer_request(job.request, job.index), job.candidate, -1)
    lines = []
    for tool in SANITIZER_TOOLS:
        if cancel.is_set():
            break
        with tempfile.TemporaryDirectory() as tmp:
            logfile = Path(tmp) / "sanitizer.log"
            prefix = [
                exe,
                "--tool",
                tool,
                "--error-exitcode",
                str(SANITIZER_ERROR),
                "--log-file",
                str(logfile),
            ]
            if worker.prefix:  # inside bwrap, /tmp is private: share the log's directory
                prefix = ["--bind", tmp, tmp, *prefix]
            proc = WorkerProcess(worker.device, worker.backend, worker.handler, [*worker.prefix, *prefix])
            proc.start()
            reply = proc.call(alone, 10 * budget.timeout_s, cancel)
            code = proc.close(timeout=60)
            text = logfile.read_text(errors="replace") if logfile.exists() else ""
        if cancel.is_set():
            break
        passed, line = sanitizer_verdict(tool, code, text, reply)
        lines.append(line)
        if not passed:
            return replace(
                result,
                status=Status.REJECTED,
                message=f"compute-sanitizer {line}",
                sanitizer="failed: " + "; ".join(lines),
            )
    if cancel.is_set():
        done = f" ({'; '.join(lines)})" if lines else ""
        return replace(
            result,
            status=Status.CANCELLED,
            message="cancelled during compute-sanitizer",
            sanitizer=f"skipped: cancelled before every tool ran{done}",
        )
    return replace(result, sanitizer="passed: " + "; ".join(lines))


def sanitizer_request(req: EvalRequest, index: int) -> EvalRequest:
    """The request compute-sanitizer runs for candidate ``index`` of ``req``: the candidate as the
    kernel, alone, untimed, on the first seed and the verification sizes (small and odd, where
    bounds errors show: racecheck over a benchmark-sized matmul takes minutes) with the launches
    the candidate uses there; on the bench problem only when there are no verification sizes."""
    cand = req.candidates[index]
    problems = req.verify_problems or (req.bench_problem,)
    given = cand.launches or ()
    launches = given[: len(req.verify_problems)] or given[-1:]
    if launches:  # one launch per problem
        problems = tuple(replace(p, launch=launch) for p, launch in zip(problems, launches, strict=True))
    return replace(
        req,
        baseline=cand.kernel,
        candidates=(),
        verify_problems=problems[:-1],
        bench_problem=problems[-1],
        seeds=req.seeds[:1],
        options=replace(req.options, time=False, sanitize=False),
    )


def nsight_profile(worker: WorkerProcess, job: EvalJob, budget: Budget) -> Profile:
    """The candidate of ``job`` launched once at the bench problem under Nsight Compute
    (:mod:`sandbox.profile`), in the worker's sandbox; the first seed's inputs."""
    from sandbox.profile import RunnerJob, profile_candidate

    assert job.candidate is not None
    req = job.request
    launches = req.candidates[job.index].launches
    runner = RunnerJob(
        cubin=job.candidate.cubin,
        symbol=job.candidate.symbol,
        symbols=job.candidate.symbols,
        problem=req.bench_problem,
        launch=launches[-1] if launches else req.bench_problem.launch,
        seed=req.seeds[0],
        device=worker.device,
        backend=worker.backend,
    )
    return profile_candidate(runner, worker.prefix, clean_env(), str(PACKAGE_ROOT), 4 * budget.timeout_s)


SANITIZER_ERROR = 86  # the exit status compute-sanitizer is told to use when it finds errors


def sanitizer_verdict(tool: str, code: int | None, log_text: str, reply: Reply) -> tuple[bool, str]:
    """(passed, what to say) for one compute-sanitizer run: its exit status, its log, and the reply
    of the worker it ran.  Anything short of a summary with no error and a clean exit is a failure."""
    log_lines = log_text.splitlines()
    summary = next((ln for ln in reversed(log_lines) if "SUMMARY" in ln), "").replace("========= ", "")
    errors = "\n".join([ln for ln in log_lines if ln.startswith("=========") and "SUMMARY" not in ln][:20])
    value = reply.value
    if code == SANITIZER_ERROR:
        return False, f"{tool}: {summary or 'errors found'}" + (f"\n{errors}" if errors else "")
    if reply.unavailable or not isinstance(value, CandidateResult):
        why = reply.unavailable or "no result from the worker under it"
        return False, f"{tool}: could not check: {why} (exit status {code})"
    if value.status != Status.OK:
        return False, f"{tool}: could not check: {value.status.value}: {value.message}"
    if not summary:
        return False, f"{tool}: could not check: no summary in its log (exit status {code})"
    if code != 0:
        return False, f"{tool}: could not check: exit status {code} ({summary})"
    return True, f"{tool}: {summary}"
