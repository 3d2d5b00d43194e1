"""Thin clients of ``cuda-agent reward serve`` for RL trainers (HTTP only: the trainer's process
never compiles or runs anything).

- TRL: :func:`trl_reward_func` / :func:`trl_async_reward_func` for
  ``GRPOTrainer(reward_funcs=[...])``, called as ``f(prompts=, completions=, completion_ids=,
  **dataset_columns)``; the dataset's ``task`` column names each row's task; returns
  ``list[float | None]`` (None: no reward, e.g. past the deadline; TRL skips it).
- verl: :func:`compute_score` (``custom_reward_function.name=compute_score``) and
  :func:`compute_score_batch` (with ``reward_model.reward_manager=batch``); ``ground_truth`` is
  the task; returns ``{"score": ..., ...facts}``.
- Prime Intellect's ``verifiers``: :mod:`learning.verifiers_env` (``load_environment``).
- OpenRLHF: no code here: ``--remote_rm_url http://HOST:PORT/openrlhf`` with the task in the
  dataset's label column.

The service's address and token come from the arguments, else ``CUDA_AGENT_REWARD_URL`` and
``CUDA_AGENT_REWARD_TOKEN``.  Every call carries a request id and is retried with it (the service
answers a retry from its cache) on connection errors, 429 and 5xx.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx

from agent.trajectory import Milestone
from base.errors import Unavailable
from learning.wire import Item, RewardRequest, RewardResponse, Scored
from sandbox.contract import ContractError, from_json, to_dict

ENV_URL = "CUDA_AGENT_REWARD_URL"
ENV_TOKEN = "CUDA_AGENT_REWARD_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8790"
RETRY_STATUS = (429, 502, 503, 504)


class RewardError(Unavailable, RuntimeError):
    """The reward service refused a request or could not be reached; one line."""


class RewardClient:
    def __init__(
        self, url: str | None = None, token: str | None = None, *, timeout_s: float = 1800.0, retries: int = 3
    ) -> None:
        self.url = (url or os.environ.get(ENV_URL) or DEFAULT_URL).rstrip("/")
        token = token or os.environ.get(ENV_TOKEN)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = httpx.Timeout(timeout_s, connect=10.0)
        self.retries = retries

    def tasks(self, split: str = "", prompts: bool = True) -> list[dict[str, Any]]:
        """``GET /tasks``: the task set (of ``split``; "" all), each with its prompt messages."""
        params = {"prompts": "1" if prompts else "0", **({"split": split} if split else {})}
        try:
            response = httpx.get(
                f"{self.url}/tasks", params=params, headers=self.headers, timeout=self.timeout
            )
        except httpx.TransportError as exc:
            raise RewardError(f"cannot reach the reward service at {self.url}: {exc}") from None
        if response.status_code != 200:
            raise RewardError(_refusal(response))
        return list(response.json()["tasks"])

    def score(
        self, items: Sequence[Item], deadline_s: float | None = None, request_id: str = ""
    ) -> list[Scored]:
        """Each item's :class:`~learning.wire.Scored` from ``POST /reward``, in order."""
        body = _body(items, deadline_s, request_id)
        with httpx.Client(timeout=self.timeout, headers=self.headers) as client:
            for attempt in range(self.retries + 1):
                try:
                    response = client.post(f"{self.url}/reward", json=body)
                except httpx.TransportError as exc:
                    failure = f"cannot reach the reward service at {self.url}: {exc}"
                else:
                    if response.status_code not in RETRY_STATUS:
                        return _results(response)
                    failure = _refusal(response)
                if attempt < self.retries:
                    time.sleep(min(2.0**attempt, 10.0))
        raise RewardError(failure)

    async def ascore(
        self, items: Sequence[Item], deadline_s: float | None = None, request_id: str = ""
    ) -> list[Scored]:
        """:meth:`score` for an event loop."""
        body = _body(items, deadline_s, request_id)
        async with httpx.AsyncClient(timeout=self.timeout, headers=self.headers) as client:
            for attempt in range(self.retries + 1):
                try:
                    response = await client.post(f"{self.url}/reward", json=body)
                except httpx.TransportError as exc:
                    failure = f"cannot reach the reward service at {self.url}: {exc}"
                else:
                    if response.status_code not in RETRY_STATUS:
                        return _results(response)
                    failure = _refusal(response)
                if attempt < self.retries:
                    await asyncio.sleep(min(2.0**attempt, 10.0))
        raise RewardError(failure)


