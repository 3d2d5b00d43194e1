"""The one candidate format (:class:`Proposal`: a rewrite of a kernel, whoever wrote it) and an
evaluated one (:class:`Attempt`: a proposal with the sandbox's verdict)."""

from __future__ import annotations

from dataclasses import dataclass

from cudasrc.launch import (
    LaunchChange,
)
from sandbox.contract import (
    CandidateResult,
)


@dataclass(frozen=True)
class Proposal:
    """A rewrite to evaluate.

    ``code`` replaces the kernel's definition (helper ``__device__`` functions may precede the
    kernel in it); the kernel keeps its parameter list, since the spec launches it.  ``kernel``
    renames the launched name expression (e.g. other template arguments).  ``assumptions`` are
    what the rewrite relies on beyond the spec ("a and c never alias"), reported with the result.
    ``key`` is the proposer's own handle (the loop never reads it); ``transcript`` the chat that
    produced the proposal, as (role, content) pairs, kept in the trajectory for training.
    ``unit`` (a rewrite written elsewhere, e.g. ``cuda-agent compare``) is a whole translation unit
    evaluated as it is, with ``code`` the kernel's definition as it reads there; ``options`` are
    NVRTC options it needs (checked by the sandbox like every option of a request).
    ``precision`` is the lower precision the rewrite claims (``("fp16",)``): refused before it runs
    unless the spec allows it (``precision allow=``); the sandbox reports what it detects anyway.

    This is the one candidate format: ``cuda-agent compare`` (a kernel the user wrote), the built-in
    engine (a transformation's result) and the LLM proposer (a tool call or a fenced reply) all
    produce it, and :meth:`Target.candidate` checks every one the same way (parameter list, launch,
    precision) before anything runs.
    """

    code: str
    description: str
    assumptions: tuple[str, ...] = ()
    launch: LaunchChange | None = None
    kernel: str | None = None
    key: str = ""
    transcript: tuple[tuple[str, str], ...] = ()
    unit: str = ""  # a whole translation unit holding the kernel (a rewrite written elsewhere)
    options: tuple[str, ...] = ()  # NVRTC options the candidate needs beyond the baseline's
    precision: tuple[
        str, ...
    ] = ()  # lower precisions it claims to use (PRECISIONS); the spec must allow them


@dataclass(frozen=True)
class Attempt:
    """A proposal and its verdict. ``reward`` is :func:`agent.trajectory.reward` (None when cancelled)."""

    index: int  # 0-based, in evaluation order
    batch: int
    candidate_id: str
    proposal: Proposal
    result: CandidateResult
    reward: float | None
    duplicate_of: str = ""  # candidate id of an identical earlier proposal whose verdict this reuses
