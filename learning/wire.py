"""The reward service's wire, typed once for the service (:mod:`learning.service`), its clients
(:mod:`learning.client`) and the engine: a request (:class:`RewardRequest`) of items
(:class:`Item`), the answer (:class:`RewardResponse`) of one :class:`Scored` per item, milestones as
:class:`agent.trajectory.Milestone`.  JSON through the contract's converter
(:func:`sandbox.contract.to_dict` / :func:`~sandbox.contract.from_dict`), snake_case keys.

Light on purpose: a trainer's process imports this (through the client) and nothing that compiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.trajectory import REWARD_VERSION, Milestone

Completion = str | list[dict[str, Any]]  # a model's answer: text, or chat messages


@dataclass(frozen=True)
class Item:
    """One completion to score against a task (``deadline_s``: its own, from when the batch arrived)."""

    key: str
    task: str  # name or name@hash
    completion: Completion
    deadline_s: float | None = None  # from when the batch arrived


@dataclass(frozen=True)
class Scored:
    """One item's reward and the raw facts behind it (``reward`` None: not scored, see ``reason``)."""

    key: str
    task: str  # name@hash of the version scored
    reward: float | None
    milestone: Milestone | None = None  # None: not scored
    verdict: str = ""  # the sandbox's status, or no_code
    rule: str = ""  # the rule a hack broke
    speedup: float = 0.0
    speedup_low: float = 0.0
    speedup_high: float = 0.0
    pairs: int = 0
    noisy: bool = False
    retimed: bool = False
    cached: bool = False
    message: str = ""
    reason: str = ""  # why reward is None
    compiled_speedup: float = 0.0  # PyTorch tasks: paired speedup against torch.compile(Model)
    compiled_speedup_low: float = 0.0
    footprint_bytes: int = 0  # PyTorch tasks: the task's own device memory (inputs, outputs, parameters)
    peak_memory_bytes: int = 0  # PyTorch tasks: the most the evaluation held on the device
    # PyTorch tasks: the evaluation's seconds by phase (sandbox.contract.TorchCandidateResult.phases)
    phases: dict[str, float] = field(default_factory=dict)
    reward_version: str = REWARD_VERSION


@dataclass(frozen=True)
class RewardRequest:
    """``POST /reward``: ``id`` (a retry with the same id is answered from the service's cache),
    the items, and the batch's deadline (seconds from its arrival; None: the service's)."""

    id: str
    items: tuple[Item, ...]
    deadline_s: float | None = None


@dataclass(frozen=True)
class RewardResponse:
    """The answer to ``POST /reward``: one :class:`Scored` per item, in item order."""

    id: str
    reward_version: str
    results: tuple[Scored, ...]