def _refusal(response: httpx.Response) -> str:
    try:
        why = response.json().get("error", "")
    except ValueError:
        why = response.text[:200]
    return f"the reward service answered {response.status_code}: {why}"


def _body(items: Sequence[Item], deadline_s: float | None, request_id: str) -> Any:
    return to_dict(RewardRequest(request_id or uuid.uuid4().hex, tuple(items), deadline_s))


def _results(response: httpx.Response) -> list[Scored]:
    if response.status_code != 200:
        raise RewardError(_refusal(response))
    try:
        return list(from_json(RewardResponse, response.content).results)
    except ContractError as exc:
        raise RewardError(f"the reward service's answer is not a reward response: {exc}") from None


# --------------------------------------------------------------------------- TRL


def _trl_items(completions: Sequence[Any], kwargs: dict[str, Any], task_column: str) -> list[Item]:
    tasks = kwargs.get(task_column)
    if tasks is None:
        raise RewardError(f"the dataset has no `{task_column}` column naming each row's task (name@hash)")
    return [
        Item(str(i), str(task), completion)
        for i, (task, completion) in enumerate(zip(tasks, completions, strict=True))
    ]


def trl_reward_func(
    url: str | None = None,
    token: str | None = None,
    *,
    task_column: str = "task",
    deadline_s: float | None = None,
    name: str = "cuda_agent_reward",
) -> Callable[..., list[float | None]]:
    """A TRL reward function over the service (completions as text or chat messages)."""
    client = RewardClient(url, token)

    def reward(
        prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        results = client.score(_trl_items(completions, kwargs, task_column), deadline_s)
        return [r.reward for r in results]

    reward.__name__ = name
    return reward


def trl_async_reward_func(
    url: str | None = None,
    token: str | None = None,
    *,
    task_column: str = "task",
    deadline_s: float | None = None,
    name: str = "cuda_agent_reward",
) -> Callable[..., Awaitable[list[float | None]]]:
    """:func:`trl_reward_func` as an ``async def`` (TRL awaits async reward functions together)."""
    client = RewardClient(url, token)

    async def reward(
        prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        results = await client.ascore(_trl_items(completions, kwargs, task_column), deadline_s)
        return [r.reward for r in results]

    reward.__name__ = name
    return reward


# --------------------------------------------------------------------------- verl


def _verl_score(result: Scored, missing: float) -> dict[str, Any]:
    """verl's dict: ``score`` and numeric facts (the same keys for every item)."""
    value = result.reward
    return {
        "score": missing if value is None else float(value),
        "milestone": result.milestone.level if result.milestone else 0.0,
        "speedup_low": float(result.speedup_low),
        "hack": float(result.milestone is Milestone.HACK),
        "scored": float(value is not None),
    }


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's ``compute_score``: ``ground_truth`` names the task; ``reward_kwargs`` may give
    ``url``, ``token``, ``deadline_s`` and ``missing_reward`` (the score of an item that got no
    reward; default 0)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[str],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's batch reward manager's form of :func:`compute_score`: one request for the batch."""
    client = RewardClient(kwargs.get("url"), kwargs.get("token"))
    items = [
        Item(str(i), str(task), str(solution))
        for i, (task, solution) in enumerate(zip(ground_truths, solution_strs, strict=True))
    ]
    results = client.score(items, kwargs.get("deadline_s"))
    return [_verl_score(r, float(kwargs.get("missing_reward", 0.0))) for r in results]
