"""Profile a kernel (and a rewrite of it) under Nsight Compute: ``cuda-agent profile`` and the
editor's "Profile" lens.

One evaluation through the executor, with ``EvalOptions.profile``: the original kernel is its own
candidate (``original``), a rewrite (a :class:`~agent.proposal.Proposal`, e.g. the verified winner or
a kernel named with ``--with``) the second.  Each is verified against the original first, then
launched once at the bench problem under ``ncu`` in the worker's sandbox
(:mod:`sandbox.profile`); a kernel that does not verify is not profiled and says why.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass

from agent.proposal import Proposal
from agent.records import ProfiledKernel
from agent.target import Target, TargetError
from sandbox.contract import Candidate, CandidateResult, DeviceInfo, EvalOptions, Profile, Status
from sandbox.executor import Executor, ProgressFn
from sandbox.profile import report_lines

ORIGINAL = "original"
REWRITE = "rewrite"


def profiled(label: str, description: str, r: CandidateResult) -> ProfiledKernel:
    """One kernel's profile record: its verdict and Nsight Compute's metrics, or why there are none."""
    if r.profile is not None:
        metrics = r.profile
    elif r.status is Status.OK:
        metrics = Profile(False, "this executor does not profile")
    else:
        metrics = Profile(False, f"not profiled: {r.status.value}: {r.message}".rstrip(": "))
    return ProfiledKernel(label, description, metrics, r.status, r.message)


@dataclass(frozen=True)
class ProfileReport:
    """``cuda-agent profile``'s report (its ``--json``) and what the editor's run stores
    (``server.profile``): each kernel's :class:`~agent.records.ProfiledKernel`, the original first."""

    path: str
    kernel: str
    problem: str  # the bench problem's label
    device: DeviceInfo | None
    kernels: tuple[ProfiledKernel, ...]

    @property
    def available(self) -> bool:
        """Whether every kernel has metrics."""
        return all(k.profile.available for k in self.kernels)

    def lines(self) -> list[str]:
        """The report for a person: a heading, then each kernel's metrics."""
        device = self.device.name if self.device else "GPU"
        out = [f"{self.kernel} at {self.problem} on {device} (Nsight Compute, one launch)"]
        for k in self.kernels:
            out.append(f"  {k.label}: {k.description}" if k.description else f"  {k.label}:")
            out += [f"    {line}" for line in report_lines(k.profile)]
        return out


def profile(
    target: Target,
    executor: Executor,
    *,
    rewrite: Proposal | None = None,
    seed: int = 1,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> ProfileReport:
    """Profile ``target``'s kernel (and ``rewrite``) once each under Nsight Compute. Raises
    :class:`~agent.target.TargetError` when the rewrite cannot be launched under the spec and
    :class:`~sandbox.executor.ExecutorError` when nothing could run (no GPU, worker unreachable)."""
    candidates = [Candidate(ORIGINAL, target.baseline)]
    descriptions = [target.kernel]
    if rewrite is not None:
        candidate, error = target.candidate(REWRITE, rewrite)
        if candidate is None:
            raise TargetError(error)
        candidates.append(candidate)
        descriptions.append(rewrite.description)
    request = target.request(
        f"profile-{uuid.uuid4().hex}",
        tuple(candidates),
        seeds=(seed,),
        options=EvalOptions(profile=True, time=False, sanitize=False),
    )
    result = executor.evaluate(request, progress=progress, cancel=cancel)
    kernels = tuple(
        profiled(c.id, d, r) for c, d, r in zip(candidates, descriptions, result.candidates, strict=True)
    )
    return ProfileReport(target.path, target.kernel, target.bench_problem.label, result.device, kernels)
